/*
 * chat_template.h - a checkpoint's chat templates: the Jinja programs
 * that turn a conversation into the model's prompt, from
 * chat_template.jinja beside the tokenizer or else tokenizer_config.json's
 * chat_template (one string, or a list of named ones), compiled once at
 * load, with the special tokens' texts a template reads (bos_token,
 * eos_token, ...).
 *
 * A template the interpreter cannot compile does not fail the load: the
 * model still serves everything else, and the reason is kept for the
 * load log, GET /models, and the 400 a chat request on it gets.
 */
#ifndef ATTND_CHAT_TEMPLATE_H
#define ATTND_CHAT_TEMPLATE_H

#include "jinja.h"
#include "model_files.h"

#include <stdbool.h>
#include <stddef.h>

/* The most named templates a config may list, and a name's bytes. */
#define CHAT_MAX_TEMPLATES 8
#define CHAT_NAME_MAX 63

struct chat_template {
    char name[CHAT_NAME_MAX + 1];    /* "default" for a lone one */
    struct jinja_template *compiled; /* NULL: error says why */
    char error[400];                 /* "" when it compiled */
    /* the template loops over a message's content, so it reads a list
     * of parts as a list; one that does not gets them joined into a
     * string (as vLLM decides, by the template's own text) */
    bool content_parts;
};

struct chat_templates {
    const char *source; /* "chat_template.jinja", "tokenizer_config.json"
                           or NULL: the model has none */
    struct chat_template t[CHAT_MAX_TEMPLATES];
    size_t count;
    /* owned: transformers' special_tokens_map, as a template reads it:
     * bos_token, eos_token, unk_token, sep_token, pad_token, cls_token,
     * mask_token (each a string) and additional_special_tokens (a list),
     * each only when tokenizer_config.json sets it */
    cJSON *specials;
};

/*
 * Read dir's chat templates into *out, compiling each. Fails (false, one
 * line in files' err) only for a file that cannot be read or a config
 * whose chat_template is not a string or a list of {name, template}; a
 * template that does not compile is kept with its error. Release with
 * chat_templates_free().
 */
bool chat_templates_open(struct chat_templates *out,
                         const struct model_files *files);
void chat_templates_free(struct chat_templates *c);

/* Add a template read elsewhere than a folder's files (a GGUF file's
 * metadata): named name, from src[0..len), compiled, kept with its error
 * when it does not compile. False when out holds CHAT_MAX_TEMPLATES
 * already or name is longer than CHAT_NAME_MAX. */
bool chat_templates_add(struct chat_templates *out, const char *name,
                        const char *src, size_t len);

/* The template a request renders: "tool_use" when tools are given and
 * the model names one, else "default" (or its lone one); NULL when the
 * model has none. */
const struct chat_template *chat_template_pick(const struct chat_templates *c,
                                               bool tools);

#endif
