/*
 * Stack overflow inside a preemptible function, in forked children: the
 * launch (or resume) must fail with EFAULT and is_cancelled set, nothing
 * may be printed on the program's stderr, and the child must carry on
 * (launch again, overflow again) and exit normally.
 */
#include "common.h"

static int depth_reached;
static volatile int depth_limit = 1 << 30; /* never reached: the stack runs out first */

/* Unbounded recursion with a frame the compiler cannot elide. */
static int recurse(int depth) {
    volatile char pad[512];
    pad[0] = (char)depth;
    depth_reached = depth;
    if (depth >= depth_limit) return 0;
    int r = recurse(depth + 1);
    return r + pad[0];
}

static void overflow_fn(void *arg) {
    (void)arg;
    recurse(0);
}

/* Computes for a while (so it is preempted a few times), then overflows. */
static void late_overflow_fn(void *arg) {
    (void)arg;
    mix(3000000);
    recurse(0);
}

static void ok_fn(void *arg) {
    *(int *)arg = 42;
}

static int child(int rounds) {
    for (int i = 0; i < rounds; i++) {
        /* Overflow during the launch itself. */
        errno = 0;
        linger_t l = linger_launch(overflow_fn, UINT64_MAX, NULL);
        int e = errno;
        CHECK(!l.is_complete && l.is_cancelled && l.continuation == NULL,
              "round %d: after overflow in launch: complete=%d cancelled=%d continuation=%p", i, l.is_complete,
              l.is_cancelled, l.continuation);
        CHECK(e == EFAULT, "round %d: overflow in launch set errno %d (%s), want EFAULT", i, e, strerror(e));
        CHECK(depth_reached > 10, "round %d: recursion depth only %d", i, depth_reached);
        /* The cancelled result behaves like any cancelled function. */
        errno = 0;
        CHECK(linger_resume(&l, 100) == -1 && errno == ECANCELED, "round %d: resume after overflow: errno %d", i,
              errno);
        errno = 0;
        CHECK(linger_cancel(&l) == -1 && errno == EALREADY, "round %d: cancel after overflow: errno %d", i, errno);

        /* Overflow during a resume after some preemptions. */
        l = linger_launch(late_overflow_fn, 200, NULL);
        CHECK(!l.is_complete && l.continuation, "round %d: late overflow function not preempted", i);
        int r;
        do {
            errno = 0;
            r = linger_resume(&l, 200);
        } while (r == 0 && !l.is_complete);
        e = errno;
        CHECK(r == -1 && e == EFAULT, "round %d: overflow in resume: returned %d errno %d (%s), want -1 EFAULT", i, r,
              e, strerror(e));
        CHECK(l.is_cancelled && !l.is_complete && l.continuation == NULL,
              "round %d: after overflow in resume: complete=%d cancelled=%d continuation=%p", i, l.is_complete,
              l.is_cancelled, l.continuation);

        /* Small explicit stack. */
        linger_opts_t o = {.stack_size = 64 * 1024};
        errno = 0;
        l = linger_launch_opts(overflow_fn, UINT64_MAX, NULL, &o);
        CHECK(l.is_cancelled && errno == EFAULT, "round %d: overflow of a 64 KiB stack: cancelled=%d errno %d", i,
              l.is_cancelled, errno);

        /* The runtime still works. */
        int v = 0;
        l = linger_launch(ok_fn, UINT64_MAX, &v);
        CHECK(l.is_complete && v == 42, "round %d: launch after overflow", i);
    }
    linger_stats_t s = stats_now();
    CHECK(s.stack_overflows == (uint64_t)rounds * 3, "stack_overflows counter %llu, want %d",
          (unsigned long long)s.stack_overflows, rounds * 3);
    /* A fault that is not a stack overflow must still kill the process as
     * usual (the library's SIGSEGV handler passes it on): checked by the
     * parent in a separate child. */
    fprintf(stderr, "child: done\n");
    return 0;
}

static int *volatile bad_pointer; /* NULL */
static void segv_fn(void *arg) {
    (void)arg;
    *bad_pointer = 1;
}

static int child_segv(void) {
    linger_launch(segv_fn, UINT64_MAX, NULL);
    fprintf(stderr, "child: survived a NULL dereference\n");
    return 0;
}

static int segv_wrapper(int unused) {
    (void)unused;
    return child_segv();
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

int main(void) {
    static char err[1 << 16];
    int rounds = iters(20);
    int st = run_child(child, rounds, err, sizeof err);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "the child did not exit normally after stack overflows (status 0x%x: %s %d); its stderr:\n%s", st,
          WIFSIGNALED(st) ? "killed by signal" : "exit code", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), err);
    /* Returned (EFAULT, checked by the child) and printed nowhere. */
    int msgs = count(err, "stack overflow");
    CHECK(msgs == 0, "linger printed %d overflow messages on the program's stderr:\n%s", msgs, err);
    CHECK(strstr(err, "child: done"), "child did not finish; its stderr:\n%s", err);

    st = run_child(segv_wrapper, 0, err, sizeof err);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV,
          "a NULL dereference in a preemptible function did not kill the child with SIGSEGV (status 0x%x); "
          "stderr:\n%s", st, err);
    CHECK(!strstr(err, "stack overflow"), "a NULL dereference was reported as a stack overflow:\n%s", err);
    PASS("test_overflow");
    return 0;
}
