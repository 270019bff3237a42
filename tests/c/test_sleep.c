/*
 * The sleep family inside preemptible functions resumed in 1 ms slices:
 * nanosleep, usleep, clock_nanosleep (relative and absolute) and sleep sleep
 * their full duration in total across preemptions and report success; only
 * the program's own signals interrupt them (EINTR with the remaining time);
 * bad arguments give the same errors as libc's.
 */
#include <sys/time.h>

#include "common.h"

enum { NANOSLEEP, USLEEP, CLOCK_REL, CLOCK_ABS, SLEEP };
static const char *const names[] = {"nanosleep", "usleep", "clock_nanosleep", "clock_nanosleep(TIMER_ABSTIME)",
                                    "sleep"};

struct sleeper {
    int kind;
    uint64_t ns;   /* requested duration */
    uint64_t took; /* measured inside the function */
    long ret;
    int err;
    struct timespec rem;
};

static void sleeper_fn(void *arg) {
    struct sleeper *s = arg;
    struct timespec req = {.tv_sec = (time_t)(s->ns / 1000000000u), .tv_nsec = (long)(s->ns % 1000000000u)};
    uint64_t t0 = now_ns();
    errno = 0;
    switch (s->kind) {
    case NANOSLEEP: s->ret = nanosleep(&req, &s->rem); break;
    case USLEEP: s->ret = usleep((useconds_t)(s->ns / 1000)); break;
    case CLOCK_REL: s->ret = clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &s->rem); break;
    case CLOCK_ABS: {
        struct timespec abs;
        clock_gettime(CLOCK_MONOTONIC, &abs);
        abs.tv_sec += req.tv_sec;
        abs.tv_nsec += req.tv_nsec;
        if (abs.tv_nsec >= 1000000000) {
            abs.tv_nsec -= 1000000000;
            abs.tv_sec++;
        }
        s->ret = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, NULL);
        break;
    }
    case SLEEP: s->ret = (long)sleep((unsigned)(s->ns / 1000000000u)); break;
    }
    s->err = errno;
    s->took = now_ns() - t0;
}

static void run_sliced(int kind, uint64_t ns, int n) {
    for (int i = 0; i < n; i++) {
        struct sleeper s = {.kind = kind, .ns = ns, .ret = -99};
        linger_stats_t before = stats_now();
        linger_t l = linger_launch(sleeper_fn, 1000, &s);
        int slices = 1;
        while (!l.is_complete) {
            CHECK(linger_resume(&l, 1000) == 0, "%s: resume", names[kind]);
            slices++;
            CHECK(slices < 100000, "%s: never finishes", names[kind]);
        }
        linger_stats_t after = stats_now();
        CHECK(s.ret == 0, "%s iteration %d: returned %ld (errno %d: %s) after %llu us", names[kind], i, s.ret, s.err,
              strerror(s.err), (unsigned long long)(s.took / 1000));
        CHECK(s.took >= ns, "%s iteration %d: slept only %llu us of %llu us across %d slices", names[kind], i,
              (unsigned long long)(s.took / 1000), (unsigned long long)(ns / 1000), slices);
        CHECK(s.took < ns + 100000000ull * slack(), "%s iteration %d: slept %llu us for %llu us", names[kind], i,
              (unsigned long long)(s.took / 1000), (unsigned long long)(ns / 1000));
        uint64_t pre = after.preemptions - before.preemptions;
        /* 1 ms slices of a 50 ms sleep: expect dozens of preemptions. */
        CHECK(pre >= ns / 1000000 / 4, "%s iteration %d: only %llu preemptions in %d slices", names[kind], i,
              (unsigned long long)pre, slices);
    }
}

static volatile sig_atomic_t alarms;
static void on_alarm(int sig) {
    (void)sig;
    alarms++;
}

/* The program's own signal must still interrupt a sleep with EINTR. */
static void own_signal(int kind, int n) {
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction"); /* no SA_RESTART */
    for (int i = 0; i < n; i++) {
        struct sleeper s = {.kind = kind, .ns = 300000000u, .ret = -99}; /* 300 ms */
        linger_t l = linger_launch(sleeper_fn, 1000, &s);
        for (int k = 0; k < 10 && !l.is_complete; k++) CHECK(linger_resume(&l, 1000) == 0, "resume");
        CHECK(!l.is_complete, "%s: 300 ms sleep finished early", names[kind]);
        /* Now run it without a limit and have SIGALRM arrive 20 ms later. */
        int before = alarms;
        struct itimerval it = {.it_value = {.tv_sec = 0, .tv_usec = 20000}};
        CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0, "setitimer");
        CHECK(linger_resume(&l, UINT64_MAX) == 0 && l.is_complete, "resume to completion");
        CHECK(alarms == before + 1, "SIGALRM not delivered");
        if (kind == NANOSLEEP) {
            CHECK(s.ret == -1 && s.err == EINTR, "nanosleep: own signal gave ret %ld errno %d, want -1/EINTR", s.ret,
                  s.err);
        } else {
            CHECK(s.ret == EINTR, "clock_nanosleep: own signal gave %ld, want EINTR", s.ret);
        }
        uint64_t rem = (uint64_t)s.rem.tv_sec * 1000000000u + (uint64_t)s.rem.tv_nsec;
        CHECK(rem > 0 && rem < 300000000u, "%s: remaining time %llu us not in (0, 300 ms)", names[kind],
              (unsigned long long)(rem / 1000));
        CHECK(s.took < 300000000u, "%s: interrupted sleep took %llu us", names[kind],
              (unsigned long long)(s.took / 1000));
        /* rem + elapsed should be about the request. */
        CHECK(rem + s.took >= 290000000u && rem + s.took < 400000000u * slack(),
              "%s: elapsed %llu us + remaining %llu us does not add up to 300 ms", names[kind],
              (unsigned long long)(s.took / 1000), (unsigned long long)(rem / 1000));
    }
    signal(SIGALRM, SIG_DFL);
}

/* The wrappers report bad arguments like libc does, inside a function too. */
static void bad_args_fn(void *arg) {
    int *checked = arg;
    struct timespec bad = {.tv_sec = 0, .tv_nsec = 1000000000};
    struct timespec neg = {.tv_sec = -1, .tv_nsec = 0};
    struct timespec *null_ts = NULL;
    errno = 0;
    CHECK(nanosleep(&bad, NULL) == -1 && errno == EINVAL, "nanosleep(tv_nsec = 1e9): errno %d", errno);
    errno = 0;
    CHECK(nanosleep(&neg, NULL) == -1 && errno == EINVAL, "nanosleep(tv_sec = -1): errno %d", errno);
    errno = 0;
    CHECK(nanosleep(null_ts, NULL) == -1 && errno == EFAULT, "nanosleep(NULL): errno %d", errno);
    CHECK(clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, NULL) == EINVAL, "clock_nanosleep(tv_nsec = 1e9)");
    CHECK(clock_nanosleep((clockid_t)12345, 0, &bad, NULL) == EINVAL, "clock_nanosleep(unknown clock)");
    CHECK(clock_nanosleep(CLOCK_THREAD_CPUTIME_ID, 0, &(struct timespec){0, 1000}, NULL) == EINVAL,
          "clock_nanosleep(CLOCK_THREAD_CPUTIME_ID)");
    CHECK(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &(struct timespec){0, 0}, NULL) == 0,
          "clock_nanosleep(TIMER_ABSTIME, in the past)");
    CHECK(usleep(0) == 0, "usleep(0)");
    CHECK(sleep(0) == 0, "sleep(0)");
    char c;
    errno = 0;
    CHECK(read(-1, &c, 1) == -1 && errno == EBADF, "read(-1): errno %d", errno);
    errno = 0;
    CHECK(write(-1, &c, 1) == -1 && errno == EBADF, "write(-1): errno %d", errno);
    (*checked)++;
}

static void bad_args(int n) {
    int checked = 0;
    bad_args_fn(&checked); /* outside any function */
    for (int i = 0; i < n; i++) {
        linger_t l = linger_launch(bad_args_fn, 100, &checked);
        while (!l.is_complete) CHECK(linger_resume(&l, 100) == 0, "resume");
    }
    CHECK(checked == n + 1, "bad-argument checks ran %d times, want %d", checked, n + 1);
}

int main(void) {
    bad_args(iters(200));
    int n = iters(5);
    run_sliced(NANOSLEEP, 50000000, n);
    run_sliced(USLEEP, 50000000, n);
    run_sliced(CLOCK_REL, 50000000, n);
    run_sliced(CLOCK_ABS, 50000000, n);
    run_sliced(NANOSLEEP, 1500000, iters(100)); /* 1.5 ms: a slice boundary inside */
    run_sliced(SLEEP, 1000000000, 1);
    own_signal(NANOSLEEP, iters(2));
    own_signal(CLOCK_REL, iters(2));
    PASS("test_sleep");
    return 0;
}
