/*
 * Shared helpers for the linger-run tests (header-only). These programs are
 * ordinary programs: they know nothing about linger and must behave the same
 * run plainly and under linger-run.
 *
 *   CHECK(cond, fmt, ...)  on failure: prints file, line, condition, message and
 *                          errno to stderr and exits with status 1.
 *   iters(n)               loop count: n, or LINGER_TEST_ITERS if smaller.
 *   slack()                multiplier for generous upper time bounds
 *                          (LINGER_TEST_SLACK, default 1).
 *   after_ms(ms, fn, arg)  starts a helper thread that sleeps ms, then calls
 *                          fn(arg); join it with pthread_join.
 *
 * Convention: stdout carries only deterministic lines (compared between the
 * plain run and the runs under linger-run); stderr is empty on success.
 */
#ifndef LINGER_RUN_TEST_COMMON_H
#define LINGER_RUN_TEST_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (!(cond)) {                                                            \
            int e_ = errno;                                                       \
            fprintf(stderr, "%s:%d: check failed: %s\n  ", __FILE__, __LINE__,    \
                    #cond);                                                       \
            fprintf(stderr, __VA_ARGS__);                                         \
            fprintf(stderr, " (errno %d: %s)\n", e_, strerror(e_));               \
            fflush(NULL);                                                         \
            _exit(1);                                                             \
        }                                                                         \
    } while (0)

static inline long env_long(const char *name, long dflt) {
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    long v = strtol(s, &end, 10);
    return (*end || v <= 0) ? dflt : v;
}

static inline int iters(int n) {
    long cap = env_long("LINGER_TEST_ITERS", n);
    return cap < n ? (int)cap : n;
}

static inline uint64_t slack(void) { return (uint64_t)env_long("LINGER_TEST_SLACK", 1); }

static inline uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

#define MS (1000000ull)

/* CPU time of the calling thread: loops that must do a given amount of work
 * (so that a minimum number of preemptions can be expected) measure this
 * rather than wall time, which a loaded machine stretches. */
static inline uint64_t cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Busy work the compiler cannot remove: spins until `ns` have passed. */
static inline void spin_ns(uint64_t ns) {
    uint64_t end = now_ns() + ns;
    while (now_ns() < end) __asm__ volatile("" ::: "memory");
}

/* Pure computation (no libc calls), so it can be preempted anywhere.
 * Deterministic: the result depends only on n and seed. */
static inline uint64_t mix(uint64_t n, uint64_t seed) {
    volatile uint64_t acc = seed;
    for (uint64_t i = 0; i < n; i++) acc = acc * 6364136223846793005u + i;
    return acc;
}

/* Sleeps ms milliseconds in a helper thread (not the code under test). */
static inline void helper_sleep_ms(unsigned ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

struct after_arg {
    unsigned ms;
    void (*fn)(void *);
    void *arg;
};

static void *after_thread(void *p) {
    struct after_arg a = *(struct after_arg *)p;
    free(p);
    helper_sleep_ms(a.ms);
    a.fn(a.arg);
    return NULL;
}

static inline pthread_t after_ms(unsigned ms, void (*fn)(void *), void *arg) {
    struct after_arg *a = (struct after_arg *)malloc(sizeof *a);
    CHECK(a != NULL, "malloc");
    a->ms = ms;
    a->fn = fn;
    a->arg = arg;
    pthread_t t;
    int rc = pthread_create(&t, NULL, after_thread, a);
    errno = rc;
    CHECK(rc == 0, "pthread_create");
    return t;
}

static inline void join(pthread_t t) {
    int rc = pthread_join(t, NULL);
    errno = rc;
    CHECK(rc == 0, "pthread_join");
}

static inline pid_t gettid_(void) { return (pid_t)syscall(SYS_gettid); }

/* For helper threads: waits until thread `tid` of this process sleeps in
 * one of the system calls `nrs` (a list ending with -1), per
 * /proc/self/task/TID/syscall and /stat. Used before sending a signal that
 * is meant to interrupt that call. Returns the call's number. */
static inline long wait_blocked_in(pid_t tid, const long *nrs) {
    char sc[64], st[64];
    snprintf(sc, sizeof sc, "/proc/self/task/%d/syscall", (int)tid);
    snprintf(st, sizeof st, "/proc/self/task/%d/stat", (int)tid);
    for (;;) {
        char buf[512] = "", sbuf[512] = "";
        FILE *f = fopen(sc, "r");
        CHECK(f != NULL, "open %s", sc);
        if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
        fclose(f);
        f = fopen(st, "r");
        CHECK(f != NULL, "open %s", st);
        if (!fgets(sbuf, sizeof sbuf, f)) sbuf[0] = 0;
        fclose(f);
        const char *paren = strrchr(sbuf, ')');
        char state = paren && paren[1] == ' ' ? paren[2] : '?';
        if (state == 'S' && buf[0] >= '0' && buf[0] <= '9') {
            long nr = strtol(buf, NULL, 10);
            for (const long *p = nrs; *p >= 0; p++)
                if (*p == nr) return nr;
        }
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

/* elapsed >= want, and not absurdly longer (generous: want + 2 s, times slack). */
#define CHECK_ELAPSED(t0, want_ns, what)                                                       \
    do {                                                                                       \
        uint64_t el_ = now_ns() - (t0);                                                        \
        CHECK(el_ >= (uint64_t)(want_ns), "%s returned after %.3f ms, before its %.3f ms", what, \
              el_ / 1e6, (want_ns) / 1e6);                                                     \
        CHECK(el_ < (uint64_t)(want_ns) + 2000 * MS * slack(), "%s took %.3f ms (wanted %.3f)", \
              what, el_ / 1e6, (want_ns) / 1e6);                                               \
    } while (0)

#endif
