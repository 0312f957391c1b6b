/*
 * bench_bert.c - the core's BERT encoder against PyTorch and against this
 * machine's own cblas_sgemm, in the same run.
 *
 *   bench_bert DIR [--rounds R] [--json FILE]
 *
 * DIR holds a bert-base-sized F32 checkpoint (make bench writes one with
 * tests/models/generate.py --bert-base). For 128 and 512 wordpieces, every
 * layer's attention returned, each round times, one after the other: a
 * 2048^3 cblas_sgemm on all cores (the ceiling, as bench_attention.c
 * measures it), xf_plan() and xf_forward() on a team of one thread per core
 * with single-threaded OpenBLAS (the core's threading policy), and the same
 * network in PyTorch (tests/bench/bert_torch.py, run by Debian's
 * /usr/bin/python3 and kept alive across rounds) on 1 and on 2 threads.
 * Interleaving the rounds makes a busy neighbour on a shared machine slow
 * every side alike; each side is timed on its second run in a row, and
 * PyTorch's process is stopped while the others run. It reports medians:
 * attnd's speed over PyTorch's best thread count, and the matrix products
 * attnd computes per second as a fraction of the sgemm ceiling (the
 * encoder's 8NH^2 + 4NHI + 4N^2H per layer, less what the last layer
 * does after its weights: nothing reads it when no hidden state is
 * returned). Before timing it checks that both sides compute the same
 * network: the last hidden states agree within 1e-3. What it shares with
 * bench_decoder.c is in bench_torch.c.
 */
#include "bench_clock.h"
#include "bench_torch.h"
#include "model/model.h"

#include <cblas.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TORCH_SCRIPT "tests/bench/bert_torch.py"

/* --------------------------------------------------------------- main */

struct result {
    size_t n;
    /* the network's products, and those attnd computes: without hidden
     * states returned it skips the last layer's feed-forward products and
     * its attention's P V and output projection, which nothing reads */
    double matmul_gflop, attnd_gflop, attnd_ms, torch1_ms, torch2_ms, ceiling;
};

int main(int argc, char **argv)
{
    const char *dir = NULL, *json_path = NULL;
    int rounds = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = (int)strtol(argv[++i], NULL, 10);
        else if (!dir && argv[i][0] != '-')
            dir = argv[i];
        else {
            fprintf(stderr, "usage: %s DIR [--rounds R] [--json FILE]\n",
                    argv[0]);
            return 2;
        }
    }
    if (!dir || rounds < 1 || rounds > BENCH_MAX_ROUNDS) {
        fprintf(stderr, "usage: %s DIR [--rounds R (1-64)] [--json FILE]\n",
                argv[0]);
        return 2;
    }
    attn_blas_single_thread();
    char err[1024];
    struct model *model = NULL;
    if (!model_load("bench", dir, &model, err, sizeof err)) {
        fprintf(stderr, "bench_bert: %s\n", err);
        return 1;
    }
    const struct xf_model *m = &model->xf;
    struct torch torch = {0};
    signal(SIGPIPE, SIG_IGN);
    if (!torch_start(&torch, TORCH_SCRIPT, dir)) {
        fprintf(stderr, "bench_bert: %s %s did not start (python3-torch?)\n",
                BENCH_PYTHON, TORCH_SCRIPT);
        return 1;
    }
    struct sgemm_ctx sg;
    if (!ceiling_init(&sg))
        return 1;
    print_setup(rounds);
    printf("encoder: %zu layers, hidden %zu, %zu heads, intermediate %zu, "
           "every layer's attention returned\n",
           m->layers, m->hidden, m->heads, m->intermediate);

    const size_t lengths[] = {128, 512};
    enum { N_LENGTHS = 2 };
    struct result res[N_LENGTHS];
    uint32_t *ids = malloc(512 * sizeof *ids);
    for (int k = 0; k < N_LENGTHS; k++) {
        const size_t n = lengths[k];
        bench_ids(ids, n, m->vocab_size);
        const double diff = same_network(m, &torch, ids, n);
        if (diff < 0 || diff > 1e-3) {
            fprintf(stderr,
                    "bench_bert: attnd and PyTorch disagree on N=%zu (largest "
                    "difference of the last hidden states %g)\n",
                    n, diff);
            return 1;
        }
        printf("N=%zu: the last hidden states agree within %.2g\n", n, diff);
        struct timing tm;
        if (!time_rounds(m, &torch, &sg, ids, n, rounds, &tm)) {
            fprintf(stderr, "bench_bert: a run failed\n");
            return 1;
        }
        const double H = (double)m->hidden, J = (double)m->intermediate;
        const double nn = (double)n;
        res[k] = (struct result){
            .n = n,
            .matmul_gflop =
                (double)m->layers *
                (8 * nn * H * H + 4 * nn * H * J + 4 * nn * nn * H) * 1e-9,
            .attnd_gflop =
                ((double)m->layers *
                     (8 * nn * H * H + 4 * nn * H * J + 4 * nn * nn * H) -
                 (4 * nn * H * J + 2 * nn * nn * H + 2 * nn * H * H)) *
                1e-9,
            .attnd_ms = tm.attnd_ms,
            .torch1_ms = tm.torch1_ms,
            .torch2_ms = tm.torch2_ms,
            .ceiling = tm.ceiling_gflops,
        };
    }
    printf("%5s %8s %8s | %10s %10s %10s | %8s | %9s %9s %9s\n", "N", "GFLOP",
           "attnd's", "attnd ms", "torch1 ms", "torch2 ms", "speedup",
           "attnd GF/s", "sgemm GF/s", "fraction");
    for (int k = 0; k < N_LENGTHS; k++) {
        const struct result *r = &res[k];
        const double best =
            r->torch1_ms < r->torch2_ms ? r->torch1_ms : r->torch2_ms;
        const double gfs = r->attnd_gflop / (r->attnd_ms * 1e-3);
        printf("%5zu %8.2f %8.2f | %10.1f %10.1f %10.1f | %7.2fx | %9.1f "
               "%9.1f %9.2f\n",
               r->n, r->matmul_gflop, r->attnd_gflop, r->attnd_ms, r->torch1_ms,
               r->torch2_ms, best / r->attnd_ms, gfs, r->ceiling,
               gfs / r->ceiling);
    }
    printf("targets: >= 1.5x PyTorch's best thread count, >= 0.70 of the "
           "sgemm ceiling\n");
    if (json_path) {
        FILE *fp = fopen(json_path, "w");
        if (!fp) {
            fprintf(stderr, "bench_bert: %s: %s\n", json_path, strerror(errno));
            return 1;
        }
        fprintf(fp,
                "{\"corename\": \"%s\", \"cores\": %u, \"rounds\": %d, "
                "\"cases\": [",
                openblas_get_corename(), cores(), rounds);
        for (int k = 0; k < N_LENGTHS; k++) {
            const struct result *r = &res[k];
            const double best =
                r->torch1_ms < r->torch2_ms ? r->torch1_ms : r->torch2_ms;
            const double gfs = r->attnd_gflop / (r->attnd_ms * 1e-3);
            fprintf(fp,
                    "%s\n  {\"n\": %zu, \"matmul_gflop\": %.4f, "
                    "\"attnd_gflop\": %.4f, "
                    "\"attnd_ms\": %.3f, \"torch_1_thread_ms\": %.3f, "
                    "\"torch_2_threads_ms\": %.3f, \"speedup\": %.3f, "
                    "\"attnd_gflops\": %.2f, \"sgemm_gflops\": %.2f, "
                    "\"fraction_of_sgemm\": %.4f}",
                    k ? "," : "", r->n, r->matmul_gflop, r->attnd_gflop,
                    r->attnd_ms, r->torch1_ms, r->torch2_ms, best / r->attnd_ms,
                    gfs, r->ceiling, gfs / r->ceiling);
        }
        fprintf(fp, "\n]}\n");
        fclose(fp);
    }
    torch_stop(&torch);
    free(ids);
    ceiling_free(&sg);
    model_free(model);
    return 0;
}
