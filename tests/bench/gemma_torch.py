#!/usr/bin/python3
"""The reference side of the Gemma 2 benchmark: Gemma2Model (and, for the
logits, Gemma2ForCausalLM's tied head and final soft cap) written with
PyTorch's own operators, term by term as transformers' modeling_gemma2.py
runs it in eval mode with eager attention and output_attentions=True, in
float32 over the weights of one checkpoint (F32, or BF16 and F16 widened
exactly to float32 at load, as llama_torch.py does for LLaMA):

- the embeddings times torch.tensor(hidden_size ** 0.5) (float32);
- Gemma2RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w), before the
  attention (input_layernorm) and the MLP (pre_feedforward_layernorm)
  and on their outputs (post_attention_layernorm,
  post_feedforward_layernorm: the sandwich), then model.norm;
- q, k, v by F.linear, rotate_half RoPE at rope_theta, repeat_kv;
- scores q k^T * query_pre_attn_scalar^-1/2, soft-capped
  (attn_logit_softcapping: / cap, tanh, * cap) before the additive mask
  (the dtype's minimum above the diagonal, and on the sliding layers,
  the even ones, at and below diagonal -sliding_window), softmax in
  float32, then PV and o_proj;
- the MLP down(gelu_tanh(gate x) * up x);
- logits: the last position through the tied embeddings, then
  final_logit_softcapping (/ cap, tanh, * cap).

    /usr/bin/python3 tests/bench/gemma_torch.py DIR
    /usr/bin/python3 tests/bench/gemma_torch.py --golden DIR GOLDEN.json

DIR holds config.json and model.safetensors (or shards and
model.safetensors.index.json); tests/models/generate_gemma.py --gemma2-2b
DIR writes a random one of Gemma-2-2B's sizes. It speaks torch_protocol.py's
protocol (run, dump, attn, logits); the last hidden states are those after
model.norm. THREADS goes to torch.set_num_threads and, since Debian's
PyTorch does its products in the system's libblas.so.3 (OpenBLAS, which
otherwise runs on every core whatever torch.set_num_threads says), to
OpenBLAS's openblas_set_num_threads as well, so that PyTorch runs on the
threads the bench gives attnd; the first line names OpenBLAS's core.
With --golden it compares its numbers with a checkpoint's float64 goldens
instead (tests/models/gemma2 and tests/models/golden/gemma2.json) and
prints the largest differences.
Needs Debian's python3-torch and python3-numpy.
"""
import sys

import torch
import torch.nn.functional as F

import llama_torch
import patch_torch
import torch_protocol


class Gemma2:
    def __init__(self, config, t):
        if config.get("model_type") != "gemma2":
            sys.exit("gemma_torch.py: model_type %r is not gemma2" % config.get("model_type"))
        self.t = t
        self.layers = config["num_hidden_layers"]
        self.heads = config["num_attention_heads"]
        self.kv = config.get("num_key_value_heads") or self.heads
        self.hidden = config["hidden_size"]
        self.d = config.get("head_dim", 256)
        self.eps = config.get("rms_norm_eps", 1e-6)
        self.scaling = config.get("query_pre_attn_scalar", 256) ** -0.5
        self.attn_cap = config.get("attn_logit_softcapping", 50.0)
        self.final_cap = config.get("final_logit_softcapping", 30.0)
        self.window = config.get("sliding_window", 4096)
        theta = config.get("rope_theta", 10000.0)
        # Gemma2RotaryEmbedding's inv_freq
        self.inv_freq = 1.0 / (theta ** (torch.arange(0, self.d, 2, dtype=torch.int64).float() / self.d))
        self.normalizer = torch.tensor(self.hidden ** 0.5, dtype=torch.float32)
        self.head = t.get("lm_head.weight", t["embed_tokens.weight"])

    def norm(self, x, name):
        """Gemma2RMSNorm, in float32: the weight added to 1."""
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.t[name])

    def masks(self, n):
        """The additive masks of the global layers (causal) and of the
        sliding ones (also keys i - window and before)."""
        low = torch.finfo(torch.float32).min
        causal = torch.full((n, n), low).triu(1)
        outside = torch.tril(torch.ones((n, n), dtype=torch.bool), diagonal=-self.window)
        return causal, torch.where(outside, low, causal)

    def layer(self, layer, x, cos, sin, mask):
        """Gemma2DecoderLayer over x [n][hidden]: its output and its
        attention [heads][n][n]."""
        t, n, h, kv, d = self.t, x.shape[0], self.heads, self.kv, self.d
        p = "layers.%d." % layer
        residual = x
        a = self.norm(x, p + "input_layernorm.weight")
        q = F.linear(a, t[p + "self_attn.q_proj.weight"]).view(n, h, d).transpose(0, 1)
        k = F.linear(a, t[p + "self_attn.k_proj.weight"]).view(n, kv, d).transpose(0, 1)
        v = F.linear(a, t[p + "self_attn.v_proj.weight"]).view(n, kv, d).transpose(0, 1)
        q = q * cos + llama_torch.rotate_half(q) * sin
        k = k * cos + llama_torch.rotate_half(k) * sin
        # repeat_kv: query head i reads KV head i // (h / kv)
        k = k[:, None].expand(kv, h // kv, n, d).reshape(h, n, d)
        v = v[:, None].expand(kv, h // kv, n, d).reshape(h, n, d)
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scaling
        if self.attn_cap is not None:
            scores = torch.tanh(scores / self.attn_cap) * self.attn_cap
        probs = torch.softmax(scores + mask, dim=-1, dtype=torch.float32)
        ctx = torch.matmul(probs, v).transpose(0, 1).reshape(n, h * d)
        a = self.norm(F.linear(ctx, t[p + "self_attn.o_proj.weight"]), p + "post_attention_layernorm.weight")
        x = residual + a
        residual = x
        a = self.norm(x, p + "pre_feedforward_layernorm.weight")
        m = F.linear(F.gelu(F.linear(a, t[p + "mlp.gate_proj.weight"]), approximate="tanh")
                     * F.linear(a, t[p + "mlp.up_proj.weight"]),
                     t[p + "mlp.down_proj.weight"])
        x = residual + self.norm(m, p + "post_feedforward_layernorm.weight")
        return x, probs

    def forward(self, ids):
        """Every layer's attention [heads][N][N] and the last hidden
        states [N][hidden] (after model.norm), for one sequence."""
        n = ids.shape[0]
        pos = torch.arange(n, dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        causal, sliding = self.masks(n)
        x = self.t["embed_tokens.weight"][ids] * self.normalizer
        attentions = []
        for layer in range(self.layers):
            # Gemma2DecoderLayer.is_sliding: not bool(layer_idx % 2)
            x, probs = self.layer(layer, x, cos, sin, causal if layer % 2 else sliding)
            attentions.append(probs)
        return attentions, self.norm(x, "norm.weight")

    def logits(self, ids):
        """Gemma2ForCausalLM's logits of the last position [vocab]: the
        tied head, then the final soft cap."""
        _, x = self.forward(ids)
        out = F.linear(x[-1:], self.head)[0]
        if self.final_cap is not None:
            out = torch.tanh(out / self.final_cap) * self.final_cap
        return out


def check_golden(folder, golden):
    """This network against a checkpoint's float64 goldens
    (tests/models/golden/gemma2.json): the largest differences of every
    layer's attention weights, the last hidden states and the logits."""
    import json

    import numpy as np
    config, tensors = llama_torch.load(folder)
    net = Gemma2(config, tensors)
    with open(golden) as f:
        cases = json.load(f)["cases"]
    worst = [0.0, 0.0, 0.0]
    with torch.inference_mode():
        for case in cases:
            ids, n = torch.tensor(case["ids"]), len(case["ids"])
            attentions, x = net.forward(ids)
            want = (np.reshape(case["attentions"], (net.layers, net.heads, n, n)),
                    np.reshape(case["hidden_states"], (net.layers + 1, n, net.hidden))[-1],
                    np.array(case["logits"]))
            got = (torch.stack(attentions).numpy(), x.numpy(), net.logits(ids).numpy())
            worst = [max(w, float(np.max(np.abs(g - e)))) for w, g, e in zip(worst, got, want)]
    print("gemma_torch.py: %d cases of %s within %.2g (attention weights), %.2g (last hidden "
          "states), %.2g (logits)" % (len(cases), golden, *worst))


def main(argv):
    if len(argv) == 4 and argv[1] == "--golden":
        return check_golden(argv[2], argv[3])
    if len(argv) != 2:
        sys.exit("usage: gemma_torch.py DIR | gemma_torch.py --golden DIR GOLDEN.json")
    config, tensors = llama_torch.load(argv[1])
    net = Gemma2(config, tensors)
    blas = patch_torch.openblas()

    def threads(n):
        torch.set_num_threads(n)
        if blas:
            blas.openblas_set_num_threads(n)

    about = ", BLAS " + ("OpenBLAS " + blas.openblas_get_corename().decode() if blas else "not OpenBLAS")
    torch_protocol.serve("gemma_torch.py", net, config["vocab_size"], threads, about)


if __name__ == "__main__":
    main(sys.argv)
