/*
 * test_family_design.c - a model family is its file and one row: this
 * file is a family of its own ("toy", a LLaMA-style decoder read from
 * config.json with the loader's shared readers), and its one row is the
 * table below. Nothing outside this file names it; the loader takes it
 * through model_load_in(), reads tests/models/llama2's tensors and
 * tokenizer with it, and a forward pass gives the same bits as the
 * built-in LLaMA family.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "files.h"
#include "model/config_keys.h"
#include "model/family.h"
#include "model/model.h"
#include "model/tokenizer_json.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------ the family's file */

static bool toy_read_config(const cJSON *doc, struct model *m, char *err,
                            size_t err_len)
{
    struct xf_model *c = &m->xf;
    double theta;
    if (!config_size(doc, "num_hidden_layers", XF_MAX_LAYERS, true, 0,
                     &c->layers, err, err_len) ||
        !config_size(doc, "hidden_size", XF_MAX_DIM, true, 0, &c->hidden, err,
                     err_len) ||
        !config_size(doc, "num_attention_heads", XF_MAX_DIM, true, 0, &c->heads,
                     err, err_len) ||
        !config_size(doc, "intermediate_size", XF_MAX_DIM, true, 0,
                     &c->intermediate, err, err_len) ||
        !config_size(doc, "vocab_size", XF_MAX_VOCAB, true, 0, &c->vocab_size,
                     err, err_len) ||
        !config_size(doc, "max_position_embeddings", XF_MAX_POSITIONS, false,
                     2048, &c->max_positions, err, err_len) ||
        !config_eps(doc, "rms_norm_eps", 1e-6f, &c->norm_eps, err, err_len) ||
        !config_positive(doc, "rope_theta", 10000.0, &theta, err, err_len))
        return false;
    c->kv_heads = c->heads;
    c->head_dim = c->hidden / c->heads;
    c->arch = (struct xf_arch){.norm = XF_NORM_RMS,
                               .norm_place = XF_NORM_BEFORE,
                               .ffn = XF_FFN_GATED,
                               .act = XF_ACT_SILU,
                               .positions = XF_POS_ROTARY,
                               .final_norm = true,
                               .causal = true};
    c->kind[0].rope =
        (struct attn_rotary){.base = theta, .pairing = ATTN_ROPE_HALF};
    return true;
}

static void toy_name_tensors(struct model *m, struct model_tensors *w)
{
    struct xf_model *b = &m->xf;
    const size_t H = b->hidden, IW = b->intermediate;
    MODEL_TENSOR(w, &b->word_emb, b->vocab_size, H, "vocab x hidden",
                 "embed_tokens.weight");
    MODEL_TENSOR(w, &b->final_norm_w, H, 0, "hidden", "norm.weight");
    MODEL_TENSOR(w, &b->lm_head, b->vocab_size, H, "vocab x hidden",
                 "lm_head.weight");
    model_tensors_last(w)->bare = true;
    for (size_t l = 0; l < b->layers; l++) {
        struct xf_layer *y = &m->layers[l];
        MODEL_TENSOR(w, &y->attn_norm_w, H, 0, "hidden",
                     "layers.%zu.input_layernorm.weight", l);
        MODEL_TENSOR(w, &y->ffn_norm_w, H, 0, "hidden",
                     "layers.%zu.post_attention_layernorm.weight", l);
        struct xf_matrix *attn[] = {&y->q_w, &y->k_w, &y->v_w, &y->o_w};
        const char *names[] = {"q", "k", "v", "o"};
        for (int i = 0; i < 4; i++)
            MODEL_TENSOR(w, attn[i], H, H, "hidden x hidden",
                         "layers.%zu.self_attn.%s_proj.weight", l, names[i]);
        MODEL_TENSOR(w, &y->gate_w, IW, H, "intermediate x hidden",
                     "layers.%zu.mlp.gate_proj.weight", l);
        MODEL_TENSOR(w, &y->up_w, IW, H, "intermediate x hidden",
                     "layers.%zu.mlp.up_proj.weight", l);
        MODEL_TENSOR(w, &y->down_w, H, IW, "hidden x intermediate",
                     "layers.%zu.mlp.down_proj.weight", l);
    }
}

static const char *toy_prefix(const struct shards *s)
{
    (void)s;
    return "model.";
}

static bool toy_in_network(const char *rest)
{
    return !strncmp(rest, "layers.", 7) || !strncmp(rest, "embed_tokens.", 13);
}

static const struct family family_toy = {
    .model_type = "toy",
    .network = "toy decoder",
    .decoder = true,
    .read_config = toy_read_config,
    .name_tensors = toy_name_tensors,
    .prefix = toy_prefix,
    .in_network = toy_in_network,
    .open_tokenizer = tokenizer_json_open,
};

/* ------------------------------------------------------------- its row */

static const struct family *const toy_rows[] = {&family_toy};
static const struct family_table toy_table = {toy_rows, 1};

/* ----------------------------------------------------------------- tests */

/* tests/models/llama2 with config.json's model_type "toy", in a new
 * folder. */
static char *toy_copy(void)
{
    char tmpl[] = "/tmp/attnd-toy-XXXXXX";
    char *dir = mkdtemp(tmpl);
    assert_non_null(dir);
    dir = strdup(dir);
    const char *files[] = {"config.json", "model.safetensors", "tokenizer.json",
                           "tokenizer_config.json"};
    for (int i = 0; i < 4; i++) {
        char from[512], to[512];
        snprintf(from, sizeof from, "tests/models/llama2/%s", files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        size_t len;
        char *bytes = test_read_file(from, &len);
        if (i == 0) {
            cJSON *config = cJSON_ParseWithLength(bytes, len);
            cJSON_ReplaceItemInObject(config, "model_type",
                                      cJSON_CreateString("toy"));
            free(bytes);
            bytes = cJSON_Print(config);
            len = strlen(bytes);
            cJSON_Delete(config);
        }
        FILE *f = fopen(to, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(bytes, 1, len, f), len);
        fclose(f);
        free(bytes);
    }
    return dir;
}

static void remove_toy(char *dir)
{
    const char *files[] = {"config.json", "model.safetensors", "tokenizer.json",
                           "tokenizer_config.json"};
    for (int i = 0; i < 4; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    free(dir);
}

static float *logits_of(const struct model *m, const char *text)
{
    struct tok_encoding enc;
    struct attn_error err = {0};
    if (tok_encode(&m->tokenizer, text, strlen(text), NULL, 0,
                   &(struct tok_options){.max_tokens = 64}, &enc, &err))
        fail_msg("tok_encode: %s", err.message);
    const struct xf_run run = {.ids = enc.ids,
                               .n = enc.count,
                               .want = XF_WANT_WEIGHTS | XF_WANT_LOGITS,
                               .layer = XF_ALL_LAYERS};
    struct xf_plan plan;
    struct xf_result r;
    if (xf_plan(&m->xf, &run, &plan, &err) || xf_forward(&plan, NULL, &r, &err))
        fail_msg("xf_forward: %s", err.message);
    float *logits = malloc(m->xf.vocab_size * sizeof *logits);
    memcpy(logits, r.logits, m->xf.vocab_size * sizeof *logits);
    xf_result_free(&r);
    tok_encoding_free(&enc);
    return logits;
}

/* The family of this file, its row in a table of one: the checkpoint
 * loads through it and computes what the built-in family computes. */
static void test_a_family_is_its_file_and_a_row(void **state)
{
    (void)state;
    char *dir = toy_copy();
    char err[512] = "";
    struct model *toy = NULL, *llama = NULL;
    if (!model_load_in(&toy_table, "toy", dir, &toy, err, sizeof err))
        fail_msg("%s", err);
    assert_ptr_equal(toy->family, &family_toy);
    if (!model_load("llama2", "tests/models/llama2", &llama, err, sizeof err))
        fail_msg("%s", err);
    float *a = logits_of(toy, "The cat sat on the mat.");
    float *b = logits_of(llama, "The cat sat on the mat.");
    assert_memory_equal(a, b, toy->xf.vocab_size * sizeof *a);
    free(a);
    free(b);
    model_free(llama);
    model_free(toy);
    // attnd's own table does not know it
    assert_false(model_load("toy", dir, &toy, err, sizeof err));
    assert_non_null(strstr(err, "model_type 'toy' is not supported"));
    remove_toy(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_family_is_its_file_and_a_row),
    };
    return cmocka_run_group_tests_name("family design", tests, NULL, NULL);
}
