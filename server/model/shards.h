/*
 * shards.h - a checkpoint's weight files, mapped read-only: the one
 * model.safetensors, or the shards model-0000K-of-0000N.safetensors that
 * model.safetensors.index.json lists, each with its header read and
 * checked (safetensors.h); or a GGUF file and the other parts of its
 * split (gguf_model.h). Either way each tensor is seen the same way
 * (struct shard_tensor) and looked up by name across the files.
 */
#ifndef ATTND_SHARDS_H
#define ATTND_SHARDS_H

#include "gguf.h"
#include "model_files.h"
#include "safetensors.h"

#include <stdbool.h>
#include <stddef.h>

#define SHARDS_MAX 256

/* A tensor of a file, whatever its container. */
struct shard_tensor {
    const char *name; /* in the container's header */
    int dtype;        /* the attn_dtype the core reads it at, or -1: attnd
                         reads no tensor of its type */
    const char *type; /* the container's name of its type: "I64", "Q2_K" */
    size_t ndim;
    uint64_t shape[ST_MAX_DIMS]; /* outermost first (a GGUF file's dims
                                    reversed): [rows][cols] of a matrix */
    size_t offset;               /* of its first byte in the file */
    size_t bytes;
};

struct shard {
    char file[96];   /* its name in the folder */
    const void *map; /* the file, mapped read-only; NULL when empty */
    size_t bytes;
    size_t count;                 /* its tensors */
    struct shard_tensor *tensors; /* [count] in the header's order */
    struct st_header header;      /* a safetensors file's */
    struct gguf_file gguf;        /* a GGUF file's */
};

struct shards {
    size_t count;
    struct shard *shard; /* [count] */
    bool gguf;           /* GGUF files (their names are llama.cpp's, their
                            matrices all [out][in]), not safetensors */
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
const struct shard_tensor *shards_find(const struct shards *s, const char *name,
                                       size_t *in);

/* Map dir/file (a plain name of the folder) into sh; its tensors are
 * for the caller to list. Fails through model_files_fail(). */
bool shard_map(struct shard *sh, const char *file,
               const struct model_files *files);

/* The bytes of every shard's mapping, for a fingerprint or a size. */
size_t shards_bytes(const struct shards *s);

#endif
