/*
 * errbuf.h - a message into a caller's buffer, for the drawing modules
 * (font, PNG, heatmap) whose callers own a char err[] of their own.
 */
#ifndef ATTND_ERRBUF_H
#define ATTND_ERRBUF_H

#include <stddef.h>

/* Format into err (err_len bytes, always terminated); NULL err is allowed. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void errbuf_set(char *err, size_t err_len, const char *fmt, ...);

#endif
