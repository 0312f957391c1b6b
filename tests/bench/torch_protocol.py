"""The stdin protocol every PyTorch side of a benchmark speaks
(bert_torch.py, llama_torch.py, gemma_torch.py): it prints "torch VERSION"
(and what the script adds), then reads commands, one a line, and answers
each on stdout:

    run N THREADS [IDS]   two forward passes over N tokens on THREADS
                    threads (the script's threads(), by default
                    torch.set_num_threads); prints the second's seconds
    dump N PATH [IDS]     the last hidden states [N][hidden] as float32
                    into PATH, for the bench to check that both sides
                    compute the same network; prints "ok"
    attn N PATH [IDS]     every layer's attention weights
                    [layers][heads][N][N] as float32 into PATH; prints "ok"
    logits N PATH [IDS]   (a network with logits()) the last position's
                    logits [vocab] as float32 into PATH; prints "ok"
    decode N K THREADS  (a decoder's) a greedy decoding loop with a KV
                    cache: N prompt tokens, then K more; prints the
                    seconds to the first token and the median of the
                    others' (after one loop to warm up)

The tokens are the bench's, id (7 * i + 1000) % vocab at position i, or,
with IDS, the N token ids in that file (little-endian uint32), which the
bench wrote from a text its tokenizer encoded.
"""
import sys
import time

import numpy as np
import torch


def token_ids(name, words, n, at, vocab):
    """The N ids of a command: from the file named at words[at], if any,
    else the bench's formula."""
    if len(words) <= at:
        return torch.tensor([(7 * i + 1000) % vocab for i in range(n)])
    ids = np.fromfile(words[at], dtype="<u4")
    if ids.shape[0] != n or (n and int(ids.max()) >= vocab):
        sys.exit("%s: %s holds %d ids, not %d below %d" % (name, words[at], ids.shape[0], n, vocab))
    return torch.from_numpy(ids.astype(np.int64))


def serve(name, network, vocab, threads=torch.set_num_threads, about=""):
    """Answers the commands on stdin with network.forward(ids), which
    returns (attentions, last hidden states); threads(T) sets the threads
    of a run; about is added to the first line."""
    print("torch %s%s" % (torch.__version__, about), flush=True)
    with torch.inference_mode():
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            n = int(words[1])
            if words[0] == "run":
                ids = token_ids(name, words, n, 3, vocab)
                threads(int(words[2]))
                # timed on the second pass in a row, as the bench times
                # attnd: the first wakes the pools and the clocks
                network.forward(ids)
                t0 = time.perf_counter()
                attentions, x = network.forward(ids)
                seconds = time.perf_counter() - t0
                del attentions, x
                print("%.9f" % seconds, flush=True)
            elif words[0] == "decode" and hasattr(network, "decode"):
                ids = token_ids(name, words, n, 4, vocab)
                threads(int(words[3]))
                network.decode(ids, 2)
                first, per = network.decode(ids, int(words[2]))
                print("%.9f %.9f" % (first, per), flush=True)
            elif words[0] in ("dump", "attn"):
                attentions, x = network.forward(token_ids(name, words, n, 3, vocab))
                if words[0] == "attn":
                    x = torch.stack(attentions)
                x.numpy().astype("<f4").tofile(words[2])
                print("ok", flush=True)
            elif words[0] == "logits" and hasattr(network, "logits"):
                network.logits(token_ids(name, words, n, 3, vocab)).numpy().astype("<f4").tofile(words[2])
                print("ok", flush=True)
            else:
                sys.exit("%s: unknown command %r" % (name, words[0]))
