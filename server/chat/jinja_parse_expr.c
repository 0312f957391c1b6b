/*
 * jinja_parse_expr.c - expressions, with jinja2's grammar and
 * precedence, loosest first:
 *
 *   a if b else c;  or;  and;  not;  == != < <= > >= in, not in;
 *   + -;  ~;  * / // %;  ** (left to right, as jinja2 has it);
 *   unary - +;  then a primary with .attr [item] (call), |filter and
 *   "is test".
 *
 * Filters and tests are resolved here, so an unknown one is refused at
 * compile. Recursion is counted (jinja_enter()) so that no nesting of
 * brackets or operators can take the parser deep.
 */
#include "jinja_parser.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static jinja_status parse_or(struct parser *p, struct jnode **out);
static jinja_status parse_unary(struct parser *p, bool with_filter,
                                struct jnode **out);
static jinja_status parse_primary(struct parser *p, struct jnode **out);
static jinja_status parse_postfix(struct parser *p, struct jnode *node,
                                  struct jnode **out);

static bool is_op(const struct parser *p, const char *text)
{
    return jinja_tok_is(p, pcur(p), JT_OP, text);
}

static bool is_name(const struct parser *p, const char *text)
{
    return jinja_tok_is(p, pcur(p), JT_NAME, text);
}

static jinja_status nomem(struct parser *p)
{
    if (p->err)
        snprintf(p->err->message, sizeof p->err->message,
                 "out of memory compiling the template");
    return JINJA_E_NOMEM;
}

/* ----------------------------------------------------------- literals */

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = (char)(ch | 0x20);
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* The bytes of a string token, with Python's escapes read as its
 * unicode-escape codec does (jinja2 reads them so): unknown escapes are
 * kept as written. Appends to buf (of at least the token's length plus
 * room: escapes never grow). */
static jinja_status decode_string(struct parser *p, const struct jtok *t,
                                  char *buf, size_t *out_len)
{
    const char *s = p->src + t->off + 1;
    const size_t len = t->len - 2;
    size_t n = 0;
    uint32_t pending_high = 0; /* a \ud83d waiting for its \ude00 */
    for (size_t i = 0; i < len;) {
        if (s[i] != '\\' || i + 1 >= len) {
            if (pending_high) {
                n += jinja_utf8_put(0xfffd, buf + n);
                pending_high = 0;
            }
            buf[n++] = s[i++];
            continue;
        }
        const char e = s[i + 1];
        uint32_t cp = 0;
        int want = 0;
        i += 2;
        switch (e) {
        case '\n': continue;
        case '\\': cp = '\\'; break;
        case '\'': cp = '\''; break;
        case '"': cp = '"'; break;
        case 'a': cp = 7; break;
        case 'b': cp = 8; break;
        case 'f': cp = 12; break;
        case 'n': cp = 10; break;
        case 'r': cp = 13; break;
        case 't': cp = 9; break;
        case 'v': cp = 11; break;
        case 'x': want = 2; break;
        case 'u': want = 4; break;
        case 'U': want = 8; break;
        case 'N':
            return jinja_parse_fail(p, t, "\\N{...} escapes are not supported");
        default:
            if (e >= '0' && e <= '7') {
                cp = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && i < len && s[i] >= '0' && s[i] <= '7';
                     k++)
                    cp = cp * 8 + (uint32_t)(s[i++] - '0');
            } else {
                /* not an escape: both characters stay */
                buf[n++] = '\\';
                i--;
                continue;
            }
        }
        if (want) {
            for (int k = 0; k < want; k++) {
                const int h = i < len ? hexval(s[i]) : -1;
                if (h < 0)
                    return jinja_parse_fail(p, t,
                                            "truncated \\%c escape in a "
                                            "string",
                                            e);
                cp = cp * 16 + (uint32_t)h;
                i++;
            }
            if (cp > 0x10ffff)
                return jinja_parse_fail(p, t,
                                        "illegal Unicode character in "
                                        "a string");
        }
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (pending_high)
                n += jinja_utf8_put(0xfffd, buf + n);
            pending_high = cp;
            continue;
        }
        if (cp >= 0xdc00 && cp <= 0xdfff) {
            cp = pending_high
                     ? 0x10000 + ((pending_high - 0xd800) << 10) + (cp - 0xdc00)
                     : 0xfffd;
            pending_high = 0;
        } else if (pending_high) {
            n += jinja_utf8_put(0xfffd, buf + n);
            pending_high = 0;
        }
        n += jinja_utf8_put(cp, buf + n);
    }
    if (pending_high)
        n += jinja_utf8_put(0xfffd, buf + n);
    *out_len = n;
    return JINJA_OK;
}

/* Adjacent string literals are one, as in Python. */
static jinja_status parse_string(struct parser *p, struct jnode **out)
{
    const struct jtok *first = pcur(p);
    size_t total = 0, count = 0;
    while (ppeek(p, count)->kind == JT_STRING) {
        total += ppeek(p, count)->len;
        count++;
    }
    /* a \x escape (4 bytes) may become a 3-byte character and a lone
     * surrogate a U+FFFD, never more than the text */
    char *buf = malloc(total + 4);
    if (!buf)
        return nomem(p);
    size_t len = 0;
    for (size_t k = 0; k < count; k++) {
        size_t n = 0;
        const jinja_status st = decode_string(p, pcur(p), buf + len, &n);
        if (st != JINJA_OK) {
            free(buf);
            return st;
        }
        len += n;
        padvance(p);
    }
    struct jnode *node = jinja_node(p, JN_LIT, first);
    struct jstr *s = node ? jinja_arena_str(&p->t->arena, buf, len) : NULL;
    free(buf);
    if (!s)
        return nomem(p);
    node->lit = jv_str(s);
    *out = node;
    return JINJA_OK;
}

static jinja_status parse_number(struct parser *p, struct jnode **out)
{
    const struct jtok *t = pcur(p);
    char text[128];
    size_t n = 0;
    for (size_t i = 0; i < t->len; i++) {
        const char ch = p->src[t->off + i];
        if (ch == '_')
            continue;
        if (n + 1 >= sizeof text)
            return jinja_parse_fail(p, t, "number literal too long");
        text[n++] = ch;
    }
    text[n] = '\0';
    struct jnode *node = jinja_node(p, JN_LIT, t);
    if (!node)
        return nomem(p);
    if (t->kind == JT_FLOAT) {
        node->lit = jv_float(strtod(text, NULL));
    } else {
        int base = 10;
        const char *digits = text;
        if (n > 1 && text[0] == '0') {
            const char x = (char)(text[1] | 0x20);
            base = x == 'x' ? 16 : x == 'o' ? 8 : x == 'b' ? 2 : 10;
            if (base != 10)
                digits = text + 2;
        }
        errno = 0;
        char *end;
        const unsigned long long v = strtoull(digits, &end, base);
        if (errno || v > INT64_MAX)
            return jinja_parse_fail(p, t, "integer literal too large");
        node->lit = jv_int((int64_t)v);
    }
    padvance(p);
    *out = node;
    return JINJA_OK;
}

/* ---------------------------------------------------------- primaries */

static jinja_status parse_list(struct parser *p, struct jnode **out)
{
    struct jnode *node = jinja_node(p, JN_LIST, pcur(p));
    if (!node)
        return nomem(p);
    padvance(p);
    struct jnode **tail = &node->a;
    while (!is_op(p, "]")) {
        if (node->count) {
            jinja_status st = jinja_expect(p, JT_OP, ",");
            if (st != JINJA_OK)
                return st;
            if (is_op(p, "]"))
                break;
        }
        jinja_status st = jinja_parse_expression(p, true, tail);
        if (st != JINJA_OK)
            return st;
        tail = &(*tail)->next;
        node->count++;
    }
    padvance(p);
    *out = node;
    return JINJA_OK;
}

static jinja_status parse_dict(struct parser *p, struct jnode **out)
{
    struct jnode *node = jinja_node(p, JN_DICT, pcur(p));
    if (!node)
        return nomem(p);
    padvance(p);
    struct jnode **tail = &node->a;
    while (!is_op(p, "}")) {
        jinja_status st;
        if (node->count) {
            st = jinja_expect(p, JT_OP, ",");
            if (st != JINJA_OK)
                return st;
            if (is_op(p, "}"))
                break;
        }
        st = jinja_parse_expression(p, true, tail);
        if (st == JINJA_OK)
            st = jinja_expect(p, JT_OP, ":");
        if (st == JINJA_OK)
            st = jinja_parse_expression(p, true, &(*tail)->next);
        if (st != JINJA_OK)
            return st;
        tail = &(*tail)->next->next;
        node->count++;
    }
    padvance(p);
    *out = node;
    return JINJA_OK;
}

static jinja_status parse_primary(struct parser *p, struct jnode **out)
{
    const struct jtok *t = pcur(p);
    jinja_status st = jinja_enter(p, t);
    if (st != JINJA_OK)
        return st;
    switch (t->kind) {
    case JT_NAME: {
        struct jnode *node = jinja_node(p, JN_LIT, t);
        if (!node)
            return nomem(p);
        const char *s = p->src + t->off;
        if (jinja_tok_is(p, t, JT_NAME, "true") ||
            jinja_tok_is(p, t, JT_NAME, "True")) {
            node->lit = jv_bool(true);
        } else if (jinja_tok_is(p, t, JT_NAME, "false") ||
                   jinja_tok_is(p, t, JT_NAME, "False")) {
            node->lit = jv_bool(false);
        } else if (jinja_tok_is(p, t, JT_NAME, "none") ||
                   jinja_tok_is(p, t, JT_NAME, "None")) {
            node->lit = jv_none();
        } else {
            node->kind = JN_NAME;
            node->name = jinja_arena_str(&p->t->arena, s, t->len);
            if (!node->name)
                return nomem(p);
            if (p->macro && (jinja_tok_is(p, t, JT_NAME, "varargs") ||
                             jinja_tok_is(p, t, JT_NAME, "kwargs")))
                p->macro->varargs = true;
        }
        padvance(p);
        *out = node;
        break;
    }
    case JT_STRING: st = parse_string(p, out); break;
    case JT_INT:
    case JT_FLOAT: st = parse_number(p, out); break;
    case JT_OP:
        if (is_op(p, "(")) {
            padvance(p);
            st = jinja_parse_tuple(p, true, true, out);
            if (st == JINJA_OK)
                st = jinja_expect(p, JT_OP, ")");
            break;
        }
        if (is_op(p, "[")) {
            st = parse_list(p, out);
            break;
        }
        if (is_op(p, "{")) {
            st = parse_dict(p, out);
            break;
        }
        /* fall through */
    default: {
        char what[64];
        jinja_tok_describe(p, t, what, sizeof what);
        st = jinja_parse_fail(p, t, "unexpected %s", what);
    }
    }
    p->depth--;
    return st;
}

/* ---------------------------------------------------------- arguments */

/* (a, b, k=v): the '(' is current. Arguments chained from *first, with
 * kw set on keyword ones; count in *count. */
static jinja_status parse_call_args(struct parser *p, struct jnode **first,
                                    size_t *count)
{
    padvance(p);
    struct jnode **tail = first;
    bool keywords = false;
    *count = 0;
    while (!is_op(p, ")")) {
        jinja_status st;
        if (*count) {
            st = jinja_expect(p, JT_OP, ",");
            if (st != JINJA_OK)
                return st;
            if (is_op(p, ")"))
                break;
        }
        if (is_op(p, "*") || is_op(p, "**"))
            return jinja_parse_fail(p, pcur(p),
                                    "unsupported argument unpacking '%s'",
                                    is_op(p, "*") ? "*" : "**");
        const struct jtok *t = pcur(p);
        if (t->kind == JT_NAME && jinja_tok_is(p, ppeek(p, 1), JT_OP, "=")) {
            padvance(p);
            padvance(p);
            st = jinja_parse_expression(p, true, tail);
            if (st != JINJA_OK)
                return st;
            (*tail)->kw =
                jinja_arena_str(&p->t->arena, p->src + t->off, t->len);
            if (!(*tail)->kw)
                return nomem(p);
            keywords = true;
        } else {
            if (keywords)
                return jinja_parse_fail(p, t,
                                        "a positional argument after "
                                        "keyword arguments");
            st = jinja_parse_expression(p, true, tail);
            if (st != JINJA_OK)
                return st;
        }
        tail = &(*tail)->next;
        (*count)++;
        if (*count > 64)
            return jinja_parse_fail(p, t, "more than 64 arguments");
    }
    padvance(p);
    return JINJA_OK;
}

static jinja_status parse_call(struct parser *p, struct jnode *callee,
                               struct jnode **out)
{
    struct jnode *node = jinja_node(p, JN_CALL, pcur(p));
    if (!node)
        return nomem(p);
    node->a = callee;
    node->line = callee->line;
    node->col = callee->col;
    *out = node;
    return parse_call_args(p, &node->b, &node->count);
}

/* The n-th positional argument of a filter or test node, or NULL. */
static const struct jnode *positional(const struct jnode *first, size_t n)
{
    for (const struct jnode *a = first; a; a = a->next)
        if (!a->kw && n-- == 0)
            return a;
    return NULL;
}

static bool has_kw(const struct jnode *first, const char *name)
{
    for (const struct jnode *a = first; a; a = a->next)
        if (a->kw && strcmp(a->kw->s, name) == 0)
            return true;
    return false;
}

jinja_status jinja_parse_filter(struct parser *p, struct jnode *value,
                                struct jnode **out)
{
    const struct jtok *t = pcur(p);
    if (t->kind != JT_NAME)
        return jinja_parse_fail(p, t, "expected a filter name after '|'");
    struct jnode *node = jinja_node(p, JN_FILTER, t);
    if (!node)
        return nomem(p);
    node->a = value;
    node->id = (int16_t)jinja_filter_find(p->src + t->off, t->len);
    node->id2 = -1;
    if (node->id < 0)
        return jinja_parse_fail(p, t, "unknown filter '%.*s'", (int)t->len,
                                p->src + t->off);
    node->name = jinja_arena_str(&p->t->arena, p->src + t->off, t->len);
    if (!node->name)
        return nomem(p);
    padvance(p);
    if (is_op(p, "."))
        return jinja_parse_fail(p, pcur(p), "unknown filter '%.*s.'",
                                (int)t->len, p->src + t->off);
    if (is_op(p, "(")) {
        const jinja_status st = parse_call_args(p, &node->b, &node->count);
        if (st != JINJA_OK)
            return st;
    }
    /* map('upper'), select('odd'), selectattr('x', 'equalto', 1): the
     * filter or test named is resolved now too, when written out */
    const bool by_filter = jinja_filter_names_filter(node->id);
    const bool by_test = jinja_filter_names_test(node->id);
    if (by_filter || by_test) {
        const bool attr = strcmp(node->name->s, "selectattr") == 0 ||
                          strcmp(node->name->s, "rejectattr") == 0;
        const struct jnode *arg = positional(node->b, attr ? 1 : 0);
        if (by_filter && has_kw(node->b, "attribute"))
            arg = NULL;
        if (arg && arg->kind == JN_LIT && arg->lit.kind == JV_STR) {
            const struct jstr *s = arg->lit.u.s;
            node->id2 = (int16_t)(by_filter ? jinja_filter_find(s->s, s->len)
                                            : jinja_test_find(s->s, s->len));
            if (node->id2 < 0)
                return jinja_parse_fail(p, t, "unknown %s '%s'",
                                        by_filter ? "filter" : "test", s->s);
        }
    }
    *out = node;
    return JINJA_OK;
}

static jinja_status parse_test(struct parser *p, struct jnode *value,
                               struct jnode **out)
{
    bool negate = false;
    if (is_name(p, "not")) {
        negate = true;
        padvance(p);
    }
    const struct jtok *t = pcur(p);
    if (t->kind != JT_NAME)
        return jinja_parse_fail(p, t, "expected a test name after 'is'");
    struct jnode *node = jinja_node(p, JN_TEST, t);
    if (!node)
        return nomem(p);
    node->a = value;
    node->negate = negate;
    node->id = (int16_t)jinja_test_find(p->src + t->off, t->len);
    if (node->id < 0)
        return jinja_parse_fail(p, t, "unknown test '%.*s'", (int)t->len,
                                p->src + t->off);
    node->name = jinja_arena_str(&p->t->arena, p->src + t->off, t->len);
    if (!node->name)
        return nomem(p);
    padvance(p);
    const struct jtok *n = pcur(p);
    jinja_status st = JINJA_OK;
    if (is_op(p, "(")) {
        st = parse_call_args(p, &node->b, &node->count);
    } else if ((n->kind == JT_NAME || n->kind == JT_STRING ||
                n->kind == JT_INT || n->kind == JT_FLOAT || is_op(p, "[") ||
                is_op(p, "{")) &&
               !is_name(p, "else") && !is_name(p, "or") && !is_name(p, "and")) {
        /* x is divisibleby 3: one argument without parentheses */
        if (is_name(p, "is"))
            return jinja_parse_fail(p, n,
                                    "tests cannot be chained with "
                                    "'is'");
        struct jnode *arg;
        st = parse_primary(p, &arg);
        if (st == JINJA_OK)
            st = parse_postfix(p, arg, &node->b);
        node->count = 1;
    }
    *out = node;
    return st;
}

/* ------------------------------------------------- postfix, operators */

static jinja_status parse_subscript(struct parser *p, struct jnode *obj,
                                    struct jnode **out)
{
    const struct jtok *t = pcur(p);
    if (is_op(p, ".")) {
        padvance(p);
        const struct jtok *a = pcur(p);
        if (a->kind == JT_NAME) {
            struct jnode *node = jinja_node(p, JN_GETATTR, a);
            if (!node)
                return nomem(p);
            node->a = obj;
            node->name = jinja_arena_str(&p->t->arena, p->src + a->off, a->len);
            if (!node->name)
                return nomem(p);
            padvance(p);
            *out = node;
            return JINJA_OK;
        }
        if (a->kind == JT_INT) {
            struct jnode *node = jinja_node(p, JN_GETITEM, a);
            if (!node)
                return nomem(p);
            node->a = obj;
            *out = node;
            return parse_number(p, &node->b);
        }
        return jinja_parse_fail(p, a,
                                "expected a name or a number after "
                                "'.'");
    }
    /* '[' */
    padvance(p);
    struct jnode *parts[3] = {NULL, NULL, NULL};
    bool slice = false;
    jinja_status st = JINJA_OK;
    if (!is_op(p, ":")) {
        st = jinja_parse_expression(p, true, &parts[0]);
        if (st != JINJA_OK)
            return st;
    }
    if (is_op(p, ":")) {
        slice = true;
        padvance(p);
        if (!is_op(p, ":") && !is_op(p, "]"))
            st = jinja_parse_expression(p, true, &parts[1]);
        if (st == JINJA_OK && is_op(p, ":")) {
            padvance(p);
            if (!is_op(p, "]"))
                st = jinja_parse_expression(p, true, &parts[2]);
        }
    }
    if (st == JINJA_OK && is_op(p, ","))
        return jinja_parse_fail(p, pcur(p),
                                "unsupported subscript with "
                                "several items");
    if (st == JINJA_OK)
        st = jinja_expect(p, JT_OP, "]");
    if (st != JINJA_OK)
        return st;
    struct jnode *node = jinja_node(p, slice ? JN_SLICE : JN_GETITEM, t);
    if (!node)
        return nomem(p);
    node->a = obj;
    node->b = parts[0];
    node->c = parts[1];
    node->d = parts[2];
    *out = node;
    return JINJA_OK;
}

static jinja_status parse_postfix(struct parser *p, struct jnode *node,
                                  struct jnode **out)
{
    for (;;) {
        jinja_status st;
        if (is_op(p, ".") || is_op(p, "["))
            st = parse_subscript(p, node, &node);
        else if (is_op(p, "("))
            st = parse_call(p, node, &node);
        else
            break;
        if (st != JINJA_OK)
            return st;
    }
    *out = node;
    return JINJA_OK;
}

static jinja_status parse_filter_expr(struct parser *p, struct jnode *node,
                                      struct jnode **out)
{
    for (;;) {
        jinja_status st;
        if (is_op(p, "|")) {
            padvance(p);
            st = jinja_parse_filter(p, node, &node);
        } else if (is_name(p, "is")) {
            padvance(p);
            st = parse_test(p, node, &node);
        } else if (is_op(p, "(")) {
            st = parse_call(p, node, &node);
        } else {
            break;
        }
        if (st != JINJA_OK)
            return st;
    }
    *out = node;
    return JINJA_OK;
}

static jinja_status parse_unary(struct parser *p, bool with_filter,
                                struct jnode **out)
{
    const struct jtok *t = pcur(p);
    struct jnode *node;
    jinja_status st;
    if (is_op(p, "-") || is_op(p, "+")) {
        st = jinja_enter(p, t);
        if (st != JINJA_OK)
            return st;
        node = jinja_node(p, is_op(p, "-") ? JN_NEG : JN_POS, t);
        if (!node)
            return nomem(p);
        padvance(p);
        st = parse_unary(p, false, &node->a);
        p->depth--;
    } else {
        st = parse_primary(p, &node);
    }
    if (st == JINJA_OK)
        st = parse_postfix(p, node, &node);
    if (st == JINJA_OK && with_filter)
        st = parse_filter_expr(p, node, &node);
    *out = node;
    return st;
}

static struct jnode *binary(struct parser *p, int kind, int op,
                            const struct jtok *at, struct jnode *a,
                            struct jnode *b)
{
    struct jnode *node = jinja_node(p, kind, at);
    if (node) {
        node->op = (uint8_t)op;
        node->a = a;
        node->b = b;
    }
    return node;
}

static jinja_status parse_pow(struct parser *p, struct jnode **out)
{
    struct jnode *left;
    jinja_status st = parse_unary(p, true, &left);
    while (st == JINJA_OK && is_op(p, "**")) {
        const struct jtok *t = pcur(p);
        padvance(p);
        struct jnode *right;
        st = parse_unary(p, true, &right);
        if (st == JINJA_OK &&
            !(left = binary(p, JN_BINARY, JOP_POW, t, left, right)))
            return nomem(p);
    }
    *out = left;
    return st;
}

static jinja_status parse_math2(struct parser *p, struct jnode **out)
{
    struct jnode *left;
    jinja_status st = parse_pow(p, &left);
    for (;;) {
        int op = is_op(p, "*")    ? JOP_MUL
                 : is_op(p, "/")  ? JOP_DIV
                 : is_op(p, "//") ? JOP_FLOORDIV
                 : is_op(p, "%")  ? JOP_MOD
                                  : 0;
        if (st != JINJA_OK || !op)
            break;
        const struct jtok *t = pcur(p);
        padvance(p);
        struct jnode *right;
        st = parse_pow(p, &right);
        if (st == JINJA_OK &&
            !(left = binary(p, JN_BINARY, op, t, left, right)))
            return nomem(p);
    }
    *out = left;
    return st;
}

static jinja_status parse_concat(struct parser *p, struct jnode **out)
{
    struct jnode *first;
    jinja_status st = parse_math2(p, &first);
    if (st != JINJA_OK || !is_op(p, "~")) {
        *out = first;
        return st;
    }
    struct jnode *node = jinja_node(p, JN_CONCAT, pcur(p));
    if (!node)
        return nomem(p);
    node->a = first;
    node->count = 1;
    struct jnode **tail = &first->next;
    while (is_op(p, "~")) {
        padvance(p);
        st = parse_math2(p, tail);
        if (st != JINJA_OK)
            return st;
        tail = &(*tail)->next;
        node->count++;
    }
    *out = node;
    return JINJA_OK;
}

static jinja_status parse_math1(struct parser *p, struct jnode **out)
{
    struct jnode *left;
    jinja_status st = parse_concat(p, &left);
    while (st == JINJA_OK && (is_op(p, "+") || is_op(p, "-"))) {
        const int op = is_op(p, "+") ? JOP_ADD : JOP_SUB;
        const struct jtok *t = pcur(p);
        padvance(p);
        struct jnode *right;
        st = parse_concat(p, &right);
        if (st == JINJA_OK &&
            !(left = binary(p, JN_BINARY, op, t, left, right)))
            return nomem(p);
    }
    *out = left;
    return st;
}

static int compare_op(struct parser *p)
{
    static const struct {
        const char *text;
        int op;
    } ops[] = {{"==", JOP_EQ}, {"!=", JOP_NE}, {"<", JOP_LT},
               {"<=", JOP_LE}, {">", JOP_GT},  {">=", JOP_GE}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (is_op(p, ops[i].text)) {
            padvance(p);
            return ops[i].op;
        }
    if (is_name(p, "in")) {
        padvance(p);
        return JOP_IN;
    }
    if (is_name(p, "not") && jinja_tok_is(p, ppeek(p, 1), JT_NAME, "in")) {
        padvance(p);
        padvance(p);
        return JOP_NOTIN;
    }
    return 0;
}

static jinja_status parse_compare(struct parser *p, struct jnode **out)
{
    struct jnode *first;
    jinja_status st = parse_math1(p, &first);
    if (st != JINJA_OK)
        return st;
    const struct jtok *t = pcur(p);
    int op = compare_op(p);
    if (!op) {
        *out = first;
        return JINJA_OK;
    }
    struct jnode *node = jinja_node(p, JN_COMPARE, t);
    if (!node)
        return nomem(p);
    node->a = first;
    struct jnode **tail = &node->b;
    while (op) {
        st = parse_math1(p, tail);
        if (st != JINJA_OK)
            return st;
        (*tail)->cmp = (uint8_t)op;
        tail = &(*tail)->next;
        op = compare_op(p);
    }
    *out = node;
    return JINJA_OK;
}

static jinja_status parse_not(struct parser *p, struct jnode **out)
{
    if (!is_name(p, "not"))
        return parse_compare(p, out);
    const struct jtok *t = pcur(p);
    jinja_status st = jinja_enter(p, t);
    if (st != JINJA_OK)
        return st;
    padvance(p);
    struct jnode *node = jinja_node(p, JN_NOT, t);
    if (!node)
        return nomem(p);
    st = parse_not(p, &node->a);
    p->depth--;
    *out = node;
    return st;
}

static jinja_status parse_and(struct parser *p, struct jnode **out)
{
    struct jnode *left;
    jinja_status st = parse_not(p, &left);
    while (st == JINJA_OK && is_name(p, "and")) {
        const struct jtok *t = pcur(p);
        padvance(p);
        struct jnode *right;
        st = parse_not(p, &right);
        if (st == JINJA_OK && !(left = binary(p, JN_AND, 0, t, left, right)))
            return nomem(p);
    }
    *out = left;
    return st;
}

static jinja_status parse_or(struct parser *p, struct jnode **out)
{
    struct jnode *left;
    jinja_status st = parse_and(p, &left);
    while (st == JINJA_OK && is_name(p, "or")) {
        const struct jtok *t = pcur(p);
        padvance(p);
        struct jnode *right;
        st = parse_and(p, &right);
        if (st == JINJA_OK && !(left = binary(p, JN_OR, 0, t, left, right)))
            return nomem(p);
    }
    *out = left;
    return st;
}

static jinja_status parse_condexpr(struct parser *p, struct jnode **out)
{
    struct jnode *expr;
    jinja_status st = parse_or(p, &expr);
    while (st == JINJA_OK && is_name(p, "if")) {
        const struct jtok *t = pcur(p);
        padvance(p);
        struct jnode *node = jinja_node(p, JN_COND, t);
        if (!node)
            return nomem(p);
        node->a = expr;
        st = parse_or(p, &node->b);
        if (st == JINJA_OK && is_name(p, "else")) {
            padvance(p);
            st = jinja_enter(p, t);
            if (st == JINJA_OK) {
                st = parse_condexpr(p, &node->c);
                p->depth--;
            }
        }
        expr = node;
    }
    *out = expr;
    return st;
}

jinja_status jinja_parse_expression(struct parser *p, bool with_cond,
                                    struct jnode **out)
{
    jinja_status st = jinja_enter(p, pcur(p));
    if (st != JINJA_OK)
        return st;
    st = with_cond ? parse_condexpr(p, out) : parse_or(p, out);
    p->depth--;
    return st;
}

static bool tuple_end(const struct parser *p)
{
    const struct jtok *t = pcur(p);
    return t->kind == JT_VAR_END || t->kind == JT_BLOCK_END ||
           jinja_tok_is(p, t, JT_OP, ")");
}

jinja_status jinja_parse_tuple(struct parser *p, bool with_cond,
                               bool explicit_parens, struct jnode **out)
{
    const struct jtok *t = pcur(p);
    struct jnode *first = NULL, **tail = &first;
    size_t count = 0;
    bool is_tuple = false;
    for (;;) {
        if (count) {
            jinja_status st = jinja_expect(p, JT_OP, ",");
            if (st != JINJA_OK)
                return st;
        }
        if (tuple_end(p))
            break;
        jinja_status st = jinja_parse_expression(p, with_cond, tail);
        if (st != JINJA_OK)
            return st;
        tail = &(*tail)->next;
        count++;
        if (!is_op(p, ","))
            break;
        is_tuple = true;
    }
    if (!is_tuple) {
        if (count) {
            *out = first;
            return JINJA_OK;
        }
        if (!explicit_parens) {
            char what[64];
            jinja_tok_describe(p, pcur(p), what, sizeof what);
            return jinja_parse_fail(p, pcur(p),
                                    "expected an expression, got %s", what);
        }
    }
    struct jnode *node = jinja_node(p, JN_TUPLE, t);
    if (!node)
        return nomem(p);
    node->a = first;
    node->count = count;
    *out = node;
    return JINJA_OK;
}
