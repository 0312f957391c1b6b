/*
 * quant_dot.c - rows of x through block-quantized weights, each a dot
 * product per output (quant_product.h): the order of its sums, which
 * every build keeps, the plain C build, and the choice of build. The
 * AVX2 and AVX-512 builds, which decode each block in registers (and,
 * for several rows of x, once for two or more of them), are in
 * quant_dot_avx2.c and quant_dot_avx512.c.
 *
 * Every dot product sums in one order, whatever the build: value k of
 * the row into sum (k / 16) % 4, lane k % 16, one fused multiply-add a
 * term, in the order of k; then the four sums lane by lane
 * ((s0 + s1) + (s2 + s3)) and the sixteen lanes halving (lane l plus
 * lane l + 8, then l + 4, l + 2, l + 1). An AVX2 vector of sixteen is
 * two of eight, lanes 0-7 and 8-15. The builds differ only in how they
 * come to the weights' values, which are quant_widen()'s in all of them.
 */
#include "quant_product.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Values widened at a time by the plain build: a whole number of every
 * type's blocks and of 64 (one round of the four sums). */
enum { PIECE = 256 };

static float reduce_plain(float acc[QUANT_SUMS][QUANT_LANES])
{
    float s[QUANT_LANES];
    for (int l = 0; l < QUANT_LANES; l++)
        s[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
    for (int h = QUANT_LANES / 2; h; h /= 2)
        for (int l = 0; l < h; l++)
            s[l] = s[l] + s[l + h];
    return s[0];
}

/* Plain C, any type: each row a PIECE of values at a time through
 * quant_widen(), then its terms in order. */
static void quant_dots_plain(quant_type type, const float *x, const void *w,
                             size_t row_bytes, size_t in, size_t n, float *dots)
{
    const size_t values = quant_block_values((int)type);
    const size_t bytes = quant_block_bytes((int)type);
    float piece[PIECE];
    for (size_t j = 0; j < n; j++) {
        const unsigned char *row = (const unsigned char *)w + j * row_bytes;
        float acc[QUANT_SUMS][QUANT_LANES] = {{0}};
        for (size_t k0 = 0; k0 < in; k0 += PIECE) {
            const size_t len = in - k0 < PIECE ? in - k0 : PIECE;
            quant_widen(row + k0 / values * bytes, type, len, piece);
            for (size_t k = 0; k < len; k++) {
                float *sum =
                    &acc[k / QUANT_LANES % QUANT_SUMS][k % QUANT_LANES];
                *sum = fmaf(x[k0 + k], piece[k], *sum);
            }
        }
        dots[j] = reduce_plain(acc);
    }
}

/* The plain build has no decoding to share: each row alone. */
static void quant_rows_dots_plain(quant_type type, const float *x, size_t ldx,
                                  size_t xrows, const void *w, size_t row_bytes,
                                  size_t in, size_t n, float *dots,
                                  size_t lddots)
{
    for (size_t r = 0; r < xrows; r++)
        quant_dots_plain(type, x + r * ldx, w, row_bytes, in, n,
                         dots + r * lddots);
}

static void quant_decode_plain(quant_type type, const void *src, size_t count,
                               float *dst)
{
    quant_widen(src, type, count, dst);
}

/* Outputs to a call of a build's kernel. */
enum { DOTS = 64 };

void quant_dot_outputs(enum vec_isa isa, const struct quant_product *p,
                       float beta)
{
    const unsigned char *w = p->w;
    float dots[QUANT_BY_ROWS * DOTS];
    for (size_t r0 = 0; r0 < p->rows; r0 += QUANT_BY_ROWS) {
        const size_t rows =
            p->rows - r0 < QUANT_BY_ROWS ? p->rows - r0 : QUANT_BY_ROWS;
        const float *x = p->x + r0 * p->ldx;
        for (size_t o0 = 0; o0 < p->out; o0 += DOTS) {
            const size_t n = p->out - o0 < DOTS ? p->out - o0 : DOTS;
            if (rows == 1) /* each block decoded in registers */
                VEC_DISPATCH(isa, quant_dots, p->type, x, w + o0 * p->row_bytes,
                             p->row_bytes, p->in, n, dots);
            else
                VEC_DISPATCH(isa, quant_rows_dots, p->type, x, p->ldx, rows,
                             w + o0 * p->row_bytes, p->row_bytes, p->in, n,
                             dots, DOTS);
            for (size_t r = 0; r < rows; r++) {
                float *y = p->y + (r0 + r) * p->ldy + o0;
                const float *d = dots + r * DOTS;
                for (size_t j = 0; j < n; j++)
                    y[j] = beta == 0.0f ? d[j] : y[j] + d[j];
            }
        }
    }
}

void quant_decode(enum vec_isa isa, quant_type type, const void *src,
                  size_t count, float *dst)
{
    VEC_DISPATCH(isa, quant_decode, type, src, count, dst);
}
