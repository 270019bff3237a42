/*
 * New program images start clean, whatever path starts them: execl, execlp,
 * execle, execv, execvp, execvpe, fexecve (each in a forked child, right
 * after CPU work so that a slice deadline is likely pending at exec time),
 * vfork + execv, posix_spawn, posix_spawnp, system() and popen(). Each runs
 * exec_helper (next to this binary), which checks its signal state and
 * LD_PRELOAD. Finally main itself execs the helper.
 */
#include "common.h"

#include <fcntl.h>
#include <libgen.h>
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

static char helper[4096], helper_dir[4096];
static volatile uint64_t sink;

enum { EXECL, EXECLP, EXECLE, EXECV, EXECVP, EXECVPE, FEXECVE, VFORK, SPAWN, SPAWNP, SYSTEM, POPEN, NFORMS };
static const char *const names[] = {"execl", "execlp", "execle", "execv", "execvp", "execvpe", "fexecve",
                                    "vfork+execv", "posix_spawn", "posix_spawnp", "system", "popen"};

static void describe(int st, char *buf, size_t len) {
    if (WIFEXITED(st))
        snprintf(buf, len, "exit status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, len, "killed by signal %d (%s)%s", WTERMSIG(st), strsignal(WTERMSIG(st)),
                 WTERMSIG(st) == SIGRTMAX - 3 ? " = SIGRTMAX-3: a preemption signal was pending across exec" : "");
    else
        snprintf(buf, len, "status %#x", st);
}

static void check_status(int form, int i, int st) {
    char d[160];
    describe(st, d, sizeof d);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s #%d: helper %s", names[form], i, d);
}

static void child_exec(int form, int i, int fd) {
    /* CPU work right before exec: a deadline is likely to be pending */
    sink += mix(3000 + (uint64_t)((i * 7919) % 30000), (uint64_t)i);
    char *args[] = {(char *)"exec_helper", (char *)names[form], NULL};
    switch (form) {
    case EXECL: execl(helper, "exec_helper", names[form], (char *)NULL); break;
    case EXECLP: execlp("exec_helper", "exec_helper", names[form], (char *)NULL); break;
    case EXECLE: execle(helper, "exec_helper", names[form], (char *)NULL, environ); break;
    case EXECV: execv(helper, args); break;
    case EXECVP: execvp("exec_helper", args); break;
    case EXECVPE: execvpe("exec_helper", args, environ); break;
    case FEXECVE: fexecve(fd, args, environ); break;
    }
    fprintf(stderr, "%s failed: %s\n", names[form], strerror(errno));
    _exit(126);
}

static void run_form(int form, int i) {
    int st = -1;
    char *args[] = {(char *)"exec_helper", (char *)names[form], NULL};
    sink += mix(2000 + (uint64_t)((i * 104729) % 30000), (uint64_t)i);
    fflush(stdout);
    if (form <= FEXECVE) {
        int fd = -1;
        if (form == FEXECVE) {
            fd = open(helper, O_RDONLY | O_CLOEXEC);
            CHECK(fd >= 0, "open %s", helper);
        }
        pid_t pid = fork();
        CHECK(pid >= 0, "fork");
        if (pid == 0) child_exec(form, i, fd);
        if (fd >= 0) close(fd);
        sink += mix(20000, 5);
        CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    } else if (form == VFORK) {
        pid_t pid = vfork();
        CHECK(pid >= 0, "vfork");
        if (pid == 0) {
            execv(helper, args);
            _exit(126);
        }
        CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    } else if (form == SPAWN || form == SPAWNP) {
        pid_t pid;
        int rc = form == SPAWN ? posix_spawn(&pid, helper, NULL, NULL, args, environ)
                               : posix_spawnp(&pid, "exec_helper", NULL, NULL, args, environ);
        errno = rc;
        CHECK(rc == 0, "%s", names[form]);
        CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    } else if (form == SYSTEM) {
        st = system("exec_helper system");
        CHECK(st != -1, "system");
    } else {
        FILE *f = popen("exec_helper popen", "r");
        CHECK(f, "popen");
        char line[64] = "";
        char *got = fgets(line, sizeof line, f);
        st = pclose(f);
        CHECK(st != -1, "pclose");
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) CHECK(got && strcmp(line, "popen ok\n") == 0, "popen read '%s'", line);
    }
    check_status(form, i, st);
}

/* posix_spawn with attributes that reset the mask and dispositions, and
 * file actions, as process managers use it. */
static void spawn_with_attrs(int i) {
    posix_spawnattr_t at;
    posix_spawn_file_actions_t fa;
    CHECK(posix_spawnattr_init(&at) == 0 && posix_spawn_file_actions_init(&fa) == 0, "init");
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    CHECK(posix_spawnattr_setsigmask(&at, &none) == 0, "setsigmask");
    CHECK(posix_spawnattr_setsigdefault(&at, &all) == 0, "setsigdefault");
    CHECK(posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF) == 0, "setflags");
    CHECK(posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) == 0, "addopen");
    char *args[] = {(char *)"exec_helper", (char *)"posix_spawn+attrs", NULL};
    sink += mix(2000 + (uint64_t)((i * 104729) % 30000), (uint64_t)i);
    pid_t pid;
    int rc = posix_spawn(&pid, helper, &fa, &at, args, environ);
    errno = rc;
    CHECK(rc == 0, "posix_spawn with attributes");
    int st;
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    check_status(SPAWN, i, st);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
}

int main(void) {
    ssize_t len = readlink("/proc/self/exe", helper_dir, sizeof helper_dir - 1);
    CHECK(len > 0, "readlink /proc/self/exe");
    helper_dir[len] = 0;
    snprintf(helper, sizeof helper, "%s/exec_helper", dirname(helper_dir));
    CHECK(access(helper, X_OK) == 0, "%s", helper);
    const char *path = getenv("PATH");
    char newpath[8192];
    snprintf(newpath, sizeof newpath, "%s:%s", helper_dir, path ? path : "/usr/bin:/bin");
    CHECK(setenv("PATH", newpath, 1) == 0, "setenv");

    int n = iters(15);
    for (int i = 0; i < n; i++)
        for (int form = 0; form < NFORMS; form++) run_form(form, i);
    for (int i = 0; i < n; i++) spawn_with_attrs(i);
    printf("all %d exec/spawn paths: ok x%d\n", NFORMS + 1, n);
    fflush(stdout);

    /* the process itself becomes the helper */
    sink += mix(300000, 9);
    execl(helper, "exec_helper", "final", (char *)NULL);
    CHECK(0, "execl of the final helper");
    return 1;
}
