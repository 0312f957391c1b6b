#!/usr/bin/env python3
"""Write small random BERT checkpoints in the layout the Hugging Face Hub
serves, and the golden outputs the C tests replay.

    /usr/bin/python3 tests/models/generate.py tests/models     (make models-golden)
    /usr/bin/python3 tests/models/generate.py --bert-base DIR  (no goldens)

For each variant below, DIR/<variant>/ gets config.json, model.safetensors,
vocab.txt and, for some, tokenizer_config.json; DIR/golden/<variant>.json
gets, for a few sentences (and sentence pairs), the wordpieces, their ids
and token type ids, every layer's attention weights [layers][heads][N][N],
the hidden states [layers + 1][N][hidden] (the embedding output, then each
layer's, as transformers' output_hidden_states), and the attention rollout
[N][N]. DIR/wordpiece.json holds tokenizations (vocabularies included).

The reference is float64 NumPy written from transformers' modeling_bert.py
term by term, with the weights as the file stores them (F16 and BF16 values
widened exactly). Before anything is written it is cross-checked against
PyTorch's own modules in float64: nn.Embedding and nn.LayerNorm for the
embeddings, nn.TransformerEncoderLayer (post-norm, GELU) for each layer and
its nn.MultiheadAttention for the weights, and the rollout against a
product written the other way round (the rows of the transposed product).
Any disagreement beyond 1e-9 aborts without writing a file.

The safetensors files are written here from the format's description (an
8-byte little-endian header length, a JSON header of dtype, shape and
data_offsets per tensor plus __metadata__, padded with spaces to a multiple
of 8, then the data), so no safetensors package is needed. The output is
deterministic: the same script gives byte-identical files.

Rollout (Abnar and Zuidema, 2020): with A_l the mean over heads of layer
l's weights and I the identity, Ahat_l = 0.5 * A_l + 0.5 * I with each row
divided by its sum, and R = Ahat_L * ... * Ahat_2 * Ahat_1 (R_1 = Ahat_1,
R_l = Ahat_l * R_{l-1}): row i of R is how much the last layer's token i
draws, through every path, on the input token j.
"""

import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(HERE, "..", "golden"))
import reference as ref  # noqa: E402  (the basic tokenizer)
from common import (TOL, CrossCheckFailed, attention_flow, compare, gelu, gelu_new,  # noqa: E402
                    layer_norm, linear, rollout, rounded, softmax, stored, write_safetensors)

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # pragma: no cover
    torch = None  # only --bert-base works without it

SPECIALS = ["[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"]
MAX_WORD_CHARS = 100


# -------------------------------------------------------------- vocabularies

WORDS = [
    "the", "cat", "sat", "on", "mat", "because", "it", "was", "hungry", "a",
    "dog", "chased", "mouse", "quick", "brown", "fox", "jump", "over", "lazy",
    "and", "of", "to", "in", "is", "he", "she", "they", "run", "play", "walk",
    "want", "un", "runn", "low", "lowest", "na", "naive", "sentence", "allen",
    "東", "京", "caf", "hello", "world", "attention", "head", "layer", "model",
]
PIECES = ["##s", "##ed", "##ing", "##er", "##ly", "##y", "##want", "##ive",
          "##e", "##a", "##nl", "##p", "##ï", "##ve", "##mp", "##t", "##o"]
PUNCT = [".", ",", "!", "?", "'", "-", "(", ")"]


def vocab_lower():
    return (["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
            + PUNCT + WORDS + PIECES)


def vocab_cased():
    caps = [w.capitalize() for w in WORDS if w.isascii() and w.isalpha()][:20]
    return (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused1]"]
            + PUNCT + WORDS + caps + PIECES + ["##É", "é", "##é", "Paris"])


# ------------------------------------------------------------- the tokenizer

def wordpiece(word, vocab):
    """transformers' WordpieceTokenizer on one basic token: greedy longest
    match first, continuations with ##, the whole word as [UNK] when any
    part has no match or it has more than 100 characters."""
    chars = list(word)
    if len(chars) > MAX_WORD_CHARS:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(chars):
        end, found = len(chars), None
        while start < end:
            sub = "".join(chars[start:end])
            if start > 0:
                sub = "##" + sub
            if sub in vocab:
                found = sub
                break
            end -= 1
        if found is None:
            return ["[UNK]"]
        pieces.append(found)
        start = end
    return pieces


def split_specials(text):
    """BertTokenizer.tokenize's first step: the special tokens typed in the
    text (exact, case-sensitive) are cut out and kept whole."""
    parts, at, start = [], 0, 0
    while at < len(text):
        hit = next((s for s in SPECIALS if text.startswith(s, at)), None)
        if hit:
            parts.append((False, text[start:at]))
            parts.append((True, hit))
            at += len(hit)
            start = at
        else:
            at += 1
    parts.append((False, text[start:]))
    return [(special, t) for special, t in parts if special or t]


def tokenize(text, vocab, lower):
    out = []
    for special, part in split_specials(text):
        if special:
            out.append(part)
            continue
        for word in ref.tokenize(part, keep_case=not lower):
            out.extend(wordpiece(word, vocab))
    return out


def encode(a, b, vocab_list, lower):
    """[CLS] A [SEP] or [CLS] A [SEP] B [SEP], ids by line number (the last
    line wins for a duplicated token, as transformers' load_vocab), token
    type ids 0 for the first part and 1 for B [SEP]."""
    vocab = {t: i for i, t in enumerate(vocab_list)}
    tokens = ["[CLS]"] + tokenize(a, vocab, lower) + ["[SEP]"]
    types = [0] * len(tokens)
    if b is not None:
        tb = tokenize(b, vocab, lower) + ["[SEP]"]
        tokens += tb
        types += [1] * len(tb)
    ids = [vocab.get(t, vocab["[UNK]"]) for t in tokens]
    return tokens, ids, types


# ---------------------------------------------------- the float64 reference

def bert_forward(w, cfg, ids, types, extra=None):
    """BertModel's forward with output_attentions and output_hidden_states:
    BertEmbeddings, then per layer BertSelfAttention, BertSelfOutput,
    BertIntermediate, BertOutput. w holds float64 arrays by plain names.
    With extra, a dict: every layer's value-weighted attention (Kobayashi
    et al. 2020), the norms of alpha_ij f_h(x_j) [heads][n][n] and of their
    sum over heads [n][n], f_h(x_j) = v_j^h (value bias in) times head h's
    columns of attention.output.dense (its bias out), the sum formed as
    vectors."""
    n, hsz, heads = len(ids), cfg["hidden_size"], cfg["num_attention_heads"]
    d = hsz // heads
    eps = cfg["layer_norm_eps"]
    act = gelu if cfg["hidden_act"] == "gelu" else gelu_new
    e = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.position_embeddings.weight"][:n]
         + w["embeddings.token_type_embeddings.weight"][types])
    h = layer_norm(e, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    hidden, attentions = [h], []
    for l in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d." % l
        q, k, v = (linear(h, w[p + "attention.self.%s.weight" % m], w[p + "attention.self.%s.bias" % m])
                   for m in ("query", "key", "value"))

        def heads_of(t):
            return t.reshape(n, heads, d).transpose(1, 0, 2)

        scores = heads_of(q) @ heads_of(k).transpose(0, 2, 1) / math.sqrt(d)
        probs = softmax(scores)
        attentions.append(probs)
        if extra is not None:
            o = w[p + "attention.output.dense.weight"]  # [out][in]
            f = np.stack([heads_of(v)[a] @ o[:, a * d:(a + 1) * d].T for a in range(heads)])
            extra.setdefault("value_weighted", []).append(
                probs * np.linalg.norm(f, axis=2)[:, None, :])
            extra.setdefault("value_weighted_sum", []).append(
                np.linalg.norm(np.einsum("hij,hjd->ijd", probs, f), axis=2))
        ctx = (probs @ heads_of(v)).transpose(1, 0, 2).reshape(n, hsz)
        a = linear(ctx, w[p + "attention.output.dense.weight"], w[p + "attention.output.dense.bias"])
        h1 = layer_norm(a + h, w[p + "attention.output.LayerNorm.weight"],
                        w[p + "attention.output.LayerNorm.bias"], eps)
        inter = act(linear(h1, w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"]))
        out = linear(inter, w[p + "output.dense.weight"], w[p + "output.dense.bias"])
        h = layer_norm(out + h1, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
        hidden.append(h)
    return np.stack(attentions), np.stack(hidden)


# ------------------------------------------------------ PyTorch cross-check

def T(a):
    return torch.tensor(np.asarray(a, dtype=np.float64), dtype=torch.float64)


def torch_check(w, cfg, ids, types, attentions, hidden, roll, label):
    n, hsz = len(ids), cfg["hidden_size"]
    eps = cfg["layer_norm_eps"]
    with torch.no_grad():
        emb = {}
        for name, key in (("word", "word_embeddings"), ("pos", "position_embeddings"),
                          ("type", "token_type_embeddings")):
            table = w["embeddings.%s.weight" % key]
            emb[name] = nn.Embedding(table.shape[0], table.shape[1], dtype=torch.float64)
            emb[name].weight.copy_(T(table))
        ln = nn.LayerNorm(hsz, eps=eps, dtype=torch.float64)
        ln.weight.copy_(T(w["embeddings.LayerNorm.weight"]))
        ln.bias.copy_(T(w["embeddings.LayerNorm.bias"]))
        x = ln(emb["word"](torch.tensor(ids)) + emb["pos"](torch.arange(n))
               + emb["type"](torch.tensor(types)))[None]
        compare(label + ": embeddings", hidden[0], x[0])
        act = "gelu" if cfg["hidden_act"] == "gelu" else (lambda t: F.gelu(t, approximate="tanh"))
        for l in range(cfg["num_hidden_layers"]):
            p = "encoder.layer.%d." % l
            layer = nn.TransformerEncoderLayer(
                hsz, cfg["num_attention_heads"], cfg["intermediate_size"], dropout=0.0,
                activation=act, layer_norm_eps=eps, batch_first=True, norm_first=False,
                dtype=torch.float64)
            layer.eval()
            sa = layer.self_attn
            sa.in_proj_weight.copy_(T(np.concatenate(
                [w[p + "attention.self.%s.weight" % m] for m in ("query", "key", "value")])))
            sa.in_proj_bias.copy_(T(np.concatenate(
                [w[p + "attention.self.%s.bias" % m] for m in ("query", "key", "value")])))
            sa.out_proj.weight.copy_(T(w[p + "attention.output.dense.weight"]))
            sa.out_proj.bias.copy_(T(w[p + "attention.output.dense.bias"]))
            layer.norm1.weight.copy_(T(w[p + "attention.output.LayerNorm.weight"]))
            layer.norm1.bias.copy_(T(w[p + "attention.output.LayerNorm.bias"]))
            layer.linear1.weight.copy_(T(w[p + "intermediate.dense.weight"]))
            layer.linear1.bias.copy_(T(w[p + "intermediate.dense.bias"]))
            layer.linear2.weight.copy_(T(w[p + "output.dense.weight"]))
            layer.linear2.bias.copy_(T(w[p + "output.dense.bias"]))
            layer.norm2.weight.copy_(T(w[p + "output.LayerNorm.weight"]))
            layer.norm2.bias.copy_(T(w[p + "output.LayerNorm.bias"]))
            _, weights = sa(x, x, x, need_weights=True, average_attn_weights=False)
            compare(label + ": layer %d attention" % l, attentions[l], weights[0])
            x = layer(x)
            compare(label + ": layer %d hidden states" % l, hidden[l + 1], x[0])
        # the rollout's transpose, built from the first layer up on the
        # other side: R^T = Ahat_1^T * ... * Ahat_L^T
        rt = torch.eye(n, dtype=torch.float64)
        for a in T(attentions):
            ahat = 0.5 * a.mean(0) + 0.5 * torch.eye(n, dtype=torch.float64)
            ahat = ahat / ahat.sum(-1, keepdim=True)
            rt = rt @ ahat.T
        compare(label + ": rollout", roll, rt.T)


# ------------------------------------------------------------- checkpoints

VARIANTS = [
    dict(name="f32", dtype="F32", prefix="", legacy=False, extras=(), shuffle=False,
         act="gelu", layers=2, hidden=32, heads=4, inter=64, eps=1e-12, types=2,
         positions=40, cased=False, tokenizer_config={"do_lower_case": True},
         metadata={"format": "pt"},
         about="F32, BertModel names, no extra tensors, gelu"),
    dict(name="f16_prefixed", dtype="F16", prefix="bert.", legacy=False,
         extras=("cls", "pooler", "position_ids"), shuffle=False,
         act="gelu_new", layers=3, hidden=48, heads=3, inter=96, eps=1e-12, types=2,
         positions=32, cased=False, tokenizer_config=None, metadata=None,
         about="F16, bert. prefix with cls.* heads, a pooler and embeddings.position_ids, "
               "gelu_new, no tokenizer_config.json"),
    dict(name="bf16_legacy", dtype="BF16", prefix="", legacy=True, extras=("pooler",),
         shuffle=False, act="gelu", layers=2, hidden=64, heads=8, inter=128, eps=1e-6, types=2,
         positions=48, cased=True, tokenizer_config={"do_lower_case": False},
         metadata={"format": "pt"},
         about="BF16, LayerNorm.gamma/beta, a pooler, cased vocabulary, layer_norm_eps 1e-6"),
    dict(name="f32_prefixed_legacy", dtype="F32", prefix="bert.", legacy=True,
         extras=("cls", "pooler", "position_ids"), shuffle=True,
         act="gelu", layers=2, hidden=32, heads=2, inter=48, eps=1e-12, types=3,
         positions=36, cased=False, tokenizer_config={"do_lower_case": True},
         metadata={"format": "pt", "note": "data in shuffled order"},
         about="F32, bert. prefix, LayerNorm.gamma/beta, cls.* heads, pooler, position_ids, "
               "data in an order unlike the header's, type_vocab_size 3"),
]

CASES = [
    ("The cat sat on the mat because it was hungry.", None),
    ("The quick brown fox jumps over the lazy dog!", "It was [MASK], wasn't it?"),
    ("Unwanted running: naïve Allen 東京 café", "Paris"),
]


def random_weights(v, vocab_size, rng):
    """Plain names (no prefix, weight/bias); scales chosen so attention is
    far from uniform and every layer matters."""
    H, I = v["hidden"], v["inter"]
    w = {}

    def normal(shape, std):
        return rng.normal(0.0, std, shape)

    w["embeddings.word_embeddings.weight"] = normal((vocab_size, H), 1.0)
    w["embeddings.position_embeddings.weight"] = normal((v["positions"], H), 0.5)
    w["embeddings.token_type_embeddings.weight"] = normal((v["types"], H), 0.5)
    w["embeddings.LayerNorm.weight"] = 1.0 + normal(H, 0.1)
    w["embeddings.LayerNorm.bias"] = normal(H, 0.1)
    for l in range(v["layers"]):
        p = "encoder.layer.%d." % l
        for m in ("query", "key"):
            w[p + "attention.self.%s.weight" % m] = normal((H, H), 1.5 / math.sqrt(H))
            w[p + "attention.self.%s.bias" % m] = normal(H, 0.2)
        w[p + "attention.self.value.weight"] = normal((H, H), 1.0 / math.sqrt(H))
        w[p + "attention.self.value.bias"] = normal(H, 0.1)
        w[p + "attention.output.dense.weight"] = normal((H, H), 1.0 / math.sqrt(H))
        w[p + "attention.output.dense.bias"] = normal(H, 0.1)
        w[p + "attention.output.LayerNorm.weight"] = 1.0 + normal(H, 0.1)
        w[p + "attention.output.LayerNorm.bias"] = normal(H, 0.1)
        w[p + "intermediate.dense.weight"] = normal((I, H), 1.0 / math.sqrt(H))
        w[p + "intermediate.dense.bias"] = normal(I, 0.1)
        w[p + "output.dense.weight"] = normal((H, I), 1.0 / math.sqrt(I))
        w[p + "output.dense.bias"] = normal(H, 0.1)
        w[p + "output.LayerNorm.weight"] = 1.0 + normal(H, 0.1)
        w[p + "output.LayerNorm.bias"] = normal(H, 0.1)
    return w


def extra_tensors(v, vocab_size, rng):
    """Tensors the encoder must ignore, by their real names."""
    H, out = v["hidden"], {}
    if "pooler" in v["extras"]:
        out["pooler.dense.weight"] = rng.normal(0, 0.1, (H, H))
        out["pooler.dense.bias"] = rng.normal(0, 0.1, H)
    if "cls" in v["extras"]:
        ln = ("gamma", "beta") if v["legacy"] else ("weight", "bias")
        out["cls.predictions.bias"] = rng.normal(0, 0.1, vocab_size)
        out["cls.predictions.transform.dense.weight"] = rng.normal(0, 0.1, (H, H))
        out["cls.predictions.transform.dense.bias"] = rng.normal(0, 0.1, H)
        out["cls.predictions.transform.LayerNorm." + ln[0]] = 1 + rng.normal(0, 0.1, H)
        out["cls.predictions.transform.LayerNorm." + ln[1]] = rng.normal(0, 0.1, H)
        out["cls.seq_relationship.weight"] = rng.normal(0, 0.1, (2, H))
        out["cls.seq_relationship.bias"] = rng.normal(0, 0.1, 2)
    return out


def file_name(plain, v):
    """The name a tensor has in the variant's file."""
    name = plain
    if v["legacy"] and ".LayerNorm." in name:
        name = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
    if plain.startswith("cls."):
        return name
    return v["prefix"] + name


def build_variant(v, seed, out_dir):
    vocab_list = vocab_cased() if v["cased"] else vocab_lower()
    rng = np.random.default_rng(seed)
    plain = random_weights(v, len(vocab_list), rng)
    extras = extra_tensors(v, len(vocab_list), rng)
    tensors, values = {}, {}
    for name, a in list(plain.items()) + list(extras.items()):
        data, back = stored(a, v["dtype"])
        tensors[file_name(name, v)] = (v["dtype"], np.shape(a), data)
        values[name] = back
    if "position_ids" in v["extras"]:
        ids = np.arange(v["positions"])[None]
        tensors[v["prefix"] + "embeddings.position_ids"] = ("I64", ids.shape, stored(ids, "I64")[0])
    order = sorted(tensors)
    if v["shuffle"]:
        order = [order[i] for i in rng.permutation(len(order))]
    cfg = {
        "architectures": ["BertForPreTraining" if v["prefix"] else "BertModel"],
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": v["act"],
        "hidden_dropout_prob": 0.1,
        "hidden_size": v["hidden"],
        "initializer_range": 0.02,
        "intermediate_size": v["inter"],
        "layer_norm_eps": v["eps"],
        "max_position_embeddings": v["positions"],
        "model_type": "bert",
        "num_attention_heads": v["heads"],
        "num_hidden_layers": v["layers"],
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "type_vocab_size": v["types"],
        "vocab_size": len(vocab_list),
    }
    d = os.path.join(out_dir, v["name"])
    os.makedirs(d, exist_ok=True)
    for stale in ("tokenizer_config.json",):
        if os.path.exists(os.path.join(d, stale)):
            os.remove(os.path.join(d, stale))
    with open(os.path.join(d, "config.json"), "w") as fp:
        json.dump(cfg, fp, indent=2, sort_keys=True)
        fp.write("\n")
    with open(os.path.join(d, "vocab.txt"), "w", encoding="utf-8", newline="\n") as fp:
        fp.write("".join(t + "\n" for t in vocab_list))
    if v["tokenizer_config"] is not None:
        with open(os.path.join(d, "tokenizer_config.json"), "w") as fp:
            json.dump(v["tokenizer_config"], fp, indent=2, sort_keys=True)
            fp.write("\n")
    write_safetensors(os.path.join(d, "model.safetensors"), tensors, order, v["metadata"])

    cases = []
    for a, b in CASES:
        tokens, ids, types = encode(a, b, vocab_list, not v["cased"])
        types = [min(t, v["types"] - 1) for t in types]
        extra = {}
        attn, hidden = bert_forward(values, cfg, ids, types, extra)
        roll = rollout(attn)
        torch_check(values, cfg, ids, types, attn, hidden, roll, "%s %r" % (v["name"], a))
        cases.append({"sentence": a, "sentence_b": b, "tokens": tokens, "ids": ids,
                      "type_ids": types, "attentions": rounded(attn),
                      "hidden_states": rounded(hidden), "rollout": rounded(roll),
                      "flow": rounded(attention_flow(attn)),
                      "value_weighted": rounded(np.stack(extra["value_weighted"])),
                      "value_weighted_sum": rounded(np.stack(extra["value_weighted_sum"]))})
    golden = {"variant": v["name"], "description": v["about"], "dtype": v["dtype"],
              "layers": v["layers"], "heads": v["heads"], "hidden": v["hidden"],
              "cases": cases}
    return golden


# ------------------------------------------------------ tokenizer goldens

HF_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "want", "##want", "##ed", "wa", "un",
            "runn", "##ing", ",", "low", "lowest"]


def wordpiece_cases():
    vocabs = {"hf_test": HF_VOCAB, "lower": vocab_lower(), "cased": vocab_cased(),
              "letters": ["[UNK]", "[CLS]", "[SEP]", "a", "##a", "b", "##b", "ab", "##ab"]}
    texts = [
        ("lower", True, "The cat sat on the mat.", None),
        ("lower", True, "UNwant\u00e9d,running", None),
        ("lower", True, "the [MASK] sat", None),
        ("lower", True, "the[MASK]sat [SEP][CLS]x[PAD][UNK]", None),
        ("lower", True, "the [mask] sat [Mask]", None),
        ("lower", True, "catsat dogs walked playing lowly", None),
        ("lower", True, "xyz cat qqq", None),
        ("lower", True, "  \t ", None),
        ("lower", True, "", "the dog"),
        ("lower", True, "The cat.", "It was hungry!"),
        ("lower", True, "naïve café 東京 NAÏVE", "Caf\u00c9"),
        ("lower", True, "(hello) - world's attention-heads", "layer [SEP] model"),
        ("cased", False, "The Cat sat in Paris.", "the cat"),
        ("cased", False, "café CAFÉ Café naïve", None),
        ("cased", False, "[MASK] The [mask]", None),
        ("hf_test", True, "UNwant\u00e9d,running", None),
        ("hf_test", True, "unwantedX running", "low lowest lower"),
        ("hf_test", False, "UNwant\u00e9d,running", None),
        ("letters", True, "a" * 100, None),
        ("letters", True, "a" * 101, "b" * 99 + "ab"),
        ("letters", True, "ab" * 50 + " " + "ba" * 51, None),
        ("letters", True, "abc ba aab", None),
    ]
    cases = []
    for vname, lower, a, b in texts:
        tokens, ids, types = encode(a, b, vocabs[vname], lower)
        cases.append({"vocab": vname, "do_lower_case": lower, "sentence": a,
                      "sentence_b": b, "tokens": tokens, "ids": ids, "type_ids": types})
    return {"vocabs": vocabs, "cases": cases}


def self_checks():
    """The published cases of transformers' and Google's BERT tokenizer
    tests, through this script's tokenizer."""
    hf = {t: i for i, t in enumerate(HF_VOCAB)}
    got = tokenize("UNwant\u00e9d,running", hf, True)
    assert got == ["un", "##want", "##ed", ",", "runn", "##ing"], got
    assert [hf[t] for t in got] == [9, 6, 7, 12, 10, 11]
    assert tokenize("unwanted running", hf, True) == ["un", "##want", "##ed", "runn", "##ing"]
    assert tokenize("unwantedX running", hf, True) == ["[UNK]", "runn", "##ing"]
    assert tokenize("", hf, True) == []
    assert [tokenize(t, hf, False) for t in ["Test", "\xad", "test"]] == [["[UNK]"], [], ["[UNK]"]]


def bert_base(out):
    """A random checkpoint of bert-base-uncased's sizes (12 layers, hidden
    768, 12 heads, intermediate 3072, 30522 tokens, 512 positions), F32,
    weights ~ N(0, 0.02) as BERT's initialiser, for benchmarks and limit
    tests: 440 MB, never committed, no goldens, NumPy only."""
    rng = np.random.default_rng(7)
    v = dict(hidden=768, inter=3072, layers=12, positions=512, types=2)
    words = ["[PAD]"] + ["[unused%d]" % i for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words += PUNCT + WORDS + PIECES
    words += ["w%d" % i for i in range(30522 - len(words))]
    os.makedirs(out, exist_ok=True)
    tensors, order = {}, []
    shapes = {name: a.shape for name, a in random_weights(
        dict(v, hidden=1, inter=1, layers=v["layers"]), 1, rng).items()}
    for name in shapes:
        H, I = v["hidden"], v["inter"]
        dims = {"embeddings.word_embeddings.weight": (len(words), H),
                "embeddings.position_embeddings.weight": (v["positions"], H),
                "embeddings.token_type_embeddings.weight": (v["types"], H)}
        if name in dims:
            shape = dims[name]
        elif name.endswith("intermediate.dense.weight"):
            shape = (I, H)
        elif name.endswith("intermediate.dense.bias"):
            shape = (I,)
        elif name.endswith("output.dense.weight") and "attention" not in name:
            shape = (H, I)
        elif name.endswith(".weight") and "LayerNorm" not in name:
            shape = (H, H)
        else:
            shape = (H,)
        if "LayerNorm.weight" in name:
            a = np.ones(shape, dtype=np.float32)
        elif name.endswith(".bias"):
            a = np.zeros(shape, dtype=np.float32)
        else:
            a = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)
        tensors[name] = ("F32", shape, a.astype("<f4").tobytes())
        order.append(name)
    write_safetensors(os.path.join(out, "model.safetensors"), tensors, order, {"format": "pt"})
    cfg = {"architectures": ["BertModel"], "hidden_act": "gelu", "hidden_size": 768,
           "intermediate_size": 3072, "layer_norm_eps": 1e-12, "max_position_embeddings": 512,
           "model_type": "bert", "num_attention_heads": 12, "num_hidden_layers": 12,
           "type_vocab_size": 2, "vocab_size": len(words)}
    with open(os.path.join(out, "config.json"), "w") as fp:
        json.dump(cfg, fp, indent=2, sort_keys=True)
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8", newline="\n") as fp:
        fp.write("".join(t + "\n" for t in words))
    print("generate.py: a bert-base-sized random checkpoint in %s" % out)


def main(argv):
    if len(argv) == 3 and argv[1] == "--bert-base":
        return bert_base(argv[2])
    if len(argv) != 2:
        sys.exit("usage: generate.py OUT_DIR | generate.py --bert-base DIR")
    if torch is None:
        sys.exit("generate.py: PyTorch is needed for the cross-checks "
                 "(Debian: apt-get install python3-torch)")
    out = argv[1]
    self_checks()
    goldens = [build_variant(v, 1000 + i, out) for i, v in enumerate(VARIANTS)]
    os.makedirs(os.path.join(out, "golden"), exist_ok=True)
    for g in goldens:
        with open(os.path.join(out, "golden", g["variant"] + ".json"), "w") as fp:
            json.dump(g, fp, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
            fp.write("\n")
    with open(os.path.join(out, "wordpiece.json"), "w") as fp:
        json.dump(wordpiece_cases(), fp, indent=1, ensure_ascii=True)
        fp.write("\n")
    print("generate.py: %d checkpoints and their goldens, wordpiece.json; "
          "every cross-check within %.0e" % (len(goldens), TOL))


if __name__ == "__main__":
    try:
        main(sys.argv)
    except CrossCheckFailed as e:
        sys.exit("generate.py: cross-check failed: %s" % e)
