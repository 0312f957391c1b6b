/*
 * shards.h - a checkpoint's safetensors files, mapped read-only: the one
 * model.safetensors, or the shards model-0000K-of-0000N.safetensors that
 * model.safetensors.index.json lists, each with its header read and
 * checked (safetensors.h). A tensor is looked up by name across them.
 */
#ifndef ATTND_SHARDS_H
#define ATTND_SHARDS_H

#include "model_files.h"
#include "safetensors.h"

#include <stdbool.h>
#include <stddef.h>

#define SHARDS_MAX 256

struct shard {
    char file[96];   /* its name in the folder */
    const void *map; /* the file, mapped read-only; NULL when empty */
    size_t bytes;
    struct st_header header;
};

struct shards {
    size_t count;
    struct shard *shard; /* [count] */
};

/*
 * Map the folder's safetensors: model.safetensors.index.json's files when
 * it exists (its weight_map must name, for each tensor, the file that
 * holds it, and metadata.total_size, when given, the bytes of every
 * tensor), else model.safetensors. A shard's name must be a plain file
 * name of the folder. On failure returns false through
 * model_files_fail(), nothing left mapped. On success release with
 * shards_free().
 */
bool shards_open(struct shards *out, const struct model_files *files);
void shards_free(struct shards *s);

/* The tensor name, and the shard it is in (*in), or NULL. */
const struct st_tensor *shards_find(const struct shards *s, const char *name,
                                    size_t *in);

/* The bytes of every shard's mapping, for a fingerprint or a size. */
size_t shards_bytes(const struct shards *s);

#endif
