/*
 * jinja_lex.c - a template's source as tokens, as jinja2's lexer cuts
 * it with trim_blocks and lstrip_blocks on:
 *
 *  - {%- {{- {#- strip all whitespace before the tag, -%} -}} -#} all
 *    after it;
 *  - a block tag or comment alone on its line after spaces or tabs
 *    takes them with it (lstrip_blocks), unless it opens with {%+;
 *  - the first newline after a block tag or comment goes (trim_blocks),
 *    unless it closes with +%};
 *  - comments go; {% raw %}...{% endraw %} is text.
 *
 * Inside a tag its end is recognized only outside brackets, so
 * {{ {'a': {'b': 1}} }} is one expression.
 */
#include "jinja_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *jinja_normalize(const char *src, size_t len, size_t *out_len)
{
    char *s = malloc(len + 1);
    if (!s)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n > 0 && s[n - 1] == '\n')
        n--;
    s[n] = '\0';
    *out_len = n;
    return s;
}

struct lexer {
    const char *s;
    size_t len, pos;
    /* where cur is: line and the offset its line starts at */
    size_t cur, line_start;
    unsigned line;
    bool line_starting; /* the last tag ended a line */
    struct jtokens *out;
    struct jinja_error *err;
};

static void locate(struct lexer *lx, size_t off, unsigned *line, unsigned *col)
{
    for (; lx->cur < off; lx->cur++)
        if (lx->s[lx->cur] == '\n') {
            lx->line++;
            lx->line_start = lx->cur + 1;
        }
    *line = lx->line;
    *col = (unsigned)(off - lx->line_start + 1);
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static jinja_status
fail_at(struct lexer *lx, size_t off, const char *fmt, ...)
{
    unsigned line, col;
    locate(lx, off, &line, &col);
    va_list ap;
    va_start(ap, fmt);
    jinja_error_set(lx->err, line, col, fmt, ap);
    va_end(ap);
    return JINJA_E_SYNTAX;
}

static jinja_status emit(struct lexer *lx, int kind, size_t off, size_t len)
{
    struct jtokens *t = lx->out;
    if (t->n == t->cap) {
        const size_t cap = t->cap ? t->cap * 2 : 64;
        struct jtok *v = realloc(t->v, cap * sizeof *v);
        if (!v) {
            if (lx->err)
                snprintf(lx->err->message, sizeof lx->err->message,
                         "out of memory (tokens)");
            return JINJA_E_NOMEM;
        }
        t->v = v;
        t->cap = cap;
    }
    struct jtok *k = &t->v[t->n++];
    k->kind = (uint8_t)kind;
    k->off = off;
    k->len = len;
    locate(lx, off, &k->line, &k->col);
    return JINJA_OK;
}

static bool starts(const struct lexer *lx, size_t at, const char *lit)
{
    const size_t n = strlen(lit);
    return at <= lx->len && lx->len - at >= n &&
           memcmp(lx->s + at, lit, n) == 0;
}

static size_t skip_space(const struct lexer *lx, size_t at)
{
    return at + jinja_space_after(lx->s + at, lx->len - at);
}

/* The text [from, to) before a tag opening at to, with the tag's
 * whitespace control applied, emitted when anything is left. */
static jinja_status text_before(struct lexer *lx, size_t from, size_t to,
                                char kind, char sign)
{
    const char *t = lx->s + from;
    size_t n = to - from;
    if (sign == '-') {
        n -= jinja_space_before(t, n);
    } else if (sign != '+' && kind != '{') {
        /* lstrip_blocks: spaces alone between a line's start and the tag */
        const char *nl = NULL;
        for (size_t i = n; i > 0; i--)
            if (t[i - 1] == '\n') {
                nl = t + i - 1;
                break;
            }
        const size_t l = nl ? (size_t)(nl - t) + 1 : 0;
        if ((nl || lx->line_starting) && l < n &&
            jinja_space_after(t + l, n - l) == n - l)
            n = l;
    }
    return n ? emit(lx, JT_TEXT, from, n) : JINJA_OK;
}

/* After a tag's closing delimiter at `at` of dlen bytes, whose sign is
 * '-', '+' or 0: where the text after it starts. */
static size_t after_close(struct lexer *lx, size_t at, size_t dlen, char sign,
                          bool trim)
{
    size_t p = at + dlen;
    if (sign == '-')
        p = skip_space(lx, p);
    else if (sign != '+' && trim && p < lx->len && lx->s[p] == '\n')
        p++;
    lx->line_starting = p > 0 && lx->s[p - 1] == '\n';
    return p;
}

static jinja_status lex_comment(struct lexer *lx, size_t open, size_t body)
{
    for (size_t q = body; q + 1 < lx->len; q++) {
        if (lx->s[q] != '#' || lx->s[q + 1] != '}')
            continue;
        const char sign =
            q > body && (lx->s[q - 1] == '-' || lx->s[q - 1] == '+')
                ? lx->s[q - 1]
                : 0;
        lx->pos = after_close(lx, q, 2, sign, true);
        return JINJA_OK;
    }
    return fail_at(lx, open, "comment not closed: missing '#}'");
}

/* {% raw %} at open, its name's end at `at`: the text up to
 * {% endraw %}, verbatim. Returns false (and nothing done) when the
 * tag is not a raw. */
static bool is_raw(struct lexer *lx, size_t body, size_t *content)
{
    size_t p = skip_space(lx, body);
    if (!starts(lx, p, "raw"))
        return false;
    p = skip_space(lx, p + 3);
    if (starts(lx, p, "-%}")) {
        *content = skip_space(lx, p + 3);
        return true;
    }
    if (starts(lx, p, "%}")) {
        *content = p + 2;
        return true;
    }
    return false;
}

static jinja_status lex_raw(struct lexer *lx, size_t open, size_t content)
{
    for (size_t q = content; q + 1 < lx->len; q++) {
        if (lx->s[q] != '{' || lx->s[q + 1] != '%')
            continue;
        const char sign =
            q + 2 < lx->len && (lx->s[q + 2] == '-' || lx->s[q + 2] == '+')
                ? lx->s[q + 2]
                : 0;
        size_t p = skip_space(lx, q + 2 + (sign != 0));
        if (!starts(lx, p, "endraw"))
            continue;
        p = skip_space(lx, p + 6);
        char end_sign = 0;
        if (starts(lx, p, "-%}") || starts(lx, p, "+%}"))
            end_sign = lx->s[p++];
        if (!starts(lx, p, "%}"))
            continue;
        size_t n = q - content;
        if (sign == '-') {
            n -= jinja_space_before(lx->s + content, n);
        } else if (sign != '+') {
            /* lstrip_blocks for the endraw on a line of its own */
            const char *t = lx->s + content;
            size_t l = n;
            while (l > 0 && t[l - 1] != '\n')
                l--;
            if (l > 0 && l < n && jinja_space_after(t + l, n - l) == n - l)
                n = l;
        }
        jinja_status st = n ? emit(lx, JT_TEXT, content, n) : JINJA_OK;
        lx->pos = after_close(lx, p, 2, end_sign, true);
        return st;
    }
    return fail_at(lx, open, "raw block not closed: missing '{%% endraw %%}'");
}

static bool is_name_start(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

static bool is_hex(char ch)
{
    return is_digit(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

/* Digits with single underscores between them, from at; returns the end
 * (at itself when no digit is there). */
static size_t digits(const struct lexer *lx, size_t at, bool (*ok)(char))
{
    size_t p = at;
    if (p >= lx->len || !ok(lx->s[p]))
        return at;
    p++;
    for (;;) {
        if (p < lx->len && ok(lx->s[p]))
            p++;
        else if (p + 1 < lx->len && lx->s[p] == '_' && ok(lx->s[p + 1]))
            p += 2;
        else
            return p;
    }
}

static bool is_bin(char ch)
{
    return ch == '0' || ch == '1';
}

static bool is_oct(char ch)
{
    return ch >= '0' && ch <= '7';
}

static jinja_status lex_number(struct lexer *lx, size_t at)
{
    const char *s = lx->s;
    if (s[at] == '0' && at + 1 < lx->len) {
        const char x = (char)(s[at + 1] | 0x20);
        bool (*ok)(char) = x == 'x'   ? is_hex
                           : x == 'o' ? is_oct
                           : x == 'b' ? is_bin
                                      : NULL;
        if (ok) {
            /* 0x_1f: an underscore may follow the prefix */
            size_t p = at + 2;
            if (p < lx->len && s[p] == '_')
                p++;
            const size_t end = digits(lx, p, ok);
            if (end > p) {
                lx->pos = end;
                return emit(lx, JT_INT, at, end - at);
            }
        }
    }
    size_t p = digits(lx, at, is_digit);
    int kind = JT_INT;
    /* after a '.', as in x.0.1, a number is an item index: no float */
    const bool after_dot = at > 0 && s[at - 1] == '.';
    if (!after_dot && p + 1 < lx->len && s[p] == '.' && is_digit(s[p + 1])) {
        p = digits(lx, p + 1, is_digit);
        kind = JT_FLOAT;
    }
    if (!after_dot && p < lx->len && (s[p] | 0x20) == 'e') {
        size_t q = p + 1;
        if (q < lx->len && (s[q] == '+' || s[q] == '-'))
            q++;
        const size_t end = digits(lx, q, is_digit);
        if (end > q) {
            p = end;
            kind = JT_FLOAT;
        }
    }
    lx->pos = p;
    return emit(lx, kind, at, p - at);
}

static jinja_status lex_string(struct lexer *lx, size_t at)
{
    const char quote = lx->s[at];
    for (size_t p = at + 1; p < lx->len; p++) {
        if (lx->s[p] == '\\') {
            p++;
            continue;
        }
        if (lx->s[p] == quote) {
            lx->pos = p + 1;
            return emit(lx, JT_STRING, at, p + 1 - at);
        }
    }
    return fail_at(lx, at, "string not closed: missing %c", quote);
}

/* The tokens of one tag's inside, up to and with its end. */
static jinja_status lex_tag(struct lexer *lx, bool block, size_t open)
{
    static const char *const ops[] = {
        "//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[",
        "]",  "(",  ")",  "{",  "}",  "<",  ">", "=", ".", ":", "|", ",", ";"};
    size_t depth = 0;
    for (;;) {
        size_t p = skip_space(lx, lx->pos);
        lx->pos = p;
        if (p >= lx->len)
            return fail_at(lx, open, "tag not closed: missing '%s'",
                           block ? "%}" : "}}");
        if (depth == 0) {
            const char *end = block ? "%}" : "}}";
            char sign = 0;
            size_t at = p;
            if ((lx->s[p] == '-' || (block && lx->s[p] == '+')) &&
                starts(lx, p + 1, end))
                sign = lx->s[at++];
            if (starts(lx, at, end)) {
                jinja_status st =
                    emit(lx, block ? JT_BLOCK_END : JT_VAR_END, p, at + 2 - p);
                lx->pos = after_close(lx, at, 2, sign, block);
                return st;
            }
        }
        const char ch = lx->s[p];
        jinja_status st;
        if (is_name_start(ch)) {
            size_t q = p + 1;
            while (q < lx->len &&
                   (is_name_start(lx->s[q]) || is_digit(lx->s[q])))
                q++;
            lx->pos = q;
            st = emit(lx, JT_NAME, p, q - p);
        } else if (is_digit(ch)) {
            st = lex_number(lx, p);
        } else if (ch == '\'' || ch == '"') {
            st = lex_string(lx, p);
        } else {
            size_t k;
            for (k = 0; k < sizeof ops / sizeof ops[0]; k++)
                if (starts(lx, p, ops[k]))
                    break;
            if (k == sizeof ops / sizeof ops[0]) {
                if ((unsigned char)ch < 0x20 || ch == 0x7f ||
                    (unsigned char)ch >= 0x80)
                    return fail_at(lx, p, "unexpected character \\x%02x",
                                   (unsigned char)ch);
                return fail_at(lx, p, "unexpected character '%c'", ch);
            }
            const size_t n = strlen(ops[k]);
            if (ch == '(' || ch == '[' || ch == '{')
                depth++;
            else if ((ch == ')' || ch == ']' || ch == '}') && depth > 0)
                depth--;
            lx->pos = p + n;
            st = emit(lx, JT_OP, p, n);
        }
        if (st != JINJA_OK)
            return st;
    }
}

jinja_status jinja_lex(const char *src, size_t len, struct jtokens *out,
                       struct jinja_error *err)
{
    struct lexer lx = {.s = src,
                       .len = len,
                       .line = 1,
                       .line_starting = true,
                       .out = out,
                       .err = err};
    jinja_status st = JINJA_OK;
    while (st == JINJA_OK && lx.pos < len) {
        /* the next tag */
        size_t p = lx.pos;
        const char *hit = NULL;
        while (p + 1 < len) {
            hit = memchr(src + p, '{', len - p - 1);
            if (!hit)
                break;
            p = (size_t)(hit - src);
            const char k = src[p + 1];
            if (k == '{' || k == '%' || k == '#')
                break;
            p++;
            hit = NULL;
        }
        if (!hit) {
            st = emit(&lx, JT_TEXT, lx.pos, len - lx.pos);
            lx.pos = len;
            break;
        }
        const char kind = src[p + 1];
        const char sign =
            p + 2 < len && (src[p + 2] == '-' || src[p + 2] == '+') ? src[p + 2]
                                                                    : 0;
        const size_t body = p + 2 + (sign != 0);
        size_t content;
        st = text_before(&lx, lx.pos, p, kind, sign);
        if (st != JINJA_OK)
            break;
        if (kind == '#') {
            st = lex_comment(&lx, p, body);
        } else if (kind == '%' && is_raw(&lx, body, &content)) {
            st = lex_raw(&lx, p, content);
        } else {
            st = emit(&lx, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, p,
                      body - p);
            lx.pos = body;
            if (st == JINJA_OK)
                st = lex_tag(&lx, kind == '%', p);
        }
    }
    if (st == JINJA_OK)
        st = emit(&lx, JT_EOF, len, 0);
    return st;
}
