/*
 * fuzz_gguf.c - libFuzzer target for the GGUF container reader
 * (server/model/gguf.h): any bytes as a whole file.
 *
 * Checks beyond the sanitizers: a refusal leaves the result empty and says
 * why in one line naming a byte offset or a tensor; an accepted file has
 * every tensor aligned, inside the data section and apart from the others,
 * its bytes its type's block bytes times its blocks, every key and name
 * found by its lookup, and every string array's strings inside the file.
 */
#include "model/gguf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_gguf: %s\n", what);
    abort();
}

static int by_offset(const void *a, const void *b)
{
    const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
    const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gguf_file g;
    char err[300] = "";
    if (!gguf_parse(data, size, &g, err, sizeof err)) {
        if (!err[0] || strchr(err, '\n') || g.kvs || g.tensors || g.names ||
            g.strings)
            fail("a refusal without one line, or with a result left");
        if (strncmp(err, "byte ", 5) != 0 && !strstr(err, "tensor '"))
            fail("a refusal naming neither a byte offset nor a tensor");
        return 0;
    }
    for (size_t i = 0; i < g.n_kv; i++) {
        const struct gguf_kv *kv = &g.kvs[i];
        if (gguf_find(&g, kv->key) != kv)
            fail("gguf_find does not find a key");
        if (kv->type == GGUF_TYPE_ARRAY && kv->elem_type == GGUF_TYPE_STRING)
            for (uint64_t k = 0; k < kv->count; k++) {
                size_t n;
                const char *s = gguf_array_string(&g, kv, k, &n);
                if (!s || (const uint8_t *)s < data ||
                    (const uint8_t *)s > data + size ||
                    n > size - (size_t)((const uint8_t *)s - data))
                    fail("a string array's string outside the file");
            }
    }
    if (g.n_tensors == 0) {
        gguf_free(&g);
        return 0;
    }
    if (g.data_offset > size || g.data_offset % g.alignment)
        fail("a data section outside the file or unaligned");
    const struct gguf_tensor **sorted = malloc(g.n_tensors * sizeof *sorted);
    if (!sorted)
        abort();
    for (size_t i = 0; i < g.n_tensors; i++) {
        const struct gguf_tensor *t = &g.tensors[i];
        if (gguf_find_tensor(&g, t->name) != t)
            fail("gguf_find_tensor does not find a name");
        if (t->offset % g.alignment)
            fail("a tensor unaligned");
        if (t->data != data + g.data_offset + t->offset ||
            t->data > data + size || t->bytes > (size_t)(data + size - t->data))
            fail("a tensor outside the file");
        const size_t block = gguf_ggml_block_size(t->type);
        if (!block || t->dims[0] % block ||
            t->elements / block * gguf_ggml_type_size(t->type) != t->bytes)
            fail("a byte count unlike the type's blocks");
        sorted[i] = t;
    }
    qsort(sorted, g.n_tensors, sizeof *sorted, by_offset);
    for (size_t i = 1; i < g.n_tensors; i++)
        if (sorted[i - 1]->offset + sorted[i - 1]->bytes > sorted[i]->offset)
            fail("two tensors overlap");
    free(sorted);
    gguf_free(&g);
    return 0;
}
