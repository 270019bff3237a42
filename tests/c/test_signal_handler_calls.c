/*
 * linger_launch, linger_resume and linger_cancel called from a signal
 * handler of the program's (a SIGALRM every 100 us) are refused with
 * EDEADLK and change nothing: they are not async-signal-safe. The program's
 * SIGALRM keeps being delivered (it used to be left blocked), and a call
 * made before the runtime is initialised returns at once (it used to hang).
 */
#include "common.h"

#include <sys/time.h>

static volatile sig_atomic_t alarms;
static volatile sig_atomic_t refused;
static volatile sig_atomic_t accepted;
static linger_t *volatile target; /* a paused function of main's, or NULL */

static void spin_fn(void *arg) {
    (void)arg;
    for (;;) mix(1000);
}

static void on_alarm(int sig) {
    (void)sig;
    int e = errno;
    alarms++;
    linger_t l = linger_launch(spin_fn, 50, NULL);
    if (!l.is_complete && !l.continuation && errno == EDEADLK)
        refused++;
    else
        accepted++;
    linger_t *t = target;
    if (t) {
        if (linger_resume(t, 50) == -1 && errno == EDEADLK) refused++; else accepted++;
        if (linger_cancel(t) == -1 && errno == EDEADLK) refused++; else accepted++;
    }
    errno = e;
}

static void start_timer(void) {
    struct itimerval it = {.it_interval = {0, 100}, .it_value = {0, 100}};
    CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0, "setitimer");
}

static void wait_alarms(int n) {
    int start = alarms;
    uint64_t t0 = now_ns();
    while (alarms - start < n) {
        mix(1000);
        CHECK(now_ns() - t0 < 10ull * 1000 * 1000 * 1000, "SIGALRM no longer delivered (%d of %d)", alarms - start, n);
    }
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction");
    /* Before the runtime is initialised. */
    start_timer();
    wait_alarms(50);
    CHECK(accepted == 0 && refused >= 50, "calls before init: %d accepted, %d refused", (int)accepted, (int)refused);

    /* While main launches, resumes and cancels functions of its own. */
    for (int it = 0; it < iters(400); it++) {
        linger_t l = linger_launch(spin_fn, 20, NULL);
        CHECK(l.continuation, "launch");
        target = &l;
        for (int k = 0; k < 5; k++) CHECK(linger_resume(&l, 20) == 0 && !l.is_complete, "resume");
        target = NULL;
        CHECK(linger_cancel(&l) == 0, "cancel");
        wait_alarms(1);
    }
    CHECK(accepted == 0, "%d calls from the handler accepted", (int)accepted);
    wait_alarms(100);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("ok: %d alarms, %d refused\n", (int)alarms, (int)refused);
    return 0;
}
