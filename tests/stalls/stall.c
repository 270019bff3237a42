/*
 * Emulates a noisy virtual machine: on every CPU, a SCHED_FIFO thread sleeps
 * for a random 50 us to 2.85 ms, then spins for a random 20 us to
 * MAX_SPIN_US (default 400). Whatever runs on that CPU is stalled for the
 * spin, at an arbitrary instruction, as when a hypervisor deschedules a vCPU.
 *
 * Tests that assume a function reaches some point before a short deadline
 * fail under it; CI machines do this to them now and then. Needs root (or
 * CAP_SYS_NICE) for SCHED_FIFO; without it the threads run at normal
 * priority and stall much less. Stop it with SIGTERM.
 *
 *   stall [MAX_SPIN_US]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long max_spin_us = 400;

static unsigned long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

static void *stall_cpu(void *arg) {
    long cpu = (long)arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    struct sched_param p = {.sched_priority = 50};
    if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) != 0 && cpu == 0)
        fprintf(stderr, "stall: no SCHED_FIFO (not root?): stalls will be rare\n");
    unsigned seed = (unsigned)(cpu * 7919 + getpid());
    for (;;) {
        struct timespec pause = {0, (50 + rand_r(&seed) % 2800) * 1000L};
        nanosleep(&pause, NULL);
        unsigned long long end = now_ns() + (20 + rand_r(&seed) % (unsigned)max_spin_us) * 1000ull;
        while (now_ns() < end) __asm__ volatile("" ::: "memory");
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) max_spin_us = atol(argv[1]);
    if (max_spin_us < 1) {
        fprintf(stderr, "usage: stall [MAX_SPIN_US]\n");
        return 2;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, stall_cpu, (void *)i) != 0) {
            perror("stall: pthread_create");
            return 1;
        }
    }
    for (;;) pause();
}
