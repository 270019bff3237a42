/*
 * 16+ threads running preemptible functions at once. Each thread resumes its
 * own functions in short slices, checks its own counters show preemptions,
 * and checks that an infinite loop launched with a 1 ms timeout comes back
 * promptly, although 2 cores are shared by all the threads. Threads come and
 * go, and a migratable function is resumed on a new thread for every slice.
 */
#include <pthread.h>

#include "common.h"

#define NTHREADS 20

struct worker {
    int id;
    int rounds;
    uint64_t worst_ns;     /* slowest return of a 1 ms launch of an infinite loop */
    uint64_t worst_cpu_ns; /* the most CPU time this thread spent in one */
    uint64_t preemptions, launches, completions;
    int failed_stats;
};

static uint64_t expected(uint64_t n) {
    uint64_t acc = 0;
    for (uint64_t i = 0; i < n; i++) acc = acc * 6364136223846793005u + i;
    return acc;
}

static pthread_barrier_t start;

static linger_t hopper;
static int hop_ret, hop_err;
static void *hop_fn(void *arg) {
    (void)arg;
    errno = 0;
    hop_ret = linger_resume(&hopper, 200);
    hop_err = errno;
    return NULL;
}

/* CPU time of the calling thread: with 20 busy threads on 2 cores, wall time
 * mostly measures waiting for a core. */
static uint64_t cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void *worker_fn(void *arg) {
    struct worker *w = arg;
    pthread_barrier_wait(&start);
    linger_stats_t s0 = stats_now();
    uint64_t want = expected(400000);
    for (int r = 0; r < w->rounds; r++) {
        /* Three functions interleaved in 50-150 us slices. */
        struct mix_job jobs[3];
        linger_t ls[3];
        for (int k = 0; k < 3; k++) {
            jobs[k] = (struct mix_job){.n = 400000};
            ls[k] = linger_launch(mix_job_fn, 50 + 50 * (uint64_t)k, &jobs[k]);
            CHECK(ls[k].is_complete || ls[k].continuation, "thread %d: launch failed", w->id);
        }
        int live;
        do {
            live = 0;
            for (int k = 0; k < 3; k++) {
                if (ls[k].is_complete) continue;
                CHECK(linger_resume(&ls[k], 50 + 50 * (uint64_t)k) == 0, "thread %d: resume", w->id);
                live += !ls[k].is_complete;
            }
        } while (live);
        for (int k = 0; k < 3; k++) CHECK(jobs[k].result == want, "thread %d: wrong result", w->id);

        /* An infinite loop with a 1 ms timeout must come back. */
        volatile int stop = 0;
        uint64_t c0 = cpu_ns(), t0 = now_ns();
        linger_t l = linger_launch(spin_until_fn, 1000, (void *)&stop);
        uint64_t took = now_ns() - t0, cpu = cpu_ns() - c0;
        CHECK(!l.is_complete && l.continuation, "thread %d: infinite loop launch", w->id);
        if (took > w->worst_ns) w->worst_ns = took;
        if (cpu > w->worst_cpu_ns) w->worst_cpu_ns = cpu;
        if (r % 2) {
            CHECK(linger_cancel(&l) == 0, "thread %d: cancel", w->id);
        } else {
            CHECK(linger_resume(&l, 500) == 0 && !l.is_complete, "thread %d: resume infinite loop", w->id);
            stop = 1;
            CHECK(linger_resume(&l, UINT64_MAX) == 0 && l.is_complete, "thread %d: finish loop", w->id);
        }
    }
    linger_stats_t s1 = stats_now();
    w->preemptions = s1.preemptions - s0.preemptions;
    w->launches = s1.launches - s0.launches;
    w->completions = s1.completions - s0.completions;
    return NULL;
}

int main(void) {
    int rounds = iters(10);
    struct worker ws[NTHREADS];
    pthread_t ts[NTHREADS];
    watchdog(100, "test_threads hung: a thread's deadline was lost?");
    CHECK(pthread_barrier_init(&start, NULL, NTHREADS) == 0, "barrier");
    for (int i = 0; i < NTHREADS; i++) {
        ws[i] = (struct worker){.id = i, .rounds = rounds};
        CHECK(pthread_create(&ts[i], NULL, worker_fn, &ws[i]) == 0, "pthread_create");
    }
    uint64_t worst = 0, worst_cpu = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(ts[i], NULL);
        if (ws[i].worst_ns > worst) worst = ws[i].worst_ns;
        if (ws[i].worst_cpu_ns > worst_cpu) worst_cpu = ws[i].worst_cpu_ns;
    }
    for (int i = 0; i < NTHREADS; i++) {
        CHECK(ws[i].launches == (uint64_t)rounds * 4, "thread %d: %llu launches counted, want %d", i,
              (unsigned long long)ws[i].launches, rounds * 4);
        CHECK(ws[i].preemptions >= (uint64_t)rounds * 2, "thread %d: only %llu preemptions", i,
              (unsigned long long)ws[i].preemptions);
        CHECK(ws[i].worst_cpu_ns < 50000000ull * slack(),
              "thread %d: a 1 ms launch of an infinite loop ran for %llu us of CPU time with %d threads", i,
              (unsigned long long)(ws[i].worst_cpu_ns / 1000), NTHREADS);
        CHECK(ws[i].worst_ns < 2000000000ull * slack(),
              "thread %d: a 1 ms launch of an infinite loop returned after %llu us with %d threads", i,
              (unsigned long long)(ws[i].worst_ns / 1000), NTHREADS);
    }
    /* The main thread launched nothing: its counters stay at zero. */
    linger_stats_t mine = stats_now();
    CHECK(mine.launches == 0 && mine.preemptions == 0, "main thread counters polluted by other threads");
    fprintf(stderr, "%d threads x %d rounds: a 1 ms launch of an infinite loop took at worst %llu us of CPU, "
                    "%llu us of wall time\n", NTHREADS, rounds, (unsigned long long)(worst_cpu / 1000),
            (unsigned long long)(worst / 1000));

    /* Threads that come and go, each launching once. */
    for (int k = 0; k < iters(10); k++) {
        for (int i = 0; i < NTHREADS; i++) {
            ws[i] = (struct worker){.id = i, .rounds = 1};
        }
        CHECK(pthread_barrier_destroy(&start) == 0, "barrier");
        CHECK(pthread_barrier_init(&start, NULL, NTHREADS) == 0, "barrier");
        for (int i = 0; i < NTHREADS; i++) CHECK(pthread_create(&ts[i], NULL, worker_fn, &ws[i]) == 0, "create");
        for (int i = 0; i < NTHREADS; i++) pthread_join(ts[i], NULL);
    }
    /* A migratable function hops to a fresh thread for every slice. Not under
     * valgrind: its rt_sigreturn restores the thread pointer saved in the
     * signal frame, so the thread that resumes a function preempted on another
     * thread goes on with that thread's TLS (the kernel leaves it alone). */
    int hop_rounds = getenv("LINGER_TEST_VALGRIND") ? 0 : iters(3);
    if (!hop_rounds) fprintf(stderr, "migratable hops skipped under valgrind\n");
    for (int k = 0; k < hop_rounds; k++) {
        struct mix_job j = {.n = 20000000};
        linger_opts_t o = {.migratable = true};
        hopper = linger_launch_opts(mix_job_fn, 200, &j, &o);
        CHECK(hopper.is_complete || hopper.continuation, "migratable launch failed");
        int hops = 0;
        while (!hopper.is_complete) {
            pthread_t t;
            CHECK(pthread_create(&t, NULL, hop_fn, NULL) == 0, "create");
            pthread_join(t, NULL);
            CHECK(hop_ret == 0, "migratable resume on thread %d failed (errno %d)", hops, hop_err);
            hops++;
        }
        CHECK(j.result == expected(20000000), "migratable function: wrong result after %d hops", hops);
        CHECK(hops > (reduced() ? 0 : 5), "migratable function: only %d hops", hops);
    }
    PASS("test_threads");
    return 0;
}
