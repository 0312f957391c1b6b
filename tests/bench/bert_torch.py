#!/usr/bin/python3
"""The reference side of build/bench_bert: BertModel's encoder written
with PyTorch's own operators (F.linear, softmax, F.layer_norm, F.gelu), as
transformers' modeling_bert.py runs it in eval mode with
output_attentions=True, over the weights of one model.safetensors.

    /usr/bin/python3 tests/bench/bert_torch.py DIR

It speaks torch_protocol.py's protocol (run, dump) over wordpieces.

The wordpieces are the bench's: id (7 * i + 1000) % vocab_size at position
i, all of token type 0. Needs Debian's python3-torch and python3-numpy.
"""
import json
import math
import sys

import numpy as np
import torch
import torch.nn.functional as F

import torch_protocol


def load(folder):
    """The tensors of model.safetensors (F32 only, as the bench writes
    them) as torch tensors over one read of the file, and config.json."""
    with open(folder + "/config.json") as f:
        config = json.load(f)
    with open(folder + "/model.safetensors", "rb") as f:
        data = f.read()
    head = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + head])
    base = 8 + head
    tensors = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            sys.exit("bert_torch.py: %s is %s; the bench writes F32" %
                     (name, t["dtype"]))
        a, b = t["data_offsets"]
        arr = np.frombuffer(data, dtype="<f4", count=(b - a) // 4,
                            offset=base + a).reshape(t["shape"])
        key = name[5:] if name.startswith("bert.") else name
        tensors[key] = torch.from_numpy(arr.copy())
    return config, tensors


class Encoder:
    def __init__(self, config, t):
        self.c = config
        self.t = t
        self.layers = config["num_hidden_layers"]
        self.heads = config["num_attention_heads"]
        self.hidden = config["hidden_size"]
        self.eps = config["layer_norm_eps"]
        self.approximate = "tanh" if config["hidden_act"] == "gelu_new" \
            else "none"

    def ln(self, x, prefix):
        return F.layer_norm(x, (self.hidden,), self.t[prefix + ".weight"],
                            self.t[prefix + ".bias"], self.eps)

    def lin(self, x, prefix):
        return F.linear(x, self.t[prefix + ".weight"], self.t[prefix + ".bias"])

    def forward(self, ids):
        """Every layer's attention [heads][N][N] and the last hidden
        states [N][hidden], for one sequence."""
        t, n, h = self.t, ids.shape[0], self.heads
        d = self.hidden // h
        x = (t["embeddings.word_embeddings.weight"][ids] +
             t["embeddings.position_embeddings.weight"][:n] +
             t["embeddings.token_type_embeddings.weight"][0])
        x = self.ln(x, "embeddings.LayerNorm")
        attentions = []
        for layer in range(self.layers):
            p = "encoder.layer.%d." % layer
            q = self.lin(x, p + "attention.self.query").view(n, h, d)
            k = self.lin(x, p + "attention.self.key").view(n, h, d)
            v = self.lin(x, p + "attention.self.value").view(n, h, d)
            q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
            probs = torch.softmax(scores, dim=-1)
            attentions.append(probs)
            ctx = torch.matmul(probs, v).transpose(0, 1).reshape(n, self.hidden)
            x = self.ln(self.lin(ctx, p + "attention.output.dense") + x,
                        p + "attention.output.LayerNorm")
            inter = F.gelu(self.lin(x, p + "intermediate.dense"),
                           approximate=self.approximate)
            x = self.ln(self.lin(inter, p + "output.dense") + x,
                        p + "output.LayerNorm")
        return attentions, x


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: bert_torch.py DIR")
    config, tensors = load(argv[1])
    enc = Encoder(config, tensors)
    torch_protocol.serve("bert_torch.py", enc, config["vocab_size"])


if __name__ == "__main__":
    main(sys.argv)
