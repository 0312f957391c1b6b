/*
 * test_gguf_model.c - models loaded from GGUF files (model/gguf_model.h)
 * against their goldens (tests/models/golden/gguf/, written by
 * tests/models/generate_gguf.py with llama.cpp's own converter, quantizer
 * and tokenizer):
 *
 * - every pass over each of the 18 files (llama, qwen2 and gpt2; F32,
 *   F16, BF16, Q8_0, Q4_K_M and Q6_K) against a float64 pass over the
 *   weights as gguf-py dequantizes them, on the safetensors goldens'
 *   tolerances;
 * - the last position's logits against llama.cpp's, and the greedy tokens
 *   against its greedy tokens where no step is a near tie;
 * - the same F32 weights through the safetensors folder and the GGUF file;
 * - llama's permuted q and k: the other pairing moves the logits;
 * - token ids of 40 texts on four real vocabularies and the three small
 *   models', as llama.cpp's tokenizer gives them;
 * - each malformed or unsupported file refused with one line naming it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "files.h"
#include "goldens.h"
#include "model/gguf.h"
#include "model/gguf_model.h"
#include "model/family.h"
#include "model/gguf_tokenizer.h"
#include "model/model.h"
#include "sampling.h"
#include "transformer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The safetensors goldens' tolerances (test_model.c): attention weights
 * absolute, hidden states and logits absolute plus relative. */
#define WEIGHT_TOL 2e-5
#define HIDDEN_ATOL 1e-4
#define HIDDEN_RTOL 1e-4

/* llama.cpp's logits against attnd's, within 1e-4 + rtol max|logit|.
 * F32: both float32 over the same weights, in other orders of summation
 * (GPT-2's llama.cpp rounds the GELU's input and output to float16, by
 * its table). Other types: llama.cpp rounds the activations for its dot
 * products, to float16 or bfloat16 against F16 and BF16 weights and to
 * 8-bit blocks against quantized ones; attnd does not. The bounds are
 * about twice the differences measured (docs/models.md). */
static double peer_rtol(const char *arch, const char *type)
{
    if (!strcmp(type, "F32"))
        return strcmp(arch, "gpt2") ? 1e-5 : 1e-3;
    if (!strcmp(type, "F16"))
        return 5e-3;
    if (!strcmp(type, "BF16"))
        return 3e-2;
    return 0.15;
}

/* A greedy step closer than this (the gap of the two largest logits over
 * the largest |logit|) may rightly go either way in float32. */
#define NEAR_TIE 1e-3

static const char *const archs[] = {"llama", "qwen2", "gpt2"};
static const char *const types[] = {"F32",  "F16",    "BF16",
                                    "Q8_0", "Q4_K_M", "Q6_K"};

static struct model *load_ok(const char *path)
{
    struct model *m = NULL;
    char err[600] = "";
    if (!model_load("g", path, &m, err, sizeof err))
        fail_msg("model_load %s: %s", path, err);
    return m;
}

static const cJSON *get_item(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v)
        fail_msg("no \"%s\" in the golden", key);
    return v;
}

static double number(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* A pass over ids with every output a golden has. */
static void forward(const struct model *m, const uint32_t *ids, size_t n,
                    unsigned want, struct xf_result *r)
{
    struct xf_run run = {
        .ids = ids, .n = n, .want = want, .layer = XF_ALL_LAYERS, .threads = 2};
    struct xf_plan plan;
    struct attn_error err = {0};
    if (xf_plan(&m->xf, &run, &plan, &err) || xf_forward(&plan, NULL, r, &err))
        fail_msg("xf_forward: %s", err.message);
}

/* got against want over n values, each within atol + rtol |want|, or,
 * where the values are logits (scaled), within atol + rtol max|want|: a
 * float32 sum's error grows with its largest terms, and the logits of
 * these small random models reach 70. Returns the largest error over
 * that bound's atol + rtol scale, for the report. */
static double check_close(const char *what, const char *file, size_t c,
                          const float *got, const double *want, size_t n,
                          double atol, double rtol, bool scaled)
{
    double top = 0.0, worst = 0.0;
    for (size_t i = 0; i < n; i++)
        top = fmax(top, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        const double scale = scaled ? top : fabs(want[i]);
        const double err = fabs(got[i] - want[i]);
        if (!(err <= atol + rtol * scale))
            fail_msg("%s case %zu: %s %zu is %.9g, want %.9g (largest |%s| "
                     "%.3g)",
                     file, c, what, i, (double)got[i], want[i], what, top);
        worst = fmax(worst, err / (atol + rtol * scale));
    }
    return worst;
}

/* The config a loader derives, as the golden records it. */
static void check_config(const struct model *m, const cJSON *cfg,
                         const char *arch)
{
    const struct xf_model *x = &m->xf;
    assert_string_equal(m->family->model_type,
                        cJSON_GetObjectItem(cfg, "model_type")->valuestring);
    assert_int_equal(x->layers, number(cfg, "layers"));
    assert_int_equal(x->heads, number(cfg, "heads"));
    assert_int_equal(x->kv_heads, number(cfg, "kv_heads"));
    assert_int_equal(x->head_dim, number(cfg, "head_dim"));
    assert_int_equal(x->hidden, number(cfg, "hidden"));
    assert_int_equal(x->intermediate, number(cfg, "intermediate"));
    assert_int_equal(x->vocab_size, number(cfg, "vocab_size"));
    // the file's eps is a float32
    assert_true(fabs(x->norm_eps - number(cfg, "norm_eps")) <=
                1e-7 * number(cfg, "norm_eps"));
    const cJSON *freq = cJSON_GetObjectItem(cfg, "inv_freq");
    if (cJSON_IsArray(freq)) {
        const struct attn_rotary *rope = &x->kind[0].rope;
        // llama's rows were permuted by the converter for pairs (2i, 2i+1)
        assert_int_equal(rope->pairing, !strcmp(arch, "llama")
                                            ? ATTN_ROPE_INTERLEAVED
                                            : ATTN_ROPE_HALF);
        const size_t pairs = x->head_dim / 2;
        assert_int_equal((size_t)cJSON_GetArraySize(freq), pairs);
        for (size_t i = 0; i < pairs; i++) {
            const double want = cJSON_GetArrayItem(freq, (int)i)->valuedouble;
            // rope_freqs' factors are float32
            if (!(fabs(rope->inv_freq[i] - want) <= 1e-6 * want))
                fail_msg("%s: inv_freq %zu is %.12g, want %.12g", arch, i,
                         rope->inv_freq[i], want);
        }
    }
    assert_int_equal(m->extra.tied,
                     cJSON_IsTrue(cJSON_GetObjectItem(cfg, "tied")));
}

/* One file against its golden. */
static void check_file(const char *arch, const char *type)
{
    char path[256], golden_path[256], file[64];
    snprintf(file, sizeof file, "%s-%s", arch, type);
    snprintf(path, sizeof path, "tests/models/gguf/%s.gguf", file);
    snprintf(golden_path, sizeof golden_path,
             "tests/models/golden/gguf/%s.json", file);
    cJSON *golden = test_read_json(golden_path);
    struct model *m = load_ok(path);
    assert_string_equal(m->source.container, "gguf");
    assert_string_equal(m->source.file_type, type);
    check_config(m, cJSON_GetObjectItem(golden, "config"), arch);
    const struct xf_model *x = &m->xf;
    const double rtol = peer_rtol(arch, type);
    size_t n_case = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(golden, "cases"))
    {
        const char *s = cJSON_GetObjectItem(c, "sentence")->valuestring;
        struct tok_encoding enc;
        struct attn_error err = {0};
        if (tok_encode(&m->tokenizer, s, strlen(s), NULL, 0,
                       &(struct tok_options){.max_tokens = 4096}, &enc, &err))
            fail_msg("%s: tok_encode: %s", file, err.message);
        size_t n;
        double *ids = golden_doubles(cJSON_GetObjectItem(c, "ids"), &n);
        assert_int_equal(enc.count, n);
        for (size_t i = 0; i < n; i++)
            if (enc.ids[i] != ids[i])
                fail_msg("%s case %zu: token %zu is %u, want %.0f", file,
                         n_case, i, (unsigned)enc.ids[i], ids[i]);
        free(ids);
        struct xf_result r;
        forward(m, enc.ids, enc.count,
                XF_WANT_WEIGHTS | XF_WANT_HIDDEN | XF_WANT_LOGITS, &r);
        double *w = golden_doubles(cJSON_GetObjectItem(c, "attentions"), &n);
        assert_int_equal(n, r.layers * r.heads * r.n * r.n);
        check_close("attention weight", file, n_case, r.weights, w, n,
                    WEIGHT_TOL, 0, false);
        free(w);
        double *hs =
            golden_doubles(cJSON_GetObjectItem(c, "hidden_states"), &n);
        assert_int_equal(n, (r.layers + 1) * r.n * r.hidden);
        check_close("hidden state", file, n_case, r.hidden_states, hs, n,
                    HIDDEN_ATOL, HIDDEN_RTOL, false);
        free(hs);
        double *lg = golden_doubles(cJSON_GetObjectItem(c, "logits"), &n);
        assert_int_equal(n, x->vocab_size);
        check_close("logit", file, n_case, r.logits, lg, n, HIDDEN_ATOL,
                    HIDDEN_RTOL, true);
        free(lg);
        double *peer =
            golden_doubles(cJSON_GetObjectItem(c, "llamacpp_logits"), &n);
        assert_int_equal(n, x->vocab_size);
        const double worst = check_close("llama.cpp's logit", file, n_case,
                                         r.logits, peer, n, 1e-4, rtol, true);
        print_message("%s case %zu: llama.cpp's logits at %.2f of the bound\n",
                      file, n_case, worst);
        free(peer);
        xf_result_free(&r);
        tok_encoding_free(&enc);
        n_case++;
    }
    assert_true(n_case >= 3);
    golden_greedy(m, file, cJSON_GetObjectItem(golden, "greedy"), NEAR_TIE);
    // llama.cpp's own steps: a tie within its difference from attnd may
    // go either way
    golden_greedy(m, file, cJSON_GetObjectItem(golden, "llamacpp_greedy"),
                  fmax(NEAR_TIE, 2 * rtol));
    model_free(m);
    cJSON_Delete(golden);
}

static void test_llama_files(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        check_file(archs[0], types[t]);
}

static void test_qwen2_files(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        check_file(archs[1], types[t]);
}

static void test_gpt2_files(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        check_file(archs[2], types[t]);
}

/* a (the folder's) and b (the GGUF file's) within 1e-5 of the largest
 * |a| (at least 1). */
static void agree(const char *arch, const char *what, const float *a,
                  const float *b, size_t n)
{
    float top = 1.0f, worst = 0.0f;
    for (size_t i = 0; i < n; i++)
        top = fmaxf(top, fabsf(a[i]));
    for (size_t i = 0; i < n; i++) {
        worst = fmaxf(worst, fabsf(a[i] - b[i]));
        if (!(fabsf(a[i] - b[i]) <= 1e-5f * top))
            fail_msg("%s: %s %zu is %.9g from the folder, %.9g from the GGUF "
                     "file (largest %.3g)",
                     arch, what, i, (double)a[i], (double)b[i], (double)top);
    }
    print_message("%s: %ss differ by at most %.3g (largest %.3g)\n", arch, what,
                  (double)worst, (double)top);
}

/* The same F32 weights from the checkpoint folder and from the GGUF file
 * llama.cpp's converter made of it: the same ids, and a pass within 1e-5
 * of each output's scale (llama's q and k rows are permuted in the file
 * and turned by the other pairing, so its sums run in another order). */
static void test_two_containers(void **state)
{
    (void)state;
    static const char *const folders[] = {"llama_q", "qwen2_q", "gpt2_q"};
    static const char text[] = "Heads attend; 12345 tokens, caf\xc3\xa9!";
    for (size_t a = 0; a < 3; a++) {
        char dir[128], path[128];
        snprintf(dir, sizeof dir, "tests/models/%s", folders[a]);
        snprintf(path, sizeof path, "tests/models/gguf/%s-F32.gguf", archs[a]);
        struct model *st = load_ok(dir), *gg = load_ok(path);
        assert_string_equal(st->source.container, "safetensors");
        struct tok_encoding e1, e2;
        struct attn_error err = {0};
        const struct tok_options opts = {.max_tokens = 4096};
        assert_int_equal(tok_encode(&st->tokenizer, text, strlen(text), NULL, 0,
                                    &opts, &e1, &err),
                         ATTN_OK);
        assert_int_equal(tok_encode(&gg->tokenizer, text, strlen(text), NULL, 0,
                                    &opts, &e2, &err),
                         ATTN_OK);
        assert_int_equal(e1.count, e2.count);
        assert_memory_equal(e1.ids, e2.ids, e1.count * sizeof *e1.ids);
        struct xf_result r1, r2;
        const unsigned want = XF_WANT_WEIGHTS | XF_WANT_HIDDEN | XF_WANT_LOGITS;
        forward(st, e1.ids, e1.count, want, &r1);
        forward(gg, e2.ids, e2.count, want, &r2);
        const size_t nw = r1.layers * r1.heads * r1.n * r1.n;
        const size_t nh = (r1.layers + 1) * r1.n * r1.hidden;
        agree(archs[a], "attention weight", r1.weights, r2.weights, nw);
        agree(archs[a], "hidden state", r1.hidden_states, r2.hidden_states, nh);
        agree(archs[a], "logit", r1.logits, r2.logits, st->xf.vocab_size);
        xf_result_free(&r1);
        xf_result_free(&r2);
        tok_encoding_free(&e1);
        tok_encoding_free(&e2);
        model_free(st);
        model_free(gg);
    }
}

/* llama.cpp's converter permutes llama's q and k rows so that its
 * rotation pairs (2i, 2i+1); read with transformers' pairing (i, i + d/2)
 * instead, the same file's logits move far past any tolerance. */
static void test_llama_pairing_matters(void **state)
{
    (void)state;
    cJSON *golden = test_read_json("tests/models/golden/gguf/llama-F32.json");
    struct model *m = load_ok("tests/models/gguf/llama-F32.gguf");
    const cJSON *c =
        cJSON_GetArrayItem(cJSON_GetObjectItem(golden, "cases"), 0);
    size_t n;
    double *ids = golden_doubles(cJSON_GetObjectItem(c, "ids"), &n);
    uint32_t *tok = malloc(n * sizeof *tok);
    for (size_t i = 0; i < n; i++)
        tok[i] = (uint32_t)ids[i];
    double *want = golden_doubles(cJSON_GetObjectItem(c, "logits"), &n);
    double moved[2] = {0, 0};
    for (int pairing = 0; pairing < 2; pairing++) {
        m->xf.kind[0].rope.pairing =
            pairing ? ATTN_ROPE_HALF : ATTN_ROPE_INTERLEAVED;
        struct xf_result r;
        forward(m, tok,
                (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(c, "ids")),
                XF_WANT_LOGITS, &r);
        for (size_t i = 0; i < n; i++)
            moved[pairing] = fmax(moved[pairing], fabs(r.logits[i] - want[i]) /
                                                      fmax(1.0, fabs(want[i])));
        xf_result_free(&r);
    }
    assert_true(moved[0] <= HIDDEN_RTOL);
    if (!(moved[1] > 1e-2))
        fail_msg("the other pairing moves the logits by only %g", moved[1]);
    free(tok);
    free(ids);
    free(want);
    model_free(m);
    cJSON_Delete(golden);
}

/* The Hub's split form, made by llama.cpp's llama-gguf-split from
 * llama-Q4_K_M.gguf: three parts, loaded from the first, the same model
 * to the bit. */
static void test_split(void **state)
{
    (void)state;
    struct model *whole = load_ok("tests/models/gguf/llama-Q4_K_M.gguf");
    struct model *split =
        load_ok("tests/models/gguf/split/llama-Q4_K_M-00001-of-00003.gguf");
    assert_int_equal(whole->shards.count, 1);
    assert_int_equal(split->shards.count, 3);
    assert_string_equal(split->source.file_type, "Q4_K_M");
    for (size_t i = 0; i < 3; i++) /* every part holds tensors */
        assert_true(split->shards.shard[i].count > 0);
    static const uint32_t ids[] = {359, 262, 285, 312, 300, 315, 358, 30};
    const size_t n = sizeof ids / sizeof ids[0];
    struct xf_result a, b;
    const unsigned want = XF_WANT_WEIGHTS | XF_WANT_LOGITS;
    forward(whole, ids, n, want, &a);
    forward(split, ids, n, want, &b);
    assert_memory_equal(a.logits, b.logits,
                        whole->xf.vocab_size * sizeof *a.logits);
    assert_memory_equal(a.weights, b.weights,
                        a.layers * a.heads * n * n * sizeof *a.weights);
    xf_result_free(&a);
    xf_result_free(&b);
    model_free(whole);
    model_free(split);
}

/* ------------------------------------------------------- more families */

/* A family's small checkpoint converted to an F32 GGUF by llama.cpp's
 * converter (tests/models/gguf/more/), held to llama.cpp's logits for the
 * safetensors golden's ids, and where llama.cpp computes the network as
 * transformers does, to that golden too. */
struct more_file {
    const char *folder;
    bool as_transformers; /* false: llama.cpp computes it otherwise */
    double peer_rtol;     /* llama.cpp's logits, of the largest |logit| */
    size_t peer_past;     /* 0, or llama.cpp is compared on cases of more
                             than this many tokens only */
};

static const struct more_file more_files[] = {
    {"qwen3", true, 1e-5, 0},
    {"llama2", true, 1e-5, 0},
    /* the llama architecture has no sliding window: this checkpoint's (5)
     * is shorter than every sentence */
    {"mistral", false, 1e-5, 0},
    {"olmo2", true, 1e-5, 0},
    /* GeGLU's tanh GELU looked up in llama.cpp's float16 table */
    {"gemma", true, 1e-3, 0},
    /* llama.cpp scales Gemma 2's and 3's scores by head_dim^-1/2 (16
     * here), not by the checkpoints' query_pre_attn_scalar (64 and 24),
     * as the released 2B, 9B, 1B, 4B and 12B have it */
    {"gemma2", false, 1e-3, 0},
    {"gemma3", false, 2e-3, 0}, /* seven layers of it: 1.1e-3 measured */
    /* llama.cpp computes Phi-3 without its sliding window (5 here,
     * shorter than every sentence) */
    {"phi3", false, 1e-5, 0},
    /* longrope's long factors past 12 tokens, as transformers switches
     * by the sequence's length; llama.cpp switches by the context it was
     * started with (gguf_logits starts it longer than the prompt), so a case
     * of 12 tokens, short factors here, is held to transformers only */
    {"phi3_longrope", true, 1e-5, 12},
};

static void check_more(const struct more_file *mf)
{
    char path[256];
    snprintf(path, sizeof path, "tests/models/gguf/more/%s-F32.gguf",
             mf->folder);
    struct model *m = load_ok(path);
    snprintf(path, sizeof path, "tests/models/golden/gguf/more/%s.json",
             mf->folder);
    cJSON *peer = test_read_json(path);
    snprintf(path, sizeof path, "tests/models/golden/%s.json", mf->folder);
    cJSON *hf = test_read_json(path);
    const struct xf_model *x = &m->xf;
    for (int k = 0; k < cJSON_GetArraySize(get_item(peer, "cases")); k++) {
        const cJSON *pc = cJSON_GetArrayItem(get_item(peer, "cases"), k);
        const cJSON *hc = cJSON_GetArrayItem(get_item(hf, "cases"), k);
        // llama.cpp's ids of the sentence
        const char *text = get_item(pc, "sentence")->valuestring;
        struct tok_encoding enc;
        struct attn_error err = {0};
        if (tok_encode(&m->tokenizer, text, strlen(text), NULL, 0,
                       &(struct tok_options){.max_tokens = 4096}, &enc, &err))
            fail_msg("%s: %s", mf->folder, err.message);
        size_t n;
        double *want = golden_doubles(get_item(pc, "ids"), &n);
        assert_int_equal(enc.count, n);
        for (size_t i = 0; i < n; i++)
            if (enc.ids[i] != (uint32_t)want[i])
                fail_msg("%s case %d: token %zu is %u, llama.cpp's %.0f",
                         mf->folder, k, i, (unsigned)enc.ids[i], want[i]);
        free(want);
        tok_encoding_free(&enc);
        // a pass over the golden's ids
        double *ids = golden_doubles(get_item(hc, "ids"), &n);
        uint32_t *tok = malloc(n * sizeof *tok);
        for (size_t i = 0; i < n; i++)
            tok[i] = (uint32_t)ids[i];
        struct xf_result r;
        forward(m, tok, n, XF_WANT_WEIGHTS | XF_WANT_HIDDEN | XF_WANT_LOGITS,
                &r);
        size_t nl;
        double *lg = golden_doubles(get_item(pc, "llamacpp_logits"), &nl);
        assert_int_equal(nl, x->vocab_size);
        if (n > mf->peer_past)
            check_close("llama.cpp's logit", mf->folder, (size_t)k, r.logits,
                        lg, nl, 1e-4, mf->peer_rtol, true);
        free(lg);
        if (mf->as_transformers) {
            double *w = golden_doubles(get_item(hc, "attentions"), &nl);
            check_close("attention weight", mf->folder, (size_t)k, r.weights, w,
                        nl, WEIGHT_TOL, 0, false);
            free(w);
            double *h = golden_doubles(get_item(hc, "hidden_states"), &nl);
            check_close("hidden state", mf->folder, (size_t)k, r.hidden_states,
                        h, nl, HIDDEN_ATOL, HIDDEN_RTOL, false);
            free(h);
            double *l = golden_doubles(get_item(hc, "logits"), &nl);
            check_close("logit", mf->folder, (size_t)k, r.logits, l, nl,
                        HIDDEN_ATOL, HIDDEN_RTOL, true);
            free(l);
        }
        xf_result_free(&r);
        free(tok);
        free(ids);
    }
    golden_greedy(m, mf->folder, get_item(peer, "llamacpp_greedy"),
                  fmax(NEAR_TIE, 2 * mf->peer_rtol));
    cJSON_Delete(hf);
    cJSON_Delete(peer);
    model_free(m);
}

static void test_more_families(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof more_files / sizeof more_files[0]; i++)
        check_more(&more_files[i]);
}

/* ------------------------------------------------------------ token ids */

/* The tokenizer of a GGUF file, its metadata read in place. */
struct vocab_file {
    char *bytes;
    struct gguf_file g;
    struct tokenizer t;
};

static bool vocab_open(const char *path, struct vocab_file *v, char *err,
                       size_t err_len)
{
    size_t len;
    memset(v, 0, sizeof *v);
    v->bytes = test_read_file(path, &len);
    if (!gguf_parse((const uint8_t *)v->bytes, len, &v->g, err, err_len))
        return false;
    const struct gguf_kv *tokens = gguf_find(&v->g, "tokenizer.ggml.tokens");
    return gguf_tokenizer_open(&v->g, tokens ? (size_t)tokens->count : 0, &v->t,
                               err, err_len);
}

static void vocab_close(struct vocab_file *v)
{
    tok_free(&v->t);
    gguf_free(&v->g);
    free(v->bytes);
}

/* Every file of a golden of llama.cpp's ids (tokens.json's layout): each
 * text's ids as llama.cpp gives them; returns the files. */
static size_t check_ids(const char *golden)
{
    cJSON *doc = test_read_json(golden);
    const cJSON *texts = cJSON_GetObjectItem(doc, "texts");
    const cJSON *file;
    size_t files = 0, checked = 0;
    cJSON_ArrayForEach(file, cJSON_GetObjectItem(doc, "files"))
    {
        char path[256], err[400] = "";
        snprintf(path, sizeof path, "tests/models/gguf/%s", file->string);
        struct vocab_file v;
        if (!vocab_open(path, &v, err, sizeof err))
            fail_msg("%s: %s", path, err);
        files++;
        for (int i = 0; i < cJSON_GetArraySize(texts); i++) {
            const char *text = cJSON_GetArrayItem(texts, i)->valuestring;
            struct tok_encoding enc;
            struct attn_error aerr = {0};
            if (tok_encode(&v.t, text, strlen(text), NULL, 0,
                           &(struct tok_options){.max_tokens = 100000}, &enc,
                           &aerr))
                fail_msg("%s text %d: %s", file->string, i, aerr.message);
            size_t n;
            double *want = golden_doubles(cJSON_GetArrayItem(file, i), &n);
            bool same = n == enc.count;
            for (size_t k = 0; same && k < n; k++)
                same = enc.ids[k] == (uint32_t)want[k];
            if (!same) {
                char got[512] = "", exp[512] = "";
                for (size_t k = 0; k < enc.count && strlen(got) < 480; k++)
                    snprintf(got + strlen(got), sizeof got - strlen(got), " %u",
                             (unsigned)enc.ids[k]);
                for (size_t k = 0; k < n && strlen(exp) < 480; k++)
                    snprintf(exp + strlen(exp), sizeof exp - strlen(exp),
                             " %.0f", want[k]);
                fail_msg("%s text %d (%s): ids%s, llama.cpp's%s", file->string,
                         i, text, got, exp);
            }
            free(want);
            tok_encoding_free(&enc);
            checked++;
        }
        vocab_close(&v);
    }
    print_message("%s: %zu texts on %zu vocabularies\n", golden, checked,
                  files);
    cJSON_Delete(doc);
    return files;
}

/* Four real vocabularies and the three test models', and the gpt2 test
 * vocabulary under SmolLM's pre-tokenizer (digits split off alone). */
static void test_token_ids(void **state)
{
    (void)state;
    assert_int_equal(check_ids("tests/models/golden/gguf/tokens.json"), 7);
    assert_int_equal(check_ids("tests/models/golden/gguf/pre_variants.json"),
                     1);
}

/* ------------------------------------------------------------- refusals */

/* A copy of a fixture's bytes, patched and written into a folder of its
 * own as file, loaded there. */
struct patched {
    char *bytes;
    size_t len;
    char dir[64];
};

static void patched_read(struct patched *p, const char *fixture)
{
    char path[256];
    snprintf(path, sizeof path, "tests/models/gguf/%s", fixture);
    p->bytes = test_read_file(path, &p->len);
    snprintf(p->dir, sizeof p->dir, "/tmp/attnd-gguf-XXXXXX");
    assert_non_null(mkdtemp(p->dir));
}

/* The offset of the first text in p (it must be there). */
static size_t find(const struct patched *p, const char *text)
{
    const size_t n = strlen(text);
    for (size_t at = 0; at + n <= p->len; at++)
        if (!memcmp(p->bytes + at, text, n))
            return at;
    fail_msg("'%s' is not in the file", text);
    return 0;
}

/* Replace the first from with to, as long. */
static void replace(struct patched *p, const char *from, const char *to)
{
    assert_int_equal(strlen(from), strlen(to));
    memcpy(p->bytes + find(p, from), to, strlen(to));
}

/* Write p as file (its first len bytes) and load it: it must fail with a
 * line holding each of the wanted texts. */
static void load_refused(const struct patched *p, const char *file,
                         const char *want1, const char *want2)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", p->dir, file);
    struct model *m = NULL;
    char err[600] = "";
    if (model_load("bad", path, &m, err, sizeof err))
        fail_msg("%s loaded; want '%s'", file, want1);
    assert_null(m);
    if (!strstr(err, want1) || (want2 && !strstr(err, want2)))
        fail_msg("%s: '%s' does not say '%s'%s%s", file, err, want1,
                 want2 ? " and " : "", want2 ? want2 : "");
    assert_non_null(strstr(err, "model 'bad'"));
    assert_null(strchr(err, '\n'));
}

static void refused(struct patched *p, const char *file, size_t len,
                    const char *want1, const char *want2)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", p->dir, file);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p->bytes, 1, len, f), len);
    fclose(f);
    load_refused(p, file, want1, want2);
    unlink(path);
}

static void patched_done(struct patched *p)
{
    rmdir(p->dir);
    free(p->bytes);
}

/* Free p's bytes but keep its folder, for patched_reread(). */
static void patched_done_keep(struct patched *p)
{
    free(p->bytes);
    p->bytes = NULL;
}

/* Another fixture's bytes into p, in the same folder. */
static void patched_reread(struct patched *p, const char *fixture)
{
    char path[256];
    snprintf(path, sizeof path, "tests/models/gguf/%s", fixture);
    p->bytes = test_read_file(path, &p->len);
}

/* p's bytes written as file in its folder, left there. */
static void write_part(const struct patched *p, const char *file)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", p->dir, file);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p->bytes, 1, p->len, f), p->len);
    fclose(f);
}

static void unlink_in(const struct patched *p, const char *file)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", p->dir, file);
    unlink(path);
}

/* A u32 metadata value, found by its key. */
static void set_u32(struct patched *p, const char *key, uint32_t v)
{
    const size_t at = find(p, key) + strlen(key);
    uint32_t type;
    memcpy(&type, p->bytes + at, 4);
    assert_int_equal(type, 4); /* UINT32 */
    memcpy(p->bytes + at + 4, &v, 4);
}

/* A u16 metadata value, found by its key. */
static void set_u16(struct patched *p, const char *key, uint16_t v)
{
    const size_t at = find(p, key) + strlen(key);
    uint32_t type;
    memcpy(&type, p->bytes + at, 4);
    assert_int_equal(type, 2); /* UINT16 */
    memcpy(p->bytes + at + 4, &v, 2);
}

/* A STRING metadata value, found by its key, rewritten as long. */
static void set_string(struct patched *p, const char *key, const char *to)
{
    const size_t at = find(p, key) + strlen(key);
    uint32_t type;
    uint64_t len;
    memcpy(&type, p->bytes + at, 4);
    memcpy(&len, p->bytes + at + 4, 8);
    assert_int_equal(type, 8); /* STRING */
    assert_int_equal(len, strlen(to));
    memcpy(p->bytes + at + 12, to, len);
}

/* A tensor's ggml type, found by its name in the tensor infos. */
static void set_tensor_type(struct patched *p, const char *name, uint32_t type)
{
    char bytes[80];
    const uint64_t n = strlen(name);
    memcpy(bytes, &n, 8);
    memcpy(bytes + 8, name, n);
    size_t at = 0;
    for (; at + 8 + n <= p->len; at++)
        if (!memcmp(p->bytes + at, bytes, 8 + n))
            break;
    assert_true(at + 8 + n <= p->len);
    at += 8 + n;
    uint32_t dims;
    memcpy(&dims, p->bytes + at, 4);
    memcpy(p->bytes + at + 4 + 8 * dims, &type, 4);
}

static void test_refusals(void **state)
{
    (void)state;
    struct patched p;
    patched_read(&p, "llama-Q4_K_M.gguf");
    // the file cut short: the container's reader names the offset
    refused(&p, "cut.gguf", p.len / 2, "cut.gguf", "offset");
    refused(&p, "empty.gguf", 0, "empty.gguf", NULL);
    patched_done(&p);

    patched_read(&p, "llama-Q4_K_M.gguf");
    replace(&p, "general.architecture", "general.architecturf");
    refused(&p, "a.gguf", p.len, "no key 'general.architecture'", NULL);
    patched_done(&p);

    patched_read(&p, "qwen2-F32.gguf");
    set_string(&p, "general.architecture", "qwen9");
    refused(&p, "a.gguf", p.len,
            "general.architecture 'qwen9' is not supported", NULL);
    patched_done(&p);

    patched_read(&p, "llama-Q8_0.gguf");
    set_string(&p, "tokenizer.ggml.pre", "llama-bpx");
    refused(&p, "pre.gguf", p.len, "tokenizer.ggml.pre 'llama-bpx'",
            "llama-bpe");
    patched_done(&p);

    patched_read(&p, "gpt2-Q8_0.gguf");
    set_string(&p, "tokenizer.ggml.model", "gpt3");
    refused(&p, "tok.gguf", p.len, "tokenizer.ggml.model 'gpt3'", NULL);
    patched_done(&p);

    patched_read(&p, "llama-Q6_K.gguf");
    replace(&p, "blk.1.ffn_up.weight", "blk.1.ffn_uq.weight");
    refused(&p, "name.gguf", p.len, "tensor 'blk.1.ffn_up.weight': missing",
            NULL);
    patched_done(&p);

    patched_read(&p, "llama-F32.gguf");
    set_u32(&p, "llama.feed_forward_length", 512);
    refused(&p, "ffn.gguf", p.len, "but the metadata gives [512, 256]", "ffn_");
    patched_done(&p);

    patched_read(&p, "llama-F16.gguf");
    set_tensor_type(&p, "output_norm.weight", 26); /* I32, F32's size */
    refused(&p, "type.gguf", p.len,
            "tensor 'output_norm.weight': dtype I32 is not supported", "Q4_K");
    patched_done(&p);

    patched_read(&p, "qwen2-Q8_0.gguf");
    replace(&p, "blk.0.attn_q.bias", "blk.0.attn_q.bia_");
    refused(&p, "extra.gguf", p.len, "tensor 'blk.0.attn_q.bias': missing",
            NULL);
    patched_done(&p);

    // a split is opened from its first part, whose siblings must be there
    patched_read(&p, "llama-Q8_0.gguf");
    refused(&p, "m-00002-of-00003.gguf", p.len, "from its first part", NULL);
    refused(&p, "m-00001-of-00003.gguf", p.len, "m-00001-of-00003.gguf",
            "no key 'split.count'");
    patched_done(&p);
    // the key a family's message names, as the file names it
    patched_read(&p, "llama-F32.gguf");
    set_u32(&p, "llama.attention.head_count", 5);
    refused(&p, "heads.gguf", p.len, "num_attention_heads",
            "(the file's llama.attention.head_count)");
    patched_done(&p);
    // a rotary over part of each head, which the llama architecture has not
    patched_read(&p, "llama-F32.gguf");
    set_u32(&p, "llama.rope.dimension_count", 32);
    refused(&p, "rot.gguf", p.len, "key 'llama.rope.dimension_count' is 32",
            "turns 64 values");
    patched_done(&p);
    // longrope's factors of another type
    patched_read(&p, "more/phi3_longrope-F32.gguf");
    set_tensor_type(&p, "rope_factors_long.weight", 26);
    refused(&p, "lr.gguf", p.len,
            "tensor 'rope_factors_long.weight' is I32 of 6 values", NULL);
    patched_done(&p);
    // llama.cpp's frequencies under another name: not the network's
    patched_read(&p, "llama-Q8_0.gguf");
    replace(&p, "rope_freqs.weight", "rope_freqx.weight");
    refused(&p, "rf.gguf", p.len, "tensor 'rope_freqx.weight': not part of",
            NULL);
    patched_done(&p);
    // a split whose third part holds the second's tensors again
    patched_read(&p, "split/llama-Q4_K_M-00001-of-00003.gguf");
    write_part(&p, "d-00001-of-00003.gguf");
    patched_done_keep(&p);
    patched_reread(&p, "split/llama-Q4_K_M-00002-of-00003.gguf");
    write_part(&p, "d-00002-of-00003.gguf");
    set_u16(&p, "split.no", 2);
    write_part(&p, "d-00003-of-00003.gguf");
    load_refused(&p, "d-00001-of-00003.gguf", "d-00003-of-00003.gguf",
                 "is in 'd-00002-of-00003.gguf' too");
    unlink_in(&p, "d-00003-of-00003.gguf");
    unlink_in(&p, "d-00001-of-00003.gguf");
    unlink_in(&p, "d-00002-of-00003.gguf");
    patched_done(&p);
    // a split's second part missing
    patched_read(&p, "split/llama-Q4_K_M-00001-of-00003.gguf");
    refused(&p, "llama-Q4_K_M-00001-of-00003.gguf", p.len,
            "llama-Q4_K_M-00002-of-00003.gguf", "No such file");
    patched_done(&p);
}

/* A GGUF file of another name (an Ollama blob, sha256-...) is known by
 * its magic. */
static void test_known_by_magic(void **state)
{
    (void)state;
    struct patched p;
    patched_read(&p, "qwen2-Q6_K.gguf");
    char path[256];
    snprintf(path, sizeof path, "%s/sha256-0123abcd", p.dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p.bytes, 1, p.len, f), p.len);
    fclose(f);
    struct model *m = load_ok(path);
    assert_string_equal(m->source.container, "gguf");
    assert_string_equal(m->source.file_type, "Q6_K");
    model_free(m);
    unlink(path);
    patched_done(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_ids),
        cmocka_unit_test(test_llama_files),
        cmocka_unit_test(test_qwen2_files),
        cmocka_unit_test(test_gpt2_files),
        cmocka_unit_test(test_two_containers),
        cmocka_unit_test(test_llama_pairing_matters),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_known_by_magic),
        cmocka_unit_test(test_more_families),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
