/*
 * bpe_text.c - text before merging: UTF-8, the normalizer steps (NFC,
 * Prepend, Replace), the pre-tokenizer scanners and the splits that use
 * them or a literal text.
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

#include <stdio.h>
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

size_t bpe_norm_shorthand(enum bpe_normalizer norm, struct bpe_norm_step *steps)
{
    static const char meta[] = "\xe2\x96\x81"; // U+2581, SentencePiece's space
    switch (norm) {
    case BPE_NORM_NONE: return 0;
    case BPE_NORM_NFC:
        steps[0] = (struct bpe_norm_step){.kind = BPE_NORM_STEP_NFC};
        return 1;
    case BPE_NORM_SENTENCEPIECE:
        steps[0] = (struct bpe_norm_step){.kind = BPE_NORM_STEP_PREPEND,
                                          .content = {meta, 3}};
        steps[1] = (struct bpe_norm_step){.kind = BPE_NORM_STEP_REPLACE,
                                          .pattern = {" ", 1},
                                          .content = {meta, 3}};
        return 2;
    }
    return 0;
}

/* At most the bytes one step makes of len bytes, or SIZE_MAX. */
static size_t step_bound(const struct bpe_norm_step *step, size_t len)
{
    size_t out = 0;
    switch (step->kind) {
    case BPE_NORM_STEP_NFC: return size_mul(len, 3, &out) ? out : SIZE_MAX;
    case BPE_NORM_STEP_PREPEND:
        out = len;
        return size_add_to(&out, step->content.len) ? out : SIZE_MAX;
    case BPE_NORM_STEP_REPLACE: {
        // each whole pattern may become the content; the rest stays
        const size_t p = step->pattern.len, c = step->content.len;
        if (c <= p)
            return len;
        return size_mul(len / p, c, &out) && size_add_to(&out, len % p)
                   ? out
                   : SIZE_MAX;
    }
    }
    return SIZE_MAX;
}

size_t bpe_norm_bound(const struct bpe_norm_step *steps, size_t n, size_t len)
{
    size_t cur = len, most = len;
    for (size_t i = 0; i < n && cur != SIZE_MAX; i++) {
        cur = step_bound(&steps[i], cur);
        most = cur > most ? cur : most;
    }
    return cur == SIZE_MAX ? SIZE_MAX : most;
}

size_t bpe_norm_scratch(const struct bpe_norm_step *steps, size_t n, size_t len)
{
    // NFC decomposes first: at most one code point per byte of the
    // decomposition, itself at most 3x its input (the generator checks)
    size_t cur = len, most = 0;
    for (size_t i = 0; i < n && cur != SIZE_MAX; i++) {
        if (steps[i].kind == BPE_NORM_STEP_NFC) {
            const size_t need = step_bound(&steps[i], cur);
            most = need > most ? need : most;
        }
        cur = step_bound(&steps[i], cur);
    }
    return cur == SIZE_MAX ? SIZE_MAX : most;
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

/* Every pattern in in[0..len), leftmost first and not overlapping, as
 * content, into out; returns the length. */
static size_t replace(const struct bpe_norm_step *step, const char *in,
                      size_t len, char *out)
{
    const char *pat = step->pattern.text;
    const size_t plen = step->pattern.len, clen = step->content.len;
    size_t o = 0, at = 0;
    while (at < len) {
        const char *hit = len - at >= plen
                              ? memchr(in + at, pat[0], len - at - plen + 1)
                              : NULL;
        // a candidate only where the whole pattern still fits
        if (hit && memcmp(hit, pat, plen) != 0) {
            const size_t skip = (size_t)(hit - (in + at)) + 1;
            memcpy(out + o, in + at, skip);
            o += skip;
            at += skip;
            continue;
        }
        const size_t keep = hit ? (size_t)(hit - (in + at)) : len - at;
        memcpy(out + o, in + at, keep);
        o += keep;
        at += keep;
        if (hit) {
            memcpy(out + o, step->content.text, clen);
            o += clen;
            at += plen;
        }
    }
    return o;
}

/* One step of in[0..len) into out; its length. */
static size_t apply_step(const struct bpe_norm_step *step, const char *in,
                         size_t len, uint32_t *scratch, char *out)
{
    switch (step->kind) {
    case BPE_NORM_STEP_NFC: {
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
    case BPE_NORM_STEP_PREPEND:
        if (len == 0)
            return 0; // Prepend leaves an empty piece empty
        memcpy(out, step->content.text, step->content.len);
        memcpy(out + step->content.len, in, len);
        return step->content.len + len;
    case BPE_NORM_STEP_REPLACE: return replace(step, in, len, out);
    }
    return 0;
}

size_t bpe_norm_apply(const struct bpe_norm_step *steps, size_t n,
                      const char *in, size_t len, uint32_t *scratch, char *out,
                      char *tmp)
{
    if (n == 0) {
        memcpy(out, in, len);
        return len;
    }
    // the buffers take turns so that the last step writes to out
    const char *src = in;
    for (size_t i = 0; i < n; i++) {
        char *dst = (n - 1 - i) % 2 == 0 ? out : tmp;
        len = apply_step(&steps[i], src, len, scratch, dst);
        src = dst;
    }
    return len;
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

/* Llama 3's, Qwen2's and o200k's last alternatives, at a space:
 * \s*[\r\n]+ (through the last \r or \n of the run), else as
 * space_run(). */
static size_t spaces_end(const char *s, size_t n, size_t at)
{
    const size_t end = run_end(s, n, at, UNICODE_BPE_SPACE, 0, NULL, NULL);
    for (size_t k = end; k > at; k--)
        if (is_cr_lf(s[k - 1]))
            return k;
    return space_run(s, n, at);
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
    return spaces_end(s, n, at);
}

/* o200k's sets of letters by case: [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
 * (upper) and [\p{Ll}\p{Lm}\p{Lo}\p{M}] (lower); modifier and other
 * letters and the marks are in both. */
static bool in_case_set(uint32_t cp, bool upper)
{
    const enum unicode_letter_mark lm = unicode_letter_mark(cp);
    if (lm == UNICODE_LM_NONE)
        return false;
    return upper ? lm != UNICODE_LM_LL
                 : lm != UNICODE_LM_LU && lm != UNICODE_LM_LT;
}

/* The end of the run of characters of one case set that starts at at. */
static size_t case_run(const char *s, size_t n, size_t at, bool upper)
{
    while (at < n) {
        uint32_t cp;
        const size_t l = bpe_utf8_next(s, n, at, &cp);
        if (!in_case_set(cp, upper))
            break;
        at += l;
    }
    return at;
}

/* The start of the character that ends just before s[at] (at > 0). */
static size_t char_before(const char *s, size_t at)
{
    do
        at--;
    while (at > 0 && ((unsigned char)s[at] & 0xC0) == 0x80);
    return at;
}

/*
 * o200k's two word alternatives at s[at], with P [^\r\n\p{L}\p{N}], U
 * and L its case sets and C the contraction (?i:'s|'t|'re|'ve|'m|'ll|'d):
 *   P?U*L+C?  |  P?U+L*C?
 * tried as Oniguruma backtracks: each with the optional P taken first,
 * then without it; U* greedy, giving back a character at a time until L+
 * can start. The end of the match, or at when neither matches.
 */
static size_t o200k_word(const char *s, size_t n, size_t at)
{
    uint32_t cp;
    const size_t first = bpe_utf8_next(s, n, at, &cp);
    const enum unicode_bpe_class c = unicode_bpe_class(cp);
    const bool lead = cp != '\r' && cp != '\n' && c != UNICODE_BPE_LETTER &&
                      c != UNICODE_BPE_NUMBER;
    for (int alt = 0; alt < 2; alt++) {
        for (int with_lead = lead; with_lead >= 0; with_lead--) {
            const size_t from = with_lead ? at + first : at;
            const size_t upper_end = case_run(s, n, from, true);
            size_t lower_from = upper_end;
            if (alt == 0) {
                // the last place in [from, upper_end] that L+ can start
                bool found = false;
                for (;;) {
                    if (lower_from < n) {
                        bpe_utf8_next(s, n, lower_from, &cp);
                        found = in_case_set(cp, false);
                    }
                    if (found || lower_from == from)
                        break;
                    lower_from = char_before(s, lower_from);
                }
                if (!found)
                    continue;
            } else if (upper_end == from) {
                continue;
            }
            size_t end = case_run(s, n, lower_from, false);
            if (end < n && s[end] == '\'')
                end += contraction(s, n, end, true);
            return end;
        }
    }
    return at;
}

/* o200k (GPT-4o): the two word alternatives above, then
 *   \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t o200k_end(const char *s, size_t n, size_t at)
{
    const size_t word = o200k_word(s, n, at);
    if (word > at)
        return word;
    size_t len;
    const enum unicode_bpe_class c = class_at(s, n, at, &len, NULL);
    if (c == UNICODE_BPE_NUMBER)
        return run_end(s, n, at, UNICODE_BPE_NUMBER, 3, NULL, NULL);
    size_t from = SIZE_MAX, l1;
    if (c == UNICODE_BPE_OTHER)
        from = at;
    else if (s[at] == ' ' && at + 1 < n &&
             class_at(s, n, at + 1, &l1, NULL) == UNICODE_BPE_OTHER)
        from = at + 1;
    if (from != SIZE_MAX) {
        size_t end = run_end(s, n, from, UNICODE_BPE_OTHER, 0, NULL, NULL);
        while (end < n && (is_cr_lf(s[end]) || s[end] == '/'))
            end++;
        return end;
    }
    return spaces_end(s, n, at);
}

size_t bpe_pretok_end(enum bpe_pattern pattern, const char *s, size_t n,
                      size_t at)
{
    switch (pattern) {
    case BPE_PATTERN_NONE: return n;
    case BPE_PATTERN_GPT2: return gpt2_end(s, n, at);
    case BPE_PATTERN_LLAMA3: return llama3_end(s, n, at, 3);
    case BPE_PATTERN_QWEN2: return llama3_end(s, n, at, 1);
    case BPE_PATTERN_O200K: return o200k_end(s, n, at);
    case BPE_PATTERN_DIGIT: return n; /* a split's only (segment()) */
    }
    return n;
}

/* ------------------------------------------------------------- splits */

/* Where the next place that literal starts is, at or after from; n if
 * nowhere. */
static size_t find_literal(const struct bpe_string *lit, const char *s,
                           size_t n, size_t from)
{
    while (from < n && n - from >= lit->len) {
        const char *hit =
            memchr(s + from, lit->text[0], n - from - lit->len + 1);
        if (!hit)
            break;
        if (memcmp(hit, lit->text, lit->len) == 0)
            return (size_t)(hit - s);
        from = (size_t)(hit - s) + 1;
    }
    return n;
}

/* The segment of s[0..n) that starts at at (< n): a match of sp's pattern,
 * or the gap before the next one (the library's find_matches); its end,
 * and in *match which, after sp->invert. */
static size_t segment(const struct bpe_split *sp, const char *s, size_t n,
                      size_t at, bool *match)
{
    size_t end, len;
    if (sp->pattern == BPE_PATTERN_DIGIT) {
        // one number character, or the run of others up to the next
        *match = class_at(s, n, at, &len, NULL) == UNICODE_BPE_NUMBER;
        end = at + len;
        while (!*match && end < n &&
               class_at(s, n, end, &len, NULL) != UNICODE_BPE_NUMBER)
            end += len;
    } else if (sp->pattern != BPE_PATTERN_NONE) {
        // a scanner's matches cover the text
        end = bpe_pretok_end(sp->pattern, s, n, at);
        *match = true;
    } else if (sp->literal.len == 0) {
        end = n; // an empty literal matches nowhere, as in the library
        *match = false;
    } else if (n - at >= sp->literal.len &&
               memcmp(s + at, sp->literal.text, sp->literal.len) == 0) {
        end = at + sp->literal.len;
        *match = true;
    } else {
        end = find_literal(&sp->literal, s, n, at + 1);
        *match = false;
    }
    if (sp->invert)
        *match = !*match;
    return end;
}

/*
 * The library folds the segments into pieces: MergedWithPrevious
 * appends a match to the piece before it when that piece did not end with
 * a match; MergedWithNext, the same from the end (a match takes the gap
 * after it); Contiguous merges segments of one kind. Each needs to see
 * only the segment after the current one.
 */
bool bpe_split_next(const struct bpe_split *sp, const char *s, size_t n,
                    size_t *at, size_t *start, size_t *end)
{
    while (*at < n) {
        bool match, next_match;
        const size_t from = *at;
        size_t to = segment(sp, s, n, from, &match), next;
        switch (sp->behavior) {
        case BPE_SPLIT_ISOLATED: break;
        case BPE_SPLIT_REMOVED:
            if (match) {
                *at = to;
                continue;
            }
            break;
        case BPE_SPLIT_MERGED_WITH_PREVIOUS:
            if (!match && to < n) {
                next = segment(sp, s, n, to, &next_match);
                to = next_match ? next : to;
            }
            break;
        case BPE_SPLIT_MERGED_WITH_NEXT:
            if (match && to < n) {
                next = segment(sp, s, n, to, &next_match);
                to = next_match ? to : next;
            }
            break;
        case BPE_SPLIT_CONTIGUOUS:
            while (to < n) {
                next = segment(sp, s, n, to, &next_match);
                if (next_match != match)
                    break;
                to = next;
            }
            break;
        }
        *at = to;
        *start = from;
        *end = to;
        return true;
    }
    return false;
}

/* ----------------------------------------------------------- readable */

/* The length of the whole UTF-8 character at s[at], or 0 when the bytes
 * there are not one. */
static size_t whole_char(const char *s, size_t n, size_t at)
{
    const unsigned c = (unsigned char)s[at];
    const size_t want = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    const size_t room = n - at < 4 ? n - at : 4;
    return bpe_utf8_valid(s + at, room) >= want ? want : 0;
}

/* The readable form of key bytes s[0..len) into out (NULL: only count):
 * whole characters as they are, U+2581 as a space when sentencepiece, NUL
 * and every byte of a broken character as <0xNN>. Its length. */
size_t bpe_readable(const char *s, size_t len, bool sentencepiece, char *out)
{
    size_t o = 0;
    for (size_t at = 0; at < len;) {
        const size_t k = whole_char(s, len, at);
        if (k == 0 || s[at] == 0) {
            if (out)
                snprintf(out + o, 7, "<0x%02X>", (unsigned char)s[at]);
            o += 6;
            at++;
        } else if (sentencepiece && k == 3 &&
                   memcmp(s + at, "\xe2\x96\x81", 3) == 0) {
            if (out)
                out[o] = ' ';
            o++;
            at += 3;
        } else {
            if (out)
                memcpy(out + o, s + at, k);
            o += k;
            at += k;
        }
    }
    return o;
}
