/*
 * error.c - the core's one error convention: a status plus a caller-owned
 * message buffer naming the field and the value.
 */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#if defined(__GNUC__)
__attribute__((format(printf, 6, 0)))
#endif
static attn_status
fail_va(struct attn_error *err, attn_status status, const char *field,
        int n_index, const size_t *index, const char *fmt, va_list ap)
{
    if (!err)
        return status;
    memset(err, 0, sizeof *err);
    snprintf(err->field, sizeof err->field, "%s", field ? field : "");
    if (n_index > 3)
        n_index = 3;
    for (int i = 0; i < n_index; i++)
        err->index[i] = index[i];
    err->n_index = n_index > 0 ? n_index : 0;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    return status;
}

attn_status attn_fail(struct attn_error *err, attn_status status,
                      const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_va(err, status, field, 0, NULL, fmt, ap);
    va_end(ap);
    return status;
}

attn_status attn_fail_at(struct attn_error *err, attn_status status,
                         const char *field, int n_index, const size_t *index,
                         const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_va(err, status, field, n_index, index, fmt, ap);
    va_end(ap);
    return status;
}

const char *attn_status_name(attn_status status)
{
    switch (status) {
    case ATTN_OK: return "ok";
    case ATTN_E_INVALID: return "invalid";
    case ATTN_E_INPUT: return "input";
    case ATTN_E_TOO_BIG: return "too big";
    case ATTN_E_NOMEM: return "out of memory";
    case ATTN_E_CANCELLED: return "cancelled";
    }
    return "unknown";
}
