/*
 * error.h - filling struct attn_error; internal to the core.
 */
#ifndef ATTN_ERROR_H
#define ATTN_ERROR_H

#include "attention.h"

/*
 * Record a failure in err (which may be NULL) and return status, so that
 * validation reads `return attn_fail(err, ATTN_E_INVALID, "heads", ...);`.
 * field names the offending input; the message should name its value.
 */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
attn_status
attn_fail(struct attn_error *err, attn_status status, const char *field,
          const char *fmt, ...);

/* The same, with up to three indices locating the value inside field. */
#if defined(__GNUC__)
__attribute__((format(printf, 6, 7)))
#endif
attn_status
attn_fail_at(struct attn_error *err, attn_status status, const char *field,
             int n_index, const size_t *index, const char *fmt, ...);

#endif
