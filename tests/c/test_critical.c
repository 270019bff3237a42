/*
 * No-preemption scopes: linger_critical_begin/end. A deadline passing inside
 * one is taken at the outermost linger_critical_end (counted as a deferred
 * preemption), never inside; scopes nest; a function stopped at the end of a
 * scope can be resumed or cancelled.
 */
#include "common.h"

static volatile uint64_t caller_turns; /* bumped by the caller between resumes */

struct crit {
    int rounds;
    int violations;  /* the caller ran while we were inside a scope */
    int end_errors;
    int depth;       /* nesting depth to use */
    int done;
};

static void crit_fn(void *arg) {
    struct crit *c = arg;
    for (int r = 0; r < c->rounds; r++) {
        for (int d = 0; d < c->depth; d++) linger_critical_begin();
        uint64_t seen = caller_turns;
        mix(20000); /* ~20 us inside, longer than some slices */
        if (caller_turns != seen) c->violations++;
        for (int d = 0; d < c->depth; d++) {
            mix(2000);
            if (caller_turns != seen) c->violations++; /* inner ends must not preempt */
            if (linger_critical_end() != 0) c->end_errors++;
        }
        mix(5000); /* outside: preemptible */
    }
    c->done = 1;
}

static void test_no_preemption_inside(int n) {
    for (int i = 0; i < n; i++) {
        struct crit c = {.rounds = 200, .depth = 1 + i % 4};
        linger_stats_t s0 = stats_now();
        linger_t l = linger_launch(crit_fn, 15, &c);
        while (!l.is_complete) {
            caller_turns++;
            CHECK(linger_resume(&l, 15) == 0, "resume");
        }
        linger_stats_t s1 = stats_now();
        CHECK(c.done, "iteration %d: not done", i);
        CHECK(c.violations == 0, "iteration %d (depth %d): preempted inside a critical section %d times", i, c.depth,
              c.violations);
        CHECK(c.end_errors == 0, "iteration %d (depth %d): linger_critical_end failed %d times", i, c.depth,
              c.end_errors);
        CHECK(s1.deferred_preemptions > s0.deferred_preemptions, "iteration %d: no deferred preemption counted", i);
    }
}

/* Stopped at the end of a critical section, then cancelled. */
struct late {
    volatile int entered;
    int after_end;
};
static void late_fn(void *arg) {
    struct late *t = arg;
    linger_critical_begin();
    t->entered = 1;
    mix(5000000); /* ~5 ms, well past the 100 us deadline */
    linger_critical_end();
    t->after_end = 1;
    mix(100000000);
}
static void test_cancel_at_end(int n) {
    for (int i = 0; i < n; i++) {
        struct late t = {0};
        linger_stats_t s0 = stats_now();
        linger_t l = linger_launch(late_fn, 100, &t);
        /* A slow or busy machine can take the deadline before the scope
         * opens (an ordinary preemption, not deferred): go on until the
         * function has stopped inside it. */
        while (!l.is_complete && !t.entered) CHECK(linger_resume(&l, 100) == 0, "iteration %d: resume to the scope", i);
        linger_stats_t s1 = stats_now();
        CHECK(!l.is_complete && l.continuation, "iteration %d: not stopped", i);
        CHECK(t.after_end == 0, "iteration %d: ran past the end of the critical section", i);
        CHECK(s1.deferred_preemptions == s0.deferred_preemptions + 1, "iteration %d: deferred_preemptions +%llu", i,
              (unsigned long long)(s1.deferred_preemptions - s0.deferred_preemptions));
        CHECK(!linger_yielded(&l), "iteration %d: a deferred preemption reported as yielded", i);
        linger_preemption_t p;
        CHECK(linger_last_preemption(&p) == 1 && p.deferred, "iteration %d: last preemption not reported deferred", i);
        if (i % 2) {
            CHECK(linger_cancel(&l) == 0 && l.is_cancelled, "iteration %d: cancel", i);
            CHECK(t.after_end == 0, "iteration %d: cancel ran the function on", i);
        } else {
            CHECK(linger_resume(&l, 100) == 0, "iteration %d: resume", i);
            /* A stalled machine can take the next deadline between the end
             * of the scope and the store: resume until it is past. */
            while (!l.is_complete && !t.after_end) CHECK(linger_resume(&l, 100) == 0, "iteration %d: resume on", i);
            CHECK(!l.is_complete && t.after_end == 1, "iteration %d: not past the end of the scope", i);
            CHECK(linger_cancel(&l) == 0 && l.is_cancelled, "iteration %d: cancel", i);
        }
    }
}

/* Unbalanced use inside a function is refused, and does not disturb the
 * runtime's own bookkeeping. */
static void unbalanced_fn(void *arg) {
    int *errs = arg;
    errno = 0;
    if (linger_critical_end() == -1 && errno == EINVAL) (*errs)++;
    linger_critical_begin();
    linger_critical_begin();
    if (linger_critical_end() == 0) (*errs)++;
    if (linger_critical_end() == 0) (*errs)++;
    errno = 0;
    if (linger_critical_end() == -1 && errno == EINVAL) (*errs)++;
    mix(2000000); /* still preemptible afterwards */
}
static void test_unbalanced(int n) {
    for (int i = 0; i < n; i++) {
        int ok = 0;
        linger_t l = linger_launch(unbalanced_fn, 100, &ok);
        CHECK(!l.is_complete, "iteration %d: not preemptible after unbalanced scope calls", i);
        CHECK(linger_resume(&l, UINT64_MAX) == 0 && l.is_complete, "finish");
        CHECK(ok == 4, "iteration %d: %d of 4 critical_end results as documented", i, ok);
    }
    /* In the caller too. */
    errno = 0;
    CHECK(linger_critical_end() == -1 && errno == EINVAL, "critical_end without begin in the caller");
    linger_critical_begin();
    CHECK(linger_critical_end() == 0, "balanced critical section in the caller");
    CHECK(linger_critical_end() == -1, "critical_end after balance in the caller");
}

/* A critical section left open by the caller around a launch: the launched
 * function is still preempted on time (the caller's scope is the caller's). */
static void test_caller_scope(int n) {
    linger_critical_begin();
    for (int i = 0; i < n; i++) {
        linger_t l = linger_launch(late_fn, 100, &(struct late){0});
        CHECK(!l.is_complete, "iteration %d: function launched inside the caller's critical section never stopped", i);
        CHECK(linger_cancel(&l) == 0, "cancel");
    }
    CHECK(linger_critical_end() == 0, "caller critical_end after launches");
}

int main(void) {
    watchdog(60, "test_critical hung");
    test_no_preemption_inside(iters(40));
    test_cancel_at_end(iters(100));
    test_unbalanced(iters(100));
    test_caller_scope(iters(50));
    PASS("test_critical");
    return 0;
}
