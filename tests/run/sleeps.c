/*
 * The sleep family sleeps its full duration: sleep, usleep, nanosleep,
 * clock_nanosleep (relative and TIMER_ABSTIME, CLOCK_MONOTONIC and
 * CLOCK_REALTIME). Each sleep follows a little CPU work so that a slice
 * deadline is likely to fall inside the sleep. Durations are measured with
 * CLOCK_MONOTONIC; the upper bound is only a generous sanity bound.
 */
#include "common.h"

static void cpu(int i) { mix(20000 + (uint64_t)(i % 7) * 9000, (uint64_t)i); }

int main(void) {
    uint64_t t0;
    int n = iters(20);

    t0 = now_ns();
    CHECK(sleep(1) == 0, "sleep(1) returned early");
    CHECK_ELAPSED(t0, 1000 * MS, "sleep(1)");
    printf("sleep: ok\n");

    for (int i = 0; i < n; i++) {
        cpu(i);
        unsigned us = 2000 + (unsigned)(i % 5) * 1000;
        t0 = now_ns();
        CHECK(usleep(us) == 0, "usleep(%u)", us);
        CHECK_ELAPSED(t0, us * 1000ull, "usleep");
    }
    printf("usleep: ok x%d\n", n);

    for (int i = 0; i < n; i++) {
        cpu(i);
        struct timespec req = {0, 2000000L + (i % 5) * 1000000L}, rem = {123, 456};
        t0 = now_ns();
        int rc = nanosleep(&req, (i % 2) ? &rem : NULL);
        CHECK(rc == 0, "nanosleep returned %d", rc);
        CHECK_ELAPSED(t0, (uint64_t)req.tv_nsec, "nanosleep");
        /* rem is written only on EINTR */
        if (i % 2) CHECK(rem.tv_sec == 123 && rem.tv_nsec == 456, "nanosleep touched rem on success");
    }
    printf("nanosleep: ok x%d\n", n);

    static const clockid_t clocks[] = {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME};
    for (int i = 0; i < n; i++) {
        cpu(i);
        clockid_t c = clocks[i % 3];
        struct timespec req = {0, 2000000L + (i % 5) * 1000000L}, rem = {7, 7};
        t0 = now_ns();
        int rc = clock_nanosleep(c, 0, &req, &rem);
        CHECK(rc == 0, "clock_nanosleep(clock %d, relative) returned %d", (int)c, rc);
        CHECK_ELAPSED(t0, (uint64_t)req.tv_nsec, "clock_nanosleep relative");
        CHECK(rem.tv_sec == 7 && rem.tv_nsec == 7, "clock_nanosleep touched rem on success");
    }
    printf("clock_nanosleep relative: ok x%d\n", n);

    for (int i = 0; i < n; i++) {
        cpu(i);
        clockid_t c = clocks[i % 3];
        struct timespec now, until;
        CHECK(clock_gettime(c, &now) == 0, "clock_gettime");
        uint64_t d = 2000000ull + (uint64_t)(i % 5) * 1000000ull;
        until = now;
        until.tv_nsec += (long)d;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        t0 = now_ns();
        int rc = clock_nanosleep(c, TIMER_ABSTIME, &until, NULL);
        CHECK(rc == 0, "clock_nanosleep(clock %d, TIMER_ABSTIME) returned %d", (int)c, rc);
        struct timespec after;
        clock_gettime(c, &after);
        CHECK(after.tv_sec > until.tv_sec || (after.tv_sec == until.tv_sec && after.tv_nsec >= until.tv_nsec),
              "clock_nanosleep TIMER_ABSTIME woke before its deadline on clock %d", (int)c);
        CHECK(now_ns() - t0 < d + 2000 * MS * slack(), "clock_nanosleep absolute took too long");
    }
    printf("clock_nanosleep absolute: ok x%d\n", n);

    /* one long sleep of each kind: many slice deadlines pass inside it */
    t0 = now_ns();
    CHECK(usleep(150000) == 0, "usleep(150 ms)");
    CHECK_ELAPSED(t0, 150 * MS, "usleep(150 ms)");
    struct timespec req = {0, 150000000L};
    t0 = now_ns();
    CHECK(nanosleep(&req, &req) == 0, "nanosleep(150 ms)");
    CHECK_ELAPSED(t0, 150 * MS, "nanosleep(150 ms)");
    req.tv_nsec = 150000000L;
    t0 = now_ns();
    CHECK(clock_nanosleep(CLOCK_MONOTONIC, 0, &req, NULL) == 0, "clock_nanosleep(150 ms)");
    CHECK_ELAPSED(t0, 150 * MS, "clock_nanosleep(150 ms)");
    printf("long sleeps: ok\n");

    /* zero-length and invalid requests behave as usual */
    req.tv_sec = 0;
    req.tv_nsec = 0;
    CHECK(nanosleep(&req, NULL) == 0, "nanosleep(0)");
    CHECK(usleep(0) == 0, "usleep(0)");
    CHECK(sleep(0) == 0, "sleep(0)");
    req.tv_nsec = 2000000000L;
    errno = 0;
    CHECK(nanosleep(&req, NULL) == -1 && errno == EINVAL, "nanosleep with tv_nsec out of range");
    CHECK(clock_nanosleep(CLOCK_MONOTONIC, 0, &req, NULL) == EINVAL, "clock_nanosleep with tv_nsec out of range");
    printf("edge cases: ok\n");
    return 0;
}
