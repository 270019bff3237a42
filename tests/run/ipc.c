/*
 * Blocking synchronisation and IPC calls wait until another thread (or
 * process) acts, or for their full timeout, and never fail with EINTR:
 *   System V: msgrcv, msgsnd (queue full), semop, semtimedop (never
 *     restarted after a handler, signal(7));
 *   POSIX: mq_receive, mq_timedreceive, mq_send, mq_timedsend, sem_wait,
 *     sem_timedwait, sem_clockwait (glibc returns the EINTR of its futex wait
 *     with a timeout to the caller);
 *   pthreads: mutex_lock (normal and priority-inheritance), mutex_timedlock,
 *     cond_wait, cond_timedwait, cond_clockwait, rwlock rd/wr, rwlock
 *     timedwrlock, barrier_wait, join, timedjoin_np;
 *   file locks: flock, fcntl F_OFD_SETLKW, fcntl F_SETLKW and lockf (held by
 *     a child process).
 */
#include "common.h"

#include <fcntl.h>
#include <mqueue.h>
#include <poll.h>
#include <sched.h>
#include <semaphore.h>
#include <sys/file.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/wait.h>


static void cpu(int i) { mix(20000 + (uint64_t)(i % 5) * 10000, (uint64_t)i); }

static struct timespec realtime_in(uint64_t ns) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += (time_t)(ns / 1000000000u);
    t.tv_nsec += (long)(ns % 1000000000u);
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}
static struct timespec monotonic_in(uint64_t ns) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += (time_t)(ns / 1000000000u);
    t.tv_nsec += (long)(ns % 1000000000u);
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* ---- a helper thread that holds something ----
 * It takes the lock, then waits for main's go (hold_go), then holds it ms
 * more and releases it. Waiting for the go keeps the tests independent of
 * scheduling delays on a loaded machine. */
struct hold {
    void (*lock)(void *);
    void (*unlock)(void *);
    void *arg;
    unsigned ms;
    volatile int locked, released, go;
    pthread_t t;
};
static void *hold_thread(void *p) {
    struct hold *h = p;
    h->lock(h->arg);
    __atomic_store_n(&h->locked, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&h->go, __ATOMIC_SEQ_CST)) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    helper_sleep_ms(h->ms);
    __atomic_store_n(&h->released, 1, __ATOMIC_SEQ_CST);
    h->unlock(h->arg);
    return NULL;
}
static void hold_start(struct hold *h) {
    h->locked = h->released = h->go = 0;
    int rc = pthread_create(&h->t, NULL, hold_thread, h);
    errno = rc;
    CHECK(rc == 0, "pthread_create");
    while (!__atomic_load_n(&h->locked, __ATOMIC_SEQ_CST)) sched_yield();
}
static void hold_go(struct hold *h) { __atomic_store_n(&h->go, 1, __ATOMIC_SEQ_CST); }
static void hold_check_finish(struct hold *h, const char *what) {
    CHECK(__atomic_load_n(&h->released, __ATOMIC_SEQ_CST), "%s returned before the other side released", what);
    join(h->t);
}

/* ---- System V message queues and semaphores ---- */
struct msgbuf32 {
    long mtype;
    char text[32];
};
static int msq;
static void sysv_send(void *arg) {
    struct msgbuf32 m = {1, {0}};
    snprintf(m.text, sizeof m.text, "msg %d", (int)(intptr_t)arg);
    CHECK(msgsnd(msq, &m, sizeof m.text, 0) == 0, "helper msgsnd");
}
static void sysv_recv(void *arg) {
    (void)arg;
    struct msgbuf32 m;
    CHECK(msgrcv(msq, &m, sizeof m.text, 0, 0) == (ssize_t)sizeof m.text, "helper msgrcv");
}
static int semid;
static void sysv_post(void *arg) {
    (void)arg;
    struct sembuf op = {0, 1, 0};
    CHECK(semop(semid, &op, 1) == 0, "helper semop");
}

static void test_sysv(int n) {
    msq = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
    CHECK(msq >= 0, "msgget");
    for (int i = 0; i < n; i++) {
        cpu(i);
        uint64_t t0 = now_ns();
        pthread_t t = after_ms(2 + (unsigned)(i % 3), sysv_send, (void *)(intptr_t)i);
        struct msgbuf32 m;
        errno = 0;
        ssize_t r = msgrcv(msq, &m, sizeof m.text, 0, 0);
        CHECK(r == (ssize_t)sizeof m.text, "msgrcv returned %zd", r);
        char want[32];
        snprintf(want, sizeof want, "msg %d", i);
        CHECK(strcmp(m.text, want) == 0, "msgrcv got %s", m.text);
        CHECK_ELAPSED(t0, (2 + i % 3) * MS, "msgrcv");
        join(t);
    }
    /* msgsnd blocks while the queue is full */
    struct msqid_ds ds;
    CHECK(msgctl(msq, IPC_STAT, &ds) == 0, "IPC_STAT");
    ds.msg_qbytes = 64;
    CHECK(msgctl(msq, IPC_SET, &ds) == 0, "IPC_SET msg_qbytes");
    struct msgbuf32 m = {1, "fill"};
    CHECK(msgsnd(msq, &m, sizeof m.text, 0) == 0 && msgsnd(msq, &m, sizeof m.text, 0) == 0, "fill");
    CHECK(msgsnd(msq, &m, sizeof m.text, IPC_NOWAIT) == -1 && errno == EAGAIN, "queue should be full");
    for (int i = 0; i < n; i++) {
        cpu(i);
        uint64_t t0 = now_ns();
        pthread_t t = after_ms(2 + (unsigned)(i % 3), sysv_recv, NULL);
        errno = 0;
        int rc = msgsnd(msq, &m, sizeof m.text, 0);
        CHECK(rc == 0, "msgsnd on a full queue returned %d", rc);
        CHECK_ELAPSED(t0, (2 + i % 3) * MS, "msgsnd");
        join(t);
    }
    CHECK(msgctl(msq, IPC_RMID, NULL) == 0, "IPC_RMID");
    printf("msgrcv: ok x%d, msgsnd: ok x%d\n", n, n);

    semid = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
    CHECK(semid >= 0, "semget");
    for (int i = 0; i < n; i++) {
        cpu(i);
        uint64_t t0 = now_ns();
        pthread_t t = after_ms(2 + (unsigned)(i % 3), sysv_post, NULL);
        struct sembuf op = {0, -1, 0};
        errno = 0;
        int rc;
        if (i % 2) {
            rc = semop(semid, &op, 1);
        } else {
            struct timespec ts = {10 * (time_t)slack(), 0};
            rc = semtimedop(semid, &op, 1, &ts);
        }
        CHECK(rc == 0, "%s returned %d", i % 2 ? "semop" : "semtimedop", rc);
        CHECK_ELAPSED(t0, (2 + i % 3) * MS, "semop");
        join(t);
        /* timeout */
        cpu(i);
        struct timespec ts = {0, 2000000L + (i % 3) * 1000000L};
        t0 = now_ns();
        errno = 0;
        rc = semtimedop(semid, &op, 1, &ts);
        CHECK(rc == -1 && errno == EAGAIN, "semtimedop with nobody posting returned %d", rc);
        CHECK_ELAPSED(t0, (uint64_t)ts.tv_nsec, "semtimedop timeout");
    }
    CHECK(semctl(semid, 0, IPC_RMID) == 0, "IPC_RMID");
    printf("semop: ok x%d, semtimedop: ok x%d\n", n / 2, n + n - n / 2);
}

/* ---- POSIX message queues and semaphores ---- */
static mqd_t mq;
static void mq_send_one(void *arg) {
    char buf[32];
    snprintf(buf, sizeof buf, "mq %d", (int)(intptr_t)arg);
    CHECK(mq_send(mq, buf, sizeof buf, 0) == 0, "helper mq_send");
}
static void mq_recv_one(void *arg) {
    (void)arg;
    char buf[32];
    CHECK(mq_receive(mq, buf, sizeof buf, NULL) == (ssize_t)sizeof buf, "helper mq_receive");
}
static sem_t psem;
static void psem_post(void *arg) {
    (void)arg;
    CHECK(sem_post(&psem) == 0, "sem_post");
}

static void test_mq(int n) {
    char name[64];
    snprintf(name, sizeof name, "/linger-run-test-%d", (int)getpid());
    struct mq_attr attr = {0};
    attr.mq_maxmsg = 2;
    attr.mq_msgsize = 32;
    mq = mq_open(name, O_CREAT | O_EXCL | O_RDWR, 0600, &attr);
    CHECK(mq != (mqd_t)-1, "mq_open");
    mq_unlink(name);
    char buf[32];
    for (int i = 0; i < n; i++) {
        cpu(i);
        uint64_t t0 = now_ns();
        pthread_t t = after_ms(2 + (unsigned)(i % 3), mq_send_one, (void *)(intptr_t)i);
        errno = 0;
        ssize_t r;
        if (i % 2) {
            r = mq_receive(mq, buf, sizeof buf, NULL);
        } else {
            struct timespec ts = realtime_in(10000 * MS * slack());
            r = mq_timedreceive(mq, buf, sizeof buf, NULL, &ts);
        }
        CHECK(r == (ssize_t)sizeof buf, "%s returned %zd", i % 2 ? "mq_receive" : "mq_timedreceive", r);
        char want[32];
        snprintf(want, sizeof want, "mq %d", i);
        CHECK(strcmp(buf, want) == 0, "mq got %s", buf);
        CHECK_ELAPSED(t0, (2 + i % 3) * MS, "mq_receive");
        join(t);
        /* timeout */
        cpu(i);
        uint64_t d = (2 + (uint64_t)(i % 3)) * MS;
        struct timespec ts = realtime_in(d);
        t0 = now_ns();
        errno = 0;
        r = mq_timedreceive(mq, buf, sizeof buf, NULL, &ts);
        CHECK(r == -1 && errno == ETIMEDOUT, "mq_timedreceive on an empty queue returned %zd", r);
        CHECK_ELAPSED(t0, d - MS / 10, "mq_timedreceive timeout");
    }
    /* full queue: mq_send / mq_timedsend block */
    memset(buf, 'f', sizeof buf);
    CHECK(mq_send(mq, buf, sizeof buf, 0) == 0 && mq_send(mq, buf, sizeof buf, 0) == 0, "fill mq");
    for (int i = 0; i < n; i++) {
        cpu(i);
        uint64_t t0 = now_ns();
        pthread_t t = after_ms(2 + (unsigned)(i % 3), mq_recv_one, NULL);
        errno = 0;
        int rc;
        if (i % 2) {
            rc = mq_send(mq, buf, sizeof buf, 0);
        } else {
            struct timespec ts = realtime_in(10000 * MS * slack());
            rc = mq_timedsend(mq, buf, sizeof buf, 0, &ts);
        }
        CHECK(rc == 0, "%s on a full queue returned %d", i % 2 ? "mq_send" : "mq_timedsend", rc);
        CHECK_ELAPSED(t0, (2 + i % 3) * MS, "mq_send");
        join(t);
        uint64_t d = (2 + (uint64_t)(i % 3)) * MS;
        struct timespec ts = realtime_in(d);
        t0 = now_ns();
        errno = 0;
        rc = mq_timedsend(mq, buf, sizeof buf, 0, &ts);
        CHECK(rc == -1 && errno == ETIMEDOUT, "mq_timedsend on a full queue returned %d", rc);
        CHECK_ELAPSED(t0, d - MS / 10, "mq_timedsend timeout");
    }
    mq_close(mq);
    printf("mq_receive/mq_timedreceive: ok x%d, mq_send/mq_timedsend: ok x%d\n", 2 * n, 2 * n);
}

static void test_posix_sem(int n) {
    CHECK(sem_init(&psem, 0, 0) == 0, "sem_init");
    for (int i = 0; i < n; i++) {
        cpu(i);
        uint64_t t0 = now_ns();
        pthread_t t = after_ms(2 + (unsigned)(i % 3), psem_post, NULL);
        errno = 0;
        int rc;
        struct timespec ts;
        switch (i % 3) {
        case 0: rc = sem_wait(&psem); break;
        case 1: ts = realtime_in(10000 * MS * slack()); rc = sem_timedwait(&psem, &ts); break;
        default: ts = monotonic_in(10000 * MS * slack()); rc = sem_clockwait(&psem, CLOCK_MONOTONIC, &ts); break;
        }
        CHECK(rc == 0, "sem wait form %d returned %d", i % 3, rc);
        CHECK_ELAPSED(t0, (2 + i % 3) * MS, "sem_wait");
        join(t);
        cpu(i);
        uint64_t d = (2 + (uint64_t)(i % 3)) * MS;
        t0 = now_ns();
        errno = 0;
        if (i % 2) {
            ts = realtime_in(d);
            rc = sem_timedwait(&psem, &ts);
        } else {
            ts = monotonic_in(d);
            rc = sem_clockwait(&psem, CLOCK_MONOTONIC, &ts);
        }
        CHECK(rc == -1 && errno == ETIMEDOUT, "sem timed wait with nobody posting returned %d", rc);
        CHECK_ELAPSED(t0, d - MS / 10, "sem_timedwait timeout");
    }
    CHECK(sem_trywait(&psem) == -1 && errno == EAGAIN, "sem_trywait");
    sem_destroy(&psem);
    printf("sem_wait/sem_timedwait/sem_clockwait: ok x%d\n", 2 * n);
}

/* ---- pthread primitives ---- */
static pthread_mutex_t mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pi_mtx;
static pthread_cond_t cond;
static int pred;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_barrier_t bar;

static void lock_m(void *m) { CHECK(pthread_mutex_lock(m) == 0, "helper lock"); }
static void unlock_m(void *m) { CHECK(pthread_mutex_unlock(m) == 0, "helper unlock"); }
static void wrlock_rw(void *a) { (void)a; CHECK(pthread_rwlock_wrlock(&rw) == 0, "helper wrlock"); }
static void rdlock_rw(void *a) { (void)a; CHECK(pthread_rwlock_rdlock(&rw) == 0, "helper rdlock"); }
static void unlock_rw(void *a) { (void)a; CHECK(pthread_rwlock_unlock(&rw) == 0, "helper rw unlock"); }
static void signal_pred(void *a) {
    (void)a;
    pthread_mutex_lock(&mtx);
    pred = 1;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&mtx);
}
static void barrier_arrive(void *a) {
    (void)a;
    int rc = pthread_barrier_wait(&bar);
    CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD, "helper barrier_wait");
}
static volatile int release_sleeper;
static void *sleeper(void *a) {
    /* exits only after main allowed it (so a timed join must time out) */
    while (!__atomic_load_n(&release_sleeper, __ATOMIC_SEQ_CST)) helper_sleep_ms(1);
    helper_sleep_ms((unsigned)(intptr_t)a);
    return (void *)(intptr_t)42;
}

static void test_pthread(int n) {
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    CHECK(pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_INHERIT) == 0, "PRIO_INHERIT");
    CHECK(pthread_mutex_init(&pi_mtx, &ma) == 0, "pi mutex");
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    CHECK(pthread_cond_init(&cond, &ca) == 0, "cond");

    for (int i = 0; i < n; i++) {
        /* mutex held by another thread */
        pthread_mutex_t *m = (i % 2) ? &pi_mtx : &mtx;
        struct hold h = {.lock = lock_m, .unlock = unlock_m, .arg = m, .ms = 2 + (unsigned)(i % 3)};
        hold_start(&h);
        cpu(i);
        hold_go(&h);
        int rc = pthread_mutex_lock(m);
        CHECK(rc == 0, "pthread_mutex_lock (%s) returned %d", i % 2 ? "PI" : "normal", rc);
        hold_check_finish(&h, "pthread_mutex_lock");
        pthread_mutex_unlock(m);

        /* timedlock times out */
        h.ms = 0;
        hold_start(&h);
        cpu(i);
        uint64_t d = (2 + (uint64_t)(i % 3)) * MS;
        struct timespec ts = realtime_in(d);
        uint64_t t0 = now_ns();
        rc = pthread_mutex_timedlock(m, &ts);
        CHECK(rc == ETIMEDOUT, "pthread_mutex_timedlock (%s) returned %d", i % 2 ? "PI" : "normal", rc);
        CHECK_ELAPSED(t0, d - MS / 10, "pthread_mutex_timedlock");
        hold_go(&h);
        join(h.t);

        /* cond_wait / cond_timedwait / cond_clockwait woken by a signal */
        pred = 0;
        cpu(i);
        pthread_mutex_lock(&mtx);
        pthread_t t = after_ms(2 + (unsigned)(i % 3), signal_pred, NULL);
        rc = 0;
        while (!pred && rc == 0) {
            if (i % 3 == 0) {
                rc = pthread_cond_wait(&cond, &mtx);
            } else if (i % 3 == 1) {
                ts = realtime_in(10000 * MS * slack());
                rc = pthread_cond_timedwait(&cond, &mtx, &ts);
            } else {
                ts = monotonic_in(10000 * MS * slack());
                rc = pthread_cond_clockwait(&cond, &mtx, CLOCK_MONOTONIC, &ts);
            }
        }
        CHECK(rc == 0 && pred, "cond wait form %d returned %d", i % 3, rc);
        pthread_mutex_unlock(&mtx);
        join(t);

        /* cond timed waits time out after the full timeout */
        cpu(i);
        pthread_mutex_lock(&mtx);
        t0 = now_ns();
        ts = (i % 2) ? realtime_in(d) : monotonic_in(d);
        rc = 0;
        while (rc == 0) /* spurious wakeups are allowed; the deadline is absolute */
            rc = (i % 2) ? pthread_cond_timedwait(&cond, &mtx, &ts) : pthread_cond_clockwait(&cond, &mtx, CLOCK_MONOTONIC, &ts);
        CHECK(rc == ETIMEDOUT, "cond timed wait returned %d", rc);
        CHECK_ELAPSED(t0, d - MS / 10, "pthread_cond_timedwait");
        pthread_mutex_unlock(&mtx);

        /* rwlock */
        struct hold hw = {.lock = wrlock_rw, .unlock = unlock_rw, .ms = 2 + (unsigned)(i % 3)};
        hold_start(&hw);
        cpu(i);
        hold_go(&hw);
        rc = (i % 2) ? pthread_rwlock_rdlock(&rw) : pthread_rwlock_wrlock(&rw);
        CHECK(rc == 0, "rwlock lock returned %d", rc);
        hold_check_finish(&hw, "pthread_rwlock_*lock");
        pthread_rwlock_unlock(&rw);
        struct hold hr = {.lock = rdlock_rw, .unlock = unlock_rw, .ms = 0};
        hold_start(&hr);
        ts = realtime_in(d);
        t0 = now_ns();
        rc = pthread_rwlock_timedwrlock(&rw, &ts);
        CHECK(rc == ETIMEDOUT, "pthread_rwlock_timedwrlock returned %d", rc);
        CHECK_ELAPSED(t0, d - MS / 10, "pthread_rwlock_timedwrlock");
        hold_go(&hr);
        join(hr.t);

        /* barrier */
        CHECK(pthread_barrier_init(&bar, NULL, 2) == 0, "barrier_init");
        t0 = now_ns();
        t = after_ms(2 + (unsigned)(i % 3), barrier_arrive, NULL);
        cpu(i);
        rc = pthread_barrier_wait(&bar);
        CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD, "pthread_barrier_wait returned %d", rc);
        CHECK_ELAPSED(t0, (2 + i % 3) * MS, "pthread_barrier_wait");
        join(t);
        pthread_barrier_destroy(&bar);

        /* join a sleeping thread; timedjoin times out first */
        release_sleeper = 0;
        CHECK(pthread_create(&t, NULL, sleeper, (void *)(intptr_t)(2 + i % 3)) == 0, "create");
        t0 = now_ns();
        ts = realtime_in(2 * MS);
        rc = pthread_timedjoin_np(t, NULL, &ts);
        CHECK(rc == ETIMEDOUT, "pthread_timedjoin_np returned %d", rc);
        CHECK_ELAPSED(t0, 2 * MS - MS / 10, "pthread_timedjoin_np");
        __atomic_store_n(&release_sleeper, 1, __ATOMIC_SEQ_CST);
        cpu(i);
        void *ret = NULL;
        rc = pthread_join(t, &ret);
        CHECK(rc == 0 && ret == (void *)(intptr_t)42, "pthread_join returned %d", rc);
    }
    printf("pthread mutex/cond/rwlock/barrier/join: ok x%d\n", n);
}

/* ---- file locks ---- */
static char lockpath[256];
static int lockfd_helper;
static void flock_ex(void *a) { (void)a; CHECK(flock(lockfd_helper, LOCK_EX) == 0, "helper flock"); }
static void flock_un(void *a) { (void)a; CHECK(flock(lockfd_helper, LOCK_UN) == 0, "helper unflock"); }
static void ofd_ex(void *a) {
    (void)a;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    CHECK(fcntl(lockfd_helper, F_OFD_SETLKW, &fl) == 0, "helper F_OFD_SETLKW");
}
static void ofd_un(void *a) {
    (void)a;
    struct flock fl = {.l_type = F_UNLCK, .l_whence = SEEK_SET};
    CHECK(fcntl(lockfd_helper, F_OFD_SETLK, &fl) == 0, "helper F_OFD unlock");
}

static void test_file_locks(int n) {
    snprintf(lockpath, sizeof lockpath, "/tmp/linger-run-lock-%d", (int)getpid());
    int fd = open(lockpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0, "open %s", lockpath);
    lockfd_helper = open(lockpath, O_RDWR | O_CLOEXEC);
    CHECK(lockfd_helper >= 0, "open again");
    CHECK(write(fd, "0123456789", 10) == 10, "write");
    for (int i = 0; i < n; i++) {
        struct hold h = {.lock = flock_ex, .unlock = flock_un, .ms = 2 + (unsigned)(i % 3)};
        hold_start(&h);
        CHECK(flock(fd, LOCK_EX | LOCK_NB) == -1 && errno == EWOULDBLOCK, "flock LOCK_NB should fail");
        cpu(i);
        hold_go(&h);
        int rc = flock(fd, (i % 2) ? LOCK_EX : LOCK_SH);
        CHECK(rc == 0, "flock returned %d", rc);
        hold_check_finish(&h, "flock");
        CHECK(flock(fd, LOCK_UN) == 0, "unflock");

        struct hold o = {.lock = ofd_ex, .unlock = ofd_un, .ms = 2 + (unsigned)(i % 3)};
        hold_start(&o);
        cpu(i);
        hold_go(&o);
        struct flock fl = {.l_type = (i % 2) ? F_WRLCK : F_RDLCK, .l_whence = SEEK_SET};
        rc = fcntl(fd, F_OFD_SETLKW, &fl);
        CHECK(rc == 0, "fcntl(F_OFD_SETLKW) returned %d", rc);
        hold_check_finish(&o, "F_OFD_SETLKW");
        fl.l_type = F_UNLCK;
        CHECK(fcntl(fd, F_OFD_SETLK, &fl) == 0, "F_OFD unlock");
    }
    close(lockfd_helper);
    /* process-associated locks: held by a child process */
    int nproc = n / 2 > 0 ? n / 2 : 1;
    for (int i = 0; i < nproc; i++) {
        int p[2];
        CHECK(pipe(p) == 0, "pipe");
        pid_t pid = fork();
        CHECK(pid >= 0, "fork");
        if (pid == 0) {
            struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
            if (fcntl(fd, F_SETLK, &fl) != 0) _exit(10);
            if (write(p[1], "L", 1) != 1) _exit(11);
            helper_sleep_ms(3 + (unsigned)(i % 3));
            if (write(p[1], "U", 1) != 1) _exit(12);
            _exit(0); /* releases the lock */
        }
        char c;
        CHECK(read(p[0], &c, 1) == 1 && c == 'L', "child did not lock");
        uint64_t t0 = now_ns();
        cpu(i);
        int rc;
        if (i % 2) {
            struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
            rc = fcntl(fd, F_SETLKW, &fl);
            CHECK(rc == 0, "fcntl(F_SETLKW) returned %d", rc);
        } else {
            CHECK(lseek(fd, 0, SEEK_SET) == 0, "lseek");
            rc = lockf(fd, F_LOCK, 0);
            CHECK(rc == 0, "lockf(F_LOCK) returned %d", rc);
        }
        (void)t0;
        struct pollfd pf = {p[0], POLLIN, 0};
        CHECK(poll(&pf, 1, 0) == 1, "F_SETLKW/lockf returned before the child released the lock");
        CHECK(read(p[0], &c, 1) == 1 && c == 'U', "child did not finish");
        int st;
        CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "lock child status %#x", st);
        struct flock fl = {.l_type = F_UNLCK, .l_whence = SEEK_SET};
        CHECK(fcntl(fd, F_SETLK, &fl) == 0, "unlock");
        close(p[0]);
        close(p[1]);
    }
    close(fd);
    unlink(lockpath);
    printf("flock, F_OFD_SETLKW: ok x%d, F_SETLKW/lockf: ok x%d\n", n, nproc);
}

int main(int argc, char **argv) {
    /* ipc [sysv|mq|sem|pthread|locks]: one part (default: all) */
    const char *only = argc > 1 ? argv[1] : "all";
    int all = !strcmp(only, "all"), known = 0;
    int n = iters(10);
    if (all || !strcmp(only, "sysv")) test_sysv(n), known = 1;
    if (all || !strcmp(only, "mq")) test_mq(n), known = 1;
    if (all || !strcmp(only, "sem")) test_posix_sem(n), known = 1;
    if (all || !strcmp(only, "pthread")) test_pthread(n), known = 1;
    if (all || !strcmp(only, "locks")) test_file_locks(n), known = 1;
    CHECK(known, "unknown part %s", only);
    return 0;
}
