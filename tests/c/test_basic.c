/*
 * Completion, timeout then resume to completion, timeout 0 (set up only),
 * UINT64_MAX (no limit), and resuming with a timeout of 0, each many times;
 * many set-up functions alive at once; errno kept across preemptions.
 */
#include "common.h"

struct work {
    uint64_t n;      /* iterations of pure computation to do */
    uint64_t result; /* written by the function when it returns */
    int runs;        /* times the function body started */
    int done;        /* times the function body finished */
};

static uint64_t expected(uint64_t n) {
    uint64_t acc = 0;
    for (uint64_t i = 0; i < n; i++) acc = acc * 6364136223846793005u + i;
    return acc;
}

static void work_fn(void *arg) {
    struct work *w = arg;
    w->runs++;
    w->result = mix(w->n);
    w->done++;
}

static void test_completion(int n) {
    for (int i = 0; i < n; i++) {
        struct work w = {.n = 1000};
        linger_t l = linger_launch(work_fn, 100000, &w);
        CHECK(l.is_complete, "iteration %d: short function did not complete in 100 ms", i);
        CHECK(!l.is_cancelled && l.continuation == NULL, "iteration %d: completed state has cancelled=%d cont=%p", i,
              l.is_cancelled, l.continuation);
        CHECK(w.runs == 1 && w.done == 1, "iteration %d: runs=%d done=%d", i, w.runs, w.done);
        CHECK(w.result == expected(1000), "iteration %d: wrong result", i);
        CHECK(!linger_yielded(&l), "iteration %d: completed function reported as yielded", i);
        /* Resuming a completed function is a no-op returning 0. */
        CHECK(linger_resume(&l, 1000) == 0, "iteration %d: resume of completed returned -1", i);
        CHECK(l.is_complete && w.runs == 1 && w.done == 1, "iteration %d: resume of completed changed something", i);
    }
}

static void test_timeout_resume(int n) {
    uint64_t want = expected(2000000);
    for (int i = 0; i < n; i++) {
        /* ~2-5 ms of work in 200 us slices: several preemptions each time. */
        struct work w = {.n = 2000000};
        linger_stats_t before = stats_now();
        uint64_t t0 = now_ns();
        linger_t l = linger_launch(work_fn, 200, &w);
        uint64_t first = now_ns() - t0;
        CHECK(!l.is_complete && !l.is_cancelled && l.continuation != NULL,
              "iteration %d: long function not preempted after 200 us (complete=%d cont=%p, took %llu us)", i,
              l.is_complete, l.continuation, (unsigned long long)(first / 1000));
        CHECK(first < 20000000 * slack(), "iteration %d: first slice of 200 us took %llu us", i,
              (unsigned long long)(first / 1000));
        /* runs is 0 if a stalled machine took the deadline before its store. */
        CHECK(w.runs <= 1 && w.done == 0, "iteration %d: runs=%d done=%d after the first slice", i, w.runs, w.done);
        CHECK(!linger_yielded(&l), "iteration %d: preempted function reported as yielded", i);
        int resumes = 0;
        while (!l.is_complete) {
            CHECK(linger_resume(&l, 200) == 0, "iteration %d: resume failed after %d resumes", i, resumes);
            CHECK(!l.is_cancelled, "iteration %d: function became cancelled", i);
            resumes++;
            CHECK(resumes < 1000000, "iteration %d: never completes", i);
        }
        CHECK(l.continuation == NULL, "iteration %d: completed with a continuation %p", i, l.continuation);
        CHECK(w.runs == 1 && w.done == 1, "iteration %d: runs=%d done=%d", i, w.runs, w.done);
        CHECK(w.result == want, "iteration %d: wrong result after %d resumes", i, resumes);
        linger_stats_t after = stats_now();
        CHECK(after.preemptions >= before.preemptions + 1, "iteration %d: no preemption counted", i);
        CHECK(after.completions == before.completions + 1, "iteration %d: completions %llu -> %llu", i,
              (unsigned long long)before.completions, (unsigned long long)after.completions);
        CHECK(after.launches == before.launches + 1, "iteration %d: launches %llu -> %llu", i,
              (unsigned long long)before.launches, (unsigned long long)after.launches);
    }
}

static void test_timeout_zero(int n) {
    for (int i = 0; i < n; i++) {
        struct work w = {.n = 100};
        linger_t l = linger_launch(work_fn, 0, &w);
        CHECK(!l.is_complete && !l.is_cancelled && l.continuation != NULL,
              "iteration %d: timeout 0 must only set up (complete=%d cont=%p)", i, l.is_complete, l.continuation);
        CHECK(w.runs == 0, "iteration %d: function ran during a launch with timeout 0", i);
        /* A resume with timeout 0 does nothing either. */
        CHECK(linger_resume(&l, 0) == 0, "iteration %d: resume(0) failed", i);
        CHECK(!l.is_complete && w.runs == 0, "iteration %d: resume(0) ran the function", i);
        CHECK(!linger_yielded(&l), "iteration %d: never-run function reported as yielded", i);
        CHECK(linger_resume(&l, UINT64_MAX) == 0, "iteration %d: resume(UINT64_MAX) failed", i);
        CHECK(l.is_complete && w.runs == 1 && w.done == 1, "iteration %d: not run to completion (runs=%d)", i, w.runs);
        CHECK(w.result == expected(100), "iteration %d: wrong result", i);
    }
}

static void test_no_limit(int n) {
    uint64_t want = expected(3000000);
    for (int i = 0; i < n; i++) {
        struct work w = {.n = 3000000};
        linger_stats_t before = stats_now();
        linger_t l = linger_launch(work_fn, UINT64_MAX, &w);
        CHECK(l.is_complete, "iteration %d: UINT64_MAX launch did not complete", i);
        CHECK(w.result == want, "iteration %d: wrong result", i);
        linger_stats_t after = stats_now();
        CHECK(after.preemptions == before.preemptions, "iteration %d: preempted without a time limit", i);
        /* Same for a resume with no limit. */
        struct work w2 = {.n = 3000000};
        l = linger_launch(work_fn, 0, &w2);
        CHECK(!l.is_complete && l.continuation, "iteration %d: set-up launch failed", i);
        CHECK(linger_resume(&l, UINT64_MAX) == 0 && l.is_complete, "iteration %d: resume(UINT64_MAX) incomplete", i);
        CHECK(stats_now().preemptions == after.preemptions, "iteration %d: resume(UINT64_MAX) was preempted", i);
        CHECK(w2.result == want, "iteration %d: wrong result", i);
    }
}

/* Many short-lived launches in a row reuse pooled stacks and handles. */
static void test_many_live(int n) {
    enum { LIVE = 64 };
    for (int i = 0; i < n; i++) {
        linger_t ls[LIVE];
        struct work ws[LIVE];
        for (int k = 0; k < LIVE; k++) {
            ws[k] = (struct work){.n = 200};
            ls[k] = linger_launch(work_fn, 0, &ws[k]);
            CHECK(ls[k].continuation != NULL, "iteration %d: launch %d failed", i, k);
        }
        for (int k = LIVE - 1; k >= 0; k--) {
            CHECK(linger_resume(&ls[k], UINT64_MAX) == 0 && ls[k].is_complete, "iteration %d: resume %d", i, k);
            CHECK(ws[k].result == expected(200), "iteration %d: function %d wrong result", i, k);
        }
    }
}

/* errno belongs to the thread, shared by the caller and its functions: a
 * preemption must not let the caller's errno leak into the function. */
struct errno_check {
    int changed, checks;
};
static void errno_fn(void *arg) {
    struct errno_check *c = arg;
    for (int i = 0; i < 20000; i++) {
        errno = 1000 + i % 100;
        mix(500);
        if (errno != 1000 + i % 100) c->changed++;
        c->checks++;
    }
}
static void test_errno(int n) {
    for (int i = 0; i < n; i++) {
        struct errno_check c = {0};
        linger_t l = linger_launch(errno_fn, 30, &c);
        int resumes = 0;
        while (!l.is_complete) {
            errno = EPERM; /* the caller's own errno traffic */
            CHECK(linger_resume(&l, 30) == 0, "resume");
            resumes++;
        }
        CHECK(c.checks == 20000, "iteration %d: %d checks", i, c.checks);
        CHECK(c.changed == 0, "iteration %d: errno changed under the function %d times in %d preemptions", i,
              c.changed, resumes);
    }
}

int main(void) {
    test_completion(iters(5000));
    test_timeout_resume(iters(200));
    test_timeout_zero(iters(5000));
    test_no_limit(iters(50));
    test_many_live(iters(100));
    test_errno(iters(10));
    PASS("test_basic");
    return 0;
}
