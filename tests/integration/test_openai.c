/*
 * test_openai.c - the OpenAI-compatible API on the real binary, read as
 * a client reads it: /v1/models; completions greedy against the float64
 * reference's tokens, their log-probabilities against a float64
 * log-softmax of the reference's logits, a prompt scored by echo; chats
 * rendered by the models' real templates as transformers renders them
 * (tests/chat/renders.json) and tokenized without a doubled BOS; streams
 * whose chunks add up to the whole answer, each token's attention row
 * the same as the finished sequence's weights; stop strings; OpenAI's
 * error objects naming the field; a stream whose client leaves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct server srv;
static char bad_dir[] = "/tmp/attnd-template-XXXXXX";

/* tests/models/llama3 again, with a chat_template.jinja beside it (which
 * wins over tokenizer_config.json's) that uses a statement outside the
 * interpreter's subset. */
static void make_bad_template_copy(void)
{
    assert_true(model_folder_with(
        "llama3", bad_dir, "chat_template.jinja",
        "{{ bos_token }}\n{% include 'header.jinja' %}\n"
        "{% for m in messages %}{{ m.content }}{% endfor %}\n"));
}

static int setup(void **state)
{
    (void)state;
    make_bad_template_copy();
    char bad_model[200];
    snprintf(bad_model, sizeof bad_model, "bad=%s", bad_dir);
    const char *const args[] = {
        "--model", bad_model,
        "--model", "llama3=tests/models/llama3",
        "--model", "qwen3=tests/models/qwen3",
        "--model", "gemma2=tests/models/gemma2",
        "--model", "gemma3=tests/models/gemma3",
        "--model", "mistral=tests/models/mistral",
        "--model", "gpt2=tests/models/gpt2",
        "--model", "wide=tests/models/llama_16x32",
        "--model", "bert=tests/models/f32",
        "--model", "q8=tests/models/gguf/qwen2-Q8_0.gguf",
        NULL};
    return server_start(&srv, args) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    const int rc = server_stop(&srv, 10.0);
    model_folder_remove(bad_dir);
    return rc == 0 ? 0 : -1;
}

/* ------------------------------------------------------------ helpers */

static const cJSON *get(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v)
        fail_msg("no \"%s\"", key);
    return v;
}

static const cJSON *at(const cJSON *a, int i)
{
    const cJSON *v = cJSON_GetArrayItem(a, i);
    if (!v)
        fail_msg("no item %d", i);
    return v;
}

static cJSON *load_json(const char *path)
{
    size_t len = 0;
    char *text = read_file(path, &len);
    assert_non_null(text);
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(doc);
    return doc;
}

/* POST body to path; the answer parsed (NULL when it is not JSON). */
static cJSON *call(const char *method, const char *path, const char *body,
                   long *status)
{
    struct reply r;
    const char *const headers[] = {"Content-Type: application/json", NULL};
    assert_true(http_call(&srv, method, path, body, body ? strlen(body) : 0,
                          headers, &r));
    *status = r.status;
    cJSON *doc = cJSON_Parse(r.body);
    if (!doc)
        fail_msg("%s %s: %ld, not JSON: %.300s", method, path, r.status,
                 r.body);
    reply_free(&r);
    return doc;
}

static cJSON *post_ok(const char *path, const char *body)
{
    long status;
    cJSON *doc = call("POST", path, body, &status);
    if (status != 200) {
        char *text = cJSON_PrintUnformatted(doc);
        fail_msg("POST %s: %ld %.400s (body %.300s)", path, status, text, body);
    }
    return doc;
}

/* An error in OpenAI's shape with the status, type and param wanted
 * (param NULL: null). */
static void expect_error(const char *path, const char *body, long status,
                         const char *param, const char *in_message)
{
    long got;
    cJSON *doc = call("POST", path, body, &got);
    const cJSON *e = get(doc, "error");
    if (got != status)
        fail_msg("%s: %ld, want %ld: %s", body, got, status,
                 get(e, "message")->valuestring);
    assert_true(cJSON_IsString(get(e, "message")));
    assert_true(cJSON_IsString(get(e, "type")));
    const cJSON *p = get(e, "param");
    if (param) {
        if (!cJSON_IsString(p) || strcmp(p->valuestring, param))
            fail_msg("%s: param %s, want %s", body,
                     cJSON_IsString(p) ? p->valuestring : "null", param);
    } else {
        assert_true(cJSON_IsNull(p));
    }
    if (in_message && !strstr(get(e, "message")->valuestring, in_message))
        fail_msg("%s: message \"%s\" does not say \"%s\"", body,
                 get(e, "message")->valuestring, in_message);
    assert_non_null(cJSON_GetObjectItemCaseSensitive(e, "code"));
    cJSON_Delete(doc);
}

/* The data lines of an SSE body, each parsed, until "[DONE]" (which
 * must end it). */
static size_t parse_chunks(char *body, cJSON **out, size_t max, bool *done)
{
    size_t n = 0;
    *done = false;
    for (char *block = body; *block && n < max;) {
        char *end = strstr(block, "\n\n");
        if (!end)
            fail_msg("a chunk without its blank line: %.200s", block);
        *end = '\0';
        if (strncmp(block, "data: ", 6))
            fail_msg("not a data line: %.200s", block);
        if (!strcmp(block + 6, "[DONE]")) {
            *done = true;
            assert_string_equal(end + 2, "");
            return n;
        }
        out[n] = cJSON_Parse(block + 6);
        if (!out[n])
            fail_msg("a chunk that is not JSON: %.200s", block + 6);
        n++;
        block = end + 2;
    }
    return n;
}

enum { MAX_CHUNKS = 128 };

static size_t stream(const char *path, const char *body, cJSON **chunks,
                     bool *done)
{
    struct stream s = {0};
    char type[128];
    const long status =
        post_stream(&srv, path, body, NULL, &s, type, sizeof type);
    if (status != 200)
        fail_msg("%s: %ld %.300s", body, status, s.data);
    assert_string_equal(type, "text/event-stream");
    const size_t n = parse_chunks(s.data, chunks, MAX_CHUNKS, done);
    free(s.data);
    return n;
}

static void free_chunks(cJSON **c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cJSON_Delete(c[i]);
}

/* log softmax(logits)[i] in double. */
static double log_softmax(const cJSON *logits, int i)
{
    double most = -INFINITY;
    const int n = cJSON_GetArraySize(logits);
    for (int k = 0; k < n; k++)
        most = fmax(most, at(logits, k)->valuedouble);
    double total = 0;
    for (int k = 0; k < n; k++)
        total += exp(at(logits, k)->valuedouble - most);
    return at(logits, i)->valuedouble - most - log(total);
}

/* ------------------------------------------------------------- models */

static void test_models_list(void **state)
{
    (void)state;
    long status;
    cJSON *doc = call("GET", "/v1/models", NULL, &status);
    assert_int_equal(status, 200);
    assert_string_equal(get(doc, "object")->valuestring, "list");
    const cJSON *data = get(doc, "data");
    // the decoders; bert completes nothing
    assert_int_equal(cJSON_GetArraySize(data), 9);
    const cJSON *m;
    cJSON_ArrayForEach(m, data)
    {
        assert_string_equal(get(m, "object")->valuestring, "model");
        assert_true(get(m, "created")->valuedouble > 1.7e9);
        assert_string_equal(get(m, "owned_by")->valuestring, "attnd");
        // what a request may have: the positions, within --max-tokens
        assert_true(get(m, "max_model_len")->valueint <= 4096);
        assert_true(strcmp(get(m, "id")->valuestring, "bert"));
    }
    cJSON_Delete(doc);
    doc = call("GET", "/v1/models/qwen3", NULL, &status);
    assert_int_equal(status, 200);
    assert_string_equal(get(doc, "id")->valuestring, "qwen3");
    cJSON_Delete(doc);
    doc = call("GET", "/v1/models/bert", NULL, &status);
    assert_int_equal(status, 404);
    assert_non_null(
        strstr(get(get(doc, "error"), "message")->valuestring, "encoder"));
    cJSON_Delete(doc);
    doc = call("GET", "/v1/models/nope", NULL, &status);
    assert_int_equal(status, 404);
    assert_string_equal(get(get(doc, "error"), "code")->valuestring,
                        "model_not_found");
    cJSON_Delete(doc);
}

/* -------------------------------------------------------- completions */

/* Greedy tokens are the float64 reference's, as a text prompt and as
 * its ids; the attention extension's token_ids say which. */
static void test_completion_greedy(void **state)
{
    (void)state;
    const char *variants[] = {"llama3", "qwen3", "gemma2", "mistral"};
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
        char path[128];
        snprintf(path, sizeof path, "tests/models/golden/%s.json", variants[v]);
        cJSON *g = load_json(path);
        const cJSON *prompt = get(get(g, "greedy"), "prompt");
        const cJSON *want = get(get(g, "greedy"), "new");
        const cJSON *margins = get(get(g, "greedy"), "margins");
        const int n_prompt = cJSON_GetArraySize(prompt);
        const int n_new = cJSON_GetArraySize(want);
        char *sentence =
            cJSON_PrintUnformatted(get(at(get(g, "cases"), 0), "sentence"));
        char *ids = cJSON_PrintUnformatted(prompt);
        for (int form = 0; form < 2; form++) {
            char body[4096];
            snprintf(body, sizeof body,
                     "{\"model\":\"%s\",\"prompt\":%s,\"max_tokens\":%d,"
                     "\"temperature\":0,\"attention\":{\"return\":[]}}",
                     variants[v], form ? ids : sentence, n_new);
            cJSON *doc = post_ok("/v1/completions", body);
            assert_string_equal(get(doc, "object")->valuestring,
                                "text_completion");
            assert_true(!strncmp(get(doc, "id")->valuestring, "cmpl-", 5));
            const cJSON *choice = at(get(doc, "choices"), 0);
            assert_string_equal(get(choice, "finish_reason")->valuestring,
                                "length");
            const cJSON *usage = get(doc, "usage");
            assert_int_equal(get(usage, "prompt_tokens")->valueint, n_prompt);
            assert_int_equal(get(usage, "completion_tokens")->valueint, n_new);
            const cJSON *got = get(get(doc, "attention"), "token_ids");
            assert_int_equal(cJSON_GetArraySize(got), n_prompt + n_new);
            for (int i = 0; i < n_prompt; i++)
                assert_int_equal(at(got, i)->valueint, at(prompt, i)->valueint);
            // the near-tie rule: a token whose reference margin is below
            // 1e-3 may go either way, and the rest follow from it
            for (int i = 0; i < n_new && at(margins, i)->valuedouble >= 1e-3;
                 i++)
                if (at(got, n_prompt + i)->valueint != at(want, i)->valueint)
                    fail_msg("%s: token %d is %d, want %d", variants[v], i,
                             at(got, n_prompt + i)->valueint,
                             at(want, i)->valueint);
            cJSON_Delete(doc);
        }
        free(sentence);
        free(ids);
        cJSON_Delete(g);
    }
}

/* The first token's log-probability and its alternatives are a float64
 * log-softmax of the reference's logits, to 1e-4. */
static void test_logprobs_against_reference(void **state)
{
    (void)state;
    const char *variants[] = {"llama3", "gemma2", "qwen3"};
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
        char path[128];
        snprintf(path, sizeof path, "tests/models/golden/%s.json", variants[v]);
        cJSON *g = load_json(path);
        const cJSON *c0 = at(get(g, "cases"), 0);
        const cJSON *logits = get(c0, "logits");
        char *ids = cJSON_PrintUnformatted(get(c0, "ids"));
        char body[4096];
        snprintf(body, sizeof body,
                 "{\"model\":\"%s\",\"prompt\":%s,\"max_tokens\":1,"
                 "\"temperature\":0,\"logprobs\":5}",
                 variants[v], ids);
        cJSON *doc = post_ok("/v1/completions", body);
        const cJSON *lp = get(at(get(doc, "choices"), 0), "logprobs");
        const cJSON *tops = at(get(lp, "top_logprobs"), 0);
        assert_int_equal(cJSON_GetArraySize(tops), 5);
        // the chosen (greedy) token is the most probable
        const double chosen = at(get(lp, "token_logprobs"), 0)->valuedouble;
        double best = -INFINITY;
        int best_id = 0;
        for (int i = 0; i < cJSON_GetArraySize(logits); i++)
            if (log_softmax(logits, i) > best) {
                best = log_softmax(logits, i);
                best_id = i;
            }
        if (fabs(chosen - best) > 1e-4)
            fail_msg("%s: logprob %.8f, want %.8f", variants[v], chosen, best);
        // each alternative's, by its text
        const cJSON *alt;
        int k = 0;
        cJSON_ArrayForEach(alt, tops)
        {
            assert_true(alt->valuedouble <= best + 1e-4);
            k++;
        }
        assert_int_equal(k, 5);
        (void)best_id;
        // chat's layout carries the same numbers
        snprintf(body, sizeof body,
                 "{\"model\":\"%s\",\"prompt\":%s,\"max_tokens\":1,"
                 "\"temperature\":0,\"logprobs\":20,\"echo\":false}",
                 variants[v], ids);
        cJSON *wide = post_ok("/v1/completions", body);
        const cJSON *wtops = at(
            get(get(at(get(wide, "choices"), 0), "logprobs"), "top_logprobs"),
            0);
        // twenty alternatives, their log-probabilities in order, each a
        // float64 log-softmax value of some token
        double last = 0;
        int count = 0;
        cJSON_ArrayForEach(alt, wtops)
        {
            if (count && alt->valuedouble > last + 1e-9)
                fail_msg("%s: alternatives out of order", variants[v]);
            last = alt->valuedouble;
            bool found = false;
            for (int i = 0; i < cJSON_GetArraySize(logits) && !found; i++)
                found = fabs(log_softmax(logits, i) - alt->valuedouble) < 1e-4;
            assert_true(found);
            count++;
        }
        // tokens of equal text collapse into one key, as OpenAI's do
        assert_true(count > 10 && count <= 20);
        cJSON_Delete(wide);
        cJSON_Delete(doc);
        free(ids);
        cJSON_Delete(g);
    }
}

/* echo with logprobs and no new token scores the prompt: each token's
 * log-probability given those before it, the first none; the same
 * numbers as a completion of each prefix gives its next token. */
static void test_echo_scores_the_prompt(void **state)
{
    (void)state;
    cJSON *g = load_json("tests/models/golden/llama3.json");
    const cJSON *ids = get(at(get(g, "cases"), 0), "ids");
    const int n = cJSON_GetArraySize(ids);
    char *text = cJSON_PrintUnformatted(ids);
    char body[4096];
    snprintf(body, sizeof body,
             "{\"model\":\"llama3\",\"prompt\":%s,\"max_tokens\":0,"
             "\"echo\":true,\"logprobs\":1}",
             text);
    cJSON *doc = post_ok("/v1/completions", body);
    const cJSON *choice = at(get(doc, "choices"), 0);
    const cJSON *lp = get(choice, "logprobs");
    assert_int_equal(cJSON_GetArraySize(get(lp, "tokens")), n);
    assert_true(cJSON_IsNull(at(get(lp, "token_logprobs"), 0)));
    assert_true(cJSON_IsNull(at(get(lp, "top_logprobs"), 0)));
    assert_int_equal(at(get(lp, "text_offset"), 0)->valueint, 0);
    assert_int_equal(get(get(doc, "usage"), "completion_tokens")->valueint, 0);
    // the echoed text is the prompt's
    assert_true(strlen(get(choice, "text")->valuestring) > 10);
    // with new tokens, their offsets go on from the prompt tokens'
    snprintf(body, sizeof body,
             "{\"model\":\"llama3\",\"prompt\":%s,\"max_tokens\":3,"
             "\"echo\":true,\"logprobs\":1,\"temperature\":0}",
             text);
    cJSON *more = post_ok("/v1/completions", body);
    const cJSON *offsets =
        get(get(at(get(more, "choices"), 0), "logprobs"), "text_offset");
    assert_int_equal(cJSON_GetArraySize(offsets), n + 3);
    for (int i = 1; i < n + 3; i++)
        assert_true(at(offsets, i)->valueint > at(offsets, i - 1)->valueint);
    cJSON_Delete(more);
    for (int k = 3; k < n; k += 5) {
        cJSON *prefix = cJSON_CreateArray();
        for (int i = 0; i < k; i++)
            cJSON_AddItemToArray(prefix,
                                 cJSON_CreateNumber(at(ids, i)->valueint));
        char *p = cJSON_PrintUnformatted(prefix);
        snprintf(body, sizeof body,
                 "{\"model\":\"llama3\",\"prompt\":%s,\"max_tokens\":1,"
                 "\"temperature\":0,\"logprobs\":1}",
                 p);
        cJSON *one = post_ok("/v1/completions", body);
        const cJSON *top =
            at(get(get(at(get(one, "choices"), 0), "logprobs"), "top_logprobs"),
               0);
        const cJSON *echoed = at(get(lp, "top_logprobs"), k);
        if (fabs(top->child->valuedouble - echoed->child->valuedouble) > 1e-4)
            fail_msg("position %d: %.6f alone, %.6f echoed", k,
                     top->child->valuedouble, echoed->child->valuedouble);
        cJSON_Delete(one);
        free(p);
        cJSON_Delete(prefix);
    }
    free(text);
    cJSON_Delete(doc);
    cJSON_Delete(g);
}

/* A completion's chunks, n of them, add up to text and the last ends
 * with finish. */
static void expect_stream_text(cJSON **chunks, size_t n, const char *text,
                               const char *finish)
{
    assert_true(n > 0);
    char joined[1024] = "";
    for (size_t i = 0; i < n; i++)
        strncat(joined,
                get(at(get(chunks[i], "choices"), 0), "text")->valuestring,
                sizeof joined - strlen(joined) - 1);
    assert_string_equal(joined, text);
    assert_string_equal(
        get(at(get(chunks[n - 1], "choices"), 0), "finish_reason")->valuestring,
        finish);
}

/* A stop string ends the text before it, streamed or whole. */
static void test_stop_strings(void **state)
{
    (void)state;
    const char *ask = "{\"model\":\"llama3\",\"prompt\":\"The cat sat\","
                      "\"max_tokens\":12,\"temperature\":0";
    char body[512];
    snprintf(body, sizeof body, "%s}", ask);
    cJSON *free_run = post_ok("/v1/completions", body);
    const char *text =
        get(at(get(free_run, "choices"), 0), "text")->valuestring;
    assert_true(strlen(text) >= 4);
    // a stop of the text's third and fourth bytes
    char stop[8];
    snprintf(stop, sizeof stop, "%.2s", text + 2);
    cJSON *stop_json = cJSON_CreateString(stop);
    char *escaped = cJSON_PrintUnformatted(stop_json);
    cJSON_Delete(stop_json);
    snprintf(body, sizeof body, "%s,\"stop\":[%s]}", ask, escaped);
    cJSON *stopped = post_ok("/v1/completions", body);
    const cJSON *c = at(get(stopped, "choices"), 0);
    assert_string_equal(get(c, "finish_reason")->valuestring, "stop");
    const char *cut = get(c, "text")->valuestring;
    assert_null(strstr(cut, stop));
    assert_true(!strncmp(cut, text, strlen(cut)));
    // streamed: the chunks add up to the same text
    snprintf(body, sizeof body, "%s,\"stop\":[%s],\"stream\":true}", ask,
             escaped);
    cJSON *chunks[MAX_CHUNKS];
    bool done;
    const size_t n = stream("/v1/completions", body, chunks, &done);
    assert_true(done);
    expect_stream_text(chunks, n, cut, "stop");
    free_chunks(chunks, n);
    free(escaped);
    cJSON_Delete(stopped);
    cJSON_Delete(free_run);
}

/* A stop whose text before it ends with its own start, which went out
 * with an earlier chunk: the stream, a chunk a token (log-probabilities
 * asked), ends at the stop with [DONE], its text the whole answer's. The
 * Q8_0 test model says " looks" over and over, then " quick", so "looks
 * q" begins after "looks ". */
static void test_stop_after_its_own_start(void **state)
{
    (void)state;
    const char *ask = "{\"model\":\"q8\",\"prompt\":\"The cat\","
                      "\"max_tokens\":45,\"temperature\":0";
    char body[512];
    snprintf(body, sizeof body, "%s}", ask);
    cJSON *free_run = post_ok("/v1/completions", body);
    const char *text =
        get(at(get(free_run, "choices"), 0), "text")->valuestring;
    // the case this test is for: the text holds it
    assert_non_null(strstr(text, " looks looks quick"));
    snprintf(body, sizeof body, "%s,\"stop\":[\"looks q\"]}", ask);
    cJSON *whole = post_ok("/v1/completions", body);
    const cJSON *c = at(get(whole, "choices"), 0);
    assert_string_equal(get(c, "finish_reason")->valuestring, "stop");
    const char *cut = get(c, "text")->valuestring;
    assert_int_equal(strlen(cut), (size_t)(strstr(text, "looks q") - text));
    snprintf(body, sizeof body,
             "%s,\"stop\":[\"looks q\"],\"stream\":true,\"logprobs\":0}", ask);
    cJSON *chunks[MAX_CHUNKS];
    bool done;
    const size_t n = stream("/v1/completions", body, chunks, &done);
    assert_true(done);
    expect_stream_text(chunks, n, cut, "stop");
    free_chunks(chunks, n);
    cJSON_Delete(whole);
    cJSON_Delete(free_run);
}

/* The keys of each legacy top_logprobs object of a completion's answer
 * to body are all different. */
static void expect_unique_top_keys(const char *body)
{
    cJSON *doc = post_ok("/v1/completions", body);
    const cJSON *lp = get(at(get(doc, "choices"), 0), "logprobs");
    const cJSON *top;
    cJSON_ArrayForEach(top, get(lp, "top_logprobs"))
    {
        const cJSON *a, *b;
        cJSON_ArrayForEach(
            a, top) for (b = a->next; b;
                         b = b->next) if (!strcmp(a->string, b->string))
            fail_msg("top_logprobs key %s twice", a->string);
    }
    // a prompt's NUL token shows as the text shows it, U+FFFD
    bool nul_shown = false;
    const cJSON *t;
    cJSON_ArrayForEach(t, get(lp, "tokens")) nul_shown |=
        !strcmp(t->valuestring, "\xEF\xBF\xBD");
    assert_true(nul_shown);
    cJSON_Delete(doc);
}

/* A NUL in a prompt reaches the echo as sent, with all that follows
 * it; byte tokens that show the same text (U+FFFD) are one key of a
 * legacy top_logprobs object, never written twice. */
static void test_echo_keeps_nul(void **state)
{
    (void)state;
    const char *body = "{\"model\":\"llama3\",\"prompt\":\"x\\u0000yz\","
                       "\"max_tokens\":3,\"temperature\":0,\"echo\":true,"
                       "\"logprobs\":20}";
    struct reply r;
    const char *const headers[] = {"Content-Type: application/json", NULL};
    assert_true(http_call(&srv, "POST", "/v1/completions", body, strlen(body),
                          headers, &r));
    assert_int_equal(r.status, 200);
    // the prompt, then the completion's three tokens
    if (!strstr(r.body, "\"text\":\"x\\u0000yz"))
        fail_msg("no echoed prompt in %.400s", r.body);
    reply_free(&r);
    expect_unique_top_keys(body);
    // this one's candidates hold several byte tokens shown as U+FFFD
    expect_unique_top_keys(
        "{\"model\":\"llama3\",\"prompt\":\"a\\u0000\",\"max_tokens\":2,"
        "\"temperature\":0,\"echo\":true,\"logprobs\":20}");
}

/* Special tokens the model makes are left out of the text, as vLLM's
 * skip_special_tokens leaves them, unless the request keeps them; the
 * sequence's tokens hold them either way. */
static void test_special_tokens_skipped(void **state)
{
    (void)state;
// this seed's draw makes <|object_ref_end|>, a special token, along
// the way (the keyed stream draws the same on any machine)
#define SPECIAL_ASK                                                            \
    "{\"model\":\"qwen3\",\"prompt\":\"Hello there\",\"max_tokens\":64,"       \
    "\"temperature\":2,\"seed\":3,\"attention\":{\"return\":[]}%s}"
    char body[512];
    snprintf(body, sizeof body, SPECIAL_ASK, "");
    cJSON *skipped = post_ok("/v1/completions", body);
    snprintf(body, sizeof body, SPECIAL_ASK, ",\"skip_special_tokens\":false");
    cJSON *kept = post_ok("/v1/completions", body);
    const cJSON *tokens = get(get(skipped, "attention"), "tokens");
    bool made = false;
    const cJSON *t;
    cJSON_ArrayForEach(t, tokens) made |=
        cJSON_IsString(t) && !strcmp(t->valuestring, "<|object_ref_end|>");
    assert_true(made);
    assert_null(strstr(get(at(get(skipped, "choices"), 0), "text")->valuestring,
                       "<|object_ref_end|>"));
    assert_non_null(
        strstr(get(at(get(kept, "choices"), 0), "text")->valuestring,
               "<|object_ref_end|>"));
    cJSON_Delete(kept);
    cJSON_Delete(skipped);
}

/* -------------------------------------------------------------- chats */

/* A template outside the subset: named in the load log and in GET
 * /models, and a chat on the model is a 400 naming the construct; the
 * model still completes. */
static void test_unrenderable_template_is_named(void **state)
{
    (void)state;
    size_t len = 0;
    char *log = read_file(srv.log_path, &len);
    assert_non_null(log);
    assert_non_null(strstr(log, "model \"bad\": chat template"));
    assert_non_null(strstr(log, "include"));
    free(log);
    long status;
    cJSON *models = call("GET", "/models", NULL, &status);
    const cJSON *m;
    bool seen = false;
    cJSON_ArrayForEach(m, get(models, "models"))
    {
        if (strcmp(get(m, "name")->valuestring, "bad"))
            continue;
        const cJSON *ct = get(m, "chat_template");
        assert_string_equal(get(ct, "source")->valuestring,
                            "chat_template.jinja");
        const cJSON *t = at(get(ct, "templates"), 0);
        assert_false(cJSON_IsTrue(get(t, "renders")));
        assert_non_null(strstr(get(t, "error")->valuestring, "include"));
        seen = true;
    }
    assert_true(seen);
    cJSON_Delete(models);
    expect_error("/v1/chat/completions",
                 "{\"model\":\"bad\",\"messages\":[{\"role\":\"user\","
                 "\"content\":\"x\"}]}",
                 400, "messages", "include");
    cJSON_Delete(post_ok("/v1/completions",
                         "{\"model\":\"bad\",\"prompt\":\"x\","
                         "\"max_tokens\":1}"));
}

/* The model's name for a golden template. */
static const struct {
    const char *model, *template;
} rendered[] = {{"llama3", "llama-3.2-3b-instruct"},
                {"qwen3", "qwen3-0.6b"},
                {"gemma2", "gemma-2-2b-it"},
                {"gemma3", "gemma-3-it"},
                {"mistral", "mistral-7b-instruct-v0.2"}};

/* /tokenize of each golden conversation renders what transformers
 * renders (or the template's refusal), its continued prompt when it
 * continues the last message; the ids are the tokens of that text,
 * without a BOS added to the template's own. */
static void test_tokenize_messages_renders_the_goldens(void **state)
{
    (void)state;
    cJSON *renders = load_json("tests/chat/renders.json");
    cJSON *cases = load_json("tests/chat/conversations.json");
    size_t compared = 0;
    for (size_t t = 0; t < sizeof rendered / sizeof *rendered; t++) {
        const cJSON *golden =
            get(get(get(renders, "templates"), rendered[t].template), "cases");
        const cJSON *c;
        cJSON_ArrayForEach(c, cases)
        {
            const char *name = get(c, "name")->valuestring;
            const cJSON *want = get(golden, name);
            // refused before any render: no messages; and OpenAI's
            // messages are shaped as vLLM shapes them, unlike these
            // goldens': a tool call's arguments (a string) as the object
            // they hold, a null content as ""
            if (!strcmp(name, "no_messages") ||
                !strcmp(name, "tool_call_string_arguments") ||
                !strcmp(name, "tool_call"))
                continue;
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(want, "text");
            // the server's clock is not the golden's
            if (text && strstr(text->valuestring, "Today Date") &&
                !cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(c, "kwargs"),
                    "date_string"))
                continue;
            cJSON *body = cJSON_CreateObject();
            cJSON_AddStringToObject(body, "model", rendered[t].model);
            cJSON_AddItemToObject(body, "messages",
                                  cJSON_Duplicate(get(c, "messages"), true));
            const cJSON *tools = cJSON_GetObjectItemCaseSensitive(c, "tools");
            if (tools)
                cJSON_AddItemToObject(body, "tools",
                                      cJSON_Duplicate(tools, true));
            const cJSON *kwargs = cJSON_GetObjectItemCaseSensitive(c, "kwargs");
            if (kwargs)
                cJSON_AddItemToObject(body, "chat_template_kwargs",
                                      cJSON_Duplicate(kwargs, true));
            const bool cont = cJSON_IsTrue(
                cJSON_GetObjectItemCaseSensitive(c, "continue_final_message"));
            cJSON_AddBoolToObject(
                body, "add_generation_prompt",
                cJSON_IsTrue(get(c, "add_generation_prompt")));
            cJSON_AddBoolToObject(body, "continue_final_message", cont);
            cJSON_AddBoolToObject(body, "return_token_strs", true);
            char *text_body = cJSON_PrintUnformatted(body);
            long status;
            cJSON *doc = call("POST", "/tokenize", text_body, &status);
            // a continued conversation's outcome is its own
            const cJSON *outcome = cont ? get(want, "continued") : want;
            const cJSON *expected =
                cJSON_GetObjectItemCaseSensitive(outcome, "text");
            const cJSON *raises =
                cJSON_GetObjectItemCaseSensitive(outcome, "raises");
            // text parts reach a template that reads a string joined (as
            // vLLM hands them over), where transformers prints the list
            const bool joined = strstr(name, "parts") && !raises &&
                                strcmp(rendered[t].model, "gemma3");
            if (joined) {
                if (status != 200)
                    fail_msg("%s/%s: %ld", rendered[t].model, name, status);
            } else if (raises) {
                if (status != 400 || !strstr(get(doc, "detail")->valuestring,
                                             raises->valuestring))
                    fail_msg("%s/%s: %ld, want the refusal \"%s\"",
                             rendered[t].model, name, status,
                             raises->valuestring);
            } else if (expected) {
                if (status != 200)
                    fail_msg("%s/%s: %ld %s", rendered[t].model, name, status,
                             cJSON_PrintUnformatted(doc));
                const char *got = get(doc, "prompt")->valuestring;
                if (strcmp(got, expected->valuestring))
                    fail_msg("%s/%s renders\n%s\nwant\n%s", rendered[t].model,
                             name, got, expected->valuestring);
                // the template writes the BOS; the tokenizer adds none
                const cJSON *strs = get(doc, "token_strs");
                int bos = 0;
                const cJSON *s;
                cJSON_ArrayForEach(s, strs) bos +=
                    cJSON_IsString(s) &&
                    (!strcmp(s->valuestring, "<|begin_of_text|>") ||
                     !strcmp(s->valuestring, "<bos>") ||
                     !strcmp(s->valuestring, "<s>"));
                assert_true(bos <= 1);
                assert_int_equal(get(doc, "count")->valueint,
                                 cJSON_GetArraySize(get(doc, "tokens")));
                compared++;
            } else {
                // a golden that Python itself refused (a type error)
                if (status != 400)
                    fail_msg("%s/%s: %ld, want 400", rendered[t].model, name,
                             status);
            }
            cJSON_Delete(doc);
            free(text_body);
            cJSON_Delete(body);
        }
    }
    assert_true(compared > 60);
    cJSON_Delete(cases);
    cJSON_Delete(renders);
}

/* A chat: the answer's shape; its tokens are the rendered prompt's
 * (as /tokenize gives them) and then the completion's; streamed, the
 * first chunk names the role, the deltas add up to the whole content,
 * the last has the finish reason and the attention, the usage chunk
 * comes when asked, and [DONE] ends it. */
static void test_chat_whole_and_streamed(void **state)
{
    (void)state;
    const char *messages =
        "\"messages\":[{\"role\":\"system\",\"content\":\"You are brief.\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hello\"}"
        ","
        "{\"type\":\"text\",\"text\":\"there\"}]}],"
        "\"chat_template_kwargs\":{\"enable_thinking\":false}";
    char body[2048];
    snprintf(body, sizeof body, "{\"model\":\"qwen3\",%s}", messages);
    cJSON *tok = post_ok("/tokenize", body);
    const cJSON *prompt_ids = get(tok, "tokens");
    const int n_prompt = cJSON_GetArraySize(prompt_ids);
    assert_non_null(
        strstr(get(tok, "prompt")->valuestring, "<think>\n\n</think>\n\n"));
    assert_non_null(strstr(get(tok, "prompt")->valuestring, "Hello\nthere"));
    snprintf(body, sizeof body,
             "{\"model\":\"qwen3\",%s,\"max_completion_tokens\":6,"
             "\"temperature\":0,\"attention\":{\"return\":[\"weights\"],"
             "\"layer\":1}}",
             messages);
    cJSON *whole = post_ok("/v1/chat/completions", body);
    assert_string_equal(get(whole, "object")->valuestring, "chat.completion");
    const cJSON *choice = at(get(whole, "choices"), 0);
    const cJSON *message = get(choice, "message");
    assert_string_equal(get(message, "role")->valuestring, "assistant");
    const char *content = get(message, "content")->valuestring;
    const cJSON *attention = get(whole, "attention");
    const cJSON *ids = get(attention, "token_ids");
    const int total = cJSON_GetArraySize(ids);
    const int made = get(get(whole, "usage"), "completion_tokens")->valueint;
    assert_int_equal(total, n_prompt + made);
    for (int i = 0; i < n_prompt; i++)
        assert_int_equal(at(ids, i)->valueint, at(prompt_ids, i)->valueint);
    // the weights of layer 1: [heads][T][T]
    const cJSON *w = get(attention, "weights");
    assert_int_equal(cJSON_GetArraySize(at(w, 0)), total);
    // streamed, with each token's row and the usage
    snprintf(body, sizeof body,
             "{\"model\":\"qwen3\",%s,\"max_completion_tokens\":6,"
             "\"temperature\":0,\"stream\":true,"
             "\"stream_options\":{\"include_usage\":true},"
             "\"attention\":{\"return\":[\"weights\"],\"layer\":1,"
             "\"stream_rows\":true}}",
             messages);
    cJSON *chunks[MAX_CHUNKS];
    bool done;
    const size_t n = stream("/v1/chat/completions", body, chunks, &done);
    assert_true(done);
    assert_true(n >= 3);
    const cJSON *first = at(get(chunks[0], "choices"), 0);
    assert_string_equal(get(get(first, "delta"), "role")->valuestring,
                        "assistant");
    char joined[4096] = "";
    size_t rows = 0;
    for (size_t i = 0; i + 2 < n; i++) {
        assert_string_equal(get(chunks[i], "object")->valuestring,
                            "chat.completion.chunk");
        const cJSON *delta = get(at(get(chunks[i], "choices"), 0), "delta");
        const cJSON *piece = cJSON_GetObjectItemCaseSensitive(delta, "content");
        if (piece)
            strncat(joined, piece->valuestring,
                    sizeof joined - strlen(joined) - 1);
        const cJSON *row =
            cJSON_GetObjectItemCaseSensitive(chunks[i], "attention_row");
        if (!row)
            continue;
        // the row of the position before the token: the same as the
        // finished sequence's weights there, for every head
        const int pos = get(row, "position")->valueint;
        const cJSON *heads = get(row, "weights");
        for (int h = 0; h < cJSON_GetArraySize(heads); h++) {
            const cJSON *r = at(heads, h);
            const cJSON *full = at(at(w, h), pos);
            assert_int_equal(cJSON_GetArraySize(r), pos + 1);
            double sum = 0;
            for (int k = 0; k <= pos; k++) {
                sum += at(r, k)->valuedouble;
                if (fabs(at(r, k)->valuedouble - at(full, k)->valuedouble) >
                    1e-5)
                    fail_msg("row of %d, head %d, key %d: %g streamed, %g "
                             "whole",
                             pos, h, k, at(r, k)->valuedouble,
                             at(full, k)->valuedouble);
            }
            assert_true(fabs(sum - 1) < 1e-4);
        }
        rows++;
    }
    assert_int_equal(rows, (size_t)made);
    assert_string_equal(joined, content);
    const cJSON *last = chunks[n - 2];
    assert_string_equal(
        get(at(get(last, "choices"), 0), "finish_reason")->valuestring,
        get(choice, "finish_reason")->valuestring);
    assert_int_equal(
        cJSON_GetArraySize(get(get(last, "attention"), "token_ids")), total);
    const cJSON *usage = chunks[n - 1];
    assert_int_equal(cJSON_GetArraySize(get(usage, "choices")), 0);
    assert_int_equal(get(get(usage, "usage"), "total_tokens")->valueint, total);
    free_chunks(chunks, n);
    cJSON_Delete(whole);
    cJSON_Delete(tok);
}

/* Chat log-probabilities: each entry's token, bytes and alternatives. */
static void test_chat_logprobs(void **state)
{
    (void)state;
    cJSON *doc = post_ok(
        "/v1/chat/completions",
        "{\"model\":\"llama3\",\"messages\":[{\"role\":\"user\",\"content\":"
        "\"Hi\"}],\"max_tokens\":3,\"temperature\":0,\"logprobs\":true,"
        "\"top_logprobs\":3,\"chat_template_kwargs\":{\"date_string\":\"1 Jan "
        "2026\"}}");
    const cJSON *content =
        get(get(at(get(doc, "choices"), 0), "logprobs"), "content");
    assert_true(cJSON_GetArraySize(content) >= 1);
    const cJSON *e;
    cJSON_ArrayForEach(e, content)
    {
        assert_true(cJSON_IsString(get(e, "token")));
        assert_true(get(e, "logprob")->valuedouble <= 0);
        assert_true(cJSON_IsArray(get(e, "bytes")));
        const cJSON *tops = get(e, "top_logprobs");
        assert_int_equal(cJSON_GetArraySize(tops), 3);
        // greedy: the token is the first alternative
        assert_true(fabs(get(at(tops, 0), "logprob")->valuedouble -
                         get(e, "logprob")->valuedouble) < 1e-6);
    }
    cJSON_Delete(doc);
}

/* ------------------------------------------------------------- errors */

static void test_errors_in_openai_shape(void **state)
{
    (void)state;
    expect_error("/v1/completions",
                 "{\"model\":\"llama3\",\"prompt\":\"x\",\"n\":2}", 400, "n",
                 "one choice");
    expect_error("/v1/completions",
                 "{\"model\":\"llama3\",\"prompt\":\"x\",\"bogus\":1}", 400,
                 "bogus", "unrecognized");
    expect_error("/v1/completions",
                 "{\"model\":\"llama3\",\"prompt\":\"x\",\"temperature\":3}",
                 400, "temperature", NULL);
    // the value as sent, not rounded into the range it is out of
    expect_error("/v1/completions",
                 "{\"model\":\"llama3\",\"prompt\":\"x\","
                 "\"temperature\":2.0000001}",
                 400, "temperature", "(2.0000001");
    expect_error("/v1/completions", "{\"model\":\"nope\",\"prompt\":\"x\"}",
                 404, "model", "does not exist");
    expect_error("/v1/completions", "{\"model\":\"bert\",\"prompt\":\"x\"}",
                 400, "model", "output head");
    expect_error("/v1/completions",
                 "{\"model\":\"llama3\",\"prompt\":[1,2,999999]}", 400,
                 "prompt[2]", "not a token id");
    expect_error("/v1/completions",
                 "{\"model\":\"llama3\",\"prompt\":\"x\",\"logprobs\":21}", 400,
                 "logprobs", NULL);
    expect_error("/v1/chat/completions",
                 "{\"model\":\"llama3\",\"messages\":[{\"role\":\"robot\","
                 "\"content\":\"x\"}]}",
                 400, "messages[0].role", "robot");
    expect_error("/v1/chat/completions",
                 "{\"model\":\"llama3\",\"messages\":[{\"role\":\"user\","
                 "\"content\":[{\"type\":\"image_url\"}]}]}",
                 400, "messages[0].content[0]", "image_url");
    expect_error("/v1/chat/completions",
                 "{\"model\":\"gpt2\",\"messages\":[{\"role\":\"user\","
                 "\"content\":\"x\"}]}",
                 400, "messages", "no chat template");
    // the template's own refusal, with its message
    expect_error("/v1/chat/completions",
                 "{\"model\":\"gemma2\",\"messages\":[{\"role\":\"system\","
                 "\"content\":\"x\"},{\"role\":\"user\",\"content\":\"y\"}]}",
                 400, "messages", "System role not supported");
    expect_error("/v1/chat/completions",
                 "{\"model\":\"llama3\",\"messages\":[{\"role\":\"user\","
                 "\"content\":\"x\"}],\"attention\":{\"layer\":9}}",
                 400, "attention.layer", NULL);
    expect_error("/v1/chat/completions",
                 "{\"model\":\"llama3\",\"messages\":[{\"role\":\"user\","
                 "\"content\":\"x\"}],\"attention\":{\"stream_rows\":true}}",
                 400, "attention.stream_rows", "stream");
    expect_error("/v1/completions",
                 "{\"model\":\"llama3\",\"prompt\":\"x\",\"max_tokens\":"
                 "100000}",
                 400, "max_tokens", NULL);
    expect_error("/v1/completions", "{\"model\":\"llama3\",\"prompt\":", 400,
                 NULL, NULL);
    // a key twice: one reader taking the first and another the last would
    // read two requests
    expect_error("/v1/chat/completions",
                 "{\"model\":\"llama3\",\"messages\":[{\"role\":\"user\","
                 "\"content\":\"a\",\"role\":\"system\"}]}",
                 400, "messages[0].role", "twice");
    expect_error("/v1/completions",
                 "{\"model\":\"llama3\",\"prompt\":\"x\",\"attention\":"
                 "{\"return\":[\"dla\"],\"dla_target\":3}}",
                 400, "attention.return", "dla");
    expect_error("/v1/chat/completions",
                 "{\"model\":\"llama3\",\"messages\":[{\"role\":\"user\","
                 "\"content\":\"ab\xff\"}]}",
                 400, "messages[0].content", "UTF-8");
    expect_error("/v1/chat/completions",
                 "{\"model\":\"llama3\",\"messages\":[{\"role\":\"user\","
                 "\"content\":\"x\"}],\"max_tokens\":1,"
                 "\"max_completion_tokens\":2}",
                 400, "max_tokens", "differ");
    expect_error("/v1/completions",
                 "{\"model\":\"llama3\",\"prompt\":\"The cat sat on the mat\","
                 "\"max_tokens\":60,\"attention\":{\"return\":[\"flow\"]}}",
                 400, "max_tokens", "flow");
    // chat_template_kwargs: a bounded count, refused before any work
    char *many = malloc(1 << 16);
    size_t at = (size_t)sprintf(
        many, "{\"model\":\"llama3\",\"messages\":[{\"role\":\"user\","
              "\"content\":\"x\"}],\"chat_template_kwargs\":{");
    for (int i = 0; i < 300; i++)
        at += (size_t)sprintf(many + at, "%s\"k%d\":0", i ? "," : "", i);
    strcpy(many + at, "}}");
    expect_error("/v1/chat/completions", many, 400, "chat_template_kwargs",
                 "at most");
    free(many);
    expect_error("/v1/chat/completions",
                 "{\"model\":\"llama3\",\"messages\":[{\"role\":\"user\","
                 "\"content\":\"x\"}],\"modalities\":[\"audio\"]}",
                 400, "modalities", "text");
    expect_error("/v1/completions",
                 "{\"model\":\"llama3\",\"prompt\":\"x\",\"attention\":"
                 "{\"model\":\"qwen3\"}}",
                 400, "attention.model", NULL);
    // the attention's text over the whole sequence, measured first
    char *long_prompt = malloc(1 << 16);
    size_t n =
        (size_t)sprintf(long_prompt, "{\"model\":\"llama3\",\"max_tokens\":1,"
                                     "\"attention\":{\"return\":"
                                     "[\"sparse_weights\"],\"sparse_k\":256},"
                                     "\"prompt\":[");
    for (int i = 0; i < 2200; i++)
        n += (size_t)sprintf(long_prompt + n, "%s5", i ? "," : "");
    strcpy(long_prompt + n, "]}");
    // refused before the pass: a few milliseconds where the pass takes
    // seconds
    const double t0 = clock_seconds();
    expect_error("/v1/completions", long_prompt, 400, "attention.sparse_k",
                 "64 MiB");
    assert_true(clock_seconds() - t0 < 2.0);
    free(long_prompt);
    // the other routes keep problem+json
    long status;
    cJSON *doc = call("POST", "/tokenize",
                      "{\"model\":\"nope\",\"prompt\":\"x\"}", &status);
    assert_int_equal(status, 404);
    assert_non_null(cJSON_GetObjectItemCaseSensitive(doc, "detail"));
    cJSON_Delete(doc);
}

/* -------------------------------------------------- tokens and texts */

static void test_detokenize_round_trip(void **state)
{
    (void)state;
    cJSON *tok = post_ok("/tokenize", "{\"model\":\"mistral\",\"prompt\":"
                                      "\"Caf\\u00e9 au lait, 12 cups.\","
                                      "\"add_special_tokens\":false}");
    char *ids = cJSON_PrintUnformatted(get(tok, "tokens"));
    char body[2048];
    snprintf(body, sizeof body, "{\"model\":\"mistral\",\"tokens\":%s}", ids);
    cJSON *text = post_ok("/detokenize", body);
    // SentencePiece's leading space is the text's first byte
    assert_non_null(strstr(get(text, "prompt")->valuestring,
                           "Caf\xc3\xa9 au lait, 12 cups."));
    assert_true(get(tok, "max_model_len")->valueint > 0);
    free(ids);
    cJSON_Delete(text);
    cJSON_Delete(tok);
}

/* A streamed client that hangs up stops the generation at its next
 * token: far fewer tokens are made than asked for, and /metrics counts
 * it. */
static void test_stream_cancelled_on_disconnect(void **state)
{
    (void)state;
    double before = 0, after = 0, tokens0 = 0, tokens1 = 0;
    assert_true(metric_read(&srv, "127.0.0.1",
                            "attnd_generations_abandoned_total", &before));
    assert_true(metric_read(&srv, "127.0.0.1",
                            "attnd_generated_token_seconds_count", &tokens0));
    struct stream s = {.stop_after = 1};
    char type[128];
    post_stream(&srv, "/v1/chat/completions",
                "{\"model\":\"wide\",\"messages\":[{\"role\":\"user\","
                "\"content\":\"Go on\"}],\"max_tokens\":4000,\"stream\":true,"
                "\"chat_template_kwargs\":{\"date_string\":\"1 Jan 2026\"}}",
                NULL, &s, type, sizeof type);
    free(s.data);
    after = before;
    for (int i = 0; i < 200 && after == before; i++) {
        pause_ms(25);
        assert_true(metric_read(&srv, "127.0.0.1",
                                "attnd_generations_abandoned_total", &after));
    }
    assert_true(after == before + 1);
    assert_true(metric_read(&srv, "127.0.0.1",
                            "attnd_generated_token_seconds_count", &tokens1));
    assert_true(tokens1 - tokens0 >= 1 && tokens1 - tokens0 < 4000);
}

/* Under --max-flops, a chat that leaves max_tokens out gets as many
 * tokens as the budget affords; one that asks for more than it affords
 * is refused, naming the budget. */
static void test_default_length_fits_the_budget(void **state)
{
    (void)state;
    struct server small;
    const char *const args[] = {"--model", "llama3=tests/models/llama3",
                                "--max-flops", "100000000", NULL};
    assert_true(server_start(&small, args));
    const char *const headers[] = {"Content-Type: application/json", NULL};
#define BUDGET_CHAT                                                            \
    "{\"model\":\"llama3\",\"messages\":[{\"role\":\"user\",\"content\":"      \
    "\"Go on\"}],\"temperature\":0,\"chat_template_kwargs\":{\"date_string\":" \
    "\"1 Jan 2026\"}%s}"
    char body[512];
    snprintf(body, sizeof body, BUDGET_CHAT, "");
    struct reply r;
    assert_true(http_call(&small, "POST", "/v1/chat/completions", body,
                          strlen(body), headers, &r));
    assert_int_equal(r.status, 200);
    cJSON *doc = cJSON_Parse(r.body);
    const int made = get(get(doc, "usage"), "completion_tokens")->valueint;
    assert_true(made >= 1 && made < 4096);
    cJSON_Delete(doc);
    reply_free(&r);
    snprintf(body, sizeof body, BUDGET_CHAT, ",\"max_tokens\":4000");
    assert_true(http_call(&small, "POST", "/v1/chat/completions", body,
                          strlen(body), headers, &r));
    assert_int_equal(r.status, 400);
    doc = cJSON_Parse(r.body);
    assert_string_equal(get(get(doc, "error"), "code")->valuestring,
                        "compute_budget");
    cJSON_Delete(doc);
    reply_free(&r);
    assert_int_equal(server_stop(&small, 10.0), 0);
}

/* A streamed client that stops reading holds nothing past a drain: the
 * writer waiting for it sees the server stop, and the server exits
 * cleanly within its drain. */
static void test_stalled_stream_ends_with_the_drain(void **state)
{
    (void)state;
    struct server d;
    const char *const args[] = {"--model", "wide=tests/models/llama_16x32",
                                "--drain-seconds", "1", NULL};
    assert_true(server_start(&d, args));
    const char body[] =
        "{\"model\":\"wide\",\"prompt\":\"The cat\",\"max_tokens\":4000,"
        "\"stream\":true,\"attention\":{\"return\":[\"mean_weights\"],"
        "\"layer\":0,\"stream_rows\":true}}";
    char request[1024];
    snprintf(request, sizeof request,
             "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    const int fd = raw_connect(&d, "127.0.0.1");
    assert_true(fd >= 0);
    // a tiny receive window, never read: the rows fill the stream's room
    assert_int_equal(write(fd, request, strlen(request)),
                     (ssize_t)strlen(request));
    // the stream has started (its status read), then nothing more is
    char head[16] = "";
    assert_int_equal(recv(fd, head, 12, MSG_WAITALL), 12);
    assert_true(!strncmp(head, "HTTP/1.1 200", 12));
    pause_ms(1500);
    // the drain (1 s) and the cancel's 2 s, then the stop: well within
    // 10 s however busy the machine, where a writer waiting on its client
    // would hold it for --timeout (30 s) and end in status 1
    assert_int_equal(server_stop(&d, 10.0), 0);
    close(fd);
}

/* The largest completion the limits allow: a prompt and max_tokens
 * that fill --max-tokens (4096) exactly; one more is refused, naming
 * max_tokens. */
static void test_largest_allowed(void **state)
{
    (void)state;
    enum { PROMPT = 96, ROOM = 4096 - PROMPT };
    char *body = malloc(1 << 14);
    size_t n = (size_t)sprintf(body,
                               "{\"model\":\"llama3\",\"temperature\":0,"
                               "\"max_tokens\":%d,\"prompt\":[",
                               ROOM);
    for (int i = 0; i < PROMPT; i++)
        n += (size_t)sprintf(body + n, "%s%d", i ? "," : "", 5 + i % 200);
    strcpy(body + n, "]}");
    cJSON *doc = post_ok("/v1/completions", body);
    const cJSON *usage = get(doc, "usage");
    assert_int_equal(get(usage, "prompt_tokens")->valueint, PROMPT);
    // the whole room, or an end of sequence before it
    const int made = get(usage, "completion_tokens")->valueint;
    const char *why =
        get(at(get(doc, "choices"), 0), "finish_reason")->valuestring;
    assert_true(made == ROOM || (made < ROOM && !strcmp(why, "stop")));
    cJSON_Delete(doc);
    free(body);
    // "x" is two tokens with the BOS: 4094 are left, not 4096
    expect_error("/v1/completions",
                 "{\"model\":\"llama3\",\"prompt\":\"x\",\"max_tokens\":4096}",
                 400, "max_tokens", "at most");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_list),
        cmocka_unit_test(test_completion_greedy),
        cmocka_unit_test(test_logprobs_against_reference),
        cmocka_unit_test(test_echo_scores_the_prompt),
        cmocka_unit_test(test_stop_strings),
        cmocka_unit_test(test_stop_after_its_own_start),
        cmocka_unit_test(test_echo_keeps_nul),
        cmocka_unit_test(test_special_tokens_skipped),
        cmocka_unit_test(test_unrenderable_template_is_named),
        cmocka_unit_test(test_tokenize_messages_renders_the_goldens),
        cmocka_unit_test(test_chat_whole_and_streamed),
        cmocka_unit_test(test_chat_logprobs),
        cmocka_unit_test(test_errors_in_openai_shape),
        cmocka_unit_test(test_detokenize_round_trip),
        cmocka_unit_test(test_stream_cancelled_on_disconnect),
        cmocka_unit_test(test_default_length_fits_the_budget),
        cmocka_unit_test(test_largest_allowed),
        cmocka_unit_test(test_stalled_stream_ends_with_the_drain),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
