/*
 * shards.c - a checkpoint's safetensors files (shards.h).
 */
#include "shards.h"
#include "fail.h"

#include "attention.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define INDEX_FILE "model.safetensors.index.json"
#define MAX_INDEX_BYTES ((size_t)16 << 20)

bool shard_map(struct shard *sh, const char *file,
               const struct model_files *files)
{
    char path[MODEL_PATH_BYTES];
    snprintf(sh->file, sizeof sh->file, "%s", file);
    if (!model_files_path(files, file, path))
        return false;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return model_files_fail(files, file, "%s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return model_files_fail(files, file, "not a regular file");
    }
    if (st.st_size > 0) {
        void *map =
            mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            close(fd);
            return model_files_fail(files, file, "mmap: %s", strerror(errno));
        }
        sh->map = map;
        sh->bytes = (size_t)st.st_size;
    }
    close(fd); /* the mapping stays */
    return true;
}

/* The width the core reads a safetensors dtype at, or -1. */
static int dtype_of(st_dtype d)
{
    return d == ST_F32    ? ATTN_F32
           : d == ST_F16  ? ATTN_F16
           : d == ST_BF16 ? ATTN_BF16
                          : -1;
}

/* Map one safetensors file of the folder into sh, its header read and
 * its tensors listed. */
static bool map_file(struct shard *sh, const char *file,
                     const struct model_files *files)
{
    char why[400];
    if (!shard_map(sh, file, files))
        return false;
    if (!st_header_parse(sh->map, sh->bytes, &sh->header, why, sizeof why))
        return model_files_fail(files, file, "%s", why);
    const struct st_header *h = &sh->header;
    sh->tensors = calloc(h->count ? h->count : 1, sizeof *sh->tensors);
    if (!sh->tensors)
        return model_files_fail(files, file, "out of memory");
    sh->count = h->count;
    for (size_t i = 0; i < h->count; i++) {
        const struct st_tensor *t = &h->tensors[i];
        struct shard_tensor *to = &sh->tensors[i];
        *to = (struct shard_tensor){.name = t->name,
                                    .dtype = dtype_of(t->dtype),
                                    .type = st_dtype_name(t->dtype),
                                    .ndim = t->ndim,
                                    .offset = t->offset,
                                    .bytes = t->bytes};
        memcpy(to->shape, t->shape, sizeof to->shape);
    }
    return true;
}

void shards_free(struct shards *s)
{
    for (size_t i = 0; s->shard && i < s->count; i++) {
        if (s->shard[i].map)
            munmap((void *)s->shard[i].map, s->shard[i].bytes);
        st_header_free(&s->shard[i].header);
        gguf_free(&s->shard[i].gguf);
        free(s->shard[i].tensors);
    }
    free(s->shard);
    memset(s, 0, sizeof *s);
}

/* A shard's name as the index gives it: a plain name of the folder,
 * nothing that leaves it. */
static bool plain_name(const char *name)
{
    const size_t n = strlen(name);
    return n > 0 && n < sizeof((struct shard *)0)->file && name[0] != '.' &&
           !strchr(name, '/') && !strchr(name, '\\');
}

/* The distinct files of the index's weight_map, mapped, in the order they
 * first appear. */
static bool open_listed(struct shards *s, const cJSON *map,
                        const struct model_files *files)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, map)
    {
        if (!cJSON_IsString(e))
            return model_files_fail(files, INDEX_FILE,
                                    "weight_map's '%.80s' is not a file name",
                                    e->string);
        if (!plain_name(e->valuestring))
            return model_files_fail(files, INDEX_FILE,
                                    "weight_map's '%.80s' names '%.80s', "
                                    "which is not a file of the folder",
                                    e->string, e->valuestring);
        bool seen = false;
        for (size_t i = 0; i < s->count && !seen; i++)
            seen = !strcmp(s->shard[i].file, e->valuestring);
        if (seen)
            continue;
        if (s->count == SHARDS_MAX)
            return model_files_fail(files, INDEX_FILE, "more than %d files",
                                    SHARDS_MAX);
        struct shard *sh = &s->shard[s->count++];
        if (!map_file(sh, e->valuestring, files))
            return false;
    }
    return true;
}

/* Every tensor of the index is in the file it names, and the files hold
 * nothing else; their bytes add up to total_size when it is given. */
static bool check_index(const struct shards *s, const cJSON *doc,
                        const cJSON *map, const struct model_files *files)
{
    size_t listed = 0, bytes = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, map)
    {
        size_t in;
        const struct shard_tensor *t = shards_find(s, e->string, &in);
        if (!t || strcmp(s->shard[in].file, e->valuestring))
            return model_files_fail(files, INDEX_FILE,
                                    "tensor '%.80s' is not in '%.80s'",
                                    e->string, e->valuestring);
        listed++;
        bytes += t->bytes;
    }
    size_t held = 0;
    for (size_t i = 0; i < s->count; i++)
        held += s->shard[i].header.count;
    if (held != listed)
        return model_files_fail(files, INDEX_FILE,
                                "the files hold %zu tensors, weight_map "
                                "lists %zu",
                                held, listed);
    const cJSON *total = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(doc, "metadata"), "total_size");
    if (cJSON_IsNumber(total) && total->valuedouble != (double)bytes)
        return model_files_fail(files, INDEX_FILE,
                                "metadata.total_size is %.0f, the tensors "
                                "hold %zu bytes",
                                total->valuedouble, bytes);
    return true;
}

bool shards_open(struct shards *out, const struct model_files *files)
{
    memset(out, 0, sizeof *out);
    char *text;
    size_t len;
    if (!model_files_read(files, INDEX_FILE, MAX_INDEX_BYTES, true, &text,
                          &len))
        return false;
    out->shard = calloc(text ? SHARDS_MAX : 1, sizeof *out->shard);
    if (!out->shard) {
        free(text);
        return model_fail(files->err, files->err_len,
                          "model '%s': out of memory", files->name);
    }
    if (!text) {
        out->count = 1;
        if (map_file(&out->shard[0], "model.safetensors", files))
            return true;
        shards_free(out);
        return false;
    }
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(doc, "weight_map");
    bool ok = true;
    if (!doc)
        ok = model_files_fail(files, INDEX_FILE, "not valid JSON");
    else if (!cJSON_IsObject(map) || !map->child)
        ok = model_files_fail(files, INDEX_FILE,
                              "weight_map is missing or empty");
    ok =
        ok && open_listed(out, map, files) && check_index(out, doc, map, files);
    cJSON_Delete(doc);
    if (!ok)
        shards_free(out);
    return ok;
}

const struct shard_tensor *shards_find(const struct shards *s, const char *name,
                                       size_t *in)
{
    for (size_t i = 0; i < s->count; i++)
        for (size_t j = 0; j < s->shard[i].count; j++)
            if (!strcmp(s->shard[i].tensors[j].name, name)) {
                *in = i;
                return &s->shard[i].tensors[j];
            }
    return NULL;
}

size_t shards_bytes(const struct shards *s)
{
    size_t total = 0;
    for (size_t i = 0; i < s->count; i++)
        total += s->shard[i].bytes;
    return total;
}
