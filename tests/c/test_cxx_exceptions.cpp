/*
 * C++ exception state is the function's own: four functions each stop inside
 * a `catch` block (by linger_pause and by preemption) while their caller,
 * itself inside a `catch` block, resumes them round robin. Each side must
 * keep seeing its own caught exception (`throw;`, std::current_exception),
 * and the uncaught count must stay its own. Before the C++ runtime's
 * globals were swapped at every switch, a function saw the exception of
 * whoever ran last on the thread (heap-use-after-free under ASan).
 */
#include "common.h"

#include <exception>
#include <stdexcept>

struct Tagged : std::runtime_error {
    int id;
    explicit Tagged(int i) : std::runtime_error("tagged"), id(i) {}
};

struct Job {
    int id;
    int rounds;
    int done = 0;
    int wrong = 0;
};

/* Which Tagged is being handled here (via `throw;`), or -1. */
static int rethrown_id() {
    try {
        throw;
    } catch (const Tagged &t) {
        return t.id;
    } catch (...) {
        return -2;
    }
}

static void job_fn(void *arg) {
    Job *j = static_cast<Job *>(arg);
    for (int r = 0; r < j->rounds; r++) {
        try {
            throw Tagged(j->id * 1000 + r);
        } catch (const Tagged &t) {
            std::exception_ptr mine = std::current_exception();
            if (r % 2) {
                linger_pause();
            } else {
                mix(2000 + (uint64_t)(r % 5) * 3000); /* preempted here, sometimes */
            }
            if (std::current_exception() != mine || rethrown_id() != j->id * 1000 + r || t.id != j->id * 1000 + r)
                j->wrong++;
            if (std::uncaught_exceptions() != 0) j->wrong++;
        }
        if (std::current_exception() != nullptr) j->wrong++;
        j->done++;
    }
}

int main() {
    const int n = iters(300);
    for (int it = 0; it < n; it++) {
        try {
            throw Tagged(-7);
        } catch (const Tagged &outer) {
            std::exception_ptr own = std::current_exception();
            Job jobs[4] = {{1, 20}, {2, 20}, {3, 20}, {4, 20}};
            linger_t ls[4];
            for (int k = 0; k < 4; k++) {
                ls[k] = linger_launch(job_fn, 5, &jobs[k]);
                CHECK(ls[k].is_complete || ls[k].continuation, "launch failed");
                CHECK(std::current_exception() == own && rethrown_id() == -7,
                      "caller sees another exception after a launch (iteration %d)", it);
            }
            bool left = true;
            while (left) {
                left = false;
                for (int k = 0; k < 4; k++) {
                    if (ls[k].is_complete) continue;
                    CHECK(linger_resume(&ls[k], 5) == 0, "resume failed");
                    CHECK(std::current_exception() == own && rethrown_id() == -7 && outer.id == -7,
                          "caller sees another exception after a resume (iteration %d)", it);
                    CHECK(std::uncaught_exceptions() == 0, "caller's uncaught count changed");
                    left |= !ls[k].is_complete;
                }
            }
            for (int k = 0; k < 4; k++) {
                CHECK(jobs[k].done == jobs[k].rounds, "job %d did not finish", k);
                CHECK(jobs[k].wrong == 0, "job %d saw another exception %d times (iteration %d)", k, jobs[k].wrong, it);
            }
        }
        CHECK(std::current_exception() == nullptr, "caller still handling an exception");
    }
    /* Cancelled inside a catch block: the caller's state is untouched. */
    try {
        throw Tagged(-9);
    } catch (const Tagged &) {
        std::exception_ptr own = std::current_exception();
        for (int it = 0; it < iters(200); it++) {
            Job j = {5, 4};
            linger_t l = linger_launch(job_fn, 0, &j);
            CHECK(linger_resume(&l, 1000000) == 0, "resume");
            CHECK(!l.is_complete, "did not pause");
            CHECK(linger_cancel(&l) == 0, "cancel");
            CHECK(std::current_exception() == own && rethrown_id() == -9, "caller's exception lost after a cancel");
        }
    }
    puts("ok");
    return 0;
}
