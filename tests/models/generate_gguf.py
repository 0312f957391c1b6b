#!/usr/bin/env python3
"""Write the GGUF fixtures and their goldens: three small checkpoints in the
Hugging Face layout, each converted to GGUF by llama.cpp's own converter and
quantized by its own llama-quantize, four vocabulary-only GGUFs of real
tokenizers, llama.cpp's token ids for a list of texts, and for every model
file the float64 reference's outputs beside llama.cpp's logits.

    /usr/bin/python3 tests/models/generate_gguf.py tests/models \\
        --llama-cpp SRC --llama-build BUILD

SRC is a llama.cpp checkout (convert_hf_to_gguf.py, gguf-py/, models/,
include/), BUILD its CMake build folder with bin/llama-quantize,
bin/llama-tokenize and bin/libllama.so; LLAMA_CPP_DIR and LLAMA_CPP_BUILD
name them too. Without both the script refuses: nothing here is needed by
`make test`, which reads the committed files.

It writes, under OUT_DIR (tests/models):

- llama_q/, qwen2_q/, gpt2_q/: F32 checkpoints (config.json with the keys
  the family's Config class writes, model.safetensors, the tokenizer files
  copied from llama3/, qwen2/ and gpt2/), hidden 256 so that every matrix
  row is a whole number of K-quant super-blocks;
- gguf/{llama,qwen2,gpt2}-{F32,F16,BF16}.gguf: convert_hf_to_gguf.py run
  on those folders (with the stand-ins below), and
  gguf/{arch}-{Q8_0,Q4_K_M,Q6_K}.gguf: llama-quantize from the F32 file;
- gguf/vocab/ggml-vocab-{llama-spm,llama-bpe,qwen2,gpt-2}.gguf: copied from
  llama.cpp's models/ folder;
- golden/gguf/tokens.json: llama-tokenize's ids for the texts below, for
  the four vocabularies and the three F32 model files;
- golden/gguf/{arch}-{TYPE}.json: generate_decoders.py's goldens in their
  shape, the float64 reference run over the weights as gguf-py
  dequantizes them from that file (mapped back to the Hugging Face
  layout), with llama.cpp's last-position logits per case and its greedy
  continuation (tests/models/gguf_logits.c, compiled here against BUILD);
- gguf/more/<folder>-F32.gguf: the converter run on nine of the other
  generators' test checkpoints (MORE: qwen3, mistral, llama2, olmo2,
  gemma, gemma2, gemma3, phi3, phi3_longrope), and
  golden/gguf/more/<folder>.json: the file's metadata and tensors (each
  traced to the checkpoint tensor it holds), llama.cpp's ids of the
  golden's sentences, its logits for the golden's ids beside the golden's
  float64 ones, and its greedy continuation. Gemma's and Phi-3's converters
  need SentencePiece's tokenizer.model, which those folders lack: the
  script checks that the converter refuses them as they are, then converts
  a copy with a tokenizer.model of tokenizer.json's vocabulary.

The converter imports transformers (AutoConfig, AutoTokenizer) and
sentencepiece; neither is installed here. The stand-ins this script puts
in their place: AutoConfig fails, so the converter reads config.json as it
is (its own fallback); AutoTokenizer reads tokenizer.json, or vocab.json and
the tokenizer's default special tokens, and answers the few questions
get_vocab_base asks (the vocabulary, the added tokens and their flags);
sentencepiece exists, so the converter finds no tokenizer.model and goes
on to the BPE path; PyTorch's float8 dtypes, which older PyTorch lacks and
the converter only names, get placeholders; tqdm, a bar that draws
nothing. The pre-tokenizer name, which the converter finds by
hashing a tokenization of a fixed text with the real tokenizer, is given:
llama-bpe, qwen2, gpt-2. Everything else is the converter's own code.

Before writing the goldens it checks that the F32 GGUF holds the
checkpoint's weights exactly (after undoing the converter's q/k row
permutation and GPT-2's transposes) and that the reference's outputs from
it equal those from the checkpoint within 1e-12; and that the tokenizers
library (generate_decoders.py's tokenize.mjs) and llama.cpp give the same
ids for the goldens' sentences.

Deterministic: two runs give byte-identical files.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
import unicodedata

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)

USAGE = ("usage: generate_gguf.py OUT_DIR --llama-cpp SRC --llama-build BUILD\n"
         "       (or LLAMA_CPP_DIR=SRC LLAMA_CPP_BUILD=BUILD generate_gguf.py OUT_DIR)")

QUANTS = ["Q8_0", "Q4_K_M", "Q6_K"]
FLOATS = ["F32", "F16", "BF16"]
VOCABS = ["ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf", "ggml-vocab-qwen2.gguf",
          "ggml-vocab-gpt-2.gguf"]

LLAMA3_SCALING = {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                  "original_max_position_embeddings": 1024, "rope_type": "llama3"}

# generate_decoders.py's weights at hidden 256 keep the input embedding so
# far ahead in the residual stream that the tied LM head's largest logit is
# the last token's own, every step; the sublayers' output projections are
# scaled up so that the layers, not the embedding, choose the next token.
RESIDUAL_GAIN = 8.0
OUT_PROJ = ("self_attn.o_proj.weight", "mlp.down_proj.weight", "attn.c_proj.weight",
            "mlp.c_proj.weight")

# name: the GGUF files' prefix; folder: the checkpoint; source: the test
# model whose tokenizer files are copied; pre: tokenizer.ggml.pre.
ARCHS = [
    dict(arch="llama", folder="llama_q", source="llama3", pre="llama-bpe", seed=4100,
         v=dict(name="llama_q", family="llama", dtype="F32", layers=2, hidden=256, heads=4,
                kv_heads=2, head_dim=64, inter=256, eps=1e-5, theta=500000.0,
                scaling=LLAMA3_SCALING, tied=True, shards=1, tokenizer="llama3",
                special="llama3", version="4.43.0.dev0",
                about="F32, hidden 256, 4 heads of 64 on 2 KV heads, intermediate 256, "
                      "rope_theta 500000 with llama3 rope_scaling, tied, Llama 3's test "
                      "tokenizer (llama3/)")),
    dict(arch="qwen2", folder="qwen2_q", source="qwen2", pre="qwen2", seed=4200,
         v=dict(name="qwen2_q", family="qwen2", dtype="F32", layers=2, hidden=256, heads=4,
                kv_heads=2, head_dim=64, inter=256, eps=1e-6, theta=1000000.0, window=None,
                config_window=32768, tied=True, shards=1, tokenizer="qwen2", special="qwen2",
                version="4.40.1",
                about="F32, hidden 256, 4 heads of 64 on 2 KV heads, q/k/v biases, "
                      "intermediate 256, tied, vocab_size 448 over the tokenizer's 365 "
                      "(padding rows), Qwen2's test tokenizer (qwen2/)")),
    dict(arch="gpt2", folder="gpt2_q", source="gpt2", pre="gpt-2", seed=4300,
         v=dict(name="gpt2_q", family="gpt2", dtype="F32", prefix="", buffers=False,
                lm_head=False, layers=2, hidden=256, heads=4, positions=128,
                tokenizer="gpt2_files", special="gpt2", version="4.40.0",
                about="F32, n_embd 256, 4 heads of 64, n_inner null (1024), n_positions "
                      "128, tied, GPT-2's test tokenizer (gpt2/: vocab.json + merges.txt)")),
]


# --------------------------------------------- the converter, with stand-ins

class _Added:
    def __init__(self, content, special, normalized):
        self.content, self.special, self.normalized = content, special, normalized


class FileTokenizer:
    """What get_vocab_base asks of transformers' AutoTokenizer, read from
    the folder's files: vocab (added tokens included), get_added_vocab(),
    added_tokens_decoder, and encode/decode of an added token (itself)."""

    def __init__(self, path):
        path = str(path)
        self.added = {}
        tj = os.path.join(path, "tokenizer.json")
        if os.path.exists(tj):
            with open(tj, encoding="utf-8") as fp:
                tok = json.load(fp)
            self.vocab = dict(tok["model"]["vocab"])
            for t in tok["added_tokens"]:
                self.vocab[t["content"]] = t["id"]
                self.added[t["id"]] = _Added(t["content"], t["special"], t["normalized"])
        else:
            with open(os.path.join(path, "vocab.json"), encoding="utf-8") as fp:
                self.vocab = json.load(fp)
            cfg = {}
            cp = os.path.join(path, "tokenizer_config.json")
            if os.path.exists(cp):
                with open(cp, encoding="utf-8") as fp:
                    cfg = json.load(fp)
            # GPT2Tokenizer's special tokens (bos, eos, unk; all
            # <|endoftext|> by default) become special added tokens
            for key in ("bos_token", "eos_token", "unk_token"):
                content = cfg.get(key, "<|endoftext|>")
                if content is not None:
                    self.added[self.vocab[content]] = _Added(content, True, False)

        # what LlamaHfVocab (the converter's path for a SentencePiece-style
        # BPE tokenizer.json with byte fallback, no tokenizer.model) asks:
        # the base vocabulary's size (added tokens past it excluded) and the
        # special tokens tokenizer_config.json names
        self.is_fast = True
        self.vocab_size = len(self.vocab) if not os.path.exists(tj) else \
            len(tok["model"]["vocab"])
        specials = []
        cp = os.path.join(path, "tokenizer_config.json")
        if os.path.exists(cp):
            with open(cp, encoding="utf-8") as fp:
                cfg = json.load(fp)
            for key in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                        "cls_token", "mask_token"):
                t = cfg.get(key)
                if isinstance(t, dict):
                    t = t.get("content")
                if t is not None and t not in specials:
                    specials.append(t)
            for t in cfg.get("additional_special_tokens") or []:
                t = t.get("content") if isinstance(t, dict) else t
                if t not in specials:
                    specials.append(t)
        self.all_special_tokens = [t for t in specials if t in self.vocab]
        self.all_special_ids = [self.vocab[t] for t in self.all_special_tokens]

    def get_vocab(self):
        return dict(self.vocab)

    def get_added_vocab(self):
        return {a.content: i for i, a in self.added.items()}

    @property
    def added_tokens_decoder(self):
        return dict(self.added)

    def encode(self, text, add_special_tokens=False):
        for i, a in self.added.items():
            if a.content == text:
                return [i]
        raise NotImplementedError("the stand-in tokenizer encodes added tokens only")

    def decode(self, ids):
        return "".join(self.added[i].content for i in ids)


# --------------------------------------------- SentencePiece's tokenizer.model

# SentencePiece's piece types (sentencepiece_model.proto)
SP_NORMAL, SP_UNKNOWN, SP_CONTROL, SP_USER_DEFINED, SP_UNUSED, SP_BYTE = 1, 2, 3, 4, 5, 6


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number, wire, payload):
    key = _varint(number << 3 | wire)
    if wire == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def model_proto(tok_json):
    """A SentencePiece ModelProto (BPE, byte fallback) holding a
    SentencePiece-style tokenizer.json's model vocabulary, id for id: each
    piece's type (UNKNOWN for the model's unk_token, CONTROL for a special
    added token, BYTE for <0xNN>, NORMAL otherwise) and score (the piece
    made by merge r scores -r, so that SentencePiece's BPE, which joins the
    best-scoring pair, follows the merges' order; a piece no merge makes
    scores 0). trainer_spec: model_type BPE (3 = 2), byte_fallback (35);
    normalizer_spec: name "identity" (1), add_dummy_prefix (3) as the
    tokenizer's Prepend("▁") says, remove_extra_whitespaces (4) false."""
    import struct
    model = tok_json["model"]
    inv = {i: p for p, i in model["vocab"].items()}
    special = {t["content"] for t in tok_json["added_tokens"] if t["special"]}
    score = {}
    for r, m in enumerate(model["merges"]):
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        score.setdefault(a + b, -float(r))
    out = b""
    for i in range(len(inv)):
        p = inv[i]
        if p == model.get("unk_token"):
            t = SP_UNKNOWN
        elif p in special:
            t = SP_CONTROL
        elif len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
            t = SP_BYTE
        else:
            t = SP_NORMAL
        sc = score.get(p, 0.0) if t == SP_NORMAL else 0.0
        piece = (_field(1, 2, p.encode("utf-8")) + _field(2, 5, struct.pack("<f", sc))
                 + _field(3, 0, _varint(t)))
        out += _field(1, 2, piece)
    prefix = "Prepend" in json.dumps(tok_json.get("normalizer"))
    out += _field(2, 2, _field(3, 0, _varint(2)) + _field(35, 0, _varint(1)))
    out += _field(3, 2, _field(1, 2, b"identity") + _field(3, 0, _varint(int(prefix)))
                  + _field(4, 0, _varint(0)))
    return out


def read_model_proto(data):
    """[(piece, score, type)] of a ModelProto's field 1."""
    import struct

    def fields(buf):
        i = 0
        while i < len(buf):
            key, shift = 0, 0
            while True:
                b = buf[i]
                i += 1
                key |= (b & 0x7F) << shift
                shift += 7
                if b < 0x80:
                    break
            number, wire = key >> 3, key & 7
            if wire == 0:
                v, shift = 0, 0
                while True:
                    b = buf[i]
                    i += 1
                    v |= (b & 0x7F) << shift
                    shift += 7
                    if b < 0x80:
                        break
            elif wire == 5:
                v, i = buf[i:i + 4], i + 4
            elif wire == 1:
                v, i = buf[i:i + 8], i + 8
            elif wire == 2:
                n, shift = 0, 0
                while True:
                    b = buf[i]
                    i += 1
                    n |= (b & 0x7F) << shift
                    shift += 7
                    if b < 0x80:
                        break
                v, i = buf[i:i + n], i + n
            else:
                raise ValueError("tokenizer.model: wire type %d" % wire)
            yield number, v

    pieces = []
    for number, v in fields(data):
        if number == 1:
            piece, score, typ = "", 0.0, SP_NORMAL
            for n2, v2 in fields(v):
                if n2 == 1:
                    piece = v2.decode("utf-8")
                elif n2 == 2:
                    score = struct.unpack("<f", v2)[0]
                elif n2 == 3:
                    typ = v2
            pieces.append((piece, score, typ))
    return pieces


def convert(src, folder, outtype, outfile, pre):
    """Run convert_hf_to_gguf.py's main() on folder (in this process; the
    caller runs it in a child)."""
    tf = types.ModuleType("transformers")

    class AutoConfig:
        @staticmethod
        def from_pretrained(path, *args, **kwargs):
            # LlamaConfig (and MistralConfig) fill a missing
            # num_key_value_heads with num_attention_heads, which the
            # converter's q/k permutation reads; llama2/ leaves it out.
            # Every other config.json is read as it is.
            with open(os.path.join(str(path), "config.json"), encoding="utf-8") as fp:
                cfg = json.load(fp)
            if cfg.get("model_type") in ("llama", "mistral") and "num_key_value_heads" not in cfg:
                cfg["num_key_value_heads"] = cfg["num_attention_heads"]
                return types.SimpleNamespace(to_dict=lambda: cfg)
            raise OSError("transformers is not installed: config.json is read as it is")

    class AutoTokenizer:
        @staticmethod
        def from_pretrained(path, *args, **kwargs):
            return FileTokenizer(path)

    tf.AutoConfig, tf.AutoTokenizer = AutoConfig, AutoTokenizer
    sp = types.ModuleType("sentencepiece")

    class SentencePieceProcessor:
        """The calls the converter makes, answered from the pieces of a
        tokenizer.model (a SentencePiece ModelProto: piece, score, type).
        The folders that have none make the converter stop, as before, at
        its own check that the file exists."""

        def LoadFromFile(self, path):
            with open(path, "rb") as fp:
                self.pieces = read_model_proto(fp.read())

        def vocab_size(self):
            return len(self.pieces)

        def IdToPiece(self, i):
            return self.pieces[i][0]

        def GetScore(self, i):
            return self.pieces[i][1]

        def IsUnknown(self, i):
            return self.pieces[i][2] == SP_UNKNOWN

        def IsControl(self, i):
            return self.pieces[i][2] == SP_CONTROL

        def IsUnused(self, i):
            return self.pieces[i][2] == SP_UNUSED

        def IsByte(self, i):
            return self.pieces[i][2] == SP_BYTE

    sp.SentencePieceProcessor = SentencePieceProcessor
    sys.modules["transformers"] = tf
    if "tqdm" not in sys.modules:
        try:
            import tqdm  # noqa: F401  (the writer's progress bar)
        except ImportError:
            bar = types.ModuleType("tqdm")

            class tqdm:  # a progress bar that shows nothing
                def __init__(self, *args, **kwargs):
                    pass

                def update(self, *args):
                    pass

                def set_description(self, *args):
                    pass

                def reset(self, *args, **kwargs):
                    pass

                def close(self):
                    pass

            bar.tqdm = tqdm
            sys.modules["tqdm"] = bar
    import torch
    for name in ("float8_e4m3fn", "float8_e5m2"):
        # older PyTorch has no float8 dtypes; the converter only names them
        if not hasattr(torch, name):
            setattr(torch, name, "torch.%s (absent)" % name)
    sys.modules["sentencepiece"] = sp
    sys.path[:0] = [src, os.path.join(src, "gguf-py")]
    import convert_hf_to_gguf as conv
    from conversion.base import TextModel
    def vocab_pre(self, tokenizer):
        if pre == "-":
            raise RuntimeError("the converter took the byte-level BPE path, for which no "
                               "pre-tokenizer name is given")
        return pre

    TextModel.get_vocab_base_pre = vocab_pre
    sys.argv = ["convert_hf_to_gguf.py", folder, "--outtype", outtype, "--outfile", outfile]
    conv.main()


# The other families' existing test checkpoints (generate_decoders.py,
# generate_gemma.py, generate_neox_phi3_olmo2.py), each converted to one F32
# GGUF under gguf/more/ as it is, with llama.cpp's ids and logits for the
# sentences of its golden (golden/<folder>.json) in golden/gguf/more/.
# pre: tokenizer.ggml.pre for a byte-level BPE vocabulary ("-": the converter
# must not take that path); refused: why the converter cannot take the
# folder, checked by running it (the run must fail with that message).
MORE = [
    dict(folder="qwen3", pre="qwen2"),
    dict(folder="mistral", pre="-"),
    dict(folder="llama2", pre="-"),
    # Llama 3's regex (digits by three): llama.cpp's "dbrx" has that regex
    # ("olmo" is GPT-2's)
    dict(folder="olmo2", pre="dbrx"),
    # Gemma's and Phi-3's converters read SentencePiece's tokenizer.model,
    # which the Hub's folders have and these do not: as they are, the
    # converter refuses them (Gemma 3's takes the byte-level BPE path
    # instead, whose pre-tokenizer it finds by hashing; none matches a
    # SentencePiece vocabulary). refused: its message, checked; then the
    # folder is copied with a tokenizer.model of its tokenizer.json's
    # vocabulary (model_proto) and converted.
    dict(folder="gemma", pre="-", refused="File not found: .*tokenizer.model"),
    dict(folder="gemma2", pre="-", refused="File not found: .*tokenizer.model"),
    dict(folder="gemma3", pre="-", refused="byte-level BPE path"),
    dict(folder="phi3", pre="-", refused="Missing .*tokenizer.model"),
    dict(folder="phi3_longrope", pre="-", refused="Missing .*tokenizer.model"),
]


# ------------------------------------------------------------- the texts

# tokens.json's texts: every class a tokenizer test needs.
TEXTS = [
    "",
    " ",
    "    ",
    "\t",
    "\n",
    "\n\n\n",
    " \t\n \r\n\t\t \n",
    "   leading spaces",
    "trailing spaces   ",
    "Hello world",
    "hello World!",
    "HELLO, WORLD?!",
    " Hello  world. ",
    "Hello\nworld\n\nagain",
    "she's, don't, you're, we've, I'm, they'll, he'd",
    "SHE'S, DON'T, YOU'RE, WE'VE, I'M, THEY'LL, HE'D",
    "7",
    "42",
    "365",
    "2048",
    "31415",
    "271828",
    "1000000",
    "16777216",
    "123456789",
    "9876543210",
    "abc123def x86_64 3.14159 v2.0.10 1e-9 0x1F",
    "Crème brûlée à la façon d'Éléonore, naïve señor",
    "Съешь же ещё этих мягких булок",
    "Γειά σου κόσμε, λέξεις",
    "東京タワーは333メートル。你好，世界！한국어",
    "مرحبا بالعالم — שלום עולם",
    "🙂 👍🏽 👩‍👩‍👧 🇯🇵 ❤️ 🦙🦙",
    "def f(x_1, y_2):\n    return {'a': [x_1 * y_2]}  # __init__",
    "!!! ??? ... ---=== ,,,;;; ''' \"\"\" ``` *** ###",
    "<|begin_of_text|>Hi<|eot_id|> <|endoftext|><|im_start|>user<|im_end|> <s>x</s>",
    "\u0301\u0308 e\u0301 a\u0323\u0302",
    "\x01\x02\x07\x08\x0b\x0c\x1b[31mred\x1b[0m\x7f",
    "   \n\n   space around newlines   \n  ",
    "The quick brown fox pays attention to the lazy dog, doesn't it?",
]

TOKENIZE_FLAGS = ["--stdin", "--ids", "--log-disable", "--no-escape"]


# ------------------------------------------------------------- helpers

def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, **kw)
    if r.returncode != 0:
        sys.exit("generate_gguf.py: %s failed:\n%s" % (" ".join(map(str, cmd[:3])),
                                                     r.stderr.decode(errors="replace")[-4000:]))
    return r.stdout


def write_json(path, obj):
    with open(path, "w", encoding="utf-8", newline="\n") as fp:
        json.dump(obj, fp, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
        fp.write("\n")


# ------------------------------------------------------------ checkpoints

def checkpoint(a, out, gd):
    """The folder's files (written) and the float64 weights by plain name."""
    v = a["v"]
    src = os.path.join(out, a["source"])
    with open(os.path.join(src, "config.json")) as fp:
        vocab_size = json.load(fp)["vocab_size"]
    tok = gd.make_tokenizer(v["tokenizer"])
    # the copied files are the ones make_tokenizer writes
    for name, content in tok["files"].items():
        with open(os.path.join(src, name), encoding="utf-8") as fp:
            have = fp.read()
        want = content if isinstance(content, str) else None
        if want is not None and have.rstrip("\n") != want.rstrip("\n"):
            sys.exit("generate_gguf.py: %s/%s is not generate_decoders.py's" % (a["source"], name))
    rng = np.random.default_rng(a["seed"])
    if v["family"] == "gpt2":
        plain = gd.gpt2_weights(v, vocab_size, rng)
    else:
        plain = gd.llama_weights(v, vocab_size, rng)
    for name in plain:
        if name.endswith(OUT_PROJ):
            plain[name] = plain[name] * RESIDUAL_GAIN
    tensors, w = gd.file_tensors(v, plain)
    cfg = gd.config_json(v, vocab_size, tok)
    d = os.path.join(out, a["folder"])
    os.makedirs(d, exist_ok=True)
    for stale in os.listdir(d):
        os.remove(os.path.join(d, stale))
    gd.write_json(os.path.join(d, "config.json"), cfg, indent=2, sort_keys=True)
    for name in sorted(os.listdir(src)):
        if name != "config.json" and not name.startswith("model"):
            shutil.copyfile(os.path.join(src, name), os.path.join(d, name))
    gd.write_weights(d, v, tensors)
    return w, tok, vocab_size


# ------------------------------------------------------------- GGUF files

def gguf_module(src):
    sys.path.insert(0, os.path.join(src, "gguf-py"))
    import gguf
    return gguf


def read_gguf(gguf, path):
    """name -> (type name, float64 array in numpy order [rows][cols]), and
    the metadata fields."""
    r = gguf.GGUFReader(path)
    out = {}
    for t in r.tensors:
        shape = tuple(int(x) for x in reversed(t.shape))
        a = gguf.quants.dequantize(t.data, t.tensor_type)
        out[t.name] = (t.tensor_type.name, np.asarray(a, dtype=np.float64).reshape(shape))
    return out, r


def unpermute(w, n_head):
    """The inverse of the converter's LlamaModel.permute: its rows, per
    head [2][d/2] (the two halves rotate_half pairs), were written [d/2][2]
    (interleaved pairs, as llama.cpp's normal RoPE reads them)."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_weights(a, tensors):
    """The dequantized GGUF tensors by the checkpoint's plain names, in its
    layout: llama q/k rows un-permuted, GPT-2's matrices back to Conv1D
    [in][out]."""
    v = a["v"]
    w = {}
    if v["family"] == "gpt2":
        w["wte.weight"] = tensors["token_embd.weight"][1]
        w["wpe.weight"] = tensors["position_embd.weight"][1]
        w["ln_f.weight"] = tensors["output_norm.weight"][1]
        w["ln_f.bias"] = tensors["output_norm.bias"][1]
        names = {"attn_norm": ("ln_1", False), "attn_qkv": ("attn.c_attn", True),
                 "attn_output": ("attn.c_proj", True), "ffn_norm": ("ln_2", False),
                 "ffn_up": ("mlp.c_fc", True), "ffn_down": ("mlp.c_proj", True)}
        for l in range(v["layers"]):
            for g, (h, conv1d) in names.items():
                wt = tensors["blk.%d.%s.weight" % (l, g)][1]
                w["h.%d.%s.weight" % (l, h)] = wt.T if conv1d else wt
                w["h.%d.%s.bias" % (l, h)] = tensors["blk.%d.%s.bias" % (l, g)][1]
        return w
    heads, kv = v["heads"], v["kv_heads"]
    w["model.embed_tokens.weight"] = tensors["token_embd.weight"][1]
    w["model.norm.weight"] = tensors["output_norm.weight"][1]
    names = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj",
             "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    for l in range(v["layers"]):
        for g, h in names.items():
            wt = tensors["blk.%d.%s.weight" % (l, g)][1]
            if a["arch"] == "llama" and g == "attn_q":
                wt = unpermute(wt, heads)
            if a["arch"] == "llama" and g == "attn_k":
                wt = unpermute(wt, kv)
            w["model.layers.%d.%s.weight" % (l, h)] = wt
            if v["family"] == "qwen2" and g in ("attn_q", "attn_k", "attn_v"):
                w["model.layers.%d.%s.bias" % (l, h)] = tensors["blk.%d.%s.bias" % (l, g)][1]
    return w


# ------------------------------------------------ the other families (more/)

def read_safetensors(path):
    """name -> float64 array of one model.safetensors (F32, F16, BF16)."""
    import struct
    with open(path, "rb") as fp:
        n = struct.unpack("<Q", fp.read(8))[0]
        header = json.loads(fp.read(n))
        data = fp.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        raw = data[t["data_offsets"][0]:t["data_offsets"][1]]
        if t["dtype"] == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, dtype={"F32": "<f4", "F16": "<f2"}[t["dtype"]])
        out[name] = (t["dtype"], a.astype(np.float64).reshape(t["shape"]))
    return out


def field_value(f):
    """A metadata field's value; the tokenizer's arrays by their length."""
    v = f.contents()
    if isinstance(v, list) and len(v) > 64:
        return {"array of": len(v)}
    if isinstance(v, float):
        return float("%.9g" % v)
    return v


def tensor_origin(name, g, hf, cfg):
    """How the GGUF tensor g came from the checkpoint's tensors hf (float64
    values as stored): the first of the relations below that holds
    exactly."""
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    tries = []
    for h, (dt, w) in sorted(hf.items()):
        if w.shape == g.shape:
            tries += [(h, "equal", w)]
            if w.ndim == 1:
                tries += [(h, "plus 1 (in float32)", (w.astype(np.float32) + np.float32(1))
                           .astype(np.float64))]
                if dt == "BF16":
                    import torch
                    t = torch.tensor(w, dtype=torch.float64).to(torch.bfloat16) + 1
                    tries += [(h, "plus 1 (in bfloat16)", t.to(torch.float64).numpy())]
                if dt == "F16":
                    tries += [(h, "plus 1 (in float16)", (w.astype(np.float16) + np.float16(1))
                               .astype(np.float64))]
            if w.ndim == 2:
                for n in sorted({heads, kv}):
                    if w.shape[0] % (2 * n) == 0:
                        tries += [(h, "rows permuted (%d heads)" % n,
                                   w.reshape(n, 2, w.shape[0] // n // 2, -1).swapaxes(1, 2)
                                   .reshape(w.shape))]
        elif w.ndim == 2 and g.ndim == 2 and w.shape[1] == g.shape[1] and w.shape[0] > g.shape[0]:
            tries += [(h, "its first %d rows" % g.shape[0], w[:g.shape[0]])]
    for h, how, w in tries:
        if np.array_equal(g, w):
            return {"from": h, "as": how}
    return {"from": None}


def build_more(out, src, build, exe, gguf):
    """gguf/more/<folder>-F32.gguf and golden/gguf/more/<folder>.json for
    MORE; returns the report's lines."""
    gdir = os.path.join(out, "gguf", "more")
    golden = os.path.join(out, "golden", "gguf", "more")
    os.makedirs(gdir, exist_ok=True)
    os.makedirs(golden, exist_ok=True)
    for d in (gdir, golden):
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
    report = []
    scratch = tempfile.mkdtemp(prefix="attnd-gguf-more.")
    for m in MORE:
        folder = os.path.join(out, m["folder"])
        path = os.path.join(gdir, "%s-F32.gguf" % m["folder"])
        cmd = [sys.executable, os.path.abspath(__file__), "--convert", src, folder, "f32",
               path, m["pre"]]
        r = subprocess.run(cmd, capture_output=True)
        refusal = None
        if m.get("refused"):
            import re
            err = r.stderr.decode(errors="replace")
            if r.returncode == 0 or not re.search(m["refused"], err):
                sys.exit("generate_gguf.py: %s: the converter was expected to refuse (%s):\n%s"
                         % (m["folder"], m["refused"], err[-3000:]))
            if os.path.exists(path):
                os.remove(path)
            refusal = err.strip().splitlines()[-1].replace(out + os.sep, "")
            # the folder with a tokenizer.model, under its own name (the
            # converter names the model after it)
            copy = os.path.join(scratch, m["folder"])
            os.makedirs(copy)
            for name in sorted(os.listdir(folder)):
                shutil.copyfile(os.path.join(folder, name), os.path.join(copy, name))
            with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as fp:
                proto = model_proto(json.load(fp))
            with open(os.path.join(copy, "tokenizer.model"), "wb") as fp:
                fp.write(proto)
            cmd[4] = copy
            r = subprocess.run(cmd, capture_output=True)
        if r.returncode != 0:
            sys.exit("generate_gguf.py: converting %s failed:\n%s"
                     % (m["folder"], r.stderr.decode(errors="replace")[-4000:]))
        with open(os.path.join(out, "golden", m["folder"] + ".json"), encoding="utf-8") as fp:
            ref = json.load(fp)
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as fp:
            cfg = json.load(fp)
        hf = read_safetensors(os.path.join(folder, "model.safetensors"))
        reader = gguf.GGUFReader(path)
        meta = {}
        for key, f in reader.fields.items():
            if not key.startswith("GGUF."):
                meta[key] = field_value(f)
        arch = meta["general.architecture"]
        tensors = {}
        for t in reader.tensors:
            shape = tuple(int(x) for x in reversed(t.shape))
            g = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type),
                           dtype=np.float64).reshape(shape)
            info = {"type": t.tensor_type.name, "ne": [int(x) for x in t.shape]}
            info.update(tensor_origin(t.name, g, hf, cfg))
            if info["from"] is None and g.ndim == 1:
                info["values"] = [float("%.9g" % x) for x in g]
            tensors[t.name] = info
        cases, diffs = [], []
        for c in ref["cases"]:
            ids = json.loads(run([exe, "--tokenize", path],
                                 input=c["sentence"].encode("utf-8")).decode())
            got = json.loads(run([exe, path, "0"] + [str(i) for i in c["ids"]]).decode())
            cpp = np.array(got["logits"], dtype=np.float64)
            want = np.array(c["logits"], dtype=np.float64)
            if cpp.shape != want.shape:
                sys.exit("generate_gguf.py: %s: llama.cpp has %d logits, the golden %d"
                         % (m["folder"], cpp.size, want.size))
            d = float(np.max(np.abs(cpp - want)))
            diffs.append(d)
            cases.append({"sentence": c["sentence"], "ids": ids, "golden_ids": c["ids"],
                          "ids_equal": ids == c["ids"],
                          "llamacpp_logits": [float("%.9g" % x) for x in cpp],
                          "max_abs_diff": float("%.3g" % d),
                          "max_abs_logit": float("%.3g" % np.max(np.abs(want)))})
        prompt = ref["cases"][0]["ids"]
        n_new = len(ref["greedy"]["new"]) if ref["greedy"]["prompt"] == prompt else 6
        got = json.loads(run([exe, path, str(n_new)] + [str(i) for i in prompt]).decode())
        greedy = {"prompt": prompt, "new": got["greedy"]["new"],
                  "margins": [float("%.3g" % x) for x in got["greedy"]["margins"]]}
        same = ref["greedy"]["prompt"] == prompt and ref["greedy"]["new"] == greedy["new"]
        write_json(os.path.join(golden, m["folder"] + ".json"), {
            "file": "gguf/more/%s-F32.gguf" % m["folder"], "arch": arch,
            "checkpoint": m["folder"], "golden": "golden/%s.json" % m["folder"],
            "about": "llama.cpp on the F32 GGUF that convert_hf_to_gguf.py makes of the "
                     "checkpoint: per case its ids of the sentence (ids; ids_equal: whether "
                     "they are the golden's, the tokenizers library's), its last-position "
                     "logits for the golden's ids (KV cache F32) and their largest distance to "
                     "the golden's float64 logits; its greedy continuation of the first case's "
                     "golden ids; the file's metadata (the tokenizer's arrays by length) and "
                     "tensors (type, ne, and from which checkpoint tensor, how, exactly)",
            "tokenizer_model": None if refusal is None else
            "the folder has no tokenizer.model, and the converter stops without one (%s); "
            "converted from a copy with one written by generate_gguf.py: a SentencePiece "
            "ModelProto (BPE, byte fallback) of tokenizer.json's model vocabulary id for id, "
            "the piece made by merge r scored -r, the others 0" % refusal,
            "metadata": meta, "tensors": tensors, "cases": cases,
            "llamacpp_greedy": greedy, "greedy_equal": same})
        report.append("%-14s %s, %d tensors; ids equal %s; max |llama.cpp - golden| %s "
                      "(max |logit| %s); greedy %s %s"
                      % (m["folder"], arch, len(tensors), [c["ids_equal"] for c in cases],
                         ["%.3g" % d for d in diffs], [c["max_abs_logit"] for c in cases],
                         "equal" if same else "DIFFERS (golden %s)" % ref["greedy"]["new"],
                         greedy["new"]))
        if refusal is not None:
            report.append("%-14s (as the folder is: %s)" % ("", refusal))
    shutil.rmtree(scratch)
    return report


# Pre-tokenizers that only a vocabulary-only file exercises here: each the
# gpt2 test model's vocabulary (gguf/gpt2-F32.gguf) under another
# tokenizer.ggml.pre, in gguf/vocab/gpt2-<pre>.gguf, with llama.cpp's ids
# of TEXTS in golden/gguf/pre_variants.json.
PRE_VARIANTS = ["smollm"]


def pre_variants(out, build, gguf):
    gdir = os.path.join(out, "gguf")
    r = gguf.GGUFReader(os.path.join(gdir, "gpt2-F32.gguf"))
    files = {}
    for pre in PRE_VARIANTS:
        path = os.path.join(gdir, "vocab", "gpt2-%s.gguf" % pre)
        w = gguf.GGUFWriter(path, "gpt2")
        w.add_name("gpt2 vocabulary, pre-tokenizer %s" % pre)
        for name, f in r.fields.items():
            if not name.startswith("tokenizer.") or name == "tokenizer.chat_template":
                continue
            if name == "tokenizer.ggml.pre":
                w.add_tokenizer_pre(pre)
                continue
            if f.types[0] == gguf.GGUFValueType.ARRAY:
                w.add_array(name, f.contents())
            else:
                w.add_key_value(name, f.contents(), f.types[0])
        for key in ("gpt2.context_length", "gpt2.embedding_length", "gpt2.block_count"):
            if key in r.fields:
                w.add_key_value(key, r.fields[key].contents(), r.fields[key].types[0])
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        files["vocab/gpt2-%s.gguf" % pre] = [tokenize_cpp(build, path, t) for t in TEXTS]
    write_json(os.path.join(out, "golden", "gguf", "pre_variants.json"), {
        "tool": "llama-tokenize -m FILE " + " ".join(TOKENIZE_FLAGS) + " < TEXT",
        "about": "the gpt2 test vocabulary under other pre-tokenizers, tokenized by llama.cpp",
        "texts": TEXTS, "files": files})
    return sorted(files)


def tokenize_cpp(build, path, text):
    out = run([os.path.join(build, "bin", "llama-tokenize"), "-m", path] + TOKENIZE_FLAGS,
              input=text.encode("utf-8"))
    return json.loads(out.decode())


def main(argv):
    args, src, build = [], os.environ.get("LLAMA_CPP_DIR"), os.environ.get("LLAMA_CPP_BUILD")
    i = 1
    while i < len(argv):
        if argv[i] == "--llama-cpp" and i + 1 < len(argv):
            src, i = argv[i + 1], i + 2
        elif argv[i] == "--llama-build" and i + 1 < len(argv):
            build, i = argv[i + 1], i + 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) != 1:
        sys.exit(USAGE)
    if not src or not build:
        sys.exit("generate_gguf.py: needs llama.cpp's checkout and build "
                 "(--llama-cpp SRC --llama-build BUILD, or LLAMA_CPP_DIR and LLAMA_CPP_BUILD)\n"
                 + USAGE)
    need = [os.path.join(src, "convert_hf_to_gguf.py"), os.path.join(src, "gguf-py", "gguf"),
            os.path.join(src, "include", "llama.h"), os.path.join(build, "bin", "llama-quantize"),
            os.path.join(build, "bin", "llama-tokenize"), os.path.join(build, "bin", "llama-gguf-split"),
            os.path.join(build, "bin", "libllama.so")]
    for p in need:
        if not os.path.exists(p):
            sys.exit("generate_gguf.py: %s is missing (SRC: a llama.cpp checkout; BUILD: its "
                     "CMake build with the targets llama-quantize, llama-tokenize, llama-gguf-split "
                     "and llama)" % p)
    src, build = os.path.abspath(src), os.path.abspath(build)
    if os.environ.get("GGUF_PRE_ONLY"):
        print("  " + ", ".join(pre_variants(os.path.abspath(args[0]), build, gguf_module(src))))
        return
    if os.environ.get("GGUF_MORE_ONLY"):
        scratch = tempfile.mkdtemp(prefix="attnd-gguf.")
        exe = os.path.join(scratch, "gguf_logits")
        run(["cc", "-O2", "-o", exe, os.path.join(HERE, "gguf_logits.c"),
             "-I", os.path.join(src, "include"), "-I", os.path.join(src, "ggml", "include"),
             "-L", os.path.join(build, "bin"), "-lllama", "-lm",
             "-Wl,-rpath," + os.path.join(build, "bin")])
        for line in build_more(os.path.abspath(args[0]), src, build, exe, gguf_module(src)):
            print("  " + line)
        shutil.rmtree(scratch)
        return
    build_all(os.path.abspath(args[0]), src, build)


def build_all(out, src, build):
    import generate_decoders as gd
    from common import attention_flow, rollout, rounded
    gguf = gguf_module(src)
    gdir = os.path.join(out, "gguf")
    golden = os.path.join(out, "golden", "gguf")
    os.makedirs(os.path.join(gdir, "vocab"), exist_ok=True)
    os.makedirs(golden, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="attnd-gguf.")
    report = []

    # the checkpoints, the conversions, the quantizations
    ckpt = {}
    for a in ARCHS:
        ckpt[a["arch"]] = checkpoint(a, out, gd)
        for t in FLOATS:
            path = os.path.join(gdir, "%s-%s.gguf" % (a["arch"], t))
            run([sys.executable, os.path.abspath(__file__), "--convert", src,
                 os.path.join(out, a["folder"]), t.lower(), path, a["pre"]])
        for q in QUANTS:
            run([os.path.join(build, "bin", "llama-quantize"),
                 os.path.join(gdir, "%s-F32.gguf" % a["arch"]),
                 os.path.join(gdir, "%s-%s.gguf" % (a["arch"], q)), q, "2"])
    for name in VOCABS:
        shutil.copyfile(os.path.join(src, "models", name), os.path.join(gdir, "vocab", name))
    # the Hub's split form, by llama.cpp's own splitter: llama-Q4_K_M in
    # three parts of at most 8 tensors, qwen2-Q8_0 in two of at most 16
    # (the first holds the metadata too)
    split = os.path.join(gdir, "split")
    os.makedirs(split, exist_ok=True)
    for f in os.listdir(split):
        os.remove(os.path.join(split, f))
    for name, most in (("llama-Q4_K_M", 8), ("qwen2-Q8_0", 16)):
        run([os.path.join(build, "bin", "llama-gguf-split"), "--split", "--split-max-tensors",
             str(most), os.path.join(gdir, name + ".gguf"), os.path.join(split, name)])

    # llama.cpp's logits program
    exe = os.path.join(scratch, "gguf_logits")
    run(["cc", "-O2", "-o", exe, os.path.join(HERE, "gguf_logits.c"),
         "-I", os.path.join(src, "include"), "-I", os.path.join(src, "ggml", "include"),
         "-L", os.path.join(build, "bin"), "-lllama", "-lm",
         "-Wl,-rpath," + os.path.join(build, "bin")])

    # tokens.json (gguf_logits --tokenize must agree: it gives the goldens' ids)
    files = ["vocab/" + n for n in VOCABS] + ["%s-F32.gguf" % a["arch"] for a in ARCHS]
    ids = {}
    for f in files:
        path = os.path.join(gdir, f)
        ids[f] = [tokenize_cpp(build, path, t) for t in TEXTS]
        for t, want in zip(TEXTS, ids[f]):
            got = json.loads(run([exe, "--tokenize", path], input=t.encode()).decode())
            if got != want:
                sys.exit("generate_gguf.py: %s %r: gguf_logits --tokenize gives %s, "
                         "llama-tokenize %s" % (f, t, got, want))
    write_json(os.path.join(golden, "tokens.json"), {
        "tool": "llama-tokenize -m FILE " + " ".join(TOKENIZE_FLAGS) + " < TEXT",
        "about": "llama.cpp's ids for each text, by llama-tokenize with its defaults: BOS "
                 "as the file's tokenizer.ggml.add_bos_token says, special tokens typed in "
                 "the text parsed (a typed <|endoftext|> is one token where the vocabulary "
                 "has it); the text's bytes on standard input, no escapes processed",
        "texts": TEXTS, "files": ids})

    # goldens
    for a in ARCHS:
        v = a["v"]
        w_st, tok, vocab_size = ckpt[a["arch"]]
        folder = os.path.join(out, a["folder"])
        sents = gd.sentences(v)
        if a["arch"] == "qwen2":
            # llama.cpp has no NFC step for Qwen2 (the tokenizers library
            # has): the decomposed accent is written composed here
            sents = [unicodedata.normalize("NFC", s) for s in sents]
        paths = {"tokenizer.json": os.path.join(folder, "tokenizer.json")} \
            if os.path.exists(os.path.join(folder, "tokenizer.json")) else \
            {"vocab.json": os.path.join(folder, "vocab.json"),
             "merges.txt": os.path.join(folder, "merges.txt"), "special": ["<|endoftext|>"]}
        answer = gd.run_tokenizers([{"name": v["name"], "files": paths, "texts": sents}])
        encs = answer["tokenizers"][0]["encodings"]
        f32 = os.path.join(gdir, "%s-F32.gguf" % a["arch"])
        for enc in encs:
            gd.check_tokenization(tok, enc)
            cpp = json.loads(run([exe, "--tokenize", f32], input=enc["text"].encode()).decode())
            if cpp != enc["ids"]:
                sys.exit("generate_gguf.py: %s %r: the tokenizers library gives %s, llama.cpp %s"
                         % (a["arch"], enc["text"], enc["ids"], cpp))
        # (d) the F32 file holds the checkpoint's weights exactly
        tensors, _ = read_gguf(gguf, f32)
        w32 = hf_weights(a, tensors)
        assert sorted(w32) == sorted(w_st), (sorted(set(w32) ^ set(w_st)))
        for name in w_st:
            if not np.array_equal(w32[name], w_st[name]):
                sys.exit("generate_gguf.py: %s: %s differs from the checkpoint" % (f32, name))
        worst = 0.0
        for enc in encs:
            l1 = gd.forward(w_st, v, enc["ids"])[2]
            l2 = gd.forward(w32, v, enc["ids"])[2]
            worst = max(worst, float(np.max(np.abs(l1 - l2))))
        if not worst <= 1e-12:
            sys.exit("generate_gguf.py: %s: the F32 file's logits differ by %.3g" % (a["arch"], worst))
        report.append("%s: F32 GGUF = safetensors exactly; reference logits within %.1e"
                      % (a["arch"], worst))
        for t in FLOATS + QUANTS:
            name = "%s-%s" % (a["arch"], t)
            path = os.path.join(gdir, name + ".gguf")
            tensors, _ = read_gguf(gguf, path)
            w = hf_weights(a, tensors)
            cases, diffs = [], []
            for enc in encs:
                ids = enc["ids"]
                extra = {}
                attn, hidden, logits = gd.forward(w, v, ids, extra=extra)
                got = json.loads(run([exe, path, "0"] + [str(i) for i in ids]).decode())
                cpp = np.array(got["logits"], dtype=np.float64)
                assert cpp.shape == logits.shape, (cpp.shape, logits.shape)
                diffs.append(float(np.max(np.abs(cpp - logits))))
                cases.append({"sentence": enc["text"], "ids": ids,
                              "tokens": [gd.token_text(tok, x) for x in enc["tokens"]],
                              "added": [bool(m) for m in enc["special_tokens_mask"]],
                              "attentions": rounded(attn), "hidden_states": rounded(hidden),
                              "rollout": rounded(rollout(attn)), "logits": rounded(logits),
                              "flow": rounded(attention_flow(attn)),
                              "value_weighted": rounded(np.stack(extra["value_weighted"])),
                              "value_weighted_sum": rounded(np.stack(extra["value_weighted_sum"])),
                              "llamacpp_logits": [float("%.9g" % x) for x in cpp]})
            greedy_golden = None
            for case in cases:
                new, gaps = gd.greedy(w, v, case["ids"])
                if len(new) >= 4:
                    greedy_golden = {"prompt": case["ids"], "new": new,
                                     "margins": [float("%.3g" % g) for g in gaps]}
                    break
            if greedy_golden is None:
                sys.exit("generate_gguf.py: %s: every greedy continuation meets a near-tie" % name)
            got = json.loads(run([exe, path, str(len(greedy_golden["new"]))]
                                 + [str(i) for i in greedy_golden["prompt"]]).decode())
            cpp_greedy = {"prompt": greedy_golden["prompt"], "new": got["greedy"]["new"],
                          "margins": [float("%.3g" % g) for g in got["greedy"]["margins"]]}
            types_ = {}
            for tname, (tt, _) in tensors.items():
                types_[tname] = tt
            facts = gd.derived(v, vocab_size, len(tok["vocab"]), tok["bos"])
            g = {"variant": name, "description": "%s as %s: %s" % (a["folder"], t, v["about"]),
                 "dtype": t, "file": "gguf/%s.gguf" % name, "checkpoint": a["folder"],
                 "tensor_types": types_, "layers": v["layers"], "heads": facts["heads"],
                 "hidden": v["hidden"], "config": facts, "cases": cases,
                 "greedy": greedy_golden, "llamacpp_greedy": cpp_greedy}
            write_json(os.path.join(golden, name + ".json"), g)
            agree = cpp_greedy["new"] == greedy_golden["new"]
            counts = {}
            for tt in types_.values():
                counts[tt] = counts.get(tt, 0) + 1
            report.append("%-14s max |llama.cpp - float64| of the last logits %.3g (max |logit| "
                          "%.3g); greedy %s %s; tensors %s"
                          % (name, max(diffs), max(float(np.max(np.abs(np.array(c["logits"]))))
                                                    for c in cases),
                             "agrees" if agree else "DIFFERS: ref %s cpp %s"
                             % (greedy_golden["new"], cpp_greedy["new"]),
                             greedy_golden["margins"], dict(sorted(counts.items()))))
    report += build_more(out, src, build, exe, gguf)
    shutil.rmtree(scratch)
    print("generate_gguf.py:")
    for line in report:
        print("  " + line)


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--convert":
        convert(*sys.argv[2:7])
    else:
        main(sys.argv)
