/*
 * Masks restored by libc itself, past the mask wrappers: `setcontext` and
 * `swapcontext` to a context whose `uc_sigmask` is full, and `siglongjmp` to
 * a `sigsetjmp` whose saved mask is full. None may leave the preemption
 * signal blocked (a 20 ms loop sliced at 100 us must still be preempted),
 * and the program still sees the mask it asked for.
 */
#include <setjmp.h>
#include <ucontext.h>

#include "common.h"

static int signo(void) {
    long s = env_long("LINGER_SIGNAL", 0);
    return s > 0 ? (int)s : SIGRTMAX - 3;
}

/* Is the preemption signal blocked as far as the program can tell? */
static int looks_blocked(void) {
    sigset_t cur;
    sigprocmask(SIG_BLOCK, NULL, &cur);
    return sigismember(&cur, signo());
}

enum how { SETCONTEXT, SWAPCONTEXT, SIGLONGJMP, LONGJMP };

struct job {
    enum how how;
    int saw_blocked;
};

static ucontext_t target_uc, back_uc;
static sigjmp_buf env;

static void in_context(void) { /* swapcontext target: switch straight back */
    swapcontext(&target_uc, &back_uc);
}

static void job_fn(void *arg) {
    struct job *j = arg;
    static char stack[64 * 1024];
    volatile int once = 0;
    switch (j->how) {
    case SETCONTEXT:
        getcontext(&target_uc);
        if (!once) {
            once = 1;
            sigfillset(&target_uc.uc_sigmask);
            setcontext(&target_uc);
        }
        break;
    case SWAPCONTEXT:
        getcontext(&target_uc);
        target_uc.uc_stack.ss_sp = stack;
        target_uc.uc_stack.ss_size = sizeof stack;
        target_uc.uc_link = NULL;
        sigfillset(&target_uc.uc_sigmask);
        makecontext(&target_uc, in_context, 0);
        swapcontext(&back_uc, &target_uc); /* runs in_context under a full mask, which swaps back */
        /* back_uc's mask was the real one: now check the full one is not left */
        getcontext(&target_uc);
        if (!once) {
            once = 1;
            sigfillset(&target_uc.uc_sigmask);
            swapcontext(&back_uc, &target_uc); /* "returns" from the getcontext above */
        }
        break;
    case SIGLONGJMP:
    case LONGJMP:
        if (!sigsetjmp(env, 1)) {
            /* as if taken under a full mask */
            sigfillset(&((struct __jmp_buf_tag *)env)->__saved_mask);
            if (j->how == SIGLONGJMP)
                siglongjmp(env, 1);
            else
                longjmp(env, 1);
        }
        break;
    }
    j->saw_blocked = looks_blocked();
    spin_for_ns(20000000); /* 20 ms, under the full mask: must be preempted */
}

int main(void) {
    watchdog(60, "test_jump_masks");
    const char *names[] = {"setcontext", "swapcontext", "siglongjmp", "longjmp"};
    int n = iters(25);
    for (int i = 0; i < n; i++) {
        for (int h = 0; h < 4; h++) {
            struct job j = {.how = h};
            linger_t l = linger_launch(job_fn, 100, &j);
            /* Blocked for good, the 20 ms loop would finish in this one slice;
             * a VM stall can make one slice long, so allow a few. */
            int slices = 1;
            while (!l.is_complete) {
                CHECK(l.continuation && linger_resume(&l, 100) == 0, "resume");
                slices++;
            }
            CHECK(slices > 1, "%s: a full mask left the preemption signal blocked (round %d)", names[h], i);
            CHECK(j.saw_blocked, "%s: the program does not see the mask it asked for (round %d)", names[h], i);
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, NULL);
        }
    }
    PASS("test_jump_masks");
    return 0;
}
