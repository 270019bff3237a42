/*
 * dlclose of a library whose code is in linger's code table, while other
 * threads' functions are preempted: the handler must never read the
 * unmapped code, nor the code of a library mapped at the same address later.
 *
 * Two threads run preemptible functions in 20-100 us slices. Each function
 * loads a victim library (deferred code, built without unwind tables),
 * works in it, computes a while in its own code (where it is stopped and
 * resumed, so the table is rebuilt with the victim in it), unloads it, then
 * computes in a preemptible holder library without unwind tables whose
 * frame keeps addresses inside the victim: a deadline there is judged by
 * scanning the stack, which reads the code before each such word. A third
 * thread loads and unloads the victims all the while. Without linger's
 * dlclose the scan reads unmapped code and the process dies of SIGSEGV.
 * The libraries are built from crates/linger/tests/support/dlclose_lib.c
 * (which linger's own dlclose test builds too), with $CC.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>

#include "common.h"

#define VICTIMS 3

typedef uint64_t (*work_fn)(uint64_t);
typedef uint64_t (*call_fn)(work_fn, uint64_t);

static char victims[VICTIMS][PATH_MAX];
static call_fn call, hold;
static volatile int stop;

static void compile(const char *dir, const char *name, const char *define, char *out) {
    char src[PATH_MAX], cmd[3 * PATH_MAX];
    snprintf(src, sizeof src, "%s", __FILE__);
    char *slash = strrchr(src, '/');
    snprintf(slash ? slash + 1 : src, sizeof src - (size_t)(slash ? slash + 1 - src : 0), "../../crates/linger/tests/support/dlclose_lib.c");
    snprintf(out, PATH_MAX, "%s/%s", dir, name);
    const char *cc = getenv("CC");
    snprintf(cmd, sizeof cmd,
             "%s -O1 -fPIC -shared -fno-asynchronous-unwind-tables -fno-unwind-tables %s -o '%s' '%s'",
             cc && *cc ? cc : "cc", define, out, src);
    CHECK(system(cmd) == 0, "building %s: %s", name, cmd);
}

static void *open_lib(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, "dlopen %s: %s", path, dlerror());
    return h;
}

static void *sym(void *h, const char *name) {
    void *f = dlsym(h, name);
    CHECK(f != NULL, "dlsym %s: %s", name, dlerror());
    return f;
}

struct job {
    const char *victim;
    uint64_t result;
};

static void job_fn(void *arg) {
    struct job *j = arg;
    void *v = open_lib(j->victim);
    work_fn f;
    void *p = sym(v, "victim");
    memcpy(&f, &p, sizeof f);
    uint64_t c = call(f, 20000); /* f is loaded until the dlclose below */
    c ^= mix(100000);
    CHECK(dlclose(v) == 0, "dlclose: %s", dlerror());
    j->result = c ^ hold(f, 200000); /* hold never calls f */
}

static int rounds;

static void *worker(void *arg) {
    uint64_t w = (uint64_t)(uintptr_t)arg;
    /* At least `rounds`, and on until this thread has seen a preemption
     * (under valgrind, 3 rounds of 20-100 us slices saw none once in CI). */
    for (int r = 0; r < rounds || (stats_now().preemptions == 0 && r < 20 * rounds); r++) {
        struct job j = {.victim = victims[((uint64_t)r + w) % VICTIMS]};
        linger_t l = linger_launch(job_fn, 0, &j);
        CHECK(l.continuation != NULL, "linger_launch");
        uint64_t slice = 20 + 40 * (((uint64_t)r + w) % 3);
        while (!l.is_complete) CHECK(linger_resume(&l, slice) == 0, "linger_resume");
    }
    linger_stats_t s = stats_now();
    return (void *)(uintptr_t)s.preemptions;
}

static uint64_t churned;

static void *churn(void *arg) {
    (void)arg;
    for (uint64_t n = 0; !stop; n++, churned++) {
        void *a = open_lib(victims[n % VICTIMS]);
        void *b = open_lib(victims[(n + 1) % VICTIMS]);
        mix(2000 * (n % 5));
        CHECK(dlclose(a) == 0, "dlclose: %s", dlerror());
        mix(1000 * (n % 3));
        CHECK(dlclose(b) == 0, "dlclose: %s", dlerror());
    }
    return NULL;
}

int main(void) {
    /* Before the runtime starts. */
    setenv("LINGER_PREEMPTIBLE_LIBS", "liblinger_test_holder", 1);
    char dir[] = "/tmp/linger-dlclose-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char holder[PATH_MAX];
    compile(dir, "liblinger_test_holder.so", "-DHOLDER", holder);
    for (int i = 0; i < VICTIMS; i++) {
        char name[64], defines[64];
        snprintf(name, sizeof name, "liblinger_test_victim%d.so", i);
        snprintf(defines, sizeof defines, "-DVICTIM -DPAD=%d", (i + 1) << 16);
        compile(dir, name, defines, victims[i]);
    }
    void *h = open_lib(holder);
    void *p = sym(h, "call");
    memcpy(&call, &p, sizeof call);
    p = sym(h, "hold");
    memcpy(&hold, &p, sizeof hold);

    rounds = iters(150);
    watchdog(120, "test_dlclose");
    pthread_t t[3];
    CHECK(pthread_create(&t[2], NULL, churn, NULL) == 0, "pthread_create");
    for (uintptr_t w = 0; w < 2; w++) CHECK(pthread_create(&t[w], NULL, worker, (void *)w) == 0, "pthread_create");
    uint64_t preemptions = 0;
    for (int w = 0; w < 2; w++) {
        void *r;
        CHECK(pthread_join(t[w], &r) == 0, "pthread_join");
        preemptions += (uint64_t)(uintptr_t)r;
    }
    stop = 1;
    CHECK(pthread_join(t[2], NULL) == 0, "pthread_join");
    CHECK(dlclose(h) == 0, "dlclose: %s", dlerror());
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "%s", cmd);
    fprintf(stderr, "preemptions: %llu, loads and unloads by the third thread: %llu\n",
            (unsigned long long)preemptions, (unsigned long long)churned);
    CHECK(preemptions > 0, "the functions were preempted");
    PASS("test_dlclose");
    return 0;
}
