/*
 * openai_request.c - decoding an OpenAI completions or chat body
 * (openai_request.h).
 */
#include "openai_request.h"
#include "chat_prompt.h"
#include "family.h"
#include "jsonin.h"
#include "models.h"
#include "request_steps.h"
#include "token_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A field and the routes that take it. */
enum { ON_COMPLETIONS = 1, ON_CHAT = 2, ON_BOTH = 3 };
struct openai_field {
    const char *name;
    unsigned on;
};

/* Every field either route reads; the rest of OpenAI's are in ignored
 * or idle below. */
static const struct openai_field fields[] = {
    {"model", ON_BOTH},
    {"prompt", ON_COMPLETIONS},
    {"messages", ON_CHAT},
    {"max_tokens", ON_BOTH},
    {"max_completion_tokens", ON_CHAT},
    {"temperature", ON_BOTH},
    {"top_p", ON_BOTH},
    {"top_k", ON_BOTH},
    {"min_p", ON_BOTH},
    {"seed", ON_BOTH},
    {"stop", ON_BOTH},
    {"n", ON_BOTH},
    {"stream", ON_BOTH},
    {"stream_options", ON_BOTH},
    {"logprobs", ON_BOTH},
    {"top_logprobs", ON_CHAT},
    {"echo", ON_COMPLETIONS},
    {"tools", ON_CHAT},
    {"tool_choice", ON_CHAT},
    {"parallel_tool_calls", ON_CHAT},
    {"chat_template_kwargs", ON_CHAT},
    {"add_generation_prompt", ON_CHAT},
    {"continue_final_message", ON_CHAT},
    {"add_special_tokens", ON_BOTH},
    {"skip_special_tokens", ON_BOTH},
    {"attention", ON_BOTH},
    /* OpenAI's, taken at their no-op values only (idle()) */
    {"frequency_penalty", ON_BOTH},
    {"presence_penalty", ON_BOTH},
    {"logit_bias", ON_BOTH},
    {"best_of", ON_COMPLETIONS},
    {"suffix", ON_COMPLETIONS},
    {"response_format", ON_CHAT},
    {"store", ON_CHAT},
    {"modalities", ON_CHAT},
    /* OpenAI's, which change nothing of the answer: accepted, unread */
    {"user", ON_BOTH},
    {"metadata", ON_BOTH},
    {"service_tier", ON_BOTH},
};

static const struct openai_field *field_of(const char *name)
{
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        if (!strcmp(fields[i].name, name))
            return &fields[i];
    return NULL;
}

static bool check_fields(const cJSON *root, enum openai_route route,
                         struct problem *pb)
{
    const unsigned mine = route == OPENAI_CHAT ? ON_CHAT : ON_COMPLETIONS;
    const cJSON *key;
    cJSON_ArrayForEach(key, root)
    {
        const struct openai_field *f = field_of(key->string);
        if (f && (f->on & mine))
            continue;
        char pointer[80];
        snprintf(pointer, sizeof pointer, "/%.70s", key->string);
        if (f)
            return problem_set(pb, 422, pointer,
                               "%s is a field of %s, not of this route",
                               f->name,
                               route == OPENAI_CHAT ? "/v1/completions"
                                                    : "/v1/chat/completions");
        return problem_set(pb, 422, pointer,
                           "unrecognized request argument \"%.60s\" (see "
                           "docs/openai.md for the fields attnd reads)",
                           key->string);
    }
    return true;
}

/* A field OpenAI defines at a value attnd does not implement. */
static bool idle(const cJSON *root, struct problem *pb)
{
    static const struct {
        const char *name;
        double zero; /* the no-op number */
        const char *why;
    } numbers[] = {
        {"frequency_penalty", 0, "penalties are not implemented"},
        {"presence_penalty", 0, "penalties are not implemented"},
        {"best_of", 1, "one completion is made a request"},
        {"n", 1, "one choice is made a request: send n requests"},
    };
    for (size_t i = 0; i < sizeof numbers / sizeof *numbers; i++) {
        const cJSON *v =
            cJSON_GetObjectItemCaseSensitive(root, numbers[i].name);
        if (!v || cJSON_IsNull(v) ||
            (cJSON_IsNumber(v) && v->valuedouble == numbers[i].zero))
            continue;
        char pointer[40], shown[64];
        snprintf(pointer, sizeof pointer, "/%s", numbers[i].name);
        jsonin_show(v, shown, sizeof shown);
        return problem_set(pb, 422, pointer, "%s is %s; only %g is taken (%s)",
                           numbers[i].name, shown, numbers[i].zero,
                           numbers[i].why);
    }
    const cJSON *bias = cJSON_GetObjectItemCaseSensitive(root, "logit_bias");
    if (bias && !cJSON_IsNull(bias) && !(cJSON_IsObject(bias) && !bias->child))
        return problem_set(pb, 422, "/logit_bias",
                           "logit_bias is not implemented: send null or {}");
    const cJSON *suffix = cJSON_GetObjectItemCaseSensitive(root, "suffix");
    if (suffix && !cJSON_IsNull(suffix))
        return problem_set(pb, 422, "/suffix",
                           "suffix (insertion) is not implemented: send null");
    const cJSON *format =
        cJSON_GetObjectItemCaseSensitive(root, "response_format");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(format, "type");
    if (format && !cJSON_IsNull(format) &&
        !(cJSON_IsString(type) && !strcmp(type->valuestring, "text")))
        return problem_set(pb, 422, "/response_format",
                           "response_format: only {\"type\": \"text\"} is "
                           "taken (constrained output is not implemented)");
    const cJSON *store = cJSON_GetObjectItemCaseSensitive(root, "store");
    if (cJSON_IsTrue(store))
        return problem_set(pb, 422, "/store",
                           "store: attnd keeps no completions; send false");
    const cJSON *modes = cJSON_GetObjectItemCaseSensitive(root, "modalities");
    if (modes && !cJSON_IsNull(modes) &&
        !(cJSON_IsArray(modes) && cJSON_GetArraySize(modes) == 1 &&
          cJSON_IsString(modes->child) &&
          !strcmp(modes->child->valuestring, "text")))
        return problem_set(pb, 422, "/modalities",
                           "modalities: only [\"text\"] (the models attnd "
                           "serves write text)");
    const cJSON *choice = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    if (choice && !cJSON_IsNull(choice) &&
        !(cJSON_IsString(choice) && (!strcmp(choice->valuestring, "auto") ||
                                     !strcmp(choice->valuestring, "none"))))
        return problem_set(pb, 422, "/tool_choice",
                           "tool_choice: \"auto\" or \"none\" (tools reach the "
                           "template; calls are not parsed or forced)");
    return true;
}

static bool read_number(const cJSON *root, const char *name, double fallback,
                        double lo, double hi, double *out, struct problem *pb)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    *out = fallback;
    if (!v || cJSON_IsNull(v))
        return true;
    char pointer[40];
    snprintf(pointer, sizeof pointer, "/%s", name);
    if (!cJSON_IsNumber(v))
        return problem_set(pb, 422, pointer, "%s is %s; expected a number",
                           name, jsonin_kind(v));
    if (!(v->valuedouble >= lo && v->valuedouble <= hi)) {
        char shown[32];
        jsonin_show_number(v->valuedouble, shown, sizeof shown);
        return problem_set(pb, 422, pointer, "%s (%s) must be from %g to %g",
                           name, shown, lo, hi);
    }
    *out = v->valuedouble;
    return true;
}

/* An integer from lo to hi, or fallback when absent or null. */
static bool read_count(const cJSON *root, const char *name, size_t lo,
                       size_t hi, size_t fallback, size_t *out,
                       struct problem *pb)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    *out = fallback;
    if (!v || cJSON_IsNull(v))
        return true;
    struct jpath at;
    jpath_root(&at, name);
    return jsonin_size(v, &at, lo, hi, out, pb);
}

/* seed: any integer OpenAI takes, negative ones as their 64-bit pattern. */
static bool read_seed(const cJSON *root, uint64_t *out, struct problem *pb)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "seed");
    *out = 0;
    if (!v || cJSON_IsNull(v))
        return true;
    const double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(d == floor(d) && fabs(d) <= 9007199254740992.0)) {
        char shown[64];
        jsonin_show(v, shown, sizeof shown);
        return problem_set(pb, 422, "/seed",
                           "seed is %s; expected an integer of at most 2^53 "
                           "in size",
                           shown);
    }
    *out = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
    return true;
}

/* ------------------------------------------------------------- prompt */

/* The most bytes a prompt's text or render may have before it is
 * encoded: the body's cap bounds the rest. */
#define PROMPT_TEXT_MAX ((size_t)2 << 20)

static size_t token_cap(const struct request_limits *lim, const struct model *m)
{
    return m->xf.max_positions < lim->max_tokens ? m->xf.max_positions
                                                 : lim->max_tokens;
}

/* A fresh encoding of n ids. */
static bool encoding_new(struct tok_encoding *enc, size_t n)
{
    uint32_t *ids = calloc(n ? n : 1, sizeof *ids + 2);
    if (!ids)
        return false;
    *enc = (struct tok_encoding){.count = n,
                                 .ids = ids,
                                 .type_ids = (uint8_t *)(ids + n),
                                 .added = (uint8_t *)(ids + n) + n};
    return true;
}

/* The text of ids, as the tokenizer decodes them one by one. */
static bool text_of_ids(struct openai_request *o, const struct model *m,
                        struct problem *pb)
{
    struct buf b;
    buf_init(&b, PROMPT_TEXT_MAX);
    const struct tok_encoding *enc = &o->g.req.model.enc;
    bool ok = buf_append(&b, "", 0);
    for (size_t i = 0; ok && i < enc->count; i++)
        ok = token_text_append(&b, m, enc->ids[i]);
    if (!ok) {
        buf_free(&b);
        return problem_set(pb, 422, "/prompt",
                           "the prompt's text is more than %zu bytes",
                           PROMPT_TEXT_MAX);
    }
    o->prompt_text = buf_take(&b, &o->prompt_len);
    return true;
}

/* The texts a tokenizer reads: a completion's prompt, alone or the one
 * of an array. A chat has none: its messages are rendered by a template,
 * which reads C strings, so a NUL in them is refused. */
static const char *const openai_texts[] = {"/prompt", "/prompt/*", NULL};

/* prompt: a string, an array of token ids, or either alone in an array
 * (OpenAI's batch form, of one). */
static bool read_prompt(struct openai_request *o, const cJSON *root,
                        const struct model *m, size_t cap, bool special,
                        struct problem *pb)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 &&
        (cJSON_IsString(p->child) || cJSON_IsArray(p->child)))
        p = p->child;
    else if (cJSON_IsArray(p) && p->child && !cJSON_IsNumber(p->child))
        return problem_set(pb, 422, "/prompt",
                           "prompt holds %d prompts; attnd completes one a "
                           "request",
                           cJSON_GetArraySize(p));
    struct tok_encoding *enc = &o->g.req.model.enc;
    if (cJSON_IsString(p)) {
        size_t len;
        const char *text = jsonin_text(p, &len);
        if (!request_reserve(&o->g.req, tok_encode_bytes(&m->tokenizer, len, 0),
                             "prompt", pb))
            return false;
        struct attn_error err;
        const struct tok_options opts = {.max_tokens = cap,
                                         .no_special = !special};
        const attn_status st =
            tok_encode(&m->tokenizer, text, len, NULL, 0, &opts, enc, &err);
        if (st == ATTN_E_TOO_BIG)
            return problem_set(pb, 422, "/prompt",
                               "the prompt is more than %zu tokens (%s)", cap,
                               cap == m->xf.max_positions
                                   ? "the model's max_position_embeddings"
                                   : "--max-tokens");
        if (st != ATTN_OK)
            return problem_from_core(pb, st, &err, "/prompt");
        o->prompt_text = malloc(len + 1);
        if (o->prompt_text) {
            memcpy(o->prompt_text, text, len + 1);
            o->prompt_len = len;
        }
        return o->prompt_text || problem_set(pb, 503, "", "out of memory");
    }
    if (!cJSON_IsArray(p))
        return problem_set(pb, 422, "/prompt",
                           "prompt is %s; expected a string or an array of "
                           "token ids",
                           p ? jsonin_kind(p) : "missing");
    const size_t n = (size_t)cJSON_GetArraySize(p);
    if (n > cap)
        return problem_set(pb, 422, "/prompt",
                           "the prompt has %zu tokens; at most %zu", n, cap);
    if (!request_reserve(&o->g.req, n * (sizeof(uint32_t) + 2), "prompt", pb))
        return false;
    if (!encoding_new(enc, n))
        return problem_set(pb, 503, "", "out of memory");
    const size_t vocab = tok_vocab_size(&m->tokenizer);
    size_t i = 0;
    const cJSON *id;
    cJSON_ArrayForEach(id, p)
    {
        struct jpath root_at, at;
        jpath_root(&root_at, "prompt");
        jpath_index(&at, &root_at, i);
        size_t v;
        if (!jsonin_size(id, &at, 0, SIZE_MAX - 1, &v, pb))
            return false;
        if (v >= vocab)
            return problem_set(pb, 422, at.pointer,
                               "%s (%zu) is not a token id of the model \"%s\" "
                               "(0 to %zu)",
                               at.name, v, m->name, vocab - 1);
        enc->ids[i++] = (uint32_t)v;
    }
    return text_of_ids(o, m, pb);
}

/* A chat's messages through the model's template, then its tokens. */
static bool read_messages(struct openai_request *o, cJSON *root,
                          const struct model *m, size_t cap, bool special,
                          time_t now, struct problem *pb)
{
    struct chat_fields f;
    if (!chat_fields_read(root, &f, pb) ||
        !request_reserve(&o->g.req, CHAT_RENDER_BYTES, "messages", pb) ||
        !chat_prompt_render(m, &f, now, &o->prompt_text, &o->prompt_len, pb))
        return false;
    if (!request_reserve(&o->g.req,
                         tok_encode_bytes(&m->tokenizer, o->prompt_len, 0),
                         "messages", pb))
        return false;
    struct attn_error err;
    const struct tok_options opts = {.max_tokens = cap, .no_special = !special};
    struct tok_encoding *enc = &o->g.req.model.enc;
    const attn_status st = tok_encode(&m->tokenizer, o->prompt_text,
                                      o->prompt_len, NULL, 0, &opts, enc, &err);
    if (st == ATTN_E_TOO_BIG)
        return problem_set(pb, 422, "/messages",
                           "the conversation is more than %zu tokens as the "
                           "template renders it (%s)",
                           cap,
                           cap == m->xf.max_positions
                               ? "the model's max_position_embeddings"
                               : "--max-tokens");
    if (st != ATTN_OK)
        return problem_from_core(pb, st, &err, "/messages");
    // the template's own special tokens are marked as a tokenizer's are
    for (size_t i = 0; i < enc->count; i++)
        enc->added[i] |= tok_token_special(&m->tokenizer, enc->ids[i]);
    return true;
}

/* ---------------------------------------------------------- attention */

/* /attention's problems name its fields at the top; here they are under
 * "attention". */
static void under_attention(struct problem *pb, enum openai_route route)
{
    // what /attention calls its input is the prompt here
    if (!strcmp(pb->pointer, "/sentence")) {
        snprintf(pb->pointer, sizeof pb->pointer, "%s",
                 route == OPENAI_CHAT ? "/messages" : "/prompt");
        return;
    }
    if (!pb->pointer[0] || !strncmp(pb->pointer, "/attention", 10) ||
        !strcmp(pb->pointer, "/prompt") || !strcmp(pb->pointer, "/messages"))
        return;
    char was[sizeof pb->pointer];
    snprintf(was, sizeof was, "%s", pb->pointer);
    snprintf(pb->pointer, sizeof pb->pointer, "/attention%.100s", was);
}

/* What /attention's decoder reads: the model, and "attention"'s fields
 * but stream_rows (return: [] when there are none: nothing computed). */
static cJSON *attention_body(const cJSON *model, const cJSON *attention)
{
    cJSON *body = cJSON_CreateObject();
    bool ok = body && cJSON_AddItemToObject(body, "model",
                                            cJSON_Duplicate(model, true));
    const cJSON *k;
    if (attention)
        cJSON_ArrayForEach(
            k, attention) if (ok && strcmp(k->string, "stream_rows")) ok =
            cJSON_AddItemToObject(body, k->string, cJSON_Duplicate(k, true));
    if (ok && !attention)
        ok = cJSON_AddItemToObject(body, "return", cJSON_CreateArray());
    if (!ok) {
        cJSON_Delete(body);
        return NULL;
    }
    return body;
}

static bool read_attention(struct openai_request *o, const cJSON *root,
                           const struct request_limits *lim, struct problem *pb)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "attention");
    if (a && !cJSON_IsObject(a) && !cJSON_IsNull(a))
        return problem_set(pb, 422, "/attention",
                           "attention is %s; expected an object of "
                           "/attention's fields (return, layer, ...)",
                           jsonin_kind(a));
    if (cJSON_IsNull(a))
        a = NULL;
    o->attention = a != NULL;
    if (cJSON_GetObjectItemCaseSensitive(a, "model"))
        return problem_set(pb, 422, "/attention/model",
                           "attention.model: the attention is of the "
                           "request's model; leave it out here");
    // attribution is of one input's position, which /attention takes
    const cJSON *ret = cJSON_GetObjectItemCaseSensitive(a, "return");
    const cJSON *name;
    if (cJSON_IsArray(ret))
        cJSON_ArrayForEach(
            name,
            ret) if (cJSON_IsString(name) &&
                     !strcmp(
                         name->valuestring,
                         "dla")) return problem_set(pb, 422,
                                                    "/attention/return",
                                                    "dla (in attention.return) "
                                                    "is /attention's: "
                                                    "attribute a finished "
                                                    "sequence there, with "
                                                    "dla_target");
    bool rows = false;
    const cJSON *sr =
        a ? cJSON_GetObjectItemCaseSensitive(a, "stream_rows") : NULL;
    if (sr) {
        struct jpath root_at, at;
        jpath_root(&root_at, "attention");
        jpath_key(&at, &root_at, "stream_rows");
        if (!jsonin_bool(sr, &at, &rows, pb))
            return false;
        if (rows && !o->stream)
            return problem_set(pb, 422, "/attention/stream_rows",
                               "attention.stream_rows puts each token's row "
                               "in its chunk: it needs stream: true");
    }
    cJSON *body =
        attention_body(cJSON_GetObjectItemCaseSensitive(root, "model"), a);
    if (!body)
        return problem_set(pb, 503, "", "out of memory");
    o->g.req.model.encoded = true;
    const bool ok = request_decode(&o->g.req, body, lim, pb);
    cJSON_Delete(body);
    if (!ok) {
        under_attention(pb, o->route);
        return false;
    }
    if (o->g.req.png.format != IMAGE_JSON)
        return problem_set(pb, 422, "/attention",
                           "the answer is JSON: its attention is /attention's "
                           "JSON answer");
    const unsigned want = o->g.req.model.run.want;
    if (rows)
        o->row_want = (want & XF_WANT_WEIGHTS) || !(want & XF_WANT_MEAN_WEIGHTS)
                          ? XF_WANT_WEIGHTS
                          : XF_WANT_MEAN_WEIGHTS;
    return true;
}

/* --------------------------------------------------------------- all */

bool openai_parse(struct openai_request *o, enum openai_route route,
                  const char *body, size_t len,
                  const struct request_limits *lim, struct budget_hold *hold,
                  time_t now, struct problem *pb)
{
    memset(o, 0, sizeof *o);
    o->route = route;
    struct generate_request *g = &o->g;
    request_init(&g->req);
    g->req.hold = hold;
    cJSON *root = jsonin_parse_body(
        body, len, route == OPENAI_COMPLETIONS ? openai_texts : NULL, pb);
    if (!root)
        return false;
    bool ok = cJSON_IsObject(root) ||
              problem_set(pb, 422, "", "the body is %s; expected an object",
                          jsonin_kind(root));
    ok = ok && check_fields(root, route, pb) && idle(root, pb);
    // the model, which everything after depends on
    const cJSON *name =
        ok ? cJSON_GetObjectItemCaseSensitive(root, "model") : NULL;
    struct models_entry *e = NULL;
    if (ok && !cJSON_IsString(name))
        ok = problem_set(pb, 422, "/model",
                         "model is %s; expected the id of a loaded model "
                         "(GET /v1/models)",
                         name ? jsonin_kind(name) : "missing");
    if (ok) {
        e = models_find(lim->models, name->valuestring,
                        strlen(name->valuestring));
        if (!e) {
            char loaded[256];
            models_names(lim->models, loaded, sizeof loaded);
            ok = problem_set(pb, 404, "/model",
                             "the model \"%.64s\" does not exist; loaded: %s",
                             name->valuestring, loaded);
        }
    }
    const struct model *m = e ? e->model : NULL;
    if (ok && !m->xf.lm_head.data)
        ok = problem_set(pb, 422, "/model",
                         "the model \"%s\" (%s) has no output head: it does "
                         "not generate",
                         m->name, m->family->network);
    // how the answer goes out
    ok = ok && jsonin_flag(root, "stream", false, &o->stream, pb);
    const cJSON *so =
        ok ? cJSON_GetObjectItemCaseSensitive(root, "stream_options") : NULL;
    if (so && !cJSON_IsNull(so)) {
        if (!o->stream)
            ok = problem_set(pb, 422, "/stream_options",
                             "stream_options is for a streamed answer: set "
                             "stream: true");
        else if (!cJSON_IsObject(so))
            ok = problem_set(pb, 422, "/stream_options",
                             "stream_options is %s; expected an object",
                             jsonin_kind(so));
        else {
            const cJSON *iu =
                cJSON_GetObjectItemCaseSensitive(so, "include_usage");
            struct jpath root_at, at;
            jpath_root(&root_at, "stream_options");
            jpath_key(&at, &root_at, "include_usage");
            ok = !iu || cJSON_IsNull(iu) ||
                 jsonin_bool(iu, &at, &o->include_usage, pb);
        }
    }
    // logprobs: the legacy count, or chat's flag and top_logprobs
    if (ok && route == OPENAI_COMPLETIONS) {
        const cJSON *lp = cJSON_GetObjectItemCaseSensitive(root, "logprobs");
        o->logprobs = lp && !cJSON_IsNull(lp);
        ok = read_count(root, "logprobs", 0, OPENAI_MAX_LOGPROBS, 0,
                        &o->top_logprobs, pb) &&
             jsonin_flag(root, "echo", false, &o->echo, pb);
    } else if (ok) {
        ok = jsonin_flag(root, "logprobs", false, &o->logprobs, pb) &&
             read_count(root, "top_logprobs", 0, OPENAI_MAX_LOGPROBS, 0,
                        &o->top_logprobs, pb);
        if (ok && o->top_logprobs && !o->logprobs)
            ok = problem_set(pb, 422, "/top_logprobs",
                             "top_logprobs needs logprobs: true");
    }
    // the prompt, then the request on it as /attention's decoder reads it
    bool special = route == OPENAI_COMPLETIONS;
    ok = ok && jsonin_flag(root, "add_special_tokens", special, &special, pb) &&
         jsonin_flag(root, "skip_special_tokens", true, &o->skip_special, pb);
    const size_t cap = ok ? token_cap(lim, m) : 0;
    if (ok)
        ok = route == OPENAI_CHAT
                 ? read_messages(o, root, m, cap, special, now, pb)
                 : read_prompt(o, root, m, cap, special, pb);
    if (ok && !g->req.model.enc.count)
        ok =
            problem_set(pb, 422, route == OPENAI_CHAT ? "/messages" : "/prompt",
                        "the prompt gives no tokens: at least one is needed");
    ok = ok && read_attention(o, root, lim, pb);
    // how many tokens, and how they are chosen
    const size_t p = ok ? g->req.model.enc.count : 0;
    const size_t room = ok ? cap - p : 0;
    const cJSON *mct =
        ok ? cJSON_GetObjectItemCaseSensitive(root, "max_completion_tokens")
           : NULL;
    const char *count_name =
        mct && !cJSON_IsNull(mct) ? "max_completion_tokens" : "max_tokens";
    const cJSON *mt =
        ok ? cJSON_GetObjectItemCaseSensitive(root, "max_tokens") : NULL;
    if (ok && mct && !cJSON_IsNull(mct) && mt && !cJSON_IsNull(mt) &&
        !(cJSON_IsNumber(mt) && cJSON_IsNumber(mct) &&
          mt->valuedouble == mct->valuedouble))
        ok = problem_set(pb, 422, "/max_tokens",
                         "max_tokens and max_completion_tokens differ; give "
                         "one of them (max_completion_tokens is OpenAI's "
                         "newer name)");
    const size_t fallback =
        route == OPENAI_CHAT
            ? (room < GENERATE_MAX_NEW ? room : GENERATE_MAX_NEW)
            : GENERATE_DEFAULT_NEW;
    // a completion may ask for none: the prompt scored (echo, logprobs)
    ok = ok && read_count(root, count_name, route == OPENAI_CHAT ? 1 : 0,
                          GENERATE_MAX_NEW, fallback, &g->max_new, pb);
    const cJSON *given =
        ok ? cJSON_GetObjectItemCaseSensitive(root, count_name) : NULL;
    o->max_given = given && !cJSON_IsNull(given);
    o->max_completion = count_name[4] == 'c';
    if (ok && g->max_new > room)
        ok = problem_set(pb, 422,
                         count_name[4] == 'c' ? "/max_completion_tokens"
                                              : "/max_tokens",
                         "%s (%zu) after a prompt of %zu tokens passes the %zu "
                         "a sequence may have (%s); at most %zu",
                         count_name, g->max_new, p, cap,
                         cap == m->xf.max_positions ? "max_position_embeddings"
                                                    : "--max-tokens",
                         room);
    double temperature = 1, top_p = 1, min_p = 0;
    size_t top_k = 0;
    uint64_t seed = 0;
    ok = ok && read_number(root, "temperature", 1, 0, 2, &temperature, pb) &&
         read_number(root, "top_p", 1, 0, 1, &top_p, pb) &&
         read_number(root, "min_p", 0, 0, 1, &min_p, pb) &&
         read_seed(root, &seed, pb) &&
         generate_read_stop(g, cJSON_GetObjectItemCaseSensitive(root, "stop"),
                            pb);
    // vLLM's top_k: -1 (or 0) is every token
    const cJSON *vk =
        ok ? cJSON_GetObjectItemCaseSensitive(root, "top_k") : NULL;
    if (ok && vk && !cJSON_IsNull(vk) &&
        !(cJSON_IsNumber(vk) && vk->valuedouble == -1))
        ok = read_count(root, "top_k", 0, m->xf.vocab_size, 0, &top_k, pb);
    if (ok) {
        g->sampling = (struct xf_sampling){.temperature = temperature,
                                           .top_k = top_k,
                                           .top_p = top_p,
                                           .min_p = min_p,
                                           .seed = seed};
        // below the sampler's least temperature is greedy, as OpenAI's 0
        if (temperature < XF_MIN_TEMPERATURE)
            g->sampling.temperature = 0;
        struct attn_error err;
        if (xf_sampling_check(&g->sampling, &err) != ATTN_OK) {
            char pointer[sizeof err.field + 2];
            snprintf(pointer, sizeof pointer, "/%s", err.field);
            ok = problem_set(pb, 422, pointer, "%s", err.message);
        }
    }
    cJSON_Delete(root);
    return ok;
}

void openai_request_free(struct openai_request *o)
{
    generate_request_free(&o->g);
    free(o->prompt_text);
    o->prompt_text = NULL;
}
