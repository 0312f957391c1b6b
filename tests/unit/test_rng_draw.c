/*
 * test_rng_draw.c - the vector draw of nn.Linear's uniform parameters
 * (rng_draw.c) gives, in every build this CPU runs (plain, AVX2,
 * AVX-512), the bits of the scalar formula of docs/math.md, "Random
 * streams", written here from attn_stream_draw() alone: for many seeds,
 * first draws and lengths around the vector widths, and bounds of odd
 * fan-ins; attn_params_draw_tensor() gives the same for tensors of odd
 * shapes, and fixed bits for a few (FNV-1a of the float32s, from the
 * scalar loop that drew them before the vector draw).
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

enum { MAX_N = 4133 };

/* The reference: nn.Linear's U(-bound, bound) as math.md writes it. */
static float reference(uint64_t key, uint64_t n, double bound)
{
    const double u = (double)(attn_stream_draw(key, n) >> 11) * 0x1.0p-53;
    return (float)((2.0 * u - 1.0) * bound);
}

static void assert_bits(const float *got, uint64_t key, uint64_t first,
                        size_t n, double bound)
{
    for (size_t i = 0; i < n; i++) {
        const float want = reference(key, first + i, bound);
        uint32_t a, b;
        memcpy(&a, &got[i], sizeof a);
        memcpy(&b, &want, sizeof b);
        if (a != b)
            fail_msg("key %#llx first %llu n %zu bound %.17g: value %zu is "
                     "%08x, want %08x",
                     (unsigned long long)key, (unsigned long long)first, n,
                     bound, i, a, b);
    }
}

static void test_builds_match_scalar(void **state)
{
    (void)state;
    float *out = malloc((MAX_N + 1) * sizeof *out);
    assert_non_null(out);
    const uint64_t keys[] = {
        0,          1,
        42,         0x9e3779b97f4a7c15ULL,
        UINT64_MAX, attn_stream_key(7, "q_proj.weight", 13)};
    /* a counter near 2^64 wraps in the lanes as in the scalar code */
    const uint64_t firsts[] = {0, 1, 3, 7, 1000003, UINT64_MAX - 5};
    const size_t sizes[] = {0,   1,   2,   3,    4,    5,    7,    8,  9,
                            15,  16,  17,  31,   33,   63,   64,   65, 100,
                            127, 129, 999, 1024, 4095, 4096, MAX_N};
    const size_t fan_ins[] = {1, 3, 7, 64, 768, 1000};
    for (int isa = VEC_ISA_PLAIN; isa <= VEC_ISA_AVX512; isa++) {
        if (!vec_isa_available((enum vec_isa)isa))
            continue;
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
            for (size_t f = 0; f < sizeof firsts / sizeof *firsts; f++)
                for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
                    const size_t n = sizes[s];
                    const double bound =
                        1.0 / sqrt((double)fan_ins[(k + f + s) % 6]);
                    out[n] = 12345.0f; /* nothing past the end written */
                    rng_uniform_floats_isa((enum vec_isa)isa, keys[k],
                                           firsts[f], n, bound, out);
                    assert_bits(out, keys[k], firsts[f], n, bound);
                    assert_true(out[n] == 12345.0f);
                }
    }
    free(out);
}

/* Many seeds, every build: every lane's arithmetic, including draws that
 * land on the edges (2u - 1 near -1, 0 and 1). */
static void test_many_seeds(void **state)
{
    (void)state;
    enum { N = 1031 };
    float out[N];
    for (int isa = VEC_ISA_PLAIN; isa <= VEC_ISA_AVX512; isa++) {
        if (!vec_isa_available((enum vec_isa)isa))
            continue;
        for (uint64_t seed = 0; seed < 400; seed++) {
            const uint64_t key = attn_stream_key(seed * 0x2545f4914f6cdd1dULL,
                                                 "v_proj.weight", 13);
            const double bound = 1.0 / sqrt((double)(seed % 97 + 1));
            rng_uniform_floats_isa((enum vec_isa)isa, key, seed % 5, N, bound,
                                   out);
            assert_bits(out, key, seed % 5, N, bound);
        }
    }
}

/* attn_params_draw_tensor() is the reference formula over the tensor's
 * stream, for shapes of every parity. */
static void test_tensor_matches_scalar(void **state)
{
    (void)state;
    const char *names[] = {"q_proj.weight", "k_proj.bias", "v_proj.weight",
                           "out_proj.weight", "bias_v"};
    const size_t shapes[][2] = {{1, 1},   {3, 5},   {9, 64},
                                {64, 64}, {13, 37}, {33, 1000}};
    float *out = malloc(33 * 1000 * sizeof *out);
    assert_non_null(out);
    for (uint64_t seed = 0; seed < 20; seed++)
        for (size_t t = 0; t < 5; t++)
            for (size_t s = 0; s < 6; s++) {
                const struct attn_param_tensor tensor = {.name = names[t],
                                                         .rows = shapes[s][0],
                                                         .cols = shapes[s][1],
                                                         .is_weight = true};
                attn_params_draw_tensor(seed * 1000003u, &tensor, out);
                const uint64_t key = attn_stream_key(seed * 1000003u, names[t],
                                                     strlen(names[t]));
                assert_bits(out, key, 0, shapes[s][0] * shapes[s][1],
                            1.0 / sqrt((double)shapes[s][1]));
            }
    free(out);
}

/* Fixed bits: what the scalar loop drew for these tensors. */
static void test_tensor_fixed_bits(void **state)
{
    (void)state;
    static const struct {
        uint64_t seed;
        const char *name;
        size_t rows, cols;
        uint64_t fnv;
    } cases[] = {
        {42, "q_proj.weight", 64, 64, 0xf0c63891d460d7e1ULL},
        {42, "k_proj.bias", 13, 37, 0xc51057674f20dfdcULL},
        {42, "out_proj.weight", 7, 1000, 0x8b48846795f12d1fULL},
        {0, "q_proj.weight", 64, 64, 0xca8114f3edd6a0cdULL},
        {0, "k_proj.bias", 13, 37, 0x7d449ee83e515dacULL},
        {0, "out_proj.weight", 7, 1000, 0xc047c4b7966b1318ULL},
        {UINT64_MAX, "q_proj.weight", 64, 64, 0x7ff8dc7891183c5cULL},
        {UINT64_MAX, "k_proj.bias", 13, 37, 0xd11e9bc2054791cfULL},
        {UINT64_MAX, "out_proj.weight", 7, 1000, 0xe9fa1134cb54b9b5ULL},
    };
    float *out = malloc(7 * 1000 * sizeof *out);
    assert_non_null(out);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const struct attn_param_tensor t = {.name = cases[c].name,
                                            .rows = cases[c].rows,
                                            .cols = cases[c].cols,
                                            .is_weight = true};
        const size_t n = cases[c].rows * cases[c].cols;
        attn_params_draw_tensor(cases[c].seed, &t, out);
        assert_int_equal(attn_fnv1a64(out, n * sizeof *out), cases[c].fnv);
    }
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builds_match_scalar),
        cmocka_unit_test(test_many_seeds),
        cmocka_unit_test(test_tensor_matches_scalar),
        cmocka_unit_test(test_tensor_fixed_bits),
    };
    return cmocka_run_group_tests_name("rng_draw", tests, NULL, NULL);
}
