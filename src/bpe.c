/*
 * bpe.c - the BPE tokenizer (bpe.h): built once from a spec, then encoding
 * texts through the tokenizer interface.
 *
 * Every id has two strings, both precomputed at load: its key, the bytes
 * it stands for in the normalized text (byte-level tokens decoded from
 * bytes_to_unicode's characters), through which the vocabulary is looked
 * up while encoding; and its readable text for tok_token_text(). The
 * added tokens are found with a byte trie, leftmost and longest first, as
 * the library's Aho-Corasick automaton finds them.
 */
#include "bpe.h"
#include "bpe_internal.h"
#include "checked.h"
#include "error.h"
#include "unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY_SLOT UINT32_MAX
#define NO_TOKEN (-1)

/* Strings by id, back to back in one block. */
struct strtab {
    char *bytes;
    size_t *off; /* [count + 1] where each starts; the last is the end */
    size_t count;
    size_t pad; /* bytes after each string not part of it: 1 for a NUL */
};

/* An open-addressing index of some of a strtab's strings, by content. */
struct strindex {
    uint32_t *slots; /* [n_slots] an id or EMPTY_SLOT */
    size_t n_slots;  /* a power of two, at least twice the strings */
};

/* A byte trie of added tokens' contents. Node 0 is the root. */
struct trie_node {
    uint32_t child;   /* the first child, 0: none */
    uint32_t sibling; /* the next child of the same parent, 0: none */
    int32_t added;    /* the added token that ends here, or NO_TOKEN */
    uint8_t byte;
};

struct trie {
    struct trie_node *nodes;
    size_t count;
    uint8_t first[32]; /* a bit per byte that starts some content */
};

struct added {
    uint32_t id;
    bool lstrip, rstrip;
};

struct bpe_tokenizer {
    size_t n_vocab, n_ids;
    struct strtab keys;     /* [n_ids] what each id stands for */
    struct strindex by_key; /* the model's ids (not past n_vocab) */
    struct strtab texts;    /* [n_ids] readable, NUL-terminated */
    struct strindex by_text;
    struct bpe_pairs pairs;
    struct added *added;
    size_t n_added;
    struct trie raw, normalized; /* added tokens matched before / after
                                    normalizing */
    int32_t unit_id[256];        /* byte-level: the id of each byte, or -1 */
    int32_t fallback[256];       /* the id of <0xNN>, or -1 */
    uint8_t *special;            /* [n_ids / 8 + 1] a bit per added id
                                    and per gap */
    bool byte_level, byte_fallback, ignore_merges, fuse_unk;
    bool meta_space; /* U+2581 reads as a space */
    struct bpe_norm_step steps[BPE_MAX_NORM_STEPS];
    size_t n_steps;
    struct bpe_split splits[BPE_MAX_SPLITS];
    size_t n_splits;
    char *step_text; /* the steps' and splits' strings, copied */
    int64_t unk_id, bos_id;
};

/* ----------------------------------------------------------- bytes_to_unicode
 */

/* GPT-2's bytes_to_unicode: the printable bytes (! to ~, 0xA1 to 0xAC,
 * 0xAE to 0xFF) stand for themselves; the other 68, in order, for U+0100
 * onwards. */
static uint32_t byte_char(unsigned b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)
        return b;
    unsigned n = 0;
    for (unsigned c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) ||
              c >= 0xAE))
            n++;
    return 0x100 + n;
}

/* The byte character cp stands for, or -1. */
static int char_byte(const int16_t *inverse, uint32_t cp)
{
    return cp < 0x144 ? inverse[cp] : -1;
}

static void byte_inverse(int16_t inverse[0x144])
{
    for (size_t i = 0; i < 0x144; i++)
        inverse[i] = -1;
    for (unsigned b = 0; b < 256; b++)
        inverse[byte_char(b)] = (int16_t)b;
}

/* Decode a byte-level token s[0..len) into out (len bytes at most); its
 * length, or SIZE_MAX when a character is not one of the 256. */
static size_t byte_decode(const int16_t *inverse, const char *s, size_t len,
                          char *out)
{
    size_t o = 0;
    for (size_t at = 0; at < len;) {
        uint32_t cp;
        at += bpe_utf8_next(s, len, at, &cp);
        const int b = char_byte(inverse, cp);
        if (b < 0)
            return SIZE_MAX;
        out[o++] = (char)b;
    }
    return o;
}

/* ------------------------------------------------------------ the tables */

static const char *str_at(const struct strtab *t, uint32_t id, size_t *len)
{
    *len = t->off[id + 1] - t->off[id] - t->pad;
    return t->bytes + t->off[id];
}

static uint64_t fnv1a(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static bool index_init(struct strindex *x, size_t count)
{
    size_t n = 16;
    while (n < 2 * count)
        n *= 2;
    x->n_slots = n;
    x->slots = malloc(n * sizeof *x->slots);
    if (!x->slots)
        return false;
    memset(x->slots, 0xff, n * sizeof *x->slots);
    return true;
}

/* The slot holding s[0..len) among t's strings, or the empty one where it
 * would go. */
static size_t index_slot(const struct strindex *x, const struct strtab *t,
                         const char *s, size_t len)
{
    const size_t mask = x->n_slots - 1;
    for (size_t at = (size_t)fnv1a(s, len) & mask;; at = (at + 1) & mask) {
        const uint32_t id = x->slots[at];
        if (id == EMPTY_SLOT)
            return at;
        size_t n;
        const char *k = str_at(t, id, &n);
        if (n == len && memcmp(k, s, len) == 0)
            return at;
    }
}

static int64_t index_find(const struct strindex *x, const struct strtab *t,
                          const char *s, size_t len)
{
    const uint32_t id = x->slots[index_slot(x, t, s, len)];
    return id == EMPTY_SLOT ? -1 : (int64_t)id;
}

/* Insert id unless its string is there already: false then. */
static bool index_add(struct strindex *x, const struct strtab *t, uint32_t id)
{
    size_t len;
    const char *s = str_at(t, id, &len);
    const size_t at = index_slot(x, t, s, len);
    if (x->slots[at] != EMPTY_SLOT)
        return false;
    x->slots[at] = id;
    return true;
}

/* --------------------------------------------------------- the added trie */

static bool trie_init(struct trie *t, size_t max_nodes)
{
    memset(t, 0, sizeof *t);
    t->nodes = calloc(max_nodes, sizeof *t->nodes);
    if (!t->nodes)
        return false;
    t->nodes[0].added = NO_TOKEN;
    t->count = 1;
    return true;
}

/* Add s[0..len) (nonempty) for added token k; a content given twice keeps
 * its first token. The caller sized the nodes for every byte. */
static void trie_add(struct trie *t, const char *s, size_t len, int32_t k)
{
    uint32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        const uint8_t b = (uint8_t)s[i];
        uint32_t c = t->nodes[node].child;
        while (c && t->nodes[c].byte != b)
            c = t->nodes[c].sibling;
        if (!c) {
            c = (uint32_t)t->count++;
            t->nodes[c] = (struct trie_node){
                .sibling = t->nodes[node].child, .added = NO_TOKEN, .byte = b};
            t->nodes[node].child = c;
        }
        node = c;
    }
    if (t->nodes[node].added == NO_TOKEN)
        t->nodes[node].added = k;
    t->first[(uint8_t)s[0] >> 3] |= (uint8_t)(1u << ((uint8_t)s[0] & 7));
}

/* The longest content at s[at], its length into *len; NO_TOKEN if none. */
static int32_t trie_longest(const struct trie *t, const char *s, size_t n,
                            size_t at, size_t *len)
{
    int32_t found = NO_TOKEN;
    uint32_t node = 0;
    for (size_t i = at; i < n; i++) {
        uint32_t c = t->nodes[node].child;
        while (c && t->nodes[c].byte != (uint8_t)s[i])
            c = t->nodes[c].sibling;
        if (!c)
            break;
        node = c;
        if (t->nodes[c].added != NO_TOKEN) {
            found = t->nodes[c].added;
            *len = i + 1 - at;
        }
    }
    return found;
}

/* The first match at or after from: its start, length and added token. */
static bool trie_next(const struct trie *t, const char *s, size_t n,
                      size_t from, size_t *start, size_t *len, int32_t *k)
{
    if (t->count <= 1)
        return false;
    for (size_t i = from; i < n; i++) {
        const uint8_t b = (uint8_t)s[i];
        if (!(t->first[b >> 3] & (1u << (b & 7))))
            continue;
        const int32_t found = trie_longest(t, s, n, i, len);
        if (found != NO_TOKEN) {
            *start = i;
            *k = found;
            return true;
        }
    }
    return false;
}

/* The byte a SentencePiece vocabulary's byte-fallback token <0xNN>
 * stands for, or -1 when s is no such token. */
static int fallback_byte(const struct bpe_spec *spec,
                         const struct bpe_string *s)
{
    static const char hex[] = "0123456789ABCDEF";
    if (!spec->byte_fallback || s->len != 6 || memcmp(s->text, "<0x", 3) ||
        s->text[5] != '>')
        return -1;
    const char *hi = memchr(hex, s->text[3], 16),
               *lo = memchr(hex, s->text[4], 16);
    if (!hi || !lo || !s->text[3] || !s->text[4])
        return -1;
    return (int)((hi - hex) * 16 + (lo - hex));
}

/* ----------------------------------------------------------- building */

static void tokenizer_free(void *impl);

/* A string of the spec: nonempty, within the cap, UTF-8. */
static attn_status check_string(const struct bpe_string *s, const char *field,
                                size_t index, struct attn_error *err)
{
    if (!s->text || s->len == 0)
        return attn_fail_at(err, ATTN_E_INVALID, field, 1, &index,
                            "%s[%zu] is empty", field, index);
    if (s->len > BPE_MAX_TOKEN_BYTES)
        return attn_fail_at(err, ATTN_E_TOO_BIG, field, 1, &index,
                            "%s[%zu] has %zu bytes; at most %zu are allowed",
                            field, index, s->len, BPE_MAX_TOKEN_BYTES);
    if (bpe_utf8_valid(s->text, s->len) != s->len)
        return attn_fail_at(err, ATTN_E_INVALID, field, 1, &index,
                            "%s[%zu] is not valid UTF-8", field, index);
    return ATTN_OK;
}

/* The normalizer: the shorthand or steps, within the caps. */
static attn_status check_steps(const struct bpe_spec *spec,
                               struct attn_error *err)
{
    if (spec->n_norm_steps && spec->normalizer != BPE_NORM_NONE)
        return attn_fail(err, ATTN_E_INVALID, "norm_steps",
                         "both a normalizer shorthand and %zu steps",
                         spec->n_norm_steps);
    if (spec->n_norm_steps > BPE_MAX_NORM_STEPS)
        return attn_fail(err, ATTN_E_TOO_BIG, "norm_steps",
                         "%zu normalizer steps; at most %d are allowed",
                         spec->n_norm_steps, BPE_MAX_NORM_STEPS);
    for (size_t i = 0; i < spec->n_norm_steps; i++) {
        const struct bpe_norm_step *step = &spec->norm_steps[i];
        attn_status st;
        if (step->kind != BPE_NORM_STEP_NFC &&
            step->kind != BPE_NORM_STEP_PREPEND &&
            step->kind != BPE_NORM_STEP_REPLACE)
            return attn_fail_at(err, ATTN_E_INVALID, "norm_steps", 1, &i,
                                "norm_steps[%zu] has no known kind", i);
        // a content may be empty (a Replace that deletes); a pattern not
        if (step->kind != BPE_NORM_STEP_NFC && step->content.len &&
            (st = check_string(&step->content, "norm_steps", i, err)))
            return st;
        if (step->kind == BPE_NORM_STEP_REPLACE &&
            (st = check_string(&step->pattern, "norm_steps", i, err)))
            return st;
    }
    // the text a byte may become, so that every buffer has a bound
    size_t growth = 1;
    for (size_t i = 0; i < spec->n_norm_steps; i++) {
        const struct bpe_norm_step *step = &spec->norm_steps[i];
        if (step->kind == BPE_NORM_STEP_NFC)
            growth *= 3;
        else if (step->kind == BPE_NORM_STEP_REPLACE &&
                 step->content.len > step->pattern.len)
            growth *=
                (step->content.len + step->pattern.len - 1) / step->pattern.len;
        if (growth > BPE_MAX_NORM_GROWTH)
            return attn_fail(err, ATTN_E_TOO_BIG, "norm_steps",
                             "the normalizer may make more than %d bytes of "
                             "one",
                             BPE_MAX_NORM_GROWTH);
    }
    return ATTN_OK;
}

/* The pre-tokenizer: the pattern or splits. */
static attn_status check_splits(const struct bpe_spec *spec,
                                struct attn_error *err)
{
    if (spec->n_splits && spec->pattern != BPE_PATTERN_NONE)
        return attn_fail(err, ATTN_E_INVALID, "splits",
                         "both a pattern and %zu splits", spec->n_splits);
    if (spec->n_splits > BPE_MAX_SPLITS)
        return attn_fail(err, ATTN_E_TOO_BIG, "splits",
                         "%zu splits; at most %d are allowed", spec->n_splits,
                         BPE_MAX_SPLITS);
    if (spec->pattern > BPE_PATTERN_O200K)
        return attn_fail(err, ATTN_E_INVALID, "pattern",
                         "pattern %d is not a known one", (int)spec->pattern);
    for (size_t i = 0; i < spec->n_splits; i++) {
        const struct bpe_split *sp = &spec->splits[i];
        if (sp->pattern > BPE_PATTERN_DIGIT ||
            sp->behavior > BPE_SPLIT_CONTIGUOUS)
            return attn_fail_at(err, ATTN_E_INVALID, "splits", 1, &i,
                                "splits[%zu] has no known pattern or "
                                "behavior",
                                i);
        if (sp->pattern == BPE_PATTERN_NONE) {
            if (sp->literal.len > BPE_MAX_TOKEN_BYTES)
                return attn_fail_at(err, ATTN_E_TOO_BIG, "splits", 1, &i,
                                    "splits[%zu] has %zu bytes; at most %zu "
                                    "are allowed",
                                    i, sp->literal.len, BPE_MAX_TOKEN_BYTES);
            if (sp->literal.len &&
                bpe_utf8_valid(sp->literal.text, sp->literal.len) !=
                    sp->literal.len)
                return attn_fail_at(err, ATTN_E_INVALID, "splits", 1, &i,
                                    "splits[%zu] is not valid UTF-8", i);
        }
    }
    return ATTN_OK;
}

static attn_status check_spec(const struct bpe_spec *spec, size_t *n_ids,
                              struct attn_error *err)
{
    if (spec->n_vocab == 0 || spec->n_vocab > BPE_MAX_VOCAB)
        return attn_fail(err, ATTN_E_TOO_BIG, "vocab",
                         "the vocabulary has %zu tokens; 1 to %zu are allowed",
                         spec->n_vocab, BPE_MAX_VOCAB);
    if (spec->n_merges > BPE_MAX_MERGES)
        return attn_fail(err, ATTN_E_TOO_BIG, "merges",
                         "%zu merges; at most %zu are allowed", spec->n_merges,
                         BPE_MAX_MERGES);
    if (spec->n_added > BPE_MAX_ADDED)
        return attn_fail(err, ATTN_E_TOO_BIG, "added_tokens",
                         "%zu added tokens; at most %zu are allowed",
                         spec->n_added, BPE_MAX_ADDED);
    attn_status st;
    for (size_t i = 0; i < spec->n_vocab; i++)
        if (spec->vocab[i].text && // NULL: a gap
            (st = check_string(&spec->vocab[i], "vocab", i, err)))
            return st;
    size_t top = spec->n_vocab;
    for (size_t i = 0; i < spec->n_added; i++) {
        const struct bpe_added_token *a = &spec->added[i];
        if ((st = check_string(&a->content, "added_tokens", i, err)))
            return st;
        if (a->id >= BPE_MAX_VOCAB)
            return attn_fail_at(err, ATTN_E_TOO_BIG, "added_tokens", 1, &i,
                                "added token %zu has id %u; ids stop below %zu",
                                i, a->id, BPE_MAX_VOCAB);
        if (a->single_word)
            return attn_fail_at(err, ATTN_E_INVALID, "added_tokens", 1, &i,
                                "added token %zu ('%.64s') is single_word, "
                                "which is not supported",
                                i, a->content.text);
        if (a->id < spec->n_vocab && spec->vocab[a->id].text &&
            (spec->vocab[a->id].len != a->content.len ||
             memcmp(spec->vocab[a->id].text, a->content.text, a->content.len)))
            return attn_fail_at(
                err, ATTN_E_INVALID, "added_tokens", 1, &i,
                "added token %zu ('%.*s') has id %u, which "
                "the vocabulary gives to '%.*s'",
                i, (int)(a->content.len < 64 ? a->content.len : 64),
                a->content.text, a->id,
                (int)(spec->vocab[a->id].len < 64 ? spec->vocab[a->id].len
                                                  : 64),
                spec->vocab[a->id].text);
        if (a->id + 1u > top)
            top = a->id + 1u;
    }
    for (size_t i = 0; i < spec->n_merges; i++) {
        if ((st = check_string(&spec->merges[i].a, "merges", i, err)) ||
            (st = check_string(&spec->merges[i].b, "merges", i, err)))
            return st;
    }
    if (spec->unk_id >= (int64_t)top || spec->unk_id < -1)
        return attn_fail(
            err, ATTN_E_INVALID, "unk_id",
            "unk_id %lld is not an id of the vocabulary (0 to %zu)",
            (long long)spec->unk_id, top - 1);
    if (spec->bos_id >= (int64_t)top || spec->bos_id < -1)
        return attn_fail(
            err, ATTN_E_INVALID, "bos_id",
            "bos_id %lld is not an id of the vocabulary (0 to %zu)",
            (long long)spec->bos_id, top - 1);
    if ((st = check_steps(spec, err)) || (st = check_splits(spec, err)))
        return st;
    *n_ids = top;
    return ATTN_OK;
}

/* The normalizer's steps and the splits, their strings copied into one
 * block; whether U+2581 reads as a space. */
static attn_status build_pipeline(struct bpe_tokenizer *t,
                                  const struct bpe_spec *spec,
                                  struct attn_error *err)
{
    static const char meta[] = "\xe2\x96\x81";
    t->n_steps = spec->n_norm_steps;
    if (t->n_steps)
        memcpy(t->steps, spec->norm_steps, t->n_steps * sizeof *t->steps);
    else
        t->n_steps = bpe_norm_shorthand(spec->normalizer, t->steps);
    t->n_splits = spec->n_splits;
    if (t->n_splits)
        memcpy(t->splits, spec->splits, t->n_splits * sizeof *t->splits);
    else if (spec->pattern != BPE_PATTERN_NONE)
        t->splits[t->n_splits++] = (struct bpe_split){.pattern = spec->pattern};
    size_t total = 1;
    for (size_t i = 0; i < t->n_steps; i++)
        total += t->steps[i].pattern.len + t->steps[i].content.len;
    for (size_t i = 0; i < t->n_splits; i++)
        total += t->splits[i].literal.len;
    t->step_text = malloc(total);
    if (!t->step_text)
        return attn_fail(err, ATTN_E_NOMEM, "norm_steps", "out of memory");
    char *at = t->step_text;
    struct bpe_string *strings[2 * BPE_MAX_NORM_STEPS + BPE_MAX_SPLITS];
    size_t n = 0;
    for (size_t i = 0; i < t->n_steps; i++) {
        strings[n++] = &t->steps[i].pattern;
        strings[n++] = &t->steps[i].content;
    }
    for (size_t i = 0; i < t->n_splits; i++)
        strings[n++] = &t->splits[i].literal;
    for (size_t i = 0; i < n; i++) {
        if (strings[i]->len)
            memcpy(at, strings[i]->text, strings[i]->len);
        strings[i]->text = at;
        at += strings[i]->len;
    }
    // SentencePiece's space: a vocabulary not byte-level, or a normalizer
    // that writes it
    t->meta_space = !t->byte_level;
    for (size_t i = 0; i < t->n_steps; i++)
        if (t->steps[i].content.len == 3 &&
            memcmp(t->steps[i].content.text, meta, 3) == 0)
            t->meta_space = true;
    return ATTN_OK;
}

/* The keys and readable texts of every id. */
static attn_status build_strings(struct bpe_tokenizer *t,
                                 const struct bpe_spec *spec,
                                 const int16_t *inverse, struct attn_error *err)
{
    const size_t n = t->n_ids;
    const struct bpe_string **by_id = calloc(n, sizeof *by_id);
    t->keys.off = malloc((n + 1) * sizeof(size_t));
    t->texts.off = malloc((n + 1) * sizeof(size_t));
    t->special = calloc(n / 8 + 1, 1);
    if (!by_id || !t->keys.off || !t->texts.off || !t->special) {
        free(by_id);
        return attn_fail(err, ATTN_E_NOMEM, "vocab", "out of memory");
    }
    for (size_t i = 0; i < spec->n_vocab; i++)
        by_id[i] = spec->vocab[i].text ? &spec->vocab[i] : NULL;
    for (size_t i = 0; i < spec->n_added; i++) {
        const uint32_t id = spec->added[i].id;
        if ((id >= spec->n_vocab || !spec->vocab[id].text) && by_id[id]) {
            free(by_id);
            return attn_fail_at(err, ATTN_E_INVALID, "added_tokens", 1, &i,
                                "added token %zu has id %u, as an earlier "
                                "one has",
                                i, id);
        }
        by_id[id] = &spec->added[i].content;
    }
    size_t key_total = 0, text_total = 0;
    for (size_t id = 0; id < n; id++) {
        // keys are never longer than the file's strings; readable texts
        // at most 6 bytes per byte (<0xNN>), and a NUL; a gap has none
        const size_t len = by_id[id] ? by_id[id]->len : 0;
        key_total += len;
        text_total += 6 * len + 1;
    }
    t->keys.bytes = malloc(key_total ? key_total : 1);
    t->texts.bytes = malloc(text_total);
    if (!t->keys.bytes || !t->texts.bytes) {
        free(by_id);
        return attn_fail(err, ATTN_E_NOMEM, "vocab",
                         "out of memory for %zu tokens", n);
    }
    t->keys.count = t->texts.count = n;
    t->texts.pad = 1;
    size_t k = 0, x = 0;
    for (size_t id = 0; id < n; id++) {
        const struct bpe_string *s = by_id[id];
        t->keys.off[id] = k;
        t->texts.off[id] = x;
        if (!s) {
            // a gap: no key, an empty text, special
            t->special[id / 8] |= (uint8_t)(1u << (id % 8));
            t->texts.bytes[x++] = 0;
            continue;
        }
        const bool model = id < spec->n_vocab && spec->vocab[id].text;
        size_t klen = s->len;
        if (model && t->byte_level)
            klen = byte_decode(inverse, s->text, s->len, t->keys.bytes + k);
        if (klen == SIZE_MAX || !model || !t->byte_level) {
            // added tokens, SentencePiece tokens and the rare byte-level
            // token outside the alphabet stand for their own bytes
            klen = s->len;
            memcpy(t->keys.bytes + k, s->text, klen);
        }
        const bool added = !model || (model && s != &spec->vocab[id]);
        size_t tlen;
        if (added) {
            memcpy(t->texts.bytes + x, s->text, s->len);
            tlen = s->len;
        } else if (fallback_byte(spec, s) >= 0) {
            // a byte of the fallback reads as its character when it is a
            // whole one (ASCII), else as itself
            const char b = (char)fallback_byte(spec, s);
            tlen = bpe_readable(&b, 1, false, t->texts.bytes + x);
        } else {
            tlen = bpe_readable(t->keys.bytes + k, klen, t->meta_space,
                                t->texts.bytes + x);
        }
        if (added)
            t->special[id / 8] |= (uint8_t)(1u << (id % 8));
        t->texts.bytes[x + tlen] = 0;
        k += klen;
        x += tlen + 1;
    }
    t->keys.off[n] = k;
    t->texts.off[n] = x;
    free(by_id);
    return ATTN_OK;
}

/* The model's keys into by_key (a byte-level token outside the alphabet
 * is left out: no text can spell it), the readable texts into by_text
 * (added tokens first, then the lowest id of each text, the fallback's
 * bytes after every other token). */
static attn_status build_indexes(struct bpe_tokenizer *t,
                                 const struct bpe_spec *spec,
                                 const int16_t *inverse, struct attn_error *err)
{
    if (!index_init(&t->by_key, t->n_vocab) ||
        !index_init(&t->by_text, t->n_ids))
        return attn_fail(err, ATTN_E_NOMEM, "vocab", "out of memory");
    char buf[BPE_MAX_TOKEN_BYTES];
    for (size_t id = 0; id < t->n_vocab; id++) {
        if (!spec->vocab[id].text ||
            (t->byte_level &&
             byte_decode(inverse, spec->vocab[id].text, spec->vocab[id].len,
                         buf) == SIZE_MAX))
            continue; // a gap, or a token no text can spell
        if (!index_add(&t->by_key, &t->keys, (uint32_t)id)) {
            size_t len;
            const char *s = str_at(&t->keys, (uint32_t)id, &len);
            return attn_fail_at(
                err, ATTN_E_INVALID, "vocab", 1, &id,
                "vocab[%zu] ('%.*s') repeats token %lld", id,
                (int)(spec->vocab[id].len < 64 ? spec->vocab[id].len : 64),
                spec->vocab[id].text,
                (long long)index_find(&t->by_key, &t->keys, s, len));
        }
    }
    // texts: added tokens first, then the vocabulary's, a byte of the
    // fallback last, so that a text one of those reads as too (",") finds
    // the token that spells it
    for (size_t i = 0; i < spec->n_added; i++)
        index_add(&t->by_text, &t->texts, spec->added[i].id);
    for (int bytes = 0; bytes < 2; bytes++)
        for (size_t id = 0; id < t->n_ids; id++)
            if ((id < spec->n_vocab &&
                 fallback_byte(spec, &spec->vocab[id]) >= 0) == bytes &&
                t->texts.off[id + 1] - t->texts.off[id] > 1) // not a gap
                index_add(&t->by_text, &t->texts, (uint32_t)id);
    return ATTN_OK;
}

static int64_t key_id(const struct bpe_tokenizer *t, const char *s, size_t len)
{
    return index_find(&t->by_key, &t->keys, s, len);
}

/* A merge's token, as the vocabulary spells it, into its id. */
static int64_t merge_part(const struct bpe_tokenizer *t, const int16_t *inverse,
                          const struct bpe_string *s, char *buf, size_t *len)
{
    *len = s->len;
    if (t->byte_level) {
        *len = byte_decode(inverse, s->text, s->len, buf);
        if (*len == SIZE_MAX)
            return -1;
    } else {
        memcpy(buf, s->text, s->len);
    }
    return key_id(t, buf, *len);
}

static attn_status build_merges(struct bpe_tokenizer *t,
                                const struct bpe_spec *spec,
                                const int16_t *inverse, struct attn_error *err)
{
    if (!bpe_pairs_init(&t->pairs, spec->n_merges))
        return attn_fail(err, ATTN_E_NOMEM, "merges",
                         "out of memory for %zu merges", spec->n_merges);
    char ab[2 * BPE_MAX_TOKEN_BYTES];
    for (size_t i = 0; i < spec->n_merges; i++) {
        const struct bpe_merge *m = &spec->merges[i];
        size_t la, lb;
        const int64_t a = merge_part(t, inverse, &m->a, ab, &la);
        const int64_t b =
            a < 0 ? -1 : merge_part(t, inverse, &m->b, ab + la, &lb);
        const int64_t c = b < 0 ? -1 : key_id(t, ab, la + lb);
        if (c < 0) {
            const struct bpe_string *missing = a < 0   ? &m->a
                                               : b < 0 ? &m->b
                                                       : NULL;
            if (missing)
                return attn_fail_at(err, ATTN_E_INVALID, "merges", 1, &i,
                                    "merges[%zu] ('%.64s %.64s'): '%.64s' is "
                                    "not in the vocabulary",
                                    i, m->a.text, m->b.text, missing->text);
            return attn_fail_at(err, ATTN_E_INVALID, "merges", 1, &i,
                                "merges[%zu] ('%.64s %.64s'): what it makes is "
                                "not in the vocabulary",
                                i, m->a.text, m->b.text);
        }
        bpe_pairs_put(&t->pairs, (uint32_t)a, (uint32_t)b, (uint32_t)i,
                      (uint32_t)c);
    }
    return ATTN_OK;
}

static attn_status build_added(struct bpe_tokenizer *t,
                               const struct bpe_spec *spec,
                               struct attn_error *err)
{
    // room to normalize the longest content (the caps keep it small)
    const size_t most =
        bpe_norm_bound(t->steps, t->n_steps, BPE_MAX_TOKEN_BYTES);
    const size_t scratch_n =
        bpe_norm_scratch(t->steps, t->n_steps, BPE_MAX_TOKEN_BYTES);
    size_t nodes = 1;
    for (size_t i = 0; i < spec->n_added; i++)
        nodes +=
            bpe_norm_bound(t->steps, t->n_steps, spec->added[i].content.len);
    t->n_added = spec->n_added;
    t->added = calloc(spec->n_added ? spec->n_added : 1, sizeof *t->added);
    char *buf = malloc(2 * most);
    uint32_t *scratch = malloc((scratch_n ? scratch_n : 1) * sizeof *scratch);
    if (!t->added || !buf || !scratch || !trie_init(&t->raw, nodes) ||
        !trie_init(&t->normalized, nodes)) {
        free(buf);
        free(scratch);
        return attn_fail(err, ATTN_E_NOMEM, "added_tokens", "out of memory");
    }
    // the special ones first, as the library's automaton lists them
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < spec->n_added; i++) {
            const struct bpe_added_token *a = &spec->added[i];
            if (a->special != (pass == 0))
                continue;
            t->added[i] = (struct added){a->id, a->lstrip, a->rstrip};
            if (!a->normalized) {
                trie_add(&t->raw, a->content.text, a->content.len, (int32_t)i);
                continue;
            }
            const size_t len =
                bpe_norm_apply(t->steps, t->n_steps, a->content.text,
                               a->content.len, scratch, buf, buf + most);
            if (len)
                trie_add(&t->normalized, buf, len, (int32_t)i);
        }
    }
    free(buf);
    free(scratch);
    return ATTN_OK;
}

/* The id of each byte's character (byte-level), and of each <0xNN>. */
static void build_units(struct bpe_tokenizer *t)
{
    for (unsigned b = 0; b < 256; b++) {
        char c = (char)b, name[8];
        t->unit_id[b] = t->byte_level ? (int32_t)key_id(t, &c, 1) : -1;
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->fallback[b] = (int32_t)key_id(t, name, 6);
    }
}

/* -------------------------------------------------------------- encoding */

/* Where the ids go, up to cap; over it, encoding stops. */
struct sink {
    uint32_t *ids;
    uint8_t *added;
    size_t count, cap;
    bool over;
};

static void put(struct sink *s, uint32_t id, bool added)
{
    if (s->count == s->cap) {
        s->over = true;
        return;
    }
    s->ids[s->count] = id;
    s->added[s->count] = added;
    s->count++;
}

/* The workspace of one encode: the symbols of a pre-token, the
 * normalizer's code points, the normalized text and the normalizer's
 * second buffer. */
struct work {
    struct bpe_word word;
    uint32_t *scratch;
    char *norm, *norm_tmp;
};

/* The room encode() needs for len bytes: symbols, scratch code points,
 * normalized bytes (each of two buffers) and output tokens; false on
 * overflow. */
static bool plan(const struct bpe_tokenizer *t, size_t len, size_t *symbols,
                 size_t *scratch, size_t *norm, size_t *tokens)
{
    // a symbol per byte of a normalized pre-token at most (a byte
    // fallback splits a character into its bytes; byte-level, the bytes
    // of a byte's character, up to 2); a token per symbol, per added
    // token (a byte of the text at least) and the BOS
    *norm = bpe_norm_bound(t->steps, t->n_steps, len);
    *scratch = bpe_norm_scratch(t->steps, t->n_steps, len);
    if (*norm == SIZE_MAX || *scratch == SIZE_MAX)
        return false;
    *symbols = *norm;
    if (t->byte_level && t->byte_fallback && !size_mul(*norm, 2, symbols))
        return false;
    *tokens = *symbols;
    return size_add_to(tokens, len + 1);
}

/* The bytes of the workspace; the normalizer's second buffer only when
 * its steps take turns between two. */
static size_t work_bytes(const struct bpe_tokenizer *t, size_t symbols,
                         size_t scratch, size_t norm)
{
    size_t total = 0, part;
    if (!size_mul(symbols, BPE_WORD_BYTES, &total) ||
        !size_mul(scratch, sizeof(uint32_t), &part) ||
        !size_add_to(&total, part) ||
        !size_mul(norm, t->n_steps > 1 ? 2 : 1, &part) ||
        !size_add_to(&total, part))
        return SIZE_MAX;
    return total;
}

/* Append unknown character bytes as the library's merge_word does: its
 * <0xNN> tokens when every one exists, else an unk (fused into the one
 * pending when fuse_unk), else nothing. */
static void unknown_unit(const struct bpe_tokenizer *t, const char *c,
                         size_t len, struct bpe_word *w, size_t *n,
                         int64_t *pending)
{
    if (t->byte_fallback) {
        bool all = true;
        for (size_t i = 0; i < len; i++)
            all = all && t->fallback[(unsigned char)c[i]] >= 0;
        if (all) {
            // the library appends these before an unk still pending
            for (size_t i = 0; i < len; i++)
                w->id[(*n)++] = (uint32_t)t->fallback[(unsigned char)c[i]];
            return;
        }
    }
    if (t->unk_id < 0)
        return;
    if (*pending >= 0 && !t->fuse_unk)
        w->id[(*n)++] = (uint32_t)*pending;
    *pending = t->unk_id;
}

/* One pre-token's tokens (p[0..len) of the normalized text). */
static void encode_pretoken(const struct bpe_tokenizer *t, const char *p,
                            size_t len, struct bpe_word *w, struct sink *s)
{
    if (t->ignore_merges) {
        const int64_t whole = key_id(t, p, len);
        if (whole >= 0) {
            put(s, (uint32_t)whole, false);
            return;
        }
    }
    size_t n = 0;
    int64_t pending = -1;
    for (size_t at = 0; at < len;) {
        int64_t id;
        size_t step;
        char unit[4];
        size_t unit_len;
        if (t->byte_level) {
            // each byte is one character of bytes_to_unicode's alphabet
            const unsigned char b = (unsigned char)p[at];
            id = t->unit_id[b];
            step = 1;
            uint32_t cp = byte_char(b);
            unit_len = cp < 0x80 ? 1 : 2;
            if (unit_len == 1) {
                unit[0] = (char)cp;
            } else {
                unit[0] = (char)(0xC0 | cp >> 6);
                unit[1] = (char)(0x80 | (cp & 0x3F));
            }
        } else {
            uint32_t cp;
            step = bpe_utf8_next(p, len, at, &cp);
            id = key_id(t, p + at, step);
            memcpy(unit, p + at, step);
            unit_len = step;
        }
        if (id >= 0) {
            if (pending >= 0) {
                w->id[n++] = (uint32_t)pending;
                pending = -1;
            }
            w->id[n++] = (uint32_t)id;
        } else {
            unknown_unit(t, unit, unit_len, w, &n, &pending);
        }
        at += step;
    }
    if (pending >= 0)
        w->id[n++] = (uint32_t)pending;
    if (n == 0)
        return;
    bpe_merge_word(&t->pairs, w, n);
    for (int32_t i = 0; i >= 0 && !s->over; i = w->next[i])
        put(s, w->id[i], false);
}

/* The pieces of p[0..len) that splits level and after make, each merged
 * as a pre-token (p itself when no split is left). */
static void encode_split(const struct bpe_tokenizer *t, size_t level,
                         const char *p, size_t len, struct work *w,
                         struct sink *s)
{
    if (level == t->n_splits) {
        if (len)
            encode_pretoken(t, p, len, &w->word, s);
        return;
    }
    size_t at = 0, start, end;
    while (!s->over &&
           bpe_split_next(&t->splits[level], p, len, &at, &start, &end))
        encode_split(t, level + 1, p + start, end - start, w, s);
}

/* A normalized piece: its pre-tokens, each merged. */
static void encode_normalized(const struct bpe_tokenizer *t, const char *p,
                              size_t len, struct work *w, struct sink *s)
{
    encode_split(t, 0, p, len, w, s);
}

/* The text's pieces between the added tokens of trie, each to piece()
 * (a text span) or to the sink (the added token's id), with the lstrip
 * and rstrip whitespace the library gives the token. */
static void
split_added(const struct bpe_tokenizer *t, const struct trie *trie,
            const char *text, size_t len, struct work *w, struct sink *s,
            void (*piece)(const struct bpe_tokenizer *, const char *, size_t,
                          struct work *, struct sink *))
{
    size_t done = 0, from = 0, start, mlen;
    int32_t k;
    while (!s->over && trie_next(trie, text, len, from, &start, &mlen, &k)) {
        size_t stop = start + mlen;
        const struct added *a = &t->added[k];
        if (a->lstrip) {
            // the whitespace before it, not already taken
            size_t at = start;
            while (at > done) {
                size_t back = at - 1;
                while (back > done &&
                       ((unsigned char)text[back] & 0xC0) == 0x80)
                    back--;
                uint32_t cp;
                bpe_utf8_next(text, len, back, &cp);
                if (unicode_bpe_class(cp) != UNICODE_BPE_SPACE)
                    break;
                at = back;
            }
            start = at;
        }
        if (a->rstrip) {
            while (stop < len) {
                uint32_t cp;
                const size_t l = bpe_utf8_next(text, len, stop, &cp);
                if (unicode_bpe_class(cp) != UNICODE_BPE_SPACE)
                    break;
                stop += l;
            }
        }
        if (done < start)
            piece(t, text + done, start - done, w, s);
        put(s, a->id, false);
        done = from = stop;
    }
    if (done < len && !s->over)
        piece(t, text + done, len - done, w, s);
}

/* A raw piece between added tokens: normalized, then split again at the
 * added tokens matched in normalized text. */
static void encode_raw_piece(const struct bpe_tokenizer *t, const char *p,
                             size_t len, struct work *w, struct sink *s)
{
    const char *norm = p;
    size_t nlen = len;
    if (t->n_steps) {
        nlen = bpe_norm_apply(t->steps, t->n_steps, p, len, w->scratch, w->norm,
                              w->norm_tmp);
        norm = w->norm;
    }
    split_added(t, &t->normalized, norm, nlen, w, s, encode_normalized);
}

static attn_status tokenizer_encode(const void *impl, const char *a,
                                    size_t a_len, const char *b, size_t b_len,
                                    const struct tok_options *opts,
                                    struct tok_encoding *out,
                                    struct attn_error *err)
{
    const struct bpe_tokenizer *t = impl;
    const size_t max_tokens = opts->max_tokens;
    const int64_t bos_id = opts->no_special ? -1 : t->bos_id;
    (void)b_len;
    memset(out, 0, sizeof *out);
    if (b)
        return attn_fail(err, ATTN_E_INVALID, "sentence_b",
                         "this tokenizer encodes one text: decoder models "
                         "take no sentence_b");
    if (!a)
        a = "", a_len = 0;
    if (a_len > BPE_MAX_INPUT_BYTES)
        return attn_fail(err, ATTN_E_TOO_BIG, "sentence",
                         "sentence has %zu bytes; at most %zu are allowed",
                         a_len, BPE_MAX_INPUT_BYTES);
    const size_t valid = bpe_utf8_valid(a, a_len);
    if (valid != a_len)
        return attn_fail_at(err, ATTN_E_INPUT, "sentence", 1, &valid,
                            "sentence is not valid UTF-8 at byte %zu", valid);
    size_t symbols, scratch, norm, tokens;
    if (!plan(t, a_len, &symbols, &scratch, &norm, &tokens))
        return attn_fail(err, ATTN_E_TOO_BIG, "sentence",
                         "sentence is too long");
    if (max_tokens && tokens > max_tokens + 1)
        tokens = max_tokens + 1; // one past the cap tells it is passed
    const size_t wbytes = work_bytes(t, symbols, scratch, norm);
    void *mem = malloc(wbytes ? wbytes : 1);
    uint32_t *block = malloc(tokens * (sizeof(uint32_t) + 2));
    if (!mem || !block) {
        free(mem);
        free(block);
        return attn_fail(err, ATTN_E_NOMEM, "sentence",
                         "out of memory for a sentence of %zu bytes", a_len);
    }
    struct work w;
    bpe_word_carve(&w.word, mem, symbols);
    w.scratch = (uint32_t *)((char *)mem + symbols * BPE_WORD_BYTES);
    w.norm = (char *)(w.scratch + scratch);
    w.norm_tmp = t->n_steps > 1 ? w.norm + norm : NULL;
    uint8_t *type_ids = (uint8_t *)(block + tokens);
    struct sink s = {.ids = block, .added = type_ids + tokens, .cap = tokens};
    if (bos_id >= 0)
        put(&s, (uint32_t)bos_id, true);
    split_added(t, &t->raw, a, a_len, &w, &s, encode_raw_piece);
    free(mem);
    if (s.over || (max_tokens && s.count > max_tokens)) {
        free(block);
        return attn_fail(err, ATTN_E_TOO_BIG, "sentence",
                         "sentence has more than the %zu tokens allowed%s",
                         max_tokens, bos_id >= 0 ? " (with the BOS)" : "");
    }
    memset(type_ids, 0, s.count);
    out->count = s.count;
    out->ids = block;
    out->type_ids = type_ids;
    out->added = s.added;
    return ATTN_OK;
}

static size_t tokenizer_encode_bytes(const void *impl, size_t a_len,
                                     size_t b_len)
{
    const struct bpe_tokenizer *t = impl;
    (void)b_len; // a second text is refused before anything is allocated
    size_t symbols, scratch, norm, tokens, out;
    if (a_len > BPE_MAX_INPUT_BYTES ||
        !plan(t, a_len, &symbols, &scratch, &norm, &tokens) ||
        !size_mul(tokens, sizeof(uint32_t) + 2, &out))
        return SIZE_MAX;
    const size_t work = work_bytes(t, symbols, scratch, norm);
    if (work == SIZE_MAX || !size_add_to(&out, work ? work : 1))
        return SIZE_MAX;
    return out;
}

/* ------------------------------------------------------------- interface */

static size_t tokenizer_vocab_size(const void *impl)
{
    const struct bpe_tokenizer *t = impl;
    return t->n_ids;
}

static const char *tokenizer_token_text(const void *impl, uint32_t id)
{
    const struct bpe_tokenizer *t = impl;
    return id < t->n_ids ? t->texts.bytes + t->texts.off[id] : NULL;
}

static size_t tokenizer_token_bytes(const void *impl, uint32_t id, char *out,
                                    size_t cap)
{
    const struct bpe_tokenizer *t = impl;
    if (id >= t->n_ids)
        return 0;
    const char *key = t->keys.bytes + t->keys.off[id];
    const size_t len = t->keys.off[id + 1] - t->keys.off[id];
    size_t n = 0;
    // a byte-fallback token stands for its byte
    if (!t->byte_level && len == 6 && !memcmp(key, "<0x", 3) && key[5] == '>') {
        for (int b = 0; b < 256; b++)
            if (t->fallback[b] == (int32_t)id) {
                if (cap)
                    out[0] = (char)b;
                return 1;
            }
    }
    for (size_t at = 0; at < len;) {
        // SentencePiece's U+2581 is a space
        if (!t->byte_level && len - at >= 3 &&
            !memcmp(key + at, "\xe2\x96\x81", 3)) {
            if (n < cap)
                out[n] = ' ';
            n++;
            at += 3;
            continue;
        }
        if (n < cap)
            out[n] = key[at];
        n++;
        at++;
    }
    return n;
}

static int64_t tokenizer_token_id(const void *impl, const char *text,
                                  size_t len)
{
    const struct bpe_tokenizer *t = impl;
    return index_find(&t->by_text, &t->texts, text, len);
}

/* An added token (tokenizer.json's added_tokens, specials or not), or a
 * gap in the ids. */
static bool tokenizer_token_special(const void *impl, uint32_t id)
{
    const struct bpe_tokenizer *t = impl;
    return id < t->n_ids && (t->special[id / 8] >> (id % 8) & 1);
}

static void tokenizer_free(void *impl)
{
    struct bpe_tokenizer *t = impl;
    if (!t)
        return;
    free(t->keys.bytes);
    free(t->keys.off);
    free(t->texts.bytes);
    free(t->texts.off);
    free(t->by_key.slots);
    free(t->by_text.slots);
    bpe_pairs_free(&t->pairs);
    free(t->added);
    free(t->raw.nodes);
    free(t->normalized.nodes);
    free(t->special);
    free(t->step_text);
    free(t);
}

static const struct tokenizer_ops bpe_ops = {
    .name = "bpe",
    .encode = tokenizer_encode,
    .encode_bytes = tokenizer_encode_bytes,
    .vocab_size = tokenizer_vocab_size,
    .token_text = tokenizer_token_text,
    .token_bytes = tokenizer_token_bytes,
    .token_id = tokenizer_token_id,
    .token_special = tokenizer_token_special,
    .free = tokenizer_free,
};

const char *bpe_token_bytes(const struct tokenizer *t, uint32_t id, size_t *len)
{
    if (!t || t->ops != &bpe_ops)
        return NULL;
    const struct bpe_tokenizer *b = t->impl;
    if (id >= b->n_ids)
        return NULL;
    return str_at(&b->keys, id, len);
}

attn_status bpe_tokenizer_new(const struct bpe_spec *spec,
                              struct tokenizer *out, struct attn_error *err)
{
    memset(out, 0, sizeof *out);
    size_t n_ids = 0;
    attn_status st = check_spec(spec, &n_ids, err);
    if (st)
        return st;
    struct bpe_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return attn_fail(err, ATTN_E_NOMEM, "vocab",
                         "out of memory for the tokenizer");
    t->n_vocab = spec->n_vocab;
    t->n_ids = n_ids;
    t->byte_level = spec->byte_level;
    t->byte_fallback = spec->byte_fallback;
    t->ignore_merges = spec->ignore_merges;
    t->fuse_unk = spec->fuse_unk;
    t->unk_id = spec->unk_id;
    t->bos_id = spec->bos_id;
    int16_t inverse[0x144];
    byte_inverse(inverse);
    if (!(st = build_pipeline(t, spec, err)) &&
        !(st = build_strings(t, spec, inverse, err)) &&
        !(st = build_indexes(t, spec, inverse, err)) &&
        !(st = build_merges(t, spec, inverse, err)) &&
        !(st = build_added(t, spec, err)))
        build_units(t);
    if (st) {
        tokenizer_free(t);
        return st;
    }
    out->ops = &bpe_ops;
    out->impl = t;
    return ATTN_OK;
}
