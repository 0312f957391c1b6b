#!/usr/bin/python3
"""PyTorch's side of bench_attention: torch.nn.MultiheadAttention on the
parameters and input the benchmark hands over, timed one call at a time
when the benchmark asks, so that its rounds interleave with attnd's.

    mha_torch.py DIR N D_MODEL HEADS

DIR holds raw little-endian float32 files written by bench_attention:
x ([N][D_MODEL]), wq wk wv wo ([D_MODEL][D_MODEL]) and bq bk bv bo
([D_MODEL]), nn.Linear's layout. Commands, one per line on stdin:

    run WEIGHTS THREADS   one timed forward; WEIGHTS 0 or 1 (need_weights,
                          per head); answers the seconds it took
    check                 writes the output of one forward to DIR/out
                          and answers "ok"

The first line out is "ready", or "error: ..." when PyTorch is missing.
"""
import os
import sys
import time


def main():
    folder, n, d_model, heads = sys.argv[1], *map(int, sys.argv[2:5])
    try:
        import numpy as np
        import torch
    except ImportError as e:
        print(f"error: {e}", flush=True)
        return 1

    def load(name, shape):
        a = np.fromfile(os.path.join(folder, name), dtype="<f4")
        return torch.from_numpy(a.reshape(shape).copy())

    mha = torch.nn.MultiheadAttention(d_model, heads, bias=True,
                                      batch_first=True)
    mha.eval()
    w = (d_model, d_model)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([load(k, w) for k in
                                            ("wq", "wk", "wv")]))
        mha.in_proj_bias.copy_(torch.cat([load(k, (d_model,)) for k in
                                          ("bq", "bk", "bv")]))
        mha.out_proj.weight.copy_(load("wo", w))
        mha.out_proj.bias.copy_(load("bo", (d_model,)))
    x = load("x", (1, n, d_model))

    def forward(weights):
        # one tensor for query, key and value: the self-attention fast path
        return mha(x, x, x, need_weights=weights,
                   average_attn_weights=False)

    print("ready", flush=True)
    with torch.inference_mode():
        forward(False)  # warm up allocator and kernels
        for line in sys.stdin:
            cmd = line.split()
            if cmd[:1] == ["check"]:
                out = forward(False)[0]
                out.numpy().astype("<f4").tofile(os.path.join(folder, "out"))
                print("ok", flush=True)
            elif cmd[:1] == ["run"] and len(cmd) == 3:
                if torch.get_num_threads() != int(cmd[2]):
                    # a new thread count restarts PyTorch's pool: not timed
                    torch.set_num_threads(int(cmd[2]))
                    forward(cmd[1] == "1")
                t0 = time.perf_counter()
                forward(cmd[1] == "1")
                print(f"{time.perf_counter() - t0:.9f}", flush=True)
            else:
                print(f"error: unknown command {line.strip()!r}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
