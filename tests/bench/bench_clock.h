/*
 * bench_clock.h - what the benchmarks share: a monotonic clock, the
 * median of their rounds and the machine's core count.
 */
#ifndef ATTND_BENCH_CLOCK_H
#define ATTND_BENCH_CLOCK_H

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int compare_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0 .. n), which it sorts. */
static inline double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, compare_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static inline unsigned cores(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

#endif
