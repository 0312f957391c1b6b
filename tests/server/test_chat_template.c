/*
 * test_chat_template.c - a checkpoint's chat templates as the loader
 * reads them (server/model/chat_template.h): tokenizer_config.json's
 * chat_template as one string or a list of named ones, a
 * chat_template.jinja beside it winning over both, the one a request
 * renders (tool_use with tools), a template outside the interpreter's
 * subset kept with its reason, the special tokens map as transformers
 * passes it, and what stops a load.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "model/chat_template.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];
static char err[512];

static int make_dir(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/attnd-chat-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static void put(const char *file, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (!text) {
        unlink(path);
        return;
    }
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static int remove_dir(void **state)
{
    (void)state;
    put("tokenizer_config.json", NULL);
    put("chat_template.jinja", NULL);
    return rmdir(dir);
}

static bool open_here(struct chat_templates *c)
{
    const struct model_files files = {
        .name = "m", .dir = dir, .err = err, .err_len = sizeof err};
    err[0] = 0;
    return chat_templates_open(c, &files);
}

/* The text t renders for no messages, with the special tokens map. */
static char *render(const struct chat_template *t,
                    const struct chat_templates *c)
{
    cJSON *ctx = cJSON_Duplicate(c->specials, true);
    cJSON_AddItemToObject(ctx, "messages", cJSON_CreateArray());
    char *out = NULL;
    size_t len = 0;
    struct jinja_error e;
    assert_int_equal(jinja_render(t->compiled, ctx, NULL, 0, &out, &len, &e),
                     JINJA_OK);
    cJSON_Delete(ctx);
    return out;
}

static void test_one_string(void **state)
{
    (void)state;
    put("chat_template.jinja", NULL);
    put("tokenizer_config.json",
        "{\"bos_token\": {\"content\": \"<s>\", \"special\": true},"
        " \"eos_token\": \"</s>\", \"pad_token\": null,"
        " \"additional_special_tokens\": [\"<a>\", {\"content\": \"<b>\"}],"
        " \"chat_template\": \"{{ bos_token }}|{{ eos_token }}|{{ "
        "additional_special_tokens | join(',') }}|{{ pad_token is defined "
        "}}\"}");
    struct chat_templates c;
    assert_true(open_here(&c));
    assert_string_equal(c.source, "tokenizer_config.json");
    assert_int_equal(c.count, 1);
    const struct chat_template *t = chat_template_pick(&c, true);
    assert_string_equal(t->name, "default");
    char *text = render(t, &c);
    // a null pad_token is not set, so not defined, as transformers leaves
    // it out of its special_tokens_map
    assert_string_equal(text, "<s>|</s>|<a>,<b>|False");
    free(text);
    chat_templates_free(&c);
}

static void test_named_and_tool_use(void **state)
{
    (void)state;
    put("tokenizer_config.json",
        "{\"chat_template\": [{\"name\": \"default\", \"template\": \"D\"},"
        " {\"name\": \"tool_use\", \"template\": \"T\"},"
        " {\"name\": \"rag\", \"template\": \"{% include 'x' %}\"}]}");
    struct chat_templates c;
    assert_true(open_here(&c));
    assert_int_equal(c.count, 3);
    char *d = render(chat_template_pick(&c, false), &c);
    char *t = render(chat_template_pick(&c, true), &c);
    assert_string_equal(d, "D");
    assert_string_equal(t, "T");
    free(d);
    free(t);
    // outside the subset: kept, with its reason naming the construct
    assert_null(c.t[2].compiled);
    assert_non_null(strstr(c.t[2].error, "include"));
    chat_templates_free(&c);
}

/* chat_template.jinja beside the tokenizer wins over the config's; a
 * template that loops over a message's content reads parts as a list. */
static void test_file_wins(void **state)
{
    (void)state;
    put("tokenizer_config.json", "{\"chat_template\": \"config\"}");
    put("chat_template.jinja",
        "{%- for m in messages %}{% for part in m['content'] %}{{ part.text "
        "}}{% endfor %}{% endfor -%}\n");
    struct chat_templates c;
    assert_true(open_here(&c));
    assert_string_equal(c.source, "chat_template.jinja");
    assert_true(c.t[0].content_parts);
    chat_templates_free(&c);
    put("chat_template.jinja", NULL);
    assert_true(open_here(&c));
    assert_false(c.t[0].content_parts);
    chat_templates_free(&c);
}

static void test_none_and_refusals(void **state)
{
    (void)state;
    put("chat_template.jinja", NULL);
    put("tokenizer_config.json", "{\"bos_token\": \"<s>\"}");
    struct chat_templates c;
    assert_true(open_here(&c));
    assert_int_equal(c.count, 0);
    assert_null(c.source);
    assert_null(chat_template_pick(&c, false));
    chat_templates_free(&c);
    put("tokenizer_config.json", "{\"chat_template\": 7}");
    assert_false(open_here(&c));
    assert_non_null(strstr(err, "tokenizer_config.json"));
    assert_non_null(strstr(err, "chat_template"));
    put("tokenizer_config.json",
        "{\"chat_template\": [{\"name\": \"default\"}]}");
    assert_false(open_here(&c));
    assert_non_null(strstr(err, "chat_template[0]"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_string),
        cmocka_unit_test(test_named_and_tool_use),
        cmocka_unit_test(test_file_wins),
        cmocka_unit_test(test_none_and_refusals),
    };
    return cmocka_run_group_tests_name("chat_template", tests, make_dir,
                                       remove_dir);
}
