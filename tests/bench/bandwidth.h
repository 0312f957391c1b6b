/*
 * bandwidth.h - the machine's read bandwidth, the one measure the
 * decoding benchmarks (bench_decoder, bench_gguf) take their memory bound
 * from: every weight is read once a token, so tokens a second are at most
 * this bandwidth over the weights' bytes.
 *
 * The bound is the best any read loop reaches, so a probe tries several:
 * plain 64-bit loads, AVX2 and AVX-512 loads with 4, 8 and 16 sums in
 * flight, software prefetch at a few distances ahead, non-temporal loads;
 * each on one thread and on one thread a core (disjoint parts of the
 * block), over a block of 4 KiB pages (as a file's mapping has) and one
 * of 2 MiB pages where the system gives them. Each part of the block is
 * far larger than the caches. The best of all is the measure, named by
 * the loop that reached it.
 */
#ifndef ATTND_BENCH_BANDWIDTH_H
#define ATTND_BENCH_BANDWIDTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The block every measure reads: 512 MiB of 4 KiB pages, 512 MiB of
 * 2 MiB pages (16 times the 32 MiB L3 cache of the build machine). */
#define BANDWIDTH_BYTES ((size_t)1 << 30)

struct bandwidth_probe;

struct bandwidth {
    double gbs;         /* GB/s (1e9 bytes), the best of every loop */
    char strategy[128]; /* the loop that reached it, threads and pages */
};

/* A probe over a block of bytes (BANDWIDTH_BYTES for the benchmarks),
 * written once so that every page is there; NULL when it cannot be
 * allocated. The caller owns it; release it with bandwidth_probe_free(). */
struct bandwidth_probe *bandwidth_probe_new(size_t bytes);
void bandwidth_probe_free(struct bandwidth_probe *p);

/* repeats turns of every loop, each turn reading the block once, the loops
 * interleaved; the best GB/s of all into *out. With report not NULL, one
 * line a loop there: its best and its threads and pages. false when a
 * thread cannot be started. */
bool bandwidth_measure(struct bandwidth_probe *p, int repeats, FILE *report,
                       struct bandwidth *out);

#endif
