/*
 * fuzz_jinja.c - libFuzzer target for the chat template interpreter
 * (server/chat/jinja.h): the input is a template's source, up to its
 * first NUL byte; what follows the NUL, when there is one, is the
 * render's context as JSON (else a conversation of three messages with
 * tools).
 *
 * Checks beyond the sanitizers: a compile refusal is JINJA_E_SYNTAX (or
 * NOMEM) with a one-line message, a syntax error's with its line; a
 * render stays within the small limits given here, its output of the
 * length it reports; a refusal carries a one-line message and no output;
 * a second render of the same template gives the same result (nothing
 * read that was not written); everything is freed (the sanitizers' leak
 * check).
 */
#include "chat/jinja.h"

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_jinja: %s%s%s\n", what, detail ? ": " : "",
            detail ? detail : "");
    abort();
}

static const char default_context[] =
    "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", "
    "\"add_generation_prompt\": true, \"messages\": ["
    "{\"role\": \"system\", \"content\": \"Be brief.\"},"
    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": "
    "\"Hi \\u00e9\"}]},"
    "{\"role\": \"assistant\", \"content\": "
    "\"<think>\\nx\\n</think>\\n\\nok\", "
    "\"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": "
    "{\"a\": 1.5}}}]}],"
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
    "\"parameters\": {\"type\": \"object\"}}}]}";

/* Small limits, so that what is hostile stops soon. */
static const struct jinja_limits limits = {.max_output = 4096,
                                           .max_steps = 20000,
                                           .max_depth = 16,
                                           .max_bytes = 1 << 20};

static void check_message(const struct jinja_error *err, bool may_be_empty)
{
    const size_t len = strnlen(err->message, sizeof err->message);
    if (len == sizeof err->message)
        fail("a message without its end", NULL);
    if (!len && !may_be_empty)
        fail("a refusal without a message", NULL);
    if (strchr(err->message, '\n'))
        fail("a message of more than one line", err->message);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *src = (const char *)data;
    const uint8_t *nul = memchr(data, 0, size);
    const size_t src_len = nul ? (size_t)(nul - data) : size;
    cJSON *ctx;
    if (nul)
        ctx = cJSON_ParseWithLength((const char *)nul + 1, size - src_len - 1);
    else
        ctx = cJSON_Parse(default_context);

    struct jinja_error err;
    jinja_status st;
    struct jinja_template *t = jinja_compile(src, src_len, &st, &err);
    if (!t) {
        if (st != JINJA_E_SYNTAX && st != JINJA_E_NOMEM)
            fail("a compile refused with a render's status", err.message);
        check_message(&err, false);
        if (st == JINJA_E_SYNTAX && err.line == 0)
            fail("a syntax error without its line", err.message);
        cJSON_Delete(ctx);
        return 0;
    }
    if (st != JINJA_OK)
        fail("a template with an error status", NULL);

    char *out[2] = {NULL, NULL};
    size_t len[2] = {0, 0};
    jinja_status status[2];
    char message[2][sizeof err.message];
    for (int i = 0; i < 2; i++) {
        status[i] =
            jinja_render(t, ctx, &limits, 1721999109, &out[i], &len[i], &err);
        memcpy(message[i], err.message, sizeof err.message);
        if (status[i] == JINJA_OK) {
            if (!out[i] || out[i][len[i]] != '\0')
                fail("an output without its end", NULL);
            if (len[i] > limits.max_output)
                fail("an output past max_output", NULL);
        } else {
            if (out[i])
                fail("an output with a refusal", err.message);
            if (status[i] != JINJA_E_RAISED && status[i] != JINJA_E_RUNTIME &&
                status[i] != JINJA_E_LIMIT && status[i] != JINJA_E_NOMEM)
                fail("a render refused with a compile's status", err.message);
            check_message(&err, status[i] == JINJA_E_RAISED);
        }
    }
    if (status[0] != status[1] || len[0] != len[1] ||
        (out[0] && memcmp(out[0], out[1], len[0]) != 0) ||
        (status[0] != JINJA_OK && strcmp(message[0], message[1]) != 0))
        fail("two renders of one template differ", message[0]);
    free(out[0]);
    free(out[1]);
    jinja_free(t);
    cJSON_Delete(ctx);
    return 0;
}
