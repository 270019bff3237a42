/*
 * turquoise.h's synchronisation objects (turq_mutex_t, turq_cond_t,
 * turq_sem_t, turq_ec_t) shared by green threads of one worker at 100 us
 * slices and by pthreads: critical sections that outlast a slice (their
 * holders are stopped holding the mutex; the others park), a bounded queue,
 * a semaphore's bound, an event count's wake-ups, timeouts, and the error
 * codes for bad input.
 */
#include "common.h"
#include "turquoise.h"

#include <pthread.h>
#include <stdatomic.h>

static int green(void *(*fn)(void *), void *arg, turq_t *t) { return turq_create(t, fn, arg); }

/* Runs fn(arg) on `ng` green threads and `np` pthreads; joins them all and
 * returns the sum of their results. */
static unsigned long run_all(void *(*fn)(void *), int ng, int np, void **args) {
    turq_t g[16];
    pthread_t p[4];
    unsigned long sum = 0;
    for (int i = 0; i < ng; i++) CHECK(green(fn, args ? args[i] : NULL, &g[i]) == 0, "create %d", i);
    for (int i = 0; i < np; i++) CHECK(pthread_create(&p[i], NULL, fn, args ? args[ng + i] : NULL) == 0, "pthread %d", i);
    for (int i = 0; i < ng; i++) {
        void *r;
        CHECK(turq_join(g[i], &r) == 0, "join %d", i);
        sum += (unsigned long)r;
    }
    for (int i = 0; i < np; i++) {
        void *r;
        CHECK(pthread_join(p[i], &r) == 0, "pthread join %d", i);
        sum += (unsigned long)r;
    }
    return sum;
}

static struct timespec in_ms(long ms) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000;
    if (t.tv_nsec >= 1000000000) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000;
    }
    return t;
}

/* 1. A counter under a mutex, updated in two steps ~0.3 ms apart (three
 * slices): lost updates or two holders at once would show. */
static turq_mutex_t counter_m = TURQ_MUTEX_INITIALIZER;
static unsigned long counter;
static volatile int inside;
static int rounds;

CONTEND_LOCKED(turq, counter_m, rounds, inside, counter, 300000)

/* 2. A bounded queue on a mutex and two condition variables; producers and
 * consumers among green threads and pthreads; every item consumed once. */
enum { PRODUCERS = 2, CONSUMERS = 3 };
static turq_mutex_t qm;
static turq_cond_t not_empty = TURQ_COND_INITIALIZER, not_full;
static struct fifo q;
static int items;
static _Atomic unsigned char *seen;

FIFO_LOCKED(turq, q, qm, not_empty, not_full)

static void *produce(void *arg) {
    unsigned long first = (unsigned long)arg * (unsigned long)items;
    for (int i = 1; i <= items; i++) {
        put(first + (unsigned long)i);
        if (i % 64 == 0) spin_for_ns(150000);
    }
    return NULL;
}

static void *consume(void *arg) {
    (void)arg;
    unsigned long n = 0, v;
    while ((v = take()) != 0) {
        CHECK(atomic_fetch_add(&seen[v], 1) == 0, "item %lu consumed twice", v);
        n++;
        if (v % 97 == 0) spin_for_ns(150000);
    }
    return (void *)n;
}

/* 3. A semaphore of 3 bounds its concurrent holders. */
enum { SEM_HOLDERS = 3 };
static turq_sem_t sem;
static atomic_int holders, most;

static void *hold(void *arg) {
    (void)arg;
    for (int i = 0; i < rounds; i++) {
        CHECK(turq_sem_wait(&sem) == 0, "sem_wait");
        int h = atomic_fetch_add(&holders, 1) + 1;
        CHECK(h <= SEM_HOLDERS, "%d holders", h);
        int m = atomic_load(&most);
        while (h > m && !atomic_compare_exchange_weak(&most, &m, h)) {
        }
        spin_for_ns(200000);
        atomic_fetch_sub(&holders, 1);
        CHECK(turq_sem_post(&sem) == 0, "sem_post");
    }
    return NULL;
}

/* 4. An event count: the producer publishes values one by one without a
 * lock and increments; the consumer waits with the version it read before
 * looking. A lost wake-up would hang it (the watchdog reports that). */
static turq_ec_t ec = TURQ_EC_INITIALIZER;
static atomic_ulong published;
static int ec_items;

static void *ec_produce(void *arg) {
    (void)arg;
    for (int i = 1; i <= ec_items; i++) {
        atomic_store(&published, (unsigned long)i);
        CHECK(turq_ec_inc(&ec) == 0, "inc");
        if (i % 16 == 0) spin_for_ns(20000);
    }
    return NULL;
}

static void *ec_consume(void *arg) {
    (void)arg;
    unsigned long done = 0, waits = 0;
    while (done < (unsigned long)ec_items) {
        uint32_t v;
        CHECK(turq_ec_value(&ec, &v) == 0, "value");
        unsigned long p = atomic_load(&published);
        if (p > done) {
            done = p;
            continue;
        }
        uint32_t now;
        CHECK(turq_ec_wait(&ec, v, &now) == 0, "wait");
        CHECK(now != v, "woken at the same version %u", v);
        waits++;
    }
    return (void *)waits;
}

/* 5. Timeouts, from a green thread and from an OS thread. */
static turq_mutex_t tm = TURQ_MUTEX_INITIALIZER;
static turq_cond_t tc = TURQ_COND_INITIALIZER;

static void expect_timeout(const char *what, int (*f)(const struct timespec *)) {
    uint64_t start = now_ns();
    struct timespec at = in_ms(20);
    CHECK(f(&at) == ETIMEDOUT, "%s: not ETIMEDOUT", what);
    uint64_t took = now_ns() - start;
    CHECK(took >= 19000000, "%s: returned after %lu us", what, (unsigned long)(took / 1000));
    CHECK(took < 2000000000ull * slack(), "%s: returned after %lu us", what, (unsigned long)(took / 1000));
}

static int timed_lock(const struct timespec *at) { return turq_mutex_timedlock(&tm, at); }
static int timed_sem(const struct timespec *at) { return turq_sem_timedwait(&sem, at); }
static int timed_ec(const struct timespec *at) {
    uint32_t v, now = 77;
    CHECK(turq_ec_value(&ec, &v) == 0, "value");
    int e = turq_ec_timedwait(&ec, v, at, &now);
    CHECK(now == 77, "now written on a timeout");
    return e;
}
static int timed_cond(const struct timespec *at) {
    CHECK(turq_mutex_lock(&tm) == 0, "lock");
    int e = turq_cond_timedwait(&tc, &tm, at);
    CHECK(turq_mutex_unlock(&tm) == 0, "held again after the timeout");
    return e;
}

static void *timeouts(void *arg) {
    (void)arg;
    expect_timeout("cond_timedwait", timed_cond);
    expect_timeout("sem_timedwait", timed_sem);
    expect_timeout("ec_timedwait", timed_ec);
    return NULL;
}

static void *try_tm(void *arg) {
    (void)arg;
    expect_timeout("mutex_timedlock", timed_lock);
    CHECK(turq_mutex_trylock(&tm) == EBUSY, "trylock of a held mutex");
    CHECK(turq_mutex_unlock(&tm) == EPERM, "unlock by a non-owner");
    return NULL;
}

/* A waiter that destroy must not free from under it. */
static volatile int cond_flag;
static void *cond_waiter(void *arg) {
    (void)arg;
    CHECK(turq_mutex_lock(&tm) == 0, "lock");
    while (!cond_flag) CHECK(turq_cond_wait(&tc, &tm) == 0, "wait");
    CHECK(turq_mutex_unlock(&tm) == 0, "unlock");
    return NULL;
}

static void bad_input(void) {
    struct timespec at = in_ms(10), bad = {0, 2000000000};
    uint32_t v;
    int iv;
    CHECK(turq_mutex_init(NULL, NULL) == EINVAL, "init NULL");
    CHECK(turq_mutex_lock(NULL) == EINVAL, "lock NULL");
    CHECK(turq_mutex_trylock(NULL) == EINVAL, "trylock NULL");
    CHECK(turq_mutex_timedlock(NULL, &at) == EINVAL, "timedlock NULL");
    CHECK(turq_mutex_timedlock(&tm, NULL) == EINVAL, "timedlock NULL time");
    CHECK(turq_mutex_timedlock(&tm, &bad) == EINVAL, "timedlock bad time");
    CHECK(turq_mutex_unlock(NULL) == EINVAL, "unlock NULL");
    CHECK(turq_mutex_destroy(NULL) == EINVAL, "destroy NULL");
    CHECK(turq_cond_init(NULL, NULL) == EINVAL, "cond init NULL");
    CHECK(turq_cond_wait(NULL, &tm) == EINVAL && turq_cond_wait(&tc, NULL) == EINVAL, "cond_wait NULL");
    CHECK(turq_cond_timedwait(&tc, &tm, NULL) == EINVAL, "cond_timedwait NULL time");
    CHECK(turq_cond_signal(NULL) == EINVAL && turq_cond_broadcast(NULL) == EINVAL, "signal NULL");
    CHECK(turq_cond_destroy(NULL) == EINVAL, "cond destroy NULL");
    CHECK(turq_sem_init(NULL, 0) == EINVAL, "sem init NULL");
    CHECK(turq_sem_wait(NULL) == EINVAL && turq_sem_trywait(NULL) == EINVAL, "sem wait NULL");
    CHECK(turq_sem_timedwait(NULL, &at) == EINVAL && turq_sem_post(NULL) == EINVAL, "sem NULL");
    CHECK(turq_sem_getvalue(NULL, &iv) == EINVAL && turq_sem_getvalue(&sem, NULL) == EINVAL, "getvalue NULL");
    CHECK(turq_sem_destroy(NULL) == EINVAL, "sem destroy NULL");
    CHECK(turq_ec_init(NULL) == EINVAL && turq_ec_value(NULL, &v) == EINVAL, "ec NULL");
    CHECK(turq_ec_inc(NULL) == EINVAL && turq_ec_add(NULL, 1) == EINVAL, "ec inc NULL");
    CHECK(turq_ec_wait(NULL, 0, &v) == EINVAL && turq_ec_timedwait(NULL, 0, &at, &v) == EINVAL, "ec wait NULL");
    CHECK(turq_ec_destroy(NULL) == EINVAL, "ec destroy NULL");

    /* Attributes are not supported yet. */
    CHECK(turq_mutex_init(&qm, (const turq_mutexattr_t *)&at) == EINVAL, "mutex attr");
    CHECK(turq_cond_init(&tc, (const turq_condattr_t *)&at) == EINVAL, "cond attr");

    /* Uninitialised storage, another kind's object, destroyed objects. */
    turq_mutex_t junk;
    memset(&junk, 0xab, sizeof junk);
    CHECK(turq_mutex_lock(&junk) == EINVAL && turq_mutex_destroy(&junk) == EINVAL, "uninitialised mutex");
    CHECK(turq_mutex_lock((turq_mutex_t *)&tc) == EINVAL, "a cond as a mutex");
    CHECK(turq_sem_post((turq_sem_t *)&ec) == EINVAL, "an event count as a semaphore");
    turq_mutex_t m;
    CHECK(turq_mutex_init(&m, NULL) == 0, "init");
    CHECK(turq_mutex_unlock(&m) == EPERM, "unlock of an unlocked mutex");
    CHECK(turq_mutex_lock(&m) == 0, "lock");
    CHECK(turq_mutex_lock(&m) == EDEADLK, "relock by the holder");
    CHECK(turq_mutex_timedlock(&m, &at) == EDEADLK, "timed relock by the holder");
    CHECK(turq_mutex_trylock(&m) == EBUSY, "trylock by the holder");
    CHECK(turq_mutex_destroy(&m) == EBUSY, "destroy locked");
    CHECK(turq_cond_wait(&tc, &tm) == EPERM, "cond_wait without the mutex");
    CHECK(turq_mutex_unlock(&m) == 0, "unlock");
    CHECK(turq_mutex_destroy(&m) == 0, "destroy");
    CHECK(turq_mutex_lock(&m) == EINVAL && turq_mutex_unlock(&m) == EINVAL, "destroyed mutex");
    CHECK(turq_mutex_destroy(&m) == EINVAL, "destroyed twice");

    /* Unlock by a non-owner: a green thread, then a pthread. */
    CHECK(turq_mutex_lock(&tm) == 0, "lock");
    turq_t t;
    CHECK(turq_create(&t, try_tm, NULL) == 0 && turq_join(t, NULL) == 0, "green non-owner");
    pthread_t p;
    CHECK(pthread_create(&p, NULL, try_tm, NULL) == 0 && pthread_join(p, NULL) == 0, "pthread non-owner");
    CHECK(turq_mutex_unlock(&tm) == 0, "unlock");

    /* A condition variable with a waiter cannot be destroyed. */
    cond_flag = 0;
    CHECK(turq_create(&t, cond_waiter, NULL) == 0, "create");
    for (int i = 0; i < 1000; i++) {
        int e = turq_cond_destroy(&tc);
        if (e == EBUSY) break;
        CHECK(e == 0, "cond destroy: %d", e);
        CHECK(turq_cond_init(&tc, NULL) == 0, "cond init");
        usleep(1000);
    }
    CHECK(turq_mutex_lock(&tm) == 0, "lock");
    cond_flag = 1;
    CHECK(turq_cond_broadcast(&tc) == 0, "broadcast");
    CHECK(turq_mutex_unlock(&tm) == 0, "unlock");
    CHECK(turq_join(t, NULL) == 0, "join");

    /* Semaphores: trywait on 0, the maximum. */
    turq_sem_t s;
    CHECK(turq_sem_init(&s, TURQ_SEM_VALUE_MAX + 1u) == EINVAL, "sem above max");
    CHECK(turq_sem_init(&s, 0) == 0, "sem init");
    CHECK(turq_sem_trywait(&s) == EAGAIN, "trywait on 0");
    CHECK(turq_sem_post(&s) == 0 && turq_sem_getvalue(&s, &iv) == 0 && iv == 1, "post: %d", iv);
    CHECK(turq_sem_trywait(&s) == 0 && turq_sem_trywait(&s) == EAGAIN, "trywait");
    CHECK(turq_sem_destroy(&s) == 0 && turq_sem_post(&s) == EINVAL, "destroyed sem");
    CHECK(turq_sem_init(&s, TURQ_SEM_VALUE_MAX) == 0, "sem at max");
    CHECK(turq_sem_post(&s) == EOVERFLOW, "post at max");
    CHECK(turq_sem_getvalue(&s, &iv) == 0 && iv == (int)TURQ_SEM_VALUE_MAX, "value %d", iv);
    CHECK(turq_sem_destroy(&s) == 0, "destroy");

    /* Event counts: add, and a wait on an old version returns at once. */
    turq_ec_t e;
    uint32_t now;
    CHECK(turq_ec_init(&e) == 0 && turq_ec_value(&e, &v) == 0 && v == 0, "ec init");
    CHECK(turq_ec_add(&e, 5) == 0 && turq_ec_wait(&e, 0, &now) == 0 && now == 5, "add: %u", now);
    CHECK(turq_ec_wait(&e, 4, NULL) == 0, "wait, no out");
    CHECK(turq_ec_destroy(&e) == 0 && turq_ec_inc(&e) == EINVAL, "destroyed ec");
    CHECK(turq_ec_init_single(NULL) == EINVAL, "single NULL");
    CHECK(turq_ec_init_single(&e) == 0 && turq_ec_add(&e, 3) == 0 && turq_ec_wait(&e, 0, &now) == 0 && now == 3, "single: %u", now);
    CHECK(turq_ec_timedwait(&e, 3, &at, &now) == ETIMEDOUT, "single: timedwait");
    CHECK(turq_mutex_lock((turq_mutex_t *)&e) == EINVAL, "an event count as a mutex");
    CHECK(turq_ec_destroy(&e) == 0 && turq_ec_value(&e, &v) == EINVAL, "destroyed single ec");
}

int main(void) {
    CHECK(turq_runtime_init(1, 100) == 0, "runtime");
    watchdog(120, "test_turq_sync (a lost wake-up?)");

    bad_input();
    printf("bad input: ok\n");

    CHECK(turq_sem_init(&sem, 0) == 0, "sem init");
    turq_t t;
    CHECK(turq_create(&t, timeouts, NULL) == 0 && turq_join(t, NULL) == 0, "timeouts (green)");
    timeouts(NULL);
    printf("timeouts: ok\n");

    rounds = reduced() ? 5 : 30;
    for (int round = 0; round < iters(3); round++) {
        enum { G = 6, P = 2 };
        counter = 0;
        uint64_t start = now_ns();
        run_all(contend, G, P, NULL);
        CHECK(counter == (unsigned long)(G + P) * rounds, "counter %lu, lost updates", counter);
        if (round == 0) printf("mutex: %d threads x %d sections of 0.3 ms: %lu ms\n", G + P, rounds, (unsigned long)((now_ns() - start) / 1000000));
    }

    items = reduced() ? 200 : 3000;
    seen = calloc((size_t)(PRODUCERS * items + 1), 1);
    CHECK(seen != NULL, "calloc");
    for (int round = 0; round < iters(3); round++) {
        CHECK(turq_mutex_init(&qm, NULL) == 0 && turq_cond_init(&not_full, NULL) == 0, "init");
        q.head = q.len = 0;
        memset((void *)seen, 0, (size_t)(PRODUCERS * items + 1));
        turq_t c[2], p;
        pthread_t cp, pp;
        for (int i = 0; i < 2; i++) CHECK(green(consume, NULL, &c[i]) == 0, "consumer");
        CHECK(pthread_create(&cp, NULL, consume, NULL) == 0, "consumer pthread");
        CHECK(green(produce, (void *)0, &p) == 0, "producer");
        CHECK(pthread_create(&pp, NULL, produce, (void *)1) == 0, "producer pthread");
        CHECK(turq_join(p, NULL) == 0 && pthread_join(pp, NULL) == 0, "join producers");
        for (int i = 0; i < CONSUMERS; i++) put(0);
        unsigned long n = 0;
        void *r;
        for (int i = 0; i < 2; i++) {
            CHECK(turq_join(c[i], &r) == 0, "join consumer");
            n += (unsigned long)r;
        }
        CHECK(pthread_join(cp, &r) == 0, "join consumer pthread");
        n += (unsigned long)r;
        CHECK(n == (unsigned long)(PRODUCERS * items), "consumed %lu of %d", n, PRODUCERS * items);
        for (int i = 1; i <= PRODUCERS * items; i++) CHECK(seen[i] == 1, "item %d seen %d times", i, seen[i]);
        CHECK(turq_cond_destroy(&not_full) == 0 && turq_mutex_destroy(&qm) == 0, "destroy");
    }
    free((void *)seen);
    printf("queue: ok\n");

    CHECK(turq_sem_destroy(&sem) == 0 && turq_sem_init(&sem, SEM_HOLDERS) == 0, "sem");
    run_all(hold, 8, 2, NULL);
    int v;
    CHECK(turq_sem_getvalue(&sem, &v) == 0 && v == SEM_HOLDERS, "value %d at the end", v);
    /* (Under valgrind, which runs one thread at a time, fewer may meet.) */
    CHECK(atomic_load(&most) == SEM_HOLDERS || reduced(), "at most %d holders at once", atomic_load(&most));
    CHECK(turq_sem_destroy(&sem) == 0, "destroy");
    printf("semaphore: ok\n");

    ec_items = reduced() ? 2000 : 200000;
    for (int round = 0; round < iters(4); round++) {
        atomic_store(&published, 0);
        /* Rounds alternate: green consumer and pthread producer, then the reverse. */
        turq_t g;
        pthread_t p;
        void *waits;
        int green_consumes = round % 2 == 0, single = round % 4 >= 2;
        CHECK(turq_ec_destroy(&ec) == 0, "ec destroy");
        CHECK((single ? turq_ec_init_single(&ec) : turq_ec_init(&ec)) == 0, "ec init");
        CHECK(green(green_consumes ? ec_consume : ec_produce, NULL, &g) == 0, "green");
        CHECK(pthread_create(&p, NULL, green_consumes ? ec_produce : ec_consume, NULL) == 0, "pthread");
        CHECK(turq_join(g, green_consumes ? &waits : NULL) == 0, "join");
        CHECK(pthread_join(p, green_consumes ? NULL : &waits) == 0, "join");
        printf("event count%s: %d values, %lu waits (%s consumer)\n", single ? " (single producer)" : "", ec_items, (unsigned long)waits, green_consumes ? "green" : "pthread");
    }
    CHECK(turq_ec_destroy(&ec) == 0 && turq_mutex_destroy(&tm) == 0 && turq_cond_destroy(&tc) == 0, "destroy");
    CHECK(turq_mutex_destroy(&counter_m) == 0 && turq_cond_destroy(&not_empty) == 0, "destroy");
    printf("ok\n");
    return 0;
}
