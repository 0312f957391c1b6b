/*
 * test_controls.c - NUL and every other control character (0x00-0x1F,
 * 0x7F) reach the tokenizer as sent, through the real binary: alone and
 * inside words, on every kind of tokenizer attnd has (BERT's WordPiece,
 * byte-level BPE of GPT-2, Llama 3 and Qwen2, the SentencePiece-style
 * BPE with byte fallback of Mistral and Phi-3, and GGUF's SentencePiece
 * of a `llama` vocabulary), held to the tokenizers library's ids
 * (tests/tokenizers/controls.json, written by controls.mjs); the same
 * texts through /attention (a body and a GET's %00), /generate,
 * /patch and /v1/completions; a NUL anywhere else refused with a 422
 * naming its pointer; and every answer's JSON escaping each control
 * character it echoes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct server srv;

static int setup(void **state)
{
    (void)state;
    const char *const args[] = {
        "--model", "bert=tests/models/f32",
        "--model", "gpt2=tests/models/gpt2",
        "--model", "llama3=tests/models/llama3",
        "--model", "qwen2=tests/models/qwen2",
        "--model", "mistral=tests/models/mistral",
        "--model", "phi3=tests/models/phi3",
        "--model", "phi3_gguf=tests/models/gguf/more/phi3-F32.gguf",
        NULL};
    return server_start(&srv, args) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return server_stop(&srv, 10) == 0 ? 0 : -1;
}

/* bytes[0..len) as a JSON string into out, every control character and
 * DEL as a \u escape. */
static void json_text(char *out, size_t cap, const char *bytes, size_t len)
{
    size_t n = 0;
    out[n++] = '"';
    for (size_t i = 0; i < len && n + 8 < cap; i++) {
        const unsigned char c = (unsigned char)bytes[i];
        if (c < 0x20 || c == 0x7f)
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
        else if (c == '"' || c == '\\')
            n += (size_t)snprintf(out + n, cap - n, "\\%c", c);
        else
            out[n++] = (char)c;
    }
    snprintf(out + n, cap - n, "\"");
}

/* hex into bytes; their count. */
static size_t unhex(const char *hex, char *bytes, size_t cap)
{
    size_t n = 0;
    for (; hex[0] && hex[1] && n < cap; hex += 2) {
        unsigned b;
        sscanf(hex, "%2x", &b);
        bytes[n++] = (char)b;
    }
    return n;
}

/* A JSON answer holds no control character raw (JSON forbids them in
 * strings; outside them only the whitespace ones may stand). */
static void escaped(const struct reply *r)
{
    for (size_t i = 0; i < r->len; i++) {
        const unsigned char c = (unsigned char)r->body[i];
        if (c < 0x20 && c != '\n')
            fail_msg("a raw control character 0x%02x at byte %zu: %s", c, i,
                     r->body);
    }
}

static cJSON *post(const char *path, const char *body, long status)
{
    struct reply r;
    assert_true(post_json(&srv, path, body, &r));
    if (r.status != status)
        fail_msg("%s %s: %ld, expected %ld: %s", path, body, r.status, status,
                 r.body);
    escaped(&r);
    cJSON *doc = cJSON_ParseWithLength(r.body, r.len);
    if (!doc)
        fail_msg("%s: not JSON: %s", path, r.body);
    reply_free(&r);
    return doc;
}

static void ids_equal(const cJSON *got, const cJSON *want, const char *what)
{
    const int n = cJSON_GetArraySize(want);
    bool same = cJSON_GetArraySize(got) == n;
    for (int i = 0; same && i < n; i++)
        same = cJSON_GetArrayItem(got, i)->valuedouble ==
               cJSON_GetArrayItem(want, i)->valuedouble;
    if (!same) {
        char *g = cJSON_PrintUnformatted(got),
             *w = cJSON_PrintUnformatted(want);
        fail_msg("%s: ids %s, expected %s", what, g, w);
    }
}

static cJSON *goldens(void)
{
    size_t len;
    char *text = read_file("tests/tokenizers/controls.json", &len);
    assert_non_null(text);
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(doc);
    return doc;
}

/* The golden case of tokenizer name whose text is bytes[0..len). */
static const cJSON *golden_ids(const cJSON *doc, const char *name,
                               const char *bytes, size_t len)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "tokenizers"))
    {
        if (strcmp(cJSON_GetObjectItem(t, "name")->valuestring, name))
            continue;
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(t, "cases"))
        {
            char text[1024];
            const size_t n =
                unhex(cJSON_GetObjectItem(c, "utf8_hex")->valuestring, text,
                      sizeof text);
            if (n == len && !memcmp(text, bytes, len))
                return cJSON_GetObjectItem(c, "ids");
        }
    }
    fail_msg("no golden of %s for a text of %zu bytes", name, len);
    return NULL;
}

/* /tokenize of every golden text, on every model: the library's ids. The
 * GGUF file's SentencePiece is Phi-3's vocabulary (its converter's
 * tokenizer.model of tokenizer.json's), held to Phi-3's ids. */
static void test_tokenize_goldens(void **state)
{
    (void)state;
    cJSON *doc = goldens();
    static const char *const served[][2] = {
        {"bert", "bert"},     {"gpt2", "gpt2"},       {"llama3", "llama3"},
        {"qwen2", "qwen2"},   {"mistral", "mistral"}, {"phi3", "phi3"},
        {"phi3_gguf", "phi3"}};
    size_t checked = 0;
    for (size_t m = 0; m < sizeof served / sizeof *served; m++) {
        const cJSON *t, *c;
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "tokenizers"))
        {
            if (strcmp(cJSON_GetObjectItem(t, "name")->valuestring,
                       served[m][1]))
                continue;
            cJSON_ArrayForEach(c, cJSON_GetObjectItem(t, "cases"))
            {
                char text[1024], quoted[4096], body[4200];
                const size_t n =
                    unhex(cJSON_GetObjectItem(c, "utf8_hex")->valuestring, text,
                          sizeof text);
                json_text(quoted, sizeof quoted, text, n);
                snprintf(body, sizeof body,
                         "{\"model\":\"%s\",\"prompt\":%s,"
                         "\"add_special_tokens\":false,"
                         "\"return_token_strs\":true}",
                         served[m][0], quoted);
                cJSON *got = post("/tokenize", body, 200);
                char what[4300];
                snprintf(what, sizeof what, "%s %s", served[m][0], quoted);
                ids_equal(cJSON_GetObjectItem(got, "tokens"),
                          cJSON_GetObjectItem(c, "ids"), what);
                cJSON_Delete(got);
                checked++;
            }
        }
    }
    print_message("%zu texts held to the library's ids\n", checked);
    assert_true(checked >= 7 * 60);
    cJSON_Delete(doc);
}

/* The same texts through the other routes that read one. */
static void test_every_route(void **state)
{
    (void)state;
    cJSON *doc = goldens();
    // /attention on BERT: a body's text, the wordpieces /tokenize gives
    // (held to the library's ids above)
    cJSON *a = post("/attention",
                    "{\"model\":\"bert\",\"sentence\":\"w\\u0001w x\\u0000y\","
                    "\"add_special_tokens\":false,\"return\":[]}",
                    200);
    cJSON *t = post("/tokenize",
                    "{\"model\":\"bert\",\"prompt\":\"w\\u0001w x\\u0000y\","
                    "\"add_special_tokens\":false,\"return_token_strs\":true}",
                    200);
    assert_true(cJSON_Compare(cJSON_GetObjectItem(a, "tokens"),
                              cJSON_GetObjectItem(t, "token_strs"), true));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(a, "tokens")), 2);
    cJSON_Delete(t);
    cJSON_Delete(a);
    // a GET's %00
    struct reply r;
    assert_true(http_call(&srv, "GET",
                          "/attention?model=llama3&sentence=a%00b&"
                          "add_special_tokens=false&return=",
                          NULL, 0, NULL, &r));
    assert_int_equal(r.status, 200);
    escaped(&r);
    a = cJSON_ParseWithLength(r.body, r.len);
    assert_non_null(a);
    ids_equal(cJSON_GetObjectItem(a, "token_ids"),
              golden_ids(doc, "llama3", "a\0b", 3), "GET /attention llama3");
    cJSON_Delete(a);
    reply_free(&r);
    // /generate's prompt: every byte, so three tokens
    assert_true(post_json(&srv, "/generate",
                          "{\"model\":\"llama3\",\"prompt\":\"a\\u0000b\","
                          "\"add_special_tokens\":false,\"max_new_tokens\":1}",
                          &r));
    assert_int_equal(r.status, 200);
    if (!strstr(r.body, "\"prompt_tokens\":3,"))
        fail_msg("/generate: %s", r.body);
    reply_free(&r);
    // /v1/completions: the prompt's tokens, the BOS first
    a = post("/v1/completions",
             "{\"model\":\"llama3\",\"prompt\":\"\\u0000start mid\\u0000dle "
             "end\\u0000\",\"max_tokens\":1}",
             200);
    const cJSON *want = golden_ids(doc, "llama3", "\0start mid\0dle end\0", 19);
    assert_int_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(a, "usage"), "prompt_tokens")
            ->valueint,
        cJSON_GetArraySize(want) + 1);
    cJSON_Delete(a);
    // /patch: two texts of three tokens, told apart by a control character
    a = post("/patch",
             "{\"model\":\"llama3\",\"clean\":\"a\\u0000b\",\"corrupted\":"
             "\"a\\u0001b\",\"metric\":{\"kind\":\"logprob\",\"target\":"
             "\"\\u0000\"},\"over\":\"heads\"}",
             200);
    cJSON_Delete(a);
    cJSON_Delete(doc);
}

/* A NUL where no tokenizer reads it is a 422 naming the field, the key,
 * or the parameter; a chat's messages go through a template, which
 * takes none. */
static void test_refused_elsewhere(void **state)
{
    (void)state;
    static const struct {
        const char *path, *body, *pointer;
    } cases[] = {
        {"/tokenize", "{\"model\":\"llama3\\u0000\",\"prompt\":\"a\"}",
         "/model"},
        {"/tokenize",
         "{\"model\":\"llama3\",\"messages\":[{\"role\":\"user\","
         "\"content\":\"a\\u0000b\"}]}",
         "/messages/0/content"},
        {"/generate",
         "{\"model\":\"llama3\",\"prompt\":\"a\",\"stop\":\"\\u0000\"}",
         "/stop"},
        {"/attention", "{\"sentence\":\"a\",\"mask\":\"causal\\u0000\"}",
         "/mask"},
        {"/attention", "{\"sentence\":\"a\",\"x\\u0000\":1}", "/x"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct reply r;
        assert_true(post_json(&srv, cases[i].path, cases[i].body, &r));
        char pointer[160];
        snprintf(pointer, sizeof pointer, "\"%s\"", cases[i].pointer);
        if (r.status != 422 || !strstr(r.body, pointer) ||
            !strstr(r.body, "NUL character"))
            fail_msg("%s %s: %ld %s", cases[i].path, cases[i].body, r.status,
                     r.body);
        reply_free(&r);
    }
    // OpenAI's error shape: a 400 naming the parameter
    struct reply r;
    assert_true(post_json(&srv, "/v1/chat/completions",
                          "{\"model\":\"llama3\",\"messages\":[{\"role\":"
                          "\"user\",\"content\":\"a\\u0000b\"}]}",
                          &r));
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "\"param\":\"messages[0].content\""));
    assert_non_null(strstr(r.body, "NUL character"));
    reply_free(&r);
    assert_true(http_call(&srv, "GET", "/attention?sentence=a&heads=2%001",
                          NULL, 0, NULL, &r));
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "\"/heads\""));
    assert_non_null(strstr(r.body, "NUL character (%00)"));
    reply_free(&r);
}

/* What an answer echoes of a text escapes each control character: the
 * token texts of /tokenize and the text /detokenize gives back. */
static void test_echoes_escape(void **state)
{
    (void)state;
    char controls[40], quoted[512], body[700];
    size_t n = 0;
    for (int c = 1; c < 0x20; c++)
        controls[n++] = (char)c;
    controls[n++] = 0x7f;
    json_text(quoted, sizeof quoted, controls, n);
    snprintf(body, sizeof body,
             "{\"model\":\"gpt2\",\"prompt\":%s,\"add_special_tokens\":false,"
             "\"return_token_strs\":true}",
             quoted);
    cJSON *t = post("/tokenize", body, 200); /* no raw control: escaped() */
    const cJSON *strs = cJSON_GetObjectItem(t, "token_strs");
    char joined[64] = "";
    const cJSON *s;
    cJSON_ArrayForEach(s, strs)
        strncat(joined, s->valuestring, sizeof joined - strlen(joined) - 1);
    assert_int_equal(strlen(joined), n);
    assert_memory_equal(joined, controls, n);
    // the ids back to the text
    char *ids = cJSON_PrintUnformatted(cJSON_GetObjectItem(t, "tokens"));
    snprintf(body, sizeof body, "{\"model\":\"gpt2\",\"tokens\":%s}", ids);
    free(ids);
    cJSON *d = post("/detokenize", body, 200);
    const char *text = cJSON_GetObjectItem(d, "prompt")->valuestring;
    assert_int_equal(strlen(text), n);
    assert_memory_equal(text, controls, n);
    cJSON_Delete(d);
    cJSON_Delete(t);
    // NUL's own token reads <0x00> (docs/tokenizers.md); decoded, U+FFFD
    t = post(
        "/tokenize",
        "{\"model\":\"gpt2\",\"prompt\":\"a\\u0000\",\"add_special_tokens\":"
        "false,\"return_token_strs\":true}",
        200);
    assert_string_equal(
        cJSON_GetArrayItem(cJSON_GetObjectItem(t, "token_strs"), 1)
            ->valuestring,
        "<0x00>");
    ids = cJSON_PrintUnformatted(cJSON_GetObjectItem(t, "tokens"));
    snprintf(body, sizeof body, "{\"model\":\"gpt2\",\"tokens\":%s}", ids);
    free(ids);
    d = post("/detokenize", body, 200);
    assert_string_equal(cJSON_GetObjectItem(d, "prompt")->valuestring,
                        "a\xEF\xBF\xBD");
    cJSON_Delete(d);
    cJSON_Delete(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenize_goldens),
        cmocka_unit_test(test_every_route),
        cmocka_unit_test(test_refused_elsewhere),
        cmocka_unit_test(test_echoes_escape),
    };
    return cmocka_run_group_tests_name("controls", tests, setup, teardown);
}
