"""Float64 reference implementation of attnd's math (docs/math.md).

Written from the specification in docs/math.md alone, with NumPy and the Python
standard library. It is deliberately plain: loops where they make the spec
easier to see, NumPy where it is only linear algebra. Inputs and parameters
are float32 values (np.float32 arrays); everything is computed in float64.

Public functions:

    tokenize(text, keep_case=False, special_tokens=False) -> [str]
    fnv1a64(data) / mix64(z) / stream_key(seed, label) / draw(key, n) / unit(key, n)
    unit_array(seed, label, count) -> float64 [count]
    embed_token(token, seed, d) -> float32 [d]
    embed_tokens(tokens, seed, d) -> float32 [len(tokens)][d]
    resolve_config(cfg) -> dict with every size explicit
    param_shapes(cfg) -> {state_dict name: (out_features, in_features) or (out,)}
    draw_params(cfg) -> {state_dict name: float32 array or None}
    sinusoidal(n, d) -> float64 [n][d]
    rope(t, heads, d_k, base) -> float64, t: [B][L][heads*d_k]
    forward(cfg, x, context=None, mask=None, key_padding=None, params=None,
            mask_bias=None, bias_kv=None, zero_attn=False) -> dict
"""

import math
import unicodedata

import numpy as np

# --------------------------------------------------------------- tokenizer

_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

# ASCII symbols that are not in a P* category but split like punctuation.
_ASCII_SYMBOLS = set("$+<=>^`|~")


def is_dropped(ch):
    """U+0000, U+FFFD and Cc/Cf control characters except tab, LF, CR."""
    if ch in "\t\n\r":
        return False
    cp = ord(ch)
    if cp == 0 or cp == 0xFFFD:
        return True
    return unicodedata.category(ch) in ("Cc", "Cf")


def is_whitespace(ch):
    """Space, tab, newline, carriage return and category Zs, as BERT's
    _is_whitespace; plus what BERT's final str.split() also splits on and
    its cleaning kept: the line and paragraph separators U+2028, U+2029."""
    return ch in " \t\n\r\u2028\u2029" or unicodedata.category(ch) == "Zs"


def is_cjk(ch):
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def is_punctuation(ch):
    return ch in _ASCII_SYMBOLS or unicodedata.category(ch).startswith("P")


def _lower(word):
    # Unicode full lowercase mapping, one character at a time, so that
    # capital sigma always becomes U+03C3 and never the final form U+03C2.
    return "".join(c.lower() for c in word)


def _strip_accents(word):
    return "".join(c for c in unicodedata.normalize("NFD", word)
                   if unicodedata.category(c) != "Mn")


def tokenize(text, keep_case=False, special_tokens=False):
    """BERT BasicTokenizer (HuggingFace's algorithm) as docs/math.md
    specifies."""
    # 1-2. clean: drop NUL, U+FFFD and control characters; whitespace -> " "
    cleaned = []
    for ch in text:
        if is_dropped(ch):
            continue
        cleaned.append(" " if is_whitespace(ch) else ch)
    # 4. every CJK ideograph becomes a word of its own
    spaced = []
    for ch in cleaned:
        if is_cjk(ch):
            spaced.extend((" ", ch, " "))
        else:
            spaced.append(ch)
    # 3. whitespace separates words (only the spaces made above)
    words = [w for w in "".join(spaced).split(" ") if w]
    tokens = []
    for word in words:
        # 5. uncased: lowercase, NFD, drop nonspacing marks
        if not keep_case:
            word = _strip_accents(_lower(word))
        # 6. each punctuation character is a token of its own
        current = []
        for ch in word:
            if is_punctuation(ch):
                if current:
                    tokens.append("".join(current))
                    current = []
                tokens.append(ch)
            else:
                current.append(ch)
        if current:
            tokens.append("".join(current))
    # 7. special tokens
    if special_tokens:
        tokens = ["[CLS]"] + tokens + ["[SEP]"]
    return tokens


# ---------------------------------------------------------- random streams

MASK64 = (1 << 64) - 1
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
GOLDEN_GAMMA = 0x9E3779B97F4A7C15


def fnv1a64(data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK64
    return h


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def stream_key(seed, label):
    return (seed & MASK64) ^ fnv1a64(label)


def draw(key, n):
    return mix64((key + (n + 1) * GOLDEN_GAMMA) & MASK64)


def unit(key, n):
    return (draw(key, n) >> 11) * 2.0 ** -53


def unit_array(seed, label, count):
    key = stream_key(seed, label)
    return np.array([unit(key, n) for n in range(count)], dtype=np.float64)


# ------------------------------------------------------- token embeddings

def embed_token(token, seed, d):
    """Box-Muller normals from the stream "token:" + token, float32 [d]."""
    key = stream_key(seed, "token:" + token)
    e = np.zeros(d, dtype=np.float64)
    for i in range((d + 1) // 2):
        u1 = 1.0 - unit(key, 2 * i)
        u2 = unit(key, 2 * i + 1)
        r = math.sqrt(-2.0 * math.log(u1))
        e[2 * i] = r * math.cos(2.0 * math.pi * u2)
        if 2 * i + 1 < d:
            e[2 * i + 1] = r * math.sin(2.0 * math.pi * u2)
    return e.astype(np.float32)


def embed_tokens(tokens, seed, d):
    return np.stack([embed_token(t, seed, d) for t in tokens]).astype(np.float32)


# ------------------------------------------------------------------ config

CONFIG_DEFAULTS = {
    "mode": "projected", "batch": 1, "n_query": None, "d_model": None,
    "n_ctx": 0, "d_ctx": 0, "d_value": 0, "heads": 0, "kv_heads": 0, "d_k": 0, "d_v": 0,
    "d_out": 0, "qkv_bias": False, "out_proj": True, "out_bias": False,
    "scale": None, "residual": "none", "positional": "none", "dropout": 0.0,
    "seed": 0, "causal": False,
}


def resolve_config(cfg):
    """Fill docs/api.md's defaults and check the combinations. Returns a new dict
    whose sizes are all explicit (n_ctx/d_ctx stay 0 for self-attention) plus
    the derived keys "cross", "M" and "D_ctx"."""
    c = dict(CONFIG_DEFAULTS)
    unknown = set(cfg) - set(c) - {"rope_base"}
    if unknown:
        raise ValueError("unknown config keys: %s" % sorted(unknown))
    c.update(cfg)
    c.setdefault("rope_base", 10000.0)
    c["seed"] = int(c["seed"]) & MASK64
    if c["batch"] == 0:
        c["batch"] = 1
    N, d_model = c["n_query"], c["d_model"]
    if not N or not d_model:
        raise ValueError("n_query and d_model are required")
    cross = c["n_ctx"] != 0 or c["d_ctx"] != 0
    if cross and c["n_ctx"] == 0:
        raise ValueError("cross-attention needs n_ctx")
    if cross and c["d_ctx"] == 0:
        c["d_ctx"] = d_model
    c["cross"] = cross
    c["M"] = c["n_ctx"] if cross else N
    c["D_ctx"] = c["d_ctx"] if cross else d_model
    # V's input: a value input of its own (d_value), or the keys' rows
    c["D_value"] = c["d_value"] or c["D_ctx"]

    if c["mode"] == "basic":
        if c["D_ctx"] != d_model:
            raise ValueError("basic mode needs d_ctx == d_model")
        if c["positional"] == "rope":
            raise ValueError("rope needs projections (mode projected)")
        for key in ("heads", "kv_heads"):
            if c[key] not in (0, 1):
                raise ValueError("basic mode has one head")
            c[key] = 1
        c["d_k"] = c["d_k"] or d_model
        c["d_v"] = c["d_v"] or d_model
        if c["d_k"] != d_model or c["d_v"] != d_model:
            raise ValueError("basic mode: d_k = d_v = d_model")
        c["qkv_bias"] = False
        c["out_proj"] = False
        c["out_bias"] = False
        c["d_out"] = c["d_out"] or d_model
        if c["d_out"] != d_model:
            raise ValueError("basic mode: d_out = d_model")
    elif c["mode"] == "projected":
        h = c["heads"] or 8
        c["heads"] = h
        g = c["kv_heads"] or h
        c["kv_heads"] = g
        if h % g:
            raise ValueError("kv_heads (%d) must divide heads (%d)" % (g, h))
        for key in ("d_k", "d_v"):
            if not c[key]:
                if d_model % h:
                    raise ValueError("heads must divide d_model when %s is not given" % key)
                c[key] = d_model // h
        if not c["d_out"]:
            if c["residual"] == "value" or not c["out_proj"]:
                c["d_out"] = h * c["d_v"]
            else:
                c["d_out"] = d_model
        if not c["out_proj"]:
            c["out_bias"] = False
            if c["d_out"] != h * c["d_v"]:
                raise ValueError("without out_proj d_out must be heads*d_v")
        if c["positional"] == "rope" and c["d_k"] % 2:
            raise ValueError("rope needs an even d_k")
    else:
        raise ValueError("mode must be projected or basic")

    if c["residual"] == "value":
        if c["d_out"] != c["heads"] * c["d_v"] or c["M"] != N:
            raise ValueError("residual value needs d_out = heads*d_v and M = N")
    elif c["residual"] == "input":
        if c["d_out"] != d_model or c["M"] != N:
            raise ValueError("residual input needs d_out = d_model and M = N")
    elif c["residual"] != "none":
        raise ValueError("residual must be none, value or input")
    if c["positional"] not in ("none", "sinusoidal", "rope"):
        raise ValueError("bad positional")
    if not 0.0 <= c["dropout"] < 1.0:
        raise ValueError("dropout must be in [0, 1)")
    return c


# -------------------------------------------------------------- parameters

PARAM_NAMES = ("q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias",
               "v_proj.weight", "v_proj.bias", "out_proj.weight", "out_proj.bias")


def param_shapes(c):
    """state_dict name -> (shape, fan_in) for the tensors this config has."""
    h, g, dk, dv = c["heads"], c["kv_heads"], c["d_k"], c["d_v"]
    shapes = {
        "q_proj.weight": ((h * dk, c["d_model"]), c["d_model"]),
        "k_proj.weight": ((g * dk, c["D_ctx"]), c["D_ctx"]),
        "v_proj.weight": ((g * dv, c["D_value"]), c["D_value"]),
    }
    if c["qkv_bias"]:
        shapes["q_proj.bias"] = ((h * dk,), c["d_model"])
        shapes["k_proj.bias"] = ((g * dk,), c["D_ctx"])
        shapes["v_proj.bias"] = ((g * dv,), c["D_value"])
    if c["out_proj"]:
        shapes["out_proj.weight"] = ((c["d_out"], h * dv), h * dv)
        if c["out_bias"]:
            shapes["out_proj.bias"] = ((c["d_out"],), h * dv)
    return shapes


def draw_tensor(seed, label, shape, fan_in):
    """Element n (row-major) = (2 unit(n) - 1) / sqrt(fan_in), float32."""
    count = int(np.prod(shape))
    u = unit_array(seed, label, count)
    return ((2.0 * u - 1.0) / math.sqrt(fan_in)).astype(np.float32).reshape(shape)


def draw_params(c):
    out = {name: None for name in PARAM_NAMES}
    if c["mode"] != "projected":
        return out
    for name, (shape, fan_in) in param_shapes(c).items():
        out[name] = draw_tensor(c["seed"], name, shape, fan_in)
    return out


# ---------------------------------------------------- positional encodings

def sinusoidal(n, d):
    """PE[pos][2i] = sin(pos / 10000^(2i/d)), PE[pos][2i+1] = cos(same)."""
    pe = np.zeros((n, d), dtype=np.float64)
    for pos in range(n):
        for col in range(d):
            two_i = col - (col % 2)
            angle = pos / 10000.0 ** (two_i / d)
            pe[pos, col] = math.sin(angle) if col % 2 == 0 else math.cos(angle)
    return pe


def rope(t, heads, d_k, base=10000.0):
    """Rotate pairs (2i, 2i+1) of every head by pos * base^(-2i/d_k).
    t: [B][L][heads*d_k] float64; positions are 0..L-1."""
    B, L, _ = t.shape
    out = np.array(t, dtype=np.float64, copy=True)
    for pos in range(L):
        for i in range(d_k // 2):
            angle = pos * base ** (-(2.0 * i) / d_k)
            cs, sn = math.cos(angle), math.sin(angle)
            for a in range(heads):
                col = a * d_k + 2 * i
                x0 = t[:, pos, col]
                x1 = t[:, pos, col + 1]
                out[:, pos, col] = x0 * cs - x1 * sn
                out[:, pos, col + 1] = x0 * sn + x1 * cs
    return out


# ------------------------------------------------------------ forward pass

def mask_per_head(c, mask):
    """A mask [N][M], [B][N][M] or [B][h][N][M] as [B][h][N][M] (a view)."""
    B, h, N, M = c["batch"], c["heads"], c["n_query"], c["M"]
    m = np.asarray(mask)
    if m.ndim == 2:
        return np.broadcast_to(m[None, None], (B, h, N, M))
    if m.ndim == 3:
        return np.broadcast_to(m[:, None], (B, h, N, M))
    return m.reshape(B, h, N, M)


def allowed_pairs(c, mask=None, key_padding=None):
    """[B][N][M] bool: query i may attend key j; [B][h][N][M] when mask is
    per head ([B][h][N][M])."""
    B, N, M = c["batch"], c["n_query"], c["M"]
    allowed = np.ones((B, N, M), dtype=bool)
    if c["causal"]:
        i = np.arange(N)[:, None]
        j = np.arange(M)[None, :]
        allowed &= (j <= i)[None, :, :]
    if mask is not None and np.asarray(mask).ndim == 4:
        allowed = allowed[:, None] & np.asarray(mask).astype(bool)
        if key_padding is not None:
            kp = np.asarray(key_padding).astype(bool)
            kp = kp if kp.ndim == 2 else np.broadcast_to(kp, (B, M))
            allowed &= ~kp[:, None, None, :]
        return allowed
    if mask is not None:
        m = np.asarray(mask).astype(bool)
        allowed &= m if m.ndim == 3 else m[None, :, :]
    if key_padding is not None:
        kp = np.asarray(key_padding).astype(bool)
        kp = kp if kp.ndim == 2 else np.broadcast_to(kp, (B, M))
        allowed &= ~kp[:, None, :]
    return allowed


def masked_softmax(scores, allowed):
    """Softmax over the last axis restricted to allowed entries, with the
    row maximum subtracted first. Rows with no allowed entry are all 0.
    scores: [..., M]; allowed broadcastable to scores."""
    allowed = np.broadcast_to(allowed, scores.shape)
    any_allowed = allowed.any(axis=-1, keepdims=True)
    row_max = np.where(allowed, scores, -np.inf).max(axis=-1, keepdims=True)
    row_max = np.where(any_allowed, row_max, 0.0)
    e = np.where(allowed, np.exp(np.where(allowed, scores - row_max, 0.0)), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return np.where(any_allowed, e / np.where(any_allowed, total, 1.0), 0.0)


def dropout_keep(c, M=None):
    """[B][h][N][M] bool, keep iff unit(((b*h + a)*N + i)*M + j) >= p; M
    counts the keys, appended ones included."""
    B, h, N, p = c["batch"], c["heads"], c["n_query"], c["dropout"]
    M = c["M"] if M is None else M
    key = stream_key(c["seed"], "dropout")
    u = np.array([unit(key, n) for n in range(B * h * N * M)], dtype=np.float64)
    return (u >= p).reshape(B, h, N, M)


def forward(cfg, x, context=None, mask=None, key_padding=None, params=None,
            mask_bias=None, bias_kv=None, zero_attn=False, value=None):
    """Run docs/math.md's forward pass. cfg may be unresolved. x: [B][N][d_model]
    float32; context: [B][M][d_ctx] or None; mask: [N][M], [B][N][M] or
    [B][h][N][M], true = may attend; key_padding: [M] or [B][M], true =
    ignore; params: dict of state_dict name -> float32 array (None = drawn
    from the seed). mask_bias: an additive mask of the same shapes, -inf (or
    <= -1e30) = never; bias_kv: (bias_k, bias_v) float32 rows appended to
    the projected keys and values; zero_attn: then a zero key and value.
    Appended keys are never masked. value: [B][M][d_value], V's own input
    beside the context's keys (nn.MultiheadAttention's vdim != kdim)."""
    c = resolve_config(cfg) if "M" not in cfg else cfg
    B, N, M = c["batch"], c["n_query"], c["M"]
    h, g, dk, dv = c["heads"], c["kv_heads"], c["d_k"], c["d_v"]

    x64 = np.asarray(x, dtype=np.float32).astype(np.float64).reshape(B, N, c["d_model"])
    if c["cross"]:
        if context is None:
            raise ValueError("cross-attention needs a context")
        ctx64 = np.asarray(context, dtype=np.float32).astype(np.float64).reshape(B, M, c["D_ctx"])
    else:
        ctx64 = None

    # 1. sinusoidal positions, each sequence from position 0
    if c["positional"] == "sinusoidal":
        x64 = x64 + sinusoidal(N, c["d_model"])[None]
        if ctx64 is not None:
            ctx64 = ctx64 + sinusoidal(M, c["D_ctx"])[None]
    if ctx64 is None:
        ctx64 = x64

    if c["mode"] == "basic":
        q, k, v = x64, ctx64, ctx64
        scale = 1.0 if c["scale"] is None else float(c["scale"])
        used = None
    else:
        if params is None:
            params = draw_params(c)
        used = {}
        for name in PARAM_NAMES:
            t = params.get(name)
            used[name] = None if t is None else np.asarray(t, dtype=np.float32)
        for name, (shape, _) in param_shapes(c).items():
            if name.endswith("weight") and (used[name] is None or used[name].size != int(np.prod(shape))):
                raise ValueError("%s must have shape %s" % (name, shape))
            if used[name] is not None:
                used[name] = used[name].reshape(shape)

        def linear(inp, w, b):
            y = inp @ w.astype(np.float64).T
            if b is not None:
                y = y + b.astype(np.float64)
            return y

        q = linear(x64, used["q_proj.weight"], used["q_proj.bias"])   # [B][N][h*dk]
        k = linear(ctx64, used["k_proj.weight"], used["k_proj.bias"])  # [B][M][g*dk]
        vin64 = ctx64 if value is None else \
            np.asarray(value, dtype=np.float32).astype(np.float64).reshape(B, M, -1)
        v = linear(vin64, used["v_proj.weight"], used["v_proj.bias"])  # [B][M][g*dv]
        if c["positional"] == "rope":
            q = rope(q, h, dk, c["rope_base"])
            k = rope(k, g, dk, c["rope_base"])
        scale = 1.0 / math.sqrt(dk) if c["scale"] is None else float(c["scale"])

    # keys after the context's: bias_k/bias_v as given, then zeros
    extra = (1 if bias_kv is not None else 0) + (1 if zero_attn else 0)
    if extra:
        rows_k, rows_v = [k], [v]
        if bias_kv is not None:
            bk_row = np.asarray(bias_kv[0], dtype=np.float32).astype(np.float64).reshape(1, 1, g * dk)
            bv_row = np.asarray(bias_kv[1], dtype=np.float32).astype(np.float64).reshape(1, 1, g * dv)
            rows_k.append(np.broadcast_to(bk_row, (B, 1, g * dk)))
            rows_v.append(np.broadcast_to(bv_row, (B, 1, g * dv)))
        if zero_attn:
            rows_k.append(np.zeros((B, 1, g * dk)))
            rows_v.append(np.zeros((B, 1, g * dv)))
        k = np.concatenate(rows_k, axis=1)
        v = np.concatenate(rows_v, axis=1)
    MK = M + extra

    group = h // g
    qh = q.reshape(B, N, h, dk).transpose(0, 2, 1, 3)      # [B][h][N][dk]
    kh = k.reshape(B, MK, g, dk).transpose(0, 2, 1, 3)     # [B][g][MK][dk]
    vh = v.reshape(B, MK, g, dv).transpose(0, 2, 1, 3)     # [B][g][MK][dv]
    kv_of = np.arange(h) // group                          # head a -> a / (h/g)
    scores = scale * (qh @ kh[:, kv_of].transpose(0, 1, 3, 2))  # [B][h][N][MK]

    allowed = allowed_pairs(c, mask, key_padding)          # [B](h)[N][M]
    if allowed.ndim == 3:
        allowed = np.broadcast_to(allowed[:, None], (B, h, N, M))
    masked = scores.copy()
    if mask_bias is not None:
        mb = mask_per_head(c, np.asarray(mask_bias, dtype=np.float32).astype(np.float64))
        allowed = allowed & (mb > -1e30)
        masked[..., :M] += np.where(mb > -1e30, mb, 0.0)
    allowed = np.concatenate([allowed, np.ones((B, h, N, extra), dtype=bool)], axis=-1)
    weights = masked_softmax(masked, allowed)
    weights_raw = weights
    fully_masked = ~allowed.any(axis=-1).all(axis=1)       # [B][N], any head

    if c["dropout"] > 0.0:
        weights = np.where(dropout_keep(c, MK), weights * (1.0 / (1.0 - c["dropout"])), 0.0)

    heads = weights @ vh[:, kv_of]                          # [B][h][N][dv]
    heads_out = heads.transpose(0, 2, 1, 3).reshape(B, N, h * dv)

    if c["mode"] == "projected" and c["out_proj"]:
        output = heads_out @ used["out_proj.weight"].astype(np.float64).T
        if used["out_proj.bias"] is not None:
            output = output + used["out_proj.bias"].astype(np.float64)
    else:
        output = heads_out.copy()

    if c["residual"] == "value":
        output = output + vh[:, kv_of].transpose(0, 2, 1, 3).reshape(B, N, h * dv)
    elif c["residual"] == "input":
        output = output + x64

    return {
        "config": c,
        "params": used,
        "scale": scale,
        "scores": scores,
        "weights": weights,
        "weights_raw": weights_raw,
        "mean_weights": weights.mean(axis=1),
        "q": q, "k": k, "v": v,
        "heads_out": heads_out,
        "output": output,
        "fully_masked": fully_masked.astype(np.uint8),
        "x_after_positional": x64,
    }
