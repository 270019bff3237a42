/* The small library the call benchmarks isolate (gotcha-bench, Table 3).
 * Built with -fPIC and -fno-builtin so that every call below stays a real
 * call through the GOT or the PLT. */
#include <stdlib.h>
#include <string.h>

/* (a), (b): the smallest function a program can call. */
int gotcha_bench_nop(int x) { return x + 1; }

/* (d): a variable of the isolated library that the program reads. */
int gotcha_bench_global = 7;

/* What this copy of the library sees of its own variable. */
int gotcha_bench_global_get(void) { return gotcha_bench_global; }

/* (e): an "uncopyable" call: from a libset's copy, malloc and free go to the
 * program's allocator through gotcha's recording wrappers. The volatile
 * store keeps the compiler from eliding the pair. */
void gotcha_bench_malloc_free(size_t n) {
    char *p = malloc(n);
    *(volatile char *)p = 1;
    free(p);
}

/* (e): a shared libc call that gotcha does not wrap. */
size_t gotcha_bench_strlen(const char *s) { return strlen(s); }
