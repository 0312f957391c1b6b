/*
 * test_rng_normal.c - the token embeddings' Box-Muller normals drawn
 * several pairs at once (rng_normal.c) are, in every build this CPU runs
 * (plain, AVX2, AVX-512), the bits of the scalar formula of docs/math.md,
 * "Random streams", written here from attn_stream_draw() and libm alone:
 * every width from 1 to 40 and some wide ones, for many keys, and over
 * four million values, among which hundreds whose double lies so near
 * the point halfway between two float32s that the vector builds compute
 * them again by the formula (counted here from the formula's own
 * doubles, so that the run is known to reach them). attn_embed_token()
 * gives the same.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "rng.h"
#include "vecmath.h"

/* Value j of the normals of key, dim wide, as math.md writes them; *at
 * the double before its rounding. */
static float reference(uint64_t key, size_t j, double *at)
{
    const size_t i = j / 2;
    const double u1 =
        1.0 - (double)(attn_stream_draw(key, 2 * i) >> 11) * 0x1.0p-53;
    const double u2 =
        (double)(attn_stream_draw(key, 2 * i + 1) >> 11) * 0x1.0p-53;
    const double r = sqrt(-2.0 * log(u1));
    const double theta = 6.283185307179586476925286766559 * u2;
    *at = j % 2 ? r * sin(theta) : r * cos(theta);
    return (float)*at;
}

/* Whether a double is within 4096 units in its last place of the point
 * halfway between two float32s (where the vector builds use the
 * formula). */
static bool near_halfway(double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    const uint64_t low = bits & ((1ULL << 29) - 1);
    return low + 4096 >= (1ULL << 28) && low <= (1ULL << 28) + 4096;
}

/* out [dim] from the build isa equals the reference; returns how many
 * of the values were near halfway. */
static size_t check(enum vec_isa isa, uint64_t key, size_t dim, float *out)
{
    memset(out, 0xff, (dim + 1) * sizeof *out);
    rng_normals_isa(isa, key, dim, out);
    size_t near = 0;
    for (size_t j = 0; j < dim; j++) {
        double at;
        const float want = reference(key, j, &at);
        near += near_halfway(at);
        uint32_t a, b;
        memcpy(&a, &out[j], sizeof a);
        memcpy(&b, &want, sizeof b);
        if (a != b)
            fail_msg("build %d key %#llx dim %zu: value %zu is %08x (%.9g), "
                     "want %08x (%.9g)",
                     (int)isa, (unsigned long long)key, dim, j, a,
                     (double)out[j], b, (double)want);
    }
    uint32_t past;
    memcpy(&past, &out[dim], sizeof past);
    assert_int_equal(past, 0xffffffffu); /* nothing written past dim */
    return near;
}

static void test_every_width(void **state)
{
    (void)state;
    static float out[1025];
    const uint64_t keys[] = {0,          1,
                             42,         0x9e3779b97f4a7c15ULL,
                             UINT64_MAX, attn_stream_key(7, "token:the", 9)};
    for (int isa = VEC_ISA_PLAIN; isa <= VEC_ISA_AVX512; isa++) {
        if (!vec_isa_available((enum vec_isa)isa))
            continue;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            for (size_t dim = 1; dim <= 40; dim++)
                check((enum vec_isa)isa, keys[k], dim, out);
            check((enum vec_isa)isa, keys[k], 768, out);
            check((enum vec_isa)isa, keys[k], 1023, out);
        }
    }
}

static void test_millions_with_the_near_ones(void **state)
{
    (void)state;
    enum { DIM = 4096, KEYS = 1024 };
    float *out = malloc((DIM + 1) * sizeof *out);
    assert_non_null(out);
    const enum vec_isa isa = vec_isa_best();
    size_t near = 0;
    for (uint64_t k = 0; k < KEYS; k++)
        near += check(isa, attn_stream_key(k, "token:w", 7), DIM, out);
    /* about one value in 65,000 of four million */
    assert_true(near > 20);
    free(out);
}

static void test_embed_token_is_the_normals(void **state)
{
    (void)state;
    float a[77], b[77];
    attn_embed_token("cat", 3, 11, 77, a);
    for (size_t j = 0; j < 77; j++) {
        double at;
        b[j] = reference(attn_stream_key(11, "token:cat", 9), j, &at);
    }
    assert_memory_equal(a, b, sizeof a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_width),
        cmocka_unit_test(test_millions_with_the_near_ones),
        cmocka_unit_test(test_embed_token_is_the_normals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
