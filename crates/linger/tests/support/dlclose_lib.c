/*
 * Libraries that tests/c/test_dlclose.c and crates/linger/tests/dlclose.rs
 * load and unload while their functions are preempted. Built at run time
 * with no unwind tables (-fno-asynchronous-unwind-tables -fno-unwind-tables),
 * so that the handler cannot walk through their frames and falls back to
 * scanning the stack, which reads the code before every word that points
 * into deferred code.
 *
 *   -DVICTIM  victim(n): work in deferred library code (the handler finds
 *             the thread there and the code table learns the library);
 *             -DPAD=n makes the library n bytes larger, so that libraries
 *             of other sizes do not fill the hole an unloaded one leaves
 *   -DHOLDER  call(f, n) calls f; hold(f, n) computes while its frame
 *             keeps addresses inside f's library, which may be unloaded by
 *             then (loaded as a preemptible library: a deadline there is
 *             judged by the stack scan)
 */
#include <stdint.h>

typedef uint64_t (*work_fn)(uint64_t);

#ifdef VICTIM
__attribute__((noinline)) uint64_t victim_step(uint64_t x, uint64_t i) {
    return x * 6364136223846793005u + i;
}

#ifdef PAD
__attribute__((used)) const char victim_pad[PAD] = {1};
#endif

uint64_t victim(uint64_t n) {
    volatile uint64_t acc = 0;
    for (uint64_t i = 0; i < n; i++) acc = victim_step(acc, i);
    return acc;
}
#endif

#ifdef HOLDER
uint64_t call(work_fn f, uint64_t n) { return f(n); }

/* Not inlined: a call makes hold's caller keep its locals above the stack
 * pointer (a leaf function may keep them in the red zone below it, which
 * the scan does not read). */
__attribute__((noinline)) void hold_publish(volatile uintptr_t *keep) { __asm__ volatile("" ::"r"(keep) : "memory"); }

uint64_t hold(work_fn f, uint64_t n) {
    /* Addresses in and after f, never called: stack words the scan reads
     * the code before (a dangling pointer is no bug until it is used). */
    volatile uintptr_t keep[8];
    for (int i = 0; i < 8; i++) keep[i] = (uintptr_t)f + 16u * (uintptr_t)i;
    hold_publish(keep);
    volatile uint64_t acc = 0;
    for (uint64_t i = 0; i < n; i++) acc = acc * 6364136223846793005u + i;
    return acc + keep[0] - (uintptr_t)f;
}
#endif
