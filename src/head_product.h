/*
 * head_product.h - the two products of one head's attention over a block
 * of keys: its scores S = scale Q K^T and its values O = beta O + P V.
 * At a head's sizes (tens of rows and keys, an inner size of d_k or of a
 * block of keys) OpenBLAS packs both operands on every call; on a CPU
 * with AVX-512 these go through one small kernel instead, which reads P,
 * V and Q where they lie and K transposed a block of keys at a time.
 * Elsewhere they go to cblas_sgemm. Internal to the core.
 *
 * Numerics, on the kernels: each output sums its products in the order
 * of the inner index, one fused multiply-add each, then (the scores) is
 * multiplied by scale; the values sum each block of HEAD_KEY_COLS keys
 * apart and add it in. An output's bits therefore depend on nothing but
 * its own row and column: not on the rows, keys or team a call is cut
 * into. Through cblas_sgemm they are OpenBLAS's.
 */
#ifndef ATTN_HEAD_PRODUCT_H
#define ATTN_HEAD_PRODUCT_H

#include <stdbool.h>
#include <stddef.h>

/* Keys head_scores() transposes at a time, and head_values() sums apart. */
enum { HEAD_KEY_COLS = 256 };

/* Floats of the scratch head_scores() needs for heads of d values: none
 * when the kernels do not run on this CPU. */
size_t head_scores_scratch(size_t d);

/* s[r][j] = scale * (q[r] . k[j]) for r < rows, j < nj. q: [rows][ldq],
 * k: [nj][ldk], each row d long; s: [rows][lds]. scratch:
 * head_scores_scratch(d) floats for the kernel; NULL: cblas_sgemm. */
void head_scores(const float *q, size_t ldq, const float *k, size_t ldk,
                 size_t rows, size_t nj, size_t d, float scale, float *s,
                 size_t lds, float *scratch);

/* o[r] = beta o[r] + sum over j < nj of p[r][j] v[j], for r < rows.
 * p: [rows][ldp]; v: [nj][ldv], each row d long; o: [rows][ldo]; beta 0
 * (o is not read) or 1. kernel: through the kernel where the CPU runs
 * it; false, cblas_sgemm. */
void head_values(const float *p, size_t ldp, const float *v, size_t ldv,
                 size_t rows, size_t nj, size_t d, float beta, float *o,
                 size_t ldo, bool kernel);

#endif
