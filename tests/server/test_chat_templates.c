/*
 * test_chat_templates.c - real chat templates (tests/chat/templates/, the
 * files of Llama 3.x, Qwen 2.5 and 3, Mistral, Gemma 2 and 3, Phi-3.5,
 * SmolLM3 and the DeepSeek-R1 distills) rendered by server/chat/'s
 * interpreter over every conversation of tests/chat/conversations.json
 * give byte for byte what Jinja2 gives as transformers renders them:
 * tests/chat/renders.json, written by tests/chat/generate.py. Where the
 * template calls raise_exception(), the same message (JINJA_E_RAISED);
 * where Jinja2 refuses an operation (an attribute of an undefined value,
 * a string added to a list), a runtime error (JINJA_E_RUNTIME).
 *
 * One test per template; each runs every case and names each one that
 * differs, with the first differing byte and both sides around it, before
 * failing. The variables of a render are generate.py's: messages, tools
 * (the case's, else null), documents (null), add_generation_prompt, the
 * template's special tokens, then the case's kwargs over them; the clock
 * is renders.json's "now", in UTC.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "files.h"
#include "chat/jinja.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHAT_DIR "tests/chat/"

static cJSON *renders;       /* renders.json */
static cJSON *conversations; /* conversations.json: the cases, in order */

static const cJSON *member(const cJSON *obj, const char *key, const char *in)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!item)
        fail_msg("%s lacks \"%s\"", in, key);
    return item;
}

/* Add key to obj, or replace its value: a case's kwargs overlay the
 * special tokens, as in transformers' {**special_tokens_map, **kwargs}. */
static void put(cJSON *obj, const char *key, cJSON *value)
{
    assert_non_null(value);
    if (cJSON_GetObjectItemCaseSensitive(obj, key))
        assert_true(cJSON_ReplaceItemInObjectCaseSensitive(obj, key, value));
    else
        assert_true(cJSON_AddItemToObject(obj, key, value));
}

/* The variables generate.py renders case with. The caller deletes it. */
static cJSON *case_context(const cJSON *special_tokens, const cJSON *c)
{
    cJSON *ctx = cJSON_CreateObject();
    assert_non_null(ctx);
    const cJSON *tok;
    cJSON_ArrayForEach(tok, special_tokens)
        put(ctx, tok->string, cJSON_Duplicate(tok, true));
    const cJSON *kwargs = cJSON_GetObjectItemCaseSensitive(c, "kwargs");
    const cJSON *kw;
    cJSON_ArrayForEach(kw, kwargs)
        put(ctx, kw->string, cJSON_Duplicate(kw, true));
    put(ctx, "messages",
        cJSON_Duplicate(member(c, "messages", "a case"), true));
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(c, "tools");
    put(ctx, "tools",
        tools ? cJSON_Duplicate(tools, true) : cJSON_CreateNull());
    put(ctx, "documents", cJSON_CreateNull());
    const cJSON *agp = member(c, "add_generation_prompt", "a case");
    assert_true(cJSON_IsBool(agp));
    put(ctx, "add_generation_prompt", cJSON_CreateBool(cJSON_IsTrue(agp)));
    return ctx;
}

/* Up to n bytes of s from at, as a C string literal's body would show
 * them, into out (NUL-terminated). */
static void shown(const char *s, size_t len, size_t at, size_t n, char *out,
                  size_t out_len)
{
    size_t o = 0;
    for (size_t i = at; i < len && i < at + n && o + 5 < out_len; i++) {
        const unsigned char ch = (unsigned char)s[i];
        if (ch == '\n')
            o += (size_t)snprintf(out + o, out_len - o, "\\n");
        else if (ch == '\t')
            o += (size_t)snprintf(out + o, out_len - o, "\\t");
        else if (ch == '"' || ch == '\\')
            o += (size_t)snprintf(out + o, out_len - o, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            o += (size_t)snprintf(out + o, out_len - o, "\\x%02x", ch);
        else
            out[o++] = (char)ch;
    }
    out[o] = '\0';
}

/* Say where got first differs from want: the byte, its line and column in
 * want, and both sides from a little before it. */
static void report_text(const char *tname, const char *cname, const char *want,
                        size_t want_len, const char *got, size_t got_len)
{
    size_t at = 0;
    while (at < want_len && at < got_len && want[at] == got[at])
        at++;
    unsigned line = 1, col = 1;
    for (size_t i = 0; i < at; i++) {
        if (want[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    const size_t from = at > 24 ? at - 24 : 0;
    char w[512], g[512];
    shown(want, want_len, from, 72, w, sizeof w);
    shown(got, got_len, from, 72, g, sizeof g);
    print_error("%s / %s: the text differs at byte %zu (line %u, column %u; "
                "%zu bytes wanted, %zu rendered)\n"
                "    wanted   \"%s\"\n    rendered \"%s\"\n",
                tname, cname, at, line, col, want_len, got_len, w, g);
}

static const char *status_name(jinja_status s)
{
    switch (s) {
    case JINJA_OK: return "a text";
    case JINJA_E_SYNTAX: return "JINJA_E_SYNTAX";
    case JINJA_E_RAISED: return "JINJA_E_RAISED";
    case JINJA_E_RUNTIME: return "JINJA_E_RUNTIME";
    case JINJA_E_LIMIT: return "JINJA_E_LIMIT";
    case JINJA_E_NOMEM: return "JINJA_E_NOMEM";
    }
    return "an unknown status";
}

/* Render case c with t; true when the outcome is want's. */
static bool run_case(const char *tname, const struct jinja_template *t,
                     const cJSON *special_tokens, const cJSON *c,
                     const cJSON *want, time_t now)
{
    const char *cname = member(c, "name", "a case")->valuestring;
    cJSON *ctx = case_context(special_tokens, c);
    char *out = NULL;
    size_t out_len = 0;
    struct jinja_error err = {0};
    const jinja_status s =
        jinja_render(t, ctx, NULL, now, &out, &out_len, &err);
    cJSON_Delete(ctx);

    const cJSON *text = cJSON_GetObjectItemCaseSensitive(want, "text");
    const cJSON *raises = cJSON_GetObjectItemCaseSensitive(want, "raises");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(want, "error");
    bool ok = false;
    if (cJSON_IsString(text)) {
        const size_t want_len = strlen(text->valuestring);
        ok = s == JINJA_OK && out_len == want_len &&
             memcmp(out, text->valuestring, want_len) == 0;
        if (s != JINJA_OK)
            print_error("%s / %s: wanted a text, got %s: %s (line %u, "
                        "column %u)\n",
                        tname, cname, status_name(s), err.message, err.line,
                        err.column);
        else if (!ok)
            report_text(tname, cname, text->valuestring, want_len, out,
                        out_len);
    } else if (cJSON_IsString(raises)) {
        ok = s == JINJA_E_RAISED && !strcmp(err.message, raises->valuestring);
        if (!ok)
            print_error("%s / %s: wanted raise_exception(\"%s\"), got %s: %s\n",
                        tname, cname, raises->valuestring, status_name(s),
                        s == JINJA_OK ? "(rendered)" : err.message);
    } else if (cJSON_IsString(error)) {
        ok = s == JINJA_E_RUNTIME;
        if (!ok)
            print_error("%s / %s: wanted JINJA_E_RUNTIME (Jinja2: %s), got "
                        "%s: %s\n",
                        tname, cname, error->valuestring, status_name(s),
                        s == JINJA_OK ? "(rendered)" : err.message);
    } else {
        fail_msg("renders.json: %s / %s has no text, raises or error", tname,
                 cname);
    }
    free(out);
    return ok;
}

/* Every case of one template: state is its name in renders.json. */
static void test_template(void **state)
{
    const char *tname = *state;
    const cJSON *entry = member(member(renders, "templates", "renders.json"),
                                tname, "renders.json's templates");
    const cJSON *cases = member(entry, "cases", tname);
    const cJSON *special_tokens = member(entry, "special_tokens", tname);
    const time_t now =
        (time_t)member(renders, "now", "renders.json")->valuedouble;

    char path[512];
    const int k = snprintf(path, sizeof path, CHAT_DIR "%s",
                           member(entry, "file", tname)->valuestring);
    assert_true(k > 0 && (size_t)k < sizeof path);
    size_t len;
    char *src = test_read_file(path, &len);
    jinja_status status = JINJA_OK;
    struct jinja_error err = {0};
    struct jinja_template *t = jinja_compile(src, len, &status, &err);
    free(src);
    if (!t)
        fail_msg("%s: does not compile (%s): %s (line %u, column %u)", path,
                 status_name(status), err.message, err.line, err.column);

    size_t n = 0, differ = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, conversations)
    {
        const char *cname = member(c, "name", "a case")->valuestring;
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(cases, cname);
        if (!want) {
            print_error("%s / %s: not in renders.json (run generate.py)\n",
                        tname, cname);
            differ++;
            continue;
        }
        n++;
        differ += !run_case(tname, t, special_tokens, c, want, now);
    }
    jinja_free(t);
    if (n != (size_t)cJSON_GetArraySize(cases))
        fail_msg("%s: renders.json has %d cases, conversations.json %zu", tname,
                 cJSON_GetArraySize(cases), n);
    if (differ)
        fail_msg("%s: %zu of %zu cases differ from Jinja2's", tname, differ, n);
}

int main(void)
{
    // strftime_now() formats local time, as datetime.now() does: the
    // goldens were rendered in UTC
    setenv("TZ", "UTC", 1);
    tzset();
    renders = test_read_json(CHAT_DIR "renders.json");
    conversations = test_read_json(CHAT_DIR "conversations.json");
    const cJSON *templates =
        cJSON_GetObjectItemCaseSensitive(renders, "templates");
    const int n = cJSON_GetArraySize(templates);
    if (n <= 0 || !cJSON_IsArray(conversations)) {
        fprintf(stderr,
                "test_chat_templates: no templates or cases in " CHAT_DIR "\n");
        return 1;
    }
    struct CMUnitTest *tests = calloc((size_t)n, sizeof *tests);
    if (!tests)
        return 1;
    int i = 0;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, templates) tests[i++] =
        (struct CMUnitTest){.name = entry->string,
                            .test_func = test_template,
                            .initial_state = entry->string};
    const int failed =
        _cmocka_run_group_tests("chat_templates", tests, (size_t)n, NULL, NULL);
    free(tests);
    cJSON_Delete(conversations);
    cJSON_Delete(renders);
    return failed;
}
