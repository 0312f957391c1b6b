#!/usr/bin/python3
"""The reference side of a LLaMA benchmark: LlamaModel written with
PyTorch's own operators (F.linear, softmax, F.silu), as transformers'
modeling_llama.py runs it in eval mode with eager attention and
output_attentions=True, in float32 over the weights of one checkpoint
(F32, or BF16 and F16 widened to float32).

    /usr/bin/python3 tests/bench/llama_torch.py DIR

DIR holds config.json and model.safetensors (or shards and
model.safetensors.index.json); tests/models/generate_decoders.py --llama-1b
DIR --dtype bf16|f32 writes a random one of Llama-3.2-1B's sizes. It speaks
torch_protocol.py's protocol (run, dump); the last hidden states are
those after model.norm. Needs Debian's python3-torch and python3-numpy.
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import torch_protocol

WIDTH = {"F32": 4, "BF16": 2, "F16": 2}


def read_tensor(path, base, t):
    """One tensor of a safetensors file as a float32 torch tensor, read
    from its offset (the file is never held whole)."""
    a, b = t["data_offsets"]
    count = (b - a) // WIDTH[t["dtype"]]
    with open(path, "rb") as f:
        f.seek(base + a)
        if t["dtype"] == "F32":
            arr = np.fromfile(f, dtype="<f4", count=count)
        elif t["dtype"] == "F16":
            arr = np.fromfile(f, dtype="<f2", count=count).astype(np.float32)
        else:  # BF16: the top half of a float32
            arr = (np.fromfile(f, dtype="<u2", count=count).astype(np.uint32) << 16).view(np.float32)
    return torch.from_numpy(arr.reshape(t["shape"]))


def load(folder):
    """config.json and the weights by their names without "model.";
    buffers (rotary_emb.inv_freq) are left out."""
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors = {}
    for name in files:
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            head = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(head))
        for key, t in header.items():
            if key == "__metadata__" or key.endswith("rotary_emb.inv_freq"):
                continue
            if t["dtype"] not in WIDTH:
                sys.exit("llama_torch.py: %s is %s" % (key, t["dtype"]))
            tensors[key[6:] if key.startswith("model.") else key] = read_tensor(path, 8 + head, t)
    return config, tensors


def inv_freq(config, d):
    """1 / theta^(2i/d), then Llama 3's per-frequency scaling when
    rope_scaling says llama3 (modeling_rope_utils)."""
    theta = config.get("rope_theta", 10000.0)
    f = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    sc = config.get("rope_scaling")
    if sc and sc.get("rope_type", sc.get("type")) == "llama3":
        old = sc["original_max_position_embeddings"]
        low, high, factor = sc["low_freq_factor"], sc["high_freq_factor"], sc["factor"]
        wavelen = 2 * math.pi / f
        scaled = torch.where(wavelen > old / low, f / factor, f)
        smooth = (old / wavelen - low) / (high - low)
        medium = ~(wavelen < old / high) & ~(wavelen > old / low)
        f = torch.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)
    elif sc:
        sys.exit("llama_torch.py: rope_scaling %r is not llama3" % (sc,))
    return f.float()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Decoder:
    def __init__(self, config, t):
        self.t = t
        self.layers = config["num_hidden_layers"]
        self.heads = config["num_attention_heads"]
        self.kv = config.get("num_key_value_heads") or self.heads
        self.hidden = config["hidden_size"]
        self.d = config.get("head_dim") or self.hidden // self.heads
        self.eps = config["rms_norm_eps"]
        self.inv_freq = inv_freq(config, self.d)

    def norm(self, x, name):
        """LlamaRMSNorm, in float32."""
        return self.t[name] * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def rotation(self, pos0, n):
        """cos and sin of positions pos0 .. pos0 + n, rotate_half's layout."""
        pos = torch.arange(pos0, pos0 + n, dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    def layer(self, layer, x, cos, sin, mask, past=None):
        """One decoder layer over x [n][hidden]: its output, its attention
        [heads][n][keys], and its keys and values (after past's, if any:
        a KV cache's)."""
        t, n, h, kv, d = self.t, x.shape[0], self.heads, self.kv, self.d
        p = "layers.%d." % layer
        a = self.norm(x, p + "input_layernorm.weight")
        q = F.linear(a, t[p + "self_attn.q_proj.weight"]).view(n, h, d).transpose(0, 1)
        k = F.linear(a, t[p + "self_attn.k_proj.weight"]).view(n, kv, d).transpose(0, 1)
        v = F.linear(a, t[p + "self_attn.v_proj.weight"]).view(n, kv, d).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past is not None:
            k = torch.cat((past[0], k), dim=1)
            v = torch.cat((past[1], v), dim=1)
        keys = k.shape[1]
        # repeat_kv: query head i reads KV head i // (h / kv)
        kx = k[:, None].expand(kv, h // kv, keys, d).reshape(h, keys, d)
        vx = v[:, None].expand(kv, h // kv, keys, d).reshape(h, keys, d)
        scores = torch.matmul(q, kx.transpose(-1, -2)) * d ** -0.5 + mask
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, vx).transpose(0, 1).reshape(n, h * d)
        x = x + F.linear(ctx, t[p + "self_attn.o_proj.weight"])
        a = self.norm(x, p + "post_attention_layernorm.weight")
        x = x + F.linear(F.silu(F.linear(a, t[p + "mlp.gate_proj.weight"]))
                         * F.linear(a, t[p + "mlp.up_proj.weight"]),
                         t[p + "mlp.down_proj.weight"])
        return x, probs, (k, v)

    def forward(self, ids):
        """Every layer's attention [heads][N][N] and the last hidden
        states [N][hidden], for one sequence."""
        n = ids.shape[0]
        cos, sin = self.rotation(0, n)
        mask = torch.full((n, n), torch.finfo(torch.float32).min).triu(1)
        x = self.t["embed_tokens.weight"][ids]
        attentions = []
        for layer in range(self.layers):
            x, probs, _ = self.layer(layer, x, cos, sin, mask)
            attentions.append(probs)
        return attentions, self.norm(x, "norm.weight")

    def cached(self, ids, cache, pos0):
        """transformers' decoding step with a KV cache (DynamicCache):
        ids at positions pos0.., their keys and values appended to
        cache[layer], the attention's weights not kept (generate() asks
        for none); the logits of the last token."""
        n = ids.shape[0]
        cos, sin = self.rotation(pos0, n)
        # query i (at pos0 + i) sees keys j <= pos0 + i
        mask = torch.full((n, pos0 + n), torch.finfo(torch.float32).min).triu(pos0 + 1)
        x = self.t["embed_tokens.weight"][ids]
        for layer in range(self.layers):
            x, _, cache[layer] = self.layer(layer, x, cos, sin, mask, cache[layer])
        head = self.t.get("lm_head.weight", self.t["embed_tokens.weight"])
        return F.linear(self.norm(x[-1:], "norm.weight"), head)[0]

    def decode(self, ids, steps):
        """A greedy decoding loop: the prompt, then steps tokens one at a
        time through the cache; the seconds to the first token and the
        median of the others'."""
        cache = [None] * self.layers
        t0 = time.perf_counter()
        nxt = int(torch.argmax(self.cached(ids, cache, 0)))
        first = time.perf_counter() - t0
        per, pos = [], ids.shape[0]
        for _ in range(steps):
            t0 = time.perf_counter()
            nxt = int(torch.argmax(self.cached(torch.tensor([nxt]), cache, pos)))
            per.append(time.perf_counter() - t0)
            pos += 1
        per.sort()
        return first, per[len(per) // 2]


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: llama_torch.py DIR")
    config, tensors = load(argv[1])
    dec = Decoder(config, tensors)
    torch_protocol.serve("llama_torch.py", dec, config["vocab_size"])


if __name__ == "__main__":
    main(sys.argv)
