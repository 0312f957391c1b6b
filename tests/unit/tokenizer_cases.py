#!/usr/bin/python3
"""
tokenizer_cases.py - expected tokens for tests/unit/test_tokenizer.c, from an
implementation of BERT's BasicTokenizer written here in plain Python,
independent of src/unicode_tables.py:

    /usr/bin/python3 tests/unit/tokenizer_cases.py > tests/unit/tokenizer_cases.h

It follows transformers' BasicTokenizer (do_lower_case, tokenize_chinese_chars,
strip_accents following lowercase; no never_split) with the three choices
docs/math.md's "Tokenizer" makes where BERT versions disagree or Python's
str.lower() looks at context:

  * control characters are Cc and Cf (google-research/bert); transformers
    drops every category C* (so also private use and unassigned);
  * no NFC before splitting (transformers added one in 2023);
  * each character is lowercased alone, so capital sigma is always σ, where
    str.lower() gives a word-final ς.

The cases are hand-picked tricky strings plus random mixes of characters
from many scripts and categories (fixed seed), each in both cases modes.
The header's comment counts how many would come out differently under each
of those three choices, so the differences stay known.
"""
import random
import sys
import unicodedata

SEED = 20240501
N_RANDOM = 250


# ------------------------------------------------------ the reference

def is_whitespace(ch):
    if ch in " \t\n\r":
        return True
    return unicodedata.category(ch) == "Zs"


def is_control(ch, all_c=False):
    if ch in "\t\n\r":
        return False
    cat = unicodedata.category(ch)
    return cat.startswith("C") if all_c else cat in ("Cc", "Cf")


def is_punctuation(ch):
    cp = ord(ch)
    # every ASCII character that is neither a letter nor a digit
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_chinese_char(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF
            or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
            or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def split_on_punctuation(word):
    pieces, current = [], []
    for ch in word:
        if is_punctuation(ch):
            if current:
                pieces.append("".join(current))
                current = []
            pieces.append(ch)
        else:
            current.append(ch)
    if current:
        pieces.append("".join(current))
    return pieces


def basic_tokenize(text, lower, word_lower=False, nfc=False, all_c=False):
    """BERT's BasicTokenizer; the keyword arguments switch on transformers'
    behaviour where docs/math.md chose otherwise (see the module comment)."""
    kept = []
    for ch in text:
        if ch in "\0\ufffd" or is_control(ch, all_c):
            continue
        kept.append(" " if is_whitespace(ch) else ch)
    spaced = []
    for ch in kept:
        spaced.append(" %s " % ch if is_chinese_char(ord(ch)) else ch)
    text = "".join(spaced)
    if nfc:
        text = unicodedata.normalize("NFC", text)
    pieces = []
    for word in text.split():  # str.split(): Python's idea of whitespace
        if lower:
            if word_lower:
                word = word.lower()
            else:
                word = "".join(ch.lower() for ch in word)
            word = "".join(ch for ch in unicodedata.normalize("NFD", word)
                           if unicodedata.category(ch) != "Mn")
        pieces.extend(split_on_punctuation(word))
    return " ".join(pieces).split()


# ---------------------------------------------------------- the cases

HAND_PICKED = [
    "",
    " ",
    " \t\n\r\u3000\u00a0\u2003",
    "The cat chased the mouse because it was hungry",
    "Hello, world!",
    "don't",
    "$5+3=8 <a> ^b| c~d `e`",
    "100% #hashtag @user email@example.com C++ x&y",
    "http://example.com/a?b=1&c=2",
    "...!!!???",
    "U.S.A. e.g. a.b.c",
    "\u2018quotes\u2019 \u201cdouble\u201d \u00abguillemets\u00bb \u00bfQu\u00e9? \u00a1Hola!",
    "\u00c9lan caf\u00e9 na\u00efve",
    "e\u0301 E\u0301\u0302 \u0301\u0302 a\u0308\u0304",
    "\u039f\u0394\u039f\u03a3 \u03a3\u039f\u03a6\u039f\u03a3 \u03c3\u03bf\u03c6\u03bf\u03c2",
    "\u0130stanbul I\u0307 \u0131",
    "stra\u00dfe STRASSE \u1e9e",
    "\ufb01ne \ufb00 \ufb06",
    "\u2126 \u212a \u212b \u2160\u216b \u24b6\u24d1",
    "\u01c4 \u01c5 \u01c6 \u01c5ungla",
    "\u6211\u7231\u4f60abc",
    "Hello\u4e16\u754c!",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
    "\u304c\u304e\u3050 \u30ac\u30d1 \uff76\uff9e",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8 \uac00\ud7a3",
    "\u1100\u1161\u11a8 \u3131\u314f",
    "\uff26\uff55\uff4c\uff4c\uff57\uff49\uff44\uff54\uff48\uff01 \uff08\uff09",
    "\uf900\uf901\ufa0e \U0002f800 \u2f00\u2f01",
    "\U00020000\U0002a6df\U0002a700\U0002ceaf\U00030000",
    "a\u200bb a\u00adb a\u200db a\ufeffb a\u2060b",
    "a\u2028b a\u2029b a\x85b a\x0bb a\x0cb a\x1cb",
    "a\x00b \ufffd c\ufffdd \x7f\x01\x1f",
    "a\tb\nc\rd\r\n",
    "I \u2764\ufe0f NY \U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\U0001f1fa\U0001f1f8 \U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
    "\u1fef\u037e\u0387 \u1fed\u1fee \u0385",
    "A\u0345 \u1f88 \u1fb3 \u1fbc",
    "\u13a3\u13b3\u13a9 \uab70\uab71",
    "\U00010400\U00010401\U00010428 \U0001e900\U0001e922",
    "\u10a0\u10a1 \u1c90\u1cbf",
    "\u05e9\u05c1\u05b8\u05dc\u05d5\u05b9\u05dd \u05be",
    "\u0627\u0644\u0633\u0651\u064e\u0644\u0627\u0645 \u060c\u061f \u0600\u0601",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0915\u093c \u0929",
    "\u0b95\u0bca \u0b94 \u0cc0 \u0cca \u0f43 \u0f73 \u0f75 \u0f81",
    "\u1b06 \u1b3b \u1b44 \u1026",
    "\ue000abc \U000f0000 \u0378x \U000e0080",
    "\U0001d16d\U0001d165",
    "x\U0001d16d\u0301\U0001d165",
    "x\U0001d16d\u0941\U0001d165",
    "x\U0001d16d\u200b\U0001d165",
    "x\U0001d16d \U0001d165",
    "\U0001d15f\u1b44 \U0001d160\U00016ff0",
    "\u302e\u1b44\U00016ff0\U0001d16d\U0001d165\u302f\u1734",
    "\uac00\u302e\u0301\u1b44\u302f x\u302e!\u1b44",
    "\U0001d16d\U0001d165" * 12,
    "\U0001d165\U0001d16d" * 5 + "\U00016ff0\U00016ff1\u1715" * 3,
    "\u0301\u1b44\u0941\u1b44\u0301\U0001d16d\u034f\u1b44",
    "\u00e9\U0001d16d\U0001d165 \u0344\u302e\u1715",
    "\u2000\u2001x\u2000y",
    "\u00bd \u00b2 \u2075 \u2153 \u0660\u0661",
    "\u20ac5 \u00a35 \u00a55 \u20bf",
    "\u2200x\u2208\u211d: x\u00b2\u22650 \u2211 \u00d7 \u00f7",
    "\u3001\u3002\u300c\u300d\u3010\u3011 \u30fb",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35 \u0e2f",
    "\u0540\u0561\u0575 \u055e\u0589",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0419 \u0401\u0436",
    "Caf\u00e9 CAF\u00c9 caf\u00e9\u0301",
    "\ufe0f\ufe00 \U000e0100",
    "\u0340\u0341\u0343",
    "\u00c5\u212b A\u030a",
]

# Ranges of code points that random strings are drawn from, named by what
# they exercise.
POOLS = {
    "ascii letters and digits": [(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)],
    "ascii punctuation": [(0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60),
                          (0x7B, 0x7E)],
    "ascii controls": [(0x00, 0x08), (0x0B, 0x0C), (0x0E, 0x1F), (0x7F, 0x7F)],
    "latin-1": [(0x80, 0xFF)],
    "latin extended": [(0x100, 0x24F), (0x1E00, 0x1EFF)],
    "ipa and modifiers": [(0x250, 0x2FF)],
    "combining marks": [(0x300, 0x36F), (0x1AB0, 0x1ACE), (0x20D0, 0x20F0)],
    "greek": [(0x370, 0x3FF), (0x1F00, 0x1FFE)],
    "cyrillic": [(0x400, 0x52F), (0xA640, 0xA69F)],
    "armenian": [(0x531, 0x58A)],
    "hebrew": [(0x591, 0x5F4)],
    "arabic": [(0x600, 0x6FF)],
    "indic": [(0x900, 0x9FF), (0xB80, 0xBFF), (0xC80, 0xCFF)],
    "tibetan and myanmar": [(0xF00, 0xFDA), (0x1000, 0x109F)],
    "thai": [(0xE01, 0xE5B)],
    "georgian and cherokee": [(0x10A0, 0x10FF), (0x1C90, 0x1CBF),
                              (0x13A0, 0x13FD), (0xAB70, 0xABBF)],
    "hangul": [(0x1100, 0x11FF), (0x3131, 0x318E), (0xAC00, 0xD7A3)],
    "general punctuation": [(0x2000, 0x206F)],
    "symbols": [(0x20A0, 0x20C0), (0x2100, 0x218B), (0x2190, 0x22FF),
                (0x2460, 0x24FF), (0x2500, 0x25FF)],
    "cjk punctuation and kana": [(0x3000, 0x30FF), (0xFF00, 0xFFEF)],
    "cjk ideographs": [(0x4E00, 0x9FFF), (0x3400, 0x4DBF),
                       (0x20000, 0x2A6DF), (0x2A700, 0x2CEAF),
                       (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
                       (0x2F00, 0x2FD5), (0x30000, 0x3134A)],
    "specials": [(0xFFF0, 0xFFFF), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF)],
    "private use and unassigned": [(0xE000, 0xE00F), (0xF0000, 0xF000F),
                                   (0x378, 0x379), (0x2FE0, 0x2FEF),
                                   (0xE0080, 0xE00FF)],
    "emoji": [(0x1F300, 0x1F64F), (0x1F900, 0x1F9FF), (0x1F1E6, 0x1F1FF),
              (0x1F3FB, 0x1F3FF), (0x200D, 0x200D), (0xE0020, 0xE007F)],
    "cased supplementary": [(0x10400, 0x1044F), (0x104B0, 0x104FB),
                            (0x118A0, 0x118DF), (0x16E40, 0x16E7F),
                            (0x1E900, 0x1E943)],
    "music": [(0x1D15E, 0x1D172), (0x1D1BB, 0x1D1C0)],
    "reordered marks": [(0x1715, 0x1715), (0x1734, 0x1734),
                        (0x1B44, 0x1B44), (0x302E, 0x302F),
                        (0x16FF0, 0x16FF1), (0x1D165, 0x1D166),
                        (0x1D16D, 0x1D172), (0x0301, 0x0301),
                        (0x0941, 0x0941), (0x034F, 0x034F)],
    "whitespace": [(0x20, 0x20), (0x09, 0x0A), (0x0D, 0x0D), (0xA0, 0xA0),
                   (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
                   (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000)],
}


def random_text(rng):
    names = rng.sample(sorted(POOLS), rng.randint(1, 4))
    if rng.random() < 0.7:
        names.append("whitespace")
    n = rng.randint(1, 24)
    chars = []
    for _ in range(n):
        lo, hi = rng.choice(POOLS[rng.choice(names)])
        cp = rng.randint(lo, hi)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        chars.append(chr(cp))
    return "".join(chars)


def c_string(data):
    """A C string literal for bytes, wrapped; octal escapes, which stop after
    three digits, for anything not plainly printable (and for ?, against
    trigraphs)."""
    parts, line = [], ""
    for b in data:
        if 0x20 <= b < 0x7F and chr(b) not in '"\\?':
            piece = chr(b)
        else:
            piece = "\\%03o" % b
        if len(line) + len(piece) > 64:
            parts.append('"%s"' % line)
            line = ""
        line += piece
    parts.append('"%s"' % line)
    return "\n        ".join(parts)


def main():
    rng = random.Random(SEED)
    texts = list(HAND_PICKED)
    seen = set(texts)
    while len(texts) < len(HAND_PICKED) + N_RANDOM:
        text = random_text(rng)
        if text not in seen:
            seen.add(text)
            texts.append(text)

    cases = []
    differ = {"word_lower": 0, "nfc": 0, "all_c": 0}
    for text in texts:
        for keep_case in (False, True):
            tokens = basic_tokenize(text, not keep_case)
            for tok in tokens:
                assert "\1" not in tok and tok
            for switch in differ:
                if basic_tokenize(text, not keep_case, **{switch: True}) \
                        != tokens:
                    differ[switch] += 1
            cases.append((text, keep_case, tokens))

    w = sys.stdout.write
    w("/*\n")
    w(" * tokenizer_cases.h - %d tokenizer cases (%d strings, both case\n"
      % (len(cases), len(texts)))
    w(" * modes) and the tokens BERT's BasicTokenizer gives them.\n")
    w(" *\n")
    w(" * GENERATED by tests/unit/tokenizer_cases.py (seed %d) with Python\n"
      % SEED)
    w(" * %d.%d's unicodedata, Unicode %s; do not edit. Regenerate with\n"
      % (sys.version_info[0], sys.version_info[1],
         unicodedata.unidata_version))
    w(" *     /usr/bin/python3 tests/unit/tokenizer_cases.py"
      " > tests/unit/tokenizer_cases.h\n")
    w(" *\n")
    w(" * Where docs/math.md departs from transformers, cases that would differ:\n")
    w(" * str.lower() on whole words (final sigma) %d, NFC first %d,\n"
      % (differ["word_lower"], differ["nfc"]))
    w(" * dropping every category C* %d.\n" % differ["all_c"])
    w(" */\n")
    w("#ifndef TOKENIZER_CASES_H\n#define TOKENIZER_CASES_H\n\n")
    w("#include <stdbool.h>\n#include <stddef.h>\n\n")
    w("struct tokenizer_case {\n")
    w("    const char *input; /* [input_len] UTF-8, may hold NULs */\n")
    w("    size_t input_len;\n")
    w("    bool keep_case;\n")
    w("    size_t n_tokens;\n")
    w("    const char *tokens; /* each expected token followed by \\001 */\n")
    w("};\n\n")
    w("static const struct tokenizer_case tokenizer_cases[%d] = {\n"
      % len(cases))
    for text, keep_case, tokens in cases:
        data = text.encode("utf-8")
        joined = "".join(tok + "\1" for tok in tokens).encode("utf-8")
        w("    {%s,\n        %d, %s, %d,\n        %s},\n"
          % (c_string(data), len(data), "true" if keep_case else "false",
             len(tokens), c_string(joined)))
    w("};\n\n#endif\n")


if __name__ == "__main__":
    main()
