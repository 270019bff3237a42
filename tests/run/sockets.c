/*
 * Socket calls block until the peer acts, or for their full timeout, with and
 * without SO_RCVTIMEO/SO_SNDTIMEO (with a timeout set the kernel never
 * restarts them after a handler, signal(7)):
 *   accept, accept4 (TCP on 127.0.0.1), connect (AF_UNIX with a full
 *   backlog), recv, recvfrom, recvmsg, recvmmsg, read on a socket,
 *   send, sendto, sendmsg, write (send buffer full), and
 *   recv(MSG_WAITALL)/send of 8 MiB: full transfers.
 */
#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

/* SO_RCVTIMEO/SO_SNDTIMEO are kept in jiffies, and the kernel's wait may end
 * up to one tick (10 ms at HZ=100) before the requested time, also in plain
 * runs. So the timeout cases use 12-14 ms and only require 2 ms: what they
 * catch is a timeout that never expires (livelock) or is cut short by far. */
#define TICK_MS 10
static int sock_tmo(int i) { return 12 + i % 3; }

static void cpu(int i) { mix(20000 + (uint64_t)(i % 5) * 10000, (uint64_t)i); }

static void set_timeout(int fd, int opt, int ms) {
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    CHECK(setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv) == 0, "setsockopt timeout");
}

/* ---- accept ---- */
static struct sockaddr_in lo_addr;
static void tcp_connect(void *arg) {
    (void)arg;
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(c >= 0, "socket");
    CHECK(connect(c, (struct sockaddr *)&lo_addr, sizeof lo_addr) == 0, "helper connect");
    CHECK(write(c, "hello", 5) == 5, "helper write");
    close(c);
}

static void test_accept(int n) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(l >= 0, "socket");
    lo_addr.sin_family = AF_INET;
    lo_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lo_addr.sin_port = 0;
    CHECK(bind(l, (struct sockaddr *)&lo_addr, sizeof lo_addr) == 0, "bind");
    socklen_t len = sizeof lo_addr;
    CHECK(getsockname(l, (struct sockaddr *)&lo_addr, &len) == 0, "getsockname");
    CHECK(listen(l, 16) == 0, "listen");
    for (int i = 0; i < n; i++) {
        int with_timeout = i % 2;
        set_timeout(l, SO_RCVTIMEO, with_timeout ? 10000 * (int)slack() : 0);
        cpu(i);
        uint64_t t0 = now_ns();
        pthread_t t = after_ms(2 + (unsigned)(i % 3), tcp_connect, NULL);
        errno = 0;
        int a = (i % 4 < 2) ? accept(l, NULL, NULL) : accept4(l, NULL, NULL, SOCK_CLOEXEC);
        CHECK(a >= 0, "accept%s (%s SO_RCVTIMEO) failed", i % 4 < 2 ? "" : "4", with_timeout ? "with" : "without");
        CHECK_ELAPSED(t0, (2 + i % 3) * MS, "accept");
        char buf[8];
        CHECK(read(a, buf, sizeof buf) == 5 && memcmp(buf, "hello", 5) == 0, "read from accepted socket");
        close(a);
        join(t);
        /* with a timeout and nobody connecting: EAGAIN after the full timeout */
        int tmo = sock_tmo(i);
        set_timeout(l, SO_RCVTIMEO, tmo);
        cpu(i);
        t0 = now_ns();
        errno = 0;
        a = accept(l, NULL, NULL);
        CHECK(a == -1 && (errno == EAGAIN || errno == EWOULDBLOCK), "accept with SO_RCVTIMEO and nobody connecting returned %d", a);
        CHECK_ELAPSED(t0, (tmo - TICK_MS) * MS, "accept timeout");
    }
    close(l);
    printf("accept/accept4: ok x%d, accept timeout: ok x%d\n", n, n);
}

/* ---- connect (AF_UNIX, backlog full) ---- */
static int ulisten;
static void unix_accept_one(void *arg) {
    (void)arg;
    int a = accept(ulisten, NULL, NULL);
    CHECK(a >= 0, "helper accept");
    close(a);
}

static void test_connect(int n) {
    struct sockaddr_un ua = {.sun_family = AF_UNIX};
    /* abstract address: nothing in the file system */
    snprintf(ua.sun_path + 1, sizeof ua.sun_path - 1, "linger-run-test-%d", (int)getpid());
    socklen_t ulen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(ua.sun_path + 1));
    ulisten = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(ulisten >= 0, "socket");
    CHECK(bind(ulisten, (struct sockaddr *)&ua, ulen) == 0, "bind unix");
    CHECK(listen(ulisten, 0) == 0, "listen");
    for (int i = 0; i < n; i++) {
        /* fill the backlog */
        int fill[8], nfill = 0;
        for (;;) {
            CHECK(nfill < 8, "backlog does not fill");
            int f = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            CHECK(f >= 0, "socket");
            if (connect(f, (struct sockaddr *)&ua, ulen) != 0) {
                CHECK(errno == EAGAIN, "filling connect");
                close(f);
                break;
            }
            fill[nfill++] = f;
        }
        int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(c >= 0, "socket");
        int with_timeout = i % 2;
        if (with_timeout) set_timeout(c, SO_SNDTIMEO, 10000 * (int)slack());
        cpu(i);
        uint64_t t0 = now_ns();
        pthread_t t = after_ms(2 + (unsigned)(i % 3), unix_accept_one, NULL);
        errno = 0;
        int rc = connect(c, (struct sockaddr *)&ua, ulen);
        CHECK(rc == 0, "blocking connect (%s SO_SNDTIMEO) returned %d", with_timeout ? "with" : "without", rc);
        CHECK_ELAPSED(t0, (2 + i % 3) * MS, "connect");
        struct sockaddr_un peer;
        socklen_t plen = sizeof peer;
        CHECK(getpeername(c, (struct sockaddr *)&peer, &plen) == 0, "connect returned 0 but the socket is not connected");
        join(t);
        /* backlog full again; with a timeout and nobody accepting: EAGAIN after it */
        int c2 = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(c2 >= 0, "socket");
        int tmo = sock_tmo(i);
        set_timeout(c2, SO_SNDTIMEO, tmo);
        cpu(i);
        t0 = now_ns();
        errno = 0;
        rc = connect(c2, (struct sockaddr *)&ua, ulen);
        CHECK(rc == -1 && errno == EAGAIN, "connect with SO_SNDTIMEO to a full backlog returned %d", rc);
        CHECK_ELAPSED(t0, (tmo - TICK_MS) * MS, "connect timeout");
        close(c2);
        /* drain */
        for (int k = 0; k < nfill; k++) unix_accept_one(NULL);
        for (int k = 0; k < nfill; k++) close(fill[k]);
        close(c);
    }
    close(ulisten);
    printf("connect: ok x%d, connect timeout: ok x%d\n", n, n);
}

/* ---- receiving ---- */
struct sendarg {
    int fd;
    int i;
};
static void send_msg(void *arg) {
    struct sendarg *s = arg;
    char buf[32];
    int len = snprintf(buf, sizeof buf, "message %d", s->i);
    CHECK(send(s->fd, buf, (size_t)len, 0) == len, "helper send");
}

static void test_recv(int n) {
    static const char *const forms[] = {"recv", "recvfrom", "recvmsg", "recvmmsg", "read"};
    for (int i = 0; i < 5 * n; i++) {
        int form = i % 5;
        int with_timeout = (i / 5) % 2;
        int sv[2];
        /* recvmmsg on datagrams, the rest on a stream */
        CHECK(socketpair(AF_UNIX, (form == 3 ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
        if (with_timeout) set_timeout(sv[0], SO_RCVTIMEO, 10000 * (int)slack());
        cpu(i);
        struct sendarg sa = {sv[1], i};
        uint64_t t0 = now_ns();
        pthread_t t = after_ms(2 + (unsigned)(i % 3), send_msg, &sa);
        char buf[64] = {0};
        ssize_t r;
        errno = 0;
        switch (form) {
        case 0: r = recv(sv[0], buf, sizeof buf, 0); break;
        case 1: {
            struct sockaddr_un from;
            socklen_t fl = sizeof from;
            r = recvfrom(sv[0], buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
            break;
        }
        case 2: {
            struct iovec iov = {buf, sizeof buf};
            struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
            r = recvmsg(sv[0], &mh, 0);
            break;
        }
        case 3: {
            struct iovec iov = {buf, sizeof buf};
            struct mmsghdr mm = {.msg_hdr = {.msg_iov = &iov, .msg_iovlen = 1}};
            int k = recvmmsg(sv[0], &mm, 1, 0, NULL);
            r = k == 1 ? (ssize_t)mm.msg_len : -1;
            break;
        }
        default: r = read(sv[0], buf, sizeof buf); break;
        }
        char want[32];
        int wl = snprintf(want, sizeof want, "message %d", i);
        CHECK(r == wl && memcmp(buf, want, (size_t)wl) == 0, "%s (%s SO_RCVTIMEO) returned %zd '%s'", forms[form],
              with_timeout ? "with" : "without", r, buf);
        CHECK_ELAPSED(t0, (2 + i % 3) * MS, forms[form]);
        join(t);

        /* with a short timeout and nothing sent: EAGAIN after the full timeout */
        int tmo = sock_tmo(i);
        set_timeout(sv[0], SO_RCVTIMEO, tmo);
        cpu(i);
        t0 = now_ns();
        errno = 0;
        switch (form) {
        case 0: r = recv(sv[0], buf, sizeof buf, 0); break;
        case 1: r = recvfrom(sv[0], buf, sizeof buf, 0, NULL, NULL); break;
        case 2: {
            struct iovec iov = {buf, sizeof buf};
            struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
            r = recvmsg(sv[0], &mh, 0);
            break;
        }
        case 3: {
            struct iovec iov = {buf, sizeof buf};
            struct mmsghdr mm = {.msg_hdr = {.msg_iov = &iov, .msg_iovlen = 1}};
            r = recvmmsg(sv[0], &mm, 1, 0, NULL);
            break;
        }
        default: r = read(sv[0], buf, sizeof buf); break;
        }
        CHECK(r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK), "%s with SO_RCVTIMEO and nothing sent returned %zd",
              forms[form], r);
        CHECK_ELAPSED(t0, (tmo - TICK_MS) * MS, forms[form]);
        close(sv[0]);
        close(sv[1]);
    }
    printf("recv/recvfrom/recvmsg/recvmmsg/read: ok x%d each, timeouts: ok\n", n);
}

/* ---- sending into a full buffer ---- */
static void drain_some(void *arg) {
    int fd = *(int *)arg;
    char buf[65536];
    CHECK(read(fd, buf, sizeof buf) > 0, "helper drain");
}

static void test_send(int n) {
    static const char *const forms[] = {"send", "sendto", "sendmsg", "write"};
    for (int i = 0; i < 4 * n; i++) {
        int form = i % 4;
        int with_timeout = (i / 4) % 2;
        int sv[2];
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
        int small = 4096;
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
        setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
        char chunk[512];
        memset(chunk, 'z', sizeof chunk);
        while (send(sv[0], chunk, sizeof chunk, MSG_DONTWAIT) > 0) {
        }
        CHECK(errno == EAGAIN, "fill");
        if (with_timeout) set_timeout(sv[0], SO_SNDTIMEO, 10000 * (int)slack());
        cpu(i);
        uint64_t t0 = now_ns();
        pthread_t t = after_ms(2 + (unsigned)(i % 3), drain_some, &sv[1]);
        ssize_t r;
        errno = 0;
        switch (form) {
        case 0: r = send(sv[0], "a", 1, 0); break;
        case 1: r = sendto(sv[0], "a", 1, 0, NULL, 0); break;
        case 2: {
            struct iovec iov = {"a", 1};
            struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
            r = sendmsg(sv[0], &mh, 0);
            break;
        }
        default: r = write(sv[0], "a", 1); break;
        }
        CHECK(r == 1, "%s into a full buffer (%s SO_SNDTIMEO) returned %zd", forms[form], with_timeout ? "with" : "without", r);
        CHECK_ELAPSED(t0, (2 + i % 3) * MS, forms[form]);
        join(t);
        /* full again, short timeout, nobody reading: EAGAIN after it */
        while (send(sv[0], chunk, sizeof chunk, MSG_DONTWAIT) > 0) {
        }
        int tmo = sock_tmo(i);
        set_timeout(sv[0], SO_SNDTIMEO, tmo);
        cpu(i);
        t0 = now_ns();
        errno = 0;
        r = (form == 3) ? write(sv[0], "b", 1) : send(sv[0], "b", 1, 0);
        CHECK(r == -1 && errno == EAGAIN, "%s with SO_SNDTIMEO into a full buffer returned %zd", forms[form], r);
        CHECK_ELAPSED(t0, (tmo - TICK_MS) * MS, forms[form]);
        close(sv[0]);
        close(sv[1]);
    }
    printf("send/sendto/sendmsg/write: ok x%d each, timeouts: ok\n", n);
}

/* ---- 8 MiB in one call each way ---- */
#define BIG (8u << 20)
struct bulk {
    int fd;
    unsigned char *buf;
};
static void *bulk_reader(void *p) {
    struct bulk *b = p;
    size_t got = 0;
    while (got < BIG) {
        ssize_t r = read(b->fd, b->buf + got, BIG - got > 100000 ? 100000 : BIG - got);
        CHECK(r > 0, "bulk reader");
        got += (size_t)r;
    }
    return NULL;
}
static void *bulk_writer(void *p) {
    struct bulk *b = p;
    size_t put = 0;
    while (put < BIG) {
        ssize_t w = write(b->fd, b->buf + put, BIG - put > 77777 ? 77777 : BIG - put);
        CHECK(w > 0, "bulk writer");
        put += (size_t)w;
    }
    return NULL;
}

static void test_bulk(int n) {
    unsigned char *src = malloc(BIG), *dst = malloc(BIG);
    CHECK(src && dst, "malloc");
    for (size_t k = 0; k < BIG; k++) src[k] = (unsigned char)(k * 131 + (k >> 13));
    for (int i = 0; i < n; i++) {
        int sv[2];
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
        /* send 8 MiB in one call: full count */
        memset(dst, 0, BIG);
        struct bulk b = {sv[1], dst};
        pthread_t t;
        CHECK(pthread_create(&t, NULL, bulk_reader, &b) == 0, "create");
        ssize_t w = (i % 2) ? send(sv[0], src, BIG, 0) : write(sv[0], src, BIG);
        CHECK(w == (ssize_t)BIG, "%s of 8 MiB on a blocking socket returned %zd", i % 2 ? "send" : "write", w);
        join(t);
        CHECK(memcmp(src, dst, BIG) == 0, "data corrupted");
        /* recv(MSG_WAITALL) of 8 MiB in one call: full count */
        memset(dst, 0, BIG);
        struct bulk c = {sv[1], src};
        CHECK(pthread_create(&t, NULL, bulk_writer, &c) == 0, "create");
        ssize_t r = recv(sv[0], dst, BIG, MSG_WAITALL);
        CHECK(r == (ssize_t)BIG, "recv(MSG_WAITALL) of 8 MiB returned %zd", r);
        join(t);
        CHECK(memcmp(src, dst, BIG) == 0, "data corrupted");
        close(sv[0]);
        close(sv[1]);
    }
    free(src);
    free(dst);
    printf("8 MiB send/write and recv(MSG_WAITALL): ok x%d\n", n);
}

int main(int argc, char **argv) {
    /* sockets [accept|connect|recv|send|bulk]: one part only (default: all) */
    const char *only = argc > 1 ? argv[1] : "all";
    int all = !strcmp(only, "all");
    int n = iters(6);
    if (all || !strcmp(only, "accept")) test_accept(n);
    if (all || !strcmp(only, "connect")) test_connect(n);
    if (all || !strcmp(only, "recv")) test_recv(n);
    if (all || !strcmp(only, "send")) test_send(n);
    if (all || !strcmp(only, "bulk")) test_bulk(iters(6));
    return 0;
}
