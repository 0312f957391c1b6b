/*
 * jinja.c - the interpreter's entry points: compile (normalize, lex,
 * parse, everything resolved) and render (the context as variables, the
 * statements run within the caller's limits, every value freed).
 */
#include "jinja_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jinja_template *jinja_compile(const char *src, size_t len,
                                     jinja_status *status,
                                     struct jinja_error *err)
{
    struct jinja_error local;
    if (!err)
        err = &local;
    memset(err, 0, sizeof *err);
    jinja_status st = JINJA_E_NOMEM;
    struct jtokens tokens = {0};
    if (len > JINJA_MAX_SOURCE) {
        snprintf(err->message, sizeof err->message,
                 "template of %zu bytes, longer than %zu", len,
                 JINJA_MAX_SOURCE);
        if (status)
            *status = JINJA_E_SYNTAX;
        return NULL;
    }
    struct jinja_template *t = calloc(1, sizeof *t);
    if (!t)
        goto fail;
    t->src = jinja_normalize(src ? src : "", src ? len : 0, &t->len);
    if (!t->src)
        goto fail;
    static const char *const names[JNAME_COUNT] = {[JNAME_LOOP] = "loop",
                                                   [JNAME_CALLER] = "caller",
                                                   [JNAME_VARARGS] = "varargs",
                                                   [JNAME_KWARGS] = "kwargs"};
    for (int i = 0; i < JNAME_COUNT; i++)
        if (!(t->names[i] =
                  jinja_arena_str(&t->arena, names[i], strlen(names[i]))))
            goto fail;
    st = jinja_lex(t->src, t->len, &tokens, err);
    if (st == JINJA_OK)
        st = jinja_parse(t, &tokens, err);
    free(tokens.v);
    tokens.v = NULL;
    if (st != JINJA_OK)
        goto fail;
    if (status)
        *status = JINJA_OK;
    return t;
fail:
    free(tokens.v);
    if (st == JINJA_E_NOMEM && !err->message[0])
        snprintf(err->message, sizeof err->message,
                 "out of memory compiling the template");
    if (status)
        *status = st;
    jinja_free(t);
    return NULL;
}

void jinja_free(struct jinja_template *t)
{
    if (!t)
        return;
    jinja_arena_free(t->arena);
    free(t->src);
    free(t);
}

static size_t or_default(size_t v, size_t dflt)
{
    return v ? v : dflt;
}

jinja_status jinja_render(const struct jinja_template *t, const cJSON *context,
                          const struct jinja_limits *limits, time_t now,
                          char **out, size_t *out_len, struct jinja_error *err)
{
    struct jinja_error local;
    if (!err)
        err = &local;
    memset(err, 0, sizeof *err);
    *out = NULL;
    if (out_len)
        *out_len = 0;
    const struct jinja_limits none = {0};
    if (!limits)
        limits = &none;
    struct jbuf output = {.is_output = true};
    struct jctx c = {
        .t = t,
        .err = err,
        .max_output = or_default(limits->max_output, JINJA_DEFAULT_OUTPUT),
        .max_steps = or_default(limits->max_steps, JINJA_DEFAULT_STEPS),
        .max_depth = or_default(limits->max_depth, JINJA_DEFAULT_DEPTH),
        .max_bytes = or_default(limits->max_bytes, JINJA_DEFAULT_BYTES),
        .now = now,
        .out = &output,
    };
    /* C's stack holds the nesting, whatever the caller asks */
    if (c.max_depth > JINJA_HARD_DEPTH)
        c.max_depth = JINJA_HARD_DEPTH;
    if (!t)
        return jinja_fail(&c, NULL, JINJA_E_RUNTIME, "no template");
    jinja_status st = jinja_scope_push(&c, NULL);
    if (st != JINJA_OK)
        return st;
    if (context && !cJSON_IsNull(context)) {
        if (!cJSON_IsObject(context)) {
            st = jinja_fail(&c, NULL, JINJA_E_RUNTIME,
                            "the context is not a JSON object");
        } else {
            jv vars;
            st = jinja_from_json(&c, context, &vars);
            if (st == JINJA_OK) {
                jv old = jv_dict(c.scope->vars);
                jv_drop(&c, &old);
                c.scope->vars = vars.u.d;
            }
        }
    }
    if (st == JINJA_OK)
        st = jinja_exec(&c, t->body);
    jinja_scope_pop(&c, NULL);
    while (c.kept) {
        struct jscope *s = c.kept;
        c.kept = s->next_kept;
        jv vars = jv_dict(s->vars);
        jv_drop(&c, &vars);
        jinja_release(&c, s, sizeof *s);
    }
    if (st != JINJA_OK) {
        jbuf_free(&c, &output);
        return st;
    }
    if (!output.data) {
        output.data = malloc(1);
        if (!output.data)
            return jinja_fail(&c, NULL, JINJA_E_NOMEM, "out of memory");
        output.data[0] = '\0';
    }
    *out = output.data;
    if (out_len)
        *out_len = output.len;
    return JINJA_OK;
}
