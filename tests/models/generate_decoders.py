#!/usr/bin/env python3
"""Write small random decoder checkpoints (GPT-2, LLaMA, Mistral, Qwen2,
Qwen3) in the layout the Hugging Face Hub serves, and the goldens the C
tests replay.

    /usr/bin/python3 tests/models/generate_decoders.py tests/models   (make models-golden)
    /usr/bin/python3 tests/models/generate_decoders.py --llama-1b DIR --dtype bf16|f32

For each variant below, DIR/<variant>/ gets config.json, the weights
(model.safetensors, or two shards and model.safetensors.index.json), the
tokenizer (tokenizer.json, or GPT-2's vocab.json and merges.txt) and
tokenizer_config.json; DIR/golden/<variant>.json gets what a loader must
derive from the folder (heads, kv heads, head_dim, the RoPE frequencies,
the window, tied embeddings) and, for a few sentences, the token ids, the
tokens' text, every layer's attention weights [layers][heads][N][N] (one
matrix per query head), the hidden states [layers + 1][N][hidden] (the
embedding output first, the last one after the final norm), the rollout
[N][N] and the logits of the last position [vocab_size].

Token ids come from the Hugging Face tokenizers library itself (its Node
binding, tests/models/tokenize/, run through node): every tokenizer file
written here is loaded by it, its vocabulary read back and compared with
what was meant, and the sentences encoded by it, post-processor included.

The network reference is float64 NumPy written from transformers'
modeling_gpt2.py and modeling_llama.py / modeling_mistral.py /
modeling_qwen2.py / modeling_qwen3.py term by term, with the weights as the
file stores them (F16 and BF16 widened exactly). Before anything is written
it is cross-checked against PyTorch in float64: GPT-2's Conv1D through
torch.addmm, its attention through nn.MultiheadAttention with a causal
mask, LayerNorm through F.layer_norm, gelu_new through F.gelu(tanh); the
LLaMA family's RMSNorm, rotate_half RoPE, grouped KV heads through
repeat_interleave, a boolean causal (and window) mask and softmax in torch
ops, SwiGLU through F.silu, the logits through F.linear. Any disagreement
beyond 1e-9 aborts without writing a file. The script then checks that the
conventions a loader can get wrong matter: the goldens computed with
interleaved RoPE pairs, a window one key longer or shorter, the last hidden
state without the final norm (and a few more, printed) must each differ
from the true ones by more than 1e-3.

Output is deterministic: the same script gives byte-identical files.
"""

import collections
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unicodedata

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
from common import (TOL, CrossCheckFailed, attention_flow, bf16_bits_numpy, compare, gelu, gelu_new,  # noqa: E402
                    layer_norm, rollout, rounded, safetensors_header, softmax, stored,
                    write_safetensors)

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # pragma: no cover
    torch = None  # only --llama-1b works without it

TOKENIZE = os.path.join(HERE, "tokenize", "tokenize.mjs")
MARGIN = 1e-3  # a wrong convention must move the goldens by more than this


# ------------------------------------------------------ byte-level alphabet

def byte_chars():
    """GPT-2's bytes_to_unicode: the 188 printable bytes ('!'..'~',
    0xA1..0xAC, 0xAE..0xFF) stand for themselves, the other 68 map in byte
    order to U+0100, U+0101, ... Returns the list of (byte, char) in the
    order GPT-2's vocabulary numbers them: the printable ones first."""
    keep = (list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100)))
    others = [b for b in range(256) if b not in keep]
    return [(b, chr(b)) for b in keep] + [(b, chr(256 + i)) for i, b in enumerate(others)]


BYTE_CHAR = dict(byte_chars())
CHAR_BYTE = {c: b for b, c in BYTE_CHAR.items()}


def to_byte_chars(text):
    return "".join(BYTE_CHAR[b] for b in text.encode("utf-8"))


def readable(data):
    """Bytes as text, each byte that does not complete a UTF-8 character
    where it stands written <0xNN>."""
    out, i = [], 0
    while i < len(data):
        lead = data[i]
        size = 1 if lead < 0x80 else 2 if 0xC2 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 \
            else 4 if 0xF0 <= lead < 0xF5 else 0
        try:
            if size == 0:
                raise UnicodeDecodeError("utf-8", data, i, i + 1, "lead")
            out.append(data[i:i + size].decode("utf-8"))
            i += size
        except UnicodeDecodeError:
            out.append("<0x%02X>" % lead)
            i += 1
    return "".join(out)


# -------------------------------------------------------- tiny BPE training

CORPUS = """
The quick brown fox pays attention to the lazy dog, doesn't it? The dog sat on the mat.
A lazy fox pays the dog; the quick fox doesn't. Lazy days, lazy foxes, quick pays.
Hello world! The cat sat on the mat because it was hungry. The cat and the dog play.
The model looks at every token in the sentence, and each head looks back at the words before it.
Attention heads in the last layer draw on the first token. It wasn't the cat, it was the dog.
The quick cat jumps over the brown dog. Hello there, world. The world is quick and brown.
A cafe in the city costs more than the one on the hill. The costs were 1234 and 123 yen.
Every layer of the model reads the sentence again. The heads attend to the words they need.
""".split("\n")


def train_merges(words, count):
    """The `count` merges a BPE trainer learns from `words` (symbol tuple ->
    frequency): at each step the most frequent adjacent pair, ties broken by
    the pair's text, until no pair occurs twice."""
    words = dict(words)
    merges = []
    for _ in range(count):
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        (a, b), n = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        if n < 2:
            break
        merges.append((a, b))
        merged = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + c
        words = merged
    return merges


# A simplified pre-tokenization for training only (the library's own
# regexes tokenize the goldens): contractions, a letter run or a digit run
# with one leading space, other symbols, spaces.
TRAIN_SPLIT = re.compile(r"'(?:s|t|re|ve|m|ll|d)| ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+|\s+")


def byte_level_bpe(merge_count, extra_text=()):
    """A byte-level vocabulary (token -> id: the 256 byte characters in
    GPT-2's order, then each merge's result) and its merges."""
    words = collections.Counter()
    for line in list(CORPUS) + list(extra_text):
        for piece in TRAIN_SPLIT.findall(line):
            words[tuple(to_byte_chars(piece))] += 1
    merges = train_merges(words, merge_count)
    vocab = {c: i for i, (_, c) in enumerate(byte_chars())}
    for a, b in merges:
        assert a + b not in vocab, (a, b)
        vocab[a + b] = len(vocab)
    return vocab, merges


def sentencepiece_bpe(merge_count, corpus_filter):
    """A SentencePiece-style vocabulary as Llama-2's and Mistral's
    tokenizer.json hold it: <unk> <s> </s>, the 256 byte-fallback tokens
    <0x00>..<0xFF>, the merged pieces in merge order, then the single
    characters. Words start with "▁" (the normalizer's Prepend and
    Replace); characters outside `corpus_filter` get no piece and fall
    back to bytes."""
    words = collections.Counter()
    for line in CORPUS:
        for w in line.split(" "):
            w = "".join(ch for ch in w if corpus_filter(ch))
            if w:
                words[tuple("▁" + w)] += 1
    merges = train_merges(words, merge_count)
    alphabet = sorted({ch for w in words for ch in w})
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for a, b in merges:
        vocab[a + b] = len(vocab)
    for ch in alphabet:
        vocab.setdefault(ch, len(vocab))
    return vocab, merges


# ------------------------------------------------------- tokenizer files

def added_token(tid, content, special=True, normalized=False):
    return {"id": tid, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": normalized, "special": special}


def template(bos):
    """TemplateProcessing with `bos` before each sequence, as Llama's files
    write it."""
    name, tid = bos
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": name, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": name, "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": name, "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {name: {"id": name, "ids": [tid], "tokens": [name]}}}


def bpe_model(vocab, merges, pairs, **fields):
    model = {"type": "BPE", "dropout": None, "unk_token": None,
             "continuing_subword_prefix": None, "end_of_word_suffix": None,
             "fuse_unk": False, "byte_fallback": False, "ignore_merges": False}
    model.update(fields)
    model["vocab"] = vocab
    model["merges"] = [[a, b] for a, b in merges] if pairs else ["%s %s" % (a, b) for a, b in merges]
    return model


def tokenizer_json(added, normalizer, pre_tokenizer, post_processor, decoder, model):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": normalizer, "pre_tokenizer": pre_tokenizer,
            "post_processor": post_processor, "decoder": decoder, "model": model}


def split_regex(regex):
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}


def byte_level(add_prefix_space, trim_offsets, use_regex):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space,
            "trim_offsets": trim_offsets, "use_regex": use_regex}


LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                   "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>",
                   "<|reserved_special_token_2|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|eom_id|>", "<|eot_id|>", "<|python_tag|>", "<|reserved_special_token_3|>"]
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Qwen3's <think> and </think> are added tokens that are not special
QWEN3_NOT_SPECIAL = ("<think>", "</think>")
QWEN3_ADDED = QWEN_SPECIALS + ["<|object_ref_start|>", "<|object_ref_end|>"] + list(QWEN3_NOT_SPECIAL)


def decoder_sp():
    return {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}


def normalizer_sp():
    return {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}



# The chat templates the test models carry (tests/chat/templates/, the
# real ones): what a chat request on them renders.
CHAT_TEMPLATES = {"llama3": "llama-3.2-3b-instruct.jinja",
                  "qwen3": "qwen3-0.6b.jinja",
                  "mistral": "mistral-7b-instruct-v0.2.jinja"}


def chat_template(kind):
    name = CHAT_TEMPLATES.get(kind)
    if name is None:
        return None
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "chat",
                        "templates", name)
    with open(path, encoding="utf-8") as fp:
        return fp.read()

def added_decoder(added):
    """tokenizer_config.json's added_tokens_decoder: id -> the token."""
    return {str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                             "single_word", "special")} for t in added}


def make_tokenizer(kind):
    """One tokenizer: {"kind", "files": name -> text, "vocab": token -> id
    (added tokens included), "specials": the added tokens' contents (special
    or not: the library finds both in the raw text first),
    "bos": id or None, "byte_level": bool, "normalize": text -> text}."""
    if kind in ("gpt2_files", "gpt2_json"):
        vocab, merges = byte_level_bpe(120)
        eot = len(vocab)
        vocab["<|endoftext|>"] = eot
        files = {}
        if kind == "gpt2_files":
            # vocab.json with \u escapes, merges.txt with its version line
            files["vocab.json"] = json.dumps(vocab, ensure_ascii=True, separators=(", ", ": "))
            files["merges.txt"] = "#version: 0.2\n" + "".join("%s %s\n" % m for m in merges)
            files["tokenizer_config.json"] = {"model_max_length": 64}
        else:
            # the older layout of GPT-2's own tokenizer.json: one line, no
            # model "type", no use_regex
            tok = tokenizer_json(
                [added_token(eot, "<|endoftext|>", normalized=True)], None,
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True},
                {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False},
                {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True},
                {"dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                 "end_of_word_suffix": "", "fuse_unk": False, "vocab": vocab,
                 "merges": ["%s %s" % m for m in merges]})
            files["tokenizer.json"] = json.dumps(tok, ensure_ascii=False, separators=(",", ":"))
            files["tokenizer_config.json"] = {
                "add_bos_token": False, "add_prefix_space": False,
                "added_tokens_decoder": added_decoder(tok["added_tokens"]),
                "bos_token": "<|endoftext|>", "clean_up_tokenization_spaces": True,
                "eos_token": "<|endoftext|>", "errors": "replace", "model_max_length": 48,
                "pad_token": None, "tokenizer_class": "GPT2Tokenizer",
                "unk_token": "<|endoftext|>"}
        return dict(kind=kind, files=files, vocab=vocab, specials={"<|endoftext|>"}, bos=None,
                    byte_level=True, normalize=lambda s: s)

    if kind == "llama3":
        vocab, merges = byte_level_bpe(140)
        # A token no merge makes: with ignore_merges a pre-token equal to it
        # is one token, as " Arthropoda" is in Llama 3.
        assert "Ġattention" not in vocab
        vocab["Ġattention"] = len(vocab)
        base = len(vocab)
        added = [added_token(base + i, t) for i, t in enumerate(LLAMA3_SPECIALS)]
        tok = tokenizer_json(
            added, None,
            {"type": "Sequence", "pretokenizers": [split_regex(LLAMA3_REGEX),
                                                   byte_level(False, True, False)]},
            {"type": "Sequence", "processors": [byte_level(True, False, True),
                                                template(("<|begin_of_text|>", base))]},
            byte_level(True, True, True),
            bpe_model(vocab, merges, False, ignore_merges=True))
        full = dict(vocab, **{t["content"]: t["id"] for t in added})
        cfg = {"added_tokens_decoder": added_decoder(added), "bos_token": "<|begin_of_text|>",
               "clean_up_tokenization_spaces": True, "eos_token": "<|end_of_text|>",
               "model_input_names": ["input_ids", "attention_mask"],
               "model_max_length": 131072, "tokenizer_class": "PreTrainedTokenizerFast",
               "chat_template": chat_template(kind)}
        return dict(kind=kind, files={"tokenizer.json": json.dumps(tok, ensure_ascii=False, indent=2),
                                      "tokenizer_config.json": cfg},
                    vocab=full, specials=set(LLAMA3_SPECIALS), bos=base, byte_level=True,
                    normalize=lambda s: s)

    if kind in ("qwen2", "qwen3"):
        vocab, merges = byte_level_bpe(130, extra_text=["Café au lait, café crème."])
        base = len(vocab)
        names = QWEN_SPECIALS if kind == "qwen2" else QWEN3_ADDED
        added = [added_token(base + i, t, special=t not in QWEN3_NOT_SPECIAL)
                 for i, t in enumerate(names)]
        no_prefix = byte_level(False, False, False)
        tok = tokenizer_json(
            added, {"type": "NFC"},
            {"type": "Sequence", "pretokenizers": [split_regex(QWEN2_REGEX), no_prefix]},
            no_prefix, no_prefix,
            bpe_model(vocab, merges, kind == "qwen3", continuing_subword_prefix="",
                      end_of_word_suffix=""))
        full = dict(vocab, **{t["content"]: t["id"] for t in added})
        cfg = {"add_prefix_space": False, "added_tokens_decoder": added_decoder(added),
               "additional_special_tokens": ["<|im_start|>", "<|im_end|>"], "bos_token": None,
               "clean_up_tokenization_spaces": False,
               "eos_token": "<|endoftext|>" if kind == "qwen2" else "<|im_end|>",
               "errors": "replace", "model_max_length": 32768, "pad_token": "<|endoftext|>",
               "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer", "unk_token": None}
        if chat_template(kind):
            cfg["chat_template"] = chat_template(kind)
        return dict(kind=kind, files={"tokenizer.json": json.dumps(tok, ensure_ascii=False, indent=2),
                                      "tokenizer_config.json": cfg},
                    vocab=full, specials=set(names), bos=None, byte_level=True,
                    normalize=lambda s: unicodedata.normalize("NFC", s))

    if kind in ("llama2", "mistral"):
        if kind == "llama2":
            vocab, merges = sentencepiece_bpe(90, lambda ch: ch.isascii() and ch.isalnum())
        else:
            vocab, merges = sentencepiece_bpe(110, lambda ch: ch.isascii() and ch not in "!?")
        added = [added_token(0, "<unk>"), added_token(1, "<s>"), added_token(2, "</s>")]
        tok = tokenizer_json(added, normalizer_sp(), None, template(("<s>", 1)), decoder_sp(),
                             bpe_model(vocab, merges, kind == "mistral", unk_token="<unk>",
                                       fuse_unk=True, byte_fallback=True))
        cfg = {"add_bos_token": True, "add_eos_token": False,
               "added_tokens_decoder": added_decoder(added), "bos_token": "<s>",
               "clean_up_tokenization_spaces": False, "eos_token": "</s>",
               "legacy": kind == "mistral", "model_max_length": 1000000000000000019884624838656,
               "pad_token": None, "sp_model_kwargs": {}, "tokenizer_class": "LlamaTokenizer",
               "unk_token": "<unk>", "use_default_system_prompt": False}
        if chat_template(kind):
            cfg["chat_template"] = chat_template(kind)
        return dict(kind=kind, files={"tokenizer.json": json.dumps(tok, ensure_ascii=False, indent=2),
                                      "tokenizer_config.json": cfg},
                    vocab=vocab, specials={"<unk>", "<s>", "</s>"}, bos=1, byte_level=False,
                    normalize=lambda s: s)
    raise ValueError(kind)


def run_tokenizers(jobs):
    """The library's answer for jobs [{"name", "files", "texts"}]."""
    request = json.dumps({"tokenizers": jobs}).encode()
    try:
        out = subprocess.run(["node", TOKENIZE], input=request, capture_output=True, check=True)
    except FileNotFoundError:
        sys.exit("generate_decoders.py: node is needed for the token ids (apt-get install nodejs npm)")
    except subprocess.CalledProcessError as e:
        sys.exit("generate_decoders.py: the tokenizers library refused a file:\n%s"
                 % e.stderr.decode(errors="replace"))
    return json.loads(out.stdout)


def token_text(tok, token):
    """A token's readable text: an added token as it is; a byte-level
    token's bytes; a SentencePiece piece with "▁" as a space and <0xNN> as
    its byte; bytes that do not complete a character as <0xNN>."""
    if token in tok["specials"]:
        return token
    if tok["byte_level"]:
        return readable(bytes(CHAR_BYTE[c] for c in token))
    m = re.fullmatch(r"<0x([0-9A-F]{2})>", token)
    if m:
        return readable(bytes([int(m.group(1), 16)]))
    return token.replace("▁", " ")


def check_tokenization(tok, enc):
    """What the ids must satisfy whatever the merges did: the tokens cover
    the text (normalized) byte for byte outside the added tokens, and the
    post-processor added exactly the BOS where there is one."""
    ids, tokens, mask = enc["ids"], enc["tokens"], enc["special_tokens_mask"]
    inv = {i: t for t, i in tok["vocab"].items()}
    assert [inv[i] for i in ids] == tokens, "ids and tokens disagree with the vocabulary"
    if tok["bos"] is None:
        assert ids == enc["ids_without_special"] and not any(mask)
    else:
        assert ids[0] == tok["bos"] and mask[0] == 1 and not any(mask[1:])
        assert ids[1:] == enc["ids_without_special"]
    text = tok["normalize"](enc["text"])
    pieces = re.split("(%s)" % "|".join(re.escape(s) for s in sorted(tok["specials"], key=len,
                                                                     reverse=True)), text)
    plain = "".join(p for p in pieces if p not in tok["specials"])
    body = [t for t, m in zip(tokens, mask) if not m and t not in tok["specials"]]
    if tok["byte_level"]:
        got = bytes(CHAR_BYTE[c] for t in body for c in t)
        assert got == plain.encode("utf-8"), (got, plain)
        if enc["decoded_skip_special"] is not None:
            # the library's own decoder gives the text back, less the
            # special tokens it skips
            kept = "".join(p for p in pieces if p not in tok["specials"] or p in QWEN3_NOT_SPECIAL)
            assert enc["decoded_skip_special"] == kept, (enc["decoded_skip_special"], kept)
    else:
        got = b"".join(bytes([int(t[3:5], 16)]) if re.fullmatch(r"<0x..>", t)
                       else t.encode("utf-8") for t in body)
        got = got.decode("utf-8").replace("▁", " ")
        assert got.replace(" ", "") == plain.replace(" ", ""), (got, plain)


# ------------------------------------------------------------- variants

SENTENCES = {
    "plain": "The quick brown fox pays attention to the lazy dog, doesn't it?",
    "unicode": "Cafe\u0301 in 東京 costs 1234!\n",
}
SPECIAL_SENTENCES = {
    "gpt2": "Hello world!<|endoftext|>The cat sat on the mat.",
    "llama3": "<|begin_of_text|>Hello world!<|eot_id|> The cat<|endoftext|> sat.",
    "qwen2": "Hello world!<|endoftext|><|im_start|>The cat sat on the mat.",
    "qwen3": "<|im_start|>Hello world!<think>The cat</think> sat on the mat.",
    "sp": "Hello world!</s> The cat sat on the <unk> mat.",
}

VARIANTS = [
    dict(name="gpt2", family="gpt2", dtype="F32", prefix="", buffers=False, lm_head=False,
         layers=2, hidden=32, heads=4, positions=64, tokenizer="gpt2_files", special="gpt2",
         version="4.40.0",
         about="F32, GPT2Model names without a prefix, tied (no lm_head.weight), "
               "vocab.json + merges.txt and no tokenizer.json"),
    dict(name="gpt2_prefixed", family="gpt2", dtype="F16", prefix="transformer.", buffers=True,
         lm_head=True, layers=2, hidden=48, heads=4, positions=48, tokenizer="gpt2_json",
         special="gpt2", version="4.26.1",
         about="F16, transformer. prefix, the old h.N.attn.bias (BOOL tril) and "
               "h.N.attn.masked_bias (scalar) buffers, an lm_head.weight copy of wte, "
               "tokenizer.json in GPT-2's older one-line layout"),
    dict(name="llama2", family="llama", dtype="BF16", layers=2, hidden=48, heads=4, kv_heads=None,
         inter=96, eps=1e-5, theta=None, scaling=None, tied=False, shards=1, inv_freq_buffer=False,
         tokenizer="llama2", special="sp", version="4.31.0.dev0",
         about="BF16, Llama-2-style config without rope_theta (10000) and without "
               "num_key_value_heads (= heads), untied, SentencePiece-style BPE with byte "
               "fallback and a <s> template"),
    dict(name="llama3", family="llama", dtype="F32", layers=2, hidden=48, heads=4, kv_heads=2,
         inter=64, eps=1e-5, theta=500000.0,
         scaling={"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                  "original_max_position_embeddings": 1024, "rope_type": "llama3"},
         tied=True, shards=2, inv_freq_buffer=True, tokenizer="llama3", special="llama3",
         version="4.43.0.dev0",
         about="F32 in two shards (layer 1 split across them), tied, 4 heads on 2 KV heads, "
               "rope_theta 500000 with llama3 rope_scaling (kept, blended and divided "
               "frequencies), the old rotary_emb.inv_freq buffers, byte-level BPE with "
               "ignore_merges and a <|begin_of_text|> template"),
    dict(name="mistral", family="mistral", dtype="F16", layers=2, hidden=48, heads=6, kv_heads=2,
         inter=96, eps=1e-5, theta=10000.0, window=5, tied=False, shards=1,
         tokenizer="mistral", special="sp", version="4.34.0.dev0",
         about="F16, untied, 6 heads on 2 KV heads, sliding_window 5 (shorter than every "
               "sentence), SentencePiece-style BPE with byte fallback, merges as pairs"),
    dict(name="qwen2", family="qwen2", dtype="BF16", layers=2, hidden=48, heads=6, kv_heads=3,
         inter=96, eps=1e-6, theta=1000000.0, window=None, config_window=4, tied=True, shards=1,
         tokenizer="qwen2", special="qwen2", version="4.40.1",
         about="BF16, q/k/v biases (none on o_proj), tied, vocab_size larger than the "
               "tokenizer (padding rows), sliding_window 4 with use_sliding_window false "
               "(no window), byte-level BPE after NFC, no BOS"),
    dict(name="qwen3", family="qwen3", dtype="F32", layers=2, hidden=32, heads=4, kv_heads=2,
         head_dim=16, inter=64, eps=1e-6, theta=1000000.0, window=None, tied=False, shards=1,
         tokenizer="qwen3", special="qwen3", version="4.51.0",
         about="F32, q_norm/k_norm per head before RoPE, head_dim 16 with hidden 32 and "
               "4 heads, attention_bias false, untied, Qwen2's vocabulary with merges as pairs"),
    # The heads of real models at a tiny width, for the page's model view;
    # cross-checked like the others, without goldens (the conventions are
    # held by the goldens above).
    dict(name="llama_16x32", family="llama", dtype="BF16", layers=16, hidden=32, heads=32,
         kv_heads=8, head_dim=4, inter=64, eps=1e-5, theta=500000.0,
         scaling={"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                  "original_max_position_embeddings": 8192, "rope_type": "llama3"},
         tied=True, shards=1, tokenizer="llama3", special="llama3", version="4.45.0.dev0",
         golden=False,
         about="BF16, Llama-3.2-1B's 16 layers of 32 heads on 8 KV heads at head_dim 4 "
               "(hidden 32), tied, Llama 3's tokenizer: the page's 512-tile model view"),
    dict(name="qwen2_24x14", family="qwen2", dtype="BF16", layers=24, hidden=56, heads=14,
         kv_heads=2, inter=64, eps=1e-6, theta=1000000.0, window=None, config_window=32768,
         tied=True, shards=1, tokenizer="qwen2", special="qwen2", version="4.43.1",
         golden=False,
         about="BF16, Qwen2.5-0.5B's 24 layers of 14 heads on 2 KV heads at head_dim 4 "
               "(hidden 56), q/k/v biases, tied, Qwen2's tokenizer: the page's 24 x 14 "
               "model view"),
    # 1,024 heads, an 8B decoder's count (32 layers of 32), for the page's
    # head measures: sorting, the scatter plot and the table at that size.
    dict(name="llama_32x32", family="llama", dtype="BF16", layers=32, hidden=32, heads=32,
         kv_heads=8, head_dim=4, inter=64, eps=1e-5, theta=500000.0,
         scaling={"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                  "original_max_position_embeddings": 8192, "rope_type": "llama3"},
         tied=True, shards=1, tokenizer="llama3", special="llama3", version="4.45.0.dev0",
         golden=False,
         about="BF16, Llama-3.1-8B's 32 layers of 32 heads on 8 KV heads at head_dim 4 "
               "(hidden 32), tied, Llama 3's tokenizer: the page's 1,024-head measures"),
]


def sentences(v):
    return [SENTENCES["plain"], SPECIAL_SENTENCES[v["special"]], SENTENCES["unicode"]]


# ---------------------------------------------------------------- weights

def gpt2_weights(v, vocab_size, rng):
    """GPT-2's parameters by GPT2Model's names (no prefix); Conv1D weights
    [in][out]."""
    H, P = v["hidden"], v["positions"]
    I = 4 * H  # n_inner null
    w = {"wte.weight": rng.normal(0, 1.0, (vocab_size, H)),
         "wpe.weight": rng.normal(0, 0.5, (P, H))}
    for l in range(v["layers"]):
        p = "h.%d." % l
        w[p + "ln_1.weight"] = 1 + rng.normal(0, 0.1, H)
        w[p + "ln_1.bias"] = rng.normal(0, 0.1, H)
        attn = rng.normal(0, 1.0 / math.sqrt(H), (H, 3 * H))
        attn[:, :2 * H] *= 1.6  # q and k: attention far from uniform
        w[p + "attn.c_attn.weight"] = attn
        w[p + "attn.c_attn.bias"] = rng.normal(0, 0.2, 3 * H)
        w[p + "attn.c_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(H), (H, H))
        w[p + "attn.c_proj.bias"] = rng.normal(0, 0.1, H)
        w[p + "ln_2.weight"] = 1 + rng.normal(0, 0.1, H)
        w[p + "ln_2.bias"] = rng.normal(0, 0.1, H)
        w[p + "mlp.c_fc.weight"] = rng.normal(0, 1.0 / math.sqrt(H), (H, I))
        w[p + "mlp.c_fc.bias"] = rng.normal(0, 0.1, I)
        w[p + "mlp.c_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(I), (I, H))
        w[p + "mlp.c_proj.bias"] = rng.normal(0, 0.1, H)
    w["ln_f.weight"] = 1 + rng.normal(0, 0.1, H)
    w["ln_f.bias"] = rng.normal(0, 0.1, H)
    return w


def llama_dims(v):
    heads = v["heads"]
    kv = v["kv_heads"] or heads
    d = v.get("head_dim") or v["hidden"] // heads
    return heads, kv, d


def llama_weights(v, vocab_size, rng):
    """The LLaMA family's parameters by the files' names (model. prefix);
    nn.Linear weights [out][in]."""
    H, I = v["hidden"], v["inter"]
    heads, kv, d = llama_dims(v)
    w = {"model.embed_tokens.weight": rng.normal(0, 1.0, (vocab_size, H))}
    for l in range(v["layers"]):
        p = "model.layers.%d." % l
        w[p + "input_layernorm.weight"] = 1 + rng.normal(0, 0.1, H)
        w[p + "self_attn.q_proj.weight"] = rng.normal(0, 1.6 / math.sqrt(H), (heads * d, H))
        w[p + "self_attn.k_proj.weight"] = rng.normal(0, 1.6 / math.sqrt(H), (kv * d, H))
        w[p + "self_attn.v_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(H), (kv * d, H))
        w[p + "self_attn.o_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(heads * d), (H, heads * d))
        if v["family"] == "qwen2":
            w[p + "self_attn.q_proj.bias"] = rng.normal(0, 0.5, heads * d)
            w[p + "self_attn.k_proj.bias"] = rng.normal(0, 0.5, kv * d)
            w[p + "self_attn.v_proj.bias"] = rng.normal(0, 0.1, kv * d)
        if v["family"] == "qwen3":
            w[p + "self_attn.q_norm.weight"] = 1 + rng.normal(0, 0.3, d)
            w[p + "self_attn.k_norm.weight"] = 1 + rng.normal(0, 0.3, d)
        w[p + "post_attention_layernorm.weight"] = 1 + rng.normal(0, 0.1, H)
        w[p + "mlp.gate_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(H), (I, H))
        w[p + "mlp.up_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(H), (I, H))
        w[p + "mlp.down_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(I), (H, I))
    w["model.norm.weight"] = 1 + rng.normal(0, 0.1, H)
    if not v["tied"]:
        w["lm_head.weight"] = rng.normal(0, 1.0 / math.sqrt(H), (vocab_size, H))
    return w


# ------------------------------------------------------------------ RoPE

def inv_freq(v, alt=()):
    """The rotary frequencies: 1 / theta^(2i/d) for i < d/2
    (_compute_default_rope_parameters), then for rope_type llama3 each one
    by its wavelength 2 pi / f (_compute_llama3_parameters): kept below
    original / high_freq_factor, divided by factor above original /
    low_freq_factor, and in between (1 - s) f / factor + s f with
    s = (original / wavelength - low) / (high - low)."""
    _, _, d = llama_dims(v)
    theta = v["theta"] if v["theta"] is not None else 10000.0
    f = np.array([1.0 / theta ** (2 * i / d) for i in range(d // 2)])
    sc = v.get("scaling")
    if sc is None or "no_llama3_scaling" in alt:
        return f
    factor, low, high = sc["factor"], sc["low_freq_factor"], sc["high_freq_factor"]
    old = sc["original_max_position_embeddings"]
    out = []
    for fi in f:
        wavelen = 2 * math.pi / fi
        if wavelen < old / high:
            out.append(fi)
        elif wavelen > old / low:
            out.append(fi / factor)
        else:
            s = (old / wavelen - low) / (high - low)
            out.append((1 - s) * fi / factor + s * fi)
    return np.array(out)


def llama3_regimes(v):
    """How many frequencies llama3 scaling keeps, blends and divides."""
    _, _, d = llama_dims(v)
    sc = v["scaling"]
    old = sc["original_max_position_embeddings"]
    kinds = collections.Counter()
    for i in range(d // 2):
        wavelen = 2 * math.pi * v["theta"] ** (2 * i / d)
        kinds["kept" if wavelen < old / sc["high_freq_factor"] else
              "divided" if wavelen > old / sc["low_freq_factor"] else "blended"] += 1
    return kinds


def rope(x, freqs, interleaved=False):
    """x: [n][heads][d] rotated by position p = 0..n-1: dimension i pairs
    with i + d/2 (rotate_half), or with its neighbour when interleaved."""
    n, _, d = x.shape
    out = np.empty_like(x)
    for p in range(n):
        for i in range(d // 2):
            a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + d // 2)
            c, s = math.cos(p * freqs[i]), math.sin(p * freqs[i])
            out[p, :, a] = x[p, :, a] * c - x[p, :, b] * s
            out[p, :, b] = x[p, :, b] * c + x[p, :, a] * s
    return out


# ------------------------------------------------------ float64 reference

def rms_norm(x, g, eps):
    """LlamaRMSNorm: weight * x / sqrt(mean(x^2) + eps) over the last axis."""
    return g * (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps))


def silu(x):
    return x / (1.0 + np.exp(-x))


def attend(q, k, v, kv_of, allowed):
    """q: [n][heads][d], k, v: [n][kv][d]; query head h reads KV head
    kv_of[h]; allowed[i][j]: query i may see key j. Weights outside it are
    exactly 0. Returns the weights [heads][n][n] and the context
    [n][heads * d]."""
    n, heads, d = q.shape
    probs = np.zeros((heads, n, n))
    ctx = np.zeros((n, heads, d))
    for h in range(heads):
        g = kv_of[h]
        for i in range(n):
            js = [j for j in range(n) if allowed[i][j]]
            scores = np.array([q[i, h] @ k[j, g] for j in js]) / math.sqrt(d)
            p = softmax(scores)
            probs[h, i, js] = p
            ctx[i, h] = sum(pj * v[j, g] for pj, j in zip(p, js))
    return probs, ctx.reshape(n, heads * d)


def value_weighted(probs, val, kv_of, out_of_head):
    """Kobayashi et al. (2020), "Attention is not only a weight": with
    f_h(x_j) = v_j (value bias in) times head h's rows of W_O (output bias
    out), the norm of alpha_ij f_h(x_j) for every head [heads][n][n], and
    of its sum over the heads [n][n]. val: [n][kv][d]; out_of_head(h):
    [d][hidden]. The sum is formed as vectors, not by the Gram matrices
    the C code uses."""
    heads = probs.shape[0]
    f = np.stack([val[:, kv_of[h]] @ out_of_head(h) for h in range(heads)])
    per_head = probs * np.linalg.norm(f, axis=2)[:, None, :]
    summed = np.linalg.norm(np.einsum("hij,hjd->ijd", probs, f), axis=2)
    return per_head, summed


def allowed_mask(n, window):
    """Causal, and with a window: query i sees key j iff i - window < j <= i
    (masking_utils' causal and sliding_window_overlay)."""
    return [[j <= i and (window is None or j > i - window) for j in range(n)] for i in range(n)]


def gpt2_forward(w, v, ids, alt=(), extra=None):
    """GPT2Model with output_attentions and output_hidden_states, then the
    tied LM head on the last position. Conv1D: y = x W + b with W [in][out];
    c_attn's output splits into q, k, v; heads are contiguous slices. With
    extra, a dict: its value_weighted and value_weighted_sum, every
    layer's."""
    n, H, heads = len(ids), v["hidden"], v["heads"]
    d = H // heads
    act = gelu if "gelu_erf" in alt else gelu_new
    eps = 1e-5
    x = w["wte.weight"][ids] + w["wpe.weight"][:n]
    hidden, attentions = [x], []
    allowed = allowed_mask(n, None)
    for l in range(v["layers"]):
        p = "h.%d." % l
        h = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, val = (qkv[:, i * H:(i + 1) * H].reshape(n, heads, d) for i in range(3))
        probs, ctx = attend(q, k, val, list(range(heads)), allowed)
        attentions.append(probs)
        proj = w[p + "attn.c_proj.weight"]
        if "conv1d_transposed" in alt:
            proj = proj.T
        if extra is not None:
            vw = value_weighted(probs, val, list(range(heads)),
                                lambda h: proj[h * d:(h + 1) * d, :])
            extra.setdefault("value_weighted", []).append(vw[0])
            extra.setdefault("value_weighted_sum", []).append(vw[1])
        x = x + ctx @ proj + w[p + "attn.c_proj.bias"]
        h = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        inner = act(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + inner @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        hidden.append(x)
    if "no_final_norm" not in alt:
        hidden[-1] = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], eps)
    logits = w["wte.weight"] @ hidden[-1][-1]
    return np.stack(attentions), np.stack(hidden), logits


def llama_forward(w, v, ids, alt=(), extra=None):
    """LlamaModel (and Mistral's, Qwen2's, Qwen3's) with output_attentions
    and output_hidden_states, then the LM head on the last position; extra
    as gpt2_forward's."""
    n, eps = len(ids), v["eps"]
    heads, kv, d = llama_dims(v)
    group = heads // kv
    kv_of = [h % kv if "gqa_modulo" in alt else h // group for h in range(heads)]
    window = v.get("window")
    if "window_plus_one" in alt:
        window += 1
    if "window_minus_one" in alt:
        window -= 1
    freqs = inv_freq(v, alt)
    x = w["model.embed_tokens.weight"][ids]
    hidden, attentions = [x], []
    for l in range(v["layers"]):
        p = "model.layers.%d.self_attn." % l
        lw = window
        if "qwen2_window_used" in alt and l >= v["layers"] - 1:
            lw = v["config_window"]
        h = rms_norm(x, w["model.layers.%d.input_layernorm.weight" % l], eps)
        q, k, val = (h @ w[p + m + "_proj.weight"].T for m in "qkv")
        if v["family"] == "qwen2" and "bias_after_rope" not in alt:
            q, k, val = (t + w[p + m + "_proj.bias"] for t, m in zip((q, k, val), "qkv"))
        q, k, val = q.reshape(n, heads, d), k.reshape(n, kv, d), val.reshape(n, kv, d)
        if v["family"] == "qwen3" and "qk_norm_after_rope" not in alt:
            q, k = rms_norm(q, w[p + "q_norm.weight"], eps), rms_norm(k, w[p + "k_norm.weight"], eps)
        q, k = rope(q, freqs, "interleaved_rope" in alt), rope(k, freqs, "interleaved_rope" in alt)
        if v["family"] == "qwen3" and "qk_norm_after_rope" in alt:
            q, k = rms_norm(q, w[p + "q_norm.weight"], eps), rms_norm(k, w[p + "k_norm.weight"], eps)
        if v["family"] == "qwen2" and "bias_after_rope" in alt:
            q = q + w[p + "q_proj.bias"].reshape(heads, d)
            k = k + w[p + "k_proj.bias"].reshape(kv, d)
            val = val + w[p + "v_proj.bias"].reshape(kv, d)
        probs, ctx = attend(q, k, val, kv_of, allowed_mask(n, lw))
        attentions.append(probs)
        if extra is not None:
            o = w[p + "o_proj.weight"]  # [hidden][heads * d]
            vw = value_weighted(probs, val, kv_of, lambda h: o[:, h * d:(h + 1) * d].T)
            extra.setdefault("value_weighted", []).append(vw[0])
            extra.setdefault("value_weighted_sum", []).append(vw[1])
        x = x + ctx @ w[p + "o_proj.weight"].T
        m = "model.layers.%d." % l
        h = rms_norm(x, w[m + "post_attention_layernorm.weight"], eps)
        gate = silu(h @ w[m + "mlp.gate_proj.weight"].T)
        x = x + (gate * (h @ w[m + "mlp.up_proj.weight"].T)) @ w[m + "mlp.down_proj.weight"].T
        hidden.append(x)
    if "no_final_norm" not in alt:
        hidden[-1] = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if v["tied"] else w["lm_head.weight"]
    logits = head @ hidden[-1][-1]
    return np.stack(attentions), np.stack(hidden), logits


def forward(w, v, ids, alt=(), extra=None):
    return (gpt2_forward if v["family"] == "gpt2" else llama_forward)(w, v, ids, alt, extra)


# Conventions a loader can get wrong; each must move the goldens.
def wrong_conventions(v):
    out = ["no_final_norm"]
    if v["family"] == "gpt2":
        out += ["conv1d_transposed", "gelu_erf"]
    else:
        out += ["interleaved_rope"]
        heads, kv, _ = llama_dims(v)
        if 1 < kv < heads:
            out.append("gqa_modulo")
    if v.get("scaling"):
        out.append("no_llama3_scaling")
    if v["family"] == "mistral":
        out += ["window_plus_one", "window_minus_one"]
    if v["family"] == "qwen2":
        out.append("bias_after_rope")
        if v["config_window"] < 64:  # a window the sentences outgrow, were it used
            out.append("qwen2_window_used")
    if v["family"] == "qwen3":
        out.append("qk_norm_after_rope")
    return out


# ------------------------------------------------------ PyTorch cross-check

def T(a):
    return torch.tensor(np.asarray(a, dtype=np.float64), dtype=torch.float64)


def torch_rollout_check(label, attentions, roll):
    """The rollout's transpose built from the first layer up on the other
    side: R^T = Ahat_1^T * ... * Ahat_L^T."""
    n = attentions.shape[-1]
    rt = torch.eye(n, dtype=torch.float64)
    for a in T(attentions):
        ahat = 0.5 * a.mean(0) + 0.5 * torch.eye(n, dtype=torch.float64)
        ahat = ahat / ahat.sum(-1, keepdim=True)
        rt = rt @ ahat.T
    return compare(label + ": rollout", roll, rt.T)


def torch_gpt2(w, v, ids, attentions, hidden, logits, label):
    """GPT-2 in PyTorch's own modules: Conv1D as torch.addmm, the attention
    as nn.MultiheadAttention (in_proj = c_attn^T, out_proj = c_proj^T) with
    a boolean causal mask, F.layer_norm, F.gelu(tanh)."""
    n, H, heads = len(ids), v["hidden"], v["heads"]
    errs = []
    with torch.no_grad():
        x = F.embedding(torch.tensor(ids), T(w["wte.weight"])) + T(w["wpe.weight"])[:n]
        errs.append(compare(label + ": embeddings", hidden[0], x))
        mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        for l in range(v["layers"]):
            p = "h.%d." % l
            h = F.layer_norm(x, (H,), T(w[p + "ln_1.weight"]), T(w[p + "ln_1.bias"]), 1e-5)
            mha = nn.MultiheadAttention(H, heads, bias=True, batch_first=True, dtype=torch.float64)
            mha.in_proj_weight.copy_(T(w[p + "attn.c_attn.weight"]).T)
            mha.in_proj_bias.copy_(T(w[p + "attn.c_attn.bias"]))
            mha.out_proj.weight.copy_(T(w[p + "attn.c_proj.weight"]).T)
            mha.out_proj.bias.copy_(T(w[p + "attn.c_proj.bias"]))
            a, weights = mha(h[None], h[None], h[None], attn_mask=mask, need_weights=True,
                             average_attn_weights=False)
            errs.append(compare("%s: layer %d attention" % (label, l), attentions[l], weights[0]))
            x = x + a[0]
            h = F.layer_norm(x, (H,), T(w[p + "ln_2.weight"]), T(w[p + "ln_2.bias"]), 1e-5)
            inner = F.gelu(torch.addmm(T(w[p + "mlp.c_fc.bias"]), h, T(w[p + "mlp.c_fc.weight"])),
                           approximate="tanh")
            x = x + torch.addmm(T(w[p + "mlp.c_proj.bias"]), inner, T(w[p + "mlp.c_proj.weight"]))
            if l + 1 < v["layers"]:
                errs.append(compare("%s: layer %d hidden states" % (label, l), hidden[l + 1], x))
        x = F.layer_norm(x, (H,), T(w["ln_f.weight"]), T(w["ln_f.bias"]), 1e-5)
        errs.append(compare(label + ": last hidden states (ln_f)", hidden[-1], x))
        errs.append(compare(label + ": logits", logits, F.linear(x[-1], T(w["wte.weight"]))))
    return max(errs)


def torch_rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def torch_rms(x, g, eps):
    return g * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def torch_inv_freq(v):
    """The frequencies in torch, vectorised as modeling_rope_utils computes
    them: torch.where on the wavelengths for llama3."""
    _, _, d = llama_dims(v)
    theta = v["theta"] if v["theta"] is not None else 10000.0
    f = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    sc = v.get("scaling")
    if sc is None:
        return f
    old = sc["original_max_position_embeddings"]
    low, high, factor = sc["low_freq_factor"], sc["high_freq_factor"], sc["factor"]
    wavelen = 2 * math.pi / f
    scaled = torch.where(wavelen > old / low, f / factor, f)
    smooth = (old / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / high) & ~(wavelen > old / low)
    return torch.where(medium, blended, scaled)


def torch_llama(w, v, ids, attentions, hidden, logits, label):
    """The LLaMA family in torch ops as transformers writes them: RMSNorm,
    q * cos + rotate_half(q) * sin with cos, sin of cat(freqs, freqs), k
    and v repeated with repeat_interleave, a boolean mask (causal and the
    window), softmax, F.silu(gate) * up."""
    n, eps = len(ids), v["eps"]
    heads, kv, d = llama_dims(v)
    errs = []
    with torch.no_grad():
        tf = torch_inv_freq(v)
        errs.append(compare(label + ": inv_freq", inv_freq(v), tf))
        freqs = torch.outer(torch.arange(n, dtype=torch.float64), tf)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
        i = torch.arange(n)[:, None]
        j = torch.arange(n)[None, :]
        mask = j <= i
        if v.get("window") is not None:
            mask = mask & (j > i - v["window"])
        x = F.embedding(torch.tensor(ids), T(w["model.embed_tokens.weight"]))
        errs.append(compare(label + ": embeddings", hidden[0], x))
        for l in range(v["layers"]):
            p = "model.layers.%d." % l
            h = torch_rms(x, T(w[p + "input_layernorm.weight"]), eps)

            def proj(m):
                b = w.get(p + "self_attn.%s_proj.bias" % m)
                return F.linear(h, T(w[p + "self_attn.%s_proj.weight" % m]),
                                None if b is None else T(b))
            q, k, val = proj("q").view(n, heads, d), proj("k").view(n, kv, d), proj("v").view(n, kv, d)
            if v["family"] == "qwen3":
                q = torch_rms(q, T(w[p + "self_attn.q_norm.weight"]), eps)
                k = torch_rms(k, T(w[p + "self_attn.k_norm.weight"]), eps)
            q = q * cos + torch_rotate_half(q) * sin
            k = k * cos + torch_rotate_half(k) * sin
            k = k.repeat_interleave(heads // kv, dim=1)
            val = val.repeat_interleave(heads // kv, dim=1)
            scores = torch.einsum("ihd,jhd->hij", q, k) * d ** -0.5
            scores = scores.masked_fill(~mask, float("-inf"))
            probs = torch.softmax(scores, dim=-1)
            errs.append(compare("%s: layer %d attention" % (label, l), attentions[l], probs))
            ctx = torch.einsum("hij,jhd->ihd", probs, val).reshape(n, heads * d)
            x = x + F.linear(ctx, T(w[p + "self_attn.o_proj.weight"]))
            h = torch_rms(x, T(w[p + "post_attention_layernorm.weight"]), eps)
            x = x + F.linear(F.silu(F.linear(h, T(w[p + "mlp.gate_proj.weight"])))
                             * F.linear(h, T(w[p + "mlp.up_proj.weight"])),
                             T(w[p + "mlp.down_proj.weight"]))
            if l + 1 < v["layers"]:
                errs.append(compare("%s: layer %d hidden states" % (label, l), hidden[l + 1], x))
        x = torch_rms(x, T(w["model.norm.weight"]), eps)
        errs.append(compare(label + ": last hidden states (model.norm)", hidden[-1], x))
        head = w["model.embed_tokens.weight"] if v["tied"] else w["lm_head.weight"]
        errs.append(compare(label + ": logits", logits, F.linear(x[-1], T(head))))
    return max(errs)


# ------------------------------------------------------------ the folders

def torch_dtype_name(dtype):
    return {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[dtype]


def config_json(v, vocab_size, tok):
    """config.json as the family's Config class writes it (to_diff_dict:
    the class's own keys always, the common ones where they differ from
    PretrainedConfig's defaults)."""
    if v["family"] == "gpt2":
        eot = tok["vocab"]["<|endoftext|>"]
        cfg = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
               "attn_pdrop": 0.1, "bos_token_id": eot, "embd_pdrop": 0.1, "eos_token_id": eot,
               "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
               "n_embd": v["hidden"], "n_head": v["heads"], "n_inner": None,
               "n_layer": v["layers"], "n_positions": v["positions"],
               "reorder_and_upcast_attn": False, "resid_pdrop": 0.1,
               "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True,
               "summary_activation": None, "summary_first_dropout": 0.1,
               "summary_proj_to_labels": True, "summary_type": "cls_index",
               "summary_use_proj": True, "torch_dtype": torch_dtype_name(v["dtype"]),
               "transformers_version": v["version"], "use_cache": True, "vocab_size": vocab_size}
        if not v["prefix"]:
            cfg["n_ctx"] = v["positions"]  # older configs carry it too
        return cfg
    heads, kv, d = llama_dims(v)
    cfg = {"architectures": [{"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                              "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}[v["family"]]],
           "hidden_act": "silu", "hidden_size": v["hidden"], "initializer_range": 0.02,
           "intermediate_size": v["inter"], "model_type": v["family"],
           "num_attention_heads": heads, "num_hidden_layers": v["layers"],
           "rms_norm_eps": v["eps"], "tie_word_embeddings": v["tied"],
           "torch_dtype": torch_dtype_name(v["dtype"]), "transformers_version": v["version"],
           "use_cache": True, "vocab_size": vocab_size}
    if v["name"] == "llama2":
        # Llama-1/2-era keys; no rope_theta, no num_key_value_heads
        cfg.update({"bos_token_id": 1, "eos_token_id": 2, "max_position_embeddings": 4096,
                    "pretraining_tp": 1, "rope_scaling": None})
    elif v["family"] == "llama":
        bos = tok["vocab"]["<|begin_of_text|>"]
        cfg.update({"attention_bias": False, "attention_dropout": 0.0, "bos_token_id": bos,
                    "eos_token_id": tok["vocab"]["<|end_of_text|>"], "head_dim": d,
                    "max_position_embeddings": 131072, "mlp_bias": False,
                    "num_key_value_heads": kv, "pretraining_tp": 1,
                    "rope_scaling": v["scaling"], "rope_theta": v["theta"]})
    elif v["family"] == "mistral":
        cfg.update({"attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
                    "max_position_embeddings": 32768, "num_key_value_heads": kv,
                    "rope_theta": v["theta"], "sliding_window": v["window"]})
    else:
        eot = tok["vocab"]["<|endoftext|>"]
        cfg.update({"attention_dropout": 0.0, "bos_token_id": eot,
                    "eos_token_id": eot if v["family"] == "qwen2" else tok["vocab"]["<|im_end|>"],
                    "max_position_embeddings": 32768 if v["family"] == "qwen2" else 40960,
                    "num_key_value_heads": kv,
                    "rope_theta": v["theta"], "use_sliding_window": False})
        if v["family"] == "qwen2":
            cfg.update({"max_window_layers": v["layers"] - 1, "sliding_window": v["config_window"]})
        else:
            cfg.update({"attention_bias": False, "head_dim": d, "max_window_layers": v["layers"],
                        "rope_scaling": None, "sliding_window": None})
    return cfg


def file_tensors(v, values):
    """name in the file -> (dtype, shape, bytes), and the float64 values
    each weight holds as stored, by plain name."""
    tensors, back = {}, {}
    for name, a in values.items():
        data, b = stored(a, v["dtype"])
        tensors[v.get("prefix", "") + name] = (v["dtype"], np.shape(a), data)
        back[name] = b
    if v["family"] == "gpt2":
        if v["buffers"]:
            P = v["positions"]
            tril = np.tril(np.ones((P, P), dtype=bool)).reshape(1, 1, P, P)
            for l in range(v["layers"]):
                p = "%sh.%d.attn." % (v["prefix"], l)
                tensors[p + "bias"] = ("BOOL", tril.shape, stored(tril, "BOOL")[0])
                tensors[p + "masked_bias"] = (v["dtype"], (), stored(np.array(-1e4), v["dtype"])[0])
        if v["lm_head"]:
            tensors["lm_head.weight"] = tensors[v["prefix"] + "wte.weight"]
    if v.get("inv_freq_buffer"):
        plain = inv_freq(v, ("no_llama3_scaling",)).astype(np.float32)
        for l in range(v["layers"]):
            name = "model.layers.%d.self_attn.rotary_emb.inv_freq" % l
            tensors[name] = ("F32", plain.shape, stored(plain, "F32")[0])
    return tensors, back


def write_weights(d, v, tensors):
    """model.safetensors, or two shards split inside the last layer and
    model.safetensors.index.json."""
    meta = {"format": "pt"}
    names = sorted(tensors, key=weight_order)
    if v.get("shards", 1) == 1:
        write_safetensors(os.path.join(d, "model.safetensors"), tensors, names, meta)
        return ["model.safetensors"]
    last = "model.layers.%d." % (v["layers"] - 1)
    cut = names.index(last + "self_attn.v_proj.weight")
    parts = [names[:cut], names[cut:]]
    files = ["model-%05d-of-%05d.safetensors" % (i + 1, len(parts)) for i in range(len(parts))]
    weight_map = {}
    for f, part in zip(files, parts):
        write_safetensors(os.path.join(d, f), tensors, part, meta)
        weight_map.update({n: f for n in part})
    index = {"metadata": {"total_size": sum(len(t[2]) for t in tensors.values())},
             "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as fp:
        json.dump(index, fp, indent=2)
        fp.write("\n")
    return files + ["model.safetensors.index.json"]


def weight_order(name):
    """state_dict order: embeddings, layers in order (attention before the
    MLP), final norm, LM head."""
    m = re.search(r"\.(?:h|layers)\.(\d+)\.", name)
    if m:
        rank = ["ln_1", "input_layernorm", "attn.c_attn", "self_attn.q_proj", "self_attn.k_proj",
                "self_attn.v_proj", "self_attn.o_proj", "attn.c_proj", "self_attn.q_norm",
                "self_attn.k_norm", "rotary_emb", "attn.bias", "attn.masked_bias", "ln_2",
                "post_attention_layernorm", "mlp"]
        tail = name[m.end():]
        pos = next((i for i, r in enumerate(rank) if tail.startswith(r)), len(rank))
        return (1, int(m.group(1)), pos, tail)
    if name.startswith(("lm_head",)):
        return (3, 0, 0, name)
    if "ln_f" in name or name == "model.norm.weight":
        return (2, 0, 0, name)
    return (0, 0, 0, name)


def write_json(path, obj, **kw):
    with open(path, "w", encoding="utf-8", newline="\n") as fp:
        if isinstance(obj, str):
            fp.write(obj)
        else:
            json.dump(obj, fp, **kw)
        if not (isinstance(obj, str) and obj.endswith("\n")):
            fp.write("\n")


def derived(v, vocab_size, tok_size, bos):
    """What a loader must read from the folder, for the C tests to check."""
    if v["family"] == "gpt2":
        return {"model_type": "gpt2", "layers": v["layers"], "hidden": v["hidden"],
                "heads": v["heads"], "kv_heads": v["heads"], "head_dim": v["hidden"] // v["heads"],
                "intermediate": 4 * v["hidden"], "positions": v["positions"],
                "position_embedding": "learned", "norm": "layernorm", "norm_eps": 1e-5,
                "activation": "gelu_new", "rope_theta": None, "inv_freq": None,
                "sliding_window": None, "tied": True, "vocab_size": vocab_size,
                "tokenizer_size": tok_size, "bos_id": None}
    heads, kv, d = llama_dims(v)
    return {"model_type": v["family"], "layers": v["layers"], "hidden": v["hidden"],
            "heads": heads, "kv_heads": kv, "head_dim": d, "intermediate": v["inter"],
            "position_embedding": "rotary", "norm": "rmsnorm", "norm_eps": v["eps"],
            "activation": "silu", "qkv_bias": v["family"] == "qwen2",
            "qk_norm": v["family"] == "qwen3",
            "rope_theta": v["theta"] if v["theta"] is not None else 10000.0,
            "inv_freq": [float("%.17g" % f) for f in inv_freq(v)],
            "sliding_window": v.get("window"), "tied": v["tied"], "vocab_size": vocab_size,
            "tokenizer_size": tok_size, "bos_id": bos}


GREEDY_STEPS = 6
GREEDY_MARGIN = 1e-3  # of the largest |logit|: closer calls float32 may swap


def greedy(w, v, ids):
    """transformers' generate(do_sample=False) by the float64 reference,
    the whole sequence recomputed each step: the new ids, and each step's
    gap between its two largest logits relative to the largest |logit|.
    Stops before a step closer than GREEDY_MARGIN (a near-tie float32 may
    resolve the other way)."""
    ids, new, margins = list(ids), [], []
    for _ in range(GREEDY_STEPS):
        logits = forward(w, v, ids)[2]
        order = np.argsort(-logits, kind="stable")
        margin = float((logits[order[0]] - logits[order[1]]) / max(1.0, np.max(np.abs(logits))))
        if margin < GREEDY_MARGIN:
            break
        new.append(int(order[0]))
        margins.append(margin)
        ids.append(int(order[0]))
    return new, margins


def relative(a, b):
    """The largest difference relative to max(1, |b|)."""
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))


def build_variant(v, seed, out_dir, tok, answer, report):
    rng = np.random.default_rng(seed)
    tok_size = answer["vocab_size"]
    vocab_size = tok_size
    if v["family"] == "qwen2" or v["family"] == "qwen3":
        vocab_size = (tok_size + 40 + 63) // 64 * 64  # padding rows, as Qwen's 151936
    plain = (gpt2_weights if v["family"] == "gpt2" else llama_weights)(v, vocab_size, rng)
    tensors, w = file_tensors(v, plain)
    cfg = config_json(v, vocab_size, tok)

    def write():
        d = os.path.join(out_dir, v["name"])
        os.makedirs(d, exist_ok=True)
        for stale in os.listdir(d):
            os.remove(os.path.join(d, stale))
        write_json(os.path.join(d, "config.json"), cfg, indent=2, sort_keys=True)
        for name, content in tok["files"].items():
            if isinstance(content, str):
                write_json(os.path.join(d, name), content)
            else:
                write_json(os.path.join(d, name), content, indent=2, sort_keys=True,
                           ensure_ascii=False)
        write_weights(d, v, tensors)

    cases, cross, margins = [], 0.0, {}
    for enc in answer["encodings"]:
        check_tokenization(tok, enc)
        ids = enc["ids"]
        assert max(ids) < vocab_size
        extra = {}
        attn, hidden, logits = forward(w, v, ids, extra=extra)
        roll = rollout(attn)
        label = "%s %r" % (v["name"], enc["text"])
        check = torch_gpt2 if v["family"] == "gpt2" else torch_llama
        cross = max(cross, check(w, v, ids, attn, hidden, logits, label),
                    torch_rollout_check(label, attn, roll))
        for alt in wrong_conventions(v):
            a2, h2, l2 = forward(w, v, ids, (alt,))
            old = margins.get(alt, (0.0, 0.0))
            margins[alt] = (max(old[0], float(np.max(np.abs(a2 - attn)))),
                            max(old[1], relative(h2, hidden), relative(l2, logits)))
        cases.append({"sentence": enc["text"], "ids": ids,
                      "tokens": [token_text(tok, t) for t in enc["tokens"]],
                      "added": [bool(m) for m in enc["special_tokens_mask"]],
                      "attentions": rounded(attn), "hidden_states": rounded(hidden),
                      "rollout": rounded(roll), "logits": rounded(logits),
                      "flow": rounded(attention_flow(attn)),
                      "value_weighted": rounded(np.stack(extra["value_weighted"])),
                      "value_weighted_sum": rounded(np.stack(extra["value_weighted_sum"]))})
    # a greedy continuation of the first sentence that keeps clear of
    # near-ties for at least four steps (else of the next one)
    for case in cases:
        new, gaps = greedy(w, v, case["ids"])
        if len(new) >= 4:
            greedy_golden = {"prompt": case["ids"], "new": new,
                             "margins": [float("%.3g" % g) for g in gaps]}
            break
    else:
        raise CrossCheckFailed("%s: every greedy continuation meets a near-tie" % v["name"])
    for alt, (da, dh) in margins.items():
        if not max(da, dh) > MARGIN:
            raise CrossCheckFailed("%s: the wrong convention %s moves the goldens by only %.2e"
                                   % (v["name"], alt, max(da, dh)))
    report.append((v["name"], cross, dict(margins)))
    facts = derived(v, vocab_size, tok_size, tok["bos"])
    return {"variant": v["name"], "description": v["about"], "dtype": v["dtype"],
            "layers": v["layers"], "heads": facts["heads"], "hidden": v["hidden"],
            "config": facts, "cases": cases, "greedy": greedy_golden}, write


def check_vocabulary(tok, answer):
    """The library's vocabulary is the one meant, ids included."""
    got = answer["vocab"]
    if got != tok["vocab"]:
        missing = sorted(set(tok["vocab"].items()) ^ set(got.items()))[:5]
        raise CrossCheckFailed("%s: the library reads another vocabulary: %r" % (tok["kind"], missing))


def tokenizer_jobs():
    """Write each variant's tokenizer files into a scratch folder, ask the
    library for their vocabularies and the sentences' ids."""
    scratch = tempfile.mkdtemp(prefix="attnd-tokenize.")
    toks, jobs = {}, []
    for v in VARIANTS:
        tok = make_tokenizer(v["tokenizer"])
        toks[v["name"]] = tok
        paths = {}
        for name, content in tok["files"].items():
            if name == "tokenizer_config.json":
                continue
            path = os.path.join(scratch, "%s.%s" % (v["name"], name))
            write_json(path, content)
            paths[name] = path
        if "vocab.json" in paths:
            paths["special"] = ["<|endoftext|>"]
        jobs.append({"name": v["name"], "files": paths, "texts": sentences(v)})
    answer = run_tokenizers(jobs)
    for f in os.listdir(scratch):
        os.remove(os.path.join(scratch, f))
    os.rmdir(scratch)
    return toks, answer


def self_checks(toks, answers):
    """Facts of the formats the ids must show (each from the library)."""
    by = {a["name"]: a for a in answers["tokenizers"]}

    def ids_of(name, k):
        return by[name]["encodings"][k]["ids"]

    def vocab(name):
        return toks[name]["vocab"]
    # vocab.json + merges.txt and tokenizer.json hold the same GPT-2 tokenizer
    assert [e["ids"] for e in by["gpt2"]["encodings"]] == \
        [e["ids"] for e in by["gpt2_prefixed"]["encodings"]]
    # a typed <|endoftext|> is one token for GPT-2 and Qwen2, plain text for Llama 3
    assert vocab("gpt2")["<|endoftext|>"] in ids_of("gpt2", 1)
    assert vocab("gpt2_prefixed")["<|endoftext|>"] in ids_of("gpt2_prefixed", 1)
    assert vocab("qwen2")["<|endoftext|>"] in ids_of("qwen2", 1)
    assert "<|endoftext|>" not in [t for t in by["llama3"]["encodings"][1]["tokens"]]
    # Llama 3: the template's BOS and the typed one; ignore_merges
    bos = vocab("llama3")["<|begin_of_text|>"]
    assert ids_of("llama3", 1)[:2] == [bos, bos]
    assert vocab("llama3")["Ġattention"] in ids_of("llama3", 0)
    # Qwen2's NFC: the decomposed e + U+0301 is the composed é; Llama 3 keeps its bytes
    texts = {name: "".join(token_text(toks[name], t) for t in by[name]["encodings"][2]["tokens"])
             for name in ("qwen2", "llama3")}
    assert "Caf\u00e9" in texts["qwen2"] and "<0xCC><0x81>" in texts["llama3"], texts
    # SentencePiece byte fallback: the newline is <0x0A>, CJK are bytes
    for name in ("llama2", "mistral"):
        tokens = by[name]["encodings"][2]["tokens"]
        assert "<0x0A>" in tokens and "<0xE6>" in tokens, tokens
        assert ids_of(name, 0)[0] == 1
    # Llama 3's digits go by three, Qwen2's one by one, GPT-2's in a run
    assert "123" in [token_text(toks["llama3"], t) for t in by["llama3"]["encodings"][2]["tokens"]]
    assert "1" in [token_text(toks["qwen2"], t) for t in by["qwen2"]["encodings"][2]["tokens"]]


def main_goldens(out):
    toks, answers = tokenizer_jobs()
    self_checks(toks, answers)
    report, goldens = [], []
    for i, (v, answer) in enumerate(zip(VARIANTS, answers["tokenizers"])):
        assert answer["name"] == v["name"]
        check_vocabulary(toks[v["name"]], answer)
        if v.get("window"):
            n = min(len(e["ids"]) for e in answer["encodings"])
            assert n > v["window"], "%s: a sentence no longer than the window" % v["name"]
        assert min(len(e["ids"]) for e in answer["encodings"]) >= 8
        goldens.append(build_variant(v, 2000 + i, out, toks[v["name"]], answer, report))
    # every check has passed: write
    for _, write in goldens:
        write()
    os.makedirs(os.path.join(out, "golden"), exist_ok=True)
    for (g, _), v in zip(goldens, VARIANTS):
        if v.get("golden", True):
            write_json(os.path.join(out, "golden", g["variant"] + ".json"), g,
                       separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    print("generate_decoders.py: token ids from %s" % answers["library"])
    for v in VARIANTS:
        if v.get("scaling"):
            print("  %s: llama3 rope_scaling at head_dim %d: %s" % (
                v["name"], llama_dims(v)[2], dict(sorted(llama3_regimes(v).items()))))
    for name, cross, margins in report:
        size = sum(os.path.getsize(os.path.join(out, name, f)) for f in os.listdir(os.path.join(out, name)))
        print("  %-14s %6.1f KB  cross-checks within %.1e" % (name, size / 1024, cross))
        for alt, (da, dh) in sorted(margins.items()):
            print("      %-20s moves the attention weights by %.3g, hidden states or logits by %.3g"
                  % (alt, da, dh))
    print("generate_decoders.py: %d checkpoints, %d with goldens; every cross-check within %.0e, "
          "every wrong convention beyond %.0e"
          % (len(goldens), sum(v.get("golden", True) for v in VARIANTS), TOL, MARGIN))


# ------------------------------------------------ the benchmark checkpoint

def llama_1b(out, dtype):
    """A random checkpoint of Llama-3.2-1B's shapes (16 layers, hidden 2048,
    32 heads on 8 KV heads of 64, intermediate 8192, 128256 tokens, tied,
    rope_theta 500000 with Llama 3.2's llama3 scaling), weights ~ N(0, 0.02)
    and norms 1, in F32 (4.9 GB) or BF16 (2.5 GB); NumPy only, written
    tensor by tensor in slices. Its tokenizer is the small test one of
    tests/models/llama3 (Llama 3's layout, 371 ids, BOS 359), so that the
    model loader and the server take the folder; the benchmark gives the
    network its token ids itself. No goldens, never committed."""
    H, I, L, V, heads, kv, d = 2048, 8192, 16, 128256, 32, 8, 64
    st = {"f32": "F32", "bf16": "BF16"}[dtype]
    width = 4 if st == "F32" else 2
    shapes = [("model.embed_tokens.weight", (V, H))]
    for l in range(L):
        p = "model.layers.%d." % l
        shapes += [(p + "input_layernorm.weight", (H,)),
                   (p + "self_attn.q_proj.weight", (heads * d, H)),
                   (p + "self_attn.k_proj.weight", (kv * d, H)),
                   (p + "self_attn.v_proj.weight", (kv * d, H)),
                   (p + "self_attn.o_proj.weight", (H, heads * d)),
                   (p + "post_attention_layernorm.weight", (H,)),
                   (p + "mlp.gate_proj.weight", (I, H)),
                   (p + "mlp.up_proj.weight", (I, H)),
                   (p + "mlp.down_proj.weight", (H, I))]
    shapes.append(("model.norm.weight", (H,)))
    tensors = {n: (st, s, int(np.prod(s)) * width) for n, s in shapes}
    order = [n for n, _ in shapes]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(11)
    with open(os.path.join(out, "model.safetensors"), "wb") as fp:
        fp.write(safetensors_header(tensors, order, {"format": "pt"}))
        for name, shape in shapes:
            count = int(np.prod(shape))
            for start in range(0, count, 1 << 24):
                k = min(1 << 24, count - start)
                if name.endswith("layernorm.weight") or name == "model.norm.weight":
                    a = np.ones(k, dtype=np.float32)
                else:
                    a = rng.standard_normal(k, dtype=np.float32)
                    a *= np.float32(0.02)
                fp.write((bf16_bits_numpy(a).astype("<u2") if st == "BF16" else a.astype("<f4")).tobytes())
    cfg = {"architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
           "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": d, "hidden_act": "silu",
           "hidden_size": H, "initializer_range": 0.02, "intermediate_size": I,
           "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
           "num_attention_heads": heads, "num_hidden_layers": L, "num_key_value_heads": kv,
           "pretraining_tp": 1, "rms_norm_eps": 1e-05,
           "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                            "original_max_position_embeddings": 8192, "rope_type": "llama3"},
           "rope_theta": 500000.0, "tie_word_embeddings": True,
           "torch_dtype": torch_dtype_name(st), "transformers_version": "4.45.0.dev0",
           "use_cache": True, "vocab_size": V}
    write_json(os.path.join(out, "config.json"), cfg, indent=2, sort_keys=True)
    tok = make_tokenizer("llama3")
    for name, content in tok["files"].items():
        if isinstance(content, str):
            write_json(os.path.join(out, name), content)
        else:
            write_json(os.path.join(out, name), content, indent=2, sort_keys=True, ensure_ascii=False)
    print("generate_decoders.py: a Llama-3.2-1B-sized random %s checkpoint in %s" % (st, out))


def main(argv):
    if len(argv) == 5 and argv[1] == "--llama-1b" and argv[3] == "--dtype" and argv[4] in ("bf16", "f32"):
        return llama_1b(argv[2], argv[4])
    if len(argv) != 2:
        sys.exit("usage: generate_decoders.py OUT_DIR | generate_decoders.py --llama-1b DIR --dtype bf16|f32")
    if torch is None:
        sys.exit("generate_decoders.py: PyTorch is needed for the cross-checks "
                 "(Debian: apt-get install python3-torch)")
    main_goldens(argv[1])


if __name__ == "__main__":
    try:
        main(sys.argv)
    except CrossCheckFailed as e:
        sys.exit("generate_decoders.py: check failed: %s" % e)
