/*
 * errbuf.h - a message into a caller's buffer, for the drawing library,
 * whose callers own a char err[] and get a draw_status back.
 */
#ifndef ATTND_ERRBUF_H
#define ATTND_ERRBUF_H

#include "draw.h"

#include <stddef.h>

/*
 * Format into err (err_len bytes, always terminated; NULL err is allowed)
 * and return st, so that a check fails with `return errbuf_fail(...)`.
 */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
draw_status
errbuf_fail(char *err, size_t err_len, draw_status st, const char *fmt, ...);

#endif
