/*
 * Signal dispositions, including those of the preemption signal (SIGRTMAX-3
 * by default), as programs and shells set them. Each phase changes
 * dispositions and then runs a long CPU loop; the runner checks with --stats
 * that main is still preempted. What the program observes must match a
 * plain run:
 *   - installing SIG_IGN, SIG_DFL or a handler on SIGRTMAX-3 with signal() or
 *     sigaction() either succeeds (and then a query returns exactly what was
 *     set, and a SIGRTMAX-3 the program sends itself reaches its handler) or
 *     fails cleanly with EINVAL; the process never dies of it;
 *   - before the program touches it, SIGRTMAX-3 reads as SIG_DFL;
 *   - loops over every signal 1..NSIG-1 (query, set SIG_DFL/SIG_IGN, install a
 *     handler, restore) give the same results as a plain run.
 *
 *   sig_disp ign | dfl | handler | every | shell | all (default)
 */
#include "common.h"

#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000 /* set by glibc on every handler; see sigaction(2) */
#endif

static int loop_ms = 100;
static volatile uint64_t sink;
static volatile sig_atomic_t counts[NSIG];
static volatile int last_value;

static void cpu_loop(void) {
    uint64_t end = cpu_ns() + (uint64_t)loop_ms * MS;
    uint64_t acc = 0;
    while (cpu_ns() < end) acc += mix(20000, acc);
    sink = acc;
}

static void counter(int s) { counts[s]++; }
static void counter_info(int s, siginfo_t *si, void *uc) {
    (void)uc;
    counts[s]++;
    if (si->si_code == SI_QUEUE) last_value = si->si_value.sival_int;
}

static char kind(const struct sigaction *sa) {
    if (sa->sa_handler == SIG_DFL) return 'D';
    if (sa->sa_handler == SIG_IGN) return 'I';
    return 'H';
}

/* Installs *sa on SIGRTMAX-3. Returns 1 if accepted (then checks the query),
 * 0 if refused cleanly. */
static int set_preempt_sig(const struct sigaction *sa, const char *how) {
    int sig = SIGRTMAX - 3;
    struct sigaction got;
    errno = 0;
    int rc = sigaction(sig, sa, NULL);
    if (rc != 0) {
        CHECK(rc == -1 && errno == EINVAL, "%s on SIGRTMAX-3 failed with an unexpected error", how);
        return 0;
    }
    CHECK(sigaction(sig, NULL, &got) == 0, "query SIGRTMAX-3");
    CHECK(got.sa_handler == sa->sa_handler, "%s: query returned handler %p, set %p", how, (void *)got.sa_handler,
          (void *)sa->sa_handler);
    CHECK((got.sa_flags & ~SA_RESTORER) == (sa->sa_flags & ~SA_RESTORER), "%s: query returned flags %#x, set %#x", how,
          got.sa_flags, sa->sa_flags);
    for (int s = 1; s < NSIG; s++) {
        if (s == SIGKILL || s == SIGSTOP) continue;
        CHECK(sigismember(&got.sa_mask, s) == sigismember(&sa->sa_mask, s), "%s: query returned a different sa_mask (signal %d)", how, s);
    }
    return 1;
}

static void phase_ign(void) {
    int sig = SIGRTMAX - 3;
    errno = 0;
    void (*old)(int) = signal(sig, SIG_IGN);
    if (old == SIG_ERR) {
        CHECK(errno == EINVAL, "signal(SIGRTMAX-3, SIG_IGN) failed with an unexpected error");
    } else {
        CHECK(old == SIG_DFL, "signal(SIGRTMAX-3, SIG_IGN) returned previous handler %p, not SIG_DFL", (void *)old);
        struct sigaction got;
        CHECK(sigaction(sig, NULL, &got) == 0 && got.sa_handler == SIG_IGN, "query after SIG_IGN: %c", kind(&got));
        /* the program's own SIGRTMAX-3 is ignored, as asked */
        CHECK(raise(sig) == 0, "raise");
        union sigval v = {.sival_int = 5};
        CHECK(sigqueue(getpid(), sig, v) == 0, "sigqueue");
    }
    cpu_loop();
    struct sigaction dfl = {0};
    dfl.sa_handler = SIG_DFL;
    set_preempt_sig(&dfl, "restore SIG_DFL");
    printf("ign: ok\n");
}

static void phase_dfl(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    set_preempt_sig(&sa, "sigaction(SIGRTMAX-3, SIG_DFL)");
    cpu_loop();
    errno = 0;
    void (*old)(int) = signal(SIGRTMAX - 3, SIG_DFL);
    CHECK(old == SIG_DFL || (old == SIG_ERR && errno == EINVAL), "signal(SIGRTMAX-3, SIG_DFL) returned %p", (void *)old);
    cpu_loop();
    printf("dfl: ok\n");
}

static void phase_handler(void) {
    int sig = SIGRTMAX - 3;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = counter_info;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR2);
    if (set_preempt_sig(&sa, "sigaction(SIGRTMAX-3, handler)")) {
        /* the program's own SIGRTMAX-3 reaches its handler */
        counts[sig] = 0;
        CHECK(raise(sig) == 0, "raise");
        CHECK(counts[sig] == 1, "raise(SIGRTMAX-3): the program's handler ran %d times", (int)counts[sig]);
        union sigval v = {.sival_int = 4711};
        CHECK(sigqueue(getpid(), sig, v) == 0, "sigqueue");
        CHECK(counts[sig] == 2 && last_value == 4711, "sigqueue(SIGRTMAX-3): handler ran %d times, value %d", (int)counts[sig],
              last_value);
        cpu_loop();
        /* the deadline signals are not the program's: its handler saw none */
        CHECK(counts[sig] == 2, "the program's SIGRTMAX-3 handler ran %d times (the program sent 2)", (int)counts[sig]);
    } else {
        cpu_loop();
    }
    /* signal() with a handler, then back to default */
    errno = 0;
    void (*old)(int) = signal(sig, counter);
    CHECK(old != SIG_ERR || errno == EINVAL, "signal(SIGRTMAX-3, handler) failed with an unexpected error");
    cpu_loop();
    struct sigaction dfl = {0};
    dfl.sa_handler = SIG_DFL;
    set_preempt_sig(&dfl, "restore SIG_DFL");
    printf("handler: ok\n");
}

/* Every signal: query; install a counting handler; raise the harmless ones;
 * CPU loop; restore. Prints a line per signal (except SIGRTMAX-3, whose
 * installation may be refused). */
static void phase_every(void) {
    struct sigaction saved[NSIG];
    int have[NSIG];
    /* initialised: stale data on the stack is stale_stack.c's subject */
    memset(saved, 0, sizeof saved);
    for (int s = 1; s < NSIG; s++) {
        errno = 0;
        have[s] = sigaction(s, NULL, &saved[s]) == 0;
    }
    char line[16 * NSIG];
    memset(line, 0, sizeof line); /* see stale_stack.c */
    int len = 0;
    for (int s = 1; s < NSIG; s++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = counter;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        errno = 0;
        int rc = sigaction(s, &sa, NULL);
        int e = rc ? errno : 0;
        if (s == SIGRTMAX - 3) {
            CHECK(rc == 0 || e == EINVAL, "handler on SIGRTMAX-3: unexpected error");
            continue;
        }
        len += snprintf(line + len, sizeof line - (size_t)len, " %d:%s", s, rc == 0 ? "ok" : e == EINVAL ? "EINVAL" : "?");
    }
    printf("install handlers:%s\n", line);
    cpu_loop();
    /* raise the harmless ones (all have handlers now) */
    static const int harmless[] = {SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM, SIGCHLD, SIGCONT, SIGURG, SIGWINCH, SIGTSTP, SIGTTIN, SIGTTOU};
    for (size_t k = 0; k < sizeof harmless / sizeof *harmless; k++) {
        counts[harmless[k]] = 0;
        CHECK(raise(harmless[k]) == 0, "raise %d", harmless[k]);
        CHECK(counts[harmless[k]] == 1, "signal %d delivered %d times", harmless[k], (int)counts[harmless[k]]);
    }
    for (int s = SIGRTMIN; s <= SIGRTMAX; s++) {
        if (s == SIGRTMAX - 3) continue;
        counts[s] = 0;
        CHECK(raise(s) == 0, "raise %d", s);
        CHECK(counts[s] == 1, "signal %d delivered %d times", s, (int)counts[s]);
    }
    cpu_loop();
    len = 0;
    for (int s = 1; s < NSIG; s++) {
        if (!have[s]) continue;
        errno = 0;
        int rc = sigaction(s, &saved[s], NULL);
        if (s == SIGRTMAX - 3) {
            CHECK(rc == 0 || errno == EINVAL, "restoring SIGRTMAX-3: unexpected error");
            continue;
        }
        len += snprintf(line + len, sizeof line - (size_t)len, " %d:%s", s, rc == 0 ? "ok" : errno == EINVAL ? "EINVAL" : "?");
    }
    printf("restore:%s\n", line);
    cpu_loop();
    printf("every: ok\n");
}

/* What shells do at start-up and before running a command. */
static void phase_shell(void) {
    char line[16 * NSIG];
    memset(line, 0, sizeof line); /* see stale_stack.c */
    int len = 0;
    for (int s = 1; s < NSIG; s++) {
        struct sigaction old;
        errno = 0;
        int rc = sigaction(s, NULL, &old);
        len += snprintf(line + len, sizeof line - (size_t)len, " %d:%c", s, rc == 0 ? kind(&old) : errno == EINVAL ? 'E' : '?');
    }
    printf("dispositions at start:%s\n", line);
    len = 0;
    for (int s = 1; s < NSIG; s++) {
        errno = 0;
        void (*old)(int) = signal(s, SIG_DFL);
        if (s == SIGRTMAX - 3) {
            CHECK(old != SIG_ERR || errno == EINVAL, "signal(SIGRTMAX-3, SIG_DFL): unexpected error");
            continue;
        }
        len += snprintf(line + len, sizeof line - (size_t)len, " %d:%s", s,
                        old == SIG_ERR ? (errno == EINVAL ? "EINVAL" : "?") : old == SIG_DFL ? "D" : old == SIG_IGN ? "I" : "H");
    }
    printf("signal(s, SIG_DFL):%s\n", line);
    cpu_loop();
    /* ignore the job-control and terminal signals, as an interactive shell does */
    static const int ign[] = {SIGINT, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE};
    for (size_t k = 0; k < sizeof ign / sizeof *ign; k++) CHECK(signal(ign[k], SIG_IGN) == SIG_DFL, "signal(%d, SIG_IGN)", ign[k]);
    for (size_t k = 0; k < sizeof ign / sizeof *ign; k++) CHECK(raise(ign[k]) == 0, "raise an ignored signal");
    cpu_loop();
    len = 0;
    for (int s = 1; s < NSIG; s++) {
        struct sigaction old;
        errno = 0;
        int rc = sigaction(s, NULL, &old);
        len += snprintf(line + len, sizeof line - (size_t)len, " %d:%c", s, rc == 0 ? kind(&old) : errno == EINVAL ? 'E' : '?');
    }
    printf("dispositions after:%s\n", line);
    for (size_t k = 0; k < sizeof ign / sizeof *ign; k++) signal(ign[k], SIG_DFL);
    printf("shell: ok\n");
}

int main(int argc, char **argv) {
    const char *phase = argc > 1 ? argv[1] : "all";
    loop_ms = (int)env_long("LINGER_TEST_ITERS", 0) ? 20 : 100;
    /* before the program touched it: SIGRTMAX-3 reads as default, unblocked,
     * nothing pending */
    struct sigaction q;
    CHECK(sigaction(SIGRTMAX - 3, NULL, &q) == 0, "query SIGRTMAX-3");
    sigset_t m, p;
    sigemptyset(&m); /* see stale_stack.c */
    sigemptyset(&p);
    CHECK(sigprocmask(SIG_BLOCK, NULL, &m) == 0 && sigpending(&p) == 0, "query mask");
    printf("SIGRTMAX-3 at start: disposition %c, %s, %s\n", kind(&q), sigismember(&m, SIGRTMAX - 3) == 1 ? "blocked" : "unblocked",
           sigismember(&p, SIGRTMAX - 3) == 1 ? "pending" : "not pending");
    int all = strcmp(phase, "all") == 0, known = 0;
    if (all || strcmp(phase, "ign") == 0) phase_ign(), known = 1;
    if (all || strcmp(phase, "dfl") == 0) phase_dfl(), known = 1;
    if (all || strcmp(phase, "handler") == 0) phase_handler(), known = 1;
    if (all || strcmp(phase, "every") == 0) phase_every(), known = 1;
    if (all || strcmp(phase, "shell") == 0) phase_shell(), known = 1;
    CHECK(known, "unknown phase %s", phase);
    return 0;
}
