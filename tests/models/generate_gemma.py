#!/usr/bin/env python3
"""Write small random Gemma, Gemma 2 and Gemma 3 checkpoints in the layout
the Hugging Face Hub serves, and the goldens the C tests replay.

    /usr/bin/python3 tests/models/generate_gemma.py tests/models   (make models-golden)

For each variant below, DIR/<variant>/ gets config.json, the weights
(model.safetensors, or two shards and model.safetensors.index.json),
tokenizer.json and tokenizer_config.json; DIR/golden/<variant>.json gets
what a loader must derive from the folder (the heads, each layer's kind,
window and rotary frequencies, the soft caps, the attention scale, the
embedding scale) and, for three sentences, the token ids, the tokens' text,
every layer's attention weights, the hidden states, the rollout, the
logits of the last position after the final soft cap (and before it,
`logits_uncapped`), as generate_decoders.py writes them for the other
decoders.

Token ids come from the Hugging Face tokenizers library through
tests/models/tokenize/ (as for generate_decoders.py): every tokenizer.json
written here is loaded by it, its vocabulary read back and compared with
the one meant, and the sentences encoded by it.

The network reference is float64 NumPy written from transformers'
modeling_gemma.py, modeling_gemma2.py and modeling_gemma3.py (with
configuration_gemma2.py / configuration_gemma3.py for which layers slide,
modeling_rope_utils.py for the linear scaling and masking_utils.py for the
window) term by term, with the weights as the file stores them (F16 and
BF16 widened exactly). It is what transformers computes with
torch_dtype=float32 (the embedding scale sqrt(hidden) kept at full
precision; transformers rounds it to the weights' dtype when run in BF16 or
F16, which the goldens' config records as embed_scale_in_dtype). Before
anything is written it is cross-checked against PyTorch in float64 (torch
ops written the way the modeling files write them: the Gemma RMSNorm in
torch, rotate_half RoPE, repeat_kv by expand, an additive mask after the
soft cap, torch.softmax, F.gelu(tanh), F.linear); any disagreement beyond
1e-9 aborts without writing a file. Then every convention a loader can get
wrong (w for 1 + w, the soft cap after the mask, sliding and global layers
swapped, the wrong rotary base or scaling, the sandwich norms left out, the
embeddings unscaled, 1/sqrt(head_dim) for query_pre_attn_scalar, the final
soft cap left out, ...) must move the goldens by more than 1e-3.

Output is deterministic: the same script gives byte-identical files.
"""

import collections
import json
import math
import os
import re
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
from common import (TOL, CrossCheckFailed, attention_flow, compare, gelu, gelu_new,  # noqa: E402
                    rollout, rounded, softmax, stored, write_safetensors)
from generate_decoders import (CORPUS, MARGIN, SENTENCES, T, added_decoder, added_token,  # noqa: E402
                               bpe_model, readable, relative, rope, run_tokenizers, template,
                               tokenizer_json, torch_dtype_name, torch_rollout_check,
                               torch_rotate_half, train_merges, value_weighted, write_json)

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover
    torch = None


# ------------------------------------------------------------- tokenizers

# Gemma's tokenizer.json (as Gemma 3's ships it): the ids below the byte
# tokens are added tokens, special or not, matched in the raw text before
# the normalizer; "\n" runs and "▁" runs among them are not special.
GEMMA_HEAD = [("<pad>", True), ("<eos>", True), ("<bos>", True), ("<unk>", True),
              ("<mask>", False), ("<unused0>", False), ("<unused1>", False),
              ("<start_of_turn>", True), ("<end_of_turn>", True),
              ("\n", False), ("\n\n", False), ("\n\n\n", False), ("▁▁", False), ("▁▁▁", False)]
GEMMA3_HEAD = [("<pad>", True), ("<eos>", True), ("<bos>", True), ("<unk>", True),
               ("<mask>", False), ("[multimodal]", False), ("<unused0>", False),
               ("<unused1>", False), ("<unused2>", False),
               ("<start_of_turn>", True), ("<end_of_turn>", True),
               ("\n", False), ("\n\n", False), ("\n\n\n", False), ("▁▁", False), ("▁▁▁", False),
               ("<table>", False), ("</table>", False), ("<b>", False), ("</b>", False)]
# after the single characters, as Gemma 3's 255968.. (tab runs, the image
# markers, unused ids); <image_soft_token> is an added token only, one past
# the model's vocabulary (262144 in Gemma 3)
GEMMA3_TAIL = [("\t\t", False), ("<start_of_image>", True), ("<end_of_image>", True),
               ("<unused3>", False), ("<unused4>", False)]
IMAGE_TOKEN = "<image_soft_token>"
# the whitespace merges Gemma's list opens with
WHITESPACE_MERGES = [("▁", "▁"), ("▁▁", "▁"), ("\n", "\n"), ("\n\n", "\n"), ("\t", "\t")]

GEMMA_CORPUS = CORPUS + """
Hello world! The model looks at the cat. What is bold and what is not?
The user asks the model a question, and the model answers the user.
Describe the picture: a cat sat on the mat, and the dog looked at the cat.
""".split("\n")


def gemma_pieces(merge_count, keep):
    """The learned merges and the single characters of a small
    SentencePiece-style BPE as Gemma's: no prefix space (the first word of a
    line has no "▁"), "▁" before every other word, digits never merged
    (each digit a token), characters outside `keep` left to the byte
    fallback."""
    words = collections.Counter()
    for line in GEMMA_CORPUS:
        for i, w in enumerate(line.split(" ")):
            w = "".join(ch for ch in w if keep(ch) and not ch.isdigit())
            if w:
                words[tuple(w if i == 0 else "▁" + w)] += 1
    merges = train_merges(words, merge_count)
    alphabet = sorted({ch for w in words for ch in w} | set("0123456789") | {"▁"})
    return merges, alphabet


def make_tokenizer(kind):
    """Gemma's tokenizer.json, small: the Replace(" " -> "▁") normalizer,
    the Split(" ", MergedWithPrevious) pre-tokenizer, TemplateProcessing
    "<bos> $A", the Replace/ByteFallback/Fuse decoder, BPE with <unk>,
    fuse_unk and byte_fallback; ids: the added head, <0x00>..<0xFF>, the
    merged pieces in merge order, the single characters, (Gemma 3) the
    added tail and <image_soft_token>. kind "gemma" (Gemma and Gemma 2:
    merges as "a b") or "gemma3" (merges as pairs, ignore_merges written,
    the image tokens)."""
    g3 = kind == "gemma3"
    if g3:
        merges, alphabet = gemma_pieces(150, lambda ch: ch.isascii())
        head = GEMMA3_HEAD
    else:
        merges, alphabet = gemma_pieces(120, lambda ch: ch.isascii() and ch not in "!?")
        head = GEMMA_HEAD
    vocab = {}
    added = []
    for content, special in head:
        added.append(added_token(len(vocab), content, special=special))
        vocab[content] = len(vocab)
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    all_merges = list(WHITESPACE_MERGES) + merges
    singles = {a for a, _ in WHITESPACE_MERGES} | set(alphabet)
    for a, b in merges:
        assert a + b not in vocab, (a, b)
        vocab[a + b] = len(vocab)
    for ch in sorted(singles):
        vocab.setdefault(ch, len(vocab))
    tail = GEMMA3_TAIL if g3 else []
    for a, b in WHITESPACE_MERGES:
        if a + b not in dict(tail):
            vocab.setdefault(a + b, len(vocab))
    if g3:
        for content, special in tail:
            added.append(added_token(len(vocab), content, special=special))
            vocab[content] = len(vocab)
    model_vocab = dict(vocab)
    full = dict(vocab)
    if g3:
        added.append(added_token(len(vocab), IMAGE_TOKEN))
        full[IMAGE_TOKEN] = len(vocab)
    fields = dict(unk_token="<unk>", fuse_unk=True, byte_fallback=True)
    model = bpe_model(model_vocab, all_merges, g3, **fields)
    if not g3:
        del model["ignore_merges"]  # the older files have no such field
    tok = tokenizer_json(
        added,
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
         "invert": False},
        template(("<bos>", 2)),
        {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]},
        model)
    if g3:
        cfg = {"add_bos_token": True, "add_eos_token": False,
               "added_tokens_decoder": added_decoder(added), "boi_token": "<start_of_image>",
               "bos_token": "<bos>", "clean_up_tokenization_spaces": False,
               "eoi_token": "<end_of_image>", "eos_token": "<end_of_turn>",
               "extra_special_tokens": {"boi_token": "<start_of_image>",
                                        "eoi_token": "<end_of_image>",
                                        "image_token": IMAGE_TOKEN},
               "image_token": IMAGE_TOKEN, "model_max_length": 32768, "pad_token": "<pad>",
               "padding_side": "left", "sp_model_kwargs": None,
               "spaces_between_special_tokens": False, "tokenizer_class": "GemmaTokenizer",
               "unk_token": "<unk>", "use_default_system_prompt": False}
    else:
        cfg = {"add_bos_token": True, "add_eos_token": False,
               "added_tokens_decoder": added_decoder(added),
               "additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"],
               "bos_token": "<bos>", "clean_up_tokenization_spaces": False, "eos_token": "<eos>",
               "legacy": None, "model_max_length": 1000000000000000019884624838656,
               "pad_token": "<pad>", "sp_model_kwargs": {}, "spaces_between_special_tokens": False,
               "tokenizer_class": "GemmaTokenizer", "unk_token": "<unk>",
               "use_default_system_prompt": False}
    # the real template of the release (tests/chat/templates/)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "chat", "templates",
                        "gemma-3-it.jinja" if g3 else "gemma-2-2b-it.jinja")
    with open(path, encoding="utf-8") as fp:
        cfg["chat_template"] = fp.read()
    return dict(kind=kind, files={"tokenizer.json": json.dumps(tok, ensure_ascii=False, indent=2),
                                  "tokenizer_config.json": cfg},
                vocab=full, model_vocab_size=len(model_vocab),
                added={t["content"]: t["special"] for t in added},
                specials={t["content"] for t in added}, bos=2, byte_level=False)


def token_text(tok, token):
    """A token's readable text: an added token as it is written, <0xNN> as
    its byte (written <0xNN> when it does not complete a character), "▁"
    as a space."""
    if token in tok["added"]:
        return token
    m = re.fullmatch(r"<0x([0-9A-F]{2})>", token)
    if m:
        return readable(bytes([int(m.group(1), 16)]))
    return token.replace("▁", " ")


def check_tokenization(tok, enc):
    """The ids and tokens agree with the vocabulary; the post-processor
    added exactly the <bos> in front; the tokens give the text back byte
    for byte (added tokens as written, "▁" as a space, byte tokens as their
    bytes: Gemma adds no prefix space); the library's decoder gives it back
    too, less the special tokens when it skips them."""
    ids, tokens, mask = enc["ids"], enc["tokens"], enc["special_tokens_mask"]
    inv = {i: t for t, i in tok["vocab"].items()}
    assert [inv[i] for i in ids] == tokens, "ids and tokens disagree with the vocabulary"
    assert ids[0] == tok["bos"] and mask[0] == 1 and not any(mask[1:]), (ids, mask)
    assert ids[1:] == enc["ids_without_special"]
    got = b""
    for t in tokens[1:]:
        if t in tok["added"]:
            got += t.encode("utf-8")
        elif re.fullmatch(r"<0x[0-9A-F]{2}>", t):
            got += bytes([int(t[3:5], 16)])
        else:
            got += t.replace("▁", " ").encode("utf-8")
    assert got == enc["text"].encode("utf-8"), (got, enc["text"])
    specials = sorted((t for t, s in tok["added"].items() if s), key=len, reverse=True)
    kept = re.sub("|".join(re.escape(s) for s in specials), "", enc["text"])
    assert enc["decoded_skip_special"] == kept, (enc["decoded_skip_special"], kept)
    assert enc["decoded"] == "<bos>" + enc["text"], enc["decoded"]


# ---------------------------------------------------------------- variants

SPECIAL_SENTENCES = {
    "gemma": "<start_of_turn>user\nHello world!<end_of_turn>\n<start_of_turn>model\nThe cat sat.",
    "gemma2": "<start_of_turn>user\nThe dog sat on the mat.<end_of_turn>\n<eos>The cat<unk> sat.",
    "gemma3": "<start_of_turn>user\nWhat is <b>bold</b>?<end_of_turn>\n<start_of_turn>model\nThe cat.",
    "gemma3_mm": "<start_of_turn>user\n<start_of_image><end_of_image>Describe the cat.<end_of_turn>\n",
}

LINEAR8 = {"factor": 8.0, "rope_type": "linear"}

VARIANTS = [
    dict(name="gemma", family="gemma", dtype="BF16", layers=2, hidden=32, heads=4, kv_heads=1,
         head_dim=16, inter=64, eps=1e-6, theta=10000.0, tokenizer="gemma", shards=1,
         version="4.42.4", qk_std=1.8, norm_std=0.3, embed_std=0.25, gate_std=2.5, up_std=3.0,
         about="BF16, multi-query (4 heads on 1 KV head), head_dim 16 with hidden 32, GeGLU "
               "(gelu_pytorch_tanh), RMSNorm with 1 + w, embeddings scaled by sqrt(hidden), "
               "tied, Gemma's tokenizer.json (byte fallback, <bos> template)"),
    dict(name="gemma2", family="gemma2", dtype="F32", layers=4, hidden=32, heads=4, kv_heads=2,
         head_dim=16, inter=48, eps=1e-6, theta=10000.0, window=4, qpas=64,
         attn_cap=3.0, final_cap=5.0, tokenizer="gemma", shards=1, version="4.42.4",
         qk_std=2.8, norm_std=0.3, embed_std=0.25, gate_std=2.0,
         about="F32, 4 layers (0 and 2 sliding, 1 and 3 global, no layer_types), "
               "sliding_window 4, four norms per layer, attn_logit_softcapping 3, "
               "final_logit_softcapping 5, query_pre_attn_scalar 64 (head_dim 16), tied"),
    dict(name="gemma3", family="gemma3", dtype="F16", layers=7, hidden=32, heads=4, kv_heads=2,
         head_dim=16, inter=64, eps=1e-6, theta=1000000.0, local_theta=10000.0,
         scaling=LINEAR8, window=5, qpas=24, pattern=6, tokenizer="gemma3", shards=1,
         version="4.50.0.dev0", qk_norm_mean=0.8, norm_std=0.3, embed_std=0.25, gate_std=2.0,
         about="F16, Gemma3ForCausalLM (model_type gemma3_text), 7 layers (0-4 and 6 sliding, "
               "5 global) by sliding_window_pattern 6 without layer_types, sliding_window 5, "
               "q_norm/k_norm with 1 + w, rope_local_base_freq 10000 on sliding layers, "
               "rope_theta 1e6 with linear scaling 8 on global ones, query_pre_attn_scalar 24, "
               "no soft caps, tied, vocab_size 63 rows past the tokenizer"),
    dict(name="gemma3_mm", family="gemma3", multimodal=True, dtype="BF16", layers=7, hidden=32,
         heads=4, kv_heads=2, head_dim=16, inter=64, eps=1e-6, theta=1000000.0,
         local_theta=10000.0, scaling=LINEAR8, window=5, qpas=24, pattern=6,
         tokenizer="gemma3", shards=2, version="4.53.0", qk_norm_mean=0.8, norm_std=0.3,
         embed_std=0.25, gate_std=2.0,
         about="BF16, Gemma3ForConditionalGeneration (model_type gemma3) as the Hub publishes "
               "it: text_config with layer_types and the keys at Gemma3TextConfig's defaults "
               "left out, a small SigLIP vision_config, language_model.model.* names, "
               "vision_tower.* and multi_modal_projector.* tensors a text loader ignores, two "
               "shards; the text model's numbers as gemma3's"),
]

# a small SigLIP tower, only to be ignored
VISION = dict(hidden=16, inter=32, layers=1, heads=2, patch=4, image=16, channels=3,
              tokens_per_image=4)


def sentences(v):
    return [SENTENCES["plain"], SPECIAL_SENTENCES[v["name"]], SENTENCES["unicode"]]


def layer_types(v, alt=()):
    """Each layer's kind. Gemma: every layer global. Gemma 2: layer i slides
    iff i is even (modeling_gemma2.py's `not bool(layer_idx % 2)`;
    configuration_gemma2.py writes it `bool((i + 1) % 2)` since layer_types
    exist). Gemma 3: layer i slides iff (i + 1) % sliding_window_pattern != 0
    (configuration_gemma3.py; 4.50's modeling file the same rule), so with
    6 the sixth is global; gemma3_mm states the same list as layer_types."""
    L = v["layers"]
    if v["family"] == "gemma":
        kinds = ["global"] * L
    elif v["family"] == "gemma2":
        kinds = ["sliding" if i % 2 == 0 else "global" for i in range(L)]
    else:
        kinds = ["sliding" if (i + 1) % v["pattern"] else "global" for i in range(L)]
    if "swap_sliding_global" in alt:
        kinds = ["global" if k == "sliding" else "sliding" for k in kinds]
    return kinds


def default_inv_freq(theta, d):
    return np.array([1.0 / theta ** (2 * i / d) for i in range(d // 2)])


def layer_rope(v, kind, alt=()):
    """(base, scaling, inv_freq) of a layer of this kind. Gemma 3's global
    layers: rope_theta with rope_scaling (linear: every frequency divided by
    factor, _compute_linear_scaling_rope_parameters); its sliding layers:
    rope_local_base_freq with the default (unscaled) frequencies."""
    d = v["head_dim"]
    if v["family"] != "gemma3":
        return v["theta"], None, default_inv_freq(v["theta"], d)
    if kind == "sliding":
        base = v["theta"] if "local_uses_global_base" in alt else v["local_theta"]
        scaling = v["scaling"] if "scaling_on_local" in alt else None
    else:
        base, scaling = v["theta"], (None if "no_linear_scaling" in alt else v["scaling"])
    f = default_inv_freq(base, d)
    if scaling is not None:
        f = f / scaling["factor"]
    return base, scaling, f


def attention_scale(v, alt=()):
    """Gemma: head_dim^-0.5; Gemma 2 and 3: query_pre_attn_scalar^-0.5."""
    if v["family"] == "gemma":
        if "scale_hidden_over_heads" in alt:
            return (v["hidden"] / v["heads"]) ** -0.5
        return v["head_dim"] ** -0.5
    if "scale_head_dim" in alt:
        return v["head_dim"] ** -0.5
    return v["qpas"] ** -0.5


# ---------------------------------------------------------------- weights

def gemma_weights(v, vocab_size, rng):
    """The text model's parameters by Gemma's names (model. prefix),
    nn.Linear weights [out][in]; the RMSNorm weights drawn around 0 (the
    network multiplies by 1 + w), Gemma 3's q_norm / k_norm around
    qk_norm_mean."""
    H, I, L = v["hidden"], v["inter"], v["layers"]
    heads, kv, d = v["heads"], v["kv_heads"], v["head_dim"]
    ns = v["norm_std"]
    qk = v.get("qk_std", 1.0)
    w = {"model.embed_tokens.weight": rng.normal(0, v["embed_std"], (vocab_size, H))}
    for l in range(L):
        p = "model.layers.%d." % l
        w[p + "input_layernorm.weight"] = rng.normal(0, ns, H)
        w[p + "self_attn.q_proj.weight"] = rng.normal(0, qk / math.sqrt(H), (heads * d, H))
        w[p + "self_attn.k_proj.weight"] = rng.normal(0, qk / math.sqrt(H), (kv * d, H))
        w[p + "self_attn.v_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(H), (kv * d, H))
        w[p + "self_attn.o_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(heads * d), (H, heads * d))
        if v["family"] == "gemma3":
            w[p + "self_attn.q_norm.weight"] = rng.normal(v["qk_norm_mean"], 0.3, d)
            w[p + "self_attn.k_norm.weight"] = rng.normal(v["qk_norm_mean"], 0.3, d)
        w[p + "post_attention_layernorm.weight"] = rng.normal(0, ns, H)
        if v["family"] != "gemma":
            w[p + "pre_feedforward_layernorm.weight"] = rng.normal(0, ns, H)
            w[p + "post_feedforward_layernorm.weight"] = rng.normal(0, ns, H)
        w[p + "mlp.gate_proj.weight"] = rng.normal(0, v["gate_std"] / math.sqrt(H), (I, H))
        w[p + "mlp.up_proj.weight"] = rng.normal(0, v.get("up_std", 1.0) / math.sqrt(H), (I, H))
        w[p + "mlp.down_proj.weight"] = rng.normal(0, 1.0 / math.sqrt(I), (H, I))
    w["model.norm.weight"] = rng.normal(0, ns, H)
    return w


def vision_weights(rng, text_hidden):
    """A one-layer SigLIP vision tower and Gemma 3's projector, by the Hub's
    names: nothing a text loader reads."""
    V = VISION
    h, i, c, p = V["hidden"], V["inter"], V["channels"], V["patch"]
    patches = (V["image"] // p) ** 2
    t = "vision_tower.vision_model."
    w = {t + "embeddings.patch_embedding.weight": rng.normal(0, 0.1, (h, c, p, p)),
         t + "embeddings.patch_embedding.bias": rng.normal(0, 0.1, h),
         t + "embeddings.position_embedding.weight": rng.normal(0, 0.1, (patches, h))}
    for l in range(V["layers"]):
        q = t + "encoder.layers.%d." % l
        for n in ("layer_norm1", "layer_norm2"):
            w[q + n + ".weight"] = 1 + rng.normal(0, 0.1, h)
            w[q + n + ".bias"] = rng.normal(0, 0.1, h)
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            w[q + "self_attn.%s.weight" % n] = rng.normal(0, 0.2, (h, h))
            w[q + "self_attn.%s.bias" % n] = rng.normal(0, 0.1, h)
        w[q + "mlp.fc1.weight"] = rng.normal(0, 0.2, (i, h))
        w[q + "mlp.fc1.bias"] = rng.normal(0, 0.1, i)
        w[q + "mlp.fc2.weight"] = rng.normal(0, 0.2, (h, i))
        w[q + "mlp.fc2.bias"] = rng.normal(0, 0.1, h)
    w[t + "post_layernorm.weight"] = 1 + rng.normal(0, 0.1, h)
    w[t + "post_layernorm.bias"] = rng.normal(0, 0.1, h)
    w["multi_modal_projector.mm_input_projection_weight"] = rng.normal(0, 0.2, (h, text_hidden))
    w["multi_modal_projector.mm_soft_emb_norm.weight"] = rng.normal(0, 0.1, h)
    return w


# ------------------------------------------------------ float64 reference

def gemma_norm(x, g, eps, offset=1.0):
    """Gemma's RMSNorm: x / sqrt(mean(x^2) + eps) * (1 + w), in float32 in
    transformers (here float64), the weight added to 1 before multiplying."""
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (offset + g)


def gemma_attend(q, k, v, kv_of, allowed, scale, cap, cap_after_mask=False):
    """q: [n][heads][d], k, v: [n][kv][d]. Each score q.k * scale, then (with
    a cap) cap * tanh(score / cap), then the mask, then softmax: weights
    outside `allowed` exactly 0. With cap_after_mask, the wrong order: the
    masked scores (future keys and those outside the window) become -cap
    and keep a share. Returns the weights [heads][n][n] and the context
    [n][heads * d]."""
    n, heads, d = q.shape
    probs = np.zeros((heads, n, n))
    ctx = np.zeros((n, heads, d))
    for h in range(heads):
        g = kv_of[h]
        for i in range(n):
            if cap_after_mask:
                js = list(range(n))
                s = np.array([q[i, h] @ k[j, g] * scale if allowed[i][j] else -math.inf for j in js])
                s = np.where(np.isinf(s), -cap, cap * np.tanh(s / cap))
            else:
                js = [j for j in range(n) if allowed[i][j]]
                s = np.array([q[i, h] @ k[j, g] * scale for j in js])
                if cap is not None:
                    s = cap * np.tanh(s / cap)
            p = softmax(s)
            probs[h, i, js] = p
            ctx[i, h] = sum(pj * v[j, g] for pj, j in zip(p, js))
    return probs, ctx.reshape(n, heads * d)


def allowed_mask(n, window):
    """Causal, and with a window query i sees key j iff i - window < j <= i
    (masking_utils' sliding_window_overlay kv_idx > q_idx - sliding_window
    under causal_mask_function kv_idx <= q_idx; Gemma 2's older decoder
    layer masks torch.tril(..., diagonal=-sliding_window): the same keys)."""
    return [[j <= i and (window is None or j > i - window) for j in range(n)] for i in range(n)]


def layer_window(v, kind, alt=()):
    if kind != "sliding":
        return None
    w = v["window"]
    if "window_plus_one" in alt:
        w += 1
    if "window_minus_one" in alt:
        w -= 1
    return w


def forward(w, v, ids, alt=(), extra=None, hook=None):
    """GemmaModel / Gemma2Model / Gemma3TextModel with output_attentions and
    output_hidden_states, then the tied head on the last position and the
    final soft cap. Returns the attention weights [layers][heads][n][n],
    the hidden states [layers + 1][n][hidden] (the scaled embeddings first,
    the last after the final norm), the logits after the soft cap and
    before it.

    hook (generate_interventions.py's): None, or hook(name, layer, value)
    returning the value the pass goes on with, at TransformerLens' hook
    points: "resid_pre" (the stream entering a layer), "z" (each head's
    attention-weighted values before o_proj, [n][heads * head_dim]),
    "attn_out" and "mlp_out" (what the sublayer adds to the stream: after
    Gemma 2's and 3's post_attention_layernorm / post_feedforward_layernorm)
    and "resid_final" (the stream before model.norm; layer None)."""
    if hook is None:
        def hook(name, layer, value):
            return value
    n, H, eps = len(ids), v["hidden"], v["eps"]
    heads, kv, d = v["heads"], v["kv_heads"], v["head_dim"]
    fam = v["family"]
    off = 0.0 if "norm_w" in alt else 1.0
    qk_off = 0.0 if "qk_norm_w" in alt else 1.0
    kv_of = [h // (heads // kv) for h in range(heads)]
    scale = attention_scale(v, alt)
    cap = None if "no_attn_softcap" in alt else v.get("attn_cap")
    kinds = layer_types(v, alt)
    act = gelu if "gelu_erf" in alt else gelu_new  # gelu_pytorch_tanh is the tanh form
    x = w["model.embed_tokens.weight"][ids]
    if "embed_unscaled" not in alt:
        x = x * math.sqrt(H)
    hidden, attentions = [x], []
    sandwich = fam != "gemma" and "no_sandwich_norms" not in alt
    for l in range(v["layers"]):
        p = "model.layers.%d." % l
        x = hook("resid_pre", l, x)
        freqs = layer_rope(v, kinds[l], alt)[2]
        h = gemma_norm(x, w[p + "input_layernorm.weight"], eps, off)
        q, k, val = (h @ w[p + "self_attn.%s_proj.weight" % m].T for m in "qkv")
        q, k, val = q.reshape(n, heads, d), k.reshape(n, kv, d), val.reshape(n, kv, d)
        if fam == "gemma3":
            q = gemma_norm(q, w[p + "self_attn.q_norm.weight"], eps, qk_off)
            k = gemma_norm(k, w[p + "self_attn.k_norm.weight"], eps, qk_off)
        q, k = rope(q, freqs), rope(k, freqs)
        allowed = allowed_mask(n, layer_window(v, kinds[l], alt))
        probs, ctx = gemma_attend(q, k, val, kv_of, allowed, scale, cap,
                                  "softcap_after_mask" in alt)
        attentions.append(probs)
        ctx = hook("z", l, ctx)
        o = w[p + "self_attn.o_proj.weight"]
        if extra is not None:
            vw = value_weighted(probs, val, kv_of, lambda hh: o[:, hh * d:(hh + 1) * d].T)
            extra.setdefault("value_weighted", []).append(vw[0])
            extra.setdefault("value_weighted_sum", []).append(vw[1])
        a = ctx @ o.T
        if fam == "gemma":
            # Gemma's post_attention_layernorm is the norm before the MLP
            a = hook("attn_out", l, a)
            x = x + a
            h = gemma_norm(x, w[p + "post_attention_layernorm.weight"], eps, off)
        else:
            if sandwich:
                a = gemma_norm(a, w[p + "post_attention_layernorm.weight"], eps, off)
            a = hook("attn_out", l, a)
            x = x + a
            h = gemma_norm(x, w[p + "pre_feedforward_layernorm.weight"], eps, off)
        m = act(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
        m = m @ w[p + "mlp.down_proj.weight"].T
        if sandwich:
            m = gemma_norm(m, w[p + "post_feedforward_layernorm.weight"], eps, off)
        m = hook("mlp_out", l, m)
        x = x + m
        hidden.append(x)
    x = hook("resid_final", None, x)
    hidden[-1] = gemma_norm(x, w["model.norm.weight"], eps, off)
    raw = w["model.embed_tokens.weight"] @ hidden[-1][-1]
    fc = v.get("final_cap")
    logits = raw if fc is None or "no_final_softcap" in alt else fc * np.tanh(raw / fc)
    return np.stack(attentions), np.stack(hidden), logits, raw


def wrong_conventions(v):
    fam = v["family"]
    out = ["norm_w", "embed_unscaled", "gelu_erf"]
    if fam == "gemma":
        out.append("scale_hidden_over_heads")
    else:
        out += ["scale_head_dim", "no_sandwich_norms", "swap_sliding_global",
                "window_plus_one", "window_minus_one"]
    if fam == "gemma2":
        out += ["softcap_after_mask", "no_attn_softcap", "no_final_softcap"]
    if fam == "gemma3":
        out += ["local_uses_global_base", "no_linear_scaling", "scaling_on_local", "qk_norm_w"]
    return out


CONVENTION_TEXT = {
    "norm_w": "every RMSNorm by w instead of 1 + w",
    "embed_unscaled": "the embeddings not multiplied by sqrt(hidden)",
    "gelu_erf": "the erf GELU for gelu_pytorch_tanh",
    "scale_hidden_over_heads": "scores by (hidden / heads)^-1/2 instead of head_dim^-1/2",
    "scale_head_dim": "scores by head_dim^-1/2 instead of query_pre_attn_scalar^-1/2",
    "no_sandwich_norms": "no post_attention / post_feedforward norm on the branches",
    "swap_sliding_global": "sliding and global layers swapped",
    "window_plus_one": "a window one key longer",
    "window_minus_one": "a window one key shorter",
    "softcap_after_mask": "the soft cap after the mask (masked scores -cap)",
    "no_attn_softcap": "no attention soft cap",
    "no_final_softcap": "no final soft cap on the logits",
    "local_uses_global_base": "rope_theta (unscaled) on sliding layers",
    "no_linear_scaling": "no linear scaling on global layers",
    "scaling_on_local": "the linear scaling on sliding layers too",
    "qk_norm_w": "q_norm / k_norm by w instead of 1 + w",
}


# ------------------------------------------------------ PyTorch cross-check

def torch_gemma_norm(x, g, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + g)


def torch_repeat_kv(x, n_rep):
    """[kv][n][d] -> [kv * n_rep][n][d] by expand and reshape."""
    kv, n, d = x.shape
    return x[:, None].expand(kv, n_rep, n, d).reshape(kv * n_rep, n, d)


def torch_inv_freq(v, kind):
    d = v["head_dim"]
    if v["family"] != "gemma3":
        base, scaling = v["theta"], None
    elif kind == "sliding":
        base, scaling = v["local_theta"], None
    else:
        base, scaling = v["theta"], v["scaling"]
    f = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    if scaling is not None:
        f = f / scaling["factor"]
    return f


def torch_gemma(w, v, ids, attentions, hidden, logits, raw, label):
    """The same network in torch ops, laid out as the modeling files lay it
    out: [heads][n][d] states, cos / sin of cat(freqs, freqs) with
    rotate_half, repeat_kv, matmul * scaling, tanh soft cap, an additive
    mask of the dtype's minimum, softmax, the sandwich norms, the tied head
    and the final cap through F.linear and tanh."""
    n, H, eps = len(ids), v["hidden"], v["eps"]
    heads, kv, d = v["heads"], v["kv_heads"], v["head_dim"]
    fam = v["family"]
    kinds = layer_types(v)
    errs = []
    with torch.no_grad():
        x = F.embedding(torch.tensor(ids), T(w["model.embed_tokens.weight"]))
        x = x * torch.tensor(H ** 0.5, dtype=torch.float64)
        errs.append(compare(label + ": embeddings", hidden[0], x))
        pos = torch.arange(n, dtype=torch.float64)
        i = torch.arange(n)[:, None]
        j = torch.arange(n)[None, :]
        big = torch.finfo(torch.float64).min
        for l in range(v["layers"]):
            p = "model.layers.%d." % l
            tf = torch_inv_freq(v, kinds[l])
            errs.append(compare("%s: layer %d inv_freq" % (label, l), layer_rope(v, kinds[l])[2], tf))
            emb = torch.cat((torch.outer(pos, tf), torch.outer(pos, tf)), dim=-1)
            cos, sin = emb.cos()[None], emb.sin()[None]
            visible = j <= i
            if kinds[l] == "sliding":
                visible = visible & (j > i - v["window"])
            mask = torch.where(visible, torch.tensor(0.0, dtype=torch.float64),
                               torch.tensor(big, dtype=torch.float64))
            h = torch_gemma_norm(x, T(w[p + "input_layernorm.weight"]), eps)
            q = F.linear(h, T(w[p + "self_attn.q_proj.weight"])).view(n, heads, d).transpose(0, 1)
            k = F.linear(h, T(w[p + "self_attn.k_proj.weight"])).view(n, kv, d).transpose(0, 1)
            val = F.linear(h, T(w[p + "self_attn.v_proj.weight"])).view(n, kv, d).transpose(0, 1)
            if fam == "gemma3":
                q = torch_gemma_norm(q, T(w[p + "self_attn.q_norm.weight"]), eps)
                k = torch_gemma_norm(k, T(w[p + "self_attn.k_norm.weight"]), eps)
            q = q * cos + torch_rotate_half(q) * sin
            k = k * cos + torch_rotate_half(k) * sin
            k = torch_repeat_kv(k, heads // kv)
            val = torch_repeat_kv(val, heads // kv)
            scores = torch.matmul(q, k.transpose(1, 2)) * attention_scale(v)
            if v.get("attn_cap") is not None:
                scores = torch.tanh(scores / v["attn_cap"]) * v["attn_cap"]
            probs = torch.softmax(scores + mask, dim=-1)
            errs.append(compare("%s: layer %d attention" % (label, l), attentions[l], probs))
            ctx = torch.matmul(probs, val).transpose(0, 1).reshape(n, heads * d)
            a = F.linear(ctx, T(w[p + "self_attn.o_proj.weight"]))
            if fam == "gemma":
                x = x + a
                h = torch_gemma_norm(x, T(w[p + "post_attention_layernorm.weight"]), eps)
            else:
                x = x + torch_gemma_norm(a, T(w[p + "post_attention_layernorm.weight"]), eps)
                h = torch_gemma_norm(x, T(w[p + "pre_feedforward_layernorm.weight"]), eps)
            m = F.linear(F.gelu(F.linear(h, T(w[p + "mlp.gate_proj.weight"])), approximate="tanh")
                         * F.linear(h, T(w[p + "mlp.up_proj.weight"])),
                         T(w[p + "mlp.down_proj.weight"]))
            if fam != "gemma":
                m = torch_gemma_norm(m, T(w[p + "post_feedforward_layernorm.weight"]), eps)
            x = x + m
            if l + 1 < v["layers"]:
                errs.append(compare("%s: layer %d hidden states" % (label, l), hidden[l + 1], x))
        x = torch_gemma_norm(x, T(w["model.norm.weight"]), eps)
        errs.append(compare(label + ": last hidden states (model.norm)", hidden[-1], x))
        out = F.linear(x[-1], T(w["model.embed_tokens.weight"]))
        errs.append(compare(label + ": logits before the soft cap", raw, out))
        if v.get("final_cap") is not None:
            out = torch.tanh(out / v["final_cap"]) * v["final_cap"]
        errs.append(compare(label + ": logits", logits, out))
    return max(errs)


# ------------------------------------------------------------ the folders

TEXT_DEFAULTS_GEMMA3 = {
    # Gemma3TextConfig's defaults: a nested text_config written by
    # save_pretrained leaves out every key equal to them
    "attention_bias": False, "attention_dropout": 0.0, "attn_logit_softcapping": None,
    "bos_token_id": 2, "eos_token_id": 1, "final_logit_softcapping": None,
    "hidden_activation": "gelu_pytorch_tanh", "initializer_range": 0.02,
    "max_position_embeddings": 131072, "pad_token_id": 0, "rms_norm_eps": 1e-06,
    "rope_local_base_freq": 10000.0, "rope_theta": 1000000.0, "tie_word_embeddings": True,
    "use_bidirectional_attention": False, "use_cache": True,
}


def config_json(v, vocab_size, tok):
    """config.json as the family's Config class writes it in the release of
    `version`."""
    fam = v["family"]
    common = {"attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 2,
              "head_dim": v["head_dim"], "hidden_size": v["hidden"],
              "initializer_range": 0.02, "intermediate_size": v["inter"],
              "num_attention_heads": v["heads"], "num_hidden_layers": v["layers"],
              "num_key_value_heads": v["kv_heads"], "pad_token_id": 0,
              "rms_norm_eps": v["eps"], "use_cache": True, "vocab_size": vocab_size}
    if fam == "gemma":
        cfg = dict(common, architectures=["GemmaForCausalLM"], eos_token_id=1,
                   hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh",
                   max_position_embeddings=8192, model_type="gemma", rope_theta=v["theta"])
    elif fam == "gemma2":
        cfg = dict(common, architectures=["Gemma2ForCausalLM"],
                   attn_logit_softcapping=v["attn_cap"], cache_implementation="hybrid",
                   eos_token_id=1, final_logit_softcapping=v["final_cap"],
                   hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh",
                   max_position_embeddings=8192, model_type="gemma2",
                   query_pre_attn_scalar=v["qpas"], rope_theta=v["theta"],
                   sliding_window=v["window"])
    elif not v.get("multimodal"):
        cfg = dict(common, architectures=["Gemma3ForCausalLM"], attn_logit_softcapping=None,
                   cache_implementation="hybrid",
                   eos_token_id=[1, tok["vocab"]["<end_of_turn>"]], final_logit_softcapping=None,
                   hidden_activation="gelu_pytorch_tanh", max_position_embeddings=32768,
                   model_type="gemma3_text", query_pre_attn_scalar=v["qpas"],
                   rope_local_base_freq=v["local_theta"], rope_scaling=dict(v["scaling"]),
                   rope_theta=v["theta"], sliding_window=v["window"],
                   sliding_window_pattern=v["pattern"])
    else:
        text = dict(common, attn_logit_softcapping=None, eos_token_id=1,
                    final_logit_softcapping=None, hidden_activation="gelu_pytorch_tanh",
                    layer_types=[{"sliding": "sliding_attention", "global": "full_attention"}[k]
                                 for k in layer_types(v)],
                    max_position_embeddings=131072, model_type="gemma3_text",
                    query_pre_attn_scalar=v["qpas"], rope_local_base_freq=v["local_theta"],
                    rope_scaling=dict(v["scaling"]), rope_theta=v["theta"],
                    sliding_window=v["window"], tie_word_embeddings=True,
                    use_bidirectional_attention=False)
        text = {key: val for key, val in text.items()
                if key not in TEXT_DEFAULTS_GEMMA3 or TEXT_DEFAULTS_GEMMA3[key] != val}
        V = VISION
        return {"architectures": ["Gemma3ForConditionalGeneration"],
                "boi_token_index": tok["vocab"]["<start_of_image>"],
                "eoi_token_index": tok["vocab"]["<end_of_image>"],
                "eos_token_id": [1, tok["vocab"]["<end_of_turn>"]],
                "image_token_index": tok["vocab"][IMAGE_TOKEN], "initializer_range": 0.02,
                "mm_tokens_per_image": V["tokens_per_image"], "model_type": "gemma3",
                "text_config": text, "torch_dtype": torch_dtype_name(v["dtype"]),
                "transformers_version": v["version"],
                "vision_config": {"hidden_size": V["hidden"], "image_size": V["image"],
                                  "intermediate_size": V["inter"],
                                  "model_type": "siglip_vision_model",
                                  "num_attention_heads": V["heads"],
                                  "num_hidden_layers": V["layers"], "patch_size": V["patch"],
                                  "vision_use_head": False}}
    cfg.update(torch_dtype=torch_dtype_name(v["dtype"]), transformers_version=v["version"])
    return cfg


def file_tensors(v, values):
    """name in the file -> (dtype, shape, bytes), and the float64 values
    each weight holds as stored, by the text model's name."""
    tensors, back = {}, {}
    prefix = "language_model." if v.get("multimodal") else ""
    for name, a in values.items():
        data, b = stored(a, v["dtype"])
        text = not name.startswith(("vision_tower.", "multi_modal_projector."))
        tensors[(prefix if text else "") + name] = (v["dtype"], np.shape(a), data)
        if text:
            back[name] = b
    return tensors, back


def weight_order(name):
    """state_dict order: the language model (embeddings, layers, final
    norm), then the projector and the vision tower."""
    rank = ["input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
            "self_attn.o_proj", "self_attn.q_norm", "self_attn.k_norm",
            "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm",
            "mlp"]
    group = 2 if name.startswith("vision_tower.") else 1 if name.startswith("multi_modal") else 0
    m = re.search(r"\.layers\.(\d+)\.", name)
    if m and group == 0:
        tail = name[m.end():]
        pos = next((i for i, r in enumerate(rank) if tail.startswith(r)), len(rank))
        return (group, 1, int(m.group(1)), pos, tail)
    if group == 0:
        return (0, 2 if name.endswith("model.norm.weight") else 0, 0, 0, name)
    return (group, 0, 0, 0, name)


def write_weights(d, v, tensors):
    """model.safetensors, or two shards split inside the fourth layer (the
    rest of the text model, the projector and the vision tower in the
    second) and model.safetensors.index.json."""
    meta = {"format": "pt"}
    names = sorted(tensors, key=weight_order)
    if v["shards"] == 1:
        write_safetensors(os.path.join(d, "model.safetensors"), tensors, names, meta)
        return
    cut = names.index("language_model.model.layers.3.self_attn.v_proj.weight")
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


def in_dtype(x, dtype):
    """x rounded to the checkpoint's dtype, as transformers casts the
    embedding scale to the weights' dtype."""
    return float(stored(np.array([x]), dtype)[1][0])


def derived(v, vocab_size, tok, tok_size, tensors):
    """What a loader must read from the folder, for the C tests to check."""
    kinds = layer_types(v)
    ropes = [layer_rope(v, k) for k in kinds]
    glob = layer_rope(v, "global")
    fam = v["family"]
    out = {"model_type": {"gemma": "gemma", "gemma2": "gemma2"}.get(
               fam, "gemma3" if v.get("multimodal") else "gemma3_text"),
           "layers": v["layers"], "hidden": v["hidden"], "heads": v["heads"],
           "kv_heads": v["kv_heads"], "head_dim": v["head_dim"], "intermediate": v["inter"],
           "position_embedding": "rotary", "norm": "rmsnorm", "norm_weight_offset": 1.0,
           "norm_eps": v["eps"], "activation": "gelu_pytorch_tanh", "qkv_bias": False,
           "qk_norm": fam == "gemma3", "sandwich_norms": fam != "gemma",
           "rope_theta": glob[0], "inv_freq": [float("%.17g" % f) for f in glob[2]],
           "sliding_window": v.get("window"),
           "layer_types": kinds,
           "layer_windows": [v["window"] if k == "sliding" else 0 for k in kinds],
           "layer_rope_theta": [r[0] for r in ropes],
           "layer_rope_scaling": [r[1] for r in ropes],
           "layer_inv_freq": [[float("%.17g" % f) for f in r[2]] for r in ropes],
           "attn_logit_softcapping": v.get("attn_cap"),
           "final_logit_softcapping": v.get("final_cap"),
           "query_pre_attn_scalar": v.get("qpas"),
           "attention_scale": attention_scale(v),
           "embed_scale": math.sqrt(v["hidden"]),
           "embed_scale_in_dtype": in_dtype(math.sqrt(v["hidden"]), v["dtype"]),
           "tied": True, "vocab_size": vocab_size, "tokenizer_size": tok_size,
           "bos_id": tok["bos"]}
    if v.get("multimodal"):
        out["text_prefix"] = "language_model."
        out["ignored_tensors"] = sorted(n for n in tensors
                                        if not n.startswith("language_model."))
    return out


FOLDER_LIMIT = 300 * 1024  # a checkpoint folder stays small enough to commit
GREEDY_STEPS = 6
GREEDY_MARGIN = 1e-3


def greedy(w, v, ids):
    """transformers' generate(do_sample=False) by the reference (the whole
    sequence recomputed each step, the largest capped logit, the first
    among equals), stopping before a step closer than GREEDY_MARGIN of the
    largest |logit|."""
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
    vocab_size = tok_size
    if v["family"] == "gemma3":
        # Gemma 3: 262208 rows for 262145 ids, <image_soft_token> the last id
        vocab_size = tok["model_vocab_size"] + 64
        assert tok["vocab"][IMAGE_TOKEN] == tok["model_vocab_size"] == tok_size - 1
    plain = gemma_weights(v, vocab_size, rng)
    if v.get("multimodal"):
        plain.update(vision_weights(rng, v["hidden"]))
    tensors, w = file_tensors(v, plain)
    cfg = config_json(v, vocab_size, tok)

    def write():
        d = os.path.join(out_dir, v["name"])
        os.makedirs(d, exist_ok=True)
        for stale in os.listdir(d):
            os.remove(os.path.join(d, stale))
        write_json(os.path.join(d, "config.json"), cfg, indent=2, sort_keys=True)
        write_json(os.path.join(d, "tokenizer.json"), tok["files"]["tokenizer.json"])
        write_json(os.path.join(d, "tokenizer_config.json"), tok["files"]["tokenizer_config.json"],
                   indent=2, sort_keys=True, ensure_ascii=False)
        write_weights(d, v, tensors)

    cases, cross, margins = [], 0.0, {}
    for enc in answer["encodings"]:
        check_tokenization(tok, enc)
        ids = enc["ids"]
        assert max(ids) < vocab_size
        extra = {}
        attn, hidden, logits, raw = forward(w, v, ids, extra=extra)
        roll = rollout(attn)
        label = "%s %r" % (v["name"], enc["text"])
        cross = max(cross, torch_gemma(w, v, ids, attn, hidden, logits, raw, label),
                    torch_rollout_check(label, attn, roll))
        for alt in wrong_conventions(v):
            a2, h2, l2, _ = forward(w, v, ids, (alt,))
            old = margins.get(alt, (0.0, 0.0))
            margins[alt] = (max(old[0], float(np.max(np.abs(a2 - attn)))),
                            max(old[1], relative(h2, hidden), relative(l2, logits)))
        case = {"sentence": enc["text"], "ids": ids,
                "tokens": [token_text(tok, t) for t in enc["tokens"]],
                "added": [bool(m) for m in enc["special_tokens_mask"]],
                "attentions": rounded(attn), "hidden_states": rounded(hidden),
                "rollout": rounded(roll), "logits": rounded(logits)}
        if v["family"] != "gemma":
            case["logits_uncapped"] = rounded(raw)
        case.update({"flow": rounded(attention_flow(attn)),
                     "value_weighted": rounded(np.stack(extra["value_weighted"])),
                     "value_weighted_sum": rounded(np.stack(extra["value_weighted_sum"]))})
        cases.append(case)
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
    facts = derived(v, vocab_size, tok, tok_size, tensors)
    return {"variant": v["name"], "description": v["about"], "dtype": v["dtype"],
            "layers": v["layers"], "heads": v["heads"], "hidden": v["hidden"],
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
        toks[v["name"]] = tok
        path = os.path.join(scratch, "%s.tokenizer.json" % v["name"])
        write_json(path, tok["files"]["tokenizer.json"])
        jobs.append({"name": v["name"], "files": {"tokenizer.json": path}, "texts": sentences(v)})
    answer = run_tokenizers(jobs)
    for f in os.listdir(scratch):
        os.remove(os.path.join(scratch, f))
    os.rmdir(scratch)
    return toks, answer


def self_checks(toks, answers):
    """What Gemma's tokenizer must show, each from the library."""
    by = {a["name"]: a for a in answers["tokenizers"]}
    for name, tok in toks.items():
        encs = by[name]["encodings"]
        vocab = tok["vocab"]
        # no prefix space: the first word has no "▁"
        assert encs[0]["tokens"][1] == "The", encs[0]["tokens"]
        # typed specials are one token each, not split
        assert vocab["<start_of_turn>"] in encs[1]["ids"] and vocab["<end_of_turn>"] in encs[1]["ids"]
        # "\n" is the added token, not the byte <0x0A>; CJK falls back to bytes;
        # digits one by one; the decomposed accent keeps its combining mark's bytes
        tokens = encs[2]["tokens"]
        assert "\n" in tokens and "<0x0A>" not in tokens, tokens
        assert "<0xE6>" in tokens and "<0xCC>" in tokens and "<0x81>" in tokens, tokens
        assert [t for t in tokens if t.strip("▁").isdigit()] == ["1", "2", "3", "4"], tokens
    # a typed <eos> and <unk> are their ids (Gemma 2's sentence)
    assert toks["gemma2"]["vocab"]["<eos>"] in by["gemma2"]["encodings"][1]["ids"]
    assert toks["gemma2"]["vocab"]["<unk>"] in by["gemma2"]["encodings"][1]["ids"]
    # <b> is an added token that is not special: one token, kept by the decoder
    e = by["gemma3"]["encodings"][1]
    assert "<b>" in e["tokens"] and "<b>" in e["decoded_skip_special"]
    # the image markers are single special tokens
    e = by["gemma3_mm"]["encodings"][1]
    assert "<start_of_image>" in e["tokens"] and "<start_of_image>" not in e["decoded_skip_special"]


def main_goldens(out):
    toks, answers = tokenizer_jobs()
    self_checks(toks, answers)
    report, goldens = [], []
    for i, (v, answer) in enumerate(zip(VARIANTS, answers["tokenizers"])):
        assert answer["name"] == v["name"]
        check_vocabulary(toks[v["name"]], answer)
        lengths = [len(e["ids"]) for e in answer["encodings"]]
        assert min(lengths) >= 11 and max(lengths) <= 24, lengths
        if v.get("window"):
            assert min(lengths) > v["window"] + 1, "%s: a sentence within the window" % v["name"]
        goldens.append(build_variant(v, 3000 + i, out, toks[v["name"]], answer, report))
    # every check has passed: write
    for _, write in goldens:
        write()
    os.makedirs(os.path.join(out, "golden"), exist_ok=True)
    for g, _ in goldens:
        write_json(os.path.join(out, "golden", g["variant"] + ".json"), g,
                   separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    print("generate_gemma.py: token ids from %s" % answers["library"])
    for v in VARIANTS:
        kinds = layer_types(v)
        print("  %-10s sliding layers %s, global layers %s" % (
            v["name"], [i for i, k in enumerate(kinds) if k == "sliding"],
            [i for i, k in enumerate(kinds) if k == "global"]))
    for name, cross, margins in report:
        d = os.path.join(out, name)
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        if size > FOLDER_LIMIT:
            raise CrossCheckFailed("%s: %d bytes, more than %d" % (name, size, FOLDER_LIMIT))
        print("  %-10s %6.1f KB  cross-checks within %.1e" % (name, size / 1024, cross))
        for alt, (da, dh) in sorted(margins.items()):
            print("      %-24s moves the attention weights by %.3g, hidden states or logits by %.3g"
                  % (alt, da, dh))
    print("generate_gemma.py: %d checkpoints with goldens; every cross-check within %.0e, "
          "every wrong convention beyond %.0e" % (len(goldens), TOL, MARGIN))


# ------------------------------------------------ the benchmark checkpoint

GEMMA2_2B = dict(name="gemma2-2b", family="gemma2", dtype="BF16", layers=26, hidden=2304,
                 heads=8, kv_heads=4, head_dim=256, inter=9216, eps=1e-6, theta=10000.0,
                 window=4096, qpas=256, attn_cap=50.0, final_cap=30.0, version="4.42.4")


def gemma2_2b(out):
    """A random checkpoint of Gemma-2-2B's shapes (26 layers, hidden 2304, 8
    heads on 4 KV heads of 256, intermediate 9216, 256000 tokens, tied,
    query_pre_attn_scalar 256, sliding_window 4096 on the even layers,
    attention soft cap 50, final soft cap 30), in BF16 (5.2 GB): weights
    ~ N(0, 0.02), the RMSNorm weights ~ N(0, 0.02) too, near 0 since the
    network scales by 1 + w; NumPy only, written tensor by tensor in
    slices. config.json is Gemma2Config's as the goldens' gemma2 writes it,
    and the tokenizer the small one of tests/models/gemma2 (Gemma's
    layout, 431 ids, BOS 2), so that the model loader and the server take
    the folder; the benchmark gives the network its token ids itself. No
    goldens, never committed.

        /usr/bin/python3 tests/models/generate_gemma.py --gemma2-2b DIR
    """
    from common import bf16_bits_numpy, safetensors_header
    v = GEMMA2_2B
    H, I, L, V = v["hidden"], v["inter"], v["layers"], 256000
    heads, kv, d = v["heads"], v["kv_heads"], v["head_dim"]
    shapes = [("model.embed_tokens.weight", (V, H))]
    for l in range(L):
        p = "model.layers.%d." % l
        shapes += [(p + "input_layernorm.weight", (H,)),
                   (p + "self_attn.q_proj.weight", (heads * d, H)),
                   (p + "self_attn.k_proj.weight", (kv * d, H)),
                   (p + "self_attn.v_proj.weight", (kv * d, H)),
                   (p + "self_attn.o_proj.weight", (H, heads * d)),
                   (p + "post_attention_layernorm.weight", (H,)),
                   (p + "pre_feedforward_layernorm.weight", (H,)),
                   (p + "post_feedforward_layernorm.weight", (H,)),
                   (p + "mlp.gate_proj.weight", (I, H)),
                   (p + "mlp.up_proj.weight", (I, H)),
                   (p + "mlp.down_proj.weight", (H, I))]
    shapes.append(("model.norm.weight", (H,)))
    tensors = {n: ("BF16", s, int(np.prod(s)) * 2) for n, s in shapes}
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(13)
    with open(os.path.join(out, "model.safetensors"), "wb") as fp:
        fp.write(safetensors_header(tensors, [n for n, _ in shapes], {"format": "pt"}))
        for name, shape in shapes:
            count = int(np.prod(shape))
            for start in range(0, count, 1 << 24):
                a = rng.standard_normal(min(1 << 24, count - start), dtype=np.float32)
                a *= np.float32(0.02)
                fp.write(bf16_bits_numpy(a).astype("<u2").tobytes())
    tok = make_tokenizer("gemma")
    assert tok["model_vocab_size"] <= V
    write_json(os.path.join(out, "config.json"), config_json(v, V, tok), indent=2, sort_keys=True)
    write_json(os.path.join(out, "tokenizer.json"), tok["files"]["tokenizer.json"])
    write_json(os.path.join(out, "tokenizer_config.json"), tok["files"]["tokenizer_config.json"],
               indent=2, sort_keys=True, ensure_ascii=False)
    print("generate_gemma.py: a Gemma-2-2B-sized random BF16 checkpoint in %s" % out)


def main(argv):
    if len(argv) == 3 and argv[1] == "--gemma2-2b":
        return gemma2_2b(argv[2])
    if len(argv) != 2:
        sys.exit("usage: generate_gemma.py OUT_DIR | generate_gemma.py --gemma2-2b DIR")
    if torch is None:
        sys.exit("generate_gemma.py: PyTorch is needed for the cross-checks "
                 "(Debian: apt-get install python3-torch)")
    main_goldens(argv[1])


if __name__ == "__main__":
    try:
        main(sys.argv)
    except CrossCheckFailed as e:
        sys.exit("generate_gemma.py: check failed: %s" % e)
