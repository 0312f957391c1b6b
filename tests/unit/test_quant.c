/*
 * test_quant.c - quant_widen of every quantized type gives, bit for bit,
 * the float32s of ggml's own reference dequantizers (dequantize_row_* of
 * llama.cpp's ggml/src/ggml-quants.c) on blocks with edge values: all
 * bytes zero and 0xff, scales of 65504, the least and largest
 * subnormals, +-0, infinities and NaN, negative mins, random bytes, and
 * a run of three blocks. NaN is matched by NaN whatever its payload.
 *
 * The goldens in tests/golden/quant/ were written by
 * tests/unit/quant_goldens.c linked with ggml-quants.c of a llama.cpp
 * source tree; its header gives the commands to write them again.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "quant.h"
#include "widen.h"

static const char *golden_dir(void)
{
    const char *dir = getenv("ATTN_GOLDEN_DIR");
    return dir ? dir : "tests/golden";
}

static unsigned hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return (unsigned)(c - '0');
    assert_true(c >= 'a' && c <= 'f');
    return (unsigned)(c - 'a' + 10);
}

/* The bytes of a hex string; its length / 2 in *len. */
static unsigned char *hex_bytes(const char *hex, size_t *len)
{
    const size_t n = strlen(hex);
    assert_int_equal(n % 2, 0);
    unsigned char *b = malloc(n / 2 + 1);
    assert_non_null(b);
    for (size_t i = 0; i < n / 2; i++)
        b[i] = (unsigned char)(hex_digit(hex[2 * i]) << 4 |
                               hex_digit(hex[2 * i + 1]));
    *len = n / 2;
    return b;
}

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static int bits_are_nan(uint32_t u)
{
    return (u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0;
}

static void check_type(quant_type type)
{
    const char *name = quant_type_name((int)type);
    assert_non_null(name);
    char path[1024];
    snprintf(path, sizeof path, "%s/quant/%s.json", golden_dir(), name);
    cJSON *doc = test_read_json(path);

    const size_t values = quant_block_values((int)type);
    const size_t bytes = quant_block_bytes((int)type);
    const cJSON *id = cJSON_GetObjectItem(doc, "type");
    assert_true(cJSON_IsNumber(id));
    assert_int_equal(id->valueint, (int)type);
    assert_int_equal(cJSON_GetObjectItem(doc, "block_values")->valueint,
                     values);
    assert_int_equal(cJSON_GetObjectItem(doc, "block_bytes")->valueint, bytes);

    const cJSON *cases = cJSON_GetObjectItem(doc, "cases");
    assert_true(cJSON_IsArray(cases));
    assert_true(cJSON_GetArraySize(cases) > 10);
    const cJSON *c;
    cJSON_ArrayForEach(c, cases)
    {
        const char *what = cJSON_GetStringValue(cJSON_GetObjectItem(c, "what"));
        size_t n_bytes, n_bits;
        unsigned char *src = hex_bytes(
            cJSON_GetStringValue(cJSON_GetObjectItem(c, "bytes")), &n_bytes);
        unsigned char *want = hex_bytes(
            cJSON_GetStringValue(cJSON_GetObjectItem(c, "bits")), &n_bits);
        assert_int_equal(n_bytes % bytes, 0);
        const size_t count = n_bytes / bytes * values;
        assert_int_equal(n_bits, count * 4);

        float *got = malloc(count * sizeof *got);
        assert_non_null(got);
        quant_widen(src, type, count, got);
        for (size_t i = 0; i < count; i++) {
            const unsigned char *w = want + 4 * i; /* big-endian hex */
            const uint32_t wb = (uint32_t)w[0] << 24 | (uint32_t)w[1] << 16 |
                                (uint32_t)w[2] << 8 | w[3];
            const uint32_t gb = float_bits(got[i]);
            if (bits_are_nan(wb) && isnan(got[i]))
                continue;
            if (gb != wb)
                fail_msg("%s, %s: value %zu is %08x, ggml's %08x", name, what,
                         i, (unsigned)gb, (unsigned)wb);
        }
        free(got);
        free(want);
        free(src);
    }
    cJSON_Delete(doc);
}

static void test_q8_0(void **state)
{
    (void)state;
    check_type(QUANT_Q8_0);
}

static void test_q4_0(void **state)
{
    (void)state;
    check_type(QUANT_Q4_0);
}

static void test_q4_1(void **state)
{
    (void)state;
    check_type(QUANT_Q4_1);
}

static void test_q5_0(void **state)
{
    (void)state;
    check_type(QUANT_Q5_0);
}

static void test_q5_1(void **state)
{
    (void)state;
    check_type(QUANT_Q5_1);
}

static void test_q4_k(void **state)
{
    (void)state;
    check_type(QUANT_Q4_K);
}

static void test_q5_k(void **state)
{
    (void)state;
    check_type(QUANT_Q5_K);
}

static void test_q6_k(void **state)
{
    (void)state;
    check_type(QUANT_Q6_K);
}

/* The sizes are ggml's; numbers of other types have none. */
static void test_block_sizes(void **state)
{
    (void)state;
    static const struct {
        int type;
        size_t values, bytes;
    } want[] = {{2, 32, 18}, {3, 32, 20},    {6, 32, 22},    {7, 32, 24},
                {8, 32, 34}, {12, 256, 144}, {13, 256, 176}, {14, 256, 210}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_int_equal(quant_block_values(want[i].type), want[i].values);
        assert_int_equal(quant_block_bytes(want[i].type), want[i].bytes);
    }
    const int others[] = {-1, 0, 1, 9, 10, 11, 15, 30, 1000};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        assert_int_equal(quant_block_values(others[i]), 0);
        assert_int_equal(quant_block_bytes(others[i]), 0);
        assert_null(quant_type_name(others[i]));
    }
}

/* ---------------------------------------- products through a slice */

/* xorshift64* bytes */
static uint8_t next_byte(uint64_t *r)
{
    *r ^= *r >> 12;
    *r ^= *r << 25;
    *r ^= *r >> 27;
    return (uint8_t)((*r * 0x2545F4914F6CDD1Dull) >> 56);
}

/* widen_product() through columns [col0, col0 + in) of a quantized W:
 * slices that start and end inside a block (a head's columns of W_O),
 * whole-block ones (quant_product()), one row and several, beta 0 and 1,
 * against a float64 product over quant_widen()'s values. */
static void test_product_slices(void **state)
{
    (void)state;
    static const attn_dtype types[] = {ATTN_Q8_0, ATTN_Q4_K, ATTN_Q6_K};
    static const size_t shapes[][4] = {
        /* ldw, col0, in, out */
        {512, 0, 512, 7},   {512, 64, 64, 5},   {512, 200, 100, 3},
        {512, 256, 256, 9}, {768, 300, 400, 4}, {256, 31, 1, 2},
    };
    float *panel = malloc(WIDEN_PANEL_FLOATS * sizeof *panel);
    assert_non_null(panel);
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (size_t t = 0; t < 3; t++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            const attn_dtype dt = types[t];
            const size_t ldw = shapes[k][0], col0 = shapes[k][1],
                         in = shapes[k][2], out = shapes[k][3];
            const size_t row_bytes = attn_dtype_bytes(dt, ldw);
            unsigned char *w = malloc(out * row_bytes);
            float *wide = malloc(out * ldw * sizeof *wide);
            assert_non_null(w);
            assert_non_null(wide);
            for (size_t i = 0; i < out * row_bytes; i++)
                w[i] = next_byte(&r);
            // finite, modest scales: each block's fp16 d (and dmin) 1/16
            const size_t blk = attn_dtype_block(dt);
            const size_t bb = attn_dtype_bytes(dt, blk);
            for (size_t b = 0; b < out * ldw / blk; b++) {
                unsigned char *at = w + b * bb + (dt == ATTN_Q6_K ? bb - 2 : 0);
                at[0] = 0x00, at[1] = 0x2c;
                if (dt == ATTN_Q4_K)
                    at[2] = 0x00, at[3] = 0x2c;
            }
            attn_widen(w, dt, out * ldw, wide);
            for (size_t rows = 1; rows <= 3; rows += 2)
                for (int beta = 0; beta < 2; beta++) {
                    float x[3 * 768], y[3 * 16];
                    for (size_t i = 0; i < rows * in; i++)
                        x[i] = (float)(next_byte(&r) - 128) / 64.0f;
                    for (size_t i = 0; i < rows * out; i++)
                        y[i] = beta ? 0.5f : NAN;
                    const struct widen_product pr = {.x = x,
                                                     .ldx = in,
                                                     .rows = rows,
                                                     .in = in,
                                                     .w = w,
                                                     .dtype = dt,
                                                     .ldw = ldw,
                                                     .out = out,
                                                     .y = y,
                                                     .ldy = out,
                                                     .col0 = col0};
                    widen_product(&pr, (float)beta, panel);
                    for (size_t i = 0; i < rows; i++)
                        for (size_t o = 0; o < out; o++) {
                            double want = beta ? 0.5 : 0.0, mag = 0.0;
                            for (size_t c = 0; c < in; c++) {
                                const double v = (double)x[i * in + c] *
                                                 wide[o * ldw + col0 + c];
                                want += v;
                                mag += fabs(v);
                            }
                            const double got = y[i * out + o];
                            if (!(fabs(got - want) <= 1e-5 * (mag + 1.0)))
                                fail_msg("%s ldw %zu col0 %zu in %zu: row %zu "
                                         "output %zu is %.9g, want %.9g",
                                         attn_dtype_name(dt), ldw, col0, in, i,
                                         o, got, want);
                        }
                }
            free(w);
            free(wide);
        }
    free(panel);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q8_0),
        cmocka_unit_test(test_q4_0),
        cmocka_unit_test(test_q4_1),
        cmocka_unit_test(test_q5_0),
        cmocka_unit_test(test_q5_1),
        cmocka_unit_test(test_q4_k),
        cmocka_unit_test(test_q5_k),
        cmocka_unit_test(test_q6_k),
        cmocka_unit_test(test_block_sizes),
        cmocka_unit_test(test_product_slices),
    };
    return cmocka_run_group_tests_name("quant", tests, NULL, NULL);
}
