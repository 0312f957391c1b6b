"""What generate.py (BERT) and generate_decoders.py share: the safetensors
writer, the stored dtypes and their exact float64 values, the float64
building blocks both references use, the rollout, the cross-check
comparison and the goldens' number format.

Imported by the two scripts; not run on its own.
"""

import json
import math
import struct

import numpy as np

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None  # only the NumPy-only benchmark checkpoints work without it

TOL = 1e-9


class CrossCheckFailed(Exception):
    pass


def compare(label, ours, theirs, tol=TOL):
    """The largest difference relative to max(1, |theirs|); raises
    CrossCheckFailed beyond tol, returns it otherwise."""
    a = np.asarray(ours, dtype=np.float64)
    b = np.asarray(theirs, dtype=np.float64).reshape(a.shape)
    err = float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b)))) if a.size else 0.0
    if not err <= tol:
        raise CrossCheckFailed("%s: reference and PyTorch disagree by %.3e" % (label, err))
    return err


# ---------------------------------------------------- float64 building blocks

def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


_erf = np.vectorize(math.erf)


def gelu(x):
    """transformers' GELUActivation ("gelu"): the exact erf form."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_new(x):
    """transformers' NewGELUActivation ("gelu_new"): the tanh form."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def linear(x, w, b):
    return x @ w.T + b


def softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def rollout(attentions):
    """Abnar and Zuidema's rollout: Ahat_l = 0.5 * mean over heads + 0.5 * I,
    rows divided by their sums, R = Ahat_L * ... * Ahat_1."""
    n = attentions.shape[-1]
    r = None
    for a in attentions:
        ahat = 0.5 * a.mean(0) + 0.5 * np.eye(n)
        ahat = ahat / ahat.sum(-1, keepdims=True)
        r = ahat if r is None else ahat @ r
    return r


def attention_flow(attentions):
    """Abnar and Zuidema's attention flow, as their code computes it: a
    graph with a node for each token at each of layers + 1 levels, an edge
    from token i at level l + 1 to token j at level l of capacity the
    rollout's Ahat_l[i][j], and flow[i][j] the value of a maximum flow from
    output token i to input token j (NetworkX's preflow-push, another
    algorithm than the C code's)."""
    import networkx as nx
    layers, n = attentions.shape[0], attentions.shape[-1]
    g = nx.DiGraph()
    for l, a in enumerate(attentions):
        ahat = 0.5 * a.mean(0) + 0.5 * np.eye(n)
        ahat = ahat / ahat.sum(-1, keepdims=True)
        for i in range(n):
            for j in range(n):
                if ahat[i, j] > 0:
                    g.add_edge((l + 1, i), (l, j), capacity=float(ahat[i, j]))
    flow = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if (layers, i) in g and (0, j) in g:
                flow[i, j] = nx.maximum_flow_value(g, (layers, i), (0, j))
    return flow


def rounded(x):
    """float64 to 8 significant digits: far below the C tests' tolerances,
    half the size of full precision."""
    return [float("%.8g" % t) for t in np.asarray(x, dtype=np.float64).ravel()]


# ------------------------------------------------------------- dtypes

DTYPES = {"F32": np.float32, "F16": np.float16}


def to_bf16_bits(a):
    """Round float32 to bfloat16 (nearest, ties to even), as PyTorch does."""
    t = torch.tensor(np.asarray(a, dtype=np.float32)).to(torch.bfloat16)
    return t.view(torch.int16).numpy().view(np.uint16)


def bf16_bits_numpy(a):
    """The same rounding in NumPy alone (for the benchmark checkpoints):
    add 0x7FFF plus the kept low bit, then drop the low 16 bits. NaN is
    not expected in random weights."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounding = np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return ((bits + rounding) >> np.uint32(16)).astype(np.uint16)


def stored(a, dtype):
    """The bytes of a in dtype, and the float64 values they hold."""
    if dtype == "BF16":
        bits = to_bf16_bits(a)
        back = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return bits.astype("<u2").tobytes(), back
    if dtype == "I64":
        return np.asarray(a, dtype="<i8").tobytes(), None
    if dtype == "BOOL":
        return np.asarray(a, dtype=bool).astype(np.uint8).tobytes(), None
    arr = np.asarray(a, dtype=DTYPES[dtype]).astype(np.dtype(DTYPES[dtype]).newbyteorder("<"))
    return arr.tobytes(), arr.astype(np.float64)


def safetensors_header(tensors, order, metadata):
    """The 8-byte length and the JSON header, padded with spaces to a
    multiple of 8. tensors: name -> (dtype, shape, byte length or bytes);
    data offsets follow `order`, the header lists names sorted."""
    header, offset = {}, 0
    for name in order:
        dtype, shape, data = tensors[name]
        size = data if isinstance(data, int) else len(data)
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def write_safetensors(path, tensors, order, metadata):
    """tensors: name -> (dtype, shape, bytes); the data goes in `order`, the
    header lists names sorted, so the two orders differ in general."""
    with open(path, "wb") as fp:
        fp.write(safetensors_header(tensors, order, metadata))
        for name in order:
            fp.write(tensors[name][2])
