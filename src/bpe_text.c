/*
 * bpe_text.c - text before merging: UTF-8, the two normalizers (NFC, and
 * SentencePiece's prepend-and-replace) and the pre-tokenizer scanners.
 *
 * The scanners stand in for the regexes of tokenizer.json's pre-tokenizers,
 * which the library runs in Oniguruma: each tries the regex's alternatives
 * in order at the current position and takes the first that matches, with
 * the greedy runs and the one-character backtracking of "\s+(?!\S)" worked
 * out by hand. Every character matches some alternative, so the pre-tokens
 * cover the text with no gaps, and none is empty.
 */
#include "bpe_internal.h"
#include "checked.h"
#include "unicode.h"

#include <string.h>

/* ------------------------------------------------------------------ UTF-8 */

size_t bpe_utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t at = 0;
    while (at < n) {
        const unsigned c = u[at];
        if (c < 0x80) {
            at++;
            continue;
        }
        size_t len;
        uint32_t cp, min;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2, cp = c & 0x1F, min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3, cp = c & 0x0F, min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return at;
        }
        if (n - at < len)
            return at;
        for (size_t k = 1; k < len; k++) {
            if ((u[at + k] & 0xC0) != 0x80)
                return at;
            cp = cp << 6 | (u[at + k] & 0x3F);
        }
        // overlong forms, surrogates and past U+10FFFF are not UTF-8
        if (cp < min || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
            return at;
        at += len;
    }
    return n;
}

size_t bpe_utf8_next(const char *s, size_t n, size_t at, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s + at;
    (void)n;
    if (u[0] < 0x80) {
        *cp = u[0];
        return 1;
    }
    if (u[0] < 0xE0) {
        *cp = (uint32_t)(u[0] & 0x1F) << 6 | (u[1] & 0x3F);
        return 2;
    }
    if (u[0] < 0xF0) {
        *cp = (uint32_t)(u[0] & 0x0F) << 12 | (uint32_t)(u[1] & 0x3F) << 6 |
              (u[2] & 0x3F);
        return 3;
    }
    *cp = (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3F) << 12 |
          (uint32_t)(u[2] & 0x3F) << 6 | (u[3] & 0x3F);
    return 4;
}

static size_t utf8_put(char *out, uint32_t cp)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ------------------------------------------------------------ normalizers */

size_t bpe_normalized_bound(enum bpe_normalizer norm, size_t len)
{
    size_t out = 0;
    switch (norm) {
    case BPE_NORM_NONE: return len;
    case BPE_NORM_NFC: return size_mul(len, 3, &out) ? out : SIZE_MAX;
    case BPE_NORM_SENTENCEPIECE:
        return size_mul(len, 3, &out) && size_add_to(&out, 3) ? out : SIZE_MAX;
    }
    return SIZE_MAX;
}

size_t bpe_normalize_scratch(enum bpe_normalizer norm, size_t len)
{
    // NFC decomposes first: at most one code point per byte of the
    // decomposition, itself at most 3x the input (the generator checks)
    return norm == BPE_NORM_NFC ? bpe_normalized_bound(norm, len) : 0;
}

/* The run of non-starters cps[from..to) in canonical order: a stable
 * insertion sort by combining class (runs are short in real text). */
static void canonical_order(uint32_t *cps, size_t from, size_t to)
{
    for (size_t i = from + 1; i < to; i++) {
        const uint32_t c = cps[i];
        const unsigned cc = unicode_combining_class(c);
        size_t j = i;
        while (j > from && unicode_combining_class(cps[j - 1]) > cc) {
            cps[j] = cps[j - 1];
            j--;
        }
        cps[j] = c;
    }
}

/* NFC: the full canonical decomposition, canonical order, then canonical
 * composition (UAX #15), written as UTF-8 to out. */
static size_t nfc(const char *in, size_t len, uint32_t *cps, char *out)
{
    size_t n = 0;
    for (size_t at = 0; at < len;) {
        uint32_t cp;
        at += bpe_utf8_next(in, len, at, &cp);
        if (cp < 0x80) {
            cps[n++] = cp;
            continue;
        }
        uint32_t d[UNICODE_DECOMP_MAX];
        const size_t k = unicode_decompose(cp, d);
        memcpy(cps + n, d, k * sizeof *d);
        n += k;
    }
    for (size_t i = 0; i < n;) {
        if (cps[i] < 0x300 || unicode_combining_class(cps[i]) == 0) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < n && unicode_combining_class(cps[j]) != 0)
            j++;
        canonical_order(cps, i, j);
        i = j;
    }
    // compose in place: m code points kept, starter the last starter kept
    size_t m = 0, starter = SIZE_MAX;
    unsigned last_cc = 0;
    for (size_t i = 0; i < n; i++) {
        const uint32_t cp = cps[i];
        const unsigned cc = cp < 0x300 ? 0 : unicode_combining_class(cp);
        if (starter != SIZE_MAX) {
            // blocked: something kept between the starter and cp, of
            // class 0 or of a class not below cp's
            const bool blocked =
                m - 1 > starter && (last_cc == 0 || last_cc >= cc);
            const uint32_t c = blocked ? 0 : unicode_compose(cps[starter], cp);
            if (c) {
                cps[starter] = c;
                continue;
            }
        }
        if (cc == 0)
            starter = m;
        last_cc = cc;
        cps[m++] = cp;
    }
    size_t o = 0;
    for (size_t i = 0; i < m; i++)
        o += utf8_put(out + o, cps[i]);
    return o;
}

size_t bpe_normalize(enum bpe_normalizer norm, const char *in, size_t len,
                     uint32_t *scratch, char *out)
{
    static const char meta[] = "\xe2\x96\x81"; // U+2581, SentencePiece's space
    switch (norm) {
    case BPE_NORM_NONE: memcpy(out, in, len); return len;
    case BPE_NORM_NFC: {
        // ASCII is its own NFC
        size_t i = 0;
        while (i < len && (unsigned char)in[i] < 0x80)
            i++;
        if (i == len) {
            memcpy(out, in, len);
            return len;
        }
        return nfc(in, len, scratch, out);
    }
    case BPE_NORM_SENTENCEPIECE: {
        if (len == 0)
            return 0; // Prepend leaves an empty piece empty
        memcpy(out, meta, 3);
        size_t o = 3;
        for (size_t i = 0; i < len; i++) {
            if (in[i] == ' ') {
                memcpy(out + o, meta, 3);
                o += 3;
            } else {
                out[o++] = in[i];
            }
        }
        return o;
    }
    }
    return 0;
}

/* ------------------------------------------------------- pre-tokenizers */

/* The class of the code point at s[at], and its length in *len. */
static enum unicode_bpe_class class_at(const char *s, size_t n, size_t at,
                                       size_t *len, uint32_t *cp_out)
{
    uint32_t cp;
    *len = bpe_utf8_next(s, n, at, &cp);
    if (cp_out)
        *cp_out = cp;
    return unicode_bpe_class(cp);
}

/* The end of the run of class cls that starts at at (possibly empty), and
 * the characters in it in *chars; at most max characters (0: no limit). */
static size_t run_end(const char *s, size_t n, size_t at,
                      enum unicode_bpe_class cls, size_t max, size_t *chars,
                      size_t *last_len)
{
    size_t count = 0, len = 0;
    while (at < n && (!max || count < max)) {
        size_t l;
        if (class_at(s, n, at, &l, NULL) != cls)
            break;
        at += l;
        len = l;
        count++;
    }
    if (chars)
        *chars = count;
    if (last_len)
        *last_len = len;
    return at;
}

static bool is_cr_lf(char c)
{
    return c == '\r' || c == '\n';
}

/* The length of the contraction 's 't 're 've 'm 'll 'd at s[at] (which is
 * '\''), or 0. Folded: any case, and U+017F (long s, which case-folds to
 * s) for 's, as Oniguruma's (?i:...) matches. */
static size_t contraction(const char *s, size_t n, size_t at, bool folded)
{
    const size_t left = n - at;
    if (left < 2)
        return 0;
    char c1 = s[at + 1], c2 = left >= 3 ? s[at + 2] : 0;
    if (folded) {
        if (left >= 3 && (unsigned char)c1 == 0xC5 && (unsigned char)c2 == 0xBF)
            return 3; // 'ſ
        if (c1 >= 'A' && c1 <= 'Z')
            c1 = (char)(c1 + 32);
        if (c2 >= 'A' && c2 <= 'Z')
            c2 = (char)(c2 + 32);
    }
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
        return 2;
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') ||
        (c1 == 'l' && c2 == 'l'))
        return 3;
    return 0;
}

/* The whitespace alternatives shared by the patterns, at a space
 * character: \s+(?!\S) keeps the run but for its last character when a
 * non-space follows (and the run is longer than one), else \s+. */
static size_t space_run(const char *s, size_t n, size_t at)
{
    size_t chars, last;
    const size_t end = run_end(s, n, at, UNICODE_BPE_SPACE, 0, &chars, &last);
    if (end == n || chars < 2)
        return end;
    return end - last;
}

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+
 *        |\s+(?!\S)|\s+ */
static size_t gpt2_end(const char *s, size_t n, size_t at)
{
    if (s[at] == '\'') {
        const size_t k = contraction(s, n, at, false);
        if (k)
            return at + k;
    }
    size_t len;
    enum unicode_bpe_class c = class_at(s, n, at, &len, NULL);
    size_t from = at;
    if (s[at] == ' ' && at + 1 < n) {
        // " ?X+": the space leads a run of letters, numbers or others
        size_t l1;
        const enum unicode_bpe_class c1 = class_at(s, n, at + 1, &l1, NULL);
        if (c1 != UNICODE_BPE_SPACE) {
            c = c1;
            from = at + 1;
        }
    }
    if (c != UNICODE_BPE_SPACE)
        return run_end(s, n, from, c, 0, NULL, NULL);
    return space_run(s, n, at);
}

/* Llama 3 (digits 3) and Qwen2 (digits 1):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,digits}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t llama3_end(const char *s, size_t n, size_t at, size_t digits)
{
    if (s[at] == '\'') {
        const size_t k = contraction(s, n, at, true);
        if (k)
            return at + k;
    }
    size_t len;
    const enum unicode_bpe_class c = class_at(s, n, at, &len, NULL);
    if (c == UNICODE_BPE_LETTER)
        return run_end(s, n, at, UNICODE_BPE_LETTER, 0, NULL, NULL);
    if (c == UNICODE_BPE_NUMBER)
        return run_end(s, n, at, UNICODE_BPE_NUMBER, digits, NULL, NULL);
    // one character that is not \r, \n, a letter or a number may lead
    // a run of letters
    size_t l1 = 0;
    const enum unicode_bpe_class c1 =
        at + len < n ? class_at(s, n, at + len, &l1, NULL) : UNICODE_BPE_SPACE;
    if (!is_cr_lf(s[at]) && at + len < n && c1 == UNICODE_BPE_LETTER)
        return run_end(s, n, at + len, UNICODE_BPE_LETTER, 0, NULL, NULL);
    // " ?[^\s\p{L}\p{N}]+[\r\n]*"
    size_t from = SIZE_MAX;
    if (c == UNICODE_BPE_OTHER)
        from = at;
    else if (s[at] == ' ' && at + len < n && c1 == UNICODE_BPE_OTHER)
        from = at + 1;
    if (from != SIZE_MAX) {
        size_t end = run_end(s, n, from, UNICODE_BPE_OTHER, 0, NULL, NULL);
        while (end < n && is_cr_lf(s[end]))
            end++;
        return end;
    }
    // c is a space. "\s*[\r\n]+": through the last \r or \n of the run
    const size_t end = run_end(s, n, at, UNICODE_BPE_SPACE, 0, NULL, NULL);
    for (size_t k = end; k > at; k--)
        if (is_cr_lf(s[k - 1]))
            return k;
    return space_run(s, n, at);
}

size_t bpe_pretok_end(enum bpe_pattern pattern, const char *s, size_t n,
                      size_t at)
{
    switch (pattern) {
    case BPE_PATTERN_NONE: return n;
    case BPE_PATTERN_GPT2: return gpt2_end(s, n, at);
    case BPE_PATTERN_LLAMA3: return llama3_end(s, n, at, 3);
    case BPE_PATTERN_QWEN2: return llama3_end(s, n, at, 1);
    }
    return n;
}
