/*
 * model_files.c - reading a checkpoint folder's small files
 * (model_files.h).
 */
#include "model_files.h"
#include "fail.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool model_files_path(const struct model_files *f, const char *file, char *path)
{
    const int n = snprintf(path, MODEL_PATH_BYTES, "%s/%s", f->dir, file);
    if (n < 0 || n >= MODEL_PATH_BYTES)
        return model_fail(f->err, f->err_len,
                          "model '%s': %s: the path is too long (over %d "
                          "bytes) in the folder '%.80s...'",
                          f->name, file, MODEL_PATH_BYTES - 1, f->dir);
    return true;
}

bool model_files_fail(const struct model_files *f, const char *file,
                      const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return model_fail(f->err, f->err_len, "model '%s': %s/%s: %s", f->name,
                      f->dir, file, what);
}

bool model_files_read(const struct model_files *f, const char *file, size_t cap,
                      bool optional, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    char path[MODEL_PATH_BYTES];
    if (!model_files_path(f, file, path))
        return false;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (optional && errno == ENOENT)
            return true;
        return model_files_fail(f, file, "%s", strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return model_files_fail(f, file, "not a regular file");
    }
    if ((uintmax_t)st.st_size > cap) {
        close(fd);
        return model_files_fail(f, file, "%jd bytes, more than the %zu allowed",
                                (intmax_t)st.st_size, cap);
    }
    const size_t want = (size_t)st.st_size;
    char *buf = malloc(want ? want : 1);
    size_t got = 0;
    while (buf && got < want) {
        const ssize_t r = read(fd, buf + got, want - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf || got != want) {
        free(buf);
        return model_files_fail(
            f, file, "%s", buf ? "could not be read whole" : "out of memory");
    }
    *text = buf;
    *len = want;
    return true;
}
