/*
 * test_models.c - the server with loaded checkpoints (--model NAME=DIR,
 * ATTND_MODELS), against the real binary on a loopback port: answers over
 * HTTP against the float64 goldens of tests/models/ (tokens, type ids,
 * every layer's weights, one layer's, mean weights, hidden states,
 * rollout), GET /models, every refusal, the PNG views decoded with libpng,
 * start-up failures (exit 2 with one line), the per-model metrics, and on
 * a random checkpoint of bert-base's sizes written here at run time the
 * largest request the limits allow and the peak resident memory.
 *
 * Tolerances as test_bert.c (float32 against float64): weights, mean
 * weights and rollout within 2e-5 absolute; hidden states within 1e-4 +
 * 1e-4 * |reference|. The server writes float32 values in their shortest
 * round-trip form, so the JSON adds no error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"
#include "sparse_rows.h"
#include "decoded_png.h"

#include <cJSON.h>
#include <curl/curl.h>
#include <math.h>
#include <png.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WEIGHT_TOL 2e-5
#define HIDDEN_ATOL 1e-4
#define HIDDEN_RTOL 1e-4

static struct server srv;  /* f32, bf16_legacy and a one-type model */
static char tmp_root[256]; /* this run's checkpoints, removed at the end */
static char one_type_dir[300];

/* ------------------------------------------------------------ helpers */

static cJSON *parse_reply(const struct reply *r)
{
    cJSON *j = cJSON_ParseWithLength(r->body, r->len);
    if (!j)
        fail_msg("the answer is not JSON: %.200s", r->body);
    return j;
}

static const cJSON *get(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v)
        fail_msg("no \"%s\" in %.300s", key, cJSON_PrintUnformatted(o));
    return v;
}

/* A nested array of numbers, flattened in row-major order; its shape. */
static size_t flatten(const cJSON *v, double *out, size_t at, size_t *dims,
                      int depth, int *rank)
{
    if (cJSON_IsNumber(v)) {
        out[at] = v->valuedouble;
        if (*rank < depth)
            *rank = depth;
        return at + 1;
    }
    dims[depth] = (size_t)cJSON_GetArraySize(v);
    const cJSON *item;
    cJSON_ArrayForEach(item, v) at =
        flatten(item, out, at, dims, depth + 1, rank);
    return at;
}

/* Array key of the answer j against want[count] (a golden's flat array),
 * with its shape dims[rank]. */
static void check_array(const cJSON *j, const char *key, const double *want,
                        size_t count, const size_t *dims, int rank, bool hidden)
{
    const cJSON *v = get(j, key);
    double *got = calloc(count + 1, sizeof *got);
    size_t shape[8] = {0};
    int got_rank = 0;
    const size_t n = flatten(v, got, 0, shape, 0, &got_rank);
    assert_int_equal(n, count);
    assert_int_equal(got_rank, rank);
    for (int k = 0; k < rank; k++)
        if (shape[k] != dims[k])
            fail_msg("%s: dimension %d is %zu, expected %zu", key, k, shape[k],
                     dims[k]);
    double worst = 0;
    for (size_t i = 0; i < count; i++) {
        const double tol =
            hidden ? HIDDEN_ATOL + HIDDEN_RTOL * fabs(want[i]) : WEIGHT_TOL;
        const double r = fabs(got[i] - want[i]) / tol;
        if (!(r <= worst))
            worst = r;
    }
    if (!(worst <= 1.0))
        fail_msg("%s: %.3g of the tolerance", key, worst);
    free(got);
}

static double *numbers_of(const cJSON *arr, size_t *count)
{
    *count = (size_t)cJSON_GetArraySize(arr);
    double *v = malloc((*count + 1) * sizeof *v);
    size_t i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, arr) v[i++] = x->valuedouble;
    return v;
}

static cJSON *load_golden(const char *variant)
{
    char path[256];
    snprintf(path, sizeof path, "tests/models/golden/%s.json", variant);
    size_t len;
    char *text = read_file(path, &len);
    assert_non_null(text);
    cJSON *g = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(g);
    return g;
}

/* POST body; the status must be want; the JSON answer (the caller
 * deletes it). */
static cJSON *post_expect(const struct server *s, const char *body, long want)
{
    struct reply r;
    assert_true(post_json(s, "/attention", body, &r));
    if (r.status != want)
        fail_msg("%.200s: %ld, expected %ld: %.400s", body, r.status, want,
                 r.body);
    cJSON *j = parse_reply(&r);
    reply_free(&r);
    return j;
}

/* A 422 whose pointer is pointer and whose detail has each of words. */
static void refused(const struct server *s, const char *body,
                    const char *pointer, const char *const *words)
{
    cJSON *j = post_expect(s, body, 422);
    const char *got = get(j, "pointer")->valuestring;
    if (strcmp(got, pointer))
        fail_msg("%.200s: pointer %s, expected %s", body, got, pointer);
    const char *detail = get(j, "detail")->valuestring;
    for (size_t i = 0; words && words[i]; i++)
        if (!strstr(detail, words[i]))
            fail_msg("%.200s: the detail \"%s\" lacks \"%s\"", body, detail,
                     words[i]);
    cJSON_Delete(j);
}

/* ------------------------------------------- random checkpoints in C */

struct ckpt {
    size_t layers, hidden, heads, intermediate, vocab, positions, types;
};

/* xorshift64*: values in [-scale, scale) */
static float draw(uint64_t *s, float scale)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    const uint64_t x = *s * 0x2545F4914F6CDD1Dull;
    return scale * ((float)(x >> 40) / (float)(1u << 23) - 1.0f);
}

struct tensor {
    char name[96];
    size_t rows, cols; /* cols 0: a vector of rows */
    float base, scale; /* values base + [-scale, scale) */
};

static size_t tensor_list(const struct ckpt *c, struct tensor *t)
{
    const size_t H = c->hidden, I = c->intermediate;
    size_t n = 0;
#define ADD(r, cl, b, sc, ...)                                                 \
    do {                                                                       \
        snprintf(t[n].name, sizeof t[n].name, __VA_ARGS__);                    \
        t[n].rows = (r);                                                       \
        t[n].cols = (cl);                                                      \
        t[n].base = (b);                                                       \
        t[n].scale = (sc);                                                     \
        n++;                                                                   \
    } while (0)
    ADD(c->vocab, H, 0, 0.05f, "embeddings.word_embeddings.weight");
    ADD(c->positions, H, 0, 0.05f, "embeddings.position_embeddings.weight");
    ADD(c->types, H, 0, 0.05f, "embeddings.token_type_embeddings.weight");
    ADD(H, 0, 1, 0.05f, "embeddings.LayerNorm.weight");
    ADD(H, 0, 0, 0.05f, "embeddings.LayerNorm.bias");
    static const char *const attn[] = {
        "attention.self.query", "attention.self.key", "attention.self.value",
        "attention.output.dense"};
    for (size_t l = 0; l < c->layers; l++) {
        for (int k = 0; k < 4; k++) {
            ADD(H, H, 0, 0.06f, "encoder.layer.%zu.%s.weight", l, attn[k]);
            ADD(H, 0, 0, 0.02f, "encoder.layer.%zu.%s.bias", l, attn[k]);
        }
        ADD(H, 0, 1, 0.05f,
            "encoder.layer.%zu.attention.output.LayerNorm.weight", l);
        ADD(H, 0, 0, 0.05f, "encoder.layer.%zu.attention.output.LayerNorm.bias",
            l);
        ADD(I, H, 0, 0.04f, "encoder.layer.%zu.intermediate.dense.weight", l);
        ADD(I, 0, 0, 0.02f, "encoder.layer.%zu.intermediate.dense.bias", l);
        ADD(H, I, 0, 0.02f, "encoder.layer.%zu.output.dense.weight", l);
        ADD(H, 0, 0, 0.02f, "encoder.layer.%zu.output.dense.bias", l);
        ADD(H, 0, 1, 0.05f, "encoder.layer.%zu.output.LayerNorm.weight", l);
        ADD(H, 0, 0, 0.05f, "encoder.layer.%zu.output.LayerNorm.bias", l);
    }
#undef ADD
    return n;
}

/* The i-th word of a generated vocabulary: the special tokens, then
 * "w0", "w1", ... (a sentence of them is one wordpiece a word). */
static void vocab_word(size_t i, char *out, size_t len)
{
    static const char *const special[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                          "[MASK]"};
    if (i < 5)
        snprintf(out, len, "%s", special[i]);
    else
        snprintf(out, len, "w%zu", i - 5);
}

/* Write a random F32 checkpoint of sizes c into dir (created), in the
 * Hub's layout: config.json, vocab.txt, model.safetensors. Returns the
 * bytes of its tensors. */
static size_t write_checkpoint(const char *dir, const struct ckpt *c,
                               uint64_t seed)
{
    char path[512];
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "{\"architectures\":[\"BertModel\"],\"model_type\":\"bert\","
            "\"hidden_act\":\"gelu\",\"hidden_size\":%zu,"
            "\"num_hidden_layers\":%zu,\"num_attention_heads\":%zu,"
            "\"intermediate_size\":%zu,\"vocab_size\":%zu,"
            "\"max_position_embeddings\":%zu,\"type_vocab_size\":%zu,"
            "\"layer_norm_eps\":1e-12}\n",
            c->hidden, c->layers, c->heads, c->intermediate, c->vocab,
            c->positions, c->types);
    fclose(f);
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    for (size_t i = 0; i < c->vocab; i++) {
        char w[32];
        vocab_word(i, w, sizeof w);
        fprintf(f, "%s\n", w);
    }
    fclose(f);

    struct tensor *t = calloc(16 * c->layers + 8, sizeof *t);
    const size_t n = tensor_list(c, t);
    char *header = malloc(256 * n + 64);
    size_t hlen = 0, offset = 0;
    header[hlen++] = '{';
    for (size_t i = 0; i < n; i++) {
        const size_t count = t[i].rows * (t[i].cols ? t[i].cols : 1);
        char shape[64];
        if (t[i].cols)
            snprintf(shape, sizeof shape, "[%zu,%zu]", t[i].rows, t[i].cols);
        else
            snprintf(shape, sizeof shape, "[%zu]", t[i].rows);
        hlen += (size_t)snprintf(
            header + hlen, 256,
            "%s\"%s\":{\"dtype\":\"F32\",\"shape\":%s,\"data_offsets\":[%zu,"
            "%zu]}",
            i ? "," : "", t[i].name, shape, offset, offset + 4 * count);
        offset += 4 * count;
    }
    header[hlen++] = '}';
    while (hlen % 8) /* the data 8-aligned, as the format advises */
        header[hlen++] = ' ';
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    f = fopen(path, "wb");
    assert_non_null(f);
    const uint64_t le = hlen; /* little-endian hosts only, as attnd */
    fwrite(&le, 8, 1, f);
    fwrite(header, 1, hlen, f);
    enum { CHUNK = 1 << 16 };
    float *buf = malloc(CHUNK * sizeof *buf);
    uint64_t state = seed | 1;
    for (size_t i = 0; i < n; i++) {
        size_t left = t[i].rows * (t[i].cols ? t[i].cols : 1);
        while (left) {
            const size_t k = left < CHUNK ? left : CHUNK;
            for (size_t e = 0; e < k; e++)
                buf[e] = t[i].base + draw(&state, t[i].scale);
            assert_int_equal(fwrite(buf, sizeof *buf, k, f), k);
            left -= k;
        }
    }
    assert_int_equal(fclose(f), 0);
    free(buf);
    free(header);
    free(t);
    return offset;
}

/* A sentence of words w0 w1 ... of count wordpieces, [CLS] and [SEP]
 * included, as a JSON body with extra fields. */
static char *words_body(size_t wordpieces, const char *model, const char *extra)
{
    const size_t words = wordpieces - 2;
    const size_t cap = words * 8 + 512;
    char *b = malloc(cap);
    size_t n =
        (size_t)snprintf(b, cap, "{\"model\":\"%s\",\"sentence\":\"", model);
    for (size_t i = 0; i < words; i++)
        n += (size_t)snprintf(b + n, cap - n, "%sw%zu", i ? " " : "", i % 997);
    snprintf(b + n, cap - n, "\"%s%s}", extra ? "," : "", extra ? extra : "");
    return b;
}

static void remove_tree(const char *dir)
{
    static const char *const files[] = {"config.json", "vocab.txt",
                                        "model.safetensors",
                                        "tokenizer_config.json"};
    char path[1024];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* ------------------------------------------------------- setup */

static int setup(void **state)
{
    (void)state;
    snprintf(tmp_root, sizeof tmp_root, "/tmp/attnd-models-%d", (int)getpid());
    if (mkdir(tmp_root, 0700))
        return -1;
    snprintf(one_type_dir, sizeof one_type_dir, "%s/one_type", tmp_root);
    const struct ckpt one = {.layers = 1,
                             .hidden = 16,
                             .heads = 2,
                             .intermediate = 32,
                             .vocab = 64,
                             .positions = 16,
                             .types = 1};
    write_checkpoint(one_type_dir, &one, 7);
    char spec[400];
    snprintf(spec, sizeof spec, "one=%s", one_type_dir);
    const char *args[] = {"--model", "f32=tests/models/f32",
                          "--model", "bf16=tests/models/bf16_legacy",
                          "--model", spec,
                          NULL};
    return server_start(&srv, args) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    const int rc = server_stop(&srv, 10.0);
    remove_tree(one_type_dir);
    rmdir(tmp_root);
    return rc == 0 ? 0 : -1;
}

/* -------------------------------------------------- the goldens */

/* Every case of variant's golden through model name: tokens, type ids,
 * every layer's weights, mean weights, hidden states and rollout; then
 * each layer alone. */
static void check_golden(const char *variant, const char *name)
{
    cJSON *g = load_golden(variant);
    const size_t L = (size_t)get(g, "layers")->valuedouble;
    const size_t Hd = (size_t)get(g, "heads")->valuedouble;
    const size_t W = (size_t)get(g, "hidden")->valuedouble;
    const cJSON *c;
    size_t cases = 0;
    cJSON_ArrayForEach(c, get(g, "cases"))
    {
        cJSON *body = cJSON_CreateObject();
        cJSON_AddStringToObject(body, "model", name);
        cJSON_AddItemToObject(body, "sentence",
                              cJSON_Duplicate(get(c, "sentence"), 1));
        const cJSON *b = get(c, "sentence_b");
        if (!cJSON_IsNull(b))
            cJSON_AddItemToObject(body, "sentence_b", cJSON_Duplicate(b, 1));
        cJSON *ret = cJSON_CreateArray();
        const char *names[] = {"weights", "mean_weights", "hidden_states",
                               "rollout"};
        for (int k = 0; k < 4; k++)
            cJSON_AddItemToArray(ret, cJSON_CreateString(names[k]));
        cJSON_AddItemToObject(body, "return", ret);
        char *text = cJSON_PrintUnformatted(body);
        cJSON *j = post_expect(&srv, text, 200);

        /* the wordpieces and their types */
        assert_string_equal(get(j, "model")->valuestring, name);
        const cJSON *want_tokens = get(c, "tokens");
        const size_t n = (size_t)cJSON_GetArraySize(want_tokens);
        assert_true(cJSON_Compare(get(j, "tokens"), want_tokens, true));
        assert_true(
            cJSON_Compare(get(j, "token_type_ids"), get(c, "type_ids"), true));
        const cJSON *cfg = get(j, "config");
        assert_int_equal((size_t)get(cfg, "layers")->valuedouble, L);
        assert_int_equal((size_t)get(cfg, "heads")->valuedouble, Hd);
        assert_int_equal((size_t)get(cfg, "hidden")->valuedouble, W);
        assert_int_equal((size_t)get(cfg, "tokens")->valuedouble, n);
        assert_string_equal(get(cfg, "layer")->valuestring, "all");

        size_t count;
        double *att = numbers_of(get(c, "attentions"), &count);
        const size_t dims4[4] = {L, Hd, n, n};
        check_array(j, "weights", att, count, dims4, 4, false);
        /* the mean over heads, of the golden's weights */
        double *mean = calloc(L * n * n, sizeof *mean);
        for (size_t l = 0; l < L; l++)
            for (size_t h = 0; h < Hd; h++)
                for (size_t e = 0; e < n * n; e++)
                    mean[l * n * n + e] +=
                        att[(l * Hd + h) * n * n + e] / (double)Hd;
        const size_t dims3[3] = {L, n, n};
        check_array(j, "mean_weights", mean, L * n * n, dims3, 3, false);
        size_t hcount;
        double *hs = numbers_of(get(c, "hidden_states"), &hcount);
        const size_t hdims[3] = {L + 1, n, W};
        check_array(j, "hidden_states", hs, hcount, hdims, 3, true);
        size_t rcount;
        double *roll = numbers_of(get(c, "rollout"), &rcount);
        const size_t rdims[2] = {n, n};
        check_array(j, "rollout", roll, rcount, rdims, 2, false);
        cJSON_Delete(j);

        /* each layer alone: [heads][N][N] and [N][N] */
        for (size_t l = 0; l < L; l++) {
            cJSON_DeleteItemFromObject(body, "layer");
            cJSON_AddNumberToObject(body, "layer", (double)l);
            cJSON_DeleteItemFromObject(body, "return");
            cJSON *r2 = cJSON_AddArrayToObject(body, "return");
            cJSON_AddItemToArray(r2, cJSON_CreateString("weights"));
            cJSON_AddItemToArray(r2, cJSON_CreateString("mean_weights"));
            char *one = cJSON_PrintUnformatted(body);
            cJSON *k = post_expect(&srv, one, 200);
            const size_t d3[3] = {Hd, n, n};
            check_array(k, "weights", att + l * Hd * n * n, Hd * n * n, d3, 3,
                        false);
            check_array(k, "mean_weights", mean + l * n * n, n * n, d3 + 1, 2,
                        false);
            assert_int_equal(
                (size_t)get(get(k, "config"), "layer")->valuedouble, l);
            assert_null(cJSON_GetObjectItem(k, "hidden_states"));
            cJSON_Delete(k);
            free(one);
        }
        free(att);
        free(mean);
        free(hs);
        free(roll);
        free(text);
        cJSON_Delete(body);
        cases++;
    }
    assert_true(cases >= 3);
    cJSON_Delete(g);
}

static void test_golden_f32(void **state)
{
    (void)state;
    check_golden("f32", "f32");
}

static void test_golden_bf16_legacy(void **state)
{
    (void)state;
    check_golden("bf16_legacy", "bf16");
}

/* The default return is the weights of every layer; "return": [] the
 * tokens and config alone; the GET form gives the same numbers. */
/* ---------------------------------------------------------- decoders */

/* Whether the golden's layers (gc's layer_windows, 0 for a global layer)
 * have windows that differ. */
static bool windows_differ(const cJSON *gc)
{
    const cJSON *windows = cJSON_GetObjectItem(gc, "layer_windows");
    const cJSON *w;
    cJSON_ArrayForEach(w, windows)
    {
        if (w->valuedouble != cJSON_GetArrayItem(windows, 0)->valuedouble)
            return true;
    }
    return false;
}

/* The config echo's layer_windows: each layer's window as the golden
 * has it (null for a global layer) when the layers' windows differ, and
 * absent when they do not. */
static void check_layer_windows(const cJSON *cfg, const cJSON *gc)
{
    const cJSON *echoed = cJSON_GetObjectItem(cfg, "layer_windows");
    if (!windows_differ(gc)) {
        assert_null(echoed);
        return;
    }
    const cJSON *windows = get(gc, "layer_windows");
    assert_non_null(echoed);
    assert_int_equal(cJSON_GetArraySize(echoed), cJSON_GetArraySize(windows));
    for (int l = 0; l < cJSON_GetArraySize(windows); l++) {
        const double want = cJSON_GetArrayItem(windows, l)->valuedouble;
        const cJSON *got = cJSON_GetArrayItem(echoed, l);
        if (want == 0.0 ? !cJSON_IsNull(got) : got->valuedouble != want)
            fail_msg("layer %d: layer_windows gives %s, the golden %g", l,
                     cJSON_PrintUnformatted(got), want);
    }
}

/* A decoder's golden through the server s, as name: tokens, ids and the
 * tokens the tokenizer added; every layer's weights (exactly 0 where a
 * query may not see), hidden states (the last after the final norm) and
 * rollout; the window the config echoes. */
static void check_decoder_golden(const struct server *s, const char *variant,
                                 const char *name)
{
    cJSON *g = load_golden(variant);
    const cJSON *gc = get(g, "config");
    const size_t L = (size_t)get(g, "layers")->valuedouble;
    const size_t Hd = (size_t)get(g, "heads")->valuedouble;
    const size_t W = (size_t)get(g, "hidden")->valuedouble;
    const cJSON *win = get(gc, "sliding_window");
    const size_t window = cJSON_IsNumber(win) ? (size_t)win->valuedouble : 0;
    const cJSON *c;
    size_t cases = 0;
    cJSON_ArrayForEach(c, get(g, "cases"))
    {
        cJSON *body = cJSON_CreateObject();
        cJSON_AddStringToObject(body, "model", name);
        cJSON_AddItemToObject(body, "sentence",
                              cJSON_Duplicate(get(c, "sentence"), 1));
        cJSON *ret = cJSON_AddArrayToObject(body, "return");
        const char *names[] = {"weights", "hidden_states", "rollout"};
        for (int k = 0; k < 3; k++)
            cJSON_AddItemToArray(ret, cJSON_CreateString(names[k]));
        char *text = cJSON_PrintUnformatted(body);
        cJSON *j = post_expect(s, text, 200);
        const size_t n = (size_t)cJSON_GetArraySize(get(c, "ids"));
        assert_true(cJSON_Compare(get(j, "tokens"), get(c, "tokens"), true));
        assert_true(cJSON_Compare(get(j, "token_ids"), get(c, "ids"), true));
        assert_true(cJSON_Compare(get(j, "added"), get(c, "added"), true));
        assert_null(cJSON_GetObjectItem(j, "token_type_ids"));
        const cJSON *cfg = get(j, "config");
        assert_string_equal(get(cfg, "family")->valuestring,
                            get(gc, "model_type")->valuestring);
        assert_int_equal((size_t)get(cfg, "kv_heads")->valuedouble,
                         (size_t)get(gc, "kv_heads")->valuedouble);
        assert_true(window ? (size_t)get(cfg, "sliding_window")->valuedouble ==
                                 window
                           : cJSON_IsNull(get(cfg, "sliding_window")));
        check_layer_windows(cfg, gc);
        size_t count;
        double *att = numbers_of(get(c, "attentions"), &count);
        const size_t dims4[4] = {L, Hd, n, n};
        check_array(j, "weights", att, count, dims4, 4, false);
        // the future, and keys outside the layer's window, are exactly 0
        const cJSON *layer, *head, *row, *cell;
        const cJSON *windows = cJSON_GetObjectItem(gc, "layer_windows");
        int at = 0;
        cJSON_ArrayForEach(layer, get(j, "weights"))
        {
            const size_t window_l =
                windows ? (size_t)cJSON_GetArrayItem(windows, at)->valuedouble
                        : window;
            at++;
            cJSON_ArrayForEach(head, layer)
            {
                size_t i = 0;
                cJSON_ArrayForEach(row, head)
                {
                    size_t jj = 0;
                    cJSON_ArrayForEach(cell, row)
                    {
                        if (jj > i || (window_l && jj + window_l <= i))
                            assert_true(cell->valuedouble == 0.0);
                        jj++;
                    }
                    i++;
                }
            }
        }
        size_t hcount;
        double *hs = numbers_of(get(c, "hidden_states"), &hcount);
        const size_t hdims[3] = {L + 1, n, W};
        check_array(j, "hidden_states", hs, hcount, hdims, 3, true);
        size_t rcount;
        double *roll = numbers_of(get(c, "rollout"), &rcount);
        const size_t rdims[2] = {n, n};
        check_array(j, "rollout", roll, rcount, rdims, 2, false);
        cJSON_Delete(j);
        free(att);
        free(hs);
        free(roll);
        free(text);
        cJSON_Delete(body);
        cases++;
    }
    assert_true(cases >= 3);
    cJSON_Delete(g);
}

/* Whether pixel (x, y) of the tile at (x0, y0) of img, drawn at one pixel
 * a cell, is the hatching's grey: the dark one where x + y is a multiple
 * of 4, else the light one. */
static bool hatched_at(const struct decoded_png *img, unsigned x0, unsigned y0,
                       unsigned x, unsigned y)
{
    const unsigned char *px =
        img->rgb + ((size_t)(y0 + y) * img->width + x0 + x) * 3;
    const unsigned char want = (x + y) % 4 == 0 ? 170 : 232;
    return px[0] == want && px[1] == want && px[2] == want;
}

/* The model view of name on the n tokens of text (layers x heads tiles at
 * one pixel a cell, a 1-pixel gutter between them), bare, in blocks of
 * pool x pool weights (1: not pooled): each tile hatches the cells its
 * own layer may not see (windows[l]; 0 for a global layer, whose tiles
 * hatch the later keys alone), a block when every cell of it is one, and
 * colours the rest. Returns the cells hatched for being outside a window
 * alone. */
static size_t check_model_view_windows(const struct server *s, const char *name,
                                       const char *text, unsigned n,
                                       size_t layers, size_t heads,
                                       const size_t *windows, unsigned pool)
{
    char path[512], pooled[48] = "&pool=none";
    if (pool > 1)
        snprintf(pooled, sizeof pooled, "&pool=max&pool_size=%u", pool);
    snprintf(path, sizeof path,
             "/attention?model=%s&format=png&labels=false&cell=1&"
             "colormap=viridis&sentence=%s%s",
             name, text, pooled);
    struct reply r;
    assert_true(http_call(s, "GET", path, NULL, 0, NULL, &r));
    if (r.status != 200)
        fail_msg("%s: %ld %s", path, r.status, r.body);
    struct decoded_png img;
    decoded_png_read(&r, &img);
    reply_free(&r);
    const unsigned side = (n + pool - 1) / pool;
    assert_int_equal(img.width, heads * (side + 1) - 1);
    assert_int_equal(img.height, layers * (side + 1) - 1);
    size_t outside = 0;
    for (size_t l = 0; l < layers; l++)
        for (size_t h = 0; h < heads; h++)
            for (unsigned bi = 0; bi < side; bi++)
                for (unsigned bj = 0; bj < side; bj++) {
                    bool hidden = true, by_window = false;
                    for (unsigned i = bi * pool; i < (bi + 1) * pool && i < n;
                         i++)
                        for (unsigned j = bj * pool;
                             j < (bj + 1) * pool && j < n; j++) {
                            const bool later = j > i;
                            const bool far = windows[l] && j + windows[l] <= i;
                            hidden = hidden && (later || far);
                            by_window = by_window || far;
                        }
                    const bool hatched =
                        hatched_at(&img, (unsigned)h * (side + 1),
                                   (unsigned)l * (side + 1), bj, bi);
                    if (hatched != hidden)
                        fail_msg("%s (blocks of %u) layer %zu head %zu cell "
                                 "(%u, %u) is %s; the layer's window %zu",
                                 name, pool, l, h, bi, bj,
                                 hatched ? "hatched" : "coloured", windows[l]);
                    outside += hidden && by_window;
                }
    decoded_png_free(&img);
    return outside;
}

/* Gemma's four rows served: /models gives each layer's kind, window and
 * rotary base and the caps as the goldens record them, every golden comes
 * back through HTTP, and DLA on Gemma 2 says which cap its logits come
 * before and adds up. */
static void test_gemma_served(void **state)
{
    (void)state;
    const char *const args[] = {"--model", "gemma=tests/models/gemma",
                                "--model", "gemma2=tests/models/gemma2",
                                "--model", "gemma3=tests/models/gemma3",
                                "--model", "gemma3_mm=tests/models/gemma3_mm",
                                NULL};
    const char *variants[] = {"gemma", "gemma2", "gemma3", "gemma3_mm"};
    struct server s;
    assert_true(server_start(&s, args));
    struct reply r;
    assert_true(http_call(&s, "GET", "/models", NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    cJSON *list = cJSON_Parse(r.body);
    reply_free(&r);
    for (int i = 0; i < 4; i++) {
        const cJSON *m = cJSON_GetArrayItem(get(list, "models"), i);
        cJSON *g = load_golden(variants[i]);
        const cJSON *gc = get(g, "config");
        assert_string_equal(get(m, "family")->valuestring,
                            get(gc, "model_type")->valuestring);
        const cJSON *layers = get(m, "layer_attention");
        const cJSON *types = cJSON_GetObjectItem(gc, "layer_types");
        const cJSON *theta = cJSON_GetObjectItem(gc, "layer_rope_theta");
        assert_int_equal(cJSON_GetArraySize(layers),
                         get(gc, "layers")->valueint);
        for (int l = 0; l < cJSON_GetArraySize(layers); l++) {
            const cJSON *la = cJSON_GetArrayItem(layers, l);
            assert_string_equal(
                get(la, "type")->valuestring,
                types ? cJSON_GetArrayItem(types, l)->valuestring : "global");
            if (theta)
                assert_true(get(la, "rope_theta")->valuedouble ==
                            cJSON_GetArrayItem(theta, l)->valuedouble);
        }
        const char *caps[] = {"attn_logit_softcapping",
                              "final_logit_softcapping"};
        for (int c = 0; c < 2; c++) {
            const cJSON *want = get(gc, caps[c]), *got = get(m, caps[c]);
            assert_true(cJSON_IsNull(want)
                            ? cJSON_IsNull(got)
                            : got->valuedouble == want->valuedouble);
        }
        cJSON_Delete(g);
        check_decoder_golden(&s, variants[i], variants[i]);
    }
    cJSON_Delete(list);
    cJSON *j = post_expect(&s,
                           "{\"model\":\"gemma2\",\"sentence\":\"The cat "
                           "sat\",\"return\":[\"dla\"],\"dla_target\":[5]}",
                           200);
    const cJSON *dla = get(j, "dla");
    assert_true(get(dla, "before_softcap")->valuedouble == 5.0);
    assert_true(
        fabs(get(dla, "total")->valuedouble - get(dla, "logit")->valuedouble) <=
        1e-4 * fmax(1.0, fabs(get(dla, "logit")->valuedouble)));
    cJSON_Delete(j);
    // patching and ablation on layers of two kinds, the logits capped
    assert_true(post_json(&s, "/patch",
                          "{\"model\":\"gemma2\",\"clean\":\"the cat sat on "
                          "the mat\",\"corrupted\":\"the dog sat on the "
                          "mat\",\"over\":\"heads\",\"metric\":{\"kind\":"
                          "\"logprob\",\"target\":5}}",
                          &r));
    if (r.status != 200)
        fail_msg("/patch on gemma2: %ld %s", r.status, r.body);
    j = cJSON_Parse(r.body);
    reply_free(&r);
    assert_int_equal(cJSON_GetArraySize(get(j, "effects")), 4);
    cJSON_Delete(j);
    j = post_expect(&s,
                    "{\"model\":\"gemma3\",\"sentence\":\"The cat sat\","
                    "\"ablate\":[{\"layer\":5,\"head\":1}],"
                    "\"return\":[\"mean_weights\"]}",
                    200);
    cJSON_Delete(j);
    // the model view hatches each tile with its own layer's window:
    // Gemma 2's sliding layers (0 and 2, window 4) what lies outside it,
    // its global ones (1 and 3) the later keys alone; Gemma 3's five
    // sliding layers (window 5) to one global (5) the same; pooled too
    const char *text = "The%20quick%20brown%20fox%20jumps%20over";
    j = post_expect(&s,
                    "{\"model\":\"gemma2\",\"sentence\":\"The quick brown "
                    "fox jumps over\",\"return\":[]}",
                    200);
    const unsigned n2 = (unsigned)cJSON_GetArraySize(get(j, "tokens"));
    cJSON_Delete(j);
    j = post_expect(&s,
                    "{\"model\":\"gemma3\",\"sentence\":\"The quick brown "
                    "fox jumps over\",\"return\":[]}",
                    200);
    const unsigned n3 = (unsigned)cJSON_GetArraySize(get(j, "tokens"));
    cJSON_Delete(j);
    assert_true(n2 > 4 + 2 && n3 > 5 + 2);
    const size_t gemma2_windows[] = {4, 0, 4, 0};
    const size_t gemma3_windows[] = {5, 5, 5, 5, 5, 0, 5};
    assert_true(check_model_view_windows(&s, "gemma2", text, n2, 4, 4,
                                         gemma2_windows, 1) > 0);
    assert_true(check_model_view_windows(&s, "gemma2", text, n2, 4, 4,
                                         gemma2_windows, 2) > 0);
    assert_true(check_model_view_windows(&s, "gemma3", text, n3, 7, 4,
                                         gemma3_windows, 1) > 0);
    // the rollout's paths reach past every window: the later keys alone
    assert_true(http_call(&s, "GET",
                          "/attention?model=gemma2&format=png&view=rollout&"
                          "labels=false&cell=1&sentence=The%20quick%20brown%"
                          "20fox%20jumps%20over",
                          NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    struct decoded_png roll;
    decoded_png_read(&r, &roll);
    reply_free(&r);
    assert_int_equal(roll.width, n2);
    for (unsigned i = 0; i < roll.height; i++)
        for (unsigned jj = 0; jj < roll.width; jj++)
            if (hatched_at(&roll, 0, 0, jj, i) != (jj > i))
                fail_msg("rollout cell (%u, %u)", i, jj);
    decoded_png_free(&roll);
    assert_int_equal(server_stop(&s, 10.0), 0);
}

/* A server with every decoder family: /models says what each is, every
 * golden comes back through HTTP, an image draws, and what a decoder
 * cannot take is refused naming the field. */
static void test_decoders(void **state)
{
    (void)state;
    const char *variants[] = {"gpt2",     "gpt2_prefixed", "llama2",
                              "llama3",   "mistral",       "qwen2",
                              "qwen3",    "olmo2",         "neox",
                              "neox_seq", "phi3",          "phi3_longrope"};
    enum { N = sizeof variants / sizeof variants[0] };
    char specs[N][128];
    const char *args[2 * N + 1];
    for (size_t i = 0; i < N; i++) {
        snprintf(specs[i], sizeof specs[i], "%s=tests/models/%s", variants[i],
                 variants[i]);
        args[2 * i] = "--model";
        args[2 * i + 1] = specs[i];
    }
    args[2 * N] = NULL;
    struct server s;
    assert_true(server_start(&s, args));

    struct reply r;
    assert_true(http_call(&s, "GET", "/models", NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    cJSON *list = cJSON_Parse(r.body);
    reply_free(&r);
    const char *dtypes[N] = {"F32", "F16",  "BF16", "F32", "F16",  "BF16",
                             "F32", "BF16", "F16",  "F32", "BF16", "F16"};
    for (size_t i = 0; i < N; i++) {
        const cJSON *m = cJSON_GetArrayItem(get(list, "models"), (int)i);
        cJSON *g = load_golden(variants[i]);
        const cJSON *gc = get(g, "config");
        assert_string_equal(get(m, "family")->valuestring,
                            get(gc, "model_type")->valuestring);
        assert_int_equal(get(m, "kv_heads")->valueint,
                         get(gc, "kv_heads")->valueint);
        assert_int_equal(get(m, "head_dim")->valueint,
                         get(gc, "head_dim")->valueint);
        assert_string_equal(get(m, "dtype")->valuestring, dtypes[i]);
        assert_int_equal(cJSON_IsTrue(get(m, "tied_embeddings")),
                         cJSON_IsTrue(get(gc, "tied")));
        cJSON_Delete(g);
        check_decoder_golden(&s, variants[i], variants[i]);
    }
    cJSON_Delete(list);

    // without the BOS its tokenizer adds
    cJSON *j = post_expect(&s,
                           "{\"model\":\"llama3\",\"sentence\":\"Hello world\","
                           "\"add_special_tokens\":false,\"return\":[]}",
                           200);
    assert_false(cJSON_IsTrue(cJSON_GetArrayItem(get(j, "added"), 0)));
    assert_int_equal(cJSON_GetArraySize(get(j, "tokens")), 2);
    cJSON_Delete(j);

    // one text only; a layer the model has; a text within its positions
    j = post_expect(
        &s, "{\"model\":\"gpt2\",\"sentence\":\"a\",\"sentence_b\":\"b\"}",
        422);
    assert_string_equal(get(j, "pointer")->valuestring, "/sentence_b");
    assert_non_null(strstr(get(j, "detail")->valuestring, "GPT-2 decoder"));
    cJSON_Delete(j);
    j = post_expect(&s, "{\"model\":\"qwen3\",\"sentence\":\"a\",\"layer\":2}",
                    422);
    assert_string_equal(get(j, "pointer")->valuestring, "/layer");
    cJSON_Delete(j);
    char *long_text = sentence_body(70, "\"model\":\"gpt2\"");
    j = post_expect(&s, long_text, 422);
    assert_non_null(
        strstr(get(j, "detail")->valuestring, "max_position_embeddings"));
    assert_non_null(strstr(get(j, "detail")->valuestring, "tokens"));
    cJSON_Delete(j);
    free(long_text);

    // the longest body the limits allow (--max-body, 32 MiB by default):
    // one letter repeated, a single pre-token for byte-level BPE, whose
    // merging is not quadratic; refused for its length once tokenized
    {
        const size_t len = ((size_t)32 << 20) - 64;
        char *big = malloc(len + 1);
        const char head[] = "{\"model\":\"gpt2\",\"sentence\":\"";
        memcpy(big, head, sizeof head - 1);
        memset(big + sizeof head - 1, 'a', len - (sizeof head - 1) - 2);
        memcpy(big + len - 2, "\"}", 2);
        big[len] = '\0';
        const double t0 = clock_seconds();
        struct reply br;
        assert_true(http_call(
            &s, "POST", "/attention", big, len,
            (const char *const[]){"Content-Type: application/json", NULL},
            &br));
        print_message("32 MiB of one letter: %ld in %.2f s\n", br.status,
                      clock_seconds() - t0);
        assert_int_equal(br.status, 422);
        assert_non_null(strstr(br.body, "max_position_embeddings"));
        reply_free(&br);
        free(big);
    }

    // the model view of a windowed model, drawn
    assert_true(http_call(&s, "GET",
                          "/attention?model=mistral&format=png&layer=all&"
                          "sentence=The%20quick%20brown%20fox%20jumps%20over",
                          NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    assert_string_equal(r.content_type, "image/png");
    reply_free(&r);
    // one bare head, 8 pixels a cell: the future and what the window
    // leaves out are hatched grey, apart from every colour of the map
    assert_true(http_call(&s, "GET",
                          "/attention?model=mistral&format=png&layer=0&"
                          "head=0&labels=false&cell=8&colormap=viridis&"
                          "sentence=The%20quick%20brown%20fox%20jumps%20over",
                          NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    struct decoded_png img;
    decoded_png_read(&r, &img);
    reply_free(&r);
    const unsigned n = img.width / 8;
    assert_int_equal(img.height, img.width);
    for (unsigned i = 0; i < n; i++)
        for (unsigned jj = 0; jj < n; jj++) {
            const unsigned char *px =
                img.rgb + ((size_t)(i * 8 + 1) * img.width + jj * 8 + 1) * 3;
            const bool hatched = px[0] == px[1] && px[1] == px[2] &&
                                 (px[0] == 232 || px[0] == 170);
            const bool hidden = jj > i || jj + 5 <= i; /* window 5 */
            if (hatched != hidden)
                fail_msg("cell (%u, %u) is %s", i, jj,
                         hatched ? "hatched" : "coloured");
        }
    decoded_png_free(&img);
    // at one pixel a cell the stripes run through the matrix: a hidden
    // cell (i, j) is the dark grey where i + j is a multiple of 4, else
    // the light one, never one flat grey (the page draws the same)
    assert_true(http_call(&s, "GET",
                          "/attention?model=mistral&format=png&layer=1&"
                          "head=5&labels=false&cell=1&colormap=gray&"
                          "sentence=The%20quick%20brown%20fox%20jumps%20over",
                          NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    decoded_png_read(&r, &img);
    reply_free(&r);
    unsigned dark = 0;
    for (unsigned i = 0; i < img.height; i++)
        for (unsigned jj = 0; jj < img.width; jj++) {
            if (!(jj > i || jj + 5 <= i))
                continue;
            const unsigned char *px =
                img.rgb + ((size_t)i * img.width + jj) * 3;
            const unsigned char want = (i + jj) % 4 == 0 ? 170 : 232;
            if (px[0] != want || px[1] != want || px[2] != want)
                fail_msg("hidden cell (%u, %u) is %u, not %u", i, jj, px[0],
                         want);
            dark += want == 170;
        }
    assert_true(dark > 0);
    decoded_png_free(&img);
    assert_int_equal(server_stop(&s, 10.0), 0);
}

/* The logit lens on the real binary: its shape, its last layer's last
 * row the model's own next token (the greedy golden's first), its
 * probability the softmax of the golden's logits; GET; what is refused,
 * the lens too large to write among it. */
static void test_logit_lens(void **state)
{
    (void)state;
    const char *const args[] = {"--model", "llama3=tests/models/llama3",
                                "--model", "qwen2=tests/models/qwen2",
                                "--model", "wide=tests/models/llama_16x32",
                                "--model", "bert=tests/models/f32",
                                NULL};
    struct server s;
    assert_true(server_start(&s, args));
    for (int v = 0; v < 2; v++) {
        const char *name = v ? "qwen2" : "llama3";
        cJSON *g = load_golden(name);
        const cJSON *c0 = cJSON_GetArrayItem(get(g, "cases"), 0);
        cJSON *body = cJSON_CreateObject();
        cJSON_AddStringToObject(body, "model", name);
        cJSON_AddStringToObject(body, "sentence",
                                get(c0, "sentence")->valuestring);
        cJSON *ret = cJSON_AddArrayToObject(body, "return");
        cJSON_AddItemToArray(ret, cJSON_CreateString("logit_lens"));
        cJSON_AddNumberToObject(body, "logit_lens_k", 3);
        char *text = cJSON_PrintUnformatted(body);
        cJSON *j = post_expect(&s, text, 200);
        free(text);
        cJSON_Delete(body);
        assert_int_equal(get(get(j, "config"), "logit_lens_k")->valueint, 3);
        const cJSON *lens = get(j, "logit_lens");
        const int layers = get(get(j, "config"), "layers")->valueint;
        const int n = cJSON_GetArraySize(get(j, "tokens"));
        assert_int_equal(cJSON_GetArraySize(lens), layers);
        for (int l = 0; l < layers; l++) {
            const cJSON *rows = cJSON_GetArrayItem(lens, l);
            assert_int_equal(cJSON_GetArraySize(rows), n);
            for (int i = 0; i < n; i++) {
                const cJSON *top = cJSON_GetArrayItem(rows, i);
                assert_int_equal(cJSON_GetArraySize(top), 3);
                double before = 1.0;
                for (int t = 0; t < 3; t++) {
                    const cJSON *e = cJSON_GetArrayItem(top, t);
                    const double p = get(e, "p")->valuedouble;
                    assert_true(p > 0 && p <= before);
                    before = p;
                    assert_true(cJSON_IsNumber(get(e, "token_id")));
                    assert_true(cJSON_IsString(get(e, "text")) ||
                                cJSON_IsNull(get(e, "text")));
                }
            }
        }
        // the last layer's last row: the model's next token and its
        // probability, from the golden's float64 logits
        const cJSON *first = cJSON_GetArrayItem(
            cJSON_GetArrayItem(cJSON_GetArrayItem(lens, layers - 1), n - 1), 0);
        const cJSON *greedy = get(g, "greedy");
        assert_int_equal(get(first, "token_id")->valueint,
                         cJSON_GetArrayItem(get(greedy, "new"), 0)->valueint);
        const cJSON *logits = get(c0, "logits");
        double most = -INFINITY, total = 0.0;
        const cJSON *x;
        cJSON_ArrayForEach(x, logits) most = fmax(most, x->valuedouble);
        cJSON_ArrayForEach(x, logits) total += exp(x->valuedouble - most);
        assert_true(fabs(get(first, "p")->valuedouble - 1.0 / total) < 1e-4);
        cJSON_Delete(j);
        cJSON_Delete(g);
    }
    // GET, and the default of 5 when logit_lens_k is not given
    struct reply r;
    assert_true(http_call(&s, "GET",
                          "/attention?model=llama3&sentence=The+cat&"
                          "return=logit_lens",
                          NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    cJSON *j = parse_reply(&r);
    reply_free(&r);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(
                         cJSON_GetArrayItem(get(j, "logit_lens"), 0), 0)),
                     5);
    cJSON_Delete(j);
    // what is refused
    refused(&s,
            "{\"model\":\"bert\",\"sentence\":\"the cat\","
            "\"return\":[\"logit_lens\"]}",
            "/return/0", (const char *const[]){"output head", NULL});
    refused(&s,
            "{\"model\":\"llama3\",\"sentence\":\"The cat\","
            "\"return\":[\"logit_lens\"],\"logit_lens_k\":21}",
            "/logit_lens_k", (const char *const[]){"21", NULL});
    refused(&s, "{\"sentence\":\"The cat\",\"return\":[\"logit_lens\"]}",
            "/return/0", (const char *const[]){"model", NULL});
    // 16 layers x 2,000 tokens or more x 20 would not fit the answer's
    // text
    enum { WORDS = 2000 };
    char *big = malloc(2 * WORDS + 128);
    assert_non_null(big);
    size_t len = (size_t)sprintf(big, "{\"model\":\"wide\",\"sentence\":\"A");
    for (int i = 0; i < WORDS; i++)
        len += (size_t)sprintf(big + len, " a");
    sprintf(big + len, "\",\"return\":[\"logit_lens\"],\"logit_lens_k\":20}");
    refused(&s, big, "/logit_lens_k",
            (const char *const[]){"MiB of JSON", NULL});
    free(big);
    assert_int_equal(server_stop(&s, 10.0), 0);
}

/* The head measures on the real binary: every layer and head, read
 * from the weights the same answer gives (the previous-token score and
 * the sink, worked out here), on an encoder and on a decoder. */
static void test_head_stats(void **state)
{
    (void)state;
    const char *const bodies[] = {
        "{\"model\":\"f32\",\"sentence\":\"the cat sat on the mat\","
        "\"return\":[\"weights\",\"head_stats\"]}"};
    for (size_t b = 0; b < 1; b++) {
        cJSON *j = post_expect(&srv, bodies[b], 200);
        const cJSON *w = get(j, "weights"), *hs = get(j, "head_stats");
        const int layers = cJSON_GetArraySize(w);
        const char *names[] = {"entropy",         "sink",      "previous_token",
                               "duplicate_token", "induction", "self",
                               "distance"};
        for (int k = 0; k < 7; k++)
            assert_int_equal(cJSON_GetArraySize(get(hs, names[k])), layers);
        for (int l = 0; l < layers; l++) {
            const cJSON *heads = cJSON_GetArrayItem(w, l);
            for (int a = 0; a < cJSON_GetArraySize(heads); a++) {
                const cJSON *A = cJSON_GetArrayItem(heads, a);
                const int n = cJSON_GetArraySize(A);
                double prev = 0, sink = 0,
                       col0 = cJSON_GetArrayItem(cJSON_GetArrayItem(A, 0), 0)
                                  ->valuedouble;
                for (int i = 1; i < n; i++) {
                    col0 += cJSON_GetArrayItem(cJSON_GetArrayItem(A, i), 0)
                                ->valuedouble;
                    const cJSON *row = cJSON_GetArrayItem(A, i);
                    prev += cJSON_GetArrayItem(row, i - 1)->valuedouble;
                    sink += cJSON_GetArrayItem(row, 0)->valuedouble;
                }
                const double got_prev =
                    cJSON_GetArrayItem(
                        cJSON_GetArrayItem(get(hs, "previous_token"), l), a)
                        ->valuedouble;
                const double got_sink =
                    cJSON_GetArrayItem(cJSON_GetArrayItem(get(hs, "sink"), l),
                                       a)
                        ->valuedouble;
                assert_true(fabs(got_prev - prev / n) < 1e-6);
                assert_true(fabs(got_sink - sink / (n - 1)) < 1e-6);
                const double e =
                    cJSON_GetArrayItem(
                        cJSON_GetArrayItem(get(hs, "entropy"), l), a)
                        ->valuedouble;
                assert_true(e >= 0 && e <= 1 + 1e-6);
                // an encoder's every query sees key 0
                const cJSON *received = cJSON_GetArrayItem(
                    cJSON_GetArrayItem(get(hs, "key_received"), l), a);
                assert_int_equal(cJSON_GetArraySize(received), n);
                assert_true(fabs(cJSON_GetArrayItem(received, 0)->valuedouble -
                                 col0 / n) < 1e-6);
            }
        }
        cJSON_Delete(j);
    }
}

/* Value-weighted attention on the real binary, for every layer of a
 * decoder with grouped KV heads: the weight times one norm per head and
 * key, so value_weighted / weights is the same down every column; the
 * sum over heads is at most the sum of the heads' norms; one layer's
 * alone is that layer's. */
static void test_value_weighted(void **state)
{
    (void)state;
    const char *const args[] = {"--model", "llama3=tests/models/llama3", NULL};
    struct server s;
    assert_true(server_start(&s, args));
    cJSON *j = post_expect(&s,
                           "{\"model\":\"llama3\",\"sentence\":\"the cat "
                           "sat on the mat\",\"return\":[\"weights\","
                           "\"value_weighted\"]}",
                           200);
    const cJSON *w = get(j, "weights"), *vw = get(j, "value_weighted"),
                *sum = get(j, "value_weighted_sum");
    const int layers = cJSON_GetArraySize(w);
    assert_int_equal(cJSON_GetArraySize(vw), layers);
    assert_int_equal(cJSON_GetArraySize(sum), layers);
    for (int l = 0; l < layers; l++) {
        const cJSON *wl = cJSON_GetArrayItem(w, l),
                    *vl = cJSON_GetArrayItem(vw, l);
        const int heads = cJSON_GetArraySize(wl);
        const int n = cJSON_GetArraySize(cJSON_GetArrayItem(wl, 0));
        for (int c = 0; c < n; c++) {
            double bound[64] = {0};
            for (int a = 0; a < heads; a++) {
                double norm = -1;
                for (int i = c; i < n; i++) {
                    const double wij =
                        cJSON_GetArrayItem(
                            cJSON_GetArrayItem(cJSON_GetArrayItem(wl, a), i), c)
                            ->valuedouble;
                    const double vij =
                        cJSON_GetArrayItem(
                            cJSON_GetArrayItem(cJSON_GetArrayItem(vl, a), i), c)
                            ->valuedouble;
                    assert_true(wij > 0 && vij > 0);
                    if (norm < 0)
                        norm = vij / wij;
                    assert_true(fabs(vij / wij - norm) <= 1e-5 * norm);
                    bound[i] += vij;
                }
            }
            for (int i = 0; i < n; i++) {
                const double total =
                    cJSON_GetArrayItem(
                        cJSON_GetArrayItem(cJSON_GetArrayItem(sum, l), i), c)
                        ->valuedouble;
                // the norm of a sum is at most the sum of the norms; a
                // later key adds nothing
                assert_true(total <= bound[i] * (1 + 1e-6) + 1e-7);
                if (c > i)
                    assert_true(total == 0);
            }
        }
    }
    char *whole = cJSON_PrintUnformatted(cJSON_GetArrayItem(vw, 1));
    cJSON_Delete(j);
    j = post_expect(&s,
                    "{\"model\":\"llama3\",\"sentence\":\"the cat sat on "
                    "the mat\",\"layer\":1,\"return\":[\"value_weighted\"]}",
                    200);
    char *one = cJSON_PrintUnformatted(get(j, "value_weighted"));
    assert_string_equal(one, whole);
    char *config = cJSON_PrintUnformatted(get(j, "config"));
    assert_non_null(strstr(config, "\"return\":[\"value_weighted\"]"));
    free(config);
    free(one);
    free(whole);
    cJSON_Delete(j);
    assert_int_equal(server_stop(&s, 10.0), 0);
}

/* The induction probe on the real binary: the scores are the stripes of
 * the weights in the same answer; the tokens repeat, the seed alone
 * decides them (a GET gives the same bytes), a BOS frames them or not;
 * what is refused. */
static void test_induction_probe(void **state)
{
    (void)state;
    const char *const args[] = {"--model", "llama3=tests/models/llama3",
                                "--model", "gpt2=tests/models/gpt2", NULL};
    struct server s;
    assert_true(server_start(&s, args));
    cJSON *j = post_expect(&s,
                           "{\"model\":\"llama3\",\"probe\":\"induction\","
                           "\"probe_length\":12,\"probe_seed\":3,"
                           "\"return\":[\"weights\"]}",
                           200);
    const cJSON *probe = get(j, "probe"), *w = get(j, "weights");
    assert_string_equal(get(probe, "kind")->valuestring, "induction");
    const int start = (int)get(probe, "start")->valuedouble;
    const int length = (int)get(probe, "length")->valuedouble;
    assert_int_equal(start, 1); /* Llama 3's BOS */
    assert_true(cJSON_IsTrue(get(probe, "bos")));
    assert_int_equal(length, 12);
    assert_true(cJSON_IsTrue(cJSON_GetArrayItem(get(j, "added"), 0)));
    const cJSON *ids = get(j, "token_ids");
    assert_int_equal(cJSON_GetArraySize(ids), 1 + 2 * 12);
    for (int i = 0; i < 12; i++)
        assert_true(cJSON_GetArrayItem(ids, 1 + i)->valuedouble ==
                    cJSON_GetArrayItem(ids, 13 + i)->valuedouble);
    const cJSON *ind = get(probe, "induction");
    for (int l = 0; l < cJSON_GetArraySize(w); l++)
        for (int a = 0; a < cJSON_GetArraySize(cJSON_GetArrayItem(w, l)); a++) {
            const cJSON *A = cJSON_GetArrayItem(cJSON_GetArrayItem(w, l), a);
            double want = 0;
            for (int i = start + length; i < start + 2 * length; i++)
                want +=
                    cJSON_GetArrayItem(cJSON_GetArrayItem(A, i), i - length + 1)
                        ->valuedouble;
            const double got =
                cJSON_GetArrayItem(cJSON_GetArrayItem(ind, l), a)->valuedouble;
            assert_true(fabs(got - want / length) < 1e-6);
        }
    cJSON_Delete(j);

    // without "return", the scores alone; the seed alone decides the tokens
    struct reply r1, r2;
    assert_true(http_call(&s, "GET",
                          "/attention?model=gpt2&probe=induction&probe_length=8"
                          "&probe_seed=5",
                          NULL, 0, NULL, &r1));
    assert_true(http_call(&s, "GET",
                          "/attention?model=gpt2&probe=induction&probe_length=8"
                          "&probe_seed=5",
                          NULL, 0, NULL, &r2));
    assert_int_equal(r1.status, 200);
    assert_string_equal(r1.body, r2.body);
    j = parse_reply(&r1);
    assert_null(cJSON_GetObjectItem(j, "weights"));
    assert_int_equal((int)get(get(j, "probe"), "start")->valuedouble, 0);
    assert_int_equal(cJSON_GetArraySize(get(j, "token_ids")), 16);
    cJSON_Delete(j);
    reply_free(&r1);
    reply_free(&r2);
    j = post_expect(&s,
                    "{\"model\":\"llama3\",\"probe\":\"induction\","
                    "\"probe_length\":4,\"add_special_tokens\":false}",
                    200);
    assert_int_equal((int)get(get(j, "probe"), "start")->valuedouble, 0);
    assert_true(cJSON_IsFalse(get(get(j, "probe"), "bos")));
    assert_false(cJSON_IsTrue(cJSON_GetArrayItem(get(j, "added"), 0)));
    cJSON_Delete(j);

    // attention flow: the golden's, and refused past its limit, named
    cJSON *g = load_golden("llama3");
    const cJSON *c0 = cJSON_GetArrayItem(get(g, "cases"), 0);
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "model", "llama3");
    cJSON_AddStringToObject(body, "sentence", get(c0, "sentence")->valuestring);
    cJSON_AddRawToObject(body, "return", "[\"flow\"]");
    char *text = cJSON_PrintUnformatted(body);
    j = post_expect(&s, text, 200);
    const cJSON *flow = get(j, "flow"), *want = get(c0, "flow");
    const int n = cJSON_GetArraySize(flow);
    assert_int_equal(n * n, cJSON_GetArraySize(want));
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++)
            assert_true(fabs(cJSON_GetArrayItem(cJSON_GetArrayItem(flow, i), k)
                                 ->valuedouble -
                             cJSON_GetArrayItem(want, i * n + k)->valuedouble) <
                        2e-5);
    cJSON_Delete(j);
    free(text);
    cJSON_Delete(body);
    cJSON_Delete(g);
    // the longest input the limit allows: 64 tokens, two copies of 32
    j = post_expect(&s,
                    "{\"model\":\"llama3\",\"probe\":\"induction\","
                    "\"probe_length\":32,\"add_special_tokens\":false,"
                    "\"return\":[\"flow\"]}",
                    200);
    assert_int_equal(cJSON_GetArraySize(get(j, "flow")), 64);
    cJSON_Delete(j);
    j = post_expect(&s,
                    "{\"model\":\"llama3\",\"probe\":\"induction\","
                    "\"probe_length\":40,\"return\":[\"flow\"]}",
                    422);
    assert_string_equal(get(j, "pointer")->valuestring, "/probe_length");
    assert_non_null(strstr(get(j, "detail")->valuestring, "at most 64 tokens"));
    cJSON_Delete(j);

    const struct {
        const char *body, *pointer;
    } refused[] = {
        {"{\"model\":\"gpt2\",\"probe\":\"induction\",\"sentence\":\"a\"}",
         "/sentence"},
        {"{\"model\":\"gpt2\",\"probe\":\"induction\",\"probe_length\":40}",
         "/probe_length"}, /* GPT-2 here has 64 positions */
        {"{\"model\":\"gpt2\",\"probe\":\"random\"}", "/probe"},
        {"{\"model\":\"gpt2\",\"probe\":\"induction\",\"probe_length\":0}",
         "/probe_length"},
        {"{\"sentence\":\"a\",\"probe\":\"induction\"}", "/probe"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        j = post_expect(&s, refused[i].body, 422);
        assert_string_equal(get(j, "pointer")->valuestring, refused[i].pointer);
        cJSON_Delete(j);
    }
    assert_int_equal(server_stop(&s, 10.0), 0);
}

/* sparse_weights on a model: every layer's rows, or one layer's, as the
 * dense weights of the same answer order them. */
static void test_sparse_weights(void **state)
{
    (void)state;
    cJSON *j = post_expect(&srv,
                           "{\"model\":\"f32\",\"sentence\":\"the cat sat on "
                           "the mat\",\"sparse_k\":4,\"return\":[\"weights\","
                           "\"sparse_weights\"]}",
                           200);
    const cJSON *w = get(j, "weights"), *sp = get(j, "sparse_weights");
    const int layers = cJSON_GetArraySize(w);
    assert_int_equal(cJSON_GetArraySize(get(sp, "keys")), layers);
    for (int l = 0; l < layers; l++)
        sparse_rows_check(cJSON_GetArrayItem(w, l),
                          cJSON_GetArrayItem(get(sp, "keys"), l),
                          cJSON_GetArrayItem(get(sp, "weights"), l), 4);
    cJSON_Delete(j);
    j = post_expect(&srv,
                    "{\"model\":\"f32\",\"sentence\":\"the cat sat on the "
                    "mat\",\"layer\":1,\"sparse_k\":2,\"return\":[\"weights\","
                    "\"sparse_weights\"]}",
                    200);
    sp = get(j, "sparse_weights");
    sparse_rows_check(get(j, "weights"), get(sp, "keys"), get(sp, "weights"),
                      2);
    cJSON_Delete(j);
}

static void test_defaults_and_get(void **state)
{
    (void)state;
    cJSON *j = post_expect(
        &srv, "{\"model\":\"f32\",\"sentence\":\"the cat sat\"}", 200);
    const cJSON *w = get(j, "weights");
    assert_int_equal(cJSON_GetArraySize(w), 2); /* layers */
    assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(w, 0)), 4);
    assert_null(cJSON_GetObjectItem(j, "rollout"));
    assert_null(cJSON_GetObjectItem(j, "mean_weights"));
    char *post_text = cJSON_PrintUnformatted(w);

    struct reply r;
    assert_true(http_call(&srv, "GET",
                          "/attention?model=f32&sentence=the+cat+sat", NULL, 0,
                          NULL, &r));
    assert_int_equal(r.status, 200);
    cJSON *k = parse_reply(&r);
    char *get_text = cJSON_PrintUnformatted(get(k, "weights"));
    assert_string_equal(get_text, post_text);
    char etag[64];
    assert_true(reply_header(&r, "ETag", etag, sizeof etag));
    reply_free(&r);
    free(get_text);
    free(post_text);
    cJSON_Delete(k);
    cJSON_Delete(j);

    /* layer=all spelled out in a URL, and a layer number */
    assert_true(http_call(&srv, "GET",
                          "/attention?model=f32&sentence=a+b&layer=1&return="
                          "rollout,mean_weights",
                          NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    k = parse_reply(&r);
    assert_int_equal(cJSON_GetArraySize(get(k, "mean_weights")), 4); /* N */
    assert_non_null(get(k, "rollout"));
    reply_free(&r);
    cJSON_Delete(k);

    j = post_expect(&srv,
                    "{\"model\":\"f32\",\"sentence\":\"the cat\","
                    "\"sentence_b\":\"sat\",\"return\":[]}",
                    200);
    assert_int_equal(cJSON_GetArraySize(get(j, "tokens")), 6);
    assert_null(cJSON_GetObjectItem(j, "weights"));
    assert_true(cJSON_IsTrue(get(get(j, "config"), "sentence_b")));
    cJSON_Delete(j);
}

/* The ETag of a GET on a model: the URL's and the checkpoint's, so a
 * different checkpoint under the same name is not served from a cache. */
static void etag_of(const struct server *s, char *out, size_t len)
{
    struct reply r;
    assert_true(http_call(s, "GET", "/attention?model=f32&sentence=the+cat",
                          NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    assert_true(reply_header(&r, "ETag", out, len));
    reply_free(&r);
}

static void test_etag_follows_the_checkpoint(void **state)
{
    (void)state;
    char mine[64], same[64], other[64];
    etag_of(&srv, mine, sizeof mine);
    struct server s;
    assert_true(server_start(
        &s, (const char *const[]){"--model", "f32=tests/models/f32", NULL}));
    etag_of(&s, same, sizeof same);
    assert_int_equal(server_stop(&s, 10.0), 0);
    assert_true(server_start(
        &s, (const char *const[]){
                "--model", "f32=tests/models/f32_prefixed_legacy", NULL}));
    etag_of(&s, other, sizeof other);
    assert_int_equal(server_stop(&s, 10.0), 0);
    assert_string_equal(mine, same);
    assert_string_not_equal(mine, other);
}

/* A body over 64 KB is decoded by a worker: the same refusals there. */
static void test_large_body(void **state)
{
    (void)state;
    const size_t words = 20000; /* "cat " each: 80 KB */
    char *body = malloc(words * 4 + 128);
    size_t n = (size_t)snprintf(body, 64, "{\"model\":\"f32\",\"sentence\":\"");
    for (size_t i = 0; i < words; i++) {
        memcpy(body + n, "cat ", 4);
        n += 4;
    }
    snprintf(body + n, 64, "\"}");
    refused(&srv, body, "/sentence",
            (const char *[]){"max_position_embeddings", NULL});
    free(body);
}

static void test_models_listed(void **state)
{
    (void)state;
    struct reply r;
    assert_true(http_call(&srv, "GET", "/models", NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    cJSON *j = parse_reply(&r);
    const cJSON *list = get(j, "models");
    assert_int_equal(cJSON_GetArraySize(list), 3);
    const cJSON *m = cJSON_GetArrayItem(list, 0);
    assert_string_equal(get(m, "name")->valuestring, "f32");
    assert_int_equal(get(m, "layers")->valueint, 2);
    assert_int_equal(get(m, "heads")->valueint, 4);
    assert_int_equal(get(m, "hidden")->valueint, 32);
    assert_int_equal(get(m, "intermediate")->valueint, 64);
    assert_int_equal(get(m, "vocab_size")->valueint, 79);
    assert_int_equal(get(m, "max_positions")->valueint, 40);
    assert_string_equal(get(m, "activation")->valuestring, "gelu");
    assert_true(cJSON_IsTrue(get(m, "lowercase")));
    /* every tensor of the encoder as float32 */
    const size_t H = 32, I = 64, L = 2;
    const size_t weights =
        (79 + 40 + 2) * H + 2 * H +
        L * (4 * (H * H + H) + 2 * H + I * H + I + H * I + H + 2 * H);
    assert_int_equal((size_t)get(m, "weight_bytes")->valuedouble, 4 * weights);
    const cJSON *b = cJSON_GetArrayItem(list, 1);
    assert_string_equal(get(b, "name")->valuestring, "bf16");
    assert_false(cJSON_IsTrue(get(b, "lowercase"))); /* cased */
    assert_int_equal(
        get(cJSON_GetArrayItem(list, 2), "type_vocab_size")->valueint, 1);
    reply_free(&r);
    cJSON_Delete(j);
}

static void test_refusals(void **state)
{
    (void)state;
    refused(&srv, "{\"model\":\"bert\",\"sentence\":\"a\"}", "/model",
            (const char *[]){"\"bert\"", "not loaded", "\"f32\"", "\"bf16\"",
                             "\"one\"", NULL});
    refused(&srv, "{\"model\":3,\"sentence\":\"a\"}", "/model", NULL);
    /* options the model fixes, each named */
    const char *fixed[] = {"heads",  "d_model", "mode",
                           "seed",   "mask",    "positional",
                           "tokens", "params",  "lowercase"};
    const char *values[] = {"4",       "32",         "\"basic\"",
                            "1",       "\"causal\"", "\"rope\"",
                            "[\"a\"]", "{}",         "false"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        char body[256], pointer[64];
        snprintf(body, sizeof body,
                 "{\"model\":\"f32\",\"sentence\":\"a\",\"%s\":%s}", fixed[i],
                 values[i]);
        snprintf(pointer, sizeof pointer, "/%s", fixed[i]);
        refused(&srv, body, pointer,
                (const char *[]){fixed[i], "conflicts with \"model\"", NULL});
    }
    /* without a model, what only a model takes */
    refused(&srv, "{\"sentence\":\"a\",\"sentence_b\":\"b\"}", "/sentence_b",
            (const char *[]){"only with \"model\"", NULL});
    refused(&srv, "{\"sentence\":\"a\",\"layer\":0}", "/layer", NULL);
    refused(&srv, "{\"sentence\":\"a\",\"return\":[\"rollout\"]}", "/return/0",
            NULL);
    /* what a model does not return */
    refused(&srv,
            "{\"model\":\"f32\",\"sentence\":\"a\",\"return\":[\"weights\","
            "\"q\"]}",
            "/return/1", (const char *[]){"not returned for a model", NULL});
    refused(&srv, "{\"model\":\"f32\"}", "/sentence", NULL);
    refused(&srv, "{\"model\":\"f32\",\"sentence\":[1]}", "/sentence", NULL);
    /* layers count from 0 */
    refused(&srv, "{\"model\":\"f32\",\"sentence\":\"a\",\"layer\":2}",
            "/layer", (const char *[]){"0 to 1", NULL});
    refused(&srv, "{\"model\":\"f32\",\"sentence\":\"a\",\"layer\":-1}",
            "/layer", NULL);
    refused(&srv, "{\"model\":\"f32\",\"sentence\":\"a\",\"layer\":\"last\"}",
            "/layer", NULL);
    /* longer than max_position_embeddings (40): 39 words + 2 */
    char *too_long = words_body(41, "f32", NULL);
    refused(&srv, too_long, "/sentence",
            (const char *[]){"40", "max_position_embeddings", NULL});
    free(too_long);
    char *longest = words_body(40, "f32", NULL);
    /* f32's vocabulary has no w0...: every word is one [UNK] */
    cJSON *j = post_expect(&srv, longest, 200);
    assert_int_equal(cJSON_GetArraySize(get(j, "tokens")), 40);
    cJSON_Delete(j);
    free(longest);
    /* a pair on a model of one token type */
    refused(&srv,
            "{\"model\":\"one\",\"sentence\":\"w1\",\"sentence_b\":\"w2\"}",
            "/sentence_b", (const char *[]){"type_vocab_size 1", NULL});
    j = post_expect(&srv, "{\"model\":\"one\",\"sentence\":\"w1 w2\"}", 200);
    cJSON *zeros = cJSON_Parse("[0,0,0,0]");
    assert_true(cJSON_Compare(get(j, "token_type_ids"), zeros, true));
    cJSON_Delete(zeros);
    cJSON_Delete(j);
    /* the same refusals in a URL point at the parameter */
    struct reply r;
    assert_true(http_call(&srv, "GET",
                          "/attention?model=f32&sentence=a&heads=2", NULL, 0,
                          NULL, &r));
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "\"/heads\""));
    reply_free(&r);
    assert_true(http_call(&srv, "GET",
                          "/attention?model=f32&sentence=a&format=png&batch=0",
                          NULL, 0, NULL, &r));
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "\"/batch\""));
    reply_free(&r);
    assert_true(http_call(&srv, "GET", "/attention?sentence=a&view=model", NULL,
                          0, NULL, &r));
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "\"/view\""));
    reply_free(&r);
}

/* ---------------------------------------------------------- PNGs */

/* Decode a PNG: its size, and the text of chunk key into text ("" when
 * there is none). */
static void png_decode(const struct reply *r, unsigned *w, unsigned *h,
                       const char *key, char *text, size_t text_len)
{
    assert_string_equal(r->content_type, "image/png");
    struct decoded_png img;
    decoded_png_read(r, &img);
    *w = img.width;
    *h = img.height;
    const char *found = decoded_png_text(&img, key);
    snprintf(text, text_len, "%s", found ? found : "");
    decoded_png_free(&img);
}

static void get_png(const char *path, unsigned *w, unsigned *h, const char *key,
                    char *text, size_t len)
{
    struct reply r;
    assert_true(http_call(&srv, "GET", path, NULL, 0, NULL, &r));
    if (r.status != 200)
        fail_msg("%s: %ld %.300s", path, r.status, r.body);
    png_decode(&r, w, h, key, text, len);
    reply_free(&r);
}

static void test_png_views(void **state)
{
    (void)state;
    unsigned w, h;
    char text[512];
    /* bare tiles: exactly their cells and gutters. The model view: a row
     * of heads per layer (2 x 4 tiles of 5 x 5 cells of 3 px, a 3 px
     * gutter between them) */
    get_png("/attention?model=f32&sentence=the+cat+sat&format=png&"
            "labels=false&cell=3",
            &w, &h, "attnd:view", text, sizeof text);
    assert_string_equal(text, "model");
    assert_int_equal(w, 4 * 15 + 3 * 3);
    assert_int_equal(h, 2 * 15 + 1 * 3);
    /* one layer's heads: the about-square grid of 4 */
    get_png("/attention?model=f32&sentence=the+cat+sat&format=png&"
            "labels=false&cell=3&layer=1&head=all",
            &w, &h, "attnd:layer", text, sizeof text);
    assert_string_equal(text, "1");
    assert_int_equal(w, 2 * 15 + 3);
    assert_int_equal(h, 2 * 15 + 3);
    /* one head, the mean, the rollout: one matrix */
    const char *one[] = {"&layer=0&head=2", "&layer=1&head=mean",
                         "&view=rollout"};
    const char *head_text[] = {"2", "mean", "all"};
    for (int i = 0; i < 3; i++) {
        char path[256];
        snprintf(path, sizeof path,
                 "/attention?model=f32&sentence=the+cat+sat&format=png&"
                 "labels=false&cell=3%s",
                 one[i]);
        get_png(path, &w, &h, "attnd:head", text, sizeof text);
        assert_string_equal(text, head_text[i]);
        assert_int_equal(w, 15);
        assert_int_equal(h, 15);
    }
    /* labelled: the tokens and model name in text chunks */
    get_png("/attention?model=bf16&sentence=Hello+there&sentence_b=Paris&"
            "format=png&view=rollout",
            &w, &h, "attnd:tokens", text, sizeof text);
    assert_non_null(strstr(text, "\"[CLS]\""));
    assert_non_null(strstr(text, "\"[SEP]\""));
    assert_true(w > 100 && h > 100);
    get_png("/attention?model=bf16&sentence=Hello&format=png", &w, &h,
            "attnd:model", text, sizeof text);
    assert_string_equal(text, "bf16");
    /* what an image cannot show */
    struct reply r;
    const char *bad[] = {
        "/attention?model=f32&sentence=a&format=png&view=heads",
        "/attention?model=f32&sentence=a&format=png&layer=0&head=4",
        "/attention?model=f32&sentence=a&format=png&view=model&layer=1",
        "/attention?model=f32&sentence=a&format=png&view=rollout&head=1",
        "/attention?model=f32&sentence=a&format=png&view=sideways"};
    const char *pointers[] = {"\"/layer\"", "\"/head\"", "\"/layer\"",
                              "\"/head\"", "\"/view\""};
    for (int i = 0; i < 5; i++) {
        assert_true(http_call(&srv, "GET", bad[i], NULL, 0, NULL, &r));
        if (r.status != 422 || !strstr(r.body, pointers[i]))
            fail_msg("%s: %ld %s", bad[i], r.status, r.body);
        reply_free(&r);
    }
}

/* The text of chunk key, which d must have. */
static const char *decoded_text(const struct decoded_png *d, const char *key)
{
    const char *text = decoded_png_text(d, key);
    if (!text)
        fail_msg("no text chunk %s", key);
    return text;
}

/* The red channel of pixel (x, y): the gray level in colormap=gray. */
static unsigned level(const struct decoded_png *d, unsigned x, unsigned y)
{
    return d->rgb[((size_t)y * d->width + x) * 3];
}

/* GET path, which must answer an RGB PNG; decoded into d. */
static void get_decoded(const char *path, struct decoded_png *d)
{
    struct reply r;
    assert_true(http_call(&srv, "GET", path, NULL, 0, NULL, &r));
    if (r.status != 200)
        fail_msg("%s: %ld %.300s", path, r.status, r.body);
    assert_string_equal(r.content_type, "image/png");
    decoded_png_read(&r, d);
    assert_int_equal(d->color_type, PNG_COLOR_TYPE_RGB);
    reply_free(&r);
}

/* GET path's JSON answer (the caller deletes it). */
static cJSON *get_json(const char *path)
{
    struct reply r;
    assert_true(http_call(&srv, "GET", path, NULL, 0, NULL, &r));
    if (r.status != 200)
        fail_msg("%s: %ld %.300s", path, r.status, r.body);
    cJSON *j = parse_reply(&r);
    reply_free(&r);
    return j;
}

/* GET path must be a 422 pointing at pointer. */
static void get_refused(const char *path, const char *pointer)
{
    struct reply r;
    assert_true(http_call(&srv, "GET", path, NULL, 0, NULL, &r));
    char want[64];
    snprintf(want, sizeof want, "\"pointer\":\"%s\"", pointer);
    if (r.status != 422 || !strstr(r.body, want))
        fail_msg("%s: %ld %s", path, r.status, r.body);
    reply_free(&r);
}

/* weights[l][h][i][j] of a JSON answer of every layer. */
static double weight_at(const cJSON *w, size_t l, size_t h, size_t i, size_t j)
{
    const cJSON *row = cJSON_GetArrayItem(
        cJSON_GetArrayItem(cJSON_GetArrayItem(w, (int)l), (int)h), (int)i);
    return cJSON_GetArrayItem(row, (int)j)->valuedouble;
}

/* Pixels of a bare gray matrix at (x0, y0), one per weight, against
 * 255 * weight / top (the colour map's index, rounded). */
static void check_levels(const struct decoded_png *d, unsigned x0, unsigned y0,
                         const cJSON *w, size_t l, size_t h, const size_t *at,
                         size_t n, double top)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            const double want = 255.0 * weight_at(w, l, h, at[i], at[j]) / top;
            const unsigned got = level(d, x0 + (unsigned)j, y0 + (unsigned)i);
            if (fabs((double)got - want) > 1.0)
                fail_msg("layer %zu head %zu [%zu][%zu]: level %u, expected "
                         "%.2f",
                         l, h, i, j, got, want);
        }
}

#define SPECIAL_Q                                                              \
    "model=f32&sentence=the+%5BMASK%5D+sat+%5BSEP%5D+on&sentence_b=a+dog"

/*
 * special=hide: [CLS] A [SEP] B [SEP] drawn without the three the
 * tokenizer added; [MASK] and a [SEP] typed in A stay. The image is of
 * the words alone: its size, its labels (attnd:tokens), its scale (every
 * pixel 255 * weight / the largest weight shown, in gray) and its texts.
 */
static void test_png_special_hidden(void **state)
{
    (void)state;
    cJSON *j = get_json("/attention?" SPECIAL_Q);
    const cJSON *tokens = get(j, "tokens");
    assert_int_equal(cJSON_GetArraySize(tokens), 10);
    const char *all[] = {"[CLS]", "the",   "[MASK]", "sat", "[SEP]",
                         "on",    "[SEP]", "a",      "dog", "[SEP]"};
    for (int i = 0; i < 10; i++)
        assert_string_equal(cJSON_GetArrayItem(tokens, i)->valuestring, all[i]);
    const size_t kept[] = {1, 2, 3, 4, 5, 7, 8};
    const size_t n = sizeof kept / sizeof kept[0];
    const cJSON *w = get(j, "weights");

    /* one head, bare at one pixel per weight, in gray */
    struct decoded_png d;
    get_decoded("/attention?" SPECIAL_Q "&format=png&layer=1&head=2&"
                "labels=false&cell=1&colormap=gray&special=hide",
                &d);
    assert_int_equal(d.width, n);
    assert_int_equal(d.height, n);
    assert_string_equal(decoded_text(&d, "attnd:tokens"),
                        "[\"the\",\"[MASK]\",\"sat\",\"[SEP]\",\"on\",\"a\","
                        "\"dog\"]");
    assert_string_equal(decoded_text(&d, "attnd:special"), "hide");
    double top = 0, bottom = 1;
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++) {
            const double v = weight_at(w, 1, 2, kept[a], kept[b]);
            top = v > top ? v : top;
            bottom = v < bottom ? v : bottom;
        }
    /* the texts are float32's shortest forms, as the JSON's */
    assert_true((float)strtod(decoded_text(&d, "attnd:max"), NULL) ==
                (float)top);
    assert_true((float)strtod(decoded_text(&d, "attnd:min"), NULL) ==
                (float)bottom);
    check_levels(&d, 0, 0, w, 1, 2, kept, n, top);
    decoded_png_free(&d);

    /* shown, every wordpiece */
    get_decoded("/attention?" SPECIAL_Q "&format=png&layer=1&head=2&"
                "labels=false&cell=1&colormap=gray",
                &d);
    assert_int_equal(d.width, 10);
    assert_string_equal(decoded_text(&d, "attnd:special"), "show");
    decoded_png_free(&d);

    /* labelled, at a given cell: fewer rows and columns to draw */
    struct decoded_png shown, hidden;
    get_decoded("/attention?" SPECIAL_Q "&format=png&view=rollout&cell=20",
                &shown);
    get_decoded("/attention?" SPECIAL_Q
                "&format=png&view=rollout&cell=20&special=hide",
                &hidden);
    assert_true(hidden.width < shown.width && hidden.height < shown.height);
    assert_null(strstr(decoded_text(&hidden, "attnd:tokens"), "[CLS]"));
    assert_non_null(strstr(decoded_text(&shown, "attnd:tokens"), "[CLS]"));
    decoded_png_free(&shown);
    decoded_png_free(&hidden);

    /* the model view: 2 x 4 tiles of the words alone, each on its own
     * scale; attnd:tile_max is each tile's largest shown weight */
    get_decoded("/attention?" SPECIAL_Q "&format=png&labels=false&cell=1&"
                "colormap=gray&special=hide",
                &d);
    assert_int_equal(d.width, 4 * n + 3);
    assert_int_equal(d.height, 2 * n + 1);
    cJSON *tile_max = cJSON_Parse(decoded_text(&d, "attnd:tile_max"));
    assert_int_equal(cJSON_GetArraySize(tile_max), 8);
    for (size_t k = 0; k < 8; k++) {
        double t = 0;
        for (size_t a = 0; a < n; a++)
            for (size_t b = 0; b < n; b++) {
                const double v = weight_at(w, k / 4, k % 4, kept[a], kept[b]);
                t = v > t ? v : t;
            }
        assert_true((float)cJSON_GetArrayItem(tile_max, (int)k)->valuedouble ==
                    (float)t);
        check_levels(&d, (unsigned)((k % 4) * (n + 1)),
                     (unsigned)((k / 4) * (n + 1)), w, k / 4, k % 4, kept, n,
                     t);
    }
    cJSON_Delete(tile_max);
    decoded_png_free(&d);
    cJSON_Delete(j);

    /* nothing but [CLS] and [SEP] to hide, a value it does not take, and
     * no model */
    get_refused("/attention?model=f32&sentence=&format=png&special=hide",
                "/special");
    get_refused("/attention?model=f32&sentence=a&format=png&special=some",
                "/special");
    get_refused("/attention?sentence=a&format=png&special=hide", "/special");
}

/*
 * color_scale: the model view colours each tile from 0 to its own largest
 * weight by default, so a tile of small weights still reaches the top of
 * the colour map; shared, every tile is on the scale of the largest
 * weight of all. Checked pixel by pixel against the JSON's weights.
 */
static void test_png_color_scale(void **state)
{
    (void)state;
    const char *q = "/attention?model=f32&sentence=the+cat+sat+on+the+mat";
    char path[256];
    snprintf(path, sizeof path, "%s", q);
    cJSON *j = get_json(path);
    const cJSON *w = get(j, "weights");
    const size_t n = (size_t)cJSON_GetArraySize(get(j, "tokens"));
    size_t at[64];
    for (size_t i = 0; i < n; i++)
        at[i] = i;
    double tile[8], all = 0, smallest = 1;
    for (size_t k = 0; k < 8; k++) {
        tile[k] = 0;
        for (size_t a = 0; a < n; a++)
            for (size_t b = 0; b < n; b++) {
                const double v = weight_at(w, k / 4, k % 4, a, b);
                tile[k] = v > tile[k] ? v : tile[k];
            }
        all = tile[k] > all ? tile[k] : all;
        smallest = tile[k] < smallest ? tile[k] : smallest;
    }
    /* the test means something only if the tiles' tops differ */
    assert_true(smallest < 0.9 * all);
    const char *scales[] = {"", "&color_scale=tile", "&color_scale=shared"};
    const char *names[] = {"tile", "tile", "shared"};
    for (size_t s = 0; s < 3; s++) {
        struct decoded_png d;
        snprintf(path, sizeof path,
                 "%s&format=png&labels=false&cell=1&colormap=gray%s", q,
                 scales[s]);
        get_decoded(path, &d);
        assert_string_equal(decoded_text(&d, "attnd:color_scale"), names[s]);
        for (size_t k = 0; k < 8; k++) {
            const unsigned x0 = (unsigned)((k % 4) * (n + 1));
            const unsigned y0 = (unsigned)((k / 4) * (n + 1));
            const bool own = names[s][0] == 't';
            check_levels(&d, x0, y0, w, k / 4, k % 4, at, n,
                         own ? tile[k] : all);
            /* a tile's brightest pixel: white per tile, its share of the
             * largest weight of all when shared */
            unsigned brightest = 0;
            for (unsigned y = 0; y < n; y++)
                for (unsigned x = 0; x < n; x++)
                    if (level(&d, x0 + x, y0 + y) > brightest)
                        brightest = level(&d, x0 + x, y0 + y);
            if (own)
                assert_int_equal(brightest, 255);
            else if (tile[k] == smallest)
                assert_true(brightest < 255 * 0.9);
        }
        decoded_png_free(&d);
    }
    /* one layer's heads share a scale unless asked */
    struct decoded_png d;
    snprintf(path, sizeof path, "%s&format=png&layer=0&head=all", q);
    get_decoded(path, &d);
    assert_string_equal(decoded_text(&d, "attnd:color_scale"), "shared");
    decoded_png_free(&d);
    cJSON_Delete(j);
}

/* -------------------------------------------------- metrics */

static void test_metrics_per_model(void **state)
{
    (void)state;
    double before = 0, flops_before = 0, after = 0, flops_after = 0;
    assert_true(metric_read(&srv, "127.0.0.1",
                            "attnd_model_requests_total{model=\"one\"}",
                            &before));
    assert_true(metric_read(&srv, "127.0.0.1",
                            "attnd_model_flops_total{model=\"one\"}",
                            &flops_before));
    cJSON *j =
        post_expect(&srv, "{\"model\":\"one\",\"sentence\":\"w1\"}", 200);
    cJSON_Delete(j);
    assert_true(metric_read(&srv, "127.0.0.1",
                            "attnd_model_requests_total{model=\"one\"}",
                            &after));
    assert_true(metric_read(&srv, "127.0.0.1",
                            "attnd_model_flops_total{model=\"one\"}",
                            &flops_after));
    assert_true(after == before + 1);
    assert_true(flops_after > flops_before);
}

/* ------------------------------------------------ start-up */

/* attnd with args stops during start-up with status 2 and one line that
 * has each of words. */
static void fails_to_start(const char *const *args, const char *const *words)
{
    struct server s;
    assert_false(server_start(&s, args));
    assert_int_equal(s.start_exit, 2);
    size_t len = 0;
    char *log = read_file(s.log_path, &len);
    assert_non_null(log);
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += log[i] == '\n';
    if (lines != 1)
        fail_msg("%zu lines: %s", lines, log);
    for (size_t i = 0; words[i]; i++)
        if (!strstr(log, words[i]))
            fail_msg("the line \"%s\" lacks \"%s\"", log, words[i]);
    free(log);
    unlink(s.log_path);
}

static void test_startup_failures(void **state)
{
    (void)state;
    fails_to_start((const char *[]){"--model", "x=/nonexistent/dir", NULL},
                   (const char *[]){"'x'", "/nonexistent/dir", NULL});
    fails_to_start((const char *[]){"--model", "tests/models/f32", NULL},
                   (const char *[]){"NAME=DIR", NULL});
    fails_to_start((const char *[]){"--model", "a=tests/models/f32", "--model",
                                    "a=tests/models/bf16_legacy", NULL},
                   (const char *[]){"'a'", "twice", NULL});
    fails_to_start(
        (const char *[]){"--model", "bad/name=tests/models/f32", NULL},
        (const char *[]){"bad/name", NULL});
    /* a truncated safetensors file: the first model loads, the second
     * does not, and nothing is served */
    char dir[400], cmd[1200];
    snprintf(dir, sizeof dir, "%s/truncated", tmp_root);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(cmd, sizeof cmd,
             "cp tests/models/f32/config.json tests/models/f32/vocab.txt %s/ "
             "&& head -c 30000 tests/models/f32/model.safetensors > "
             "%s/model.safetensors",
             dir, dir);
    assert_int_equal(system(cmd), 0);
    char spec[450];
    snprintf(spec, sizeof spec, "t=%s", dir);
    fails_to_start((const char *[]){"--model", "ok=tests/models/f32", "--model",
                                    spec, NULL},
                   (const char *[]){"'t'", "model.safetensors", NULL});
    remove_tree(dir);
}

static void test_models_from_environment(void **state)
{
    (void)state;
    setenv("ATTND_MODELS", "a=tests/models/f32,b=tests/models/f16_prefixed", 1);
    struct server s;
    const bool up = server_start(&s, NULL);
    unsetenv("ATTND_MODELS");
    assert_true(up);
    struct reply r;
    assert_true(http_call(&s, "GET", "/models", NULL, 0, NULL, &r));
    cJSON *j = parse_reply(&r);
    const cJSON *list = get(j, "models");
    assert_int_equal(cJSON_GetArraySize(list), 2);
    assert_string_equal(get(cJSON_GetArrayItem(list, 1), "name")->valuestring,
                        "b");
    assert_int_equal(get(cJSON_GetArrayItem(list, 1), "layers")->valueint, 3);
    reply_free(&r);
    cJSON_Delete(j);
    cJSON *k =
        post_expect(&s, "{\"model\":\"b\",\"sentence\":\"the cat\"}", 200);
    cJSON_Delete(k);
    assert_int_equal(server_stop(&s, 10.0), 0);
    /* the flag wins over the variable */
    setenv("ATTND_MODELS", "a=/nonexistent", 1);
    const bool flag = server_start(
        &s, (const char *[]){"--model", "c=tests/models/f32", NULL});
    unsetenv("ATTND_MODELS");
    assert_true(flag);
    assert_true(http_call(&s, "GET", "/models", NULL, 0, NULL, &r));
    assert_non_null(strstr(r.body, "\"c\""));
    assert_null(strstr(r.body, "\"a\""));
    reply_free(&r);
    assert_int_equal(server_stop(&s, 10.0), 0);
}

/* ---------------------------------------------- bert-base's size */

/*
 * Images of 512 wordpieces drawn a weight a cell (pool=none: pooled, they
 * would fit) past the drawing's caps (the model view of 144
 * tiles of 32768 px, twelve heads of 8192 px, a rollout wider than 32768
 * px with its labels): refused with the drawing's 422 at /cell before the
 * encoder runs. Each answers in a fraction of the time the largest request
 * took (forward_seconds, mostly the encoder's), and /metrics counts neither
 * a request nor a FLOP of the model for them.
 */
static void giant_views_refused(const struct server *s, double forward_seconds)
{
    const char *views[] = {
        "/attention?format=png&view=model&cell=64&pool=none",
        "/attention?format=png&view=heads&cell=16&pool=none",
        "/attention?format=png&view=rollout&cell=64&pool=none"};
    char *body = words_body(512, "base", NULL);
    char *layer0 = words_body(512, "base", "\"layer\":0");
    double requests = 0, flops = 0;
    assert_true(metric_read(s, "127.0.0.1",
                            "attnd_model_requests_total{model=\"base\"}",
                            &requests));
    assert_true(metric_read(s, "127.0.0.1",
                            "attnd_model_flops_total{model=\"base\"}", &flops));
    for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
        struct reply r;
        const double t0 = clock_seconds();
        assert_true(post_json(s, views[i], i == 1 ? layer0 : body, &r));
        const double took = clock_seconds() - t0;
        if (r.status != 422 || !strstr(r.body, "\"pointer\":\"/cell\"") ||
            !strstr(r.body, "px"))
            fail_msg("%s: %ld %s", views[i], r.status, r.body);
        print_message(
            "%s refused in %.3f s (the largest request took %.2f s)\n",
            views[i], took, forward_seconds);
        assert_true(took < forward_seconds / 4);
        reply_free(&r);
    }
    double requests_after = 0, flops_after = 0;
    assert_true(metric_read(s, "127.0.0.1",
                            "attnd_model_requests_total{model=\"base\"}",
                            &requests_after));
    assert_true(metric_read(s, "127.0.0.1",
                            "attnd_model_flops_total{model=\"base\"}",
                            &flops_after));
    assert_true(requests_after == requests);
    assert_true(flops_after == flops);
    free(body);
    free(layer0);
}

/*
 * A random checkpoint of bert-base's sizes (12 layers, hidden 768, 12
 * heads, 3072, 30522 tokens, 512 positions; 436 MB of F32), written here.
 * With a memory budget of 256 MiB: one 128-token request's peak resident
 * memory stays under the weights + 64 MiB; the largest request the limits
 * allow (512 wordpieces, every layer's weights, the hidden states and the
 * rollout) is answered within the budget; one more wordpiece is refused
 * naming the limit; a budget too small for it refuses it for its size.
 */
static void test_bert_base_size(void **state)
{
    (void)state;
    char dir[400];
    snprintf(dir, sizeof dir, "%s/base", tmp_root);
    const struct ckpt base = {.layers = 12,
                              .hidden = 768,
                              .heads = 12,
                              .intermediate = 3072,
                              .vocab = 30522,
                              .positions = 512,
                              .types = 2};
    const size_t weights = write_checkpoint(dir, &base, 20261122);
    char spec[450];
    snprintf(spec, sizeof spec, "base=%s", dir);
    const size_t budget = (size_t)256 << 20;
    struct server s;
    const char *args[] = {
        "--model", spec, "--max-memory", "268435456", "--threads", "1", NULL};
    assert_true(server_start(&s, args));

    /* one 128-token request */
    char *body = words_body(128, "base", NULL);
    cJSON *j = post_expect(&s, body, 200);
    assert_int_equal(cJSON_GetArraySize(get(j, "tokens")), 128);
    const cJSON *w = get(j, "weights");
    assert_int_equal(cJSON_GetArraySize(w), 12);
    cJSON_Delete(j);
    free(body);
    const size_t peak128 = status_bytes(s.pid, "VmHWM:");
    print_message("bert-base sizes: %zu MiB of float32 weights; peak RSS "
                  "serving one 128-token request %zu MiB (the limit: weights "
                  "+ 64 MiB = %zu MiB)\n",
                  weights >> 20, peak128 >> 20,
                  (weights + ((size_t)64 << 20)) >> 20);
    if (!UNDER_ASAN)
        assert_true(peak128 < weights + ((size_t)64 << 20));

    /* the largest the limits allow: 512 positions, everything returned */
    body = words_body(512, "base",
                      "\"return\":[\"weights\",\"mean_weights\","
                      "\"hidden_states\",\"rollout\"],\"precision\":2");
    struct reply r;
    const double forward_t0 = clock_seconds();
    assert_true(post_json(&s, "/attention", body, &r));
    const double forward_seconds = clock_seconds() - forward_t0;
    if (r.status != 200)
        fail_msg("512 wordpieces: %ld %.300s", r.status, r.body);
    /* [12][12][512][512] weights in the text */
    assert_true(r.len > (size_t)12 * 12 * 512 * 512 * 2);
    /* the rollout, 512 x 512 at 2 digits, ends the text */
    assert_non_null(strstr(r.body + r.len - ((size_t)4 << 20), "\"rollout\""));
    assert_non_null(strstr(r.body, "\"hidden_states\""));
    reply_free(&r);
    free(body);
    const size_t peak = status_bytes(s.pid, "VmHWM:");
    print_message("the largest request: peak RSS %zu MiB (weights %zu + "
                  "budget %zu MiB)\n",
                  peak >> 20, weights >> 20, budget >> 20);
    if (!UNDER_ASAN)
        assert_true(peak < weights + budget + ((size_t)64 << 20));
    double reserved = -1;
    assert_true(
        metric_read(&s, "127.0.0.1", "attnd_memory_reserved_bytes", &reserved));
    assert_true(reserved == 0);
    giant_views_refused(&s, forward_seconds);
    /* one wordpiece more */
    body = words_body(513, "base", NULL);
    refused(&s, body, "/sentence",
            (const char *[]){"512", "max_position_embeddings", NULL});
    free(body);
    assert_int_equal(server_stop(&s, 10.0), 0);

    /* a budget of 64 MiB cannot hold every layer's weights of 512; no
     * grace on SIGTERM: computations in flight are cancelled */
    const char *small[] = {
        "--model", spec, "--max-memory", "67108864", "--drain-seconds",
        "0",       NULL};
    assert_true(server_start(&s, small));
    body = words_body(512, "base", NULL);
    cJSON *k = post_expect(&s, body, 422);
    assert_non_null(strstr(get(k, "detail")->valuestring, "memory"));
    cJSON_Delete(k);
    free(body);
    /* and one layer of it fits */
    body = words_body(512, "base", "\"layer\":11");
    k = post_expect(&s, body, 200);
    assert_int_equal(cJSON_GetArraySize(get(k, "weights")), 12); /* heads */
    cJSON_Delete(k);

    /* SIGTERM while it computes (about 2 s on one core): the encoder is
     * cancelled between units of work, the client told so, and the
     * server exits 0 */
    struct post_call call = {.s = &s, .body = body};
    pthread_t tid;
    pthread_create(&tid, NULL, post_call_run, &call);
    double running = 0;
    for (int i = 0; i < 3000 && running < 1; i++) {
        assert_true(metric_read(&s, "127.0.0.1", "attnd_computations_running",
                                &running));
        if (running < 1)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    assert_true(running >= 1);
    const double t0 = clock_seconds();
    assert_int_equal(server_stop(&s, 10.0), 0);
    const double stop_seconds = clock_seconds() - t0;
    pthread_join(tid, NULL);
    assert_true(call.ok);
    if (call.r.status != 503 || !strstr(call.r.body, "cancelled"))
        fail_msg("cancelled: %ld %s", call.r.status, call.r.body);
    reply_free(&call.r);
    print_message("SIGTERM during a 512-token request: stopped in %.2f s\n",
                  stop_seconds);
    assert_true(stop_seconds < 1.5);
    free(body);
    remove_tree(dir);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_f32),
        cmocka_unit_test(test_golden_bf16_legacy),
        cmocka_unit_test(test_defaults_and_get),
        cmocka_unit_test(test_models_listed),
        cmocka_unit_test(test_etag_follows_the_checkpoint),
        cmocka_unit_test(test_large_body),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_png_views),
        cmocka_unit_test(test_png_special_hidden),
        cmocka_unit_test(test_png_color_scale),
        cmocka_unit_test(test_metrics_per_model),
        cmocka_unit_test(test_startup_failures),
        cmocka_unit_test(test_models_from_environment),
        cmocka_unit_test(test_bert_base_size),
        cmocka_unit_test(test_decoders),
        cmocka_unit_test(test_gemma_served),
        cmocka_unit_test(test_logit_lens),
        cmocka_unit_test(test_head_stats),
        cmocka_unit_test(test_value_weighted),
        cmocka_unit_test(test_sparse_weights),
        cmocka_unit_test(test_induction_probe),
    };
    const int failed = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return failed;
}
