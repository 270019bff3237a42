/*
 * Asynchronous signals of the program's own, sent by another thread while
 * main computes (so they land at arbitrary points, including while main is
 * switched out after a preemption):
 *   sig_async stack  the handler runs on main's stack (no SA_ONSTACK), as in
 *                    a plain run: within 1 MiB of main's locals;
 *   sig_async count  every signal is delivered exactly once (the sender waits
 *                    for each delivery before sending the next);
 *   sig_async jump   the handler siglongjmps back into main's loop, many
 *                    times; main then keeps computing (and must stay
 *                    preemptible);
 *   sig_async all    all of them (the default).
 */
#include "common.h"

#include <setjmp.h>

static pthread_t main_thread;
static volatile uintptr_t main_local;
static volatile int delivered, foreign, jumps;
static volatile uintptr_t worst;
static sigjmp_buf env;
static volatile int stop;
static volatile uint64_t sink;

static void on_usr1(int s) {
    (void)s;
    int local;
    uintptr_t a = (uintptr_t)&local, m = main_local;
    uintptr_t d = a > m ? a - m : m - a;
    if (d > (1u << 20)) {
        foreign++;
        if (d > worst) worst = d;
    }
    __atomic_add_fetch(&delivered, 1, __ATOMIC_SEQ_CST);
}

static void on_usr2(int s) {
    (void)s;
    __atomic_add_fetch(&delivered, 1, __ATOMIC_SEQ_CST);
    siglongjmp(env, 1);
}

struct sender {
    int sig, n;
    volatile int *progress; /* sends the next signal once this moved */
};
static void *sender(void *p) {
    struct sender *s = p;
    for (int i = 0; i < s->n; i++) {
        int before = __atomic_load_n(s->progress, __ATOMIC_SEQ_CST);
        struct timespec ts = {0, 50000 + (i % 7) * 30000};
        nanosleep(&ts, NULL);
        CHECK(pthread_kill(main_thread, s->sig) == 0, "pthread_kill");
        uint64_t t0 = now_ns();
        while (__atomic_load_n(s->progress, __ATOMIC_SEQ_CST) == before) {
            CHECK(now_ns() - t0 < 10000 * MS * slack(), "signal %d of %d never delivered", i + 1, s->n);
            sched_yield();
        }
    }
    __atomic_store_n(&stop, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void install(int sig, void (*h)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(sig, &sa, NULL) == 0, "sigaction");
}

static void run_usr1(int n) {
    int local;
    main_local = (uintptr_t)&local;
    install(SIGUSR1, on_usr1);
    delivered = foreign = 0;
    stop = 0;
    struct sender s = {SIGUSR1, n, &delivered};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, sender, &s) == 0, "create");
    uint64_t acc = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_SEQ_CST)) acc += mix(2000, acc);
    join(t);
    sink += acc;
}

static void phase_stack(void) {
    int n = iters(2000);
    run_usr1(n);
    CHECK(foreign == 0, "%d of %d handler runs were not on main's stack (up to %lu KiB away)", foreign, n,
          (unsigned long)(worst >> 10));
    printf("stack: %d handler runs on main's stack\n", n);
}

static void phase_count(void) {
    int n = iters(2000);
    run_usr1(n);
    CHECK(delivered == n, "%d signals sent, %d delivered", n, delivered);
    printf("count: %d delivered\n", n);
}

static void phase_jump(void) {
    install(SIGUSR2, on_usr2);
    volatile int n = iters(1000);
    delivered = jumps = 0;
    stop = 0;
    /* the next signal only after main is back from the jump (with the mask
     * restored), so that each signal makes exactly one jump */
    static struct sender s;
    static pthread_t t;
    s = (struct sender){SIGUSR2, n, &jumps};
    /* the jump target exists before the first signal can come */
    if (sigsetjmp(env, 1) != 0)
        __atomic_add_fetch(&jumps, 1, __ATOMIC_SEQ_CST);
    else
        CHECK(pthread_create(&t, NULL, sender, &s) == 0, "create");
    uint64_t acc = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_SEQ_CST)) acc += mix(2000, acc);
    join(t);
    CHECK(jumps == n && delivered == n, "%d signals, %d handler runs, %d jumps", (int)n, (int)delivered, (int)jumps);
    /* keeps computing afterwards */
    uint64_t end = cpu_ns() + 100 * MS;
    while (cpu_ns() < end) acc += mix(20000, acc);
    sink += acc;
    printf("jump: %d siglongjmps out of the handler\n", (int)n);
}

int main(int argc, char **argv) {
    main_thread = pthread_self();
    const char *phase = argc > 1 ? argv[1] : "all";
    int all = !strcmp(phase, "all"), known = 0;
    if (all || !strcmp(phase, "stack")) phase_stack(), known = 1;
    if (all || !strcmp(phase, "count")) phase_count(), known = 1;
    if (all || !strcmp(phase, "jump")) phase_jump(), known = 1;
    CHECK(known, "unknown phase %s", phase);
    return 0;
}
