/*
 * A function left by longjmp to a setjmp of its caller skipped the
 * runtime's way back: the thread still had it as its current function, and
 * every later launch on the thread crashed (SIGSEGV). The next launch or
 * resume now sees the caller running off that function's stack, above the
 * point where it switched the function in, and takes the function off the
 * thread. The function is lost (its handle stays busy); everything after
 * works. Loops over: a jump out at the first run, one after a pause (out of
 * a resume), and one out of a nested function into its enclosing one.
 */
#include "common.h"

#include <setjmp.h>

static jmp_buf out;

static void jumper(void *arg) {
    int pause_first = *(int *)arg;
    mix(2000);
    if (pause_first) linger_pause();
    errno = 4242;
    longjmp(out, 1);
}

/* Checks that the thread works normally: a preempted function finishes. */
static void works(int it) {
    struct mix_job j = {.n = 200000};
    linger_t l = linger_launch(mix_job_fn, 20, &j);
    CHECK(l.is_complete || l.continuation, "launch after the jump failed (iteration %d)", it);
    while (!l.is_complete) CHECK(linger_resume(&l, 20) == 0, "resume after the jump (iteration %d)", it);
    CHECK(j.result == mix(200000), "wrong result");
    CHECK(!linger_is_preemptible(), "still inside a function after the jump (iteration %d)", it);
}

static jmp_buf inner_out;
static int nested_ok;

static void inner_jumper(void *arg) {
    (void)arg;
    mix(1000);
    longjmp(inner_out, 1);
}

static void outer(void *arg) {
    (void)arg;
    if (setjmp(inner_out) == 0) {
        linger_launch(inner_jumper, 1000000, NULL);
        return; /* not reached */
    }
    /* Back in this function's own code, with the inner one left behind. */
    struct mix_job j = {.n = 50000};
    linger_t l = linger_launch(mix_job_fn, 1000000, &j);
    nested_ok = l.is_complete && j.result == mix(50000) && linger_is_preemptible();
}

static int pause_first;
static linger_t jumped;

int main(void) {
    static int n, it; /* static: kept across the longjmp */
    n = iters(300);
    for (it = 0; it < n; it++) {
        pause_first = it % 2;
        jumped = (linger_t){0};
        if (setjmp(out) == 0) {
            jumped = linger_launch(jumper, 1000000, &pause_first);
            CHECK(pause_first && jumped.continuation, "launch returned");
            linger_resume(&jumped, 1000000);
            CHECK(0, "resume returned");
        }
        works(it);
        if (pause_first) {
            errno = 0;
            CHECK(linger_resume(&jumped, 100) == -1 && errno == EBUSY, "the lost function's handle is not busy");
        }
        nested_ok = 0;
        linger_t o = linger_launch(outer, 1000000, NULL);
        CHECK(o.is_complete && nested_ok, "nested jump out (iteration %d)", it);
        works(it);
    }
    puts("ok");
    return 0;
}
