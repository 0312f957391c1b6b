/*
 * fuzz_spm.c - libFuzzer target for the SentencePiece tokenizer (src/spm.h):
 * the input is a small vocabulary and a text,
 *
 *   flags      bit 0 add_bos, 1 add_eos, 2 add_space_prefix, 3 the 256
 *              <0xNN> byte tokens after the ones below, 4 no scores,
 *              5-7 the cap: 0 none, else 3 k - 2 tokens
 *   count      tokens: count % 16 + 1
 *   per token  a byte: its length (% 8) and strip flags (bits 3-4); a
 *              byte: its type (% 8: 7 is refused); a byte: its score
 *              (signed, 0x80 NaN: refused); then its text
 *   ids        three bytes, unk, bos, eos: each b % (tokens + 1) - 1, or
 *              255 for one past the vocabulary (refused)
 *   text       the rest
 *
 * A vocabulary spm_tokenizer_new() refuses must be one spm.h says it
 * refuses (a repeated text, a type past 6, a BYTE token not <0xNN>, a NaN
 * score, an id past the vocabulary, add_bos or add_eos without the id),
 * with ATTN_E_INVALID naming one of the spec's fields.
 *
 * The text is encoded three times: as it is, with no_special, and with
 * the cap. Checks beyond the sanitizers: invalid UTF-8 is refused as
 * ATTN_E_INPUT naming "sentence", and so is valid UTF-8 only with no unk
 * token; every id is below the vocabulary's size; only the BOS (first,
 * with add_bos) and the EOS (last, with add_eos) are marked added, and
 * no_special gives the same ids without them; the cap gives the same ids
 * when they fit and ATTN_E_TOO_BIG naming "sentence" when they do not;
 * under ASan, what encode allocates stays within tok_encode_bytes() and
 * only the result is left; each token's readable text (tok_token_text)
 * is UTF-8 and finds (tok_token_id) the lowest id spelt so, BYTE tokens
 * after every other.
 *
 * And the tokens spell the text as SentencePiece escapes it: the special
 * tokens are found in the text by a plain reference of llama.cpp's
 * partition (tokenizer_st_partition: longest first, then the lowest id,
 * each leftmost first in what the ones before left, the whitespace
 * stripped dropped); each piece between them gets a U+2581 before it
 * when add_space_prefix and it is first or follows a special token.
 * Written out (a special token's text, a piece as it is), with every
 * U+2581 read as a space, that is the decoded bytes of the ids but the
 * added ones (tok_token_bytes), read the same way. Skipped where spm.h
 * says the decoded bytes differ: a character that fell back to the unk
 * token, an UNUSED or UNDEFINED token (which decodes to nothing), and a
 * token spelt <0xNN> that is not a BYTE token standing for a byte (a
 * piece holding "<0x" may merge into one, and a byte may fall back to a
 * token of another type spelt so).
 */
#include "bpe_internal.h"
#include "spm.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_TOKENS = 16 + 256 };

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_spm: %s\n", what);
    abort();
}

/* ------------------------------------------------------------ allocation */

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COUNT_ALLOC 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define COUNT_ALLOC 1
#endif

#ifdef COUNT_ALLOC
/* ASan's hooks (sanitizer/allocator_interface.h, which gcc does not ship
 * with its headers): every allocation and free of the program. Counted
 * on this thread only, between count_start() and count_stop(). */
int __sanitizer_install_malloc_and_free_hooks(
    void (*malloc_hook)(const volatile void *, size_t),
    void (*free_hook)(const volatile void *));

enum { BLOCKS = 64 };
static _Thread_local bool counting;
static _Thread_local struct {
    const volatile void *p;
    size_t n;
} blocks[BLOCKS];
static _Thread_local size_t live, peak, lost;

static void on_malloc(const volatile void *p, size_t n)
{
    if (!counting || !p)
        return;
    for (size_t i = 0; i < BLOCKS; i++)
        if (!blocks[i].p) {
            blocks[i].p = p;
            blocks[i].n = n;
            live += n;
            peak = live > peak ? live : peak;
            return;
        }
    lost++;
}

static void on_free(const volatile void *p)
{
    if (!counting || !p)
        return;
    for (size_t i = 0; i < BLOCKS; i++)
        if (blocks[i].p == p) {
            live -= blocks[i].n;
            blocks[i].p = NULL;
            return;
        }
}

static void count_start(void)
{
    static bool installed;
    if (!installed)
        __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
    installed = true;
    memset(blocks, 0, sizeof blocks);
    live = peak = lost = 0;
    counting = true;
}

/* Within bound and, after the call, only the result (result bytes) or
 * nothing left. */
static void count_stop(size_t bound, bool ok)
{
    counting = false;
    if (lost)
        fail("more blocks than the counter holds");
    if (peak > bound)
        fail("encode allocated more than tok_encode_bytes()");
    if (!ok && live)
        fail("a refusal left memory allocated");
    if (ok && live > bound)
        fail("the result is larger than tok_encode_bytes()");
}
#else
static void count_start(void)
{
}
static void count_stop(size_t bound, bool ok)
{
    (void)bound;
    (void)ok;
}
#endif

/* ------------------------------------------------------------ vocabulary */

struct vocab {
    char text[MAX_TOKENS][16];
    struct spm_string tokens[MAX_TOKENS];
    float scores[MAX_TOKENS];
    int32_t types[MAX_TOKENS];
    uint8_t strip[MAX_TOKENS];
    char key[MAX_TOKENS][24]; /* as the tokenizer matches it */
    size_t key_len[MAX_TOKENS];
    struct spm_spec spec;
};

/* The byte of "<0xNN>" (either case), or -1. */
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

static int64_t id_of(uint8_t b, size_t n)
{
    return b == 255 ? (int64_t)n : (int64_t)(b % (n + 1)) - 1;
}

/* The vocabulary at data into *v, the text after it into *text; whether
 * spm.h says it is refused into *refused. False when the input is short. */
static bool read_vocab(const uint8_t *data, size_t size, struct vocab *v,
                       const char **text, size_t *len, bool *refused)
{
    size_t at = 0;
    if (size < 2)
        return false;
    const unsigned flags = data[at++];
    const size_t count = data[at++] % 16 + 1;
    bool bad = false;
    size_t n = 0;
    for (; n < count; n++) {
        if (at + 3 > size)
            return false;
        const size_t l = data[at] % 8;
        v->strip[n] = (uint8_t)(data[at] >> 3 & 3);
        v->types[n] = data[at + 1] % 8;
        const int8_t score = (int8_t)data[at + 2];
        v->scores[n] = score == -128 ? NAN : score;
        at += 3;
        if (at + l > size)
            return false;
        memcpy(v->text[n], data + at, l);
        v->tokens[n] = (struct spm_string){v->text[n], l};
        at += l;
        bad = bad || v->types[n] > SPM_TOKEN_BYTE ||
              (v->types[n] == SPM_TOKEN_BYTE && byte_of(v->text[n], l) < 0) ||
              ((flags & 16) == 0 && isnan(v->scores[n]));
    }
    if (flags & 8)
        for (unsigned b = 0; b < 256; b++, n++) {
            snprintf(v->text[n], sizeof v->text[n], "<0x%02X>", b);
            v->tokens[n] = (struct spm_string){v->text[n], 6};
            v->scores[n] = -100;
            v->types[n] = SPM_TOKEN_BYTE;
            v->strip[n] = 0;
        }
    if (at + 3 > size)
        return false;
    v->spec = (struct spm_spec){.tokens = v->tokens,
                                .n_tokens = n,
                                .scores = flags & 16 ? NULL : v->scores,
                                .types = v->types,
                                .strip = v->strip,
                                .unk_id = id_of(data[at], n),
                                .bos_id = id_of(data[at + 1], n),
                                .eos_id = id_of(data[at + 2], n),
                                .add_bos = flags & 1,
                                .add_eos = flags & 2,
                                .add_space_prefix = flags & 4};
    at += 3;
    const struct spm_spec *s = &v->spec;
    bad = bad || s->unk_id >= (int64_t)n || s->bos_id >= (int64_t)n ||
          s->eos_id >= (int64_t)n || (s->add_bos && s->bos_id < 0) ||
          (s->add_eos && s->eos_id < 0);
    for (size_t i = 0; i < n; i++) {
        const size_t l = v->tokens[i].len;
        if (l)
            memcpy(v->key[i], v->text[i], l);
        v->key_len[i] =
            l ? l
              : (size_t)snprintf(v->key[i], sizeof v->key[i], "[EMPTY_%zu]", i);
        for (size_t j = 0; j < i && !bad; j++)
            bad = v->key_len[j] == v->key_len[i] &&
                  memcmp(v->key[j], v->key[i], v->key_len[i]) == 0;
    }
    *refused = bad;
    *text = (const char *)data + at;
    *len = size - at;
    return true;
}

/* ------------------------------------------------------------- reference */

/* A piece of the text after the special tokens are found: a special
 * token, or text[off, off + len). */
struct fragment {
    int64_t id; /* -1: text */
    size_t off, len;
};

static bool is_special(int type)
{
    return type == SPM_TOKEN_CONTROL || type == SPM_TOKEN_USER_DEFINED ||
           type == SPM_TOKEN_UNKNOWN;
}

static bool c_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* The first place of key in s[0..n), or n. */
static size_t find(const char *s, size_t n, const char *key, size_t len)
{
    for (size_t i = 0; i + len <= n; i++)
        if (memcmp(s + i, key, len) == 0)
            return i;
    return n;
}

/* llama.cpp's tokenizer_st_partition over text: the fragments into frags
 * (room for 2 len + 1), their count returned. */
static size_t partition(const struct vocab *v, const char *text, size_t len,
                        struct fragment *frags, struct fragment *tmp)
{
    size_t count = 0;
    if (len)
        frags[count++] = (struct fragment){-1, 0, len};
    const size_t n = v->spec.n_tokens;
    // the special tokens by rank: longest first, then the lowest id
    bool done[MAX_TOKENS] = {0};
    for (;;) {
        int64_t best = -1;
        for (size_t i = 0; i < n; i++)
            if (!done[i] && is_special(v->types[i]) &&
                (best < 0 || v->key_len[i] > v->key_len[best]))
                best = (int64_t)i;
        if (best < 0)
            break;
        done[best] = true;
        const char *key = v->key[best];
        const size_t kl = v->key_len[best];
        const uint8_t strip = v->strip[best];
        size_t out = 0;
        for (size_t f = 0; f < count; f++) {
            if (frags[f].id >= 0) {
                tmp[out++] = frags[f];
                continue;
            }
            size_t base = frags[f].off, rest = frags[f].len;
            while (rest) {
                const size_t m = find(text + base, rest, key, kl);
                if (m == rest) {
                    tmp[out++] = (struct fragment){-1, base, rest};
                    break;
                }
                size_t left = m;
                if (strip & SPM_STRIP_LEFT)
                    while (left && c_space(text[base + left - 1]))
                        left--;
                if (left)
                    tmp[out++] = (struct fragment){-1, base, left};
                tmp[out++] = (struct fragment){best, 0, 0};
                base += m + kl;
                rest -= m + kl;
                if (strip & SPM_STRIP_RIGHT)
                    while (rest && c_space(text[base])) {
                        base++;
                        rest--;
                    }
            }
        }
        memcpy(frags, tmp, out * sizeof *frags);
        count = out;
    }
    return count;
}

/* s[0..n) with every U+2581 a space, in place; the new length. */
static size_t meta_as_space(char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (n - i >= 3 && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
            s[o++] = ' ';
            i += 3;
        } else {
            s[o++] = s[i++];
        }
    }
    return o;
}

/* The ids of enc but the added ones spell text as SentencePiece escapes
 * it, when spm.h says they should. */
static void check_spelling(const struct tokenizer *t, const struct vocab *v,
                           const char *text, size_t len,
                           const struct tok_encoding *enc)
{
    struct fragment *frags = malloc((2 * len + 1) * 2 * sizeof *frags);
    if (!frags)
        fail("out of memory");
    const size_t count = partition(v, text, len, frags, frags + 2 * len + 1);
    // where the decoded bytes differ from the text by spm.h
    size_t unk_typed = 0, unk_out = 0;
    bool skip = false;
    for (size_t f = 0; f < count; f++) {
        unk_typed += frags[f].id >= 0 && frags[f].id == v->spec.unk_id;
        skip =
            skip || (frags[f].id < 0 && find(text + frags[f].off, frags[f].len,
                                             "<0x", 3) < frags[f].len);
    }
    for (size_t i = 0; i < enc->count; i++) {
        const uint32_t id = enc->ids[i];
        if (enc->added[i])
            continue;
        const int type = v->types[id];
        unk_out += (int64_t)id == v->spec.unk_id;
        skip = skip || type == SPM_TOKEN_UNUSED ||
               type == SPM_TOKEN_UNDEFINED ||
               (type != SPM_TOKEN_BYTE &&
                byte_of(v->key[id], v->key_len[id]) >= 0);
    }
    if (skip || unk_out > unk_typed) {
        free(frags);
        return;
    }
    // what the text is, escaped
    const size_t cap = 3 * len + 3 * count + 24 * count + 16;
    char *want = malloc(cap), *got = malloc(cap + 24 * enc->count);
    if (!want || !got)
        fail("out of memory");
    size_t w = 0;
    bool after_special = true;
    for (size_t f = 0; f < count; f++) {
        const struct fragment *fr = &frags[f];
        if (fr->id >= 0) {
            memcpy(want + w, v->key[fr->id], v->key_len[fr->id]);
            w += v->key_len[fr->id];
            after_special = true;
            continue;
        }
        if (v->spec.add_space_prefix && after_special) {
            memcpy(want + w, "\xe2\x96\x81", 3);
            w += 3;
        }
        memcpy(want + w, text + fr->off, fr->len);
        w += fr->len;
        after_special = false;
    }
    w = meta_as_space(want, w);
    // what the ids spell
    size_t g = 0;
    for (size_t i = 0; i < enc->count; i++)
        if (!enc->added[i])
            g += tok_token_bytes(t, enc->ids[i], got + g, 24);
    g = meta_as_space(got, g);
    if (g != w || memcmp(got, want, w) != 0) {
        fprintf(stderr, "fuzz_spm: want '%.*s'\n          got  '%.*s'\n",
                (int)w, want, (int)g, got);
        fail("the tokens do not spell the text");
    }
    free(want);
    free(got);
    free(frags);
}

/* ---------------------------------------------------------------- target */

/* id's readable text is whole UTF-8 and finds the lowest id of that text,
 * BYTE tokens after every other. */
static void check_text(const struct tokenizer *t, const struct vocab *v,
                       uint32_t id)
{
    const char *text = tok_token_text(t, id);
    if (!text)
        fail("a token without a text");
    const size_t len = strlen(text);
    if (bpe_utf8_valid(text, len) != len)
        fail("a token's text is not UTF-8");
    const int64_t found = tok_token_id(t, text, len);
    if (found < 0 || strcmp(tok_token_text(t, (uint32_t)found), text) != 0)
        fail("a token's text does not find a token of that text");
    const bool byte = v->types[id] == SPM_TOKEN_BYTE;
    const bool found_byte = v->types[found] == SPM_TOKEN_BYTE;
    if ((found_byte && !byte) || (found_byte == byte && found > id))
        fail("a token's text finds another than the lowest id");
}

static attn_status encode(const struct tokenizer *t, const char *text,
                          size_t len, const struct tok_options *opts,
                          struct tok_encoding *enc, struct attn_error *err)
{
    const size_t bound = tok_encode_bytes(t, len, 0);
    if (bound == SIZE_MAX)
        fail("no bound for a short text");
    count_start();
    const attn_status st = tok_encode(t, text, len, NULL, 0, opts, enc, err);
    count_stop(bound, st == ATTN_OK);
    if (st != ATTN_OK && (enc->ids || strcmp(err->field, "sentence") != 0))
        fail("a refusal that leaves ids or names another field");
    return st;
}

static bool same_ids(const struct tok_encoding *a, size_t from, size_t count,
                     const struct tok_encoding *b)
{
    return b->count == count &&
           memcmp(a->ids + from, b->ids, count * sizeof *b->ids) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct vocab v;
    const char *text;
    size_t len;
    bool refused;
    if (!read_vocab(data, size, &v, &text, &len, &refused))
        return 0;
    struct tokenizer t;
    struct attn_error err = {0};
    attn_status st = spm_tokenizer_new(&v.spec, &t, &err);
    if (st != ATTN_OK) {
        static const char *const fields[] = {"tokens", "scores", "types",
                                             "unk_id", "bos_id", "eos_id"};
        bool named = false;
        for (size_t i = 0; i < 6; i++)
            named = named || strcmp(err.field, fields[i]) == 0;
        if (st != ATTN_E_INVALID || !named || !err.message[0])
            fail("a refusal that is not ATTN_E_INVALID naming a field");
        if (!refused)
            fail("a vocabulary refused that spm.h takes");
        return 0;
    }
    if (refused)
        fail("a vocabulary taken that spm.h refuses");
    const unsigned flags = data[0];
    const size_t cap = flags >> 5 ? 3 * (flags >> 5) - 2 : 0;
    const bool utf8 = bpe_utf8_valid(text, len) == len;
    const bool bos = v.spec.add_bos, eos = v.spec.add_eos;

    struct tok_encoding all, plain, capped;
    st = encode(&t, text, len, &(struct tok_options){0}, &all, &err);
    if (st != ATTN_OK) {
        if (st != ATTN_E_INPUT || (utf8 && v.spec.unk_id >= 0))
            fail("an unexpected refusal");
        if (encode(&t, text, len, &(struct tok_options){.no_special = true},
                   &plain, &err) != ATTN_E_INPUT)
            fail("no_special took a text refused with specials");
        st = encode(&t, text, len, &(struct tok_options){.max_tokens = cap},
                    &capped, &err);
        if (st != ATTN_E_INPUT && !(cap && st == ATTN_E_TOO_BIG && utf8))
            fail("the cap took a text refused without it");
        tok_free(&t);
        return 0;
    }
    if (!utf8)
        fail("invalid UTF-8 accepted");
    const size_t nv = tok_vocab_size(&t);
    if (all.count < (size_t)bos + eos ||
        (len == 0 && all.count != (size_t)bos + eos))
        fail("the wrong number of tokens");
    for (size_t i = 0; i < all.count; i++) {
        const bool added = (bos && i == 0) || (eos && i == all.count - 1);
        if (all.ids[i] >= nv)
            fail("an id outside the vocabulary");
        if (all.type_ids[i] != 0)
            fail("a type id that is not 0");
        if (all.added[i] != added)
            fail("a token marked added that the tokenizer did not add");
        if (added && all.ids[i] != (uint32_t)(bos && i == 0 ? v.spec.bos_id
                                                            : v.spec.eos_id))
            fail("an added token that is not the BOS or EOS");
        check_text(&t, &v, all.ids[i]);
    }
    const size_t inner = all.count - bos - eos;
    if (encode(&t, text, len, &(struct tok_options){.no_special = true}, &plain,
               &err) != ATTN_OK)
        fail("no_special refused a text taken with specials");
    if (!same_ids(&all, bos, inner, &plain))
        fail("no_special gives other ids than the text's with specials");
    for (size_t i = 0; i < plain.count; i++)
        if (plain.added[i])
            fail("a token marked added with no_special");
    tok_encoding_free(&plain);
    st = encode(&t, text, len, &(struct tok_options){.max_tokens = cap},
                &capped, &err);
    if (!cap || all.count <= cap) {
        if (st != ATTN_OK || !same_ids(&all, 0, all.count, &capped))
            fail("the cap changed ids that fit in it");
        tok_encoding_free(&capped);
    } else if (st != ATTN_E_TOO_BIG) {
        fail("more tokens than the cap taken");
    }
    check_spelling(&t, &v, text, len, &all);
    tok_encoding_free(&all);
    tok_free(&t);
    return 0;
}
