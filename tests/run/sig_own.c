/*
 * The program's own signals behave exactly as in a plain run; the counts of
 * delivered signals match:
 *   raise, kill(getpid()), pthread_kill(self), sigqueue with values (queued
 *   real-time signals arrive in order, blocked standard signals coalesce);
 *   SA_RESTART vs no SA_RESTART on a blocking pipe read and write: restarted vs
 *   EINTR; nanosleep/clock_nanosleep/usleep/sleep/poll interrupted by the
 *   program's signal: EINTR (and the remaining time);
 *   alarm(1); setitimer ITIMER_REAL / ITIMER_VIRTUAL / ITIMER_PROF and a POSIX
 *   timer of the program's own ticking during CPU loops;
 *   SA_RESETHAND, SA_NODEFER, sa_mask inside the handler, SA_ONSTACK on a
 *   sigaltstack.
 */
#include "common.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/time.h>

static volatile sig_atomic_t count[NSIG];
static volatile int values[256], nvalues;
static volatile int handler_mask_ok = 1;
static volatile int nested_depth, max_nested;
static volatile uintptr_t handler_sp;
static pthread_t main_thread;
static volatile uint64_t sink;

static void cpu(int i) { mix(20000 + (uint64_t)(i % 5) * 10000, (uint64_t)i); }

static void on_sig(int s) { count[s]++; }
static void on_info(int s, siginfo_t *si, void *uc) {
    (void)uc;
    count[s]++;
    if (si->si_code == SI_QUEUE && nvalues < 256) values[nvalues++] = si->si_value.sival_int;
}
static void on_check_mask(int s) {
    count[s]++;
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    /* own signal blocked (no SA_NODEFER), SIGUSR2 from sa_mask blocked, SIGHUP not */
    if (sigismember(&cur, s) != 1 || sigismember(&cur, SIGUSR2) != 1 || sigismember(&cur, SIGHUP) != 0) handler_mask_ok = 0;
}
static void on_nodefer(int s) {
    count[s]++;
    nested_depth++;
    if (nested_depth > max_nested) max_nested = nested_depth;
    if (nested_depth < 3) raise(s);
    nested_depth--;
}
static void on_altstack(int s) {
    count[s]++;
    int local;
    handler_sp = (uintptr_t)&local;
}

static void install(int s, void (*h)(int), int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(s, &sa, NULL) == 0, "sigaction %d", s);
}

static pid_t main_tid;
/* sends SIGUSR1 to main once main sleeps in one of the system calls `arg`
 * (a list ending with -1), and 1 ms later, so the call is well under way */
static const long in_read[] = {SYS_read, -1}, in_write[] = {SYS_write, -1},
                  in_sleep[] = {SYS_nanosleep, SYS_clock_nanosleep, -1}, in_poll[] = {SYS_poll, SYS_ppoll, -1};
static void tkill_usr1_when_blocked(void *arg) {
    wait_blocked_in(main_tid, arg);
    helper_sleep_ms(1);
    pthread_kill(main_thread, SIGUSR1);
}
/* the same, then (5 ms later) makes the pipe readable / writable */
struct then {
    const long *in;
    void (*act)(void *);
    int *fd;
};
static void tkill_then(void *arg) {
    struct then *t = arg;
    tkill_usr1_when_blocked((void *)t->in);
    helper_sleep_ms(5);
    t->act(t->fd);
}
static void write_byte(void *arg) { CHECK(write(*(int *)arg, "d", 1) == 1, "helper write"); }
static void read_some(void *arg) {
    char buf[65536];
    CHECK(read(*(int *)arg, buf, sizeof buf) > 0, "helper read");
}

static void test_counts(int n) {
    install(SIGUSR1, on_sig, SA_RESTART);
    count[SIGUSR1] = 0;
    for (int i = 0; i < n; i++) {
        cpu(i);
        switch (i % 3) {
        case 0: CHECK(raise(SIGUSR1) == 0, "raise"); break;
        case 1: CHECK(kill(getpid(), SIGUSR1) == 0, "kill"); break;
        default: CHECK(pthread_kill(pthread_self(), SIGUSR1) == 0, "pthread_kill"); break;
        }
        CHECK(count[SIGUSR1] == i + 1, "after %d sends, %d deliveries", i + 1, (int)count[SIGUSR1]);
    }
    printf("raise/kill/pthread_kill: %d delivered\n", (int)count[SIGUSR1]);

    /* queued real-time signals while blocked: all arrive, in order, with values */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_info;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGRTMIN + 1, &sa, NULL) == 0, "sigaction");
    CHECK(sigaction(SIGUSR2, &sa, NULL) == 0, "sigaction");
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGRTMIN + 1);
    sigaddset(&set, SIGUSR2);
    CHECK(sigprocmask(SIG_BLOCK, &set, &old) == 0, "block");
    int q = n * 5 > 200 ? 200 : n * 5;
    for (int i = 0; i < q; i++) {
        union sigval v = {.sival_int = 1000 + i};
        CHECK(sigqueue(getpid(), SIGRTMIN + 1, v) == 0, "sigqueue %d", i);
        CHECK(raise(SIGUSR2) == 0, "raise");
        if (i % 16 == 0) cpu(i);
    }
    cpu(1);
    CHECK(count[SIGRTMIN + 1] == 0 && count[SIGUSR2] == 0, "delivered while blocked");
    CHECK(sigprocmask(SIG_SETMASK, &old, NULL) == 0, "unblock");
    CHECK(count[SIGRTMIN + 1] == q, "%d of %d queued signals delivered", (int)count[SIGRTMIN + 1], q);
    CHECK(count[SIGUSR2] == 1, "blocked SIGUSR2 raised %d times delivered %d times (expected 1)", q, (int)count[SIGUSR2]);
    for (int i = 0; i < q; i++) CHECK(values[i] == 1000 + i, "value %d is %d", i, values[i]);
    printf("sigqueue: %d delivered in order; coalesced SIGUSR2: %d\n", (int)count[SIGRTMIN + 1], (int)count[SIGUSR2]);
}

static void test_restart(int n) {
    for (int i = 0; i < 2 * n; i++) {
        int restart = i % 2;
        install(SIGUSR1, on_sig, restart ? SA_RESTART : 0);
        count[SIGUSR1] = 0;
        /* blocking read on a pipe */
        int p[2];
        CHECK(pipe(p) == 0, "pipe");
        cpu(i);
        struct then th = {in_read, write_byte, &p[1]};
        pthread_t t1 = after_ms(0, tkill_then, &th);
        char c;
        errno = 0;
        ssize_t r = read(p[0], &c, 1);
        if (restart)
            CHECK(r == 1 && c == 'd', "read with SA_RESTART returned %zd", r);
        else
            CHECK(r == -1 && errno == EINTR, "read without SA_RESTART returned %zd", r);
        CHECK(count[SIGUSR1] == 1, "SIGUSR1 count %d", (int)count[SIGUSR1]);
        join(t1);
        close(p[0]);
        close(p[1]);

        /* blocking write of one byte into a full pipe */
        CHECK(pipe(p) == 0, "pipe");
        char buf[4096];
        memset(buf, 'w', sizeof buf);
        /* fill without blocking, to the last byte */
        int fl = fcntl(p[1], F_GETFL);
        CHECK(fcntl(p[1], F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK");
        while (write(p[1], buf, sizeof buf) > 0) {
        }
        while (write(p[1], buf, 1) > 0) {
        }
        CHECK(errno == EAGAIN, "fill");
        CHECK(fcntl(p[1], F_SETFL, fl) == 0, "blocking again");
        count[SIGUSR1] = 0;
        cpu(i);
        struct then th2 = {in_write, read_some, &p[0]};
        t1 = after_ms(0, tkill_then, &th2);
        errno = 0;
        ssize_t w = write(p[1], "x", 1);
        if (restart)
            CHECK(w == 1, "write with SA_RESTART returned %zd", w);
        else
            CHECK(w == -1 && errno == EINTR, "write without SA_RESTART returned %zd", w);
        CHECK(count[SIGUSR1] == 1, "SIGUSR1 count %d", (int)count[SIGUSR1]);
        join(t1);
        close(p[0]);
        close(p[1]);

        /* sleeps and poll: EINTR regardless of SA_RESTART */
        for (int form = 0; form < 5; form++) {
            count[SIGUSR1] = 0;
            cpu(i);
            uint64_t t0 = now_ns();
            t1 = after_ms(0, tkill_usr1_when_blocked, (void *)(form == 4 ? in_poll : in_sleep));
            errno = 0;
            int ok = 0;
            const char *name = "?";
            if (form == 0) {
                name = "nanosleep";
                struct timespec req = {5, 0}, rem = {0, 0};
                int rc = nanosleep(&req, &rem);
                ok = rc == -1 && errno == EINTR && (rem.tv_sec > 0 || rem.tv_nsec > 0) && rem.tv_sec < 5;
            } else if (form == 1) {
                name = "clock_nanosleep";
                struct timespec req = {5, 0}, rem = {0, 0};
                int rc = clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &rem);
                ok = rc == EINTR && (rem.tv_sec > 0 || rem.tv_nsec > 0) && rem.tv_sec < 5;
            } else if (form == 2) {
                name = "usleep";
                ok = usleep(5000000) == -1 && errno == EINTR;
            } else if (form == 3) {
                name = "sleep";
                unsigned left = sleep(5);
                ok = left >= 1 && left <= 5;
                if (i == 0) printf("sleep(5) interrupted early returned %u\n", left);
            } else {
                name = "poll";
                ok = poll(NULL, 0, 5000) == -1 && errno == EINTR;
            }
            uint64_t el = now_ns() - t0;
            CHECK(ok, "%s interrupted by the program's SIGUSR1 (%s SA_RESTART) did not fail with EINTR / return the remainder",
                  name, restart ? "with" : "without");
            CHECK(el < 4000 * MS, "%s was not interrupted (took %.1f ms)", name, el / 1e6);
            CHECK(count[SIGUSR1] == 1, "SIGUSR1 count %d", (int)count[SIGUSR1]);
            join(t1);
        }
    }
    printf("SA_RESTART read/write restarted, without: EINTR; sleeps and poll: EINTR: ok x%d\n", n);
}

static volatile sig_atomic_t alarm_fired;
static void on_alarm(int s) {
    (void)s;
    alarm_fired++;
}

static void test_timers(void) {
    install(SIGALRM, on_alarm, SA_RESTART);
    alarm_fired = 0;
    uint64_t t0 = now_ns();
    CHECK(alarm(1) == 0, "alarm");
    uint64_t acc = 0;
    while (!alarm_fired) acc += mix(10000, acc);
    CHECK_ELAPSED(t0, 1000 * MS - MS, "alarm(1)");
    CHECK(alarm_fired == 1, "alarm fired %d times", (int)alarm_fired);
    printf("alarm: ok\n");

    static const int which[] = {ITIMER_REAL, ITIMER_VIRTUAL, ITIMER_PROF};
    static const int sigs[] = {SIGALRM, SIGVTALRM, SIGPROF};
    static const char *const names[] = {"ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF"};
    for (int k = 0; k < 3; k++) {
        install(sigs[k], on_sig, SA_RESTART);
        count[sigs[k]] = 0;
        struct itimerval it = {{0, 2000}, {0, 2000}}, got;
        CHECK(setitimer(which[k], &it, NULL) == 0, "setitimer");
        CHECK(getitimer(which[k], &got) == 0 && got.it_interval.tv_usec == 2000, "getitimer");
        /* 100 ms of CPU time, measured on the process CPU clock */
        struct timespec c0, c1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        for (;;) {
            acc += mix(20000, acc);
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
            if ((c1.tv_sec - c0.tv_sec) * 1000000000L + (c1.tv_nsec - c0.tv_nsec) > 100000000L) break;
        }
        struct itimerval off = {{0, 0}, {0, 0}};
        CHECK(setitimer(which[k], &off, NULL) == 0, "disarm");
        /* 100 ms at 2 ms: ~50 ticks; timer signals may merge, so only a floor */
        CHECK(count[sigs[k]] >= 10, "%s ticked %d times in 100 ms of CPU", names[k], (int)count[sigs[k]]);
    }
    printf("setitimer REAL/VIRTUAL/PROF: ok\n");

    /* a POSIX timer of the program's own */
    install(SIGRTMIN + 2, on_sig, SA_RESTART);
    count[SIGRTMIN + 2] = 0;
    timer_t tid;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = SIGRTMIN + 2;
    CHECK(timer_create(CLOCK_MONOTONIC, &sev, &tid) == 0, "timer_create");
    struct itimerspec its = {{0, 1000000}, {0, 1000000}};
    CHECK(timer_settime(tid, 0, &its, NULL) == 0, "timer_settime");
    t0 = now_ns();
    while (now_ns() - t0 < 100 * MS) acc += mix(20000, acc);
    int overruns = timer_getoverrun(tid);
    CHECK(overruns >= 0, "timer_getoverrun");
    CHECK(timer_delete(tid) == 0, "timer_delete");
    CHECK(count[SIGRTMIN + 2] >= 10, "program's POSIX timer ticked %d times in 100 ms", (int)count[SIGRTMIN + 2]);
    sink = acc;
    printf("timer_create: ok\n");
}

static void test_flags(void) {
    /* SA_RESETHAND: the second raise finds the default action (SIGURG: ignore) */
    install(SIGURG, on_sig, SA_RESETHAND);
    count[SIGURG] = 0;
    raise(SIGURG);
    raise(SIGURG);
    CHECK(count[SIGURG] == 1, "SA_RESETHAND handler ran %d times", (int)count[SIGURG]);
    struct sigaction q;
    CHECK(sigaction(SIGURG, NULL, &q) == 0 && q.sa_handler == SIG_DFL, "SA_RESETHAND did not reset");

    /* sa_mask inside the handler */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_check_mask;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR2);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    count[SIGUSR1] = 0;
    for (int i = 0; i < 20; i++) {
        cpu(i);
        raise(SIGUSR1);
    }
    CHECK(count[SIGUSR1] == 20 && handler_mask_ok, "handler mask wrong (count %d)", (int)count[SIGUSR1]);

    /* SA_NODEFER: the handler can be re-entered */
    install(SIGUSR1, on_nodefer, SA_NODEFER);
    count[SIGUSR1] = 0;
    raise(SIGUSR1);
    CHECK(count[SIGUSR1] == 3 && max_nested == 3, "SA_NODEFER: count %d, depth %d", (int)count[SIGUSR1], max_nested);

    /* SA_ONSTACK: runs on the alternate stack */
    static char alt[256 * 1024];
    stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0}, oss;
    CHECK(sigaltstack(&ss, &oss) == 0, "sigaltstack");
    install(SIGUSR2, on_altstack, SA_ONSTACK);
    for (int i = 0; i < 20; i++) {
        cpu(i);
        handler_sp = 0;
        raise(SIGUSR2);
        CHECK(handler_sp >= (uintptr_t)alt && handler_sp < (uintptr_t)alt + sizeof alt, "SA_ONSTACK handler ran off the alternate stack");
    }
    stack_t now;
    CHECK(sigaltstack(NULL, &now) == 0 && now.ss_sp == alt && now.ss_size == sizeof alt, "sigaltstack query");
    printf("SA_RESETHAND, sa_mask, SA_NODEFER, SA_ONSTACK: ok\n");
}

int main(void) {
    main_thread = pthread_self();
    main_tid = gettid_();
    int n = iters(30);
    test_counts(n);
    test_restart(iters(4));
    test_flags();
    test_timers();
    return 0;
}
