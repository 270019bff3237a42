/*
 * linger_cancel on functions that paused themselves, were preempted in
 * computation, were preempted while blocked in read(), were never started
 * (timeout 0), completed, or were never launched; and that cancelled
 * functions never run again and do not leak their stacks.
 */
#include "common.h"

struct state {
    int started, after_pause, finished;
    int pauses;
};

static void pauser_fn(void *arg) {
    struct state *s = arg;
    s->started++;
    for (int i = 0; i < s->pauses; i++) linger_pause();
    s->after_pause++;
    s->finished++;
}

static void spinner_fn(void *arg) {
    struct state *s = arg;
    s->started++;
    mix(100000000); /* ~100 ms: always preempted */
    s->finished++;
}

static int read_fd = -1;
static void blocked_fn(void *arg) {
    struct state *s = arg;
    char c;
    s->started++;
    (void)!read(read_fd, &c, 1);
    s->finished++;
}

static void quick_fn(void *arg) {
    struct state *s = arg;
    s->started++;
    s->finished++;
}

static void expect_cancelled(linger_t *l, const char *what, int i) {
    errno = 0;
    CHECK(linger_cancel(l) == 0, "%s iteration %d: cancel failed", what, i);
    CHECK(l->is_cancelled && !l->is_complete && l->continuation == NULL,
          "%s iteration %d: after cancel: complete=%d cancelled=%d continuation=%p", what, i, l->is_complete,
          l->is_cancelled, l->continuation);
    CHECK(!linger_yielded(l), "%s iteration %d: cancelled reported as yielded", what, i);
    errno = 0;
    CHECK(linger_resume(l, UINT64_MAX) == -1 && errno == ECANCELED,
          "%s iteration %d: resume after cancel: want -1/ECANCELED, errno %d", what, i, errno);
}

/* Number of lines in /proc/self/maps: stacks leaked by cancel would grow it. */
static int count_maps(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f, "open maps");
    int n = 0, c;
    while ((c = fgetc(f)) != EOF) n += c == '\n';
    fclose(f);
    return n;
}

int main(void) {
    int n = iters(10000);
    int pipefd[2];
    CHECK(pipe(pipefd) == 0, "pipe");
    read_fd = pipefd[0];
    int maps_before = -1;

    for (int i = 0; i < n; i++) {
        if (i == 50) maps_before = count_maps(); /* after the pools warmed up */
        linger_stats_t s0 = stats_now();

        /* Paused by linger_pause: cancel unwinds it. */
        struct state p = {.pauses = 1};
        linger_t l = linger_launch(pauser_fn, UINT64_MAX, &p);
        CHECK(!l.is_complete && l.continuation && linger_yielded(&l), "paused iteration %d: not paused", i);
        expect_cancelled(&l, "paused", i);
        CHECK(p.started == 1 && p.after_pause == 0, "paused iteration %d: ran on after cancel", i);
        linger_stats_t s1 = stats_now();
        /* Counted once, as unwound or reclaimed. (The linger_cancel comment
         * in linger.h says a function that paused itself is unwound, but
         * docs/safety.md says C stops are reclaimed, which is what happens:
         * unwinding through extern "C" frames would abort.) */
        CHECK(s1.cancels_unwound + s1.cancels_reclaimed == s0.cancels_unwound + s0.cancels_reclaimed + 1,
              "paused iteration %d: cancellation not counted", i);
        if (i == 0)
            fprintf(stderr, "cancel of a paused C function counted as %s\n",
                    s1.cancels_unwound > s0.cancels_unwound ? "unwound" : "reclaimed");

        /* Paused several times and resumed once before the cancel. */
        struct state p2 = {.pauses = 3};
        l = linger_launch(pauser_fn, UINT64_MAX, &p2);
        CHECK(linger_resume(&l, UINT64_MAX) == 0 && linger_yielded(&l), "paused2 iteration %d", i);
        expect_cancelled(&l, "paused twice", i);
        CHECK(p2.after_pause == 0, "paused2 iteration %d: ran on after cancel", i);

        /* Preempted in pure computation: cancel reclaims the stack. */
        struct state c = {0};
        if (i % 20 == 0) { /* fewer of these: each takes a slice of real time */
            l = linger_launch(spinner_fn, 100, &c);
            /* A stalled machine can take the deadline before the first store. */
            while (!l.is_complete && !c.started) CHECK(linger_resume(&l, 100) == 0, "resume to start %d", i);
            CHECK(!l.is_complete && l.continuation && !linger_yielded(&l), "preempted iteration %d", i);
            linger_stats_t s2 = stats_now();
            expect_cancelled(&l, "preempted", i);
            linger_stats_t s3 = stats_now();
            CHECK(s3.cancels_reclaimed + s3.cancels_unwound == s2.cancels_reclaimed + s2.cancels_unwound + 1,
                  "preempted iteration %d: no cancel counted", i);
            CHECK(c.started == 1 && c.finished == 0, "preempted iteration %d: started %d finished %d", i, c.started,
                  c.finished);
        }

        /* Preempted while blocked in read(). */
        if (i % 20 == 0) {
            struct state b = {0};
            l = linger_launch(blocked_fn, 200, &b);
            while (!l.is_complete && !b.started) CHECK(linger_resume(&l, 200) == 0, "resume to start %d", i);
            CHECK(!l.is_complete && l.continuation, "blocked iteration %d: not preempted", i);
            expect_cancelled(&l, "blocked in read", i);
            CHECK(b.started == 1 && b.finished == 0, "blocked iteration %d", i);
        }

        /* Set up with timeout 0, never started. */
        struct state z = {0};
        l = linger_launch(quick_fn, 0, &z);
        CHECK(l.continuation, "timeout-0 iteration %d: launch failed", i);
        expect_cancelled(&l, "never started", i);
        CHECK(z.started == 0, "timeout-0 iteration %d: the function ran", i);

        /* Completed: a no-op returning 0 that leaves the state alone. */
        struct state q = {0};
        l = linger_launch(quick_fn, UINT64_MAX, &q);
        CHECK(l.is_complete, "quick iteration %d", i);
        linger_stats_t s4 = stats_now();
        errno = 0;
        CHECK(linger_cancel(&l) == 0, "cancel of completed returned -1 (errno %d)", errno);
        CHECK(l.is_complete && !l.is_cancelled && l.continuation == NULL,
              "cancel of completed changed it: complete=%d cancelled=%d", l.is_complete, l.is_cancelled);
        CHECK(linger_cancel(&l) == 0 && l.is_complete, "second cancel of completed");
        linger_stats_t s5 = stats_now();
        CHECK(s5.cancels_unwound == s4.cancels_unwound && s5.cancels_reclaimed == s4.cancels_reclaimed,
              "cancel of a completed function counted as a cancellation");

        /* Never launched (zero-initialised): also a no-op returning 0. */
        linger_t zero = {0};
        CHECK(linger_cancel(&zero) == 0 && !zero.is_cancelled, "cancel of a zero linger_t");
    }
    int maps_after = count_maps();
    fprintf(stderr, "mappings: %d after warm-up, %d at the end\n", maps_before, maps_after);
    if (maps_before >= 0)
        CHECK(maps_after <= maps_before + 16, "mappings grew from %d to %d: cancelled stacks leak", maps_before,
              maps_after);

    /* The pipe still works after cancelling functions blocked in read(). */
    CHECK(write(pipefd[1], "z", 1) == 1, "write");
    char ch;
    CHECK(read(pipefd[0], &ch, 1) == 1 && ch == 'z', "pipe broken after cancels");
    PASS("test_cancel");
    return 0;
}
