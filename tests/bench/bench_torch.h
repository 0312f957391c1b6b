/*
 * bench_torch.h - what the benchmarks of a loaded checkpoint against
 * PyTorch share (bench_bert.c, bench_decoder.c, bench_gemma.c): the sgemm
 * ceiling, the PyTorch process that runs the same network over the same
 * file, attnd's pass, the check that both compute the same network, and
 * the interleaved rounds that time all three.
 *
 * The protocol: each round times, one after the other, a CEILING_SIZE^3
 * cblas_sgemm on all cores (the ceiling, as bench_attention.c measures
 * it), xf_plan() and xf_forward_again() (into a result kept from run to
 * run) on a team of one thread per core with single-threaded OpenBLAS
 * (the core's threading policy), and the network in PyTorch on 1 and on
 * 2 threads. Interleaving the rounds makes a busy
 * neighbour on a shared machine slow every side alike; each side is timed
 * on its second run in a row (the first wakes its threads and brings the
 * clocks up), and PyTorch's process is stopped while the others run.
 */
#ifndef ATTND_BENCH_TORCH_H
#define ATTND_BENCH_TORCH_H

#include "transformer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define CEILING_SIZE 2048
#define BENCH_PYTHON "/usr/bin/python3"
#define BENCH_MAX_ROUNDS 64

/* ------------------------------------------------------------ ceiling */

struct sgemm_ctx {
    float *a, *b, *c;
    int n;
};

/* Three CEILING_SIZE^2 matrices, filled; false when out of memory. */
bool ceiling_init(struct sgemm_ctx *s);
/* Seconds of one CEILING_SIZE^3 sgemm with OpenBLAS on every core; then
 * OpenBLAS is single-threaded again and its workers asleep. */
double ceiling_once(struct sgemm_ctx *s);
void ceiling_free(struct sgemm_ctx *s);

/* -------------------------------------------------------------- torch */

/* A PyTorch script (bert_torch.py, llama_torch.py, gemma_torch.py) over
 * one checkpoint, kept alive and stopped (SIGSTOP) but while it answers.
 * Its protocol (torch_protocol.py): it prints one line ("torch VERSION")
 * when loaded, then answers "run N THREADS" with the seconds of the
 * second of two passes and "dump N PATH" with "ok" once the last hidden
 * states [N][hidden] are in PATH as float32; a path of N uint32 token ids
 * after either replaces the bench's ids (bench_ids()). */
struct torch {
    pid_t pid;
    FILE *to, *from;
};

bool torch_start(struct torch *t, const char *script, const char *dir);
/* Send a command; its one-line answer into line. */
bool torch_ask(struct torch *t, const char *cmd, char *line, size_t len);
/* Seconds of the second of two passes over n tokens on threads threads;
 * -1 on failure. */
double torch_run(struct torch *t, size_t n, int threads);
/* A greedy decoding loop with a KV cache (a decoder's script): prompt
 * tokens, then tokens more on threads threads; the seconds to the first
 * token and the median of the others'. false on failure. */
bool torch_decode(struct torch *t, size_t prompt, size_t tokens, int threads,
                  double *first, double *per_token);
void torch_stop(struct torch *t);

/* -------------------------------------------------------------- attnd */

/* The benchmarks' tokens, the scripts' too: id (7 i + 1000) % vocab. */
void bench_ids(uint32_t *ids, size_t n, size_t vocab);

/* Seconds of xf_plan() and xf_forward_again() over ids on a team of one
 * thread per core, into *kept: the result of the caller's earlier runs
 * (or zeroed), whose memory the pass refills and where it leaves its
 * result, as a caller running passes of one size back to back would
 * (and as ONNX Runtime's arena and PyTorch's allocators keep theirs).
 * The caller frees it with xf_result_free(). -1 on failure. */
double attnd_run(const struct xf_model *m, const uint32_t *ids, size_t n,
                 unsigned want, struct xf_result *kept);

/* Both sides compute the same network: the largest difference of the
 * last hidden states over ids[0..n), or -1 when one side failed. */
double same_network(const struct xf_model *m, struct torch *t,
                    const uint32_t *ids, size_t n);

/* A decoder's products at n tokens, GFLOP: the network's, as PyTorch
 * computes them (q, k, v and the output projection, the feed-forward, and
 * QK^T and PV over every pair), and attnd's (the causal triangle only:
 * N(N+1)/2 pairs a head; the last layer stops after its weights, since
 * nothing reads its PV, output projection or feed-forward when no hidden
 * state is returned). */
void decoder_products(const struct xf_model *m, size_t n, double *net,
                      double *attnd);

/* ------------------------------------------------------------- rounds */

/* Medians of the rounds at one length. */
struct timing {
    double attnd_ms, torch1_ms, torch2_ms;
    double ceiling_gflops; /* the sgemm's, in the same rounds */
};

/* rounds interleaved rounds over ids[0..n), every layer's attention
 * weights returned; false when a run failed. */
bool time_rounds(const struct xf_model *m, struct torch *t,
                 struct sgemm_ctx *sg, const uint32_t *ids, size_t n,
                 int rounds, struct timing *out);

/* PyTorch's best thread count's milliseconds. */
double torch_best_ms(const struct timing *t);

/* The OpenBLAS core type, the cores and the protocol, on one line. */
void print_setup(int rounds);

#endif
