/*
 * jinja_parser.h - the state the statement parser (jinja_parse.c) and
 * the expression parser (jinja_parse_expr.c) share.
 */
#ifndef ATTND_JINJA_PARSER_H
#define ATTND_JINJA_PARSER_H

#include "jinja_internal.h"

struct parser {
    struct jinja_template *t;
    const char *src;
    const struct jtok *tok;
    size_t n, i;
    struct jinja_error *err;
    unsigned depth;      /* nesting so far, against JINJA_MAX_PARSE_DEPTH */
    unsigned loops;      /* for bodies around (break, continue) */
    struct jnode *macro; /* the macro whose body this is */
};

static inline const struct jtok *pcur(const struct parser *p)
{
    return &p->tok[p->i];
}

static inline const struct jtok *ppeek(const struct parser *p, size_t k)
{
    return p->i + k < p->n ? &p->tok[p->i + k] : &p->tok[p->n - 1];
}

static inline void padvance(struct parser *p)
{
    if (p->i + 1 < p->n)
        p->i++;
}

bool jinja_tok_is(const struct parser *p, const struct jtok *t, int kind,
                  const char *text);
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
jinja_status
jinja_parse_fail(struct parser *p, const struct jtok *at, const char *fmt, ...);
/* How an error names a token: 'endfor', end of statement block, ... */
void jinja_tok_describe(const struct parser *p, const struct jtok *t, char *out,
                        size_t size);
jinja_status jinja_expect(struct parser *p, int kind, const char *text);
struct jnode *jinja_node(struct parser *p, int kind, const struct jtok *at);
jinja_status jinja_enter(struct parser *p, const struct jtok *at);

/* parse_tuple of jinja2's: expressions separated by commas, a tuple when
 * there is a comma (or when explicit and empty). with_cond: a if b else
 * c is allowed (a for's iterable has none, so its "if" is the loop's). */
jinja_status jinja_parse_tuple(struct parser *p, bool with_cond,
                               bool explicit_parens, struct jnode **out);
jinja_status jinja_parse_expression(struct parser *p, bool with_cond,
                                    struct jnode **out);
/* One filter after '|' (the '|' consumed), applied to value (NULL in a
 * filter block). */
jinja_status jinja_parse_filter(struct parser *p, struct jnode *value,
                                struct jnode **out);

#endif
