/*
 * spm_internal.h - the SentencePiece tokenizer (spm.h) shared between its
 * files; internal to the core. spm.c: building it from a spec, the
 * vocabulary's index and the interface; spm_encode.c: encoding a text.
 */
#ifndef ATTN_SPM_INTERNAL_H
#define ATTN_SPM_INTERNAL_H

#include "spm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Strings by id, back to back in one block. */
struct spm_strtab {
    char *bytes;
    size_t *off; /* [count + 1] where each starts; the last is the end */
    size_t pad;  /* bytes after each string not part of it: 1 for a NUL */
};

/* An open-addressing index of strings to ids. */
struct spm_index {
    uint32_t *slots; /* [n_slots] an id, or UINT32_MAX: empty */
    size_t n_slots;  /* a power of two, at least twice the strings */
};

struct spm_tokenizer {
    size_t n_tokens;
    struct spm_strtab keys;     /* [n_tokens] the texts encoding matches */
    struct spm_index by_key;    /* the id of each key */
    size_t max_key;             /* the longest key's bytes */
    struct spm_strtab readable; /* [n_tokens] NUL-terminated */
    struct spm_index by_readable;
    float *scores;        /* [n_tokens] */
    uint8_t *types;       /* [n_tokens] enum spm_token_type */
    uint8_t *strip;       /* [n_tokens] enum spm_strip flags */
    int32_t byte_id[256]; /* the token each byte falls back to, or -1 */
    /* The special tokens (CONTROL, USER_DEFINED, UNKNOWN), matched in a
     * text: by rank (longest first, then lowest id) the ids, and by key
     * (byte order, a prefix before what extends it) the ranks. */
    uint32_t *special_id;   /* [n_special] by rank */
    uint32_t *special_rank; /* [n_special] by key */
    size_t n_special;
    int64_t unk_id, bos_id, eos_id;
    bool add_bos, add_eos, add_space_prefix;
};

/* The key of id, and its length into *len. */
static inline const char *spm_key(const struct spm_tokenizer *t, uint32_t id,
                                  size_t *len)
{
    *len = t->keys.off[id + 1] - t->keys.off[id];
    return t->keys.bytes + t->keys.off[id];
}

/* The id whose key is s[0..len), or -1. */
int64_t spm_key_id(const struct spm_tokenizer *t, const char *s, size_t len);

/* ---------------------------------------------------------- spm_encode.c */

/* The tokenizer interface's encode and encode_bytes (tokenizer.h). */
attn_status spm_encode(const void *impl, const char *a, size_t a_len,
                       const char *b, size_t b_len,
                       const struct tok_options *opts, struct tok_encoding *out,
                       struct attn_error *err);
size_t spm_encode_bytes(const void *impl, size_t a_len, size_t b_len);

#endif
