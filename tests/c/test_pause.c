/*
 * linger_pause: a harmless no-op outside a preemptible function; inside, it
 * hands control back at once and linger_yielded reports it (and not after a
 * preemption or completion); linger_is_preemptible tells inside from outside.
 */
#include "common.h"

struct pauser {
    int pauses;   /* how many times to pause */
    int progress; /* incremented after each pause */
    int inside;   /* linger_is_preemptible() seen inside */
};

static void pauser_fn(void *arg) {
    struct pauser *p = arg;
    p->inside = linger_is_preemptible();
    for (int i = 0; i < p->pauses; i++) {
        linger_pause();
        p->progress++;
    }
}

/* Pauses in a loop with computation in between, under a short deadline:
 * pauses and preemptions mixed. */
struct mixed {
    int rounds;
    int done;
};
static void mixed_fn(void *arg) {
    struct mixed *m = arg;
    for (int i = 0; i < m->rounds; i++) {
        mix(20000 + (uint64_t)(i % 7) * 10000);
        if (i % 3 == 0) linger_pause();
    }
    m->done = 1;
}

int main(void) {
    int n = iters(20000);

    /* Outside any preemptible function. */
    linger_stats_t before = stats_now();
    for (int i = 0; i < n; i++) {
        linger_pause();
        CHECK(!linger_is_preemptible(), "linger_is_preemptible() true outside");
    }
    linger_stats_t after = stats_now();
    CHECK(after.pauses == before.pauses, "pauses outside a function were counted (%llu -> %llu)",
          (unsigned long long)before.pauses, (unsigned long long)after.pauses);
    CHECK(after.launches == before.launches && after.preemptions == before.preemptions,
          "linger_pause outside a function changed the counters");
    /* Also inside a critical section outside any function. */
    linger_critical_begin();
    linger_pause();
    CHECK(linger_critical_end() == 0, "critical_end outside a function");

    /* Inside: each pause hands control back immediately. */
    for (int i = 0; i < iters(2000); i++) {
        struct pauser p = {.pauses = 5};
        linger_stats_t s0 = stats_now();
        linger_t l = linger_launch(pauser_fn, UINT64_MAX, &p);
        CHECK(p.inside, "iteration %d: linger_is_preemptible() false inside", i);
        for (int k = 0; k < 5; k++) {
            CHECK(!l.is_complete && l.continuation, "iteration %d pause %d: not paused", i, k);
            CHECK(linger_yielded(&l), "iteration %d pause %d: linger_yielded false after a pause", i, k);
            CHECK(p.progress == k, "iteration %d pause %d: progress %d", i, k, p.progress);
            CHECK(linger_resume(&l, UINT64_MAX) == 0, "iteration %d: resume", i);
        }
        CHECK(l.is_complete && p.progress == 5, "iteration %d: complete=%d progress=%d", i, l.is_complete, p.progress);
        CHECK(!linger_yielded(&l), "iteration %d: linger_yielded true after completion", i);
        linger_stats_t s1 = stats_now();
        CHECK(s1.pauses == s0.pauses + 5, "iteration %d: pauses %llu -> %llu", i, (unsigned long long)s0.pauses,
              (unsigned long long)s1.pauses);
        CHECK(s1.preemptions == s0.preemptions, "iteration %d: a pause was counted as a preemption", i);
    }

    /* Pauses and preemptions mixed: linger_yielded tells them apart. */
    int yielded = 0, preempted = 0;
    for (int i = 0; i < iters(20); i++) {
        struct mixed m = {.rounds = 300};
        linger_stats_t s0 = stats_now();
        linger_t l = linger_launch(mixed_fn, 50, &m);
        int y = 0, p = 0;
        while (!l.is_complete) {
            if (linger_yielded(&l)) y++;
            else p++;
            CHECK(linger_resume(&l, 50) == 0, "resume");
        }
        linger_stats_t s1 = stats_now();
        CHECK(m.done, "not done");
        /* Every stop is exactly one pause or one preemption. */
        CHECK(y == 100 && (uint64_t)y == s1.pauses - s0.pauses, "iteration %d: %d yielded stops, %llu pauses, want 100",
              i, y, (unsigned long long)(s1.pauses - s0.pauses));
        CHECK((uint64_t)p == s1.preemptions - s0.preemptions, "iteration %d: %d non-yielded stops but %llu preemptions",
              i, p, (unsigned long long)(s1.preemptions - s0.preemptions));
        yielded += y;
        preempted += p;
    }
    fprintf(stderr, "mixed: %d stops by pause, %d by preemption\n", yielded, preempted);
    CHECK(yielded > 0 && preempted > 0, "expected both kinds of stops");
    PASS("test_pause");
    return 0;
}
