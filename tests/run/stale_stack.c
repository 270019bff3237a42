/*
 * Ordinary data on main's stack must not make main unpreemptible. Each phase
 * leaves such data in a live frame and then runs a long pure-CPU loop; the
 * runner checks (with --stats) that the loop was preempted.
 *
 *   stale_stack buffer     an uninitialised local buffer over stack that deep
 *                          libc calls used before (it holds their stale
 *                          return addresses: C programs do this all the time)
 *   stale_stack fnptrs     a local table of pointers to libc functions (an
 *                          allocator or I/O vtable, qsort comparators)
 *   stale_stack sigaction  a local array of struct sigaction filled by
 *                          querying every signal (what sig_disp "every" does)
 *   stale_stack sigset     sigset_t variables filled by sigprocmask/sigpending
 *                          queries, as every signal-aware program has: glibc's
 *                          sigset_t is 128 bytes, the kernel writes only 8, so
 *                          the other 120 keep whatever the stack held before
 *   stale_stack all        all of them (the default)
 */
#include "common.h"

#include <stdarg.h>

static volatile uint64_t sink;
static int loop_ms = 150;

static void cpu_loop(void) {
    uint64_t end = cpu_ns() + (uint64_t)loop_ms * MS;
    uint64_t a = 0;
    while (cpu_ns() < end) a += mix(20000, a);
    sink += a;
}

__attribute__((noinline)) static void deep_libc(void) {
    char b[512];
    for (int i = 0; i < 50; i++) {
        snprintf(b, sizeof b, "%d %f %s %p", i, i / 3.0, "x", (void *)b);
        sink += (uint64_t)b[0];
    }
    char *words[] = {"pear", "apple", "fig", "kiwi"};
    qsort(words, 4, sizeof *words, (int (*)(const void *, const void *))strcmp);
    FILE *f = fopen("/proc/self/stat", "r");
    if (f) {
        sink += (uint64_t)fread(b, 1, sizeof b, f);
        fclose(f);
    }
}

__attribute__((noinline)) static void phase_buffer(void) {
    deep_libc();
    volatile char buf[16384]; /* deliberately not initialised */
    cpu_loop();
    sink += (uint64_t)buf[100];
    printf("buffer: ok\n");
}

struct vtable {
    void *(*alloc)(size_t);
    void (*release)(void *);
    void *(*grow)(void *, size_t);
    size_t (*length)(const char *);
    int (*compare)(const char *, const char *);
    int (*print)(const char *, ...);
    FILE *(*open)(const char *, const char *);
    int (*close)(FILE *);
    void *(*copy)(void *, const void *, size_t);
    int (*sleep)(const struct timespec *, struct timespec *);
};

__attribute__((noinline)) static void phase_fnptrs(void) {
    volatile struct vtable vt = {malloc, free, realloc, strlen, strcmp, printf, fopen, fclose, memcpy, nanosleep};
    cpu_loop();
    void *p = vt.alloc(16);
    vt.release(p);
    vt.print("fnptrs: ok\n");
}

__attribute__((noinline)) static void phase_sigaction(void) {
    struct sigaction saved[NSIG];
    memset(saved, 0, sizeof saved);
    for (int s = 1; s < NSIG; s++) sigaction(s, NULL, &saved[s]);
    cpu_loop();
    for (int s = 1; s < NSIG; s++) sink += (uint64_t)(uintptr_t)saved[s].sa_handler;
    printf("sigaction: ok\n");
}

__attribute__((noinline)) static void phase_sigset(void) {
    deep_libc();
    sigset_t m[4], p[4];
    for (int k = 0; k < 4; k++) {
        sigprocmask(SIG_BLOCK, NULL, &m[k]);
        sigpending(&p[k]);
    }
    cpu_loop();
    for (int k = 0; k < 4; k++) sink += (uint64_t)sigismember(&m[k], SIGUSR1) + (uint64_t)sigismember(&p[k], SIGUSR1);
    printf("sigset: ok\n");
}

int main(int argc, char **argv) {
    const char *phase = argc > 1 ? argv[1] : "all";
    loop_ms = env_long("LINGER_TEST_ITERS", 0) ? 20 : 150;
    int all = !strcmp(phase, "all"), known = 0;
    if (all || !strcmp(phase, "buffer")) phase_buffer(), known = 1;
    if (all || !strcmp(phase, "fnptrs")) phase_fnptrs(), known = 1;
    if (all || !strcmp(phase, "sigaction")) phase_sigaction(), known = 1;
    if (all || !strcmp(phase, "sigset")) phase_sigset(), known = 1;
    CHECK(known, "unknown phase %s", phase);
    return 0;
}
