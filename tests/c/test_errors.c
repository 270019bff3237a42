/*
 * Every bad input to the C API fails cleanly with the documented errno
 * (see include/linger.h) and leaves the process and other functions intact.
 */
#include <pthread.h>

#include "common.h"

static int runs;
static void count_fn(void *arg) {
    (void)arg;
    runs++;
}
static void pause_fn(void *arg) {
    (void)arg;
    linger_pause();
    runs++;
}

#define EXPECT_FAIL(call, want_errno, ...)                                                         \
    do {                                                                                           \
        errno = 0;                                                                                 \
        int r_ = (call);                                                                           \
        int e_ = errno;                                                                            \
        CHECK(r_ == -1 && e_ == (want_errno), "%s: returned %d errno %d (%s), want -1 errno %s; ", \
              #call, r_, e_, strerror(e_), #want_errno);                                           \
    } while (0)

static void check_failed_launch(linger_t l, int want_errno, const char *what) {
    int e = errno;
    CHECK(!l.is_complete && !l.is_cancelled && l.continuation == NULL,
          "%s: failed launch returned complete=%d cancelled=%d continuation=%p", what, l.is_complete, l.is_cancelled,
          l.continuation);
    CHECK(e == want_errno, "%s: errno %d (%s), want %d (%s)", what, e, strerror(e), want_errno, strerror(want_errno));
}

/* Handles a made-up continuation could look like. */
static void *const fake_handles[] = {
    (void *)1,
    (void *)0x10,
    (void *)0xdeadbeef,
    (void *)(uintptr_t)-1,
    (void *)(uintptr_t)0x7fffffff00000001ull, /* index 0, absurd generation */
    (void *)(uintptr_t)0x0000000100000000ull, /* index -1 */
    (void *)(uintptr_t)0x00000001000fffffull, /* huge index */
    (void *)&runs,                            /* a real pointer to something else */
};
#define NFAKE (sizeof fake_handles / sizeof fake_handles[0])

static void test_null_and_fake(int n) {
    for (int i = 0; i < n; i++) {
        errno = 0;
        linger_t l = linger_launch(NULL, 100, NULL);
        check_failed_launch(l, EINVAL, "linger_launch(NULL)");
        errno = 0;
        l = linger_launch_opts(NULL, 100, NULL, NULL);
        check_failed_launch(l, EINVAL, "linger_launch_opts(NULL, NULL opts)");
        linger_opts_t o = {0};
        errno = 0;
        l = linger_launch_opts(NULL, 0, NULL, &o);
        check_failed_launch(l, EINVAL, "linger_launch_opts(NULL func)");

        /* The result of a failed launch cannot be resumed; cancel is a no-op. */
        linger_t failed = linger_launch(NULL, 100, NULL);
        EXPECT_FAIL(linger_resume(&failed, 100), EINVAL);
        CHECK(linger_cancel(&failed) == 0 && !failed.is_cancelled, "cancel of a failed launch");
        CHECK(!linger_yielded(&failed), "yielded on a failed launch");

        EXPECT_FAIL(linger_resume(NULL, 100), EINVAL);
        EXPECT_FAIL(linger_resume(NULL, 0), EINVAL);
        EXPECT_FAIL(linger_cancel(NULL), EINVAL);
        CHECK(!linger_yielded(NULL), "linger_yielded(NULL) returned true");
        EXPECT_FAIL(linger_stats(NULL), EINVAL);
        EXPECT_FAIL(linger_last_preemption(NULL), EINVAL);
        EXPECT_FAIL(linger_critical_end(), EINVAL);

        for (size_t k = 0; k < NFAKE; k++) {
            linger_t fake = {.continuation = fake_handles[k]};
            errno = 0;
            int r = linger_resume(&fake, 100);
            CHECK(r == -1 && errno == EINVAL, "resume of made-up handle %p: returned %d errno %d", fake_handles[k], r,
                  errno);
            CHECK(fake.continuation == fake_handles[k] && !fake.is_complete && !fake.is_cancelled,
                  "resume of a made-up handle modified it");
            errno = 0;
            r = linger_cancel(&fake);
            CHECK(r == -1 && errno == EINVAL, "cancel of made-up handle %p: returned %d errno %d", fake_handles[k], r,
                  errno);
            CHECK(!linger_yielded(&fake), "linger_yielded true for a made-up handle %p", fake_handles[k]);
        }
    }
}

static void test_cancelled(int n) {
    for (int i = 0; i < n; i++) {
        runs = 0;
        linger_t l = linger_launch(pause_fn, UINT64_MAX, NULL);
        CHECK(linger_yielded(&l), "not paused");
        CHECK(linger_cancel(&l) == 0, "cancel");
        EXPECT_FAIL(linger_resume(&l, 100), ECANCELED);
        EXPECT_FAIL(linger_resume(&l, 0), ECANCELED);
        EXPECT_FAIL(linger_resume(&l, UINT64_MAX), ECANCELED);
        EXPECT_FAIL(linger_cancel(&l), EALREADY);
        EXPECT_FAIL(linger_cancel(&l), EALREADY);
        CHECK(runs == 0, "cancelled function ran on");
    }
}

static void test_stale(int n) {
    for (int i = 0; i < n; i++) {
        /* A copy taken while paused, after the original completed. */
        linger_t l = linger_launch(pause_fn, UINT64_MAX, NULL);
        linger_t copy = l;
        CHECK(linger_resume(&l, UINT64_MAX) == 0 && l.is_complete, "complete");
        EXPECT_FAIL(linger_resume(&copy, 100), EINVAL);
        EXPECT_FAIL(linger_cancel(&copy), EINVAL);
        CHECK(!linger_yielded(&copy), "stale copy reported as yielded");

        /* A copy taken while paused, after the original was cancelled. */
        l = linger_launch(pause_fn, UINT64_MAX, NULL);
        copy = l;
        CHECK(linger_cancel(&l) == 0, "cancel");
        EXPECT_FAIL(linger_resume(&copy, 100), EINVAL);
        EXPECT_FAIL(linger_cancel(&copy), EINVAL);

        /* A stale copy whose table slot has been reused by a newer function:
         * it must not reach the newer function. */
        l = linger_launch(pause_fn, UINT64_MAX, NULL);
        copy = l;
        CHECK(linger_resume(&l, UINT64_MAX) == 0 && l.is_complete, "complete");
        linger_t newer = linger_launch(pause_fn, UINT64_MAX, NULL);
        CHECK(linger_yielded(&newer), "newer not paused");
        runs = 0;
        EXPECT_FAIL(linger_resume(&copy, UINT64_MAX), EINVAL);
        EXPECT_FAIL(linger_cancel(&copy), EINVAL);
        CHECK(!linger_yielded(&copy), "stale copy reported as yielded (it aliases the newer function?)");
        CHECK(runs == 0, "the stale copy resumed the newer function");
        CHECK(linger_resume(&newer, UINT64_MAX) == 0 && newer.is_complete && runs == 1, "newer damaged");

        /* Both copies of a paused function are the same handle; once one
         * finishes it, the other is stale. */
        l = linger_launch(pause_fn, UINT64_MAX, NULL);
        copy = l;
        CHECK(linger_resume(&copy, UINT64_MAX) == 0 && copy.is_complete, "resume through the copy");
        EXPECT_FAIL(linger_resume(&l, UINT64_MAX), EINVAL);
    }
}

/* A function that tries to resume or cancel itself. */
struct selfref {
    linger_t *me;
    int resume_ret, resume_err, cancel_ret, cancel_err;
};
static void self_fn(void *arg) {
    struct selfref *s = arg;
    errno = 0;
    s->resume_ret = linger_resume(s->me, 100);
    s->resume_err = errno;
    errno = 0;
    s->cancel_ret = linger_cancel(s->me);
    s->cancel_err = errno;
}
static void test_busy(int n) {
    for (int i = 0; i < n; i++) {
        linger_t l;
        struct selfref s = {.me = &l};
        l = linger_launch(self_fn, 0, &s);
        CHECK(l.continuation, "set-up launch");
        CHECK(linger_resume(&l, UINT64_MAX) == 0 && l.is_complete, "self function did not complete");
        CHECK(s.resume_ret == -1 && s.resume_err == EBUSY, "self-resume: %d errno %d, want -1 EBUSY", s.resume_ret,
              s.resume_err);
        CHECK(s.cancel_ret == -1 && s.cancel_err == EBUSY, "self-cancel: %d errno %d, want -1 EBUSY", s.cancel_ret,
              s.cancel_err);
    }
}

/* Continuations belong to their thread unless launched migratable. */
struct cross {
    linger_t *l;
    int ret, err;
};
static void *resume_elsewhere(void *arg) {
    struct cross *c = arg;
    errno = 0;
    c->ret = linger_resume(c->l, UINT64_MAX);
    c->err = errno;
    return NULL;
}
static void *cancel_elsewhere(void *arg) {
    struct cross *c = arg;
    errno = 0;
    c->ret = linger_cancel(c->l);
    c->err = errno;
    return NULL;
}
static void test_threads(int n) {
    for (int i = 0; i < n; i++) {
        runs = 0;
        linger_t l = linger_launch(pause_fn, UINT64_MAX, NULL);
        struct cross c = {.l = &l};
        pthread_t t;
        CHECK(pthread_create(&t, NULL, resume_elsewhere, &c) == 0, "pthread_create");
        pthread_join(t, NULL);
        CHECK(c.ret == -1 && c.err == EXDEV, "resume on another thread: %d errno %d, want -1 EXDEV", c.ret, c.err);
        CHECK(!l.is_complete && linger_yielded(&l) && runs == 0, "the refused resume changed the function");
        CHECK(linger_resume(&l, UINT64_MAX) == 0 && l.is_complete && runs == 1, "resume at home");

        /* Migratable: resumes anywhere. */
        linger_opts_t o = {.migratable = true};
        runs = 0;
        l = linger_launch_opts(pause_fn, UINT64_MAX, NULL, &o);
        CHECK(linger_yielded(&l), "migratable launch");
        c = (struct cross){.l = &l};
        CHECK(pthread_create(&t, NULL, resume_elsewhere, &c) == 0, "pthread_create");
        pthread_join(t, NULL);
        CHECK(c.ret == 0 && l.is_complete && runs == 1, "migratable resume elsewhere: %d errno %d", c.ret, c.err);

        /* Holding signals pins the function to its caller's thread. */
        linger_opts_t both = {.migratable = true, .hold_signals = true};
        runs = 0;
        errno = 0;
        l = linger_launch_opts(pause_fn, UINT64_MAX, NULL, &both);
        CHECK(!l.is_complete && !l.continuation && errno == EINVAL && runs == 0,
              "hold_signals with migratable: errno %d, want EINVAL and no launch", errno);

        /* Cancel from another thread (documented: reclaimed). */
        l = linger_launch(pause_fn, UINT64_MAX, NULL);
        c = (struct cross){.l = &l};
        CHECK(pthread_create(&t, NULL, cancel_elsewhere, &c) == 0, "pthread_create");
        pthread_join(t, NULL);
        CHECK(c.ret == 0 && l.is_cancelled, "cancel from another thread: %d errno %d", c.ret, c.err);
    }
}

static void test_opts(int n) {
    for (int i = 0; i < n; i++) {
        runs = 0;
        linger_opts_t o = {.stack_size = 1}; /* rounded up to the minimum */
        linger_t l = linger_launch_opts(count_fn, UINT64_MAX, NULL, &o);
        CHECK(l.is_complete && runs == 1, "tiny stack_size");
        o.stack_size = 1 << 20;
        l = linger_launch_opts(count_fn, UINT64_MAX, NULL, &o);
        CHECK(l.is_complete && runs == 2, "1 MiB stack_size");
        l = linger_launch_opts(count_fn, UINT64_MAX, NULL, NULL);
        CHECK(l.is_complete && runs == 3, "NULL opts");
        o.stack_size = (size_t)1 << 40; /* 1 TiB: refused */
        errno = 0;
        l = linger_launch_opts(count_fn, UINT64_MAX, NULL, &o);
        int e = errno;
        CHECK(!l.is_complete && !l.is_cancelled && !l.continuation && e != 0,
              "1 TiB stack: complete=%d continuation=%p errno %d", l.is_complete, l.continuation, e);
        CHECK(runs == 3, "the refused function ran");
        if (i == 0) fprintf(stderr, "1 TiB stack_size refused with errno %d (%s)\n", e, strerror(e));
    }
}

int main(void) {
    test_null_and_fake(iters(1000));
    test_cancelled(iters(1000));
    test_stale(iters(1000));
    test_busy(iters(1000));
    test_threads(iters(50));
    test_opts(iters(100));
    PASS("test_errors");
    return 0;
}
