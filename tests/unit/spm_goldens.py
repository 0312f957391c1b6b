#!/usr/bin/env python3
"""spm_goldens.py - the goldens of tests/unit/test_spm.c and
tests/server/test_spm_vocab.c: llama.cpp's own token ids for texts, from
its llama-tokenize tool.

Small SentencePiece vocabularies are made here (byte fallback, merges by
score and their ties, control and user-defined tokens, Phi-3's and
ModernBERT's stripping, UNUSED tokens, an empty token),
each written as a vocabulary-only GGUF file in a temporary folder with
gguf-py, and every text of its list tokenized by llama-tokenize, with and
without --no-bos (add_special = false: neither BOS nor EOS). Each goes to
tests/golden/spm/<name>.json with the vocabulary itself, which test_spm.c
builds its struct spm_spec from. Then texts are tokenized with the real
vocabularies of llama.cpp's models/ folder given (Llama 2's, Phi-3's)
and written to tests/golden/spm/<name>.json (llama-spm.json,
...) for tests/server/test_spm_vocab.c.

    M=$LLAMA/models
    PYTHONPATH=$LLAMA/gguf-py /usr/bin/python3 tests/unit/spm_goldens.py \\
        --tokenize $BUILD/bin/llama-tokenize --vocab \\
        $M/ggml-vocab-llama-spm.gguf $M/ggml-vocab-phi-3.gguf

Texts go to the tool through a file read verbatim (-f, --no-escape); the
ids are the last line of its --ids output.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

import gguf

UNDEFINED, NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = range(7)
STRIP_LEFT, STRIP_RIGHT = 1, 2
META = "\u2581"

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden",
                   "spm")


class Vocab:
    """A vocabulary being made: tokens (str, or bytes for one that is not
    UTF-8), scores and types by id."""

    def __init__(self, name, what, bytes_tokens=True):
        self.name, self.what = name, what
        self.tokens, self.scores, self.types = [], [], []
        self.general_name = "spm-" + name
        self.unk_id, self.bos_id, self.eos_id = 0, 1, 2
        self.add_bos, self.add_eos, self.add_space_prefix = True, False, True
        self.add("<unk>", 0.0, UNKNOWN)
        self.add("<s>", 0.0, CONTROL)
        self.add("</s>", 0.0, CONTROL)
        if bytes_tokens:
            for b in range(256):
                self.add("<0x%02X>" % b, 0.0, BYTE)

    def add(self, text, score, kind=NORMAL):
        self.tokens.append(text)
        self.scores.append(float(score))
        self.types.append(kind)
        return len(self.tokens) - 1

    def pieces(self, texts, start=-1.0, step=-1.0):
        """Normal tokens with falling scores, as SentencePiece ranks them."""
        score = start
        for t in texts:
            self.add(t, score)
            score += step

    def strip(self):
        """llama.cpp's stripping flags for this vocabulary's name
        (llama-vocab.cpp sets them by general.name, not from the file)."""
        flags = [0] * len(self.tokens)
        special = [i for i, k in enumerate(self.types)
                   if k in (CONTROL, USER_DEFINED, UNKNOWN)]
        name = self.general_name.lower()
        if "phi-3" in name or "phi3" in name:
            for i in special:
                flags[i] |= STRIP_RIGHT
            flags[self.tokens.index("</s>")] |= STRIP_RIGHT
            for t in ("<unk>", "<s>", "<|endoftext|>"):
                flags[self.tokens.index(t)] &= ~STRIP_RIGHT
        elif "modern-bert" in name:
            flags[self.tokens.index("[MASK]")] |= STRIP_LEFT
        return flags

    def write_gguf(self, path):
        w = gguf.GGUFWriter(path, "llama")
        w.add_name(self.general_name)
        w.add_block_count(1)
        w.add_context_length(64)
        w.add_embedding_length(8)
        w.add_feed_forward_length(16)
        w.add_head_count(1)
        w.add_head_count_kv(1)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_vocab_size(len(self.tokens))
        w.add_rope_dimension_count(8)
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list([t.encode() if isinstance(t, str) else t
                          for t in self.tokens])
        w.add_token_scores(self.scores)
        w.add_token_types(self.types)
        if self.unk_id >= 0:
            w.add_unk_token_id(self.unk_id)
        if self.bos_id >= 0:
            w.add_bos_token_id(self.bos_id)
        if self.eos_id >= 0:
            w.add_eos_token_id(self.eos_id)
        w.add_add_bos_token(self.add_bos)
        w.add_add_eos_token(self.add_eos)
        w.add_add_space_prefix(self.add_space_prefix)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    def json_tokens(self):
        return [t if isinstance(t, str) else {"hex": t.hex()}
                for t in self.tokens]


def tokenize(tool, model, text, no_bos, tmp):
    """llama.cpp's ids for text (str or bytes)."""
    path = os.path.join(tmp, "text")
    with open(path, "wb") as f:
        f.write(text.encode() if isinstance(text, str) else text)
    cmd = [tool, "-m", model, "-f", path, "--ids", "--no-escape",
           "--log-disable"]
    if no_bos:
        cmd.append("--no-bos")
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError("llama-tokenize failed on %r: %s" %
                           (text, r.stderr.decode(errors="replace")[-400:]))
    line = r.stdout.decode().strip().splitlines()[-1]
    return json.loads(line)


def case(tool, model, text, tmp):
    c = {"text": text} if isinstance(text, str) else {"hex": text.hex()}
    c["ids"] = tokenize(tool, model, text, False, tmp)
    c["ids_no_special"] = tokenize(tool, model, text, True, tmp)
    return c


# Texts every small vocabulary is tried on.
COMMON = [
    "", " ", "  ", "   ", "a", " a", "a ", "  a  ", "\n", "\n\n", "\t",
    " \t\n ", "hello", "hello world", " hello world", "hello  world",
    "hello world ", "the hello", "hello\nworld", "hello\tworld",
    "aaa", "aaaa", "aaaaa", "abc", "abcd", "bcd", "xyz", "zxy", "xyxy",
    "tree", "été", "español", "ü", "中文", "中文字", "🦙", "a🦙b",
    "hello 🦙 world", "héllo wörld", "<s>", "</s>", "<unk>", "<s>hello",
    "hello<s>", "hello <s> world", "<s><s>", "<s> </s>", " <s>", "<s> ",
    "<s>\n", "<unk>a</s>", "<", "<s", "s>", "x" * 40, " " * 33,
]


def base(v):
    """The pieces most vocabularies share: letters, a few accented and CJK
    characters, words, space runs and score ties."""
    v.pieces([META, "e", "t", "a", "o", "n", "h", "l", "r", "d", "w", "s",
              "i", "c", "b", "x", "y", "z", "p", "ñ", "é", "中", "文"])
    v.add(META + "t", -30.0)
    v.add("he", -31.0)
    v.add(META + "the", -32.0)
    v.add("ll", -33.0)
    v.add("el", -34.0)
    v.add("lo", -34.0)  # ties "el"
    v.add("llo", -35.0)
    v.add(META + "h", -36.0)
    v.add(META + "he", -37.0)
    v.add(META + "hello", -38.0)
    v.add("hello", -39.0)
    v.add(META + "w", -40.0)
    v.add("or", -41.0)
    v.add("ld", -41.0)
    v.add(META + "wor", -42.0)
    v.add(META + "world", -43.0)
    v.add(META + META, -44.0)
    v.add(META * 4, -45.0)
    v.add("aa", -46.0)
    v.add("aaaa", -47.0)
    v.add("ab", -48.0)
    v.add("bc", -48.0)  # ties "ab": "abc" is "ab" "c"
    v.add("cd", -20.0)  # beats "bc": "bcd" is "b" "cd"
    v.add("xy", -49.0)
    v.add("yz", -49.0)  # ties "xy": "xyz" is "xy" "z"
    v.add("zx", -25.0)  # beats "xy": "zxy" is "zx" "y"
    v.add("xyxy", -50.0)
    v.add("tr", -51.0)
    v.add("ee", -51.5)
    v.add("tree", -52.0)
    v.add("ét", -53.0)
    v.add("été", -54.0)
    v.add(META + "é", -55.0)
    v.add("中文", -56.0)
    v.add("es", -57.0)
    v.add("pa", -58.0)
    v.add("añ", -59.0)
    v.add("ol", -60.0)
    v.add("xx", -61.0)
    v.add("xxxx", -62.0)


def vocabularies():
    out = []

    v = Vocab("basic", "byte fallback, merges by score and their ties, "
              "space prefix, BOS")
    base(v)
    out.append((v, COMMON + random_texts(5, 80)))

    v = Vocab("no_prefix", "as basic, without the space prefix or the BOS")
    base(v)
    v.add_space_prefix = False
    v.add_bos = False
    out.append((v, COMMON))

    v = Vocab("eos", "as basic, with the EOS after the BOS")
    base(v)
    v.add_eos = True
    out.append((v, ["", "hello", " hello world ", "</s>", "hello</s>"]))

    v = Vocab("special", "control and user-defined tokens typed in the "
              "text: the longest first, equal lengths by id, the space "
              "prefix after each")
    base(v)
    v.add("<|im_start|>", 0.0, CONTROL)
    v.add("<|im_end|>", 0.0, CONTROL)
    v.add("[INST]", 0.0, USER_DEFINED)
    v.add("<x>", 0.0, USER_DEFINED)
    v.add("x>y", 0.0, CONTROL)  # as long as "<x>", a later id
    v.add("<x>y!", 0.0, CONTROL)
    v.add("ac", 0.0, USER_DEFINED)
    v.add("cdb", 0.0, CONTROL)  # longer than "ac": "acdb" is "a" "cdb"
    v.add("\t\t", 0.0, USER_DEFINED)
    v.add("a b", 0.0, USER_DEFINED)
    out.append((v, COMMON + [
        "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|><|im_end|>", " <|im_start|> hello <|im_end|> ",
        "[INST] hello [/INST]", "[INST]hello", "hello[INST]",
        "<x>y", "<x>y!", "<x>>y", "<x>x>y", "x>y<x>", "<<x>>",
        "acdb", "ac", "aac", "acac", "cacdb", "\t\t\t", "a\t\tb",
        "a b", "a  b", "aa b b", "hello <x> world", "<x> <x>",
        "<s>[INST] hi [/INST]</s>", "a" + META + "b", META,
    ] + random_texts(1, 150)))

    v = Vocab("phi3_strip", "Phi-3: llama.cpp strips the whitespace after its "
              "special tokens, but <unk>, <s> and <|endoftext|>")
    v.general_name = "Phi-3-toy"
    base(v)
    v.add("<|endoftext|>", 0.0, CONTROL)
    v.add("<|user|>", 0.0, CONTROL)
    v.add("<|assistant|>", 0.0, CONTROL)
    v.add("<|end|>", 0.0, CONTROL)
    v.add("<|tag|>", 0.0, USER_DEFINED)
    v.eos_id = v.tokens.index("<|endoftext|>")
    out.append((v, [
        "<|user|>\nhello<|end|>\n<|assistant|>",
        "<|user|>   hello <|end|>  \n  <|assistant|> world",
        "<s> hello</s>  world", "<|endoftext|>  hello", "<unk>  x",
        "<|tag|>\t\n hello", "hello <|tag|>", "<|end|>", "<|end|>   ",
        "a<|end|> b<|end|>  c", " <|user|> ", "<|user|><|user|>  ",
    ] + random_texts(3, 80)))

    v = Vocab("mask_lstrip", "ModernBERT's [MASK]: llama.cpp strips the "
              "whitespace before it")
    v.general_name = "modern-bert-toy"
    base(v)
    v.add("[MASK]", 0.0, CONTROL)
    out.append((v, [
        "hello [MASK] world", "   [MASK]", "[MASK]  ", "a\t\n [MASK]b",
        "[MASK] [MASK]", "x [MASK][MASK] y", " [MASK]",
    ] + random_texts(4, 60)))

    v = Vocab("raw_bytes", "no <0xNN> tokens: a byte falls back to the "
              "one-byte token that is itself", bytes_tokens=False)
    base(v)
    for b in (0xC3, 0xBC, 0xF0, 0x9F, 0xA6, 0x99, 0xA9, 0xB6):
        v.add(bytes([b]), -100.0)
    v.add("\n", -101.0)
    v.add("\t", -102.0)
    out.append((v, [
        "ü", "hello ü", "🦙", "é", "ö", "\n", "a\tb", "hello\nworld",
    ]))

    v = Vocab("odd_tokens", "UNUSED and UNDEFINED tokens merged into like "
              "others, an empty token (llama.cpp's [EMPTY_i])")
    base(v)
    v.add("qq", -5.0, UNUSED)
    v.add("qqq", -6.0, UNDEFINED)
    v.add("q", -70.0)
    empty = v.add("", -71.0)
    out.append((v, [
        "qq", "qqq", "qqqq", "hello", "[EMPTY_%d]" % empty, "A", "BA",
    ]))
    return out


# The texts each real vocabulary's golden holds, besides random ones.
LLAMA_TEXTS = [
    "", " ", "  ", "    ", "\t", "\t\t", "\n", "\n\n\n", "\r\n", " \n ",
    "Hello world", " Hello world", "Hello world ", "  Hello  world  ",
    "Hello\tworld\n", "line one\nline two\n\nline four",
    "0", "42", "1234567890", "3.14159", "1,000,000", "2024-01-31",
    "café", "naïve façade", "Äpfel über Öl", "ñandú", "Ærøskøbing",
    "Привет, мир!", "Съешь же ещё этих мягких французских булок",
    "你好，世界", "日本語のテキスト", "한국어", "🦙", "🦙🦙 llamas",
    "👨‍👩‍👧‍👦", "🙂 🙃", "∀x ∈ ℝ: x² ≥ 0", "αβγδ",
    "def f(x):\n    return x * 2\n",
    "int main(void) { return 0; }", "if (a && b) { c++; }",
    "https://example.com/path?q=1&r=2", "<s>", "</s>", "<unk>",
    "<s>Hello", "Hello</s>", "<s> Hello </s>", "<s><s>", "a<unk>b",
    "<s>[INST] Hi [/INST]", " <s> ", "<<s>>", "</s ", "<0x0A>",
    "   leading", "trailing   ", "  both  ", "x" * 100, " " * 40,
    "\u00a0non-breaking", "zero\u200bwidth", "ﬁ ligature",
    META + "already escaped", "a" + META + META + "b",
    "<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n",
    "<|system|>  You are helpful.<|end|>  \n<|user|>", "<|endoftext|>  x",
    "[PAD32011]  [PAD32012]", "<|placeholder1|> a", "a <|end|>\t\t b",
]


# Pieces the random texts are strung from.
PIECES = [
    "Hello", "world", "the", "ing", " ", "  ", "   ", "\n", "\n\n", "\t",
    "\r\n", "0", "42", "3.14", "é", "ü", "ñ", "Привет", "мир", "中文", "日本",
    "🦙", "👍🏽", "<s>", "</s>", "<unk>", "<", ">", "s", "/", META, "\u00a0",
    "<0x0A>", "[INST]", "<|im_start|>", "ab", "abc", "aaaa", "x>y", "<x>",
    "hello", "a b", "\t\t", ".", ",", "!", "'", "\"", "(", ")", "{", "}",
    "<|user|>", "<|end|>", "<|tag|>", "<|endoftext|>", "[MASK]", "\v", "\f",
]


def random_texts(seed, count):
    """Texts of 1 to 14 pieces and random characters (Latin-1, Greek,
    CJK, emoji, any plane-0 character but surrogates), reproducible."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 14)):
            r = rng.random()
            if r < 0.75:
                parts.append(rng.choice(PIECES))
            else:
                lo, hi = rng.choice([(0x20, 0x7E), (0xA0, 0xFF),
                                     (0x391, 0x3C9), (0x4E00, 0x4FFF),
                                     (0x1F300, 0x1F64F), (0x1, 0xD7FF)])
                parts.append(chr(rng.randint(lo, hi)))
        t = "".join(parts)
        if "\0" not in t:
            out.append(t)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenize", required=True,
                    help="llama.cpp's llama-tokenize")
    ap.add_argument("--vocab", nargs="*", default=[],
                    help="real vocabularies: ggml-vocab-llama-spm.gguf, "
                         "ggml-vocab-phi-3.gguf")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for v, texts in vocabularies():
            model = os.path.join(tmp, v.name + ".gguf")
            v.write_gguf(model)
            doc = {
                "what": v.what,
                "general_name": v.general_name,
                "tokens": v.json_tokens(),
                "scores": v.scores,
                "types": v.types,
                "strip": v.strip(),
                "unk_id": v.unk_id, "bos_id": v.bos_id, "eos_id": v.eos_id,
                "add_bos": v.add_bos, "add_eos": v.add_eos,
                "add_space_prefix": v.add_space_prefix,
                "cases": [case(args.tokenize, model, t, tmp) for t in texts],
            }
            path = os.path.join(OUT, v.name + ".json")
            with open(path, "w") as f:
                json.dump(doc, f, ensure_ascii=False, indent=1)
                f.write("\n")
            print(path, len(texts), "texts")
        for model in args.vocab:
            name = os.path.basename(model)[len("ggml-vocab-"):-len(".gguf")]
            texts = list(LLAMA_TEXTS)
            texts += [t for t in random_texts(2, 250) if t not in texts]
            doc = {
                "what": "llama.cpp's ids with the vocabulary of its "
                        "models/" + os.path.basename(model),
                "vocab": "tests/models/gguf/vocab/" + os.path.basename(model),
                "cases": [case(args.tokenize, model, t, tmp) for t in texts],
            }
            path = os.path.join(OUT, name + ".json")
            with open(path, "w") as f:
                json.dump(doc, f, ensure_ascii=False, indent=1)
                f.write("\n")
            print(path, len(texts), "texts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
