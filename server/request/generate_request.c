/*
 * generate_request.c - decoding a POST /generate body
 * (generate_request.h). The fields /generate shares with /attention on a
 * model (model, return, logit_lens_k, add_special_tokens, precision)
 * and the prompt, as its sentence, go through /attention's own decoder,
 * so they mean and refuse the same; the rest is read here.
 */
#include "generate_request.h"
#include "family.h"
#include "jsonin.h"
#include "models.h"
#include "request_steps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fields /attention's decoder reads for the prompt. */
static const char *const shared[] = {
    "model",     "return", "logit_lens_k", "add_special_tokens",
    "precision", "ablate", "products"};
static const char *const own[] = {
    "prompt", "max_new_tokens", "temperature",    "top_k",
    "top_p",  "seed",           "top_candidates", "stop"};

static bool known(const char *key)
{
    for (size_t i = 0; i < sizeof shared / sizeof *shared; i++)
        if (!strcmp(key, shared[i]))
            return true;
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        if (!strcmp(key, own[i]))
            return true;
    return false;
}

static bool read_number(const cJSON *root, const char *name, double fallback,
                        double *out, struct problem *pb)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    *out = fallback;
    if (!v)
        return true;
    if (!cJSON_IsNumber(v)) {
        char pointer[40];
        snprintf(pointer, sizeof pointer, "/%s", name);
        return problem_set(pb, 422, pointer, "%s is %s; expected a number",
                           name, jsonin_kind(v));
    }
    *out = v->valuedouble;
    return true;
}

static bool read_size(const cJSON *root, const char *name, size_t lo, size_t hi,
                      size_t fallback, size_t *out, struct problem *pb)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    *out = fallback;
    if (!v)
        return true;
    struct jpath at;
    jpath_root(&at, name);
    return jsonin_size(v, &at, lo, hi, out, pb);
}

bool generate_read_stop(struct generate_request *g, const cJSON *v,
                        struct problem *pb)
{
    if (!v)
        return true;
    if (cJSON_IsString(v)) { /* one string, as transformers takes it */
        const cJSON *one = v;
        v = NULL;
        if (!one->valuestring[0] ||
            strlen(one->valuestring) > GENERATE_MAX_STOP_BYTES)
            return problem_set(pb, 422, "/stop",
                               "stop is a string of %zu bytes; a stop string "
                               "has 1 to %d",
                               strlen(one->valuestring),
                               GENERATE_MAX_STOP_BYTES);
        strcpy(g->stop[0], one->valuestring);
        g->n_stop = 1;
        return true;
    }
    if (!cJSON_IsArray(v))
        return problem_set(pb, 422, "/stop",
                           "stop is %s; expected a string or an array of "
                           "strings",
                           jsonin_kind(v));
    const int n = cJSON_GetArraySize(v);
    if (n > GENERATE_MAX_STOPS)
        return problem_set(pb, 422, "/stop", "stop has %d strings; at most %d",
                           n, GENERATE_MAX_STOPS);
    for (int i = 0; i < n; i++) {
        const cJSON *s = cJSON_GetArrayItem(v, i);
        char pointer[32];
        snprintf(pointer, sizeof pointer, "/stop/%d", i);
        if (!cJSON_IsString(s))
            return problem_set(pb, 422, pointer,
                               "stop[%d] is %s; expected a "
                               "string",
                               i, jsonin_kind(s));
        const size_t len = strlen(s->valuestring);
        if (len == 0 || len > GENERATE_MAX_STOP_BYTES)
            return problem_set(pb, 422, pointer,
                               "stop[%d] has %zu bytes; a stop string has 1 "
                               "to %d",
                               i, len, GENERATE_MAX_STOP_BYTES);
        strcpy(g->stop[g->n_stop++], s->valuestring);
    }
    return true;
}

/* The one text of a generation, which a tokenizer reads whole, NULs
 * included: jsonin_parse_body() refuses a NUL anywhere else. */
static const char *const texts[] = {"/prompt", NULL};

/* What /attention's decoder should read: the shared fields as given and
 * the prompt as the sentence, every byte of it (cJSON_Duplicate() would
 * copy it to its first NUL); NULL when out of memory. */
static cJSON *prompt_body(const cJSON *root, const cJSON *prompt)
{
    cJSON *body = cJSON_CreateObject();
    bool ok = body != NULL;
    for (size_t i = 0; ok && i < sizeof shared / sizeof *shared; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, shared[i]);
        cJSON *copy = v ? cJSON_Duplicate(v, true) : NULL;
        ok = !v || (copy && cJSON_AddItemToObject(body, shared[i], copy));
        if (!ok)
            cJSON_Delete(copy);
    }
    size_t len;
    const char *text = jsonin_text(prompt, &len);
    cJSON *sentence = ok ? jsonin_text_create(text, len) : NULL;
    if (sentence && !cJSON_AddItemToObject(body, "sentence", sentence)) {
        cJSON_Delete(sentence);
        sentence = NULL;
    }
    if (!sentence) {
        cJSON_Delete(body);
        return NULL;
    }
    return body;
}

/* /attention's problems name the sentence; here it is the prompt: in the
 * pointer, and where the detail names the field. */
static void as_prompt(struct problem *pb)
{
    if (strcmp(pb->pointer, "/sentence"))
        return;
    snprintf(pb->pointer, sizeof pb->pointer, "/prompt");
    static const char field[] = "sentence", now[] = "prompt";
    char *at = strstr(pb->detail, field);
    if (!at || !strncmp(at + sizeof field - 1, "_b", 2))
        return;
    // "prompt" is shorter: the rest moves left, its end included
    memcpy(at, now, sizeof now - 1);
    memmove(at + sizeof now - 1, at + sizeof field - 1,
            strlen(at + sizeof field - 1) + 1);
}

bool generate_parse(struct generate_request *g, const char *body, size_t len,
                    const struct request_limits *lim, struct budget_hold *hold,
                    struct problem *pb)
{
    memset(g, 0, sizeof *g);
    request_init(&g->req);
    g->req.hold = hold;
    cJSON *root = jsonin_parse_body(body, len, texts, pb);
    if (!root)
        return false;
    bool ok = cJSON_IsObject(root) ||
              problem_set(pb, 422, "", "the body is %s; expected an object",
                          jsonin_kind(root));
    const cJSON *key;
    if (ok)
        cJSON_ArrayForEach(key, root) if (ok && !known(key->string))
        {
            char pointer[80];
            snprintf(pointer, sizeof pointer, "/%.70s", key->string);
            ok = problem_set(pb, 422, pointer,
                             "unknown field \"%.60s\" (a generation takes "
                             "model, prompt, max_new_tokens, temperature, "
                             "top_k, top_p, seed, stop, top_candidates, "
                             "return, logit_lens_k, add_special_tokens, "
                             "precision, ablate and products)",
                             key->string);
        }
    const cJSON *model =
        ok ? cJSON_GetObjectItemCaseSensitive(root, "model") : NULL;
    const cJSON *prompt =
        ok ? cJSON_GetObjectItemCaseSensitive(root, "prompt") : NULL;
    if (ok && !model)
        ok = problem_set(pb, 422, "/model",
                         "a generation needs model, a loaded decoder (GET "
                         "/models)");
    if (ok && !cJSON_IsString(prompt))
        ok = problem_set(pb, 422, "/prompt",
                         "prompt is %s; expected the text to continue",
                         prompt ? jsonin_kind(prompt) : "missing");
    // attribution is of one input's position, which /attention takes
    const cJSON *ret =
        ok ? cJSON_GetObjectItemCaseSensitive(root, "return") : NULL;
    const cJSON *name;
    if (cJSON_IsArray(ret))
        cJSON_ArrayForEach(name, ret) if (ok && cJSON_IsString(name) &&
                                          !strcmp(name->valuestring, "dla"))
            ok = problem_set(pb, 422, "/return",
                             "dla (in return) is /attention's: attribute a "
                             "finished sequence there, with dla_target");
    // the prompt on the model, through /attention's own decoder
    if (ok) {
        cJSON *as_sentence = prompt_body(root, prompt);
        ok = as_sentence ? request_decode(&g->req, as_sentence, lim, pb)
                         : problem_set(pb, 503, "", "out of memory");
        cJSON_Delete(as_sentence);
        if (!ok)
            as_prompt(pb);
    }
    const struct model *m = ok ? g->req.model.entry->model : NULL;
    if (ok && !m->xf.lm_head.data)
        ok = problem_set(pb, 422, "/model",
                         "the model \"%s\" (%s) has no output head: it does "
                         "not generate",
                         m->name, m->family->network);
    // how many, and how they are chosen
    double temperature = 0, top_p = 1;
    size_t top_k = 0;
    uint64_t seed = 0;
    ok = ok &&
         read_size(root, "max_new_tokens", 1, GENERATE_MAX_NEW,
                   GENERATE_DEFAULT_NEW, &g->max_new, pb) &&
         read_number(root, "temperature", 0, &temperature, pb) &&
         read_number(root, "top_p", 1, &top_p, pb) &&
         read_size(root, "top_k", 0, m->xf.vocab_size, 0, &top_k, pb) &&
         read_size(root, "top_candidates", 0, GENERATE_MAX_TOP,
                   GENERATE_DEFAULT_TOP, &g->top_candidates, pb) &&
         generate_read_stop(g, cJSON_GetObjectItemCaseSensitive(root, "stop"),
                            pb);
    const cJSON *vseed =
        ok ? cJSON_GetObjectItemCaseSensitive(root, "seed") : NULL;
    if (ok && vseed) {
        struct jpath at;
        jpath_root(&at, "seed");
        ok = jsonin_u64(vseed, &at, &seed, pb);
    }
    if (ok) {
        g->sampling = (struct xf_sampling){.temperature = temperature,
                                           .top_k = top_k,
                                           .top_p = top_p,
                                           .seed = seed};
        struct attn_error err;
        if (xf_sampling_check(&g->sampling, &err) != ATTN_OK) {
            char pointer[sizeof err.field + 2];
            snprintf(pointer, sizeof pointer, "/%s", err.field);
            ok = problem_set(pb, 422, pointer, "%s", err.message);
        }
    }
    // the whole sequence within the model's positions and --max-tokens
    if (ok) {
        const size_t cap = m->xf.max_positions < lim->max_tokens
                               ? m->xf.max_positions
                               : lim->max_tokens;
        const size_t p = g->req.model.enc.count;
        if (g->max_new > cap - p)
            ok = problem_set(pb, 422, "/max_new_tokens",
                             "max_new_tokens (%zu) after a prompt of %zu "
                             "tokens passes the %zu a sequence may have (%s); "
                             "at most %zu",
                             g->max_new, p, cap,
                             cap == m->xf.max_positions
                                 ? "max_position_embeddings"
                                 : "--max-tokens",
                             cap - p);
    }
    cJSON_Delete(root);
    return ok;
}

void generate_request_free(struct generate_request *g)
{
    request_free(&g->req);
}
