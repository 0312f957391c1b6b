/*
 * basic_tokenizer.c - split a sentence the way BERT's BasicTokenizer does
 * (docs/math.md, "Tokenizer"): strict UTF-8 in, NUL-terminated UTF-8 tokens
 * out.
 *
 * The text is walked twice by the same code. The first pass validates the
 * UTF-8 and only counts tokens and bytes; the second writes the tokens into
 * one block sized by the first. So nothing is allocated for text that is
 * rejected, and a result is a single allocation: the [count] pointer array
 * followed by the token bytes it points into.
 */
#include "error.h"
#include "unicode.h"

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * Each input byte yields at most 32 bytes of result, so that a length
 * checked against this bound cannot overflow the sizes: a code point of
 * b >= 2 bytes folds to at most UNICODE_FOLD_MAX code points of at most 4
 * bytes, each of which may end a token (a NUL and a pointer); ASCII yields
 * one code point. [CLS] and [SEP] add a constant, covered by SLACK.
 */
#define BYTES_PER_INPUT_BYTE 32
#define SLACK 64
_Static_assert(UNICODE_FOLD_MAX *(4 + 1 + sizeof(char *)) <=
                   2 * BYTES_PER_INPUT_BYTE,
               "the result size bound holds");

/*
 * Where tokens go. In the counting pass buf is NULL and only the sizes
 * move; the writing pass gets a buf and text sized by the counting pass.
 */
struct tok_sink {
    char *buf;         /* token bytes, each token NUL-terminated; or NULL */
    char **text;       /* [count] the start of each token in buf */
    size_t used;       /* bytes of buf used, the current word included */
    size_t word_begin; /* where the current word starts in buf */
    size_t count;      /* tokens finished */

    /*
     * BERT decomposes a whole word with NFD, which sorts each run of
     * non-starters by canonical combining class. Marks are dropped when
     * uncasing, so only UNICODE_COMBINING characters can form a run that
     * survives: it is kept at the end of the word, bytes run_begin..used.
     */
    size_t run_begin;
    unsigned run_max;    /* the largest class in the run; 0: no run open */
    bool run_sorted;     /* the run is already in canonical order */
    size_t unsorted_max; /* counting: bytes of the longest unsorted run */
    char *scratch;       /* writing: unsorted_max bytes to sort a run in */
};

/* ----------------------------------------------------------------- UTF-8 */

static size_t utf8_fail(struct attn_error *err, const char *field, size_t at,
                        unsigned byte, const char *why)
{
    attn_fail_at(err, ATTN_E_INPUT, field, 1, &at,
                 "%s has invalid UTF-8 at byte %zu (0x%02x): %s", field, at,
                 byte, why);
    return 0;
}

/*
 * Decode the code point starting at s[at] (at < len) into *cp, strictly as
 * RFC 3629 asks: no overlong forms, no surrogates, nothing above U+10FFFF,
 * no truncated sequences and no stray continuation bytes. Returns its length
 * in bytes, or 0 after filling err with the offset of the sequence's first
 * byte.
 */
static size_t utf8_decode(const unsigned char *s, size_t len, size_t at,
                          uint32_t *cp, struct attn_error *err,
                          const char *field)
{
    const unsigned lead = s[at];
    if (lead < 0x80) {
        *cp = lead;
        return 1;
    }
    // the length, the lead's payload, and the range of the second byte
    // that excludes overlong forms, surrogates and values above U+10FFFF
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    uint32_t value;
    const char *why_second = "invalid second byte"; /* never reported */
    if (lead < 0xC0) {
        return utf8_fail(err, field, at, lead, "unexpected continuation byte");
    } else if (lead < 0xC2) {
        return utf8_fail(err, field, at, lead, "overlong encoding");
    } else if (lead < 0xE0) {
        n = 2;
        value = lead & 0x1F;
    } else if (lead < 0xF0) {
        n = 3;
        value = lead & 0x0F;
        if (lead == 0xE0) {
            lo = 0xA0;
            why_second = "overlong encoding";
        } else if (lead == 0xED) {
            hi = 0x9F;
            why_second = "surrogate code point";
        }
    } else if (lead < 0xF5) {
        n = 4;
        value = lead & 0x07;
        if (lead == 0xF0) {
            lo = 0x90;
            why_second = "overlong encoding";
        } else if (lead == 0xF4) {
            hi = 0x8F;
            why_second = "code point above U+10FFFF";
        }
    } else if (lead < 0xF8) {
        return utf8_fail(err, field, at, lead, "code point above U+10FFFF");
    } else {
        return utf8_fail(err, field, at, lead, "not a UTF-8 byte");
    }
    for (size_t k = 1; k < n; k++) {
        if (len - at <= k || (s[at + k] & 0xC0) != 0x80)
            return utf8_fail(err, field, at, lead, "incomplete sequence");
        if (k == 1 && (s[at + 1] < lo || s[at + 1] > hi))
            return utf8_fail(err, field, at, lead, why_second);
        value = value << 6 | (s[at + k] & 0x3F);
    }
    *cp = value;
    return n;
}

/* Encode cp (a scalar value) into out; returns its length in bytes. */
static size_t utf8_encode(uint32_t cp, unsigned char out[static 4])
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | cp >> 6);
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | cp >> 12);
        out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | cp >> 18);
    out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ------------------------------------------------------------------ sink */

static void sink_bytes(struct tok_sink *sink, const void *bytes, size_t n)
{
    if (sink->buf)
        memcpy(sink->buf + sink->used, bytes, n);
    sink->used += n;
}

static void sink_char(struct tok_sink *sink, uint32_t cp)
{
    unsigned char utf8[4];
    sink_bytes(sink, utf8, utf8_encode(cp, utf8));
}

/*
 * Sort run[0..n) stably by combining class, as NFD's canonical ordering
 * does, through scratch (n bytes). One pass per distinct class in the run,
 * and UNICODE_COMBINING has only a handful, so a long adversarial run costs
 * linear time where insertion sort would cost quadratic.
 */
static void sort_run(char *run, size_t n, char *scratch)
{
    const unsigned char *src = (const unsigned char *)scratch;
    memcpy(scratch, run, n);
    size_t written = 0;
    unsigned done = 0; /* classes up to this one are written */
    for (;;) {
        unsigned next = 256; /* the smallest class > done, if below 256 */
        for (size_t at = 0; at < n;) {
            uint32_t cp;
            at += utf8_decode(src, n, at, &cp, NULL, NULL);
            unsigned ccc = unicode_ccc(cp);
            if (ccc > done && ccc < next)
                next = ccc;
        }
        if (next == 256)
            break;
        for (size_t at = 0; at < n;) {
            uint32_t cp;
            size_t len = utf8_decode(src, n, at, &cp, NULL, NULL);
            if (unicode_ccc(cp) == next) {
                memcpy(run + written, src + at, len);
                written += len;
            }
            at += len;
        }
        done = next;
    }
    assert(written == n);
}

/* End the run of non-starters at the end of the word, putting it in order. */
static void sink_close_run(struct tok_sink *sink)
{
    if (sink->run_max != 0 && !sink->run_sorted) {
        size_t n = sink->used - sink->run_begin;
        if (sink->buf)
            sort_run(sink->buf + sink->run_begin, n, sink->scratch);
        else if (n > sink->unsorted_max)
            sink->unsorted_max = n;
    }
    sink->run_max = 0;
}

/* Append a non-starter of combining class ccc (> 0) to the word. */
static void sink_nonstarter(struct tok_sink *sink, uint32_t cp, unsigned ccc)
{
    if (sink->run_max == 0) {
        sink->run_begin = sink->used;
        sink->run_sorted = true;
        sink->run_max = ccc;
    } else if (ccc < sink->run_max) {
        sink->run_sorted = false;
    } else {
        sink->run_max = ccc;
    }
    sink_char(sink, cp);
}

/* Finish the current word as a token, unless it is empty. */
static void sink_end_word(struct tok_sink *sink)
{
    sink_close_run(sink);
    if (sink->used == sink->word_begin)
        return;
    if (sink->buf) {
        sink->buf[sink->used] = '\0';
        sink->text[sink->count] = sink->buf + sink->word_begin;
    }
    sink->used++;
    sink->count++;
    sink->word_begin = sink->used;
}

/* A token of its own: a punctuation character, [CLS] or [SEP]. */
static void sink_token(struct tok_sink *sink, const void *bytes, size_t n)
{
    sink_end_word(sink);
    sink_bytes(sink, bytes, n);
    sink_end_word(sink);
}

/* ------------------------------------------------------------- tokenizer */

/*
 * Add one character of a word, of class cls: uncased first when lower is
 * set (BERT lowercases and strips accents before it splits off
 * punctuation, so punctuation is judged on the folded characters).
 */
static void put_char(struct tok_sink *sink, uint32_t cp, enum unicode_class cls,
                     bool lower)
{
    unsigned char utf8[4];
    if (cp < 0x80) { /* most text: one byte, which folds to one byte */
        utf8[0] = (unsigned char)(lower ? unicode_fold_ascii(cp) : cp);
        if (cls == UNICODE_PUNCT) {
            sink_token(sink, utf8, 1);
            return;
        }
        if (lower)
            sink_close_run(sink);
        sink_bytes(sink, utf8, 1);
        return;
    }
    if (!lower) {
        if (cls == UNICODE_PUNCT)
            sink_token(sink, utf8, utf8_encode(cp, utf8));
        else
            sink_char(sink, cp);
        return;
    }
    uint32_t folded[UNICODE_FOLD_MAX];
    size_t n = unicode_fold(cp, folded);
    for (size_t i = 0; i < n; i++) {
        uint32_t f = folded[i];
        enum unicode_class fcls = f == cp ? cls : unicode_class(f);
        if (fcls == UNICODE_PUNCT) {
            sink_token(sink, utf8, utf8_encode(f, utf8));
        } else if (fcls == UNICODE_COMBINING) {
            sink_nonstarter(sink, f, unicode_ccc(f));
        } else {
            sink_close_run(sink);
            sink_char(sink, f);
        }
    }
}

/* The length of the never-split string s starts with, or 0. They are
 * ASCII, so a match never starts or ends inside a multi-byte character. */
static size_t never_split_at(const struct attn_tokenize_options *opts,
                             const unsigned char *s, size_t left)
{
    for (size_t i = 0; i < opts->n_never_split; i++) {
        const char *word = opts->never_split[i];
        const size_t n = strlen(word);
        if (n <= left && (unsigned char)word[0] == s[0] &&
            memcmp(word, s, n) == 0)
            return n;
    }
    return 0;
}

/*
 * One pass over the text into sink. Only the counting pass can fail, on
 * invalid UTF-8; the writing pass sees text the counting pass accepted.
 */
static attn_status tokenize_pass(const unsigned char *s, size_t len,
                                 const struct attn_tokenize_options *opts,
                                 struct tok_sink *sink, struct attn_error *err)
{
    const bool lower = !opts->keep_case;
    const char *field = opts->field ? opts->field : "sentence";
    if (opts->special_tokens)
        sink_token(sink, "[CLS]", 5);
    for (size_t at = 0; at < len;) {
        const size_t kept = never_split_at(opts, s + at, len - at);
        if (kept) {
            sink_token(sink, s + at, kept);
            at += kept;
            continue;
        }
        uint32_t cp;
        size_t n = utf8_decode(s, len, at, &cp, err, field);
        if (n == 0)
            return ATTN_E_INPUT;
        at += n;
        enum unicode_class cls = unicode_class(cp);
        switch (cls) {
        case UNICODE_DROP:
            // gone before anything else looks, so it joins its neighbours
            break;
        case UNICODE_SPACE: sink_end_word(sink); break;
        case UNICODE_CJK:
            sink_end_word(sink);
            put_char(sink, cp, cls, lower);
            sink_end_word(sink);
            break;
        case UNICODE_MARK:
        case UNICODE_MARK_STARTER:
            if (!lower)
                sink_char(sink, cp);
            else if (cls == UNICODE_MARK_STARTER)
                sink_close_run(sink); // it vanishes, but it ended the run
            break;
        case UNICODE_OTHER:
        case UNICODE_PUNCT:
        case UNICODE_COMBINING: put_char(sink, cp, cls, lower); break;
        }
    }
    sink_end_word(sink);
    if (opts->special_tokens)
        sink_token(sink, "[SEP]", 5);
    return ATTN_OK;
}

size_t attn_tokenize_bytes(size_t len)
{
    /* the result is under this bound, and the scratch of one run too */
    if (len > (SIZE_MAX - SLACK) / BYTES_PER_INPUT_BYTE / 2)
        return SIZE_MAX;
    return 2 * (len * BYTES_PER_INPUT_BYTE + SLACK);
}

attn_status attn_tokenize(const char *text, size_t len,
                          const struct attn_tokenize_options *opts,
                          size_t max_tokens, struct attn_tokens *out,
                          struct attn_error *err)
{
    static const struct attn_tokenize_options defaults = {0};
    if (!out)
        return attn_fail(err, ATTN_E_INVALID, "out", "out is NULL");
    out->count = 0;
    out->text = NULL;
    if (!text && len > 0)
        return attn_fail(err, ATTN_E_INVALID, "sentence",
                         "sentence is NULL but has %zu bytes", len);
    if (!opts)
        opts = &defaults;
    const char *field = opts->field ? opts->field : "sentence";
    if (len > (SIZE_MAX - SLACK) / BYTES_PER_INPUT_BYTE)
        return attn_fail(err, ATTN_E_TOO_BIG, field,
                         "%s has %zu bytes, too many to tokenize", field, len);

    const unsigned char *s = (const unsigned char *)text;
    struct tok_sink counted = {0};
    attn_status status = tokenize_pass(s, len, opts, &counted, err);
    if (status != ATTN_OK)
        return status;
    if (max_tokens != 0 && counted.count > max_tokens)
        return attn_fail(err, ATTN_E_TOO_BIG, field,
                         "%s has %zu tokens, more than max_tokens (%zu)", field,
                         counted.count, max_tokens);
    if (counted.count == 0)
        return ATTN_OK;

    // the size bound above keeps this sum from overflowing
    size_t pointer_bytes = counted.count * sizeof(char *);
    char **block = malloc(pointer_bytes + counted.used);
    char *scratch = NULL;
    if (counted.unsorted_max > 0)
        scratch = malloc(counted.unsorted_max);
    if (!block || (counted.unsorted_max > 0 && !scratch)) {
        free(block);
        free(scratch);
        return attn_fail(err, ATTN_E_NOMEM, field,
                         "no memory for %zu tokens (%zu bytes)", counted.count,
                         pointer_bytes + counted.used);
    }
    struct tok_sink sink = {
        .buf = (char *)block + pointer_bytes,
        .text = block,
        .scratch = scratch,
    };
    status = tokenize_pass(s, len, opts, &sink, err);
    assert(status == ATTN_OK && sink.count == counted.count &&
           sink.used == counted.used);
    (void)status;
    free(scratch);
    out->count = sink.count;
    out->text = block;
    return ATTN_OK;
}

void attn_tokens_free(struct attn_tokens *tokens)
{
    if (!tokens)
        return;
    free(tokens->text); // one block: the pointers, then the bytes
    tokens->text = NULL;
    tokens->count = 0;
}
