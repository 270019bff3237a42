// link: -lz
/*
 * Isolated functions from C: linger_isolate and linger_opts_t.isolated.
 * A zlib inflate of a 64 MiB bomb is stopped inside the function's own copy
 * of zlib (the output is not finished when the launch returns), resumed to
 * the end with the right bytes, and cancelled at many points (each cancel
 * resets the libset and frees zlib's state). Bad input gets errors.
 */
#include "common.h"

#include <zlib.h>

#define BIG (64u << 20)

static unsigned char *bomb;
static uLong bomb_len;
static unsigned char *out;

static void inflate_bomb(void *arg) {
    uLongf n = BIG;
    int *ok = arg;
    *ok = uncompress(out, &n, bomb, bomb_len) == Z_OK && n == BIG;
}

int main(void) {
    unsigned char *zeros = calloc(BIG, 1);
    out = malloc(BIG);
    bomb_len = compressBound(BIG);
    bomb = malloc(bomb_len);
    CHECK(zeros && out && bomb, "malloc");
    CHECK(compress(bomb, &bomb_len, zeros, BIG) == Z_OK, "compress");
    free(zeros);

    /* Bad input first: nothing is isolated yet. */
    errno = 0;
    CHECK(linger_isolate("ld-linux-x86-64") == -1 && errno == ENOTSUP, "the loader cannot be isolated");
    errno = 0;
    CHECK(linger_isolate("libnosuchlibrary") == -1 && errno == ENOENT, "not loaded");
    errno = 0;
    CHECK(linger_isolate(" , ") == -1 && errno == EINVAL, "empty selection");
    CHECK(linger_isolate("libz") == 0, "isolate libz");
    CHECK(linger_isolate("libz") == 0, "the same selection again");
    errno = 0;
    CHECK(linger_isolate("all") == -1 && errno == EINVAL, "a different selection");

    linger_opts_t bad = {0};
    bad.isolated = true;
    bad.no_libset = 7;
    int ok = 0;
    errno = 0;
    linger_t l = linger_launch_opts(inflate_bomb, 1000, &ok, &bad);
    CHECK(!l.is_complete && l.continuation == NULL && errno == EINVAL, "bad no_libset value");

    linger_opts_t o = {0};
    o.isolated = true;
    o.reuse_stack = true;
    for (int round = 0; round < iters(3); round++) {
        memset(out + BIG - 4096, 1, 4096);
        ok = 0;
        l = linger_launch_opts(inflate_bomb, 1000, &ok, &o);
        CHECK(!l.is_complete && l.continuation != NULL, "64 MiB inflated in 1 ms?");
        CHECK(out[BIG - 1] == 1, "stopped only after zlib returned: the copy was deferred");
        while (!l.is_complete) CHECK(linger_resume(&l, 1000) == 0, "resume");
        CHECK(ok, "inflate failed");
        for (unsigned i = 0; i < BIG; i += 4093) CHECK(out[i] == 0, "byte %u", i);
    }

    linger_stats_t before, after;
    CHECK(linger_stats(&before) == 0, "stats");
    int n = iters(30);
    for (int i = 0; i < n; i++) {
        l = linger_launch_opts(inflate_bomb, 200 + (uint64_t)i * 97 % 3000, &ok, &o);
        CHECK(linger_cancel(&l) == 0, "cancel");
    }
    CHECK(linger_stats(&after) == 0, "stats");
    CHECK(after.libset_resets - before.libset_resets >= (uint64_t)n / 2, "resets %llu", (unsigned long long)(after.libset_resets - before.libset_resets));
    CHECK(after.libset_blocks_freed > before.libset_blocks_freed, "zlib's state freed");
    printf("isolated: %d cancels, %llu resets, %llu blocks freed\n", n,
           (unsigned long long)(after.libset_resets - before.libset_resets),
           (unsigned long long)(after.libset_blocks_freed - before.libset_blocks_freed));
    free(bomb);
    free(out);
    return 0;
}
