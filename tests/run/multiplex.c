/*
 * File-descriptor multiplexing never restarts after a signal handler
 * (signal(7)): select, pselect, poll, ppoll, epoll_wait, epoll_pwait and
 * epoll_pwait2. Under slicing they must still behave as in a plain run:
 *   - nothing ready, finite timeout: return 0 after at least the full timeout
 *     (never -1/EINTR, never early);
 *   - a pipe made ready by another thread after a few ms: return exactly that
 *     fd (also with an infinite timeout);
 *   - with a signal mask argument (NULL, empty, full) where the call has one.
 */
#include "common.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>


enum kind { SELECT, PSELECT, POLL, PPOLL, EPOLL_WAIT, EPOLL_PWAIT, EPOLL_PWAIT2, NKINDS };
static const char *const names[] = {"select", "pselect", "poll", "ppoll", "epoll_wait", "epoll_pwait", "epoll_pwait2"};

static void write_byte(void *arg) {
    int fd = *(int *)arg;
    CHECK(write(fd, "x", 1) == 1, "helper write");
}

/* Waits on fds[0] (read end) and fds2[0] (never ready) with the given kind.
 * timeout_ms < 0: infinite. maskmode: 0 NULL, 1 empty set, 2 full set.
 * Returns the call's return value; *which = the ready fd (or -1). */
static int wait_one(enum kind k, int rfd, int idle_fd, int timeout_ms, int maskmode, int *which) {
    sigset_t set, *mask = NULL;
    if (maskmode == 1) {
        sigemptyset(&set);
        mask = &set;
    } else if (maskmode == 2) {
        sigfillset(&set);
        mask = &set;
    }
    *which = -1;
    int rc;
    switch (k) {
    case SELECT:
    case PSELECT: {
        fd_set r;
        FD_ZERO(&r);
        FD_SET(rfd, &r);
        FD_SET(idle_fd, &r);
        int nfds = (rfd > idle_fd ? rfd : idle_fd) + 1;
        if (k == SELECT) {
            struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
            rc = select(nfds, &r, NULL, NULL, timeout_ms < 0 ? NULL : &tv);
            if (rc == 0) CHECK(tv.tv_sec == 0 && tv.tv_usec == 0, "select timed out but left %ld.%06ld in the timeout", (long)tv.tv_sec, (long)tv.tv_usec);
        } else {
            struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
            rc = pselect(nfds, &r, NULL, NULL, timeout_ms < 0 ? NULL : &ts, mask);
        }
        if (rc > 0) {
            CHECK(!FD_ISSET(idle_fd, &r), "%s: idle fd reported ready", names[k]);
            if (FD_ISSET(rfd, &r)) *which = rfd;
        }
        return rc;
    }
    case POLL:
    case PPOLL: {
        struct pollfd p[2] = {{idle_fd, POLLIN, 0}, {rfd, POLLIN, 0}};
        if (k == POLL) {
            rc = poll(p, 2, timeout_ms);
        } else {
            struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
            rc = ppoll(p, 2, timeout_ms < 0 ? NULL : &ts, mask);
        }
        if (rc > 0) {
            CHECK(p[0].revents == 0, "%s: idle fd has revents %#x", names[k], p[0].revents);
            if (p[1].revents & POLLIN) *which = rfd;
        }
        return rc;
    }
    default: {
        int ep = epoll_create1(EPOLL_CLOEXEC);
        CHECK(ep >= 0, "epoll_create1");
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = rfd};
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, rfd, &ev) == 0, "epoll_ctl");
        ev.data.fd = idle_fd;
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, idle_fd, &ev) == 0, "epoll_ctl");
        struct epoll_event out[4];
        memset(out, 0, sizeof out);
        if (k == EPOLL_WAIT) {
            rc = epoll_wait(ep, out, 4, timeout_ms);
        } else if (k == EPOLL_PWAIT) {
            rc = epoll_pwait(ep, out, 4, timeout_ms, mask);
        } else {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
            struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
            rc = epoll_pwait2(ep, out, 4, timeout_ms < 0 ? NULL : &ts, mask);
#else
            rc = epoll_pwait(ep, out, 4, timeout_ms, mask);
#endif
        }
        int e = errno;
        if (rc > 0) {
            CHECK(rc == 1, "%s: %d events", names[k], rc);
            *which = out[0].data.fd;
        }
        close(ep);
        errno = e;
        return rc;
    }
    }
}

int main(void) {
    int n = iters(12);
    for (int k = 0; k < NKINDS; k++) {
        int timeouts = 0, readies = 0;
        for (int i = 0; i < n; i++) {
            int a[2], b[2];
            CHECK(pipe(a) == 0 && pipe(b) == 0, "pipe");
            int maskmode = i % 3;
            int which;

            /* nothing ready */
            mix(30000, (uint64_t)i);
            int tmo = 3 + i % 4;
            uint64_t t0 = now_ns();
            errno = 0;
            int rc = wait_one(k, a[0], b[0], tmo, maskmode, &which);
            CHECK(rc == 0, "%s (mask mode %d) with nothing ready returned %d instead of timing out", names[k], maskmode, rc);
            CHECK_ELAPSED(t0, tmo * MS, names[k]);
            timeouts++;

            /* ready after a few ms; finite and infinite timeouts */
            mix(30000, (uint64_t)i);
            int delay = 2 + i % 4;
            t0 = now_ns();
            pthread_t t = after_ms((unsigned)delay, write_byte, &a[1]);
            errno = 0;
            rc = wait_one(k, a[0], b[0], (i % 2) ? -1 : 5000, maskmode, &which);
            CHECK(rc == 1, "%s (mask mode %d) with a pipe made ready returned %d", names[k], maskmode, rc);
            CHECK(which == a[0], "%s reported fd %d instead of %d", names[k], which, a[0]);
            CHECK_ELAPSED(t0, delay * MS, names[k]);
            join(t);
            char c;
            CHECK(read(a[0], &c, 1) == 1 && c == 'x', "read back");
            readies++;
            close(a[0]);
            close(a[1]);
            close(b[0]);
            close(b[1]);
        }
        printf("%s: timed out %d times, woke on the ready fd %d times\n", names[k], timeouts, readies);
    }

    /* already ready, zero timeout: immediate */
    int a[2], which;
    CHECK(pipe(a) == 0, "pipe");
    CHECK(write(a[1], "y", 1) == 1, "write");
    for (int k = 0; k < NKINDS; k++) {
        int b[2];
        CHECK(pipe(b) == 0, "pipe");
        CHECK(wait_one(k, a[0], b[0], 0, 0, &which) == 1 && which == a[0], "%s with a ready fd and timeout 0", names[k]);
        close(b[0]);
        close(b[1]);
    }
    printf("zero timeouts: ok\n");
    return 0;
}
