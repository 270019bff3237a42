/*
 * A program that spends its time inside a shared library (zlib): deflates
 * and inflates buffers in main and in a worker thread, checks every round
 * trip, and prints a checksum. Under linger-run --isolate, main is stopped
 * inside its own copy of zlib (the stats show few deferred preemptions);
 * without, deadlines wait for each zlib call to return. The output must be
 * the same either way.
 */
#include "common.h"

#include <zlib.h>

#define LEN (4u << 20)

static uLong round_trip(unsigned seed, int level) {
    unsigned char *src = malloc(LEN), *out = malloc(LEN);
    uLongf clen = compressBound(LEN);
    unsigned char *c = malloc(clen);
    CHECK(src && out && c, "malloc");
    /* compressible but not trivial: runs of bytes from a small alphabet */
    uint32_t x = seed * 2654435761u + 1;
    for (unsigned i = 0; i < LEN; i++) {
        if ((i & 15) == 0) x = x * 1103515245u + 12345u;
        src[i] = (unsigned char)('a' + ((x >> 16) & 7));
    }
    CHECK(compress2(c, &clen, src, LEN, level) == Z_OK, "compress2");
    uLongf olen = LEN;
    CHECK(uncompress(out, &olen, c, clen) == Z_OK, "uncompress");
    CHECK(olen == LEN && memcmp(src, out, LEN) == 0, "round trip differs");
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, c, (uInt)clen);
    free(src);
    free(out);
    free(c);
    return crc;
}

static uLong worker_crc;

static void *worker(void *p) {
    (void)p;
    worker_crc = round_trip(99, 6);
    return NULL;
}

int main(void) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, NULL) == 0, "pthread_create");
    uLong sum = 0;
    int n = iters(6);
    for (int i = 0; i < n; i++) sum ^= round_trip((unsigned)i, 1 + i % 9);
    join(t);
    printf("zlib %s: %d round trips, checksum %08lx, worker %08lx\n", zlibVersion(), n, sum, worker_crc);
    return 0;
}
