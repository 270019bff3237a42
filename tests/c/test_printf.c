/*
 * printf from inside preemptible functions (preempted every 30-50 us) while
 * the caller prints too. A child process does the printing with stdout on a
 * pipe; the parent reads everything back and checks that every line is
 * whole and that no line is lost, duplicated or reordered within its source.
 * Odd lines are printed with three printf calls inside a critical section
 * (linger_critical_begin/end), which must keep them whole as well.
 * Run once per stdio buffering mode (full, line, unbuffered).
 */
#include "common.h"

#include <ctype.h>
#include <sys/wait.h>

#define NFUNCS 3

struct printer {
    int id;
    int lines;
};

/* A line: "<src> <seq> <len> <payload of len chars> <checksum>\n". */
static void print_line(const char *src, int seq) {
    char payload[200];
    int len = 1 + (seq * 37) % 150;
    unsigned sum = 0;
    for (int i = 0; i < len; i++) {
        payload[i] = (char)('a' + (seq + i) % 26);
        sum = sum * 31 + (unsigned char)payload[i];
    }
    payload[len] = 0;
    if (seq % 2 == 0) {
        printf("%s %d %d %s %u\n", src, seq, len, payload, sum);
    } else {
        /* A line made of several calls is only whole if the function is not
         * preempted between them: a critical section guarantees that. */
        linger_critical_begin();
        printf("%s %d ", src, seq);
        printf("%d %s", len, payload);
        printf(" %u\n", sum);
        CHECK(linger_critical_end() == 0, "linger_critical_end");
    }
}

static void printer_fn(void *arg) {
    struct printer *p = arg;
    char src[16];
    snprintf(src, sizeof src, "fn%d", p->id);
    for (int i = 0; i < p->lines; i++) {
        print_line(src, i);
        mix(200); /* a little computation between lines */
    }
}

static int child(int mode, int lines) {
    static char buf[BUFSIZ];
    if (mode == 0) setvbuf(stdout, buf, _IOFBF, sizeof buf);
    if (mode == 1) setvbuf(stdout, buf, _IOLBF, sizeof buf);
    if (mode == 2) setvbuf(stdout, NULL, _IONBF, 0);
    struct printer ps[NFUNCS];
    linger_t ls[NFUNCS];
    for (int f = 0; f < NFUNCS; f++) {
        ps[f] = (struct printer){.id = f, .lines = lines};
        ls[f] = linger_launch(printer_fn, 30 + 10 * (uint64_t)f, &ps[f]);
        CHECK(ls[f].is_complete || ls[f].continuation, "launch failed");
    }
    int seq = 0, live;
    do {
        live = 0;
        for (int f = 0; f < NFUNCS; f++) {
            print_line("caller", seq++);
            if (ls[f].is_complete) continue;
            CHECK(linger_resume(&ls[f], 30 + 10 * (uint64_t)f) == 0, "resume failed");
            live += !ls[f].is_complete;
        }
    } while (live);
    fflush(stdout);
    linger_stats_t s = stats_now();
    fprintf(stderr, "child mode %d: %d caller lines, %llu preemptions, %llu deferrals\n", mode, seq,
            (unsigned long long)s.preemptions, (unsigned long long)s.deferrals);
    uint64_t need = reduced() ? 0 : 50;
    CHECK(s.preemptions >= need, "only %llu preemptions", (unsigned long long)s.preemptions);
    return 0;
}

/* Parses and checks one line; returns the source index (NFUNCS = caller). */
static int check_line(char *line, int *next_seq, int lineno) {
    char src[16];
    int seq, len, used = 0;
    CHECK(sscanf(line, "%15s %d %d %n", src, &seq, &len, &used) == 3 && used > 0, "line %d malformed: \"%s\"",
          lineno, line);
    int who = -1;
    if (strcmp(src, "caller") == 0) who = NFUNCS;
    else if (strncmp(src, "fn", 2) == 0 && isdigit((unsigned char)src[2]) && !src[3]) who = src[2] - '0';
    CHECK(who >= 0 && who <= NFUNCS, "line %d: unknown source in \"%s\"", lineno, line);
    CHECK(seq == next_seq[who], "line %d: %s sequence %d, expected %d: \"%s\"", lineno, src, seq, next_seq[who], line);
    next_seq[who]++;
    CHECK(len == 1 + (seq * 37) % 150, "line %d: bad length field: \"%s\"", lineno, line);
    char *p = line + used;
    unsigned sum = 0;
    for (int i = 0; i < len; i++) {
        CHECK(p[i] == (char)('a' + (seq + i) % 26), "line %d: payload corrupted at %d: \"%s\"", lineno, i, line);
        sum = sum * 31 + (unsigned char)p[i];
    }
    unsigned got;
    char extra;
    CHECK(sscanf(p + len, " %u%c", &got, &extra) == 1 && got == sum, "line %d: bad checksum/tail: \"%s\"", lineno,
          line);
    return who;
}

int main(void) {
    int lines = iters(3000);
    for (int mode = 0; mode < 3; mode++) {
        int fds[2];
        CHECK(pipe(fds) == 0, "pipe");
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork");
        if (pid == 0) {
            close(fds[0]);
            dup2(fds[1], 1);
            close(fds[1]);
            _exit(child(mode, lines));
        }
        close(fds[1]);
        FILE *in = fdopen(fds[0], "r");
        CHECK(in, "fdopen");
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        int next_seq[NFUNCS + 1] = {0}, lineno = 0;
        while ((n = getline(&line, &cap, in)) > 0) {
            lineno++;
            CHECK(line[n - 1] == '\n', "mode %d line %d not terminated: \"%s\"", mode, lineno, line);
            line[n - 1] = 0;
            check_line(line, next_seq, lineno);
        }
        free(line);
        fclose(in);
        int st;
        CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "mode %d: child failed (status 0x%x)", mode, st);
        for (int f = 0; f < NFUNCS; f++)
            CHECK(next_seq[f] == lines, "mode %d: function %d printed %d lines, want %d", mode, f, next_seq[f], lines);
        CHECK(next_seq[NFUNCS] > 0, "mode %d: no caller lines", mode);
        fprintf(stderr, "mode %d: %d lines checked\n", mode, lineno);
    }
    PASS("test_printf");
    return 0;
}
