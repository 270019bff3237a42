/*
 * Nested launches: a preemptible function launching another. The inner
 * deadline never extends past the outer one; an inner function that is
 * preempted comes back to the outer one as a continuation the outer one can
 * resume or cancel; pause inside the inner function returns to the outer one;
 * and nesting several levels deep works.
 */
#include "common.h"

struct inner {
    uint64_t work;
    uint64_t result;
    int done;
};

static void inner_fn(void *arg) {
    struct inner *in = arg;
    in->result = mix(in->work);
    in->done = 1;
}

struct outer {
    uint64_t inner_timeout_us;
    uint64_t inner_work;
    linger_t inner_state;  /* what the inner launch returned */
    uint64_t inner_took;   /* how long the inner launch took */
    int inner_preemptible; /* linger_is_preemptible() inside the inner one */
    int done;
    struct inner in;
};

static void outer_fn(void *arg) {
    struct outer *o = arg;
    o->in = (struct inner){.work = o->inner_work};
    uint64_t t0 = now_ns();
    o->inner_state = linger_launch(inner_fn, o->inner_timeout_us, &o->in);
    o->inner_took = now_ns() - t0;
    /* Whatever happened, finish the inner function now. */
    while (!o->inner_state.is_complete) {
        CHECK(linger_resume(&o->inner_state, 100) == 0, "inner resume from the outer function");
    }
    o->done = 1;
}

/* Outer deadline 2 ms, inner launched with no limit on ~20 ms of work:
 * the inner launch must come back at the outer deadline. */
static void test_bounded(int n) {
    for (int i = 0; i < n; i++) {
        struct outer o = {.inner_timeout_us = UINT64_MAX, .inner_work = 20000000};
        uint64_t t0 = now_ns();
        linger_t l = linger_launch(outer_fn, 2000, &o);
        uint64_t took = now_ns() - t0;
        CHECK(!l.is_complete && l.continuation, "iteration %d: outer function not preempted", i);
        CHECK(took < 50000000ull * slack(), "iteration %d: outer launch with 2 ms took %llu us (inner deadline not "
              "bounded by the outer one?)", i, (unsigned long long)(took / 1000));
        /* Resume the outer one in slices until done. */
        int resumes = 0;
        while (!l.is_complete) {
            CHECK(linger_resume(&l, 2000) == 0, "iteration %d: resume outer", i);
            resumes++;
        }
        CHECK(o.done && o.in.done, "iteration %d: outer %d inner %d", i, o.done, o.in.done);
        CHECK(!o.inner_state.is_cancelled, "iteration %d: inner cancelled", i);
        CHECK(o.inner_took < 50000000ull * slack(), "iteration %d: inner launch (no limit) inside a 2 ms outer slice "
              "took %llu us", i, (unsigned long long)(o.inner_took / 1000));
        CHECK(resumes >= 5, "iteration %d: only %d resumes for ~20 ms of work in 2 ms slices", i, resumes);
    }
}

/* The inner function has a shorter deadline than the outer one: it comes
 * back to the outer function, not to the top-level caller. */
static void test_inner_shorter(int n) {
    for (int i = 0; i < n; i++) {
        struct outer o = {.inner_timeout_us = 100, .inner_work = 3000000};
        linger_t l = linger_launch(outer_fn, UINT64_MAX, &o);
        CHECK(l.is_complete, "iteration %d: outer with no limit did not complete", i);
        CHECK(o.done && o.in.done, "iteration %d", i);
        CHECK(o.inner_took < 20000000ull * slack(), "iteration %d: inner launch with 100 us took %llu us", i,
              (unsigned long long)(o.inner_took / 1000));
    }
}

/* pause() inside the inner function returns to the outer function. */
static int pause_inner_reached;
static void pausing_inner(void *arg) {
    (void)arg;
    CHECK(linger_is_preemptible(), "inner function not preemptible");
    linger_pause();
    pause_inner_reached = 1;
}
static void pausing_outer(void *arg) {
    int *ok = arg;
    linger_t in = linger_launch(pausing_inner, UINT64_MAX, NULL);
    CHECK(!in.is_complete && linger_yielded(&in), "inner pause did not come back to the outer function");
    CHECK(linger_is_preemptible(), "outer no longer preemptible after inner pause");
    CHECK(linger_resume(&in, UINT64_MAX) == 0 && in.is_complete, "inner resume");
    *ok = pause_inner_reached;
}
static void test_pause_inner(int n) {
    for (int i = 0; i < n; i++) {
        int ok = 0;
        pause_inner_reached = 0;
        linger_t l = linger_launch(pausing_outer, UINT64_MAX, &ok);
        CHECK(l.is_complete && ok, "iteration %d: complete=%d ok=%d", i, l.is_complete, ok);
    }
}

/* The outer function cancels its inner one. */
static void cancelling_outer(void *arg) {
    int *ok = arg;
    struct inner in = {.work = 100000000};
    linger_t l = linger_launch(inner_fn, 200, &in);
    CHECK(!l.is_complete, "inner not preempted");
    CHECK(linger_cancel(&l) == 0 && l.is_cancelled, "inner cancel");
    *ok = !in.done;
}
static void test_cancel_inner(int n) {
    for (int i = 0; i < n; i++) {
        int ok = 0;
        linger_t l = linger_launch(cancelling_outer, UINT64_MAX, &ok);
        CHECK(l.is_complete && ok, "iteration %d", i);
    }
}

/* A chain of functions each launching the next, `depth` levels deep. */
struct chain {
    int depth;
    int deepest;
};
static void chain_fn(void *arg) {
    struct chain *c = arg;
    if (c->depth == 0) {
        c->deepest = 1;
        mix(20000000); /* ~20 ms: must be cut off by the outermost deadline */
        return;
    }
    c->depth--;
    linger_t l = linger_launch(chain_fn, UINT64_MAX, c);
    while (!l.is_complete) CHECK(linger_resume(&l, UINT64_MAX) == 0, "chain resume");
}
static void test_chain(int n) {
    for (int i = 0; i < n; i++) {
        struct chain c = {.depth = 8};
        uint64_t t0 = now_ns();
        linger_t l = linger_launch(chain_fn, 3000, &c);
        uint64_t took = now_ns() - t0;
        CHECK(!l.is_complete, "iteration %d: 8-deep chain with 3 ms outer deadline completed", i);
        /* A stalled machine can take the outer deadline while the levels are
         * being set up; the deepest level's 20 ms keeps it stopped after. */
        while (!l.is_complete && !c.deepest) CHECK(linger_resume(&l, 3000) == 0, "iteration %d: resume down", i);
        CHECK(!l.is_complete, "iteration %d: 8-deep chain completed within its outer deadlines", i);
        CHECK(c.deepest, "iteration %d: the deepest level never ran", i);
        CHECK(took < 50000000ull * slack(), "iteration %d: took %llu us", i, (unsigned long long)(took / 1000));
        CHECK(linger_resume(&l, UINT64_MAX) == 0 && l.is_complete, "iteration %d: finish", i);
    }
}

int main(void) {
    watchdog(60, "test_nested hung (an inner deadline not bounded by the outer one?)");
    test_bounded(iters(10));
    test_inner_shorter(iters(100));
    test_pause_inner(iters(2000));
    test_cancel_inner(iters(200));
    test_chain(iters(10));
    PASS("test_nested");
    return 0;
}
