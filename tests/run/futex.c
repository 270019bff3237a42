/*
 * Raw futex system calls (glibc has no wrapper; programs and language runtimes
 * call syscall(SYS_futex) directly). signal(7): FUTEX_WAIT and
 * FUTEX_WAIT_BITSET are restarted after an SA_RESTART handler when they have
 * no timeout; with a timeout the kernel turns the interruption into EINTR.
 * A plain program without signal handlers never sees EINTR from them:
 *   - FUTEX_WAIT without timeout, woken by another thread: returns 0;
 *   - FUTEX_WAIT and FUTEX_WAIT_BITSET (absolute, CLOCK_MONOTONIC) with a
 *     timeout and nobody waking: ETIMEDOUT after the full timeout.
 */
#include "common.h"

#include <linux/futex.h>
#include <sys/syscall.h>

static int word;

static long futex(int *uaddr, int op, int val, const struct timespec *ts, int val3) {
    return syscall(SYS_futex, uaddr, op, val, ts, NULL, val3);
}

static void wake(void *arg) {
    (void)arg;
    __atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
    futex(&word, FUTEX_WAKE_PRIVATE, 1, NULL, 0);
}

int main(void) {
    int n = iters(20);
    int woken = 0, early = 0;
    for (int i = 0; i < n; i++) {
        __atomic_store_n(&word, 0, __ATOMIC_SEQ_CST);
        mix(30000, (uint64_t)i);
        pthread_t t = after_ms(2 + (unsigned)(i % 3), wake, NULL);
        while (__atomic_load_n(&word, __ATOMIC_SEQ_CST) == 0) {
            errno = 0;
            long rc = futex(&word, FUTEX_WAIT_PRIVATE, 0, NULL, 0);
            CHECK(rc == 0 || errno == EAGAIN, "FUTEX_WAIT without timeout returned %ld", rc);
            if (rc == 0) woken++;
            else early++;
        }
        join(t);
    }
    CHECK(woken + early >= n, "futex loop");
    printf("FUTEX_WAIT woken: ok x%d\n", n);

    for (int i = 0; i < n; i++) {
        __atomic_store_n(&word, 0, __ATOMIC_SEQ_CST);
        mix(30000, (uint64_t)i);
        uint64_t d = (2 + (uint64_t)(i % 3)) * MS;
        uint64_t t0 = now_ns();
        errno = 0;
        long rc;
        if (i % 2) {
            struct timespec rel = {0, (long)d};
            rc = futex(&word, FUTEX_WAIT_PRIVATE, 0, &rel, 0);
        } else {
            struct timespec abs;
            clock_gettime(CLOCK_MONOTONIC, &abs);
            abs.tv_nsec += (long)d;
            if (abs.tv_nsec >= 1000000000L) {
                abs.tv_sec++;
                abs.tv_nsec -= 1000000000L;
            }
            rc = futex(&word, FUTEX_WAIT_BITSET_PRIVATE, 0, &abs, FUTEX_BITSET_MATCH_ANY);
        }
        CHECK(rc == -1 && errno == ETIMEDOUT, "%s with a timeout returned %ld", i % 2 ? "FUTEX_WAIT" : "FUTEX_WAIT_BITSET", rc);
        CHECK_ELAPSED(t0, d - MS / 10, "futex timeout");
    }
    printf("FUTEX_WAIT/FUTEX_WAIT_BITSET timeouts: ok x%d\n", n);
    return 0;
}
