#!/usr/bin/python3
"""The reference side of bench_patch: activation patching over heads as
TransformerLens's patching module does it (get_act_patch_attn_head_out_all_pos
and generic_activation_patch), on llama_torch.py's LLaMA network in
PyTorch float32 eager over the weights of one checkpoint (F32, or BF16
and F16 widened exactly to float32 at load).

    /usr/bin/python3 tests/bench/patch_torch.py DIR

For each head: one whole forward pass of the corrupted input (batch 1,
every layer from the embeddings on, the logits of every position
[n][vocab] as HookedTransformer returns them) with a hook on that
layer's z (each head's attention-weighted values before o_proj,
[n][heads][head_dim], TransformerLens's hook_z) that sets the head's
slice to the clean run's, then the metric on the logits of the last
position: logit[correct] - logit[incorrect]. The clean run is a pass
that keeps every layer's z (run_with_cache), the corrupted one a plain
pass; both give their own metric.

It prints "torch VERSION, BLAS ...", then answers one command a line:

    effects THREADS CORRECT INCORRECT N CLEAN[N] CORRUPTED[N] K (LAYER HEAD)[K]
        the clean and corrupted runs' metrics, then the K patched runs',
        on one line (%.17g)
    time THREADS CORRECT INCORRECT N CLEAN[N] CORRUPTED[N] K (LAYER HEAD)[K]
        after one corrupted pass to warm up (untimed), the clean run with
        its cache, the corrupted run and the K patched runs, each timed;
        prints torch.get_num_threads(), the threads of PyTorch's BLAS, the
        clean and the corrupted runs' seconds, and the median, least and
        most of the patched passes'

THREADS goes to torch.set_num_threads and, since Debian's PyTorch does
its products in the system's libblas.so.3 (OpenBLAS, which otherwise
runs on every core whatever torch.set_num_threads says), to OpenBLAS's
openblas_set_num_threads as well; the first line names OpenBLAS's core.

Needs Debian's python3-torch and python3-numpy.
"""
import ctypes
import sys
import time

import torch
import torch.nn.functional as F

import llama_torch


class Patcher(llama_torch.Decoder):
    """llama_torch.Decoder's network with a hook point at each layer's z
    and the logits of every position."""

    def __init__(self, config, t):
        super().__init__(config, t)
        self.head = t.get("lm_head.weight", t["embed_tokens.weight"])

    def block(self, layer, x, cos, sin, mask, patch, keep):
        """Decoder.layer() with hook_z: keep appends this layer's z;
        patch = (layer, head, clean z's) replaces that head's slice in
        place, as TransformerLens's layer_head_vector_patch_setter."""
        t, n, h, kv, d = self.t, x.shape[0], self.heads, self.kv, self.d
        p = "layers.%d." % layer
        a = self.norm(x, p + "input_layernorm.weight")
        q = F.linear(a, t[p + "self_attn.q_proj.weight"]).view(n, h, d).transpose(0, 1)
        k = F.linear(a, t[p + "self_attn.k_proj.weight"]).view(n, kv, d).transpose(0, 1)
        v = F.linear(a, t[p + "self_attn.v_proj.weight"]).view(n, kv, d).transpose(0, 1)
        q = q * cos + llama_torch.rotate_half(q) * sin
        k = k * cos + llama_torch.rotate_half(k) * sin
        kx = k[:, None].expand(kv, h // kv, n, d).reshape(h, n, d)
        vx = v[:, None].expand(kv, h // kv, n, d).reshape(h, n, d)
        scores = torch.matmul(q, kx.transpose(-1, -2)) * d ** -0.5 + mask
        probs = torch.softmax(scores, dim=-1)
        z = torch.matmul(probs, vx).transpose(0, 1)  # [n][h][d]: hook_z
        if keep is not None:
            keep.append(z)
        if patch is not None and patch[0] == layer:
            z[:, patch[1]] = patch[2][layer][:, patch[1]]
        x = x + F.linear(z.reshape(n, h * d), t[p + "self_attn.o_proj.weight"])
        a = self.norm(x, p + "post_attention_layernorm.weight")
        return x + F.linear(F.silu(F.linear(a, t[p + "mlp.gate_proj.weight"]))
                            * F.linear(a, t[p + "mlp.up_proj.weight"]),
                            t[p + "mlp.down_proj.weight"])

    def logits(self, ids, patch=None, keep=None):
        """The logits of every position [n][vocab] of one sequence."""
        n = ids.shape[0]
        cos, sin = self.rotation(0, n)
        mask = torch.full((n, n), torch.finfo(torch.float32).min).triu(1)
        x = self.t["embed_tokens.weight"][ids]
        for layer in range(self.layers):
            x = self.block(layer, x, cos, sin, mask, patch, keep)
        return F.linear(self.norm(x, "norm.weight"), self.head)


def openblas():
    """The OpenBLAS PyTorch's products run in (the same library, already
    loaded), or None when they do not."""
    try:
        lib = ctypes.CDLL("libblas.so.3")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        lib.openblas_set_num_threads.argtypes = [ctypes.c_int]
        lib.openblas_get_num_threads.restype = ctypes.c_int
        return lib
    except (OSError, AttributeError):
        return None


def metric(logits, correct, incorrect):
    """TransformerLens's usual logit difference at the last position."""
    return float(logits[-1, correct] - logits[-1, incorrect])


def parse(words):
    threads, correct, incorrect, n = (int(w) for w in words[1:5])
    clean = torch.tensor([int(w) for w in words[5:5 + n]])
    corrupted = torch.tensor([int(w) for w in words[5 + n:5 + 2 * n]])
    k = int(words[5 + 2 * n])
    rest = [int(w) for w in words[6 + 2 * n:]]
    if len(rest) != 2 * k:
        sys.exit("patch_torch.py: %d heads announced, %d given" % (k, len(rest) // 2))
    heads = [(rest[2 * i], rest[2 * i + 1]) for i in range(k)]
    return threads, correct, incorrect, clean, corrupted, heads


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: patch_torch.py DIR")
    config, tensors = llama_torch.load(argv[1])
    net = Patcher(config, tensors)
    blas = openblas()
    print("torch %s, BLAS %s" % (torch.__version__,
                                  "OpenBLAS " + blas.openblas_get_corename().decode()
                                  if blas else "not OpenBLAS"), flush=True)
    with torch.inference_mode():
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] not in ("effects", "time"):
                sys.exit("patch_torch.py: unknown command %r" % words[0])
            threads, correct, incorrect, clean, corrupted, heads = parse(words)
            torch.set_num_threads(threads)
            if blas:
                blas.openblas_set_num_threads(threads)
            if words[0] == "time":
                net.logits(corrupted)  # wakes the pools and the clocks
            t0 = time.perf_counter()
            cache = []
            clean_metric = metric(net.logits(clean, keep=cache), correct, incorrect)
            t1 = time.perf_counter()
            corrupted_metric = metric(net.logits(corrupted), correct, incorrect)
            t2 = time.perf_counter()
            patched, passes = [], []
            for layer, head in heads:
                s = time.perf_counter()
                logits = net.logits(corrupted, patch=(layer, head, cache))
                patched.append(metric(logits, correct, incorrect))
                passes.append(time.perf_counter() - s)
            if words[0] == "effects":
                print(" ".join("%.17g" % v for v in [clean_metric, corrupted_metric] + patched),
                      flush=True)
            else:
                passes.sort()
                mid = len(passes) // 2
                median = passes[mid] if len(passes) % 2 else (passes[mid - 1] + passes[mid]) / 2
                print("%d %d %.9f %.9f %.9f %.9f %.9f" % (
                    torch.get_num_threads(), blas.openblas_get_num_threads() if blas else 0,
                    t1 - t0, t2 - t1, median, passes[0], passes[-1]), flush=True)


if __name__ == "__main__":
    main(sys.argv)
