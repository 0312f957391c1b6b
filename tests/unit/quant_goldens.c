/*
 * quant_goldens.c - writes tests/golden/quant/<type>.json: blocks of each
 * quantized type and the float32 bits that ggml's own reference
 * dequantizers (dequantize_row_* in llama.cpp's ggml/src/ggml-quants.c)
 * give for them. Not part of the build: it is compiled against a
 * llama.cpp source tree, with contraction off as ggml's C is written:
 *
 *   cc -std=gnu11 -O2 -ffp-contract=off -I$LLAMA/ggml/include \
 *      -I$LLAMA/ggml/src tests/unit/quant_goldens.c \
 *      $LLAMA/ggml/src/ggml-quants.c -lm -o quant_goldens
 *   ./quant_goldens tests/golden/quant
 *
 * Each file: {"type": ggml type id, "name", "block_values",
 * "block_bytes", "cases": [{"what", "bytes": hex of the blocks,
 * "bits": 8 hex digits per value, the float32 bits}]}.
 */
#include "ggml-quants.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ggml-quants.c names these; the dequantizers never call them. */
void ggml_abort(const char *file, int line, const char *fmt, ...)
{
    (void)fmt;
    fprintf(stderr, "ggml_abort at %s:%d\n", file, line);
    abort();
}
size_t ggml_row_size(enum ggml_type type, int64_t ne)
{
    (void)type, (void)ne;
    abort();
}
size_t ggml_type_size(enum ggml_type type)
{
    (void)type;
    abort();
}
const char *ggml_type_name(enum ggml_type type)
{
    (void)type;
    abort();
}

typedef void (*dequant_fn)(const void *, float *, int64_t);

static const struct qtype {
    int id;
    const char *name;
    int values, bytes;
    int d_off, m_off; /* offsets of the fp16 scale and min; -1 none */
    dequant_fn fn;
} qtypes[] = {
    {8, "Q8_0", 32, 34, 0, -1, (dequant_fn)dequantize_row_q8_0},
    {2, "Q4_0", 32, 18, 0, -1, (dequant_fn)dequantize_row_q4_0},
    {3, "Q4_1", 32, 20, 0, 2, (dequant_fn)dequantize_row_q4_1},
    {6, "Q5_0", 32, 22, 0, -1, (dequant_fn)dequantize_row_q5_0},
    {7, "Q5_1", 32, 24, 0, 2, (dequant_fn)dequantize_row_q5_1},
    {12, "Q4_K", 256, 144, 0, 2, (dequant_fn)dequantize_row_q4_K},
    {13, "Q5_K", 256, 176, 0, 2, (dequant_fn)dequantize_row_q5_K},
    {14, "Q6_K", 256, 210, 208, -1, (dequant_fn)dequantize_row_q6_K},
};

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static uint8_t rand_byte(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint8_t)(rng_state >> 24);
}

/* A finite fp16 of either sign with an exponent field below 31. */
static uint16_t rand_finite_half(void)
{
    uint16_t h = (uint16_t)(rand_byte() | rand_byte() << 8);
    if ((h >> 10 & 0x1f) == 0x1f)
        h &= 0xBFFF; /* exponent 15 */
    return h;
}

static void put_half(uint8_t *p, uint16_t h)
{
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* One case's blocks: quants filled with fill (or random when fill < 0),
 * scales d and m (random finite when negative). */
static void make_block(const struct qtype *t, uint8_t *b, int fill, long d,
                       long m)
{
    for (int i = 0; i < t->bytes; i++)
        b[i] = fill < 0 ? rand_byte() : (uint8_t)fill;
    put_half(b + t->d_off, d < 0 ? rand_finite_half() : (uint16_t)d);
    if (t->m_off >= 0)
        put_half(b + t->m_off, m < 0 ? rand_finite_half() : (uint16_t)m);
}

static void write_case(FILE *f, const struct qtype *t, const char *what,
                       const uint8_t *b, int blocks, int first)
{
    const int n = blocks * t->values;
    float *y = malloc((size_t)n * sizeof *y);
    if (!y)
        abort();
    t->fn(b, y, n);
    fprintf(f, "%s\n  {\"what\": \"%s\",\n   \"bytes\": \"", first ? "" : ",",
            what);
    for (int i = 0; i < blocks * t->bytes; i++)
        fprintf(f, "%02x", b[i]);
    fprintf(f, "\",\n   \"bits\": \"");
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &y[i], sizeof u);
        fprintf(f, "%08x", (unsigned)u);
    }
    fprintf(f, "\"}");
    free(y);
}

static const struct fixed_case {
    const char *what;
    int fill;  /* quant bytes: -1 random */
    long d, m; /* fp16 bits; -1 random finite */
} fixed_cases[] = {
    {"all bytes zero", 0x00, 0x0000, 0x0000},
    {"all bytes 0xff (NaN scales)", 0xff, 0xffff, 0xffff},
    {"quants zero, d 1/3, m -1/3", 0x00, 0x3555, 0xB555},
    {"quants 0xff, d 0.1, m -0.1", 0xff, 0x2E66, 0xAE66},
    {"random quants, d 65504, m -65504", -1, 0x7BFF, 0xFBFF},
    {"random quants, d -65504, m 65504", -1, 0xFBFF, 0x7BFF},
    {"random quants, d and m the least subnormal", -1, 0x0001, 0x8001},
    {"random quants, d and m the largest subnormal", -1, 0x03FF, 0x83FF},
    {"random quants, d 0, m -1", -1, 0x0000, 0xBC00},
    {"random quants, d -0, m 0", -1, 0x8000, 0x0000},
    {"random quants, d 1, m -2.5", -1, 0x3C00, 0xC100},
    {"random quants, d 2^-14 (least normal), m -2^-14", -1, 0x0400, 0x8400},
    {"random quants, d +inf, m -inf", -1, 0x7C00, 0xFC00},
    {"random quants, d NaN, m NaN", -1, 0x7E00, 0x7C01},
    {"random quants, d 0.0123, m random", -1, 0x224C, -1},
};

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    for (size_t k = 0; k < sizeof qtypes / sizeof qtypes[0]; k++) {
        const struct qtype *t = &qtypes[k];
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.json", argv[1], t->name);
        FILE *f = fopen(path, "w");
        if (!f) {
            perror(path);
            return 1;
        }
        fprintf(f,
                "{\"type\": %d, \"name\": \"%s\", \"block_values\": %d, "
                "\"block_bytes\": %d,\n \"cases\": [",
                t->id, t->name, t->values, t->bytes);
        uint8_t b[4 * 256];
        int first = 1;
        for (size_t c = 0; c < sizeof fixed_cases / sizeof fixed_cases[0];
             c++) {
            const struct fixed_case *fc = &fixed_cases[c];
            make_block(t, b, fc->fill, fc->d, fc->m);
            write_case(f, t, fc->what, b, 1, first);
            first = 0;
        }
        for (int r = 0; r < 6; r++) {
            make_block(t, b, -1, -1, -1);
            write_case(f, t, "random bytes, finite scales", b, 1, 0);
        }
        for (int r = 0; r < 2; r++) {
            for (int i = 0; i < t->bytes; i++)
                b[i] = rand_byte();
            write_case(f, t, "random bytes, scales too", b, 1, 0);
        }
        for (int i = 0; i < 3; i++)
            make_block(t, b + i * t->bytes, -1, -1, -1);
        write_case(f, t, "three random blocks in a run", b, 3, 0);
        fprintf(f, "\n]}\n");
        fclose(f);
    }
    return 0;
}
