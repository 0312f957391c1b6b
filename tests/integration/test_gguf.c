/*
 * test_gguf.c - models served from GGUF files on the real binary: GET
 * /models says where each came from; every request a checkpoint folder
 * takes works on them unchanged (the attention and hidden states against
 * the float64 goldens, the heatmaps, measures, ablation, direct logit
 * attribution, patching, /generate's greedy tokens, a chat through the
 * template the file carries), and the same F32 weights answer alike from
 * the folder and from the file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "decoded_png.h"
#include "harness.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct server srv;

static int setup(void **state)
{
    (void)state;
    const char *const args[] = {"--model",
                                "q4=tests/models/gguf/llama-Q4_K_M.gguf",
                                "--model",
                                "f32=tests/models/gguf/llama-F32.gguf",
                                "--model",
                                "folder=tests/models/llama_q",
                                "--model",
                                "gpt2=tests/models/gguf/gpt2-Q6_K.gguf",
                                "--model",
                                "qwen2=tests/models/gguf/split/"
                                "qwen2-Q8_0-00001-of-00002.gguf",
                                NULL};
    return server_start(&srv, args) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return server_stop(&srv, 10) == 0 ? 0 : -1;
}

static const cJSON *get(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v)
        fail_msg("no \"%s\"", key);
    return v;
}

static cJSON *answer(const char *method, const char *path, const char *body,
                     long want)
{
    struct reply r;
    static const char *const json[] = {"Content-Type: application/json", NULL};
    assert_true(http_call(&srv, method, path, body, body ? strlen(body) : 0,
                          body ? json : NULL, &r));
    if (r.status != want)
        fail_msg("%s %s: %ld, want %ld: %.400s", method, path, r.status, want,
                 r.body);
    cJSON *j = cJSON_ParseWithLength(r.body, r.len);
    reply_free(&r);
    assert_non_null(j);
    return j;
}

static cJSON *golden(const char *file)
{
    char path[256];
    snprintf(path, sizeof path, "tests/models/golden/gguf/%s.json", file);
    size_t len;
    char *text = read_file(path, &len);
    assert_non_null(text);
    cJSON *g = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(g);
    return g;
}

/* Every number of a nested array, in order, into out (at most cap). */
static size_t flatten(const cJSON *a, double *out, size_t cap, size_t n)
{
    if (cJSON_IsNumber(a)) {
        if (n < cap)
            out[n] = a->valuedouble;
        return n + 1;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, a) n = flatten(e, out, cap, n);
    return n;
}

static void test_models_say_source(void **state)
{
    (void)state;
    cJSON *j = answer("GET", "/models", NULL, 200);
    const cJSON *m;
    size_t seen = 0;
    cJSON_ArrayForEach(m, get(j, "models"))
    {
        const char *name = get(m, "name")->valuestring;
        const cJSON *src = get(m, "source");
        const char *container = get(src, "container")->valuestring;
        if (!strcmp(name, "q4")) {
            assert_string_equal(container, "gguf");
            assert_string_equal(get(src, "file_type")->valuestring, "Q4_K_M");
            const cJSON *types = get(src, "tensor_types");
            assert_int_equal(get(types, "Q4_K")->valueint, 12);
            assert_int_equal(get(types, "Q6_K")->valueint, 3);
            assert_int_equal(get(types, "F32")->valueint, 6);
            assert_int_equal(get(src, "files")->valueint, 1);
            seen++;
        } else if (!strcmp(name, "folder")) {
            assert_string_equal(container, "safetensors");
            assert_true(cJSON_IsNull(get(src, "file_type")));
            seen++;
        } else if (!strcmp(name, "qwen2")) {
            assert_string_equal(get(src, "file_type")->valuestring, "Q8_0");
            assert_int_equal(get(src, "files")->valueint, 2);
            seen++;
        }
    }
    assert_int_equal(seen, 3);
    cJSON_Delete(j);
}

/* The attention and hidden states of the golden's sentence, as the
 * float64 pass over the file's dequantized weights gives them. */
static void test_attention_matches_golden(void **state)
{
    (void)state;
    static const struct {
        const char *model, *file;
    } cases[] = {
        {"q4", "llama-Q4_K_M"}, {"gpt2", "gpt2-Q6_K"}, {"qwen2", "qwen2-Q8_0"}};
    for (size_t k = 0; k < 3; k++) {
        cJSON *g = golden(cases[k].file);
        const cJSON *c = cJSON_GetArrayItem(get(g, "cases"), 0);
        cJSON *body = cJSON_CreateObject();
        cJSON_AddStringToObject(body, "model", cases[k].model);
        cJSON_AddItemToObject(body, "sentence",
                              cJSON_Duplicate(get(c, "sentence"), 1));
        cJSON *ret = cJSON_AddArrayToObject(body, "return");
        cJSON_AddItemToArray(ret, cJSON_CreateString("weights"));
        cJSON_AddItemToArray(ret, cJSON_CreateString("hidden_states"));
        char *text = cJSON_PrintUnformatted(body);
        cJSON *j = answer("POST", "/attention", text, 200);
        free(text);
        cJSON_Delete(body);
        static double got[1 << 20], want[1 << 20];
        const size_t n = flatten(get(j, "weights"), got, 1 << 20, 0);
        assert_int_equal(n, flatten(get(c, "attentions"), want, 1 << 20, 0));
        for (size_t i = 0; i < n; i++)
            if (!(fabs(got[i] - want[i]) <= 2e-5))
                fail_msg("%s: weight %zu is %.9g, want %.9g", cases[k].model, i,
                         got[i], want[i]);
        const size_t nh = flatten(get(j, "hidden_states"), got, 1 << 20, 0);
        assert_int_equal(nh,
                         flatten(get(c, "hidden_states"), want, 1 << 20, 0));
        for (size_t i = 0; i < nh; i++)
            if (!(fabs(got[i] - want[i]) <= 1e-4 + 1e-4 * fabs(want[i])))
                fail_msg("%s: hidden state %zu is %.9g, want %.9g",
                         cases[k].model, i, got[i], want[i]);
        cJSON_Delete(j);
        cJSON_Delete(g);
    }
}

/* The folder and the GGUF file of the same F32 weights, over HTTP. */
static void test_two_containers(void **state)
{
    (void)state;
    static const char *const body =
        "{\"model\":\"%s\",\"sentence\":\"The heads attend to 2024 "
        "tokens\",\"return\":[\"weights\",\"logit_lens\"]}";
    char b1[256], b2[256];
    snprintf(b1, sizeof b1, body, "folder");
    snprintf(b2, sizeof b2, body, "f32");
    cJSON *a = answer("POST", "/attention", b1, 200);
    cJSON *b = answer("POST", "/attention", b2, 200);
    static double wa[1 << 16], wb[1 << 16];
    const size_t n = flatten(get(a, "weights"), wa, 1 << 16, 0);
    assert_int_equal(n, flatten(get(b, "weights"), wb, 1 << 16, 0));
    for (size_t i = 0; i < n; i++)
        assert_true(fabs(wa[i] - wb[i]) <= 1e-5);
    char *ta = cJSON_PrintUnformatted(get(a, "tokens"));
    char *tb = cJSON_PrintUnformatted(get(b, "tokens"));
    assert_string_equal(ta, tb);
    free(ta);
    free(tb);
    cJSON_Delete(a);
    cJSON_Delete(b);
}

/* The heatmaps of a quantized model: one head, and every layer's. */
static void test_heatmaps(void **state)
{
    (void)state;
    static const char *const paths[] = {
        "/attention?model=q4&format=png&layer=1&head=2&"
        "sentence=The%20quick%20brown%20fox",
        "/attention?model=gpt2&format=png&layer=all&"
        "sentence=The%20quick%20brown%20fox"};
    for (size_t i = 0; i < 2; i++) {
        struct reply r;
        assert_true(http_call(&srv, "GET", paths[i], NULL, 0, NULL, &r));
        assert_int_equal(r.status, 200);
        struct decoded_png img;
        decoded_png_read(&r, &img);
        assert_true(img.width > 16 && img.height > 16);
        decoded_png_free(&img);
        reply_free(&r);
    }
}

/* Measures and interventions: head statistics, an ablated head, direct
 * logit attribution whose parts add up, and a patch. */
static void test_measures_and_interventions(void **state)
{
    (void)state;
    cJSON *j = answer("POST", "/attention",
                      "{\"model\":\"q4\",\"sentence\":\"the cat sat on the "
                      "mat\",\"return\":[\"head_stats\",\"dla\",\"flow\"],"
                      "\"dla_target\":[262,285]}",
                      200);
    const cJSON *dla = get(j, "dla");
    double sum = get(dla, "embed")->valuedouble + get(dla, "bias")->valuedouble;
    const cJSON *layer, *v;
    cJSON_ArrayForEach(layer, get(dla, "heads"))
    {
        cJSON_ArrayForEach(v, layer) sum += v->valuedouble;
    }
    cJSON_ArrayForEach(v, get(dla, "mlp")) sum += v->valuedouble;
    const double logit = get(dla, "logit")->valuedouble;
    if (!(fabs(sum - logit) <= 1e-3 * fmax(1.0, fabs(logit))))
        fail_msg("the parts add up to %.9g, the logit difference is %.9g", sum,
                 logit);
    get(j, "head_stats");
    get(j, "flow");
    cJSON_Delete(j);
    cJSON *plain = answer("POST", "/attention",
                          "{\"model\":\"q4\",\"sentence\":\"the cat sat on "
                          "the mat\"}",
                          200);
    cJSON *ablated = answer("POST", "/attention",
                            "{\"model\":\"q4\",\"sentence\":\"the cat sat on "
                            "the mat\",\"ablate\":[{\"layer\":0,\"head\":1}]}",
                            200);
    static double a[1 << 14], b[1 << 14];
    const size_t n = flatten(get(plain, "weights"), a, 1 << 14, 0);
    flatten(get(ablated, "weights"), b, 1 << 14, 0);
    // layer 0 as it was; layer 1 reads what the ablated head left
    double moved0 = 0, moved1 = 0;
    for (size_t i = 0; i < n; i++)
        *(i < n / 2 ? &moved0 : &moved1) =
            fmax(*(i < n / 2 ? &moved0 : &moved1), fabs(a[i] - b[i]));
    assert_true(moved0 == 0.0);
    assert_true(moved1 > 1e-4);
    cJSON_Delete(plain);
    cJSON_Delete(ablated);
    cJSON *p = answer("POST", "/patch",
                      "{\"model\":\"q4\",\"clean\":\"the cat sat on the "
                      "mat\",\"corrupted\":\"the dog sat on the mat\","
                      "\"metric\":{\"kind\":\"logit_diff\",\"correct\":262,"
                      "\"incorrect\":285},\"over\":\"heads\"}",
                      200);
    get(p, "effects");
    cJSON_Delete(p);
}

/* /generate's greedy tokens from the golden's prompt (its first
 * sentence, after the BOS). */
static void test_generate_greedy(void **state)
{
    (void)state;
    cJSON *g = golden("llama-Q4_K_M");
    const cJSON *greedy = get(g, "greedy"), *want = get(greedy, "new");
    const int count = cJSON_GetArraySize(want);
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "model", "q4");
    cJSON_AddItemToObject(
        body, "prompt",
        cJSON_Duplicate(get(cJSON_GetArrayItem(get(g, "cases"), 0), "sentence"),
                        1));
    cJSON_AddNumberToObject(body, "max_new_tokens", count);
    char *text = cJSON_PrintUnformatted(body);
    struct reply r;
    assert_true(post_json(&srv, "/generate", text, &r));
    free(text);
    cJSON_Delete(body);
    assert_int_equal(r.status, 200);
    const char *done = strstr(r.body, "event: done\ndata: ");
    assert_non_null(done);
    cJSON *j = cJSON_Parse(done + strlen("event: done\ndata: "));
    reply_free(&r);
    assert_non_null(j);
    const cJSON *ids = get(j, "token_ids");
    const int total = cJSON_GetArraySize(ids);
    assert_int_equal(total, cJSON_GetArraySize(get(greedy, "prompt")) + count);
    for (int i = 0; i < count; i++)
        assert_int_equal(cJSON_GetArrayItem(ids, total - count + i)->valueint,
                         cJSON_GetArrayItem(want, i)->valueint);
    cJSON_Delete(j);
    cJSON_Delete(g);
}

/* A chat through the template the file carries (tokenizer.chat_template,
 * Llama 3.2's): the render /tokenize shows, and a completion. */
static void test_chat(void **state)
{
    (void)state;
    cJSON *t = answer("POST", "/tokenize",
                      "{\"model\":\"q4\",\"messages\":[{\"role\":\"user\","
                      "\"content\":\"Hi\"}]}",
                      200);
    const char *prompt = get(t, "prompt")->valuestring;
    assert_non_null(strstr(prompt, "<|start_header_id|>user<|end_header_id|>"
                                   "\n\nHi<|eot_id|>"));
    assert_int_equal(strncmp(prompt, "<|begin_of_text|>", 17), 0);
    cJSON_Delete(t);
    cJSON *c = answer("POST", "/v1/chat/completions",
                      "{\"model\":\"q4\",\"messages\":[{\"role\":\"user\","
                      "\"content\":\"Hi\"}],\"max_tokens\":3,"
                      "\"temperature\":0}",
                      200);
    const cJSON *choice = cJSON_GetArrayItem(get(c, "choices"), 0);
    assert_non_null(get(get(choice, "message"), "content")->valuestring);
    cJSON_Delete(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_say_source),
        cmocka_unit_test(test_attention_matches_golden),
        cmocka_unit_test(test_two_containers),
        cmocka_unit_test(test_heatmaps),
        cmocka_unit_test(test_measures_and_interventions),
        cmocka_unit_test(test_generate_greedy),
        cmocka_unit_test(test_chat),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
