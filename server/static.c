/*
 * static.c - the web page's files. Paths are checked twice: by their
 * segments before touching the disk, and by where realpath() says they
 * lead after, so that no spelling of a path escapes the root.
 */
#define _XOPEN_SOURCE 700 /* realpath() */
#include "static.h"
#include "attention.h"

#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILE_BYTES ((size_t)16 << 20)

const char *static_content_type(const char *name)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"},
        {".json", "application/json"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".txt", "text/plain; charset=utf-8"},
        {".woff2", "font/woff2"},
    };
    const char *dot = strrchr(name, '.');
    if (dot && !strchr(dot, '/'))
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            if (!strcmp(dot, types[i].ext))
                return types[i].type;
    return "application/octet-stream";
}

/* Every segment a plain name: not empty in the middle, not starting with
 * a dot (so no "." or ".." and no hidden files), no backslash. */
static bool path_is_plain(const char *url)
{
    if (url[0] != '/')
        return false;
    for (const char *seg = url + 1; *seg;) {
        const char *end = strchr(seg, '/');
        const size_t len = end ? (size_t)(end - seg) : strlen(seg);
        if (seg[0] == '.' || memchr(seg, '\\', len) || (len == 0 && end))
            return false;
        if (!end)
            break;
        seg = end + 1;
    }
    return true;
}

static int read_file(const char *path, struct static_file *out)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 404;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (size_t)st.st_size > MAX_FILE_BYTES) {
        close(fd);
        return 404;
    }
    const size_t size = (size_t)st.st_size;
    char *body = malloc(size ? size : 1);
    size_t got = 0;
    while (body && got < size) {
        const ssize_t n = read(fd, body + got, size - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (!body || got != size) {
        free(body);
        return 404;
    }
    snprintf(out->etag, sizeof out->etag, "\"%016llx\"",
             (unsigned long long)attn_fnv1a64(body, size)); /* the ETag */
    out->body = body;
    out->len = size;
    return 200;
}

/* The canonical path of the file url names under root, or 404. */
static int static_resolve(const char *root, const char *url,
                          char resolved[PATH_MAX])
{
    if (!path_is_plain(url))
        return 404;
    char joined[PATH_MAX];
    const bool dir_url = url[strlen(url) - 1] == '/';
    if ((size_t)snprintf(joined, sizeof joined, "%s%s%s", root, url,
                         dir_url ? "index.html" : "") >= sizeof joined)
        return 404;
    if (!realpath(joined, resolved))
        return 404;
    const size_t root_len = strlen(root);
    if (strncmp(resolved, root, root_len) || resolved[root_len] != '/')
        return 404; /* a symlink led outside the root */
    struct stat st;
    if (stat(resolved, &st) != 0)
        return 404;
    if (S_ISDIR(st.st_mode)) {
        /* a directory without its slash: its index, never a listing */
        const size_t len = strlen(resolved);
        if (len + sizeof "/index.html" > PATH_MAX)
            return 404;
        memcpy(resolved + len, "/index.html", sizeof "/index.html");
        if (stat(resolved, &st) != 0)
            return 404;
    }
    return S_ISREG(st.st_mode) ? 200 : 404;
}

bool static_exists(const char *root, const char *url)
{
    char resolved[PATH_MAX];
    return static_resolve(root, url, resolved) == 200;
}

int static_load(const char *root, const char *url, struct static_file *out)
{
    memset(out, 0, sizeof *out);
    char resolved[PATH_MAX];
    if (static_resolve(root, url, resolved) != 200)
        return 404;
    const int status = read_file(resolved, out);
    if (status == 200)
        out->content_type = static_content_type(resolved);
    return status;
}
