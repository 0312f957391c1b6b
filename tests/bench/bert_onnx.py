#!/usr/bin/python3
"""bench_bert's ONNX files: the encoder of bert_torch.py (BertModel's,
written with PyTorch's operators) over one model.safetensors, exported by
torch.onnx.export twice, for ONNX Runtime (tests/bench/ort/bert_ort.mjs):

    /usr/bin/python3 tests/bench/bert_onnx.py DIR

writes DIR/encoder.onnx, whose one output is the last hidden states
[N][hidden], and DIR/encoder-attn.onnx, whose outputs are the last hidden
states and then every layer's attention probabilities [heads][N][N], one
output a layer (as BertModel's output_attentions=True returns them). The
input is the wordpieces, input_ids [N] as int64, of any length up to
max_position_embeddings (all of token type 0). The weights are the
graph's initializers; opset 17, so that each layer norm is one
LayerNormalization. Needs Debian's python3-torch and python3-numpy.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_torch  # noqa: E402


class Exported(torch.nn.Module):
    """bert_torch.Encoder as a module: the last hidden states, and with
    attentions every layer's probabilities after them."""

    def __init__(self, encoder, attentions):
        super().__init__()
        self.encoder = encoder
        self.attentions = attentions

    def forward(self, ids):
        probs, x = self.encoder.forward(ids)
        return (x, *probs) if self.attentions else x


def export(encoder, path, attentions):
    layers = encoder.layers
    outputs = ["last_hidden_state"]
    axes = {"input_ids": {0: "n"}, "last_hidden_state": {0: "n"}}
    if attentions:
        for i in range(layers):
            outputs.append("attention_%d" % i)
            axes["attention_%d" % i] = {1: "n", 2: "n"}
    ids = torch.tensor([(7 * i + 1000) % encoder.c["vocab_size"]
                        for i in range(16)])
    tmp = path + ".tmp"
    with torch.no_grad():
        torch.onnx.export(Exported(encoder, attentions), (ids,), tmp,
                          input_names=["input_ids"], output_names=outputs,
                          dynamic_axes=axes, opset_version=17,
                          do_constant_folding=True)
    os.replace(tmp, path)


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: bert_onnx.py DIR")
    config, tensors = bert_torch.load(argv[1])
    encoder = bert_torch.Encoder(config, tensors)
    export(encoder, argv[1] + "/encoder.onnx", False)
    export(encoder, argv[1] + "/encoder-attn.onnx", True)
    print("bert_onnx.py: %s/encoder.onnx and %s/encoder-attn.onnx"
          % (argv[1], argv[1]))


if __name__ == "__main__":
    main(sys.argv)
