/*
 * test_head_product.c - a head's scores and values (src/head_product.h):
 * every term in its place, against exact sums, on the kernels and on the
 * cblas way; the same bits however the rows and keys are cut; o not read
 * at beta 0 and added to at beta 1.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "head_product.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Sizes of one product, with the pad of every leading dimension. */
struct shape {
    size_t rows, nj, d, pad;
};

/* Small integers: every product and partial sum below is a float32
 * exactly, so each output must equal its double sum exactly, in any
 * order. A term dropped, added twice or taken from a neighbour shows. */
static float small(size_t i, unsigned salt)
{
    return (float)((int)((i * 7919u + salt * 104729u) % 15) - 7);
}

static const struct shape shapes[] = {
    {1, 1, 1, 0},     {5, 7, 3, 1},     {6, 16, 16, 0},  {7, 17, 32, 3},
    {12, 33, 32, 2},  {13, 64, 48, 0},  {24, 65, 64, 5}, {25, 128, 8, 1},
    {64, 128, 32, 0}, {70, 300, 40, 4}, {3, 513, 65, 2}, {31, 256, 80, 0},
};

/* head_scores() against exact sums, scale a power of two (exact too). */
static void check_scores(struct shape s, bool scratch_given)
{
    const size_t ldq = s.d + s.pad, ldk = s.d + 2 * s.pad,
                 lds = s.nj + 3 * s.pad;
    float *q = malloc(s.rows * ldq * sizeof *q);
    float *k = malloc(s.nj * ldk * sizeof *k);
    float *out = malloc(s.rows * lds * sizeof *out);
    const size_t n_scratch = head_scores_scratch(s.d);
    float *scratch =
        scratch_given && n_scratch ? malloc(n_scratch * sizeof *scratch) : NULL;
    assert_true(q && k && out);
    for (size_t i = 0; i < s.rows * ldq; i++)
        q[i] = small(i, 1);
    for (size_t i = 0; i < s.nj * ldk; i++)
        k[i] = small(i, 2);
    for (size_t i = 0; i < s.rows * lds; i++)
        out[i] = NAN; /* beta 0: never read */
    head_scores(q, ldq, k, ldk, s.rows, s.nj, s.d, 0.25f, out, lds, scratch);
    for (size_t r = 0; r < s.rows; r++) {
        for (size_t j = 0; j < s.nj; j++) {
            double sum = 0.0;
            for (size_t t = 0; t < s.d; t++)
                sum += (double)q[r * ldq + t] * k[j * ldk + t];
            if ((double)out[r * lds + j] != 0.25 * sum)
                fail_msg("scores %zu x %zu x %zu: [%zu][%zu] is %g, not %g",
                         s.rows, s.nj, s.d, r, j, (double)out[r * lds + j],
                         0.25 * sum);
        }
        for (size_t j = s.nj; j < lds; j++)
            assert_true(isnan(out[r * lds + j])); /* the pad untouched */
    }
    free(q);
    free(k);
    free(out);
    free(scratch);
}

/* head_values() against exact sums, at beta 0 and beta 1, through the
 * kernel or not. */
static void check_values(struct shape s, float beta, bool kernel)
{
    const size_t ldp = s.nj + s.pad, ldv = s.d + 2 * s.pad,
                 ldo = s.d + 3 * s.pad;
    float *p = malloc(s.rows * ldp * sizeof *p);
    float *v = malloc(s.nj * ldv * sizeof *v);
    float *o = malloc(s.rows * ldo * sizeof *o);
    assert_true(p && v && o);
    for (size_t i = 0; i < s.rows * ldp; i++)
        p[i] = small(i, 3);
    for (size_t i = 0; i < s.nj * ldv; i++)
        v[i] = small(i, 4);
    for (size_t i = 0; i < s.rows * ldo; i++)
        o[i] = beta == 0.0f ? NAN : small(i, 5);
    head_values(p, ldp, v, ldv, s.rows, s.nj, s.d, beta, o, ldo, kernel);
    for (size_t r = 0; r < s.rows; r++) {
        for (size_t c = 0; c < s.d; c++) {
            double sum = beta == 0.0f ? 0.0 : small(r * ldo + c, 5);
            for (size_t j = 0; j < s.nj; j++)
                sum += (double)p[r * ldp + j] * v[j * ldv + c];
            if ((double)o[r * ldo + c] != sum)
                fail_msg("values %zu x %zu x %zu beta %g: [%zu][%zu] is %g, "
                         "not %g",
                         s.rows, s.nj, s.d, (double)beta, r, c,
                         (double)o[r * ldo + c], sum);
        }
        for (size_t c = s.d; c < ldo; c++) {
            const float pad = o[r * ldo + c];
            assert_true(beta == 0.0f ? isnan(pad)
                                     : pad == small(r * ldo + c, 5));
        }
    }
    free(p);
    free(v);
    free(o);
}

static void test_scores_exact(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        check_scores(shapes[i], true);
        check_scores(shapes[i], false); /* the cblas way */
    }
}

static void test_values_exact(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        for (int kernel = 0; kernel < 2; kernel++) {
            check_values(shapes[i], 0.0f, kernel);
            check_values(shapes[i], 1.0f, kernel);
        }
    }
}

/* Values that round: on the kernels, a row's outputs are the same bits
 * computed with all rows and keys at once, alone, or (scores) a few keys
 * at a time. */
static void test_same_bits_however_cut(void **state)
{
    (void)state;
    enum { ROWS = 29, NJ = 300, D = 40 };
    if (!head_scores_scratch(D))
        return; /* cblas_sgemm's bits are its own */
    float *q = malloc(ROWS * D * sizeof *q), *k = malloc(NJ * D * sizeof *k);
    float *whole = malloc(ROWS * NJ * sizeof *whole);
    float *part = malloc(ROWS * NJ * sizeof *part);
    float *o = malloc(ROWS * D * sizeof *o),
          *o1 = malloc(ROWS * D * sizeof *o1);
    const size_t n_scratch = head_scores_scratch(D);
    float *scratch = n_scratch ? malloc(n_scratch * sizeof *scratch) : NULL;
    assert_true(q && k && whole && part && o && o1);
    for (size_t i = 0; i < ROWS * D; i++)
        q[i] = sinf((float)i * 0.37f);
    for (size_t i = 0; i < NJ * D; i++)
        k[i] = cosf((float)i * 0.11f);
    head_scores(q, D, k, D, ROWS, NJ, D, 0.158f, whole, NJ, scratch);
    for (size_t r = 0; r < ROWS; r++)
        for (size_t j0 = 0; j0 < NJ; j0 += 37) {
            const size_t nj = NJ - j0 < 37 ? NJ - j0 : 37;
            head_scores(q + r * D, D, k + j0 * D, D, 1, nj, D, 0.158f,
                        part + r * NJ + j0, NJ, scratch);
        }
    assert_memory_equal(whole, part, ROWS * NJ * sizeof *whole);
    /* P V with the scores as P and K as V */
    head_values(whole, NJ, k, D, ROWS, NJ, D, 0.0f, o, D, true);
    for (size_t r = 0; r < ROWS; r++)
        head_values(whole + r * NJ, NJ, k, D, 1, NJ, D, 0.0f, o1 + r * D, D,
                    true);
    assert_memory_equal(o, o1, ROWS * D * sizeof *o);
    free(q);
    free(k);
    free(whole);
    free(part);
    free(o);
    free(o1);
    free(scratch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scores_exact),
        cmocka_unit_test(test_values_exact),
        cmocka_unit_test(test_same_bits_however_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
