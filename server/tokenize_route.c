/*
 * tokenize_route.c - POST /tokenize and POST /detokenize, in vLLM's
 * shapes: the tokens a text or a conversation becomes on a model (the
 * conversation through its chat template, as a chat completion renders
 * it), and the text a list of token ids decodes to. Small work, done on
 * the HTTP thread, each input capped by the body's size.
 */
#include "chat_prompt.h"
#include "exchange.h"
#include "family.h"
#include "jsonin.h"
#include "models.h"
#include "reply.h"
#include "token_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const tokenize_fields[] = {"model",
                                              "prompt",
                                              "messages",
                                              "add_special_tokens",
                                              "add_generation_prompt",
                                              "continue_final_message",
                                              "chat_template_kwargs",
                                              "tools",
                                              "return_token_strs"};
static const char *const detokenize_fields[] = {"model", "tokens"};
/* The text a tokenizer reads whole, NULs included (jsonin.h). */
static const char *const tokenize_texts[] = {"/prompt", NULL};

static bool check_fields(const cJSON *root, const char *const *names, size_t n,
                         const char *route, struct problem *pb)
{
    if (!cJSON_IsObject(root))
        return problem_set(pb, 422, "", "the body is %s; expected an object",
                           jsonin_kind(root));
    const cJSON *key;
    cJSON_ArrayForEach(key, root)
    {
        bool known = false;
        for (size_t i = 0; i < n && !known; i++)
            known = !strcmp(key->string, names[i]);
        if (!known) {
            char pointer[80];
            snprintf(pointer, sizeof pointer, "/%.70s", key->string);
            return problem_set(pb, 422, pointer,
                               "unknown field \"%.60s\" (%s takes %s)",
                               key->string, route,
                               n == 2 ? "model and tokens"
                                      : "model, and prompt or messages with "
                                        "the chat's fields");
        }
    }
    return true;
}

static const struct model *find_model(const cJSON *root,
                                      const struct request_limits *lim,
                                      struct problem *pb)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsString(name)) {
        problem_set(pb, 422, "/model",
                    "model is %s; expected the name of a loaded model (GET "
                    "/models)",
                    name ? jsonin_kind(name) : "missing");
        return NULL;
    }
    struct models_entry *e =
        models_find(lim->models, name->valuestring, strlen(name->valuestring));
    if (!e) {
        char loaded[256];
        models_names(lim->models, loaded, sizeof loaded);
        problem_set(pb, 404, "/model",
                    "model \"%.64s\" is not loaded; loaded: %s",
                    name->valuestring, loaded);
        return NULL;
    }
    return e->model;
}

static size_t token_cap(const struct request_limits *lim, const struct model *m)
{
    return m->xf.max_positions < lim->max_tokens ? m->xf.max_positions
                                                 : lim->max_tokens;
}

static enum MHD_Result answer(struct exchange *ex, struct MHD_Connection *conn,
                              struct buf *b)
{
    size_t len = 0;
    char *doc = buf_take(b, &len);
    struct MHD_Response *r = reply_from_heap(doc, len, "application/json");
    if (r)
        MHD_add_response_header(r, "Cache-Control", "no-store");
    return reply_queue(ex, conn, 200, r, len);
}

/* The text, or the conversation rendered, into enc; *rendered the
 * render (NULL for a text). */
static bool tokenize(cJSON *root, const struct model *m,
                     const struct request_limits *lim, struct budget_hold *hold,
                     struct tok_encoding *enc, char **rendered,
                     struct problem *pb)
{
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(root, "messages");
    *rendered = NULL;
    if (!!prompt == !!messages)
        return problem_set(pb, 422, prompt ? "/messages" : "/prompt",
                           "give prompt (a text) or messages (a "
                           "conversation), one of them");
    bool special;
    if (!jsonin_flag(root, "add_special_tokens", prompt != NULL, &special, pb))
        return false;
    const char *text;
    size_t len;
    const char *pointer = prompt ? "/prompt" : "/messages";
    if (prompt) {
        if (!cJSON_IsString(prompt))
            return problem_set(pb, 422, "/prompt",
                               "prompt is %s; expected a string",
                               jsonin_kind(prompt));
        text = jsonin_text(prompt, &len);
    } else {
        struct chat_fields f;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (!chat_fields_read(root, &f, pb) ||
            !budget_reserve(hold, CHAT_RENDER_BYTES, "messages", false, pb) ||
            !chat_prompt_render(m, &f, now.tv_sec, rendered, &len, pb))
            return false;
        text = *rendered;
    }
    if (!budget_reserve(hold, tok_encode_bytes(&m->tokenizer, len, 0),
                        pointer + 1, false, pb))
        return false;
    const size_t cap = token_cap(lim, m);
    struct attn_error err;
    const struct tok_options opts = {.max_tokens = cap, .no_special = !special};
    const attn_status st =
        tok_encode(&m->tokenizer, text, len, NULL, 0, &opts, enc, &err);
    if (st == ATTN_E_TOO_BIG)
        return problem_set(
            pb, 422, pointer, "the %s is more than %zu tokens (%s)",
            prompt ? "prompt" : "conversation", cap,
            cap == m->xf.max_positions ? "the model's max_position_embeddings"
                                       : "--max-tokens");
    return st == ATTN_OK || problem_from_core(pb, st, &err, pointer);
}

enum MHD_Result handle_tokenize(struct exchange *ex,
                                struct MHD_Connection *conn)
{
    struct problem pb = {0};
    if (!reply_small_json(ex, conn, &pb))
        return reply_problem(ex, conn, &pb);
    const struct request_limits *lim = &ex->srv->limits;
    cJSON *root = jsonin_parse_body(ex->body.data ? ex->body.data : "",
                                    ex->body.len, tokenize_texts, &pb);
    struct tok_encoding enc = {0};
    char *rendered = NULL;
    const struct model *m = NULL;
    bool strs = false;
    bool ok = root &&
              check_fields(root, tokenize_fields,
                           sizeof tokenize_fields / sizeof *tokenize_fields,
                           "/tokenize", &pb) &&
              (m = find_model(root, lim, &pb)) != NULL;
    ok = ok && jsonin_flag(root, "return_token_strs", false, &strs, &pb);
    ok = ok && tokenize(root, m, lim, &ex->hold, &enc, &rendered, &pb);
    struct buf b;
    buf_init(&b, (size_t)64 << 20);
    ok = ok &&
         buf_printf(&b, "{\"count\":%zu,\"max_model_len\":%zu,\"tokens\":[",
                    enc.count, token_cap(lim, m));
    for (size_t i = 0; ok && i < enc.count; i++)
        ok = buf_printf(&b, "%s%u", i ? "," : "", enc.ids[i]);
    ok = ok && buf_append_str(&b, "],\"token_strs\":");
    if (ok && strs) {
        ok = buf_append_str(&b, "[");
        for (size_t i = 0; ok && i < enc.count; i++) {
            const char *t = tok_token_text(&m->tokenizer, enc.ids[i]);
            ok = buf_append_str(&b, i ? "," : "") &&
                 (t ? buf_append_json_string(&b, t)
                    : buf_append_str(&b, "null"));
        }
        // attnd's: which of them the tokenizer holds special
        ok = ok && buf_append_str(&b, "],\"special\":[");
        for (size_t i = 0; ok && i < enc.count; i++)
            ok = buf_printf(&b, "%s%s", i ? "," : "",
                            tok_token_special(&m->tokenizer, enc.ids[i])
                                ? "true"
                                : "false");
        ok = ok && buf_append_str(&b, "]");
    } else if (ok) {
        ok = buf_append_str(&b, "null");
    }
    // attnd's: the conversation as the template rendered it
    if (ok && rendered)
        ok = buf_append_str(&b, ",\"prompt\":") &&
             buf_append_json_string(&b, rendered);
    ok = ok && buf_append_str(&b, "}\n");
    if (!ok && root && m && pb.status == 0)
        problem_set(&pb, 503, "", "out of memory");
    tok_encoding_free(&enc);
    free(rendered);
    cJSON_Delete(root);
    if (!ok) {
        buf_free(&b);
        return reply_problem(ex, conn, &pb);
    }
    return answer(ex, conn, &b);
}

enum MHD_Result handle_detokenize(struct exchange *ex,
                                  struct MHD_Connection *conn)
{
    struct problem pb = {0};
    if (!reply_small_json(ex, conn, &pb))
        return reply_problem(ex, conn, &pb);
    const struct request_limits *lim = &ex->srv->limits;
    cJSON *root = jsonin_parse_body(ex->body.data ? ex->body.data : "",
                                    ex->body.len, NULL, &pb);
    const struct model *m = NULL;
    bool ok = root &&
              check_fields(root, detokenize_fields, 2, "/detokenize", &pb) &&
              (m = find_model(root, lim, &pb)) != NULL;
    const cJSON *tokens =
        ok ? cJSON_GetObjectItemCaseSensitive(root, "tokens") : NULL;
    if (ok && !cJSON_IsArray(tokens))
        ok = problem_set(&pb, 422, "/tokens",
                         "tokens is %s; expected an array of token ids",
                         tokens ? jsonin_kind(tokens) : "missing");
    struct buf text;
    buf_init(&text, (size_t)16 << 20);
    ok = ok && buf_append(&text, "", 0);
    const size_t vocab = ok ? tok_vocab_size(&m->tokenizer) : 0;
    struct jpath root_at;
    jpath_root(&root_at, "tokens");
    size_t i = 0;
    const cJSON *id;
    if (ok)
        cJSON_ArrayForEach(id, tokens)
        {
            struct jpath at;
            jpath_index(&at, &root_at, i++);
            size_t v;
            ok = ok && jsonin_size(id, &at, 0, SIZE_MAX - 1, &v, &pb);
            if (ok && v >= vocab)
                ok = problem_set(&pb, 422, at.pointer,
                                 "%s (%zu) is not a token id of the model "
                                 "\"%s\" (0 to %zu)",
                                 at.name, v, m->name, vocab - 1);
            if (ok && !token_text_append(&text, m, (uint32_t)v))
                ok = problem_set(&pb, 422, "/tokens",
                                 "the text is more than %zu bytes",
                                 text.cap_bytes);
            if (!ok)
                break;
        }
    cJSON_Delete(root);
    struct buf b;
    buf_init(&b, (size_t)128 << 20);
    ok = ok && buf_append_str(&b, "{\"prompt\":") &&
         buf_append_json_string(&b, text.data) && buf_append_str(&b, "}\n");
    buf_free(&text);
    if (!ok) {
        buf_free(&b);
        if (!pb.status)
            problem_set(&pb, 503, "", "out of memory");
        return reply_problem(ex, conn, &pb);
    }
    return answer(ex, conn, &b);
}
