/*
 * test_openapi.c - the OpenAPI document against the field table: every
 * field is documented where it may be sent, with the table's type,
 * default and range (for the default flags), and nothing else is.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "family.h"
#include "models.h"
#include "routes.h"
#include "options.h"
#include "request_fields.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char openapi_json[];

static cJSON *doc;

static int setup(void **state)
{
    (void)state;
    doc = cJSON_Parse(openapi_json);
    return doc ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    cJSON_Delete(doc);
    return 0;
}

static const cJSON *at(const cJSON *v, const char *key)
{
    const cJSON *child = cJSON_GetObjectItemCaseSensitive(v, key);
    if (!child)
        fail_msg("openapi.json lacks \"%s\"", key);
    return child;
}

static const cJSON *schema(const char *name)
{
    return at(at(at(doc, "components"), "schemas"), name);
}

/* A parameter, its $ref followed. */
static const cJSON *parameter(const cJSON *p)
{
    const cJSON *ref = cJSON_GetObjectItem(p, "$ref");
    if (!ref)
        return p;
    const char *name = strrchr(ref->valuestring, '/') + 1;
    return at(at(at(doc, "components"), "parameters"), name);
}

/* The documented schema of field f as sent in (body or query), or NULL. */
static const cJSON *documented(const struct request_field *f, bool in_body,
                               const char *method)
{
    if (in_body)
        return cJSON_GetObjectItem(at(schema("AttentionRequest"), "properties"),
                                   f->name);
    const cJSON *params =
        at(at(at(at(doc, "paths"), "/attention"), method), "parameters");
    const cJSON *p;
    cJSON_ArrayForEach(p, params)
    {
        const cJSON *resolved = parameter(p);
        if (!strcmp(at(resolved, "name")->valuestring, f->name))
            return at(resolved, "schema");
    }
    return NULL;
}

/* The query parameters of a method (headers such as If-None-Match are
 * parameters too, but not fields). */
static size_t count_params(const char *method)
{
    size_t n = 0;
    const cJSON *p;
    cJSON_ArrayForEach(
        p, at(at(at(at(doc, "paths"), "/attention"), method), "parameters"))
        n += !strcmp(at(parameter(p), "in")->valuestring, "query");
    return n;
}

static void check_schema(const struct request_field *f, const cJSON *s,
                         const struct request_limits *lim, const char *where)
{
    /* A URL carries a context as its sentence and a seed as its digits:
     * their JSON forms are the body's. */
    if (!strcmp(where, "GET") &&
        (f->kind == FIELD_CONTEXT || f->kind == FIELD_SEED))
        return;
    const cJSON *type = cJSON_GetObjectItem(s, "type");
    /* fields of more than one form are documented by oneOf or $ref */
    if (f->type && type && strcmp(type->valuestring, f->type))
        fail_msg("%s (%s): documented type %s, the table says %s", f->name,
                 where, type ? type->valuestring : "(none)", f->type);
    const cJSON *dflt = cJSON_GetObjectItem(s, "default");
    if (f->default_json) {
        cJSON *want = cJSON_Parse(f->default_json);
        if (!dflt || !cJSON_Compare(want, dflt, true))
            fail_msg("%s (%s): documented default differs from %s", f->name,
                     where, f->default_json);
        cJSON_Delete(want);
    }
    const cJSON *with_model = cJSON_GetObjectItem(s, "x-with-model");
    if (!with_model ||
        strcmp(with_model->valuestring, request_field_models_name(f->models)))
        fail_msg("%s (%s): x-with-model is %s, the table says %s", f->name,
                 where, with_model ? with_model->valuestring : "(none)",
                 request_field_models_name(f->models));
    if (f->kind == FIELD_SIZE) {
        const cJSON *lo = cJSON_GetObjectItem(s, "minimum");
        const cJSON *hi = cJSON_GetObjectItem(s, "maximum");
        if (!lo || !hi || (size_t)lo->valuedouble != f->min ||
            (size_t)hi->valuedouble != request_field_max(f, lim))
            fail_msg("%s (%s): documented range differs from %zu to %zu",
                     f->name, where, f->min, request_field_max(f, lim));
    }
    if (f->kind == FIELD_ENUM) {
        const cJSON *names = cJSON_GetObjectItem(s, "enum");
        if (!names)
            fail_msg("%s (%s): no enum documented", f->name, where);
        for (int i = 0; f->value_name(i); i++) {
            bool found = false;
            const cJSON *n;
            cJSON_ArrayForEach(n, names) found =
                found || !strcmp(n->valuestring, f->value_name(i));
            if (!found)
                fail_msg("%s (%s): \"%s\" is not documented", f->name, where,
                         f->value_name(i));
        }
    }
}

static void test_fields_are_documented(void **state)
{
    (void)state;
    struct options o;
    char *argv[] = {"attnd", NULL};
    assert_int_equal(options_load(&o, 1, argv, stdout, stderr), OPTIONS_RUN);
    const struct request_limits lim = {.max_tokens = o.max_tokens,
                                       .max_dim = o.max_dim,
                                       .max_heads = o.max_heads,
                                       .max_output = o.max_output};
    size_t body = 0, query = 0, png = 0;
    for (size_t i = 0; i < request_field_count; i++) {
        const struct request_field *f = &request_fields[i];
        const cJSON *in_body = documented(f, true, "post");
        const cJSON *in_get = documented(f, false, "get");
        const cJSON *in_post = documented(f, false, "post");
        if (!!in_body != !!(f->where & FIELD_IN_BODY))
            fail_msg("%s: the body %s it, the table %s", f->name,
                     in_body ? "documents" : "does not document",
                     f->where & FIELD_IN_BODY ? "takes it" : "does not");
        if (!!in_get != !!(f->where & FIELD_IN_QUERY))
            fail_msg("%s: GET %s it, the table %s", f->name,
                     in_get ? "documents" : "does not document",
                     f->where & FIELD_IN_QUERY ? "takes it" : "does not");
        if (!!in_post != (f->kind == FIELD_PNG))
            fail_msg("%s: POST's URL %s it", f->name,
                     in_post ? "documents" : "does not document");
        if (in_body)
            check_schema(f, in_body, &lim, "body"), body++;
        if (in_get)
            check_schema(f, in_get, &lim, "GET"), query++;
        if (f->kind == FIELD_PNG)
            png++;
    }
    /* and nothing the table does not have */
    assert_int_equal(
        cJSON_GetArraySize(at(schema("AttentionRequest"), "properties")),
        (int)body);
    assert_int_equal(count_params("get"), query);
    assert_int_equal(count_params("post"), png);
}

/* The echo's keys are the echoed fields and the resolved shape. */
static void test_config_echo_is_documented(void **state)
{
    (void)state;
    const cJSON *props = at(schema("Config"), "properties");
    /* the shape, and what the mask row, the shape and the model row
     * write besides (a decoder's family, head size and windows) */
    const char *shape[] = {
        "batch",   "tokens",       "context_tokens", "d_context",
        "d_value", "keys",         "mask_form",      "layers",
        "hidden",  "intermediate", "max_positions",  "activation",
        "family",  "head_dim",     "sliding_window", "layer_windows"};
    size_t echoed = sizeof shape / sizeof shape[0];
    for (size_t i = 0; i < echoed; i++)
        at(props, shape[i]);
    for (size_t i = 0; i < request_field_count; i++)
        if (request_fields[i].echo) {
            at(props, request_fields[i].name);
            echoed++;
        }
    assert_int_equal(cJSON_GetArraySize(props), (int)echoed);
}

static void test_config_route_is_documented(void **state)
{
    (void)state;
    at(at(at(doc, "paths"), "/config"), "get");
    const cJSON *fields =
        at(at(schema("FieldsDocument"), "properties"), "fields");
    assert_non_null(fields);
}

/* GET /models: every key a loaded model is described by is documented,
 * and nothing else. */
/* GET /models's list of decoder families is the table's: a row added
 * without its name there, or a name left after its row, fails here. */
static void test_families_are_documented(void **state)
{
    (void)state;
    const cJSON *names =
        at(at(at(at(at(at(schema("ModelsDocument"), "properties"), "models"),
                    "items"),
                 "properties"),
              "family"),
           "enum");
    size_t decoders = 0;
    for (size_t i = 0; i < family_table.count; i++) {
        const struct family *f = family_table.row[i];
        if (!f->decoder)
            continue;
        decoders++;
        bool listed = false;
        const cJSON *name;
        cJSON_ArrayForEach(name, names) listed |=
            !strcmp(name->valuestring, f->model_type);
        if (!listed)
            fail_msg("openapi.json's families lack '%s'", f->model_type);
    }
    if ((size_t)cJSON_GetArraySize(names) != decoders)
        fail_msg("openapi.json lists %d families, the table has %zu decoders",
                 cJSON_GetArraySize(names), decoders);
}

static void test_models_route_is_documented(void **state)
{
    (void)state;
    at(at(at(doc, "paths"), "/models"), "get");
    const cJSON *props = at(
        at(at(at(schema("ModelsDocument"), "properties"), "models"), "items"),
        "properties");
    // an encoder's entry and a decoder's: every key of each documented,
    // every documented key in one of them
    const struct options_list specs = {
        .item = {"f32=tests/models/f32", "llama=tests/models/llama3"},
        .count = 2};
    struct models set = {0};
    char err[512];
    if (!models_load(&set, &specs, err, sizeof err))
        fail_msg("%s", err);
    size_t len = 0;
    char *text = models_document(&set, &len);
    cJSON *answer = cJSON_ParseWithLength(text, len);
    const cJSON *prop;
    cJSON_ArrayForEach(prop, props)
    {
        bool seen = false;
        const cJSON *model;
        cJSON_ArrayForEach(model, cJSON_GetObjectItem(answer, "models")) seen |=
            cJSON_GetObjectItem(model, prop->string) != NULL;
        if (!seen)
            fail_msg("/models never gives the documented %s", prop->string);
    }
    const cJSON *model;
    cJSON_ArrayForEach(model, cJSON_GetObjectItem(answer, "models"))
    {
        const cJSON *k;
        cJSON_ArrayForEach(k, model) at(props, k->string);
    }
    cJSON_Delete(answer);
    free(text);
    models_free(&set);
}

/* Every route of the table is a path of the document, with its method
 * (a path ending in "/" is the one before it with an id); static files
 * are the page's. */
static void test_routes_are_documented(void **state)
{
    (void)state;
    size_t n = 0;
    const struct route *r = route_table(&n);
    for (size_t i = 0; i < n; i++) {
        if (!r[i].path)
            continue;
        char path[128], method[16];
        snprintf(path, sizeof path, "%s", r[i].path);
        if (strlen(path) > 1 && path[strlen(path) - 1] == '/')
            path[strlen(path) - 1] = 0;
        for (size_t k = 0; k < sizeof method && r[i].method[k]; k++)
            method[k] = (char)(r[i].method[k] - 'A' + 'a');
        method[strlen(r[i].method)] = 0;
        at(at(at(doc, "paths"), path), method);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_route_is_documented),
        cmocka_unit_test(test_families_are_documented),
        cmocka_unit_test(test_fields_are_documented),
        cmocka_unit_test(test_config_echo_is_documented),
        cmocka_unit_test(test_config_route_is_documented),
        cmocka_unit_test(test_routes_are_documented),
    };
    return cmocka_run_group_tests_name("openapi", tests, setup, teardown);
}
