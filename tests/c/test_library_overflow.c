/*
 * A stack overflow inside libc (here: vfprintf, holding the FILE's lock)
 * must not leave that lock held. The call finishes on the stack's emergency
 * reserve; the function is then abandoned as overflowed (EFAULT) when the
 * call returns to its own code. Before, the function was abandoned inside
 * vfprintf and the first other thread to use the FILE hung for good.
 *
 * The sweep runs the stack out at every depth (16-byte steps) from 12 KiB
 * above its end down to none, so that some overflows land in vfprintf and
 * others in our own recursion. After each one another thread must get the
 * FILE's lock (ftrylockfile: a lock owned by this thread would let this
 * thread in). Runs in a child, with a time limit, so that a hang fails.
 */
#include "common.h"

#include <pthread.h>

static FILE *shared;

/* The running function's stack bottom, from the interposed
 * pthread_getattr_np (it describes the function's own stack). */
static uintptr_t stack_floor(void) {
    pthread_attr_t attr;
    CHECK(pthread_getattr_np(pthread_self(), &attr) == 0, "pthread_getattr_np");
    void *lo;
    size_t size;
    CHECK(pthread_attr_getstack(&attr, &lo, &size) == 0, "pthread_attr_getstack");
    pthread_attr_destroy(&attr);
    return (uintptr_t)lo;
}

struct job {
    uintptr_t left;
    int printed;
};

static volatile double seed = 1.234567890123e300;

/* Descends in 256-byte frames until `limit`, then prints a few floats
 * (glibc's printf_fp needs a few KiB of stack) under the FILE lock. */
__attribute__((noinline)) static int descend(uintptr_t limit, struct job *j) {
    volatile char pad[256];
    pad[0] = 1;
    if ((uintptr_t)pad > limit) return descend(limit, j) + pad[0];
    j->printed += fprintf(shared, "%.30e %.17g %Lf %s\n", seed, seed / 3, (long double)seed, "x");
    return pad[0];
}

static void deep_print(void *arg) {
    struct job *j = arg;
    descend(stack_floor() + j->left, j);
}

static void *try_lock(void *arg) {
    (void)arg;
    if (ftrylockfile(shared) != 0) return (void *)1;
    funlockfile(shared);
    return NULL;
}

static int lock_free_elsewhere(void) {
    pthread_t t;
    void *r;
    CHECK(pthread_create(&t, NULL, try_lock, NULL) == 0, "pthread_create");
    CHECK(pthread_join(t, &r) == 0, "pthread_join");
    return r == NULL;
}

static void ok_fn(void *arg) { *(int *)arg = 42; }

static int child(void) {
    shared = fopen("/dev/null", "w");
    CHECK(shared, "fopen /dev/null");
    int overflows = 0, completions = 0;
    int rounds = iters(3);
    for (int round = 0; round < rounds; round++) {
        for (long left = 12 * 1024; left >= 0; left -= 16) {
            struct job j = {.left = (uintptr_t)left, .printed = 0};
            linger_opts_t o = {.stack_size = 64 * 1024};
            errno = 0;
            linger_t l = linger_launch_opts(deep_print, UINT64_MAX, &j, &o);
            if (l.is_complete) {
                CHECK(j.printed > 0, "left %ld: completed without printing", left);
                completions++;
            } else {
                CHECK(l.is_cancelled && errno == EFAULT, "left %ld: cancelled=%d errno %d", left, l.is_cancelled,
                      errno);
                overflows++;
            }
            CHECK(lock_free_elsewhere(), "left %ld, round %d: the FILE lock stayed held after an overflow", left,
                  round);
            /* This thread's stdio works too. */
            CHECK(fprintf(shared, "after %ld\n", left) > 0, "fprintf after");
        }
    }
    linger_stats_t s = stats_now();
    fprintf(stderr, "child: overflows %d completions %d library_overflows %llu\n", overflows, completions,
            (unsigned long long)s.library_overflows);
    CHECK(overflows > 0 && completions > 0, "the sweep missed the end of the stack");
    CHECK(s.library_overflows > 0, "no overflow finished on the reserve");
    CHECK(s.stack_overflows == (uint64_t)overflows, "stack_overflows %llu, want %d",
          (unsigned long long)s.stack_overflows, overflows);
    int v = 0;
    linger_t l = linger_launch(ok_fn, UINT64_MAX, &v);
    CHECK(l.is_complete && v == 42, "launch after the overflows");
    fprintf(stderr, "child: done\n");
    return 0;
}

static int child_with_alarm(int unused) {
    (void)unused;
    alarm(120); /* a lock left held hangs the child: fail instead */
    return child();
}

int main(void) {
    static char err[1 << 20];
    int st = run_child(child_with_alarm, 0, err, sizeof err);
    size_t len = strlen(err);
    const char *tail = len > 3000 ? err + len - 3000 : err;
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(err, "child: done"),
          "the child failed (status 0x%x); the tail of its stderr:\n%s", st, tail);
    /* Returned and counted (the child checks both), printed nowhere. */
    CHECK(!strstr(err, "stack overflow"), "linger printed an overflow message on the program's stderr:\n%s", tail);
    const char *sum = strstr(err, "child: overflows");
    fprintf(stderr, "%.*s\n", sum ? (int)strcspn(sum, "\n") : 0, sum ? sum : "");
    PASS("test_library_overflow");
    return 0;
}
