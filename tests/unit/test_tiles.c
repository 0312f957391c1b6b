/*
 * test_tiles.c - how a feed-forward product is cut into units
 * (transformer_units.h): the tiles cover every cell of the product once;
 * their rows go in whole blocks of the streamed product's rows, so that
 * no block is packed by two tiles of the same rows' columns once there
 * are blocks enough; there are enough tiles for a team of two or four;
 * and the cut depends on the sizes alone. And the intermediate rows'
 * stride, which spreads a block of rows over the cache's sets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "stream_product.h"
#include "transformer_units.h"

#include <stdlib.h>

static void check_cut(size_t n, size_t cols)
{
    unsigned char *seen = calloc(n * cols, 1);
    assert_non_null(seen);
    const size_t count = xf_tile_count(n, cols);
    const size_t blocks = n / STREAM_ROWS; /* whole ones */
    assert_true(count > 0);
    /* a team of two or four has units: three at least where there are
     * columns for them, four where they divide evenly */
    if (cols >= XF_FFN_TILES * XF_COL_ALIGN)
        assert_true(count >= XF_FFN_TILES - 1);
    if (cols % (XF_FFN_TILES * XF_COL_ALIGN) == 0 && cols > 0)
        assert_true(count >= XF_FFN_TILES);
    for (size_t u = 0; u < count; u++) {
        const struct xf_tile t = xf_tile_at(n, cols, u);
        const struct xf_tile again = xf_tile_at(n, cols, u);
        assert_memory_equal(&t, &again, sizeof t);
        assert_true(t.rows > 0 && t.width > 0);
        assert_true(t.r0 + t.rows <= n && t.c0 + t.width <= cols);
        /* whole blocks, but for the input's last; never a few rows
         * alone, which would take another way through the product */
        assert_int_equal(t.r0 % STREAM_ROWS, 0);
        assert_true(t.rows % STREAM_ROWS == 0 || t.r0 + t.rows == n);
        assert_true(t.rows >= STREAM_ROWS || t.rows == n);
        assert_int_equal(t.c0 % XF_COL_ALIGN, 0);
        /* blocks enough: each tile has all the columns of its rows */
        if (blocks >= XF_FFN_TILES) {
            assert_int_equal(t.c0, 0);
            assert_int_equal(t.width, cols);
        }
        for (size_t r = t.r0; r < t.r0 + t.rows; r++)
            for (size_t c = t.c0; c < t.c0 + t.width; c++)
                seen[r * cols + c]++;
    }
    for (size_t i = 0; i < n * cols; i++)
        assert_int_equal(seen[i], 1);
    free(seen);
}

static void test_every_cell_once(void **state)
{
    (void)state;
    const size_t rows[] = {1,   2,    63,   64,   65,   127,  128, 129,
                           150, 192,  255,  256,  257,  300,  511, 512,
                           513, 1000, 1024, 1100, 2048, 2049, 4096};
    const size_t cols[] = {1, 16, 40, 64, 65, 79, 100, 129, 768, 3072};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        for (size_t j = 0; j < sizeof cols / sizeof *cols; j++)
            check_cut(rows[i], cols[j]);
}

/* Row tiles of at most about XF_FFN_ROW_TILE rows once there are many:
 * a long input still gives a larger team units to share. */
static void test_long_inputs_keep_units(void **state)
{
    (void)state;
    assert_int_equal(xf_tile_count(512, 3072), XF_FFN_TILES);
    assert_true(xf_tile_count(4096, 768) >= 4096 / XF_FFN_ROW_TILE);
    for (size_t u = 0; u < xf_tile_count(4096, 768); u++)
        assert_true(xf_tile_at(4096, 768, u).rows <= XF_FFN_ROW_TILE);
    /* no rows: no tiles */
    assert_int_equal(xf_tile_count(0, 768), 0);
}

/* The intermediate rows' stride: the row in whole cache lines, an odd
 * number of them (then 64 rows apart by it meet 64 different sets of a
 * 64-set cache), never more than one line over the row. */
static void test_inter_stride(void **state)
{
    (void)state;
    const size_t widths[] = {1,    15,   16,   17,   32,   37,   48,
                             768,  1000, 3072, 5632, 8192, 11008, 14336};
    for (size_t i = 0; i < sizeof widths / sizeof *widths; i++) {
        const struct xf_model m = {.intermediate = widths[i]};
        const size_t ld = xf_inter_ld(&m), lines = ld / 16;
        assert_int_equal(ld % 16, 0);
        assert_true(ld >= widths[i] && ld < widths[i] + 32);
        assert_int_equal(lines % 2, 1);
        unsigned char set_used[64] = {0};
        for (size_t r = 0; r < 64; r++)
            set_used[(r * lines) % 64] = 1;
        for (size_t s = 0; s < 64; s++)
            assert_int_equal(set_used[s], 1);
    }
    /* bert-base's, and Llama-3.2-1B's */
    assert_int_equal(xf_inter_ld(&(struct xf_model){.intermediate = 3072}),
                     3088);
    assert_int_equal(xf_inter_ld(&(struct xf_model){.intermediate = 8192}),
                     8208);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_cell_once),
        cmocka_unit_test(test_long_inputs_keep_units),
        cmocka_unit_test(test_inter_stride),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
