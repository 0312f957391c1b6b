/*
 * jinja.h - the subset of Jinja that chat templates are written in,
 * interpreted as transformers renders them: jinja2's sandboxed
 * environment with trim_blocks and lstrip_blocks, the loopcontrols
 * extension, tojson as transformers defines it (json.dumps with
 * ensure_ascii off, the keys in their order), and the globals
 * raise_exception() and strftime_now().
 *
 * A template is compiled once (a checkpoint's, at load) and rendered by
 * many requests at once: a compiled template is read-only. The context
 * of a render is a JSON object (cJSON), whose members are the
 * template's variables: messages, tools, bos_token, add_generation_prompt
 * and whatever else the caller passes.
 *
 * Nothing a template or its context does can make a render unbounded:
 * its output, the steps it takes (loop iterations, expressions
 * evaluated, macro calls), its depth of nesting and calls, and the bytes
 * its values hold are each capped by struct jinja_limits, and a render
 * past a cap stops with JINJA_E_LIMIT naming the cap.
 *
 * Errors follow the project's convention: a status, and a caller-owned
 * struct jinja_error whose message names the construct and where it is
 * ("unsupported statement 'include' at line 3, column 4").
 */
#ifndef ATTND_JINJA_H
#define ATTND_JINJA_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

typedef enum jinja_status {
    JINJA_OK = 0,
    JINJA_E_SYNTAX,      /* the template is malformed, or uses a statement,
                            filter, test or operator outside the subset:
                            compile time */
    JINJA_E_RAISED,      /* the template called raise_exception(msg);
                            message is msg as the template gave it */
    JINJA_E_RUNTIME,     /* an operation the values do not allow (a type
                            error, an attribute of an undefined value, a
                            method outside the subset, a division by 0) */
    JINJA_E_LIMIT,       /* past one of struct jinja_limits */
    JINJA_E_NOMEM
} jinja_status;

struct jinja_error {
    char message[320]; /* one line, naming the construct and value */
    unsigned line, column; /* in the template, from 1; 0 when none */
};

/* Caps on one render; 0 in a field means its default below. */
struct jinja_limits {
    size_t max_output; /* bytes of rendered text */
    size_t max_steps;  /* loop iterations + expression nodes evaluated */
    size_t max_depth;  /* nested calls (macros, caller()) and nesting of
                          values built */
    size_t max_bytes;  /* bytes all values of the render hold at once */
};
#define JINJA_DEFAULT_OUTPUT ((size_t)1 << 20)
#define JINJA_DEFAULT_STEPS ((size_t)1 << 20)
#define JINJA_DEFAULT_DEPTH 64
#define JINJA_DEFAULT_BYTES ((size_t)16 << 20)

struct jinja_template;

/* Compile len bytes of template source (not NUL-terminated). Every
 * statement, filter and test is resolved here, so that a template
 * outside the subset is refused at load rather than at a request. On
 * success the caller owns the result; release it with jinja_free(). On
 * failure NULL, with err filled (JINJA_E_SYNTAX or JINJA_E_NOMEM in
 * *status when status is not NULL). */
struct jinja_template *jinja_compile(const char *src, size_t len,
                                     jinja_status *status,
                                     struct jinja_error *err);
void jinja_free(struct jinja_template *t);

/* Render t with the members of context (a JSON object; NULL: none) as
 * its variables. now is the time strftime_now() formats, in local time
 * as Python's datetime.now() does. On success the caller owns *out, a
 * NUL-terminated string of *out_len bytes (free()); on failure *out is
 * NULL and err says why. Safe to call from many threads at once on one
 * template. */
jinja_status jinja_render(const struct jinja_template *t,
                          const cJSON *context,
                          const struct jinja_limits *limits, time_t now,
                          char **out, size_t *out_len,
                          struct jinja_error *err);

#endif
