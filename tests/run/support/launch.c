/*
 * Test harness for tests/run/run.sh (not a test):
 *
 *   launch SECONDS STATUSFILE [NAME=VALUE...] PROGRAM [ARGS...]
 *
 * Runs PROGRAM, with the NAME=VALUE pairs added to its environment (only
 * its own, not launch's: so LD_PRELOAD reaches PROGRAM alone), in a process
 * group of its own, with every signal unblocked and
 * every disposition at its default (so each run starts from the same state,
 * whatever the caller ignored or blocked), and writes how it ended to
 * STATUSFILE: "exit N", "signal N" or "timeout". After SECONDS the whole
 * process group is killed. stdin/stdout/stderr are inherited. Exits 0 unless
 * it could not do its job (then 125).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The kernel's struct sigaction, to reset every signal (glibc refuses its
 * two internal ones). */
struct ksigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    unsigned long mask;
};

static void reset_signals(void) {
    for (int s = 1; s < 65; s++) {
        if (s == SIGKILL || s == SIGSTOP) continue;
        struct ksigaction ka = {SIG_DFL, 0, NULL, 0};
        syscall(SYS_rt_sigaction, s, &ka, NULL, 8);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: launch SECONDS STATUSFILE [NAME=VALUE...] PROGRAM [ARGS...]\n");
        return 125;
    }
    double limit = atof(argv[1]);
    const char *statusfile = argv[2];
    FILE *out = fopen(statusfile, "w");
    if (!out) {
        perror(statusfile);
        return 125;
    }
    /* SIGCHLD is blocked here and fetched with sigtimedwait */
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 125;
    }
    if (pid == 0) {
        fclose(out);
        setpgid(0, 0);
        reset_signals();
        int a = 3;
        for (; a < argc && strchr(argv[a], '=') && argv[a][0] != '/'; a++) putenv(argv[a]);
        if (a == argc) {
            fprintf(stderr, "launch: no program\n");
            _exit(125);
        }
        execvp(argv[a], argv + a);
        fprintf(stderr, "launch: cannot run %s: %s\n", argv[a], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int st = 0;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) {
            perror("waitpid");
            return 125;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        double el = (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9;
        if (el >= limit) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fprintf(out, "timeout\n");
            fclose(out);
            return 0;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        sigtimedwait(&chld, NULL, &ts);
    }
    /* leftover children of the program (e.g. an orphaned grandchild) */
    kill(-pid, SIGKILL);
    if (WIFEXITED(st))
        fprintf(out, "exit %d\n", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        fprintf(out, "signal %d\n", WTERMSIG(st));
    else
        fprintf(out, "status %#x\n", st);
    fclose(out);
    return 0;
}
