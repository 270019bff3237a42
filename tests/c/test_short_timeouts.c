/*
 * Every launch or resume with a finite timeout must come back by its
 * deadline, however short the timeout: a 5 ms computation launched (or
 * resumed) with 1..1000 us must never run to completion in one go, and an
 * infinite loop launched with a short timeout must return. Conversely, short
 * slices must still let the function make progress.
 */
#include "common.h"

static void long_work(void *arg) {
    (void)arg;
    mix(5000000); /* ~5 ms */
}

static void forever(void *arg) {
    volatile int *stop = arg;
    while (!*stop) {
    }
}

/* Counts its loop iterations where the caller can see them. */
struct progress {
    uint64_t target;
    volatile uint64_t done;
};
static void progress_fn(void *arg) {
    struct progress *p = arg;
    while (p->done < p->target) p->done++;
}

static const uint64_t timeouts[] = {1, 2, 5, 10, 20, 50, 100, 1000};
#define NT (sizeof timeouts / sizeof timeouts[0])

int main(void) {
    int n = iters(300);
    int lost_launch[NT] = {0}, lost_resume[NT] = {0}, failed = 0;

    for (size_t t = 0; t < NT; t++) {
        uint64_t sum_ns = 0, max_ns = 0;
        for (int i = 0; i < n; i++) {
            uint64_t t0 = now_ns();
            linger_t l = linger_launch(long_work, timeouts[t], NULL);
            uint64_t took = now_ns() - t0;
            sum_ns += took;
            if (took > max_ns) max_ns = took;
            CHECK(l.is_complete || l.continuation, "launch failed");
            if (l.is_complete) {
                lost_launch[t]++;
                continue;
            }
            /* The first resume of a preempted function, with the same timeout. */
            CHECK(linger_resume(&l, timeouts[t]) == 0, "resume failed");
            if (l.is_complete) lost_resume[t]++;
            CHECK(linger_cancel(&l) == 0, "cancel failed");
        }
        fprintf(stderr,
                "timeout %4llu us: %d/%d launches and %d resumes ran a 5 ms function to completion; "
                "first slice took %.1f us on average, %.1f us at most\n",
                (unsigned long long)timeouts[t], lost_launch[t], n, lost_resume[t], sum_ns / 1e3 / n, max_ns / 1e3);
        failed += lost_launch[t] + lost_resume[t];
    }
    linger_stats_t s = stats_now();
    fprintf(stderr, "stats: preemptions=%llu spurious_signals=%llu deferrals=%llu\n",
            (unsigned long long)s.preemptions, (unsigned long long)s.spurious_signals,
            (unsigned long long)s.deferrals);
    CHECK(failed == 0, "%d launches/resumes with a finite timeout were never preempted (deadline lost)", failed);

    /* An infinite loop must come back too (the watchdog reports a hang). */
    watchdog(10, "linger_launch(infinite loop, 1..1000 us) never returned: the deadline was lost");
    for (size_t t = 0; t < NT; t++) {
        for (int i = 0; i < iters(20); i++) {
            volatile int stop = 0;
            linger_t l = linger_launch(forever, timeouts[t], (void *)&stop);
            CHECK(!l.is_complete && l.continuation, "infinite loop launch with %llu us",
                  (unsigned long long)timeouts[t]);
            CHECK(linger_cancel(&l) == 0 && l.is_cancelled, "cancel of infinite loop");
        }
    }
    watchdog(0, "");

    /* Progress: a function that needs ~20 us of computation, resumed in
     * slices of 1-20 us, must finish in a bounded number of slices. Every
     * slice should run at least some of its code. */
    static const uint64_t slices[] = {1, 2, 5, 10, 20};
    int stuck = 0;
    for (size_t t = 0; t < sizeof slices / sizeof slices[0]; t++) {
        long resumes = 0, idle = 0;
        int unfinished = 0, runs = iters(5);
        for (int r = 0; r < runs; r++) {
            struct progress p = {.target = 40000};
            linger_t l = linger_launch(progress_fn, slices[t], &p);
            long mine = 0;
            while (!l.is_complete && mine < 1000) {
                uint64_t before = p.done;
                CHECK(linger_resume(&l, slices[t]) == 0, "resume");
                mine++;
                if (p.done == before && !l.is_complete) idle++;
            }
            resumes += mine;
            if (!l.is_complete) {
                unfinished++;
                CHECK(linger_cancel(&l) == 0, "cancel");
            }
        }
        fprintf(stderr, "slices of %2llu us: %d/%d runs of ~20 us of work unfinished after 1000 resumes; "
                        "%ld of %ld resumes ran none of the function's code\n",
                (unsigned long long)slices[t], unfinished, runs, idle, resumes);
        stuck += unfinished;
    }
    CHECK(stuck == 0, "%d runs made no progress in 1000 short slices (livelock: each resume was preempted before "
          "the function ran)", stuck);
    PASS("test_short_timeouts");
    return 0;
}
