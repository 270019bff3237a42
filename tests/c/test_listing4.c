// link: -fPIC
/*
 * The libinger paper's Listing 4 (isolated (1) versus shared (2 and 3)
 * state), exactly as printed, between the markers below. Only the names
 * the listing assumes are supplied around it: `u64`, and `launch` as an
 * isolated linger_launch_opts with libc itself isolated. Built with -fPIC
 * (the paper's advice) so that the program reaches libc's `stdout` through
 * its GOT rather than a COPY relocation.
 *
 * (1) holds because inside the isolated function `stdout` is the libset's
 * copy of libc's (gotcha traps the program's accesses to it), while the
 * caller set its own to NULL; (2) and (3) hold because the program's own
 * variables, static or not, are never copied. Then the same function
 * launched without isolation sees the caller's NULL, and output written
 * through either stdout arrives.
 */
#include "common.h"

#include <assert.h>
#include <stdbool.h>

typedef uint64_t u64;
static linger_opts_t isolated_opts = {.isolated = true};
#define launch(fn, timeout, arg) linger_launch_opts((fn), (timeout), (void *)(arg), &isolated_opts)
void timed(void *s);
/* The listing's `timed` does not use its argument. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* ---- Listing 4, as printed ---- */
static bool two;
bool three;

linger_t caller(const char *s, u64 timeout) {
    stdout = NULL;
    two = true;
    three = true;
    return launch(timed, timeout, s);
}

void timed(void *s) {
    assert(stdout); // (1)
    assert(two); // (2)
    assert(three); // (3)
}
/* ---- end of Listing 4 ---- */

static void sees_stdout(void *arg) {
    *(bool *)arg = stdout != NULL;
}

static void prints(void *arg) {
    fprintf(stdout, "isolated %s\n", (const char *)arg);
    printf("isolated printf %s\n", (const char *)arg);
}

int main(void) {
    CHECK(linger_isolate("libc") == 0, "isolate libc");
    FILE *saved = stdout;
    for (int i = 0; i < iters(200); i++) {
        two = three = false;
        linger_t l = caller("listing 4", UINT64_MAX);
        CHECK(l.is_complete, "the isolated function completed (round %d)", i);
        CHECK(stdout == NULL, "the caller's stdout is still its NULL");
        stdout = saved;
        CHECK(two && three, "shared state");
    }
    /* Without isolation the function shares the caller's stdout. */
    stdout = NULL;
    bool seen = true;
    linger_t l = linger_launch(sees_stdout, UINT64_MAX, &seen);
    CHECK(l.is_complete && !seen, "a plain function sees the caller's NULL stdout");
    stdout = saved;
    /* Both streams work, and both reach descriptor 1. */
    l = launch(prints, UINT64_MAX, "output");
    CHECK(l.is_complete, "printing isolated");
    printf("caller printf\n");
    fflush(stdout);
    return 0;
}
