/*
 * chat_template.c - a checkpoint's chat templates (chat_template.h).
 */
#include "chat_template.h"
#include "tokenizer_json.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A template is a program of a few kilobytes; Hub templates with tool
 * prompts reach tens. */
#define CHAT_TEMPLATE_MAX_BYTES ((size_t)1 << 20)

/* transformers' special_tokens_map, in its order */
static const char *const special_names[] = {
    "bos_token", "eos_token", "unk_token", "sep_token",
    "pad_token", "cls_token", "mask_token"};

/* Does a {% for ... %} tag of src loop over something's content? */
static bool loops_over_content(const char *src, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (src[i] != '{' || src[i + 1] != '%')
            continue;
        size_t at = i + 2;
        while (at < len && (src[at] == '-' || src[at] == '+' ||
                            src[at] == ' ' || src[at] == '\n'))
            at++;
        if (at + 4 > len || memcmp(src + at, "for ", 4))
            continue;
        size_t end = at;
        while (end + 1 < len && !(src[end] == '%' && src[end + 1] == '}'))
            end++;
        for (size_t k = at; k + 7 <= end; k++)
            if (!memcmp(src + k, "content", 7))
                return true;
    }
    return false;
}

static void compile(struct chat_template *t, const char *name, const char *src,
                    size_t len)
{
    t->content_parts = loops_over_content(src, len);
    snprintf(t->name, sizeof t->name, "%s", name);
    struct jinja_error err = {0};
    jinja_status st;
    t->compiled = jinja_compile(src, len, &st, &err);
    if (!t->compiled)
        snprintf(t->error, sizeof t->error, "%s",
                 st == JINJA_E_NOMEM ? "out of memory" : err.message);
}

/* A special token as the config writes it: a string, or an added
 * token's {"content": ...}; NULL when it is not set. */
static const char *special_text(const cJSON *config, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, name);
    if (cJSON_IsObject(v))
        v = cJSON_GetObjectItemCaseSensitive(v, "content");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The special tokens map of config, each member only when set. */
static cJSON *specials_of(const cJSON *config)
{
    cJSON *map = cJSON_CreateObject();
    bool ok = map != NULL;
    for (size_t i = 0; ok && i < sizeof special_names / sizeof *special_names;
         i++) {
        const char *text = special_text(config, special_names[i]);
        if (text)
            ok = cJSON_AddStringToObject(map, special_names[i], text) != NULL;
    }
    const cJSON *more =
        cJSON_GetObjectItemCaseSensitive(config, "additional_special_tokens");
    if (ok && cJSON_IsArray(more) && more->child) {
        cJSON *list = cJSON_CreateArray();
        const cJSON *t;
        ok = list &&
             cJSON_AddItemToObject(map, "additional_special_tokens", list);
        cJSON_ArrayForEach(t, more)
        {
            const char *text = special_text(t, "content");
            if (cJSON_IsString(t))
                text = t->valuestring;
            if (ok && text)
                ok = cJSON_AddItemToArray(list, cJSON_CreateString(text));
        }
    }
    if (!ok) {
        cJSON_Delete(map);
        return NULL;
    }
    return map;
}

static bool read_list(struct chat_templates *out, const cJSON *list,
                      const struct model_files *files)
{
    const cJSON *item;
    cJSON_ArrayForEach(item, list)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(item, "template");
        if (!cJSON_IsString(name) || !cJSON_IsString(text) ||
            strlen(name->valuestring) > CHAT_NAME_MAX)
            return model_files_fail(files, "tokenizer_config.json",
                                    "chat_template[%zu] is not {\"name\": a "
                                    "name of at most %d bytes, \"template\": "
                                    "a string}",
                                    out->count, CHAT_NAME_MAX);
        if (out->count == CHAT_MAX_TEMPLATES)
            return model_files_fail(files, "tokenizer_config.json",
                                    "chat_template lists more than %d "
                                    "templates",
                                    CHAT_MAX_TEMPLATES);
        compile(&out->t[out->count++], name->valuestring, text->valuestring,
                strlen(text->valuestring));
    }
    return true;
}

bool chat_templates_open(struct chat_templates *out,
                         const struct model_files *files)
{
    memset(out, 0, sizeof *out);
    char *config_text = NULL, *jinja = NULL;
    size_t config_len = 0, jinja_len = 0;
    if (!model_files_read(files, "tokenizer_config.json",
                          TOKENIZER_CONFIG_MAX_BYTES, true, &config_text,
                          &config_len) ||
        !model_files_read(files, "chat_template.jinja", CHAT_TEMPLATE_MAX_BYTES,
                          true, &jinja, &jinja_len)) {
        free(config_text);
        return false;
    }
    cJSON *config =
        config_text ? cJSON_ParseWithLength(config_text, config_len) : NULL;
    free(config_text);
    out->specials = specials_of(config);
    bool ok = out->specials != NULL ||
              model_files_fail(files, "tokenizer_config.json", "out of memory");
    const cJSON *in_config =
        cJSON_GetObjectItemCaseSensitive(config, "chat_template");
    // the file beside the tokenizer is the newer place, and wins
    if (jinja) {
        out->source = "chat_template.jinja";
        compile(&out->t[out->count++], "default", jinja, jinja_len);
    } else if (cJSON_IsString(in_config)) {
        out->source = "tokenizer_config.json";
        compile(&out->t[out->count++], "default", in_config->valuestring,
                strlen(in_config->valuestring));
    } else if (cJSON_IsArray(in_config)) {
        out->source = "tokenizer_config.json";
        ok = read_list(out, in_config, files);
    } else if (in_config && !cJSON_IsNull(in_config)) {
        ok = model_files_fail(files, "tokenizer_config.json",
                              "chat_template is not a string or a list of "
                              "named templates");
    }
    free(jinja);
    cJSON_Delete(config);
    if (!ok)
        chat_templates_free(out);
    return ok;
}

bool chat_templates_add(struct chat_templates *out, const char *name,
                        const char *src, size_t len)
{
    if (out->count == CHAT_MAX_TEMPLATES || strlen(name) > CHAT_NAME_MAX)
        return false;
    compile(&out->t[out->count++], name, src, len);
    return true;
}

void chat_templates_free(struct chat_templates *c)
{
    for (size_t i = 0; i < c->count; i++)
        jinja_free(c->t[i].compiled);
    cJSON_Delete(c->specials);
    memset(c, 0, sizeof *c);
}

static const struct chat_template *named(const struct chat_templates *c,
                                         const char *name)
{
    for (size_t i = 0; i < c->count; i++)
        if (!strcmp(c->t[i].name, name))
            return &c->t[i];
    return NULL;
}

const struct chat_template *chat_template_pick(const struct chat_templates *c,
                                               bool tools)
{
    if (!c->count)
        return NULL;
    const struct chat_template *t = tools ? named(c, "tool_use") : NULL;
    if (!t)
        t = named(c, "default");
    return t ? t : &c->t[0];
}
