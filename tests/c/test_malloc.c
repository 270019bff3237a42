/*
 * malloc/free inside preemptible functions preempted thousands of times,
 * while the caller mallocs and frees between resumes, several functions are
 * alive at once, and blocks allocated inside a function are freed by the
 * caller (and the other way round).
 */
#include "common.h"

#define SLOTS 64
#define NFUNCS 4

struct job {
    uint64_t seed;
    int rounds;
    uint64_t checksum;   /* computed by the function */
    void *handoff;       /* a block the function leaves for the caller to free */
    void *gift;          /* a block the caller gives the function to free */
    int gifts_freed;
};

static uint64_t rng(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The same computation, run directly, gives the expected checksum. */
static uint64_t job_body(struct job *j) {
    unsigned char *slot[SLOTS] = {0};
    size_t len[SLOTS] = {0};
    uint64_t s = j->seed, sum = 0;
    for (int r = 0; r < j->rounds; r++) {
        int k = (int)(rng(&s) % SLOTS);
        if (slot[k]) {
            /* Verify the pattern written at allocation time, then free. */
            for (size_t b = 0; b < len[k]; b += 61) sum += slot[k][b] ^ (unsigned char)(b + k);
            free(slot[k]);
            slot[k] = NULL;
        } else {
            size_t n = 1 + rng(&s) % ((r & 7) == 0 ? 20000 : 300);
            slot[k] = malloc(n);
            if (!slot[k]) abort();
            len[k] = n;
            for (size_t b = 0; b < n; b++) slot[k][b] = (unsigned char)(b + k);
        }
        if ((r & 255) == 0) {
            /* realloc and calloc too */
            void *p = calloc(1 + r % 100, 16);
            p = realloc(p, 4096 + r % 1000);
            free(p);
        }
        if (j->gift) {
            free(j->gift);
            j->gift = NULL;
            j->gifts_freed++;
        }
        if (!j->handoff && (r & 63) == 0) j->handoff = malloc(128 + r % 512);
        sum = sum * 31 + (uint64_t)r;
    }
    for (int k = 0; k < SLOTS; k++) free(slot[k]);
    return sum;
}

static void job_fn(void *arg) {
    struct job *j = arg;
    j->checksum = job_body(j);
}

int main(void) {
    int outer = iters(4);
    int rounds = reduced() ? 20000 : 120000;
    uint64_t want[NFUNCS];
    for (int f = 0; f < NFUNCS; f++) {
        struct job ref = {.seed = 0x9E3779B97F4A7C15u + (uint64_t)f, .rounds = rounds};
        want[f] = job_body(&ref);
        free(ref.handoff);
    }

    linger_stats_t before = stats_now();
    long resumes = 0, caller_allocs = 0, handoffs = 0, gifts = 0;
    for (int it = 0; it < outer; it++) {
        struct job jobs[NFUNCS];
        linger_t ls[NFUNCS];
        for (int f = 0; f < NFUNCS; f++) {
            jobs[f] = (struct job){.seed = 0x9E3779B97F4A7C15u + (uint64_t)f, .rounds = rounds};
            ls[f] = linger_launch(job_fn, 20 + 10 * (uint64_t)f, &jobs[f]);
            CHECK(ls[f].is_complete || ls[f].continuation, "launch %d failed", f);
        }
        int live = NFUNCS;
        uint64_t s = (uint64_t)it + 1;
        while (live > 0) {
            live = 0;
            for (int f = 0; f < NFUNCS; f++) {
                /* The caller's own allocator traffic between resumes. */
                void *p[8];
                for (int k = 0; k < 8; k++) {
                    p[k] = malloc(1 + rng(&s) % 2000);
                    CHECK(p[k], "caller malloc");
                    memset(p[k], 0xAB, 1);
                }
                for (int k = 0; k < 8; k++) free(p[k]);
                caller_allocs += 8;
                if (jobs[f].handoff) {
                    free(jobs[f].handoff); /* allocated inside the function */
                    jobs[f].handoff = NULL;
                    handoffs++;
                }
                if (ls[f].is_complete) continue;
                if (!jobs[f].gift) {
                    jobs[f].gift = malloc(64 + rng(&s) % 4096); /* freed inside */
                    gifts++;
                }
                CHECK(linger_resume(&ls[f], 20 + 10 * (uint64_t)f) == 0, "resume of function %d failed", f);
                resumes++;
                if (!ls[f].is_complete) live++;
            }
        }
        for (int f = 0; f < NFUNCS; f++) {
            CHECK(jobs[f].checksum == want[f], "round %d function %d: checksum %llx, want %llx", it, f,
                  (unsigned long long)jobs[f].checksum, (unsigned long long)want[f]);
            free(jobs[f].handoff);
            free(jobs[f].gift);
        }
    }
    linger_stats_t after = stats_now();
    uint64_t pre = after.preemptions - before.preemptions;
    fprintf(stderr, "%ld resumes, %llu preemptions (%llu deferred), %llu deferrals, %ld caller allocations, %ld blocks "
                    "handed out, %ld handed in\n",
            resumes, (unsigned long long)pre,
            (unsigned long long)(after.deferred_preemptions - before.deferred_preemptions),
            (unsigned long long)(after.deferrals - before.deferrals), caller_allocs, handoffs, gifts);
    uint64_t need = reduced() ? 10 : 150u * (uint64_t)outer;
    CHECK(pre >= need, "only %llu preemptions, expected at least %llu", (unsigned long long)pre,
          (unsigned long long)need);
    CHECK(handoffs > 0 && gifts > 0, "no blocks crossed between caller and functions");
    PASS("test_malloc");
    return 0;
}
