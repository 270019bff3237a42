/*
 * Deferred deadlines taken at the return of the deferred call (return
 * traps): a function that spends its time in libc calls is stopped exactly
 * where each call returns to its own code. Checks, over many short slices,
 * that every kind of return value survives the trap (rax, xmm0, the x87
 * st0 of a long double), that leaving a trapped call by longjmp from a
 * qsort comparator is harmless, and that functions that read their own
 * return address (dlsym(RTLD_NEXT), setjmp) are never given a trap.
 */
#include <dlfcn.h>
#include <math.h>
#include <setjmp.h>

#include "common.h"

static const char text[] = "the quick brown fox jumps over the lazy dog 0123456789 and then some more text";
static void *next_malloc; /* dlsym(RTLD_NEXT, "malloc") outside any function */
static volatile int failures;

static void values(void *arg) {
    long n = (long)(intptr_t)arg;
    for (long i = 0; i < n; i++) {
        const char *p = memchr(text, 'z', sizeof text);          /* rax */
        size_t len = strlen(text + (i % 7));                      /* rax */
        double d = strtod("2.718281828459045", NULL);             /* xmm0 */
        long double ld = strtold("3.14159265358979323846", NULL); /* st0 */
        char buf[64];
        int w = snprintf(buf, sizeof buf, "%ld:%zu", i, len);     /* rax, varargs */
        if (p != text + 37 || len != sizeof text - 1 - (size_t)(i % 7) || d != 2.718281828459045 ||
            fabsl(ld - 3.14159265358979323846L) > 1e-18L || w != (int)strlen(buf))
            failures++;
    }
}

static jmp_buf out;
static volatile int compared;

static int cmp_leaving(const void *a, const void *b) {
    if (++compared == 1000) longjmp(out, 1);
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* 250 ints: under glibc's 1024-byte limit, qsort's buffer is on the stack
 * (a longjmp out of a qsort with a malloc'ed buffer leaks it). */
#define N 250
static int v[N];

/* Sorts until the comparator leaves by longjmp; returns 1 if it did. */
static __attribute__((noinline)) int sort_and_leave(void) {
    for (int i = 0; i < N; i++) v[i] = (int)((i * 7919L) % N);
    compared = 0;
    if (setjmp(out) != 0) return 1;
    qsort(v, N, sizeof v[0], cmp_leaving);
    return 0; /* N elements take more than 1000 comparisons */
}

static void sorts(void *arg) {
    long rounds = (long)(intptr_t)arg;
    for (long r = 0; r < rounds; r++) {
        if (!sort_and_leave()) failures++;
        /* And a complete sort after it, checked. */
        for (int i = 0; i < N; i++) v[i] = (int)((i * 7919L) % N);
        compared = -1000000000;
        qsort(v, N, sizeof v[0], cmp_leaving);
        for (int i = 1; i < N; i++)
            if (v[i - 1] > v[i]) failures++;
    }
}

/* setjmp, then three longjmps back to it; returns the hop count. */
static __attribute__((noinline)) int hop(void) {
    jmp_buf jb;
    volatile int hops = 0;
    if (setjmp(jb) < 3) {
        hops++;
        longjmp(jb, hops);
    }
    return hops;
}

static void readers(void *arg) {
    long n = (long)(intptr_t)arg;
    for (long i = 0; i < n; i++) {
        if (dlsym(RTLD_NEXT, "malloc") != next_malloc) failures++;
        if (hop() != 3) failures++;
    }
}

static linger_stats_t run(linger_fn f, long n, uint64_t slice_us) {
    linger_stats_t before, after;
    CHECK(linger_stats(&before) == 0, "stats");
    linger_t l = linger_launch(f, slice_us, (void *)(intptr_t)n);
    CHECK(l.is_complete || l.continuation, "launch");
    while (!l.is_complete) CHECK(linger_resume(&l, slice_us) == 0, "resume");
    CHECK(linger_stats(&after) == 0, "stats");
    after.preemptions -= before.preemptions;
    after.return_traps -= before.return_traps;
    return after;
}

int main(void) {
    next_malloc = dlsym(RTLD_NEXT, "malloc");
    CHECK(next_malloc != NULL, "dlsym");
    const char *valgrind = getenv("LINGER_TEST_VALGRIND");
    for (int round = 0; round < iters(20); round++) {
        linger_stats_t s = run(values, 20000, 20);
        CHECK(failures == 0, "a return value changed across a trap (round %d)", round);
        /* Traps are off under valgrind (it reports the jump as an error). */
        CHECK(valgrind || reduced() || s.return_traps > 0, "no return trap in %lu preemptions", (unsigned long)s.preemptions);
        run(sorts, 200, 20);
        CHECK(failures == 0, "qsort after a longjmp out of a trapped qsort (round %d)", round);
        run(readers, 5000, 20);
        CHECK(failures == 0, "dlsym(RTLD_NEXT) or setjmp saw a trap address (round %d)", round);
    }
    printf("return traps: values, longjmp out of qsort, dlsym and setjmp ok\n");
    return 0;
}
