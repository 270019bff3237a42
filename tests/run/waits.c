/*
 * Every call that can block indefinitely, blocked in for a while, then
 * released by another thread or process. Each must return what it returns
 * plainly (status, errno, data) and, being a wait, cost next to no CPU time
 * while it waits: a program that sleeps in waitpid or pthread_join is not
 * computing.
 *
 *   waits PART     one call (see `parts` below), or "all" for every one
 *
 * Environment:
 *   WAIT_MS=N            how long each call blocks (default 50)
 *   WAIT_CPU_LIMIT_US=N  fail if the process used more than N us of CPU
 *                        time (user + system, getrusage) during one call
 *
 * The calls: wait, waitpid, wait3, wait4, waitid; sigsuspend, pause, sigwait,
 * sigwaitinfo, sigtimedwait; flock, fcntl F_SETLKW and F_OFD_SETLKW, lockf;
 * msgrcv, msgsnd, semop, semtimedop; mq_receive, mq_send; pthread_join,
 * pthread_mutex_lock, pthread_cond_wait, pthread_rwlock_wrlock,
 * pthread_barrier_wait, sem_wait; FUTEX_WAIT through syscall(2); read of a
 * pipe, open of a FIFO, fgets on a pipe (stdio), system().
 */
#include "common.h"

#include <fcntl.h>
#include <mqueue.h>
#include <semaphore.h>
#include <sys/file.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <linux/futex.h>

static unsigned wait_ms;

static uint64_t cpu_used_us(void) {
    struct rusage ru;
    CHECK(getrusage(RUSAGE_SELF, &ru) == 0, "getrusage");
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* Brackets one blocking call: from before the other side starts its wait_ms
 * (the call must return no earlier) and, for CPU time, from just before the
 * call (it must stay under the limit). */
struct span {
    const char *what;
    uint64_t t0, cpu0;
};
static struct span begin(const char *what) {
    struct span s = {what, now_ns(), cpu_used_us()};
    return s;
}
static void end(struct span s) {
    uint64_t cpu = cpu_used_us() - s.cpu0;
    CHECK_ELAPSED(s.t0, (uint64_t)wait_ms * MS - MS / 2, s.what);
    long limit = env_long("WAIT_CPU_LIMIT_US", 0);
    CHECK(limit == 0 || cpu < (uint64_t)limit, "%s used %.2f ms of CPU time while it waited %u ms (limit %.2f ms)",
          s.what, cpu / 1e3, wait_ms, limit / 1e3);
    printf("%s: ok\n", s.what);
}

/* ---- the wait family: a child that exits with 7 after wait_ms ---- */
static pid_t child_exiting(void) {
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        helper_sleep_ms(wait_ms);
        _exit(7);
    }
    return pid;
}
static void check_status(int st, const char *what) {
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7, "%s: status %#x", what, st);
}
static void part_wait(void) {
    struct span s = begin("wait");
    pid_t pid = child_exiting();
    int st = 0;
    s.cpu0 = cpu_used_us();
    CHECK(wait(&st) == pid, "wait");
    end(s);
    check_status(st, "wait");
}
static void part_waitpid(void) {
    struct span s = begin("waitpid");
    pid_t pid = child_exiting();
    int st = 0;
    s.cpu0 = cpu_used_us();
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    end(s);
    check_status(st, "waitpid");
}
static void part_wait3(void) {
    struct span s = begin("wait3");
    pid_t pid = child_exiting();
    int st = 0;
    struct rusage ru;
    s.cpu0 = cpu_used_us();
    CHECK(wait3(&st, 0, &ru) == pid, "wait3");
    end(s);
    check_status(st, "wait3");
}
static void part_wait4(void) {
    struct span s = begin("wait4");
    pid_t pid = child_exiting();
    int st = 0;
    struct rusage ru;
    s.cpu0 = cpu_used_us();
    CHECK(wait4(pid, &st, 0, &ru) == pid, "wait4");
    end(s);
    check_status(st, "wait4");
}
static void part_waitid(void) {
    struct span s = begin("waitid");
    pid_t pid = child_exiting();
    siginfo_t si;
    memset(&si, 0, sizeof si);
    s.cpu0 = cpu_used_us();
    CHECK(waitid(P_PID, (id_t)pid, &si, WEXITED) == 0, "waitid");
    end(s);
    CHECK(si.si_pid == pid && si.si_code == CLD_EXITED && si.si_status == 7, "waitid: pid %d code %d status %d",
          (int)si.si_pid, si.si_code, si.si_status);
}

/* ---- signal waits: SIGUSR1 sent to the main thread after wait_ms ---- */
static pthread_t main_thread;
static volatile sig_atomic_t handled;
static void on_usr1(int sig) { (void)sig; handled++; }
static void send_usr1(void *arg) {
    (void)arg;
    union sigval v = {.sival_int = 42};
    CHECK(pthread_sigqueue(main_thread, SIGUSR1, v) == 0, "pthread_sigqueue");
}
static void handle_usr1(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
}
/* Blocks SIGUSR1 in the calling thread; returns the set holding it alone. */
static sigset_t block_usr1(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    CHECK(sigprocmask(SIG_BLOCK, &set, NULL) == 0, "sigprocmask");
    return set;
}
static void part_sigsuspend(void) {
    struct span s = begin("sigsuspend");
    handle_usr1();
    block_usr1();
    sigset_t none;
    sigemptyset(&none);
    pthread_t t = after_ms(wait_ms, send_usr1, NULL);
    s.cpu0 = cpu_used_us();
    int rc = sigsuspend(&none);
    CHECK(rc == -1 && errno == EINTR && handled == 1, "sigsuspend returned %d, handled %d", rc, (int)handled);
    end(s);
    join(t);
}
static void part_pause(void) {
    struct span s = begin("pause");
    handle_usr1();
    pthread_t t = after_ms(wait_ms, send_usr1, NULL);
    s.cpu0 = cpu_used_us();
    int rc = pause();
    CHECK(rc == -1 && errno == EINTR && handled == 1, "pause returned %d, handled %d", rc, (int)handled);
    end(s);
    join(t);
}
static void part_sigwait(void) {
    struct span s = begin("sigwait");
    sigset_t set = block_usr1();
    pthread_t t = after_ms(wait_ms, send_usr1, NULL);
    int sig = 0;
    s.cpu0 = cpu_used_us();
    int rc = sigwait(&set, &sig);
    CHECK(rc == 0 && sig == SIGUSR1, "sigwait returned %d, signal %d", rc, sig);
    end(s);
    join(t);
}
static void part_sigwaitinfo(void) {
    struct span s = begin("sigwaitinfo");
    sigset_t set = block_usr1();
    pthread_t t = after_ms(wait_ms, send_usr1, NULL);
    siginfo_t si;
    s.cpu0 = cpu_used_us();
    int rc = sigwaitinfo(&set, &si);
    CHECK(rc == SIGUSR1 && si.si_code == SI_QUEUE && si.si_value.sival_int == 42, "sigwaitinfo returned %d", rc);
    end(s);
    join(t);
}
static void part_sigtimedwait(void) {
    struct span s = begin("sigtimedwait");
    sigset_t set = block_usr1();
    pthread_t t = after_ms(wait_ms, send_usr1, NULL);
    siginfo_t si;
    struct timespec ts = {100 * (time_t)slack(), 0};
    s.cpu0 = cpu_used_us();
    int rc = sigtimedwait(&set, &si, &ts);
    CHECK(rc == SIGUSR1 && si.si_value.sival_int == 42, "sigtimedwait returned %d", rc);
    end(s);
    join(t);
}

/* ---- file locks: held by a child process (or, for flock and OFD locks,
 * through another open file description) for wait_ms ---- */
static char lock_path[64];
static int lock_file(void) {
    snprintf(lock_path, sizeof lock_path, "/tmp/linger-waits-%d", (int)getpid());
    int fd = open(lock_path, O_RDWR | O_CREAT, 0600);
    CHECK(fd >= 0, "open %s", lock_path);
    unlink(lock_path);
    CHECK(ftruncate(fd, 4096) == 0, "ftruncate");
    return fd;
}
/* A child takes an fcntl lock on fd, says so through a pipe, and exits
 * (releasing it) after wait_ms. */
static pid_t child_holding(int fd) {
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
        CHECK(fcntl(fd, F_SETLK, &fl) == 0, "child F_SETLK");
        CHECK(write(p[1], "l", 1) == 1, "child write");
        helper_sleep_ms(wait_ms);
        _exit(0);
    }
    close(p[1]);
    char c;
    CHECK(read(p[0], &c, 1) == 1, "lock holder did not start");
    close(p[0]);
    return pid;
}
static void reap(pid_t pid) {
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
}
static int other_fd;
static void unlock_flock(void *a) { (void)a; CHECK(flock(other_fd, LOCK_UN) == 0, "LOCK_UN"); }
static void part_flock(void) {
    struct span s = begin("flock");
    int fd = lock_file();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    other_fd = open(path, O_RDWR); /* a second open file description */
    CHECK(other_fd >= 0, "reopen");
    CHECK(flock(other_fd, LOCK_EX) == 0, "first flock");
    pthread_t t = after_ms(wait_ms, unlock_flock, NULL);
    s.cpu0 = cpu_used_us();
    CHECK(flock(fd, LOCK_EX) == 0, "flock");
    end(s);
    join(t);
    CHECK(flock(other_fd, LOCK_EX | LOCK_NB) == -1 && errno == EWOULDBLOCK, "flock not held");
    close(other_fd);
    close(fd);
}
static void part_fcntl(void) {
    struct span s = begin("fcntl F_SETLKW");
    int fd = lock_file();
    pid_t pid = child_holding(fd);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    s.cpu0 = cpu_used_us();
    CHECK(fcntl(fd, F_SETLKW, &fl) == 0, "F_SETLKW");
    end(s);
    reap(pid);
    close(fd);
}
static void unlock_ofd(void *a) {
    (void)a;
    struct flock fl = {.l_type = F_UNLCK, .l_whence = SEEK_SET};
    CHECK(fcntl(other_fd, F_OFD_SETLK, &fl) == 0, "F_OFD_SETLK unlock");
}
static void part_ofd(void) {
    struct span s = begin("fcntl F_OFD_SETLKW");
    int fd = lock_file();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    other_fd = open(path, O_RDWR);
    CHECK(other_fd >= 0, "reopen");
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    CHECK(fcntl(other_fd, F_OFD_SETLK, &fl) == 0, "first F_OFD_SETLK");
    pthread_t t = after_ms(wait_ms, unlock_ofd, NULL);
    s.cpu0 = cpu_used_us();
    CHECK(fcntl(fd, F_OFD_SETLKW, &fl) == 0, "F_OFD_SETLKW");
    end(s);
    join(t);
    close(other_fd);
    close(fd);
}
static void part_lockf(void) {
    struct span s = begin("lockf");
    int fd = lock_file();
    pid_t pid = child_holding(fd);
    s.cpu0 = cpu_used_us();
    CHECK(lockf(fd, F_LOCK, 0) == 0, "lockf");
    end(s);
    reap(pid);
    close(fd);
}

/* ---- System V IPC ---- */
struct msg32 {
    long mtype;
    char text[32];
};
static int msq, semid;
static void msq_send(void *a) {
    (void)a;
    struct msg32 m = {3, "hello"};
    CHECK(msgsnd(msq, &m, sizeof m.text, 0) == 0, "helper msgsnd");
}
static void msq_recv(void *a) {
    (void)a;
    struct msg32 m;
    CHECK(msgrcv(msq, &m, sizeof m.text, 0, 0) == (ssize_t)sizeof m.text, "helper msgrcv");
}
static void sem_post_sysv(void *a) {
    (void)a;
    struct sembuf op = {0, 1, 0};
    CHECK(semop(semid, &op, 1) == 0, "helper semop");
}
static void part_msgrcv(void) {
    struct span s = begin("msgrcv");
    msq = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
    CHECK(msq >= 0, "msgget");
    pthread_t t = after_ms(wait_ms, msq_send, NULL);
    struct msg32 m;
    s.cpu0 = cpu_used_us();
    ssize_t r = msgrcv(msq, &m, sizeof m.text, 0, 0);
    CHECK(r == (ssize_t)sizeof m.text && m.mtype == 3 && strcmp(m.text, "hello") == 0, "msgrcv returned %zd", r);
    end(s);
    join(t);
    msgctl(msq, IPC_RMID, NULL);
}
static void part_msgsnd(void) {
    struct span s = begin("msgsnd");
    msq = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
    CHECK(msq >= 0, "msgget");
    struct msqid_ds ds;
    CHECK(msgctl(msq, IPC_STAT, &ds) == 0, "IPC_STAT");
    ds.msg_qbytes = 32;
    CHECK(msgctl(msq, IPC_SET, &ds) == 0, "IPC_SET");
    struct msg32 m = {1, "fill"};
    CHECK(msgsnd(msq, &m, sizeof m.text, 0) == 0, "fill");
    pthread_t t = after_ms(wait_ms, msq_recv, NULL);
    s.cpu0 = cpu_used_us();
    CHECK(msgsnd(msq, &m, sizeof m.text, 0) == 0, "msgsnd on a full queue");
    end(s);
    join(t);
    msgctl(msq, IPC_RMID, NULL);
}
static void part_semop(int timed) {
    struct span s = begin(timed ? "semtimedop" : "semop");
    semid = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
    CHECK(semid >= 0, "semget");
    pthread_t t = after_ms(wait_ms, sem_post_sysv, NULL);
    struct sembuf op = {0, -1, 0};
    struct timespec ts = {100 * (time_t)slack(), 0};
    s.cpu0 = cpu_used_us();
    CHECK((timed ? semtimedop(semid, &op, 1, &ts) : semop(semid, &op, 1)) == 0, "semop");
    end(s);
    join(t);
    CHECK(semctl(semid, 0, GETVAL) == 0, "semaphore value");
    semctl(semid, 0, IPC_RMID);
}

/* ---- POSIX message queues ---- */
static mqd_t mq;
static void mq_put(void *a) { (void)a; CHECK(mq_send(mq, "posix", 6, 5) == 0, "helper mq_send"); }
static void mq_take(void *a) {
    (void)a;
    char buf[32];
    CHECK(mq_receive(mq, buf, sizeof buf, NULL) == 6, "helper mq_receive");
}
static void open_mq(void) {
    char name[64];
    snprintf(name, sizeof name, "/linger-waits-%d", (int)getpid());
    struct mq_attr attr = {0};
    attr.mq_maxmsg = 1;
    attr.mq_msgsize = 32;
    mq = mq_open(name, O_CREAT | O_EXCL | O_RDWR, 0600, &attr);
    CHECK(mq != (mqd_t)-1, "mq_open");
    mq_unlink(name);
}
static void part_mq_receive(void) {
    struct span s = begin("mq_receive");
    open_mq();
    pthread_t t = after_ms(wait_ms, mq_put, NULL);
    char buf[32];
    unsigned prio = 0;
    s.cpu0 = cpu_used_us();
    ssize_t r = mq_receive(mq, buf, sizeof buf, &prio);
    CHECK(r == 6 && prio == 5 && strcmp(buf, "posix") == 0, "mq_receive returned %zd", r);
    end(s);
    join(t);
    mq_close(mq);
}
static void part_mq_send(void) {
    struct span s = begin("mq_send");
    open_mq();
    CHECK(mq_send(mq, "posix", 6, 5) == 0, "fill");
    pthread_t t = after_ms(wait_ms, mq_take, NULL);
    s.cpu0 = cpu_used_us();
    CHECK(mq_send(mq, "posix", 6, 5) == 0, "mq_send on a full queue");
    end(s);
    join(t);
    mq_close(mq);
}

/* ---- pthreads and semaphores ---- */
static void *sleep_then_return(void *a) {
    helper_sleep_ms(wait_ms);
    return a;
}
static void part_pthread_join(void) {
    struct span s = begin("pthread_join");
    pthread_t t;
    CHECK(pthread_create(&t, NULL, sleep_then_return, (void *)(intptr_t)42) == 0, "pthread_create");
    void *ret = NULL;
    s.cpu0 = cpu_used_us();
    int rc = pthread_join(t, &ret);
    CHECK(rc == 0 && ret == (void *)(intptr_t)42, "pthread_join returned %d", rc);
    end(s);
}
static pthread_mutex_t mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static int pred;
/* A lock another thread holds for wait_ms: the helper takes it with
 * `helper_lock`, main waits in `wait_lock`. */
struct held {
    const char *what;
    int (*helper_lock)(void);
    int (*wait_lock)(void);
    int (*unlock)(void);
};
static volatile int locked;
static void *hold_then_unlock(void *a) {
    const struct held *h = a;
    CHECK(h->helper_lock() == 0, "helper lock");
    __atomic_store_n(&locked, 1, __ATOMIC_SEQ_CST);
    helper_sleep_ms(wait_ms);
    CHECK(h->unlock() == 0, "helper unlock");
    return NULL;
}
static void part_held(const struct held *h) {
    struct span s = begin(h->what);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, hold_then_unlock, (void *)h) == 0, "pthread_create");
    while (!__atomic_load_n(&locked, __ATOMIC_SEQ_CST)) helper_sleep_ms(1);
    s.cpu0 = cpu_used_us();
    CHECK(h->wait_lock() == 0, "%s", h->what);
    end(s);
    CHECK(h->unlock() == 0, "unlock");
    join(t);
}
static int lock_mtx(void) { return pthread_mutex_lock(&mtx); }
static int unlock_mtx(void) { return pthread_mutex_unlock(&mtx); }
static int rdlock_rw(void) { return pthread_rwlock_rdlock(&rw); }
static int wrlock_rw(void) { return pthread_rwlock_wrlock(&rw); }
static int unlock_rw(void) { return pthread_rwlock_unlock(&rw); }
static void part_mutex(void) {
    static const struct held h = {"pthread_mutex_lock", lock_mtx, lock_mtx, unlock_mtx};
    part_held(&h);
}
static void part_rwlock(void) {
    static const struct held h = {"pthread_rwlock_wrlock", rdlock_rw, wrlock_rw, unlock_rw};
    part_held(&h);
}
static void set_pred(void *a) {
    (void)a;
    pthread_mutex_lock(&mtx);
    pred = 1;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&mtx);
}
static void part_cond(void) {
    struct span s = begin("pthread_cond_wait");
    pthread_mutex_lock(&mtx);
    pthread_t t = after_ms(wait_ms, set_pred, NULL);
    s.cpu0 = cpu_used_us();
    while (!pred) CHECK(pthread_cond_wait(&cond, &mtx) == 0, "pthread_cond_wait");
    end(s);
    pthread_mutex_unlock(&mtx);
    join(t);
}
static pthread_barrier_t bar;
static void arrive(void *a) {
    (void)a;
    int rc = pthread_barrier_wait(&bar);
    CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD, "helper barrier");
}
static void part_barrier(void) {
    struct span s = begin("pthread_barrier_wait");
    CHECK(pthread_barrier_init(&bar, NULL, 2) == 0, "barrier_init");
    pthread_t t = after_ms(wait_ms, arrive, NULL);
    s.cpu0 = cpu_used_us();
    int rc = pthread_barrier_wait(&bar);
    CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD, "pthread_barrier_wait returned %d", rc);
    end(s);
    join(t);
    pthread_barrier_destroy(&bar);
}
static sem_t psem;
static void psem_post(void *a) { (void)a; CHECK(sem_post(&psem) == 0, "sem_post"); }
static void part_sem_wait(void) {
    struct span s = begin("sem_wait");
    CHECK(sem_init(&psem, 0, 0) == 0, "sem_init");
    pthread_t t = after_ms(wait_ms, psem_post, NULL);
    s.cpu0 = cpu_used_us();
    CHECK(sem_wait(&psem) == 0, "sem_wait");
    end(s);
    join(t);
    int v = -1;
    CHECK(sem_getvalue(&psem, &v) == 0 && v == 0, "sem value %d", v);
    sem_destroy(&psem);
}
static int word;
static void futex_wake(void *a) {
    (void)a;
    __atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
static void part_futex(void) {
    struct span s = begin("syscall FUTEX_WAIT");
    pthread_t t = after_ms(wait_ms, futex_wake, NULL);
    s.cpu0 = cpu_used_us();
    while (__atomic_load_n(&word, __ATOMIC_SEQ_CST) == 0) {
        long rc = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
        CHECK(rc == 0 || errno == EAGAIN, "FUTEX_WAIT returned %ld", rc);
    }
    end(s);
    join(t);
}

/* ---- reads and opens: pipes, FIFOs, stdio, system() ---- */
static int pipe_w;
static void write_pipe(void *a) {
    (void)a;
    CHECK(write(pipe_w, "line\n", 5) == 5, "helper write");
}
static void part_read(int stdio) {
    struct span s = begin(stdio ? "fgets" : "read");
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    pipe_w = p[1];
    pthread_t t = after_ms(wait_ms, write_pipe, NULL);
    char buf[16] = "";
    s.cpu0 = cpu_used_us();
    if (stdio) {
        FILE *f = fdopen(p[0], "r");
        CHECK(f != NULL, "fdopen");
        CHECK(fgets(buf, sizeof buf, f) != NULL && strcmp(buf, "line\n") == 0, "fgets got %s", buf);
        end(s);
        fclose(f);
    } else {
        CHECK(read(p[0], buf, sizeof buf) == 5 && memcmp(buf, "line\n", 5) == 0, "read");
        end(s);
        close(p[0]);
    }
    join(t);
    close(p[1]);
}
static char fifo_path[64];
static void open_fifo_writer(void *a) {
    (void)a;
    int fd = open(fifo_path, O_WRONLY);
    CHECK(fd >= 0, "helper open FIFO");
    CHECK(write(fd, "x", 1) == 1, "helper write FIFO");
    close(fd);
}
static void part_fifo(void) {
    struct span s = begin("open FIFO");
    snprintf(fifo_path, sizeof fifo_path, "/tmp/linger-waits-fifo-%d", (int)getpid());
    unlink(fifo_path);
    CHECK(mkfifo(fifo_path, 0600) == 0, "mkfifo");
    pthread_t t = after_ms(wait_ms, open_fifo_writer, NULL);
    s.cpu0 = cpu_used_us();
    int fd = open(fifo_path, O_RDONLY);
    CHECK(fd >= 0, "open FIFO");
    end(s);
    char c = 0;
    CHECK(read(fd, &c, 1) == 1 && c == 'x', "read FIFO");
    close(fd);
    join(t);
    unlink(fifo_path);
}
static void part_system(void) {
    struct span s = begin("system");
    char cmd[64];
    snprintf(cmd, sizeof cmd, "sleep %u.%03u; exit 7", wait_ms / 1000, wait_ms % 1000);
    s.cpu0 = cpu_used_us();
    int st = system(cmd);
    end(s);
    check_status(st, "system");
}

static void part_semop0(void) { part_semop(0); }
static void part_semop1(void) { part_semop(1); }
static void part_fgets(void) { part_read(1); }
static void part_read0(void) { part_read(0); }

static const struct {
    const char *name;
    void (*run)(void);
} parts[] = {
    {"wait", part_wait},
    {"waitpid", part_waitpid},
    {"wait3", part_wait3},
    {"wait4", part_wait4},
    {"waitid", part_waitid},
    {"sigsuspend", part_sigsuspend},
    {"pause", part_pause},
    {"sigwait", part_sigwait},
    {"sigwaitinfo", part_sigwaitinfo},
    {"sigtimedwait", part_sigtimedwait},
    {"flock", part_flock},
    {"fcntl", part_fcntl},
    {"ofd", part_ofd},
    {"lockf", part_lockf},
    {"msgrcv", part_msgrcv},
    {"msgsnd", part_msgsnd},
    {"semop", part_semop0},
    {"semtimedop", part_semop1},
    {"mq_receive", part_mq_receive},
    {"mq_send", part_mq_send},
    {"pthread_join", part_pthread_join},
    {"mutex", part_mutex},
    {"cond", part_cond},
    {"rwlock", part_rwlock},
    {"barrier", part_barrier},
    {"sem_wait", part_sem_wait},
    {"futex", part_futex},
    {"read", part_read0},
    {"fgets", part_fgets},
    {"fifo", part_fifo},
    {"system", part_system},
};

int main(int argc, char **argv) {
    CHECK(argc == 2, "usage: waits PART|all");
    wait_ms = (unsigned)env_long("WAIT_MS", 50);
    main_thread = pthread_self();
    int found = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (strcmp(argv[1], "all") != 0 && strcmp(argv[1], parts[i].name) != 0) continue;
        found = 1;
        /* each part starts with SIGUSR1 unblocked and at its default */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGUSR1);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        signal(SIGUSR1, SIG_DFL);
        handled = 0;
        locked = 0;
        pred = 0;
        word = 0;
        parts[i].run();
        fflush(stdout);
    }
    CHECK(found, "no part named %s", argv[1]);
    return 0;
}
