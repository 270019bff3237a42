/*
 * Cooperative green threads in C (turq_attr_setslice(attr, 0)): one spins
 * until another sets a flag, calling turq_checkpoint() as it goes. With one
 * worker the setter runs only when a check finds the spinner's slice over
 * and yields; without the yield this test hangs. Elsewhere (the main
 * thread) a check does nothing.
 */
#include "common.h"
#include "turquoise.h"

#include <stdatomic.h>

static atomic_int flag;
static unsigned long checks;

static void *spinner(void *arg) {
    (void)arg;
    while (!atomic_load_explicit(&flag, memory_order_relaxed)) {
        CHECK(turq_checkpoint() == 0, "checkpoint");
        checks++;
    }
    return (void *)1;
}

static void *setter(void *arg) {
    (void)arg;
    atomic_store(&flag, 1);
    return (void *)2;
}

int main(void) {
    /* One worker: the two threads share it. */
    CHECK(setenv("TURQ_WORKERS", "1", 1) == 0, "setenv");
    CHECK(turq_checkpoint() == 0, "a check on an ordinary thread");
    turq_attr_t a;
    CHECK(turq_attr_init(&a) == 0 && turq_attr_setslice(&a, 0) == 0, "cooperative attr");
    int n = iters(20);
    for (int i = 0; i < n; i++) {
        atomic_store(&flag, 0);
        turq_t s, t;
        CHECK(turq_create_attr(&s, &a, spinner, NULL) == 0, "spinner %d", i);
        CHECK(turq_create_attr(&t, &a, setter, NULL) == 0, "setter %d", i);
        void *rs, *rt;
        CHECK(turq_join(s, &rs) == 0 && turq_join(t, &rt) == 0, "joins %d", i);
        CHECK(rs == (void *)1 && rt == (void *)2, "values %d", i);
    }
    CHECK(checks > 0, "no checks");
    printf("ok: %d rounds, %lu checks\n", n, checks);
    return 0;
}
