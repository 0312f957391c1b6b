#!/usr/bin/env python3
"""Write small random GPT-NeoX (Pythia), Phi-3 and OLMo-2 checkpoints in the
layout the Hugging Face Hub serves, and the goldens the C tests replay.

    /usr/bin/python3 tests/models/generate_neox_phi3_olmo2.py tests/models   (make models-golden)

Variants (DIR/<variant>/ and DIR/golden/<variant>.json):

    neox           gpt_neox, F16, parallel residual, Pythia's old buffers
    neox_seq       gpt_neox, F32, sequential residual, rotary_emb_base 1000
    phi3           phi3, BF16, Phi-3-mini-4k style: sliding window, untied
    phi3_longrope  phi3, F16, Phi-3.5 / Phi-4-mini style: longrope scaling
                   with a small original_max_position_embeddings, partial
                   rotary 0.75, 4 heads on 2 KV heads, tied
    olmo2          olmo2, BF16, norms after attention and after the MLP,
                   q_norm / k_norm over the whole projections, untied

Each folder gets config.json, model.safetensors, tokenizer.json and
tokenizer_config.json; each golden has the shape of generate_decoders.py's
(config, three cases with ids, tokens, added, attentions, hidden_states,
rollout, logits, flow, value_weighted, value_weighted_sum; greedy), its
config holding what a loader must derive from the folder.

Token ids come from the Hugging Face tokenizers library (tokenize/tokenize.mjs,
through node), as in generate_decoders.py, whose tokenizer helpers this
script shares.

The float64 reference follows transformers 4.56.0's modeling_gpt_neox.py,
modeling_phi3.py, modeling_olmo2.py, modeling_rope_utils.py and
masking_utils.py term by term, with the weights as the file stores them.
Before anything is written it is cross-checked against a second
implementation in PyTorch float64, written the other way round (fused
projections viewed and chunked as transformers does, cos/sin tables of
cat(freqs, freqs) times the attention factor, rotate_half on the rotary
slice, boolean masks, F.layer_norm, F.gelu, F.silu); any disagreement
beyond 1e-9 aborts without writing a file. Then every convention a loader
can get wrong must move the goldens by more than 1e-3 (the margins are
printed). Output is deterministic.
"""

import json
import math
import os
import re
import sys
import tempfile
import unicodedata

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from common import (TOL, CrossCheckFailed, attention_flow, compare, gelu, layer_norm,  # noqa: E402
                    rollout, rounded, stored, write_safetensors)
import generate_decoders as gd  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover
    torch = None

MARGIN = 1e-3          # a wrong convention must move the goldens by more than this
RELEASE = "4.56.0"     # the transformers release whose modeling files the reference follows


# ================================================================ tokenizers

NEOX_SPACES = [" " * k for k in range(24, 1, -1)]   # added whitespace runs, longest first
PHI3_ADDED = [  # (content, rstrip, special) after the base vocabulary, Phi-3's order
    ("<|endoftext|>", False, True), ("<|assistant|>", True, True),
    ("<|placeholder1|>", True, True), ("<|placeholder2|>", True, True),
    ("<|placeholder3|>", True, True), ("<|placeholder4|>", True, True),
    ("<|system|>", True, True), ("<|end|>", True, True),
    ("<|placeholder5|>", True, True), ("<|placeholder6|>", True, True),
    ("<|user|>", True, True)]
OLMO2_SPECIALS = (["<|extra_id_0|>", "<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>",
                   "<|fim_suffix|>", "|||PHONE_NUMBER|||", "|||EMAIL_ADDRESS|||",
                   "|||IP_ADDRESS|||", "<|im_start|>", "<|im_end|>"]
                  + ["<|extra_id_%d|>" % i for i in range(1, 11)]
                  + ["<|endofprompt|>", "<|pad|>"])
CL100K_REGEX = gd.LLAMA3_REGEX  # Llama 3's pre-tokenizer regex is cl100k's, character for character


def added(tid, content, special=True, normalized=False, rstrip=False):
    t = gd.added_token(tid, content, special=special, normalized=normalized)
    t["rstrip"] = rstrip
    return t


def no_bos_template():
    """TemplateProcessing as LlamaTokenizerFast writes it with add_bos_token
    false and add_eos_token false: the sequences alone."""
    return {"type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {}}


def make_tokenizer(kind):
    """{"kind", "files", "vocab" (added tokens included), "added" (content ->
    {"rstrip", "special"}), "bos", "byte_level", "normalize"}."""
    if kind == "neox":
        base, merges = gd.byte_level_bpe(100)
        vocab = {"<|endoftext|>": 0, "<|padding|>": 1}
        for t, i in base.items():
            vocab[t] = i + 2
        toks = [added(0, "<|endoftext|>"), added(1, "<|padding|>")]
        for k, s in enumerate(NEOX_SPACES):
            toks.append(added(len(vocab) + k, s, special=False, normalized=True))
        bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True}
        tok = gd.tokenizer_json(toks, {"type": "NFC"}, bl, dict(bl), dict(bl),
                                gd.bpe_model(vocab, merges, False))
        del tok["model"]["byte_fallback"], tok["model"]["ignore_merges"]  # GPT-NeoX-20B's older model keys
        full = dict(vocab, **{t["content"]: t["id"] for t in toks})
        cfg = {"add_prefix_space": False, "bos_token": "<|endoftext|>",
               "eos_token": "<|endoftext|>", "tokenizer_class": "GPTNeoXTokenizer",
               "unk_token": "<|endoftext|>"}
        return dict(kind=kind, files={"tokenizer.json": json.dumps(tok, ensure_ascii=False, indent=2),
                                      "tokenizer_config.json": cfg},
                    vocab=full, added={t["content"]: {"rstrip": False, "special": t["special"]}
                                       for t in toks},
                    bos=None, byte_level=True, normalize=lambda s: unicodedata.normalize("NFC", s))
    if kind == "phi3":
        vocab, merges = gd.sentencepiece_bpe(100, lambda ch: ch.isascii() and ch.isalnum())
        base = len(vocab)
        toks = [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>", special=False, rstrip=True)]
        for k, (content, rstrip, special) in enumerate(PHI3_ADDED):
            toks.append(added(base + k, content, special=special, rstrip=rstrip))
        tok = gd.tokenizer_json(toks, gd.normalizer_sp(), None, no_bos_template(), gd.decoder_sp(),
                                gd.bpe_model(vocab, merges, False, unk_token="<unk>", fuse_unk=True,
                                             byte_fallback=True))
        full = dict(vocab, **{t["content"]: t["id"] for t in toks})
        cfg = {"add_bos_token": False, "add_eos_token": False,
               "added_tokens_decoder": gd.added_decoder(toks), "bos_token": "<s>",
               "clean_up_tokenization_spaces": False, "eos_token": "<|endoftext|>",
               "legacy": False, "model_max_length": 4096, "pad_token": "<|endoftext|>",
               "padding_side": "left", "sp_model_kwargs": {}, "tokenizer_class": "LlamaTokenizer",
               "unk_token": "<unk>", "use_default_system_prompt": False}
        return dict(kind=kind, files={"tokenizer.json": json.dumps(tok, ensure_ascii=False, indent=2),
                                      "tokenizer_config.json": cfg},
                    vocab=full, added={t["content"]: {"rstrip": t["rstrip"], "special": t["special"]}
                                       for t in toks},
                    bos=None, byte_level=False, normalize=lambda s: s)
    if kind == "olmo2":
        vocab, merges = gd.byte_level_bpe(130)
        base = len(vocab)
        toks = [added(base + k, t) for k, t in enumerate(OLMO2_SPECIALS)]
        tok = gd.tokenizer_json(
            toks, None,
            {"type": "Sequence", "pretokenizers": [gd.split_regex(CL100K_REGEX),
                                                   gd.byte_level(False, True, False)]},
            gd.byte_level(True, False, True), gd.byte_level(True, True, True),
            gd.bpe_model(vocab, merges, False))
        full = dict(vocab, **{t["content"]: t["id"] for t in toks})
        cfg = {"add_bos_token": False, "add_eos_token": False, "add_prefix_space": False,
               "added_tokens_decoder": gd.added_decoder(toks), "bos_token": "<|endoftext|>",
               "clean_up_tokenization_spaces": False, "eos_token": "<|endoftext|>",
               "errors": "replace", "model_max_length": 4096, "pad_token": "<|pad|>",
               "tokenizer_class": "GPT2Tokenizer", "unk_token": "<|endoftext|>"}
        return dict(kind=kind, files={"tokenizer.json": json.dumps(tok, ensure_ascii=False, indent=2),
                                      "tokenizer_config.json": cfg},
                    vocab=full, added={t: {"rstrip": False, "special": True} for t in OLMO2_SPECIALS},
                    bos=None, byte_level=True, normalize=lambda s: s)
    raise ValueError(kind)


def token_text(tok, tid, token):
    """A token's readable text, as generate_decoders.py writes it; an added
    token as its content (the library's token string also holds the
    whitespace an rstrip token took)."""
    inv = tok["added_ids"]
    if tid in inv:
        return inv[tid]
    if tok["byte_level"]:
        return gd.readable(bytes(gd.CHAR_BYTE[c] for c in token))
    m = re.fullmatch(r"<0x([0-9A-F]{2})>", token)
    if m:
        return gd.readable(bytes([int(m.group(1), 16)]))
    return token.replace("▁", " ")


def check_tokenization(tok, enc):
    """What the ids must satisfy whatever the merges did: no BOS in any of
    these three families; the tokens cover the (normalized) text byte for
    byte outside the added tokens (and the whitespace an rstrip token
    takes); the byte-level decoder gives the text back."""
    ids, tokens, mask = enc["ids"], enc["tokens"], enc["special_tokens_mask"]
    inv = {i: t for t, i in tok["vocab"].items()}
    for i, t in zip(ids, tokens):
        if i in tok["added_ids"]:
            content = tok["added_ids"][i]
            strip = tok["added"][content]["rstrip"]
            assert t == content or (strip and t.startswith(content) and not t[len(content):].strip()), (i, t)
        else:
            assert inv[i] == t, "ids and tokens disagree with the vocabulary"
    assert tok["bos"] is None and ids == enc["ids_without_special"] and not any(mask)
    text = tok["normalize"](enc["text"])
    alts = []
    for content in sorted(tok["added"], key=len, reverse=True):
        alts.append(re.escape(content) + (r"\s*" if tok["added"][content]["rstrip"] else ""))
    plain = re.sub("|".join(alts), "", text)
    body = [t for i, t in zip(ids, tokens) if i not in tok["added_ids"]]
    if tok["byte_level"]:
        got = bytes(gd.CHAR_BYTE[c] for t in body for c in t)
        assert got == plain.encode("utf-8"), (got, plain)
    else:
        got = b"".join(bytes([int(t[3:5], 16)]) if re.fullmatch(r"<0x..>", t)
                       else t.encode("utf-8") for t in body)
        got = got.decode("utf-8").replace("▁", " ")
        assert got.replace(" ", "") == plain.replace(" ", ""), (got, plain)


# ================================================================== variants

PLAIN = "The quick brown fox pays attention to the lazy dog, doesn't it?"
UNICODE = "Cafe\u0301 in 東京 costs 1234!\n"
SENTENCES = {
    "neox": [PLAIN, "Hello world!<|endoftext|>The cat  sat on the<|padding|> mat.", UNICODE],
    "phi3": [PLAIN, "<|user|>\nHello world!<|end|>\n<|assistant|> The cat sat.</s> On the mat"
                    "<|endoftext|>", UNICODE],
    # exactly original_max_position_embeddings (12) tokens, then one more
    "phi3_longrope": [PLAIN, "<|user|>\nHello world!<|end|>\n<|assistant|>The cat sat on the mat",
                      "<|user|>\nHello world!<|end|>\n<|assistant|>The cat sat on the mat."],
    "olmo2": [PLAIN, "<|endoftext|>Hello world!<|im_start|>user\nThe cat sat on the mat.<|im_end|>",
              UNICODE],
}

LONGROPE_SHORT = [1.0, 1.25, 1.5, 2.0, 3.0, 4.0]
LONGROPE_LONG = [1.125, 2.0, 4.0, 8.0, 16.0, 32.0]

VARIANTS = [
    dict(name="neox", family="gpt_neox", dtype="F16", layers=2, hidden=48, heads=3, inter=192,
         pct=0.25, base=10000, eps=1e-5, parallel=True, positions=64, buffers=True,
         tokenizer="neox", version="4.24.0",
         about="F16, GPTNeoXForCausalLM as Pythia publishes it: use_parallel_residual true, "
               "rotary_pct 0.25 (4 of 16 dims), fused query_key_value per head, untied "
               "embed_out, the old attention.bias / masked_bias / rotary_emb.inv_freq buffers, "
               "NeoX's byte-level BPE (NFC, whitespace runs as added tokens, no BOS)"),
    dict(name="neox_seq", family="gpt_neox", dtype="F32", layers=2, hidden=48, heads=2, inter=64,
         pct=0.25, base=1000, eps=1e-5, parallel=False, positions=128, buffers=False,
         tokenizer="neox", version="4.40.0",
         about="F32, use_parallel_residual false (sequential), 2 heads of 24 with 6 rotary dims, "
               "rotary_emb_base 1000 (no rope_theta key), intermediate_size 64, untied"),
    dict(name="phi3", family="phi3", dtype="BF16", layers=2, hidden=48, heads=4, kv_heads=4,
         inter=96, eps=1e-5, theta=10000.0, prf=1.0, window=6, tied=False, scaling=None,
         max_pos=4096, orig=4096, tokenizer="phi3", version="4.40.2",
         about="BF16, Phi-3-mini-4k style: fused qkv_proj and gate_up_proj, sliding_window 6 "
               "(shorter than every sentence), no rope_scaling, untied, Llama-2-style "
               "SentencePiece BPE with Phi-3's added tokens and no BOS"),
    dict(name="phi3_longrope", family="phi3", dtype="F16", layers=2, hidden=64, heads=4,
         kv_heads=2, inter=128, eps=1e-5, theta=10000.0, prf=0.75, window=262144, tied=True,
         scaling={"long_factor": LONGROPE_LONG, "short_factor": LONGROPE_SHORT,
                  "type": "longrope"},
         max_pos=384, orig=12, tokenizer="phi3", version="4.45.0",
         about="F16, Phi-3.5-mini / Phi-4-mini style: longrope rope_scaling (short and long "
               "factors) with original_max_position_embeddings 12 and max_position_embeddings "
               "384, partial_rotary_factor 0.75 (12 of 16 dims), 4 heads on 2 KV heads, "
               "sliding_window 262144, tied"),
    dict(name="olmo2", family="olmo2", dtype="BF16", layers=2, hidden=64, heads=4, kv_heads=2,
         inter=96, eps=1e-6, theta=500000.0, tied=False, tokenizer="olmo2",
         version="4.47.0.dev0",
         about="BF16, OLMo-2: RMSNorm after attention and after the MLP (no input norms), "
               "q_norm / k_norm over the whole q and k projections before RoPE, 4 heads on 2 KV "
               "heads, rope_theta 500000, untied, cl100k-style byte-level BPE, no BOS"),
]


def dims(v):
    heads = v["heads"]
    kv = v.get("kv_heads") or heads
    d = v["hidden"] // heads
    return heads, kv, d


def rotary_dims(v):
    d = dims(v)[2]
    return int(d * (v["pct"] if v["family"] == "gpt_neox" else v.get("prf", 1.0)))


# ================================================================== weights

def neox_weights(v, vocab_size, rng):
    H, I, (heads, _, d) = v["hidden"], v["inter"], dims(v)
    w = {"gpt_neox.embed_in.weight": rng.normal(0, 1.0, (vocab_size, H))}
    for l in range(v["layers"]):
        p = "gpt_neox.layers.%d." % l
        for n in ("input_layernorm", "post_attention_layernorm"):
            w[p + n + ".weight"] = 1 + rng.normal(0, 0.1, H)
            w[p + n + ".bias"] = rng.normal(0, 0.1, H)
        qkv = rng.normal(0, 1.0 / math.sqrt(H), (heads, 3, d, H))
        qkv[:, :2] *= 1.8  # q and k: attention far from uniform
        w[p + "attention.query_key_value.weight"] = qkv.reshape(3 * H, H)
        w[p + "attention.query_key_value.bias"] = rng.normal(0, 0.2, 3 * H)
        w[p + "attention.dense.weight"] = rng.normal(0, 1.0 / math.sqrt(H), (H, H))
        w[p + "attention.dense.bias"] = rng.normal(0, 0.1, H)
        w[p + "mlp.dense_h_to_4h.weight"] = rng.normal(0, 1.0 / math.sqrt(H), (I, H))
        w[p + "mlp.dense_h_to_4h.bias"] = rng.normal(0, 0.1, I)
        w[p + "mlp.dense_4h_to_h.weight"] = rng.normal(0, 1.0 / math.sqrt(I), (H, I))
        w[p + "mlp.dense_4h_to_h.bias"] = rng.normal(0, 0.1, H)
    w["gpt_neox.final_layer_norm.weight"] = 1 + rng.normal(0, 0.1, H)
    w["gpt_neox.final_layer_norm.bias"] = rng.normal(0, 0.1, H)
    w["embed_out.weight"] = rng.normal(0, 1.0 / math.sqrt(H), (vocab_size, H))
    return w


def phi3_weights(v, vocab_size, rng):
    H, I, (heads, kv, d) = v["hidden"], v["inter"], dims(v)
    w = {"model.embed_tokens.weight": rng.normal(0, 1.0, (vocab_size, H))}
    for l in range(v["layers"]):
        p = "model.layers.%d." % l
        w[p + "input_layernorm.weight"] = 1 + rng.normal(0, 0.1, H)
        q = rng.normal(0, 1.6 / math.sqrt(H), (heads * d, H))
        k = rng.normal(0, 1.6 / math.sqrt(H), (kv * d, H))
        val = rng.normal(0, 1.0 / math.sqrt(H), (kv * d, H))
        w[p + "self_attn.qkv_proj.weight"] = np.concatenate([q, k, val])
        w[p + "self_attn.o_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(heads * d), (H, heads * d))
        w[p + "post_attention_layernorm.weight"] = 1 + rng.normal(0, 0.1, H)
        w[p + "mlp.gate_up_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(H), (2 * I, H))
        w[p + "mlp.down_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(I), (H, I))
    w["model.norm.weight"] = 1 + rng.normal(0, 0.1, H)
    if not v["tied"]:
        w["lm_head.weight"] = rng.normal(0, 1.0 / math.sqrt(H), (vocab_size, H))
    return w


def olmo2_weights(v, vocab_size, rng):
    H, I, (heads, kv, d) = v["hidden"], v["inter"], dims(v)
    w = {"model.embed_tokens.weight": rng.normal(0, 1.0, (vocab_size, H))}
    for l in range(v["layers"]):
        p = "model.layers.%d." % l
        # each head's rows at its own scale, so that one RMS over the whole
        # projection and one per head differ
        qs = np.repeat(np.exp(rng.normal(0, 0.6, heads)), d)[:, None]
        ks = np.repeat(np.exp(rng.normal(0, 0.6, kv)), d)[:, None]
        w[p + "self_attn.q_proj.weight"] = qs * rng.normal(0, 1.0 / math.sqrt(H), (heads * d, H))
        w[p + "self_attn.k_proj.weight"] = ks * rng.normal(0, 1.0 / math.sqrt(H), (kv * d, H))
        w[p + "self_attn.v_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(H), (kv * d, H))
        w[p + "self_attn.o_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(heads * d), (H, heads * d))
        w[p + "self_attn.q_norm.weight"] = 1.5 * (1 + rng.normal(0, 0.3, heads * d))
        w[p + "self_attn.k_norm.weight"] = 1.5 * (1 + rng.normal(0, 0.3, kv * d))
        w[p + "post_attention_layernorm.weight"] = 1 + rng.normal(0, 0.1, H)
        w[p + "mlp.gate_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(H), (I, H))
        w[p + "mlp.up_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(H), (I, H))
        w[p + "mlp.down_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(I), (H, I))
        w[p + "post_feedforward_layernorm.weight"] = 1 + rng.normal(0, 0.1, H)
    w["model.norm.weight"] = 1 + rng.normal(0, 0.1, H)
    w["lm_head.weight"] = rng.normal(0, 1.0 / math.sqrt(H), (vocab_size, H))
    return w


WEIGHTS = {"gpt_neox": neox_weights, "phi3": phi3_weights, "olmo2": olmo2_weights}


# ===================================================================== RoPE

def default_inv_freq(base, rot):
    """1 / base^(2i / rot) for i < rot / 2 (_compute_default_rope_parameters
    with dim = int(head_dim * partial_rotary_factor))."""
    return np.array([1.0 / base ** (2 * i / rot) for i in range(rot // 2)])


def longrope(v):
    """_compute_longrope_parameters with Phi-3's top-level
    original_max_position_embeddings: factor = max_position_embeddings /
    original, attention factor sqrt(1 + ln(factor) / ln(original)) (1 when
    factor <= 1), frequencies 1 / (ext_i * theta^(2i / rot)) with ext the
    short or the long factors."""
    rot = rotary_dims(v)
    factor = v["max_pos"] / v["orig"]
    att = math.sqrt(1 + math.log(factor) / math.log(v["orig"])) if factor > 1 else 1.0
    plain = default_inv_freq(v["theta"], rot)
    short = plain / np.array(v["scaling"]["short_factor"], dtype=np.float64)
    long_ = plain / np.array(v["scaling"]["long_factor"], dtype=np.float64)
    return short, long_, att


def longrope_choice(v, n, alt=()):
    """longrope_frequency_update: seq_len = max(position_ids) + 1 = n; the
    long factors when n > original_max_position_embeddings, else the short."""
    if "longrope_always_short" in alt:
        return "short"
    if "longrope_long_at_boundary" in alt:
        return "long" if n >= v["orig"] else "short"
    return "long" if n > v["orig"] else "short"


def rope_tables(v, n, alt=()):
    """(inv_freq, attention factor, rotary dims, which) for a sequence of n."""
    if v["family"] == "gpt_neox":
        rot = dims(v)[2] if "rotary_all_dims" in alt else rotary_dims(v)
        base = 10000 if "rope_base_default" in alt else v["base"]
        return default_inv_freq(base, rot), 1.0, rot, None
    rot = rotary_dims(v)
    if v["family"] == "phi3" and v["scaling"] and "longrope_ignored" not in alt:
        short, long_, att = longrope(v)
        which = longrope_choice(v, n, alt)
        if "no_attention_factor" in alt:
            att = 1.0
        return (long_ if which == "long" else short), att, rot, which
    return default_inv_freq(v["theta"], rot), 1.0, rot, None


def rope(x, freqs, rot, scale, interleaved=False):
    """x: [n][heads][d]; the first rot dims of each head rotated by position
    p = 0..n-1, dimension i with i + rot/2 (rotate_half), or with its
    neighbour when interleaved, cos and sin times scale; the other dims as
    they are."""
    n, _, d = x.shape
    out = x.copy()
    for p in range(n):
        for i in range(rot // 2):
            a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + rot // 2)
            c, s = scale * math.cos(p * freqs[i]), scale * math.sin(p * freqs[i])
            out[p, :, a] = x[p, :, a] * c - x[p, :, b] * s
            out[p, :, b] = x[p, :, b] * c + x[p, :, a] * s
    return out


# ======================================================= float64 reference

rms_norm = gd.rms_norm
silu = gd.silu


def neox_forward(w, v, ids, alt=(), extra=None, hook=None):
    """GPTNeoXForCausalLM with output_attentions and output_hidden_states:
    embed_in; per layer LayerNorm (input_layernorm), query_key_value whose
    output rows hold, per head, that head's q, k and v; rotary on the first
    rotary_ndims dims; softmax(q k^T / sqrt(head_dim)) causal; dense; then
    x + attn(ln1(x)) + mlp(ln2(x)) (parallel) or x + attn(ln1(x)) followed
    by x + mlp(ln2(x)) (sequential); mlp = dense_4h_to_h(gelu(dense_h_to_4h));
    final_layer_norm; embed_out on the last position. hook: forward()'s."""
    hook = hook or no_hook
    n, H, eps = len(ids), v["hidden"], v["eps"]
    heads, _, d = dims(v)
    parallel = v["parallel"] != ("residual_swapped" in alt)
    freqs, scale, rot, _ = rope_tables(v, n, alt)
    x = w["gpt_neox.embed_in.weight"][ids]
    hidden, attentions = [x], []
    allowed = gd.allowed_mask(n, None)
    for l in range(v["layers"]):
        p = "gpt_neox.layers.%d." % l
        x = hook("resid_pre", l, x)
        h = layer_norm(x, w[p + "input_layernorm.weight"], w[p + "input_layernorm.bias"], eps)
        qkv = h @ w[p + "attention.query_key_value.weight"].T + w[p + "attention.query_key_value.bias"]
        q, k, val = (np.zeros((n, heads, d)) for _ in range(3))
        for a in range(heads):
            for j, t in enumerate((q, k, val)):
                if "qkv_3_heads" in alt:  # [3][heads][head_dim]
                    t[:, a] = qkv[:, j * H + a * d: j * H + (a + 1) * d]
                else:                     # [heads][3][head_dim]
                    t[:, a] = qkv[:, a * 3 * d + j * d: a * 3 * d + (j + 1) * d]
        inter = "interleaved_rope" in alt
        q, k = rope(q, freqs, rot, scale, inter), rope(k, freqs, rot, scale, inter)
        probs, ctx = gd.attend(q, k, val, list(range(heads)), allowed)
        attentions.append(probs)
        ctx = hook("z", l, ctx)
        dense = w[p + "attention.dense.weight"]
        if extra is not None:
            vw = gd.value_weighted(probs, val, list(range(heads)),
                                   lambda a: dense[:, a * d:(a + 1) * d].T)
            extra.setdefault("value_weighted", []).append(vw[0])
            extra.setdefault("value_weighted_sum", []).append(vw[1])
        attn = hook("attn_out", l, ctx @ dense.T + w[p + "attention.dense.bias"])

        def mlp(z):
            act = gd.gelu_new if "gelu_tanh" in alt else gelu
            inner = act(z @ w[p + "mlp.dense_h_to_4h.weight"].T + w[p + "mlp.dense_h_to_4h.bias"])
            return inner @ w[p + "mlp.dense_4h_to_h.weight"].T + w[p + "mlp.dense_4h_to_h.bias"]
        ln2 = (w[p + "post_attention_layernorm.weight"], w[p + "post_attention_layernorm.bias"])
        if parallel:
            # both sublayers read the layer's input
            x = x + attn + hook("mlp_out", l, mlp(layer_norm(x, ln2[0], ln2[1], eps)))
        else:
            x = x + attn
            x = x + hook("mlp_out", l, mlp(layer_norm(x, ln2[0], ln2[1], eps)))
        hidden.append(x)
    x = hook("resid_final", None, x)
    if "no_final_norm" not in alt:
        hidden[-1] = layer_norm(x, w["gpt_neox.final_layer_norm.weight"],
                                w["gpt_neox.final_layer_norm.bias"], eps)
    logits = w["embed_out.weight"] @ hidden[-1][-1]
    return np.stack(attentions), np.stack(hidden), logits


def kv_map(v, alt):
    heads, kv, _ = dims(v)
    group = heads // kv
    return [h % kv if "gqa_modulo" in alt else h // group for h in range(heads)]


def phi3_forward(w, v, ids, alt=(), extra=None, hook=None):
    """Phi3ForCausalLM: embed_tokens; per layer RMSNorm, qkv_proj whose rows
    are [q (heads * d); k (kv * d); v (kv * d)], RoPE on the first
    int(d * partial_rotary_factor) dims with cos and sin times the
    attention factor (longrope: short or long factors by the length), a
    causal mask with the sliding window (query i sees key j iff
    i - window < j <= i), o_proj; RMSNorm, gate_up_proj whose rows are
    [gate; up], down(up * silu(gate)); model.norm; the LM head (embed_tokens
    when tied). hook: forward()'s."""
    hook = hook or no_hook
    n, I, eps = len(ids), v["inter"], v["eps"]
    heads, kv, d = dims(v)
    freqs, scale, rot, _ = rope_tables(v, n, alt)
    window = v["window"]
    if "window_plus_one" in alt:
        window += 1
    if "window_minus_one" in alt:
        window -= 1
    if "no_window" in alt:
        window = None
    allowed = gd.allowed_mask(n, window)
    kv_of = kv_map(v, alt)
    x = w["model.embed_tokens.weight"][ids]
    hidden, attentions = [x], []
    for l in range(v["layers"]):
        p = "model.layers.%d." % l
        x = hook("resid_pre", l, x)
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        qkv = h @ w[p + "self_attn.qkv_proj.weight"].T
        q = qkv[:, :heads * d].reshape(n, heads, d)
        k = qkv[:, heads * d:(heads + kv) * d].reshape(n, kv, d)
        val = qkv[:, (heads + kv) * d:].reshape(n, kv, d)
        q0, k0 = q, k
        inter = "interleaved_rope" in alt
        q, k = rope(q, freqs, rot, scale, inter), rope(k, freqs, rot, scale, inter)
        if "longrope_stale_cache" in alt and n > v["orig"]:
            # a cache started short and kept past the boundary: the
            # positions before it turned by the short factors, as they
            # were cached (a position's state reads only those before it)
            short = rope_tables(v, v["orig"], alt)[0]
            q[:v["orig"]] = rope(q0, short, rot, scale, inter)[:v["orig"]]
            k[:v["orig"]] = rope(k0, short, rot, scale, inter)[:v["orig"]]
        if "attention_factor_all_dims" in alt:  # the pass-through dims scaled too
            q[:, :, rot:] *= scale
            k[:, :, rot:] *= scale
        probs, ctx = gd.attend(q, k, val, kv_of, allowed)
        attentions.append(probs)
        ctx = hook("z", l, ctx)
        o = w[p + "self_attn.o_proj.weight"]
        if extra is not None:
            vw = gd.value_weighted(probs, val, kv_of, lambda a: o[:, a * d:(a + 1) * d].T)
            extra.setdefault("value_weighted", []).append(vw[0])
            extra.setdefault("value_weighted_sum", []).append(vw[1])
        x = x + hook("attn_out", l, ctx @ o.T)
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gu = h @ w[p + "mlp.gate_up_proj.weight"].T
        gate, up = gu[:, :I], gu[:, I:]
        if "gate_up_swapped" in alt:
            gate, up = up, gate
        x = x + hook("mlp_out", l, (up * silu(gate)) @ w[p + "mlp.down_proj.weight"].T)
        hidden.append(x)
    x = hook("resid_final", None, x)
    if "no_final_norm" not in alt:
        hidden[-1] = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if v["tied"] else w["lm_head.weight"]
    return np.stack(attentions), np.stack(hidden), head @ hidden[-1][-1]


def olmo2_forward(w, v, ids, alt=(), extra=None, hook=None):
    """Olmo2ForCausalLM: embed_tokens; per layer q = q_norm(q_proj(x)) and
    k = k_norm(k_proj(x)), RMSNorms over the whole projections (heads * d
    and kv * d), then RoPE; the attention; x + post_attention_layernorm(
    o_proj(.)); then x + post_feedforward_layernorm(mlp(x)); no norm before
    either; model.norm; lm_head. hook: forward()'s, attn_out and mlp_out
    after their norms."""
    hook = hook or no_hook
    n, eps = len(ids), v["eps"]
    heads, kv, d = dims(v)
    freqs, scale, rot, _ = rope_tables(v, n, alt)
    allowed = gd.allowed_mask(n, None)
    kv_of = kv_map(v, alt)
    inter = "interleaved_rope" in alt
    x = w["model.embed_tokens.weight"][ids]
    hidden, attentions = [x], []

    def qk_norm(t, g, count):
        if "qk_norm_per_head" in alt:
            return rms_norm(t.reshape(n, count, d), g.reshape(count, d), eps).reshape(n, count * d)
        return rms_norm(t, g, eps)

    for l in range(v["layers"]):
        p = "model.layers.%d." % l
        x = hook("resid_pre", l, x)
        before = "norms_before" in alt
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps) if before else x
        q = h @ w[p + "self_attn.q_proj.weight"].T
        k = h @ w[p + "self_attn.k_proj.weight"].T
        val = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(n, kv, d)
        if "qk_norm_after_rope" in alt:
            q = rope(q.reshape(n, heads, d), freqs, rot, scale, inter).reshape(n, heads * d)
            k = rope(k.reshape(n, kv, d), freqs, rot, scale, inter).reshape(n, kv * d)
            q = qk_norm(q, w[p + "self_attn.q_norm.weight"], heads).reshape(n, heads, d)
            k = qk_norm(k, w[p + "self_attn.k_norm.weight"], kv).reshape(n, kv, d)
        else:
            q = qk_norm(q, w[p + "self_attn.q_norm.weight"], heads).reshape(n, heads, d)
            k = qk_norm(k, w[p + "self_attn.k_norm.weight"], kv).reshape(n, kv, d)
            q, k = rope(q, freqs, rot, scale, inter), rope(k, freqs, rot, scale, inter)
        probs, ctx = gd.attend(q, k, val, kv_of, allowed)
        attentions.append(probs)
        ctx = hook("z", l, ctx)
        o = w[p + "self_attn.o_proj.weight"]
        if extra is not None:
            vw = gd.value_weighted(probs, val, kv_of, lambda a: o[:, a * d:(a + 1) * d].T)
            extra.setdefault("value_weighted", []).append(vw[0])
            extra.setdefault("value_weighted_sum", []).append(vw[1])
        a = ctx @ o.T
        a = a if before else rms_norm(a, w[p + "post_attention_layernorm.weight"], eps)
        x = x + hook("attn_out", l, a)
        h = rms_norm(x, w[p + "post_feedforward_layernorm.weight"], eps) if before else x
        m = (silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)) \
            @ w[p + "mlp.down_proj.weight"].T
        m = m if before else rms_norm(m, w[p + "post_feedforward_layernorm.weight"], eps)
        x = x + hook("mlp_out", l, m)
        hidden.append(x)
    x = hook("resid_final", None, x)
    if "no_final_norm" not in alt:
        hidden[-1] = rms_norm(x, w["model.norm.weight"], eps)
    return np.stack(attentions), np.stack(hidden), w["lm_head.weight"] @ hidden[-1][-1]


FORWARD = {"gpt_neox": neox_forward, "phi3": phi3_forward, "olmo2": olmo2_forward}


def no_hook(name, layer, value):
    return value


def forward(w, v, ids, alt=(), extra=None, hook=None):
    """The variant's family's forward: (attention weights [layers][heads][n][n],
    hidden states [layers + 1][n][hidden] as output_hidden_states, the last
    position's logits).

    hook (generate_interventions.py's): None, or hook(name, layer, value)
    returning the value the pass goes on with, at TransformerLens' hook
    points: "resid_pre" (the stream entering a layer), "z" (each head's
    attention-weighted values before the output projection, value bias in,
    [n][heads * head_dim]), "attn_out" (what the attention adds to the
    stream: dense / o_proj with its bias; on OLMo-2 after
    post_attention_layernorm), "mlp_out" (what the feed-forward adds; on
    OLMo-2 after post_feedforward_layernorm) and "resid_final" (the stream
    before the final norm; layer None). With GPT-NeoX's parallel residual
    both sublayers read resid_pre and the layer's output is resid_pre +
    attn_out + mlp_out (TransformerLens' parallel_attn_mlp)."""
    return FORWARD[v["family"]](w, v, ids, alt, extra, hook)


def wrong_conventions(v):
    """The conventions a loader can get wrong; each must move the goldens."""
    out = ["no_final_norm", "interleaved_rope"]
    heads, kv, _ = dims(v)
    if 1 < kv < heads:
        out.append("gqa_modulo")
    if v["family"] == "gpt_neox":
        out += ["rotary_all_dims", "qkv_3_heads", "residual_swapped"]
        if v["base"] != 10000:
            out.append("rope_base_default")
    if v["family"] == "phi3":
        out.append("gate_up_swapped")
        if v["scaling"]:
            out += ["longrope_always_short", "longrope_long_at_boundary", "no_attention_factor",
                    "attention_factor_all_dims", "longrope_ignored"]
        else:
            out += ["window_plus_one", "window_minus_one", "no_window"]
    if v["family"] == "olmo2":
        out += ["norms_before", "qk_norm_per_head", "qk_norm_after_rope"]
    return out


def small_conventions(v):
    """Wrong conventions printed with their (small) margins, not asserted."""
    return ["gelu_tanh"] if v["family"] == "gpt_neox" else []


SMALL = {"gelu_tanh"}

DESCRIBE = {
    "no_final_norm": "the last hidden state without the final norm",
    "interleaved_rope": "RoPE on interleaved pairs (2i, 2i+1)",
    "gqa_modulo": "query head h on KV head h % kv_heads",
    "rotary_all_dims": "partial rotary applied to all head dims",
    "qkv_3_heads": "query_key_value read as [3][heads][head_dim]",
    "residual_swapped": "parallel and sequential residual swapped",
    "rope_base_default": "rope base 10000 instead of rotary_emb_base",
    "gate_up_swapped": "gate_up_proj read as [up; gate]",
    "longrope_always_short": "longrope's short factors past the boundary",
    "longrope_long_at_boundary": "longrope's long factors at the boundary (N >= original)",
    "no_attention_factor": "longrope without the attention factor",
    "attention_factor_all_dims": "the attention factor on the pass-through dims too",
    "longrope_ignored": "rope_scaling ignored (plain frequencies, no attention factor)",
    "gelu_tanh": "the tanh GELU (gelu_new) for hidden_act gelu",
    "window_plus_one": "a window one key longer",
    "window_minus_one": "a window one key shorter",
    "no_window": "no sliding window",
    "norms_before": "OLMo-2's norms before attention and MLP",
    "qk_norm_per_head": "q_norm / k_norm per head",
    "qk_norm_after_rope": "q_norm / k_norm after RoPE",
}


# ============================================================ PyTorch check

def T(a):
    return torch.tensor(np.asarray(a, dtype=np.float64), dtype=torch.float64)


def torch_rope_tables(v, n):
    """cos and sin [n][rot] as the RotaryEmbedding modules build them: the
    frequencies (default, or longrope's short / long by max(position) + 1
    against original_max_position_embeddings), freqs = positions x inv_freq,
    emb = cat(freqs, freqs), times the attention scaling."""
    if v["family"] == "gpt_neox":
        dim = int(dims(v)[2] * v["pct"])
        base, scaling = float(v["base"]), 1.0
        ext = torch.ones(dim // 2, dtype=torch.float64)
    else:
        dim = int(dims(v)[2] * v.get("prf", 1.0))
        base, scaling = v["theta"], 1.0
        ext = torch.ones(dim // 2, dtype=torch.float64)
        if v["family"] == "phi3" and v["scaling"]:
            factor = v["max_pos"] / v["orig"]
            scaling = math.sqrt(1 + math.log(factor) / math.log(v["orig"]))
            positions = torch.arange(n)
            seq_len = int(positions.max()) + 1
            ext = T(v["scaling"]["long_factor"] if seq_len > v["orig"] else v["scaling"]["short_factor"])
    inv = 1.0 / (ext * base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    freqs = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return inv, emb.cos() * scaling, emb.sin() * scaling


def torch_apply_rope(x, cos, sin):
    """x [heads][n][d]: the rotary slice rotated with rotate_half, the rest
    passed through."""
    rot = cos.shape[-1]
    xr, xp = x[..., :rot], x[..., rot:]
    return torch.cat((xr * cos + gd.torch_rotate_half(xr) * sin, xp), dim=-1)


def torch_attention(q, k, val, mask, d):
    """q [heads][n][d], k and v [kv][n][d] repeated as repeat_kv does
    (expand then reshape); a boolean mask; softmax."""
    heads, kv = q.shape[0], k.shape[0]
    if heads != kv:
        rep = heads // kv
        k = k[:, None].expand(kv, rep, *k.shape[1:]).reshape(heads, *k.shape[1:])
        val = val[:, None].expand(kv, rep, *val.shape[1:]).reshape(heads, *val.shape[1:])
    scores = torch.matmul(q, k.transpose(1, 2)) * d ** -0.5
    scores = scores.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return probs, torch.matmul(probs, val).transpose(0, 1).reshape(q.shape[1], -1)


def torch_check(w, v, ids, attentions, hidden, logits, label):
    """The network again, in torch ops, transformers' way round."""
    n = len(ids)
    heads, kv, d = dims(v)
    errs = []
    with torch.no_grad():
        inv, cos, sin = torch_rope_tables(v, n)
        errs.append(compare(label + ": inv_freq", rope_tables(v, n)[0], inv))
        i = torch.arange(n)[:, None]
        j = torch.arange(n)[None, :]
        mask = j <= i
        window = v.get("window")
        if window is not None:
            mask = mask & (j > i - window)
        tid = torch.tensor(ids)
        fam = v["family"]
        emb_name = "gpt_neox.embed_in.weight" if fam == "gpt_neox" else "model.embed_tokens.weight"
        x = F.embedding(tid, T(w[emb_name]))
        errs.append(compare(label + ": embeddings", hidden[0], x))
        H = v["hidden"]
        for l in range(v["layers"]):
            if fam == "gpt_neox":
                p = "gpt_neox.layers.%d." % l
                h = F.layer_norm(x, (H,), T(w[p + "input_layernorm.weight"]),
                                 T(w[p + "input_layernorm.bias"]), v["eps"])
                qkv = F.linear(h, T(w[p + "attention.query_key_value.weight"]),
                               T(w[p + "attention.query_key_value.bias"]))
                qkv = qkv.view(n, heads, 3 * d).transpose(0, 1)
                q, k, val = qkv.chunk(3, dim=-1)
                q, k = torch_apply_rope(q, cos, sin), torch_apply_rope(k, cos, sin)
                probs, ctx = torch_attention(q, k, val, mask, d)
                attn = F.linear(ctx, T(w[p + "attention.dense.weight"]), T(w[p + "attention.dense.bias"]))

                def mlp(z):
                    z = F.gelu(F.linear(z, T(w[p + "mlp.dense_h_to_4h.weight"]),
                                        T(w[p + "mlp.dense_h_to_4h.bias"])))
                    return F.linear(z, T(w[p + "mlp.dense_4h_to_h.weight"]),
                                    T(w[p + "mlp.dense_4h_to_h.bias"]))

                def ln2(z):
                    return F.layer_norm(z, (H,), T(w[p + "post_attention_layernorm.weight"]),
                                        T(w[p + "post_attention_layernorm.bias"]), v["eps"])
                if v["parallel"]:
                    x = mlp(ln2(x)) + attn + x
                else:
                    a = attn + x
                    x = mlp(ln2(a)) + a
            elif fam == "phi3":
                p = "model.layers.%d." % l
                h = gd.torch_rms(x, T(w[p + "input_layernorm.weight"]), v["eps"])
                qkv = F.linear(h, T(w[p + "self_attn.qkv_proj.weight"]))
                qp = heads * d
                q = qkv[..., :qp].view(n, -1, d).transpose(0, 1)
                k = qkv[..., qp:qp + kv * d].view(n, -1, d).transpose(0, 1)
                val = qkv[..., qp + kv * d:].view(n, -1, d).transpose(0, 1)
                q, k = torch_apply_rope(q, cos, sin), torch_apply_rope(k, cos, sin)
                probs, ctx = torch_attention(q, k, val, mask, d)
                x = x + F.linear(ctx, T(w[p + "self_attn.o_proj.weight"]))
                h = gd.torch_rms(x, T(w[p + "post_attention_layernorm.weight"]), v["eps"])
                gate, up = F.linear(h, T(w[p + "mlp.gate_up_proj.weight"])).chunk(2, dim=-1)
                x = x + F.linear(up * F.silu(gate), T(w[p + "mlp.down_proj.weight"]))
            else:
                p = "model.layers.%d." % l
                q = gd.torch_rms(F.linear(x, T(w[p + "self_attn.q_proj.weight"])),
                                 T(w[p + "self_attn.q_norm.weight"]), v["eps"])
                k = gd.torch_rms(F.linear(x, T(w[p + "self_attn.k_proj.weight"])),
                                 T(w[p + "self_attn.k_norm.weight"]), v["eps"])
                val = F.linear(x, T(w[p + "self_attn.v_proj.weight"]))
                q, k, val = (t.view(n, -1, d).transpose(0, 1) for t in (q, k, val))
                q, k = torch_apply_rope(q, cos, sin), torch_apply_rope(k, cos, sin)
                probs, ctx = torch_attention(q, k, val, mask, d)
                r = x
                x = r + gd.torch_rms(F.linear(ctx, T(w[p + "self_attn.o_proj.weight"])),
                                     T(w[p + "post_attention_layernorm.weight"]), v["eps"])
                m = F.linear(F.silu(F.linear(x, T(w[p + "mlp.gate_proj.weight"])))
                             * F.linear(x, T(w[p + "mlp.up_proj.weight"])), T(w[p + "mlp.down_proj.weight"]))
                x = x + gd.torch_rms(m, T(w[p + "post_feedforward_layernorm.weight"]), v["eps"])
            errs.append(compare("%s: layer %d attention" % (label, l), attentions[l], probs))
            if l + 1 < v["layers"]:
                errs.append(compare("%s: layer %d hidden states" % (label, l), hidden[l + 1], x))
        if fam == "gpt_neox":
            x = F.layer_norm(x, (H,), T(w["gpt_neox.final_layer_norm.weight"]),
                             T(w["gpt_neox.final_layer_norm.bias"]), v["eps"])
            head = w["embed_out.weight"]
        else:
            x = gd.torch_rms(x, T(w["model.norm.weight"]), v["eps"])
            head = w["model.embed_tokens.weight"] if v.get("tied") else w["lm_head.weight"]
        errs.append(compare(label + ": last hidden states (final norm)", hidden[-1], x))
        errs.append(compare(label + ": logits", logits, F.linear(x[-1], T(head))))
    return max(errs)


# =============================================================== the folders

def torch_dtype_name(dtype):
    return {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[dtype]


def config_json(v, vocab_size, tok):
    """config.json as the checkpoints the variant stands for carry it."""
    heads, kv, d = dims(v)
    common = {"hidden_size": v["hidden"], "initializer_range": 0.02,
              "intermediate_size": v["inter"], "model_type": v["family"],
              "num_attention_heads": heads, "num_hidden_layers": v["layers"],
              "torch_dtype": torch_dtype_name(v["dtype"]), "transformers_version": v["version"],
              "use_cache": True, "vocab_size": vocab_size}
    if v["family"] == "gpt_neox":
        cfg = dict(common, architectures=["GPTNeoXForCausalLM"], bos_token_id=0,
                   classifier_dropout=0.1, eos_token_id=0, hidden_act="gelu",
                   layer_norm_eps=v["eps"], max_position_embeddings=v["positions"],
                   rotary_emb_base=v["base"], rotary_pct=v["pct"], tie_word_embeddings=False,
                   use_parallel_residual=v["parallel"])
        if v["name"] == "neox_seq":  # a later GPTNeoXConfig's keys
            cfg.update(attention_bias=True, attention_dropout=0.0, hidden_dropout=0.0,
                       rope_scaling=None)
        return cfg
    if v["family"] == "phi3":
        eot = tok["vocab"]["<|endoftext|>"]
        cfg = dict(common, architectures=["Phi3ForCausalLM"], attention_bias=False,
                   attention_dropout=0.0, bos_token_id=1, embd_pdrop=0.0, eos_token_id=eot,
                   hidden_act="silu", max_position_embeddings=v["max_pos"],
                   num_key_value_heads=kv, original_max_position_embeddings=v["orig"],
                   pad_token_id=eot, resid_pdrop=0.0, rms_norm_eps=v["eps"],
                   rope_scaling=v["scaling"], rope_theta=v["theta"],
                   sliding_window=v["window"], tie_word_embeddings=v["tied"])
        if v["prf"] != 1.0:  # Phi-4-mini's keys
            cfg.update(full_attn_mod=1, interpolate_factor=1, lm_head_bias=False, mlp_bias=False,
                       partial_rotary_factor=v["prf"])
        return cfg
    return dict(common, architectures=["Olmo2ForCausalLM"], attention_bias=False,
                attention_dropout=0.0, eos_token_id=tok["vocab"]["<|endoftext|>"],
                hidden_act="silu", max_position_embeddings=4096, num_key_value_heads=kv,
                pad_token_id=tok["vocab"]["<|pad|>"], rms_norm_eps=v["eps"], rope_scaling=None,
                rope_theta=v["theta"], tie_word_embeddings=False)


LAYER_ORDER = {  # each family's module registration order within a layer
    "gpt_neox": ["input_layernorm", "post_attention_layernorm", "attention.bias",
                 "attention.masked_bias", "attention.rotary_emb", "attention.query_key_value",
                 "attention.dense", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h"],
    "phi3": ["self_attn.o_proj", "self_attn.qkv_proj", "mlp.gate_up_proj", "mlp.down_proj",
             "input_layernorm", "post_attention_layernorm"],
    "olmo2": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
              "self_attn.q_norm", "self_attn.k_norm", "mlp.gate_proj", "mlp.up_proj",
              "mlp.down_proj", "post_attention_layernorm", "post_feedforward_layernorm"],
}


def weight_order(family):
    """state_dict order: embeddings, the layers in order (each module as the
    family registers it), final norm, LM head."""
    rank = LAYER_ORDER[family]

    def key(name):
        m = re.search(r"\.layers\.(\d+)\.", name)
        if m:
            tail = name[m.end():]
            pos = next((i for i, r in enumerate(rank) if tail.startswith(r)), len(rank))
            return (1, int(m.group(1)), pos, tail)
        if name.startswith(("lm_head", "embed_out")):
            return (3, 0, 0, name)
        if "final_layer_norm" in name or name == "model.norm.weight":
            return (2, 0, 0, name)
        return (0, 0, 0, name)
    return key


def file_tensors(v, values):
    """name in the file -> (dtype, shape, bytes), and the float64 values
    each weight holds as stored."""
    tensors, back = {}, {}
    for name, a in values.items():
        data, b = stored(a, v["dtype"])
        tensors[name] = (v["dtype"], np.shape(a), data)
        back[name] = b
    if v.get("buffers"):
        # what Pythia's files carry besides the weights: the causal mask
        # (BOOL tril), masked_bias (-1e9, which F16 holds as -inf) and the
        # rotary frequencies, float32 rounded to the file's dtype
        P = v["positions"]
        tril = np.tril(np.ones((P, P), dtype=bool)).reshape(1, 1, P, P)
        rot = rotary_dims(v)
        inv = (1.0 / (np.float32(v["base"]) ** (np.arange(0, rot, 2, dtype=np.float32) / np.float32(rot))))
        wide = np.float16 if v["dtype"] == "F16" else np.float32
        with np.errstate(over="ignore"):
            masked = np.array(-1e9, dtype=np.float32).astype(wide).astype(np.dtype(wide).newbyteorder("<"))
        for l in range(v["layers"]):
            p = "gpt_neox.layers.%d.attention." % l
            tensors[p + "bias"] = ("BOOL", tril.shape, stored(tril, "BOOL")[0])
            tensors[p + "masked_bias"] = (v["dtype"], (), masked.tobytes())
            tensors[p + "rotary_emb.inv_freq"] = (v["dtype"], inv.shape, stored(inv, v["dtype"])[0])
    return tensors, back


def write_json(path, obj, **kw):
    gd.write_json(path, obj, **kw)


def derived(v, vocab_size, tok_size, bos, case_rope):
    """What a loader must read from the folder, for the C tests to check."""
    heads, kv, d = dims(v)
    rot = rotary_dims(v)
    fam = v["family"]
    out = {"model_type": fam, "layers": v["layers"], "hidden": v["hidden"], "heads": heads,
           "kv_heads": kv, "head_dim": d, "intermediate": v["inter"],
           "position_embedding": "rotary",
           "norm": "layernorm" if fam == "gpt_neox" else "rmsnorm", "norm_eps": v["eps"],
           "activation": "gelu" if fam == "gpt_neox" else "silu",
           "qkv_bias": fam == "gpt_neox", "qk_norm": fam == "olmo2"}
    if fam == "gpt_neox":
        theta = float(v["base"])
        inv = default_inv_freq(v["base"], rot)
        extra = {"parallel_residual": v["parallel"], "partial_rotary_factor": v["pct"],
                 "qkv_layout": "per head [q; k; v] rows ([heads][3][head_dim])",
                 "attention_out_bias": True, "mlp_bias": True, "attention_factor": 1.0,
                 "norm_placement": "pre", "qk_norm_over": None, "longrope": None}
    elif fam == "phi3":
        theta = v["theta"]
        if v["scaling"]:
            short, long_, att = longrope(v)
            inv = short  # the buffer at load; each case's choice is below
            lr = {"original_max_position_embeddings": v["orig"],
                  "max_position_embeddings": v["max_pos"],
                  "factor": v["max_pos"] / v["orig"], "attention_factor": float("%.17g" % att),
                  "short_factor": v["scaling"]["short_factor"],
                  "long_factor": v["scaling"]["long_factor"],
                  "inv_freq_short": [float("%.17g" % f) for f in short],
                  "inv_freq_long": [float("%.17g" % f) for f in long_],
                  "rule": "long factors when the sequence length N = max(position) + 1 is "
                          "greater than original_max_position_embeddings, short otherwise",
                  "cases": case_rope, "greedy": "long"}
        else:
            inv, att, lr = default_inv_freq(v["theta"], rot), 1.0, None
        extra = {"parallel_residual": False, "partial_rotary_factor": v["prf"],
                 "qkv_layout": "[q (heads * head_dim); k (kv_heads * head_dim); v] rows",
                 "gate_up_layout": "[gate; up] rows", "attention_factor": float("%.17g" % att),
                 "norm_placement": "pre", "qk_norm_over": None, "longrope": lr}
    else:
        theta = v["theta"]
        inv = default_inv_freq(v["theta"], rot)
        extra = {"parallel_residual": False, "partial_rotary_factor": 1.0,
                 "attention_factor": 1.0,
                 "norm_placement": "post: x + norm(attn(x)), then x + norm(mlp(x))",
                 "qk_norm_over": "projection", "longrope": None}
    out.update({"rope_theta": theta, "rotary_dims": rot,
                "inv_freq": [float("%.17g" % f) for f in inv],
                "sliding_window": v.get("window"), "tied": bool(v.get("tied", False)),
                "vocab_size": vocab_size, "tokenizer_size": tok_size, "bos_id": bos})
    out.update(extra)
    return out


GREEDY_STEPS = gd.GREEDY_STEPS
GREEDY_MARGIN = gd.GREEDY_MARGIN


def greedy(w, v, ids):
    """generate(do_sample=False) by the reference, the whole sequence
    recomputed at each step (for longrope, as Phi3ForCausalLM drops its
    cache when the length first passes original_max_position_embeddings),
    with generate_decoders.py's stop rule."""
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


def build_variant(v, seed, out_dir, tok, answer, report):
    rng = np.random.default_rng(seed)
    tok_size = answer["vocab_size"]
    vocab_size = (tok_size + 127) // 128 * 128 if v["family"] != "phi3" else (tok_size + 63) // 64 * 64
    plain = WEIGHTS[v["family"]](v, vocab_size, rng)
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
                write_json(os.path.join(d, name), content, indent=2, sort_keys=True, ensure_ascii=False)
        write_safetensors(os.path.join(d, "model.safetensors"), tensors,
                          sorted(tensors, key=weight_order(v["family"])), {"format": "pt"})

    cases, cross, margins, case_rope = [], 0.0, {}, []
    for enc in answer["encodings"]:
        check_tokenization(tok, enc)
        ids = enc["ids"]
        assert max(ids) < vocab_size
        extra = {}
        attn, hidden, logits = forward(w, v, ids, extra=extra)
        roll = rollout(attn)
        label = "%s %r" % (v["name"], enc["text"])
        cross = max(cross, torch_check(w, v, ids, attn, hidden, logits, label),
                    gd.torch_rollout_check(label, attn, roll))
        case_rope.append(rope_tables(v, len(ids))[3])
        for alt in wrong_conventions(v) + small_conventions(v):
            a2, h2, l2 = forward(w, v, ids, (alt,))
            old = margins.get(alt, (0.0, 0.0))
            margins[alt] = (max(old[0], float(np.max(np.abs(a2 - attn)))),
                            max(old[1], gd.relative(h2, hidden), gd.relative(l2, logits)))
        cases.append({"sentence": enc["text"], "ids": ids,
                      "tokens": [token_text(tok, i, t) for i, t in zip(enc["ids"], enc["tokens"])],
                      "added": [bool(m) for m in enc["special_tokens_mask"]],
                      "attentions": rounded(attn), "hidden_states": rounded(hidden),
                      "rollout": rounded(roll), "logits": rounded(logits),
                      "flow": rounded(attention_flow(attn)),
                      "value_weighted": rounded(np.stack(extra["value_weighted"])),
                      "value_weighted_sum": rounded(np.stack(extra["value_weighted_sum"]))})
    for case in cases:
        new, gaps = greedy(w, v, case["ids"])
        if len(new) >= 4:
            greedy_golden = {"prompt": case["ids"], "new": new,
                             "margins": [float("%.3g" % g) for g in gaps]}
            break
    else:
        raise CrossCheckFailed("%s: every greedy continuation meets a near-tie" % v["name"])
    if v["family"] == "phi3" and v["scaling"]:
        # the greedy prompt is past the boundary: every step uses the long factors
        assert len(greedy_golden["prompt"]) > v["orig"]
    for alt, (da, dh) in margins.items():
        if alt not in small_conventions(v) and not max(da, dh) > MARGIN:
            raise CrossCheckFailed("%s: the wrong convention %s moves the goldens by only %.2e"
                                   % (v["name"], alt, max(da, dh)))
    report.append((v["name"], cross, dict(margins)))
    facts = derived(v, vocab_size, tok_size, tok["bos"],
                    case_rope if v["family"] == "phi3" and v["scaling"] else None)
    return {"variant": v["name"], "description": v["about"], "dtype": v["dtype"],
            "layers": v["layers"], "heads": facts["heads"], "hidden": v["hidden"],
            "config": facts, "cases": cases, "greedy": greedy_golden}, write


def check_vocabulary(tok, answer):
    got = answer["vocab"]
    if got != tok["vocab"]:
        diff = sorted(set(tok["vocab"].items()) ^ set(got.items()))[:5]
        raise CrossCheckFailed("%s: the library reads another vocabulary: %r" % (tok["kind"], diff))


def tokenizer_jobs():
    scratch = tempfile.mkdtemp(prefix="attnd-tokenize.")
    toks, jobs = {}, []
    for v in VARIANTS:
        tok = make_tokenizer(v["tokenizer"])
        tok["added_ids"] = {tok["vocab"][c]: c for c in tok["added"]}
        toks[v["name"]] = tok
        path = os.path.join(scratch, "%s.tokenizer.json" % v["name"])
        write_json(path, tok["files"]["tokenizer.json"])
        jobs.append({"name": v["name"], "files": {"tokenizer.json": path},
                     "texts": SENTENCES[v["name"] if v["name"] in SENTENCES else v["tokenizer"]]})
    answer = gd.run_tokenizers(jobs)
    for f in os.listdir(scratch):
        os.remove(os.path.join(scratch, f))
    os.rmdir(scratch)
    return toks, answer


def self_checks(toks, answers):
    """Facts of the formats the ids must show (each from the library)."""
    by = {a["name"]: a for a in answers["tokenizers"]}

    def enc(name, k):
        return by[name]["encodings"][k]

    def texts(name, k):
        e = enc(name, k)
        return [token_text(toks[name], i, t) for i, t in zip(e["ids"], e["tokens"])]
    # NeoX: <|endoftext|> is 0 and <|padding|> 1, typed in; a run of two
    # spaces is the added token "  " (the word after it has no space);
    # NFC joins e + U+0301; no BOS
    ids = enc("neox", 1)["ids"]
    assert toks["neox"]["vocab"]["<|endoftext|>"] == 0 and 0 in ids and 1 in ids
    assert "  " in texts("neox", 1) and "sat" in "".join(texts("neox", 1)).split("  ")[1][:3]
    assert "Caf<0xC3><0xA9>" in "".join(texts("neox", 2))  # U+00E9, composed
    assert ids[0] != 0 and enc("neox", 0)["ids"][0] == toks["neox"]["vocab"]["The"]
    assert [e["ids"] for e in by["neox"]["encodings"]] == [e["ids"] for e in by["neox_seq"]["encodings"]]
    # Phi-3: no BOS; the rstrip tokens take the newline after them; </s>
    # typed in is 2; byte fallback for the newline and CJK
    for name in ("phi3", "phi3_longrope"):
        for k in range(3):
            assert enc(name, k)["ids"][0] != 1
    t = texts("phi3", 1)
    assert t[t.index("<|end|>") + 1] == "<|assistant|>" and t[0] == "<|user|>" and t[1] != "\n"
    assert 2 in enc("phi3", 1)["ids"]
    assert "<0x0A>" in enc("phi3", 2)["tokens"] and "<0xE6>" in enc("phi3", 2)["tokens"]
    # Phi-3.5 longrope: one sentence of exactly original_max_position_embeddings
    # tokens, one of one more, the first longer still
    orig = next(v["orig"] for v in VARIANTS if v["name"] == "phi3_longrope")
    lengths = [len(e["ids"]) for e in by["phi3_longrope"]["encodings"]]
    assert lengths[1] == orig and lengths[2] == orig + 1 and lengths[0] > orig + 1, lengths
    # OLMo-2: no BOS; cl100k's digits by three; specials typed in are one token
    assert "123" in texts("olmo2", 2) and "4" in texts("olmo2", 2)
    assert enc("olmo2", 1)["ids"][0] == toks["olmo2"]["vocab"]["<|endoftext|>"]
    assert enc("olmo2", 0)["ids"][0] != toks["olmo2"]["vocab"]["<|endoftext|>"]
    assert "<0xCC><0x81>" in "".join(texts("olmo2", 2))  # no NFC: e + U+0301 stays two characters


def main_goldens(out):
    toks, answers = tokenizer_jobs()
    self_checks(toks, answers)
    report, goldens = [], []
    for i, (v, answer) in enumerate(zip(VARIANTS, answers["tokenizers"])):
        assert answer["name"] == v["name"]
        check_vocabulary(toks[v["name"]], answer)
        if v["family"] == "phi3" and not v["scaling"]:
            assert min(len(e["ids"]) for e in answer["encodings"]) > v["window"]
        assert min(len(e["ids"]) for e in answer["encodings"]) >= 8
        goldens.append(build_variant(v, 3000 + i, out, toks[v["name"]], answer, report))
    for _, write in goldens:
        write()
    os.makedirs(os.path.join(out, "golden"), exist_ok=True)
    for g, _ in goldens:
        write_json(os.path.join(out, "golden", g["variant"] + ".json"), g,
                   separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    print("generate_neox_phi3_olmo2.py: token ids from %s; the reference follows transformers %s"
          % (answers["library"], RELEASE))
    for v in VARIANTS:
        if v["family"] == "phi3" and v["scaling"]:
            short, long_, att = longrope(v)
            print("  %s: longrope, original %d, factor %g, attention factor %.6f; cases %s"
                  % (v["name"], v["orig"], v["max_pos"] / v["orig"], att,
                     [len(e["ids"]) for e in answers["tokenizers"][VARIANTS.index(v)]["encodings"]]))
    for name, cross, margins in report:
        size = sum(os.path.getsize(os.path.join(out, name, f)) for f in os.listdir(os.path.join(out, name)))
        print("  %-14s %6.1f KB  cross-checks within %.1e" % (name, size / 1024, cross))
        for alt, (da, dh) in sorted(margins.items()):
            print("      %-62s attention weights by %.3g, hidden states or logits by %.3g%s"
                  % (DESCRIBE[alt], da, dh, " (not asserted)" if alt in SMALL else ""))
    print("generate_neox_phi3_olmo2.py: %d checkpoints with goldens; every cross-check within %.0e, "
          "every wrong convention beyond %.0e" % (len(goldens), TOL, MARGIN))


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: generate_neox_phi3_olmo2.py OUT_DIR")
    if torch is None:
        sys.exit("generate_neox_phi3_olmo2.py: PyTorch is needed for the cross-checks "
                 "(Debian: apt-get install python3-torch)")
    main_goldens(argv[1])


if __name__ == "__main__":
    try:
        main(sys.argv)
    except CrossCheckFailed as e:
        sys.exit("generate_neox_phi3_olmo2.py: check failed: %s" % e)
