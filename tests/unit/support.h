/*
 * support.h - shared pieces of the unit tests: a plain-loop float64
 * attention to check the BLAS kernels against, and tolerant comparisons.
 */
#ifndef ATTN_TEST_SUPPORT_H
#define ATTN_TEST_SUPPORT_H

#include "attention.h"
#include "transformer.h"

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

/* BERT's block (post-norm LayerNorm, plain feed-forward, learned
 * positions with token types, an embedding norm, every bias) with act. */
struct xf_arch test_bert_arch(xf_act act);

/* A float32 matrix, and a matrix's values (which must be float32). */
struct xf_matrix test_f32(const float *data);
const float *test_values(struct xf_matrix w);

/* xf_plan() then xf_forward(), for tests that ask once. */
attn_status test_xf_forward(const struct xf_model *m, const struct xf_run *run,
                            const atomic_bool *cancel, struct xf_result *out,
                            struct attn_error *err);

/* xf_plan_bytes() and xf_plan_flops() of a run; SIZE_MAX and 0 when the
 * run cannot be planned. */
size_t test_xf_bytes(const struct xf_model *m, const struct xf_run *run);
double test_xf_flops(const struct xf_model *m, const struct xf_run *run);

/* n floats from a standard normal, deterministic in seed. */
void fill_normal(float *a, size_t n, uint64_t seed, float stddev);

#endif
