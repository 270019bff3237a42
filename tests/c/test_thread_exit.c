/*
 * pthread_exit and cancellation inside a preemptible function (they aborted
 * the process before: glibc's forced unwind crossed the runtime's frames).
 * The function's frames are unwound (its cleanup handlers run), then the
 * thread ends from the caller's side with the same value (the caller's
 * handlers and thread-specific data destructors run), through any number of
 * enclosing functions. A function stopped inside a pthread_cleanup_push
 * region keeps its handler to itself: the caller exiting meanwhile runs only
 * its own. Every case runs on fresh threads, many times.
 */
#include "common.h"

#include <pthread.h>

/* What ran, in order, on one thread: handler names, one char each. */
struct trace {
    char log[16];
    int n;
    volatile int continued; /* code after an exit ran: must stay 0 */
    volatile int resumes;
};

static void note(struct trace *t, char c) {
    if (t->n < (int)sizeof t->log - 1) t->log[t->n++] = c;
    t->log[t->n] = 0;
}

static __thread struct trace *current_trace;
static void handler_inner(void *arg) { note(arg, 'i'); }
static void handler_outer_fn(void *arg) { note(arg, 'o'); }
static void handler_thread(void *arg) { note(arg, 't'); }

static pthread_key_t key;
static volatile int key_destructed;
static void key_destructor(void *v) {
    (void)v;
    __atomic_add_fetch(&key_destructed, 1, __ATOMIC_SEQ_CST);
}

/* ---- 1: exit at the first run ---- */
static void exits_at_once(void *arg) {
    struct trace *t = arg;
    pthread_cleanup_push(handler_inner, t);
    pthread_exit((void *)42);
    pthread_cleanup_pop(0);
}

/* ---- 2: exit after being preempted and resumed ---- */
static void exits_late(void *arg) {
    struct trace *t = arg;
    pthread_cleanup_push(handler_inner, t);
    while (t->resumes < 3) mix(20000);
    pthread_exit((void *)43);
    pthread_cleanup_pop(0);
}

/* ---- 3: nested: the inner function exits ---- */
static void inner_exits(void *arg) {
    struct trace *t = arg;
    pthread_cleanup_push(handler_inner, t);
    pthread_exit((void *)44);
    pthread_cleanup_pop(0);
}
static void outer_runs_inner(void *arg) {
    struct trace *t = arg;
    pthread_cleanup_push(handler_outer_fn, t);
    linger_t l = linger_launch(inner_exits, UINT64_MAX, t);
    (void)l;
    t->continued = 1;
    pthread_cleanup_pop(0);
}

/* ---- 4: cancellation acted on inside the function ---- */
static volatile int cancel_ready;
static void waits_for_cancel(void *arg) {
    struct trace *t = arg;
    pthread_cleanup_push(handler_inner, t);
    cancel_ready = 1;
    for (;;) {
        pthread_testcancel();
        mix(2000);
    }
    pthread_cleanup_pop(0);
}

/* ---- 5: the caller exits while the function is stopped in its region ---- */
static void stops_in_region(void *arg) {
    struct trace *t = arg;
    pthread_cleanup_push(handler_inner, t);
    for (;;) mix(1000000); /* preempted in here, never resumed */
    pthread_cleanup_pop(0);
}

struct job {
    int which;
    struct trace t;
};

static void *thread_main(void *arg) {
    struct job *j = arg;
    struct trace *t = &j->t;
    current_trace = t;
    pthread_setspecific(key, (void *)1);
    pthread_cleanup_push(handler_thread, t);
    linger_t l;
    switch (j->which) {
    case 1:
        l = linger_launch(exits_at_once, UINT64_MAX, t);
        break;
    case 2:
        l = linger_launch(exits_late, 100, t);
        while (!l.is_complete) {
            t->resumes++;
            if (linger_resume(&l, 100) != 0) break;
        }
        break;
    case 3:
        l = linger_launch(outer_runs_inner, UINT64_MAX, t);
        break;
    case 4:
        l = linger_launch(waits_for_cancel, 200, t);
        while (!l.is_complete && linger_resume(&l, 200) == 0) {
        }
        break;
    case 5:
        l = linger_launch(stops_in_region, 100, t);
        CHECK(!l.is_complete && l.continuation, "the function did not stop");
        pthread_exit((void *)45); /* the caller's own exit */
        break;
    }
    t->continued = 1;
    pthread_cleanup_pop(0);
    return (void *)1;
}

static void run_case(int which, void *want, const char *want_log) {
    struct job j;
    memset(&j, 0, sizeof j);
    j.which = which;
    int before = key_destructed;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, thread_main, &j) == 0, "pthread_create");
    if (which == 4) {
        while (!cancel_ready) sched_yield();
        cancel_ready = 0;
        CHECK(pthread_cancel(th) == 0, "pthread_cancel");
    }
    void *got;
    CHECK(pthread_join(th, &got) == 0, "pthread_join");
    CHECK(got == want, "case %d: the thread ended with %p, want %p (log \"%s\")", which, got, want, j.t.log);
    CHECK(strcmp(j.t.log, want_log) == 0, "case %d: handlers ran as \"%s\", want \"%s\"", which, j.t.log, want_log);
    CHECK(!j.t.continued, "case %d: code after the exit ran", which);
    CHECK(key_destructed == before + 1, "case %d: the thread-specific data destructor ran %d times", which,
          key_destructed - before);
    if (which == 2) CHECK(j.t.resumes >= 3, "case 2: only %d resumes before the exit", j.t.resumes);
}

/* ---- 6: the main thread exits from a function; the process lives on ---- */
static void *outlives_main(void *arg) {
    (void)arg;
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    fprintf(stderr, "helper: done\n");
    return NULL;
}
static void main_exits(void *arg) {
    (void)arg;
    pthread_exit(NULL);
}
static int main_thread_child(int unused) {
    (void)unused;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, outlives_main, NULL) == 0, "pthread_create");
    linger_launch(main_exits, UINT64_MAX, NULL);
    fprintf(stderr, "main: continued after pthread_exit\n");
    return 3;
}

int main(void) {
    CHECK(pthread_key_create(&key, key_destructor) == 0, "pthread_key_create");
    int rounds = iters(100);
    for (int r = 0; r < rounds; r++) {
        run_case(1, (void *)42, "it");
        run_case(2, (void *)43, "it");
        run_case(3, (void *)44, "iot");
        run_case(4, PTHREAD_CANCELED, "it");
        run_case(5, (void *)45, "t");
    }
    static char err[1 << 12];
    int st = run_child(main_thread_child, 0, err, sizeof err);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(err, "helper: done") && !strstr(err, "continued"),
          "main thread exit from a function: status 0x%x, stderr:\n%s", st, err);
    PASS("test_thread_exit");
    return 0;
}
