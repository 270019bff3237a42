/*
 * Blocking every signal after the thread's first launch (as programs do
 * before spawning helper threads) must not stop preemption: linger's
 * pthread_sigmask/sigprocmask wrappers keep its signal out of blocked sets,
 * while every other signal is blocked as asked.
 */
#include <pthread.h>

#include "common.h"

static void quick(void *arg) { (void)arg; }

static void forever(void *arg) {
    (void)arg;
    for (;;) __asm__ volatile("");
}

int main(void) {
    watchdog(60, "a launch with a blocked signal mask"); /* SIGALRM gets blocked below: run.sh kills a hang */
    linger_t l = linger_launch(quick, 100, NULL);
    CHECK(l.is_complete, "first launch");
    for (int round = 0; round < iters(4); round++) {
        sigset_t all, old, cur;
        sigfillset(&all);
        if (round % 2)
            CHECK(sigprocmask(round < 2 ? SIG_BLOCK : SIG_SETMASK, &all, &old) == 0, "sigprocmask");
        else
            CHECK(pthread_sigmask(round < 2 ? SIG_BLOCK : SIG_SETMASK, &all, &old) == 0, "pthread_sigmask");
        CHECK(pthread_sigmask(SIG_BLOCK, NULL, &cur) == 0, "query");
        CHECK(sigismember(&cur, SIGUSR1) == 1, "round %d: SIGUSR1 should be blocked", round);
        for (int i = 0; i < iters(20); i++) {
            uint64_t t0 = now_ns();
            linger_t f = linger_launch(forever, 1000, NULL);
            CHECK(!f.is_complete && f.continuation, "round %d/%d: launch did not come back preempted", round, i);
            CHECK(now_ns() - t0 < 1000000000ull * slack(), "round %d/%d: took too long", round, i);
            CHECK(linger_cancel(&f) == 0, "cancel");
        }
        CHECK(pthread_sigmask(SIG_SETMASK, &old, NULL) == 0, "restore");
    }
    PASS("test_sigmask");
    return 0;
}
