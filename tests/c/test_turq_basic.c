/*
 * Green threads from C (turquoise.h): create and join in loops, values back,
 * detach, cancel, yields, a `__thread` counter that stays each thread's own
 * under preemption, and bad input answered with error codes.
 */
#include "common.h"
#include "turquoise.h"

#include <pthread.h>
#include <sys/syscall.h>

static void *twice(void *arg) { return (void *)((uintptr_t)arg * 2); }

/* Sleeps and pipe round trips under 50 us slices: the runtime's own code
 * (tokio's timers and reactor, turquoise's park hook) runs inside the green
 * threads and must never be stopped half-way (a stop there once left a
 * driver lock held and the worker hung). */
static void *napper(void *arg) {
    int *p = arg;
    for (int k = 0; k < 20; k++) {
        usleep(100);
        char c = 'x';
        CHECK(write(p[1], &c, 1) == 1 && read(p[0], &c, 1) == 1, "pipe round trip");
    }
    return NULL;
}

/* Each green thread counts in its own `__thread` variable, compiled -O2 so
 * the value stays in a register between increments, and reports whether it
 * ever changed OS thread. */
static __thread unsigned long counter;
#define COUNT (1ul << 20)

static void *count(void *arg) {
    (void)arg;
    long tid = syscall(SYS_gettid);
    unsigned long *at = &counter;
    int moved = 0;
    for (unsigned long i = 0; i < COUNT; i += 4096) {
        unsigned long v = counter;
        for (int k = 0; k < 4096; k++) {
            __asm__ volatile("" : "+r"(v)); /* keep it in a register */
            v++;
            counter = v;
        }
        moved |= syscall(SYS_gettid) != tid || &counter != at;
    }
    return (void *)(counter == COUNT && !moved ? 1ul : 0ul);
}

static volatile unsigned long turn;

static void *alternate(void *arg) {
    unsigned long me = (uintptr_t)arg;
    for (int mine = 0; mine < 1000;) {
        if (turn % 2 == me) {
            turn++;
            mine++;
        }
        CHECK(turq_yield() == 0, "yield");
    }
    return NULL;
}

static void *forever(void *arg) {
    (void)arg;
    for (;;) __asm__ volatile("");
    return NULL;
}

static void *join_self(void *arg) {
    (void)arg;
    return (void *)(uintptr_t)turq_join(turq_self(), NULL);
}

static void *exits(void *arg) {
    if (arg) turq_exit((void *)42);
    pthread_exit((void *)43);
    return NULL;
}

static void *is_green(void *arg) {
    (void)arg;
    return (void *)(uintptr_t)(turq_self() != 0);
}

int main(void) {
    /* Tight slices so that the counters are cut many times. */
    CHECK(turq_runtime_init(2, 50) == 0, "runtime");
    CHECK(turq_runtime_init(2, 50) == EBUSY, "second init");
    CHECK(turq_self() == 0, "main is no green thread");

    for (int round = 0; round < iters(2000); round++) {
        turq_t t;
        void *v;
        CHECK(turq_create(&t, twice, (void *)(uintptr_t)round) == 0, "create");
        CHECK(turq_join(t, &v) == 0, "join");
        CHECK((uintptr_t)v == (uintptr_t)round * 2, "value %lu", (unsigned long)(uintptr_t)v);
        CHECK(turq_join(t, &v) == ESRCH, "join twice");
    }

    /* 200 threads parking on timers and pipes, preempted around it. */
    {
        enum { M = 200 };
        static int pipes[M][2];
        static turq_t ns[M];
        int m = iters(M);
        for (int i = 0; i < m; i++) {
            CHECK(pipe(pipes[i]) == 0, "pipe");
            CHECK(turq_create(&ns[i], napper, pipes[i]) == 0, "napper %d", i);
        }
        for (int i = 0; i < m; i++) {
            CHECK(turq_join(ns[i], NULL) == 0, "join napper %d", i);
            close(pipes[i][0]);
            close(pipes[i][1]);
        }
    }

    /* 500 counters, preempted. */
    enum { N = 500 };
    static turq_t ts[N];
    int n = iters(N);
    for (int i = 0; i < n; i++) CHECK(turq_create(&ts[i], count, NULL) == 0, "create %d", i);
    for (int i = 0; i < n; i++) {
        void *ok;
        CHECK(turq_join(ts[i], &ok) == 0, "join %d", i);
        CHECK(ok == (void *)1ul, "thread %d: counter off or moved", i);
    }

    /* Cooperative threads alternate at yields. */
    turq_attr_t a;
    CHECK(turq_attr_init(&a) == 0, "attr");
    CHECK(turq_attr_setslice(&a, 0) == 0, "cooperative");
    CHECK(turq_attr_setname(&a, "alternate") == 0, "name");
    turq_t x, y;
    CHECK(turq_create_attr(&x, &a, alternate, (void *)0) == 0, "x");
    CHECK(turq_create_attr(&y, &a, alternate, (void *)1) == 0, "y");
    CHECK(turq_join(x, NULL) == 0 && turq_join(y, NULL) == 0, "joins");
    CHECK(turn == 2000, "turns %lu", turn);

    /* Detached threads are forgotten. */
    CHECK(turq_attr_init(&a) == 0, "attr");
    CHECK(turq_attr_setdetachstate(&a, TURQ_CREATE_DETACHED) == 0, "detached");
    CHECK(turq_create_attr(&x, &a, twice, NULL) == 0, "detached create");
    CHECK(turq_join(x, NULL) == ESRCH, "join a detached thread");
    CHECK(turq_create(&x, twice, NULL) == 0 && turq_detach(x) == 0, "detach");
    CHECK(turq_detach(x) == ESRCH, "detach twice");

    /* Cancelled spinners: joined as TURQ_CANCELED. */
    for (int i = 0; i < iters(20); i++) {
        void *v;
        CHECK(turq_create(&x, forever, NULL) == 0, "spinner");
        usleep(1000);
        CHECK(turq_cancel(x) == 0, "cancel");
        CHECK(turq_join(x, &v) == 0 && v == TURQ_CANCELED, "cancelled");
    }

    /* Ended by turq_exit or pthread_exit: the joiner gets the value, the
     * worker goes on. */
    for (int i = 0; i < iters(50); i++) {
        void *v;
        CHECK(turq_create(&x, exits, (void *)(uintptr_t)(i % 2)) == 0, "exits");
        CHECK(turq_join(x, &v) == 0, "join an exited thread");
        CHECK(v == (void *)(uintptr_t)(i % 2 ? 42 : 43), "exit value %p", v);
    }

    /* Identity and self-join. */
    void *v;
    CHECK(turq_create(&x, is_green, NULL) == 0 && turq_join(x, &v) == 0 && v == (void *)1, "self inside");
    CHECK(turq_create(&x, join_self, NULL) == 0 && turq_join(x, &v) == 0, "join_self");
    CHECK((uintptr_t)v == EDEADLK, "self-join gives EDEADLK, not %lu", (unsigned long)(uintptr_t)v);
    CHECK(turq_equal(x, x) && !turq_equal(x, x + 1), "equal");

    /* Bad input. */
    CHECK(turq_create(NULL, twice, NULL) == EINVAL, "NULL thread");
    CHECK(turq_create(&x, NULL, NULL) == EINVAL, "NULL function");
    turq_attr_t junk;
    memset(&junk, 0x5a, sizeof junk);
    CHECK(turq_create_attr(&x, &junk, twice, NULL) == EINVAL, "uninitialised attr");
    CHECK(turq_attr_setslice(NULL, 1) == EINVAL, "NULL attr");
    CHECK(turq_attr_init(&a) == 0, "attr");
    CHECK(turq_attr_setstacksize(&a, (size_t)1 << 40) == EINVAL, "absurd stack");
    CHECK(turq_attr_setdetachstate(&a, 7) == EINVAL, "bad detach state");
    CHECK(turq_attr_setstacksize(&a, 1) == 0, "tiny stack is rounded up");
    CHECK(turq_create_attr(&x, &a, twice, (void *)3) == 0 && turq_join(x, &v) == 0 && v == (void *)6, "tiny stack");
    CHECK(turq_attr_destroy(&a) == 0 && turq_attr_setslice(&a, 1) == EINVAL, "destroyed attr");
    CHECK(turq_join(0, NULL) == ESRCH && turq_join(123456789, NULL) == ESRCH, "made-up handles");
    CHECK(turq_cancel(123456789) == ESRCH, "cancel made-up");
    printf("ok\n");
    return 0;
}
