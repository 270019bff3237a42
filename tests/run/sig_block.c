/*
 * A program cannot stop its own preemption by blocking signals. Each phase
 * blocks everything one way and then runs a long CPU loop; the runner checks
 * (with --stats) that main was preempted many times. What the program itself
 * observes must be what a plain run observes.
 *
 *   sig_block procmask     sigprocmask(SIG_BLOCK, full)
 *   sig_block pthread      pthread_sigmask(SIG_SETMASK, full)
 *   sig_block sa_mask      the loop runs inside a SIGUSR1 handler whose
 *                          sa_mask is full (the signal comes from another
 *                          thread while main computes)
 *   sig_block pselect      the loop alternates with pselect calls made with
 *                          a full mask (while everything is blocked)
 *   sig_block all          everything above, in turn (the default)
 */
#include "common.h"

#include <sys/select.h>

static int loop_ms = 150;
static volatile sig_atomic_t usr1_count, usr2_count;
static volatile uint64_t sink;

static void cpu_loop(void) {
    uint64_t end = cpu_ns() + (uint64_t)loop_ms * MS;
    uint64_t acc = 0;
    while (cpu_ns() < end) acc += mix(20000, acc);
    sink = acc;
}

static void on_usr2(int s) {
    (void)s;
    usr2_count++;
}

static void on_usr1(int s) {
    (void)s;
    usr1_count++;
    cpu_loop(); /* a long handler, run with every signal blocked */
}

static void print_mask(const char *when) {
    sigset_t cur;
    CHECK(sigprocmask(SIG_BLOCK, NULL, &cur) == 0, "query");
    int blocked = 0;
    for (int s = 1; s < NSIG; s++) blocked += sigismember(&cur, s) == 1;
    printf("%s: %d signals blocked, SIGUSR1 %s, SIGRTMAX-3 %s\n", when, blocked,
           sigismember(&cur, SIGUSR1) == 1 ? "blocked" : "unblocked",
           sigismember(&cur, SIGRTMAX - 3) == 1 ? "blocked" : "unblocked");
}

static void pending_usr2_then_unblock(sigset_t *old) {
    /* signals raised while blocked stay pending and arrive once on unblock */
    for (int k = 0; k < 5; k++) raise(SIGUSR2);
    sigset_t pend;
    CHECK(sigpending(&pend) == 0 && sigismember(&pend, SIGUSR2) == 1, "SIGUSR2 not pending");
    CHECK(usr2_count == 0, "SIGUSR2 delivered while blocked");
    CHECK(sigprocmask(SIG_SETMASK, old, NULL) == 0, "restore");
    CHECK(usr2_count == 1, "SIGUSR2 delivered %d times after unblocking", (int)usr2_count);
    usr2_count = 0;
}

static void phase_procmask(void) {
    sigset_t full, old;
    sigfillset(&full);
    CHECK(sigprocmask(SIG_BLOCK, &full, &old) == 0, "sigprocmask");
    cpu_loop();
    print_mask("sigprocmask(SIG_BLOCK, full)");
    pending_usr2_then_unblock(&old);
    printf("procmask: ok\n");
}

static void phase_pthread(void) {
    sigset_t full, old;
    sigfillset(&full);
    int rc = pthread_sigmask(SIG_SETMASK, &full, &old);
    CHECK(rc == 0, "pthread_sigmask returned %d", rc);
    cpu_loop();
    print_mask("pthread_sigmask(SIG_SETMASK, full)");
    pending_usr2_then_unblock(&old);
    printf("pthread: ok\n");
}

static pthread_t main_thread;
static void *send_usr1(void *arg) {
    (void)arg;
    helper_sleep_ms(2);
    CHECK(pthread_kill(main_thread, SIGUSR1) == 0, "pthread_kill");
    return NULL;
}

static void phase_sa_mask(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigfillset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    usr1_count = 0;
    /* delivered by another thread while main computes (so the handler
     * interrupts the program's own code, not libc's) */
    main_thread = pthread_self();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, send_usr1, NULL) == 0, "create");
    uint64_t acc = 0;
    while (usr1_count == 0) acc += mix(2000, acc);
    sink = acc;
    join(t);
    CHECK(usr1_count == 1, "handler ran %d times", (int)usr1_count);
    print_mask("after a handler with a full sa_mask");
    printf("sa_mask: ok\n");
}

static void phase_pselect(void) {
    sigset_t full, old;
    sigfillset(&full);
    CHECK(sigprocmask(SIG_SETMASK, &full, &old) == 0, "block");
    uint64_t end = cpu_ns() + (uint64_t)loop_ms * MS;
    int calls = 0;
    while (cpu_ns() < end) {
        struct timespec ts = {0, 100000};
        CHECK(pselect(0, NULL, NULL, NULL, &ts, &full) == 0, "pselect with a full mask");
        sink += mix(200000, sink);
        calls++;
    }
    CHECK(calls > 0, "no calls");
    CHECK(sigprocmask(SIG_SETMASK, &old, NULL) == 0, "restore");
    printf("pselect: ok\n");
}

int main(int argc, char **argv) {
    const char *phase = argc > 1 ? argv[1] : "all";
    loop_ms = (int)env_long("LINGER_TEST_ITERS", 0) ? 20 : 150;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr2;
    CHECK(sigaction(SIGUSR2, &sa, NULL) == 0, "sigaction");
    int all = strcmp(phase, "all") == 0, known = 0;
    if (all || strcmp(phase, "procmask") == 0) phase_procmask(), known = 1;
    if (all || strcmp(phase, "pthread") == 0) phase_pthread(), known = 1;
    if (all || strcmp(phase, "sa_mask") == 0) phase_sa_mask(), known = 1;
    if (all || strcmp(phase, "pselect") == 0) phase_pselect(), known = 1;
    CHECK(known, "unknown phase %s", phase);
    print_mask("at the end");
    return 0;
}
