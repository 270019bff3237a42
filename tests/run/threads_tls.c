/*
 * Threads created from a preemptible main are ordinary threads; thread-local
 * storage and errno stay right across preemption:
 *   - rounds of pthread_create/join, threads doing CPU work with __thread and
 *     _Thread_local variables and errno of their own, while main computes too;
 *   - main's own TLS and errno survive long loops (errno set, loop, check);
 *   - gettid() == getpid() and pthread_self() unchanged in main;
 *   - pthread_once, pthread_key_create with destructors, detached threads.
 */
#include "common.h"

#include <sys/syscall.h>

static __thread uint64_t tls_a = 11;
static _Thread_local int tls_b[64];
static pthread_key_t key;
static volatile int key_destroyed;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static volatile int once_ran;
static volatile uint64_t sink;

static void key_dtor(void *p) {
    __atomic_add_fetch(&key_destroyed, 1, __ATOMIC_SEQ_CST);
    free(p);
}
static void once_fn(void) {
    mix(200000, 1);
    once_ran++;
}

/* CPU work that keeps checking its thread's TLS and errno. */
static uint64_t worker_body(uint64_t id, int rounds) {
    tls_a = id * 1000003u;
    for (int k = 0; k < 64; k++) tls_b[k] = (int)id + k;
    errno = (int)(id % 100) + 1;
    uint64_t acc = id;
    for (int r = 0; r < rounds; r++) {
        acc ^= mix(20000, acc);
        CHECK(tls_a == id * 1000003u, "thread %llu: __thread variable changed to %llu", (unsigned long long)id,
              (unsigned long long)tls_a);
        for (int k = 0; k < 64; k += 7) CHECK(tls_b[k] == (int)id + k, "thread %llu: _Thread_local array changed", (unsigned long long)id);
        CHECK(errno == (int)(id % 100) + 1, "thread %llu: errno changed to %d", (unsigned long long)id, errno);
    }
    return acc;
}

static void *worker(void *arg) {
    uint64_t id = (uint64_t)(uintptr_t)arg;
    pthread_once(&once, once_fn);
    int *v = malloc(sizeof *v);
    CHECK(v, "malloc");
    *v = (int)id;
    CHECK(pthread_setspecific(key, v) == 0, "setspecific");
    uint64_t r = worker_body(id, 20);
    CHECK(pthread_getspecific(key) == v && *v == (int)id, "thread-specific data changed");
    return (void *)(uintptr_t)r;
}

static void *detached(void *arg) {
    sink += worker_body((uint64_t)(uintptr_t)arg, 5);
    return NULL;
}

int main(void) {
    CHECK(pthread_key_create(&key, key_dtor) == 0, "key_create");
    pid_t tid0 = (pid_t)syscall(SYS_gettid);
    pthread_t self0 = pthread_self();
    CHECK(tid0 == getpid(), "main's tid %d is not the pid %d", (int)tid0, (int)getpid());

    int rounds = iters(40);
    for (int r = 0; r < rounds; r++) {
        pthread_t t[4];
        for (int k = 0; k < 4; k++) {
            int rc = pthread_create(&t[k], NULL, worker, (void *)(uintptr_t)(r * 4 + k + 100));
            errno = rc;
            CHECK(rc == 0, "pthread_create");
        }
        /* main computes meanwhile, with its own TLS and errno */
        uint64_t mine = worker_body(7, 10);
        CHECK(mine == worker_body(7, 10), "main's computation is not deterministic");
        for (int k = 0; k < 4; k++) {
            void *res;
            CHECK(pthread_join(t[k], &res) == 0, "join");
            uint64_t id = (uint64_t)(r * 4 + k + 100);
            /* recompute in main: same result */
            uint64_t want = id;
            for (int q = 0; q < 20; q++) want ^= mix(20000, want);
            CHECK((uint64_t)(uintptr_t)res == (uint64_t)(uintptr_t)want, "thread %llu computed a wrong result", (unsigned long long)id);
        }
        if (r % 8 == 0) {
            pthread_t d;
            pthread_attr_t at;
            pthread_attr_init(&at);
            pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            CHECK(pthread_create(&d, &at, detached, (void *)(uintptr_t)(9000 + r)) == 0, "create detached");
            pthread_attr_destroy(&at);
        }
    }
    CHECK(once_ran == 1, "pthread_once ran %d times", once_ran);
    CHECK(key_destroyed == rounds * 4, "%d of %d key destructors ran", key_destroyed, rounds * 4);
    printf("threads: %d rounds of 4 ok, pthread_once and key destructors ok\n", rounds);

    /* main: errno and TLS across a long preemptible loop */
    tls_a = 424242;
    for (int k = 0; k < 64; k++) tls_b[k] = -k;
    for (int i = 0; i < iters(20); i++) {
        errno = EDOM + i % 3;
        uint64_t acc = 0;
        uint64_t end = now_ns() + 5 * MS;
        while (now_ns() < end) acc = mix(2000, acc); /* clock_gettime succeeds: errno untouched */
        CHECK(errno == EDOM + i % 3, "errno changed from %d to %d across a CPU loop", EDOM + i % 3, errno);
        CHECK(tls_a == 424242 && tls_b[63] == -63, "main's TLS changed");
        sink += acc;
    }
    CHECK((pid_t)syscall(SYS_gettid) == tid0, "main's tid changed");
    CHECK(pthread_equal(pthread_self(), self0), "pthread_self changed");
    printf("main: errno and TLS preserved\n");
    return 0;
}
