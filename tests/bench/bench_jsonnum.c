/*
 * bench_jsonnum.c - format a million varied floats with jsonnum_format(),
 * for counting its instructions under callgrind (docs/benchmarks.md,
 * "Formatting numbers"):
 *
 *     bench_jsonnum [precision]     (0, the default: the shortest form)
 *
 * A third are probabilities (uniform in [0, 1)), a third activations
 * (uniform in [-4, 4)), a third any finite bit pattern; the sequence is the
 * same on every run. Prints the bytes written, so that nothing is skipped.
 */
#include "jsonnum.h"

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

int main(int argc, char **argv)
{
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
