/*
 * Test harness for tests/run/run.sh's children cases (not a test): prints
 * one line saying whether this process runs under linger-run (the library
 * mapped, linger-run's variables in its environment), so that a parent
 * program's children can be checked:
 *
 *   env_probe NAME   ->  "NAME: sliced=0|1 vars=N"
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

extern char **environ;

int main(int argc, char **argv) {
    int sliced = 0, vars = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "liblinger_run.so")) sliced = 1;
    if (f) fclose(f);
    static const char *const ours[] = {"LINGER_RUN_SLICE=", "LINGER_RUN_STATS=", "LINGER_RUN_CHILDREN=",
                                       "LINGER_RUN_STACK=", "LINGER_RUN_PREEMPT_BLOCKED="};
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "LD_PRELOAD=", 11) == 0 && strstr(*e, "liblinger_run")) vars++;
        for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
            if (strncmp(*e, ours[i], strlen(ours[i])) == 0) vars++;
    }
    printf("%s: sliced=%d vars=%d\n", argc > 1 ? argv[1] : "?", sliced, vars);
    return 0;
}
