/*
 * bench_jsonnum.c - format a million varied floats with jsonnum_format(),
 * for counting its instructions under callgrind, or time rows of numbers
 * as an answer formats them (docs/benchmarks.md, "Formatting numbers"):
 *
 *     bench_jsonnum [precision]     (0, the default: the shortest form)
 *     bench_jsonnum rows [LENGTH]   (rows of LENGTH numbers, default 9)
 *
 * A third are probabilities (uniform in [0, 1)), a third activations
 * (uniform in [-4, 4)), a third any finite bit pattern; the sequence is the
 * same on every run. Prints the bytes written, so that nothing is skipped.
 *
 * rows: softmax weights of random logits, and activations in [-4, 4),
 * in rows of LENGTH, formatted three ways in turn: the whole array in one
 * jsonnum_format_rows() call, as an answer is (eight numbers at a time
 * where the CPU has AVX-512, jsonnum_wide.h), a jsonnum_format_list()
 * call a row, and jsonnum_format() one number after another; prints the
 * median nanoseconds a number of each.
 */
#include "bench_clock.h"
#include "jsonnum.h"
#include "jsonnum_wide.h"

#include <math.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT 1000000

/* splitmix64: a fixed, well-mixed sequence */
static uint64_t next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

enum { ROWS_VALUES = 1 << 16, ROWS_PASSES = 21 };

/* How a pass formats the rows: as an answer does, the whole array in one
 * jsonnum_format_rows() call with its brackets; a jsonnum_format_list()
 * call a row; or one jsonnum_format() call a number. */
enum rows_way { WHOLE, A_ROW, A_NUMBER, WAYS };

static size_t bracket_row_end(void *context, char *out)
{
    (void)context;
    memcpy(out, "],[", 3);
    return 3;
}

/* ns a number for values[0 .. ROWS_VALUES) in rows of length */
static double time_rows(const float *values, size_t length, enum rows_way way,
                        char *out, size_t *bytes)
{
    const size_t count = ROWS_VALUES / length * length;
    const double t0 = now_seconds();
    if (way == WHOLE) {
        const struct jsonnum_rows rows = {.row = length,
                                          .row_end = bracket_row_end};
        *bytes += jsonnum_format_rows(values, count, 0, &rows, out);
    }
    for (size_t r = 0; way != WHOLE && r < count; r += length) {
        if (way == A_ROW) {
            *bytes += jsonnum_format_list(values + r, length, 0, out);
            continue;
        }
        size_t n = 0;
        for (size_t i = 0; i < length; i++) {
            n += jsonnum_format(values[r + i], 0, out + n);
            out[n++] = ',';
        }
        *bytes += n;
    }
    return (now_seconds() - t0) * 1e9 / (double)count;
}

static int rows(size_t length)
{
    float *weights = malloc(ROWS_VALUES * sizeof *weights);
    float *activations = malloc(ROWS_VALUES * sizeof *activations);
    char *out = malloc(ROWS_VALUES * (JSONNUM_MAX + JSONNUM_ROW_END_MAX));
    if (!weights || !activations || !out)
        return 1;
    uint64_t state = 42;
    for (size_t r = 0; r + length <= ROWS_VALUES; r += length) {
        double sum = 0.0;
        for (size_t i = 0; i < length; i++) {
            const double u = (double)(next(&state) >> 11) * 0x1.0p-53;
            weights[r + i] = (float)exp(6.0 * u);
            sum += weights[r + i];
            activations[r + i] = (float)((u - 0.5) * 8.0);
        }
        for (size_t i = 0; i < length; i++)
            weights[r + i] = (float)(weights[r + i] / sum);
    }
    const float *kinds[2] = {weights, activations};
    const char *names[2] = {"softmax weights", "activations in [-4, 4)"};
    printf("rows of %zu numbers, ns a number, median of %d passes (%s):\n",
           length, ROWS_PASSES,
           jsonnum_wide_available() ? "eight at a time by AVX-512"
                                    : "no AVX-512: one at a time");
    printf("  %-24s %12s %12s %12s\n", "", "whole array", "a row a call",
           "one by one");
    size_t bytes = 0;
    for (int k = 0; k < 2; k++) {
        double t[WAYS][ROWS_PASSES], m[WAYS];
        for (int p = 0; p < ROWS_PASSES; p++)
            for (int w = 0; w < WAYS; w++)
                t[w][p] =
                    time_rows(kinds[k], length, (enum rows_way)w, out, &bytes);
        for (int w = 0; w < WAYS; w++)
            m[w] = median(t[w], ROWS_PASSES);
        printf("  %-24s %12.2f %12.2f %12.2f   one by one / whole: %.2fx\n",
               names[k], m[WHOLE], m[A_ROW], m[A_NUMBER],
               m[A_NUMBER] / m[WHOLE]);
    }
    printf("  (%zu bytes)\n", bytes);
    free(weights);
    free(activations);
    free(out);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "rows") == 0) {
        const long length = argc > 2 ? strtol(argv[2], NULL, 10) : 9;
        if (length < 1 || length > 4096) {
            fprintf(stderr, "usage: %s rows [length 1..4096]\n", argv[0]);
            return 2;
        }
        return rows((size_t)length);
    }
    const int precision = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 0;
    if (precision < 0 || precision > 9) {
        fprintf(stderr, "usage: %s [precision 0..9]\n", argv[0]);
        return 2;
    }
    float *values = malloc(COUNT * sizeof *values);
    if (!values)
        return 1;
    uint64_t state = 42;
    for (size_t i = 0; i < COUNT; i++) {
        const uint64_t r = next(&state);
        const double u = (double)(r >> 11) * 0x1.0p-53;
        uint32_t bits = (uint32_t)r;
        switch (i % 3) {
        case 0: values[i] = (float)u; break;
        case 1: values[i] = (float)((u - 0.5) * 8.0); break;
        default:
            if ((bits & 0x7F800000) == 0x7F800000)
                bits &= 0xFF7FFFFF; /* finite: clear the top exponent bit */
            memcpy(&values[i], &bits, sizeof bits);
        }
    }
    char out[JSONNUM_MAX];
    size_t bytes = 0;
    for (size_t i = 0; i < COUNT; i++)
        bytes += jsonnum_format(values[i], precision, out);
    printf("%d floats, %zu bytes at precision %d\n", COUNT, bytes, precision);
    free(values);
    return 0;
}
