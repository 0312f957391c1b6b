"""The stdin protocol every PyTorch side of a benchmark speaks
(bert_torch.py, llama_torch.py): it prints "torch VERSION", then reads
commands, one a line, and answers each on stdout:

    run N THREADS   two forward passes over N tokens on THREADS threads
                    (torch.set_num_threads); prints the second's seconds
    dump N PATH     the last hidden states [N][hidden] as float32 into
                    PATH, for the bench to check that both sides compute
                    the same network; prints "ok"
    decode N K THREADS  (a decoder's) a greedy decoding loop with a KV
                    cache: N prompt tokens, then K more; prints the
                    seconds to the first token and the median of the
                    others' (after one loop to warm up)

The tokens are the bench's: id (7 * i + 1000) % vocab at position i.
"""
import sys
import time

import torch


def serve(name, network, vocab):
    """Answers the commands on stdin with network.forward(ids), which
    returns (attentions, last hidden states)."""
    print("torch %s" % torch.__version__, flush=True)
    with torch.inference_mode():
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            n = int(words[1])
            ids = torch.tensor([(7 * i + 1000) % vocab for i in range(n)])
            if words[0] == "run":
                torch.set_num_threads(int(words[2]))
                # timed on the second pass in a row, as the bench times
                # attnd: the first wakes the pools and the clocks
                network.forward(ids)
                t0 = time.perf_counter()
                attentions, x = network.forward(ids)
                seconds = time.perf_counter() - t0
                del attentions, x
                print("%.9f" % seconds, flush=True)
            elif words[0] == "decode" and hasattr(network, "decode"):
                torch.set_num_threads(int(words[3]))
                network.decode(ids, 2)
                first, per = network.decode(ids, int(words[2]))
                print("%.9f %.9f" % (first, per), flush=True)
            elif words[0] == "dump":
                _, x = network.forward(ids)
                x.numpy().astype("<f4").tofile(words[2])
                print("ok", flush=True)
            else:
                sys.exit("%s: unknown command %r" % (name, words[0]))
