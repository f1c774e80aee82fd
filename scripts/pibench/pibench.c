/*
 * pibench: the ISA-L half of `scripts/bench pi`. It times ISA-L's CRCs
 * (Debian's libisal-dev, the library's public API only) over the buffers
 * and the PI layouts that mlx5go's BenchmarkSideBySide (in sig)
 * uses, under the same operation names, and prints one line per
 * operation:
 *
 *     <operation> <ns/op> <data bytes per op> <cpu-ns/op>
 *
 * ns/op is the wall clock's, cpu-ns/op the thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), which a busy machine disturbs less.
 *
 * Usage: pibench [-t seconds] [-l] [operation ...]
 *   -t  how long each operation runs (default 0.1 s), as go test's
 *       -benchtime: the iteration count grows until one run lasts that long
 *   -l  list the operations and exit
 * With operations named, only those run, in the order given.
 *
 * Before timing it checks each CRC against its published check value, so
 * that both sides are known to compute the same function.
 *
 * This is mlx5go's own code; it copies nothing from ISA-L.
 */
#include <isa-l/crc.h>
#include <isa-l/crc64.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_of(clockid_t id)
{
	struct timespec t;
	clock_gettime(id, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static double now(void) { return clock_of(CLOCK_MONOTONIC); }

/* sink keeps the compiler from dropping a result. */
static volatile uint64_t sink;

/* The CRCs, each starting a new checksum with the standard initial value,
 * in the form mlx5go's functions return. */
static uint64_t t10dif(const uint8_t *p, uint64_t n) { return crc16_t10dif(0, p, n); }
/* crc32_iscsi returns the register without the final complement. */
static uint64_t crc32c(const uint8_t *p, uint64_t n) { return (uint32_t)~crc32_iscsi((uint8_t *)p, (int)n, 0xffffffff); }
/* crc64_ecma_refl and crc32_gzip_refl take and return final values. */
static uint64_t crc64xz(const uint8_t *p, uint64_t n) { return crc64_ecma_refl(0, p, n); }
static uint64_t crc32ieee(const uint8_t *p, uint64_t n) { return crc32_gzip_refl(0, p, n); }

struct crc {
	const char *name;
	uint64_t (*f)(const uint8_t *, uint64_t);
	uint64_t check; /* of "123456789" */
};

static const struct crc crcs[] = {
	{"T10DIF", t10dif, 0xD0DB},
	{"CRC32C", crc32c, 0xE3069283},
	{"CRC64XZ", crc64xz, 0x995DC9BBDF1939FAULL},
	{"CRC32", crc32ieee, 0xCBF43926},
};

/* One operation: run(arg) does the work once. */
struct op {
	char name[64];
	uint64_t bytes;
	void (*run)(const struct op *);
	const struct crc *crc;
	uint8_t *buf;
	uint64_t len;  /* CRC: buffer length; PI: data block size */
	uint64_t pi;   /* PI: signature bytes after each block */
	uint64_t blocks;
};

static void run_crc(const struct op *o) { sink += o->crc->f(o->buf, o->len); }

/* put and get store and read a big-endian signature of n (4 or 8)
 * bytes, as mlx5go stores signatures. */
static void put(uint8_t *p, uint64_t v, uint64_t n)
{
	if (n == 4) {
		uint32_t w = __builtin_bswap32((uint32_t)v);
		memcpy(p, &w, 4);
		return;
	}
	v = __builtin_bswap64(v);
	memcpy(p, &v, 8);
}

static uint64_t get(const uint8_t *p, uint64_t n)
{
	if (n == 4) {
		uint32_t w;
		memcpy(&w, p, 4);
		return __builtin_bswap32(w);
	}
	uint64_t v;
	memcpy(&v, p, 8);
	return __builtin_bswap64(v);
}

/* sigof is the signature of block i: for T10-DIF the tuple guard, app tag
 * 0x1234, ref tag 0x5678 + i; for the CRCs the CRC. */
static uint64_t sigof(const struct op *o, const uint8_t *blk, uint64_t i)
{
	uint64_t c = o->crc->f(blk, o->len);
	if (o->crc->f == t10dif)
		return c << 48 | 0x1234ULL << 32 | (uint32_t)(0x5678 + i);
	return c;
}

static void run_generate(const struct op *o)
{
	uint8_t *blk = o->buf;
	for (uint64_t i = 0; i < o->blocks; i++, blk += o->len + o->pi)
		put(blk + o->len, sigof(o, blk, i), o->pi);
}

static void run_check(const struct op *o)
{
	uint8_t *blk = o->buf;
	for (uint64_t i = 0; i < o->blocks; i++, blk += o->len + o->pi) {
		if (get(blk + o->len, o->pi) != sigof(o, blk, i)) {
			fprintf(stderr, "pibench: %s: block %llu is bad\n", o->name, (unsigned long long)i);
			exit(1);
		}
	}
}

/* timeit runs o for at least secs seconds and returns ns per run, of the
 * wall clock and (in *cpu) of the thread's CPU time. */
static double timeit(const struct op *o, double secs, double *cpu)
{
	uint64_t n = 1;
	for (;;) {
		double t = now(), c = clock_of(CLOCK_THREAD_CPUTIME_ID);
		for (uint64_t i = 0; i < n; i++)
			o->run(o);
		c = clock_of(CLOCK_THREAD_CPUTIME_ID) - c;
		t = now() - t;
		if (t >= secs) {
			*cpu = c / n * 1e9;
			return t / n * 1e9;
		}
		/* Aim 20% past secs, growing at most 100-fold, as go test does. */
		double want = t > 0 ? secs * 1.2 / t * n : n * 100.0;
		if (want > n * 100.0)
			want = n * 100.0;
		n = want > n + 1 ? (uint64_t)want : n + 1;
	}
}

#define PI_DATA (128 << 10) /* as sideData in sig/bench_test.go */

int main(int argc, char **argv)
{
	double secs = 0.1;
	int list = 0, first = argc;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-t") && i + 1 < argc)
			secs = atof(argv[++i]);
		else if (!strcmp(argv[i], "-l"))
			list = 1;
		else if (argv[i][0] == '-') {
			fprintf(stderr, "usage: pibench [-t seconds] [-l] [operation ...]\n");
			return 2;
		} else {
			first = i;
			break;
		}
	}

	for (size_t i = 0; i < sizeof crcs / sizeof crcs[0]; i++) {
		uint64_t got = crcs[i].f((const uint8_t *)"123456789", 9);
		if (got != crcs[i].check) {
			fprintf(stderr, "pibench: %s(123456789) = %#llx, want %#llx\n", crcs[i].name,
				(unsigned long long)got, (unsigned long long)crcs[i].check);
			return 1;
		}
	}

	static struct op ops[64];
	int nops = 0;
	/* The CRCs over 512 B, 4 KiB and 1 MiB, byte i holding i*31, as
	 * sig/crc's bench. */
	static const struct { uint64_t n; const char *name; } sizes[] = {
		{512, "512B"}, {4096, "4KiB"}, {1 << 20, "1MiB"}};
	for (size_t c = 0; c < 4; c++) {
		for (size_t s = 0; s < 3; s++) {
			struct op *o = &ops[nops++];
			snprintf(o->name, sizeof o->name, "%s/%s", crcs[c].name, sizes[s].name);
			o->crc = &crcs[c];
			o->len = o->bytes = sizes[s].n;
			o->buf = aligned_alloc(64, o->len);
			for (uint64_t i = 0; i < o->len; i++)
				o->buf[i] = (uint8_t)(i * 31);
			o->run = run_crc;
		}
	}
	/* PI over 128 KiB of data in blocks of 512 and 4096 bytes. */
	for (size_t c = 0; c < 3; c++) {
		uint64_t pi = crcs[c].f == crc32c ? 4 : 8;
		for (uint64_t bs = 512; bs <= 4096; bs *= 8) {
			for (int g = 0; g < 2; g++) {
				struct op *o = &ops[nops++];
				snprintf(o->name, sizeof o->name, "%s/%s/%llu+%llu", g ? "check" : "generate",
					 crcs[c].name, (unsigned long long)bs, (unsigned long long)pi);
				o->crc = &crcs[c];
				o->len = bs;
				o->pi = pi;
				o->blocks = PI_DATA / bs;
				o->bytes = PI_DATA;
				o->buf = aligned_alloc(64, o->blocks * (bs + pi));
				srand(1);
				for (uint64_t i = 0; i < o->blocks * (bs + pi); i++)
					o->buf[i] = (uint8_t)rand();
				run_generate(o);
				o->run = g ? run_check : run_generate;
			}
		}
	}

	if (list) {
		for (int i = 0; i < nops; i++)
			printf("%s\n", ops[i].name);
		return 0;
	}

	/* The operations to run: those named, or all. */
	static struct op *run[64];
	int nrun = 0;
	for (int a = first; a < argc; a++) {
		int i = 0;
		while (i < nops && strcmp(ops[i].name, argv[a]))
			i++;
		if (i == nops) {
			fprintf(stderr, "pibench: no operation %s (pibench -l lists them)\n", argv[a]);
			return 2;
		}
		run[nrun++] = &ops[i];
	}
	if (first == argc)
		for (int i = 0; i < nops; i++)
			run[nrun++] = &ops[i];

	/* Warm the vector units and the caches up before the first timing. */
	double until = now() + 0.02;
	while (now() < until)
		for (int i = 0; i < nrun; i++)
			run[i]->run(run[i]);

	for (int i = 0; i < nrun; i++) {
		double cpu, ns = timeit(run[i], secs, &cpu);
		printf("%s %.2f %llu %.2f\n", run[i]->name, ns, (unsigned long long)run[i]->bytes, cpu);
		fflush(stdout);
	}
	return 0;
}
