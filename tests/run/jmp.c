/*
 * Non-local jumps inside main, many times, with CPU work after them (which
 * must stay preemptible: the runner checks each phase's preemption count):
 *   jmp longjmp | handler | handler_longjmp | alarm | segv | all (default)
 *   - setjmp/longjmp out of a deep recursion;
 *   - sigsetjmp/siglongjmp out of a SIGUSR1 handler (savemask 1: the mask is
 *     restored; savemask 0: the handler's mask stays);
 *   - plain longjmp out of a handler (the handler's mask stays);
 *   - out of a SIGALRM handler interrupting an endless CPU loop (setitimer),
 *     the way interpreters implement timeouts;
 *   - out of a SIGSEGV handler after a NULL read, the way runtimes probe memory.
 */
#include "common.h"

#include <setjmp.h>
#include <sys/time.h>

static jmp_buf jb;
static sigjmp_buf sjb;
static volatile uint64_t sink;
static volatile int depth_reached;
static int *volatile nullp;

static int recurse(int depth, int target) {
    volatile char pad[128];
    /* initialised: stale data on the stack is stale_stack.c's subject */
    for (int k = 0; k < 128; k++) pad[k] = (char)depth;
    depth_reached = depth;
    if (depth == target) {
        sink += mix(20000, (uint64_t)depth);
        longjmp(jb, depth);
    }
    if (nullp) return 0; /* never */
    return recurse(depth + 1, target) + pad[0];
}

static void jump_usr1(int s) {
    (void)s;
    sink += mix(3000, 1);
    siglongjmp(sjb, 1);
}
static void jump_usr1_plain(int s) {
    (void)s;
    longjmp(jb, 1);
}
static void jump_alrm(int s) {
    (void)s;
    siglongjmp(sjb, 2);
}
static void jump_segv(int s) {
    (void)s;
    siglongjmp(sjb, 3);
}

static int blocked(int s) {
    sigset_t cur;
    sigprocmask(SIG_BLOCK, NULL, &cur);
    return sigismember(&cur, s) == 1;
}

static void install(int s, void (*h)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(s, &sa, NULL) == 0, "sigaction");
}

static void phase_longjmp(void) {
    int n = iters(2000);
    for (int i = 0; i < n; i++) {
        int target = 50 + i % 200;
        int r = setjmp(jb);
        if (r == 0) {
            recurse(0, target);
            CHECK(0, "longjmp did not happen");
        }
        CHECK(r == target && depth_reached == target, "setjmp returned %d, expected %d", r, target);
    }
    printf("setjmp/longjmp: ok x%d\n", n);
}

static void phase_handler(void) {
    install(SIGUSR1, jump_usr1);
    volatile int m = iters(1000);
    volatile int kept_blocked = 0;
    for (volatile int i = 0; i < m; i++) {
        int save = i % 2;
        if (sigsetjmp(sjb, save) == 0) {
            raise(SIGUSR1);
            CHECK(0, "siglongjmp did not happen");
        }
        if (save) {
            CHECK(!blocked(SIGUSR1), "siglongjmp with a saved mask left SIGUSR1 blocked");
        } else {
            CHECK(blocked(SIGUSR1), "siglongjmp without a saved mask unblocked SIGUSR1");
            kept_blocked++;
            sigset_t u;
            sigemptyset(&u);
            sigaddset(&u, SIGUSR1);
            sigprocmask(SIG_UNBLOCK, &u, NULL);
        }
        /* CPU work after the jump: must stay preemptible */
        sink += mix(20000, (uint64_t)i);
    }
    printf("sigsetjmp/siglongjmp from a handler: ok x%d (%d kept the handler mask)\n", (int)m, (int)kept_blocked);
}

static void phase_plain_longjmp_from_handler(void) {
    /* plain longjmp out of a handler (the mask is not restored: SIGUSR1 stays
     * blocked, as in any plain run), then CPU work */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = jump_usr1_plain;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    volatile int m = iters(200);
    for (volatile int i = 0; i < m; i++) {
        if (setjmp(jb) == 0) {
            raise(SIGUSR1);
            CHECK(0, "longjmp did not happen");
        }
        CHECK(blocked(SIGUSR1), "longjmp out of a handler unblocked SIGUSR1");
        sigset_t u;
        sigemptyset(&u);
        sigaddset(&u, SIGUSR1);
        sigprocmask(SIG_UNBLOCK, &u, NULL);
        sink += mix(100000, (uint64_t)i);
    }
    printf("longjmp from a handler: ok x%d\n", (int)m);
}

static void phase_alarm(void) {
    install(SIGALRM, jump_alrm);
    volatile int a = iters(60);
    for (volatile int i = 0; i < a; i++) {
        volatile uint64_t spins = 0;
        if (sigsetjmp(sjb, 1) == 0) {
            struct itimerval it = {{0, 0}, {0, i == 0 ? 200 : 1000 + (i % 5) * 500}};
            CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0, "setitimer");
            for (;;) {
                spins = spins + 1;
                sink += mix(500, spins);
            }
        }
        /* (spins may be 0 if the timer expired before the loop started) */
        CHECK(!blocked(SIGALRM), "SIGALRM left blocked");
    }
    printf("siglongjmp out of a timer signal interrupting a CPU loop: ok x%d\n", (int)a);
}

static void phase_segv(void) {
    install(SIGSEGV, jump_segv);
    volatile int s = iters(1000);
    for (volatile int i = 0; i < s; i++) {
        if (sigsetjmp(sjb, 1) == 0) {
            sink += (uint64_t)*nullp;
            CHECK(0, "reading NULL did not fault");
        }
        CHECK(!blocked(SIGSEGV), "SIGSEGV left blocked");
        sink += mix(20000, (uint64_t)i);
    }
    signal(SIGSEGV, SIG_DFL);
    printf("siglongjmp out of SIGSEGV: ok x%d\n", (int)s);
}

int main(int argc, char **argv) {
    const char *phase = argc > 1 ? argv[1] : "all";
    int all = !strcmp(phase, "all"), known = 0;
    if (all || !strcmp(phase, "longjmp")) phase_longjmp(), known = 1;
    if (all || !strcmp(phase, "handler")) phase_handler(), known = 1;
    if (all || !strcmp(phase, "handler_longjmp")) phase_plain_longjmp_from_handler(), known = 1;
    if (all || !strcmp(phase, "alarm")) phase_alarm(), known = 1;
    if (all || !strcmp(phase, "segv")) phase_segv(), known = 1;
    CHECK(known, "unknown phase %s", phase);
    return 0;
}
