/*
 * A pthread program, one thread per connection with blocking calls: an echo
 * server (an acceptor thread, a detached handler thread per connection) and
 * CLIENTS client threads that each send a message and read it back.
 *
 * tests/c/run.sh runs it as it is (port_echo), and once more after renaming
 * its pthread calls to turquoise's with sed, and nothing else (port_echo.turq,
 * linked with libturquoise): the port of issue 12, "switched to turq_* by
 * renaming its calls only, serves the same requests".
 */
#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>

#define CLIENTS 2000

static struct sockaddr_in addr;

static void *serve(void *arg) {
    int c = (int)(intptr_t)arg;
    char buf[4096];
    for (;;) {
        ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(c, buf + off, (size_t)(n - off));
            CHECK(w > 0, "server write");
            off += w;
        }
    }
    close(c);
    return NULL;
}

static void *acceptor(void *arg) {
    int l = (int)(intptr_t)arg;
    pthread_attr_t detached;
    CHECK(pthread_attr_init(&detached) == 0, "attr");
    CHECK(pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED) == 0, "detached");
    CHECK(pthread_attr_setstacksize(&detached, 256 * 1024) == 0, "stack size");
    for (;;) {
        int c = accept(l, NULL, NULL);
        CHECK(c >= 0, "accept");
        pthread_t t;
        CHECK(pthread_create(&t, &detached, serve, (void *)(intptr_t)c) == 0, "create handler");
    }
    return NULL;
}

static void *client(void *arg) {
    uintptr_t i = (uintptr_t)arg;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(s >= 0, "socket");
    CHECK(connect(s, (struct sockaddr *)&addr, sizeof addr) == 0, "connect");
    size_t len = 1000 + (i % 7) * 3000;
    unsigned char *msg = malloc(len), *back = malloc(len);
    CHECK(msg && back, "malloc");
    for (size_t k = 0; k < len; k++) msg[k] = (unsigned char)(k * 31 + i);
    for (size_t off = 0; off < len;) {
        ssize_t w = write(s, msg + off, len - off);
        CHECK(w > 0, "client write");
        off += (size_t)w;
    }
    for (size_t off = 0; off < len;) {
        ssize_t r = read(s, back + off, len - off);
        CHECK(r > 0, "client read");
        off += (size_t)r;
    }
    sched_yield();
    int same = memcmp(msg, back, len) == 0;
    free(msg);
    free(back);
    close(s);
    return (void *)(uintptr_t)(same ? len : 0);
}

int main(void) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(l >= 0, "socket");
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof addr;
    CHECK(bind(l, (struct sockaddr *)&addr, sizeof addr) == 0, "bind");
    CHECK(listen(l, 4096) == 0, "listen");
    CHECK(getsockname(l, (struct sockaddr *)&addr, &alen) == 0, "getsockname");
    pthread_t a;
    CHECK(pthread_create(&a, NULL, acceptor, (void *)(intptr_t)l) == 0, "acceptor");
    CHECK(pthread_detach(a) == 0, "detach acceptor");

    int n = iters(CLIENTS);
    static pthread_t cs[CLIENTS];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < n; i++) CHECK(pthread_create(&cs[i], NULL, client, (void *)(uintptr_t)i) == 0, "client %d", i);
        size_t total = 0, want = 0;
        for (int i = 0; i < n; i++) {
            void *got;
            CHECK(pthread_join(cs[i], &got) == 0, "join %d", i);
            CHECK(got != NULL, "client %d: bytes differ", i);
            total += (size_t)(uintptr_t)got;
            want += 1000 + (size_t)(i % 7) * 3000;
        }
        CHECK(total == want, "round %d: %zu of %zu bytes back", round, total, want);
    }
    printf("ok: %d clients x 2 rounds\n", n);
    return 0;
}
