/*
 * The goroutine-dump analogue from C: turq_dump(fd) lists the live green
 * threads with what each waits on, and TURQ_DUMP_SIGNAL makes a signal write
 * the same list (here to TURQ_DUMP_FILE) while the program goes on.
 */
#include "common.h"
#include "turquoise.h"

#include <fcntl.h>

static void *sleeper(void *arg) {
    (void)arg;
    sleep(60); /* parks on the worker's timer */
    return NULL;
}

static void *reader(void *arg) {
    char c;
    return (void *)(intptr_t)read((int)(intptr_t)arg, &c, 1); /* parks on the pipe */
}

static int contains(const char *path, const char *what) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, what) != NULL;
}

int main(void) {
    char path[] = "/tmp/turq-dump-XXXXXX";
    int tmp = mkstemp(path);
    CHECK(tmp >= 0, "mkstemp");
    close(tmp);
    CHECK(setenv("TURQ_DUMP_SIGNAL", "SIGUSR1", 1) == 0 && setenv("TURQ_DUMP_FILE", path, 1) == 0, "setenv");
    CHECK(turq_runtime_init(1, 1000) == 0, "runtime");

    turq_attr_t a;
    CHECK(turq_attr_init(&a) == 0 && turq_attr_setname(&a, "napper") == 0, "attr");
    turq_t s, r;
    CHECK(turq_create_attr(&s, &a, sleeper, NULL) == 0, "sleeper");
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    CHECK(turq_attr_setname(&a, "piper") == 0, "name");
    CHECK(turq_create_attr(&r, &a, reader, (void *)(intptr_t)p[0]) == 0, "reader");
    /* Direct: into a pipe of our own, until both threads are parked (they
     * take a while to get there under valgrind). */
    static char text[1 << 16];
    int listed = 0;
    for (int i = 0; i < 2000 * (int)slack() && !listed; i++) {
        int d[2];
        CHECK(pipe(d) == 0, "pipe");
        CHECK(turq_dump(d[1]) == 0, "turq_dump");
        close(d[1]);
        ssize_t n, got = 0;
        while ((n = read(d[0], text + got, sizeof text - 1 - (size_t)got)) > 0) got += n;
        close(d[0]);
        text[got] = 0;
        listed = strstr(text, "\"napper\" [parked: timer]") && strstr(text, "\"piper\" [parked: io] on fd");
        if (!listed) usleep(5000);
    }
    CHECK(listed, "both threads listed as parked:\n%s", text);

    /* By signal: the dump thread appends it to the file. */
    CHECK(raise(SIGUSR1) == 0, "raise");
    int ok = 0;
    for (int i = 0; i < 2000 * (int)slack() && !ok; i++) {
        ok = contains(path, "\"piper\" [parked: io]");
        if (!ok) usleep(1000);
    }
    CHECK(ok, "the signal wrote the dump to %s", path);
    unlink(path);

    CHECK(write(p[1], "x", 1) == 1, "wake the reader");
    void *v;
    CHECK(turq_join(r, &v) == 0 && v == (void *)1, "reader read its byte");
    CHECK(turq_detach(s) == 0, "detach the sleeper");
    printf("ok\n");
    return 0;
}
