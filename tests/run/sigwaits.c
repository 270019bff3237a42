/*
 * Interfaces that wait for signals never restart (signal(7)) and must return
 * only for the program's own signal, as in a plain run:
 *   pause, sigsuspend (also with every signal but the awaited one in its mask),
 *   sigtimedwait (timeout and signal), sigwaitinfo, sigwait (also with a full
 *   set: the preemption signal must never be handed to the program),
 *   signalfd with a full mask (same), poll on a signalfd.
 * Signals come from another thread (pthread_kill, kill, sigqueue) or from
 * ualarm/setitimer after a few ms.
 */
#include "common.h"

#include <poll.h>
#include <sys/signalfd.h>
#include <sys/time.h>


static pthread_t main_thread;
static volatile sig_atomic_t got_usr1, got_alrm;

static void on_usr1(int sig) {
    (void)sig;
    got_usr1++;
}
static void on_alrm(int sig) {
    (void)sig;
    got_alrm++;
}

static pid_t main_tid;
static void tkill_usr1(void *arg) {
    (void)arg;
    CHECK(pthread_kill(main_thread, SIGUSR1) == 0, "pthread_kill");
}
static const long in_pause[] = {SYS_pause, SYS_ppoll, SYS_rt_sigsuspend, -1};
static void tkill_usr1_when_blocked(void *arg) {
    wait_blocked_in(main_tid, in_pause);
    tkill_usr1(arg);
}
static void kill_usr1(void *arg) {
    (void)arg;
    CHECK(kill(getpid(), SIGUSR1) == 0, "kill");
}
static void queue_rt(void *arg) {
    union sigval v = {.sival_int = (int)(intptr_t)arg};
    CHECK(sigqueue(getpid(), SIGRTMIN + 1, v) == 0, "sigqueue");
}

static void install(int sig, void (*h)(int), int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(sig, &sa, NULL) == 0, "sigaction(%d)", sig);
}

static void block(int how, int sig, sigset_t *old) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    CHECK(pthread_sigmask(how, &s, old) == 0, "pthread_sigmask");
}

static void cpu(int i) { mix(20000 + (uint64_t)(i % 5) * 10000, (uint64_t)i); }

int main(void) {
    main_thread = pthread_self();
    main_tid = gettid_();
    int n = iters(15);
    install(SIGUSR1, on_usr1, 0); /* no SA_RESTART */
    install(SIGALRM, on_alrm, 0);
    sigset_t empty, full, usr1;
    sigemptyset(&empty);
    sigfillset(&full);
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);

    /* pause(): woken by a signal from another thread, or by ualarm */
    for (int i = 0; i < n; i++) {
        cpu(i);
        got_usr1 = got_alrm = 0;
        pthread_t t = 0;
        if (i % 2)
            t = after_ms(2 + (unsigned)(i % 3), tkill_usr1_when_blocked, NULL);
        else
            ualarm(20000 + (useconds_t)(i % 3) * 1000, 0); /* generous: pause must come first */
        errno = 0;
        int rc = pause();
        CHECK(rc == -1 && errno == EINTR, "pause returned %d", rc);
        CHECK((i % 2 ? got_usr1 : got_alrm) == 1, "pause returned without the program's signal (usr1=%d alrm=%d)",
              (int)got_usr1, (int)got_alrm);
        if (t) join(t);
    }
    printf("pause: ok x%d\n", n);

    /* sigsuspend: SIGUSR1 blocked, suspended with a mask that lets only it
     * (or: everything the old mask allowed) through */
    for (int i = 0; i < n; i++) {
        sigset_t old;
        block(SIG_BLOCK, SIGUSR1, &old);
        cpu(i);
        got_usr1 = 0;
        pthread_t t = after_ms(2 + (unsigned)(i % 3), tkill_usr1, NULL);
        sigset_t during = old;
        if (i % 2) {
            sigfillset(&during);
        }
        sigdelset(&during, SIGUSR1);
        errno = 0;
        int rc = sigsuspend(&during);
        CHECK(rc == -1 && errno == EINTR, "sigsuspend returned %d", rc);
        CHECK(got_usr1 == 1, "sigsuspend returned without SIGUSR1 (count %d)", (int)got_usr1);
        sigset_t now;
        CHECK(pthread_sigmask(SIG_BLOCK, NULL, &now) == 0, "query");
        CHECK(sigismember(&now, SIGUSR1) == 1, "sigsuspend did not restore the mask");
        join(t);
        CHECK(pthread_sigmask(SIG_SETMASK, &old, NULL) == 0, "restore");
    }
    printf("sigsuspend: ok x%d\n", n);

    /* From here on SIGUSR1 and SIGRTMIN+1 are blocked and fetched synchronously.
     * Helper threads inherit the mask, so process-directed signals stay pending. */
    sigset_t waitset;
    sigemptyset(&waitset);
    sigaddset(&waitset, SIGUSR1);
    sigaddset(&waitset, SIGRTMIN + 1);
    sigset_t orig;
    CHECK(pthread_sigmask(SIG_BLOCK, &waitset, &orig) == 0, "block");

    /* sigtimedwait: nothing arrives -> EAGAIN after the full timeout */
    for (int i = 0; i < n; i++) {
        cpu(i);
        struct timespec ts = {0, 2000000L + (i % 4) * 1000000L};
        uint64_t t0 = now_ns();
        errno = 0;
        int rc = sigtimedwait((i % 2) ? &full : &waitset, NULL, &ts);
        CHECK(rc == -1 && errno == EAGAIN, "sigtimedwait with nothing pending returned %d", rc);
        CHECK_ELAPSED(t0, (uint64_t)ts.tv_nsec, "sigtimedwait");
    }
    printf("sigtimedwait timeout: ok x%d\n", n);

    /* sigtimedwait / sigwaitinfo / sigwait with the awaited set or a full set */
    int counts[3] = {0, 0, 0};
    for (int i = 0; i < 3 * n; i++) {
        int form = i % 3;
        int use_full = (i / 3) % 2;
        cpu(i);
        int value = 1000 + i;
        int expect = (i % 4 == 3) ? SIGRTMIN + 1 : SIGUSR1;
        pthread_t t;
        if (expect == SIGUSR1)
            t = after_ms(2 + (unsigned)(i % 3), (i % 2) ? kill_usr1 : tkill_usr1, NULL);
        else
            t = after_ms(2 + (unsigned)(i % 3), queue_rt, (void *)(intptr_t)value);
        const sigset_t *set = use_full ? &full : &waitset;
        siginfo_t si;
        memset(&si, 0, sizeof si);
        int sig = -1;
        errno = 0;
        if (form == 0) {
            struct timespec ts = {10 * (time_t)slack(), 0};
            sig = sigtimedwait(set, &si, &ts);
        } else if (form == 1) {
            sig = sigwaitinfo(set, &si);
        } else {
            int rc = sigwait(set, &sig);
            CHECK(rc == 0, "sigwait returned %d", rc);
            si.si_signo = sig;
        }
        CHECK(sig == expect, "%s (%s set) returned signal %d, expected %d",
              form == 0 ? "sigtimedwait" : form == 1 ? "sigwaitinfo" : "sigwait", use_full ? "full" : "small", sig, expect);
        if (form != 2) {
            CHECK(si.si_signo == expect, "si_signo %d", si.si_signo);
            if (expect != SIGUSR1) CHECK(si.si_value.sival_int == value && si.si_code == SI_QUEUE, "sigqueue value/code lost");
            else CHECK(si.si_code == SI_USER || si.si_code == SI_TKILL, "iteration %d form %d: si_code %d", i, form, si.si_code);
        }
        counts[form]++;
        join(t);
    }
    printf("sigtimedwait: ok x%d, sigwaitinfo: ok x%d, sigwait: ok x%d\n", counts[0], counts[1], counts[2]);

    /* signalfd: everything blocked (as an event loop does), signalfd over
     * the full set; only the program's signals may come out of it. */
    sigset_t before_full;
    CHECK(sigprocmask(SIG_BLOCK, &full, &before_full) == 0, "block all");
    int sfd = signalfd(-1, &full, SFD_CLOEXEC);
    CHECK(sfd >= 0, "signalfd");
    for (int i = 0; i < n; i++) {
        /* nothing arrives: poll times out */
        cpu(i);
        struct pollfd p = {sfd, POLLIN, 0};
        uint64_t t0 = now_ns();
        int rc = poll(&p, 1, 3);
        CHECK(rc == 0, "poll on an idle signalfd returned %d (revents %#x)", rc, p.revents);
        CHECK_ELAPSED(t0, 3 * MS, "poll(signalfd)");
        /* a blocking read gets exactly the program's signal */
        int expect = (i % 2) ? SIGRTMIN + 1 : SIGUSR1;
        pthread_t t = expect == SIGUSR1 ? after_ms(2, kill_usr1, NULL) : after_ms(2, queue_rt, (void *)(intptr_t)(7 + i));
        cpu(i);
        struct signalfd_siginfo ssi[4];
        ssize_t r = read(sfd, ssi, sizeof ssi);
        CHECK(r == sizeof ssi[0], "read(signalfd) returned %zd", r);
        CHECK((int)ssi[0].ssi_signo == expect, "signalfd delivered signal %u, expected %d", ssi[0].ssi_signo, expect);
        if (expect != SIGUSR1) CHECK(ssi[0].ssi_int == 7 + i, "signalfd lost the sigqueue value");
        join(t);
    }
    close(sfd);
    /* also via poll with a blocking timeout on a signalfd over a small set */
    sfd = signalfd(-1, &waitset, SFD_CLOEXEC | SFD_NONBLOCK);
    CHECK(sfd >= 0, "signalfd");
    for (int i = 0; i < n; i++) {
        pthread_t t = after_ms(2, kill_usr1, NULL);
        struct pollfd p = {sfd, POLLIN, 0};
        CHECK(poll(&p, 1, -1) == 1 && (p.revents & POLLIN), "poll(signalfd) did not report the signal");
        struct signalfd_siginfo ssi;
        CHECK(read(sfd, &ssi, sizeof ssi) == sizeof ssi && ssi.ssi_signo == SIGUSR1, "read after poll");
        CHECK(read(sfd, &ssi, sizeof ssi) == -1 && errno == EAGAIN, "a second signal appeared");
        join(t);
    }
    close(sfd);
    CHECK(sigprocmask(SIG_SETMASK, &before_full, NULL) == 0, "restore");
    printf("signalfd: ok x%d\n", 2 * n);

    CHECK(pthread_sigmask(SIG_SETMASK, &orig, NULL) == 0, "restore");
    sigset_t pend;
    CHECK(sigpending(&pend) == 0, "sigpending");
    for (int s = 1; s < NSIG; s++) {
        if (sigismember(&pend, s) == 1) CHECK(0, "signal %d left pending", s);
    }
    printf("nothing pending: ok\n");
    return 0;
}
