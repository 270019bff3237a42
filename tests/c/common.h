/*
 * Shared helpers for the linger C tests (header-only, no library code).
 *
 *   CHECK(cond, fmt, ...)  fails the test with a message naming the file,
 *                          line, condition and errno when `cond` is false.
 *   iters(n)               loop count: n, or LINGER_TEST_ITERS if smaller
 *                          (valgrind runs set it low); reduced() says so.
 *   slack()                multiplier for timing bounds (LINGER_TEST_SLACK,
 *                          default 1; valgrind runs set it high).
 */
#ifndef LINGER_TEST_COMMON_H
#define LINGER_TEST_COMMON_H

#ifndef _GNU_SOURCE /* C++ compilers define it */
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>

#include "linger.h"

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (!(cond)) {                                                            \
            int e_ = errno;                                                       \
            fprintf(stderr, "%s:%d: check failed: %s\n  ", __FILE__, __LINE__,    \
                    #cond);                                                       \
            fprintf(stderr, __VA_ARGS__);                                         \
            fprintf(stderr, " (errno %d: %s)\n", e_, strerror(e_));               \
            fflush(NULL);                                                         \
            abort();                                                              \
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

/* True when LINGER_TEST_ITERS asks for a reduced run (e.g. under valgrind):
 * thresholds that need a long run are relaxed. */
static inline int reduced(void) { return env_long("LINGER_TEST_ITERS", 0) > 0; }

static inline uint64_t slack(void) { return (uint64_t)env_long("LINGER_TEST_SLACK", 1); }

static inline uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Busy work the compiler cannot remove: spins until `ns` have passed. */
static inline void spin_for_ns(uint64_t ns) {
    uint64_t end = now_ns() + ns;
    while (now_ns() < end) {
        __asm__ volatile("" ::: "memory");
    }
}

/* A critical section (the caller holds the lock) that updates *counter in
 * two steps `ns` apart: fails if another thread is inside meanwhile. */
static inline void counted_section(volatile int *inside, unsigned long *counter, uint64_t ns) {
    CHECK(!*inside, "two threads inside the lock");
    *inside = 1;
    unsigned long v = *counter;
    spin_for_ns(ns);
    *counter = v + 1;
    *inside = 0;
}

/* Defines `contend(arg)`, a thread function that takes the mutex `m`
 * `rounds` times through the pthread-shaped API `api` and makes a
 * counted_section of `ns` on `inside` and `counter` each time. */
#define CONTEND_LOCKED(api, m, rounds, inside, counter, ns)     \
    static void *contend(void *arg) {                           \
        (void)arg;                                              \
        for (int i = 0; i < (rounds); i++) {                    \
            CHECK(api##_mutex_lock(&m) == 0, "lock");           \
            counted_section(&inside, &counter, ns);             \
            CHECK(api##_mutex_unlock(&m) == 0, "unlock");       \
        }                                                       \
        return NULL;                                            \
    }

/* A bounded FIFO of values for producer/consumer tests (the callers lock). */
enum { FIFO_CAP = 4 };
struct fifo {
    unsigned long v[FIFO_CAP];
    int head, len;
};
static inline void fifo_push(struct fifo *q, unsigned long v) { q->v[(q->head + q->len++) % FIFO_CAP] = v; }
static inline unsigned long fifo_pop(struct fifo *q) {
    unsigned long v = q->v[q->head];
    q->head = (q->head + 1) % FIFO_CAP;
    q->len--;
    return v;
}

/* Defines `put(v)` and `take()` on the struct fifo `q`, which the mutex `m`
 * guards, with the condition variables `not_empty` and `not_full`, through
 * the pthread-shaped API `api` (pthread or turq: api##_mutex_lock...). */
#define FIFO_LOCKED(api, q, m, not_empty, not_full)                                    \
    static void put(unsigned long v) {                                                 \
        CHECK(api##_mutex_lock(&m) == 0, "lock");                                      \
        while (q.len == FIFO_CAP) CHECK(api##_cond_wait(&not_full, &m) == 0, "wait");  \
        fifo_push(&q, v);                                                              \
        CHECK(api##_cond_signal(&not_empty) == 0, "signal");                           \
        CHECK(api##_mutex_unlock(&m) == 0, "unlock");                                  \
    }                                                                                  \
    static unsigned long take(void) {                                                  \
        CHECK(api##_mutex_lock(&m) == 0, "lock");                                      \
        while (q.len == 0) CHECK(api##_cond_wait(&not_empty, &m) == 0, "wait");        \
        unsigned long v = fifo_pop(&q);                                                \
        CHECK(api##_cond_signal(&not_full) == 0, "signal");                            \
        CHECK(api##_mutex_unlock(&m) == 0, "unlock");                                  \
        return v;                                                                      \
    }

/* Pure computation (no libc calls), so it can be preempted anywhere. */
static inline uint64_t mix(uint64_t n) {
    volatile uint64_t acc = 0;
    for (uint64_t i = 0; i < n; i++) acc = acc * 6364136223846793005u + i;
    return acc;
}

/* A preemptible job: computes mix(n) into result. */
struct mix_job {
    uint64_t n, result;
};
static inline void mix_job_fn(void *arg) {
    struct mix_job *j = (struct mix_job *)arg;
    j->result = mix(j->n);
}

/* Spins until *arg (a volatile int) becomes non-zero. */
static inline void spin_until_fn(void *arg) {
    volatile int *stop = (volatile int *)arg;
    while (!*stop) {
    }
}

static inline linger_stats_t stats_now(void) {
    linger_stats_t s;
    CHECK(linger_stats(&s) == 0, "linger_stats failed");
    return s;
}

/*
 * Watchdog: if the test is still running after `seconds` (times slack()),
 * print `what` and exit with status 3. Used around code that can only hang if
 * a deadline is lost, so such a hang is reported as a clear failure.
 */
static const char *watchdog_what;
static void watchdog_fire(int sig) {
    (void)sig;
    static const char pre[] = "WATCHDOG: still running: ";
    write(2, pre, sizeof pre - 1);
    write(2, watchdog_what, strlen(watchdog_what));
    write(2, "\n", 1);
    _exit(3);
}
static inline void watchdog(unsigned seconds, const char *what) {
    watchdog_what = what;
    signal(SIGALRM, watchdog_fire);
    alarm(seconds ? seconds * (unsigned)slack() : 0);
}

/*
 * Runs fn(arg) in a forked child whose stderr goes to `err` (NUL-terminated,
 * at most cap - 1 bytes kept); returns its wait status. For tests whose
 * failure mode is a crash or a hang of the process itself.
 */
static inline int run_child(int (*fn)(int), int arg, char *err, size_t cap) {
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        close(fds[1]);
        _exit(fn(arg));
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t r;
    while ((r = read(fds[0], err + len, cap - 1 - len)) > 0) len += (size_t)r;
    err[len] = 0;
    close(fds[0]);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    return st;
}

#define PASS(name) fprintf(stderr, "%s: all checks passed\n", name)

#endif
