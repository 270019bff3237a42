/*
 * Plain I/O and waiting for children (restartable with SA_RESTART, signal(7)):
 *   write/writev of 8 MiB into a pipe read by another thread: one call, full
 *     count (a signal after a partial transfer makes the kernel return short);
 *   read/readv from a pipe written by another thread: all data arrives;
 *   read/write/pread/pwrite/readv/writev of 8 MiB on a regular file: full counts;
 *   open() of a FIFO blocks until the other end is opened (both directions);
 *   read() of an inotify descriptor blocks until an event;
 *   getrandom, getentropy;
 *   wait, waitpid, wait3, wait4, waitid for a child that sleeps.
 */
#include "common.h"

#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>

#define BIG (8u << 20)

static void cpu(int i) { mix(20000 + (uint64_t)(i % 5) * 10000, (uint64_t)i); }

static unsigned char *src, *dst;

struct xfer {
    int fd;
    unsigned chunk, pause_every;
};
static void *pipe_reader(void *p) {
    struct xfer *x = p;
    size_t got = 0;
    unsigned k = 0;
    while (got < BIG) {
        ssize_t r = read(x->fd, dst + got, BIG - got < x->chunk ? BIG - got : x->chunk);
        CHECK(r > 0, "helper read");
        got += (size_t)r;
        if (x->pause_every && ++k % x->pause_every == 0) helper_sleep_ms(1);
    }
    return NULL;
}
static void *pipe_writer(void *p) {
    struct xfer *x = p;
    size_t put = 0;
    unsigned k = 0;
    while (put < BIG) {
        ssize_t w = write(x->fd, src + put, BIG - put < x->chunk ? BIG - put : x->chunk);
        CHECK(w > 0, "helper write");
        put += (size_t)w;
        if (x->pause_every && ++k % x->pause_every == 0) helper_sleep_ms(1);
    }
    return NULL;
}

static void test_pipes(int n) {
    for (int i = 0; i < n; i++) {
        int p[2];
        CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe");
        /* main writes 8 MiB in one call */
        memset(dst, 0, BIG);
        struct xfer x = {p[0], 65536 + (unsigned)i * 1000, (unsigned)(i % 3) * 8};
        pthread_t t;
        CHECK(pthread_create(&t, NULL, pipe_reader, &x) == 0, "create");
        cpu(i);
        ssize_t w;
        if (i % 2) {
            w = write(p[1], src, BIG);
        } else {
            struct iovec iov[4];
            for (int k = 0; k < 4; k++) iov[k] = (struct iovec){src + (size_t)k * (BIG / 4), BIG / 4};
            w = writev(p[1], iov, 4);
        }
        CHECK(w == (ssize_t)BIG, "%s of 8 MiB into a pipe returned %zd", i % 2 ? "write" : "writev", w);
        join(t);
        CHECK(memcmp(src, dst, BIG) == 0, "pipe data corrupted");

        /* main reads 8 MiB */
        memset(dst, 0, BIG);
        struct xfer y = {p[1], 100000 + (unsigned)i * 1000, (unsigned)(i % 3) * 8};
        CHECK(pthread_create(&t, NULL, pipe_writer, &y) == 0, "create");
        cpu(i);
        size_t got = 0;
        while (got < BIG) {
            ssize_t r;
            if (i % 2) {
                r = read(p[0], dst + got, BIG - got);
            } else {
                struct iovec iov[2] = {{dst + got, (BIG - got) / 2}, {dst + got + (BIG - got) / 2, BIG - got - (BIG - got) / 2}};
                r = readv(p[0], iov, 2);
            }
            CHECK(r > 0, "%s from a pipe returned %zd after %zu bytes", i % 2 ? "read" : "readv", r, got);
            got += (size_t)r;
        }
        join(t);
        CHECK(memcmp(src, dst, BIG) == 0, "pipe data corrupted");
        close(p[0]);
        close(p[1]);
    }
    printf("pipe write/writev/read/readv of 8 MiB: ok x%d\n", n);
}

static void test_files(int n) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/linger-run-io-%d", (int)getpid());
    for (int i = 0; i < n; i++) {
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        CHECK(fd >= 0, "open %s", path);
        cpu(i);
        ssize_t w;
        switch (i % 3) {
        case 0: w = write(fd, src, BIG); break;
        case 1: w = pwrite(fd, src, BIG, 0); break;
        default: {
            struct iovec iov[3] = {{src, 1000}, {src + 1000, BIG / 2}, {src + 1000 + BIG / 2, BIG / 2 - 1000}};
            w = writev(fd, iov, 3);
        }
        }
        CHECK(w == (ssize_t)BIG, "file write form %d returned %zd", i % 3, w);
        CHECK(fsync(fd) == 0, "fsync");
        memset(dst, 0, BIG);
        CHECK(lseek(fd, 0, SEEK_SET) == 0, "lseek");
        cpu(i);
        ssize_t r;
        switch (i % 3) {
        case 0: r = read(fd, dst, BIG); break;
        case 1: r = pread(fd, dst, BIG, 0); break;
        default: {
            struct iovec iov[2] = {{dst, 12345}, {dst + 12345, BIG - 12345}};
            r = readv(fd, iov, 2);
        }
        }
        CHECK(r == (ssize_t)BIG, "file read form %d returned %zd", i % 3, r);
        CHECK(memcmp(src, dst, BIG) == 0, "file data corrupted");
        close(fd);
    }
    unlink(path);
    printf("regular file read/write/pread/pwrite/readv/writev of 8 MiB: ok x%d\n", n);
}

static char fifo[64];
static void open_fifo_w(void *arg) {
    int fd = open(fifo, O_WRONLY | O_CLOEXEC);
    CHECK(fd >= 0, "helper open fifo");
    CHECK(write(fd, "f", 1) == 1, "helper write fifo");
    *(int *)arg = fd;
}
static void open_fifo_r(void *arg) {
    int fd = open(fifo, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0, "helper open fifo");
    *(int *)arg = fd;
}

static void test_fifo(int n) {
    snprintf(fifo, sizeof fifo, "/tmp/linger-run-fifo-%d", (int)getpid());
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    for (int i = 0; i < n; i++) {
        int other = -1;
        cpu(i);
        uint64_t t0 = now_ns();
        pthread_t t = after_ms(2 + (unsigned)(i % 3), open_fifo_w, &other);
        int fd = open(fifo, O_RDONLY | O_CLOEXEC);
        CHECK(fd >= 0, "open(fifo, O_RDONLY) failed");
        CHECK_ELAPSED(t0, (2 + i % 3) * MS, "open(fifo)");
        char c;
        CHECK(read(fd, &c, 1) == 1 && c == 'f', "read fifo");
        join(t);
        close(fd);
        close(other);

        cpu(i);
        t0 = now_ns();
        t = after_ms(2 + (unsigned)(i % 3), open_fifo_r, &other);
        fd = open(fifo, O_WRONLY | O_CLOEXEC);
        CHECK(fd >= 0, "open(fifo, O_WRONLY) failed");
        CHECK_ELAPSED(t0, (2 + i % 3) * MS, "open(fifo)");
        join(t);
        close(fd);
        close(other);
    }
    unlink(fifo);
    printf("open of a FIFO: ok x%d\n", 2 * n);
}

static char watchdir[64];
static void create_file(void *arg) {
    char p[128];
    snprintf(p, sizeof p, "%s/f%d", watchdir, (int)(intptr_t)arg);
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    CHECK(fd >= 0, "helper create");
    close(fd);
}

static void test_inotify(int n) {
    snprintf(watchdir, sizeof watchdir, "/tmp/linger-run-inotify-%d", (int)getpid());
    CHECK(mkdir(watchdir, 0700) == 0, "mkdir");
    int in = inotify_init1(IN_CLOEXEC);
    CHECK(in >= 0, "inotify_init1");
    CHECK(inotify_add_watch(in, watchdir, IN_CREATE) >= 0, "inotify_add_watch");
    for (int i = 0; i < n; i++) {
        cpu(i);
        uint64_t t0 = now_ns();
        pthread_t t = after_ms(2 + (unsigned)(i % 3), create_file, (void *)(intptr_t)i);
        union {
            struct inotify_event ev;
            char raw[sizeof(struct inotify_event) + 256];
        } u;
        ssize_t r = read(in, &u, sizeof u);
        CHECK(r >= (ssize_t)sizeof u.ev, "read(inotify) returned %zd", r);
        char want[16];
        snprintf(want, sizeof want, "f%d", i);
        CHECK((u.ev.mask & IN_CREATE) && u.ev.len > 0 && strcmp(u.ev.name, want) == 0, "inotify event %#x %s", u.ev.mask,
              u.ev.len ? u.ev.name : "");
        CHECK_ELAPSED(t0, (2 + i % 3) * MS, "read(inotify)");
        join(t);
    }
    close(in);
    for (int i = 0; i < n; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s/f%d", watchdir, i);
        unlink(p);
    }
    rmdir(watchdir);
    printf("read of inotify: ok x%d\n", n);
}

static void test_random(int n) {
    for (int i = 0; i < n; i++) {
        unsigned char b[256];
        cpu(i);
        CHECK(getrandom(b, sizeof b, 0) == (ssize_t)sizeof b, "getrandom");
        CHECK(getentropy(b, sizeof b) == 0, "getentropy");
    }
    printf("getrandom/getentropy: ok x%d\n", n);
}

static void test_wait(int n) {
    static const char *const forms[] = {"wait", "waitpid", "wait3", "wait4", "waitid"};
    for (int i = 0; i < 5 * n; i++) {
        int form = i % 5;
        pid_t pid = fork();
        CHECK(pid >= 0, "fork");
        if (pid == 0) {
            helper_sleep_ms(2 + (unsigned)(i % 3));
            _exit(i % 100);
        }
        uint64_t t0 = now_ns();
        cpu(i);
        int st = 0;
        pid_t r;
        struct rusage ru;
        errno = 0;
        switch (form) {
        case 0: r = wait(&st); break;
        case 1: r = waitpid(pid, &st, 0); break;
        case 2: r = wait3(&st, 0, &ru); break;
        case 3: r = wait4(pid, &st, 0, &ru); break;
        default: {
            siginfo_t si;
            memset(&si, 0, sizeof si);
            int rc = waitid(P_PID, (id_t)pid, &si, WEXITED);
            CHECK(rc == 0, "waitid returned %d", rc);
            CHECK(si.si_code == CLD_EXITED && si.si_status == i % 100, "waitid status");
            r = si.si_pid;
            st = (i % 100) << 8;
        }
        }
        CHECK(r == pid, "%s returned %d (child %d)", forms[form], (int)r, (int)pid);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == i % 100, "%s: status %#x", forms[form], st);
        CHECK_ELAPSED(t0, 2 * MS - MS / 2, forms[form]);
    }
    printf("wait/waitpid/wait3/wait4/waitid: ok x%d each\n", n);
}

int main(void) {
    src = malloc(BIG);
    dst = malloc(BIG);
    CHECK(src && dst, "malloc");
    for (size_t k = 0; k < BIG; k++) src[k] = (unsigned char)(k * 7 + (k >> 11));
    test_pipes(iters(8));
    test_files(iters(6));
    test_fifo(iters(10));
    test_inotify(iters(10));
    test_random(iters(10));
    test_wait(iters(6));
    return 0;
}
