/*
 * test_gguf.c - the GGUF container reader (server/model/gguf.h): files
 * written here byte by byte (a writer of its own, after the format's
 * specification) read back whole, in versions 2 and 3 and with a custom
 * general.alignment; every prefix of a good file refused; each malformed
 * kind refused with one line naming the byte offset it found.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "model/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------------- writer */

struct w {
    uint8_t b[16384];
    size_t n;
};

static void put(struct w *w, uint64_t v, int bytes)
{
    assert_true(w->n + (size_t)bytes <= sizeof w->b);
    for (int i = 0; i < bytes; i++)
        w->b[w->n++] = (uint8_t)(v >> (8 * i));
}

static void put_bytes(struct w *w, const void *p, size_t n)
{
    assert_true(w->n + n <= sizeof w->b);
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void put_str(struct w *w, const char *s)
{
    put(w, strlen(s), 8);
    put_bytes(w, s, strlen(s));
}

static void put_f32(struct w *w, float f)
{
    uint32_t v;
    memcpy(&v, &f, 4);
    put(w, v, 4);
}

static void put_f64(struct w *w, double f)
{
    uint64_t v;
    memcpy(&v, &f, 8);
    put(w, v, 8);
}

static void header(struct w *w, uint32_t version, uint64_t n_tensors,
                   uint64_t n_kv)
{
    w->n = 0;
    put_bytes(w, "GGUF", 4);
    put(w, version, 4);
    put(w, n_tensors, 8);
    put(w, n_kv, 8);
}

/* A key and its type; returns the key's offset. */
static size_t kv(struct w *w, const char *key, gguf_type t)
{
    const size_t at = w->n;
    put_str(w, key);
    put(w, t, 4);
    return at;
}

/* A tensor info; returns its offset. */
static size_t tensor(struct w *w, const char *name, uint32_t n_dims,
                     const uint64_t *dims, uint32_t type, uint64_t offset)
{
    const size_t at = w->n;
    put_str(w, name);
    put(w, n_dims, 4);
    for (uint32_t d = 0; d < n_dims; d++)
        put(w, dims[d], 8);
    put(w, type, 4);
    put(w, offset, 8);
    return at;
}

/* Zeros to the alignment, then data bytes of data (value i & 0xff). */
static void data(struct w *w, size_t align, size_t bytes)
{
    while (w->n % align)
        put(w, 0, 1);
    for (size_t i = 0; i < bytes; i++)
        put(w, i & 0xff, 1);
}

/* ------------------------------------------------------------ good file */

#define N_GOOD_KV 15

static size_t up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

/* Every value type, arrays of strings and numbers, three tensors of
 * different block sizes; alignment 0 leaves general.alignment out. */
static void good(struct w *w, uint32_t version, uint32_t alignment)
{
    header(w, version, 3, N_GOOD_KV + (alignment != 0));
    kv(w, "general.architecture", GGUF_TYPE_STRING);
    put_str(w, "llama");
    kv(w, "t.u8", GGUF_TYPE_UINT8);
    put(w, 200, 1);
    kv(w, "t.i8", GGUF_TYPE_INT8);
    put(w, (uint8_t)-5, 1);
    kv(w, "t.u16", GGUF_TYPE_UINT16);
    put(w, 60000, 2);
    kv(w, "t.i16", GGUF_TYPE_INT16);
    put(w, (uint16_t)-30000, 2);
    kv(w, "t.u32", GGUF_TYPE_UINT32);
    put(w, 4000000000u, 4);
    kv(w, "t.i32", GGUF_TYPE_INT32);
    put(w, (uint32_t)-2000000000, 4);
    kv(w, "t.f32", GGUF_TYPE_FLOAT32);
    put_f32(w, 0.5f);
    kv(w, "t.bool", GGUF_TYPE_BOOL);
    put(w, 1, 1);
    kv(w, "t.u64", GGUF_TYPE_UINT64);
    put(w, (uint64_t)1 << 40, 8);
    kv(w, "t.i64", GGUF_TYPE_INT64);
    put(w, (uint64_t) - ((int64_t)1 << 40), 8);
    kv(w, "t.f64", GGUF_TYPE_FLOAT64);
    put_f64(w, 0.25);
    kv(w, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY);
    put(w, GGUF_TYPE_STRING, 4);
    put(w, 3, 8);
    put_str(w, "a");
    put_str(w, "b\xc3\xa9");
    put_str(w, "");
    kv(w, "tokenizer.ggml.scores", GGUF_TYPE_ARRAY);
    put(w, GGUF_TYPE_FLOAT32, 4);
    put(w, 2, 8);
    put_f32(w, 1.5f);
    put_f32(w, -2.0f);
    kv(w, "t.empty", GGUF_TYPE_ARRAY);
    put(w, GGUF_TYPE_INT64, 4);
    put(w, 0, 8);
    const size_t a = alignment ? alignment : 32;
    if (alignment) {
        kv(w, "general.alignment", GGUF_TYPE_UINT32);
        put(w, alignment, 4);
    }
    const uint64_t d0[] = {64, 3}, d1[] = {256, 2}, d2[] = {32};
    const size_t o1 = up(768, a), o2 = up(o1 + 288, a);
    tensor(w, "token_embd.weight", 2, d0, GGUF_GGML_F32, 0);
    tensor(w, "blk.0.attn_q.weight", 2, d1, GGUF_GGML_Q4_K, o1);
    tensor(w, "blk.0.ffn_up.weight", 1, d2, GGUF_GGML_Q8_0, o2);
    data(w, a, o2 + 34);
}

static void check_good(uint32_t version, uint32_t alignment)
{
    struct w w;
    good(&w, version, alignment);
    struct gguf_file g;
    char err[300] = "";
    assert_true(gguf_parse(w.b, w.n, &g, err, sizeof err));
    const size_t a = alignment ? alignment : 32;
    assert_int_equal(g.version, version);
    assert_int_equal(g.n_kv, N_GOOD_KV + (alignment != 0));
    assert_int_equal(g.n_tensors, 3);
    assert_int_equal(g.alignment, a);
    assert_int_equal(g.data_offset % a, 0);

    const char *s;
    size_t n;
    assert_true(
        gguf_get_string(&g, "general.architecture", &s, &n, err, sizeof err));
    assert_int_equal(n, 5);
    assert_memory_equal(s, "llama", 5);
    const struct gguf_kv *k = gguf_find(&g, "t.u8");
    assert_non_null(k);
    assert_int_equal(k->type, GGUF_TYPE_UINT8);
    assert_int_equal(k->value[0], 200);
    assert_int_equal((int8_t)gguf_find(&g, "t.i8")->value[0], -5);
    assert_int_equal(gguf_find(&g, "t.u16")->type, GGUF_TYPE_UINT16);
    assert_int_equal(gguf_find(&g, "t.i16")->type, GGUF_TYPE_INT16);
    uint32_t u32;
    assert_true(gguf_get_u32(&g, "t.u32", &u32, err, sizeof err));
    assert_int_equal(u32, 4000000000u);
    int32_t i32;
    assert_true(gguf_get_i32(&g, "t.i32", &i32, err, sizeof err));
    assert_int_equal(i32, -2000000000);
    float f;
    assert_true(gguf_get_f32(&g, "t.f32", &f, err, sizeof err));
    assert_true(f == 0.5f);
    bool b = false;
    assert_true(gguf_get_bool(&g, "t.bool", &b, err, sizeof err));
    assert_true(b);
    uint64_t u64;
    assert_true(gguf_get_u64(&g, "t.u64", &u64, err, sizeof err));
    assert_true(u64 == (uint64_t)1 << 40);
    assert_int_equal(gguf_find(&g, "t.i64")->type, GGUF_TYPE_INT64);
    assert_int_equal(gguf_find(&g, "t.f64")->type, GGUF_TYPE_FLOAT64);

    gguf_type et;
    uint64_t count;
    const uint8_t *elems;
    assert_true(gguf_get_array(&g, "tokenizer.ggml.tokens", &et, &count, &elems,
                               err, sizeof err));
    assert_int_equal(et, GGUF_TYPE_STRING);
    assert_int_equal(count, 3);
    const struct gguf_kv *tok = gguf_find(&g, "tokenizer.ggml.tokens");
    s = gguf_array_string(&g, tok, 1, &n);
    assert_non_null(s);
    assert_int_equal(n, 3);
    assert_memory_equal(s, "b\xc3\xa9", 3);
    s = gguf_array_string(&g, tok, 2, &n);
    assert_non_null(s);
    assert_int_equal(n, 0);
    assert_null(gguf_array_string(&g, tok, 3, &n));
    assert_true(gguf_get_array(&g, "tokenizer.ggml.scores", &et, &count, &elems,
                               err, sizeof err));
    assert_int_equal(et, GGUF_TYPE_FLOAT32);
    assert_int_equal(count, 2);
    float scores[2];
    memcpy(scores, elems, sizeof scores); /* little-endian host */
    assert_true(scores[0] == 1.5f && scores[1] == -2.0f);
    assert_true(
        gguf_get_array(&g, "t.empty", &et, &count, &elems, err, sizeof err));
    assert_int_equal(count, 0);

    // the getters' refusals name the key and the type found
    assert_false(gguf_get_u32(&g, "t.f32", &u32, err, sizeof err));
    assert_string_equal(err, "key 't.f32' is a FLOAT32, not a UINT32");
    assert_false(gguf_get_string(&g, "nope", &s, &n, err, sizeof err));
    assert_string_equal(err, "no key 'nope' in the file");

    const struct gguf_tensor *t = gguf_find_tensor(&g, "token_embd.weight");
    assert_non_null(t);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->dims[0], 64);
    assert_int_equal(t->dims[1], 3);
    assert_int_equal(t->dims[2], 1);
    assert_int_equal(t->elements, 192);
    assert_int_equal(t->bytes, 768);
    assert_ptr_equal(t->data, w.b + g.data_offset);
    t = gguf_find_tensor(&g, "blk.0.attn_q.weight");
    assert_int_equal(t->type, GGUF_GGML_Q4_K);
    assert_int_equal(t->bytes, 2 * 144);
    assert_int_equal(t->offset, up(768, a));
    assert_int_equal(t->data[0], (uint8_t)t->offset);
    t = gguf_find_tensor(&g, "blk.0.ffn_up.weight");
    assert_int_equal(t->bytes, 34);
    assert_true(t->data + t->bytes == w.b + w.n);
    assert_null(gguf_find_tensor(&g, "nope"));
    gguf_free(&g);
    assert_null(g.kvs);
}

static void test_good_v3(void **state)
{
    (void)state;
    check_good(3, 0);
}

static void test_good_v2(void **state)
{
    (void)state;
    check_good(2, 0);
}

static void test_custom_alignment(void **state)
{
    (void)state;
    check_good(3, 64);
    check_good(3, 1);
    check_good(2, 4096);
}

static void test_type_traits(void **state)
{
    (void)state;
    static const struct {
        uint32_t t;
        size_t block, size;
    } want[] = {
        {0, 1, 4},      {1, 1, 2},      {2, 32, 18},    {3, 32, 20},
        {6, 32, 22},    {7, 32, 24},    {8, 32, 34},    {9, 32, 36},
        {10, 256, 84},  {11, 256, 110}, {12, 256, 144}, {13, 256, 176},
        {14, 256, 210}, {15, 256, 292}, {30, 1, 2},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_int_equal(gguf_ggml_block_size(want[i].t), want[i].block);
        assert_int_equal(gguf_ggml_type_size(want[i].t), want[i].size);
    }
    assert_int_equal(gguf_ggml_block_size(4), 0); /* Q4_2, removed */
    assert_int_equal(gguf_ggml_block_size(99), 0);
    assert_string_equal(gguf_ggml_type_name(12), "Q4_K");
}

/* ------------------------------------------------------------ refusals */

/* Refused with exactly the message want, one line, the result empty. */
static void refused(const struct w *w, const char *want)
{
    struct gguf_file g;
    char err[300] = "";
    if (gguf_parse(w->b, w->n, &g, err, sizeof err))
        fail_msg("accepted; wanted \"%s\"", want);
    assert_null(strchr(err, '\n'));
    assert_null(g.kvs);
    assert_null(g.tensors);
    assert_null(g.names);
    assert_null(g.strings);
    if (strcmp(err, want) != 0)
        fail_msg("got    \"%s\"\nwanted \"%s\"", err, want);
}

static void test_every_prefix_refused(void **state)
{
    (void)state;
    struct w w, cut;
    good(&w, 3, 0);
    for (size_t n = 0; n < w.n; n++) {
        memcpy(cut.b, w.b, n);
        cut.n = n;
        struct gguf_file g;
        char err[300] = "";
        assert_false(gguf_parse(cut.b, cut.n, &g, err, sizeof err));
        assert_true(strncmp(err, "byte ", 5) == 0);
        assert_null(strchr(err, '\n'));
    }
}

static void test_header_refusals(void **state)
{
    (void)state;
    struct w w;
    header(&w, 3, 0, 0);
    memcpy(w.b, "GGUG", 4);
    refused(&w, "byte 0: not a GGUF file (no \"GGUF\" magic)");
    header(&w, 1, 0, 0);
    refused(&w, "byte 4: GGUF version 1 (32-bit counts) is not read; "
                "convert the file to version 3");
    header(&w, 4, 0, 0);
    refused(&w, "byte 4: GGUF version 4 (2 and 3 are read)");
    header(&w, 3, 0, (uint64_t)1 << 60);
    refused(&w, "byte 16: metadata count 2^60 is more than the file can hold");
    header(&w, 3, (uint64_t)1 << 40, 0);
    refused(&w, "byte 8: tensor count 2^40 is more than the file can hold");
    header(&w, 3, 0, 1);
    w.n = 20;
    refused(&w, "byte 16: the file ends inside the metadata count (20 bytes)");
    // an empty file is a good one
    header(&w, 3, 0, 0);
    struct gguf_file g;
    char err[300];
    assert_true(gguf_parse(w.b, w.n, &g, err, sizeof err));
    gguf_free(&g);
}

static void test_metadata_refusals(void **state)
{
    (void)state;
    struct w w;
    char want[300];

    header(&w, 3, 0, 1);
    put(&w, (uint64_t)1 << 62, 8);
    put_bytes(&w, "abcdefghijklmn", 14);
    refused(&w, "byte 24: a string of 2^62 bytes runs past the end of the "
                "file (46 bytes)");

    header(&w, 3, 0, 1);
    kv(&w, "k", 13);
    put(&w, 0, 8);
    refused(&w, "byte 33: key 'k' has value type 13, which is not a GGUF "
                "type");

    header(&w, 3, 0, 1);
    kv(&w, "k\xff", GGUF_TYPE_UINT8);
    put(&w, 0, 1);
    refused(&w, "byte 24: a key that is not UTF-8 (or holds a NUL)");
    header(&w, 3, 0, 1);
    put(&w, 1, 8);
    put(&w, 0, 1);
    put(&w, GGUF_TYPE_UINT8, 4);
    put(&w, 0, 1);
    refused(&w, "byte 24: a key that is not UTF-8 (or holds a NUL)");

    char long_key[GGUF_MAX_KEY + 2];
    memset(long_key, 'a', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = '\0';
    header(&w, 3, 0, 1);
    kv(&w, long_key, GGUF_TYPE_UINT8);
    put(&w, 0, 1);
    refused(&w, "byte 24: a key of 257 bytes (1 to 256 allowed)");
    header(&w, 3, 0, 1);
    kv(&w, "", GGUF_TYPE_UINT8);
    put(&w, 0, 2); /* a value and a byte: as long as the least kv */
    refused(&w, "byte 24: a key of 0 bytes (1 to 256 allowed)");

    header(&w, 3, 0, 3);
    kv(&w, "a", GGUF_TYPE_UINT8);
    put(&w, 0, 1);
    kv(&w, "b", GGUF_TYPE_UINT8);
    put(&w, 0, 1);
    const size_t second = kv(&w, "a", GGUF_TYPE_UINT32);
    put(&w, 0, 4);
    snprintf(want, sizeof want, "byte %zu: key 'a' appears twice", second);
    refused(&w, want);

    header(&w, 3, 0, 1);
    kv(&w, "b", GGUF_TYPE_BOOL);
    put(&w, 2, 1);
    refused(&w, "byte 37: key 'b' is a BOOL of 2, not 0 or 1");

    header(&w, 3, 0, 1);
    kv(&w, "a", GGUF_TYPE_ARRAY);
    put(&w, GGUF_TYPE_ARRAY, 4);
    put(&w, 1, 8);
    refused(&w, "byte 37: key 'a' is an array of arrays 9, which attnd does "
                "not read");
    header(&w, 3, 0, 1);
    kv(&w, "a", GGUF_TYPE_ARRAY);
    put(&w, 77, 4);
    put(&w, 1, 8);
    refused(&w, "byte 37: key 'a' is an array of type 77, which attnd does "
                "not read");
    header(&w, 3, 0, 1);
    kv(&w, "a", GGUF_TYPE_ARRAY);
    put(&w, GGUF_TYPE_STRING, 4);
    put(&w, (uint64_t)1 << 58, 8);
    put(&w, 0, 8);
    refused(&w, "byte 41: key 'a' has an array of 2^58 STRING, more than the "
                "file can hold");
    header(&w, 3, 0, 1);
    kv(&w, "a", GGUF_TYPE_ARRAY);
    put(&w, GGUF_TYPE_UINT32, 4);
    put(&w, 3, 8);
    put(&w, 0, 8);
    refused(&w, "byte 41: key 'a' has an array of 3 UINT32, more than the "
                "file can hold");
    header(&w, 3, 0, 1);
    kv(&w, "a", GGUF_TYPE_ARRAY);
    put(&w, GGUF_TYPE_STRING, 4);
    put(&w, 2, 8);
    put_str(&w, "x");
    put(&w, 100, 8);
    refused(&w, "byte 58: a string of 100 bytes runs past the end of the file "
                "(66 bytes)");

    header(&w, 3, 0, 1);
    kv(&w, "general.alignment", GGUF_TYPE_UINT32);
    put(&w, 48, 4);
    refused(&w, "byte 53: general.alignment 48 is not a power of two from 1 "
                "to 65536");
    header(&w, 3, 0, 1);
    kv(&w, "general.alignment", GGUF_TYPE_UINT32);
    put(&w, 0, 4);
    refused(&w, "byte 53: general.alignment 0 is not a power of two from 1 "
                "to 65536");
    header(&w, 3, 0, 1);
    kv(&w, "general.alignment", GGUF_TYPE_UINT32);
    put(&w, 1u << 20, 4);
    refused(&w, "byte 53: general.alignment 1048576 is not a power of two "
                "from 1 to 65536");
    header(&w, 3, 0, 1);
    kv(&w, "general.alignment", GGUF_TYPE_UINT64);
    put(&w, 64, 8);
    refused(&w, "byte 53: general.alignment is a UINT64, not a UINT32");
}

/* Files of a kv-less header and one or two tensors, padded to 32. */
static void test_tensor_refusals(void **state)
{
    (void)state;
    struct w w;
    char want[300];
    const uint64_t d32[] = {32, 2}, d0[] = {32, 0}, d5[] = {1, 1, 1, 1, 1};
    const uint64_t huge[] = {(uint64_t)1 << 32, (uint64_t)1 << 32, 1u << 31};

    header(&w, 3, 1, 0);
    size_t at = tensor(&w, "blk.0.attn_q.weight", 2, d32, 99, 0);
    data(&w, 32, 256);
    snprintf(want, sizeof want,
             "byte %zu: tensor 'blk.0.attn_q.weight' type 99 is not a GGML "
             "type attnd reads",
             at + 8 + 19 + 4 + 16);
    refused(&w, want);

    header(&w, 3, 1, 0);
    at = tensor(&w, "x", 5, d5, GGUF_GGML_F32, 0);
    data(&w, 32, 64);
    snprintf(want, sizeof want,
             "byte %zu: tensor 'x' has 5 dimensions (1 to 4 allowed)", at + 9);
    refused(&w, want);

    header(&w, 3, 1, 0);
    at = tensor(&w, "x", 2, d0, GGUF_GGML_F32, 0);
    data(&w, 32, 64);
    snprintf(want, sizeof want, "byte %zu: tensor 'x' dimension 1 is 0",
             at + 9 + 4 + 8);
    refused(&w, want);

    header(&w, 3, 1, 0);
    at = tensor(&w, "x", 3, huge, GGUF_GGML_F32, 0);
    data(&w, 32, 64);
    snprintf(want, sizeof want,
             "byte %zu: tensor 'x': the product of its dimensions overflows",
             at + 9 + 4 + 8);
    refused(&w, want);

    header(&w, 3, 1, 0);
    at = tensor(&w, "x", 2, d32, GGUF_GGML_Q4_K, 0);
    data(&w, 32, 64);
    snprintf(want, sizeof want,
             "byte %zu: tensor 'x' rows of 32 values are not whole blocks "
             "of 256 (Q4_K)",
             at + 9 + 4 + 16);
    refused(&w, want);

    header(&w, 3, 1, 0);
    at = tensor(&w, "x", 2, d32, GGUF_GGML_F32, 16);
    data(&w, 32, 512);
    snprintf(want, sizeof want,
             "byte %zu: tensor 'x' offset 16 is not a multiple of the "
             "alignment 32",
             at);
    refused(&w, want);

    header(&w, 3, 1, 0);
    at = tensor(&w, "x", 2, d32, GGUF_GGML_F32, 0);
    data(&w, 32, 255);
    snprintf(want, sizeof want,
             "byte %zu: tensor 'x' [offset 0, 256) runs past the end of the "
             "file (255 bytes of data)",
             at);
    refused(&w, want);

    header(&w, 3, 1, 0);
    at = tensor(&w, "x", 2, d32, GGUF_GGML_F32, (uint64_t)1 << 60);
    data(&w, 32, 256);
    snprintf(want, sizeof want,
             "byte %zu: tensor 'x' [offset 1152921504606846976, "
             "1152921504606847232) runs past the end of the file (256 bytes "
             "of data)",
             at);
    refused(&w, want);

    header(&w, 3, 2, 0);
    tensor(&w, "x", 2, d32, GGUF_GGML_F32, 0);
    tensor(&w, "y", 2, d32, GGUF_GGML_F32, 128);
    data(&w, 32, 512);
    refused(&w, "tensor 'x' [offset 0, 256) overlaps tensor 'y' [offset 128, "
                "384)");

    header(&w, 3, 2, 0);
    tensor(&w, "x", 2, d32, GGUF_GGML_F32, 0);
    at = tensor(&w, "x", 2, d32, GGUF_GGML_F32, 256);
    data(&w, 32, 512);
    snprintf(want, sizeof want, "byte %zu: tensor 'x' appears twice", at);
    refused(&w, want);

    char long_name[GGUF_MAX_NAME + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    header(&w, 3, 1, 0);
    tensor(&w, long_name, 2, d32, GGUF_GGML_F32, 0);
    data(&w, 32, 256);
    refused(&w, "byte 24: a tensor name of 65 bytes (1 to 64 allowed)");
    long_name[GGUF_MAX_NAME] = '\0'; /* 64 bytes: allowed */
    header(&w, 3, 1, 0);
    tensor(&w, long_name, 2, d32, GGUF_GGML_F32, 0);
    data(&w, 32, 256);
    struct gguf_file g;
    char err[300];
    assert_true(gguf_parse(w.b, w.n, &g, err, sizeof err));
    gguf_free(&g);

    // the infos end but the padding before the data does not fit
    header(&w, 3, 1, 0);
    const uint64_t d4[] = {4};
    tensor(&w, "x", 1, d4, GGUF_GGML_F32, 0);
    const size_t end = w.n;
    snprintf(want, sizeof want,
             "byte %zu: the file ends before its data section (at %zu, "
             "padded to 32)",
             end, up(end, 32));
    refused(&w, want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_v3),
        cmocka_unit_test(test_good_v2),
        cmocka_unit_test(test_custom_alignment),
        cmocka_unit_test(test_type_traits),
        cmocka_unit_test(test_every_prefix_refused),
        cmocka_unit_test(test_header_refusals),
        cmocka_unit_test(test_metadata_refusals),
        cmocka_unit_test(test_tensor_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
