// A program that deadlocks (or corrupts its heap or stdout) without
// libas-safe: main prints and allocates in a loop, and a SIGALRM handler,
// fired every millisecond by setitimer, prints and allocates too. With
// LD_PRELOAD=liblinger_as_safe.so every handler runs outside libc, so the
// run finishes, and every line it printed is whole.
//
//   deadlock [SECONDS]    (default 2); stdout: the lines, stderr: a summary
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static volatile sig_atomic_t ticks;

static void on_alarm(int sig) {
    (void)sig;
    size_t n = 32 + (size_t)(ticks % 997);
    char *p = malloc(n);
    if (!p) abort();
    memset(p, 'h', n);
    printf("tick %d %c\n", (int)ticks, p[n - 1]);
    free(p);
    ticks++;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGALRM, &sa, NULL) != 0) { perror("sigaction"); return 1; }
    struct itimerval it = {{0, 1000}, {0, 1000}};
    if (setitimer(ITIMER_REAL, &it, NULL) != 0) { perror("setitimer"); return 1; }
    double end = now() + secs;
    long i = 0;
    while (now() < end) {
        for (int k = 0; k < 100; k++, i++) {
            size_t n = 16 + (size_t)(i % 4093);
            char *p = malloc(n);
            if (!p) abort();
            memset(p, 'm', n);
            printf("main %ld %c\n", i, p[n / 2]);
            free(p);
        }
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    fflush(stdout);
    fprintf(stderr, "deadlock: main printed %ld lines, the handler %d\n", i, (int)ticks);
    return 0;
}
