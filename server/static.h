/*
 * static.h - files of the web root, and nothing else: no directory
 * listings, no dot files, nothing reached through "..", an absolute path
 * or a symlink that leads outside the root.
 */
#ifndef ATTND_STATIC_H
#define ATTND_STATIC_H

#include <stdbool.h>
#include <stddef.h>

struct static_file {
    char *body; /* owned; free() */
    size_t len;
    const char *content_type;
    char etag[24];
};

/*
 * Load the file that url (already percent-decoded, starting with '/')
 * names under root (a canonical absolute path, see realpath()). "/" and
 * directories mean their index.html. Returns 200 with *out filled, or 404.
 */
int static_load(const char *root, const char *url, struct static_file *out);

/* Whether static_load() would find a file for url. */
bool static_exists(const char *root, const char *url);

/* The content type for a file name's extension. */
const char *static_content_type(const char *name);

#endif
