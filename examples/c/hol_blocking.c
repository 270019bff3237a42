/*
 * hol_blocking.c: head-of-line blocking, and how preemptible functions avoid it.
 *
 * A single-threaded server gets a burst of requests: a few long ones (20 ms
 * of computation each) mixed with many short ones (50 us each). Served in
 * arrival order to completion, every short request queued behind a long one
 * waits for it. Served with linger in round-robin 200 us slices, long
 * requests are preempted and short ones finish almost at once.
 *
 * Build (after `make lib`): cc -Wall -O2 -Iinclude examples/c/hol_blocking.c \
 *           -Ltarget/release -llinger -Wl,-rpath,$PWD/target/release -o hol_blocking
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "linger.h"

#define REQUESTS 60
#define SLICE_US 200

struct request {
    uint64_t work;     /* loop iterations of "processing" */
    int is_long;
    double finished_ms; /* completion time, relative to the burst's arrival */
    linger_t state;
};

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The request handler: plain computation, unaware of preemption. */
static void handle(void *arg) {
    struct request *r = arg;
    volatile uint64_t acc = 0;
    for (uint64_t i = 0; i < r->work; i++) acc += i * i;
}

/* Calibrate: iterations of handle()'s loop per millisecond. */
static uint64_t iterations_per_ms(void) {
    struct request r = {.work = 5000000};
    double t0 = now_ms();
    handle(&r);
    return (uint64_t)(r.work / (now_ms() - t0));
}

static void make_burst(struct request *rs, uint64_t per_ms) {
    for (int i = 0; i < REQUESTS; i++) {
        rs[i].is_long = i % 10 == 0; /* requests 0, 10, 20, ... are long */
        rs[i].work = rs[i].is_long ? 20 * per_ms : per_ms / 20;
        rs[i].finished_ms = 0;
    }
}

/* Mean and worst completion time of the short requests. */
static void report(const char *how, const struct request *rs) {
    double sum = 0, worst = 0;
    int n = 0;
    for (int i = 0; i < REQUESTS; i++) {
        if (rs[i].is_long) continue;
        sum += rs[i].finished_ms;
        if (rs[i].finished_ms > worst) worst = rs[i].finished_ms;
        n++;
    }
    printf("%-32s short requests done after %6.2f ms on average, %6.2f ms at worst\n", how, sum / n, worst);
}

int main(void) {
    static struct request rs[REQUESTS];
    uint64_t per_ms = iterations_per_ms();

    /* 1. First come, first served, each request run to completion. */
    make_burst(rs, per_ms);
    double t0 = now_ms();
    for (int i = 0; i < REQUESTS; i++) {
        handle(&rs[i]);
        rs[i].finished_ms = now_ms() - t0;
    }
    report("run to completion (FCFS):", rs);

    /* 2. Round robin: every request gets SLICE_US at a time. */
    make_burst(rs, per_ms);
    t0 = now_ms();
    for (int i = 0; i < REQUESTS; i++) {
        /* Timeout 0: set the function up without running it yet. */
        rs[i].state = linger_launch(handle, 0, &rs[i]);
        if (rs[i].state.continuation == NULL) {
            perror("linger_launch");
            return 1;
        }
    }
    int pending = REQUESTS;
    while (pending > 0) {
        for (int i = 0; i < REQUESTS; i++) {
            if (rs[i].state.is_complete) continue;
            if (linger_resume(&rs[i].state, SLICE_US) != 0) {
                perror("linger_resume");
                return 1;
            }
            if (rs[i].state.is_complete) {
                rs[i].finished_ms = now_ms() - t0;
                pending--;
            }
        }
    }
    report("linger, 200 us round robin:", rs);

    linger_stats_t s;
    linger_stats(&s);
    printf("(%llu preemptions)\n", (unsigned long long)s.preemptions);
    return 0;
}
