/*
 * unicode.h - the character properties the tokenizer needs; internal to the
 * core. The tables behind these functions live in unicode_tables.c, which
 * src/unicode_tables.py generates from Python's unicodedata (Unicode 14.0):
 * BERT's classes and fold, and for BPE the pre-tokenizers' classes and NFC.
 *
 * All functions are pure lookups in constant tables: thread-safe, no state.
 */
#ifndef ATTN_UNICODE_H
#define ATTN_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/*
 * What BERT's BasicTokenizer does with a code point. Every code point
 * (0 .. 0x10FFFF) has exactly one class.
 */
enum unicode_class {
    UNICODE_OTHER = 0,    /* letters, digits, symbols: part of a word */
    UNICODE_SPACE,        /* separates words: \t \n \r, Zs, U+2028, U+2029 */
    UNICODE_DROP,         /* removed: Cc and Cf except \t \n \r, U+FFFD */
    UNICODE_PUNCT,        /* a token of its own: P*, ASCII $+<=>^`|~ */
    UNICODE_CJK,          /* a CJK ideograph: a token of its own */
    UNICODE_MARK,         /* Mn whose NFD has only non-starters (ccc != 0) */
    UNICODE_MARK_STARTER, /* Mn whose NFD has a starter (ccc == 0) */
    UNICODE_COMBINING     /* not Mn, yet ccc != 0: NFD may reorder it */
};

/* The class of cp; code points above 0x10FFFF are UNICODE_OTHER. */
enum unicode_class unicode_class(uint32_t cp);

/*
 * The canonical combining class of a UNICODE_COMBINING code point; 0 for
 * every other code point that is not a nonspacing mark (Mn).
 */
unsigned unicode_ccc(uint32_t cp);

/* The fold of an ASCII code point (below 0x80): A-Z lowercased, every
 * other one unchanged, so of the same class (src/unicode_tables.py checks
 * both); unicode_fold() gives the same. */
static inline uint32_t unicode_fold_ascii(uint32_t cp)
{
    return cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp;
}

/* The longest fold, in code points. */
#define UNICODE_FOLD_MAX 3

/*
 * The uncased form of cp, as BERT computes it for a word:
 * NFD(lowercase(cp)) without its nonspacing marks (Mn), written to out.
 * Returns its length: 1 with out[0] == cp when cp is unchanged, 0 for a
 * nonspacing mark, 2 or 3 for a Hangul syllable (decomposed into jamo) and
 * for a few other characters. Lowercasing is the full mapping of one
 * character, so capital sigma becomes σ, never the word-final ς.
 * Classes UNICODE_SPACE and UNICODE_DROP are returned unchanged: the
 * tokenizer never folds them.
 */
size_t unicode_fold(uint32_t cp, uint32_t out[static UNICODE_FOLD_MAX]);

/* --------------------------------------------------- BPE (src/bpe*.c) */

/*
 * What the byte-level BPE pre-tokenizers' regexes (GPT-2's, Llama 3's,
 * Qwen2's) ask of a code point: \p{L}, \p{N}, or \s, which in the
 * tokenizers library's Oniguruma is the White_Space property (the
 * generator checks the two agree). No space is a letter or a number.
 */
enum unicode_bpe_class {
    UNICODE_BPE_OTHER = 0,
    UNICODE_BPE_LETTER, /* \p{L}: general category L* */
    UNICODE_BPE_NUMBER, /* \p{N}: general category N* */
    UNICODE_BPE_SPACE   /* \s: White_Space */
};

/* The class of cp; code points above 0x10FFFF are UNICODE_BPE_OTHER. */
enum unicode_bpe_class unicode_bpe_class(uint32_t cp);

/* The canonical combining class of any code point (0 for starters). */
unsigned unicode_combining_class(uint32_t cp);

/* The longest full canonical decomposition, in code points. */
#define UNICODE_DECOMP_MAX 4

/* The full canonical decomposition of cp (Hangul syllables into jamo)
 * into out; returns its length, 1 with out[0] == cp when cp has none. */
size_t unicode_decompose(uint32_t cp, uint32_t out[static UNICODE_DECOMP_MAX]);

/* The primary composite of a followed by b (Hangul included), or 0. */
uint32_t unicode_compose(uint32_t a, uint32_t b);

/*
 * The general category of a letter or a mark, which o200k's pre-tokenizer
 * regex (GPT-4o) asks for: its classes [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
 * and [\p{Ll}\p{Lm}\p{Lo}\p{M}] are unions of these. The five letter
 * categories are exactly UNICODE_BPE_LETTER (the generator checks).
 */
enum unicode_letter_mark {
    UNICODE_LM_NONE = 0, /* neither a letter nor a mark */
    UNICODE_LM_LU,       /* uppercase letter */
    UNICODE_LM_LL,       /* lowercase letter */
    UNICODE_LM_LT,       /* titlecase letter (Dž) */
    UNICODE_LM_LM,       /* modifier letter (ʰ) */
    UNICODE_LM_LO,       /* other letter: CJK, kana, Arabic, Hebrew ... */
    UNICODE_LM_MN,       /* nonspacing mark */
    UNICODE_LM_MC,       /* spacing combining mark */
    UNICODE_LM_ME        /* enclosing mark */
};

/* The category of cp; code points above 0x10FFFF are UNICODE_LM_NONE. */
enum unicode_letter_mark unicode_letter_mark(uint32_t cp);

#endif
