/*
 * C++ throw/catch in a loop under 5 us slices. Deadlines that land in the
 * C++ runtime or the unwinder are deferred; a return trap set while an
 * exception was being unwound (between libgcc's search and unwind phases)
 * changed the frames' CFAs and libgcc aborted. Traps are now never set while
 * an exception or a panic is in flight.
 */
#include "common.h"

#include <stdexcept>

static void throw_catch(void *a) {
    int *n = static_cast<int *>(a);
    for (int i = 0; i < 20000; i++) {
        try {
            throw std::runtime_error("x");
        } catch (const std::exception &) {
            (*n)++;
        }
    }
}

int main() {
    for (int it = 0; it < iters(20); it++) {
        int n = 0;
        linger_t l = linger_launch(throw_catch, 5, &n);
        CHECK(l.is_complete || l.continuation, "launch");
        while (!l.is_complete) CHECK(linger_resume(&l, 5) == 0, "resume");
        CHECK(n == 20000, "caught %d of 20000 (round %d)", n, it);
    }
    printf("20 x 20000 throws caught under 5 us slices\n");
    return 0;
}
