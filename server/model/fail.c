/*
 * fail.c - model_fail(), see fail.h.
 */
#include "fail.h"

#include <stdarg.h>
#include <stdio.h>

bool model_fail(char *err, size_t err_len, const char *fmt, ...)
{
    if (err && err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
        // names and values come from the files: keep the message one line
        for (char *c = err; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
    }
    return false;
}
