/*
 * model_files.h - the files of one checkpoint folder, as the loader and
 * each family read them: whole small files, capped, and the one line a
 * failure leaves in the caller's buffer, naming the model and the file.
 */
#ifndef ATTND_MODEL_FILES_H
#define ATTND_MODEL_FILES_H

#include <stdbool.h>
#include <stddef.h>

#define MODEL_PATH_BYTES 4096

/* One folder being loaded, and where its error line goes. */
struct model_files {
    const char *name; /* the model's */
    const char *dir;
    char *err;
    size_t err_len;
};

/* dir/file into path[MODEL_PATH_BYTES]; fails when it does not fit. */
bool model_files_path(const struct model_files *f, const char *file,
                      char *path);

/*
 * The whole of dir/file, at most cap bytes, into *text (malloc'd, the
 * caller frees it) and *len. When it does not exist and optional is true,
 * *text is NULL and true is returned.
 */
bool model_files_read(const struct model_files *f, const char *file, size_t cap,
                      bool optional, char **text, size_t *len);

/* Fail with "model 'NAME': DIR/FILE: " and the message. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
bool model_files_fail(const struct model_files *f, const char *file,
                      const char *fmt, ...);

#endif
