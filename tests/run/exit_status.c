/*
 * How the program ends passes through unchanged: status, signal, output and
 * its order. atexit handlers and destructors do CPU work and print.
 *
 *   exit_status return       main returns 7 (after atexit + destructor output)
 *   exit_status exit         exit(3) from deep inside a recursion
 *   exit_status _exit        buffered output is lost, _exit(5)
 *   exit_status quick_exit   at_quick_exit handlers, status 6
 *   exit_status abort        dies of SIGABRT
 *   exit_status segv         NULL write: dies of SIGSEGV
 *   exit_status sigterm      kill(getpid(), SIGTERM): dies of SIGTERM
 *   exit_status kill_segv    kill(getpid(), SIGSEGV) (sent, not a fault): dies
 *                            of SIGSEGV
 *   exit_status raise_rtmax3 raise(SIGRTMAX-3) with its default disposition:
 *                            dies of that signal (61 with glibc on Linux)
 *   exit_status sigpipe      write to a pipe without reader: dies of SIGPIPE
 *   exit_status thread_exit  another thread calls exit(9) while main computes
 *   exit_status pthread_exit main calls pthread_exit; the last thread's end
 *                            ends the process with status 0
 *   exit_status overflow     unbounded recursion: dies of SIGSEGV
 */
#include "common.h"

static volatile uint64_t sink;
static int *volatile nullp; /* NULL, but the compiler cannot know */

static void handler1(void) {
    sink += mix(2000000, 1);
    printf("atexit 1\n");
}
static void handler2(void) {
    sink += mix(2000000, 2);
    printf("atexit 2 (registered second, runs first)\n");
}
static void quick1(void) {
    sink += mix(1000000, 3);
    printf("at_quick_exit 1\n");
    fflush(stdout); /* quick_exit does not flush */
}
__attribute__((destructor)) static void dtor(void) {
    sink += mix(1000000, 4);
    printf("destructor\n");
}

static int deep_exit(int depth, int status) {
    volatile char pad[256];
    pad[0] = (char)depth;
    if (depth == 0) {
        sink += mix(1000000, 5);
        exit(status);
    }
    if (nullp) return 0; /* never: keeps -Winfinite-recursion quiet */
    return deep_exit(depth - 1, status) + pad[0];
}

static void *exiter(void *arg) {
    (void)arg;
    helper_sleep_ms(20);
    printf("thread calls exit(9)\n");
    exit(9);
}

static void *last_thread(void *arg) {
    (void)arg;
    sink += mix(30000000, 6);
    printf("last thread done\n");
    return NULL;
}

static int overflow(int n) {
    volatile char pad[1024];
    pad[0] = (char)n;
    if (nullp) return 0; /* never */
    return overflow(n + 1) + pad[0];
}

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "return";
    CHECK(atexit(handler1) == 0 && atexit(handler2) == 0, "atexit");
    CHECK(at_quick_exit(quick1) == 0, "at_quick_exit");
    printf("main starts: %s\n", how);
    for (int i = 0; i < 50; i++) printf("line %d %llu\n", i, (unsigned long long)mix(20000, (uint64_t)i));

    if (!strcmp(how, "return")) return 7;
    if (!strcmp(how, "exit")) return deep_exit(500, 3);
    if (!strcmp(how, "_exit")) {
        fflush(stdout);
        printf("this line stays in the buffer and is lost\n");
        if (write(1, "written directly\n", 17) != 17) return 100;
        sink += mix(2000000, 7);
        _exit(5);
    }
    if (!strcmp(how, "quick_exit")) {
        fflush(stdout);
        quick_exit(6);
    }
    if (!strcmp(how, "abort")) {
        fflush(stdout);
        sink += mix(2000000, 8);
        abort();
    }
    if (!strcmp(how, "segv")) {
        fflush(stdout);
        sink += mix(2000000, 9);
        *nullp = 1;
        return 101;
    }
    if (!strcmp(how, "sigterm")) {
        fflush(stdout);
        kill(getpid(), SIGTERM);
        for (;;) sink += mix(1000, 1);
    }
    if (!strcmp(how, "kill_segv")) {
        fflush(stdout);
        sink += mix(2000000, 11);
        kill(getpid(), SIGSEGV);
        printf("survived a SIGSEGV sent to the process\n");
        return 103;
    }
    if (!strcmp(how, "raise_rtmax3")) {
        fflush(stdout);
        sink += mix(2000000, 12);
        raise(SIGRTMAX - 3);
        printf("survived raise(SIGRTMAX-3)\n");
        return 104;
    }
    if (!strcmp(how, "sigpipe")) {
        fflush(stdout);
        int p[2];
        CHECK(pipe(p) == 0, "pipe");
        close(p[0]);
        sink += mix(2000000, 10);
        ssize_t w = write(p[1], "x", 1);
        printf("write to a broken pipe returned %zd\n", w);
        return 102;
    }
    if (!strcmp(how, "thread_exit")) {
        fflush(stdout);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, exiter, NULL) == 0, "create");
        for (;;) sink += mix(10000, 2);
    }
    if (!strcmp(how, "pthread_exit")) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, last_thread, NULL) == 0, "create");
        printf("main calls pthread_exit\n");
        pthread_exit(NULL);
    }
    if (!strcmp(how, "overflow")) {
        fflush(stdout);
        return overflow(0);
    }
    CHECK(0, "unknown mode %s", how);
}
