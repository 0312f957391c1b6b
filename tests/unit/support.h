/*
 * support.h - shared pieces of the unit tests: a plain-loop float64
 * attention to check the BLAS kernels against, and tolerant comparisons.
 */
#ifndef ATTN_TEST_SUPPORT_H
#define ATTN_TEST_SUPPORT_H

#include "attention.h"

#include <stddef.h>
#include <stdint.h>

/*
 * The forward pass of docs/math.md written as plain loops in double,
 * for a resolved config and explicit parameters (p may be NULL in basic
 * mode). Dropout uses the same keyed stream as the core. Arrays as in
 * struct attn_result; each out pointer may be NULL when not wanted.
 * fully_masked: [B][N].
 */
struct ref_out {
    double *weights, *weights_raw, *scores, *q, *k, *v, *heads_out, *output;
    uint8_t *fully_masked;
};
void ref_forward(const struct attn_config *cfg, const struct attn_params *p,
                 const float *x, const float *context, struct ref_out *out);

/* Allocate every array of *out for cfg; free with ref_out_free(). */
void ref_out_alloc(const struct attn_config *cfg, struct ref_out *out);
void ref_out_free(struct ref_out *out);

/* Largest |got[i] - want[i]| over n elements. */
double max_abs_diff(const float *got, const double *want, size_t n);

/* Largest |got - want| / (atol + rtol * |want|); <= 1 means within. */
double max_tol_ratio(const float *got, const double *want, size_t n,
                     double atol, double rtol);

/* n floats from a standard normal, deterministic in seed. */
void fill_normal(float *a, size_t n, uint64_t seed, float stddev);

#endif
