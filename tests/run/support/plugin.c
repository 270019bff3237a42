/* A small library the locale/dlopen test (libs.c) loads with dlopen: its code
 * does CPU work of its own (preemptible, loaded after start-up) and calls back
 * into the program. */
#include <stdint.h>

uint64_t plugin_work(uint64_t n, uint64_t seed) {
    volatile uint64_t acc = seed;
    for (uint64_t i = 0; i < n; i++) acc = acc * 2862933555777941757u + 3037000493u + i;
    return acc;
}

uint64_t plugin_callback(uint64_t (*cb)(uint64_t), uint64_t n) {
    uint64_t acc = 0;
    for (uint64_t i = 0; i < n; i++) acc += cb(i);
    return acc;
}
