/*
 * bench_quant.c - products through ggml block-quantized weights
 * (src/quant_product.h) beside float32 (OpenBLAS) and bfloat16
 * (widen_product), on one core, for Llama-3.2-1B's feed-forward shapes:
 * W 8192 x 2048 (up, gate) and 2048 x 8192 (down).
 *
 *   bench_quant [runs [W ...]]   runs (default 7): each figure the median
 *                                of that many; W: only these (Q4_K, F32 ...)
 *
 * QUANT_ISA=avx2 (or plain) in the environment takes that build of the
 * quantized kernels instead of the widest the CPU runs.
 *
 * One row of x (a token after a KV cache) is memory-bound: it is given in
 * GB/s of weight bytes read, with the matrix in enough copies (256 MiB
 * or more, taken in turn) that it comes from memory, not from a cache,
 * beside a plain read of memory on the same core (cblas_sasum). 128 and
 * 512 rows (a prompt) are given in GFLOP/s, 2 rows in out flops.
 */
#include "bench_clock.h"
#include "quant_product.h"
#include "widen.h"

#include <cblas.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COPY_BYTES ((size_t)256 << 20)

/* The kinds of W measured: a quantized type, or float32, or bfloat16. */
enum kind_tag { KIND_QUANT, KIND_F32, KIND_BF16 };
struct kind {
    const char *name;
    enum kind_tag tag;
    quant_type type;
};

static const struct kind kinds[] = {
    {"Q8_0", KIND_QUANT, QUANT_Q8_0}, {"Q4_K", KIND_QUANT, QUANT_Q4_K},
    {"Q6_K", KIND_QUANT, QUANT_Q6_K}, {"Q5_K", KIND_QUANT, QUANT_Q5_K},
    {"Q4_0", KIND_QUANT, QUANT_Q4_0}, {"F32", KIND_F32, QUANT_Q8_0},
    {"BF16", KIND_BF16, QUANT_Q8_0},
};

static uint64_t rng = 0x9E3779B97F4A7C15u;

/* The build of the quantized kernels measured. */
static enum vec_isa isa;

static uint32_t rand_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* Bytes of one row of W of kind k, in values. */
static size_t row_bytes(const struct kind *k, size_t in)
{
    switch (k->tag) {
    case KIND_F32: return in * 4;
    case KIND_BF16: return in * 2;
    default:
        return in / quant_block_values((int)k->type) *
               quant_block_bytes((int)k->type);
    }
}

/* Random weights of kind k: quantized blocks of random bytes with scales
 * near 2^-7 (no infinity, NaN or subnormal to slow anything), or floats
 * in [-1/64, 1/64). */
static void fill(const struct kind *k, unsigned char *w, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++)
        w[i] = (unsigned char)rand_u32();
    if (k->tag == KIND_F32) {
        float *f = (float *)w;
        for (size_t i = 0; i < bytes / 4; i++)
            f[i] = (float)((int)(rand_u32() % 2048) - 1024) / 65536.0f;
        return;
    }
    if (k->tag == KIND_BF16) {
        uint16_t *h = (uint16_t *)w;
        for (size_t i = 0; i < bytes / 2; i++)
            h[i] = (uint16_t)(0x3c00 | (rand_u32() & 0x807f));
        return;
    }
    const size_t bb = quant_block_bytes((int)k->type);
    const size_t d_off = k->type == QUANT_Q6_K ? 208 : 0;
    const int has_min = k->type == QUANT_Q4_1 || k->type == QUANT_Q5_1 ||
                        k->type == QUANT_Q4_K || k->type == QUANT_Q5_K;
    for (size_t b = 0; b + bb <= bytes; b += bb) {
        const uint16_t d = (uint16_t)(0x2000 | (rand_u32() & 0x3ff));
        memcpy(w + b + d_off, &d, 2);
        if (has_min)
            memcpy(w + b + 2, &d, 2);
    }
}

/* y = x W^T through the way kind k goes. */
static void product(const struct kind *k, const float *x, size_t rows,
                    size_t in, const unsigned char *w, size_t out, float *y,
                    float *panel)
{
    if (k->tag == KIND_QUANT) {
        const struct quant_product p = {.x = x,
                                        .ldx = in,
                                        .rows = rows,
                                        .in = in,
                                        .w = w,
                                        .type = k->type,
                                        .row_bytes = row_bytes(k, in),
                                        .out = out,
                                        .y = y,
                                        .ldy = out};
        quant_product_isa(isa, &p, 0.0f, panel);
        return;
    }
    if (k->tag == KIND_F32 && rows == 1) {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)out, (int)in, 1.0f,
                    (const float *)w, (int)in, x, 1, 0.0f, y, 1);
        return;
    }
    if (k->tag == KIND_F32) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows,
                    (int)out, (int)in, 1.0f, x, (int)in, (const float *)w,
                    (int)in, 0.0f, y, (int)out);
        return;
    }
    const struct widen_product p = {.x = x,
                                    .ldx = in,
                                    .rows = rows,
                                    .in = in,
                                    .w = w,
                                    .dtype = ATTN_BF16,
                                    .ldw = in,
                                    .out = out,
                                    .y = y,
                                    .ldy = out};
    widen_product(&p, 0.0f, panel);
}

/* Bytes on a cache line's boundary, as the core's workspace lays out the
 * panel and the rows of x (workspace.h): a vector that straddles two
 * lines is two loads, and shifts which fetch distance reads fastest. */
static void *lines(size_t bytes)
{
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

/* GB/s of a plain read of COPY_BYTES on this core. */
static double read_gbs(long runs)
{
    const size_t n = COPY_BYTES / sizeof(float);
    float *a = lines(COPY_BYTES);
    if (!a)
        return 0.0;
    for (size_t i = 0; i < n; i++)
        a[i] = (float)(i % 7);
    double t[64], sink = 0.0;
    for (long r = 0; r < runs; r++) {
        const double t0 = now_seconds();
        sink += cblas_sasum((int)n, a, 1);
        t[r] = now_seconds() - t0;
    }
    free(a);
    return sink < 0.0 ? 0.0
                      : (double)COPY_BYTES / median(t, (size_t)runs) / 1e9;
}

/* One row: GB/s of weight bytes, over copies of W taken in turn. */
static double one_row_gbs(const struct kind *k, size_t out, size_t in,
                          long runs, float *panel)
{
    const size_t bytes = out * row_bytes(k, in);
    const size_t copies = (COPY_BYTES + bytes - 1) / bytes;
    unsigned char *w = lines(copies * bytes);
    float *x = lines(in * sizeof *x), *y = lines(out * sizeof *y);
    if (!w || !x || !y) {
        free(w), free(x), free(y);
        return 0.0;
    }
    for (size_t c = 0; c < copies; c++)
        fill(k, w + c * bytes, bytes);
    for (size_t i = 0; i < in; i++)
        x[i] = (float)((int)(rand_u32() % 2001) - 1000) / 1000.0f;
    double t[64];
    for (long r = -1; r < runs; r++) { /* a first pass to warm up */
        const double t0 = now_seconds();
        for (size_t c = 0; c < copies; c++)
            product(k, x, 1, in, w + c * bytes, out, y, panel);
        if (r >= 0)
            t[r] = now_seconds() - t0;
    }
    free(w), free(x), free(y);
    return (double)(copies * bytes) / median(t, (size_t)runs) / 1e9;
}

/* rows rows: GFLOP/s. */
static double rows_gflops(const struct kind *k, size_t out, size_t in,
                          size_t rows, long runs, float *panel)
{
    const size_t bytes = out * row_bytes(k, in);
    unsigned char *w = lines(bytes);
    float *x = lines(rows * in * sizeof *x), *y = lines(rows * out * sizeof *y);
    if (!w || !x || !y) {
        free(w), free(x), free(y);
        return 0.0;
    }
    fill(k, w, bytes);
    for (size_t i = 0; i < rows * in; i++)
        x[i] = (float)((int)(rand_u32() % 2001) - 1000) / 1000.0f;
    double t[64];
    for (long r = -1; r < runs; r++) {
        const double t0 = now_seconds();
        product(k, x, rows, in, w, out, y, panel);
        if (r >= 0)
            t[r] = now_seconds() - t0;
    }
    free(w), free(x), free(y);
    return 2.0 * (double)rows * (double)in * (double)out /
           median(t, (size_t)runs) / 1e9;
}

int main(int argc, char **argv)
{
    long runs = argc > 1 ? strtol(argv[1], NULL, 10) : 7;
    runs = runs < 1 ? 1 : runs > 63 ? 63 : runs;
    openblas_set_num_threads(1);
    float *panel = lines(WIDEN_PANEL_FLOATS * sizeof *panel);
    if (!panel)
        return 1;
    const char *want = getenv("QUANT_ISA");
    isa = vec_isa_best();
    if (want && strcmp(want, "plain") == 0)
        isa = VEC_ISA_PLAIN;
    else if (want && strcmp(want, "avx2") == 0 && isa == VEC_ISA_AVX512)
        isa = VEC_ISA_AVX2;
    const char *isa_name = isa == VEC_ISA_AVX512 ? "AVX-512"
                           : isa == VEC_ISA_AVX2 ? "AVX2"
                                                 : "plain C";
    printf("OpenBLAS core: %s, 1 thread; kernels: %s; medians of %ld runs\n",
           openblas_get_corename(), isa_name, runs);
    printf("plain read of memory on one core (cblas_sasum, 256 MiB): %.1f "
           "GB/s\n",
           read_gbs(runs));
    static const size_t shapes[][2] = {{8192, 2048}, {2048, 8192}};
    printf("%-5s %-11s %10s %14s %14s\n", "W", "out x in", "1 row GB/s",
           "128 rows GF/s", "512 rows GF/s");
    for (size_t s = 0; s < 2; s++)
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
            const struct kind *k = &kinds[i];
            bool wanted = argc <= 2;
            for (int a = 2; a < argc; a++)
                wanted = wanted || strcmp(argv[a], k->name) == 0;
            if (!wanted)
                continue;
            const size_t out = shapes[s][0], in = shapes[s][1];
            const double gbs = one_row_gbs(k, out, in, runs, panel);
            const double g128 = rows_gflops(k, out, in, 128, runs, panel);
            const double g512 = rows_gflops(k, out, in, 512, runs, panel);
            printf("%-5s %5zu x %-5zu %10.1f %14.1f %14.1f\n", k->name, out, in,
                   gbs, g128, g512);
            fflush(stdout);
        }
    free(panel);
    return 0;
}
