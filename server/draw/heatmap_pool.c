/*
 * heatmap_pool.c - a long input's matrices as blocks: the weights of each
 * k x k block reduced to one (its largest, or its mean over the cells a
 * query may attend), the mask of blocks no query may attend, and a label
 * per block.
 */
#include "heatmap.h"

#include "errbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A block's label keeps this many bytes of its first token: the layout
 * cuts it shorter with an ellipsis anyway. */
#define POOL_LABEL_TOKEN 48u
/* "%zu-%zu " of two positions below 10^20 and the NUL */
#define POOL_LABEL_ROOM (POOL_LABEL_TOKEN + 48u)

size_t heatmap_pool_blocks(size_t n, size_t k)
{
    return k ? n / k + (n % k != 0) : n;
}

size_t heatmap_pool_size(size_t rows, size_t cols)
{
    const size_t side = rows > cols ? rows : cols;
    const size_t k = heatmap_pool_blocks(side, HEATMAP_POOL_BLOCKS);
    return k ? k : 1;
}

void heatmap_pool_values(const float *src, size_t ld, const size_t *row_at,
                         const size_t *col_at, size_t rows, size_t cols,
                         const unsigned char *not_allowed, size_t k,
                         enum heatmap_pool kind, float *out)
{
    const size_t pr = heatmap_pool_blocks(rows, k);
    const size_t pc = heatmap_pool_blocks(cols, k);
    const bool mean = kind == HEATMAP_POOL_MEAN;
    for (size_t bi = 0; bi < pr; bi++) {
        const size_t i0 = bi * k, i1 = i0 + k < rows ? i0 + k : rows;
        for (size_t bj = 0; bj < pc; bj++) {
            const size_t j0 = bj * k, j1 = j0 + k < cols ? j0 + k : cols;
            // max, or sum / count, over the block's allowed cells
            double acc = 0.0;
            size_t count = 0;
            for (size_t i = i0; i < i1; i++) {
                const float *row = src + (row_at ? row_at[i] : i) * ld;
                const unsigned char *na =
                    not_allowed ? not_allowed + i * cols : NULL;
                for (size_t j = j0; j < j1; j++) {
                    if (na && na[j])
                        continue;
                    const float v = row[col_at ? col_at[j] : j];
                    if (mean)
                        acc += (double)v;
                    else if (!count || (double)v > acc)
                        acc = (double)v;
                    count++;
                }
            }
            out[bi * pc + bj] =
                !count ? 0.0f : (float)(mean ? acc / (double)count : acc);
        }
    }
}

void heatmap_pool_mask(const unsigned char *not_allowed, size_t rows,
                       size_t cols, size_t k, unsigned char *out)
{
    const size_t pr = heatmap_pool_blocks(rows, k);
    const size_t pc = heatmap_pool_blocks(cols, k);
    for (size_t bi = 0; bi < pr; bi++)
        for (size_t bj = 0; bj < pc; bj++) {
            unsigned char all = 1;
            for (size_t i = bi * k; all && i < rows && i < bi * k + k; i++)
                for (size_t j = bj * k; all && j < cols && j < bj * k + k; j++)
                    all = not_allowed[i * cols + j] != 0;
            out[bi * pc + bj] = all;
        }
}

size_t heatmap_pool_labels_bytes(size_t n, size_t k)
{
    const size_t blocks = heatmap_pool_blocks(n, k);
    return blocks * (sizeof(char *) + POOL_LABEL_ROOM + 16);
}

/* The length of the longest prefix of s, at most max bytes, that ends on a
 * character boundary of UTF-8 (a continuation byte never starts the cut). */
static size_t pool_utf8_prefix(const char *s, size_t max)
{
    size_t n = strnlen(s, max + 1);
    if (n <= max)
        return n;
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

draw_status heatmap_pool_labels(const char *const *labels, size_t n, size_t k,
                                char ***out, char *err, size_t err_len)
{
    const size_t blocks = heatmap_pool_blocks(n, k);
    char **l = calloc(blocks ? blocks : 1, sizeof *l);
    if (!l)
        return errbuf_fail(err, err_len, DRAW_E_NOMEM,
                           "heatmap: out of memory for %zu block labels",
                           blocks);
    for (size_t b = 0; b < blocks; b++) {
        const size_t first = b * k,
                     last = first + k < n ? first + k - 1 : n - 1;
        l[b] = malloc(POOL_LABEL_ROOM);
        if (!l[b]) {
            heatmap_pool_labels_free(l, b);
            return errbuf_fail(err, err_len, DRAW_E_NOMEM,
                               "heatmap: out of memory for %zu block labels",
                               blocks);
        }
        const char *tok = labels && labels[first] ? labels[first] : "";
        const int cut = (int)pool_utf8_prefix(tok, POOL_LABEL_TOKEN);
        if (first == last)
            snprintf(l[b], POOL_LABEL_ROOM, "%zu%s%.*s", first,
                     labels ? " " : "", cut, tok);
        else
            snprintf(l[b], POOL_LABEL_ROOM, "%zu-%zu%s%.*s", first, last,
                     labels ? " " : "", cut, tok);
    }
    *out = l;
    return DRAW_OK;
}

void heatmap_pool_labels_free(char **labels, size_t n_blocks)
{
    if (!labels)
        return;
    for (size_t b = 0; b < n_blocks; b++)
        free(labels[b]);
    free(labels);
}
