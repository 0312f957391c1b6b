#!/usr/bin/env python3
"""Write the interventions goldens the C tests replay: head ablation,
activation patching and direct logit attribution on the committed small
checkpoints.

    /usr/bin/python3 tests/models/generate_interventions.py tests/models   (make models-golden)

For each variant below, DIR/golden/interventions/<variant>.json gets, from
the first golden case's ids of DIR/golden/<variant>.json (the "clean"
input): seven ablation cases (the last layer's attention weights, the
hidden states and, for decoders, the last position's logits), a greedy
continuation with two heads ablated, activation patching over heads,
heads and positions, the residual stream and the attention / MLP outputs
in both directions, and the direct logit attribution of the last two
positions. The BERT encoder (f32) gets the ablation cases only.

The weights are read here from the committed safetensors files (a reader
written from the format's description; F16 and BF16 widened exactly to
float64), the model's shape from its config.json, so the goldens replay
what the C loader reads. The reference is float64 NumPy with hook points,
written from transformers' modeling_gpt2.py, modeling_llama.py,
modeling_mistral.py, modeling_qwen2.py, modeling_qwen3.py and
modeling_bert.py term by term; on Gemma, Gemma 2 and Gemma 3 it is
generate_gemma.py's forward itself, and on GPT-NeoX, Phi-3 and OLMo-2
generate_neox_phi3_olmo2.py's, each run with its hook points:

  z           a layer's per-head attention-weighted values (value bias in),
              before the output projection, [n][heads * head_dim], head a's
              slice a*D..(a+1)*D (TransformerLens' hook_z); query head a
              reads KV head a // (heads / kv_heads);
  attn_out    z W_O^T + b_O (GPT-2's c_proj bias, BERT's attention.output
              dense bias, GPT-NeoX's dense bias; the LLaMA family has
              none); what the sublayer adds to the stream: on Gemma 2 and
              3 and OLMo-2 after post_attention_layernorm
              (TransformerLens' hook_attn_out);
  mlp_out     the MLP's output (down projection and its bias; on Gemma 2
              and 3 and OLMo-2 after post_feedforward_layernorm);
  resid_pre   the residual stream entering a layer (the embedding output
              for layer 0).

GPT-NeoX's parallel residual: both sublayers read resid_pre, the layer's
output is resid_pre + attn_out + mlp_out (TransformerLens'
parallel_attn_mlp), so an edit of z or attn_out never reaches the same
layer's MLP. Phi-3's longrope takes the short or the long factors by the
length of the run; the ablated greedy steps of phi3_longrope start at
original_max_position_embeddings tokens and cross it, where transformers
runs the whole sequence again with the long factors.

Gemma 2's final soft cap is on every logit the model gives (the ablated
greedy steps, the patching metrics); the attribution is of the logit
before it, each head read through its layer's post_attention_layernorm
frozen at the layer's output, as the final norm is frozen at the final
residual, so that the parts add up.

Before anything is written: with no intervention the hooked reference must
give what generate_decoders.py's / generate.py's forward functions give
(within 1e-9; on Gemma the plain pass of the same forward, to the bit)
and, rounded, the numbers of the existing goldens; and every
output (each ablation case, each greedy step, each patched run's metric,
each attribution) is recomputed by an independent PyTorch float64
implementation of the same interventions, working on the files' own
tensor names and layouts (Conv1D through torch.addmm, rotate_half RoPE,
repeat_interleave for the KV heads, torch.where for the ablations, the
attribution as one stacked tensor through the frozen final norm). Any
difference beyond 1e-9 aborts without writing a file. The script then
checks that the conventions an implementation can get wrong matter
(ablating after W_O with the bias, a head read as a KV head, the mean over
heads instead of positions; on Gemma 2 and 3 and OLMo-2 an ablation on
the normed output, the attention's output patched from before its norm,
the heads' attribution without the post-attention norm; on Gemma 2 the
metrics or the attribution on the other side of the final soft cap; on
GPT-NeoX the hooked pass with the other residual, the attribution through
an uncentred LayerNorm; on phi3_longrope a cache kept across the
boundary, or the prompt's short-factor means kept) and that patching the
residual stream at the corrupted token gives effect 1 there and 0
elsewhere.

Output is deterministic: the same script gives byte-identical files.
"""

import json
import math
import os
import re
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from common import TOL, CrossCheckFailed, compare, gelu, gelu_new, layer_norm, rounded, softmax  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover
    torch = None

MARGIN = 1e-3  # a wrong convention must move the goldens by more than this
GREEDY_STEPS = 6
GREEDY_MARGIN = 1e-3
PATCHED_BELOW = 1e-4  # a patching case with a narrower gap has its runs' metrics too
NARROW = {}  # variant -> (effects' difference from torch's, the gap) where the gap is below it

DECODERS = ["gpt2", "gpt2_prefixed", "llama2", "llama3", "mistral", "qwen2", "qwen3",
            "gemma", "gemma2", "gemma3", "neox", "neox_seq", "phi3", "phi3_longrope", "olmo2"]
# the families whose forward is generate_neox_phi3_olmo2.py's
NPO = ("neox", "phi3", "olmo2")
ENCODERS = ["f32"]


# ---------------------------------------------------------- safetensors

def read_safetensors(path):
    """name -> float64 array for every F32 / F16 / BF16 tensor of the file
    (the BOOL and I64 buffers are skipped): an 8-byte little-endian header
    length, the JSON header, then the data at data_offsets."""
    with open(path, "rb") as fp:
        data = fp.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size].decode("utf-8"))
    base = 8 + size
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        raw = data[base + a:base + b]
        count = int(np.prod(t["shape"], dtype=np.int64))
        if t["dtype"] == "F32":
            x = np.frombuffer(raw, dtype="<f4")
        elif t["dtype"] == "F16":
            x = np.frombuffer(raw, dtype="<f2")
        elif t["dtype"] == "BF16":
            x = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << np.uint32(16)).view(np.float32)
        else:
            continue
        assert x.size == count, name
        out[name] = x.astype(np.float64).reshape(t["shape"])
    return out


def read_folder(d):
    """Every tensor of the folder: model.safetensors, or the shards
    model.safetensors.index.json names."""
    index = os.path.join(d, "model.safetensors.index.json")
    if not os.path.exists(index):
        return read_safetensors(os.path.join(d, "model.safetensors"))
    with open(index) as fp:
        files = sorted(set(json.load(fp)["weight_map"].values()))
    out = {}
    for f in files:
        out.update(read_safetensors(os.path.join(d, f)))
    return out


def plain_weights(family, raw):
    """The tensors by the base model's names (GPT-2's transformer. prefix
    dropped), without the buffers (attn.bias, attn.masked_bias,
    rotary_emb.inv_freq) and without GPT-2's lm_head.weight copy of wte."""
    w = {}
    for name, a in raw.items():
        if family == "neox" and re.fullmatch(r"gpt_neox\.layers\.\d+\.attention\.(?:bias|masked_bias)", name):
            continue
        if family == "gpt2":
            if name.startswith("transformer."):
                name = name[len("transformer."):]
            if re.fullmatch(r"h\.\d+\.attn\.(?:bias|masked_bias)", name):
                continue
            if name == "lm_head.weight":
                continue
        if name.endswith("rotary_emb.inv_freq"):
            continue
        w[name] = a
    if family == "gpt2" and "lm_head.weight" in raw:
        assert np.array_equal(raw["lm_head.weight"], w["wte.weight"])
    return w


# ------------------------------------------------------------- the model

class Model:
    """A checkpoint as the hooked reference sees it: shapes from config.json,
    weights in nn.Linear's [out][in] layout by generic names."""

    def __init__(self, name, d, golden):
        with open(os.path.join(d, "config.json")) as fp:
            cfg = json.load(fp)
        self.name, self.cfg, self.golden = name, cfg, golden
        mt = cfg["model_type"]
        self.family = {"gpt2": "gpt2", "bert": "bert", "gemma": "gemma", "gemma2": "gemma",
                       "gemma3_text": "gemma", "gpt_neox": "neox", "phi3": "phi3",
                       "olmo2": "olmo2"}.get(mt, "llama")
        self.model_type = mt
        self.w = plain_weights(self.family, read_folder(d))
        w = self.w
        self.final_cap = None
        # a norm on each sublayer's output (Gemma 2 and 3, OLMo-2)
        self.out_norm = mt in ("gemma2", "gemma3_text", "olmo2")
        self.layer_norm = self.family in ("gpt2", "bert", "neox")
        if self.family in NPO:
            self.L, self.H, self.h = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"]
            self.g = cfg.get("num_key_value_heads") or self.h
            self.D = self.H // self.h
            self.eps = cfg["layer_norm_eps"] if self.family == "neox" else cfg["rms_norm_eps"]
            self.nv = self.npo_variant()
        elif self.family == "gpt2":
            self.L, self.H, self.h = cfg["n_layer"], cfg["n_embd"], cfg["n_head"]
            self.g, self.D = self.h, self.H // self.h
            self.eps = cfg["layer_norm_epsilon"]
        elif self.family == "bert":
            self.L, self.H, self.h = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"]
            self.g, self.D = self.h, self.H // self.h
            self.eps = cfg["layer_norm_eps"]
        elif self.family == "gemma":
            self.L, self.H, self.h = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"]
            self.g, self.D = cfg["num_key_value_heads"], cfg["head_dim"]
            self.eps = cfg["rms_norm_eps"]
            self.sandwich = mt != "gemma"  # Gemma 2 and 3 norm each sublayer's output
            self.final_cap = cfg.get("final_logit_softcapping")
            self.gv = self.gemma_variant()
        else:
            self.L, self.H, self.h = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"]
            self.g = cfg.get("num_key_value_heads") or self.h
            self.D = cfg.get("head_dim") or self.H // self.h
            self.eps = cfg["rms_norm_eps"]
            self.window = cfg.get("sliding_window") if mt == "mistral" else None
            if mt in ("qwen2", "qwen3") and cfg.get("use_sliding_window"):
                raise CrossCheckFailed("%s: a sliding window on Qwen is not covered" % name)
            self.freqs = self.rope_freqs()
            facts = golden["config"]
            assert facts["heads"] == self.h and facts["kv_heads"] == self.g and facts["head_dim"] == self.D
            assert facts["sliding_window"] == self.window
            if not np.allclose(self.freqs, facts["inv_freq"], rtol=1e-15, atol=0):
                raise CrossCheckFailed("%s: the RoPE frequencies differ from the golden's" % name)
        self.group = self.h // self.g
        self.layers = [self.layer_weights(l) for l in range(self.L)]
        if self.family == "gpt2":
            self.W_U = w["wte.weight"]
            self.norm_f = (w["ln_f.weight"], w["ln_f.bias"])
        elif self.family == "llama":
            tied = cfg.get("tie_word_embeddings", True)
            self.W_U = w["model.embed_tokens.weight"] if tied else w["lm_head.weight"]
            self.norm_f = (w["model.norm.weight"], None)
        elif self.family == "gemma":
            assert "lm_head.weight" not in w  # tied
            self.W_U = w["model.embed_tokens.weight"]
            self.norm_f = (1.0 + w["model.norm.weight"], None)
        elif self.family == "neox":
            self.W_U = w["embed_out.weight"]
            self.norm_f = (w["gpt_neox.final_layer_norm.weight"], w["gpt_neox.final_layer_norm.bias"])
        elif self.family in NPO:
            tied = cfg.get("tie_word_embeddings", False)
            assert tied == ("lm_head.weight" not in w)
            self.W_U = w["model.embed_tokens.weight"] if tied else w["lm_head.weight"]
            self.norm_f = (w["model.norm.weight"], None)
        self.has_bo = self.layers[0]["bo"] is not None

    def gemma_variant(self):
        """generate_gemma.py's description of the variant, for its forward
        function, after checking that it says what config.json says and
        what the golden derived from it (each layer's kind, window and
        frequencies, the caps, the scales)."""
        import generate_gemma as gg
        v = next(v for v in gg.VARIANTS if v["name"] == self.name)
        cfg, facts = self.cfg, self.golden["config"]
        assert (v["layers"], v["hidden"], v["heads"], v["kv_heads"], v["head_dim"], v["inter"]) == \
            (self.L, self.H, self.h, self.g, self.D, cfg["intermediate_size"])
        assert v["eps"] == self.eps and v["theta"] == cfg.get("rope_theta", v["theta"])
        assert v.get("attn_cap") == cfg.get("attn_logit_softcapping")
        assert v.get("final_cap") == self.final_cap
        assert v.get("qpas") == cfg.get("query_pre_attn_scalar")
        assert v.get("window") == cfg.get("sliding_window")
        kinds = gg.layer_types(v)
        assert kinds == facts["layer_types"]
        assert [v["window"] if k == "sliding" else 0 for k in kinds] == facts["layer_windows"]
        for k, f in zip(kinds, facts["layer_inv_freq"]):
            if not np.allclose(gg.layer_rope(v, k)[2], f, rtol=1e-15, atol=0):
                raise CrossCheckFailed("%s: the RoPE frequencies differ from the golden's" % self.name)
        assert gg.attention_scale(v) == facts["attention_scale"]
        assert facts["final_logit_softcapping"] == self.final_cap
        return v

    def npo_variant(self):
        """generate_neox_phi3_olmo2.py's description of the variant, for its
        forward function, after checking that it says what config.json says
        and what the golden derived from it (the rotary dims and
        frequencies, the residual, the window, the longrope factors)."""
        import generate_neox_phi3_olmo2 as gn
        v = next(v for v in gn.VARIANTS if v["name"] == self.name)
        cfg, facts = self.cfg, self.golden["config"]
        heads, kv, d = gn.dims(v)
        assert (v["family"], v["layers"], v["hidden"], heads, kv, d, v["inter"]) == \
            (self.model_type, self.L, self.H, self.h, self.g, self.D, cfg["intermediate_size"])
        assert v["eps"] == self.eps
        assert (facts["heads"], facts["kv_heads"], facts["head_dim"]) == (self.h, self.g, self.D)
        rot = gn.rotary_dims(v)
        assert facts["rotary_dims"] == rot
        if v["family"] == "gpt_neox":
            assert v["parallel"] == cfg["use_parallel_residual"] == facts["parallel_residual"]
            assert v["base"] == cfg["rotary_emb_base"] and v["pct"] == cfg["rotary_pct"]
            assert rot == int(d * cfg["rotary_pct"])
        else:
            assert not facts["parallel_residual"]
            assert v["theta"] == cfg["rope_theta"]
            assert v.get("window") == cfg.get("sliding_window") == facts["sliding_window"]
            assert bool(v.get("tied")) == cfg["tie_word_embeddings"] == facts["tied"]
        if v["family"] == "phi3":
            assert v["scaling"] == cfg["rope_scaling"]
            assert (v["orig"], v["max_pos"]) == (cfg["original_max_position_embeddings"],
                                                 cfg["max_position_embeddings"])
            assert rot == int(d * cfg.get("partial_rotary_factor", 1.0))
        n = len(self.golden["cases"][0]["ids"])
        freqs, att, _, which = gn.rope_tables(v, n)
        if v["family"] == "phi3" and v["scaling"]:
            lr = facts["longrope"]
            assert which == lr["cases"][0] == "long" and n > v["orig"]
            want = lr["inv_freq_long"]
            assert att == lr["attention_factor"]
        else:
            want = facts["inv_freq"]
        if not np.allclose(freqs, want, rtol=1e-15, atol=0):
            raise CrossCheckFailed("%s: the RoPE frequencies differ from the golden's" % self.name)
        return v

    def rope_freqs(self):
        """1 / theta^(2i/d), then Llama 3's scaling by wavelength
        (_compute_llama3_parameters)."""
        cfg, d = self.cfg, self.D
        theta = cfg.get("rope_theta", 10000.0)
        f = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
        sc = cfg.get("rope_scaling")
        if not sc:
            return f
        assert sc["rope_type"] == "llama3"
        factor, low, high = sc["factor"], sc["low_freq_factor"], sc["high_freq_factor"]
        old = sc["original_max_position_embeddings"]
        out = []
        for fi in f:
            wl = 2 * math.pi / fi
            if wl < old / high:
                out.append(fi)
            elif wl > old / low:
                out.append(fi / factor)
            else:
                s = (old / wl - low) / (high - low)
                out.append((1 - s) * fi / factor + s * fi)
        return np.array(out)

    def layer_weights(self, l):
        w, H = self.w, self.H
        if self.family == "gpt2":
            p = "h.%d." % l
            ca, cb = w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"]  # Conv1D [in][out]
            return dict(ln1=(w[p + "ln_1.weight"], w[p + "ln_1.bias"]),
                        Wq=ca[:, :H].T, bq=cb[:H], Wk=ca[:, H:2 * H].T, bk=cb[H:2 * H],
                        Wv=ca[:, 2 * H:].T, bv=cb[2 * H:],
                        Wo=w[p + "attn.c_proj.weight"].T, bo=w[p + "attn.c_proj.bias"],
                        ln2=(w[p + "ln_2.weight"], w[p + "ln_2.bias"]),
                        Wfc=w[p + "mlp.c_fc.weight"].T, bfc=w[p + "mlp.c_fc.bias"],
                        Wproj=w[p + "mlp.c_proj.weight"].T, bproj=w[p + "mlp.c_proj.bias"])
        if self.family == "bert":
            p = "encoder.layer.%d." % l
            return dict(Wq=w[p + "attention.self.query.weight"], bq=w[p + "attention.self.query.bias"],
                        Wk=w[p + "attention.self.key.weight"], bk=w[p + "attention.self.key.bias"],
                        Wv=w[p + "attention.self.value.weight"], bv=w[p + "attention.self.value.bias"],
                        Wo=w[p + "attention.output.dense.weight"], bo=w[p + "attention.output.dense.bias"],
                        ln_attn=(w[p + "attention.output.LayerNorm.weight"],
                                 w[p + "attention.output.LayerNorm.bias"]),
                        Wi=w[p + "intermediate.dense.weight"], bi=w[p + "intermediate.dense.bias"],
                        Wout=w[p + "output.dense.weight"], bout=w[p + "output.dense.bias"],
                        ln_out=(w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]))
        if self.family == "neox":
            p = "gpt_neox.layers.%d.attention." % l
            return dict(Wo=w[p + "dense.weight"], bo=w[p + "dense.bias"], post=None)
        p = "model.layers.%d." % l
        s = p + "self_attn."
        if self.family in NPO:
            # OLMo-2's post_attention_layernorm is on the attention's output
            return dict(Wo=w[s + "o_proj.weight"], bo=None,
                        post=w[p + "post_attention_layernorm.weight"] if self.out_norm else None)
        if self.family == "gemma":
            # the norms multiply by 1 + w; Gemma 2's and 3's
            # post_attention_layernorm is on the attention's output
            return dict(Wo=w[s + "o_proj.weight"], bo=None,
                        post=1.0 + w[p + "post_attention_layernorm.weight"] if self.sandwich else None)
        return dict(ln1=w[p + "input_layernorm.weight"],
                    Wq=w[s + "q_proj.weight"], bq=w.get(s + "q_proj.bias"),
                    Wk=w[s + "k_proj.weight"], bk=w.get(s + "k_proj.bias"),
                    Wv=w[s + "v_proj.weight"], bv=w.get(s + "v_proj.bias"),
                    qn=w.get(s + "q_norm.weight"), kn=w.get(s + "k_norm.weight"),
                    Wo=w[s + "o_proj.weight"], bo=w.get(s + "o_proj.bias"),
                    ln2=w[p + "post_attention_layernorm.weight"],
                    Wg=w[p + "mlp.gate_proj.weight"], Wu=w[p + "mlp.up_proj.weight"],
                    Wd=w[p + "mlp.down_proj.weight"])

    def variant(self):
        """generate_decoders.py's description of the variant, for its
        forward function."""
        import generate_decoders as gd
        return next(v for v in gd.VARIANTS if v["name"] == self.name)


# -------------------------------------------------- the hooked reference

def rms(x, g, eps):
    return g * (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps))


def rope_np(x, freqs):
    """x: [n][heads][d]; dimension i (< d/2) pairs with i + d/2 at positions
    0..n-1: (a, b) -> (a cos - b sin, b cos + a sin)."""
    n, _, d = x.shape
    ang = np.arange(n, dtype=np.float64)[:, None] * freqs[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., :d // 2], x[..., d // 2:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def item_heads(m, it, alt):
    if "head" not in it:
        return list(range(m.h))
    if "gqa_as_kv" in alt:
        return list(range(it["head"] * m.group, (it["head"] + 1) * m.group))
    return [it["head"]]


def ablate_np(m, z, items, mean_n, alt, means=None):
    """Applies a layer's ablation items in list order to z [n][h*D]; the
    means are over positions 0..mean_n-1 of z before any of them (or, for a
    wrong convention, the means given)."""
    n = z.shape[0]
    z3 = z.reshape(n, m.h, m.D).copy()
    before = z3.copy()
    if means is None:
        means = before[:mean_n].mean(0)  # [h][D]
    for it in items:
        pos = it.get("positions", list(range(n)))
        for a in item_heads(m, it, alt):
            for i in pos:
                if it["mode"] == "zero":
                    z3[i, a] = 0.0
                elif "mean_over_heads" in alt:
                    z3[i, a] = before[i].mean(0)
                else:
                    z3[i, a] = means[a]
    return z3.reshape(n, m.h * m.D)


def patch_np(m, patch, kind, l, t):
    """t with the patch's activation put in, when the patch is of this
    kind and layer: a head's slice of z, or a row of the others, from the
    source run's cache."""
    if patch is None or patch[0] != kind or patch[1] != l:
        return t
    a, pos, src = patch[2:5]
    t = t.copy()
    sel = slice(None) if pos is None else pos
    if kind == "z":
        t[sel, a * m.D:(a + 1) * m.D] = src["z"][l][sel, a * m.D:(a + 1) * m.D]
    elif kind == "attn_out" and "pre_norm_attn_out" in patch_alt(patch):
        # wrong: the source's output as it was before post_attention_layernorm
        t[sel] = (src["z"][l] @ m.layers[l]["Wo"].T)[sel]
    else:
        t[sel] = src[kind][l][sel]
    return t


def patch_alt(patch):
    return patch[5] if len(patch) > 5 else ()


def cache_hook(m, c, ablate, mean_n, patch, alt, means=None):
    """The hook of a hooked forward (generate_gemma.py's and
    generate_neox_phi3_olmo2.py's): the ablation items at z, the patch at
    its point, every hook point's value kept in the cache c (and each
    ablated layer's means in c["means"]). means: None, or {layer: [h][D]}
    the means a wrong convention keeps from another pass."""
    unablated = {}
    c.update({"resid_pre": [], "z": [], "attn_out": [], "mlp_out": [], "means": {}})

    def hook(name, l, t):
        if name == "resid_final":
            c["resid_final"] = t
            return t
        items = [it for it in ablate if it["layer"] == l]
        if name == "z":
            unablated[l] = t
            if items:
                c["means"][l] = t[:mean_n].reshape(-1, m.h, m.D).mean(0)
                t = ablate_np(m, t, items, mean_n, alt, None if means is None else means[l])
        if name == "attn_out" and items and "post_norm_frozen" in alt:
            # wrong: the edit made on the normed output, the norm's scale
            # kept at the unablated pass's (each head's normed share)
            wo, post = m.layers[l]["Wo"], m.layers[l]["post"]
            a0 = unablated[l] @ wo.T
            t = (c["z"][l] @ wo.T) * post / np.sqrt((a0 * a0).mean(-1, keepdims=True) + m.eps)
        if name == "attn_out" and items and "after_wo" in alt and m.layers[l]["bo"] is not None:
            # wrong: the zeroed heads' share of the bias goes too
            t = t.copy()
            for it in items:
                if it["mode"] == "zero":
                    share = len(item_heads(m, it, alt)) / m.h
                    for i in it.get("positions", list(range(t.shape[0]))):
                        t[i] -= share * m.layers[l]["bo"]
        t = patch_np(m, patch, name, l, t)
        c[name].append(t)
        return t
    return hook


def run_gemma(m, ids, ablate=(), mean_n=None, patch=None, alt=()):
    """The hooked forward on Gemma, Gemma 2 and 3: generate_gemma.py's
    forward itself, its hook points doing the edits and filling the cache.
    hook_attn_out and hook_mlp_out are what each sublayer adds to the
    stream (after Gemma 2's and 3's post_attention_layernorm and
    post_feedforward_layernorm, as TransformerLens hooks them). The cache
    also has the logits before the final soft cap (logits_uncapped)."""
    import generate_gemma as gg
    n = len(ids)
    mean_n = n if mean_n is None else mean_n
    c = {}
    hook = cache_hook(m, c, ablate, mean_n, patch, alt)
    attn, hidden, _, _ = gg.forward(m.w, m.gv, list(ids), hook=hook)
    raw = hidden[-1] @ m.W_U.T
    cap = m.final_cap
    c["attentions"], c["hidden"], c["logits_uncapped"] = attn, hidden, raw
    c["logits"] = raw if cap is None or "uncapped_metric" in alt else cap * np.tanh(raw / cap)
    return c


# wrong conventions the forward of generate_neox_phi3_olmo2.py computes itself
NPO_FORWARD_ALTS = ("residual_swapped", "longrope_stale_cache")


def run_npo(m, ids, ablate=(), mean_n=None, patch=None, alt=(), means=None):
    """The hooked forward on GPT-NeoX, Phi-3 and OLMo-2:
    generate_neox_phi3_olmo2.py's forward itself, its hook points doing the
    edits and filling the cache: z before dense / o_proj, attn_out with
    dense's bias (on OLMo-2 after post_attention_layernorm), mlp_out (on
    OLMo-2 after post_feedforward_layernorm); with GPT-NeoX's parallel
    residual both sublayers read resid_pre and the layer's output is
    resid_pre + attn_out + mlp_out (TransformerLens' parallel_attn_mlp).
    Phi-3's longrope takes the short or the long factors by the length of
    the run, as transformers does when it runs the whole sequence. The
    logits of every position."""
    import generate_neox_phi3_olmo2 as gn
    n = len(ids)
    mean_n = n if mean_n is None else mean_n
    c = {}
    hook = cache_hook(m, c, ablate, mean_n, patch, alt, means)
    fwd_alt = tuple(a for a in alt if a in NPO_FORWARD_ALTS)
    attn, hidden, _ = gn.forward(m.w, m.nv, list(ids), fwd_alt, hook=hook)
    c["attentions"], c["hidden"] = attn, hidden
    c["logits"] = hidden[-1] @ m.W_U.T
    return c


def run_np(m, ids, types=None, ablate=(), mean_n=None, patch=None, alt=()):
    """The hooked forward. ablate: items {layer, head?, mode, positions?};
    mean_n: the positions the means run over (default all); patch: (kind,
    layer, head, position or None, source cache[, wrong conventions]) with
    kind z | resid_pre | attn_out | mlp_out. Returns the cache: attentions [L][h][n][n],
    hidden [L+1][n][H] (as output_hidden_states), resid_pre, z, attn_out,
    mlp_out per layer, resid_final (before the final norm) and, for
    decoders, logits [n][V]."""
    if m.family == "gemma":
        return run_gemma(m, ids, ablate, mean_n, patch, alt)
    if m.family in NPO:
        return run_npo(m, ids, ablate, mean_n, patch, alt)
    n = len(ids)
    mean_n = n if mean_n is None else mean_n
    w = m.w
    if m.family == "gpt2":
        x = w["wte.weight"][ids] + w["wpe.weight"][:n]
    elif m.family == "llama":
        x = w["model.embed_tokens.weight"][ids]
    else:
        e = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = layer_norm(e, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], m.eps)
    c = {"attentions": [], "hidden": [x], "resid_pre": [], "z": [], "attn_out": [], "mlp_out": []}
    i_ = np.arange(n)
    allowed = i_[None, :] <= i_[:, None]
    if m.family == "bert":
        allowed = np.ones((n, n), dtype=bool)
    elif m.family == "llama" and m.window is not None:
        allowed &= i_[None, :] > i_[:, None] - m.window
    kv_of = np.arange(m.h) // m.group

    def patched(kind, l, t):
        return patch_np(m, patch, kind, l, t)

    for l, lw in enumerate(m.layers):
        x = patched("resid_pre", l, x)
        c["resid_pre"].append(x)
        if m.family == "gpt2":
            a_in = layer_norm(x, lw["ln1"][0], lw["ln1"][1], m.eps)
        elif m.family == "llama":
            a_in = rms(x, lw["ln1"], m.eps)
        else:
            a_in = x
        q, k, v = (a_in @ lw["W" + t].T + (lw["b" + t] if lw["b" + t] is not None else 0.0) for t in "qkv")
        q, k, v = q.reshape(n, m.h, m.D), k.reshape(n, m.g, m.D), v.reshape(n, m.g, m.D)
        if m.family == "llama":
            if lw["qn"] is not None:
                q, k = rms(q, lw["qn"], m.eps), rms(k, lw["kn"], m.eps)
            q, k = rope_np(q, m.freqs), rope_np(k, m.freqs)
        k, v = k[:, kv_of], v[:, kv_of]
        scores = np.einsum("iad,jad->aij", q, k) / math.sqrt(m.D)
        scores = np.where(allowed[None], scores, -np.inf)
        probs = softmax(scores)
        c["attentions"].append(probs)
        z = np.einsum("aij,jad->iad", probs, v).reshape(n, m.h * m.D)
        items = [it for it in ablate if it["layer"] == l]
        if items:
            z = ablate_np(m, z, items, mean_n, alt)
        z = patched("z", l, z)
        c["z"].append(z)
        attn_out = z @ lw["Wo"].T
        if lw["bo"] is not None:
            attn_out = attn_out + lw["bo"]
            if "after_wo" in alt:  # the zeroed heads' share of the bias goes too
                attn_out = attn_out.copy()
                for it in items:
                    if it["mode"] == "zero":
                        share = len(item_heads(m, it, alt)) / m.h
                        for i in it.get("positions", list(range(n))):
                            attn_out[i] -= share * lw["bo"]
        attn_out = patched("attn_out", l, attn_out)
        c["attn_out"].append(attn_out)
        if m.family == "bert":
            x1 = layer_norm(x + attn_out, lw["ln_attn"][0], lw["ln_attn"][1], m.eps)
            act = gelu if m.cfg["hidden_act"] == "gelu" else gelu_new
            mlp_out = act(x1 @ lw["Wi"].T + lw["bi"]) @ lw["Wout"].T + lw["bout"]
            mlp_out = patched("mlp_out", l, mlp_out)
            x = layer_norm(x1 + mlp_out, lw["ln_out"][0], lw["ln_out"][1], m.eps)
        elif m.family == "gpt2":
            x1 = x + attn_out
            h2 = layer_norm(x1, lw["ln2"][0], lw["ln2"][1], m.eps)
            mlp_out = gelu_new(h2 @ lw["Wfc"].T + lw["bfc"]) @ lw["Wproj"].T + lw["bproj"]
            mlp_out = patched("mlp_out", l, mlp_out)
            x = x1 + mlp_out
        else:
            x1 = x + attn_out
            h2 = rms(x1, lw["ln2"], m.eps)
            gate = h2 @ lw["Wg"].T
            mlp_out = (gate / (1.0 + np.exp(-gate)) * (h2 @ lw["Wu"].T)) @ lw["Wd"].T
            mlp_out = patched("mlp_out", l, mlp_out)
            x = x1 + mlp_out
        c["mlp_out"].append(mlp_out)
        c["hidden"].append(x)
    c["resid_final"] = x
    if m.family != "bert":
        g, b = m.norm_f
        final = layer_norm(x, g, b, m.eps) if m.family == "gpt2" else rms(x, g, m.eps)
        c["hidden"][-1] = final
        c["logits"] = final @ m.W_U.T
    c["attentions"] = np.stack(c["attentions"])
    c["hidden"] = np.stack(c["hidden"])
    return c


# --------------------------------------------- the PyTorch implementation

def T(a):
    return torch.tensor(np.asarray(a, dtype=np.float64), dtype=torch.float64)


def ablate_torch(h, D, group, z, items, mean_n, alt=()):
    """The ablation items as masks: each one's [n][h] selection, its
    replacement (zeros or the means before any item) put in by torch.where."""
    n = z.shape[0]
    z3 = z.view(n, h, D)
    means = z3[:mean_n].mean(dim=0)
    for it in items:
        sel = torch.zeros(n, h, dtype=torch.bool)
        rows = torch.arange(n) if "positions" not in it else torch.tensor(it["positions"])
        if "head" not in it:
            cols = torch.arange(h)
        elif "gqa_as_kv" in alt:
            cols = torch.arange(it["head"] * group, (it["head"] + 1) * group)
        else:
            cols = torch.tensor([it["head"]])
        sel[rows[:, None], cols[None, :]] = True
        repl = torch.zeros_like(z3) if it["mode"] == "zero" else means[None].expand(n, h, D)
        z3 = torch.where(sel[:, :, None], repl, z3)
    return z3.reshape(n, h * D)


def torch_gemma_layers(cfg):
    """Each layer's (window or None, inv_freq) from config.json alone:
    layer_types when given; else Gemma 2 slides on even layers, Gemma 3
    where (i + 1) % sliding_window_pattern (6 by default) != 0; Gemma 3's
    sliding layers turn at rope_local_base_freq unscaled, its global ones
    at rope_theta with the linear rope_scaling."""
    mt, L, D = cfg["model_type"], cfg["num_hidden_layers"], cfg["head_dim"]
    if "layer_types" in cfg:
        sliding = [t == "sliding_attention" for t in cfg["layer_types"]]
    elif mt == "gemma2":
        sliding = [not bool(i % 2) for i in range(L)]
    elif mt == "gemma3_text":
        sliding = [bool((i + 1) % cfg.get("sliding_window_pattern", 6)) for i in range(L)]
    else:
        sliding = [False] * L
    out = []
    for sl in sliding:
        if mt == "gemma3_text" and sl:
            base, sc = cfg.get("rope_local_base_freq", 10000.0), None
        else:
            base = cfg.get("rope_theta", 1e6 if mt == "gemma3_text" else 10000.0)
            sc = cfg.get("rope_scaling") if mt == "gemma3_text" else None
        f = 1.0 / base ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
        if sc:
            assert sc["rope_type"] == "linear"
            f = f / sc["factor"]
        out.append((cfg["sliding_window"] if sl else None, f))
    return out


def torch_run_gemma(m, ids, ablate=(), mean_n=None, patch=None):
    """Gemma, Gemma 2 and 3 hooked in torch, from config.json and the
    files' names: the embeddings times a sqrt(hidden) tensor, RMSNorm
    x * rsqrt(mean(x^2) + eps) * (1 + w), F.linear, q_norm / k_norm per
    head, q * cos + rotate_half(q) * sin, repeat_interleave, matmul times
    query_pre_attn_scalar^-1/2 (head_dim^-1/2 on Gemma), tanh cap, a
    boolean mask and softmax, the sandwich norms, F.gelu(tanh), the tied
    head and the final tanh cap. hook_attn_out / hook_mlp_out after the
    sublayer's output norm."""
    w, cfg = m.w, m.cfg
    n = len(ids)
    mean_n = n if mean_n is None else mean_n
    h, g, D, H = m.h, m.g, m.D, cfg["hidden_size"]
    mt = cfg["model_type"]
    sandwich = mt != "gemma"
    c = {"attentions": [], "hidden": [], "resid_pre": [], "z": [], "attn_out": [], "mlp_out": []}

    def patched(kind, l, t):
        if patch is None or patch[0] != kind or patch[1] != l:
            return t
        _, _, a, pos, src = patch[:5]
        rows = torch.arange(n) if pos is None else torch.tensor([pos])
        mask = torch.zeros_like(t, dtype=torch.bool)
        if kind == "z":
            mask[rows, a * D:(a + 1) * D] = True
        else:
            mask[rows] = True
        return torch.where(mask, T(src[kind][l]), t)

    def norm(t, name):
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + m.eps) * (1.0 + T(w[name]))

    def rot(t):
        return torch.cat((-t[..., D // 2:], t[..., :D // 2]), dim=-1)

    with torch.no_grad():
        x = F.embedding(torch.tensor(ids), T(w["model.embed_tokens.weight"]))
        x = x * torch.tensor(float(H), dtype=torch.float64).sqrt()
        c["hidden"].append(x)
        i = torch.arange(n)[:, None]
        j = torch.arange(n)[None, :]
        pos_ = torch.arange(n, dtype=torch.float64)
        scale = (cfg["query_pre_attn_scalar"] if sandwich else D) ** -0.5
        cap = cfg.get("attn_logit_softcapping")
        for l, (window, f) in enumerate(torch_gemma_layers(cfg)):
            p = "model.layers.%d." % l
            s = p + "self_attn."
            x = patched("resid_pre", l, x)
            c["resid_pre"].append(x)
            emb = torch.cat([torch.outer(pos_, f)] * 2, dim=-1)
            cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
            mask = j <= i
            if window is not None:
                mask = mask & (j > i - window)
            a_in = norm(x, p + "input_layernorm.weight")
            q = F.linear(a_in, T(w[s + "q_proj.weight"])).view(n, h, D)
            k = F.linear(a_in, T(w[s + "k_proj.weight"])).view(n, g, D)
            v = F.linear(a_in, T(w[s + "v_proj.weight"])).view(n, g, D)
            if s + "q_norm.weight" in w:
                q, k = norm(q, s + "q_norm.weight"), norm(k, s + "k_norm.weight")
            q = q * cos + rot(q) * sin
            k = k * cos + rot(k) * sin
            k = k.repeat_interleave(h // g, dim=1).transpose(0, 1)
            v = v.repeat_interleave(h // g, dim=1).transpose(0, 1)
            scores = (q.transpose(0, 1) @ k.transpose(1, 2)) * scale
            if cap is not None:
                scores = torch.tanh(scores / cap) * cap
            probs = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
            c["attentions"].append(probs)
            z = (probs @ v).transpose(0, 1).reshape(n, h * D)
            items = [it for it in ablate if it["layer"] == l]
            if items:
                z = ablate_torch(h, D, h // g, z, items, mean_n)
            z = patched("z", l, z)
            c["z"].append(z)
            attn_out = F.linear(z, T(w[s + "o_proj.weight"]))
            if sandwich:
                attn_out = norm(attn_out, p + "post_attention_layernorm.weight")
            attn_out = patched("attn_out", l, attn_out)
            c["attn_out"].append(attn_out)
            x1 = x + attn_out
            h2 = norm(x1, p + ("pre_feedforward_layernorm.weight" if sandwich
                               else "post_attention_layernorm.weight"))
            mlp_out = F.linear(F.gelu(F.linear(h2, T(w[p + "mlp.gate_proj.weight"])), approximate="tanh")
                               * F.linear(h2, T(w[p + "mlp.up_proj.weight"])),
                               T(w[p + "mlp.down_proj.weight"]))
            if sandwich:
                mlp_out = norm(mlp_out, p + "post_feedforward_layernorm.weight")
            mlp_out = patched("mlp_out", l, mlp_out)
            c["mlp_out"].append(mlp_out)
            x = x1 + mlp_out
            c["hidden"].append(x)
        c["resid_final"] = x
        final = norm(x, "model.norm.weight")
        c["hidden"][-1] = final
        raw = F.linear(final, T(w["model.embed_tokens.weight"]))
        fc = cfg.get("final_logit_softcapping")
        c["logits_uncapped"] = raw
        c["logits"] = raw if fc is None else torch.tanh(raw / fc) * fc
        c["attentions"] = torch.stack(c["attentions"])
        c["hidden"] = torch.stack(c["hidden"])
    return c


def torch_npo_rotary(cfg, n):
    """cos and sin [n][rot] from config.json alone, as the rotary modules
    build them: rot = int(head_dim * rotary_pct) (GPT-NeoX, base
    rotary_emb_base) or int(head_dim * partial_rotary_factor) (base
    rope_theta); with Phi-3's longrope the long factors when
    max(position) + 1 > original_max_position_embeddings, else the short,
    and cos, sin times sqrt(1 + ln(max / original) / ln(original));
    emb = cat(freqs, freqs)."""
    D = cfg["hidden_size"] // cfg["num_attention_heads"]
    if cfg["model_type"] == "gpt_neox":
        rot, base = int(D * cfg["rotary_pct"]), float(cfg["rotary_emb_base"])
    else:
        rot, base = int(D * cfg.get("partial_rotary_factor", 1.0)), float(cfg["rope_theta"])
    ext, att = torch.ones(rot // 2, dtype=torch.float64), 1.0
    sc = cfg.get("rope_scaling")
    if sc:
        assert sc.get("type", sc.get("rope_type")) == "longrope"
        orig = cfg["original_max_position_embeddings"]
        factor = cfg["max_position_embeddings"] / orig
        att = math.sqrt(1 + math.log(factor) / math.log(orig)) if factor > 1 else 1.0
        seq_len = int(torch.arange(n).max()) + 1
        ext = torch.tensor(sc["long_factor"] if seq_len > orig else sc["short_factor"], dtype=torch.float64)
    inv = 1.0 / (ext * base ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    freqs = torch.outer(torch.arange(n, dtype=torch.float64), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * att, emb.sin() * att


def torch_run_npo(m, ids, ablate=(), mean_n=None, patch=None):
    """GPT-NeoX, Phi-3 and OLMo-2 hooked in torch, from config.json and the
    files' names: F.layer_norm or RMSNorm by rsqrt, query_key_value viewed
    [n][heads][3 * D] and chunked, qkv_proj sliced, q_norm / k_norm over
    the whole projections, rotate_half on the rotary slice (the rest passed
    through), repeat_interleave for the KV heads, matmul times D^-1/2, a
    boolean causal (and window) mask and softmax, the ablations and patches
    by torch.where, dense with its bias, gate_up_proj chunked, F.gelu /
    F.silu; use_parallel_residual's MLP on ln2(resid_pre); OLMo-2's norms
    on the sublayers' outputs."""
    w, cfg = m.w, m.cfg
    n = len(ids)
    mean_n = n if mean_n is None else mean_n
    mt = cfg["model_type"]
    H, h = cfg["hidden_size"], cfg["num_attention_heads"]
    g = cfg.get("num_key_value_heads") or h
    D = H // h
    c = {"attentions": [], "hidden": [], "resid_pre": [], "z": [], "attn_out": [], "mlp_out": []}

    def patched(kind, l, t):
        if patch is None or patch[0] != kind or patch[1] != l:
            return t
        _, _, a, pos, src = patch[:5]
        rows = torch.arange(n) if pos is None else torch.tensor([pos])
        mask = torch.zeros_like(t, dtype=torch.bool)
        if kind == "z":
            mask[rows, a * D:(a + 1) * D] = True
        else:
            mask[rows] = True
        return torch.where(mask, T(src[kind][l]), t)

    def rms(t, name):
        return T(w[name]) * (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + m.eps))

    def ln(t, name):
        return F.layer_norm(t, (H,), T(w[name + ".weight"]), T(w[name + ".bias"]), m.eps)

    def lin(t, name, bias=False):
        return F.linear(t, T(w[name + ".weight"]), T(w[name + ".bias"]) if bias else None)

    cos, sin = torch_npo_rotary(cfg, n)
    rot = cos.shape[-1]

    def rotary(t):  # [heads][n][D]
        r, rest = t[..., :rot], t[..., rot:]
        half = torch.cat((-r[..., rot // 2:], r[..., :rot // 2]), dim=-1)
        return torch.cat((r * cos + half * sin, rest), dim=-1)

    with torch.no_grad():
        i = torch.arange(n)[:, None]
        j = torch.arange(n)[None, :]
        mask = j <= i
        window = cfg.get("sliding_window") if mt == "phi3" else None
        if window is not None:
            mask = mask & (j > i - window)
        x = F.embedding(torch.tensor(ids), T(w["gpt_neox.embed_in.weight" if mt == "gpt_neox"
                                               else "model.embed_tokens.weight"]))
        c["hidden"].append(x)
        for l in range(cfg["num_hidden_layers"]):
            x = patched("resid_pre", l, x)
            c["resid_pre"].append(x)
            if mt == "gpt_neox":
                p = "gpt_neox.layers.%d." % l
                qkv = lin(ln(x, p + "input_layernorm"), p + "attention.query_key_value", True)
                q, k, v = qkv.view(n, h, 3 * D).transpose(0, 1).chunk(3, dim=-1)
            elif mt == "phi3":
                p = "model.layers.%d." % l
                qkv = lin(rms(x, p + "input_layernorm.weight"), p + "self_attn.qkv_proj")
                q, k, v = qkv.split([h * D, g * D, g * D], dim=-1)
                q, k, v = (t.reshape(n, -1, D).transpose(0, 1) for t in (q, k, v))
            else:
                p = "model.layers.%d." % l
                q = rms(lin(x, p + "self_attn.q_proj"), p + "self_attn.q_norm.weight")
                k = rms(lin(x, p + "self_attn.k_proj"), p + "self_attn.k_norm.weight")
                v = lin(x, p + "self_attn.v_proj")
                q, k, v = (t.reshape(n, -1, D).transpose(0, 1) for t in (q, k, v))
            q, k = rotary(q), rotary(k)
            k = k.repeat_interleave(h // g, dim=0)
            v = v.repeat_interleave(h // g, dim=0)
            scores = (q @ k.transpose(1, 2)) * D ** -0.5
            probs = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
            c["attentions"].append(probs)
            z = (probs @ v).transpose(0, 1).reshape(n, h * D)
            items = [it for it in ablate if it["layer"] == l]
            if items:
                z = ablate_torch(h, D, h // g, z, items, mean_n)
            z = patched("z", l, z)
            c["z"].append(z)
            if mt == "gpt_neox":
                attn_out = lin(z, p + "attention.dense", True)
            else:
                attn_out = lin(z, p + "self_attn.o_proj")
            if mt == "olmo2":
                attn_out = rms(attn_out, p + "post_attention_layernorm.weight")
            attn_out = patched("attn_out", l, attn_out)
            c["attn_out"].append(attn_out)
            if mt == "gpt_neox":
                # the MLP reads resid_pre when parallel, resid_pre + attn_out else
                mlp_in = ln(x if cfg["use_parallel_residual"] else x + attn_out,
                            p + "post_attention_layernorm")
                inner = F.gelu(lin(mlp_in, p + "mlp.dense_h_to_4h", True))
                mlp_out = lin(inner, p + "mlp.dense_4h_to_h", True)
            elif mt == "phi3":
                gate, up = lin(rms(x + attn_out, p + "post_attention_layernorm.weight"),
                               p + "mlp.gate_up_proj").chunk(2, dim=-1)
                mlp_out = lin(up * F.silu(gate), p + "mlp.down_proj")
            else:
                x1 = x + attn_out
                inner = F.silu(lin(x1, p + "mlp.gate_proj")) * lin(x1, p + "mlp.up_proj")
                mlp_out = lin(inner, p + "mlp.down_proj")
                mlp_out = rms(mlp_out, p + "post_feedforward_layernorm.weight")
            mlp_out = patched("mlp_out", l, mlp_out)
            c["mlp_out"].append(mlp_out)
            x = x + attn_out + mlp_out
            c["hidden"].append(x)
        c["resid_final"] = x
        if mt == "gpt_neox":
            final = ln(x, "gpt_neox.final_layer_norm")
            head = "embed_out.weight"
        else:
            final = rms(x, "model.norm.weight")
            head = "model.embed_tokens.weight" if cfg.get("tie_word_embeddings") else "lm_head.weight"
        c["hidden"][-1] = final
        c["logits"] = F.linear(final, T(w[head]))
        c["attentions"] = torch.stack(c["attentions"])
        c["hidden"] = torch.stack(c["hidden"])
    return c


def torch_run(m, ids, types=None, ablate=(), mean_n=None, patch=None):
    """The same hooked network in torch, on the files' own tensor names and
    layouts. Returns a cache like run_np's (torch tensors)."""
    if m.family == "gemma":
        return torch_run_gemma(m, ids, ablate, mean_n, patch)
    if m.family in NPO:
        return torch_run_npo(m, ids, ablate, mean_n, patch)
    w, cfg = m.w, m.cfg
    n = len(ids)
    mean_n = n if mean_n is None else mean_n
    h, D = m.h, m.D
    tid = torch.tensor(ids)
    c = {"attentions": [], "hidden": [], "resid_pre": [], "z": [], "attn_out": [], "mlp_out": []}

    def patched(kind, l, t):
        if patch is None or patch[0] != kind or patch[1] != l:
            return t
        _, _, a, pos, src = patch
        rows = torch.arange(n) if pos is None else torch.tensor([pos])
        mask = torch.zeros_like(t, dtype=torch.bool)
        if kind == "z":
            mask[rows, a * D:(a + 1) * D] = True
        else:
            mask[rows] = True
        return torch.where(mask, T(src[kind][l]), t)

    with torch.no_grad():
        if m.family == "gpt2":
            H = cfg["n_embd"]
            x = F.embedding(tid, T(w["wte.weight"])) + T(w["wpe.weight"])[:n]
            mask = torch.ones(n, n, dtype=torch.bool).tril()
        elif m.family == "llama":
            H = cfg["hidden_size"]
            x = F.embedding(tid, T(w["model.embed_tokens.weight"]))
            i = torch.arange(n)[:, None]
            j = torch.arange(n)[None, :]
            mask = j <= i
            if m.window is not None:
                mask = mask & (j > i - m.window)
            theta = cfg.get("rope_theta", 10000.0)
            f = 1.0 / theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
            sc = cfg.get("rope_scaling")
            if sc:
                old = sc["original_max_position_embeddings"]
                low, high, factor = sc["low_freq_factor"], sc["high_freq_factor"], sc["factor"]
                wl = 2 * math.pi / f
                scaled = torch.where(wl > old / low, f / factor, f)
                smooth = (old / wl - low) / (high - low)
                blended = (1 - smooth) * scaled / factor + smooth * scaled
                medium = ~(wl < old / high) & ~(wl > old / low)
                f = torch.where(medium, blended, scaled)
            emb = torch.cat([torch.outer(torch.arange(n, dtype=torch.float64), f)] * 2, dim=-1)
            cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]

            def rot(t):
                return torch.cat((-t[..., D // 2:], t[..., :D // 2]), dim=-1)

            def trms(t, g):
                return g * (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + m.eps))
        else:
            H = cfg["hidden_size"]
            x = (F.embedding(tid, T(w["embeddings.word_embeddings.weight"]))
                 + F.embedding(torch.arange(n), T(w["embeddings.position_embeddings.weight"]))
                 + F.embedding(torch.tensor(types), T(w["embeddings.token_type_embeddings.weight"])))
            x = F.layer_norm(x, (H,), T(w["embeddings.LayerNorm.weight"]), T(w["embeddings.LayerNorm.bias"]),
                             m.eps)
            mask = torch.ones(n, n, dtype=torch.bool)
        c["hidden"].append(x)
        for l in range(m.L):
            x = patched("resid_pre", l, x)
            c["resid_pre"].append(x)
            items = [it for it in ablate if it["layer"] == l]
            if m.family == "gpt2":
                p = "h.%d." % l
                a_in = F.layer_norm(x, (H,), T(w[p + "ln_1.weight"]), T(w[p + "ln_1.bias"]), m.eps)
                qkv = torch.addmm(T(w[p + "attn.c_attn.bias"]), a_in, T(w[p + "attn.c_attn.weight"]))
                q, k, v = (t.view(n, h, D).transpose(0, 1) for t in qkv.split(H, dim=1))
            elif m.family == "llama":
                p = "model.layers.%d." % l
                s = p + "self_attn."
                a_in = trms(x, T(w[p + "input_layernorm.weight"]))

                def proj(t):
                    b = w.get(s + t + "_proj.bias")
                    return F.linear(a_in, T(w[s + t + "_proj.weight"]), None if b is None else T(b))
                q, k, v = proj("q").view(n, h, D), proj("k").view(n, m.g, D), proj("v").view(n, m.g, D)
                if s + "q_norm.weight" in w:
                    q, k = trms(q, T(w[s + "q_norm.weight"])), trms(k, T(w[s + "k_norm.weight"]))
                q = q * cos + rot(q) * sin
                k = k * cos + rot(k) * sin
                k = k.repeat_interleave(m.group, dim=1)
                v = v.repeat_interleave(m.group, dim=1)
                q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
            else:
                p = "encoder.layer.%d." % l

                def proj(t):
                    return F.linear(x, T(w[p + "attention.self.%s.weight" % t]),
                                    T(w[p + "attention.self.%s.bias" % t])).view(n, h, D).transpose(0, 1)
                q, k, v = proj("query"), proj("key"), proj("value")
            scores = (q @ k.transpose(1, 2)) * D ** -0.5
            probs = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
            c["attentions"].append(probs)
            z = (probs @ v).transpose(0, 1).reshape(n, h * D)
            if items:
                z = ablate_torch(h, D, m.group, z, items, mean_n)
            z = patched("z", l, z)
            c["z"].append(z)
            if m.family == "gpt2":
                attn_out = torch.addmm(T(w[p + "attn.c_proj.bias"]), z, T(w[p + "attn.c_proj.weight"]))
            elif m.family == "llama":
                b = w.get(s + "o_proj.bias")
                attn_out = F.linear(z, T(w[s + "o_proj.weight"]), None if b is None else T(b))
            else:
                attn_out = F.linear(z, T(w[p + "attention.output.dense.weight"]),
                                    T(w[p + "attention.output.dense.bias"]))
            attn_out = patched("attn_out", l, attn_out)
            c["attn_out"].append(attn_out)
            if m.family == "gpt2":
                x1 = x + attn_out
                h2 = F.layer_norm(x1, (H,), T(w[p + "ln_2.weight"]), T(w[p + "ln_2.bias"]), m.eps)
                inner = F.gelu(torch.addmm(T(w[p + "mlp.c_fc.bias"]), h2, T(w[p + "mlp.c_fc.weight"])),
                               approximate="tanh")
                mlp_out = torch.addmm(T(w[p + "mlp.c_proj.bias"]), inner, T(w[p + "mlp.c_proj.weight"]))
                mlp_out = patched("mlp_out", l, mlp_out)
                x = x1 + mlp_out
            elif m.family == "llama":
                x1 = x + attn_out
                h2 = trms(x1, T(w[p + "post_attention_layernorm.weight"]))
                mlp_out = F.linear(F.silu(F.linear(h2, T(w[p + "mlp.gate_proj.weight"])))
                                   * F.linear(h2, T(w[p + "mlp.up_proj.weight"])),
                                   T(w[p + "mlp.down_proj.weight"]))
                mlp_out = patched("mlp_out", l, mlp_out)
                x = x1 + mlp_out
            else:
                x1 = F.layer_norm(x + attn_out, (H,), T(w[p + "attention.output.LayerNorm.weight"]),
                                  T(w[p + "attention.output.LayerNorm.bias"]), m.eps)
                inner = F.linear(x1, T(w[p + "intermediate.dense.weight"]), T(w[p + "intermediate.dense.bias"]))
                inner = F.gelu(inner) if cfg["hidden_act"] == "gelu" else F.gelu(inner, approximate="tanh")
                mlp_out = F.linear(inner, T(w[p + "output.dense.weight"]), T(w[p + "output.dense.bias"]))
                mlp_out = patched("mlp_out", l, mlp_out)
                x = F.layer_norm(x1 + mlp_out, (H,), T(w[p + "output.LayerNorm.weight"]),
                                 T(w[p + "output.LayerNorm.bias"]), m.eps)
            c["mlp_out"].append(mlp_out)
            c["hidden"].append(x)
        c["resid_final"] = x
        if m.family == "gpt2":
            final = F.layer_norm(x, (H,), T(w["ln_f.weight"]), T(w["ln_f.bias"]), m.eps)
            c["logits"] = F.linear(final, T(w["wte.weight"]))
            c["hidden"][-1] = final
        elif m.family == "llama":
            final = trms(x, T(w["model.norm.weight"]))
            tied = cfg.get("tie_word_embeddings", True)
            c["logits"] = F.linear(final, T(w["model.embed_tokens.weight" if tied else "lm_head.weight"]))
            c["hidden"][-1] = final
        c["attentions"] = torch.stack(c["attentions"])
        c["hidden"] = torch.stack(c["hidden"])
    return c


def to_np(c):
    out = {}
    for k, v in c.items():
        out[k] = [t.numpy() for t in v] if isinstance(v, list) else v.numpy()
    return out


# ------------------------------------------------------------ the cases

def ablation_cases(n, heads):
    """The seven cases; a head past the model's last (GPT-NeoX's 3 and 2
    heads) is its last."""
    def a(k):
        return min(k, heads - 1)
    return [
        ("zero_one", [{"layer": 0, "head": a(1), "mode": "zero"}]),
        ("mean_one", [{"layer": 1, "head": a(2), "mode": "mean"}]),
        ("zero_positions", [{"layer": 0, "head": a(3), "mode": "zero", "positions": [0, 2]}]),
        ("mean_positions", [{"layer": 0, "head": a(0), "mode": "mean", "positions": [1, n - 1]}]),
        ("several", [{"layer": 0, "head": a(1), "mode": "zero"}, {"layer": 1, "head": a(0), "mode": "mean"},
                     {"layer": 1, "head": a(3), "mode": "zero"}]),
        ("zero_layer", [{"layer": 1, "mode": "zero"}]),
        ("mean_layer", [{"layer": 0, "mode": "mean"}]),
    ]


def greedy_ablate(heads):
    return [{"layer": 0, "head": min(1, heads - 1), "mode": "mean"},
            {"layer": 1, "head": min(2, heads - 1), "mode": "zero"}]


def wrong_conventions(m):
    """(case, convention) pairs each of which must move that case."""
    out = [("mean_one", "mean_over_heads")]
    if m.name in ("gpt2", "f32") or (m.has_bo and m.family != "llama"):
        out.append(("zero_layer", "after_wo"))
    if 1 < m.g < m.h:
        out.append(("zero_one", "gqa_as_kv"))
    if m.out_norm:
        out.append(("zero_one", "post_norm_frozen"))
    if m.family == "neox":
        # the hooked pass with the other residual: a parallel layer read
        # sequentially (its MLP on ln2(resid_pre + attn_out)), or the reverse
        out.append(("zero_one", "residual_swapped"))
    return out


def relative(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b)) / np.maximum(1.0, np.abs(b))))


def moved(c2, c):
    """How far a wrong convention moves a case: the last layer's attention
    weights (absolute), the hidden states and the logits (relative)."""
    d = max(float(np.max(np.abs(c2["attentions"][-1] - c["attentions"][-1]))), relative(c2["hidden"], c["hidden"]))
    if "logits" in c:
        d = max(d, relative(c2["logits"][-1], c["logits"][-1]))
    return d


def check_against_torch(label, c, t, keys=("attentions", "hidden", "logits", "logits_uncapped")):
    err = 0.0
    for k in keys:
        if k in c:
            err = max(err, compare("%s: %s" % (label, k), c[k], t[k]))
    return err


def check_unintervened(m, ids, types):
    """The hooked reference without interventions: against the existing
    scripts' forward functions (1e-9) and, rounded, the existing golden."""
    c = run_np(m, ids, types)
    case = m.golden["cases"][0]
    if m.family == "bert":
        import generate as gb
        attn, hidden = gb.bert_forward(m.w, m.cfg, ids, types)
        theirs = {"attentions": attn, "hidden": hidden}
    elif m.family == "gemma":
        # the plain pass of the same forward: the hooks, doing nothing,
        # must change nothing, to the bit
        import generate_gemma as gg
        attn, hidden, logits, raw = gg.forward(m.w, m.gv, list(ids))
        theirs = {"attentions": attn, "hidden": hidden, "logits": logits, "logits_uncapped": raw}
        for k, t in theirs.items():
            ours = c[k][-1] if k.startswith("logits") else c[k]
            if k.startswith("logits"):
                # the head on every row here, on the last one there
                compare("%s: no intervention, %s against the plain pass" % (m.name, k), ours, t, 1e-13)
            elif not np.array_equal(ours, t):
                raise CrossCheckFailed("%s: no intervention, the hooked pass changes %s" % (m.name, k))
    elif m.family in NPO:
        # the plain pass of the same forward, as generate_neox_phi3_olmo2.py
        # runs it for its goldens
        import generate_neox_phi3_olmo2 as gn
        attn, hidden, logits = gn.forward(m.w, m.nv, list(ids))
        theirs = {"attentions": attn, "hidden": hidden, "logits": logits}
        for k, t in theirs.items():
            if k == "logits":
                compare("%s: no intervention, logits against the plain pass" % m.name, c[k][-1], t, 1e-13)
            elif not np.array_equal(c[k], t):
                raise CrossCheckFailed("%s: no intervention, the hooked pass changes %s" % (m.name, k))
    else:
        import generate_decoders as gd
        attn, hidden, logits = gd.forward(m.w, m.variant(), ids)
        theirs = {"attentions": attn, "hidden": hidden, "logits": logits}
    err = 0.0
    for k in theirs:
        ours = c[k][-1] if k.startswith("logits") else c[k]
        err = max(err, compare("%s: no intervention, %s against the existing forward" % (m.name, k),
                               ours, theirs[k]))
        gkey = {"attentions": "attentions", "hidden": "hidden_states", "logits": "logits",
                "logits_uncapped": "logits_uncapped"}[k]
        if gkey not in case:  # Gemma: no cap, no logits_uncapped
            continue
        if rounded(ours) != case[gkey]:
            raise CrossCheckFailed("%s: no intervention, %s differ from the existing golden" % (m.name, k))
    return c, err


def longrope_after(m):
    """original_max_position_embeddings of a longrope model, else None."""
    if m.family == "phi3" and m.cfg.get("rope_scaling"):
        return m.cfg["original_max_position_embeddings"]
    return None


def greedy_ablated(m, prompt, ablate):
    """generate(do_sample=False) with the ablation at every step: the whole
    sequence recomputed, means over the prompt's positions; stops before a
    step closer than GREEDY_MARGIN. Each step's logits checked in torch.

    With longrope the whole sequence recomputed at each step is what
    transformers does: a step's length picks the factors, and
    Phi3ForCausalLM drops its cache at the step that first passes
    original_max_position_embeddings, so that every position (the prompt's,
    whose z give the means, too) is turned by the long factors from there
    on. The wrong conventions there (the margins): the cache kept across
    the boundary (positions before it turned by the short factors), and
    the means of the prompt's short-factor pass kept."""
    ids, new, margins, err, step_logits = list(prompt), [], [], 0.0, []
    after = longrope_after(m)
    wrong = {}
    short_means = None
    if after and len(prompt) <= after:
        short_means = run_npo(m, prompt, ablate, len(prompt))["means"]
    for _ in range(GREEDY_STEPS):
        logits = run_np(m, ids, ablate=ablate, mean_n=len(prompt))["logits"][-1]
        t = torch_run(m, ids, ablate=ablate, mean_n=len(prompt))["logits"][-1].numpy()
        err = max(err, compare("%s: greedy_ablated step %d logits" % (m.name, len(new)), logits, t))
        if short_means is not None and len(ids) > after:
            for alt, kw in (("longrope_stale_cache", {"alt": ("longrope_stale_cache",)}),
                            ("short_means_kept", {"means": short_means})):
                lg = run_npo(m, ids, ablate, len(prompt), **kw)["logits"][-1]
                d = relative(lg, logits)
                same = int(np.argmax(lg)) == int(np.argmax(logits))
                old = wrong.get(("greedy_ablated", alt), (0.0, 0))
                wrong[("greedy_ablated", alt)] = (max(old[0], d), old[1] + (not same))
        order = np.argsort(-logits, kind="stable")
        margin = float((logits[order[0]] - logits[order[1]]) / max(1.0, np.max(np.abs(logits))))
        if margin < GREEDY_MARGIN:
            break
        new.append(int(order[0]))
        margins.append(margin)
        step_logits.append(logits)
        ids.append(int(order[0]))
    out = {"ablate": ablate, "prompt": list(prompt), "new": new,
           "margins": [float("%.3g" % g) for g in margins]}
    if after:
        # each step's factors, as its length picks them, and its logits:
        # the tokens alone need not show which factors made them
        out["longrope"] = ["long" if len(prompt) + k > after else "short" for k in range(len(new))]
        out["logits"] = rounded(np.stack(step_logits))
    return out, err, wrong


# ------------------------------------------------------------ patching

def special_ids(d):
    """The ids of the added / special tokens: tokenizer.json's added_tokens,
    or GPT-2's <|endoftext|> for vocab.json + merges.txt."""
    path = os.path.join(d, "tokenizer.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fp:
            return {a["id"] for a in json.load(fp)["added_tokens"]}
    with open(os.path.join(d, "vocab.json"), encoding="utf-8") as fp:
        return {json.load(fp)["<|endoftext|>"]}


def corrupt(ids, size, specials):
    """C with the token at p* = n // 2 replaced: (C[p*] + 7) mod size, then
    +1 (mod size) while that is an added / special token or C[p*]."""
    p = len(ids) // 2
    t = (ids[p] + 7) % size
    while t in specials or t == ids[p]:
        t = (t + 1) % size
    x = list(ids)
    x[p] = t
    return x, p


def metric_value(kind, logits, c, i):
    if kind == "logit_diff":
        return float(logits[c] - logits[i])
    mx = np.max(logits)
    return float(logits[c] - (mx + np.log(np.sum(np.exp(logits - mx)))))


def metric_torch(kind, logits, c, i):
    if kind == "logit_diff":
        return float(logits[c] - logits[i])
    return float(torch.log_softmax(logits, dim=-1)[c])


def patch_targets(m, over, n):
    """(index in the effects array, (kind, layer, head, position)) in
    row-major order."""
    if over == "heads":
        return [((l, a), ("z", l, a, None)) for l in range(m.L) for a in range(m.h)]
    if over == "heads_positions":
        return [((l, a, i), ("z", l, a, i)) for l in range(m.L) for a in range(m.h) for i in range(n)]
    if over == "residual":
        return [((l, i), ("resid_pre", l, None, i)) for l in range(m.L) for i in range(n)]
    return [(("attn", l, i), ("attn_out", l, None, i)) for l in range(m.L) for i in range(n)] + \
        [(("mlp", l, i), ("mlp_out", l, None, i)) for l in range(m.L) for i in range(n)]


PATCH_CASES = [("heads", "denoise", "logit_diff"), ("heads", "noise", "logit_diff"),
               ("heads_positions", "denoise", "logit_diff"), ("heads_positions", "noise", "logit_diff"),
               ("residual", "denoise", "logit_diff"), ("residual", "noise", "logit_diff"),
               ("layers", "denoise", "logit_diff"), ("layers", "noise", "logit_diff"),
               ("heads", "denoise", "logprob")]


def patching(m, clean_ids, specials):
    size = m.golden["config"]["tokenizer_size"]
    corrupted_ids, p = corrupt(clean_ids, size, specials)
    assert max(corrupted_ids) < m.cfg["vocab_size"]
    n = len(clean_ids)
    runs = {"clean": run_np(m, clean_ids), "corrupted": run_np(m, corrupted_ids)}
    truns = {k: torch_run(m, ids) for k, ids in (("clean", clean_ids), ("corrupted", corrupted_ids))}
    err = 0.0
    for k in runs:
        err = max(err, check_against_torch("%s: %s run" % (m.name, k), runs[k], to_np(truns[k])))
    lc, lx = runs["clean"]["logits"][-1], runs["corrupted"]["logits"][-1]
    c = int(np.argmax(lc))
    i = int(np.argmax(lx))
    if i == c:
        i = int(np.argsort(-lc, kind="stable")[1])
    ids_of = {"clean": clean_ids, "corrupted": corrupted_ids}
    cases, margins = [], {}
    capped = m.family == "gemma" and m.final_cap is not None
    if capped:
        # wrong: the metrics of the logits before the final soft cap
        lc_raw, lx_raw = runs["clean"]["logits_uncapped"][-1], runs["corrupted"]["logits_uncapped"][-1]
        margins[("patching", "uncapped_metric")] = 0.0
    for over, direction, kind in PATCH_CASES:
        base, source = ("corrupted", "clean") if direction == "denoise" else ("clean", "corrupted")
        m_clean = metric_value(kind, lc, c, i)
        m_corr = metric_value(kind, lx, c, i)
        t_clean = metric_torch(kind, truns["clean"]["logits"][-1], c, i)
        t_corr = metric_torch(kind, truns["corrupted"]["logits"][-1], c, i)
        err = max(err, compare("%s: %s metric" % (m.name, kind), [m_clean, m_corr], [t_clean, t_corr]))
        denom, tdenom = m_clean - m_corr, t_clean - t_corr
        targets = patch_targets(m, over, n)
        effects, teffects, patched, tpatched = [], [], [], []
        for _, (kind_, l, a, pos) in targets:
            r = run_np(m, ids_of[base], patch=(kind_, l, a, pos, runs[source]))
            tr = torch_run(m, ids_of[base], patch=(kind_, l, a, pos, runs[source]))
            patched.append(metric_value(kind, r["logits"][-1], c, i))
            tpatched.append(metric_torch(kind, tr["logits"][-1], c, i))
            effects.append((patched[-1] - m_corr) / denom)
            teffects.append((tpatched[-1] - t_corr) / tdenom)
            if capped:
                u_clean, u_corr = metric_value(kind, lc_raw, c, i), metric_value(kind, lx_raw, c, i)
                u = (metric_value(kind, r["logits_uncapped"][-1], c, i) - u_corr) / (u_clean - u_corr)
                margins[("patching", "uncapped_metric")] = max(
                    margins[("patching", "uncapped_metric")], abs(u - effects[-1]),
                    abs(u_clean - m_clean), abs(u_corr - m_corr))
        label = "%s: patching %s %s %s" % (m.name, over, direction, kind)
        err = max(err, compare(label + " (metrics)", patched, tpatched))
        # an effect divides the metrics' float64 rounding by the gap:
        # below PATCHED_BELOW (phi3_longrope's logprob, 2.2e-7) the
        # tolerance grows as the gap shrinks (the metrics themselves are
        # held to TOL above), and the difference is reported apart
        e = compare(label, effects, teffects, TOL * max(1.0, PATCHED_BELOW / abs(denom)))
        if abs(denom) >= PATCHED_BELOW:
            err = max(err, e)
        else:
            NARROW[m.name] = max(NARROW.get(m.name, (0.0, denom))[0], e), denom
        if m.out_norm and over == "layers" and direction == "denoise":
            # wrong: the attention's output kept before post_attention_layernorm
            # and put back where the normed one goes
            moved_by = 0.0
            for k, (_, (kind_, l, a, pos)) in enumerate(targets[:m.L * n]):
                r = run_np(m, ids_of[base], patch=(kind_, l, a, pos, runs[source], ("pre_norm_attn_out",)))
                e = (metric_value(kind, r["logits"][-1], c, i) - m_corr) / denom
                moved_by = max(moved_by, abs(e - effects[k]))
            margins[("layers", "pre_norm_attn_out")] = moved_by
        if m.family == "neox" and over == "layers":
            # wrong: the hooked runs with the other residual (a parallel
            # layer's MLP reading resid_pre + attn_out, or the reverse)
            alt = ("residual_swapped",)
            w_runs = {k: run_np(m, ids_of[k], alt=alt) for k in ("clean", "corrupted")}
            w_clean = metric_value(kind, w_runs["clean"]["logits"][-1], c, i)
            w_corr = metric_value(kind, w_runs["corrupted"]["logits"][-1], c, i)
            moved_by = 0.0
            for k, (_, (kind_, l, a, pos)) in enumerate(targets):
                r = run_np(m, ids_of[base], patch=(kind_, l, a, pos, w_runs[source]), alt=alt)
                e = (metric_value(kind, r["logits"][-1], c, i) - w_corr) / (w_clean - w_corr)
                moved_by = max(moved_by, abs(e - effects[k]))
            key = ("layers", "residual_swapped")
            margins[key] = max(margins.get(key, 0.0), moved_by)
        effects = np.array(effects)
        if over == "residual" and direction == "denoise":
            layer0 = effects[:n]
            assert abs(layer0[p] - 1.0) < 1e-12, (m.name, layer0[p])
            assert all(layer0[j] == 0.0 for j in range(n) if j != p), (m.name, layer0)
        def laid_out(a):
            if over == "layers":
                half = m.L * n
                return {"attn": rounded(a[:half]), "mlp": rounded(a[half:])}
            return rounded(a)
        metric = {"kind": kind, "correct": c, "incorrect": i} if kind == "logit_diff" else \
            {"kind": kind, "target": c}
        case = {"over": over, "direction": direction, "metric": metric,
                "clean": float("%.8g" % m_clean), "corrupted": float("%.8g" % m_corr),
                "effects": laid_out(effects)}
        if abs(denom) < PATCHED_BELOW:
            # the rounded clean and corrupted metrics would not give the
            # patched ones back from the effects: each patched run's metric
            case["patched"] = laid_out(np.array(patched))
        cases.append(case)
    out = {"clean_ids": list(clean_ids), "corrupted_ids": corrupted_ids, "position": p,
           "correct": c, "incorrect": i, "cases": cases}
    return out, runs["clean"], err, margins


# ------------------------------------------------------------------ DLA

def dla_np(m, cache, p, target, alt=()):
    """Each component's contribution to u = W_U[c] - W_U[i] (or W_U[t])
    through the final norm with its scale frozen at the residual r
    (LayerNorm: each part centred, divided by std(r)). On Gemma 2 and 3 and
    OLMo-2 a head's output goes through its layer's post_attention_layernorm
    first, frozen at the layer's output a = z W_O^T: (z_a W_O,a^T) * w /
    rms(a) (1 + w on Gemma). The logit is the one before the final soft cap
    (logits_uncapped), which the parts add up to."""
    u = m.W_U[target[0]] - m.W_U[target[1]] if len(target) == 2 else m.W_U[target[0]]
    r = cache["resid_final"][p]
    g, b = m.norm_f
    if m.layer_norm:
        scale = math.sqrt(float(np.var(r)) + m.eps)
        centred = "uncentred" not in alt

        def through(v):
            return float(((v - v.mean() * centred) / scale * g) @ u)
        bias = float(b @ u)
    else:
        scale = math.sqrt(float(np.mean(r * r)) + m.eps)

        def through(v):
            return float((v / scale * g) @ u)
        bias = 0.0
    parts = [cache["resid_pre"][0][p]]
    embed = through(cache["resid_pre"][0][p])
    heads, mlp, attn_bias = [], [], []
    for l, lw in enumerate(m.layers):
        post = 1.0
        if lw.get("post") is not None and "post_norm_unfrozen" not in alt:
            a_l = cache["z"][l][p] @ lw["Wo"].T
            post = lw["post"] / math.sqrt(float(np.mean(a_l * a_l)) + m.eps)
        for a in range(m.h):
            sl = slice(a * m.D, (a + 1) * m.D)
            v = (cache["z"][l][p, sl] @ lw["Wo"][:, sl].T) * post
            parts.append(v)
            heads.append(through(v))
        if lw["bo"] is not None:
            parts.append(lw["bo"])
            attn_bias.append(through(lw["bo"]))
        parts.append(cache["mlp_out"][l][p])
        mlp.append(through(cache["mlp_out"][l][p]))
    if alt:
        return {"heads": heads, "mlp": mlp, "embed": embed, "attn_bias": attn_bias}
    if relative(np.sum(parts, axis=0), r) > 1e-12:
        raise CrossCheckFailed("%s: the components do not sum to the residual" % m.name)
    total = embed + sum(heads) + sum(mlp) + sum(attn_bias) + bias
    lg = cache.get("logits_uncapped", cache["logits"])[p]
    logit = float(lg[target[0]] - lg[target[1]]) if len(target) == 2 else float(lg[target[0]])
    if not abs(total - logit) <= 1e-9 * max(1.0, abs(logit)):
        raise CrossCheckFailed("%s: attribution total %.17g, logit %.17g" % (m.name, total, logit))
    return {"position": p, "target": list(target), "embed": embed, "heads": heads, "mlp": mlp,
            "attn_bias": attn_bias if m.has_bo else None, "bias": bias, "total": total, "logit": logit}


def dla_torch(m, tc, p, target):
    """The same attribution in torch: every component stacked [K][H] (embed,
    the heads by einsum on W_O's head blocks, the biases, the MLPs), put
    through the norm at r's scale in one go (apply_ln_to_stack)."""
    w = m.w
    with torch.no_grad():
        if m.family == "gpt2":
            WU, g, b = T(w["wte.weight"]), T(w["ln_f.weight"]), T(w["ln_f.bias"])
        elif m.family == "neox":
            WU = T(w["embed_out.weight"])
            g, b = T(w["gpt_neox.final_layer_norm.weight"]), T(w["gpt_neox.final_layer_norm.bias"])
        elif m.family == "gemma":
            WU, g, b = T(w["model.embed_tokens.weight"]), 1.0 + T(w["model.norm.weight"]), None
        else:
            tied = m.cfg.get("tie_word_embeddings", m.family == "llama")
            WU = T(w["model.embed_tokens.weight" if tied else "lm_head.weight"])
            g, b = T(w["model.norm.weight"]), None
        u = WU[target[0]] - WU[target[1]] if len(target) == 2 else WU[target[0]]
        rows, heads_at, mlp_at, bias_at = [tc["resid_pre"][0][p]], [], [], []
        for l in range(m.L):
            z = tc["z"][l][p].view(m.h, m.D)
            o_name = ("gpt_neox.layers.%d.attention.dense" if m.family == "neox"
                      else "model.layers.%d.self_attn.o_proj") % l
            if m.family == "gpt2":
                Wo = T(w["h.%d.attn.c_proj.weight" % l]).view(m.h, m.D, m.H)  # [in][out]
                per = torch.einsum("ad,adk->ak", z, Wo)
            else:
                Wo = T(w[o_name + ".weight"]).view(m.H, m.h, m.D)
                per = torch.einsum("ad,kad->ak", z, Wo)
            if m.family == "olmo2":
                # post_attention_layernorm frozen at the layer's output
                a_l = F.linear(tc["z"][l][p], T(w[o_name + ".weight"]))
                per = per * T(w["model.layers.%d.post_attention_layernorm.weight" % l]) \
                    * torch.rsqrt(a_l.pow(2).mean() + m.eps)
            if m.family == "gemma" and m.sandwich:
                # post_attention_layernorm frozen at the layer's output
                a_l = F.linear(tc["z"][l][p], T(w["model.layers.%d.self_attn.o_proj.weight" % l]))
                post = (1.0 + T(w["model.layers.%d.post_attention_layernorm.weight" % l])) \
                    * torch.rsqrt(a_l.pow(2).mean() + m.eps)
                per = per * post
            heads_at += list(range(len(rows), len(rows) + m.h))
            rows += list(per)
            if m.family == "gpt2":
                bias_at.append(len(rows))
                rows.append(T(w["h.%d.attn.c_proj.bias" % l]))
            elif m.family == "neox":
                bias_at.append(len(rows))
                rows.append(T(w[o_name + ".bias"]))
            mlp_at.append(len(rows))
            rows.append(tc["mlp_out"][l][p])
        stack = torch.stack(rows)
        r = tc["resid_final"][p]
        if m.family in ("gpt2", "neox"):
            scale = torch.sqrt(r.var(unbiased=False) + m.eps)
            normed = (stack - stack.mean(-1, keepdim=True)) / scale * g
            bias = float(b @ u)
        else:
            scale = torch.sqrt(r.pow(2).mean() + m.eps)
            normed = stack / scale * g
            bias = 0.0
        contrib = normed @ u
        vals = [float(x) for x in contrib]
        return {"embed": vals[0], "heads": [vals[k] for k in heads_at], "mlp": [vals[k] for k in mlp_at],
                "attn_bias": [vals[k] for k in bias_at] if bias_at else None, "bias": bias,
                "total": float(contrib.sum()) + bias}


def dla_golden(d):
    return {"position": d["position"], "target": d["target"], "embed": float("%.8g" % d["embed"]),
            "heads": rounded(d["heads"]), "mlp": rounded(d["mlp"]),
            "attn_bias": None if d["attn_bias"] is None else rounded(d["attn_bias"]),
            "bias": float("%.8g" % d["bias"]), "total": float("%.8g" % d["total"]),
            "logit": float("%.8g" % d["logit"])}


# ------------------------------------------------------------- a variant

def build(name, models_dir):
    with open(os.path.join(models_dir, "golden", name + ".json")) as fp:
        golden = json.load(fp)
    m = Model(name, os.path.join(models_dir, name), golden)
    case0 = golden["cases"][0]
    ids = case0["ids"]
    types = case0.get("type_ids") if m.family == "bert" else None
    n = len(ids)
    assert m.L >= 2 and m.h >= (2 if m.family == "neox" else 4)
    clean, err = check_unintervened(m, ids, types)
    err = max(err, check_against_torch("%s: no intervention" % name, clean, to_np(torch_run(m, ids, types))))
    out = {"variant": name, "layers": m.L, "heads": m.h, "kv_heads": m.g, "head_dim": m.D, "hidden": m.H}
    if m.family != "bert":
        out["vocab_size"] = m.cfg["vocab_size"]
    out["ids"] = list(ids)
    if types is not None:
        out["type_ids"] = list(types)
    out["n"] = n
    ablation, results = [], {}
    for case, items in ablation_cases(n, m.h):
        c = run_np(m, ids, types, ablate=items)
        t = to_np(torch_run(m, ids, types, ablate=items))
        err = max(err, check_against_torch("%s: ablation %s" % (name, case), c, t))
        results[case] = (items, c)
        entry = {"name": case, "ablate": items, "attentions_last": rounded(c["attentions"][-1]),
                 "hidden_states": rounded(c["hidden"])}
        if "logits" in c:
            entry["logits"] = rounded(c["logits"][-1])
        ablation.append(entry)
    out["ablation"] = ablation
    margins = {}
    for case, alt in wrong_conventions(m):
        items, c = results[case]
        margins[(case, alt)] = moved(run_np(m, ids, types, ablate=items, alt=(alt,)), c)
        if not margins[(case, alt)] > MARGIN:
            raise CrossCheckFailed("%s: %s moves %s by only %.2e" % (name, alt, case, margins[(case, alt)]))
    flips = {}
    if m.family != "bert":
        prompt = ids
        after = longrope_after(m)
        if after:
            # the clean input (ablation, patching, attribution) is past the
            # boundary; the greedy steps start at it, so that they cross it
            assert n > after
            prompt = next(c_["ids"] for c_ in golden["cases"] if len(c_["ids"]) == after)
        out["greedy_ablated"], e, wrong = greedy_ablated(m, prompt, greedy_ablate(m.h))
        err = max(err, e)
        for key, (dm, flipped) in wrong.items():
            margins[key] = dm
            flips[key] = flipped
        out["patching"], cache, e, more = patching(m, ids, special_ids(os.path.join(models_dir, name)))
        margins.update(more)
        err = max(err, e)
        tcache = torch_run(m, ids)
        dla = []
        c_, i_ = out["patching"]["correct"], out["patching"]["incorrect"]
        for p, target in ((n - 1, [c_, i_]), (n - 2, [c_])):
            d = dla_np(m, cache, p, target)
            td = dla_torch(m, tcache, p, target)
            if m.out_norm:
                # wrong: each head's output straight through the final norm
                wrong = dla_np(m, cache, p, target, ("post_norm_unfrozen",))["heads"]
                key = ("dla", "post_norm_unfrozen")
                margins[key] = max(margins.get(key, 0.0), float(np.max(np.abs(np.subtract(wrong, d["heads"])))))
            if m.family == "gemma" and m.final_cap is not None:
                # wrong: the parts held to the capped logit
                lg = cache["logits"][p]
                capped = float(lg[target[0]] - lg[target[1]]) if len(target) == 2 else float(lg[target[0]])
                key = ("dla", "capped_logit")
                margins[key] = max(margins.get(key, 0.0), abs(capped - d["logit"]))
            if m.family == "neox":
                # wrong: the parts through the final LayerNorm uncentred; and
                # the hooked pass with the other residual
                for alt, src in (("uncentred", cache), ("residual_swapped",
                                                        run_np(m, ids, alt=("residual_swapped",)))):
                    wd = dla_np(m, src, p, target, (alt,) if alt == "uncentred" else ("parts_only",))
                    key = ("dla", alt)
                    moved_by = max(float(np.max(np.abs(np.subtract(wd[k], d[k]))))
                                   for k in ("heads", "mlp", "embed", "attn_bias"))
                    margins[key] = max(margins.get(key, 0.0), moved_by)
            for k in ("embed", "heads", "mlp", "attn_bias", "bias", "total"):
                if d[k] is not None or td[k] is not None:
                    err = max(err, compare("%s: attribution %s at %d" % (name, k, p), d[k], td[k]))
            dla.append(dla_golden(d))
        out["dla"] = dla
    for (case, alt), dm in margins.items():
        if not dm > MARGIN:
            raise CrossCheckFailed("%s: %s moves %s by only %.2e" % (name, alt, case, dm))
    return out, err, margins, flips


def write_json(path, obj):
    with open(path, "w", encoding="utf-8", newline="\n") as fp:
        json.dump(obj, fp, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
        fp.write("\n")


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: generate_interventions.py MODELS_DIR")
    if torch is None:
        sys.exit("generate_interventions.py: PyTorch is needed for the cross-checks "
                 "(Debian: apt-get install python3-torch)")
    torch.set_num_threads(1)
    models_dir = argv[1]
    built = [(name,) + build(name, models_dir) for name in DECODERS + ENCODERS]
    # every check has passed: write
    d = os.path.join(models_dir, "golden", "interventions")
    os.makedirs(d, exist_ok=True)
    for name, out, _, _, _ in built:
        write_json(os.path.join(d, name + ".json"), out)
    print("generate_interventions.py: ablation, patching and attribution goldens")
    for name, out, err, margins, flips in built:
        size = os.path.getsize(os.path.join(d, name + ".json"))
        extra = ""
        if "patching" in out:
            pt = out["patching"]
            gaps = {c["metric"]["kind"]: c["clean"] - c["corrupted"] for c in pt["cases"]}
            extra = ", p* %d, correct %d, incorrect %d, clean - corrupted %.3g (logit_diff) %.3g " \
                "(logprob), greedy %d steps" % (pt["position"], pt["correct"], pt["incorrect"],
                                               gaps["logit_diff"], gaps["logprob"],
                                               len(out["greedy_ablated"]["new"]))
        print("  %-14s %6.1f KB  cross-checks within %.1e%s" % (name, size / 1024, err, extra))
        if name in NARROW:
            print("      the effects of a gap of %.2g within %.1e of torch's (each patched metric within "
                  "the above)" % (NARROW[name][1], NARROW[name][0]))
        for (case, alt), dm in sorted(margins.items()):
            flipped = ", the next token at %d step(s)" % flips[(case, alt)] if (case, alt) in flips else ""
            print("      %-20s moves %-14s by %.3g%s" % (alt, case, dm, flipped))
    print("generate_interventions.py: %d goldens; every cross-check within %.0e, every wrong "
          "convention beyond %.0e" % (len(built), TOL, MARGIN))


if __name__ == "__main__":
    try:
        main(sys.argv)
    except CrossCheckFailed as e:
        sys.exit("generate_interventions.py: check failed: %s" % e)
