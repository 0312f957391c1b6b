/*
 * spm.c - the SentencePiece tokenizer (spm.h): built once from a spec,
 * its vocabulary indexed by hash; the interface's reading side. Encoding
 * is in spm_encode.c.
 *
 * Every id has two strings, both made at load: its key, the text encoding
 * matches (the spec's, or "[EMPTY_i]" for an empty one), and its readable
 * text for tok_token_text().
 */
#include "bpe_internal.h"
#include "checked.h"
#include "error.h"
#include "spm.h"
#include "spm_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY_SLOT UINT32_MAX

/* --------------------------------------------------------------- index */

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 14695981039346656037u; // FNV-1a
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211u;
    }
    return h ^ (h >> 29);
}

static bool index_init(struct spm_index *x, size_t count)
{
    size_t n = 16;
    while (n < 2 * count)
        n *= 2;
    x->slots = malloc(n * sizeof *x->slots);
    if (!x->slots)
        return false;
    for (size_t i = 0; i < n; i++)
        x->slots[i] = EMPTY_SLOT;
    x->n_slots = n;
    return true;
}

/* The slot of s[0..len) in x over tab: the one holding it, or the empty
 * one where it would go. */
static size_t index_slot(const struct spm_index *x,
                         const struct spm_strtab *tab, const char *s,
                         size_t len)
{
    const size_t mask = x->n_slots - 1;
    size_t at = (size_t)hash_bytes(s, len) & mask;
    for (;; at = (at + 1) & mask) {
        const uint32_t id = x->slots[at];
        if (id == EMPTY_SLOT)
            return at;
        const size_t o = tab->off[id], l = tab->off[id + 1] - o - tab->pad;
        if (l == len && memcmp(tab->bytes + o, s, len) == 0)
            return at;
    }
}

int64_t spm_key_id(const struct spm_tokenizer *t, const char *s, size_t len)
{
    if (len > t->max_key)
        return -1;
    const uint32_t id =
        t->by_key.slots[index_slot(&t->by_key, &t->keys, s, len)];
    return id == EMPTY_SLOT ? -1 : (int64_t)id;
}

/* The byte of a BYTE token's text "<0xNN>" (either case), or -1. */
static int byte_of(const char *s, size_t len)
{
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int b = 0;
    for (int i = 3; i < 5; i++) {
        const char c = s[i];
        const int v = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                             : -1;
        if (v < 0)
            return -1;
        b = b * 16 + v;
    }
    return b;
}

/* ------------------------------------------------------------ building */

static int token_type(const struct spm_spec *spec, size_t id)
{
    return spec->types ? spec->types[id] : SPM_TOKEN_NORMAL;
}

static attn_status check_id(int64_t id, size_t n, const char *field,
                            struct attn_error *err)
{
    if (id < -1 || (id >= 0 && (uint64_t)id >= n))
        return attn_fail(err, ATTN_E_INVALID, field,
                         "%s is %lld; an id below %zu, or -1 for none, is "
                         "needed",
                         field, (long long)id, n);
    return ATTN_OK;
}

static attn_status check_spec(const struct spm_spec *spec,
                              struct attn_error *err)
{
    const size_t n = spec->n_tokens;
    if (n == 0 || !spec->tokens)
        return attn_fail(err, ATTN_E_INVALID, "tokens",
                         "the vocabulary has no tokens");
    if (n > SPM_MAX_VOCAB)
        return attn_fail(err, ATTN_E_TOO_BIG, "tokens",
                         "the vocabulary has %zu tokens; at most %zu are "
                         "allowed",
                         n, SPM_MAX_VOCAB);
    for (size_t i = 0; i < n; i++) {
        const struct spm_string *s = &spec->tokens[i];
        if (s->len > SPM_MAX_TOKEN_BYTES)
            return attn_fail_at(err, ATTN_E_TOO_BIG, "tokens", 1, &i,
                                "tokens[%zu] has %zu bytes; at most %zu are "
                                "allowed",
                                i, s->len, SPM_MAX_TOKEN_BYTES);
        if (!s->text && s->len)
            return attn_fail_at(err, ATTN_E_INVALID, "tokens", 1, &i,
                                "tokens[%zu] has %zu bytes but no text", i,
                                s->len);
        const int type = token_type(spec, i);
        if (type < SPM_TOKEN_UNDEFINED || type > SPM_TOKEN_BYTE)
            return attn_fail_at(err, ATTN_E_INVALID, "types", 1, &i,
                                "types[%zu] is %d; token types are 0 to 6", i,
                                type);
        if (type == SPM_TOKEN_BYTE && byte_of(s->text, s->len) < 0)
            return attn_fail_at(err, ATTN_E_INVALID, "types", 1, &i,
                                "tokens[%zu] ('%.*s') is a BYTE token but not "
                                "<0xNN>",
                                i, (int)(s->len < 64 ? s->len : 64),
                                s->len ? s->text : "");
        if (spec->scores && isnan(spec->scores[i]))
            return attn_fail_at(err, ATTN_E_INVALID, "scores", 1, &i,
                                "scores[%zu] is NaN", i);
    }
    attn_status st;
    if ((st = check_id(spec->unk_id, n, "unk_id", err)) ||
        (st = check_id(spec->bos_id, n, "bos_id", err)) ||
        (st = check_id(spec->eos_id, n, "eos_id", err)))
        return st;
    if (spec->add_bos && spec->bos_id < 0)
        return attn_fail(err, ATTN_E_INVALID, "bos_id",
                         "add_bos is set but bos_id is -1: no BOS to add");
    if (spec->add_eos && spec->eos_id < 0)
        return attn_fail(err, ATTN_E_INVALID, "eos_id",
                         "add_eos is set but eos_id is -1: no EOS to add");
    return ATTN_OK;
}

/* The key of token i into out (NULL: only count); its length. */
static size_t spec_key(const struct spm_spec *spec, size_t i, char *out)
{
    const struct spm_string *s = &spec->tokens[i];
    if (s->len) {
        if (out)
            memcpy(out, s->text, s->len);
        return s->len;
    }
    char name[32];
    const size_t len = (size_t)snprintf(name, sizeof name, "[EMPTY_%zu]", i);
    if (out)
        memcpy(out, name, len);
    return len;
}

/* The keys, readable texts and per-token arrays. */
static attn_status build_strings(struct spm_tokenizer *t,
                                 const struct spm_spec *spec,
                                 struct attn_error *err)
{
    const size_t n = t->n_tokens;
    size_t key_total = 0;
    for (size_t i = 0; i < n; i++)
        key_total += spec_key(spec, i, NULL);
    // n <= 2^20 tokens of <= 2^10 bytes: no overflow; 6 readable bytes
    // a byte and a NUL
    t->keys.bytes = malloc(key_total);
    t->keys.off = malloc((n + 1) * sizeof(size_t));
    t->readable.bytes = malloc(6 * key_total + n);
    t->readable.off = malloc((n + 1) * sizeof(size_t));
    t->scores = malloc(n * sizeof *t->scores);
    t->types = malloc(n);
    t->strip = calloc(n, 1);
    if (!t->keys.bytes || !t->keys.off || !t->readable.bytes ||
        !t->readable.off || !t->scores || !t->types || !t->strip)
        return attn_fail(err, ATTN_E_NOMEM, "tokens",
                         "out of memory for %zu tokens", n);
    t->readable.pad = 1;
    size_t k = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        const size_t len = spec_key(spec, i, t->keys.bytes + k);
        const int type = token_type(spec, i);
        t->keys.off[i] = k;
        t->readable.off[i] = r;
        if (type == SPM_TOKEN_BYTE) {
            // its byte when that is a whole character, else <0xNN>
            const char b = (char)byte_of(t->keys.bytes + k, len);
            r += bpe_readable(&b, 1, false, t->readable.bytes + r);
        } else {
            r += bpe_readable(t->keys.bytes + k, len, type == SPM_TOKEN_NORMAL,
                              t->readable.bytes + r);
        }
        t->readable.bytes[r++] = 0;
        k += len;
        if (len > t->max_key)
            t->max_key = len;
        t->scores[i] = spec->scores ? spec->scores[i] : 0.0f;
        t->types[i] = (uint8_t)type;
        if (spec->strip)
            t->strip[i] = spec->strip[i] & (SPM_STRIP_LEFT | SPM_STRIP_RIGHT);
    }
    t->keys.off[n] = k;
    t->readable.off[n] = r;
    return ATTN_OK;
}

/* The keys (each once: a repeated one is refused, as llama.cpp asserts)
 * and the readable texts (the lowest id of each, BYTE tokens after every
 * other) into their indexes; each byte's fallback token. */
static attn_status build_indexes(struct spm_tokenizer *t,
                                 struct attn_error *err)
{
    const size_t n = t->n_tokens;
    if (!index_init(&t->by_key, n) || !index_init(&t->by_readable, n))
        return attn_fail(err, ATTN_E_NOMEM, "tokens", "out of memory");
    for (size_t id = 0; id < n; id++) {
        size_t len;
        const char *s = spm_key(t, (uint32_t)id, &len);
        const size_t at = index_slot(&t->by_key, &t->keys, s, len);
        if (t->by_key.slots[at] != EMPTY_SLOT)
            return attn_fail_at(err, ATTN_E_INVALID, "tokens", 1, &id,
                                "tokens[%zu] ('%.*s') repeats tokens[%u]", id,
                                (int)(len < 64 ? len : 64), s,
                                (unsigned)t->by_key.slots[at]);
        t->by_key.slots[at] = (uint32_t)id;
    }
    for (int bytes = 0; bytes < 2; bytes++)
        for (size_t id = 0; id < n; id++) {
            if ((t->types[id] == SPM_TOKEN_BYTE) != bytes)
                continue;
            const size_t o = t->readable.off[id];
            const size_t len = t->readable.off[id + 1] - o - 1;
            const size_t at = index_slot(&t->by_readable, &t->readable,
                                         t->readable.bytes + o, len);
            if (t->by_readable.slots[at] == EMPTY_SLOT)
                t->by_readable.slots[at] = (uint32_t)id;
        }
    // <0xNN>, else the byte itself (NUL's would be the empty text, which
    // no key is)
    for (unsigned b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        int64_t id = spm_key_id(t, name, 6);
        if (id < 0 && b != 0) {
            const char c = (char)b;
            id = spm_key_id(t, &c, 1);
        }
        t->byte_id[b] = (int32_t)id;
    }
    return ATTN_OK;
}

static bool is_special_type(int type)
{
    return type == SPM_TOKEN_CONTROL || type == SPM_TOKEN_USER_DEFINED ||
           type == SPM_TOKEN_UNKNOWN;
}

/* A special token while sorting. */
struct special_entry {
    const char *key;
    size_t len;
    uint32_t id, rank;
};

/* Longest first, then the lowest id. */
static int by_rank(const void *pa, const void *pb)
{
    const struct special_entry *a = pa, *b = pb;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Byte order, a prefix first (keys are unique). */
static int by_key(const void *pa, const void *pb)
{
    const struct special_entry *a = pa, *b = pb;
    const int c = memcmp(a->key, b->key, a->len < b->len ? a->len : b->len);
    if (c)
        return c;
    return a->len < b->len ? -1 : a->len > b->len;
}

/* The special tokens by rank and by key. */
static attn_status build_special(struct spm_tokenizer *t,
                                 struct attn_error *err)
{
    size_t n = 0;
    for (size_t id = 0; id < t->n_tokens; id++)
        n += is_special_type(t->types[id]);
    struct special_entry *e = malloc((n ? n : 1) * sizeof *e);
    t->special_id = malloc((n ? n : 1) * sizeof(uint32_t));
    t->special_rank = malloc((n ? n : 1) * sizeof(uint32_t));
    if (!e || !t->special_id || !t->special_rank) {
        free(e);
        return attn_fail(err, ATTN_E_NOMEM, "tokens", "out of memory");
    }
    n = 0;
    for (size_t id = 0; id < t->n_tokens; id++)
        if (is_special_type(t->types[id])) {
            e[n].key = spm_key(t, (uint32_t)id, &e[n].len);
            e[n++].id = (uint32_t)id;
        }
    qsort(e, n, sizeof *e, by_rank);
    for (size_t r = 0; r < n; r++) {
        e[r].rank = (uint32_t)r;
        t->special_id[r] = e[r].id;
    }
    qsort(e, n, sizeof *e, by_key);
    for (size_t i = 0; i < n; i++)
        t->special_rank[i] = e[i].rank;
    free(e);
    t->n_special = n;
    return ATTN_OK;
}

/* ----------------------------------------------------------- interface */

static size_t tokenizer_vocab_size(const void *impl)
{
    const struct spm_tokenizer *t = impl;
    return t->n_tokens;
}

static const char *tokenizer_token_text(const void *impl, uint32_t id)
{
    const struct spm_tokenizer *t = impl;
    return id < t->n_tokens ? t->readable.bytes + t->readable.off[id] : NULL;
}

static int64_t tokenizer_token_id(const void *impl, const char *text,
                                  size_t len)
{
    const struct spm_tokenizer *t = impl;
    const size_t at = index_slot(&t->by_readable, &t->readable, text, len);
    const uint32_t id = t->by_readable.slots[at];
    return id == EMPTY_SLOT ? -1 : (int64_t)id;
}

static size_t tokenizer_token_bytes(const void *impl, uint32_t id, char *out,
                                    size_t cap)
{
    const struct spm_tokenizer *t = impl;
    if (id >= t->n_tokens)
        return 0;
    size_t len;
    const char *key = spm_key(t, id, &len);
    switch (t->types[id]) {
    case SPM_TOKEN_BYTE:
        if (cap)
            out[0] = (char)byte_of(key, len);
        return 1;
    case SPM_TOKEN_CONTROL:
    case SPM_TOKEN_UNKNOWN:
    case SPM_TOKEN_USER_DEFINED:
        if (cap)
            memcpy(out, key, len < cap ? len : cap);
        return len;
    case SPM_TOKEN_NORMAL: break;
    default: return 0; // UNUSED, UNDEFINED: llama.cpp writes nothing
    }
    size_t n = 0;
    for (size_t at = 0; at < len;) {
        // U+2581 is a space
        char c = key[at];
        if (len - at >= 3 && memcmp(key + at, "\xe2\x96\x81", 3) == 0) {
            c = ' ';
            at += 3;
        } else {
            at++;
        }
        if (n < cap)
            out[n] = c;
        n++;
    }
    return n;
}

static bool tokenizer_token_special(const void *impl, uint32_t id)
{
    const struct spm_tokenizer *t = impl;
    if (id >= t->n_tokens)
        return false;
    const int type = t->types[id];
    return type == SPM_TOKEN_CONTROL || type == SPM_TOKEN_UNKNOWN ||
           type == SPM_TOKEN_UNUSED || type == SPM_TOKEN_UNDEFINED;
}

static void tokenizer_free(void *impl)
{
    struct spm_tokenizer *t = impl;
    if (!t)
        return;
    free(t->keys.bytes);
    free(t->keys.off);
    free(t->readable.bytes);
    free(t->readable.off);
    free(t->by_key.slots);
    free(t->by_readable.slots);
    free(t->scores);
    free(t->types);
    free(t->strip);
    free(t->special_id);
    free(t->special_rank);
    free(t);
}

static const struct tokenizer_ops spm_ops = {
    .name = "spm",
    .encode = spm_encode,
    .encode_bytes = spm_encode_bytes,
    .vocab_size = tokenizer_vocab_size,
    .token_text = tokenizer_token_text,
    .token_bytes = tokenizer_token_bytes,
    .token_id = tokenizer_token_id,
    .token_special = tokenizer_token_special,
    .free = tokenizer_free,
};

attn_status spm_tokenizer_new(const struct spm_spec *spec,
                              struct tokenizer *out, struct attn_error *err)
{
    memset(out, 0, sizeof *out);
    attn_status st = check_spec(spec, err);
    if (st)
        return st;
    struct spm_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return attn_fail(err, ATTN_E_NOMEM, "tokens",
                         "out of memory for the tokenizer");
    t->n_tokens = spec->n_tokens;
    t->unk_id = spec->unk_id;
    t->bos_id = spec->bos_id;
    t->eos_id = spec->eos_id;
    t->add_bos = spec->add_bos;
    t->add_eos = spec->add_eos;
    t->add_space_prefix = spec->add_space_prefix;
    if ((st = build_strings(t, spec, err)) || (st = build_indexes(t, err)) ||
        (st = build_special(t, err))) {
        tokenizer_free(t);
        return st;
    }
    out->ops = &spm_ops;
    out->impl = t;
    return ATTN_OK;
}
