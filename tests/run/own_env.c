/*
 * A program that defines its own getenv/setenv/unsetenv family, as bash
 * does (lib/sh/getenv.c): here they work on a private table that main fills
 * from envp, and unsetenv does nothing before then. It prints its own
 * environment, then starts children by fork+exec, posix_spawn, system and
 * popen;
 * each reports how it runs (support/env_probe, whose path is argv[1]).
 */
#include "common.h"

#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

static char **table; /* the program's own copy of the environment, from main */

char *getenv(const char *name) {
    size_t n = strlen(name);
    for (char **e = table; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
    return NULL;
}
int setenv(const char *name, const char *value, int overwrite) {
    (void)name, (void)value, (void)overwrite;
    return table ? -1 : 0; /* before main: "done" */
}
int unsetenv(const char *name) {
    (void)name;
    return 0; /* before main: nothing to do */
}

static int by_string(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void run(char *const argv[]) {
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork+exec child %#x", st);
}

int main(int argc, char **argv, char **envp) {
    CHECK(argc == 2, "usage: own_env PROBE");
    table = envp;
    int n = 0;
    for (char **e = envp; *e; e++) n++;
    char **sorted = malloc(((size_t)n + 1) * sizeof *sorted);
    CHECK(sorted != NULL, "malloc");
    memcpy(sorted, envp, ((size_t)n + 1) * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, by_string);
    for (char **e = sorted; *e; e++) printf("env %s\n", *e);
    free(sorted);
    fflush(stdout);
    char *fe[] = {argv[1], "fork+exec", NULL};
    run(fe);
    char *sp[] = {argv[1], "posix_spawn", NULL};
    pid_t pid;
    CHECK(posix_spawn(&pid, argv[1], NULL, NULL, sp, environ) == 0, "posix_spawn");
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && st == 0, "posix_spawn child %#x", st);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' system", argv[1]);
    fflush(stdout);
    CHECK(system(cmd) == 0, "system");
    snprintf(cmd, sizeof cmd, "'%s' popen", argv[1]);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL, "popen");
    char line[256];
    while (fgets(line, sizeof line, p)) fputs(line, stdout);
    CHECK(pclose(p) == 0, "pclose");
    return 0;
}
