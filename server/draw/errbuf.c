/*
 * errbuf.c - see errbuf.h.
 */
#include "errbuf.h"

#include <stdarg.h>
#include <stdio.h>

draw_status errbuf_fail(char *err, size_t err_len, draw_status st,
                        const char *fmt, ...)
{
    if (!err || err_len == 0)
        return st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    return st;
}
