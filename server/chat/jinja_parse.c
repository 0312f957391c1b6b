/*
 * jinja_parse.c - statements: the tokens of a template as a tree of
 * text, {{ output }} and the tags of the subset (for, if, set, macro,
 * call, filter, break, continue, generation). Any other statement is
 * refused here, naming it and where it is.
 */
#include "jinja_parser.h"

#include <stdio.h>
#include <string.h>

bool jinja_tok_is(const struct parser *p, const struct jtok *t, int kind,
                  const char *text)
{
    if (t->kind != kind)
        return false;
    const size_t n = strlen(text);
    return t->len == n && memcmp(p->src + t->off, text, n) == 0;
}

jinja_status jinja_parse_fail(struct parser *p, const struct jtok *at,
                              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    jinja_error_set(p->err, at->line, at->col, fmt, ap);
    va_end(ap);
    return JINJA_E_SYNTAX;
}

void jinja_tok_describe(const struct parser *p, const struct jtok *t, char *out,
                        size_t size)
{
    switch (t->kind) {
    case JT_EOF: snprintf(out, size, "end of template"); break;
    case JT_TEXT: snprintf(out, size, "template text"); break;
    case JT_VAR_BEGIN: snprintf(out, size, "'{{'"); break;
    case JT_VAR_END: snprintf(out, size, "end of print statement '}}'"); break;
    case JT_BLOCK_BEGIN: snprintf(out, size, "'{%%'"); break;
    case JT_BLOCK_END: snprintf(out, size, "end of statement '%%}'"); break;
    case JT_STRING: snprintf(out, size, "string literal"); break;
    default:
        snprintf(out, size, "'%.*s'", t->len > 32 ? 32 : (int)t->len,
                 p->src + t->off);
    }
}

jinja_status jinja_expect(struct parser *p, int kind, const char *text)
{
    const struct jtok *t = pcur(p);
    if (text ? jinja_tok_is(p, t, kind, text) : t->kind == kind) {
        padvance(p);
        return JINJA_OK;
    }
    char got[64], want[64];
    jinja_tok_describe(p, t, got, sizeof got);
    if (text)
        snprintf(want, sizeof want, "'%s'", text);
    else
        jinja_tok_describe(p, &(struct jtok){.kind = (uint8_t)kind}, want,
                           sizeof want);
    return jinja_parse_fail(p, t, "expected %s, got %s", want, got);
}

struct jnode *jinja_node(struct parser *p, int kind, const struct jtok *at)
{
    struct jnode *n = jinja_arena_alloc(&p->t->arena, sizeof *n);
    if (!n)
        return NULL;
    n->kind = (uint8_t)kind;
    n->line = at->line;
    n->col = at->col;
    n->id = n->id2 = -1;
    return n;
}

jinja_status jinja_enter(struct parser *p, const struct jtok *at)
{
    if (p->depth >= JINJA_MAX_PARSE_DEPTH)
        return jinja_parse_fail(p, at, "nesting deeper than %d",
                                JINJA_MAX_PARSE_DEPTH);
    p->depth++;
    return JINJA_OK;
}

static jinja_status nomem(struct parser *p)
{
    if (p->err)
        snprintf(p->err->message, sizeof p->err->message,
                 "out of memory compiling the template");
    return JINJA_E_NOMEM;
}

static bool is_name(const struct parser *p, const char *text)
{
    return jinja_tok_is(p, pcur(p), JT_NAME, text);
}

/* Statements until a tag named one of ends (NULL-terminated); on return
 * the current token is that name (which one in *which), or the end of
 * the template when ends is empty. */
static jinja_status parse_body(struct parser *p, const char *const *ends,
                               struct jnode **out, size_t *which);

/* ------------------------------------------------------------ targets */

static jinja_status target_name(struct parser *p, struct jnode **out)
{
    const struct jtok *t = pcur(p);
    if (t->kind != JT_NAME || is_name(p, "true") || is_name(p, "false") ||
        is_name(p, "none") || is_name(p, "True") || is_name(p, "False") ||
        is_name(p, "None")) {
        char what[64];
        jinja_tok_describe(p, t, what, sizeof what);
        return jinja_parse_fail(p, t, "cannot assign to %s", what);
    }
    struct jnode *n = jinja_node(p, JN_NAME, t);
    if (!n ||
        !(n->name = jinja_arena_str(&p->t->arena, p->src + t->off, t->len)))
        return nomem(p);
    padvance(p);
    *out = n;
    return JINJA_OK;
}

/* for's and set's targets: a name, names with commas (in parentheses or
 * not), or for a set, ns.attr. */
static jinja_status parse_target(struct parser *p, struct jnode *stmt,
                                 bool allow_attr)
{
    jinja_status st;
    struct jnode **tail = &stmt->a;
    if (jinja_tok_is(p, pcur(p), JT_OP, "(")) {
        padvance(p);
        stmt->unpack = true;
        while (!jinja_tok_is(p, pcur(p), JT_OP, ")")) {
            if (stmt->count) {
                st = jinja_expect(p, JT_OP, ",");
                if (st != JINJA_OK)
                    return st;
                if (jinja_tok_is(p, pcur(p), JT_OP, ")"))
                    break;
            }
            if (jinja_tok_is(p, pcur(p), JT_OP, "("))
                return jinja_parse_fail(p, pcur(p),
                                        "unsupported nested unpacking");
            st = target_name(p, tail);
            if (st != JINJA_OK)
                return st;
            tail = &(*tail)->next;
            stmt->count++;
        }
        padvance(p);
        if (stmt->count == 0)
            return jinja_parse_fail(p, pcur(p), "cannot assign to ()");
        return JINJA_OK;
    }
    st = target_name(p, tail);
    if (st != JINJA_OK)
        return st;
    stmt->count = 1;
    if (allow_attr && jinja_tok_is(p, pcur(p), JT_OP, ".")) {
        padvance(p);
        const struct jtok *t = pcur(p);
        if (t->kind != JT_NAME)
            return jinja_parse_fail(p, t, "expected an attribute name");
        struct jnode *attr = jinja_node(p, JN_GETATTR, t);
        if (!attr || !(attr->name = jinja_arena_str(&p->t->arena,
                                                    p->src + t->off, t->len)))
            return nomem(p);
        attr->a = stmt->a;
        stmt->a = attr;
        padvance(p);
        return JINJA_OK;
    }
    while (jinja_tok_is(p, pcur(p), JT_OP, ",")) {
        stmt->unpack = true;
        padvance(p);
        if (pcur(p)->kind != JT_NAME)
            break;
        tail = &(*tail)->next;
        st = target_name(p, tail);
        if (st != JINJA_OK)
            return st;
        stmt->count++;
    }
    return JINJA_OK;
}

/* --------------------------------------------------------- statements */

static jinja_status end_tag(struct parser *p)
{
    padvance(p); /* the end tag's name */
    return jinja_expect(p, JT_BLOCK_END, NULL);
}

static jinja_status parse_for(struct parser *p, struct jnode *n)
{
    jinja_status st = parse_target(p, n, false);
    if (st == JINJA_OK)
        st = jinja_expect(p, JT_NAME, "in");
    if (st == JINJA_OK)
        st = jinja_parse_tuple(p, false, false, &n->b);
    if (st == JINJA_OK && is_name(p, "if")) {
        padvance(p);
        st = jinja_parse_expression(p, true, &n->c);
    }
    if (st == JINJA_OK && is_name(p, "recursive"))
        return jinja_parse_fail(p, pcur(p), "unsupported recursive loop");
    if (st == JINJA_OK)
        st = jinja_expect(p, JT_BLOCK_END, NULL);
    if (st != JINJA_OK)
        return st;
    static const char *const ends[] = {"endfor", "else", NULL};
    static const char *const ends2[] = {"endfor", NULL};
    size_t which;
    p->loops++;
    st = parse_body(p, ends, &n->d, &which);
    p->loops--;
    if (st == JINJA_OK && which == 1) {
        st = end_tag(p);
        if (st == JINJA_OK)
            st = parse_body(p, ends2, &n->e, &which);
    }
    return st == JINJA_OK ? end_tag(p) : st;
}

static jinja_status parse_if(struct parser *p, struct jnode *n)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    static const char *const ends2[] = {"endif", NULL};
    /* elif chains are built in a loop, each the else of the one before,
     * marked so that a render walks them in a loop too */
    for (;;) {
        size_t which;
        jinja_status st = jinja_parse_tuple(p, false, false, &n->a);
        if (st == JINJA_OK)
            st = jinja_expect(p, JT_BLOCK_END, NULL);
        if (st == JINJA_OK)
            st = parse_body(p, ends, &n->b, &which);
        if (st != JINJA_OK)
            return st;
        if (which == 0) {
            struct jnode *elif = jinja_node(p, JN_IF, pcur(p));
            if (!elif)
                return nomem(p);
            elif->elif = true;
            n->c = elif;
            n = elif;
            padvance(p);
            continue;
        }
        if (which == 1) {
            st = end_tag(p);
            if (st == JINJA_OK)
                st = parse_body(p, ends2, &n->c, &which);
            if (st != JINJA_OK)
                return st;
        }
        return end_tag(p);
    }
}

static jinja_status parse_filters(struct parser *p, struct jnode **out)
{
    struct jnode *chain = NULL;
    for (;;) {
        const jinja_status st = jinja_parse_filter(p, chain, &chain);
        if (st != JINJA_OK)
            return st;
        if (!jinja_tok_is(p, pcur(p), JT_OP, "|"))
            break;
        padvance(p);
    }
    *out = chain;
    return JINJA_OK;
}

static jinja_status parse_set(struct parser *p, struct jnode *n)
{
    jinja_status st = parse_target(p, n, true);
    if (st != JINJA_OK)
        return st;
    if (jinja_tok_is(p, pcur(p), JT_OP, "=")) {
        padvance(p);
        st = jinja_parse_tuple(p, true, false, &n->b);
        return st == JINJA_OK ? jinja_expect(p, JT_BLOCK_END, NULL) : st;
    }
    /* {% set x %}...{% endset %}, maybe {% set x | filter %} */
    if (n->unpack)
        return jinja_parse_fail(p, pcur(p), "a block set takes one name");
    n->kind = JN_SET_BLOCK;
    if (jinja_tok_is(p, pcur(p), JT_OP, "|")) {
        padvance(p);
        st = parse_filters(p, &n->c);
        if (st != JINJA_OK)
            return st;
    }
    st = jinja_expect(p, JT_BLOCK_END, NULL);
    static const char *const ends[] = {"endset", NULL};
    size_t which;
    if (st == JINJA_OK)
        st = parse_body(p, ends, &n->b, &which);
    return st == JINJA_OK ? end_tag(p) : st;
}

/* (a, b=1): parameters, each a name whose a is its default. */
static jinja_status parse_params(struct parser *p, struct jnode *n,
                                 struct jnode **first)
{
    jinja_status st = jinja_expect(p, JT_OP, "(");
    struct jnode **tail = first;
    bool defaults = false;
    while (st == JINJA_OK && !jinja_tok_is(p, pcur(p), JT_OP, ")")) {
        if (n->count) {
            st = jinja_expect(p, JT_OP, ",");
            if (st != JINJA_OK || jinja_tok_is(p, pcur(p), JT_OP, ")"))
                break;
        }
        const struct jtok *t = pcur(p);
        st = target_name(p, tail);
        if (st != JINJA_OK)
            return st;
        if (jinja_tok_is(p, pcur(p), JT_OP, "=")) {
            padvance(p);
            st = jinja_parse_expression(p, true, &(*tail)->a);
            defaults = true;
        } else if (defaults) {
            return jinja_parse_fail(p, t,
                                    "parameter without a default after "
                                    "one with a default");
        }
        tail = &(*tail)->next;
        n->count++;
    }
    return st == JINJA_OK ? jinja_expect(p, JT_OP, ")") : st;
}

/* A macro's or a call block's body: a scope of its own, where break and
 * continue have no loop. */
static jinja_status parse_callable_body(struct parser *p, struct jnode *n,
                                        const char *end, struct jnode **out)
{
    const char *const ends[] = {end, NULL};
    const unsigned loops = p->loops;
    struct jnode *macro = p->macro;
    p->loops = 0;
    p->macro = n;
    size_t which;
    jinja_status st = parse_body(p, ends, out, &which);
    p->loops = loops;
    p->macro = macro;
    return st == JINJA_OK ? end_tag(p) : st;
}

static jinja_status parse_macro(struct parser *p, struct jnode *n)
{
    const struct jtok *t = pcur(p);
    if (t->kind != JT_NAME)
        return jinja_parse_fail(p, t, "expected a macro name");
    if (!(n->name = jinja_arena_str(&p->t->arena, p->src + t->off, t->len)))
        return nomem(p);
    padvance(p);
    jinja_status st = parse_params(p, n, &n->a);
    if (st == JINJA_OK)
        st = jinja_expect(p, JT_BLOCK_END, NULL);
    return st == JINJA_OK ? parse_callable_body(p, n, "endmacro", &n->b) : st;
}

static jinja_status parse_call_block(struct parser *p, struct jnode *n)
{
    jinja_status st = JINJA_OK;
    if (jinja_tok_is(p, pcur(p), JT_OP, "("))
        st = parse_params(p, n, &n->b);
    const struct jtok *t = pcur(p);
    if (st == JINJA_OK)
        st = jinja_parse_expression(p, true, &n->a);
    if (st == JINJA_OK && n->a->kind != JN_CALL)
        return jinja_parse_fail(p, t, "expected a call after 'call'");
    if (st == JINJA_OK)
        st = jinja_expect(p, JT_BLOCK_END, NULL);
    return st == JINJA_OK ? parse_callable_body(p, n, "endcall", &n->c) : st;
}

static jinja_status parse_statement(struct parser *p, struct jnode **out)
{
    const struct jtok *t = pcur(p);
    if (t->kind != JT_NAME) {
        char what[64];
        jinja_tok_describe(p, t, what, sizeof what);
        return jinja_parse_fail(p, t, "expected a statement name, got %s",
                                what);
    }
    static const struct {
        const char *name;
        int kind;
    } kinds[] = {{"for", JN_FOR},          {"if", JN_IF},
                 {"set", JN_SET},          {"macro", JN_MACRO},
                 {"call", JN_CALL_BLOCK},  {"filter", JN_FILTER_BLOCK},
                 {"generation", JN_BLOCK}, {"break", JN_BREAK},
                 {"continue", JN_CONTINUE}};
    int kind = -1;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (jinja_tok_is(p, t, JT_NAME, kinds[i].name))
            kind = kinds[i].kind;
    if (kind < 0) {
        static const char *const ends[] = {
            "endfor",   "endif",   "elif",      "else",          "endset",
            "endmacro", "endcall", "endfilter", "endgeneration", "endraw"};
        for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++)
            if (jinja_tok_is(p, t, JT_NAME, ends[i]))
                return jinja_parse_fail(p, t, "unexpected '%s'", ends[i]);
        return jinja_parse_fail(p, t, "unsupported statement '%.*s'",
                                t->len > 64 ? 64 : (int)t->len,
                                p->src + t->off);
    }
    struct jnode *n = jinja_node(p, kind, t);
    if (!n)
        return nomem(p);
    *out = n;
    padvance(p);
    jinja_status st = jinja_enter(p, t);
    if (st != JINJA_OK)
        return st;
    switch (kind) {
    case JN_FOR: st = parse_for(p, n); break;
    case JN_IF: st = parse_if(p, n); break;
    case JN_SET: st = parse_set(p, n); break;
    case JN_MACRO: st = parse_macro(p, n); break;
    case JN_CALL_BLOCK: st = parse_call_block(p, n); break;
    case JN_FILTER_BLOCK: {
        static const char *const ends[] = {"endfilter", NULL};
        size_t which;
        st = parse_filters(p, &n->a);
        if (st == JINJA_OK)
            st = jinja_expect(p, JT_BLOCK_END, NULL);
        if (st == JINJA_OK)
            st = parse_body(p, ends, &n->b, &which);
        if (st == JINJA_OK)
            st = end_tag(p);
        break;
    }
    case JN_BLOCK: {
        static const char *const ends[] = {"endgeneration", NULL};
        size_t which;
        st = jinja_expect(p, JT_BLOCK_END, NULL);
        if (st == JINJA_OK)
            st = parse_body(p, ends, &n->a, &which);
        if (st == JINJA_OK)
            st = end_tag(p);
        break;
    }
    default: /* break, continue */
        if (!p->loops)
            st = jinja_parse_fail(p, t, "'%s' outside a loop",
                                  kind == JN_BREAK ? "break" : "continue");
        else
            st = jinja_expect(p, JT_BLOCK_END, NULL);
    }
    p->depth--;
    return st;
}

static jinja_status parse_body(struct parser *p, const char *const *ends,
                               struct jnode **out, size_t *which)
{
    const struct jtok *start = pcur(p);
    jinja_status st = jinja_enter(p, start);
    if (st != JINJA_OK)
        return st;
    struct jnode **tail = out;
    *out = NULL;
    for (;;) {
        const struct jtok *t = pcur(p);
        if (t->kind == JT_EOF) {
            if (ends[0]) {
                char want[128] = "";
                for (size_t i = 0; ends[i]; i++)
                    snprintf(want + strlen(want), sizeof want - strlen(want),
                             "%s'%s'", i ? " or " : "", ends[i]);
                return jinja_parse_fail(p, t,
                                        "unexpected end of template, "
                                        "expected %s",
                                        want);
            }
            break;
        }
        if (t->kind == JT_TEXT) {
            struct jnode *n = jinja_node(p, JN_TEXT, t);
            if (!n)
                return nomem(p);
            n->text = p->src + t->off;
            n->len = t->len;
            *tail = n;
            tail = &n->next;
            padvance(p);
            continue;
        }
        if (t->kind == JT_VAR_BEGIN) {
            padvance(p);
            struct jnode *n = jinja_node(p, JN_OUTPUT, pcur(p));
            if (!n)
                return nomem(p);
            st = jinja_parse_tuple(p, true, false, &n->a);
            if (st == JINJA_OK)
                st = jinja_expect(p, JT_VAR_END, NULL);
            if (st != JINJA_OK)
                return st;
            *tail = n;
            tail = &n->next;
            continue;
        }
        if (t->kind != JT_BLOCK_BEGIN) {
            char what[64];
            jinja_tok_describe(p, t, what, sizeof what);
            return jinja_parse_fail(p, t, "unexpected %s", what);
        }
        padvance(p);
        bool found = false;
        for (size_t i = 0; ends[i]; i++)
            if (is_name(p, ends[i])) {
                *which = i;
                found = true;
            }
        if (found)
            break;
        struct jnode *n = NULL;
        st = parse_statement(p, &n);
        if (st != JINJA_OK)
            return st;
        *tail = n;
        tail = &n->next;
    }
    p->depth--;
    return JINJA_OK;
}

jinja_status jinja_parse(struct jinja_template *t, const struct jtokens *tk,
                         struct jinja_error *err)
{
    struct parser p = {
        .t = t, .src = t->src, .tok = tk->v, .n = tk->n, .err = err};
    static const char *const none[] = {NULL};
    size_t which;
    return parse_body(&p, none, &t->body, &which);
}
