/*
 * basic.c: run a long computation in 500 us slices.
 *
 * linger_launch() runs a function for at most the given number of
 * microseconds. If it has not returned by then it is preempted and you get
 * it back as a paused linger_t; linger_resume() gives it another slice. In
 * between, the caller is free to do anything else (here it just counts).
 *
 * Build (from the repository root, after `make lib`):
 *   cc -Wall -O2 -Iinclude examples/c/basic.c -Ltarget/release -llinger \
 *      -Wl,-rpath,$PWD/target/release -o basic
 * or, after `make install`:
 *   cc -Wall -O2 examples/c/basic.c $(pkg-config --cflags --libs linger) -o basic
 */
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "linger.h"

/* The work: count the primes below `limit` by trial division. Note that it
 * knows nothing about preemption: any ordinary function can be launched. */
struct primes {
    uint64_t limit;
    uint64_t count; /* the result, written when the function returns */
};

static void count_primes(void *arg) {
    struct primes *p = arg;
    uint64_t count = 0;
    for (uint64_t n = 2; n < p->limit; n++) {
        int prime = 1;
        for (uint64_t d = 2; d * d <= n; d++) {
            if (n % d == 0) {
                prime = 0;
                break;
            }
        }
        count += prime;
    }
    p->count = count;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(void) {
    const uint64_t slice_us = 500;
    struct primes job = {.limit = 2000000};

    double start = now_ms();
    /* First slice. `l.is_complete` tells whether it already returned. */
    linger_t l = linger_launch(count_primes, slice_us, &job);
    if (!l.is_complete && l.continuation == NULL) {
        perror("linger_launch"); /* errno says why (ENOMEM, EAGAIN, ...) */
        return 1;
    }

    int slices = 1;
    double longest = 0;
    while (!l.is_complete) {
        /* ... the caller would serve other work here ... */
        double t0 = now_ms();
        if (linger_resume(&l, slice_us) != 0) {
            perror("linger_resume");
            return 1;
        }
        double took = now_ms() - t0;
        if (took > longest) longest = took;
        slices++;
    }
    double total = now_ms() - start;

    printf("%" PRIu64 " primes below %" PRIu64 "\n", job.count, job.limit);
    printf("%d slices of %" PRIu64 " us in %.1f ms; the longest slice took %.3f ms\n", slices, slice_us, total,
           longest);

    /* Per-thread counters of the runtime. */
    linger_stats_t s;
    linger_stats(&s);
    printf("launches %" PRIu64 ", preemptions %" PRIu64 ", worst lateness %.1f us\n", s.launches, s.preemptions,
           s.worst_overrun_ns / 1e3);
    return 0;
}
