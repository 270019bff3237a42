/*
 * Code that spends its time in libc: printf-heavy and malloc-heavy loops.
 * Output must be byte-identical to a plain run (the runner compares stdout);
 * allocations are checked for integrity. Two threads allocate concurrently
 * with main for part of the time.
 *
 *   stdio_malloc [printf|malloc|all]
 */
#include "common.h"

#include <malloc.h>

static volatile uint64_t sink;

static void test_printf(int n) {
    for (int i = 0; i < n; i++) {
        printf("%6d %08x %-10s|%+.3f %e %c %5.1f%% %llu\n", i, (unsigned)(i * 2654435761u), i % 3 ? "alpha" : "be",
               i / 7.0, i * 1e-3, 'a' + i % 26, (i % 1000) / 10.0, (unsigned long long)i * i * i);
        if (i % 100 == 0) {
            sink += mix(20000, (uint64_t)i); /* some computation between the stdio calls */
            fputs("-- fputs line\n", stdout);
            for (int k = 0; k < 20; k++) putchar('0' + k % 10);
            putchar('\n');
            fprintf(stdout, "%*d|%-*d|\n", 8, i, 8, -i);
        }
    }
    /* the same through a memory stream and a temporary file, read back */
    char *mem = NULL;
    size_t memlen = 0;
    FILE *m = open_memstream(&mem, &memlen);
    CHECK(m, "open_memstream");
    FILE *tf = tmpfile();
    CHECK(tf, "tmpfile");
    for (int i = 0; i < n / 10; i++) {
        fprintf(m, "%d:%s;", i, i % 2 ? "odd" : "even");
        fprintf(tf, "%d:%s;", i, i % 2 ? "odd" : "even");
    }
    CHECK(fclose(m) == 0, "fclose memstream");
    long tlen = ftell(tf);
    CHECK(tlen == (long)memlen, "tmpfile has %ld bytes, memstream %zu", tlen, memlen);
    rewind(tf);
    char *back = malloc(memlen + 1);
    CHECK(back && fread(back, 1, memlen, tf) == memlen && memcmp(back, mem, memlen) == 0, "tmpfile content differs");
    fclose(tf);
    uint64_t h = 1469598103934665603u;
    for (size_t k = 0; k < memlen; k++) h = (h ^ (unsigned char)mem[k]) * 1099511628211u;
    printf("memstream: %zu bytes, hash %016llx\n", memlen, (unsigned long long)h);
    free(back);
    free(mem);
}

struct slot {
    unsigned char *p;
    size_t size;
    unsigned char tag;
};

static uint64_t malloc_churn(uint64_t seed, int ops, int nslots) {
    struct slot *s = calloc((size_t)nslots, sizeof *s);
    CHECK(s, "calloc");
    uint64_t r = seed, sum = 0;
    for (int i = 0; i < ops; i++) {
        r = r * 6364136223846793005u + 1442695040888963407u;
        int k = (int)((r >> 33) % (uint64_t)nslots);
        size_t size = (size_t)((r >> 13) % ((r >> 60) > 13 ? 200000 : 512)) + 1;
        struct slot *x = &s[k];
        if (x->p) {
            for (size_t q = 0; q < x->size; q += 97) CHECK(x->p[q] == x->tag, "heap block corrupted");
            CHECK(x->p[x->size - 1] == x->tag, "heap block tail corrupted");
            sum += x->size;
            if (i % 3 == 0) {
                unsigned char *np = realloc(x->p, size);
                CHECK(np, "realloc");
                size_t keep = size < x->size ? size : x->size;
                for (size_t q = 0; q < keep; q += 97) CHECK(np[q] == x->tag, "realloc lost data");
                x->p = np;
                x->size = size;
                memset(x->p, x->tag, size);
                continue;
            }
            free(x->p);
            x->p = NULL;
        } else {
            switch (i % 4) {
            case 0: x->p = malloc(size); break;
            case 1: x->p = calloc(1, size); if (x->p) CHECK(x->p[size - 1] == 0, "calloc not zeroed"); break;
            case 2: CHECK(posix_memalign((void **)&x->p, 64, size) == 0, "posix_memalign"); CHECK(((uintptr_t)x->p & 63) == 0, "alignment"); break;
            default: x->p = aligned_alloc(16, (size + 15) & ~(size_t)15); size = (size + 15) & ~(size_t)15; break;
            }
            CHECK(x->p, "allocation of %zu", size);
            x->size = size;
            x->tag = (unsigned char)(r >> 24);
            memset(x->p, x->tag, size);
        }
    }
    for (int k = 0; k < nslots; k++) free(s[k].p);
    free(s);
    return sum;
}

static void *churn_thread(void *arg) { return (void *)(uintptr_t)malloc_churn((uint64_t)(uintptr_t)arg, 200000, 512); }

static void test_malloc(int n) {
    uint64_t a = malloc_churn(1, n, 1024);
    CHECK(a == malloc_churn(1, n, 1024), "malloc churn is not deterministic");
    pthread_t t[2];
    for (int k = 0; k < 2; k++) CHECK(pthread_create(&t[k], NULL, churn_thread, (void *)(uintptr_t)(k + 7)) == 0, "create");
    uint64_t b = malloc_churn(2, n, 1024);
    for (int k = 0; k < 2; k++) join(t[k]);
    /* strdup/asprintf and friends */
    for (int i = 0; i < n / 100; i++) {
        char *s;
        CHECK(asprintf(&s, "string %d %s", i, "x") > 0, "asprintf");
        char *d = strdup(s);
        CHECK(d && strcmp(d, s) == 0, "strdup");
        free(s);
        free(d);
    }
    malloc_trim(0);
    printf("malloc churn: %llu %llu\n", (unsigned long long)a, (unsigned long long)b);
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "all";
    int all = !strcmp(what, "all");
    if (all || !strcmp(what, "printf")) test_printf(iters(100000));
    if (all || !strcmp(what, "malloc")) test_malloc(iters(250000));
    return 0;
}
