/*
 * chat_prompt.h - a conversation into a model's prompt: the messages of
 * an OpenAI-style chat request, checked, rendered through the model's
 * chat template as transformers renders it (apply_chat_template), then
 * tokenized as transformers tokenizes a rendered chat: without the
 * tokens the tokenizer would add, so that a BOS the template writes is
 * not doubled.
 */
#ifndef ATTND_CHAT_PROMPT_H
#define ATTND_CHAT_PROMPT_H

#include "model.h"
#include "problem.h"

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#define CHAT_MAX_MESSAGES 4096
#define CHAT_MAX_TOOLS 128
#define CHAT_MAX_KWARGS 256 /* chat_template_kwargs' variables */

/* A render's text, and the bytes its values may hold besides, at most:
 * what a caller reserves before chat_prompt_render(). */
#define CHAT_RENDER_OUTPUT ((size_t)2 << 20)
#define CHAT_RENDER_VALUES ((size_t)8 << 20)
#define CHAT_RENDER_BYTES (CHAT_RENDER_OUTPUT + CHAT_RENDER_VALUES)

/* The fields of a request that shape its render. */
struct chat_fields {
    const cJSON *messages;       /* an array */
    const cJSON *tools;          /* NULL, or an array */
    const cJSON *kwargs;         /* chat_template_kwargs: NULL or an
                                    object */
    bool add_generation_prompt;  /* default true */
    bool continue_final_message; /* default false */
};

/*
 * Read the chat fields of root ("messages", "tools",
 * "chat_template_kwargs", "add_generation_prompt",
 * "continue_final_message") into *out, checking each: roles, contents
 * (a string, or text parts), tool calls. An assistant message's tool
 * call arguments, a JSON string in OpenAI's shape, are replaced in root
 * by the object they hold, as templates read them (and vLLM passes
 * them). Fails with pb naming the
 * field (a JSON pointer such as "/messages/2/content").
 */
bool chat_fields_read(cJSON *root, struct chat_fields *out, struct problem *pb);

/*
 * Render the conversation with m's template at time now (for
 * strftime_now) into *text (malloc'd, *len bytes; the caller frees it).
 * A model without a template, or whose template does not compile, a
 * template that raises (its message) or goes past a limit: 400s naming
 * why. It takes at most CHAT_RENDER_BYTES, which the caller reserves.
 */
bool chat_prompt_render(const struct model *m, const struct chat_fields *f,
                        time_t now, char **text, size_t *len,
                        struct problem *pb);

#endif
