/*
 * test_model.c - the checkpoint loader of server/model/: every committed
 * variant of tests/models/ loads and, through the core's tokenizer and
 * encoder, matches its goldens; every malformed file, made here from a
 * good one in a temporary folder, fails with one line naming the file, the
 * tensor and what is wrong, and leaves nothing behind.
 *
 * Tolerances as tests/unit/test_bert.c: weights and rollout within 2e-5
 * absolute, hidden states within 1e-4 + 1e-4 * |reference|.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "files.h"
#include "goldens.h"
#include "model/family.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "sampling.h"

#include <cJSON.h>
#include <math.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WEIGHT_TOL 2e-5
#define HIDDEN_ATOL 1e-4
#define HIDDEN_RTOL 1e-4

/* ---------------------------------------------------------------- files */

static void spit(const char *path, const void *bytes, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(bytes, 1, len, fp), len);
    fclose(fp);
}

static void path_of(char *out, const char *dir, const char *file)
{
    snprintf(out, 1024, "%s/%s", dir, file);
}

/* A fresh temporary copy of tests/models/<variant>. */
static char *copy_variant(const char *variant)
{
    char tmpl[] = "/tmp/attnd-model-XXXXXX";
    char *dir = mkdtemp(tmpl);
    assert_non_null(dir);
    dir = strdup(dir);
    const char *files[] = {"config.json", "vocab.txt", "model.safetensors",
                           "tokenizer_config.json"};
    for (int i = 0; i < 4; i++) {
        char from[1024], to[1024];
        snprintf(from, sizeof from, "tests/models/%s/%s", variant, files[i]);
        if (access(from, R_OK) != 0)
            continue;
        path_of(to, dir, files[i]);
        size_t len;
        char *bytes = test_read_file(from, &len);
        spit(to, bytes, len);
        free(bytes);
    }
    return dir;
}

/* dir and every file a test wrote in it. */
static void remove_dir(char *dir)
{
    DIR *d = opendir(dir);
    const struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[1024];
        path_of(p, dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
    free(dir);
}

/* ------------------------------------------------ rewriting checkpoints */

/* A safetensors file taken apart: its header as JSON and its data. */
struct st_parts {
    cJSON *header;
    unsigned char *data;
    size_t data_len;
};

static struct st_parts st_split(const char *dir)
{
    char p[1024];
    path_of(p, dir, "model.safetensors");
    size_t len;
    unsigned char *bytes = (unsigned char *)test_read_file(p, &len);
    uint64_t n;
    memcpy(&n, bytes, 8);
    struct st_parts parts = {
        .header = cJSON_ParseWithLength((char *)bytes + 8, n),
        .data_len = len - 8 - n,
    };
    assert_non_null(parts.header);
    parts.data = malloc(parts.data_len + 1);
    memcpy(parts.data, bytes + 8 + n, parts.data_len);
    free(bytes);
    return parts;
}

/* Write header text (padded with spaces to pad bytes) and data into the
 * folder's file. */
static void st_write_file(const char *dir, const char *file, const char *header,
                          size_t pad, const unsigned char *data,
                          size_t data_len)
{
    const size_t hl = strlen(header);
    const size_t n = (hl + pad - 1) / pad * pad;
    unsigned char *out = malloc(8 + n + data_len);
    const uint64_t n64 = n;
    memcpy(out, &n64, 8);
    memset(out + 8, ' ', n);
    memcpy(out + 8, header, hl);
    if (data_len)
        memcpy(out + 8 + n, data, data_len);
    char p[1024];
    path_of(p, dir, file);
    spit(p, out, 8 + n + data_len);
    free(out);
}

/* The same into model.safetensors. */
static void st_write(const char *dir, const char *header, size_t pad,
                     const unsigned char *data, size_t data_len)
{
    st_write_file(dir, "model.safetensors", header, pad, data, data_len);
}

/* Write the parts as they are (offsets as edited). */
static void st_join(const char *dir, struct st_parts *parts, size_t pad)
{
    char *text = cJSON_PrintUnformatted(parts->header);
    st_write(dir, text, pad, parts->data, parts->data_len);
    free(text);
    cJSON_Delete(parts->header);
    free(parts->data);
}

/* Rebuild: every tensor of the header, in header order, with offsets made
 * consistent. A tensor whose entry has "replace_bytes": N gets N bytes of
 * replacement (from the caller's buffer) instead of its own. */
static void st_rebuild(const char *dir, struct st_parts *parts,
                       const unsigned char *replacement)
{
    size_t total = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, parts->header)
    {
        if (strcmp(e->string, "__metadata__") == 0)
            continue;
        cJSON *rep = cJSON_GetObjectItemCaseSensitive(e, "replace_bytes");
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        total += rep ? (size_t)rep->valuedouble
                     : (size_t)(cJSON_GetArrayItem(off, 1)->valuedouble -
                                cJSON_GetArrayItem(off, 0)->valuedouble);
    }
    unsigned char *data = malloc(total + 1);
    size_t at = 0;
    cJSON_ArrayForEach(e, parts->header)
    {
        if (strcmp(e->string, "__metadata__") == 0)
            continue;
        cJSON *rep = cJSON_GetObjectItemCaseSensitive(e, "replace_bytes");
        cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        const size_t b = (size_t)cJSON_GetArrayItem(off, 0)->valuedouble;
        const size_t len =
            rep ? (size_t)rep->valuedouble
                : (size_t)cJSON_GetArrayItem(off, 1)->valuedouble - b;
        memcpy(data + at, rep ? replacement : parts->data + b, len);
        cJSON_ReplaceItemInArray(off, 0, cJSON_CreateNumber((double)at));
        cJSON_ReplaceItemInArray(off, 1,
                                 cJSON_CreateNumber((double)(at + len)));
        if (rep)
            cJSON_DeleteItemFromObjectCaseSensitive(e, "replace_bytes");
        at += len;
    }
    free(parts->data);
    parts->data = data;
    parts->data_len = total;
    st_join(dir, parts, 8);
}

static cJSON *entry(struct st_parts *parts, const char *name)
{
    cJSON *e = cJSON_GetObjectItemCaseSensitive(parts->header, name);
    if (!e)
        fail_msg("no tensor %s in the header", name);
    return e;
}

static void set_pair(cJSON *e, const char *key, double a, double b)
{
    cJSON *arr = cJSON_CreateArray();
    cJSON_AddItemToArray(arr, cJSON_CreateNumber(a));
    cJSON_AddItemToArray(arr, cJSON_CreateNumber(b));
    cJSON_ReplaceItemInObjectCaseSensitive(e, key, arr);
}

static double offset_of(cJSON *e, int i)
{
    return cJSON_GetArrayItem(
               cJSON_GetObjectItemCaseSensitive(e, "data_offsets"), i)
        ->valuedouble;
}

/* ---------------------------------------------------------- expectations */

/* Loading dir fails with one line holding every fragment (NULL-ended). */
static void expect_failure(const char *dir, ...)
{
    struct model *m = (struct model *)1;
    char err[600] = "";
    assert_false(model_load("tiny", dir, &m, err, sizeof err));
    if (getenv("ATTND_TEST_VERBOSE"))
        fprintf(stderr, "  %s\n", err);
    assert_null(m);
    assert_null(strchr(err, '\n'));
    if (strncmp(err, "model 'tiny': ", 14) != 0)
        fail_msg("\"%s\" does not name the model", err);
    va_list ap;
    va_start(ap, dir);
    for (const char *f; (f = va_arg(ap, const char *));)
        if (!strstr(err, f))
            fail_msg("\"%s\" lacks \"%s\"", err, f);
    va_end(ap);
}

static struct model *load_ok(const char *dir)
{
    struct model *m = NULL;
    char err[600] = "";
    if (!model_load("tiny", dir, &m, err, sizeof err))
        fail_msg("model_load %s: %s", dir, err);
    return m;
}

/* ------------------------------------------------- the goldens replayed */

static bool max_abs_diff_ok(const float *got, const double *want, size_t n,
                            double tol)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol))
            return false;
    return true;
}

/* A case's attention flow against the reference's, a maximum flow found
 * by another algorithm (NetworkX's preflow-push) on the float64 weights:
 * the weights' tolerance, since a flow is a sum of their products. */
static void check_flow(const char *variant, size_t n_case, const cJSON *c,
                       const struct xf_result *r)
{
    size_t n;
    double *want = golden_doubles(cJSON_GetObjectItem(c, "flow"), &n);
    assert_int_equal(n, r->n * r->n);
    if (!max_abs_diff_ok(r->flow, want, n, WEIGHT_TOL))
        fail_msg("%s case %zu: the attention flow differs", variant, n_case);
    free(want);
}

/* A case's value-weighted attention (every layer's, per head and summed
 * over heads) against the float64 reference's, which forms the sum as
 * vectors where the C code uses Gram matrices: hidden-state tolerances,
 * since the norms are of vectors of the hidden width. */
static void check_value_weighted(const char *variant, size_t n_case,
                                 const cJSON *c, const struct xf_result *r)
{
    const struct {
        const char *key;
        const float *got;
        size_t count;
    } parts[] = {
        {"value_weighted", r->measures.value_weighted,
         r->layers * r->heads * r->n * r->n},
        {"value_weighted_sum", r->measures.value_weighted_sum,
         r->layers * r->n * r->n},
    };
    for (size_t k = 0; k < 2; k++) {
        size_t n;
        double *want = golden_doubles(cJSON_GetObjectItem(c, parts[k].key), &n);
        assert_int_equal(n, parts[k].count);
        for (size_t i = 0; i < n; i++)
            if (!(fabs(parts[k].got[i] - want[i]) <=
                  HIDDEN_ATOL + HIDDEN_RTOL * fabs(want[i])))
                fail_msg("%s case %zu: %s %zu is %g, want %g", variant, n_case,
                         parts[k].key, i, (double)parts[k].got[i], want[i]);
        free(want);
    }
}

static void check_goldens(const struct model *m, const char *variant)
{
    char path[1024];
    snprintf(path, sizeof path, "tests/models/golden/%s.json", variant);
    size_t len;
    char *text = test_read_file(path, &len);
    cJSON *golden = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(golden);
    assert_int_equal(
        m->xf.layers,
        (size_t)cJSON_GetObjectItem(golden, "layers")->valuedouble);
    const cJSON *c;
    size_t n_cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(golden, "cases"))
    {
        const char *a = cJSON_GetObjectItem(c, "sentence")->valuestring;
        const cJSON *jb = cJSON_GetObjectItem(c, "sentence_b");
        const char *b = cJSON_IsString(jb) ? jb->valuestring : NULL;
        struct tok_encoding enc;
        struct attn_error aerr = {0};
        if (tok_encode(&m->tokenizer, a, strlen(a), b, b ? strlen(b) : 0,
                       &(struct tok_options){.max_tokens = m->xf.max_positions},
                       &enc, &aerr))
            fail_msg("%s: tok_encode: %s", variant, aerr.message);
        const cJSON *tokens = cJSON_GetObjectItem(c, "tokens");
        const cJSON *types = cJSON_GetObjectItem(c, "type_ids");
        assert_int_equal(enc.count, (size_t)cJSON_GetArraySize(tokens));
        for (size_t i = 0; i < enc.count; i++) {
            assert_string_equal(
                tok_token_text(&m->tokenizer, enc.ids[i]),
                cJSON_GetArrayItem(tokens, (int)i)->valuestring);
            // the golden's types are clipped to the model's type vocabulary
            const int t = (int)cJSON_GetArrayItem(types, (int)i)->valuedouble;
            assert_int_equal(enc.type_ids[i] < m->xf.type_vocab_size
                                 ? enc.type_ids[i]
                                 : m->xf.type_vocab_size - 1,
                             t);
        }
        struct xf_run run = {.ids = enc.ids,
                             .type_ids = enc.type_ids,
                             .n = enc.count,
                             .want = XF_WANT_WEIGHTS | XF_WANT_HIDDEN |
                                     XF_WANT_ROLLOUT | XF_WANT_VALUE_WEIGHTED |
                                     XF_WANT_FLOW,
                             .layer = XF_ALL_LAYERS,
                             .threads = 2};
        struct xf_result r;
        struct xf_plan plan;
        if (xf_plan(&m->xf, &run, &plan, &aerr) ||
            xf_forward(&plan, NULL, &r, &aerr))
            fail_msg("%s: xf_forward: %s", variant, aerr.message);
        size_t n;
        check_value_weighted(variant, n_cases, c, &r);
        check_flow(variant, n_cases, c, &r);
        double *w = golden_doubles(cJSON_GetObjectItem(c, "attentions"), &n);
        assert_int_equal(n, r.layers * r.heads * r.n * r.n);
        if (!(max_abs_diff_ok(r.weights, w, n, WEIGHT_TOL)))
            fail_msg("%s case %zu: attentions differ", variant, n_cases);
        free(w);
        double *hs =
            golden_doubles(cJSON_GetObjectItem(c, "hidden_states"), &n);
        assert_int_equal(n, (r.layers + 1) * r.n * r.hidden);
        for (size_t i = 0; i < n; i++)
            if (!(fabs(r.hidden_states[i] - hs[i]) <=
                  HIDDEN_ATOL + HIDDEN_RTOL * fabs(hs[i])))
                fail_msg("%s case %zu: hidden state %zu is %g, want %g",
                         variant, n_cases, i, (double)r.hidden_states[i],
                         hs[i]);
        free(hs);
        double *roll = golden_doubles(cJSON_GetObjectItem(c, "rollout"), &n);
        assert_int_equal(n, r.n * r.n);
        if (!(max_abs_diff_ok(r.rollout, roll, n, WEIGHT_TOL)))
            fail_msg("%s case %zu: rollout differs", variant, n_cases);
        free(roll);
        xf_result_free(&r);
        tok_encoding_free(&enc);
        n_cases++;
    }
    assert_true(n_cases >= 3);
    cJSON_Delete(golden);
}

static void test_variants_load_and_match(void **state)
{
    (void)state;
    const struct {
        const char *name;
        bool lower, converted;
        size_t layers, hidden;
        attn_dtype dtype;
    } variants[] = {
        {"f32", true, false, 2, 32, ATTN_F32},
        {"f16_prefixed", true, true, 3, 48, ATTN_F16},
        {"bf16_legacy", false, true, 2, 64, ATTN_BF16},
        {"f32_prefixed_legacy", true, false, 2, 32, ATTN_F32},
    };
    for (size_t i = 0; i < 4; i++) {
        char dir[256];
        snprintf(dir, sizeof dir, "tests/models/%s", variants[i].name);
        struct model *m = load_ok(dir);
        assert_string_equal(m->name, "tiny");
        assert_int_equal(m->do_lower_case, variants[i].lower);
        assert_int_equal(m->xf.layers, variants[i].layers);
        assert_int_equal(m->xf.hidden, variants[i].hidden);
        // matrices are used in place from the mapping, at the width they
        // are stored in; F16 and BF16 vectors (biases, norms) converted
        assert_int_equal(m->converted_bytes != 0, variants[i].converted);
        const char *map = m->shards.shard[0].map;
        assert_true((const char *)m->xf.word_emb.data > map &&
                    (const char *)m->xf.word_emb.data <
                        map + m->shards.shard[0].bytes);
        assert_int_equal(m->xf.word_emb.dtype, variants[i].dtype);
        assert_int_equal(m->layers[0].up_w.dtype, variants[i].dtype);
        assert_true(m->converted_bytes < m->weight_bytes);
        check_goldens(m, variants[i].name);
        model_free(m);
    }
    model_free(NULL);
}

/* A header whose data starts at an odd place: F32 tensors are copied out,
 * not read unaligned, and the numbers are the same. */
/* The golden's config entry key, as a number; NAN when null. */
static double golden_number(const cJSON *config, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(config, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* Phi-3's longrope as its golden records it (null: none): the short
 * rotary is the kind's, the long one its long rotary, switched past
 * original_max_position_embeddings, both with the attention factor. */
static void check_longrope(const struct xf_layer_kind *k, const cJSON *lr)
{
    if (cJSON_IsNull(lr)) {
        assert_int_equal(k->long_after, 0);
        return;
    }
    assert_int_equal(k->long_after,
                     golden_number(lr, "original_max_position_embeddings"));
    const double att = golden_number(lr, "attention_factor");
    assert_true(fabs(k->rope.factor - att) <= 1e-12 * att);
    assert_true(fabs(k->long_rope.factor - att) <= 1e-12 * att);
    assert_int_equal(k->long_rope.dims, k->rope.dims);
    assert_int_equal(k->long_rope.pairing, ATTN_ROPE_HALF);
    const char *keys[2] = {"inv_freq_short", "inv_freq_long"};
    const double *have[2] = {k->rope.inv_freq, k->long_rope.inv_freq};
    for (size_t t = 0; t < 2; t++) {
        const cJSON *f = cJSON_GetObjectItem(lr, keys[t]);
        assert_int_equal((size_t)cJSON_GetArraySize(f), k->rope.dims / 2);
        for (size_t i = 0; i < k->rope.dims / 2; i++) {
            const double want = cJSON_GetArrayItem(f, (int)i)->valuedouble;
            assert_true(fabs(have[t][i] - want) <= 1e-12 * want);
        }
    }
}

/* What a golden's config records of the block beside the sizes, each
 * key checked where the golden has one (generate_neox_phi3_olmo2.py's
 * goldens do): where the norms sit, what q and k are normed over, a
 * parallel residual, the values of a head the rotary turns, and the
 * factor on its cos and sin. */
static void check_block_keys(const struct xf_model *x, const cJSON *cfg)
{
    const cJSON *parallel = cJSON_GetObjectItem(cfg, "parallel_residual");
    if (parallel)
        assert_int_equal(x->arch.parallel, cJSON_IsTrue(parallel));
    const struct attn_rotary *rope = &x->kind[0].rope;
    const double dims = golden_number(cfg, "rotary_dims");
    if (!isnan(dims))
        assert_int_equal(rope->dims ? rope->dims : x->head_dim, (size_t)dims);
    const double factor = golden_number(cfg, "attention_factor");
    if (!isnan(factor))
        assert_true(fabs((rope->factor ? rope->factor : 1.0) - factor) <=
                    1e-12 * factor);
    const cJSON *longrope = cJSON_GetObjectItem(cfg, "longrope");
    if (longrope)
        check_longrope(&x->kind[0], longrope);
    const cJSON *place = cJSON_GetObjectItem(cfg, "norm_placement");
    if (cJSON_IsString(place)) /* "pre", or "post: x + norm(attn(x)) ..." */
        assert_int_equal(x->arch.norm_place,
                         strncmp(place->valuestring, "post", 4)
                             ? XF_NORM_BEFORE
                             : XF_NORM_OUTPUT);
    const cJSON *over = cJSON_GetObjectItem(cfg, "qk_norm_over");
    if (over) { /* "projection", "head", or null: none */
        const bool whole =
            cJSON_IsString(over) && !strcmp(over->valuestring, "projection");
        assert_int_equal(x->arch.qk_norm_whole, whole);
        assert_int_equal(x->arch.qk_norm || whole,
                         cJSON_IsTrue(cJSON_GetObjectItem(cfg, "qk_norm")));
    }
}

/* A decoder's loaded config against what its golden records, then each
 * sentence through its tokenizer (ids, added, texts) and its network
 * (weights, causal and windowed; hidden states; rollout; logits), then its
 * greedy golden. */
static void check_decoder(const struct model *m, const char *variant)
{
    char path[1024];
    snprintf(path, sizeof path, "tests/models/golden/%s.json", variant);
    size_t len;
    char *text = test_read_file(path, &len);
    cJSON *golden = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(golden);
    const cJSON *cfg = cJSON_GetObjectItem(golden, "config");
    const struct xf_model *x = &m->xf;
    assert_string_equal(m->family->model_type,
                        cJSON_GetObjectItem(cfg, "model_type")->valuestring);
    assert_int_equal(x->layers, golden_number(cfg, "layers"));
    assert_int_equal(x->heads, golden_number(cfg, "heads"));
    assert_int_equal(x->kv_heads, golden_number(cfg, "kv_heads"));
    assert_int_equal(x->head_dim, golden_number(cfg, "head_dim"));
    assert_int_equal(x->hidden, golden_number(cfg, "hidden"));
    assert_int_equal(x->intermediate, golden_number(cfg, "intermediate"));
    assert_int_equal(x->vocab_size, golden_number(cfg, "vocab_size"));
    assert_true(fabs(x->norm_eps - golden_number(cfg, "norm_eps")) <= 1e-12);
    const double window = golden_number(cfg, "sliding_window");
    assert_int_equal(model_widest_window(m),
                     isnan(window) ? 0 : (size_t)window);
    assert_int_equal(m->extra.tied,
                     cJSON_IsTrue(cJSON_GetObjectItem(cfg, "tied")));
    assert_true(x->lm_head.data != NULL);
    assert_int_equal(x->lm_head.data == x->word_emb.data, m->extra.tied);
    check_block_keys(x, cfg);
    // the id that ends a generation: config.json's eos_token_id
    snprintf(path, sizeof path, "tests/models/%s/config.json", variant);
    text = test_read_file(path, &len);
    cJSON *config = cJSON_ParseWithLength(text, len);
    free(text);
    // (one id, or a list: Gemma 3's <eos> and <end_of_turn>)
    const cJSON *eos = cJSON_GetObjectItem(config, "eos_token_id");
    if (cJSON_IsArray(eos)) {
        assert_int_equal(m->extra.n_eos, (size_t)cJSON_GetArraySize(eos));
        for (size_t i = 0; i < m->extra.n_eos; i++)
            assert_int_equal(m->extra.eos[i],
                             cJSON_GetArrayItem(eos, (int)i)->valueint);
    } else {
        assert_int_equal(m->extra.n_eos, 1);
        assert_int_equal(m->extra.eos[0], eos->valueint);
    }
    cJSON_Delete(config);
    const cJSON *freq = cJSON_GetObjectItem(cfg, "inv_freq");
    if (cJSON_IsArray(freq)) { /* rotary, as rotate_half pairs them */
        assert_int_equal(x->arch.positions, XF_POS_ROTARY);
        const struct attn_rotary *rope = &x->kind[0].rope;
        assert_int_equal(rope->pairing, ATTN_ROPE_HALF);
        // the pairs of the values turned: every one, or a partial rotary's
        const size_t pairs = (rope->dims ? rope->dims : x->head_dim) / 2;
        assert_int_equal((size_t)cJSON_GetArraySize(freq), pairs);
        for (size_t i = 0; i < pairs; i++) {
            const double want = cJSON_GetArrayItem(freq, (int)i)->valuedouble;
            assert_true(fabs(rope->inv_freq[i] - want) <= 1e-12 * want);
        }
    } else {
        assert_int_equal(x->arch.positions, XF_POS_LEARNED);
    }
    const cJSON *c;
    size_t n_cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(golden, "cases"))
    {
        const char *a = cJSON_GetObjectItem(c, "sentence")->valuestring;
        struct tok_encoding enc;
        struct attn_error aerr = {0};
        if (tok_encode(&m->tokenizer, a, strlen(a), NULL, 0,
                       &(struct tok_options){.max_tokens = x->max_positions},
                       &enc, &aerr))
            fail_msg("%s: tok_encode: %s", variant, aerr.message);
        const cJSON *ids = cJSON_GetObjectItem(c, "ids");
        const cJSON *tokens = cJSON_GetObjectItem(c, "tokens");
        const cJSON *added = cJSON_GetObjectItem(c, "added");
        assert_int_equal(enc.count, (size_t)cJSON_GetArraySize(ids));
        for (size_t i = 0; i < enc.count; i++) {
            const int k = (int)i;
            if (enc.ids[i] != cJSON_GetArrayItem(ids, k)->valuedouble)
                fail_msg("%s case %zu: token %zu is %u, want %.0f", variant,
                         n_cases, i, (unsigned)enc.ids[i],
                         cJSON_GetArrayItem(ids, k)->valuedouble);
            assert_string_equal(tok_token_text(&m->tokenizer, enc.ids[i]),
                                cJSON_GetArrayItem(tokens, k)->valuestring);
            assert_int_equal(enc.added[i],
                             cJSON_IsTrue(cJSON_GetArrayItem(added, k)));
        }
        struct xf_run run = {.ids = enc.ids,
                             .n = enc.count,
                             .want = XF_WANT_WEIGHTS | XF_WANT_HIDDEN |
                                     XF_WANT_ROLLOUT | XF_WANT_LOGITS |
                                     XF_WANT_VALUE_WEIGHTED | XF_WANT_FLOW,
                             .layer = XF_ALL_LAYERS,
                             .threads = 2};
        struct xf_result r;
        struct xf_plan plan;
        if (xf_plan(x, &run, &plan, &aerr) ||
            xf_forward(&plan, NULL, &r, &aerr))
            fail_msg("%s: xf_forward: %s", variant, aerr.message);
        size_t n;
        check_value_weighted(variant, n_cases, c, &r);
        check_flow(variant, n_cases, c, &r);
        double *w = golden_doubles(cJSON_GetObjectItem(c, "attentions"), &n);
        const size_t N = r.n;
        assert_int_equal(n, r.layers * r.heads * N * N);
        if (!(max_abs_diff_ok(r.weights, w, n, WEIGHT_TOL)))
            fail_msg("%s case %zu: attentions differ", variant, n_cases);
        // what a query may not see is exactly 0: the future, and keys
        // outside the window
        for (size_t e = 0; e < n; e++) {
            const size_t i = e / N % N, j = e % N;
            const size_t w_l = model_window(m, e / (r.heads * N * N));
            if (j > i || (w_l && j + w_l <= i))
                assert_true(r.weights[e] == 0.0f);
        }
        free(w);
        double *hs =
            golden_doubles(cJSON_GetObjectItem(c, "hidden_states"), &n);
        assert_int_equal(n, (r.layers + 1) * N * r.hidden);
        for (size_t i = 0; i < n; i++)
            if (!(fabs(r.hidden_states[i] - hs[i]) <=
                  HIDDEN_ATOL + HIDDEN_RTOL * fabs(hs[i])))
                fail_msg("%s case %zu: hidden state %zu is %g, want %g",
                         variant, n_cases, i, (double)r.hidden_states[i],
                         hs[i]);
        free(hs);
        double *roll = golden_doubles(cJSON_GetObjectItem(c, "rollout"), &n);
        assert_int_equal(n, N * N);
        if (!(max_abs_diff_ok(r.rollout, roll, n, WEIGHT_TOL)))
            fail_msg("%s case %zu: rollout differs", variant, n_cases);
        free(roll);
        // the last token's logits, through lm_head (tied or not)
        double *lg = golden_doubles(cJSON_GetObjectItem(c, "logits"), &n);
        assert_int_equal(n, x->vocab_size);
        for (size_t i = 0; i < n; i++)
            if (!(fabs(r.logits[i] - lg[i]) <=
                  HIDDEN_ATOL + HIDDEN_RTOL * fabs(lg[i])))
                fail_msg("%s case %zu: logit %zu is %g, want %g", variant,
                         n_cases, i, (double)r.logits[i], lg[i]);
        free(lg);
        xf_result_free(&r);
        tok_encoding_free(&enc);
        n_cases++;
    }
    assert_true(n_cases >= 3);
    const cJSON *greedy = cJSON_GetObjectItem(golden, "greedy");
    assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(greedy, "new")) >= 4);
    // the float64 reference's ids, clear of near ties (generate_decoders.py)
    golden_greedy(m, variant, greedy, 0);
    cJSON_Delete(golden);
}

/* Each layer's kind as the golden's config records it: sliding or global,
 * its window, its rotary base and frequencies; and the model's factors. */
static void check_layer_kinds(const struct model *m, const char *variant)
{
    char path[1024];
    snprintf(path, sizeof path, "tests/models/golden/%s.json", variant);
    size_t len;
    char *text = test_read_file(path, &len);
    cJSON *golden = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *cfg = cJSON_GetObjectItem(golden, "config");
    const struct xf_model *x = &m->xf;
    const cJSON *types = cJSON_GetObjectItem(cfg, "layer_types");
    // without layer_types, every layer slides when the model has a window
    const cJSON *window = cJSON_GetObjectItem(cfg, "sliding_window");
    const char *every = cJSON_IsNumber(window) ? "sliding" : "global";
    for (size_t l = 0; l < x->layers; l++) {
        const struct xf_layer_kind *k =
            &x->kind[x->layer_kind ? x->layer_kind[l] : 0];
        const char *type =
            types ? cJSON_GetArrayItem(types, (int)l)->valuestring : every;
        if (!strcmp(type, "sliding") != (k->window != 0))
            fail_msg("%s: layer %zu is %s in the golden", variant, l, type);
        const cJSON *windows = cJSON_GetObjectItem(cfg, "layer_windows");
        if (windows)
            assert_int_equal(k->window,
                             cJSON_GetArrayItem(windows, (int)l)->valueint);
        const cJSON *theta = cJSON_GetObjectItem(cfg, "layer_rope_theta");
        if (theta)
            assert_true(k->rope.base ==
                        cJSON_GetArrayItem(theta, (int)l)->valuedouble);
        const cJSON *freqs = cJSON_GetObjectItem(cfg, "layer_inv_freq");
        for (size_t i = 0; freqs && i < x->head_dim / 2; i++) {
            const double want =
                cJSON_GetArrayItem(cJSON_GetArrayItem(freqs, (int)l), (int)i)
                    ->valuedouble;
            const double got =
                k->rope.inv_freq
                    ? k->rope.inv_freq[i]
                    : pow(k->rope.base, -(double)(2 * i) / (double)x->head_dim);
            if (!(fabs(got - want) <= 1e-12 * want))
                fail_msg("%s: layer %zu's frequency %zu is %g, want %g",
                         variant, l, i, got, want);
        }
    }
    const struct {
        const char *key;
        float got;
    } caps[] = {{"attn_logit_softcapping", x->attn_softcap},
                {"final_logit_softcapping", x->final_softcap}};
    for (size_t i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItem(cfg, caps[i].key);
        assert_true(cJSON_IsNumber(v) ? caps[i].got == (float)v->valuedouble
                                      : caps[i].got == 0.0f);
    }
    const float got_scale =
        x->attn_scale ? x->attn_scale : 1.0f / sqrtf((float)x->head_dim);
    const cJSON *scale = cJSON_GetObjectItem(cfg, "attention_scale");
    const float want_scale =
        scale ? (float)scale->valuedouble : 1.0f / sqrtf((float)x->head_dim);
    assert_true(fabsf(got_scale - want_scale) <= 1e-7f * want_scale);
    const cJSON *embed = cJSON_GetObjectItem(cfg, "embed_scale");
    assert_true(x->embed_scale == (embed ? (float)embed->valuedouble : 0.0f));
    cJSON_Delete(golden);
}

/* Every decoder variant loads, reads its config as its golden records it
 * (each layer's kind and the model's factors too), keeps its matrices at
 * their stored width, and matches its goldens. Gemma 3's checkpoint with
 * a vision tower has its language model read and the tower left alone. */
static void test_decoders_load_and_match(void **state)
{
    (void)state;
    const struct {
        const char *name;
        attn_dtype dtype;
        size_t shards;
    } variants[] = {
        {"gpt2", ATTN_F32, 1},    {"gpt2_prefixed", ATTN_F16, 1},
        {"llama2", ATTN_BF16, 1}, {"llama3", ATTN_F32, 2},
        {"mistral", ATTN_F16, 1}, {"qwen2", ATTN_BF16, 1},
        {"qwen3", ATTN_F32, 1},   {"olmo2", ATTN_BF16, 1},
        {"neox", ATTN_F16, 1},    {"neox_seq", ATTN_F32, 1},
        {"phi3", ATTN_BF16, 1},   {"phi3_longrope", ATTN_F16, 1},
        {"gemma", ATTN_BF16, 1},  {"gemma2", ATTN_F32, 1},
        {"gemma3", ATTN_F16, 1},  {"gemma3_mm", ATTN_BF16, 2},
    };
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        char dir[256];
        snprintf(dir, sizeof dir, "tests/models/%s", variants[i].name);
        struct model *m = load_ok(dir);
        assert_int_equal(m->shards.count, variants[i].shards);
        assert_int_equal(m->xf.word_emb.dtype, variants[i].dtype);
        assert_int_equal(m->layers[0].down_w.dtype, variants[i].dtype);
        check_layer_kinds(m, variants[i].name);
        check_decoder(m, variants[i].name);
        model_free(m);
    }
}

/* The files of a decoder's folder. */
static const char *const decoder_files[] = {"config.json", "model.safetensors",
                                            "tokenizer.json",
                                            "tokenizer_config.json"};

/* A fresh temporary copy of the decoder tests/models/<variant>; release
 * it with decoder_dir_remove(). */
static char *decoder_dir(const char *variant)
{
    char tmpl[] = "/tmp/attnd-decoder-XXXXXX";
    char *dir = mkdtemp(tmpl);
    assert_non_null(dir);
    dir = strdup(dir);
    for (size_t i = 0; i < 4; i++) {
        char from[1024], to[1024];
        snprintf(from, sizeof from, "tests/models/%s/%s", variant,
                 decoder_files[i]);
        path_of(to, dir, decoder_files[i]);
        size_t len;
        char *bytes = test_read_file(from, &len);
        spit(to, bytes, len);
        free(bytes);
    }
    return dir;
}

static void decoder_dir_remove(char *dir)
{
    remove_dir(dir);
}

/* config.json of tests/models/<variant> into dir, with key set to raw
 * JSON (NULL: removed). */
static void decoder_config_with(const char *dir, const char *variant,
                                const char *key, const char *raw)
{
    char from[1024];
    snprintf(from, sizeof from, "tests/models/%s/config.json", variant);
    size_t len;
    char *text = test_read_file(from, &len);
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    cJSON_DeleteItemFromObjectCaseSensitive(doc, key);
    if (raw)
        cJSON_AddItemToObject(doc, key, cJSON_Parse(raw));
    char *out = cJSON_Print(doc);
    char p[1024];
    path_of(p, dir, "config.json");
    spit(p, out, strlen(out));
    free(out);
    cJSON_Delete(doc);
}

/* What the families of generate_neox_phi3_olmo2.py refuse in config.json,
 * each with one line naming the key and its value; and the defaults
 * transformers gives an absent key. */
static void test_new_family_refusals(void **state)
{
    (void)state;
    const struct {
        const char *variant, *key, *raw, *fragment;
    } cases[] = {
        {"olmo2", "hidden_act", "\"gelu\"", "hidden_act 'gelu'"},
        {"olmo2", "num_key_value_heads", "3",
         "num_key_value_heads (3) does not divide"},
        {"olmo2", "rope_scaling", "{\"rope_type\": \"yarn\"}",
         "rope_scaling's type 'yarn'"},
        {"olmo2", "rms_norm_eps", "0", "rms_norm_eps (0)"},
        {"neox", "rotary_pct", "0.1", "rotary_pct (0.1) turns 1 of"},
        {"neox", "rotary_pct", "1.5", "rotary_pct (1.5) is more than 1"},
        {"neox", "rotary_pct", "0", "rotary_pct (0)"},
        {"neox", "rotary_emb_base", "\"big\"", "rotary_emb_base is not"},
        {"neox", "rope_theta", "500", "rope_theta (500) is not"},
        {"neox", "partial_rotary_factor", "0.5",
         "partial_rotary_factor (0.5) is not rotary_pct (0.25)"},
        {"neox", "hidden_act", "\"relu\"", "hidden_act 'relu'"},
        {"neox", "rope_scaling", "{\"type\": \"linear\", \"factor\": 2}",
         "rope_scaling's type 'linear'"},
        {"neox", "num_attention_heads", "5", "(5) does not divide"},
        {"neox", "use_parallel_residual", "1",
         "use_parallel_residual is not true or false"},
        {"phi3", "hidden_act", "\"gelu\"", "hidden_act 'gelu'"},
        {"phi3", "partial_rotary_factor", "0.1",
         "partial_rotary_factor (0.1) turns 1 of head_dim's 12"},
        {"phi3", "partial_rotary_factor", "2",
         "partial_rotary_factor (2) is more than 1"},
        {"phi3", "sliding_window", "-3", "sliding_window (-3)"},
        {"phi3", "rope_scaling", "{\"type\": \"dynamic\", \"factor\": 2}",
         "rope_scaling's type 'dynamic'"},
        {"phi3_longrope", "rope_scaling",
         "{\"type\": \"longrope\", \"short_factor\": [1, 1, 1], "
         "\"long_factor\": [1, 1, 1, 1, 1, 1]}",
         "rope_scaling's short_factor is not a list of 6 numbers"},
        {"phi3_longrope", "rope_scaling",
         "{\"type\": \"longrope\", \"short_factor\": [1, 1, 1, 1, 1, 1], "
         "\"long_factor\": [1, 1, 1, 0, 1, 1]}",
         "rope_scaling's long_factor[3] (0)"},
        {"phi3_longrope", "rope_scaling", "[1]",
         "rope_scaling is not an object"},
        {"phi3_longrope", "original_max_position_embeddings", "0",
         "original_max_position_embeddings (0)"},
        {"gemma2", "layer_types", "[\"sliding_attention\"]",
         "layer_types is not a list of 4 layer types"},
        {"gemma2", "layer_types",
         "[\"sliding_attention\", \"full_attention\", "
         "\"chunked_attention\", \"full_attention\"]",
         "layer_types[2] is not"},
        {"gemma", "hidden_activation", "\"relu\"", "hidden_activation 'relu'"},
        {"gemma3", "rope_scaling", "{\"rope_type\": \"yarn\"}",
         "rope_scaling's type 'yarn'"},
        {"gemma2", "rope_scaling", "{\"rope_type\": \"linear\", \"factor\": 2}",
         "rope_scaling is not supported for model_type 'gemma2'"},
        {"gemma3", "rope_scaling", "{\"rope_type\": \"linear\"}",
         "rope_scaling of type linear needs its factor"},
        {"gemma2", "attn_logit_softcapping", "-1",
         "attn_logit_softcapping (-1)"},
        {"gemma2", "tie_word_embeddings", "false",
         "tie_word_embeddings is false"},
        {"gemma3", "sliding_window_pattern", "0", "sliding_window_pattern (0)"},
        {"gemma3", "query_pre_attn_scalar", "0", "query_pre_attn_scalar (0)"},
        {"gemma2", "head_dim", "7", "head_dim (7) is odd"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *dir = decoder_dir(cases[i].variant);
        decoder_config_with(dir, cases[i].variant, cases[i].key, cases[i].raw);
        expect_failure(dir, cases[i].fragment, NULL);
        decoder_dir_remove(dir);
    }
    // Gemma 2: layer_types, when given, says which layers slide; a cap of
    // null is none
    {
        char *g = decoder_dir("gemma2");
        decoder_config_with(g, "gemma2", "layer_types",
                            "[\"full_attention\", \"full_attention\", "
                            "\"full_attention\", \"sliding_attention\"]");
        struct model *gm = load_ok(g);
        for (size_t l = 0; l < 4; l++)
            assert_int_equal(model_window(gm, l), l == 3 ? 4 : 0);
        model_free(gm);
        decoder_config_with(g, "gemma2", "attn_logit_softcapping", "null");
        gm = load_ok(g);
        assert_true(gm->xf.attn_softcap == 0.0f);
        model_free(gm);
        decoder_dir_remove(g);
    }
    // OLMo 2: rms_norm_eps 1e-5 when absent (Olmo2Config's), and its MLP
    // has no biases whatever mlp_bias says
    char *dir = decoder_dir("olmo2");
    decoder_config_with(dir, "olmo2", "rms_norm_eps", NULL);
    struct model *m = load_ok(dir);
    assert_true(m->xf.norm_eps == 1e-5f);
    model_free(m);
    decoder_config_with(dir, "olmo2", "mlp_bias", "true");
    m = load_ok(dir);
    assert_false(m->xf.arch.ffn_bias);
    model_free(m);
    decoder_dir_remove(dir);
    // GPT-NeoX: a parallel residual when use_parallel_residual is absent,
    // and keys a newer config copies from older ones that agree
    dir = decoder_dir("neox_seq");
    decoder_config_with(dir, "neox_seq", "use_parallel_residual", NULL);
    m = load_ok(dir);
    assert_true(m->xf.arch.parallel);
    model_free(m);
    decoder_config_with(dir, "neox_seq", "rope_theta", "1000");
    m = load_ok(dir);
    assert_true(m->xf.kind[0].rope.base == 1000.0);
    assert_int_equal(m->xf.kind[0].rope.dims, 6);
    model_free(m);
    decoder_dir_remove(dir);
    // Phi-3: longrope by its older name, su; a window of null is none
    dir = decoder_dir("phi3_longrope");
    decoder_config_with(dir, "phi3_longrope", "rope_scaling",
                        "{\"type\": \"su\", \"short_factor\": [1, 1, 1, 1, "
                        "1, 1], \"long_factor\": [2, 2, 2, 2, 2, 2]}");
    m = load_ok(dir);
    assert_int_equal(m->xf.kind[0].long_after, 12);
    assert_true(m->xf.kind[0].long_rope.inv_freq[0] == 0.5);
    model_free(m);
    decoder_config_with(dir, "phi3_longrope", "sliding_window", "null");
    m = load_ok(dir);
    assert_int_equal(model_widest_window(m), 0);
    model_free(m);
    decoder_dir_remove(dir);
}

/* GPT-NeoX's fused query_key_value, [heads][3][head_dim] in its rows: q,
 * k and v each copied once at load, in blocks at a stride, at the width
 * the file stores them in (F16 here), as are the biases (as float32);
 * the mapping's pages read only through copies given back; the matrices
 * read in place are the file's own bytes. */
static void test_strided_slices(void **state)
{
    (void)state;
    struct model *m = load_ok("tests/models/neox");
    const struct xf_model *x = &m->xf;
    const size_t H = x->hidden, D = x->head_dim;
    const char *map = m->shards.shard[0].map;
    const char *copies = m->converted;
    for (size_t l = 0; l < x->layers; l++) {
        const struct xf_layer *y = &m->layers[l];
        const struct xf_matrix qkv[3] = {y->q_w, y->k_w, y->v_w};
        const float *bias[3] = {y->q_b, y->k_b, y->v_b};
        for (size_t i = 0; i < 3; i++) {
            assert_int_equal(qkv[i].dtype, ATTN_F16);
            const char *at = qkv[i].data;
            assert_true(at >= copies && at < copies + m->converted_bytes);
            assert_true(bias[i] != NULL);
        }
        assert_true((const char *)y->o_w.data > map &&
                    (const char *)y->o_w.data < map + m->shards.shard[0].bytes);
        // row r of q is row 3 D (r / D) + r % D of the fused tensor, the
        // file's bits; k's from D on, v's from 2 D
        char name[96];
        snprintf(name, sizeof name,
                 "gpt_neox.layers.%zu.attention.query_key_value.weight", l);
        size_t shard;
        const struct shard_tensor *t = shards_find(&m->shards, name, &shard);
        assert_non_null(t);
        const uint16_t *fused =
            (const uint16_t *)(const void *)(map + t->offset);
        for (size_t i = 0; i < 3; i++)
            for (size_t r = 0; r < H; r++) {
                const size_t from = 3 * D * (r / D) + i * D + r % D;
                const uint16_t *row = (const uint16_t *)qkv[i].data + r * H;
                assert_memory_equal(row, fused + from * H, H * sizeof *row);
            }
    }
    model_free(m);
}

/* The ids, the weights' last rows and the logits of a golden's case,
 * against a run that gave r over those ids: its last query row, over
 * keys positions, of each layer and head. */
static void check_case_end(const cJSON *c, const struct xf_result *r,
                           size_t keys, const char *what)
{
    size_t n;
    double *w = golden_doubles(cJSON_GetObjectItem(c, "attentions"), &n);
    assert_int_equal(n, r->layers * r->heads * keys * keys);
    for (size_t lh = 0; lh < r->layers * r->heads; lh++) {
        const float *got = r->weights + (lh * r->n + r->n - 1) * keys;
        const double *want = w + (lh * keys + keys - 1) * keys;
        if (!max_abs_diff_ok(got, want, keys, WEIGHT_TOL))
            fail_msg("%s: the last row of layer x head %zu differs", what, lh);
    }
    free(w);
    double *lg = golden_doubles(cJSON_GetObjectItem(c, "logits"), &n);
    assert_int_equal(n, r->vocab);
    for (size_t i = 0; i < n; i++)
        if (!(fabs(r->logits[i] - lg[i]) <=
              HIDDEN_ATOL + HIDDEN_RTOL * fabs(lg[i])))
            fail_msg("%s: logit %zu is %g, want %g", what, i,
                     (double)r->logits[i], lg[i]);
    free(lg);
}

/* Phi-3.5's longrope across its boundary in a generation, against the
 * goldens: a prompt of original_max_position_embeddings (12) tokens
 * starts the cache with the short factors (the golden's second case);
 * the 13th token outgrows it, and a run of it after the cache is refused,
 * naming the cache; emptied, the cache takes the whole 13 with the long
 * factors, as transformers' Phi-3 recomputes them (the third case); a
 * 14th token then follows through the cache, as one pass over the 14
 * gives it. */
static void test_longrope_boundary(void **state)
{
    (void)state;
    struct model *m = load_ok("tests/models/phi3_longrope");
    const struct xf_model *x = &m->xf;
    size_t len;
    char *text = test_read_file("tests/models/golden/phi3_longrope.json", &len);
    cJSON *golden = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *cases = cJSON_GetObjectItem(golden, "cases");
    const cJSON *at12 = cJSON_GetArrayItem(cases, 1);
    const cJSON *at13 = cJSON_GetArrayItem(cases, 2);
    size_t n12, n13;
    double *ids12 = golden_doubles(cJSON_GetObjectItem(at12, "ids"), &n12);
    double *ids13 = golden_doubles(cJSON_GetObjectItem(at13, "ids"), &n13);
    const size_t after = x->kind[0].long_after;
    assert_int_equal(after, 12);
    assert_int_equal(n12, after);
    assert_int_equal(n13, after + 1);
    uint32_t ids[14];
    for (size_t i = 0; i < n13; i++) {
        ids[i] = (uint32_t)ids13[i];
        if (i < n12)
            assert_true(ids12[i] == ids13[i]); /* the same text, one more */
    }
    struct xf_cache cache;
    assert_int_equal(xf_cache_init(x, 14, &cache, NULL), ATTN_OK);
    struct xf_run run = {.ids = ids,
                         .n = n12,
                         .want = XF_WANT_WEIGHTS | XF_WANT_LOGITS,
                         .layer = XF_ALL_LAYERS,
                         .threads = 2,
                         .cache = &cache};
    struct xf_plan plan;
    struct xf_result r;
    struct attn_error err = {0};
    if (xf_plan(x, &run, &plan, &err) || xf_forward(&plan, NULL, &r, &err))
        fail_msg("12 tokens: %s", err.message);
    check_case_end(at12, &r, n12, "12 tokens, short");
    xf_result_free(&r);
    // the 13th outgrows the cache
    run.ids = ids + n12;
    run.n = 1;
    assert_true(xf_cache_outgrown(x, &cache, 1));
    assert_int_equal(xf_plan(x, &run, &plan, &err), ATTN_E_INVALID);
    assert_string_equal(err.field, "cache");
    cache.len = 0;
    run.ids = ids;
    run.n = n13;
    if (xf_plan(x, &run, &plan, &err) || xf_forward(&plan, NULL, &r, &err))
        fail_msg("13 tokens again: %s", err.message);
    check_case_end(at13, &r, n13, "13 tokens, long");
    // then the cache goes on, long
    const struct xf_sampling greedy = {.temperature = 0, .top_p = 1};
    struct xf_candidate *scratch = malloc(x->vocab_size * sizeof *scratch);
    ids[n13] = xf_sample(r.logits, x->vocab_size, &greedy, 0, scratch);
    xf_result_free(&r);
    run.ids = ids + n13;
    run.n = 1;
    assert_false(xf_cache_outgrown(x, &cache, 1));
    if (xf_plan(x, &run, &plan, &err) || xf_forward(&plan, NULL, &r, &err))
        fail_msg("the 14th token: %s", err.message);
    const struct xf_run whole = {.ids = ids,
                                 .n = n13 + 1,
                                 .want = XF_WANT_WEIGHTS | XF_WANT_LOGITS,
                                 .layer = XF_ALL_LAYERS,
                                 .threads = 1};
    struct xf_result w;
    if (xf_plan(x, &whole, &plan, &err) || xf_forward(&plan, NULL, &w, &err))
        fail_msg("14 tokens: %s", err.message);
    for (size_t v = 0; v < x->vocab_size; v++)
        assert_true(fabs(r.logits[v] - w.logits[v]) <=
                    1e-4 * (1 + fabs(w.logits[v])));
    xf_result_free(&w);
    xf_result_free(&r);
    free(scratch);
    xf_cache_free(&cache);
    free(ids12);
    free(ids13);
    cJSON_Delete(golden);
    model_free(m);
}

static void test_unaligned_f32(void **state)
{
    (void)state;
    char *dir = copy_variant("f32");
    struct st_parts parts = st_split(dir);
    char *text = cJSON_PrintUnformatted(parts.header);
    const size_t hl = strlen(text);
    char *odd = malloc(hl + 8);
    memcpy(odd, text, hl);
    memset(odd + hl, ' ', 7);
    odd[hl + (hl % 4 == 1 ? 2 : hl % 4 == 2 ? 1 : hl % 4 == 3 ? 0 : 1)] = 0;
    st_write(dir, odd, 1, parts.data, parts.data_len);
    free(odd);
    free(text);
    cJSON_Delete(parts.header);
    free(parts.data);
    struct model *m = load_ok(dir);
    assert_true(m->converted_bytes > 0);
    check_goldens(m, "f32");
    model_free(m);
    remove_dir(dir);
}

/* F16 and BF16 special values convert exactly. */
static void test_half_conversions(void **state)
{
    (void)state;
    char *dir = copy_variant("f32");
    struct st_parts parts = st_split(dir);
    // embeddings.LayerNorm.bias is [32]: rewrite it as F16, then BF16
    const uint16_t f16[8] = {0x0001, 0x8000, 0x7bff, 0x3c00,
                             0x0400, 0xc000, 0x03ff, 0x3555};
    const float f16_want[8] = {5.9604644775390625e-08f,
                               -0.0f,
                               65504.0f,
                               1.0f,
                               6.103515625e-05f,
                               -2.0f,
                               6.097555160522461e-05f,
                               0.333251953125f};
    unsigned char bytes[64];
    for (int i = 0; i < 32; i++)
        memcpy(bytes + 2 * i, &f16[i % 8], 2);
    cJSON *e = entry(&parts, "embeddings.LayerNorm.bias");
    cJSON_ReplaceItemInObjectCaseSensitive(e, "dtype",
                                           cJSON_CreateString("F16"));
    cJSON_AddNumberToObject(e, "replace_bytes", 64);
    st_rebuild(dir, &parts, bytes);
    struct model *m = load_ok(dir);
    for (int i = 0; i < 32; i++)
        assert_memory_equal(&m->xf.embed_norm_b[i], &f16_want[i % 8], 4);
    model_free(m);

    parts = st_split(dir);
    const uint16_t bf16[4] = {0x3f80, 0x0001, 0xc2f7, 0x7f7f};
    for (int i = 0; i < 32; i++)
        memcpy(bytes + 2 * i, &bf16[i % 4], 2);
    e = entry(&parts, "embeddings.LayerNorm.bias");
    cJSON_ReplaceItemInObjectCaseSensitive(e, "dtype",
                                           cJSON_CreateString("BF16"));
    cJSON_AddNumberToObject(e, "replace_bytes", 64);
    st_rebuild(dir, &parts, bytes);
    m = load_ok(dir);
    for (int i = 0; i < 32; i++) {
        const uint32_t bits = (uint32_t)bf16[i % 4] << 16;
        assert_memory_equal(&m->xf.embed_norm_b[i], &bits, 4);
    }
    model_free(m);

    // an F16 infinity is refused by name
    parts = st_split(dir);
    const uint16_t inf = 0x7c00;
    for (int i = 0; i < 32; i++)
        memcpy(bytes + 2 * i, i == 5 ? &inf : &f16[3], 2);
    e = entry(&parts, "embeddings.LayerNorm.bias");
    cJSON_ReplaceItemInObjectCaseSensitive(e, "dtype",
                                           cJSON_CreateString("F16"));
    cJSON_AddNumberToObject(e, "replace_bytes", 64);
    st_rebuild(dir, &parts, bytes);
    expect_failure(dir, "model.safetensors", "embeddings.LayerNorm.bias",
                   "element 5 is Inf", NULL);
    remove_dir(dir);
}

/* ------------------------------------------------- malformed safetensors */

static void raw_file(const char *dir, const void *bytes, size_t len)
{
    char p[1024];
    path_of(p, dir, "model.safetensors");
    spit(p, bytes, len);
}

static void test_truncated_and_short(void **state)
{
    (void)state;
    char *dir = copy_variant("f32");
    char p[1024];
    path_of(p, dir, "model.safetensors");
    size_t len;
    char *good = test_read_file(p, &len);
    uint64_t n;
    memcpy(&n, good, 8);

    raw_file(dir, good, len - 100);
    expect_failure(dir, "model.safetensors", "tensor '", "reach past",
                   "truncated", NULL);
    raw_file(dir, good, 8 + n / 2);
    expect_failure(dir, "model.safetensors", "header length", "truncated",
                   NULL);
    raw_file(dir, good, 5);
    expect_failure(dir, "model.safetensors", "too short", NULL);
    raw_file(dir, good, 0);
    expect_failure(dir, "model.safetensors", "0 bytes", NULL);
    // a header length past the end of the file, and past any sane size
    char *huge = malloc(len);
    memcpy(huge, good, len);
    const uint64_t lengths[] = {len, UINT64_MAX, (uint64_t)1 << 40};
    for (int i = 0; i < 3; i++) {
        memcpy(huge, &lengths[i], 8);
        raw_file(dir, huge, len);
        expect_failure(dir, "model.safetensors", "header length", NULL);
    }
    // an empty header, a header that is not an object, and bad JSON
    const uint64_t zero = 0;
    memcpy(huge, &zero, 8);
    raw_file(dir, huge, len);
    expect_failure(dir, "model.safetensors", "JSON object", NULL);
    memcpy(huge, good, len);
    huge[8] = '[';
    raw_file(dir, huge, len);
    expect_failure(dir, "model.safetensors", "JSON object", NULL);
    memcpy(huge, good, len);
    char *close = memchr(huge + 8, '}', n);
    for (char *c = close; c && c < huge + 8 + n; c++)
        if (*c == '}')
            close = c;
    *close = ','; /* the object's last brace */
    raw_file(dir, huge, len);
    expect_failure(dir, "model.safetensors", "not valid JSON", NULL);
    // non-space bytes in the padding
    st_write(dir, "{}x", 8, NULL, 0);
    expect_failure(dir, "model.safetensors", "other than spaces", NULL);
    free(huge);
    free(good);
    remove_dir(dir);
}

static void test_bad_offsets(void **state)
{
    (void)state;
    char *dir = copy_variant("f32");
    const char *q = "encoder.layer.0.attention.self.query.bias";
    const char *k = "encoder.layer.0.attention.self.key.bias";

    // overlapping: the query bias moved onto the key bias's bytes
    struct st_parts parts = st_split(dir);
    set_pair(entry(&parts, q), "data_offsets", offset_of(entry(&parts, k), 0),
             offset_of(entry(&parts, k), 1));
    st_join(dir, &parts, 8);
    expect_failure(dir, "model.safetensors", "overlap", "query.bias'", NULL);
    // shifted by 4 bytes into its neighbour
    parts = st_split(dir);
    cJSON *e = entry(&parts, q);
    set_pair(e, "data_offsets", offset_of(e, 0) + 4, offset_of(e, 1) + 4);
    st_join(dir, &parts, 8);
    expect_failure(dir, "model.safetensors", "overlap", NULL);
    remove_dir(dir);

    dir = copy_variant("f32");
    parts = st_split(dir);
    e = entry(&parts, q);
    set_pair(e, "data_offsets", offset_of(e, 0), 1e12);
    st_join(dir, &parts, 8);
    expect_failure(dir, "model.safetensors", q, "reach past", NULL);
    parts = st_split(dir);
    e = entry(&parts, q);
    set_pair(e, "data_offsets", 64, 32);
    st_join(dir, &parts, 8);
    expect_failure(dir, "model.safetensors", q, "end before", NULL);
    parts = st_split(dir);
    e = entry(&parts, q);
    set_pair(e, "data_offsets", -8, 0);
    st_join(dir, &parts, 8);
    expect_failure(dir, "model.safetensors", q, "whole numbers", NULL);
    parts = st_split(dir);
    e = entry(&parts, q);
    set_pair(e, "data_offsets", 0.5, 64);
    st_join(dir, &parts, 8);
    expect_failure(dir, "model.safetensors", q, "whole numbers", NULL);
    remove_dir(dir);

    // bytes that belong to no tensor: trailing, and a hole
    dir = copy_variant("f32");
    parts = st_split(dir);
    parts.data = realloc(parts.data, parts.data_len + 16);
    memset(parts.data + parts.data_len, 0, 16);
    parts.data_len += 16;
    st_join(dir, &parts, 8);
    expect_failure(dir, "model.safetensors", "last 16 bytes", NULL);
    parts = st_split(dir); /* still 16 bytes too many */
    cJSON_DeleteItemFromObjectCaseSensitive(parts.header, q);
    parts.data_len -= 16;
    st_join(dir, &parts, 8);
    expect_failure(dir, "model.safetensors", "belong to no tensor", NULL);
    remove_dir(dir);
}

static void test_bad_entries(void **state)
{
    (void)state;
    char *dir = copy_variant("f32");
    const char *q = "encoder.layer.1.attention.self.query.weight";
    struct st_parts parts = st_split(dir);
    cJSON_ReplaceItemInObjectCaseSensitive(entry(&parts, q), "dtype",
                                           cJSON_CreateString("Q4_K"));
    st_join(dir, &parts, 8);
    expect_failure(dir, "model.safetensors", q, "unknown dtype 'Q4_K'", NULL);

    // a size that disagrees with dtype and shape
    parts = st_split(dir);
    cJSON_ReplaceItemInObjectCaseSensitive(entry(&parts, q), "dtype",
                                           cJSON_CreateString("F16"));
    st_join(dir, &parts, 8);
    expect_failure(dir, "model.safetensors", q, "F16 of 1024 elements",
                   "4096 bytes", NULL);

    // entries of the wrong kinds, and __metadata__ that is not strings
    parts = st_split(dir);
    cJSON_ReplaceItemInObjectCaseSensitive(entry(&parts, q), "shape",
                                           cJSON_CreateString("32x32"));
    st_join(dir, &parts, 8);
    expect_failure(dir, "model.safetensors", q, "\"shape\"", NULL);
    parts = st_split(dir);
    cJSON_ReplaceItemInObjectCaseSensitive(parts.header, q,
                                           cJSON_CreateNumber(3));
    st_join(dir, &parts, 8);
    expect_failure(dir, "model.safetensors", q, "not an object", NULL);
    parts = st_split(dir);
    cJSON *meta = cJSON_GetObjectItem(parts.header, "__metadata__");
    cJSON_AddNumberToObject(meta, "epoch", 3);
    st_join(dir, &parts, 8);
    expect_failure(dir, "model.safetensors", "__metadata__ 'epoch'", NULL);
    remove_dir(dir);

    // a name twice in the header
    dir = copy_variant("f32");
    static const unsigned char four[8] = {0};
    st_write(dir,
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             8, four, 8);
    expect_failure(dir, "model.safetensors", "'a' appears twice", NULL);
    remove_dir(dir);
}

static void test_bad_tensors(void **state)
{
    (void)state;
    char *dir = copy_variant("f32");
    const char *ob = "encoder.layer.1.output.dense.bias";
    struct st_parts parts = st_split(dir);
    cJSON_DeleteItemFromObjectCaseSensitive(parts.header, ob);
    st_rebuild(dir, &parts, NULL);
    expect_failure(dir, "model.safetensors", ob, "missing", NULL);
    remove_dir(dir);

    // wrong shape: the query weight as [32, 16] with half its bytes
    dir = copy_variant("f32");
    const char *q = "encoder.layer.0.attention.self.query.weight";
    parts = st_split(dir);
    cJSON *e = entry(&parts, q);
    cJSON *shape = cJSON_CreateArray();
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(32));
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(16));
    cJSON_ReplaceItemInObjectCaseSensitive(e, "shape", shape);
    static unsigned char zeros[4096];
    cJSON_AddNumberToObject(e, "replace_bytes", 2048);
    st_rebuild(dir, &parts, zeros);
    expect_failure(dir, "model.safetensors", q, "shape [32, 16]",
                   "[32, 32] (hidden_size x hidden_size)", NULL);
    remove_dir(dir);

    // a dtype the encoder cannot use
    dir = copy_variant("f32");
    parts = st_split(dir);
    cJSON_ReplaceItemInObjectCaseSensitive(entry(&parts, q), "dtype",
                                           cJSON_CreateString("I32"));
    st_join(dir, &parts, 8);
    expect_failure(dir, "model.safetensors", q, "dtype I32 is not supported",
                   NULL);
    remove_dir(dir);

    // a NaN weight
    dir = copy_variant("f32");
    parts = st_split(dir);
    const float nan = NAN;
    memcpy(parts.data + (size_t)offset_of(entry(&parts, q), 0) + 12, &nan, 4);
    st_join(dir, &parts, 8);
    expect_failure(dir, "model.safetensors", q, "element 3 is NaN", NULL);
    remove_dir(dir);

    // a LayerNorm under both names, and a layer the config does not have
    dir = copy_variant("f32");
    parts = st_split(dir);
    cJSON_AddItemToObject(
        parts.header, "embeddings.LayerNorm.gamma",
        cJSON_Duplicate(entry(&parts, "embeddings.LayerNorm.weight"), true));
    st_rebuild(dir, &parts, NULL);
    expect_failure(dir, "model.safetensors", "embeddings.LayerNorm.weight",
                   "legacy name 'embeddings.LayerNorm.gamma'", NULL);
    remove_dir(dir);
    dir = copy_variant("f32");
    parts = st_split(dir);
    cJSON_AddItemToObject(parts.header, "encoder.layer.2.output.dense.bias",
                          cJSON_Duplicate(entry(&parts, ob), true));
    st_rebuild(dir, &parts, NULL);
    expect_failure(dir, "model.safetensors",
                   "encoder.layer.2.output.dense.bias",
                   "not part of a BERT encoder of 2 layers", NULL);
    remove_dir(dir);

    // what lies outside the encoder is ignored
    dir = copy_variant("f32");
    parts = st_split(dir);
    cJSON_AddItemToObject(parts.header, "classifier.weight",
                          cJSON_Duplicate(entry(&parts, ob), true));
    st_rebuild(dir, &parts, NULL);
    model_free(load_ok(dir));
    remove_dir(dir);

    // with the bert. prefix, a tensor left without it is missing
    dir = copy_variant("f16_prefixed");
    parts = st_split(dir);
    cJSON *moved = cJSON_DetachItemFromObjectCaseSensitive(
        parts.header, "bert.encoder.layer.2.output.LayerNorm.bias");
    cJSON_AddItemToObject(parts.header, "encoder.layer.2.output.LayerNorm.bias",
                          moved);
    st_join(dir, &parts, 8);
    expect_failure(dir, "bert.encoder.layer.2.output.LayerNorm.bias", "missing",
                   NULL);
    remove_dir(dir);
}

/* ------------------------------------------- config, vocab, tokenizer */

static void write_text(const char *dir, const char *file, const char *text)
{
    char p[1024];
    path_of(p, dir, file);
    spit(p, text, strlen(text));
}

/* config.json of the f32 variant with key set to raw JSON (or removed). */
static void config_with(const char *dir, const char *key, const char *raw)
{
    size_t len;
    char *text = test_read_file("tests/models/f32/config.json", &len);
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    cJSON_DeleteItemFromObjectCaseSensitive(doc, key);
    if (raw)
        cJSON_AddItemToObject(doc, key, cJSON_Parse(raw));
    char *out = cJSON_Print(doc);
    write_text(dir, "config.json", out);
    free(out);
    cJSON_Delete(doc);
}

static void test_bad_config(void **state)
{
    (void)state;
    char *dir = copy_variant("f32");
    const struct {
        const char *key, *raw, *fragment;
    } cases[] = {
        {"hidden_act", "\"relu\"", "hidden_act 'relu' is not supported"},
        {"hidden_act", "3", "hidden_act is not a string"},
        {"num_attention_heads", NULL, "num_attention_heads is missing"},
        {"num_attention_heads", "5", "does not divide hidden_size (32)"},
        {"num_hidden_layers", "0", "num_hidden_layers (0)"},
        {"hidden_size", "2.5", "hidden_size (2.5)"},
        {"hidden_size", "\"32\"", "hidden_size is not a number"},
        {"vocab_size", "1e12", "vocab_size (1e+12)"},
        {"layer_norm_eps", "0", "layer_norm_eps"},
        {"layer_norm_eps", "1e-60", "layer_norm_eps"},
        {"model_type", "\"roberta\"", "model_type 'roberta' is not supported"},
        {"position_embedding_type", "\"relative_key\"",
         "position_embedding_type 'relative_key'"},
        {"is_decoder", "true", "is_decoder is true"},
        // sizes the tensors do not have
        {"intermediate_size", "65", "intermediate.dense.weight"},
        {"max_position_embeddings", "41", "[41, 32]"},
        {"type_vocab_size", "3", "token_type_embeddings"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        config_with(dir, cases[i].key, cases[i].raw);
        expect_failure(dir, cases[i].fragment, NULL);
    }
    // the defaults transformers gives stand in for absent keys
    config_with(dir, "hidden_act", NULL);
    config_with(dir, "layer_norm_eps", NULL);
    model_free(load_ok(dir));
    write_text(dir, "config.json", "{\"hidden_size\": 32,");
    expect_failure(dir, "config.json", "not valid JSON", NULL);
    write_text(dir, "config.json", "[1, 2]");
    expect_failure(dir, "config.json", "not a JSON object", NULL);
    char p[1024];
    path_of(p, dir, "config.json");
    unlink(p);
    expect_failure(dir, "config.json", "No such file", NULL);
    remove_dir(dir);

    expect_failure("tests/models/does-not-exist", "config.json", NULL);
    char long_dir[5000];
    memset(long_dir, 'd', sizeof long_dir - 1);
    long_dir[sizeof long_dir - 1] = '\0';
    expect_failure(long_dir, "the path is too long", NULL);
    struct model *m = (struct model *)1;
    char err[300];
    assert_false(
        model_load("no spaces", "tests/models/f32", &m, err, sizeof err));
    assert_null(m);
    assert_non_null(strstr(err, "model name 'no spaces'"));
    assert_false(model_load("", "tests/models/f32", &m, err, sizeof err));
}

/* A token's bytes decode a text back: the tokens of each golden sentence
 * (what the tokenizer added left out) give its bytes again, CJK, emoji
 * and byte-fallback pieces included; SentencePiece's with the space it
 * prepends. (Not the sentence with special tokens typed in: SentencePiece
 * prepends its space to each piece between them, as the tokenizers
 * library does.) */
static void test_token_bytes_decode(void **state)
{
    (void)state;
    const struct {
        const char *variant;
        bool prepends;
    } cases[] = {{"gpt2", false},
                 {"llama3", false},
                 {"llama2", true},
                 {"mistral", true}};
    for (size_t v = 0; v < sizeof cases / sizeof *cases; v++) {
        char dir[256], path[256];
        snprintf(dir, sizeof dir, "tests/models/%s", cases[v].variant);
        struct model *m = load_ok(dir);
        snprintf(path, sizeof path, "tests/models/golden/%s.json",
                 cases[v].variant);
        size_t len;
        char *text = test_read_file(path, &len);
        cJSON *g = cJSON_ParseWithLength(text, len);
        free(text);
        for (int k = 0; k < 3; k += 2) {
            const cJSON *c =
                cJSON_GetArrayItem(cJSON_GetObjectItem(g, "cases"), k);
            const char *sentence =
                cJSON_GetObjectItem(c, "sentence")->valuestring;
            struct tok_encoding enc;
            assert_int_equal(tok_encode(&m->tokenizer, sentence,
                                        strlen(sentence), NULL, 0, NULL, &enc,
                                        NULL),
                             ATTN_OK);
            char out[4096];
            size_t n = 0;
            for (size_t i = 0; i < enc.count; i++)
                if (!enc.added[i])
                    n += tok_token_bytes(&m->tokenizer, enc.ids[i], out + n,
                                         sizeof out - n);
            out[n] = '\0';
            char want[4096];
            snprintf(want, sizeof want, "%s%s", cases[v].prepends ? " " : "",
                     sentence);
            if (strcmp(out, want))
                fail_msg("%s: \"%s\" decodes to \"%s\"", cases[v].variant, want,
                         out);
            tok_encoding_free(&enc);
        }
        cJSON_Delete(g);
        model_free(m);
    }
}

/* The ids that end a generation: config.json's eos_token_id (one or a
 * list), generation_config.json's in its place when it has one; ids the
 * vocabulary does not have are refused at load, naming the file. */
/* The induction probe's input on real tokenizers: ordinary tokens drawn
 * by the seed alone, repeated, framed by what each tokenizer adds to a
 * text (Llama 3's BOS, GPT-2's nothing, BERT's [CLS] and [SEP]) or by
 * nothing; too long is refused naming probe_length. */
static void test_repeated_tokens(void **state)
{
    (void)state;
    const struct {
        const char *name;
        size_t before, after;
    } variants[] = {{"llama3", 1, 0}, {"gpt2", 0, 0}, {"f32", 1, 1}};
    enum { L = 40 };
    for (size_t v = 0; v < 3; v++) {
        char dir[256];
        snprintf(dir, sizeof dir, "tests/models/%s", variants[v].name);
        struct model *m = load_ok(dir);
        const struct tokenizer *t = &m->tokenizer;
        struct tok_encoding a, b, c;
        struct attn_error err;
        const struct tok_options framed = {0}, bare = {.no_special = true};
        assert_int_equal(
            tok_encode_repeated(t, m->xf.vocab_size, 9, L, &framed, &a, &err),
            ATTN_OK);
        const size_t before = variants[v].before, after = variants[v].after;
        assert_int_equal(a.count, before + 2 * L + after);
        for (size_t i = 0; i < a.count; i++)
            assert_int_equal(a.added[i], i < before || i >= before + 2 * L);
        size_t distinct = 0;
        for (size_t i = 0; i < L; i++) {
            const uint32_t id = a.ids[before + i];
            assert_int_equal(id, a.ids[before + L + i]);
            assert_true(id < tok_vocab_size(t) && id < m->xf.vocab_size);
            assert_false(tok_token_special(t, id));
            distinct += i == 0 || id != a.ids[before + i - 1];
        }
        assert_true(distinct > L / 2);
        // the same seed, the same tokens; no frame: the tokens alone
        assert_int_equal(
            tok_encode_repeated(t, m->xf.vocab_size, 9, L, &bare, &b, &err),
            ATTN_OK);
        assert_int_equal(b.count, 2 * L);
        assert_memory_equal(b.ids, a.ids + before, 2 * L * sizeof *b.ids);
        // another seed, other tokens
        assert_int_equal(
            tok_encode_repeated(t, m->xf.vocab_size, 10, L, &bare, &c, &err),
            ATTN_OK);
        assert_memory_not_equal(c.ids, b.ids, L * sizeof *c.ids);
        if (before)
            assert_true(tok_token_special(t, a.ids[0]));
        tok_encoding_free(&a);
        tok_encoding_free(&b);
        tok_encoding_free(&c);
        const struct tok_options capped = {.max_tokens = 2 * L};
        assert_int_equal(
            tok_encode_repeated(t, m->xf.vocab_size, 9, L, &capped, &a, &err),
            before + after ? ATTN_E_TOO_BIG : ATTN_OK);
        if (before + after)
            assert_string_equal(err.field, "probe_length");
        else
            tok_encoding_free(&a);
        model_free(m);
    }
}

static void test_eos_ids(void **state)
{
    (void)state;
    char *dir = copy_variant("f32");
    config_with(dir, "eos_token_id", "[3, 1]");
    struct model *m = load_ok(dir);
    assert_int_equal(m->extra.n_eos, 2);
    assert_int_equal(m->extra.eos[0], 3);
    assert_int_equal(m->extra.eos[1], 1);
    model_free(m);
    config_with(dir, "eos_token_id", "2");
    write_text(dir, "generation_config.json",
               "{\"eos_token_id\": [5, 6, 7], \"do_sample\": true}");
    m = load_ok(dir);
    assert_int_equal(m->extra.n_eos, 3);
    assert_int_equal(m->extra.eos[2], 7);
    model_free(m);
    write_text(dir, "generation_config.json", "{\"eos_token_id\": 99999}");
    expect_failure(dir, "generation_config.json", "eos_token_id (99999)", NULL);
    write_text(dir, "generation_config.json", "{\"max_length\": 20}");
    m = load_ok(dir); /* none there: config.json's */
    assert_int_equal(m->extra.n_eos, 1);
    assert_int_equal(m->extra.eos[0], 2);
    model_free(m);
    config_with(dir, "eos_token_id", "\"</s>\"");
    expect_failure(dir, "config.json", "eos_token_id holds a string", NULL);
    config_with(dir, "eos_token_id",
                "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]");
    expect_failure(dir, "config.json", "more than 16", NULL);
    char p[1024];
    path_of(p, dir, "generation_config.json");
    unlink(p);
    remove_dir(dir);
}

static void test_bad_vocab_and_tokenizer(void **state)
{
    (void)state;
    char *dir = copy_variant("f32");
    size_t len;
    char *vocab = test_read_file("tests/models/f32/vocab.txt", &len);
    // more lines than vocab_size
    char *more = malloc(len + 8);
    memcpy(more, vocab, len);
    memcpy(more + len, "extra\n", 7);
    write_text(dir, "vocab.txt", more);
    expect_failure(dir, "vocab.txt", "more than 79 lines", NULL);
    // invalid UTF-8 on line 3
    char *bad = strdup(vocab);
    char *line3 = strchr(strchr(bad, '\n') + 1, '\n') + 1;
    line3[0] = '\xC3';
    write_text(dir, "vocab.txt", bad);
    expect_failure(dir, "vocab.txt", "line 3 has invalid UTF-8", NULL);
    // no [UNK]
    write_text(dir, "vocab.txt", "[CLS]\n[SEP]\ncat\n");
    expect_failure(dir, "vocab.txt", "no [UNK]", NULL);
    write_text(dir, "vocab.txt", "");
    expect_failure(dir, "vocab.txt", "no tokens", NULL);
    // CRLF lines read as transformers reads them
    char *crlf = malloc(2 * len + 1);
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (vocab[i] == '\n')
            crlf[o++] = '\r';
        crlf[o++] = vocab[i];
    }
    crlf[o] = '\0';
    write_text(dir, "vocab.txt", crlf);
    struct model *m = load_ok(dir);
    assert_int_equal(tok_vocab_size(&m->tokenizer), 79);
    assert_int_equal(tok_token_id(&m->tokenizer, "cat", 3), 15);
    model_free(m);
    write_text(dir, "vocab.txt", vocab);

    write_text(dir, "tokenizer_config.json",
               "{\"do_lower_case\": false, \"strip_accents\": true}");
    expect_failure(dir, "tokenizer_config.json", "strip_accents", NULL);
    write_text(dir, "tokenizer_config.json", "{\"do_lower_case\": \"yes\"}");
    expect_failure(dir, "tokenizer_config.json", "do_lower_case", NULL);
    write_text(dir, "tokenizer_config.json",
               "{\"tokenize_chinese_chars\": false}");
    expect_failure(dir, "tokenize_chinese_chars", NULL);
    write_text(dir, "tokenizer_config.json", "{\"do_lower_case\": false}");
    m = load_ok(dir);
    assert_false(m->do_lower_case);
    model_free(m);
    char p[1024];
    path_of(p, dir, "tokenizer_config.json");
    unlink(p);
    m = load_ok(dir);
    assert_true(m->do_lower_case);
    model_free(m);
    free(vocab);
    free(more);
    free(bad);
    free(crlf);
    remove_dir(dir);
}

/* The header reader on its own, as the fuzz target calls it. */
/* The f32 variant split into two shards (the tensors before and after
 * the 12th of the header) with model.safetensors.index.json; *index gets
 * the index, which the caller may rewrite. */
static char *sharded_variant(cJSON **index)
{
    char *dir = copy_variant("f32");
    struct st_parts parts = st_split(dir);
    cJSON *halves[2] = {cJSON_CreateObject(), cJSON_CreateObject()};
    unsigned char *data[2] = {malloc(parts.data_len), malloc(parts.data_len)};
    size_t used[2] = {0, 0}, k = 0, total = 0;
    cJSON *map = cJSON_CreateObject();
    const char *files[2] = {"model-00001-of-00002.safetensors",
                            "model-00002-of-00002.safetensors"};
    const cJSON *e;
    cJSON_ArrayForEach(e, parts.header)
    {
        if (strcmp(e->string, "__metadata__") == 0)
            continue;
        const int half = k++ < 12 ? 0 : 1;
        cJSON *copy = cJSON_Duplicate(e, true);
        const size_t b = (size_t)offset_of(copy, 0),
                     len = (size_t)offset_of(copy, 1) - b;
        memcpy(data[half] + used[half], parts.data + b, len);
        set_pair(copy, "data_offsets", (double)used[half],
                 (double)(used[half] + len));
        used[half] += len;
        total += len;
        cJSON_AddItemToObject(halves[half], e->string, copy);
        cJSON_AddStringToObject(map, e->string, files[half]);
    }
    for (int h = 0; h < 2; h++) {
        char *text = cJSON_PrintUnformatted(halves[h]);
        st_write_file(dir, files[h], text, 8, data[h], used[h]);
        free(text);
        free(data[h]);
        cJSON_Delete(halves[h]);
    }
    cJSON_Delete(parts.header);
    free(parts.data);
    char p[1024];
    path_of(p, dir, "model.safetensors");
    unlink(p);
    *index = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(*index, "metadata");
    cJSON_AddNumberToObject(meta, "total_size", (double)total);
    cJSON_AddItemToObject(*index, "weight_map", map);
    char *text = cJSON_Print(*index);
    write_text(dir, "model.safetensors.index.json", text);
    free(text);
    return dir;
}

static void write_index(const char *dir, const cJSON *index)
{
    char *text = cJSON_Print(index);
    write_text(dir, "model.safetensors.index.json", text);
    free(text);
}

/* Shards with their index load as the one file does, and every way the
 * index can disagree with the files is refused, naming it. */
static void test_sharded(void **state)
{
    (void)state;
    cJSON *index;
    char *dir = sharded_variant(&index);
    struct model *m = load_ok(dir);
    assert_int_equal(m->shards.count, 2);
    check_goldens(m, "f32");
    model_free(m);

    cJSON *map = cJSON_GetObjectItem(index, "weight_map");
    char first[96]; /* the item, its name with it, is replaced below */
    snprintf(first, sizeof first, "%s", map->child->string);
    // a tensor said to be in the other file
    cJSON_ReplaceItemInObject(
        map, first, cJSON_CreateString("model-00002-of-00002.safetensors"));
    write_index(dir, index);
    expect_failure(dir, "model.safetensors.index.json", first, "is not in",
                   NULL);
    // a file outside the folder
    cJSON_ReplaceItemInObject(map, first,
                              cJSON_CreateString("../model.safetensors"));
    write_index(dir, index);
    expect_failure(dir, "not a file of the folder", NULL);
    // a file that is not there
    cJSON_ReplaceItemInObject(
        map, first, cJSON_CreateString("model-00003-of-00003.safetensors"));
    write_index(dir, index);
    expect_failure(dir, "model-00003-of-00003.safetensors", "No such file",
                   NULL);
    cJSON_ReplaceItemInObject(
        map, first, cJSON_CreateString("model-00001-of-00002.safetensors"));
    // a size that is not the tensors'
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(index, "metadata"),
                              "total_size", cJSON_CreateNumber(12));
    write_index(dir, index);
    expect_failure(dir, "metadata.total_size is 12", NULL);
    // a tensor of the files the index does not list
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(index, "metadata"),
                               "total_size");
    cJSON_DeleteItemFromObject(map, first);
    write_index(dir, index);
    expect_failure(dir, "weight_map lists", NULL);
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {}}");
    expect_failure(dir, "weight_map is missing or empty", NULL);
    write_text(dir, "model.safetensors.index.json", "{");
    expect_failure(dir, "model.safetensors.index.json", "not valid JSON", NULL);
    cJSON_Delete(index);
    remove_dir(dir);
}

static void test_header_reader(void **state)
{
    (void)state;
    static const char file[] =
        "\x40\0\0\0\0\0\0\0"
        "{\"t\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}"
        "         "
        "\x80\x3f\x00\x40";
    struct st_header h;
    char err[200];
    if (!st_header_parse((const unsigned char *)file, sizeof file - 1, &h, err,
                         sizeof err))
        fail_msg("%s", err);
    assert_int_equal(h.count, 1);
    const struct st_tensor *t = st_find(&h, "t");
    assert_non_null(t);
    assert_int_equal(t->dtype, ST_BF16);
    assert_int_equal(t->offset, 8 + 64);
    assert_int_equal(t->bytes, 4);
    assert_null(st_find(&h, "u"));
    st_header_free(&h);
    assert_string_equal(st_dtype_name(ST_F8_E5M2), "F8_E5M2");
    assert_int_equal(st_dtype_size(ST_I64), 8);
}

/* A family's list of tensors takes no more than its room: a naming that
 * puts more than it counted (a family bug) goes to the spare, not past
 * the array, and the count says how many were put. Counting first needs
 * no array at all. */
static void test_tensor_list_room(void **state)
{
    (void)state;
    struct xf_matrix a, b, c;
    struct model_tensors count = {0};
    MODEL_TENSOR(&count, &a, 2, 3, "two x three", "a.%d", 0);
    MODEL_TENSOR(&count, &b, 4, 0, "four", "b");
    assert_int_equal(count.count, 2);
    struct model_tensor *room = malloc(2 * sizeof *room);
    assert_non_null(room);
    struct model_tensors list = {.at = room, .room = 2};
    MODEL_TENSOR(&list, &a, 2, 3, "two x three", "a.%d", 0);
    MODEL_TENSOR(&list, &b, 4, 0, "four", "b");
    model_tensors_last(&list)->bare = true;
    MODEL_TENSOR(&list, &c, 5, 0, "five", "c");
    model_tensors_last(&list)->bare = true;
    assert_int_equal(list.count, 3);
    assert_string_equal(room[0].name, "a.0");
    assert_true(room[0].matrix == &a && room[0].rows == 2 && room[0].cols == 3);
    assert_string_equal(room[1].name, "b");
    assert_true(room[1].bare);
    assert_string_equal(list.spare.name, "c");
    free(room);
}

int main(void)
{
    attn_blas_single_thread();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensor_list_room),
        cmocka_unit_test(test_variants_load_and_match),
        cmocka_unit_test(test_unaligned_f32),
        cmocka_unit_test(test_half_conversions),
        cmocka_unit_test(test_truncated_and_short),
        cmocka_unit_test(test_bad_offsets),
        cmocka_unit_test(test_bad_entries),
        cmocka_unit_test(test_bad_tensors),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_eos_ids),
        cmocka_unit_test(test_repeated_tokens),
        cmocka_unit_test(test_token_bytes_decode),
        cmocka_unit_test(test_bad_vocab_and_tokenizer),
        cmocka_unit_test(test_header_reader),
        cmocka_unit_test(test_sharded),
        cmocka_unit_test(test_decoders_load_and_match),
        cmocka_unit_test(test_new_family_refusals),
        cmocka_unit_test(test_strided_slices),
        cmocka_unit_test(test_longrope_boundary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
