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
 * measures it), xf_plan() and xf_forward_again() (into a result kept from
 * run to run, attnd_run()) on a team of one thread per core with
 * single-threaded OpenBLAS (the core's threading policy), and the same
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
 *
 * ONNX Runtime is a third side, when DIR holds bert_onnx.py's two exports
 * of the same network (encoder.onnx: the last hidden states;
 * encoder-attn.onnx: those and every layer's attention) and
 * onnxruntime-node is installed in tests/bench/ort: each export is run by
 * its own Node.js child (tests/bench/ort/bert_ort.mjs: the CPU execution
 * provider, ORT_ENABLE_ALL, 2 intra-op threads, 1 inter-op), with
 * PyTorch's protocol and stopped as PyTorch is. The same rounds then also
 * time attnd returning what each export returns (the hidden states, with
 * and without every layer's attention) and each export once; before them,
 * ORT's last hidden states (and attention) must agree with attnd's
 * within 1e-3 (1e-4). Without them, or with --no-ort, one line says that
 * ONNX Runtime is skipped and the rest runs as before.
 */
#include "bench_clock.h"
#include "bench_torch.h"
#include "model/model.h"

#include <cblas.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TORCH_SCRIPT "tests/bench/bert_torch.py"
#define ORT_DIR "tests/bench/ort"
#define ORT_SCRIPT ORT_DIR "/bert_ort.mjs"
#define ORT_THREADS 2 /* bert_ort.mjs's intra-op threads */
#define HIDDEN_TOLERANCE 1e-3
#define WEIGHTS_TOLERANCE 1e-4

/* ------------------------------------------------------ ONNX Runtime */

/* ONNX Runtime's two sessions, each in its own Node.js child speaking
 * PyTorch's protocol (struct torch): [ORT_HIDDEN] encoder.onnx, the last
 * hidden states; [ORT_ATTN] encoder-attn.onnx, those and every layer's
 * attention. */
enum { ORT_HIDDEN, ORT_ATTN, ORT_SESSIONS };

/* Starts node ORT_SCRIPT MODEL; false, with why in why, when MODEL or
 * onnxruntime-node is missing or the child does not say it loaded. */
static bool ort_start(struct torch *t, const char *model, char *why, size_t len)
{
    *t = (struct torch){0};
    if (access(model, R_OK)) {
        snprintf(why, len,
                 "no %s (/usr/bin/python3 tests/bench/bert_onnx.py DIR "
                 "writes it)",
                 model);
        return false;
    }
    if (access(ORT_DIR "/node_modules/onnxruntime-node/package.json", R_OK)) {
        snprintf(why, len,
                 "onnxruntime-node is not installed (cd " ORT_DIR
                 " && npm ci --ignore-scripts)");
        return false;
    }
    int in[2], out[2];
    if (pipe(in))
        return snprintf(why, len, "pipe: %s", strerror(errno)), false;
    if (pipe(out)) {
        close(in[0]);
        close(in[1]);
        return snprintf(why, len, "pipe: %s", strerror(errno)), false;
    }
    t->pid = fork();
    if (t->pid == 0) {
        dup2(in[0], STDIN_FILENO);
        dup2(out[1], STDOUT_FILENO);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execlp("node", "node", ORT_SCRIPT, model, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    /* the next child must not hold this one's stdin open, or closing it
     * would not end this one */
    fcntl(in[1], F_SETFD, FD_CLOEXEC);
    fcntl(out[0], F_SETFD, FD_CLOEXEC);
    if (t->pid < 0) {
        close(in[1]);
        close(out[0]);
        *t = (struct torch){0};
        return snprintf(why, len, "fork: %s", strerror(errno)), false;
    }
    t->to = fdopen(in[1], "w");
    t->from = fdopen(out[0], "r");
    char line[256];
    if (!t->to || !t->from || !fgets(line, sizeof line, t->from)) {
        torch_stop(t);
        snprintf(why, len,
                 "node " ORT_SCRIPT " %s did not start (Node.js, or its "
                 "message above)",
                 model);
        return false;
    }
    printf("ONNX Runtime: %s", line);
    kill(t->pid, SIGSTOP); /* until it is asked (torch_ask) */
    return true;
}

/* The largest difference between every layer's attention weights
 * [layers][heads][n][n] of attnd and of the session, or -1 when one side
 * failed. */
static double same_weights(const struct xf_model *m, struct torch *t,
                           const uint32_t *ids, size_t n)
{
    char path[] = "/tmp/bench-ort-XXXXXX", cmd[128], line[64];
    const int fd = mkstemp(path);
    if (fd < 0)
        return -1.0;
    close(fd);
    snprintf(cmd, sizeof cmd, "attn %zu %s", n, path);
    double worst = -1.0;
    const struct xf_run run = {.ids = ids,
                               .n = n,
                               .want = XF_WANT_WEIGHTS,
                               .layer = XF_ALL_LAYERS,
                               .threads = cores()};
    struct xf_plan plan;
    struct xf_result r;
    struct attn_error err;
    if (torch_ask(t, cmd, line, sizeof line) && !strncmp(line, "ok", 2) &&
        xf_plan(m, &run, &plan, &err) == ATTN_OK &&
        xf_forward(&plan, NULL, &r, &err) == ATTN_OK) {
        const size_t count = m->layers * m->heads * n * n;
        float *theirs = malloc(count * sizeof *theirs);
        FILE *f = fopen(path, "rb");
        if (theirs && f && fread(theirs, sizeof *theirs, count, f) == count) {
            worst = 0.0;
            for (size_t i = 0; i < count; i++) {
                const double d = fabs((double)r.weights[i] - (double)theirs[i]);
                if (!(d <= worst))
                    worst = d;
            }
        }
        if (f)
            fclose(f);
        free(theirs);
        xf_result_free(&r);
    }
    remove(path);
    return worst;
}

/* ------------------------------------------------------------- rounds */

/* Medians of the rounds at one length, milliseconds. */
struct timing_ort {
    struct timing torch; /* the ceiling, attnd with weights, PyTorch */
    /* attnd returning what each ONNX export returns, and ORT on each */
    double attnd_ms[ORT_SESSIONS], ort_ms[ORT_SESSIONS];
};

/* What attnd returns beside each session: the hidden states, and those
 * and every layer's weights. */
static const unsigned ort_want[ORT_SESSIONS] = {
    XF_WANT_HIDDEN, XF_WANT_HIDDEN | XF_WANT_WEIGHTS};

/* rounds interleaved rounds over ids[0..n): the ceiling, attnd with every
 * layer's weights (the PyTorch comparison's), PyTorch on 1 and 2 threads,
 * and with ort (NULL: none) for each session attnd returning what it
 * returns, then the session; each side timed on its second run in a row
 * (the first wakes its threads and brings the clocks up), as
 * time_rounds() does. false when a run failed. */
static bool bert_rounds(const struct xf_model *m, struct torch *t,
                        struct torch *ort, struct sgemm_ctx *sg,
                        const uint32_t *ids, size_t n, int rounds,
                        struct timing_ort *out)
{
    double ce[BENCH_MAX_ROUNDS], at[BENCH_MAX_ROUNDS], t1[BENCH_MAX_ROUNDS],
        t2[BENCH_MAX_ROUNDS], ao[ORT_SESSIONS][BENCH_MAX_ROUNDS],
        oo[ORT_SESSIONS][BENCH_MAX_ROUNDS];
    if (rounds < 1 || rounds > BENCH_MAX_ROUNDS)
        return false;
    /* each side's result, kept from run to run (attnd_run()) */
    struct xf_result kept[1 + ORT_SESSIONS] = {{0}};
    bool ok = true;
    for (int r = 0; r < rounds && ok; r++) {
        ceiling_once(sg);
        ce[r] = ceiling_once(sg);
        attnd_run(m, ids, n, XF_WANT_WEIGHTS, &kept[0]);
        at[r] = attnd_run(m, ids, n, XF_WANT_WEIGHTS, &kept[0]);
        t1[r] = torch_run(t, n, 1);
        t2[r] = torch_run(t, n, 2);
        ok = at[r] >= 0 && t1[r] >= 0 && t2[r] >= 0;
        for (int s = 0; ok && ort && s < ORT_SESSIONS; s++) {
            attnd_run(m, ids, n, ort_want[s], &kept[1 + s]);
            ao[s][r] = attnd_run(m, ids, n, ort_want[s], &kept[1 + s]);
            oo[s][r] = torch_run(&ort[s], n, ORT_THREADS);
            ok = ao[s][r] >= 0 && oo[s][r] >= 0;
        }
    }
    for (int s = 0; s < 1 + ORT_SESSIONS; s++)
        xf_result_free(&kept[s]);
    if (!ok)
        return false;
    out->torch.attnd_ms = 1e3 * median(at, (size_t)rounds);
    out->torch.torch1_ms = 1e3 * median(t1, (size_t)rounds);
    out->torch.torch2_ms = 1e3 * median(t2, (size_t)rounds);
    out->torch.ceiling_gflops = 2.0 * CEILING_SIZE * CEILING_SIZE *
                                CEILING_SIZE / median(ce, (size_t)rounds) *
                                1e-9;
    for (int s = 0; s < ORT_SESSIONS; s++) {
        out->attnd_ms[s] = ort ? 1e3 * median(ao[s], (size_t)rounds) : 0;
        out->ort_ms[s] = ort ? 1e3 * median(oo[s], (size_t)rounds) : 0;
    }
    return true;
}

/* --------------------------------------------------------------- main */

struct result {
    size_t n;
    /* the network's products, and those attnd computes: without hidden
     * states returned it skips the last layer's feed-forward products and
     * its attention's P V and output projection, which nothing reads */
    double matmul_gflop, attnd_gflop, attnd_ms, torch1_ms, torch2_ms, ceiling;
    /* with ONNX Runtime: the largest differences from attnd's last hidden
     * states (each session) and weights, and the medians */
    double ort_hidden_diff[ORT_SESSIONS], ort_weights_diff;
    double attnd_ort_ms[ORT_SESSIONS], ort_ms[ORT_SESSIONS];
};

int main(int argc, char **argv)
{
    const char *dir = NULL, *json_path = NULL;
    int rounds = 7;
    bool use_ort = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = (int)strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--no-ort"))
            use_ort = false;
        else if (!dir && argv[i][0] != '-')
            dir = argv[i];
        else {
            fprintf(stderr,
                    "usage: %s DIR [--rounds R] [--no-ort] [--json FILE]\n",
                    argv[0]);
            return 2;
        }
    }
    if (!dir || rounds < 1 || rounds > BENCH_MAX_ROUNDS) {
        fprintf(stderr,
                "usage: %s DIR [--rounds R (1-64)] [--no-ort] [--json FILE]\n",
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
    struct torch ort_sessions[ORT_SESSIONS] = {{0}}, *ort = NULL;
    if (use_ort) {
        /* nor PyTorch's, for the same reason */
        fcntl(fileno(torch.to), F_SETFD, FD_CLOEXEC);
        fcntl(fileno(torch.from), F_SETFD, FD_CLOEXEC);
        static const char *const file[ORT_SESSIONS] = {"encoder.onnx",
                                                       "encoder-attn.onnx"};
        bool started = true;
        char why[4096];
        for (int s = 0; s < ORT_SESSIONS && started; s++) {
            char path[2048];
            snprintf(path, sizeof path, "%s/%s", dir, file[s]);
            started = ort_start(&ort_sessions[s], path, why, sizeof why);
        }
        if (started)
            ort = ort_sessions;
        else {
            for (int s = 0; s < ORT_SESSIONS; s++)
                torch_stop(&ort_sessions[s]);
            printf("bench_bert: ONNX Runtime is skipped: %s\n", why);
        }
    }
    struct sgemm_ctx sg;
    if (!ceiling_init(&sg))
        return 1;
    print_setup(rounds);
    if (ort)
        printf("ONNX Runtime: %d intra-op threads, after attnd returning "
               "the same outputs, in the same rounds\n",
               ORT_THREADS);
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
        if (diff < 0 || diff > HIDDEN_TOLERANCE) {
            fprintf(stderr,
                    "bench_bert: attnd and PyTorch disagree on N=%zu (largest "
                    "difference of the last hidden states %g)\n",
                    n, diff);
            return 1;
        }
        printf("N=%zu: the last hidden states agree within %.2g\n", n, diff);
        res[k] = (struct result){.n = n};
        for (int s = 0; ort && s < ORT_SESSIONS; s++) {
            const double d = same_network(m, &ort[s], ids, n);
            res[k].ort_hidden_diff[s] = d;
            if (d < 0 || d > HIDDEN_TOLERANCE) {
                fprintf(stderr,
                        "bench_bert: attnd and ONNX Runtime (session %d) "
                        "disagree on N=%zu (largest difference of the last "
                        "hidden states %g)\n",
                        s, n, d);
                return 1;
            }
        }
        if (ort) {
            const double d = same_weights(m, &ort[ORT_ATTN], ids, n);
            res[k].ort_weights_diff = d;
            if (d < 0 || d > WEIGHTS_TOLERANCE) {
                fprintf(stderr,
                        "bench_bert: attnd and ONNX Runtime disagree on N=%zu "
                        "(largest difference of the attention weights %g)\n",
                        n, d);
                return 1;
            }
            printf("N=%zu: ONNX Runtime's last hidden states agree with "
                   "attnd's within %.2g and %.2g (tolerance %g), its "
                   "attention weights within %.2g (tolerance %g)\n",
                   n, res[k].ort_hidden_diff[ORT_HIDDEN],
                   res[k].ort_hidden_diff[ORT_ATTN], HIDDEN_TOLERANCE, d,
                   WEIGHTS_TOLERANCE);
        }
        fflush(stdout);
        struct timing_ort tm;
        if (!bert_rounds(m, &torch, ort, &sg, ids, n, rounds, &tm)) {
            fprintf(stderr, "bench_bert: a run failed\n");
            return 1;
        }
        const double H = (double)m->hidden, J = (double)m->intermediate;
        const double nn = (double)n;
        struct result *r = &res[k];
        r->matmul_gflop = (double)m->layers *
                          (8 * nn * H * H + 4 * nn * H * J + 4 * nn * nn * H) *
                          1e-9;
        r->attnd_gflop = ((double)m->layers * (8 * nn * H * H + 4 * nn * H * J +
                                               4 * nn * nn * H) -
                          (4 * nn * H * J + 2 * nn * nn * H + 2 * nn * H * H)) *
                         1e-9;
        r->attnd_ms = tm.torch.attnd_ms;
        r->torch1_ms = tm.torch.torch1_ms;
        r->torch2_ms = tm.torch.torch2_ms;
        r->ceiling = tm.torch.ceiling_gflops;
        for (int s = 0; s < ORT_SESSIONS; s++) {
            r->attnd_ort_ms[s] = tm.attnd_ms[s];
            r->ort_ms[s] = tm.ort_ms[s];
        }
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
    if (ort) {
        printf("against ONNX Runtime (OpenBLAS core %s), ms:\n%5s | %14s "
               "%12s %8s | %14s %12s %8s\n",
               openblas_get_corename(), "N", "attnd, attn", "ORT, attn",
               "ratio", "attnd, hidden", "ORT, hidden", "ratio");
        for (int k = 0; k < N_LENGTHS; k++) {
            const struct result *r = &res[k];
            printf("%5zu | %14.1f %12.1f %7.2fx | %14.1f %12.1f %7.2fx\n", r->n,
                   r->attnd_ort_ms[ORT_ATTN], r->ort_ms[ORT_ATTN],
                   r->ort_ms[ORT_ATTN] / r->attnd_ort_ms[ORT_ATTN],
                   r->attnd_ort_ms[ORT_HIDDEN], r->ort_ms[ORT_HIDDEN],
                   r->ort_ms[ORT_HIDDEN] / r->attnd_ort_ms[ORT_HIDDEN]);
        }
        printf("target: attnd >= 1.0x ONNX Runtime's speed (the ratio), "
               "with and without the attention\n");
    }
    if (json_path) {
        FILE *fp = fopen(json_path, "w");
        if (!fp) {
            fprintf(stderr, "bench_bert: %s: %s\n", json_path, strerror(errno));
            return 1;
        }
        fprintf(fp,
                "{\"corename\": \"%s\", \"cores\": %u, \"rounds\": %d, "
                "\"ort\": %s, \"cases\": [",
                openblas_get_corename(), cores(), rounds,
                ort ? "true" : "false");
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
                    "\"fraction_of_sgemm\": %.4f",
                    k ? "," : "", r->n, r->matmul_gflop, r->attnd_gflop,
                    r->attnd_ms, r->torch1_ms, r->torch2_ms, best / r->attnd_ms,
                    gfs, r->ceiling, gfs / r->ceiling);
            if (ort)
                fprintf(fp,
                        ",\n   \"ort\": {\"threads\": %d, "
                        "\"attnd_attn_ms\": %.3f, \"ort_attn_ms\": %.3f, "
                        "\"ratio_attn\": %.3f, \"attnd_hidden_ms\": %.3f, "
                        "\"ort_hidden_ms\": %.3f, \"ratio_hidden\": %.3f, "
                        "\"hidden_diff\": %.3g, \"hidden_diff_attn\": %.3g, "
                        "\"weights_diff\": %.3g}",
                        ORT_THREADS, r->attnd_ort_ms[ORT_ATTN],
                        r->ort_ms[ORT_ATTN],
                        r->ort_ms[ORT_ATTN] / r->attnd_ort_ms[ORT_ATTN],
                        r->attnd_ort_ms[ORT_HIDDEN], r->ort_ms[ORT_HIDDEN],
                        r->ort_ms[ORT_HIDDEN] / r->attnd_ort_ms[ORT_HIDDEN],
                        r->ort_hidden_diff[ORT_HIDDEN],
                        r->ort_hidden_diff[ORT_ATTN], r->ort_weights_diff);
            fprintf(fp, "}");
        }
        fprintf(fp, "\n]}\n");
        fclose(fp);
    }
    for (int s = 0; ort && s < ORT_SESSIONS; s++)
        torch_stop(&ort[s]);
    torch_stop(&torch);
    free(ids);
    ceiling_free(&sg);
    model_free(model);
    return 0;
}
