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
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "LINGER_RUN_", 11) == 0 || (strncmp(*e, "LD_PRELOAD=", 11) == 0 && strstr(*e, "liblinger_run")))
            vars++;
    printf("%s: sliced=%d vars=%d\n", argc > 1 ? argv[1] : "?", sliced, vars);
    return 0;
}
