/*
 * fork() from a preemptible main, many times, at arbitrary points of a slice:
 * the child computes (CPU work, malloc, stdio), reports its result through a
 * pipe and its exit status, and exits with exit() or _exit(); the parent
 * checks both with waitpid. Also: a few long-running children, grandchildren,
 * forks while another thread is busy in malloc, and a fork from a helper thread.
 */
#include "common.h"

#include <sys/wait.h>

static volatile int stop_bg;
static volatile uint64_t sink;

static void *malloc_churn(void *arg) {
    (void)arg;
    unsigned k = 0;
    while (!__atomic_load_n(&stop_bg, __ATOMIC_RELAXED)) {
        void *p = malloc(16 + (k++ * 37) % 4000);
        CHECK(p, "malloc");
        memset(p, 1, 16);
        free(p);
    }
    return NULL;
}

/* What a child computes for job i; the parent computes it too. */
static uint64_t job(int i, uint64_t n) {
    uint64_t r = mix(n, (uint64_t)i);
    char *s = malloc(64);
    CHECK(s, "malloc");
    snprintf(s, 64, "%016llx", (unsigned long long)r);
    r ^= strtoull(s, NULL, 16) >> 1;
    free(s);
    return r;
}

static void run_child(int i, uint64_t n, int wfd, int how) {
    uint64_t r = job(i, n);
    if (write(wfd, &r, sizeof r) != sizeof r) _exit(120);
    if (how == 0) exit(i % 100);
    _exit(i % 100);
}

static void fork_one(int i, uint64_t n) {
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        close(p[0]);
        if (i % 7 == 3) {
            /* grandchild */
            pid_t g = fork();
            if (g < 0) _exit(121);
            if (g == 0) {
                mix(n, 99);
                _exit(77);
            }
            int st;
            if (waitpid(g, &st, 0) != g || !WIFEXITED(st) || WEXITSTATUS(st) != 77) _exit(122);
        }
        run_child(i, n, p[1], i % 2);
    }
    close(p[1]);
    uint64_t want = job(i, n), got = 0;
    ssize_t r = read(p[0], &got, sizeof got);
    close(p[0]);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == i % 100, "child %d: status %#x (exit %d, signal %d)", i, st,
          WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    CHECK(r == sizeof got && got == want, "child %d computed %llx, expected %llx", i, (unsigned long long)got,
          (unsigned long long)want);
}

static void *fork_from_thread(void *arg) {
    int n = (int)(intptr_t)arg;
    for (int i = 0; i < n; i++) fork_one(1000 + i, 100000);
    return NULL;
}

int main(void) {
    int n = iters(150);
    for (int i = 0; i < n; i++) {
        sink += mix(5000 + (uint64_t)((i * 7919) % 40000), (uint64_t)i); /* fork at varying points of a slice */
        fork_one(i, 200000 + (uint64_t)(i % 5) * 100000);
    }
    printf("fork: %d children ok\n", n);

    int m = iters(6);
    for (int i = 0; i < m; i++) fork_one(500 + i, 20000000); /* ~30 ms of CPU in each child */
    printf("long children: %d ok\n", m);

    pthread_t bg;
    CHECK(pthread_create(&bg, NULL, malloc_churn, NULL) == 0, "create");
    for (int i = 0; i < n / 2; i++) {
        sink += mix(5000 + (uint64_t)((i * 7919) % 40000), (uint64_t)i);
        fork_one(2000 + i, 100000);
    }
    __atomic_store_n(&stop_bg, 1, __ATOMIC_RELAXED);
    join(bg);
    printf("fork with a thread in malloc: %d ok\n", n / 2);

    pthread_t t;
    CHECK(pthread_create(&t, NULL, fork_from_thread, (void *)(intptr_t)iters(10)) == 0, "create");
    sink += mix(3000000, 1); /* main stays busy meanwhile */
    join(t);
    printf("fork from another thread: %d ok\n", iters(10));
    return 0;
}
