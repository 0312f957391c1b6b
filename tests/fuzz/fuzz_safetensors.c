/*
 * fuzz_safetensors.c - libFuzzer target for the safetensors header reader
 * (server/model/safetensors.h): any bytes as a whole file.
 *
 * Checks beyond the sanitizers: a refusal leaves the header empty and says
 * why in one line; an accepted header has every tensor inside the data,
 * its byte count equal to its dtype's size times its elements, no two
 * ranges overlapping, the data covered exactly, and st_find() finding each
 * name.
 */
#include "model/safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_safetensors: %s\n", what);
    abort();
}

static int by_offset(const void *a, const void *b)
{
    const struct st_tensor *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct st_header h;
    char err[300] = "";
    if (!st_header_parse(data, size, &h, err, sizeof err)) {
        if (!err[0] || strchr(err, '\n') || h.count || h.tensors || h.names)
            fail("a refusal without one line, or with a header left");
        return 0;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | data[i];
    const size_t start = 8 + (size_t)n;
    size_t covered = 0;
    for (size_t i = 0; i < h.count; i++) {
        const struct st_tensor *t = &h.tensors[i];
        if (t->offset < start || t->offset > size ||
            t->bytes > size - t->offset)
            fail("a tensor outside the data");
        if (t->elements * st_dtype_size(t->dtype) != t->bytes)
            fail("a byte count unlike dtype x elements");
        if (st_find(&h, t->name) == NULL ||
            strcmp(st_find(&h, t->name)->name, t->name) != 0)
            fail("st_find does not find a listed name");
        covered += t->bytes;
    }
    if (covered != size - start)
        fail("the tensors do not cover the data exactly");
    struct st_tensor *sorted = malloc((h.count + 1) * sizeof *sorted);
    if (!sorted)
        abort();
    /* the ranges that hold bytes: an empty tensor (a zero in its shape)
     * occupies none, wherever its offsets put it */
    size_t held = 0;
    for (size_t i = 0; i < h.count; i++)
        if (h.tensors[i].bytes)
            sorted[held++] = h.tensors[i];
    qsort(sorted, held, sizeof *sorted, by_offset);
    for (size_t i = 1; i < held; i++)
        if (sorted[i - 1].offset + sorted[i - 1].bytes > sorted[i].offset)
            fail("two ranges overlap");
    free(sorted);
    st_header_free(&h);
    return 0;
}
