/*
 * fork() from inside a preempted function while 3 other threads launch,
 * resume and cancel functions: the child inherits linger's process-wide
 * locks (the handle table's, the code table's) in whatever state the other
 * threads, which do not exist in the child, left them. Every child must
 * launch a function of its own and exit promptly (watchdog + waitpid with a
 * timeout).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "common.h"

static atomic_int done;

static void *hammer(void *arg) {
    (void)arg;
    while (!atomic_load(&done)) {
        struct mix_job j = {.n = 20000};
        linger_t l = linger_launch(mix_job_fn, 5, &j);
        if (!l.is_complete && l.continuation) linger_resume(&l, 5);
        if (!l.is_complete && l.continuation) linger_cancel(&l);
    }
    return NULL;
}

/* In the child: linger must work (a launch and a resume take the handle
 * table's lock; the first launch after a dlopen would rebuild the code
 * table). */
static int child(void) {
    alarm(5 * (unsigned)slack());
    struct mix_job j = {.n = 200000};
    linger_t l = linger_launch(mix_job_fn, 20, &j);
    while (!l.is_complete) {
        if (!l.continuation || linger_resume(&l, 20) != 0) return 1;
    }
    return j.result == mix(j.n) ? 0 : 2;
}

struct forker {
    int children, failed;
};

static void forker_fn(void *arg) {
    struct forker *f = arg;
    spin_for_ns(200000); /* preempted at least once before forking */
    pid_t pid = fork();
    if (pid == 0) _exit(child());
    if (pid < 0) {
        f->failed = 1;
        return;
    }
    f->children++;
    uint64_t t0 = now_ns();
    int st;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) break;
        if (now_ns() - t0 > 5000000000ull * slack()) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fprintf(stderr, "child %d hung\n", (int)pid);
            f->failed = 1;
            return;
        }
        usleep(1000);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "child failed: %s %d\n", WIFEXITED(st) ? "exit" : "signal",
                WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        f->failed = 1;
    }
}

int main(void) {
    watchdog(120, "test_fork_threads");
    pthread_t t[3];
    for (int i = 0; i < 3; i++) CHECK(pthread_create(&t[i], NULL, hammer, NULL) == 0, "pthread_create");
    int n = iters(60);
    struct forker f = {0};
    for (int i = 0; i < n && !f.failed; i++) {
        linger_t l = linger_launch(forker_fn, 50, &f);
        while (!l.is_complete) CHECK(l.continuation && linger_resume(&l, 50) == 0, "resume");
    }
    atomic_store(&done, 1);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    CHECK(!f.failed, "a child hung or failed (%d forked)", f.children);
    CHECK(f.children == n, "forked %d of %d", f.children, n);
    PASS("test_fork_threads");
    return 0;
}
