/*
 * Green threads of one worker contending a pthread_mutex_t held across their
 * slices, and a producer/consumer queue on a pthread mutex and condition
 * variables: a green thread that waits in pthread_mutex_lock or
 * pthread_cond_wait is stopped in its futex wait at its slice, so the worker
 * runs the thread that will unlock or signal (no deadlock), and mutual
 * exclusion holds.
 */
#include "common.h"
#include "turquoise.h"

#include <pthread.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static unsigned long counter;
static volatile int inside;

static uint64_t now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000;
}

static void spin_us(uint64_t us) {
    uint64_t end = now_us() + us;
    while (now_us() < end) __asm__ volatile("" ::: "memory");
}

enum { ROUNDS = 50 };

/* Takes the mutex ROUNDS times, holding it ~0.5 ms (five 100 us slices)
 * while it updates the counter in two steps. */
CONTEND_LOCKED(pthread, m, ROUNDS, inside, counter, 500000)

/* A bounded queue: the producer waits while it is full, consumers while it
 * is empty; a 0 tells a consumer to stop. */
enum { ITEMS = 3000, CONSUMERS = 3 };
static pthread_mutex_t qm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static struct fifo q;

FIFO_LOCKED(pthread, q, qm, not_empty, not_full)

static int items;

static void *produce(void *arg) {
    (void)arg;
    for (int i = 1; i <= items; i++) {
        put((unsigned long)i);
        if (i % 64 == 0) spin_us(150); /* now and then across a slice */
    }
    for (int c = 0; c < CONSUMERS; c++) put(0);
    return NULL;
}

static void *consume(void *arg) {
    (void)arg;
    unsigned long sum = 0, v;
    while ((v = take()) != 0) {
        sum += v;
        if (v % 97 == 0) spin_us(150);
    }
    return (void *)sum;
}

int main(void) {
    CHECK(turq_runtime_init(1, 100) == 0, "runtime");

    for (int round = 0; round < iters(10); round++) {
        enum { THREADS = 4 };
        turq_t t[THREADS];
        counter = 0;
        uint64_t start = now_us();
        for (int i = 0; i < THREADS; i++) CHECK(turq_create(&t[i], contend, NULL) == 0, "create %d", i);
        for (int i = 0; i < THREADS; i++) CHECK(turq_join(t[i], NULL) == 0, "join %d", i);
        CHECK(counter == THREADS * ROUNDS, "counter %lu, lost updates", counter);
        if (round == 0) printf("4 threads x %d sections of 0.5 ms: %lu us\n", ROUNDS, (unsigned long)(now_us() - start));
    }

    items = reduced() ? 200 : ITEMS;
    for (int round = 0; round < iters(5); round++) {
        turq_t p, c[CONSUMERS];
        q.head = q.len = 0;
        for (int i = 0; i < CONSUMERS; i++) CHECK(turq_create(&c[i], consume, NULL) == 0, "consumer %d", i);
        CHECK(turq_create(&p, produce, NULL) == 0, "producer");
        unsigned long total = 0;
        for (int i = 0; i < CONSUMERS; i++) {
            void *s;
            CHECK(turq_join(c[i], &s) == 0, "join consumer %d", i);
            total += (unsigned long)s;
        }
        CHECK(turq_join(p, NULL) == 0, "join producer");
        unsigned long want = (unsigned long)items * (items + 1) / 2;
        CHECK(total == want, "consumed %lu, produced %lu", total, want);
    }
    printf("ok\n");
    return 0;
}
