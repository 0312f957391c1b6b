/*
 * request_query.c - a request from a URL: GET parameters become the JSON
 * object the body would be (by the field table), and the parameters that
 * shape an image answer (format, head, view, batch, colormap, cell,
 * labels, special, color_scale, pool, pool_size) are read for GET and POST
 * alike.
 */
#include "jsonin.h"
#include "request_fields.h"
#include "request_steps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool request_is_png_param(const char *key)
{
    const struct request_field *f = request_field_find(key);
    return f && f->kind == FIELD_PNG;
}

bool request_query_values_ok(const struct request_param *p,
                             const size_t *value_len, size_t n,
                             struct problem *pb)
{
    for (size_t i = 0; i < n; i++) {
        const struct request_field *f = request_field_find(p[i].key);
        if (!memchr(p[i].value, 0, value_len[i]) ||
            (f && request_field_is_text(f)))
            continue;
        char shown[256];
        jsonin_show_text(p[i].value, value_len[i], shown, sizeof shown);
        char at[80];
        snprintf(at, sizeof at, "/%.70s", p[i].key);
        return problem_set(pb, 422, at,
                           "%.60s (%s) holds a NUL character (%%00), which "
                           "only a text a tokenizer reads may hold "
                           "(sentence, sentence_b, context)",
                           p[i].key, shown);
    }
    return true;
}

bool request_parse_query(struct request *req, const struct request_param *p,
                         size_t n, const struct request_limits *lim,
                         struct problem *pb)
{
    return request_parse_query_n(req, p, NULL, n, lim, pb);
}

bool request_parse_query_n(struct request *req, const struct request_param *p,
                           const size_t *value_len, size_t n,
                           const struct request_limits *lim, struct problem *pb)
{
    if (value_len && !request_query_values_ok(p, value_len, n, pb))
        return false;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return problem_set(pb, 503, "", "out of memory");
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        const struct request_field *f = request_field_find(p[i].key);
        const size_t len = value_len ? value_len[i] : strlen(p[i].value);
        if (f && f->kind == FIELD_PNG)
            continue;
        if (!f || !(f->where & FIELD_IN_QUERY)) {
            char at[80];
            snprintf(at, sizeof at, "/%.70s", p[i].key);
            ok = problem_set(pb, 422, at,
                             !f ? "unknown query parameter \"%.60s\""
                                : "query parameter \"%.60s\" is only "
                                  "accepted in a JSON body (POST)",
                             p[i].key);
            break;
        }
        if (cJSON_GetObjectItemCaseSensitive(root, p[i].key)) {
            ok = problem_set(pb, 422, "",
                             "query parameter \"%.60s\" is given twice",
                             p[i].key);
            break;
        }
        problem_set(pb, 503, "", "out of memory");
        cJSON *v = request_field_from_query(f, p[i].value, len, pb);
        ok = v && cJSON_AddItemToObject(root, p[i].key, v);
        if (v && !ok)
            cJSON_Delete(v);
    }
    if (ok)
        ok = request_decode(req, root, lim, pb);
    /* JSON pointers mean little in a URL: point at the parameter name */
    if (!ok && pb->pointer[0] == '/') {
        char *slash = strchr(pb->pointer + 1, '/');
        if (slash)
            *slash = '\0';
    }
    cJSON_Delete(root);
    return ok;
}

/* A query value that must be a whole number from 0: no sign, no space. */
static bool parse_index(const char *v, size_t *out)
{
    char *end = NULL;
    if (!*v || *v == '-' || *v == '+')
        return false;
    const unsigned long long u = strtoull(v, &end, 10);
    if (*end)
        return false;
    *out = (size_t)u;
    return true;
}

/* The index of v among the names of f (an enum row), or -1. */
static int enum_index(const struct request_field *f, const char *v)
{
    for (int i = 0; f->value_name(i); i++)
        if (!strcmp(v, f->value_name(i)))
            return i;
    return -1;
}

/* One PNG option; f is its row, v its text. */
static bool read_png_option(struct request_png *png,
                            const struct request_field *f, const char *v,
                            struct problem *pb)
{
    const char *k = f->name;
    if (!strcmp(k, "format")) /* its names quoted, as the others here */
        return image_format_parse(v, "\"", &png->format, pb);
    if (!strcmp(k, "pool")) {
        static const enum request_pool pools[] = {POOL_AUTO, POOL_NONE,
                                                  POOL_MAX, POOL_MEAN};
        const int i = enum_index(f, v);
        if (i < 0)
            return problem_set(pb, 422, f->pointer,
                               "pool (\"%.40s\") must be \"auto\", \"none\", "
                               "\"max\" or \"mean\"",
                               v);
        png->pool = pools[i];
        return true;
    }
    if (!strcmp(k, "pool_size")) {
        size_t size;
        if (!parse_index(v, &size) || size < f->min || size > f->max)
            return problem_set(pb, 422, f->pointer,
                               "pool_size (\"%.40s\") must be a number of "
                               "tokens a block from %zu to %zu",
                               v, f->min, f->max);
        png->pool_size = size;
        return true;
    }
    if (!strcmp(k, "head")) {
        if (!strcmp(v, "mean") || !strcmp(v, "all")) {
            png->head_kind = v[0] == 'm' ? HEAD_MEAN : HEAD_ALL;
            return true;
        }
        if (!parse_index(v, &png->head))
            return problem_set(pb, 422, f->pointer,
                               "head (\"%.40s\") must be a head number from "
                               "0, \"mean\" or \"all\"",
                               v);
        png->head_kind = HEAD_ONE;
        return true;
    }
    if (!strcmp(k, "batch")) {
        if (!parse_index(v, &png->batch))
            return problem_set(pb, 422, f->pointer,
                               "batch (\"%.40s\") must be a sequence number "
                               "from 0",
                               v);
        return true;
    }
    if (!strcmp(k, "view")) {
        static const enum request_view views[] = {VIEW_HEADS, VIEW_MODEL,
                                                  VIEW_ROLLOUT};
        for (int i = 0; f->value_name(i); i++)
            if (!strcmp(v, f->value_name(i))) {
                png->view = views[i];
                return true;
            }
        return problem_set(pb, 422, f->pointer,
                           "view (\"%.40s\") must be \"heads\", \"model\" or "
                           "\"rollout\"",
                           v);
    }
    if (!strcmp(k, "special") || !strcmp(k, "color_scale")) {
        const int i = enum_index(f, v);
        if (i < 0)
            return problem_set(pb, 422, f->pointer,
                               "%s (\"%.40s\") must be \"%s\" or \"%s\"", k, v,
                               f->value_name(0), f->value_name(1));
        if (!strcmp(k, "special")) /* show, hide */
            png->special = i == 1 ? SPECIAL_HIDE : SPECIAL_SHOW;
        else /* shared, tile */
            png->color_scale = i == 1 ? SCALE_TILE : SCALE_SHARED;
        return true;
    }
    if (!strcmp(k, "colormap")) {
        // weights are never negative: the diverging map is for signed
        // effects (/patch), whose middle colour is 0
        if (!heatmap_colormap_parse(v, &png->colormap) ||
            png->colormap == HEATMAP_DIVERGING)
            return problem_set(pb, 422, f->pointer,
                               "colormap (\"%.40s\") must be \"viridis\", "
                               "\"magma\" or \"gray\"",
                               v);
        return true;
    }
    if (!strcmp(k, "cell")) {
        size_t cell;
        if (!parse_index(v, &cell) || cell < f->min || cell > f->max)
            return problem_set(pb, 422, f->pointer,
                               "cell (\"%.40s\") must be a number of pixels "
                               "from %zu to %zu",
                               v, f->min, f->max);
        png->cell = (unsigned)cell;
        return true;
    }
    if (!request_bool_from_text(v, &png->labels)) /* "labels" */
        return problem_set(pb, 422, f->pointer,
                           "labels (\"%.40s\") must be true or false", v);
    return true;
}

bool request_parse_image(struct request *req, const struct request_param *p,
                         size_t n, enum image_format accepted,
                         struct problem *pb)
{
    req->png.format = accepted;
    for (size_t i = 0; i < n; i++) {
        const struct request_field *f = request_field_find(p[i].key);
        if (!f || f->kind != FIELD_PNG)
            continue;
        if (!read_png_option(&req->png, f, p[i].value, pb))
            return false;
        req->given |= (uint64_t)1 << request_field_index(f);
    }
    if (req->png.pool == POOL_NONE && req->png.pool_size)
        return problem_set(pb, 422, "/pool_size",
                           "pool_size (%zu) is the size of a block of a "
                           "pooled image; pool=none pools nothing",
                           req->png.pool_size);
    return true;
}

void request_pool_block(const struct request_png *o, size_t n, size_t m,
                        size_t *k_out, enum heatmap_pool *kind_out)
{
    const size_t side = n > m ? n : m;
    size_t k = 1;
    enum heatmap_pool kind = HEATMAP_POOL_MAX;
    switch (o->pool) {
    case POOL_NONE: break;
    case POOL_AUTO:
        if (o->pool_size)
            k = o->pool_size;
        else if (side > HEATMAP_POOL_AUTO_SIDE)
            k = heatmap_pool_size(n, m);
        break;
    case POOL_MAX:
    case POOL_MEAN:
        kind = o->pool == POOL_MEAN ? HEATMAP_POOL_MEAN : HEATMAP_POOL_MAX;
        k = o->pool_size ? o->pool_size : heatmap_pool_size(n, m);
        break;
    }
    /* a block as long as the input is the whole input: one block */
    if (k > side)
        k = side;
    *k_out = k ? k : 1;
    *kind_out = *k_out > 1 ? kind : HEATMAP_POOL_NONE;
}
