/*
 * Running out of memory while launching gives ENOMEM, never an abort: not in
 * the stack's mapping, not in the growth of the handle table, not when the
 * functions are cancelled afterwards (the table's free list, the stack pool).
 *
 * Each round runs in a forked child (on its main thread, whose malloc arena
 * obeys RLIMIT_AS), which launches some functions, then leaves itself only
 * `room` bytes of address space and no free heap block of 4 KiB or more, and
 * launches until a launch fails.
 */
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "common.h"

enum { STACK = 64 * 1024, MAX = 1 << 16 };

static void nothing(void *arg) { (void)arg; }

static linger_t *all;
static int count;

/* Launches set-up-only functions until `max` or a failure; returns its errno or 0. */
static int launch_until_failure(int max) {
    linger_opts_t o = {.stack_size = STACK};
    while (count < max) {
        errno = 0;
        linger_t l = linger_launch_opts(nothing, 0, NULL, &o);
        if (!l.continuation) return errno;
        all[count++] = l;
    }
    return 0;
}

static void *map(size_t len) { return mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); }

/* A limit well above what is in use, a placeholder of `room` bytes, the heap
 * filled with small blocks and the rest of the address space page by page,
 * then the placeholder given back. */
static void exhaust_all_but(size_t room) {
    struct rlimit r = {.rlim_cur = 1ul << 40, .rlim_max = RLIM_INFINITY};
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    CHECK(f && fscanf(f, "%lu", &pages) == 1, "statm");
    fclose(f);
    r.rlim_cur = pages * 4096 + (64ul << 20);
    CHECK(setrlimit(RLIMIT_AS, &r) == 0, "setrlimit");
    void *placeholder = room ? map(room) : NULL;
    CHECK(placeholder != MAP_FAILED, "placeholder");
    while (malloc(4000)) {
    }
    for (size_t page = 1 << 20; page >= 4096;) {
        if (map(page) == MAP_FAILED) page /= 2;
    }
    if (room) munmap(placeholder, room);
}

static int child(int before, size_t room) {
    /* The runtime's start-up (the table of code that must not be preempted,
     * built from the executable's symbols) is not under test: it is done
     * with memory to spare. */
    CHECK(linger_launch(nothing, UINT64_MAX, NULL).is_complete, "first launch");
    CHECK(launch_until_failure(before) == 0, "launch with memory to spare");
    exhaust_all_but(room);
    int e = launch_until_failure(MAX);
    CHECK(e == ENOMEM, "launch under exhausted memory: errno %d after %d launches", e, count);
    for (int i = 0; i < count; i++) CHECK(linger_cancel(&all[i]) == 0, "cancel %d", i);
    struct rlimit r = {.rlim_cur = RLIM_INFINITY, .rlim_max = RLIM_INFINITY};
    CHECK(setrlimit(RLIMIT_AS, &r) == 0, "setrlimit");
    linger_t l = linger_launch(nothing, UINT64_MAX, NULL);
    CHECK(l.is_complete, "launch after memory came back");
    return 0;
}

int main(void) {
    all = calloc(MAX, sizeof *all);
    CHECK(all, "calloc");
    /* Memory ending at a stack's mapping, and memory ending just before the
     * handle table doubles (its capacity is a power of two) with room for
     * one more stack but not for the table's new copy. */
    static const int befores[] = {0, 3, 4, 1000, 1024, 2048, 4096};
    static const size_t rooms[] = {0, 4096, 72 * 1024, 80 * 1024, 200 * 1024, 1 << 20};
    int rounds = 0;
    for (int rep = 0; rep < iters(3); rep++) {
        for (size_t b = 0; b < sizeof befores / sizeof *befores; b++) {
            for (size_t k = 0; k < sizeof rooms / sizeof *rooms; k++) {
                fflush(NULL);
                pid_t pid = fork();
                CHECK(pid >= 0, "fork");
                if (pid == 0) _exit(child(befores[b], rooms[k]));
                int st;
                CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
                CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "round before=%d room=%zu: status %#x", befores[b],
                      rooms[k], st);
                rounds++;
            }
        }
    }
    fprintf(stderr, "%d rounds\n", rounds);
    PASS("test_exhaustion");
    return 0;
}
