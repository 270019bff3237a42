/*
 * The handle table under concurrent use. Four threads share two migratable
 * functions: each resumes, inspects (linger_yielded) and resumes again any
 * of them through its own copies of the handles, while launching and
 * cancelling batches of its own (growing the table past several segments
 * and recycling slots). A resume must either run the function or fail with
 * EBUSY because another thread is running it: every function counts its own
 * runs, which must equal the successful resumes of it, and a function that
 * ran on two threads at once would be caught by its `inside` flag.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "common.h"

#define NTHREADS 4
#define NSHARED 2
#define BATCH 300

struct shared {
    uint64_t runs; /* written only by the function itself */
    atomic_int inside;
    atomic_int overlapped;
    atomic_ullong resumes; /* successful resumes, counted by the callers */
};

static struct shared fns[NSHARED];
static linger_t handles[NSHARED];

static void counter(void *arg) {
    struct shared *s = arg;
    for (;;) {
        if (atomic_fetch_add(&s->inside, 1) != 0) atomic_store(&s->overlapped, 1);
        s->runs++;
        atomic_fetch_sub(&s->inside, 1);
        linger_pause();
    }
}

static void pauser(void *arg) {
    (void)arg;
    for (;;) linger_pause();
}

static pthread_barrier_t start;

static void *worker(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    linger_t mine[NSHARED];
    memcpy(mine, handles, sizeof mine);
    static _Thread_local linger_t own[BATCH];
    pthread_barrier_wait(&start);
    int n = iters(50000);
    for (int i = 0; i < n; i++) {
        int k = (int)(rand_r(&seed) % NSHARED);
        errno = 0;
        int r = linger_resume(&mine[k], UINT64_MAX);
        CHECK(r == 0 || errno == EBUSY, "resume of a shared function: %d", r);
        CHECK(!mine[k].is_complete && !mine[k].is_cancelled, "a shared function ended");
        if (r == 0) atomic_fetch_add(&fns[k].resumes, 1);
        (void)linger_yielded(&mine[k]);
        if (i % 5000 == 0) {
            int m = reduced() ? 20 : BATCH;
            for (int j = 0; j < m; j++) {
                own[j] = linger_launch(pauser, UINT64_MAX, NULL);
                CHECK(own[j].continuation && linger_yielded(&own[j]), "launch %d", j);
            }
            for (int j = 0; j < m; j++) {
                linger_t copy = own[j];
                CHECK(linger_cancel(&own[j]) == 0, "cancel %d", j);
                errno = 0;
                CHECK(linger_resume(&copy, 100) == -1 && errno == EINVAL, "resume of a cancelled function's copy");
            }
        }
    }
    return NULL;
}

int main(void) {
    watchdog(120, "the handle table hung");
    for (int k = 0; k < NSHARED; k++) {
        linger_opts_t o = {.migratable = true};
        handles[k] = linger_launch_opts(counter, 0, &fns[k], &o);
        CHECK(handles[k].continuation, "launch shared %d", k);
    }
    pthread_barrier_init(&start, NULL, NTHREADS);
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0, "spawn");
    for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
    uint64_t total = 0;
    for (int k = 0; k < NSHARED; k++) {
        CHECK(!atomic_load(&fns[k].overlapped), "function %d ran on two threads at once", k);
        CHECK(fns[k].runs == atomic_load(&fns[k].resumes), "function %d ran %llu times for %llu resumes", k,
              (unsigned long long)fns[k].runs, (unsigned long long)atomic_load(&fns[k].resumes));
        total += fns[k].runs;
        CHECK(linger_cancel(&handles[k]) == 0, "cancel shared %d", k);
    }
    fprintf(stderr, "%llu resumes of shared functions\n", (unsigned long long)total);
    PASS("test_handles");
    return 0;
}
