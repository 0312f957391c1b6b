/*
 * head_product.c - a head's scores and values (head_product.h).
 *
 * Both are y = alpha A B (+ y): A's rows read where they lie, B's rows of
 * sixteen-float vectors. The kernel holds a tile of R rows by NV vectors
 * of y in 24 registers (6 x 4, 8 x 3, 12 x 2 or 24 x 1), and for each
 * inner index loads NV vectors of B's row and broadcasts each of A's R
 * values into them. For the values, A is P and B is V as they are; for
 * the scores, A is Q and B is K transposed, a block of HEAD_KEY_COLS keys
 * at a time, into the caller's scratch; the values go by blocks of
 * HEAD_KEY_COLS keys, so that each block of V stays in cache while every
 * tile of rows reads it.
 */
#include "head_product.h"
#include "transpose16.h"
#include "vecmath.h"

#include <cblas.h>

#if HAVE_AVX2_BUILD
#include <immintrin.h>
#endif

/* Sums a kernel holds: its rows times its vectors. */
enum { TILE_SUMS = 24, MOST_VECTORS = 4 };

static bool kernels_run(void)
{
    return vec_isa_best() == VEC_ISA_AVX512;
}

size_t head_scores_scratch(size_t d)
{
    return kernels_run() ? d * HEAD_KEY_COLS : 0;
}

#if HAVE_AVX2_BUILD
/* y[r][c] = alpha * sum over t < inner of a[r][t] b[t][c] (+ y[r][c]
 * when add) for r < rows (at most R) and c < cols (at most 16 NV). Rows
 * past rows repeat the last one, and their sums are not stored; columns
 * past cols are neither read nor stored. Every loop but the one over t
 * is unrolled whole, so that the sums stay in registers. */
AVX512_TARGET ALWAYS_INLINE void
tile_body(int R, int NV, const float *a, size_t lda, size_t rows,
          const float *b, size_t ldb, size_t inner, size_t cols, float alpha,
          bool add, float *y, size_t ldy)
{
    const float *ar[TILE_SUMS];
    __mmask16 mask[MOST_VECTORS];
    __m512 acc[TILE_SUMS][MOST_VECTORS];
#pragma GCC unroll 24
    for (int r = 0; r < R; r++)
        ar[r] = a + ((size_t)r < rows ? (size_t)r : rows - 1) * lda;
#pragma GCC unroll 4
    for (int i = 0; i < NV; i++) {
        const size_t c0 = 16 * (size_t)i;
        mask[i] = cols >= c0 + 16 ? (__mmask16)0xffff
                  : cols > c0     ? (__mmask16)((1u << (cols - c0)) - 1)
                                  : (__mmask16)0;
    }
#pragma GCC unroll 24
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int i = 0; i < NV; i++)
            acc[r][i] = _mm512_setzero_ps();
    for (size_t t = 0; t < inner; t++) {
        __m512 bv[MOST_VECTORS];
#pragma GCC unroll 4
        for (int i = 0; i < NV; i++)
            bv[i] = _mm512_maskz_loadu_ps(mask[i], b + t * ldb + 16 * i);
#pragma GCC unroll 24
        for (int r = 0; r < R; r++) {
            const __m512 av = _mm512_set1_ps(ar[r][t]);
#pragma GCC unroll 4
            for (int i = 0; i < NV; i++)
                acc[r][i] = _mm512_fmadd_ps(bv[i], av, acc[r][i]);
        }
    }
    const __m512 scale = _mm512_set1_ps(alpha);
#pragma GCC unroll 24
    for (int r = 0; r < R; r++) {
        if ((size_t)r >= rows)
            break;
#pragma GCC unroll 4
        for (int i = 0; i < NV; i++) {
            float *at = y + (size_t)r * ldy + 16 * i;
            __m512 v = acc[r][i];
            if (alpha != 1.0f)
                v = _mm512_mul_ps(v, scale);
            if (add)
                v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask[i], at), v);
            _mm512_mask_storeu_ps(at, mask[i], v);
        }
    }
}

typedef void tile_fn(const float *a, size_t lda, size_t rows, const float *b,
                     size_t ldb, size_t inner, size_t cols, float alpha,
                     bool add, float *y, size_t ldy);

#define TILE(nv)                                                               \
    AVX512_TARGET static void tile_##nv(                                       \
        const float *a, size_t lda, size_t rows, const float *b, size_t ldb,   \
        size_t inner, size_t cols, float alpha, bool add, float *y,            \
        size_t ldy)                                                            \
    {                                                                          \
        tile_body(TILE_SUMS / nv, nv, a, lda, rows, b, ldb, inner, cols,       \
                  alpha, add, y, ldy);                                         \
    }
TILE(1)
TILE(2)
TILE(3)
TILE(4)
#undef TILE

/* kt[t][c] = k[c][t] for c < nc, t < d: sixteen keys by sixteen of
 * their values at a time, transposed in registers. */
AVX512_TARGET static void transpose_keys(const float *k, size_t ldk, size_t nc,
                                         size_t d, float *kt)
{
    for (size_t c0 = 0; c0 < nc; c0 += 16) {
        const size_t nr = nc - c0 < 16 ? nc - c0 : 16;
        const __mmask16 keys = (__mmask16)((1u << nr) - 1);
        for (size_t t0 = 0; t0 < d; t0 += 16) {
            const size_t nt = d - t0 < 16 ? d - t0 : 16;
            const __mmask16 values = (__mmask16)((1u << nt) - 1);
            __m512 a[16];
#pragma GCC unroll 16
            for (size_t i = 0; i < 16; i++)
                a[i] = i < nr ? _mm512_maskz_loadu_ps(values,
                                                      k + (c0 + i) * ldk + t0)
                              : _mm512_setzero_ps();
            transpose16(a);
#pragma GCC unroll 16
            for (size_t i = 0; i < 16; i++)
                if (i < nt)
                    _mm512_mask_storeu_ps(kt + (t0 + i) * nc + c0, keys, a[i]);
        }
    }
}

/* y = alpha a b (+ y when add): a [rows][lda] of inner, b [inner][ldb]
 * of cols, y [rows][ldy]; by tiles of MOST_VECTORS vectors of columns
 * (fewer at the end) and as many rows as the sums then allow. */
static void nn_product(const float *a, size_t lda, size_t rows, const float *b,
                       size_t ldb, size_t inner, size_t cols, float alpha,
                       bool add, float *y, size_t ldy)
{
    static tile_fn *const tiles[MOST_VECTORS] = {tile_1, tile_2, tile_3,
                                                 tile_4};
    for (size_t c0 = 0; c0 < cols; c0 += 16 * MOST_VECTORS) {
        const size_t nc =
            cols - c0 < 16 * MOST_VECTORS ? cols - c0 : 16 * MOST_VECTORS;
        const size_t nv = (nc + 15) / 16, most = TILE_SUMS / nv;
        for (size_t r0 = 0; r0 < rows; r0 += most)
            tiles[nv - 1](a + r0 * lda, lda,
                          rows - r0 < most ? rows - r0 : most, b + c0, ldb,
                          inner, nc, alpha, add, y + r0 * ldy + c0, ldy);
    }
}
#endif

void head_scores(const float *q, size_t ldq, const float *k, size_t ldk,
                 size_t rows, size_t nj, size_t d, float scale, float *s,
                 size_t lds, float *scratch)
{
#if HAVE_AVX2_BUILD
    if (scratch && kernels_run() && d > 0) {
        for (size_t j0 = 0; j0 < nj; j0 += HEAD_KEY_COLS) {
            const size_t nc = nj - j0 < HEAD_KEY_COLS ? nj - j0 : HEAD_KEY_COLS;
            transpose_keys(k + j0 * ldk, ldk, nc, d, scratch);
            nn_product(q, ldq, rows, scratch, nc, d, nc, scale, false, s + j0,
                       lds);
        }
        return;
    }
#endif
    (void)scratch;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)nj,
                (int)d, scale, q, (int)ldq, k, (int)ldk, 0.0f, s, (int)lds);
}

void head_values(const float *p, size_t ldp, const float *v, size_t ldv,
                 size_t rows, size_t nj, size_t d, float beta, float *o,
                 size_t ldo, bool kernel)
{
#if HAVE_AVX2_BUILD
    if (kernel && kernels_run() && (beta == 0.0f || beta == 1.0f)) {
        // by blocks of keys, so that the block of V every tile of rows
        // reads stays in cache however many keys there are
        for (size_t j0 = 0; j0 < nj || j0 == 0; j0 += HEAD_KEY_COLS) {
            const size_t nc = nj - j0 < HEAD_KEY_COLS ? nj - j0 : HEAD_KEY_COLS;
            nn_product(p + j0, ldp, rows, v + j0 * ldv, ldv, nc, d, 1.0f,
                       j0 > 0 || beta == 1.0f, o, ldo);
        }
        return;
    }
#endif
    (void)kernel;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)d,
                (int)nj, 1.0f, p, (int)ldp, v, (int)ldv, beta, o, (int)ldo);
}
