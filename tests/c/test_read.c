/*
 * Blocking calls stay preemptible: a function blocked in read() on an empty
 * pipe is preempted at its deadline, survives resumes with no data, and then
 * receives the data the caller writes; read() never fails with EINTR.
 * Likewise for a function blocked in write() on a full pipe.
 */
#include "common.h"

#include <fcntl.h>
#include <pthread.h>

struct reader {
    int fd;
    char buf[64];
    ssize_t ret;
    int err;
    int entered, finished;
};

static void reader_fn(void *arg) {
    struct reader *r = arg;
    r->entered = 1;
    errno = 0;
    r->ret = read(r->fd, r->buf, sizeof r->buf);
    r->err = errno;
    r->finished = 1;
}

struct writer {
    int fd;
    size_t total, done;
    int err;
    int finished;
};

static void writer_fn(void *arg) {
    struct writer *w = arg;
    static char chunk[4096];
    memset(chunk, 'w', sizeof chunk);
    while (w->done < w->total) {
        size_t n = w->total - w->done < sizeof chunk ? w->total - w->done : sizeof chunk;
        errno = 0;
        ssize_t r = write(w->fd, chunk, n);
        if (r < 0) {
            w->err = errno;
            break;
        }
        w->done += (size_t)r;
    }
    w->finished = 1;
}

static void test_read(int n) {
    const uint64_t timeout_us = 2000;
    uint64_t worst = 0;
    for (int i = 0; i < n; i++) {
        int fds[2];
        CHECK(pipe(fds) == 0, "pipe");
        struct reader r = {.fd = fds[0], .ret = -2};
        uint64_t t0 = now_ns();
        linger_t l = linger_launch(reader_fn, timeout_us, &r);
        uint64_t took = now_ns() - t0;
        CHECK(!l.is_complete && l.continuation, "iteration %d: launch returned complete=%d (read returned %zd errno %d)",
              i, l.is_complete, r.ret, r.err);
        /* A stalled machine can take the deadline before the reader starts. */
        while (!l.is_complete && !r.entered) CHECK(linger_resume(&l, timeout_us) == 0, "iteration %d: resume to the read", i);
        CHECK(r.entered && !r.finished, "iteration %d: reader entered=%d finished=%d", i, r.entered, r.finished);
        CHECK(took >= timeout_us * 1000, "iteration %d: returned after %llu us, before the %llu us deadline", i,
              (unsigned long long)(took / 1000), (unsigned long long)timeout_us);
        /* Preempted, not left waiting for data that never comes: how late
         * is for the benchmarks (a CI run on an overloaded machine once took
         * 220 ms over the 52 ms this bound used to be). */
        CHECK(took < (timeout_us + 2000000) * 1000 * slack(), "iteration %d: blocked read preempted only after %llu us",
              i, (unsigned long long)(took / 1000));
        if (took > worst) worst = took;
        CHECK(!linger_yielded(&l), "iteration %d: preempted read reported as yielded", i);
        /* A few more slices with no data: still blocked, no EINTR. */
        for (int k = 0; k < 3; k++) {
            CHECK(linger_resume(&l, 200) == 0, "iteration %d: resume without data", i);
            CHECK(!l.is_complete && !r.finished, "iteration %d: read returned %zd errno %d without data", i, r.ret,
                  r.err);
        }
        char msg[32];
        int len = snprintf(msg, sizeof msg, "hello %d", i);
        CHECK(write(fds[1], msg, (size_t)len) == len, "iteration %d: caller write", i);
        CHECK(linger_resume(&l, UINT64_MAX) == 0 && l.is_complete, "iteration %d: resume with data incomplete", i);
        CHECK(r.ret == len, "iteration %d: read returned %zd (errno %d: %s), want %d", i, r.ret, r.err,
              strerror(r.err), len);
        CHECK(r.err == 0, "iteration %d: read set errno %d (%s)", i, r.err, strerror(r.err));
        CHECK(memcmp(r.buf, msg, (size_t)len) == 0, "iteration %d: wrong data", i);
        close(fds[0]);
        close(fds[1]);
    }
    fprintf(stderr, "read: worst first slice %llu us for a %llu us timeout\n", (unsigned long long)(worst / 1000),
            (unsigned long long)timeout_us);
}

/* Data arriving between short slices, many times, on a non-trivial protocol. */
static void test_read_stream(int n) {
    for (int i = 0; i < n; i++) {
        int fds[2];
        CHECK(pipe(fds) == 0, "pipe");
        struct reader r = {.fd = fds[0], .ret = -2};
        linger_t l = linger_launch(reader_fn, 50, &r);
        int slices = 0;
        while (!l.is_complete && slices < 20) {
            CHECK(linger_resume(&l, 50) == 0, "resume");
            slices++;
        }
        CHECK(!l.is_complete, "iteration %d: read completed without data (ret %zd errno %d)", i, r.ret, r.err);
        CHECK(write(fds[1], "x", 1) == 1, "write");
        while (!l.is_complete) CHECK(linger_resume(&l, 50) == 0, "resume");
        CHECK(r.ret == 1 && r.err == 0 && r.buf[0] == 'x', "iteration %d: ret %zd errno %d", i, r.ret, r.err);
        close(fds[0]);
        close(fds[1]);
    }
}

static void test_write(int n) {
    for (int i = 0; i < n; i++) {
        int fds[2];
        CHECK(pipe(fds) == 0, "pipe");
        int cap = fcntl(fds[1], F_GETPIPE_SZ);
        CHECK(cap > 0, "F_GETPIPE_SZ");
        struct writer w = {.fd = fds[1], .total = (size_t)cap * 3};
        uint64_t t0 = now_ns();
        linger_t l = linger_launch(writer_fn, 1000, &w);
        uint64_t took = now_ns() - t0;
        CHECK(!l.is_complete, "iteration %d: writer of 3 pipe buffers completed without a reader", i);
        CHECK(took < 60000000ull * slack(), "iteration %d: blocked write preempted after %llu us", i,
              (unsigned long long)(took / 1000));
        size_t got = 0;
        char buf[8192];
        /* The caller's reads must not block: if a slice happens to produce
         * nothing (the thread can be descheduled for a whole slice on a busy
         * machine), only resuming the writer makes progress. */
        CHECK(fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0, "O_NONBLOCK");
        while (!l.is_complete || got < w.total) {
            ssize_t r = read(fds[0], buf, sizeof buf);
            CHECK(r > 0 || (r < 0 && errno == EAGAIN && !l.is_complete), "caller read");
            for (ssize_t k = 0; k < r; k++) CHECK(buf[k] == 'w', "bad byte");
            if (r > 0) got += (size_t)r;
            if (!l.is_complete) CHECK(linger_resume(&l, 300) == 0, "resume writer");
        }
        CHECK(w.finished && w.err == 0 && w.done == w.total, "iteration %d: writer err %d done %zu of %zu", i, w.err,
              w.done, w.total);
        CHECK(got == w.total, "iteration %d: read %zu of %zu", i, got, w.total);
        close(fds[0]);
        close(fds[1]);
    }
}

/* leave_blocked: the deadline leaves the wait alone (no timer signals while
 * it blocks) and the function is stopped, or ends, only after the data came. */
static void *write_later(void *arg) {
    int fd = *(int *)arg;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    CHECK(write(fd, "late", 4) == 4, "helper write");
    return NULL;
}

static void test_leave_blocked(int n) {
    for (int i = 0; i < n; i++) {
        int fds[2];
        CHECK(pipe(fds) == 0, "pipe");
        struct reader r = {.fd = fds[0], .ret = -2};
        linger_stats_t before, after;
        CHECK(linger_stats(&before) == 0, "linger_stats");
        pthread_t t;
        CHECK(pthread_create(&t, NULL, write_later, &fds[1]) == 0, "pthread_create");
        linger_opts_t o = {.leave_blocked = true};
        linger_t l = linger_launch_opts(reader_fn, 1000, &r, &o);
        CHECK(l.is_complete || l.continuation, "iteration %d: launch failed (errno %d)", i, errno);
        /* 1 ms slices over a 20 ms wait: stopped only before the read starts
         * (on a loaded machine) and just after it returns, never inside. */
        int stops = 0;
        while (!l.is_complete) {
            CHECK(linger_resume(&l, 1000) == 0, "resume");
            stops++;
        }
        CHECK(r.ret == 4 && r.err == 0, "iteration %d: read returned %zd (errno %d)", i, r.ret, r.err);
        CHECK(stops < 10, "iteration %d: stopped %d times in a 20 ms wait with 1 ms slices", i, stops);
        CHECK(linger_stats(&after) == 0, "linger_stats");
        CHECK(after.blocked_deadlines - before.blocked_deadlines == 1,
              "iteration %d: %llu deadlines left the wait alone, want 1", i,
              (unsigned long long)(after.blocked_deadlines - before.blocked_deadlines));
        pthread_join(t, NULL);
        close(fds[0]);
        close(fds[1]);
    }
}

int main(void) {
    watchdog(60, "test_read hung");
    test_read(iters(100));
    test_read_stream(iters(200));
    test_write(iters(100));
    test_leave_blocked(iters(10));
    PASS("test_read");
    return 0;
}
