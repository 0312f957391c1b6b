/*
 * test_request.c - request decoding in isolation: the field table's own
 * consistency, defaults as the echo shows them, every scalar field through
 * JSON and through GET alike, where refusals point, and the steps that
 * read inputs, masks, parameters and the PNG options.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "model_fixture.h"

#include "answer.h"
#include "heatmap.h"
#include "models.h"
#include "request.h"
#include "request_fields.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Decode body; *pb says why not. The caller frees req. */
static bool decode(struct request *req, const char *body, struct problem *pb)
{
    request_init(req);
    memset(pb, 0, sizeof *pb);
    return request_parse_json(req, body, strlen(body), &fixture_limits, pb);
}

/* Decode a query string "a=1&b=2" (no escapes) with its PNG options, and
 * plan its answer as the server does next, which measures the image. */
static bool decode_query(struct request *req, const char *query,
                         struct problem *pb)
{
    char text[1024];
    snprintf(text, sizeof text, "%s", query);
    struct request_param p[32];
    size_t n = 0;
    for (char *pair = strtok(text, "&"); pair && n < 32;
         pair = strtok(NULL, "&")) {
        char *eq = strchr(pair, '=');
        if (eq)
            *eq = '\0';
        p[n++] = (struct request_param){pair, eq ? eq + 1 : ""};
    }
    request_init(req);
    memset(pb, 0, sizeof *pb);
    struct answer_plan plan;
    return request_parse_image(req, p, n, IMAGE_JSON, pb) &&
           request_parse_query(req, p, n, &fixture_limits, pb) &&
           answer_ops(req->kind)->plan(req, &plan, pb);
}

/* The config echo of a decoded request, parsed. */
static cJSON *echo_of(const struct request *req)
{
    struct buf b;
    buf_init(&b, 1 << 16);
    assert_true(request_fields_echo(&b, req));
    cJSON *doc = cJSON_Parse(b.data);
    assert_non_null(doc);
    buf_free(&b);
    return doc;
}

static void expect_refusal(const char *body, int status, const char *pointer,
                           const char *detail)
{
    struct request req;
    struct problem pb;
    if (decode(&req, body, &pb))
        fail_msg("%s: accepted", body);
    if (pb.status != status || strcmp(pb.pointer, pointer) ||
        !strstr(pb.detail, detail))
        fail_msg("%s: %d at \"%s\": %s; expected %d at \"%s\" with \"%s\"",
                 body, pb.status, pb.pointer, pb.detail, status, pointer,
                 detail);
    request_free(&req);
}

/* ------------------------------------------------------------ the table */

static void test_table_is_consistent(void **state)
{
    (void)state;
    assert_true(request_field_count <= 64);
    for (size_t i = 0; i < request_field_count; i++) {
        const struct request_field *f = &request_fields[i];
        char pointer[80];
        snprintf(pointer, sizeof pointer, "/%s", f->name);
        assert_string_equal(f->pointer, pointer);
        assert_ptr_equal(request_field_find(f->name), f);
        assert_int_equal(request_field_index(f), i);
        assert_true(f->where & (FIELD_IN_BODY | FIELD_IN_QUERY));
        const bool scalar = f->kind == FIELD_SIZE || f->kind == FIELD_BOOL ||
                            f->kind == FIELD_FLOAT || f->kind == FIELD_SEED ||
                            f->kind == FIELD_ENUM;
        if (scalar && !f->offset)
            fail_msg("%s is read by the table but has no offset", f->name);
        if (f->kind == FIELD_ENUM && !f->value_name)
            fail_msg("%s is an enum without names", f->name);
        if (f->kind == FIELD_SIZE && (f->min < 1 || (!f->limit && !f->max)))
            fail_msg("%s has no range", f->name);
        if ((f->kind == FIELD_PNG) != (f->where == FIELD_IN_QUERY))
            fail_msg("%s: the URL alone takes exactly the PNG options",
                     f->name);
        if (f->default_json) {
            cJSON *d = cJSON_Parse(f->default_json);
            if (!d)
                fail_msg("%s: default %s is not JSON", f->name,
                         f->default_json);
            cJSON_Delete(d);
        }
    }
    assert_null(request_field_find("colour"));
}

/* A request that gives nothing but a sentence echoes every documented
 * default: the table's defaults are the ones the code applies. */
static void test_defaults_are_what_the_echo_shows(void **state)
{
    (void)state;
    struct request req, on_model;
    struct problem pb;
    assert_true(decode(&req, "{\"sentence\":\"the cat sat\"}", &pb));
    assert_true(
        decode(&on_model, "{\"model\":\"f32\",\"sentence\":\"the cat\"}", &pb));
    cJSON *echo = echo_of(&req), *model_echo = echo_of(&on_model);
    int checked = 0;
    for (size_t i = 0; i < request_field_count; i++) {
        const struct request_field *f = &request_fields[i];
        if (!f->echo || !f->default_json)
            continue;
        cJSON *want = cJSON_Parse(f->default_json);
        /* what only a model takes is echoed only with one */
        const cJSON *got = cJSON_GetObjectItemCaseSensitive(
            f->models == MODELS_REQUIRED ? model_echo : echo, f->name);
        if (!got || !cJSON_Compare(want, got, true)) {
            char *shown = got ? cJSON_PrintUnformatted(got) : NULL;
            fail_msg("%s echoes %s; the table says %s", f->name,
                     shown ? shown : "nothing", f->default_json);
        }
        cJSON_Delete(want);
        checked++;
    }
    assert_true(checked >= 12);
    /* and what follows from the others */
    assert_int_equal(cJSON_GetObjectItem(echo, "kv_heads")->valueint, 8);
    assert_int_equal(cJSON_GetObjectItem(echo, "d_k")->valueint, 8);
    assert_string_equal(cJSON_GetObjectItem(echo, "precision")->valuestring,
                        "shortest");
    /* a model's echo: its sizes, and none of the random mode's options */
    assert_int_equal(cJSON_GetObjectItem(model_echo, "layers")->valueint, 2);
    assert_int_equal(cJSON_GetObjectItem(model_echo, "tokens")->valueint, 4);
    assert_null(cJSON_GetObjectItem(model_echo, "d_model"));
    assert_null(cJSON_GetObjectItem(echo, "layer"));
    cJSON_Delete(model_echo);
    cJSON_Delete(echo);
    request_free(&on_model);
    request_free(&req);
}

/* What only a model takes, through the body and the URL alike, on top of
 * "model": "f32" and a sentence. */
#define SENTENCE "\"sentence\":\"a b\",", "sentence=a b&"
static const struct {
    const char *name, *json, *query;
    const char *base_json, *base_query; /* the input: a sentence or a probe */
} model_samples[] = {
    {"sentence_b", "\"a dog\"", "a dog", SENTENCE},
    {"layer", "1", "1", SENTENCE},
    {"add_special_tokens", "false", "false", SENTENCE},
    {"probe", "\"induction\"", "induction", "\"probe_length\":7,",
     "probe_length=7&"},
    {"probe_length", "7", "7", "\"probe\":\"induction\",", "probe=induction&"},
    {"probe_seed", "\"12\"", "12",
     "\"probe\":\"induction\",\"probe_length\":7,",
     "probe=induction&probe_length=7&"},
    {"logit_lens_k", "3", "3", SENTENCE},
    {"products", "\"bfloat16\"", "bfloat16", SENTENCE},
};
#undef SENTENCE

static void test_model_json_and_query_agree(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof model_samples / sizeof model_samples[0];
         k++) {
        char body[256], query[256];
        snprintf(body, sizeof body, "{\"model\":\"f32\",%s\"%s\":%s}",
                 model_samples[k].base_json, model_samples[k].name,
                 model_samples[k].json);
        snprintf(query, sizeof query, "model=f32&%s%s=%s",
                 model_samples[k].base_query, model_samples[k].name,
                 model_samples[k].query);
        struct request a, b, d;
        struct problem pa, pq, pd;
        if (!decode(&a, body, &pa) || !decode_query(&b, query, &pq))
            fail_msg("%s: %s / %s", model_samples[k].name, pa.detail,
                     pq.detail);
        assert_true(
            decode(&d, "{\"model\":\"f32\",\"sentence\":\"a b\"}", &pd));
        cJSON *ea = echo_of(&a), *eq = echo_of(&b), *ed = echo_of(&d);
        if (!cJSON_Compare(ea, eq, true))
            fail_msg("%s: the body and the URL give different configs",
                     model_samples[k].name);
        // (bfloat16 products fall back to float32 on a CPU without them)
        const bool cpu_bound = !strcmp(model_samples[k].name, "products") &&
                               !xf_bf16_dots_available();
        if (!cpu_bound &&
            cJSON_Compare(cJSON_GetObjectItem(ea, model_samples[k].name),
                          cJSON_GetObjectItem(ed, model_samples[k].name), true))
            fail_msg("%s: the echo shows the default", model_samples[k].name);
        cJSON_Delete(ea);
        cJSON_Delete(eq);
        cJSON_Delete(ed);
        request_free(&a);
        request_free(&b);
        request_free(&d);
    }
}

/* Every scalar field that GET takes: a value other than its default, the
 * same through the body and through the URL. */
static const struct {
    const char *name, *json, *query;
} samples[] = {
    {"mode", "\"basic\"", "basic"},
    {"heads", "4", "4"},
    {"kv_heads", "2", "2"},
    {"d_model", "32", "32"},
    {"d_k", "6", "6"},
    {"d_v", "10", "10"},
    {"d_out", "12", "12"},
    {"bias", "true", "1"},
    {"out_proj", "false", "false"},
    {"out_bias", "true", "true"},
    {"scale", "0.25", "0.25"},
    {"residual", "\"input\"", "input"},
    {"mask", "\"causal\"", "causal"},
    {"causal", "true", "1"},
    {"add_zero_attn", "true", "true"},
    {"positional", "\"rope\"", "rope"},
    {"dropout", "0.5", "0.5"},
    {"seed", "\"18446744073709551615\"", "18446744073709551615"},
    {"lowercase", "false", "0"},
    {"special_tokens", "true", "true"},
    {"return", "[\"output\",\"q\"]", "output,q"},
    {"sparse_k", "3", "3"},
    {"precision", "4", "4"},
};

static void test_every_query_field_is_sampled(void **state)
{
    (void)state;
    for (size_t i = 0; i < request_field_count; i++) {
        const struct request_field *f = &request_fields[i];
        if (!(f->where & FIELD_IN_QUERY) || f->kind == FIELD_PNG ||
            f->kind == FIELD_INPUT || f->kind == FIELD_CONTEXT)
            continue;
        /* "model" is the base of every model sample */
        bool found = !strcmp(f->name, "model");
        for (size_t k = 0; k < sizeof samples / sizeof samples[0]; k++)
            found = found || !strcmp(samples[k].name, f->name);
        for (size_t k = 0; k < sizeof model_samples / sizeof model_samples[0];
             k++)
            found = found || !strcmp(model_samples[k].name, f->name);
        if (!found)
            fail_msg("no sample for %s", f->name);
    }
}

static void test_json_and_query_agree(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof samples / sizeof samples[0]; k++) {
        /* each sample alone, with what it needs besides */
        const char *needs = "";
        if (!strcmp(samples[k].name, "d_out"))
            needs = ",\"heads\":2";
        char body[512], query[512];
        snprintf(body, sizeof body, "{\"sentence\":\"a b c\",\"%s\":%s%s}",
                 samples[k].name, samples[k].json, needs);
        snprintf(query, sizeof query, "sentence=a b c&%s=%s%s", samples[k].name,
                 samples[k].query, needs[0] ? "&heads=2" : "");
        struct request a, b;
        struct problem pa, pq;
        const bool ok_json = decode(&a, body, &pa);
        const bool ok_query = decode_query(&b, query, &pq);
        if (!ok_json || !ok_query)
            fail_msg("%s: json %s (%s), query %s (%s)", samples[k].name,
                     ok_json ? "ok" : "refused", pa.detail,
                     ok_query ? "ok" : "refused", pq.detail);
        cJSON *ea = echo_of(&a), *eq = echo_of(&b);
        if (!cJSON_Compare(ea, eq, true))
            fail_msg("%s: the body and the URL give different configs",
                     samples[k].name);
        /* and the value arrived: the echo is not the default's */
        char plain[128];
        snprintf(plain, sizeof plain, "{\"sentence\":\"a b c\"%s}", needs);
        struct request d;
        struct problem pd;
        assert_true(decode(&d, plain, &pd));
        cJSON *ed = echo_of(&d);
        if (cJSON_Compare(cJSON_GetObjectItem(ea, samples[k].name),
                          cJSON_GetObjectItem(ed, samples[k].name), true))
            fail_msg("%s: the echo shows the default", samples[k].name);
        cJSON_Delete(ed);
        request_free(&d);
        cJSON_Delete(ea);
        cJSON_Delete(eq);
        request_free(&a);
        request_free(&b);
    }
}

/* A value of the wrong type is refused at the field, in the body and in
 * the URL. */
static void test_refusals_point_at_the_field(void **state)
{
    (void)state;
    for (size_t i = 0; i < request_field_count; i++) {
        const struct request_field *f = &request_fields[i];
        if (f->kind != FIELD_SIZE && f->kind != FIELD_BOOL &&
            f->kind != FIELD_FLOAT && f->kind != FIELD_ENUM &&
            f->kind != FIELD_SEED)
            continue;
        char body[256];
        snprintf(body, sizeof body, "{\"sentence\":\"a b\",\"%s\":{}}",
                 f->name);
        expect_refusal(body, 422, f->pointer, f->name);
        if (f->kind == FIELD_SEED)
            continue; /* a seed's text is a string of digits */
        char query[256];
        snprintf(query, sizeof query, "sentence=a&%s=%s", f->name,
                 f->kind == FIELD_ENUM ? "nonsense" : "x1");
        struct request req;
        struct problem pb;
        if (decode_query(&req, query, &pb))
            fail_msg("%s: accepted", query);
        if (pb.status != 422 || strcmp(pb.pointer, f->pointer))
            fail_msg("%s: %d at \"%s\"", query, pb.status, pb.pointer);
        request_free(&req);
    }
    expect_refusal("{\"sentence\":\"a\",\"format\":\"png\"}", 422, "/format",
                   "unknown field");
    expect_refusal("{\"sentence\":\"a\",\"heads\":17}", 422, "/heads",
                   "between 1 and 16");
    expect_refusal("{\"sentence\":\"a\",\"dropout\":1}", 422, "/dropout",
                   "below 1");
    expect_refusal("{\"sentence\":\"a\",\"precision\":10}", 422, "/precision",
                   "between 1 and 9");
    // 2^53 + 1 reads as 2^53: a number from 2^53 on has lost digits
    expect_refusal("{\"sentence\":\"a\",\"seed\":9007199254740993}", 422,
                   "/seed", "2^53 - 1");
    expect_refusal("{\"sentence\":\"a\",\"seed\":9007199254740992}", 422,
                   "/seed", "as a string of digits");
    struct request req;
    struct problem pb;
    assert_false(decode_query(&req, "sentence=a&tokens=b", &pb));
    assert_string_equal(pb.pointer, "/tokens");
    assert_non_null(strstr(pb.detail, "only accepted in a JSON body"));
    request_free(&req);
}

static void test_core_fields_map_to_pointers(void **state)
{
    (void)state;
    struct request req;
    struct problem pb;
    assert_true(decode(&req, "{\"tokens\":[\"a\",\"b\"]}", &pb));
    assert_string_equal(request_pointer_of(&req, "x"), "/tokens");
    assert_string_equal(request_pointer_of(&req, "n_query"), "/tokens");
    assert_string_equal(request_pointer_of(&req, "n_ctx"), "/context");
    assert_string_equal(request_pointer_of(&req, "heads"), "/heads");
    assert_string_equal(request_pointer_of(&req, "want"), "/return");
    assert_string_equal(request_pointer_of(&req, "v_proj.bias"), "/params");
    assert_string_equal(request_pointer_of(&req, "rope_base"), "");
    /* the core's own refusal, pointed at the client's field */
    request_free(&req);
    expect_refusal("{\"sentence\":\"a b\",\"heads\":6}", 422, "/heads",
                   "must divide d_model (64)");
    expect_refusal("{\"sentence\":\"a b\",\"context\":{\"sentence\":\"x y z\"},"
                   "\"residual\":\"input\"}",
                   422, "/residual", "as many context tokens");
}

/* ------------------------------------------------------------- the steps */

static void test_inputs(void **state)
{
    (void)state;
    struct request req;
    struct problem pb;
    assert_true(decode(&req,
                       "{\"sentence\":\"The cat, asleep.\",\"d_model\":16,"
                       "\"special_tokens\":true}",
                       &pb));
    assert_int_equal(req.input.n, 7); /* [CLS] the cat , asleep . [SEP] */
    assert_string_equal(req.input.tokens.text[3], ",");
    assert_int_equal(req.input.d, 16);
    request_free(&req);

    /* a batch of 2 with one context: the context is repeated */
    assert_true(decode(&req,
                       "{\"embeddings\":[[[1,2],[3,4]],[[5,6],[7,8]]],"
                       "\"heads\":1,\"context\":{\"embeddings\":[[9,10]]}}",
                       &pb));
    assert_int_equal(req.cfg.batch, 2);
    assert_int_equal(req.context.batch, 2);
    assert_true(req.context.x[0] == 9 && req.context.x[2] == 9 &&
                req.context.x[3] == 10);
    assert_string_equal(req.context.pointer, "/context/embeddings");
    request_free(&req);

    expect_refusal("{\"sentence\":\"a\\u00ff\",\"tokens\":[\"x\"]}", 422, "",
                   "exactly one");
    expect_refusal("{\"tokens\":[\"a\",\"\"]}", 422, "/tokens/1",
                   "empty string");
    /* the tokenizer's position, in the client's field */
    expect_refusal("{\"sentence\":\"ok\xff\"}", 422, "/sentence",
                   "sentence has invalid UTF-8 at byte 2 (0xff)");
    expect_refusal("{\"sentence\":\"ok\",\"context\":{\"tokens\":[\"a\","
                   "\"b\xc3\"]}}",
                   422, "/context/tokens/1",
                   "context.tokens[1] has invalid UTF-8 at byte 1 (0xc3)");
}

static void test_masks(void **state)
{
    (void)state;
    struct request req;
    struct problem pb;
    assert_true(decode(&req,
                       "{\"embeddings\":[[1,0],[0,1]],\"heads\":1,"
                       "\"mask\":[[true,false],[1,1]],\"key_padding\":[0,1]}",
                       &pb));
    assert_string_equal(req.mask_name, "explicit");
    assert_ptr_equal(req.cfg.mask, req.mask);
    assert_true(req.mask[0] && !req.mask[1] && req.mask[2] && req.mask[3]);
    assert_true(!req.key_padding[0] && req.key_padding[1]);
    request_free(&req);
    expect_refusal("{\"embeddings\":[[1,0],[0,1]],\"heads\":1,\"mask\":"
                   "[[[1,1],[1,1]],[[1,1],[1,1]]]}",
                   422, "/mask",
                   "mask has 2 matrices; expected one per sequence");
    expect_refusal("{\"embeddings\":[[1,0],[0,1]],\"heads\":1,"
                   "\"key_padding\":[[0,1],[1,0]]}",
                   422, "/key_padding", "2 rows; the batch is 1");
}

/* The kinds, conventions and forms of an explicit mask, as the core gets
 * them and as the echo reports them. */
static void test_mask_kinds_and_forms(void **state)
{
    (void)state;
    struct request req;
    struct problem pb;
    /* nn.MultiheadAttention's convention: true = masked */
    assert_true(decode(&req,
                       "{\"embeddings\":[[1,0],[0,1]],\"heads\":1,"
                       "\"mask\":[[true,false],[false,1]],"
                       "\"mask_convention\":\"block\"}",
                       &pb));
    assert_true(!req.mask[0] && req.mask[1] && req.mask[2] && !req.mask[3]);
    assert_null(req.cfg.mask_bias);
    cJSON *echo = echo_of(&req);
    assert_string_equal(cJSON_GetObjectItem(echo, "mask_type")->valuestring,
                        "boolean");
    assert_string_equal(
        cJSON_GetObjectItem(echo, "mask_convention")->valuestring, "block");
    assert_string_equal(cJSON_GetObjectItem(echo, "mask_form")->valuestring,
                        "[N][M]");
    cJSON_Delete(echo);
    request_free(&req);
    /* additive: "-inf" and anything at or below -1e30 mean never */
    assert_true(decode(&req,
                       "{\"embeddings\":[[1,0],[0,1]],\"heads\":1,"
                       "\"mask\":[[0,\"-inf\"],[0.5,-1e31]],\"causal\":true}",
                       &pb));
    assert_null(req.cfg.mask);
    const float *bias = req.cfg.mask_bias;
    assert_true(bias[0] == 0.0f && isinf(bias[1]) && bias[1] < 0);
    assert_true(bias[2] == 0.5f && isinf(bias[3]) && bias[3] < 0);
    assert_true(req.cfg.causal);
    echo = echo_of(&req);
    assert_string_equal(cJSON_GetObjectItem(echo, "mask_type")->valuestring,
                        "additive");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(echo, "causal")));
    cJSON_Delete(echo);
    request_free(&req);
    /* 0s and 1s are boolean unless forced additive */
    assert_true(decode(&req,
                       "{\"embeddings\":[[1,0],[0,1]],\"heads\":1,"
                       "\"mask\":[[0,1],[1,0]],\"mask_type\":\"additive\"}",
                       &pb));
    assert_true(req.cfg.mask_bias && req.cfg.mask_bias[1] == 1.0f);
    request_free(&req);
    /* per head: PyTorch's [B*heads][N][M], and [B][heads][N][M] */
    assert_true(decode(&req,
                       "{\"embeddings\":[[1,0],[0,1]],\"heads\":2,"
                       "\"mask\":[[[1,1],[1,1]],[[1,0],[1,1]]]}",
                       &pb));
    assert_true(req.cfg.mask_per_head && !req.mask[5]);
    assert_string_equal(req.mask_form, "[B*heads][N][M]");
    request_free(&req);
    assert_true(decode(&req,
                       "{\"embeddings\":[[1,0],[0,1]],\"heads\":2,"
                       "\"mask\":[[[[0,0],[0,0]],[[0,-1],[2,0]]]]}",
                       &pb));
    assert_true(req.cfg.mask_per_head && req.cfg.mask_bias[5] == -1.0f);
    assert_string_equal(req.mask_form, "[B][heads][N][M]");
    request_free(&req);
    /* a batch of two, one matrix each */
    assert_true(decode(&req,
                       "{\"embeddings\":[[[1,0],[0,1]],[[1,1],[0,1]]],"
                       "\"heads\":2,\"mask\":[[[1,1],[1,1]],[[1,0],[1,1]]]}",
                       &pb));
    assert_true(req.cfg.mask_batched && !req.cfg.mask_per_head);
    assert_string_equal(req.mask_form, "[B][N][M]");
    request_free(&req);
}

/* Every bad value of the new fields: 422, the field's pointer, a message
 * naming the value. */
static void test_parity_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *body, *pointer, *detail;
    } cases[] = {
        {"\"mask_type\":\"fuzzy\"", "/mask_type", "\"auto\""},
        {"\"mask_convention\":3", "/mask_convention", "\"allow\" or \"block\""},
        {"\"add_zero_attn\":\"yes\"", "/add_zero_attn", "true or false"},
        {"\"causal\":1", "/causal", "true or false"},
        {"\"mask\":[[0.5,1],[1,1]],\"mask_type\":\"boolean\"", "/mask/0/0",
         "neither 0 nor 1"},
        {"\"mask\":[[1,1],[1,\"-inf\"]],\"mask_type\":\"boolean\"", "/mask/1/1",
         "neither 0 nor 1"},
        {"\"mask\":[[0,true],[1,1]],\"mask_type\":\"additive\"", "/mask/0/1",
         "is a boolean"},
        {"\"mask\":[[true,0.5],[1,1]]", "/mask/0/0", "also has numbers"},
        {"\"mask\":[[\"inf\",0],[0,0]]", "/mask/0/0", "\"-inf\""},
        {"\"mask\":[[null,0],[0,0]]", "/mask/0/0", "\"-inf\""},
        {"\"mask\":[[1e39,0],[0,0]]", "/mask/0/0", "float32"},
        {"\"mask\":[[1,1,1],[1,1,1]]", "/mask", "2 x 3; expected 2 x 2"},
        {"\"mask\":[[[1,1],[1,1]],[[1,1],[1,1]],[[1,1],[1,1]]]", "/mask",
         "3 matrices"},
        {"\"mask\":[[[[1,1],[1,1]]]]", "/mask",
         "expected [B][heads][N][M] = 1 x 2 x 2 x 2"},
        {"\"mask\":[[[[[1]]]]]", "/mask", "5 dimensions"},
        {"\"mask\":[1,0]", "/mask", "1 dimension"},
        {"\"mask\":[[1,1],[1]]", "/mask/1", "1 numbers; expected 2"},
        {"\"mask\":{\"a\":1}", "/mask", "an object"},
        {"\"mode\":\"basic\",\"heads\":1,\"add_zero_attn\":true",
         "/add_zero_attn", "mode projected"},
        {"\"heads\":3,\"mask\":[[[1,1],[1,1]],[[1,1],[1,1]]]", "/heads",
         "must divide d_model"},
        {"\"return\":[\"weights_raw\"]", "/return/0", "\"weights_raw\""},
        {"\"params\":{\"in_proj_weight\":[[1,0],[0,1],[1,0],[0,1],[1,0],[0,1]],"
         "\"in_proj_bias\":[1,2,3,4,5],\"out_proj.weight\":[[1,0],[0,1]]}",
         "/params/in_proj_bias",
         "in_proj_bias is [5]; this configuration needs [6] ([(heads + 2 x "
         "kv_heads)"},
        {"\"params\":{\"q_proj_weight\":[[1,0],[0,1]],\"k_proj_weight\":"
         "[[1,0,0],[0,1,0]]}",
         "/params/k_proj_weight", "is [2][3]; this configuration needs [2][2]"},
        {"\"params\":{\"in_proj_weight\":[[1,0],[0,1],[1,0],[0,1],[1,0],[0,1]],"
         "\"out_proj.weight\":[[1,0],[0,1]],\"bias_k\":[[[1,2]]]}",
         "/params", "lacks bias_v (add_bias_kv gives bias_k and bias_v)"},
        {"\"params\":{\"in_proj_weight\":[[1,0],[0,1],[1,0],[0,1],[1,0],[0,1]],"
         "\"out_proj.weight\":[[1,0],[0,1]],\"bias_k\":[[[1,2,3]]],"
         "\"bias_v\":[1,2]}",
         "/params/bias_k", "is [3]; this configuration needs [2]"},
        {"\"params\":{\"in_proj_weight\":[[1,0],[0,1],[1,0],[0,1],[1,0],[0,1]],"
         "\"out_proj.weight\":[[1,0],[0,1]],\"bias_k\":[[[1],[2]]],"
         "\"bias_v\":[1,2]}",
         "/params/bias_k", "3 dimensions; a bias is"},
        {"\"params\":{\"in_proj_weight\":[[1,0],[0,1],[1,0],[0,1],[1,0],[0,1]],"
         "\"out_proj.weight\":[[1,0],[0,1]],\"bias_k\":[1,2],\"bias_v\":[1,"
         "\"x\"]}",
         "/params/bias_v/1", "a number"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"embeddings\":[[1,0],[0,1]],\"heads\":2,%s}",
                 cases[i].body);
        if (!strstr(cases[i].body, "\"heads\""))
            expect_refusal(body, 422, cases[i].pointer, cases[i].detail);
        else {
            snprintf(body, sizeof body, "{\"embeddings\":[[1,0],[0,1]],%s}",
                     cases[i].body);
            expect_refusal(body, 422, cases[i].pointer, cases[i].detail);
        }
    }
}

/* nn.MultiheadAttention's state_dict with kdim != embed_dim: in_proj_bias
 * is 3 x embed_dim whatever the context's width; bias_k and bias_v in
 * PyTorch's [1][1][E]; the fused weight alone needs equal widths. */
static void test_state_dict_forms(void **state)
{
    (void)state;
    struct request req;
    struct problem pb;
    assert_true(decode(&req,
                       "{\"embeddings\":[[1,2]],\"context\":{\"embeddings\":"
                       "[[1,2,3],[4,5,6]]},\"heads\":1,\"params\":{"
                       "\"q_proj_weight\":[[1,0],[0,1]],\"k_proj_weight\":"
                       "[[1,0,0],[0,1,0]],\"v_proj_weight\":[[0,0,1],[1,0,0]],"
                       "\"in_proj_bias\":[1,2,3,4,5,6],\"bias_k\":[[[7,8]]],"
                       "\"bias_v\":[[[9,10]]],\"out_proj.weight\":[[1,0],[0,"
                       "1]],\"out_proj.bias\":[0,0]},\"add_zero_attn\":true}",
                       &pb));
    assert_true(req.cfg.bias_kv && req.cfg.zero_attn);
    assert_true(req.params.bk[0] == 3 && req.params.bv[1] == 6);
    assert_true(req.params.bias_k[1] == 8 && req.params.bias_v[0] == 9);
    assert_int_equal(req.cfg.n_keys, 4);
    cJSON *echo = echo_of(&req);
    assert_int_equal(cJSON_GetObjectItem(echo, "keys")->valueint, 4);
    cJSON_Delete(echo);
    request_free(&req);
    expect_refusal("{\"embeddings\":[[1,2]],\"context\":{\"embeddings\":"
                   "[[1,2,3]]},\"heads\":1,\"params\":{\"in_proj_weight\":"
                   "[[1,0],[0,1],[1,0],[0,1],[1,0],[0,1]]}}",
                   422, "/params/in_proj_weight", "as wide as the input");
}

/* kdim != vdim: keys from the context, values from a value input of their
 * own, v_proj.weight as wide as the values; refused where it cannot mean
 * that. */
static void test_value_input(void **state)
{
    (void)state;
    struct request req;
    struct problem pb;
    assert_true(
        decode(&req,
               "{\"embeddings\":[[1,2]],\"context\":{\"embeddings\":"
               "[[1,2,3],[4,5,6]]},\"value\":{\"embeddings\":[[1],[2]]},"
               "\"heads\":1,\"params\":{\"q_proj_weight\":[[1,0],[0,1]],"
               "\"k_proj_weight\":[[1,0,0],[0,1,0]],\"v_proj_weight\":"
               "[[1],[2]],\"out_proj.weight\":[[1,0],[0,1]]}}",
               &pb));
    assert_true(req.cfg.value == req.value.x && req.cfg.d_value == 1);
    assert_true(req.params.wv[0] == 1 && req.params.wv[1] == 2);
    cJSON *echo = echo_of(&req);
    assert_int_equal(cJSON_GetObjectItem(echo, "d_value")->valueint, 1);
    cJSON_Delete(echo);
    request_free(&req);
    /* v_proj.weight must be as wide as the values, not the keys */
    expect_refusal("{\"embeddings\":[[1,2]],\"context\":{\"embeddings\":"
                   "[[1,2,3]]},\"value\":{\"embeddings\":[[1]]},\"heads\":1,"
                   "\"params\":{\"q_proj_weight\":[[1,0],[0,1]],"
                   "\"k_proj_weight\":[[1,0,0],[0,1,0]],\"v_proj_weight\":"
                   "[[1,0,0],[0,1,0]],\"out_proj.weight\":[[1,0],[0,1]]}}",
                   422, "/params/v_proj_weight", "v_proj");
    expect_refusal("{\"embeddings\":[[1,2]],\"value\":{\"embeddings\":[[1]]}}",
                   422, "/value", "needs a context");
    expect_refusal("{\"embeddings\":[[1,2]],\"context\":{\"embeddings\":"
                   "[[1,2],[3,4]]},\"value\":{\"embeddings\":[[1]]}}",
                   422, "/value/embeddings", "one value a key");
    expect_refusal("{\"embeddings\":[[1,2]],\"context\":{\"embeddings\":"
                   "[[1,2]]},\"value\":{\"embeddings\":[[1]]},\"mode\":"
                   "\"basic\"}",
                   422, "/value", "mode projected");
    expect_refusal("{\"embeddings\":[[1,2]],\"context\":{\"embeddings\":"
                   "[[1,2]]},\"value\":{\"embeddings\":[[1]]},\"positional\":"
                   "\"sinusoidal\"}",
                   422, "/value", "sinusoidal");
    expect_refusal("{\"embeddings\":[[1,2]],\"context\":{\"embeddings\":"
                   "[[1,2]]},\"value\":[[1]]}",
                   422, "/value", "expected an object");
}

/* Sizes read off the first row must hold for every row before anything is
 * sized from them: a mask whose first rows claim 4096 x 4096 x 4096 but
 * whose body holds a few kilobytes is refused where it is ragged, with
 * nothing allocated for the claim. */
static void test_ragged_arrays_cost_nothing(void **state)
{
    (void)state;
    const size_t side = 4096, cap = side * 16 + 256;
    char *body = malloc(cap);
    size_t n = (size_t)snprintf(body, cap,
                                "{\"embeddings\":[[1,0],[0,1]],\"heads\":1,"
                                "\"mask\":[[[");
    for (size_t i = 0; i < side; i++)
        n += (size_t)snprintf(body + n, cap - n, "%s1", i ? "," : "");
    n += (size_t)snprintf(body + n, cap - n, "]");
    for (size_t i = 1; i < side; i++)
        n += (size_t)snprintf(body + n, cap - n, ",[1]");
    n += (size_t)snprintf(body + n, cap - n, "]");
    for (size_t i = 1; i < side; i++)
        n += (size_t)snprintf(body + n, cap - n, ",[[1]]");
    snprintf(body + n, cap - n, "]}");
    expect_refusal(body, 422, "/mask/0/1", "has 1 numbers; expected 4096");
    free(body);
}

/* An escaped U+0000 would end the text where cJSON holds it, and a
 * tokenizer with byte fallback reads it as a byte of its own: it is
 * refused, naming where it stands, as is a control character written raw
 * in a string (JSON forbids them). */
/* A size that is negative or past any size says so, not a range of
 * 2^64. */
static void test_size_bounds(void **state)
{
    (void)state;
    expect_refusal("{\"model\":\"f32\",\"sentence\":\"a\",\"layer\":-1}", 422,
                   "/layer", "layer (-1) must be at least 0");
    expect_refusal("{\"model\":\"f32\",\"sentence\":\"a\",\"layer\":1e300}",
                   422, "/layer",
                   "layer (1e+300) is too large");
}

static void test_nul_in_text(void **state)
{
    (void)state;
    struct request req;
    struct problem pb;
    /* a text keeps its NUL, which BERT's basic tokenizer drops as the
     * library does (a control character) */
    assert_true(decode(&req, "{\"sentence\":\"a\\u0000b c\"}", &pb));
    assert_int_equal(req.input.tokens.count, 2);
    assert_string_equal(req.input.tokens.text[0], "ab");
    assert_string_equal(req.input.tokens.text[1], "c");
    request_free(&req);
    /* any other string holding one is refused, naming it */
    expect_refusal("{\"sentence\":\"a\",\"mask\":\"causal\\u0000\"}", 422,
                   "/mask", "mask (\"causal\\u0000\") holds a NUL character");
    expect_refusal("{\"sentence\":\"a\x01"
                   "b\"}",
                   400, "", "a control character (0x01) is written raw");
    /* an escaped backslash before u0000 is no escape */
    assert_true(decode(&req, "{\"sentence\":\"a\\\\u0000\"}", &pb));
    assert_string_equal(req.input.tokens.text[1], "\\");
    request_free(&req);
    /* %00 in a URL: a text keeps it, another parameter is refused */
    const struct request_param text[] = {{"sentence", "a\0b c"}};
    const size_t text_len[] = {5};
    request_init(&req);
    memset(&pb, 0, sizeof pb);
    assert_true(
        request_parse_query_n(&req, text, text_len, 1, &fixture_limits, &pb));
    assert_int_equal(req.input.tokens.count, 2);
    assert_string_equal(req.input.tokens.text[0], "ab");
    request_free(&req);
    const struct request_param heads[] = {{"sentence", "a"}, {"heads", "2\0x"}};
    const size_t heads_len[] = {1, 3};
    request_init(&req);
    memset(&pb, 0, sizeof pb);
    assert_false(
        request_parse_query_n(&req, heads, heads_len, 2, &fixture_limits, &pb));
    assert_int_equal(pb.status, 422);
    assert_string_equal(pb.pointer, "/heads");
    assert_non_null(strstr(pb.detail, "heads (\"2\\u0000x\") holds a NUL"));
    request_free(&req);
}

static void test_params(void **state)
{
    (void)state;
    struct request req;
    struct problem pb;
    /* the fused in_proj layout, split into q, k and v */
    assert_true(decode(&req,
                       "{\"embeddings\":[[1,2]],\"heads\":1,\"params\":{"
                       "\"in_proj_weight\":[[1,2],[3,4],[5,6],[7,8],[9,10],"
                       "[11,12]],\"in_proj_bias\":[1,2,3,4,5,6],"
                       "\"out_proj\":{\"weight\":[[1,0],[0,1]]}}}",
                       &pb));
    assert_int_equal(req.params_source, PARAMS_GIVEN);
    assert_true(req.params.wk[0] == 5 && req.params.wv[3] == 12);
    assert_true(req.params.bv[1] == 6 && req.cfg.qkv_bias);
    assert_false(req.cfg.out_bias);
    assert_ptr_equal(req.cfg.params, &req.params);
    request_free(&req);
    expect_refusal("{\"embeddings\":[[1,2]],\"heads\":1,\"params\":{"
                   "\"q_proj_weight\":[[1,2],[3,4]]}}",
                   422, "/params", "lacks k_proj.weight");
    expect_refusal("{\"embeddings\":[[1,2]],\"heads\":1,\"params\":{"
                   "\"k_proj.bias\":[[1,2]]}}",
                   422, "/params/k_proj.bias", "a bias is [out_features]");
    expect_refusal("{\"embeddings\":[[1,2]],\"heads\":1,\"out_proj\":false,"
                   "\"params\":{\"q_proj.weight\":[[1,2],[3,4]],"
                   "\"k_proj.weight\":[[1,2],[3,4]],\"v_proj.weight\":"
                   "[[1,2],[3,4]],\"out_proj.bias\":[1,2]}}",
                   422, "/out_proj", "out_proj is false");
}

/* The image decides what the config is resolved for. */
static void test_png_options(void **state)
{
    (void)state;
    struct request req;
    struct problem pb;
    assert_true(decode_query(
        &req, "sentence=a b&format=png&head=mean&colormap=gray&cell=3", &pb));
    assert_int_equal(req.png.format, IMAGE_PNG);
    assert_int_equal(req.png.head_kind, HEAD_MEAN);
    assert_int_equal(req.cfg.want, ATTN_WANT_MEAN_WEIGHTS);
    assert_int_equal(req.png.cell, 3);
    /* measured as its answer is planned: bare, 2 x 2 cells of 3 px */
    request_free(&req);
    assert_true(decode_query(
        &req, "sentence=a b&format=png&head=0&cell=3&labels=false", &pb));
    assert_int_equal(req.png.width, 6);
    assert_int_equal(req.png.height, 6);
    request_free(&req);
    /* an image past the drawing's caps is refused when planned, before
     * anything is computed, as the drawing would refuse it */
    assert_false(decode_query(&req,
                              "sentence=a b c d e f g h i j k l m n o p q r s "
                              "t u v w x y z a b c d e f g h i j k l m n o p "
                              "q r s t&format=png&heads=16&cell=64",
                              &pb));
    assert_int_equal(pb.status, 422);
    assert_string_equal(pb.pointer, "/cell");
    assert_non_null(strstr(pb.detail, "over the limit"));
    request_free(&req);
    /* the colour scale: per tile or shared, anything else refused; what
     * only a model's image takes, refused without one */
    assert_true(
        decode_query(&req, "sentence=a b&format=png&color_scale=tile", &pb));
    assert_int_equal(req.png.color_scale, SCALE_TILE);
    request_free(&req);
    assert_false(
        decode_query(&req, "sentence=a&format=png&color_scale=log", &pb));
    assert_string_equal(pb.pointer, "/color_scale");
    request_free(&req);
    assert_false(decode_query(&req, "sentence=a&format=png&special=hide", &pb));
    assert_string_equal(pb.pointer, "/special");
    assert_non_null(strstr(pb.detail, "only with \"model\""));
    request_free(&req);
    assert_false(decode_query(&req, "sentence=a b&format=png&head=8", &pb));
    assert_string_equal(pb.pointer, "/head");
    assert_non_null(strstr(pb.detail, "0 to 7"));
    request_free(&req);
    assert_false(decode_query(&req, "sentence=a&cell=65", &pb));
    assert_string_equal(pb.pointer, "/cell");
    request_free(&req);
    /* "return": [] computes nothing, and says so */
    assert_true(decode(&req, "{\"sentence\":\"a\",\"return\":[]}", &pb));
    assert_false(req.compute);
    cJSON *echo = echo_of(&req);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(echo, "return")),
                     0);
    cJSON_Delete(echo);
    request_free(&req);
}

/* GET /config: the table under this server's limits. */
static void test_fields_document(void **state)
{
    (void)state;
    size_t len = 0;
    char *text = request_fields_document(&fixture_limits, &len);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    cJSON *doc = cJSON_Parse(text);
    assert_non_null(doc);
    const cJSON *fields = cJSON_GetObjectItem(doc, "fields");
    assert_int_equal(cJSON_GetArraySize(fields), (int)request_field_count);
    const cJSON *f;
    size_t i = 0;
    cJSON_ArrayForEach(f, fields)
    {
        const struct request_field *row = &request_fields[i++];
        assert_string_equal(cJSON_GetObjectItem(f, "name")->valuestring,
                            row->name);
        if (!strcmp(row->name, "heads")) {
            assert_int_equal(cJSON_GetObjectItem(f, "maximum")->valueint, 16);
            assert_int_equal(cJSON_GetObjectItem(f, "default")->valueint, 8);
        }
        if (!strcmp(row->name, "d_model"))
            assert_int_equal(cJSON_GetObjectItem(f, "maximum")->valueint, 256);
        if (!strcmp(row->name, "positional"))
            assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(f, "enum")),
                             3);
    }
    assert_int_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "limits"), "max_tokens")
            ->valueint,
        64);
    cJSON_Delete(doc);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_is_consistent),
        cmocka_unit_test(test_defaults_are_what_the_echo_shows),
        cmocka_unit_test(test_every_query_field_is_sampled),
        cmocka_unit_test(test_json_and_query_agree),
        cmocka_unit_test(test_model_json_and_query_agree),
        cmocka_unit_test(test_refusals_point_at_the_field),
        cmocka_unit_test(test_core_fields_map_to_pointers),
        cmocka_unit_test(test_inputs),
        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_mask_kinds_and_forms),
        cmocka_unit_test(test_parity_refusals),
        cmocka_unit_test(test_state_dict_forms),
        cmocka_unit_test(test_value_input),
        cmocka_unit_test(test_ragged_arrays_cost_nothing),
        cmocka_unit_test(test_nul_in_text),
        cmocka_unit_test(test_size_bounds),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_png_options),
        cmocka_unit_test(test_fields_document),
    };
    return cmocka_run_group_tests_name("request", tests, model_fixture_setup,
                                       model_fixture_teardown);
}
