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
 *   stack catch    main catches its own stack overflow the way libsigsegv
 *                  does (SIGSEGV handler on an alternate stack, siglongjmp
 *                  out), then computes at every depth from 512 bytes to
 *                  20 KiB above the end of its stack (64-byte steps) and
 *                  catches an overflow once more: a preemption that comes
 *                  near the end of the stack must never look like one;
 *   stack all      all four (the default).
 */
#include "common.h"

#include <setjmp.h>
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

/* --- catch: the program's own overflow handler --- */

static sigjmp_buf overflow_jmp;
static volatile int catching;
static volatile uintptr_t lowest; /* lowest stack byte written before the fault */
static volatile int overflows;

static void say(const char *msg) { (void)!write(2, msg, strlen(msg)); }

static void on_segv(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)uc;
    if (si->si_code != SEGV_MAPERR && si->si_code != SEGV_ACCERR) {
        say("stack catch: a SIGSEGV without a fault address reached the program\n");
        _exit(70);
    }
    if (!catching) {
        say("stack catch: overflow where none was expected\n");
        _exit(71);
    }
    catching = 0;
    overflows++;
    siglongjmp(overflow_jmp, 1);
}

static uint64_t endless(size_t depth, uint64_t acc) {
    volatile unsigned char pad[FRAME - 128];
    pad[0] = (unsigned char)depth;
    lowest = (uintptr_t)pad;
    pad[sizeof pad - 1] = (unsigned char)(depth >> 8);
    if (never) return 0;
    uint64_t r = endless(depth + 1, acc * 31 + depth);
    return r + pad[0] + pad[sizeof pad - 1];
}

/* Small frames down to `room` bytes above `floor`, then CPU work there. */
__attribute__((noipa)) static uint64_t near_end(uintptr_t floor, size_t room, uint64_t acc) {
    volatile unsigned char pad[32];
    pad[0] = (unsigned char)acc;
    if ((uintptr_t)pad > floor + room) {
        uint64_t r = near_end(floor, room, acc + 1);
        __asm__ volatile("" : "+r"(r));
        return r + pad[0];
    }
    /* mix() inline here: a call would take stack of its own. */
    for (int i = 0; i < 60000; i++) acc = acc * 6364136223846793005u + (uint64_t)i;
    return acc;
}

/* Big frames until 64 KiB above `floor` (a short call chain), then small. */
static uint64_t toward_end(uintptr_t floor, size_t room, uint64_t acc) {
    volatile unsigned char pad[FRAME - 128];
    pad[0] = (unsigned char)acc;
    pad[sizeof pad - 1] = 1;
    uint64_t r = (uintptr_t)pad > floor + (64u << 10) ? toward_end(floor, room, acc + 1) : near_end(floor, room, acc);
    return r + pad[0] + pad[sizeof pad - 1];
}

/* Recurses until the stack overflows; returns where the stack certainly
 * still is (the page of the lowest byte written: the fault itself may be a
 * page or two further down). */
static uintptr_t catch_overflow(void) {
    if (sigsetjmp(overflow_jmp, 1) == 0) {
        catching = 1;
        sink += endless(0, 1);
        CHECK(0, "endless recursion returned");
    }
    return lowest & ~(uintptr_t)4095;
}

static void phase_catch(void) {
    static unsigned char alt[64 << 10];
    stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt};
    CHECK(sigaltstack(&ss, NULL) == 0, "sigaltstack");
    struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER};
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGSEGV, &sa, NULL) == 0, "sigaction");

    uintptr_t floor = catch_overflow();
    CHECK(overflows == 1, "first overflow not caught");
    int n = iters(3), depths = 0;
    for (int k = 0; k < n; k++)
        for (size_t room = 512; room <= (20u << 10); room += 64, depths++) sink += toward_end(floor, room, room);
    printf("catch: held %d depths within 20 KiB of the end of the stack\n", depths);
    uintptr_t again = catch_overflow();
    CHECK(overflows == 2, "second overflow not caught");
    CHECK(again == floor, "the stack ends elsewhere the second time");
    printf("catch: own stack overflow caught twice at the same place\n");
    signal(SIGSEGV, SIG_DFL);
}

int main(int argc, char **argv) {
    const char *phase = argc > 1 ? argv[1] : "all";
    int all = !strcmp(phase, "all"), known = 0;
    if (all || !strcmp(phase, "bytes")) phase_bytes(), known = 1;
    if (all || !strcmp(phase, "frames")) phase_frames(), known = 1;
    if (all || !strcmp(phase, "getattr")) phase_getattr(), known = 1;
    if (all || !strcmp(phase, "catch")) phase_catch(), known = 1;
    CHECK(known, "unknown phase %s", phase);
    return 0;
}
