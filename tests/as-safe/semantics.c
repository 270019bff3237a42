// What a handler sees when libas-safe held its signal: run with
// LD_PRELOAD=liblinger_as_safe.so; each case prints "ok NAME" or fails
// (exit 1) with the reason.
//
// Most cases send signals to the thread from inside a qsort comparator:
// the comparator is the program's code, but qsort (libc) is on its call
// chain, so every such signal must wait until qsort returns, and then run
// at once, before the next statement.
//
//   semantics [CASE...]    (default: all)
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static const char *current;

static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s: ", current);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

#define CHECK(cond, ...) do { if (!(cond)) fail(__VA_ARGS__); } while (0)

static void install(int sig, void (*h)(int, siginfo_t *, void *), int flags, const int *mask) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = h;
    sa.sa_flags = SA_SIGINFO | flags;
    sigemptyset(&sa.sa_mask);
    for (; mask && *mask; mask++) sigaddset(&sa.sa_mask, *mask);
    if (sigaction(sig, &sa, NULL) != 0) fail("sigaction: %s", strerror(errno));
}

static void dfl(int sig) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(sig, &sa, NULL);
}

static int blocked(int sig) {
    sigset_t s;
    pthread_sigmask(SIG_BLOCK, NULL, &s);
    return sigismember(&s, sig);
}

static void queue_self(int sig, int value) {
    union sigval v = {.sival_int = value};
    if (pthread_sigqueue(pthread_self(), sig, v) != 0) fail("pthread_sigqueue: %s", strerror(errno));
}

// Runs qsort over a small array; `inside` runs in the first comparator
// call. Its signals run when qsort returns, before within_qsort does.
static void (*inside)(void);

static int cmp(const void *a, const void *b) {
    if (inside) {
        void (*f)(void) = inside;
        inside = NULL;
        f();
    }
    return *(const int *)a - *(const int *)b;
}

static void within_qsort(void (*f)(void)) {
    int v[16];
    for (int i = 0; i < 16; i++) v[i] = (i * 7) % 16;
    inside = f;
    qsort(v, 16, sizeof v[0], cmp);
    for (int i = 0; i < 16; i++) CHECK(v[i] == i, "qsort result");
}

// ---- siginfo: si_value, si_code, si_pid of a sigqueue arrive intact.
static volatile int info_runs, info_value, info_code, info_pid;

static void on_info(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    (void)uc;
    info_runs++;
    info_value = si->si_value.sival_int;
    info_code = si->si_code;
    info_pid = si->si_pid;
    char *p = malloc(100);
    snprintf(p, 100, "%d", info_value);
    free(p);
}

static void send_info(void) {
    queue_self(SIGUSR1, 4242);
    CHECK(info_runs == 0, "the handler ran inside qsort");
}

static void case_siginfo(void) {
    install(SIGUSR1, on_info, 0, NULL);
    within_qsort(send_info);
    CHECK(info_runs == 1, "handler ran %d times, want 1 right after qsort", info_runs);
    CHECK(info_value == 4242, "si_value %d", info_value);
    CHECK(info_code == SI_QUEUE, "si_code %d", info_code);
    CHECK(info_pid == getpid(), "si_pid %d", info_pid);
    // Outside libc: at once.
    queue_self(SIGUSR1, 7);
    CHECK(info_runs == 2 && info_value == 7, "not delivered at once outside libc");
    dfl(SIGUSR1);
}

// ---- sa_mask and SA_NODEFER: two held signals; the first one's handler
// runs with its sa_mask (the second signal) and itself blocked, and the
// second waits until it returns.
static volatile int m1_runs, m2_runs, m3_runs, m1_saw_m2, m1_saw_m3, m1_blocks_1, m1_blocks_2, m2_blocks_1, m2_blocks_2;

static void on_m3(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    m3_runs++;
}

static void send_m3(void) {
    queue_self(SIGRTMIN + 2, 3);
    CHECK(m3_runs == 0, "ran inside qsort in a handler");
}

static void on_m1(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    m1_runs++;
    m1_saw_m2 = m2_runs;
    m1_blocks_1 = blocked(SIGUSR1);
    m1_blocks_2 = blocked(SIGUSR2);
    // A signal held inside this handler runs when qsort returns, but
    // SIGUSR2, held since before, is blocked here and must wait.
    within_qsort(send_m3);
    m1_saw_m3 = m3_runs;
    m1_saw_m2 = m2_runs;
}

static void on_m2(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    m2_runs++;
    m2_blocks_1 = blocked(SIGUSR1);
    m2_blocks_2 = blocked(SIGUSR2);
}

static void send_m(void) {
    queue_self(SIGUSR1, 1);
    queue_self(SIGUSR2, 2);
    CHECK(m1_runs == 0 && m2_runs == 0, "ran inside qsort");
}

static void case_sa_mask(void) {
    int m[] = {SIGUSR2, 0};
    install(SIGUSR1, on_m1, 0, m);
    install(SIGUSR2, on_m2, SA_NODEFER, NULL);
    install(SIGRTMIN + 2, on_m3, 0, NULL);
    within_qsort(send_m);
    CHECK(m1_runs == 1 && m2_runs == 1 && m3_runs == 1, "runs %d %d %d", m1_runs, m2_runs, m3_runs);
    CHECK(m1_saw_m3 == 1, "a signal held inside a handler did not run when its call returned");
    CHECK(m1_saw_m2 == 0, "SIGUSR2 ran inside SIGUSR1's handler, whose sa_mask blocks it");
    CHECK(m1_blocks_1 && m1_blocks_2, "SIGUSR1's handler: own signal %d, sa_mask %d blocked", m1_blocks_1, m1_blocks_2);
    CHECK(!m2_blocks_2, "SA_NODEFER handler has its signal blocked");
    CHECK(!m2_blocks_1, "SIGUSR2's handler has SIGUSR1 blocked");
    CHECK(!blocked(SIGUSR1) && !blocked(SIGUSR2), "mask not restored after the handlers");
    dfl(SIGUSR1);
    dfl(SIGUSR2);
    dfl(SIGRTMIN + 2);
}

// ---- SA_RESETHAND: runs once, then the default action is back; and
// sigaction reports the program's handler and flags, not a stub.
static volatile int reset_runs;

static void on_reset(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    reset_runs++;
}

static void send_reset(void) {
    queue_self(SIGUSR1, 1);
    CHECK(reset_runs == 0, "ran inside qsort");
}

static void case_resethand(void) {
    install(SIGUSR1, on_reset, SA_RESETHAND | SA_RESTART, NULL);
    struct sigaction old;
    sigaction(SIGUSR1, NULL, &old);
    CHECK(old.sa_sigaction == on_reset, "sigaction reports %p, not the program's handler", (void *)old.sa_sigaction);
    CHECK((old.sa_flags & (SA_SIGINFO | SA_RESETHAND | SA_RESTART)) == (SA_SIGINFO | SA_RESETHAND | SA_RESTART),
          "flags %#x", old.sa_flags);
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    struct sigaction prev;
    sigaction(SIGUSR1, &ign, &prev);
    CHECK(prev.sa_sigaction == on_reset, "old action %p, not the program's handler", (void *)prev.sa_sigaction);
    install(SIGUSR1, on_reset, SA_RESETHAND, NULL);
    within_qsort(send_reset);
    CHECK(reset_runs == 1, "ran %d times", reset_runs);
    sigaction(SIGUSR1, NULL, &old);
    CHECK(old.sa_handler == SIG_DFL, "disposition not reset: %p", (void *)old.sa_sigaction);
}

// ---- A handler that leaves by siglongjmp, held and not.
static sigjmp_buf jump;
static volatile int jumps;

static void on_jump(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    jumps++;
    siglongjmp(jump, 1);
}

static void send_jump(void) { queue_self(SIGUSR1, 1); }

static void case_longjmp(void) {
    install(SIGUSR1, on_jump, 0, NULL);
    if (sigsetjmp(jump, 1) == 0) {
        within_qsort(send_jump);
        fail("the handler did not jump");
    }
    CHECK(jumps == 1, "jumps %d", jumps);
    CHECK(!blocked(SIGUSR1), "SIGUSR1 left blocked after the jump");
    // Many jumps out of a handler fired every 200 us while the main flow
    // allocates and prints: the heap and stdout stay usable.
    install(SIGALRM, on_jump, 0, NULL);
    struct itimerval it = {{0, 200}, {0, 200}};
    volatile long rounds = 0;
    sigsetjmp(jump, 1);
    if (jumps < 300) {
        setitimer(ITIMER_REAL, &it, NULL);
        for (;;) {
            char *p = malloc(64 + rounds % 300);
            snprintf(p, 64, "%ld", rounds);
            fprintf(stdout, "%s", "");
            free(p);
            rounds++;
        }
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    // A SIGALRM held where no return trap could be set (in siglongjmp
    // itself, say) runs at a timer retry, which may come after the loop
    // ended: give it the time of the longest backstop (32 ms), in the
    // program's own code, while the jump buffer is still good.
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 100 * 1000000L);
    dfl(SIGALRM);
    free(malloc(1000));
    CHECK(jumps >= 300, "jumps %d", jumps);
    dfl(SIGUSR1);
}

// ---- Real-time signals queued while held: all run, in the order sent
// (more than the 64 held per thread: the rest wait in the kernel's queue).
#define RT_COUNT 150
static volatile int rt_runs, rt_bad;

static void on_rt(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)uc;
    if (si->si_value.sival_int != rt_runs) rt_bad = 1;
    rt_runs++;
}

static void send_rt(void) {
    for (int i = 0; i < RT_COUNT; i++) queue_self(SIGRTMIN, i);
    CHECK(rt_runs == 0, "%d ran inside qsort", rt_runs);
}

static void case_realtime(void) {
    install(SIGRTMIN, on_rt, 0, NULL);
    within_qsort(send_rt);
    CHECK(rt_runs == RT_COUNT, "%d of %d ran", rt_runs, RT_COUNT);
    CHECK(!rt_bad, "out of order");
    CHECK(!blocked(SIGRTMIN), "SIGRTMIN left blocked");
    dfl(SIGRTMIN);
}

// ---- A handler that raises signals itself: its own (blocked in it: runs
// after it) and another (runs when raise returns, nested).
static volatile int r1_runs, r2_runs, r2_after_raise, r1_again_inside;

static void on_r2(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    r2_runs++;
}

static void on_r1(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    int first = r1_runs++ == 0;
    if (first) {
        raise(SIGUSR2);
        r2_after_raise = r2_runs;
        raise(SIGUSR1);
        r1_again_inside = r1_runs;
    }
}

static void send_r(void) {
    queue_self(SIGUSR1, 1);
    CHECK(r1_runs == 0, "ran inside qsort");
}

static void case_raise(void) {
    install(SIGUSR1, on_r1, 0, NULL);
    install(SIGUSR2, on_r2, 0, NULL);
    within_qsort(send_r);
    CHECK(r2_after_raise == 1, "SIGUSR2 raised in a handler ran %d times when raise returned", r2_after_raise);
    CHECK(r1_again_inside == 1, "SIGUSR1 raised in its own handler ran inside it");
    CHECK(r1_runs == 2 && r2_runs == 1, "runs %d %d", r1_runs, r2_runs);
    // The same, not held.
    r1_runs = r2_runs = 0;
    raise(SIGUSR1);
    CHECK(r1_runs == 2 && r2_runs == 1 && r2_after_raise == 1, "unheld: runs %d %d", r1_runs, r2_runs);
    dfl(SIGUSR1);
    dfl(SIGUSR2);
}

// ---- Nested: a signal that comes while a handler runs its own code runs
// at once, inside it; while it is in libc, when that call returns.
static volatile int n_outer_done, n_inner_runs, n_inner_during, n_inner_in_libc;
static volatile int n_phase;
static pthread_t main_thread;

static void on_inner(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    n_inner_runs++;
    if (!n_outer_done) n_inner_during++;
    if (n_phase == 2) n_inner_in_libc = 1;
}

static void *nest_sender(void *arg) {
    (void)arg;
    while (n_phase != 1) ;
    pthread_kill(main_thread, SIGUSR2);
    return NULL;
}

static int cmp_check(const void *a, const void *b) {
    if (n_phase == 2) {
        queue_self(SIGUSR2, 2);
        CHECK(n_inner_runs == 1, "inner ran inside qsort inside a handler");
    }
    return *(const int *)a - *(const int *)b;
}

static void on_outer(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    // Own code: the other thread's signal arrives and runs inside.
    n_phase = 1;
    while (n_inner_runs == 0) ;
    // Library code: held until qsort returns, still inside this handler.
    n_phase = 2;
    int v[4] = {3, 1, 2, 0};
    qsort(v, 4, sizeof v[0], cmp_check);
    n_phase = 3;
    CHECK(n_inner_runs == 2, "inner did not run when qsort returned in the handler");
    n_outer_done = 1;
}

static void case_nested(void) {
    main_thread = pthread_self();
    install(SIGUSR1, on_outer, 0, NULL);
    install(SIGUSR2, on_inner, 0, NULL);
    pthread_t t;
    pthread_create(&t, NULL, nest_sender, NULL);
    queue_self(SIGUSR1, 1);
    pthread_join(t, NULL);
    CHECK(n_outer_done && n_inner_runs == 2 && n_inner_during == 2, "inner %d during %d", n_inner_runs, n_inner_during);
    dfl(SIGUSR1);
    dfl(SIGUSR2);
}

// ---- Threads: each prints and allocates, handlers too; another thread
// queues real-time signals to each and the process gets SIGALRM every
// millisecond. Every queued signal runs on its thread, none is lost.
#define THREADS 4
#define PER_THREAD 300
static pthread_t workers[THREADS];
static volatile int got[THREADS], alarms, stop_workers, sent_all;
static __thread int my_index = -1;

static void on_worker_rt(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)uc;
    if (my_index != si->si_value.sival_int) fail("thread %d got thread %d's signal", my_index, si->si_value.sival_int);
    char *p = malloc(48);
    snprintf(p, 48, "rt %d", my_index);
    printf("%s\n", p);
    free(p);
    got[my_index]++;
}

static void on_alarm(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    char *p = malloc(32);
    snprintf(p, 32, "alarm");
    printf("%s\n", p);
    free(p);
    alarms++;
}

static void *worker(void *arg) {
    my_index = (int)(long)arg;
    sigset_t rt;
    sigemptyset(&rt);
    sigaddset(&rt, SIGRTMIN + 1);
    pthread_sigmask(SIG_UNBLOCK, &rt, NULL);
    long i = 0;
    while (!stop_workers || !sent_all || got[my_index] < PER_THREAD) {
        char *p = malloc(16 + i % 2000);
        sprintf(p, "w%d %ld", my_index, i++);
        printf("%s\n", p);
        free(p);
    }
    return NULL;
}

static void case_threads(void) {
    install(SIGRTMIN + 1, on_worker_rt, SA_RESTART, NULL);
    install(SIGALRM, on_alarm, SA_RESTART, NULL);
    // Workers start with it blocked (inherited), until they know who they are.
    sigset_t rt, old;
    sigemptyset(&rt);
    sigaddset(&rt, SIGRTMIN + 1);
    pthread_sigmask(SIG_BLOCK, &rt, &old);
    for (long k = 0; k < THREADS; k++) pthread_create(&workers[k], NULL, worker, (void *)k);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (int n = 0; n < PER_THREAD; n++)
        for (int k = 0; k < THREADS; k++) {
            union sigval v = {.sival_int = k};
            while (pthread_sigqueue(workers[k], SIGRTMIN + 1, v) != 0) {
                if (errno != EAGAIN) fail("pthread_sigqueue: %s", strerror(errno));
                sched_yield();
            }
        }
    sent_all = 1;
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
    stop_workers = 1;
    // A worker ends once its signals have all run: one that is lost would
    // keep it going for ever. Say which, long before the script's limit.
    struct timespec limit;
    clock_gettime(CLOCK_REALTIME, &limit);
    limit.tv_sec += 20;
    for (int k = 0; k < THREADS; k++) {
        int e = pthread_timedjoin_np(workers[k], NULL, &limit);
        if (e == ETIMEDOUT) {
            for (int j = 0; j < THREADS; j++) fprintf(stderr, "thread %d: %d of %d signals ran\n", j, got[j], PER_THREAD);
            fail("after 20 s, thread %d has not ended (%d alarms ran)", k, alarms);
        }
        CHECK(e == 0, "pthread_timedjoin_np: %s", strerror(e));
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    for (int k = 0; k < THREADS; k++) CHECK(got[k] == PER_THREAD, "thread %d ran %d of %d", k, got[k], PER_THREAD);
    CHECK(alarms > 0, "no SIGALRM ran");
    fflush(stdout);
    dfl(SIGRTMIN + 1);
    dfl(SIGALRM);
}

// ---- A read blocked in the kernel: a handler without SA_RESTART runs
// and read fails with EINTR; with SA_RESTART it runs and read goes on.
// The timer repeats: on a loaded machine its first expiry may come before
// the thread has entered read (held off for 20 ms), and then the handler
// runs first and read waits, as it would without libas-safe; the next one
// finds it waiting.
static volatile int woke, wake_writes_at;
static int wake_fd;

static void on_wake(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    if (++woke == wake_writes_at) {
        char c = 'x';
        if (write(wake_fd, &c, 1) != 1) fail("write");
    }
}

static void case_blocked_read(void) {
    int p[2];
    if (pipe(p) != 0) fail("pipe");
    wake_fd = p[1];
    struct itimerval every = {{0, 20000}, {0, 20000}}, off = {{0, 0}, {0, 0}};
    install(SIGALRM, on_wake, 0, NULL);
    setitimer(ITIMER_REAL, &every, NULL);
    char c;
    ssize_t r = read(p[0], &c, 1);
    int e = errno;
    setitimer(ITIMER_REAL, &off, NULL);
    CHECK(r == -1 && e == EINTR && woke >= 1, "read %zd errno %d woke %d", r, e, woke);
    // The first expiry interrupts read (or comes before it), which goes
    // on; the second one's handler writes what it reads.
    install(SIGALRM, on_wake, SA_RESTART, NULL);
    woke = 0;
    wake_writes_at = 2;
    setitimer(ITIMER_REAL, &every, NULL);
    r = read(p[0], &c, 1);
    setitimer(ITIMER_REAL, &off, NULL);
    CHECK(r == 1 && c == 'x' && woke >= 2, "restarted read %zd woke %d", r, woke);
    close(p[0]);
    close(p[1]);
    dfl(SIGALRM);
}

// ---- A signal that lands on the return trap itself: qsort has returned
// into linger's stub (its `ret` took the patched return address) and the
// stub has not yet put the real one back. The trap is firing, not lost:
// given back there, the stub pushed 0 and the program returned to address
// 0 (deadlock.c under linger-run, 1 run in 20-40 under load). The end of
// qsort is single-stepped until the stub, and a second signal is sent to
// arrive there; both run when qsort has returned, before the next statement.
static struct { uintptr_t lo, hi; } objects[256];
static int n_objects;
static volatile int t1_runs, t2_runs, t_steps, t_at_stub;

static int collect_code(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size, (void)data;
    for (int i = 0; i < info->dlpi_phnum && n_objects < 256; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            objects[n_objects].lo = info->dlpi_addr + ph->p_vaddr;
            objects[n_objects].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
            n_objects++;
        }
    }
    return 0;
}

static void on_t(int sig, siginfo_t *si, void *uc) {
    (void)si, (void)uc;
    if (sig == SIGUSR1) t1_runs++;
    else t2_runs++;
}

// SIGTRAP after each instruction: outside every loaded object is the
// trap's stub (an anonymous mapping), its first instruction
// `push qword [rip+...]` (ff 35) not yet run.
static void on_step(int sig, siginfo_t *si, void *ucv) {
    (void)sig, (void)si;
    ucontext_t *uc = ucv;
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    t_steps++;
    for (int i = 0; i < n_objects; i++)
        if (pc >= objects[i].lo && pc < objects[i].hi) return;
    const unsigned char *b = (const unsigned char *)pc;
    if (b[0] == 0xff && b[1] == 0x35) {
        t_at_stub++;
        // Blocked here (sa_mask): it comes as this handler returns, at pc.
        syscall(SYS_tgkill, getpid(), gettid(), SIGUSR2);
    }
    uc->uc_mcontext.gregs[REG_EFL] &= ~0x100L;
}

static void trace_on(void) {
    // Below the red zone, in case the compiler keeps something there.
    __asm__ volatile("sub $128, %%rsp\n\tpushfq\n\torq $0x100, (%%rsp)\n\tpopfq\n\tadd $128, %%rsp" ::: "memory", "cc");
}

static void trace_off(void) {
    __asm__ volatile("sub $128, %%rsp\n\tpushfq\n\tandq $~0x100, (%%rsp)\n\tpopfq\n\tadd $128, %%rsp" ::: "memory", "cc");
}

static int t_cmp(const void *a, const void *b) {
    queue_self(SIGUSR1, 1);
    CHECK(t1_runs == 0, "ran inside qsort");
    trace_on();
    return *(const int *)a - *(const int *)b;
}

static void case_at_stub(void) {
    dl_iterate_phdr(collect_code, NULL);
    install(SIGUSR1, on_t, 0, NULL);
    install(SIGUSR2, on_t, 0, NULL);
    int mask[] = {SIGUSR2, 0};
    install(SIGTRAP, on_step, 0, mask);
    int v[2] = {2, 1};
    qsort(v, 2, sizeof v[0], t_cmp);
    int r1 = t1_runs, r2 = t2_runs;
    trace_off();
    CHECK(t_at_stub == 1, "no return trap found in %d steps", t_steps);
    CHECK(r1 == 1 && r2 == 1, "after qsort: SIGUSR1 ran %d times, SIGUSR2 %d", r1, r2);
    CHECK(v[0] == 1 && v[1] == 2, "qsort result");
    dfl(SIGTRAP);
    dfl(SIGUSR1);
    dfl(SIGUSR2);
}

static const struct {
    const char *name;
    void (*run)(void);
} cases[] = {
    {"siginfo", case_siginfo},     {"sa_mask", case_sa_mask}, {"resethand", case_resethand},
    {"longjmp", case_longjmp},     {"realtime", case_realtime}, {"raise", case_raise},
    {"nested", case_nested},       {"threads", case_threads}, {"blocked_read", case_blocked_read},
    {"at_stub", case_at_stub},
};

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    int ran = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++) want |= strcmp(argv[a], cases[i].name) == 0;
        if (!want) continue;
        current = cases[i].name;
        cases[i].run();
        fprintf(stderr, "ok %s\n", current);
        ran++;
    }
    if (ran == 0) {
        fprintf(stderr, "no such case\n");
        return 2;
    }
    return 0;
}
