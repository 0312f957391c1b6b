#!/usr/bin/python3
r"""
unicode_tables.py - generate src/unicode_tables.c, the tables behind
src/unicode.h, from this Python's unicodedata:

    /usr/bin/python3 src/unicode_tables.py > src/unicode_tables.c

The rules are those of BERT's BasicTokenizer as docs/math.md ("Tokenizer")
states them; after them come what the BPE tokenizers need (src/bpe.c,
docs/tokenizers.md): the classes \p{L}, \p{N} and White_Space of their
pre-tokenizer regexes, and NFC's data (combining classes, canonical
decompositions, primary composites), checked here against unicodedata's
own NFC; and the general categories of letters and marks, for o200k's
regex. Each is written once below as a Python predicate; the C side
only looks the answers up. Before printing anything the script checks every
assumption the C tokenizer makes about the data, and stops if one fails, so
that a new Unicode version cannot silently break it.
"""
import sys
import unicodedata as ud

UNICODE_VERSION = "14.0.0"  # docs/math.md promises Unicode 14.0 properties
MAX_CP = 0x10FFFF
FOLD_MAX = 3  # UNICODE_FOLD_MAX in src/unicode.h

HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3

# BERT's _is_chinese_char: these blocks whatever the code point's category.
CJK_BLOCKS = [
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
]

# Class numbers; the same order as enum unicode_class in src/unicode.h.
CLASSES = ["OTHER", "SPACE", "DROP", "PUNCT", "CJK", "MARK", "MARK_STARTER",
           "COMBINING"]
OTHER, SPACE, DROP, PUNCT, CJK, MARK, MARK_STARTER, COMBINING = range(8)


def is_drop(ch):
    # _clean_text drops U+0000, U+FFFD and _is_control: Cc and Cf, except
    # the three that BERT counts as whitespace.
    if ch in "\t\n\r":
        return False
    return ch in "\0\ufffd" or ud.category(ch) in ("Cc", "Cf")


def is_space(ch):
    # _is_whitespace, plus what str.split() splits on among the characters
    # _clean_text keeps: U+2028 (Zl) and U+2029 (Zp). BERT splits words with
    # str.split(), so those two separate words there too.
    return ch in " \t\n\r\u2028\u2029" or ud.category(ch) == "Zs"


def is_cjk(cp):
    return any(lo <= cp <= hi for lo, hi in CJK_BLOCKS)


def is_punct(ch):
    # _is_punctuation: every ASCII non-alphanumeric symbol, and category P*.
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return ud.category(ch).startswith("P")


def classify(cp):
    ch = chr(cp)
    if is_drop(ch):
        return DROP
    if is_space(ch):
        return SPACE
    if is_cjk(cp):
        return CJK
    if is_punct(ch):
        return PUNCT
    if ud.category(ch) == "Mn":
        # When lowercasing, marks vanish, but a starter among them still
        # ends a run of non-starters that NFD would sort.
        nfd = ud.normalize("NFD", ch)
        if any(ud.combining(c) == 0 for c in nfd):
            return MARK_STARTER
        return MARK
    if ud.combining(ch) != 0:
        return COMBINING
    return OTHER


def fold(text):
    # BasicTokenizer, do_lower_case: lower(), then NFD without Mn.
    nfd = ud.normalize("NFD", text.lower())
    return "".join(c for c in nfd if ud.category(c) != "Mn")


def hangul_jamo(cp):
    # Unicode 3.12, Hangul syllable decomposition; the C code does the same.
    s = cp - HANGUL_FIRST
    out = [0x1100 + s // 588, 0x1161 + (s % 588) // 28]
    if s % 28:
        out.append(0x11A7 + s % 28)
    return out


def check(cond, what):
    if not cond:
        sys.exit("unicode_tables.py: assumption failed: " + what)


def build():
    if ud.unidata_version != UNICODE_VERSION:
        sys.exit("unicode_tables.py: this Python has Unicode %s, docs/math.md "
                 "promises %s; run it with /usr/bin/python3 (3.11)"
                 % (ud.unidata_version, UNICODE_VERSION))

    classes = [classify(cp) for cp in range(MAX_CP + 1)]

    # Whitespace as str.split() sees it, once dropped characters are gone.
    for cp in range(MAX_CP + 1):
        if classes[cp] != DROP and not 0xD800 <= cp <= 0xDFFF:
            check(chr(cp).isspace() == (classes[cp] == SPACE),
                  "SPACE is str.split()'s whitespace at U+%04X" % cp)

    folds = {}
    for cp in range(MAX_CP + 1):
        ch = chr(cp)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        cls = classes[cp]
        if cls in (SPACE, DROP):
            continue  # the tokenizer never folds these
        f = fold(ch)
        if cls in (MARK, MARK_STARTER):
            check(f == "", "U+%04X (Mn) folds to nothing" % cp)
            check(all(ud.category(c) == "Mn"
                      for c in ud.normalize("NFD", ch)),
                  "U+%04X (Mn) decomposes into marks only" % cp)
            continue
        if HANGUL_FIRST <= cp <= HANGUL_LAST:
            check([ord(c) for c in f] == hangul_jamo(cp),
                  "U+%04X folds to its algorithmic jamo" % cp)
            continue
        if cls == COMBINING:
            check(f == ch, "U+%04X (combining) folds to itself" % cp)
        if f == ch:
            continue
        seq = [ord(c) for c in f]
        check(1 <= len(seq) <= FOLD_MAX,
              "U+%04X folds to 1..%d code points" % (cp, FOLD_MAX))
        for c in seq:
            check(classes[c] in (OTHER, PUNCT, CJK, COMBINING),
                  "U+%04X folds to neither space, drop nor mark" % cp)
        # The tokenizer tracks runs of non-starters over the fold alone:
        # the decomposition must start with a starter, and the marks the
        # fold strips must not hide a starter before a kept non-starter.
        nfd = ud.normalize("NFD", ch.lower())
        check(ud.combining(nfd[0]) == 0,
              "U+%04X decomposes to a starter first" % cp)
        hidden = False
        for c in nfd:
            if ud.category(c) == "Mn":
                hidden = hidden or ud.combining(c) == 0
            elif hidden:
                check(ud.combining(c) == 0,
                      "U+%04X hides no starter between non-starters" % cp)
        folds[cp] = seq

    for cp in range(0x80):
        want = [cp + 32] if 0x41 <= cp <= 0x5A else None
        check(folds.get(cp) == want,
              "ASCII folds as the C fast path assumes (U+%04X)" % cp)
        check(want is None or classes[want[0]] == classes[cp],
              "an ASCII fold keeps its class (U+%04X)" % cp)

    ccc = [(cp, ud.combining(chr(cp))) for cp in range(MAX_CP + 1)
           if classes[cp] == COMBINING]
    check(all(0 < c < 256 for _, c in ccc), "ccc fits a byte")
    return classes, folds, ccc


# ---------------------------------------------------------------- BPE
# The byte-level BPE pre-tokenizers (GPT-2, Llama 3, Qwen2) split text with
# regexes over \p{L}, \p{N} and \s. The tokenizers library runs them in
# Oniguruma, whose \s in UTF-8 is U+0009..U+000D, U+0085 and the
# separators Zs, Zl and Zp: exactly the White_Space property below
# (PropList.txt of Unicode 14.0), which the check confirms.
BPE_CLASSES = ["OTHER", "LETTER", "NUMBER", "SPACE"]
B_OTHER, B_LETTER, B_NUMBER, B_SPACE = range(4)
WHITE_SPACE = [(0x0009, 0x000D), (0x0020, 0x0020), (0x0085, 0x0085),
               (0x00A0, 0x00A0), (0x1680, 0x1680), (0x2000, 0x200A),
               (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
               (0x3000, 0x3000)]
DECOMP_MAX = 4  # UNICODE_DECOMP_MAX in src/unicode.h


def is_white_space(cp):
    return any(lo <= cp <= hi for lo, hi in WHITE_SPACE)


def bpe_classify(cp):
    cat = ud.category(chr(cp))
    if is_white_space(cp):
        return B_SPACE
    if cat.startswith("L"):
        return B_LETTER
    if cat.startswith("N"):
        return B_NUMBER
    return B_OTHER


# o200k's pre-tokenizer regex (GPT-4o) names letters by case and marks:
# [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and [\p{Ll}\p{Lm}\p{Lo}\p{M}]. The
# general category of each letter and mark; every other code point NONE.
LETTER_MARKS = ["NONE", "LU", "LL", "LT", "LM", "LO", "MN", "MC", "ME"]


def letter_mark_classify(cp):
    cat = ud.category(chr(cp))
    name = cat.upper()
    return LETTER_MARKS.index(name) if name in LETTER_MARKS else 0


def build_letter_marks(bpe_classes):
    marks = [letter_mark_classify(cp) for cp in range(MAX_CP + 1)]
    for cp in range(MAX_CP + 1):
        check((marks[cp] in (1, 2, 3, 4, 5)) == (bpe_classes[cp] == B_LETTER),
              "the letters by case are \\p{L} (U+%04X)" % cp)
    return marks


def build_bpe():
    """The classes of the pre-tokenizers, and NFC's data: every combining
    class, one level of each canonical decomposition, and the primary
    composites. Checks that the C algorithm over these tables (written
    again in Python below) gives unicodedata's NFC."""
    classes = [bpe_classify(cp) for cp in range(MAX_CP + 1)]
    for cp in range(MAX_CP + 1):
        cat = ud.category(chr(cp))
        onig_space = (0x09 <= cp <= 0x0D or cp == 0x85 or
                      cat in ("Zs", "Zl", "Zp"))
        check(onig_space == is_white_space(cp),
              "White_Space is Oniguruma's \\s at U+%04X" % cp)
        check(not (is_white_space(cp) and cat[0] in "LN"),
              "no space is a letter or a number (U+%04X)" % cp)
    ccc = [(cp, ud.combining(chr(cp))) for cp in range(MAX_CP + 1)
           if ud.combining(chr(cp))]
    check(all(0 < c < 256 for _, c in ccc), "ccc fits a byte")
    decomp = {}
    compose = {}
    for cp in range(MAX_CP + 1):
        if HANGUL_FIRST <= cp <= HANGUL_LAST:
            continue  # algorithmic, in the C code
        d = ud.decomposition(chr(cp))
        if not d or d.startswith("<"):
            continue
        parts = [int(x, 16) for x in d.split()]
        check(1 <= len(parts) <= 2, "a decomposition step has 1 or 2 parts")
        decomp[cp] = parts
        # a primary composite: two parts, and NFC keeps it
        if len(parts) == 2 and ud.normalize("NFC", chr(cp)) == chr(cp):
            compose[(parts[0], parts[1])] = cp
    check(all(a < 1 << 21 and b < 1 << 21 for a, b in compose),
          "composition keys fit 42 bits")
    tables = (classes, dict(ccc), decomp, compose)
    check_nfc(tables)
    return classes, ccc, decomp, compose


def nfc_from_tables(s, tables):
    """NFC as src/bpe_normalize.c computes it from the emitted tables."""
    _, ccc, decomp, compose = tables
    cls = lambda c: ccc.get(c, 0)

    def decompose(cp, out):
        if HANGUL_FIRST <= cp <= HANGUL_LAST:
            out.extend(hangul_jamo(cp))
        elif cp in decomp:
            for c in decomp[cp]:
                decompose(c, out)
        else:
            out.append(cp)

    cps = []
    for ch in s:
        one = []
        decompose(ord(ch), one)
        check(len(one) <= DECOMP_MAX, "U+%04X decomposes into at most %d"
              % (ord(ch), DECOMP_MAX))
        cps.extend(one)
    # canonical order: a stable sort of each run of non-starters
    i = 0
    while i < len(cps):
        if cls(cps[i]) == 0:
            i += 1
            continue
        j = i
        while j < len(cps) and cls(cps[j]) != 0:
            j += 1
        cps[i:j] = sorted(cps[i:j], key=cls)
        i = j
    # canonical composition
    out = []
    starter = -1
    last_cc = 0
    for cp in cps:
        cc = cls(cp)
        if starter >= 0:
            s0 = out[starter]
            blocked = len(out) - 1 > starter and (last_cc == 0 or
                                                  last_cc >= cc)
            comp = compose_pair(s0, cp, compose)
            if comp and not blocked:
                out[starter] = comp
                continue
        if cc == 0:
            starter = len(out)
        last_cc = cc
        out.append(cp)
    return "".join(map(chr, out))


def compose_pair(a, b, compose):
    # Hangul L+V and LV+T are algorithmic, as in the C code
    if 0x1100 <= a <= 0x1112 and 0x1161 <= b <= 0x1175:
        return HANGUL_FIRST + ((a - 0x1100) * 21 + b - 0x1161) * 28
    if (HANGUL_FIRST <= a <= HANGUL_LAST and (a - HANGUL_FIRST) % 28 == 0
            and 0x11A8 <= b <= 0x11C2):
        return a + b - 0x11A7
    return compose.get((a, b), 0)


def check_nfc(tables):
    _, ccc, decomp, compose = tables
    marks = sorted({b for _, b in compose} | {0x0301, 0x0316, 0x0338})
    cases = []
    for cp in range(MAX_CP + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        cases.append(chr(cp))
    for a in sorted({a for a, _ in compose}):
        for b in marks:
            cases.append(chr(a) + chr(b))
            cases.append(chr(a) + "\u0316" + chr(b))  # below, then b
            cases.append(chr(a) + chr(b) + "\u0301")
    cases += ["\u1100\u1161", "\u1100\u1161\u11A8", "\uAC00\u11A8",
              "\u1100\u0301\u1161", "e\u0301\u0327", "e\u0327\u0301",
              "\u0958", "a\u05B0\u0301\u0300b", "\u0344a"]
    for s in cases:
        check(nfc_from_tables(s, tables) == ud.normalize("NFC", s),
              "NFC from the tables is unicodedata's for %r" % s)


def class_ranges(classes):
    ranges = []
    for cp, cls in enumerate(classes):
        if not ranges or ranges[-1][1] != cls:
            ranges.append((cp, cls))
    return ranges


def fold_runs(folds):
    """Split the folds into runs of single code points with one delta and a
    stride of 1 or 2 (A-Z, Greek, Cyrillic ...), and the rest."""
    single = sorted(cp for cp, seq in folds.items() if len(seq) == 1)
    runs, rest = [], {}
    i = 0
    while i < len(single):
        first = single[i]
        delta = folds[first][0] - first
        best_n, best_stride = 1, 1
        for stride in (1, 2):
            n = 1
            while (i + n < len(single)
                   and single[i + n] == first + n * stride
                   and folds[single[i + n]][0] - single[i + n] == delta):
                n += 1
            if n > best_n:
                best_n, best_stride = n, stride
        if best_n >= 3:
            runs.append((first, first + (best_n - 1) * best_stride,
                         best_stride, delta))
            i += best_n
        else:
            rest[first] = folds[first]
            i += 1
    for cp, seq in folds.items():
        if len(seq) > 1:
            rest[cp] = seq
    return runs, rest


C_FUNCTIONS = r"""
/* The index of the last of keys[0..n) that is <= key; keys are sorted and
 * keys[0] <= key. */
static size_t last_at_most(const uint32_t *keys, size_t n, uint32_t key)
{
    size_t lo = 0, hi = n; /* keys[lo] <= key < keys[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (keys[mid] <= key)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

#define COUNT(table) (sizeof(table) / sizeof((table)[0]))

enum unicode_class unicode_class(uint32_t cp)
{
    // most text is ASCII: a table, not a search
    if (cp < 0x80)
        return (enum unicode_class)ascii_class[cp];
    if (cp > 0x10FFFF)
        return UNICODE_OTHER;
    // packed (first << 8 | class) <= (cp << 8 | 0xFF) iff first <= cp
    size_t i = last_at_most(class_ranges, COUNT(class_ranges),
                            cp << 8 | 0xFF);
    return (enum unicode_class)(class_ranges[i] & 0xFF);
}

unsigned unicode_ccc(uint32_t cp)
{
    if (cp < combining_ccc[0] >> 8 || cp > 0x10FFFF)
        return 0;
    size_t i = last_at_most(combining_ccc, COUNT(combining_ccc),
                            cp << 8 | 0xFF);
    return combining_ccc[i] >> 8 == cp ? combining_ccc[i] & 0xFF : 0;
}

size_t unicode_fold(uint32_t cp, uint32_t out[static UNICODE_FOLD_MAX])
{
    // ASCII is most text, and only A-Z changes (the generator checks)
    if (cp < 0x80) {
        out[0] = unicode_fold_ascii(cp);
        return 1;
    }
    // syllable - HANGUL_FIRST = (L * 21 + V) * 28 + T; T == 0 is no jamo
    if (cp >= HANGUL_FIRST && cp <= HANGUL_LAST) {
        uint32_t s = cp - HANGUL_FIRST;
        out[0] = 0x1100 + s / 588;
        out[1] = 0x1161 + s % 588 / 28;
        if (s % 28 == 0)
            return 2;
        out[2] = 0x11A7 + s % 28;
        return 3;
    }
    if (cp >= fold_run_first[0] && cp <= 0x10FFFF) {
        size_t i = last_at_most(fold_run_first, COUNT(fold_run_first), cp);
        const struct fold_run *run = &fold_runs[i];
        uint32_t step = cp - fold_run_first[i];
        if (cp <= run->last && step % run->stride == 0) {
            out[0] = (uint32_t)((int32_t)cp + run->delta);
            return 1;
        }
    }
    if (cp >= fold_from[0] && cp <= 0x10FFFF) {
        size_t i = last_at_most(fold_from, COUNT(fold_from), cp);
        if (fold_from[i] == cp) {
            uint32_t to = fold_to[i];
            if (!(to & FOLD_SEQ)) {
                out[0] = to;
                return 1;
            }
            size_t at = (to & ~FOLD_SEQ) >> 2, n = to & 3;
            for (size_t k = 0; k < n; k++)
                out[k] = fold_seqs[at + k];
            return n;
        }
    }
    enum unicode_class cls = unicode_class(cp);
    if (cls == UNICODE_MARK || cls == UNICODE_MARK_STARTER)
        return 0;
    out[0] = cp;
    return 1;
}
"""


def emit(classes, folds, ccc):
    ranges = class_ranges(classes)
    runs, rest = fold_runs(folds)
    seqs, ones = [], []
    seq_at = {}
    for cp in sorted(rest):
        seq = tuple(rest[cp])
        if len(seq) == 1:
            ones.append((cp, "0x%04X" % seq[0]))
            continue
        if seq not in seq_at:
            seq_at[seq] = len(seqs)
            seqs.extend(seq)
        ones.append((cp, "SEQ(%d, %d)" % (seq_at[seq], len(seq))))
    check(len(seqs) < 1 << 29, "sequence offsets fit FOLD_SEQ's bits")

    size_bytes = 128 + 4 * len(ranges) + 4 * len(ccc) + 16 * len(runs) \
        + 8 * len(ones) + 4 * len(seqs)
    out = []
    w = out.append
    w("/*")
    w(" * unicode_tables.c - character classes and the lowercase fold of the")
    w(" * tokenizer (src/unicode.h), as BERT's BasicTokenizer sees them.")
    w(" *")
    w(" * GENERATED by src/unicode_tables.py from Python %d.%d's unicodedata,"
      % sys.version_info[:2])
    w(" * Unicode %s; do not edit. Regenerate with" % ud.unidata_version)
    w(" *     /usr/bin/python3 src/unicode_tables.py > src/unicode_tables.c")
    w(" *")
    w(" * %d class ranges, %d combining classes, %d fold runs, %d single folds,"
      % (len(ranges), len(ccc), len(runs), len(ones)))
    w(" * %d code points of fold sequences: %d bytes of tables in all."
      % (len(seqs), size_bytes))
    w(" */")
    w('#include "unicode.h"')
    w("")
    w("#include <stddef.h>")
    w("#include <stdint.h>")
    w("")
    w("#define HANGUL_FIRST 0x%04X" % HANGUL_FIRST)
    w("#define HANGUL_LAST 0x%04X" % HANGUL_LAST)
    w("")
    w("_Static_assert(UNICODE_FOLD_MAX == %d, \"unicode.h and the tables "
      "agree\");" % FOLD_MAX)
    w("")
    w("/* Each entry is (first code point << 8 | class); its class holds up to")
    w(" * the next entry's first code point. */")
    w("#define R(first, cls) ((uint32_t)(first) << 8 | UNICODE_##cls)")
    w("static const uint32_t class_ranges[%d] = {" % len(ranges))
    cells = ["R(0x%04X, %s)" % (cp, CLASSES[cls]) for cp, cls in ranges]
    out.extend(wrap(cells))
    w("};")
    w("#undef R")
    w("")
    w("/* The class of each ASCII code point, as class_ranges has it. */")
    w("#define A(cls) UNICODE_##cls")
    w("static const uint8_t ascii_class[128] = {")
    out.extend(wrap(["A(%s)" % CLASSES[classes[cp]] for cp in range(128)]))
    w("};")
    w("#undef A")
    w("")
    w("/* (code point << 8 | canonical combining class) of UNICODE_COMBINING. */")
    w("static const uint32_t combining_ccc[%d] = {" % len(ccc))
    out.extend(wrap(["0x%04X << 8 | %d" % (cp, c) for cp, c in ccc]))
    w("};")
    w("")
    w("/* fold_run_first[i], + stride, ..., fold_runs[i].last fold to")
    w(" * themselves plus fold_runs[i].delta. */")
    w("struct fold_run {")
    w("    uint32_t last;")
    w("    uint32_t stride;")
    w("    int32_t delta;")
    w("};")
    w("static const uint32_t fold_run_first[%d] = {" % len(runs))
    out.extend(wrap(["0x%04X" % r[0] for r in runs]))
    w("};")
    w("static const struct fold_run fold_runs[%d] = {" % len(runs))
    out.extend(wrap(["{0x%04X, %d, %d}" % r[1:] for r in runs]))
    w("};")
    w("")
    w("/* fold_from[i] folds to the one code point fold_to[i], or, with")
    w(" * FOLD_SEQ set, to the (to & 3) code points at")
    w(" * fold_seqs[(to & ~FOLD_SEQ) >> 2]. */")
    w("#define FOLD_SEQ 0x80000000u")
    w("#define SEQ(at, n) (FOLD_SEQ | (at) << 2 | (n))")
    w("static const uint32_t fold_from[%d] = {" % len(ones))
    out.extend(wrap(["0x%04X" % one[0] for one in ones]))
    w("};")
    w("static const uint32_t fold_to[%d] = {" % len(ones))
    out.extend(wrap([one[1] for one in ones]))
    w("};")
    w("#undef SEQ")
    w("")
    w("static const uint32_t fold_seqs[%d] = {" % len(seqs))
    out.extend(wrap(["0x%04X" % cp for cp in seqs]))
    w("};")
    out.append(C_FUNCTIONS.rstrip("\n"))
    return "\n".join(out) + "\n"


C_BPE_FUNCTIONS = r"""
enum unicode_bpe_class unicode_bpe_class(uint32_t cp)
{
    if (cp < 0x80)
        return (enum unicode_bpe_class)ascii_bpe_class[cp];
    if (cp > 0x10FFFF)
        return UNICODE_BPE_OTHER;
    size_t i = last_at_most(bpe_ranges, COUNT(bpe_ranges), cp << 8 | 0xFF);
    return (enum unicode_bpe_class)(bpe_ranges[i] & 0xFF);
}

unsigned unicode_combining_class(uint32_t cp)
{
    if (cp < ccc_all[0] >> 8 || cp > 0x10FFFF)
        return 0;
    size_t i = last_at_most(ccc_all, COUNT(ccc_all), cp << 8 | 0xFF);
    return ccc_all[i] >> 8 == cp ? ccc_all[i] & 0xFF : 0;
}

/* Append the full canonical decomposition of cp to out[*n]. */
static void decompose_into(uint32_t cp, uint32_t *out, size_t *n)
{
    // syllable - HANGUL_FIRST = (L * 21 + V) * 28 + T; T == 0 is no jamo
    if (cp >= HANGUL_FIRST && cp <= HANGUL_LAST) {
        uint32_t s = cp - HANGUL_FIRST;
        out[(*n)++] = 0x1100 + s / 588;
        out[(*n)++] = 0x1161 + s % 588 / 28;
        if (s % 28)
            out[(*n)++] = 0x11A7 + s % 28;
        return;
    }
    if (cp >= decomp_from[0] && cp <= 0x10FFFF) {
        size_t i = last_at_most(decomp_from, COUNT(decomp_from), cp);
        if (decomp_from[i] == cp) {
            // one level at a time: each part may decompose further
            decompose_into(decomp_first[i], out, n);
            if (decomp_second[i])
                decompose_into(decomp_second[i], out, n);
            return;
        }
    }
    out[(*n)++] = cp;
}

size_t unicode_decompose(uint32_t cp, uint32_t out[static UNICODE_DECOMP_MAX])
{
    size_t n = 0;
    if (cp < 0xC0) { // nothing below U+00C0 decomposes (the generator checks)
        out[0] = cp;
        return 1;
    }
    decompose_into(cp, out, &n);
    return n;
}

uint32_t unicode_compose(uint32_t a, uint32_t b)
{
    // Hangul: L + V gives LV, LV + T gives LVT
    if (a >= 0x1100 && a <= 0x1112 && b >= 0x1161 && b <= 0x1175)
        return HANGUL_FIRST + ((a - 0x1100) * 21 + (b - 0x1161)) * 28;
    if (a >= HANGUL_FIRST && a <= HANGUL_LAST &&
        (a - HANGUL_FIRST) % 28 == 0 && b >= 0x11A8 && b <= 0x11C2)
        return a + (b - 0x11A7);
    if (a > 0x1FFFFF || b > 0x1FFFFF)
        return 0;
    const uint64_t key = (uint64_t)a << 21 | b;
    size_t lo = 0, hi = COUNT(compose_keys); /* the key is in [lo, hi) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (compose_keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < COUNT(compose_keys) && compose_keys[lo] == key ? compose_to[lo]
                                                               : 0;
}
"""


def emit_bpe(bpe):
    classes, ccc, decomp, compose = bpe
    check(min(decomp) >= 0xC0, "nothing below U+00C0 decomposes")
    ranges = class_ranges(classes)
    out = []
    w = out.append
    w("")
    w("/* ------------------------------------------------ BPE pre-tokenizers */")
    w("")
    w("/* (first code point << 8 | class) as class_ranges, for \\p{L}, \\p{N}")
    w(" * and White_Space. */")
    w("#define R(first, cls) ((uint32_t)(first) << 8 | UNICODE_BPE_##cls)")
    w("static const uint32_t bpe_ranges[%d] = {" % len(ranges))
    out.extend(wrap(["R(0x%04X, %s)" % (cp, BPE_CLASSES[c]) for cp, c in ranges]))
    w("};")
    w("#undef R")
    w("")
    w("#define A(cls) UNICODE_BPE_##cls")
    w("static const uint8_t ascii_bpe_class[128] = {")
    out.extend(wrap(["A(%s)" % BPE_CLASSES[classes[cp]] for cp in range(128)]))
    w("};")
    w("#undef A")
    w("")
    w("/* ------------------------------------------------------------- NFC */")
    w("")
    w("/* (code point << 8 | canonical combining class), every class above 0. */")
    w("static const uint32_t ccc_all[%d] = {" % len(ccc))
    out.extend(wrap(["0x%04X << 8 | %d" % (cp, c) for cp, c in ccc]))
    w("};")
    w("")
    w("/* decomp_from[i] decomposes canonically, one level, into decomp_first[i]")
    w(" * then decomp_second[i] (0: none). Hangul syllables are computed. */")
    keys = sorted(decomp)
    w("static const uint32_t decomp_from[%d] = {" % len(keys))
    out.extend(wrap(["0x%04X" % cp for cp in keys]))
    w("};")
    w("static const uint32_t decomp_first[%d] = {" % len(keys))
    out.extend(wrap(["0x%04X" % decomp[cp][0] for cp in keys]))
    w("};")
    w("static const uint32_t decomp_second[%d] = {" % len(keys))
    out.extend(wrap(["0x%04X" % (decomp[cp][1] if len(decomp[cp]) > 1 else 0)
                     for cp in keys]))
    w("};")
    w("")
    w("/* The primary composites: (first << 21 | second), sorted, and what the")
    w(" * pair composes to. Hangul is computed. */")
    pairs = sorted(compose)
    w("static const uint64_t compose_keys[%d] = {" % len(pairs))
    out.extend(wrap(["0x%X" % (a << 21 | b) for a, b in pairs]))
    w("};")
    w("static const uint32_t compose_to[%d] = {" % len(pairs))
    out.extend(wrap(["0x%04X" % compose[p] for p in pairs]))
    w("};")
    out.append(C_BPE_FUNCTIONS.rstrip("\n"))
    return "\n".join(out) + "\n"


C_LETTER_MARK_FUNCTIONS = r"""
enum unicode_letter_mark unicode_letter_mark(uint32_t cp)
{
    if (cp < 0x80)
        return (enum unicode_letter_mark)ascii_letter_mark[cp];
    if (cp > 0x10FFFF)
        return UNICODE_LM_NONE;
    size_t i = last_at_most(letter_mark_ranges, COUNT(letter_mark_ranges),
                            cp << 8 | 0xFF);
    return (enum unicode_letter_mark)(letter_mark_ranges[i] & 0xFF);
}
"""


def emit_letter_marks(marks):
    ranges = class_ranges(marks)
    out = []
    w = out.append
    w("")
    w("/* ---------------------------------------------- letters and marks */")
    w("")
    w("/* (first code point << 8 | category) as class_ranges: Lu, Ll, Lt, Lm,")
    w(" * Lo, Mn, Mc and Me, the rest NONE. */")
    w("#define R(first, cat) ((uint32_t)(first) << 8 | UNICODE_LM_##cat)")
    w("static const uint32_t letter_mark_ranges[%d] = {" % len(ranges))
    out.extend(wrap(["R(0x%04X, %s)" % (cp, LETTER_MARKS[c])
                     for cp, c in ranges]))
    w("};")
    w("#undef R")
    w("")
    w("#define A(cat) UNICODE_LM_##cat")
    w("static const uint8_t ascii_letter_mark[128] = {")
    out.extend(wrap(["A(%s)" % LETTER_MARKS[marks[cp]] for cp in range(128)]))
    w("};")
    w("#undef A")
    out.append(C_LETTER_MARK_FUNCTIONS.rstrip("\n"))
    return "\n".join(out) + "\n"


def wrap(cells, width=79, indent="    "):
    lines, line = [], indent
    for i, cell in enumerate(cells):
        text = cell + ("," if i + 1 < len(cells) else "")
        if len(line) > len(indent) and len(line) + 1 + len(text) > width:
            lines.append(line)
            line = indent
        line += (" " if len(line) > len(indent) else "") + text
    lines.append(line)
    return lines


def main():
    classes, folds, ccc = build()
    bpe = build_bpe()
    marks = build_letter_marks(bpe[0])
    sys.stdout.write(emit(classes, folds, ccc))
    sys.stdout.write(emit_bpe(bpe))
    sys.stdout.write(emit_letter_marks(marks))


if __name__ == "__main__":
    main()
