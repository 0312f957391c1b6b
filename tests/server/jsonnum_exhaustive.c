/*
 * jsonnum_exhaustive.c - every one of the 2^32 float32 bit patterns through
 * jsonnum_format() in its shortest form, checked by jsonnum_check.c: the
 * text reads back as the same float, no shorter decimal does, none as short
 * is nearer. Every FIXED_STRIDE-th pattern is also formatted to 1..9 digits
 * and compared with snprintf. And every pattern goes through
 * jsonnum_format_list() too, LIST_BLOCK at a time, whose loop holds its
 * own inlined copy of the formatter: it must write the same text.
 *
 *     jsonnum_exhaustive [threads]      (default: one per online CPU)
 *
 * Prints the first failures, a progress line per sixteenth and a summary;
 * exits 1 if anything failed. `make jsonnum-exhaustive` runs it.
 */
#include "jsonnum.h"
#include "jsonnum_check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_BITS 20 /* patterns per unit of work: 2^20 */
#define CHUNKS (1u << (32 - CHUNK_BITS))
#define FIXED_STRIDE 1021 /* prime, so every exponent and digit comes by */
#define MAX_REPORTS 20
#define MAX_THREADS 64
#define LIST_BLOCK 4096 /* patterns to a jsonnum_format_list() call */

static atomic_uint next_chunk;
static atomic_uint chunks_done;
static atomic_ullong failures;
static atomic_ullong fixed_checked;
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void report(uint32_t bits, int precision, const char *why)
{
    if (atomic_fetch_add(&failures, 1) >= MAX_REPORTS)
        return;
    float f;
    memcpy(&f, &bits, sizeof f);
    pthread_mutex_lock(&print_lock);
    fprintf(stderr, "FAIL 0x%08x (%.9g) precision %d: %s\n", (unsigned)bits,
            (double)f, precision, why);
    pthread_mutex_unlock(&print_lock);
}

static void check_chunk(uint32_t chunk, double start)
{
    char out[JSONNUM_MAX], why[200];
    static _Thread_local float block[LIST_BLOCK];
    static _Thread_local char list[LIST_BLOCK * JSONNUM_MAX];
    const char *at = list; /* the list's text of pattern i */
    unsigned long long fixed = 0;
    const uint32_t first = chunk << CHUNK_BITS;
    for (uint32_t i = 0; i < (1u << CHUNK_BITS); i++) {
        const uint32_t bits = first + i;
        float f;
        memcpy(&f, &bits, sizeof f);
        if (i % LIST_BLOCK == 0) {
            for (uint32_t j = 0; j < LIST_BLOCK; j++) {
                const uint32_t b = bits + j;
                memcpy(&block[j], &b, sizeof b);
            }
            jsonnum_format_list(block, LIST_BLOCK, 0, list);
            at = list;
        }
        const size_t len = jsonnum_format(f, 0, out);
        if (!jsonnum_check_shortest(f, out, why, sizeof why))
            report(bits, 0, why);
        if (memcmp(at, out, len) != 0 || (at[len] != ',' && at[len] != '\0'))
            report(bits, 0, "jsonnum_format_list() wrote other text");
        at += len + 1;
        if (bits % FIXED_STRIDE != 0)
            continue;
        fixed++;
        for (int p = 1; p <= 9; p++) {
            jsonnum_format(f, p, out);
            if (!jsonnum_check_fixed(f, p, out, why, sizeof why))
                report(bits, p, why);
        }
    }
    atomic_fetch_add(&fixed_checked, fixed);
    const unsigned done = atomic_fetch_add(&chunks_done, 1) + 1;
    if (done % (CHUNKS / 16) == 0) {
        pthread_mutex_lock(&print_lock);
        fprintf(stderr, "  %2u/16 done, %.0f s\n", done / (CHUNKS / 16),
                now() - start);
        pthread_mutex_unlock(&print_lock);
    }
}

static void *worker(void *arg)
{
    const double start = *(const double *)arg;
    for (;;) {
        const unsigned chunk = atomic_fetch_add(&next_chunk, 1);
        if (chunk >= CHUNKS)
            return NULL;
        check_chunk(chunk, start);
    }
}

int main(int argc, char **argv)
{
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (argc > 1) {
        char *end;
        threads = strtol(argv[1], &end, 10);
        if (*end != '\0' || threads < 1 || threads > MAX_THREADS) {
            fprintf(stderr, "usage: %s [threads, 1..%d]\n", argv[0],
                    MAX_THREADS);
            return 2;
        }
    }
    if (threads < 1)
        threads = 1;
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    fprintf(stderr, "jsonnum: all 2^32 float32 bit patterns on %ld threads\n",
            threads);
    double start = now();
    pthread_t team[MAX_THREADS];
    for (long t = 0; t < threads; t++)
        if (pthread_create(&team[t], NULL, worker, &start) != 0) {
            fprintf(stderr, "cannot start thread %ld\n", t);
            return 2;
        }
    for (long t = 0; t < threads; t++)
        pthread_join(team[t], NULL);
    const unsigned long long failed = atomic_load(&failures);
    printf("jsonnum: 4294967296 patterns, shortest form checked on all, "
           "1..9 digits on %llu; %llu failures; %.0f s on %ld threads\n",
           atomic_load(&fixed_checked), failed, now() - start, threads);
    return failed ? 1 : 0;
}
