/*
 * A pthread program whose threads share state under a mutex and condition
 * variables: WORKERS threads take job numbers from a counter, compute each
 * (long enough to be preempted with the lock held now and then), and add
 * the results; the main thread waits for them all on a condition variable
 * with a timed wait.
 *
 * tests/c/run.sh runs it as it is (port_jobs), and once more after
 * renaming its calls with tests/c/pthread-to-turq.sed (port_jobs.turq):
 * pthread_mutex_* and pthread_cond_* become turq_mutex_* and turq_cond_*.
 */
#include "common.h"

#include <pthread.h>

enum { WORKERS = 8, JOBS = 4000 };

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t all_done = PTHREAD_COND_INITIALIZER;
static pthread_cond_t go;
static int next_job, done, started;
static uint64_t total;

static void *worker(void *arg) {
    (void)arg;
    CHECK(pthread_mutex_lock(&m) == 0, "lock");
    started++;
    while (started < WORKERS) CHECK(pthread_cond_wait(&go, &m) == 0, "wait go");
    CHECK(pthread_cond_broadcast(&go) == 0, "broadcast");
    for (;;) {
        if (next_job == JOBS) break;
        int job = next_job++;
        uint64_t r = (uint64_t)job * 3 + 1;
        if (job % 50 == 0) spin_for_ns(200000); /* a long section now and then */
        CHECK(pthread_mutex_unlock(&m) == 0, "unlock");
        mix(1000);
        CHECK(pthread_mutex_lock(&m) == 0, "lock");
        total += r;
        if (++done == JOBS) CHECK(pthread_cond_signal(&all_done) == 0, "signal");
    }
    CHECK(pthread_mutex_unlock(&m) == 0, "unlock");
    return NULL;
}

int main(void) {
    pthread_t t[WORKERS];
    CHECK(pthread_cond_init(&go, NULL) == 0, "cond init");
    for (int i = 0; i < WORKERS; i++) CHECK(pthread_create(&t[i], NULL, worker, NULL) == 0, "create");
    CHECK(pthread_mutex_lock(&m) == 0, "lock");
    while (done < JOBS) {
        struct timespec at;
        clock_gettime(CLOCK_REALTIME, &at);
        at.tv_sec += 1;
        int e = pthread_cond_timedwait(&all_done, &m, &at);
        CHECK(e == 0 || e == ETIMEDOUT, "timedwait: %d", e);
    }
    CHECK(pthread_mutex_unlock(&m) == 0, "unlock");
    for (int i = 0; i < WORKERS; i++) CHECK(pthread_join(t[i], NULL) == 0, "join");
    CHECK(pthread_mutex_trylock(&m) == 0 && pthread_mutex_unlock(&m) == 0, "trylock");
    uint64_t want = (uint64_t)JOBS * (JOBS - 1) / 2 * 3 + JOBS;
    CHECK(total == want, "total %lu, want %lu", (unsigned long)total, (unsigned long)want);
    CHECK(pthread_cond_destroy(&go) == 0 && pthread_cond_destroy(&all_done) == 0, "cond destroy");
    CHECK(pthread_mutex_destroy(&m) == 0, "destroy");
    printf("ok: %d jobs on %d threads\n", JOBS, WORKERS);
    return 0;
}
