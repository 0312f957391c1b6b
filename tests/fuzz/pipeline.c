/*
 * pipeline.c - the steps after parsing, shared by fuzz_request and
 * fuzz_query, so that every parsed input is also computed and encoded.
 */
#include "pipeline.h"
#include "answer.h"
#include "heatmap.h"
#include "models.h"
#include "render.h"
#include "response.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FONT_PATH "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"

/* tests/models/f32 as "f32", bf16_legacy as "bf16", and the decoders
 * mistral (a sliding window, SentencePiece BPE) and qwen3 (q/k norms,
 * byte-level BPE): requests on a model go through its network too */
static struct models fuzz_models;

const struct request_limits fuzz_limits = {
    .models = &fuzz_models,
    .max_tokens = 1024, /* past two key blocks, so keys walk outside queries */
    .max_dim = 256,
    .max_heads = 16,
    .max_output = (size_t)1 << 20,
};

void fuzz_init(void)
{
    static bool done;
    char err[512];
    if (done)
        return;
    attn_blas_single_thread(); /* as the server's main() does */
    static const struct options_list specs = {
        .item = {"f32=tests/models/f32", "bf16=tests/models/bf16_legacy",
                 "mistral=tests/models/mistral", "qwen3=tests/models/qwen3"},
        .count = 4};
    if (!models_load(&fuzz_models, &specs, err, sizeof err)) {
        fprintf(stderr, "fuzz: %s (run from the repository's root)\n", err);
        abort();
    }
    if (heatmap_font_init(FONT_PATH, err, sizeof err) != DRAW_OK) {
        fprintf(stderr, "fuzz: %s\n", err);
        abort();
    }
    done = true;
}

/* Strict UTF-8 (RFC 3629), as JSON text must be (RFC 8259 section 8.1). */
static bool utf8_valid(const unsigned char *s, size_t len)
{
    for (size_t i = 0; i < len;) {
        const unsigned c = s[i];
        size_t n;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c < 0xE0) {
            n = 2;
        } else if (c >= 0xE0 && c < 0xF0) {
            n = 3;
            lo = c == 0xE0 ? 0xA0 : 0x80;
            hi = c == 0xED ? 0x9F : 0xBF;
        } else if (c >= 0xF0 && c < 0xF5) {
            n = 4;
            lo = c == 0xF0 ? 0x90 : 0x80;
            hi = c == 0xF4 ? 0x8F : 0xBF;
        } else {
            return false;
        }
        if (len - i < n || s[i + 1] < lo || s[i + 1] > hi)
            return false;
        for (size_t k = 2; k < n; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
        i += n;
    }
    return true;
}

void fuzz_check_problem(const struct problem *pb)
{
    if (pb->status < 400 || pb->status > 599 || !pb->detail[0]) {
        fprintf(stderr, "fuzz: refusal with status %d, detail \"%s\"\n",
                pb->status, pb->detail);
        abort();
    }
    size_t len = 0;
    char *body = problem_body(pb, &len);
    if (!body)
        return; /* out of memory: nothing to check */
    cJSON *doc = cJSON_ParseWithLength(body, len);
    if (!doc || !utf8_valid((const unsigned char *)body, len)) {
        fprintf(stderr, "fuzz: problem body is not UTF-8 JSON: %.*s\n",
                (int)len, body);
        abort();
    }
    cJSON_Delete(doc);
    free(body);
}

bool fuzz_split_input(const uint8_t *data, size_t size, char **query,
                      struct request_param *params, size_t *n_params,
                      char **body, size_t *body_len)
{
    const char *at = (const char *)data;
    *query = NULL;
    *n_params = 0;
    *body_len = size;
    if (size > 0 && data[0] == '?') {
        const uint8_t *nl = memchr(data, '\n', size);
        const size_t qlen = nl ? (size_t)(nl - data) - 1 : size - 1;
        *query = malloc(qlen + 1);
        if (!*query)
            return false;
        memcpy(*query, data + 1, qlen);
        bool overflow;
        *n_params = fuzz_split_query(*query, qlen, params, &overflow);
        if (overflow) {
            free(*query);
            return false;
        }
        at = nl ? (const char *)nl + 1 : at + size;
        *body_len = size - (size_t)(at - (const char *)data);
    }
    *body = malloc(*body_len ? *body_len : 1);
    if (!*body) {
        free(*query);
        return false;
    }
    memcpy(*body, at, *body_len);
    return true;
}

size_t fuzz_split_query(char *text, size_t len, struct request_param *p,
                        bool *overflow)
{
    size_t n = 0;
    *overflow = false;
    text[len] = '\0';
    /* a NUL ends a C string, so it ends the query as it would in MHD */
    len = strlen(text);
    for (char *at = text; at <= text + len;) {
        char *amp = memchr(at, '&', (size_t)(text + len - at));
        char *end = amp ? amp : text + len;
        *end = '\0';
        if (end > at) { /* "a&&b": empty pairs are skipped, as MHD does */
            if (n == FUZZ_MAX_PARAMS) {
                *overflow = true;
                break;
            }
            char *eq = strchr(at, '=');
            if (eq)
                *eq = '\0';
            p[n++] = (struct request_param){at, eq ? eq + 1 : ""};
        }
        at = end + 1;
    }
    return n;
}

/* Read the whole JSON stream and check that it parses. */
static void drain_json(struct response_stream *s)
{
    size_t len = 0, cap = 1 << 16;
    char *all = malloc(cap);
    if (!all)
        abort();
    for (;;) {
        if (cap - len < 4096) {
            char *grown = realloc(all, cap * 2);
            if (!grown)
                abort();
            all = grown;
            cap *= 2;
        }
        /* odd sizes, so pieces end in every possible place */
        const size_t got = response_stream_read(s, all + len, 4093);
        if (got == 0)
            break;
        if (got > 4093)
            abort();
        len += got;
    }
    cJSON *doc = cJSON_ParseWithLength(all, len);
    if (!doc || !utf8_valid((const unsigned char *)all, len)) {
        fprintf(stderr,
                "fuzz: response body is not UTF-8 JSON (%zu bytes): %.300s\n",
                len, all);
        abort();
    }
    cJSON_Delete(doc);
    free(all);
}

void fuzz_pipeline_run(struct request *req)
{
    /* the request's kind's operations, as the server looks them up */
    const struct answer_ops *ops = answer_ops(req->kind);
    struct answer_plan plan;
    struct answer_result res;
    struct problem pb;
    memset(&pb, 0, sizeof pb);
    memset(&res, 0, sizeof res);
    if (!ops->plan(req, &plan, &pb) ||
        !ops->run(req, 1, NULL, NULL, &res, &pb)) {
        fuzz_check_problem(&pb);
        answer_result_free(&res);
        request_free(req);
        return;
    }
    if (req->png.format != IMAGE_JSON) {
        unsigned char *png = NULL;
        size_t len = 0;
        if (ops->draw_png(req, &res, RENDER_MAX_PIXELS, &png, &len, &pb)) {
            static const unsigned char sig[8] = {0x89, 'P',  'N',  'G',
                                                 '\r', '\n', 0x1a, '\n'};
            // an SVG: XML text within the bound measured before drawing
            static const char xml[] = "<?xml";
            if (req->png.format == IMAGE_SVG
                    ? len < sizeof xml - 1 ||
                          memcmp(png, xml, sizeof xml - 1) ||
                          len > req->png.bytes || !utf8_valid(png, len)
                    : len < 8 || memcmp(png, sig, 8))
                abort();
            free(png);
        } else {
            fuzz_check_problem(&pb);
        }
    } else {
        /* the stream borrows req and res; they are freed after it */
        struct response_stream *s = ops->encode_json(req, &res);
        if (s)
            drain_json(s);
        response_stream_free(s);
    }
    answer_result_free(&res);
    request_free(req);
}

void fuzz_answer(struct request *req, bool parsed, const struct problem *pb)
{
    if (parsed) {
        fuzz_pipeline_run(req);
        return;
    }
    fuzz_check_problem(pb);
    request_free(req);
}
