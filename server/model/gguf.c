/*
 * gguf.c - the GGUF container reader (gguf.h).
 *
 * One pass over the bytes with a cursor that refuses any read past the
 * end; each count is checked against the least the bytes left could hold
 * before anything is sized by it. Keys and names are copied, NUL-ended,
 * into one growing buffer (bounded by the file, since each byte of it is a
 * byte of the file); then the keys and names are sorted once to find
 * duplicates, and the tensors by offset to find overlaps.
 */
#include "gguf.h"
#include "fail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ggml's type traits (ggml.c, ggml-common.h): values and bytes per block. */
static const struct {
    const char *name;
    size_t block;
    size_t size;
} ggml_types[GGUF_GGML_TYPE_LIMIT] = {
    [GGUF_GGML_F32] = {"F32", 1, 4},
    [GGUF_GGML_F16] = {"F16", 1, 2},
    [GGUF_GGML_Q4_0] = {"Q4_0", 32, 18},
    [GGUF_GGML_Q4_1] = {"Q4_1", 32, 20},
    [GGUF_GGML_Q5_0] = {"Q5_0", 32, 22},
    [GGUF_GGML_Q5_1] = {"Q5_1", 32, 24},
    [GGUF_GGML_Q8_0] = {"Q8_0", 32, 34},
    [GGUF_GGML_Q8_1] = {"Q8_1", 32, 36},
    [GGUF_GGML_Q2_K] = {"Q2_K", 256, 84},
    [GGUF_GGML_Q3_K] = {"Q3_K", 256, 110},
    [GGUF_GGML_Q4_K] = {"Q4_K", 256, 144},
    [GGUF_GGML_Q5_K] = {"Q5_K", 256, 176},
    [GGUF_GGML_Q6_K] = {"Q6_K", 256, 210},
    [GGUF_GGML_Q8_K] = {"Q8_K", 256, 292},
    [GGUF_GGML_I8] = {"I8", 1, 1},
    [GGUF_GGML_I16] = {"I16", 1, 2},
    [GGUF_GGML_I32] = {"I32", 1, 4},
    [GGUF_GGML_I64] = {"I64", 1, 8},
    [GGUF_GGML_F64] = {"F64", 1, 8},
    [GGUF_GGML_BF16] = {"BF16", 1, 2},
};

/* Bytes of a fixed-size value; 0 for STRING and ARRAY. */
static const struct {
    const char *name;
    size_t size;
} value_types[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = {"UINT8", 1},     [GGUF_TYPE_INT8] = {"INT8", 1},
    [GGUF_TYPE_UINT16] = {"UINT16", 2},   [GGUF_TYPE_INT16] = {"INT16", 2},
    [GGUF_TYPE_UINT32] = {"UINT32", 4},   [GGUF_TYPE_INT32] = {"INT32", 4},
    [GGUF_TYPE_FLOAT32] = {"FLOAT32", 4}, [GGUF_TYPE_BOOL] = {"BOOL", 1},
    [GGUF_TYPE_STRING] = {"STRING", 0},   [GGUF_TYPE_ARRAY] = {"ARRAY", 0},
    [GGUF_TYPE_UINT64] = {"UINT64", 8},   [GGUF_TYPE_INT64] = {"INT64", 8},
    [GGUF_TYPE_FLOAT64] = {"FLOAT64", 8},
};

/* The least bytes a key-value and a tensor info can take: a string's
 * length and one byte, a type and a one-byte value; a name's length and
 * one byte, n_dims, one dim, a type and an offset. */
#define MIN_KV_BYTES (8 + 1 + 4 + 1)
#define MIN_TENSOR_BYTES (8 + 1 + 4 + 8 + 4 + 8)

const char *gguf_type_name(gguf_type t)
{
    return (unsigned)t < GGUF_TYPE_COUNT ? value_types[t].name : "?";
}

const char *gguf_ggml_type_name(uint32_t t)
{
    return t < GGUF_GGML_TYPE_LIMIT && ggml_types[t].name ? ggml_types[t].name
                                                          : "?";
}

size_t gguf_ggml_block_size(uint32_t t)
{
    return t < GGUF_GGML_TYPE_LIMIT ? ggml_types[t].block : 0;
}

size_t gguf_ggml_type_size(uint32_t t)
{
    return t < GGUF_GGML_TYPE_LIMIT ? ggml_types[t].size : 0;
}

/* A count for a message: 2^k for a large power of two, else decimal. */
static const char *count_text(char *buf, size_t n, uint64_t v)
{
    if (v >= ((uint64_t)1 << 20) && (v & (v - 1)) == 0)
        snprintf(buf, n, "2^%d", __builtin_ctzll(v));
    else
        snprintf(buf, n, "%llu", (unsigned long long)v);
    return buf;
}

/* ------------------------------------------------------------ the cursor */

struct reader {
    const uint8_t *p;
    size_t len;
    size_t at;
    char *err;
    size_t err_len;
};

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static bool take(struct reader *r, size_t n, const char *what, uint64_t *out)
{
    if (n > r->len - r->at)
        return model_fail(r->err, r->err_len,
                          "byte %zu: the file ends inside %s (%zu bytes)",
                          r->at, what, r->len);
    *out = le(r->p + r->at, (int)n);
    r->at += n;
    return true;
}

static bool u32(struct reader *r, const char *what, uint32_t *out)
{
    uint64_t v = 0;
    if (!take(r, 4, what, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

static bool u64(struct reader *r, const char *what, uint64_t *out)
{
    return take(r, 8, what, out);
}

/* A string in place: its length checked against the bytes left. */
static bool string(struct reader *r, const char **s, uint64_t *n)
{
    const size_t start = r->at;
    if (!u64(r, "a string's length", n))
        return false;
    if (*n > r->len - r->at) {
        char c[32];
        return model_fail(r->err, r->err_len,
                          "byte %zu: a string of %s bytes runs past the end "
                          "of the file (%zu bytes)",
                          start, count_text(c, sizeof c, *n), r->len);
    }
    *s = (const char *)r->p + r->at;
    r->at += (size_t)*n;
    return true;
}

static bool utf8_ok(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        const unsigned char c = s[i];
        size_t more;
        uint32_t cp;
        if (c == 0)
            return false;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            more = 1, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
            more = 2, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
            more = 3, cp = c & 0x07;
        else
            return false;
        if (more > n - i - 1)
            return false;
        for (size_t k = 1; k <= more; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if ((more == 2 && cp < 0x800) || (more == 3 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += more + 1;
    }
    return true;
}

/* ------------------------------------------------------- growing buffers */

/* Room for need elements of size each in *buf, doubling; every caller's
 * need is bounded by the file's length. */
static bool grow(void **buf, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *p = realloc(*buf, n * size);
    if (!p)
        return false;
    *buf = p;
    *cap = n;
    return true;
}

struct build {
    struct reader r;
    struct gguf_file *g;
    size_t names_len, names_cap; /* names holds offsets until the end */
    size_t strings_cap;
};

/* A key or tensor name, copied with its NUL; *at gets its offset in names. */
static bool keep_name(struct build *b, const char *s, size_t n, size_t *at)
{
    if (!grow((void **)&b->g->names, &b->names_cap, b->names_len + n + 1, 1))
        return model_fail(b->r.err, b->r.err_len,
                          "byte %zu: out of memory for names", b->r.at);
    memcpy(b->g->names + b->names_len, s, n);
    b->g->names[b->names_len + n] = '\0';
    *at = b->names_len;
    b->names_len += n + 1;
    return true;
}

/* ------------------------------------------------------------- metadata */

/* An array's elements: within the file, not nested, bools 0 or 1, each
 * string's length prefix listed. */
static bool read_array(struct build *b, struct gguf_kv *kv, const char *key)
{
    struct reader *r = &b->r;
    uint32_t t;
    const size_t at = r->at;
    if (!u32(r, "an array's type", &t))
        return false;
    if (t >= GGUF_TYPE_COUNT || t == GGUF_TYPE_ARRAY)
        return model_fail(r->err, r->err_len,
                          "byte %zu: key '%.64s' is an array of %s %u, which "
                          "attnd does not read",
                          at, key, t == GGUF_TYPE_ARRAY ? "arrays" : "type", t);
    kv->elem_type = (gguf_type)t;
    const size_t count_at = r->at;
    if (!u64(r, "an array's count", &kv->count))
        return false;
    const size_t each = t == GGUF_TYPE_STRING ? 8 : value_types[t].size;
    if (kv->count > (r->len - r->at) / each) {
        char c[32];
        return model_fail(r->err, r->err_len,
                          "byte %zu: key '%.64s' has an array of %s %s, more "
                          "than the file can hold",
                          count_at, key, count_text(c, sizeof c, kv->count),
                          value_types[t].name);
    }
    kv->value = r->p + r->at;
    if (t != GGUF_TYPE_STRING) {
        const size_t n = (size_t)kv->count * each;
        if (t == GGUF_TYPE_BOOL)
            for (size_t i = 0; i < n; i++)
                if (r->p[r->at + i] > 1)
                    return model_fail(r->err, r->err_len,
                                      "byte %zu: key '%.64s' element %zu is "
                                      "a BOOL of %u, not 0 or 1",
                                      r->at + i, key, i, r->p[r->at + i]);
        r->at += n;
        return true;
    }
    struct gguf_file *g = b->g;
    kv->first_string = g->n_strings;
    // each element takes at least its 8-byte length: the count is bounded
    if (!grow((void **)&g->strings, &b->strings_cap,
              g->n_strings + (size_t)kv->count, sizeof *g->strings))
        return model_fail(r->err, r->err_len,
                          "byte %zu: out of memory for key '%.64s'", r->at,
                          key);
    for (uint64_t i = 0; i < kv->count; i++) {
        g->strings[g->n_strings++] = r->p + r->at;
        const char *s;
        uint64_t n;
        if (!string(r, &s, &n))
            return false;
    }
    return true;
}

static bool read_value(struct build *b, struct gguf_kv *kv, const char *key)
{
    struct reader *r = &b->r;
    kv->offset = r->at;
    kv->value = r->p + r->at;
    if (kv->type == GGUF_TYPE_STRING)
        return string(r, &kv->str, &kv->str_len);
    if (kv->type == GGUF_TYPE_ARRAY)
        return read_array(b, kv, key);
    uint64_t v = 0;
    if (!take(r, value_types[kv->type].size, "a value", &v))
        return false;
    if (kv->type == GGUF_TYPE_BOOL && v > 1)
        return model_fail(r->err, r->err_len,
                          "byte %zu: key '%.64s' is a BOOL of %u, not 0 or 1",
                          kv->offset, key, (unsigned)v);
    return true;
}

static bool read_kv(struct build *b, struct gguf_kv *kv, size_t *key_at)
{
    struct reader *r = &b->r;
    const size_t at = r->at;
    const char *key;
    uint64_t n;
    if (!string(r, &key, &n))
        return false;
    if (n == 0 || n > GGUF_MAX_KEY)
        return model_fail(r->err, r->err_len,
                          "byte %zu: a key of %llu bytes (1 to %d allowed)", at,
                          (unsigned long long)n, GGUF_MAX_KEY);
    if (!utf8_ok((const unsigned char *)key, (size_t)n))
        return model_fail(r->err, r->err_len,
                          "byte %zu: a key that is not UTF-8 (or holds a NUL)",
                          at);
    if (!keep_name(b, key, (size_t)n, key_at))
        return false;
    const char *name = b->g->names + *key_at;
    const size_t type_at = r->at;
    uint32_t t;
    if (!u32(r, "a value's type", &t))
        return false;
    if (t >= GGUF_TYPE_COUNT)
        return model_fail(r->err, r->err_len,
                          "byte %zu: key '%.64s' has value type %u, which is "
                          "not a GGUF type",
                          type_at, name, t);
    kv->type = (gguf_type)t;
    return read_value(b, kv, name);
}

/* -------------------------------------------------------------- tensors */

static bool read_tensor(struct build *b, struct gguf_tensor *t, size_t *name_at)
{
    struct reader *r = &b->r;
    t->info_offset = r->at;
    const char *s;
    uint64_t n;
    if (!string(r, &s, &n))
        return false;
    if (n == 0 || n > GGUF_MAX_NAME)
        return model_fail(r->err, r->err_len,
                          "byte %zu: a tensor name of %llu bytes (1 to %d "
                          "allowed)",
                          t->info_offset, (unsigned long long)n, GGUF_MAX_NAME);
    if (!utf8_ok((const unsigned char *)s, (size_t)n))
        return model_fail(r->err, r->err_len,
                          "byte %zu: a tensor name that is not UTF-8 (or "
                          "holds a NUL)",
                          t->info_offset);
    if (!keep_name(b, s, (size_t)n, name_at))
        return false;
    const char *name = b->g->names + *name_at;
    size_t at = r->at;
    if (!u32(r, "a tensor's n_dims", &t->n_dims))
        return false;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return model_fail(r->err, r->err_len,
                          "byte %zu: tensor '%s' has %u dimensions (1 to %d "
                          "allowed)",
                          at, name, t->n_dims, GGUF_MAX_DIMS);
    t->elements = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
        t->dims[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        at = r->at;
        if (!u64(r, "a tensor's dimension", &t->dims[d]))
            return false;
        if (t->dims[d] == 0)
            return model_fail(r->err, r->err_len,
                              "byte %zu: tensor '%s' dimension %u is 0", at,
                              name, d);
        if (__builtin_mul_overflow(t->elements, t->dims[d], &t->elements))
            return model_fail(r->err, r->err_len,
                              "byte %zu: tensor '%s': the product of its "
                              "dimensions overflows",
                              at, name);
    }
    at = r->at;
    uint32_t type;
    if (!u32(r, "a tensor's type", &type))
        return false;
    if (gguf_ggml_block_size(type) == 0)
        return model_fail(r->err, r->err_len,
                          "byte %zu: tensor '%s' type %u is not a GGML type "
                          "attnd reads",
                          at, name, type);
    t->type = (gguf_ggml_type)type;
    const uint64_t block = ggml_types[type].block;
    if (t->dims[0] % block != 0)
        return model_fail(r->err, r->err_len,
                          "byte %zu: tensor '%s' rows of %llu values are not "
                          "whole blocks of %llu (%s)",
                          at, name, (unsigned long long)t->dims[0],
                          (unsigned long long)block, ggml_types[type].name);
    uint64_t bytes;
    if (__builtin_mul_overflow(t->elements / block,
                               (uint64_t)ggml_types[type].size, &bytes) ||
        bytes > r->len)
        return model_fail(r->err, r->err_len,
                          "byte %zu: tensor '%s' of %llu %s values is larger "
                          "than the file (%zu bytes)",
                          at, name, (unsigned long long)t->elements,
                          ggml_types[type].name, r->len);
    t->bytes = (size_t)bytes;
    return u64(r, "a tensor's offset", &t->offset);
}

/* ------------------------------------------------------------ the whole */

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first name given twice in names[n], or NULL (sorts names). */
static const char *twice(const char **names, size_t n)
{
    qsort(names, n, sizeof *names, by_name);
    for (size_t i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            return names[i];
    return NULL;
}

static int by_offset(const void *a, const void *b)
{
    const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
    const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

/* Keys and names once each; general.alignment. */
static bool check_keys(struct build *b, const void **scratch)
{
    struct gguf_file *g = b->g;
    char *err = b->r.err;
    const size_t err_len = b->r.err_len;
    const char **names = (const char **)scratch;
    for (size_t i = 0; i < g->n_kv; i++)
        names[i] = g->kvs[i].key;
    const char *dup = twice(names, (size_t)g->n_kv);
    // named at its second place (its key's length prefix, which is 12
    // bytes and the key before its value)
    for (size_t i = g->n_kv; dup && i-- > 0;)
        if (strcmp(g->kvs[i].key, dup) == 0)
            return model_fail(err, err_len,
                              "byte %zu: key '%.64s' appears twice",
                              g->kvs[i].offset - 4 - strlen(dup) - 8, dup);
    for (size_t i = 0; i < g->n_tensors; i++)
        names[i] = g->tensors[i].name;
    dup = twice(names, (size_t)g->n_tensors);
    for (size_t i = g->n_tensors; dup && i-- > 0;)
        if (strcmp(g->tensors[i].name, dup) == 0)
            return model_fail(err, err_len,
                              "byte %zu: tensor '%s' appears twice",
                              g->tensors[i].info_offset, dup);
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const struct gguf_kv *a = gguf_find(g, "general.alignment");
    if (a) {
        if (a->type != GGUF_TYPE_UINT32)
            return model_fail(err, err_len,
                              "byte %zu: general.alignment is a %s, not a "
                              "UINT32",
                              a->offset, gguf_type_name(a->type));
        const uint32_t v = (uint32_t)le(a->value, 4);
        if (v == 0 || (v & (v - 1)) != 0 || v > GGUF_MAX_ALIGNMENT)
            return model_fail(err, err_len,
                              "byte %zu: general.alignment %u is not a power "
                              "of two from 1 to %zu",
                              a->offset, v, GGUF_MAX_ALIGNMENT);
        g->alignment = v;
    }
    return true;
}

/* Each tensor aligned, within the file, apart from the others. */
static bool check_tensors(struct build *b, const uint8_t *data,
                          const void **scratch)
{
    struct gguf_file *g = b->g;
    char *err = b->r.err;
    const size_t err_len = b->r.err_len;
    const size_t len = b->r.len;
    const size_t info_end = b->r.at;
    const size_t pad = (g->alignment - info_end % g->alignment) % g->alignment;
    g->data_offset = info_end + pad;
    if (g->n_tensors == 0)
        return true; /* a vocabulary-only file need not pad its end */
    if (pad > len - info_end)
        return model_fail(err, err_len,
                          "byte %zu: the file ends before its data section "
                          "(at %zu, padded to %zu)",
                          info_end, info_end + pad, g->alignment);
    const size_t data_len = len - g->data_offset;
    for (size_t i = 0; i < g->n_tensors; i++) {
        struct gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment != 0)
            return model_fail(err, err_len,
                              "byte %zu: tensor '%s' offset %llu is not a "
                              "multiple of the alignment %zu",
                              t->info_offset, t->name,
                              (unsigned long long)t->offset, g->alignment);
        if (t->offset > data_len || t->bytes > data_len - t->offset)
            return model_fail(
                err, err_len,
                "byte %zu: tensor '%s' [offset %llu, %llu) runs "
                "past the end of the file (%zu bytes of data)",
                t->info_offset, t->name, (unsigned long long)t->offset,
                (unsigned long long)t->offset + t->bytes, data_len);
        t->data = data + g->data_offset + (size_t)t->offset;
    }
    const struct gguf_tensor **sorted = (const struct gguf_tensor **)scratch;
    for (size_t i = 0; i < g->n_tensors; i++)
        sorted[i] = &g->tensors[i];
    qsort(sorted, (size_t)g->n_tensors, sizeof *sorted, by_offset);
    for (size_t i = 1; i < g->n_tensors; i++) {
        const struct gguf_tensor *x = sorted[i - 1], *y = sorted[i];
        if (x->offset + x->bytes > y->offset)
            return model_fail(err, err_len,
                              "tensor '%s' [offset %llu, %llu) overlaps "
                              "tensor '%s' [offset %llu, %llu)",
                              x->name, (unsigned long long)x->offset,
                              (unsigned long long)(x->offset + x->bytes),
                              y->name, (unsigned long long)y->offset,
                              (unsigned long long)(y->offset + y->bytes));
    }
    return true;
}

static bool parse(struct build *b, const uint8_t *data)
{
    struct reader *r = &b->r;
    struct gguf_file *g = b->g;
    if (r->len < 4 || memcmp(data, "GGUF", 4) != 0)
        return model_fail(r->err, r->err_len,
                          "byte 0: not a GGUF file (no \"GGUF\" magic)");
    r->at = 4;
    if (!u32(r, "the version", &g->version))
        return false;
    if (g->version == 1)
        return model_fail(r->err, r->err_len,
                          "byte 4: GGUF version 1 (32-bit counts) is not "
                          "read; convert the file to version 3");
    if (g->version != 2 && g->version != 3)
        return model_fail(r->err, r->err_len,
                          "byte 4: GGUF version %u (2 and 3 are read)",
                          g->version);
    if (!u64(r, "the tensor count", &g->n_tensors))
        return false;
    if (!u64(r, "the metadata count", &g->n_kv))
        return false;
    char c[32];
    if (g->n_kv > (r->len - r->at) / MIN_KV_BYTES)
        return model_fail(r->err, r->err_len,
                          "byte 16: metadata count %s is more than the file "
                          "can hold",
                          count_text(c, sizeof c, g->n_kv));
    if (g->n_tensors > (r->len - r->at) / MIN_TENSOR_BYTES)
        return model_fail(r->err, r->err_len,
                          "byte 8: tensor count %s is more than the file can "
                          "hold",
                          count_text(c, sizeof c, g->n_tensors));
    // one scratch list of pointers serves both checks: sized for the larger
    const size_t most =
        (size_t)(g->n_kv > g->n_tensors ? g->n_kv : g->n_tensors);
    g->kvs = calloc(g->n_kv ? (size_t)g->n_kv : 1, sizeof *g->kvs);
    g->tensors =
        calloc(g->n_tensors ? (size_t)g->n_tensors : 1, sizeof *g->tensors);
    const void **scratch = malloc((most ? most : 1) * sizeof *scratch);
    // names hold offsets into g->names until it stops moving
    size_t *name_at =
        malloc((size_t)(g->n_kv + g->n_tensors + 1) * sizeof *name_at);
    bool ok = g->kvs && g->tensors && scratch && name_at;
    if (!ok)
        model_fail(r->err, r->err_len, "byte 24: out of memory");
    for (size_t i = 0; ok && i < g->n_kv; i++)
        ok = read_kv(b, &g->kvs[i], &name_at[i]);
    // keys are in place: general.alignment is needed before the tensors
    for (size_t i = 0; ok && i < g->n_tensors; i++)
        ok = read_tensor(b, &g->tensors[i], &name_at[g->n_kv + i]);
    if (ok) {
        for (size_t i = 0; i < g->n_kv; i++)
            g->kvs[i].key = g->names + name_at[i];
        for (size_t i = 0; i < g->n_tensors; i++)
            g->tensors[i].name = g->names + name_at[g->n_kv + i];
    }
    ok = ok && check_keys(b, scratch) && check_tensors(b, data, scratch);
    free(scratch);
    free(name_at);
    return ok;
}

bool gguf_parse(const uint8_t *data, size_t len, struct gguf_file *out,
                char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    struct build b = {
        .r = {.p = data, .len = len, .err = err, .err_len = err_len},
        .g = out,
    };
    if (parse(&b, data))
        return true;
    gguf_free(out);
    return false;
}

void gguf_free(struct gguf_file *g)
{
    if (!g)
        return;
    free(g->kvs);
    free(g->tensors);
    free(g->names);
    free(g->strings);
    memset(g, 0, sizeof *g);
}

/* -------------------------------------------------------------- lookups */

const struct gguf_kv *gguf_find(const struct gguf_file *g, const char *key)
{
    for (size_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kvs[i].key, key) == 0)
            return &g->kvs[i];
    return NULL;
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *g,
                                           const char *name)
{
    for (size_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0)
            return &g->tensors[i];
    return NULL;
}

/* The kv called key if it has type want, else NULL with a message. */
static const struct gguf_kv *typed(const struct gguf_file *g, const char *key,
                                   gguf_type want, char *err, size_t err_len)
{
    const struct gguf_kv *kv = gguf_find(g, key);
    if (!kv) {
        model_fail(err, err_len, "no key '%.64s' in the file", key);
        return NULL;
    }
    if (kv->type != want) {
        model_fail(err, err_len, "key '%.64s' is a %s, not a %s", key,
                   gguf_type_name(kv->type), gguf_type_name(want));
        return NULL;
    }
    return kv;
}

bool gguf_get_u32(const struct gguf_file *g, const char *key, uint32_t *out,
                  char *err, size_t err_len)
{
    const struct gguf_kv *kv = typed(g, key, GGUF_TYPE_UINT32, err, err_len);
    if (kv)
        *out = (uint32_t)le(kv->value, 4);
    return kv != NULL;
}

bool gguf_get_i32(const struct gguf_file *g, const char *key, int32_t *out,
                  char *err, size_t err_len)
{
    const struct gguf_kv *kv = typed(g, key, GGUF_TYPE_INT32, err, err_len);
    if (kv) {
        const uint32_t v = (uint32_t)le(kv->value, 4);
        memcpy(out, &v, sizeof *out);
    }
    return kv != NULL;
}

bool gguf_get_u64(const struct gguf_file *g, const char *key, uint64_t *out,
                  char *err, size_t err_len)
{
    const struct gguf_kv *kv = typed(g, key, GGUF_TYPE_UINT64, err, err_len);
    if (kv)
        *out = le(kv->value, 8);
    return kv != NULL;
}

bool gguf_get_f32(const struct gguf_file *g, const char *key, float *out,
                  char *err, size_t err_len)
{
    const struct gguf_kv *kv = typed(g, key, GGUF_TYPE_FLOAT32, err, err_len);
    if (kv) {
        const uint32_t v = (uint32_t)le(kv->value, 4);
        memcpy(out, &v, sizeof *out);
    }
    return kv != NULL;
}

bool gguf_get_bool(const struct gguf_file *g, const char *key, bool *out,
                   char *err, size_t err_len)
{
    const struct gguf_kv *kv = typed(g, key, GGUF_TYPE_BOOL, err, err_len);
    if (kv)
        *out = kv->value[0] != 0;
    return kv != NULL;
}

bool gguf_get_string(const struct gguf_file *g, const char *key,
                     const char **out, size_t *out_len, char *err,
                     size_t err_len)
{
    const struct gguf_kv *kv = typed(g, key, GGUF_TYPE_STRING, err, err_len);
    if (kv) {
        *out = kv->str;
        *out_len = (size_t)kv->str_len;
    }
    return kv != NULL;
}

bool gguf_get_array(const struct gguf_file *g, const char *key,
                    gguf_type *elem_type, uint64_t *count,
                    const uint8_t **elems, char *err, size_t err_len)
{
    const struct gguf_kv *kv = typed(g, key, GGUF_TYPE_ARRAY, err, err_len);
    if (kv) {
        *elem_type = kv->elem_type;
        *count = kv->count;
        *elems = kv->value;
    }
    return kv != NULL;
}

const char *gguf_array_string(const struct gguf_file *g,
                              const struct gguf_kv *kv, uint64_t i, size_t *len)
{
    if (kv->type != GGUF_TYPE_ARRAY || kv->elem_type != GGUF_TYPE_STRING ||
        i >= kv->count)
        return NULL;
    const uint8_t *p = g->strings[kv->first_string + (size_t)i];
    *len = (size_t)le(p, 8);
    return (const char *)p + 8;
}
