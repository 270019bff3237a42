/*
 * sync-bench's Concurrency Kit side: ck_ec32 (libck), built by sync-bench at
 * run time with `cc -O2 -pthread ck_bench.c -lck` and skipped when that
 * fails. The same measurements as src/ec.rs, the same output:
 *
 *   ck_bench BATCHES N ROUNDS GOOD_SAMPLES
 *
 * prints lines of "what name value...":
 *   inc_ns NAME v...       ns per increment with no waiter, one per batch
 *   inc_cycles NAME v...   the same in TSC cycles
 *   wake_CPUS NAME v...    ns from just before an increment until the waiter
 *                          (asleep in the kernel) runs; CPUS is "one" (both
 *                          threads on CPU 0) or "two" (waiter on CPU 1)
 *   good_PRODUCER NAME v...  ns from a waiter's call until it sleeps without
 *                          a deadline (ck's backoff ends), the producer
 *                          blocked or spinning on CPU 0
 */
#define _GNU_SOURCE
#include <ck_ec.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static long futex(const volatile uint32_t *w, int op, uint32_t val, const struct timespec *ts, uint32_t mask)
{
	return syscall(SYS_futex, (const void *)w, op | FUTEX_PRIVATE_FLAG, val, ts, NULL, mask);
}

/* Set by wait32 when ck waits without a deadline (it sleeps for good). */
static volatile uint64_t good_at;

static int op_gettime(const struct ck_ec_ops *ops, struct timespec *out)
{
	(void)ops;
	return clock_gettime(CLOCK_MONOTONIC, out);
}

static void op_wait32(const struct ck_ec_wait_state *st, const uint32_t *w, uint32_t expected, const struct timespec *deadline)
{
	(void)st;
	if (deadline == NULL)
		good_at = now_ns();
	/* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline. */
	futex(w, FUTEX_WAIT_BITSET, expected, deadline, FUTEX_BITSET_MATCH_ANY);
}

static void op_wake32(const struct ck_ec_ops *ops, const uint32_t *w)
{
	(void)ops;
	futex(w, FUTEX_WAKE, INT_MAX, NULL, 0);
}

static const struct ck_ec_ops ops = {
	.gettime = op_gettime,
	.wait32 = op_wait32,
	.wake32 = op_wake32,
};
static const struct ck_ec_mode mp = { .ops = &ops, .single_producer = false };
static const struct ck_ec_mode sp = { .ops = &ops, .single_producer = true };

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof s, &s);
}

/* ---- increments with no waiter ---- */

static volatile uint32_t word;
static struct ck_ec32 ec;

enum kind { PLAIN, FETCH_ADD, CK_MP, CK_SP, FUTEX };
static const char *names[] = { "plain store", "fetch_add", "ck_ec32_inc mp", "ck_ec32_inc sp", "futex" };

static void incs(enum kind k, long n)
{
	uint32_t acc = 0;
	for (long i = 0; i < n; i++) {
		switch (k) {
		case PLAIN:
			word = (uint32_t)i;
			break;
		case FETCH_ADD:
			acc += __atomic_fetch_add(&word, 1, __ATOMIC_SEQ_CST);
			break;
		case CK_MP:
			ck_ec32_inc(&ec, &mp);
			break;
		case CK_SP:
			ck_ec32_inc(&ec, &sp);
			break;
		default:
			break;
		}
	}
	if (acc == 1)
		word = acc;
}

static void inc_bench(enum kind k, int batches, long n)
{
	double ns[batches], cyc[batches];
	incs(k, n / 10);
	for (int b = 0; b < batches; b++) {
		uint64_t t = now_ns(), c = __rdtsc();
		incs(k, n);
		cyc[b] = (double)(__rdtsc() - c) / n;
		ns[b] = (double)(now_ns() - t) / n;
	}
	printf("inc_ns %s", names[k]);
	for (int b = 0; b < batches; b++)
		printf(" %.3f", ns[b]);
	printf("\ninc_cycles %s", names[k]);
	for (int b = 0; b < batches; b++)
		printf(" %.3f", cyc[b]);
	printf("\n");
}

/* ---- wake-up latency ---- */

static volatile uint32_t fword;      /* the bare futex's word */
static volatile uint32_t ack;        /* the waiter's answer, a futex */
static volatile uint64_t t_inc;      /* when the producer incremented */
static volatile int round_no = -1;   /* the round the waiter is in */
static volatile pid_t waiter_tid;
static enum kind wkind;
static int wrounds, wcpu;
static uint64_t *lat;

static uint32_t value(void)
{
	return wkind == FUTEX ? __atomic_load_n(&fword, __ATOMIC_ACQUIRE) : ck_ec32_value(&ec);
}

static void wait_change(uint32_t old)
{
	if (wkind == FUTEX) {
		while (__atomic_load_n(&fword, __ATOMIC_ACQUIRE) == old)
			futex(&fword, FUTEX_WAIT, old, NULL, 0);
	} else {
		ck_ec32_wait(&ec, wkind == CK_SP ? &sp : &mp, old, NULL);
	}
}

static void *waiter(void *arg)
{
	(void)arg;
	pin(wcpu);
	waiter_tid = (pid_t)syscall(SYS_gettid);
	for (int i = 0; i < wrounds; i++) {
		uint32_t v = value();
		__atomic_store_n(&round_no, i, __ATOMIC_SEQ_CST);
		wait_change(v);
		lat[i] = now_ns() - t_inc;
		__atomic_fetch_add(&ack, 1, __ATOMIC_SEQ_CST);
		futex(&ack, FUTEX_WAKE, 1, NULL, 0);
	}
	return NULL;
}

/* Whether thread `tid` is asleep ('S' in its stat). */
static int asleep(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] == 'S';
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void wake_bench(enum kind k, int cpus, int rounds)
{
	const struct timespec pause = { 0, 20000 };
	pthread_t th;
	wkind = k;
	wrounds = rounds;
	wcpu = cpus == 1 ? 0 : 1;
	round_no = -1;
	waiter_tid = 0;
	lat = calloc(rounds, sizeof *lat);
	pin(0);
	pthread_create(&th, NULL, waiter, NULL);
	for (int i = 0; i < rounds; i++) {
		while (__atomic_load_n(&round_no, __ATOMIC_SEQ_CST) != i || !asleep(waiter_tid))
			nanosleep(&pause, NULL);
		uint32_t a = ack;
		t_inc = now_ns();
		if (k == FUTEX) {
			__atomic_fetch_add(&fword, 1, __ATOMIC_SEQ_CST);
			futex(&fword, FUTEX_WAKE, INT_MAX, NULL, 0);
		} else {
			ck_ec32_inc(&ec, k == CK_SP ? &sp : &mp);
		}
		while (__atomic_load_n(&ack, __ATOMIC_SEQ_CST) == a)
			futex(&ack, FUTEX_WAIT, a, NULL, 0);
	}
	pthread_join(th, NULL);
	qsort(lat, rounds, sizeof *lat, cmp_u64);
	printf("wake_%s %s", cpus == 1 ? "one" : "two", names[k]);
	for (int i = 0; i < rounds; i++)
		printf(" %llu", (unsigned long long)lat[i]);
	printf("\n");
	free(lat);
}

/* ---- until the waiter sleeps for good ---- */

static volatile uint64_t good_start;

static void *good_waiter(void *arg)
{
	pin(1);
	uint32_t v = ck_ec32_value(&ec);
	good_start = now_ns();
	ck_ec32_wait(&ec, arg, v, NULL);
	return NULL;
}

static void good_bench(enum kind k, int spinning, int samples)
{
	const struct timespec pause = { 0, 1000000 };
	printf("good_%s %s", spinning ? "spinning" : "blocked", names[k]);
	pin(0);
	for (int s = 0; s < samples; s++) {
		pthread_t th;
		good_at = 0;
		good_start = 0;
		pthread_create(&th, NULL, good_waiter, (void *)(k == CK_SP ? &sp : &mp));
		while (__atomic_load_n(&good_at, __ATOMIC_SEQ_CST) == 0) {
			if (!spinning)
				nanosleep(&pause, NULL);
		}
		printf(" %llu", (unsigned long long)(good_at - good_start));
		ck_ec32_inc(&ec, k == CK_SP ? &sp : &mp);
		pthread_join(th, NULL);
	}
	printf("\n");
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: ck_bench BATCHES N ROUNDS GOOD_SAMPLES\n");
		return 2;
	}
	int batches = atoi(argv[1]), rounds = atoi(argv[3]), good = atoi(argv[4]);
	long n = atol(argv[2]);
	pin(0);
	for (enum kind k = PLAIN; k <= CK_SP; k++)
		inc_bench(k, batches, n);
	fflush(stdout);
	enum kind wk[] = { FUTEX, CK_MP, CK_SP };
	for (int cpus = 1; cpus <= 2; cpus++)
		for (int i = 0; i < 3; i++)
			wake_bench(wk[i], cpus, rounds);
	fflush(stdout);
	for (int spinning = 0; spinning <= 1; spinning++) {
		good_bench(CK_MP, spinning, good);
		good_bench(CK_SP, spinning, good);
	}
	return 0;
}
