/*
 * fork() after the parent has used linger: the child (whose only thread is a
 * copy of the forking one) must be able to launch preemptible functions
 * that are preempted on time, and to resume a function that was paused in
 * the parent at the time of the fork. The parent is unaffected.
 */
#include <sys/wait.h>

#include "common.h"

/* Returns 0 if linger works in this process: a launch with a timeout is
 * preempted, and `paused` (inherited from the parent) can be finished. */
static int exercise(linger_t *paused, struct mix_job *pj, const char *who) {
    alarm(10 * (unsigned)slack()); /* a lost deadline would hang */
    volatile int stop = 0;
    errno = 0;
    linger_t l = linger_launch(spin_until_fn, 1000, (void *)&stop);
    if (!l.continuation) {
        fprintf(stderr, "%s: linger_launch(infinite loop, 1 ms) failed: errno %d (%s)\n", who, errno,
                strerror(errno));
        return 1;
    }
    stop = 1;
    if (linger_resume(&l, UINT64_MAX) != 0 || !l.is_complete) {
        fprintf(stderr, "%s: resume failed: errno %d (%s)\n", who, errno, strerror(errno));
        return 1;
    }
    while (!paused->is_complete) {
        if (linger_resume(paused, 200) != 0) {
            fprintf(stderr, "%s: resuming the function paused before the fork failed: errno %d (%s)\n", who, errno,
                    strerror(errno));
            return 1;
        }
    }
    if (pj->result != mix(pj->n)) {
        fprintf(stderr, "%s: wrong result\n", who);
        return 1;
    }
    alarm(0);
    return 0;
}

int main(void) {
    int n = iters(10);
    for (int i = 0; i < n; i++) {
        /* Use linger in the parent, and leave a function paused. */
        struct mix_job j = {.n = 3000000};
        linger_t l = linger_launch(mix_job_fn, 100, &j);
        CHECK(!l.is_complete && l.continuation, "parent: not preempted");
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork");
        if (pid == 0) _exit(exercise(&l, &j, "child after fork"));
        int st;
        CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "iteration %d: linger does not work in a forked child (%s %d)",
              i, WIFEXITED(st) ? "exit status" : "killed by signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        /* The parent's own copy is untouched. */
        CHECK(exercise(&l, &j, "parent") == 0, "iteration %d: parent broken after fork", i);
    }
    PASS("test_fork");
    return 0;
}
