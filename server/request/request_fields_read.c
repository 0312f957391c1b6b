/*
 * request_fields_read.c - a request's scalar fields read by the field
 * table (request_fields.h), from a JSON body or from a URL's text.
 */
#include "request_fields.h"
#include "jsonin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rows the table's own reader fills, at their offset. */
static bool is_scalar(const struct request_field *f)
{
    return f->kind == FIELD_SIZE || f->kind == FIELD_BOOL ||
           f->kind == FIELD_FLOAT || f->kind == FIELD_SEED ||
           f->kind == FIELD_ENUM;
}

static bool read_scalar(struct request *req, const struct request_field *f,
                        const cJSON *v, const struct request_limits *lim,
                        struct problem *pb)
{
    char *at = (char *)req + f->offset;
    struct jpath path;
    jpath_root(&path, f->name);
    switch (f->kind) {
    case FIELD_SIZE: {
        size_t value;
        if (!jsonin_size(v, &path, f->min, request_field_max(f, lim), &value,
                         pb))
            return false;
        *(size_t *)(void *)at = value;
        return true;
    }
    case FIELD_BOOL: return jsonin_bool(v, &path, (bool *)(void *)at, pb);
    case FIELD_FLOAT: {
        float value;
        if (!jsonin_float(v, &path, &value, pb))
            return false;
        if (f->max > f->min &&
            !(value >= (float)f->min && value < (float)f->max))
            return problem_set(pb, 422, f->pointer,
                               "%s (%.9g) must be at least %zu and below %zu",
                               f->name, (double)value, f->min, f->max);
        *(float *)(void *)at = value;
        return true;
    }
    case FIELD_SEED: return jsonin_u64(v, &path, (uint64_t *)(void *)at, pb);
    case FIELD_ENUM: {
        const char *names[8];
        int which;
        if (!jsonin_enum(v, &path, names, request_field_enum_names(f, names),
                         &which, pb))
            return false;
        *(int *)(void *)at = which;
        return true;
    }
    default: return true;
    }
}

bool request_fields_read(struct request *req, const cJSON *root,
                         const struct request_limits *lim, struct problem *pb)
{
    // the body's members looked up in the table, then read in the table's
    // order; of a name given twice, the first (as cJSON looks one up)
    const cJSON *found[REQUEST_FIELDS_MOST] = {0};
    for (const cJSON *v = root ? root->child : NULL; v; v = v->next) {
        const struct request_field *f =
            v->string ? request_field_find(v->string) : NULL;
        if (f && !found[request_field_index(f)])
            found[request_field_index(f)] = v;
    }
    for (size_t i = 0; i < request_field_count; i++) {
        const struct request_field *f = &request_fields[i];
        const cJSON *v = found[i];
        if (!v || !(f->where & FIELD_IN_BODY))
            continue;
        req->given |= (uint64_t)1 << i;
        if (is_scalar(f) && !read_scalar(req, f, v, lim, pb))
            return false;
    }
    return true;
}

bool request_bool_from_text(const char *text, bool *out)
{
    if (!strcmp(text, "true") || !strcmp(text, "1"))
        *out = true;
    else if (!strcmp(text, "false") || !strcmp(text, "0"))
        *out = false;
    else
        return false;
    return true;
}

bool request_field_is_text(const struct request_field *f)
{
    return f->kind == FIELD_CONTEXT ||
           jsonin_is_text(request_texts, f->pointer);
}

cJSON *request_field_from_query(const struct request_field *f,
                                const char *value, size_t len,
                                struct problem *pb)
{
    char *end = NULL;
    if (f->kind == FIELD_CONTEXT) {
        cJSON *ctx = cJSON_CreateObject();
        cJSON *s = ctx ? jsonin_text_create(value, len) : NULL;
        if (!s || !cJSON_AddItemToObject(ctx, "sentence", s)) {
            cJSON_Delete(s);
            cJSON_Delete(ctx);
            ctx = NULL;
        }
        return ctx;
    }
    if (request_field_is_text(f))
        return jsonin_text_create(value, len);
    switch (f->kind) {
    case FIELD_LAYER: /* "all", or a number as the body has it */
        if (!strcmp(value, "all"))
            return cJSON_CreateString(value);
        /* fall through */
    case FIELD_SIZE:
    case FIELD_FLOAT: {
        const double d = strtod(value, &end);
        if (!*value || *end) {
            problem_set(pb, 422, f->pointer, "%s (\"%.40s\") must be a number",
                        f->name, value);
            return NULL;
        }
        return cJSON_CreateNumber(d);
    }
    case FIELD_BOOL: {
        bool on;
        if (request_bool_from_text(value, &on))
            return cJSON_CreateBool(on);
        problem_set(pb, 422, f->pointer, "%s (\"%.40s\") must be true or false",
                    f->name, value);
        return NULL;
    }
    case FIELD_RETURN: {
        cJSON *arr = cJSON_CreateArray();
        const char *p = value;
        while (arr && *p) {
            const char *comma = strchr(p, ',');
            const size_t n = comma ? (size_t)(comma - p) : strlen(p);
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), p);
            if (n && !cJSON_AddItemToArray(arr, cJSON_CreateString(name))) {
                cJSON_Delete(arr);
                return NULL;
            }
            p += n + (comma ? 1 : 0);
        }
        return arr;
    }
    default: /* names, the sentence, the seed's digits: as strings */
        return cJSON_CreateString(value);
    }
}
