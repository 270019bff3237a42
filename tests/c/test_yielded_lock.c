/*
 * linger_yielded() called inside a preemptible function reads the handle
 * table: it must never be stopped holding anything there, or the caller's
 * next linger_resume would hang (it once took the table's lock). A function
 * that calls it in a loop is preempted thousands of times while its caller
 * resumes it and another function; the watchdog reports a hang.
 */
#include "common.h"

static void pauser(void *arg) {
    (void)arg;
    for (;;) linger_pause();
}

struct asker {
    linger_t *other;
    volatile uint64_t calls;
    volatile int stop;
};

static void ask(void *arg) {
    struct asker *a = arg;
    while (!a->stop) {
        linger_yielded(a->other);
        a->calls++;
    }
}

int main(void) {
    watchdog(60, "a resume deadlocked on the handle table (linger_yielded stopped holding it)");
    linger_t other = linger_launch(pauser, UINT64_MAX, NULL);
    CHECK(other.continuation && linger_yielded(&other), "paused function");
    struct asker a = {.other = &other};
    linger_t l = linger_launch(ask, 0, &a);
    CHECK(l.continuation, "launch");
    int n = iters(20000);
    for (int i = 0; i < n; i++) {
        CHECK(linger_resume(&l, 20) == 0, "resume the asker");
        CHECK(linger_resume(&other, 20) == 0, "resume the other");
    }
    a.stop = 1;
    while (!l.is_complete) CHECK(linger_resume(&l, 1000) == 0, "finish");
    CHECK(linger_cancel(&other) == 0, "cancel");
    fprintf(stderr, "%d slices, %llu calls\n", n, (unsigned long long)a.calls);
    PASS("test_yielded_lock");
    return 0;
}
