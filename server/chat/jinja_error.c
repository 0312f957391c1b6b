/*
 * jinja_error.c - the interpreter's messages: where an error is found it
 * is written once, with the line and column of the construct at fault,
 * as one line of valid UTF-8; and the step count every loop and
 * expression draws on.
 */
#include "jinja_internal.h"

#include <stdio.h>
#include <string.h>

void jinja_error_clean(char *msg)
{
    const size_t cap = sizeof((struct jinja_error *)0)->message;
    size_t len = strnlen(msg, cap - 1);
    msg[len] = '\0';
    /* one line: control characters become spaces */
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)msg[i] < 0x20 || msg[i] == 0x7f)
            msg[i] = ' ';
    /* a sequence cut by the buffer's end, or not UTF-8, goes */
    size_t i = 0;
    while (i < len) {
        size_t n;
        const uint32_t cp = jinja_utf8_next(msg, len, i, &n);
        if (n == 1 && cp >= 0x80) {
            memmove(msg + i, msg + i + 1, len - i - 1);
            msg[--len] = '\0';
            continue;
        }
        i += n;
    }
}

void jinja_error_set(struct jinja_error *err, unsigned line, unsigned col,
                     const char *fmt, va_list ap)
{
    if (!err)
        return;
    /* the location is kept whole: the message gives way to it */
    char where[64] = "";
    if (line)
        snprintf(where, sizeof where, " at line %u, column %u", line, col);
    const size_t room = sizeof err->message - strlen(where);
    const int n = vsnprintf(err->message, room, fmt, ap);
    const size_t used = n < 0 ? 0 : (size_t)n < room ? (size_t)n : room - 1;
    memcpy(err->message + used, where, strlen(where) + 1);
    err->line = line;
    err->column = col;
    jinja_error_clean(err->message);
}

jinja_status jinja_fail(struct jctx *c, const struct jnode *at, jinja_status st,
                        const char *fmt, ...)
{
    if (!at)
        at = c->at;
    va_list ap;
    va_start(ap, fmt);
    jinja_error_set(c->err, at ? at->line : 0, at ? at->col : 0, fmt, ap);
    va_end(ap);
    c->status = st;
    return st;
}

void jinja_spend(struct jctx *c, size_t n)
{
    c->steps = n > SIZE_MAX - c->steps ? SIZE_MAX : c->steps + n;
}

jinja_status jinja_step(struct jctx *c, size_t n)
{
    if (c->steps > c->max_steps || n > c->max_steps - c->steps) {
        c->steps = c->max_steps;
        return jinja_fail(c, NULL, JINJA_E_LIMIT,
                          "past max_steps (%zu loop iterations and "
                          "expressions)",
                          c->max_steps);
    }
    c->steps += n;
    return JINJA_OK;
}

jinja_status jinja_step_bytes(struct jctx *c, size_t bytes)
{
    return jinja_step(c, bytes / JINJA_BYTES_PER_STEP);
}
