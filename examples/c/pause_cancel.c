/*
 * pause_cancel.c: a function that hands control back by itself, and a
 * runaway function that is cancelled.
 *
 * - linger_pause() inside a preemptible function returns to the caller at
 *   once; linger_yielded() tells such a voluntary stop from a timeout. This
 *   makes simple generators: the function produces a value, pauses, and the
 *   caller resumes it for the next one.
 * - linger_cancel() discards a paused function for good: its stack is
 *   reclaimed and it never runs again.
 *
 * Build (after `make lib`): cc -Wall -O2 -Iinclude examples/c/pause_cancel.c \
 *           -Ltarget/release -llinger -Wl,-rpath,$PWD/target/release -o pause_cancel
 */
#include <stdio.h>

#include "linger.h"

/* A generator of Fibonacci numbers: writes one into *out, then pauses. */
static void fibonacci(void *arg) {
    unsigned long long *out = arg;
    unsigned long long a = 0, b = 1;
    for (;;) {
        *out = a;
        linger_pause(); /* back to the caller; continues here when resumed */
        unsigned long long next = a + b;
        a = b;
        b = next;
    }
}

/* A function that never returns. */
static void runaway(void *arg) {
    volatile unsigned long *spins = arg;
    for (;;) (*spins)++;
}

int main(void) {
    /* 1. The generator: no time limit, it stops itself after each value. */
    unsigned long long value;
    linger_t gen = linger_launch(fibonacci, UINT64_MAX, &value);
    printf("fibonacci:");
    for (int i = 0; i < 15; i++) {
        if (!linger_yielded(&gen)) { /* it paused itself, it did not time out */
            fprintf(stderr, "generator did not pause\n");
            return 1;
        }
        printf(" %llu", value);
        linger_resume(&gen, UINT64_MAX); /* run until the next pause */
    }
    printf("\n");
    /* We need no more values: cancel the generator (it never returns). */
    if (linger_cancel(&gen) != 0 || !gen.is_cancelled) {
        perror("linger_cancel");
        return 1;
    }

    /* 2. The runaway: give it 5 slices of 2 ms, then give up on it. */
    unsigned long spins = 0;
    linger_t l = linger_launch(runaway, 2000, (void *)&spins);
    for (int i = 0; i < 4 && !l.is_complete; i++) linger_resume(&l, 2000);
    printf("runaway: still running after 5 slices (%lu loop iterations); cancelling it\n", spins);
    linger_cancel(&l);
    unsigned long at_cancel = spins;

    /* A cancelled function can never run again: resuming it fails. */
    if (linger_resume(&l, 1000) == 0) {
        fprintf(stderr, "resumed a cancelled function?\n");
        return 1;
    }
    perror("resuming the cancelled function fails as expected");
    printf("runaway: %s\n", spins == at_cancel ? "did not run after the cancel" : "ran after the cancel?!");
    return spins == at_cancel ? 0 : 1;
}
