/*
 * svgw.h - SVG (XML) text written into one growing buffer with a cap taken
 * at init, or only counted: the same calls give a document or a bound on
 * its length. The prefix is svgw_ ("SVG writer"), as pngw_ for PNG.
 */
#ifndef ATTND_SVGW_H
#define ATTND_SVGW_H

#include <stdbool.h>
#include <stddef.h>

struct svgw {
    char *data; /* NUL-terminated once there is any; NULL when counting */
    size_t len; /* bytes written, or counted */
    size_t cap; /* the most bytes data may hold (counting: no cap) */
    size_t room;
    bool counting;
    bool failed; /* past cap or out of memory: every later call does nothing */
    bool nomem;  /* of which: out of memory */
};

/* A writer of at most cap bytes, or (counting) one that keeps nothing and
 * only adds up the lengths. */
void svgw_init(struct svgw *w, size_t cap, bool counting);

/* Append n bytes of s as they are (markup). */
void svgw_put(struct svgw *w, const char *s, size_t n);
void svgw_str(struct svgw *w, const char *s);

/* Append printf-style markup of at most 255 bytes. */
void svgw_printf(struct svgw *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Append n bytes of UTF-8 as XML character data or an attribute value:
 * & < > " ' as entities; bytes that are not UTF-8, control characters
 * (below U+0020) and U+FFFE, U+FFFF (none of which XML 1.0 allows, even as
 * references) as U+FFFD. At most SVGW_ESCAPE_GROWTH bytes per byte of s.
 */
void svgw_escaped(struct svgw *w, const char *s, size_t n);
#define SVGW_ESCAPE_GROWTH 6u

/* On success (not failed) the caller owns the document, *len bytes plus a
 * NUL, released with free(); the writer is left empty. NULL if failed. */
char *svgw_take(struct svgw *w, size_t *len);
void svgw_free(struct svgw *w);

#endif
