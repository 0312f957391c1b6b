#!/usr/bin/env python3
"""Write attnd's golden vectors from the float64 reference (reference.py).

    /usr/bin/python3 tests/golden/generate.py tests/golden      (make golden)

Before anything is written, the reference is cross-checked against PyTorch
(CPU, float64) wherever PyTorch computes the same thing, and against second,
independent formulations where it has no builtin (RoPE as complex numbers,
the random streams in vectorised uint64 NumPy, the tokenizer as a streaming
per-character pass). Any disagreement beyond 1e-9 (relative to max(1, |x|))
aborts without writing a file.

Output: one <case>.json per case, embeddings.json and tokenizer.json.
"""

import json
import math
import os
import sys
import unicodedata

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # keep __pycache__ out of tests/golden
sys.path.insert(0, HERE)
import reference as ref  # noqa: E402

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # pragma: no cover
    sys.exit("generate.py: PyTorch is needed for the cross-checks "
             "(Debian: apt-get install python3-torch)")

TOL = 1e-9
MAX_FILE_BYTES = 1_500_000
MAX_TOTAL_BYTES = 8_000_000
SENTENCE = "The cat chased the mouse because it was hungry"


class CrossCheckFailed(Exception):
    pass


# ----------------------------------------------------------------- helpers

def f32(v):
    """The float32 value nearest v, as a Python float."""
    return float(np.float32(v))


def T(a):
    return torch.tensor(np.asarray(a, dtype=np.float64), dtype=torch.float64)


def to_np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().numpy().astype(np.float64)
    return np.asarray(t, dtype=np.float64)


CHECKS = {}  # check name -> [max error, number of comparisons]


def compare(check, label, ours, theirs, valid=None, tol=TOL):
    """Max |ours - theirs| / max(1, |theirs|) over the valid entries."""
    a = np.asarray(ours, dtype=np.float64)
    b = to_np(theirs)
    if a.size != b.size:
        raise CrossCheckFailed("%s: %s: size %d (reference) vs %d (other)"
                               % (check, label, a.size, b.size))
    b = b.reshape(a.shape)
    if valid is not None:
        v = np.broadcast_to(np.asarray(valid, dtype=bool), a.shape)
        a, b = a[v], b[v]
    if not np.all(np.isfinite(a)):
        raise CrossCheckFailed("%s: %s: the reference has non-finite values" % (check, label))
    if not np.all(np.isfinite(b)):
        raise CrossCheckFailed("%s: %s: the other side has non-finite values" % (check, label))
    err = float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b)))) if a.size else 0.0
    entry = CHECKS.setdefault(check, [0.0, 0])
    entry[0] = max(entry[0], err)
    entry[1] += 1
    if not err <= tol:
        raise CrossCheckFailed("%s: %s: reference and cross-check disagree by %.3e (> %.0e)"
                               % (check, label, err, tol))
    return err


def require(check, cond, message):
    entry = CHECKS.setdefault(check, [0.0, 0])
    entry[1] += 1
    if not cond:
        raise CrossCheckFailed("%s: %s" % (check, message))


# ------------------------------------- second formulations (no PyTorch op)

def np_units(seed, label, count):
    """The random stream, vectorised with wrapping uint64 NumPy arithmetic."""
    key = np.uint64(ref.stream_key(seed, label))
    with np.errstate(over="ignore"):
        n = np.arange(1, count + 1, dtype=np.uint64)
        z = key + n * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def splitmix64_sequential(state, count):
    """The textbook SplitMix64 next(): state += gamma; return mix(state)."""
    out = []
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & ref.MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & ref.MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & ref.MASK64
        out.append(z ^ (z >> 31))
    return out


def np_embed(token, seed, d):
    u = np_units(seed, "token:" + token, 2 * ((d + 1) // 2))
    r = np.sqrt(-2.0 * np.log(1.0 - u[0::2]))
    e = np.empty(2 * len(r))
    e[0::2] = r * np.cos(2.0 * np.pi * u[1::2])
    e[1::2] = r * np.sin(2.0 * np.pi * u[1::2])
    return e[:d].astype(np.float32)


def torch_sinusoidal(n, d):
    """The Annotated Transformer's formulation: exp/log instead of pow."""
    pe = torch.zeros(n, d, dtype=torch.float64)
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * (-math.log(10000.0) / d))
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div[: d // 2])
    return pe


def torch_rope_complex(t, heads, d_k, base=10000.0):
    """Meta's LLaMA formulation: view pairs as complex numbers and multiply
    by exp(i * pos * theta_i), theta_i = base^(-2i/d_k).
    t: [B][L][heads*d_k] float64 tensor."""
    B, L, _ = t.shape
    freqs = 1.0 / (base ** (torch.arange(0, d_k, 2, dtype=torch.float64)[: d_k // 2] / d_k))
    angles = torch.outer(torch.arange(L, dtype=torch.float64), freqs)   # [L][d_k/2]
    rot = torch.polar(torch.ones_like(angles), angles)                 # exp(i angle)
    tc = torch.view_as_complex(t.reshape(B, L, heads, d_k // 2, 2).contiguous())
    out = torch.view_as_real(tc * rot[None, :, None, :])
    return out.reshape(B, L, heads * d_k)


def tokenize_streaming(text, keep_case=False, special_tokens=False):
    """docs/math.md's tokenizer read literally, one character at a time (the way a
    C implementation walks the string): lowercase + NFD + drop Mn applied to
    each character on its own, punctuation tested on what that yields."""
    def fold(ch):
        if keep_case:
            return ch
        return "".join(c for c in unicodedata.normalize("NFD", ch.lower())
                       if unicodedata.category(c) != "Mn")

    tokens, word = [], []

    def end_word():
        if word:
            tokens.append("".join(word))
            word.clear()

    for ch in text:
        cp = ord(ch)
        cat = unicodedata.category(ch)
        if ch not in "\t\n\r" and (cp == 0 or cp == 0xFFFD or cat in ("Cc", "Cf")):
            continue
        if ch in " \t\n\r\u2028\u2029" or cat == "Zs":
            end_word()
            continue
        cjk = ref.is_cjk(ch)
        if cjk:
            end_word()
        for c in fold(ch):
            if c in "$+<=>^`|~" or unicodedata.category(c)[0] == "P":
                end_word()
                tokens.append(c)
            else:
                word.append(c)
        if cjk:
            end_word()
    end_word()
    return (["[CLS]"] + tokens + ["[SEP]"]) if special_tokens else tokens


# -------------------------------------------------------- global checks

def check_streams():
    name = "streams: FNV-1a/SplitMix64 vectors and uint64 NumPy formulation"
    # FNV-1a 64 published test vectors
    for data, want in ((b"", 0xCBF29CE484222325), (b"a", 0xAF63DC4C8601EC8C),
                       (b"foobar", 0x85944171F73967E8)):
        require(name, ref.fnv1a64(data) == want, "fnv1a64(%r) = %x, want %x"
                % (data, ref.fnv1a64(data), want))
    # SplitMix64 published sequence for state 1234567
    want = [6457827717110365317, 3203168211198807973, 9817491932198370423,
            4593380528125082431, 16408922859458223821]
    got = [ref.draw(1234567, n) for n in range(5)]
    require(name, got == want, "SplitMix64(1234567) = %s, want %s" % (got, want))
    # indexed draw(n) == n-th output of the sequential generator
    for seed, label in ((0, "dropout"), (42, "q_proj.weight"), (ref.MASK64, "token:cat")):
        key = ref.stream_key(seed, label)
        seq = splitmix64_sequential(key, 1000)
        require(name, all(ref.draw(key, n) == seq[n] for n in range(1000)),
                "indexed draw differs from sequential SplitMix64 for %r" % label)
        compare(name, label, ref.unit_array(seed, label, 5000), np_units(seed, label, 5000), tol=0.0)


def check_embeddings_formulation(tokens_seeds_dims):
    name = "token embeddings: vectorised NumPy Box-Muller (float32 equal)"
    for token, seed, d in tokens_seeds_dims:
        a = ref.embed_token(token, seed, d)
        b = np_embed(token, seed, d)
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        ulp = np.spacing(np.abs(a)).astype(np.float64)
        require(name, np.all(diff <= ulp), "embedding of %r (seed %d, d %d) differs by more "
                "than one float32 ulp" % (token, seed, d))
        compare(name, "%s/%d/%d" % (token, seed, d), a, b, tol=1e-6)
    # the wider vector starts with the narrower one
    for d in (1, 2, 3, 8, 63):
        require(name, np.array_equal(ref.embed_token("cat", 0, d), ref.embed_token("cat", 0, 64)[:d]),
                "embedding prefix property fails for d=%d" % d)
    big = ref.embed_token("statistics", 3, 20000).astype(np.float64)
    require(name, abs(big.mean()) < 0.05 and abs(big.std() - 1.0) < 0.05,
            "20000 Box-Muller draws have mean %.3f, std %.3f" % (big.mean(), big.std()))


def check_param_init():
    """nn.Linear's default init bound is 1/sqrt(fan_in) for weight and bias;
    PyTorch's own fan-in computation agrees with docs/math.md's, and the drawn
    tensors fill that interval. The vectorised stream gives the same values."""
    name = "parameter draws: torch nn.Linear fan_in/bound, uint64 NumPy stream"
    cfg = ref.resolve_config(dict(n_query=3, d_model=6, n_ctx=5, d_ctx=5, heads=2, kv_heads=1,
                                  d_k=4, d_v=3, d_out=7, qkv_bias=True, out_bias=True, seed=42))
    params = ref.draw_params(cfg)
    for pname, (shape, fan_in) in ref.param_shapes(cfg).items():
        layer_name, kind = pname.split(".")
        w_shape = ref.param_shapes(cfg)[layer_name + ".weight"][0]
        lin = nn.Linear(w_shape[1], w_shape[0])
        torch_fan_in, _ = nn.init._calculate_fan_in_and_fan_out(lin.weight)
        require(name, torch_fan_in == fan_in, "%s: fan_in %d, torch says %d" % (pname, fan_in, torch_fan_in))
        bound = 1.0 / math.sqrt(fan_in)
        t = params[pname].astype(np.float64)
        require(name, t.shape == tuple(getattr(lin, kind).shape), "%s shape %s vs torch %s"
                % (pname, t.shape, tuple(getattr(lin, kind).shape)))
        require(name, np.all(np.abs(t) <= np.float32(bound) * (1 + 1e-7)), "%s exceeds its bound" % pname)
        count = t.size
        want = ((2.0 * np_units(cfg["seed"], pname, count) - 1.0) / math.sqrt(fan_in)).astype(np.float32)
        compare(name, pname, t.ravel(), want.astype(np.float64), tol=0.0)
    big = ref.draw_tensor(1, "q_proj.weight", (200, 100), 100).astype(np.float64) * 10.0
    require(name, big.min() > -1 and big.max() < 1 and abs(big.mean()) < 0.02
            and abs(big.var() - 1.0 / 3.0) < 0.02, "drawn weights are not uniform in the bound")


def check_softmax_large():
    name = "softmax of logits around +-1e4 vs torch.softmax / masked_fill(-inf)"
    rng = np.random.default_rng(1)
    for trial in range(20):
        logits = rng.uniform(-1e4, 1e4, size=(7, 9))
        logits[0, :] = 1e4 + rng.uniform(-3, 3, size=9)       # near-ties at +1e4
        logits[1, :] = -1e4 + rng.uniform(-3, 3, size=9)      # near-ties at -1e4
        logits[2, :] = 1e4                                    # exact ties
        ours = ref.masked_softmax(logits, np.ones_like(logits, dtype=bool))
        compare(name, "dense %d" % trial, ours, torch.softmax(T(logits), dim=-1))
        allowed = rng.uniform(size=logits.shape) < 0.6
        allowed[:, 3] = True
        ours = ref.masked_softmax(logits, allowed)
        theirs = torch.softmax(T(logits).masked_fill(~torch.tensor(allowed), float("-inf")), dim=-1)
        compare(name, "masked %d" % trial, ours, theirs)
        require(name, np.all(ours[~allowed] == 0.0), "masked pairs must be exactly 0")
    none = ref.masked_softmax(np.array([[1e4, -1e4, 3.0]]), np.zeros((1, 3), dtype=bool))
    require(name, np.all(none == 0.0), "a fully masked row must be all zeros")


def check_rope_complex():
    name = "RoPE vs LLaMA complex formulation (torch.polar/view_as_complex)"
    rng = np.random.default_rng(2)
    for B, L, heads, d_k in ((1, 1, 1, 2), (2, 7, 3, 4), (1, 33, 2, 8), (2, 5, 1, 64)):
        t = rng.normal(size=(B, L, heads * d_k))
        compare(name, "%dx%dx%dx%d" % (B, L, heads, d_k), ref.rope(t, heads, d_k),
                torch_rope_complex(T(t), heads, d_k))
        # a rotation keeps each pair's norm, and position 0 is unchanged
        r = ref.rope(t, heads, d_k)
        compare(name, "norm", (r.reshape(B, L, -1, 2) ** 2).sum(-1), (t.reshape(B, L, -1, 2) ** 2).sum(-1))
        compare(name, "pos0", r[:, 0], t[:, 0])


def check_sinusoidal():
    name = "sinusoidal PE vs exp/log formulation (Annotated Transformer)"
    for n, d in ((1, 1), (6, 9), (12, 64), (7, 5), (50, 16)):
        compare(name, "%dx%d" % (n, d), ref.sinusoidal(n, d), torch_sinusoidal(n, d))


# --------------------------------------------------- per-case torch checks

def torch_inputs(c, inp):
    """x and context as float64 tensors after the positional encoding,
    computed with the second PE formulation."""
    B, N, M = c["batch"], c["n_query"], c["M"]
    x = T(inp["x"]).reshape(B, N, c["d_model"])
    ctx = T(inp["context"]).reshape(B, M, c["D_ctx"]) if c["cross"] else None
    if c["positional"] == "sinusoidal":
        x = x + torch_sinusoidal(N, c["d_model"])
        if ctx is not None:
            ctx = ctx + torch_sinusoidal(M, c["D_ctx"])
    return x, (x if ctx is None else ctx)


def torch_allowed(c, inp):
    """[B][N][M] bool tensor, True = may attend, built with torch ops."""
    B, N, M = c["batch"], c["n_query"], c["M"]
    allowed = torch.ones(B, N, M, dtype=torch.bool)
    if c["causal"]:
        allowed &= torch.ones(N, M, dtype=torch.bool).tril()
    if inp["mask"] is not None:
        m = torch.tensor(np.asarray(inp["mask"], dtype=bool))
        allowed &= m.reshape(B, N, M) if inp["mask_batched"] else m.reshape(N, M)
    if inp["key_padding"] is not None:
        kp = torch.tensor(np.asarray(inp["key_padding"], dtype=bool))
        kp = kp.reshape(B, M) if inp["key_padding_batched"] else kp.reshape(1, M).expand(B, M)
        allowed &= ~kp[:, None, :]
    return allowed


def torch_keep(c):
    """Dropout keep mask [B][h][N][M] from the vectorised stream."""
    B, h, N, M = c["batch"], c["heads"], c["n_query"], c["M"]
    u = np_units(c["seed"], "dropout", B * h * N * M)
    return torch.tensor(u >= c["dropout"]).reshape(B, h, N, M)


def check_sdpa(case, c, inp, res):
    """Projected mode with torch: F.linear projections, LLaMA-style complex
    RoPE, k/v heads repeat_interleave'd for GQA, F._scaled_dot_product_attention
    (torch 1.13's name for scaled_dot_product_attention) with a boolean mask
    (True = take part), dropout mask applied to its weights, heads merged by
    transpose/reshape, output projection and residual."""
    name = "F.scaled_dot_product_attention pipeline (GQA via repeat_interleave)"
    B, N, M = c["batch"], c["n_query"], c["M"]
    h, g, dk, dv = c["heads"], c["kv_heads"], c["d_k"], c["d_v"]
    x, ctx = torch_inputs(c, inp)
    P = {k: (None if v is None else T(v)) for k, v in res["params"].items()}
    q = F.linear(x, P["q_proj.weight"], P["q_proj.bias"])
    k = F.linear(ctx, P["k_proj.weight"], P["k_proj.bias"])
    v = F.linear(ctx, P["v_proj.weight"], P["v_proj.bias"])
    if c["positional"] == "rope":
        q = torch_rope_complex(q, h, dk, c["rope_base"])
        k = torch_rope_complex(k, g, dk, c["rope_base"])
    qh = q.reshape(B, N, h, dk).transpose(1, 2)
    kh = k.reshape(B, M, g, dk).transpose(1, 2).repeat_interleave(h // g, dim=1)
    vh = v.reshape(B, M, g, dv).transpose(1, 2).repeat_interleave(h // g, dim=1)
    scale = 1.0 / math.sqrt(dk) if c["scale"] is None else c["scale"]
    allowed = torch_allowed(c, inp)
    valid_rows = allowed.any(-1).numpy()                               # [B][N]
    mask4 = allowed[:, None].expand(B, h, N, M)
    # SDPA divides by sqrt(E): pre-scale q so that the product is scale*QK^T
    out, w = F._scaled_dot_product_attention(qh * (scale * math.sqrt(dk)), kh, vh, mask4, 0.0, True, False)
    if c["dropout"] > 0:
        w = torch.where(torch_keep(c), w / (1.0 - c["dropout"]), torch.zeros_like(w))
        out = w @ vh
    heads_out = out.transpose(1, 2).reshape(B, N, h * dv)
    output = F.linear(heads_out, P["out_proj.weight"], P["out_proj.bias"]) if c["out_proj"] else heads_out
    if c["residual"] == "value":
        output = output + vh.transpose(1, 2).reshape(B, N, h * dv)
    elif c["residual"] == "input":
        output = output + x
    vr = valid_rows
    compare(name, case + " q", res["q"], q)
    compare(name, case + " k", res["k"], k)
    compare(name, case + " v", res["v"], v)
    compare(name, case + " scores", res["scores"], scale * (qh @ kh.transpose(-1, -2)))
    compare(name, case + " weights", res["weights"], w, valid=vr[:, None, :, None])
    compare(name, case + " mean_weights", res["mean_weights"], w.mean(1), valid=vr[:, :, None])
    compare(name, case + " heads_out", res["heads_out"], heads_out, valid=vr[:, :, None])
    compare(name, case + " output", res["output"], output, valid=vr[:, :, None])


def mha_applicable(c):
    return (c["mode"] == "projected" and c["kv_heads"] == c["heads"]
            and c["d_model"] % c["heads"] == 0 and c["d_k"] == c["d_model"] // c["heads"]
            and c["d_v"] == c["d_k"] and c["out_proj"] and c["d_out"] == c["d_model"]
            and c["positional"] != "rope")


def check_mha(case, c, inp, res):
    """nn.MultiheadAttention(batch_first, float64): in_proj_weight = cat(Wq,
    Wk, Wv) (or q/k/v_proj_weight with kdim/vdim for cross-attention),
    in_proj_bias = cat(bq, bk, bv) (zeros when absent), out_proj; attn_mask
    bool True = NOT allowed (inverted from docs/math.md's mask), [B*h][N][M] when
    batched; key_padding_mask as is; need_weights, per-head and averaged.
    Dropout: train mode with F.dropout replaced by docs/math.md's keep mask, which
    checks the (b, head, i, j) index against torch's [B*h][N][M] layout."""
    name = "nn.MultiheadAttention"
    B, N, M, h, d = c["batch"], c["n_query"], c["M"], c["heads"], c["d_model"]
    x, ctx = torch_inputs(c, inp)
    P = res["params"]
    mha = nn.MultiheadAttention(d, h, dropout=c["dropout"], bias=True, kdim=c["D_ctx"], vdim=c["D_ctx"],
                                batch_first=True, dtype=torch.float64)

    def bias(name_, n):
        return T(P[name_]) if P[name_] is not None else torch.zeros(n, dtype=torch.float64)

    with torch.no_grad():
        if mha._qkv_same_embed_dim:
            mha.in_proj_weight.copy_(torch.cat([T(P["q_proj.weight"]), T(P["k_proj.weight"]),
                                                T(P["v_proj.weight"])]))
        else:
            mha.q_proj_weight.copy_(T(P["q_proj.weight"]))
            mha.k_proj_weight.copy_(T(P["k_proj.weight"]))
            mha.v_proj_weight.copy_(T(P["v_proj.weight"]))
        mha.in_proj_bias.copy_(torch.cat([bias("q_proj.bias", d), bias("k_proj.bias", d),
                                          bias("v_proj.bias", d)]))
        mha.out_proj.weight.copy_(T(P["out_proj.weight"]))
        mha.out_proj.bias.copy_(bias("out_proj.bias", d))

    attn_mask = None
    not_allowed = torch.zeros(B, N, M, dtype=torch.bool)
    if c["causal"]:
        not_allowed |= ~torch.ones(N, M, dtype=torch.bool).tril()
    if inp["mask"] is not None:
        m = torch.tensor(np.asarray(inp["mask"], dtype=bool))
        not_allowed |= ~(m.reshape(B, N, M) if inp["mask_batched"] else m.reshape(N, M))
    if c["causal"] or inp["mask"] is not None:
        if inp["mask"] is not None and inp["mask_batched"]:
            attn_mask = not_allowed.repeat_interleave(h, dim=0)        # [B*h][N][M], b*h + head
        else:
            attn_mask = not_allowed[0]                                  # [N][M]
    kpm = None
    if inp["key_padding"] is not None:
        kp = torch.tensor(np.asarray(inp["key_padding"], dtype=bool))
        kpm = kp.reshape(B, M) if inp["key_padding_batched"] else kp.reshape(1, M).expand(B, M).contiguous()

    valid_rows = ~res["fully_masked"].astype(bool)
    real_dropout = F.dropout
    calls = [0]
    if c["dropout"] > 0:
        keep = torch_keep(c)
        mha.train()

        def readme_dropout(inp_, p=0.5, training=True, inplace=False):
            calls[0] += 1
            return torch.where(keep.reshape(inp_.shape), inp_ / (1.0 - p), torch.zeros_like(inp_))
        F.dropout = readme_dropout
    else:
        mha.eval()
    try:
        # distinct key/value tensors keep torch off its fused fast path
        out, w = mha(x, ctx.clone(), ctx.clone(), key_padding_mask=kpm, need_weights=True,
                     attn_mask=attn_mask, average_attn_weights=False)
        out2, wmean = mha(x, ctx.clone(), ctx.clone(), key_padding_mask=kpm, need_weights=True,
                          attn_mask=attn_mask, average_attn_weights=True)
    finally:
        F.dropout = real_dropout
    if c["dropout"] > 0:
        require(name, calls[0] == 2, "%s: torch did not call dropout" % case)
    if c["residual"] == "input":
        out = out + x
    elif c["residual"] == "value":
        raise CrossCheckFailed("residual value is checked by the SDPA pipeline")
    compare(name, case + " weights", res["weights"], w, valid=valid_rows[:, None, :, None])
    compare(name, case + " mean_weights", res["mean_weights"], wmean, valid=valid_rows[:, :, None])
    compare(name, case + " output", res["output"], out, valid=valid_rows[:, :, None])
    if not valid_rows.all():
        # torch gives NaN where every key is masked; docs/math.md gives zeros
        wz = res["weights"].transpose(0, 2, 1, 3)[~valid_rows]
        require(name, np.all(wz == 0) and np.all(res["heads_out"][~valid_rows] == 0),
                "%s: fully masked rows must have zero weights and head outputs" % case)
        require(name, bool(torch.isnan(w).any()), "%s: expected torch NaN rows" % case)


def check_basic(case, c, inp, res):
    """Mode basic with torch: softmax(scale * x ctx^T) ctx, masks by
    masked_fill(-inf)."""
    name = "basic mode: torch softmax(x ctx^T) ctx"
    x, ctx = torch_inputs(c, inp)
    scale = 1.0 if c["scale"] is None else c["scale"]
    scores = scale * (x @ ctx.transpose(-1, -2))
    allowed = torch_allowed(c, inp)
    valid_rows = allowed.any(-1).numpy()
    w = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    out = w @ ctx
    vr = valid_rows[:, :, None]
    compare(name, case + " scores", res["scores"][:, 0], scores)
    compare(name, case + " weights", res["weights"][:, 0], w, valid=vr)
    compare(name, case + " output", res["output"], out, valid=vr)


# ------------------------------------------------------ the tutorial (001)

def tutorial_tensors():
    """Tutorial 001's cells, in its order, with torch.manual_seed(123)."""
    torch.manual_seed(123)
    d_sentence, d_embedding = 12, 14
    sentence = torch.randperm(d_sentence)
    embeddings = torch.nn.Embedding(d_sentence, d_embedding)
    embedding_sentence = embeddings(sentence).detach()
    d_query = d_key = d_value = 10
    U_query = torch.rand(d_query, d_embedding)
    U_key = torch.rand(d_key, d_embedding)
    U_value = torch.rand(d_value, d_embedding)
    h = 8
    multihead_U_query = torch.rand(h, d_query, d_embedding)
    multihead_U_key = torch.rand(h, d_key, d_embedding)
    multihead_U_value = torch.rand(h, d_value, d_embedding)
    linear = torch.nn.Linear(h * d_value, d_embedding)
    return dict(x=embedding_sentence, U_query=U_query, U_key=U_key, U_value=U_value,
                mU_query=multihead_U_query, mU_key=multihead_U_key, mU_value=multihead_U_value,
                linear_weight=linear.weight.detach(), linear_bias=linear.bias.detach())


def check_tutorial_basic(case, c, inp, res):
    name = "tutorial 001 code (float64)"
    x = T(inp["x"]).reshape(12, 14)
    omega = x.matmul(x.T)
    attention_weights = F.softmax(omega, dim=1)
    context_vector = attention_weights.matmul(x)
    compare(name, case + " omega", res["scores"], omega)
    compare(name, case + " weights", res["weights"], attention_weights)
    compare(name, case + " context", res["output"], context_vector)


def check_tutorial_parameterized(case, c, inp, res):
    name = "tutorial 001 code (float64)"
    tt = {k: v.double() for k, v in TUTORIAL.items()}
    x = tt["x"]
    d_query = 10
    query = tt["U_query"].matmul(x.T).T
    key = tt["U_key"].matmul(x.T).T
    values = tt["U_value"].matmul(x.T).T
    omega = query.matmul(key.T)
    attention_weights = F.softmax(omega / d_query ** 0.5, dim=1)
    context_vector = attention_weights.matmul(values)
    compare(name, case + " query", res["q"], query)
    compare(name, case + " key", res["k"], key)
    compare(name, case + " values", res["v"], values)
    compare(name, case + " scores", res["scores"], omega / d_query ** 0.5)
    compare(name, case + " weights", res["weights"], attention_weights)
    compare(name, case + " context", res["output"], context_vector)


def check_tutorial_multihead(case, c, inp, res):
    name = "tutorial 001 code (float64)"
    tt = {k: v.double() for k, v in TUTORIAL.items()}
    x = tt["x"]
    h, d_query, d_value = 8, 10, 10
    multihead_query = tt["mU_query"].matmul(x.T).transpose(2, 1)
    multihead_key = tt["mU_key"].matmul(x.T).transpose(2, 1)
    multihead_values = tt["mU_value"].matmul(x.T).transpose(2, 1)
    omega = multihead_query.matmul(multihead_key.transpose(2, 1))
    attention_weights = F.softmax(omega / d_query ** 0.5, dim=2)
    context_vector = attention_weights.matmul(multihead_values)          # h x N x d_v
    # The notebook flattens with context_vector.view(-1, h*d_value), which
    # lays the [h][N][d_v] tensor out head-major and so mixes tokens; the
    # per-token concatenation of the heads (docs/math.md, and what the notebook's
    # comment describes) is transpose(0, 1) first.
    notebook_view = context_vector.reshape(-1, h * d_value)
    per_token = context_vector.transpose(0, 1).reshape(-1, h * d_value)
    require(name, not torch.allclose(notebook_view, per_token),
            "expected the notebook's view() to differ from the per-token concatenation")
    context_vector_linear = F.linear(per_token, tt["linear_weight"], tt["linear_bias"])
    compare(name, case + " query", res["q"], multihead_query.transpose(0, 1).reshape(12, 80))
    compare(name, case + " weights", res["weights"], attention_weights)
    compare(name, case + " heads", res["heads_out"], per_token)
    compare(name, case + " output", res["output"], context_vector_linear)


# ---------------------------------------------------- the ViT module (004)

class ViTAttention(nn.Module):
    """Seed 004's Attention module, as written there."""

    def __init__(self, dim, chan, num_heads=1, qkv_bias=False, qk_scale=None):
        super().__init__()
        self.num_heads = num_heads
        self.chan = chan
        self.head_dim = self.chan // self.num_heads
        self.scale = qk_scale or self.head_dim ** -0.5
        assert self.chan % self.num_heads == 0, '"Chan" must be evenly divisible by "num_heads".'
        self.qkv = nn.Linear(dim, chan * 3, bias=qkv_bias)
        self.proj = nn.Linear(chan, chan)

    def forward(self, x, keep=None):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q * self.scale) @ k.transpose(-2, -1)
        attn = attn.softmax(dim=-1)
        self.last = dict(q=q, k=k, v=v, attn=attn)
        x = (attn @ v).transpose(1, 2).reshape(B, N, self.chan)
        self.last["heads"] = x
        x = self.proj(x)
        v = v.transpose(1, 2).reshape(B, N, self.chan)
        x = v + x
        return x


VIT_MODULES = {}


def check_vit(case, c, inp, res):
    name = "ViT Attention module from seed 004 (float64)"
    module = VIT_MODULES[case]
    m64 = ViTAttention(49, 64, module.num_heads, qkv_bias=True,
                       qk_scale=None if c["scale"] is None else c["scale"]).double()
    m64.load_state_dict({k: v.double() for k, v in module.state_dict().items()})
    x = T(inp["x"]).reshape(c["batch"], c["n_query"], c["d_model"])
    out = m64(x)
    last = m64.last
    B, N = c["batch"], c["n_query"]
    compare(name, case + " q", res["q"], last["q"].transpose(1, 2).reshape(B, N, 64))
    compare(name, case + " k", res["k"], last["k"].transpose(1, 2).reshape(B, N, 64))
    compare(name, case + " v", res["v"], last["v"].transpose(1, 2).reshape(B, N, 64))
    compare(name, case + " attn", res["weights"], last["attn"])
    compare(name, case + " heads", res["heads_out"], last["heads"])
    compare(name, case + " output", res["output"], out)


# ------------------------------------------------------------------ cases

ALL_EXPECTED = ("weights", "scores", "mean_weights", "q", "k", "v", "heads_out", "output")
CONFIG_KEYS = ("mode", "batch", "n_query", "d_model", "n_ctx", "d_ctx", "heads", "kv_heads", "d_k",
               "d_v", "d_out", "qkv_bias", "out_proj", "out_bias", "scale", "residual", "positional",
               "dropout", "seed", "causal")


def flat(a):
    return [float(v) for v in np.asarray(a, dtype=np.float64).ravel()]


def flat_bits(a):
    return None if a is None else [int(bool(v)) for v in np.asarray(a).ravel()]


def build_case(name, description, config, x=None, context=None, mask=None, key_padding=None,
               params=None, sentence=None, keep_case=False, special_tokens=False,
               store=ALL_EXPECTED, checks=()):
    """Run the reference on one case, cross-check it and return its JSON."""
    tokens = None
    if sentence is not None:
        tokens = ref.tokenize(sentence, keep_case, special_tokens)
        if tokens != tokenize_streaming(sentence, keep_case, special_tokens):
            raise CrossCheckFailed("%s: tokenizer formulations disagree" % name)
        config = dict(config, n_query=len(tokens), batch=1)
        x = ref.embed_tokens(tokens, int(config.get("seed", 0)), config["d_model"])
    c = ref.resolve_config(config)
    B, N, M = c["batch"], c["n_query"], c["M"]
    x = np.asarray(x, dtype=np.float32).reshape(B, N, c["d_model"])
    if context is not None:
        context = np.asarray(context, dtype=np.float32).reshape(B, M, c["D_ctx"])
    mask_arr = None if mask is None else np.asarray(mask, dtype=bool)
    kp_arr = None if key_padding is None else np.asarray(key_padding, dtype=bool)
    if params is not None:
        params = {k: (None if v is None else np.asarray(v, dtype=np.float32)) for k, v in params.items()}
        for k in ref.PARAM_NAMES:
            params.setdefault(k, None)
    res = ref.forward(c, x, context, mask_arr, kp_arr, params)

    for k in ("scores", "weights", "mean_weights", "q", "k", "v", "heads_out", "output"):
        if not np.all(np.isfinite(res[k])):
            raise CrossCheckFailed("%s: reference %s is not finite" % (name, k))

    inputs = {
        "sentence": sentence, "keep_case": bool(keep_case), "special_tokens": bool(special_tokens),
        "tokens": tokens, "x": flat(x), "context": None if context is None else flat(context),
        "mask": flat_bits(mask_arr), "mask_batched": bool(mask_arr is not None and mask_arr.ndim == 3),
        "key_padding": flat_bits(kp_arr),
        "key_padding_batched": bool(kp_arr is not None and kp_arr.ndim == 2),
        "params": None if params is None else {
            k: (None if params[k] is None else flat(params[k])) for k in ref.PARAM_NAMES},
    }
    # the cross-checks read the inputs as the C test will
    for check in checks:
        check(name, c, inputs, res)
    if c["mode"] == "basic":
        check_basic(name, c, inputs, res)
    else:
        check_sdpa(name, c, inputs, res)
        if mha_applicable(c) and c["residual"] != "value":
            check_mha(name, c, inputs, res)

    cfg_out = {k: c[k] for k in CONFIG_KEYS}
    cfg_out["seed"] = str(c["seed"])
    cfg_out["dropout"] = float(c["dropout"])
    cfg_out["scale"] = None if c["scale"] is None else float(c["scale"])
    expected = {k: (flat(res[k]) if k in store else None) for k in ALL_EXPECTED}
    expected["fully_masked"] = [int(v) for v in res["fully_masked"].ravel()]
    return {"name": name, "description": description, "config": cfg_out,
            "inputs": inputs, "expected": expected}, res


def normal(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def make_cases():
    cases = []

    def add(*args, **kw):
        case, res = build_case(*args, **kw)
        cases.append(case)
        return case, res

    # --- tutorial 001: 12 tokens x 14 dims, torch.manual_seed(123)
    tt = TUTORIAL
    x12 = tt["x"].numpy()
    add("tutorial_basic",
        "Tutorial 001 stage 1: basic self-attention softmax(X X^T) X on its 12x14 nn.Embedding "
        "input (torch.manual_seed(123)); mode basic, scale 1.",
        dict(mode="basic", n_query=12, d_model=14), x=x12, checks=(check_tutorial_basic,))
    add("tutorial_parameterized",
        "Tutorial 001 stage 2: one head, U_query/U_key/U_value = torch.rand(10, 14) as the "
        "q/k/v weights (no bias, no output projection), scores divided by sqrt(10).",
        dict(n_query=12, d_model=14, heads=1, d_k=10, d_v=10, out_proj=False, seed=0), x=x12,
        params={"q_proj.weight": tt["U_query"].numpy(), "k_proj.weight": tt["U_key"].numpy(),
                "v_proj.weight": tt["U_value"].numpy()},
        checks=(check_tutorial_parameterized,))
    add("tutorial_multihead",
        "Tutorial 001 stage 3: 8 heads of d_k = d_v = 10 on 14-dim embeddings; torch.rand(8, 10, 14) "
        "U matrices stacked head-major as the [80][14] weights; nn.Linear(80, 14) with bias as W_o. "
        "Heads are concatenated per token (the notebook's view(-1, 80) would mix tokens).",
        dict(n_query=12, d_model=14, heads=8, d_k=10, d_v=10, out_bias=True, seed=0), x=x12,
        params={"q_proj.weight": tt["mU_query"].reshape(80, 14).numpy(),
                "k_proj.weight": tt["mU_key"].reshape(80, 14).numpy(),
                "v_proj.weight": tt["mU_value"].reshape(80, 14).numpy(),
                "out_proj.weight": tt["linear_weight"].numpy(), "out_proj.bias": tt["linear_bias"].numpy()},
        checks=(check_tutorial_multihead,))

    # --- seed 004: ViT Attention(dim=49, chan=64), batch 2 x 10 tokens
    for heads, qk_scale, torch_seed in ((1, None, 4), (4, f32(0.2), 5)):
        torch.manual_seed(torch_seed)
        module = ViTAttention(49, 64, num_heads=heads, qkv_bias=True, qk_scale=qk_scale)
        xv = torch.randn(2, 10, 49)
        name = "vit_heads%d" % heads
        VIT_MODULES[name] = module
        wq, wk, wv = module.qkv.weight.detach().split(64, dim=0)
        bq, bk, bv = module.qkv.bias.detach().split(64, dim=0)
        add(name,
            "Seed 004's ViT Attention(dim=49, chan=64, num_heads=%d, qkv_bias=True, qk_scale=%s): "
            "qkv.weight rows [0:64]/[64:128]/[128:192] are W_q/W_k/W_v, proj with bias is W_o, "
            "skip connection adds V (residual value); torch.manual_seed(%d) then torch.randn(2, 10, 49)."
            % (heads, "0.2" if qk_scale else "None (head_dim**-0.5)", torch_seed),
            dict(batch=2, n_query=10, d_model=49, heads=heads, d_k=64 // heads, d_v=64 // heads,
                 d_out=64, qkv_bias=True, out_bias=True, scale=qk_scale, residual="value", seed=0),
            x=xv.numpy(),
            params={"q_proj.weight": wq.numpy(), "q_proj.bias": bq.numpy(),
                    "k_proj.weight": wk.numpy(), "k_proj.bias": bk.numpy(),
                    "v_proj.weight": wv.numpy(), "v_proj.bias": bv.numpy(),
                    "out_proj.weight": module.proj.weight.detach().numpy(),
                    "out_proj.bias": module.proj.bias.detach().numpy()},
            checks=(check_vit,))

    # --- tutorial 000: the sentence through BERT-base-sized attention
    add("bert_base",
        "Tutorial 000's sentence with [CLS]/[SEP], spec token embeddings of width 768 (seed 42), "
        "12 heads, biases on Q/K/V and W_o, parameters drawn from seed 42. Only weights, "
        "mean_weights and output are stored.",
        dict(d_model=768, heads=12, qkv_bias=True, out_bias=True, seed=42),
        sentence=SENTENCE, special_tokens=True, store=("weights", "mean_weights", "output"))
    add("default_sentence",
        "The default sentence with every option at its zero-struct default: uncased, no special "
        "tokens, d_model 64, 8 heads, no biases, W_o on, seed 0.",
        dict(d_model=64, heads=8, seed=0), sentence=SENTENCE)
    add("keep_case_sentence",
        "keep_case with accents, punctuation, a CJK pair and special tokens; d_model 12, 3 heads, "
        "Q/K/V biases, seed 5.",
        dict(d_model=12, heads=3, qkv_bias=True, seed=5),
        sentence="\u00c9lan, na\u00efve CAF\u00c9-owner's \u00abR\u00e9sum\u00e9\u00bb: Stra\u00dfe & \u6771\u4eac!",
        keep_case=True, special_tokens=True)

    rng = np.random.default_rng(2024)
    add("cross_attention",
        "Cross-attention: x [2][5][16], context [2][7][12], 4 heads, biases everywhere, seed 11.",
        dict(batch=2, n_query=5, d_model=16, n_ctx=7, d_ctx=12, heads=4, qkv_bias=True,
             out_bias=True, seed=11),
        x=normal(rng, 2, 5, 16), context=normal(rng, 2, 7, 12))
    add("causal_cross",
        "Causal cross-attention with M > N (query i sees keys j <= i): N 5, M 7, d_model 8, "
        "d_ctx 8, 2 heads, seed 12.",
        dict(n_query=5, d_model=8, n_ctx=7, d_ctx=8, heads=2, causal=True, seed=12),
        x=normal(rng, 1, 5, 8), context=normal(rng, 1, 7, 8))
    add("gqa",
        "Grouped-query attention: 8 query heads share 2 key/value heads (head a uses a / 4); "
        "d_model 32, N 9, batch 2, biases, seed 21.",
        dict(batch=2, n_query=9, d_model=32, heads=8, kv_heads=2, qkv_bias=True, out_bias=True, seed=21),
        x=normal(rng, 2, 9, 32))
    add("mqa",
        "Multi-query attention: 4 heads, one key/value head, causal; d_model 16, N 6, seed 22.",
        dict(n_query=6, d_model=16, heads=4, kv_heads=1, causal=True, seed=22),
        x=normal(rng, 1, 6, 16))
    add("causal_key_padding",
        "Causal self-attention with a batched key padding mask [2][6] (second sequence pads its "
        "last two keys); d_model 16, 4 heads, Q/K/V biases, seed 31.",
        dict(batch=2, n_query=6, d_model=16, heads=4, causal=True, qkv_bias=True, seed=31),
        x=normal(rng, 2, 6, 16), key_padding=[[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1]])
    mask = rng.uniform(size=(2, 5, 5)) < 0.5
    mask[:, :, 0] = True
    add("explicit_mask_batched",
        "An explicit batched mask [2][5][5] (1 = may attend, key 0 always allowed) together with an "
        "unbatched key padding [5] that ignores key 3; d_model 12, 3 heads, seed 32.",
        dict(batch=2, n_query=5, d_model=12, heads=3, qkv_bias=True, out_bias=True, seed=32),
        x=normal(rng, 2, 5, 12), mask=mask.astype(np.uint8), key_padding=[0, 0, 0, 1, 0])
    mask = np.array([[1, 1, 0, 1], [0, 1, 1, 0], [0, 0, 0, 0], [1, 0, 0, 1]], dtype=bool)
    add("fully_masked_row",
        "Fully masked queries: an unbatched mask [4][4] whose row 2 is all 0, and a batched key "
        "padding that ignores every key of sequence 1. Those rows have zero weights and zero head "
        "outputs (the output is then W_o's bias) and are flagged in fully_masked.",
        dict(batch=2, n_query=4, d_model=8, heads=2, qkv_bias=True, out_bias=True, seed=33),
        x=normal(rng, 2, 4, 8), mask=mask.astype(np.uint8), key_padding=[[0, 0, 0, 0], [1, 1, 1, 1]])
    add("sinusoidal",
        "Sinusoidal positions added to x (odd width 9, so the last column is a sine) before the "
        "projections, and residual input adds x after its positional encoding; 3 heads, batch 2, "
        "biases, seed 41.",
        dict(batch=2, n_query=6, d_model=9, heads=3, qkv_bias=True, out_bias=True,
             positional="sinusoidal", residual="input", seed=41),
        x=normal(rng, 2, 6, 9))
    add("sinusoidal_cross",
        "Sinusoidal positions on both sequences of a cross-attention, each with its own width "
        "(8 and 5) and from position 0; N 4, M 6, 2 heads, seed 42.",
        dict(n_query=4, d_model=8, n_ctx=6, d_ctx=5, heads=2, positional="sinusoidal", seed=42),
        x=normal(rng, 1, 4, 8), context=normal(rng, 1, 6, 5))
    add("rope",
        "Rotary positions (LLaMA pairs (2i, 2i+1), base 10000) on each head of q and k after the "
        "projections and biases; d_model 16, 2 heads of d_k 8, N 7, batch 2, causal, seed 51.",
        dict(batch=2, n_query=7, d_model=16, heads=2, qkv_bias=True, positional="rope",
             causal=True, seed=51),
        x=normal(rng, 2, 7, 16))
    add("rope_cross",
        "Rotary positions in cross-attention with N != M: queries at 0..4, keys at 0..7; 3 query "
        "heads of d_k 4 sharing one key/value head; d_model 12, d_ctx 10, seed 52.",
        dict(n_query=5, d_model=12, n_ctx=8, d_ctx=10, heads=3, kv_heads=1, positional="rope", seed=52),
        x=normal(rng, 1, 5, 12), context=normal(rng, 1, 8, 10))
    add("dropout",
        "Inverted dropout p = 0.3 (as float32) on the weights from the stream 'dropout' of seed 7, "
        "pair (b, head, i, j) at index ((b*h + head)*N + i)*M + j; weights reported after dropout; "
        "d_model 16, 4 heads, batch 2, biases.",
        dict(batch=2, n_query=6, d_model=16, heads=4, qkv_bias=True, out_bias=True,
             dropout=f32(0.3), seed=7),
        x=normal(rng, 2, 6, 16))
    add("residual_input_no_out_proj",
        "No output projection (output = heads concatenated, d_out = h*d_v = d_model) plus residual "
        "input; d_model 12, 3 heads, Q/K/V biases, seed 61.",
        dict(n_query=5, d_model=12, heads=3, out_proj=False, residual="input", qkv_bias=True, seed=61),
        x=normal(rng, 1, 5, 12))
    add("d_k_d_v_independent",
        "Per-head sizes independent of d_model: d_model 20, 3 heads, d_k 6, d_v 5, W_o [11][15], "
        "biases, batch 2, seed 62.",
        dict(batch=2, n_query=4, d_model=20, heads=3, d_k=6, d_v=5, d_out=11, qkv_bias=True,
             out_bias=True, seed=62),
        x=normal(rng, 2, 4, 20))

    # large logits: x scaled so that scaled scores reach about +-1e4, with
    # every row's top two scores far apart so the weights are one-hot within
    # any float32 rounding of the scores
    for trial in range(200):
        base = ref.resolve_config(dict(n_query=6, d_model=8, heads=2, seed=71 + trial))
        x0 = normal(np.random.default_rng(700 + trial), 1, 6, 8)
        s0 = ref.forward(base, x0)["scores"]
        xl = (x0.astype(np.float64) * math.sqrt(1e4 / np.abs(s0).max())).astype(np.float32)
        r = ref.forward(base, xl)
        top2 = np.sort(r["scores"], axis=-1)[..., -2:]
        if np.min(top2[..., 1] - top2[..., 0]) > 50 and r["scores"].min() < -5e3:
            break
    else:
        raise CrossCheckFailed("large_logits: no trial gave well separated logits")
    case, res = add("large_logits",
                    "Scores around +-1e4 (x scaled up): the softmax must subtract the row maximum; "
                    "each row's top two scores are more than 50 apart, so the weights are one-hot "
                    "up to float rounding and all finite. d_model 8, 2 heads, seed %d." % (71 + trial),
                    dict(n_query=6, d_model=8, heads=2, seed=71 + trial), x=xl)
    require("large logits one-hot", np.all(res["weights"].max(-1) > 1 - 1e-12)
            and np.abs(res["scores"]).max() > 5e3, "large_logits weights are not one-hot")

    add("basic_cross",
        "Mode basic with a separate context: softmax(x ctx^T) ctx, x [2][4][5], context [2][6][5].",
        dict(mode="basic", batch=2, n_query=4, d_model=5, n_ctx=6, d_ctx=5),
        x=normal(rng, 2, 4, 5), context=normal(rng, 2, 6, 5))
    add("basic_scale_causal",
        "Mode basic self-attention with an explicit scale 0.5 and the causal mask; N 5, d_model 6.",
        dict(mode="basic", n_query=5, d_model=6, scale=0.5, causal=True),
        x=normal(rng, 1, 5, 6))
    return cases


# ------------------------------------------------ PyTorch parity (server)
#
# Requests as a PyTorch user writes them: mha.state_dict() pasted as
# `params`, masks in PyTorch's forms and conventions. The expected numbers
# are nn.MultiheadAttention's own (float64, on the float32 values the
# request carries), cross-checked against the reference; the server test
# tests/server/test_parity.c decodes each request and compares.

PARITY_DIR = "parity"


def mask_json(a, never_as_number=()):
    """A mask as JSON: booleans, or numbers with -inf as the string "-inf"
    (JSON has none); flat indices in never_as_number are sent as -1e31
    instead, which means the same."""
    a = np.asarray(a)
    if a.dtype == bool:
        return a.tolist()
    flat = [float(v) for v in a.astype(np.float64).ravel()]
    out = []
    for i, v in enumerate(flat):
        if v == -math.inf:
            out.append(-1e31 if i in never_as_number else "-inf")
        else:
            out.append(v)
    return np.array(out, dtype=object).reshape(a.shape).tolist()


def torch_attn_mask(B, h, N, M, allow=None, bias=None, causal=False):
    """PyTorch's attn_mask for nn.MultiheadAttention from attnd's pieces:
    allow (True = may attend) and bias of shape [N][M], [B][N][M] or
    [B][h][N][M]; causal. Boolean (True = masked) without a bias, else
    float; 2-D when shared, [B*h][N][M] otherwise."""
    def per_head(a):
        a = torch.as_tensor(np.asarray(a))
        if a.dim() == 2:
            return a
        if a.dim() == 3:
            return a.repeat_interleave(h, dim=0)
        return a.reshape(B * h, N, M)
    if allow is None and bias is None and not causal:
        return None
    block = torch.zeros(N, M, dtype=torch.bool)
    if allow is not None:
        block = block | ~per_head(allow)
    if causal:
        block = block | torch.ones(N, M, dtype=torch.bool).triu(1)
    if bias is None:
        return block
    b = per_head(np.asarray(bias, dtype=np.float32).astype(np.float64))
    b = torch.where(b <= -1e30, torch.tensor(-math.inf, dtype=torch.float64), b)
    return b.masked_fill(block, -math.inf) if block.dim() == b.dim() else \
        (b + torch.zeros(block.shape, dtype=torch.float64)).masked_fill(block, -math.inf)


def randomize_biases(mha, rng):
    """nn.MultiheadAttention starts its biases at 0; give them values, so
    that the cases test where each one goes."""
    with torch.no_grad():
        for name, t in mha.named_parameters():
            if "bias" in name and name not in ("bias_k", "bias_v"):
                t.copy_(torch.tensor(rng.uniform(-0.5, 0.5, size=tuple(t.shape)), dtype=t.dtype))


def parity_case(name, description, *, E, h, B, N, M=None, kdim=None, vdim=None, bias=True, add_bias_kv=False,
                add_zero_attn=False, allow=None, bias_mask=None, causal=False, key_padding=None,
                convention=None, mask_type=None, send_numbers=False, never_as_number=(),
                dropout=0.0, torch_seed=0, data_seed=0, state_dict=None, request_extra=None,
                x=None, ctx=None):
    """One request and nn.MultiheadAttention's answer to it."""
    rng = np.random.default_rng(data_seed)
    torch.manual_seed(torch_seed)
    # a single sequence given without its batch dimension is sent so
    x_given_batched = x is None
    cross = M is not None
    M = M if cross else N
    # PyTorch's [B*heads][N][M] is sent as it is, and computed with as
    # [B][heads][N][M], the same numbers
    sent_allow, sent_bias = allow, bias_mask

    def as_4d(a):
        if a is None:
            return None
        a = np.asarray(a)
        return a.reshape(B, h, N, M) if a.ndim == 3 and a.shape[0] == B * h and h > 1 else a
    allow, bias_mask = as_4d(allow), as_4d(bias_mask)
    kdim = kdim if kdim is not None else E
    # a value input of its own when vdim differs from kdim
    separate_value = vdim is not None and vdim != kdim
    vdim = vdim if vdim is not None else kdim
    mha = nn.MultiheadAttention(E, h, dropout=dropout, bias=bias, add_bias_kv=add_bias_kv,
                                add_zero_attn=add_zero_attn, kdim=kdim, vdim=vdim, batch_first=True)
    if bias:
        randomize_biases(mha, rng)
    if state_dict is not None:
        mha.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in state_dict.items()})
    sd = {k: v.detach().float() for k, v in mha.state_dict().items()}
    m64 = nn.MultiheadAttention(E, h, dropout=dropout, bias=bias, add_bias_kv=add_bias_kv,
                                add_zero_attn=add_zero_attn, kdim=kdim, vdim=vdim, batch_first=True,
                                dtype=torch.float64)
    m64.load_state_dict({k: v.double() for k, v in sd.items()})
    x = rng.standard_normal((B, N, E)).astype(np.float32) if x is None else \
        np.asarray(x, dtype=np.float32).reshape(B, N, E)
    if not cross:
        ctx = x
    elif ctx is None:
        ctx = rng.standard_normal((B, M, kdim)).astype(np.float32)
    else:
        ctx = np.asarray(ctx, dtype=np.float32).reshape(B, M, kdim)
    val = rng.standard_normal((B, M, vdim)).astype(np.float32) if separate_value else ctx
    x64, c64, v64 = T(x), T(ctx), T(val)
    attn_mask = torch_attn_mask(B, h, N, M, allow, bias_mask, causal)
    kpm = None if key_padding is None else torch.tensor(np.asarray(key_padding, dtype=bool))
    extra = int(add_bias_kv) + int(add_zero_attn)
    K = M + extra

    def run(average, train):
        real = F.dropout
        if train:
            keep = torch.tensor(np_units(0, "dropout", B * h * N * K) >= f32(dropout)).reshape(B, h, N, K)

            def readme_dropout(t, p=0.5, training=True, inplace=False):
                return torch.where(keep.reshape(t.shape), t / (1.0 - f32(dropout)), torch.zeros_like(t))
            F.dropout = readme_dropout
            m64.train()
        else:
            m64.eval()
        try:
            with torch.no_grad():
                return m64(x64, c64.clone(), v64.clone(), key_padding_mask=kpm, need_weights=True,
                           attn_mask=attn_mask, average_attn_weights=average)
        finally:
            F.dropout = real
    train = dropout > 0
    out, w = run(False, train)
    _, wmean = run(True, train)
    w_raw = run(False, False)[1] if train else None
    require("nn.MultiheadAttention parity cases", bool(torch.isfinite(w).all() and torch.isfinite(out).all()),
            "%s: PyTorch gives non-finite numbers (a fully masked row?)" % name)

    # the reference on the same numbers
    def P(k):
        return None if k not in sd else sd[k].numpy()
    if "in_proj_weight" in sd:
        wq, wk, wv = np.split(P("in_proj_weight"), 3)
    else:
        wq, wk, wv = P("q_proj_weight"), P("k_proj_weight"), P("v_proj_weight")
    bq = bk = bv = None
    if "in_proj_bias" in sd:
        bq, bk, bv = np.split(P("in_proj_bias"), 3)
    params = {"q_proj.weight": wq, "q_proj.bias": bq, "k_proj.weight": wk, "k_proj.bias": bk,
              "v_proj.weight": wv, "v_proj.bias": bv, "out_proj.weight": P("out_proj.weight"),
              "out_proj.bias": P("out_proj.bias")}
    cfg = dict(batch=B, n_query=N, d_model=E, heads=h, causal=causal, dropout=f32(dropout), seed=0,
               qkv_bias=bq is not None, out_bias=params["out_proj.bias"] is not None)
    if cross:
        cfg.update(n_ctx=M, d_ctx=kdim)
    if separate_value:
        cfg.update(d_value=vdim)
    c = ref.resolve_config(cfg)
    res = ref.forward(c, x, ctx if cross else None,
                      mask=None if allow is None else np.asarray(allow, dtype=bool),
                      key_padding=None if key_padding is None else np.asarray(key_padding, dtype=bool),
                      params=params, mask_bias=bias_mask,
                      bias_kv=(P("bias_k").ravel(), P("bias_v").ravel()) if add_bias_kv else None,
                      zero_attn=add_zero_attn, value=val if separate_value else None)
    check = "nn.MultiheadAttention parity cases vs the reference"
    compare(check, name + " weights", res["weights"], w)
    compare(check, name + " mean_weights", res["mean_weights"], wmean)
    compare(check, name + " output", res["output"], out)
    if w_raw is not None:
        compare(check, name + " weights_before_dropout", res["weights_raw"], w_raw)

    batched = B > 1 or x_given_batched
    body = {"embeddings": x.tolist() if batched else x[0].tolist()}
    if cross:
        body["context"] = {"embeddings": ctx.tolist() if batched else ctx[0].tolist()}
    if separate_value:
        body["value"] = {"embeddings": val.tolist() if batched else val[0].tolist()}
    body["heads"] = h
    # a given state_dict as it was written (the same float32 values)
    body["params"] = state_dict if state_dict is not None else {k: v.tolist() for k, v in sd.items()}
    form = None
    if allow is not None or bias_mask is not None:
        if sent_bias is not None:
            mb = np.asarray(sent_bias, dtype=np.float32).astype(np.float64)
            if sent_allow is not None:
                mb = np.where(np.asarray(sent_allow, dtype=bool), mb, -math.inf)
            body["mask"] = mask_json(mb, never_as_number)
            form = mb.shape
        else:
            a = np.asarray(sent_allow, dtype=bool)
            sent = ~a if convention == "block" else a
            body["mask"] = sent.astype(int).tolist() if send_numbers else sent.tolist()
            form = a.shape
        if convention is not None:
            body["mask_convention"] = convention
        if mask_type is not None:
            body["mask_type"] = mask_type
    if causal:
        body["causal"] = True
    if key_padding is not None:
        body["key_padding"] = np.asarray(key_padding, dtype=bool).tolist()
    if add_zero_attn:
        body["add_zero_attn"] = True
    if dropout > 0:
        body["dropout"] = f32(dropout)
    body["return"] = ["weights", "mean_weights", "output"] + (["weights_before_dropout"] if train else [])
    if request_extra:
        body.update(request_extra)
    forms = {2: "[N][M]", 3: "[B][N][M]", 4: "[B][heads][N][M]"}
    echo = {"keys": K} if extra else {}
    if separate_value:
        echo["d_value"] = vdim
    if form is not None:
        echo["mask_form"] = forms[len(form)] if not (len(form) == 3 and form[0] != B) else "[B*heads][N][M]"
        echo["mask_type"] = "additive" if bias_mask is not None else "boolean"
        echo["mask_convention"] = convention or "allow"
    return {"name": name, "description": description, "request": body, "echo": echo,
            "expected": {"shape": [B, h, N, K, E],
                         "weights": flat(to_np(w)), "mean_weights": flat(to_np(wmean)),
                         "output": flat(to_np(out)),
                         "weights_before_dropout": None if w_raw is None else flat(to_np(w_raw))}}


README_X = [[1, 0, 0, 0, 0, 0, 0, 1], [0, 1, 0, 0, 0, 0, 1, 0]]
README_CONTEXT = [[1, 0, 0, 0], [0, 1, 0, 0], [0.5, 0.5, 0.5, 0.5]]


def readme_state_dict():
    """The state_dict docs/api.md pastes: nn.MultiheadAttention(8, 2, kdim=4,
    vdim=4) as torch.manual_seed(0) makes it, to 4 decimals."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, kdim=4, vdim=4)
    return {k: np.round(v.detach().numpy().astype(np.float64), 4).tolist()
            for k, v in mha.state_dict().items()}


def parity_cases():
    rng = np.random.default_rng(2024)

    def allow_of(*shape, p=0.3):
        a = rng.uniform(size=shape) >= p
        a[..., 0] = True      # every row keeps a key, so PyTorch stays finite
        return a

    def alibi(B, h, N, M):
        """ALiBi's per-head linear biases, [B][h][N][M]."""
        slopes = 2.0 ** (-8.0 * np.arange(1, h + 1) / h)
        dist = np.arange(M)[None, :] - np.arange(N)[:, None]
        return np.broadcast_to(-slopes[:, None, None] * np.abs(dist)[None], (B, h, N, M)).astype(np.float32)

    kp = np.array([[False, False, False, True, False], [False, True, False, False, True]])
    cases = [
        parity_case("kdim_vdim_bias",
                    "nn.MultiheadAttention(8, 2, kdim=4, vdim=4).state_dict() pasted as params: "
                    "q/k/v_proj_weight and in_proj_bias of 3 x 8 (the context is 4 wide); cross-"
                    "attention, a batch of 2, N 3, M 5.",
                    E=8, h=2, B=2, N=3, M=5, kdim=4, torch_seed=1, data_seed=1),
        parity_case("kdim_vdim_no_bias",
                    "bias=False with kdim = vdim = 6: no in_proj_bias, no out_proj.bias; key padding "
                    "per sequence.",
                    E=8, h=4, B=2, N=4, M=5, kdim=6, bias=False, key_padding=kp, torch_seed=2, data_seed=2),
        parity_case("kdim_ne_vdim",
                    "nn.MultiheadAttention(8, 2, kdim=4, vdim=6).state_dict(): keys from the context, "
                    "values from a value input of their own, as forward(query, key, value) takes them.",
                    E=8, h=2, B=2, N=3, M=5, kdim=4, vdim=6, torch_seed=11, data_seed=11),
        parity_case("kdim_ne_vdim_no_bias_bias_kv",
                    "kdim 3, vdim 5, bias=False, add_bias_kv and add_zero_attn, key padding and causal: "
                    "bias_v is as wide as the values' heads, whatever vdim is.",
                    E=8, h=4, B=1, N=4, M=6, kdim=3, vdim=5, bias=False, add_bias_kv=True,
                    add_zero_attn=True, causal=True, key_padding=[[False, False, True, False, False, True]],
                    torch_seed=12, data_seed=12),
        parity_case("self_no_bias_causal",
                    "Self-attention, bias=False (in_proj_weight alone), causal.",
                    E=6, h=3, B=1, N=5, bias=False, causal=True, torch_seed=3, data_seed=3),
        parity_case("bias_kv",
                    "add_bias_kv=True with kdim 4: bias_k and bias_v ([1][1][8]) appended to the projected "
                    "keys and values, a boolean mask in nn.MultiheadAttention's convention (block) and "
                    "key padding, both padded with an allowed column by PyTorch.",
                    E=8, h=2, B=2, N=3, M=5, kdim=4, add_bias_kv=True, allow=allow_of(3, 5),
                    convention="block", key_padding=kp, torch_seed=4, data_seed=4),
        parity_case("zero_attn_causal_padding",
                    "add_zero_attn (a request option): a zero key and value after the context's; causal "
                    "and key padding; self-attention.",
                    E=8, h=2, B=2, N=5, add_zero_attn=True, causal=True,
                    key_padding=np.array([[False, False, True, False, False], [False, False, False, False, True]]),
                    torch_seed=5, data_seed=5),
        parity_case("bias_kv_zero_attn_additive",
                    "add_bias_kv and add_zero_attn together, in that order, with an additive [N][M] mask "
                    "(-inf as the string \"-inf\", one as -1e31) and cross-attention.",
                    E=8, h=4, B=2, N=4, M=6, kdim=5, add_bias_kv=True, add_zero_attn=True,
                    bias_mask=np.where(allow_of(4, 6), rng.normal(size=(4, 6)), -np.inf).astype(np.float32),
                    never_as_number=(3, 9), torch_seed=6, data_seed=6),
        parity_case("float_mask_2d",
                    "An additive [N][M] mask: a relative-position bias with -inf entries, added to the "
                    "scaled scores as PyTorch's float attn_mask is.",
                    E=8, h=2, B=1, N=5, bias_mask=np.where(allow_of(5, 5), rng.normal(size=(5, 5)), -np.inf)
                    .astype(np.float32), torch_seed=7, data_seed=7),
        parity_case("float_mask_per_head_3d",
                    "PyTorch's 3-D float attn_mask [B*heads][N][M] (ALiBi slopes per head), with key "
                    "padding.",
                    E=8, h=4, B=2, N=4, M=5, bias_mask=alibi(2, 4, 4, 5).reshape(8, 4, 5), key_padding=kp,
                    torch_seed=8, data_seed=8),
        parity_case("float_mask_batched",
                    "An additive mask per sequence, [B][N][M], and causal.",
                    E=6, h=2, B=3, N=4, bias_mask=rng.normal(size=(3, 4, 4)).astype(np.float32), causal=True,
                    torch_seed=9, data_seed=9),
        parity_case("float_mask_4d",
                    "An additive mask per sequence and head, [B][heads][N][M].",
                    E=8, h=2, B=2, N=3, M=4, kdim=8, bias_mask=rng.normal(size=(2, 2, 3, 4)).astype(np.float32),
                    torch_seed=10, data_seed=10),
        parity_case("bool_allow_padding_causal",
                    "A boolean [B][N][M] mask in SDPA's convention (allow, the default), combined with "
                    "key padding and causal.",
                    E=8, h=2, B=2, N=5, allow=allow_of(2, 5, 5), key_padding=kp, causal=True,
                    torch_seed=11, data_seed=11),
        parity_case("bool_block_padding_causal",
                    "The same kind of mask in nn.MultiheadAttention's convention (block: true = masked), "
                    "sent as 1s and 0s, with key padding and causal.",
                    E=8, h=2, B=2, N=5, allow=allow_of(2, 5, 5), key_padding=kp, causal=True,
                    convention="block", send_numbers=True, torch_seed=12, data_seed=12),
        parity_case("bool_block_per_head",
                    "A boolean per-head mask as PyTorch takes it, [B*heads][N][M], block convention.",
                    E=8, h=2, B=2, N=3, M=5, allow=allow_of(4, 3, 5), convention="block", key_padding=kp,
                    torch_seed=13, data_seed=13),
        parity_case("additive_zero_one",
                    "mask_type \"additive\" forces a mask of 0s and 1s to be added to the scores (auto "
                    "would read it as boolean).",
                    E=4, h=2, B=1, N=3, bias_mask=(rng.uniform(size=(3, 3)) < 0.5).astype(np.float32),
                    mask_type="additive", torch_seed=14, data_seed=14),
        parity_case("dropout_weights_before_after",
                    "Dropout 0.25 with add_zero_attn: PyTorch's weights after dropout (F.dropout replaced "
                    "by docs/math.md's keep mask, stream 'dropout' of seed 0, K = M + 1 columns) and "
                    "weights_before_dropout (PyTorch in eval mode).",
                    E=8, h=2, B=1, N=4, add_zero_attn=True, dropout=0.25, torch_seed=15, data_seed=15),
        parity_case("readme_state_dict",
                    "docs/api.md's example: nn.MultiheadAttention(8, 2, kdim=4, vdim=4).state_dict() of "
                    "torch.manual_seed(0), to 4 decimals, pasted as params.",
                    E=8, h=2, B=1, N=2, M=3, kdim=4, bias=True, state_dict=readme_state_dict(),
                    x=README_X, ctx=README_CONTEXT, torch_seed=0, data_seed=16),
    ]
    return cases


# ------------------------------------------------------------- tokenizer

TOKENIZER_INPUTS = [
    (SENTENCE, False, True),
    (SENTENCE, True, False),
    ("Hello, World!", False, False),
    ("Hello, World!", True, True),
    ("\u00c9lan vital", False, False),
    ("na\u00efve caf\u00e9 r\u00e9sum\u00e9", False, False),
    ("NA\u00cfVE CAF\u00c9 R\u00c9SUM\u00c9", True, False),
    ("NA\u00cfVE CAF\u00c9 R\u00c9SUM\u00c9", False, False),
    ("  leading and trailing spaces  ", False, False),
    ("tabs\tand\nnewlines\r\nhere", False, False),
    ("ideographic\u3000space", False, False),
    ("no-break\u00a0space and thin\u2009space and narrow\u202fspace", False, False),
    ("ogham\u1680space en\u2002quad", False, False),
    ("zero\u200bwidth space is a format character", False, False),
    ("soft\u00adhyphen", False, False),
    ("byte\ufefforder mark", False, False),
    ("replacement\ufffdcharacter", False, False),
    ("bell\u0007 escape\u001b[0m", False, False),
    ("delete\u007fchar and next\u0085line", False, False),
    ("vertical\u000btab form\u000cfeed unit\u001fsep", False, False),
    ("line\u2028separator paragraph\u2029separator", False, False),
    ("word\u2060joiner lrm\u200erlm\u200f", False, False),
    ("mongolian\u180evowel separator", False, False),
    ("private\ue000use", False, False),
    ("\u4e2d\u6587\u5b57\u7b26", False, False),
    ("\u6211\u7231\u5317\u4eac\u5929\u5b89\u95e8!", False, True),
    ("\u4f60\u597d\uff0c\u4e16\u754c\u3002", False, False),
    ("\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", False, False),
    ("\u30ab\u30bf\u30ab\u30ca \uff76\uff80\uff76\uff85 \u30ac\u30ae", False, False),
    ("\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8", False, False),
    ("\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8", True, False),
    ("ext-a\u3400\u4db5 ext-b\U00020000\U0002a6d6 ext-g\U00030000", False, False),
    ("compat\uf900\ufa0e ideographs", False, False),
    ("compat\uf900\ufa0e ideographs", True, False),
    ("radicals \u2e80\u2f00 are symbols", False, False),
    ("U.S.A. and e.g. don't", False, False),
    ("$100 + 5% = <x> ^ `y` | ~z # & * @ \\ _", False, False),
    ("e-mail: someone@example.com (or not)", False, False),
    ("\u00abquoted\u00bb \u201etext\u201c \u2014 dash\u2026 \u2018single\u2019", False, False),
    ("\u00bfQu\u00e9? \u00a1S\u00ed!", False, False),
    ("Emoji \U0001f642 test \U0001f600\U0001f600", False, False),
    ("family \U0001f468\u200d\U0001f469\u200d\U0001f467 emoji", False, False),
    ("thumbs \U0001f44d\U0001f3fd up", False, False),
    ("heart \u2764\ufe0f vs \u2764", False, False),
    ("heart \u2764\ufe0f vs \u2764", True, False),
    ("flag \U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f scotland", False, False),
    ("\u03a3\u038a\u03a3\u03a5\u03a6\u039f\u03a3 \u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3", False, False),
    ("\u03a3\u038a\u03a3\u03a5\u03a6\u039f\u03a3", True, False),
    ("Stra\u00dfe STRASSE \u1e9e", False, False),
    ("\u0130stanbul \u0131s\u0131k", False, False),
    ("\u01c5ungla \u01c4 \u01c6", False, False),
    ("\ufb01ne \ufb02our \ufb00", False, False),
    ("\u00c5ngstr\u00f6m \u212b", False, False),
    ("x\u0301y A\u030a", False, False),
    ("x\u0301y A\u030a", True, False),
    ("\u0301leading combining and a lone \u0301 mark", False, False),
    (" \u0301 ", False, True),
    ("", False, False),
    ("", False, True),
    ("   \t\n  ", False, False),
    ("varia a\u1fefb and oxia a\u1ffdb", False, False),
    ("varia a\u1fefb and oxia a\u1ffdb", True, False),
    ("greek question mark\u037e ano teleia\u0387", False, False),
    ("math a\u2211b \u221e \u2260 \u00b1 \u00d7", False, False),
    ("price: \u20ac5, \u00a33, \u00a57, $9", False, False),
    ("[CLS] inside text [SEP]", False, True),
    ("Mixed CaSe WoRdS", True, True),
    ("Mixed CaSe WoRdS", False, False),
    ("Numbers 3.14 and 1,000,000", False, False),
    ("Arabic: \u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645\u061f", False, False),
    ("Hindi: \u0928\u092e\u0938\u094d\u0924\u0947", False, False),
    ("Hindi: \u0928\u092e\u0938\u094d\u0924\u0947", True, False),
    ("Thai: \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a", False, False),
    ("Hebrew: \u05e9\u05b8\u05c1\u05dc\u05d5\u05b9\u05dd", False, False),
    ("Vietnamese: Ti\u1ebfng Vi\u1ec7t", False, False),
    ("\uff26\uff35\uff2c\uff2c\uff37\uff29\uff24\uff34\uff28\uff01 \uff08\uff41\uff09", False, False),
    ("\u216b \u24b6 \U0001d400 \U00010400 \u13a0", False, False),
    ("Cherokee \u13a0\u13a1 and Deseret \U00010400", True, False),
]


# ----------------------------------------------------------------- output

def dumps(obj, indent=0):
    """JSON with nested objects indented and every list on one line."""
    pad = " " * indent
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = ["%s  %s: %s" % (pad, json.dumps(k), dumps(v, indent + 2)) for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and any(isinstance(v, dict) for v in obj):
        items = ["%s  %s" % (pad, dumps(v, indent + 2)) for v in obj]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


def embeddings_json():
    tokens = ["[CLS]", "[SEP]", "cat", "na\u00efve", "the", "\u6771", "\U0001f642"]
    seeds = [0, 42, ref.MASK64]
    entries = []
    for token in tokens:
        for seed in seeds:
            for d in (1, 7, 64):
                entries.append({"token": token, "seed": str(seed), "d": d,
                                "values": flat(ref.embed_token(token, seed, d))})
    check_embeddings_formulation([(t, s, d) for t in tokens for s in seeds for d in (1, 7, 64)])
    streams = []
    for seed, label in ((0, ""), (0, "dropout"), (42, "token:cat"), (7, "dropout"),
                        (ref.MASK64, "q_proj.weight"), (1234567, "token:na\u00efve")):
        key = ref.stream_key(seed, label)
        streams.append({"seed": str(seed), "label": label, "fnv1a64": str(ref.fnv1a64(label)),
                        "key": str(key), "draws": [str(ref.draw(key, n)) for n in range(6)],
                        "units": [ref.unit(key, n) for n in range(6)]})
    cfg = ref.resolve_config(dict(n_query=3, d_model=6, n_ctx=5, d_ctx=5, heads=2, kv_heads=1,
                                  d_k=4, d_v=3, d_out=7, qkv_bias=True, out_bias=True, seed=42))
    params = ref.draw_params(cfg)
    cfg_out = {k: cfg[k] for k in CONFIG_KEYS}
    cfg_out["seed"] = str(cfg["seed"])
    return {
        "description": "Token embeddings (docs/math.md 'Token embeddings'): values[i] of token under seed "
                       "for width d, float32 values; streams: fnv1a64(label), key = seed ^ fnv1a64, "
                       "draw(n) and unit(n) for n = 0..5 (u64 as decimal strings); params: every "
                       "tensor drawn for config (cross-attention so k/v fan_in = d_ctx), flat "
                       "row-major [out][in], keyed by state_dict name.",
        "tokens": entries,
        "streams": streams,
        "params": {"config": cfg_out,
                   "tensors": {k: (None if params[k] is None else flat(params[k])) for k in ref.PARAM_NAMES}},
    }


def tokenizer_json():
    cases = []
    for text, keep_case, special in TOKENIZER_INPUTS:
        if "\x00" in text:
            raise ValueError("NUL cannot travel through a C string from cJSON")
        tokens = ref.tokenize(text, keep_case, special)
        other = tokenize_streaming(text, keep_case, special)
        require("tokenizer: streaming per-character formulation", tokens == other,
                "%r (keep_case=%s): %r vs %r" % (text, keep_case, tokens, other))
        cases.append({"input": text, "keep_case": keep_case, "special_tokens": special, "tokens": tokens})
    return {"cases": cases}


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: generate.py OUTPUT_DIR")
    outdir = argv[1]
    if unicodedata.unidata_version != "14.0.0":
        print("generate.py: warning: Python's Unicode is %s, attnd's tables are 14.0"
              % unicodedata.unidata_version, file=sys.stderr)
    torch.set_default_dtype(torch.float32)
    global TUTORIAL
    try:
        TUTORIAL = tutorial_tensors()
        check_streams()
        check_param_init()
        check_softmax_large()
        check_rope_complex()
        check_sinusoidal()
        files = {"tokenizer.json": tokenizer_json(), "embeddings.json": embeddings_json()}
        for case in make_cases():
            files[case["name"] + ".json"] = case
        for case in parity_cases():
            files[os.path.join(PARITY_DIR, case["name"] + ".json")] = case
    except CrossCheckFailed as e:
        sys.exit("generate.py: CROSS-CHECK FAILED, nothing written:\n  %s" % e)

    texts = {fname: dumps(obj) + "\n" for fname, obj in files.items()}
    total = 0
    for fname, text in texts.items():
        size = len(text.encode("ascii"))
        if size > MAX_FILE_BYTES:
            sys.exit("generate.py: %s would be %d bytes (> %d)" % (fname, size, MAX_FILE_BYTES))
        total += size
    if total > MAX_TOTAL_BYTES:
        sys.exit("generate.py: %d bytes in all (> %d)" % (total, MAX_TOTAL_BYTES))
    os.makedirs(os.path.join(outdir, PARITY_DIR), exist_ok=True)
    for fname, text in texts.items():
        with open(os.path.join(outdir, fname), "w", encoding="ascii") as f:
            f.write(text)

    print("cross-checks (max |ref - other| / max(1, |other|), comparisons):")
    for check, (err, count) in CHECKS.items():
        print("  %-75s %9.2e  %4d" % (check, err, count))
    print("wrote %d files, %d bytes, to %s" % (len(texts), total, outdir))
    for fname in sorted(texts):
        print("  %-32s %8d" % (fname, len(texts[fname])))


TUTORIAL = None

if __name__ == "__main__":
    main(sys.argv)
