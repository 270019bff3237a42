/*
 * main has the stack a plain run gives it (8 MiB with the usual ulimit -s):
 *   stack bytes    a recursion using ~6 MiB of stack (1536 frames of 4 KiB)
 *                  with CPU work at the bottom, several times; a 2 MiB
 *                  variable-length array; the same in a thread created with
 *                  default attributes;
 *   stack frames   call chains of 1000..8000 small frames with CPU work at the
 *                  bottom (preemption must not cost time proportional to depth
 *                  to the point of stalling);
 *   stack getattr  pthread_getattr_np(pthread_self()) describes a stack that
 *                  contains main's locals (garbage collectors and runtimes
 *                  scan this range);
 *   stack all      all three (the default).
 */
#include "common.h"

#include <sys/resource.h>

static volatile uint64_t sink;
static int *volatile never;

#define FRAME 4096

static uint64_t deep(size_t depth, uint64_t acc) {
    volatile unsigned char pad[FRAME - 128];
    pad[0] = (unsigned char)depth;
    pad[sizeof pad - 1] = (unsigned char)(depth >> 8);
    if (depth == 0) return acc + mix(4000000, acc); /* ~10 ms of CPU at the bottom */
    if (never) return 0;
    uint64_t r = deep(depth - 1, acc * 31 + depth);
    return r + pad[0] + pad[sizeof pad - 1];
}

static uint64_t vla(size_t bytes) {
    volatile unsigned char buf[bytes];
    for (size_t i = 0; i < bytes; i += 4096) buf[i] = (unsigned char)i;
    uint64_t acc = mix(1000000, bytes);
    for (size_t i = 0; i < bytes; i += 4096) acc += buf[i];
    return acc;
}

static size_t usable(void) {
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_STACK, &rl) == 0, "getrlimit");
    size_t lim = rl.rlim_cur == RLIM_INFINITY ? (8u << 20) : (size_t)rl.rlim_cur;
    if (lim > (8u << 20)) lim = 8u << 20;
    return lim - lim / 4; /* 6 MiB of 8 */
}

static void *thread_deep(void *arg) {
    size_t frames = (size_t)(uintptr_t)arg;
    return (void *)(uintptr_t)deep(frames, 1);
}

/* A deep chain of small frames: depth matters, not bytes. */
__attribute__((noipa)) static uint64_t chain(int depth, uint64_t acc) {
    if (depth == 0) return acc + mix(4000000, acc); /* ~10 ms of CPU at the bottom */
    if (never) return 0;
    uint64_t r = chain(depth - 1, acc * 33 + (uint64_t)depth);
    __asm__ volatile("" : "+r"(r)); /* a real call chain: no tail-recursion elimination */
    return r + 1;
}

static void phase_bytes(void) {
    size_t bytes = usable();
    size_t frames = bytes / FRAME;
    int n = iters(8);
    uint64_t first = 0;
    for (int i = 0; i < n; i++) {
        uint64_t r = deep(frames, 1);
        if (i == 0) first = r;
        CHECK(r == first, "recursion result changed");
        sink += vla(2u << 20);
    }
    printf("main: recursion through %zu KiB of stack: ok x%d\n", bytes >> 10, n);

    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_deep, (void *)(uintptr_t)frames) == 0, "pthread_create");
    void *res;
    CHECK(pthread_join(t, &res) == 0, "join");
    CHECK((uint64_t)(uintptr_t)res == (uint64_t)(uintptr_t)first, "thread's recursion result differs");
    printf("thread: recursion through %zu KiB of stack: ok\n", bytes >> 10);
}

static void phase_frames(void) {
    int n = iters(8);
    uint64_t first = 0;
    for (int i = 0; i < n; i++) {
        int depth = 1000 + i * 1000; /* up to 8000 calls deep */
        uint64_t r = chain(depth, 7);
        if (i == 0) first = r;
        CHECK(r != 0, "chain");
        sink += r;
    }
    printf("main: call chains up to %d frames deep: ok\n", 1000 + (n - 1) * 1000);
    (void)first;
}

static void phase_getattr(void) {
    pthread_attr_t at;
    CHECK(pthread_getattr_np(pthread_self(), &at) == 0, "pthread_getattr_np");
    void *addr;
    size_t size;
    CHECK(pthread_attr_getstack(&at, &addr, &size) == 0, "getstack");
    int local;
    uintptr_t lo = (uintptr_t)addr, hi = lo + size, p = (uintptr_t)&local;
    CHECK(p >= lo && p < hi, "main's local %p is outside the stack pthread_getattr_np reports (%p..%p)", (void *)p, addr, (void *)hi);
    CHECK(size >= usable(), "reported stack of %zu KiB is smaller than what main may use", size >> 10);
    pthread_attr_destroy(&at);
    printf("pthread_getattr_np: main's stack contains its locals\n");
}

int main(int argc, char **argv) {
    const char *phase = argc > 1 ? argv[1] : "all";
    int all = !strcmp(phase, "all"), known = 0;
    if (all || !strcmp(phase, "bytes")) phase_bytes(), known = 1;
    if (all || !strcmp(phase, "frames")) phase_frames(), known = 1;
    if (all || !strcmp(phase, "getattr")) phase_getattr(), known = 1;
    CHECK(known, "unknown phase %s", phase);
    return 0;
}
