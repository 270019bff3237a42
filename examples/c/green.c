/*
 * Green threads from C: 1,000 threads that each sleep (parking, not
 * blocking their worker) and return a value, joined by main.
 *
 *   cc green.c $(pkg-config --cflags --libs turquoise)
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <turquoise.h>

static void *nap(void *arg) {
    usleep(10000); /* 10 ms: parks this green thread on its worker's timer */
    return (void *)((uintptr_t)arg + 1);
}

int main(void) {
    enum { N = 1000 };
    static turq_t t[N];
    for (uintptr_t i = 0; i < N; i++) {
        int e = turq_create(&t[i], nap, (void *)i);
        if (e) {
            fprintf(stderr, "turq_create: %s\n", strerror(e));
            return 1;
        }
    }
    uintptr_t sum = 0;
    for (int i = 0; i < N; i++) {
        void *v;
        int e = turq_join(t[i], &v);
        if (e) {
            fprintf(stderr, "turq_join: %s\n", strerror(e));
            return 1;
        }
        sum += (uintptr_t)v;
    }
    /* 1,000 x 10 ms of sleep in well under a second: they slept together. */
    printf("%d green threads joined, sum %lu\n", N, (unsigned long)sum);
    return sum == (uintptr_t)N * (N + 1) / 2 ? 0 : 1;
}
