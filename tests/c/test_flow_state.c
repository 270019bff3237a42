/*
 * errno and the thread's locale (uselocale) belong to the flow of control:
 * four functions, each with its own errno value and locale object, stop
 * (by linger_pause and by preemption) and are resumed round robin by a
 * caller that has its own. Each side must find its own values after every
 * switch; before they were swapped at switches, a function stopped at a
 * pause came back with whatever its caller had left in errno, and a locale
 * installed by the function stayed installed in the caller.
 */
#include "common.h"

#include <locale.h>

struct job {
    int id;
    locale_t loc;
    int rounds;
    int wrong;
    int done;
};

static void job_fn(void *arg) {
    struct job *j = arg;
    uselocale(j->loc);
    for (int r = 0; r < j->rounds; r++) {
        errno = j->id * 100 + r % 50;
        if (r % 2)
            linger_pause();
        else
            mix(1000 + (uint64_t)(r % 7) * 2000); /* preempted here, sometimes */
        if (errno != j->id * 100 + r % 50) j->wrong++;
        if (uselocale((locale_t)0) != j->loc) j->wrong++;
    }
    j->done = 1;
}

int main(void) {
    locale_t caller_loc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    CHECK(caller_loc, "newlocale");
    locale_t locs[4];
    for (int k = 0; k < 4; k++) {
        locs[k] = newlocale(LC_ALL_MASK, "C", (locale_t)0);
        CHECK(locs[k], "newlocale");
    }
    uselocale(caller_loc);
    int n = iters(300);
    for (int it = 0; it < n; it++) {
        struct job jobs[4];
        linger_t ls[4];
        for (int k = 0; k < 4; k++) {
            jobs[k] = (struct job){.id = k + 1, .loc = locs[k], .rounds = 40};
            ls[k] = linger_launch(job_fn, 5, &jobs[k]);
            CHECK(ls[k].is_complete || ls[k].continuation, "launch failed");
        }
        int left = 1;
        while (left) {
            left = 0;
            for (int k = 0; k < 4; k++) {
                if (ls[k].is_complete) continue;
                errno = 777;
                CHECK(linger_resume(&ls[k], 5) == 0, "resume failed");
                CHECK(errno == 777, "caller's errno changed to %d by a switch (iteration %d)", errno, it);
                CHECK(uselocale((locale_t)0) == caller_loc, "caller's locale changed by a switch (iteration %d)", it);
                left |= !ls[k].is_complete;
            }
        }
        for (int k = 0; k < 4; k++) {
            CHECK(jobs[k].done, "job %d did not finish", k);
            CHECK(jobs[k].wrong == 0, "job %d found another errno or locale %d times (iteration %d)", k,
                  jobs[k].wrong, it);
        }
    }
    uselocale(LC_GLOBAL_LOCALE);
    for (int k = 0; k < 4; k++) freelocale(locs[k]);
    freelocale(caller_loc);
    puts("ok");
    return 0;
}
