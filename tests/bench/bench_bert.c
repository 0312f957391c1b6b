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
 * network: the last hidden states agree within 1e-3.
 */
#include "bench_clock.h"
#include "transformer.h"
#include "model/model.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CEILING_SIZE 2048
#define TORCH_SCRIPT "tests/bench/bert_torch.py"
#define PYTHON "/usr/bin/python3"

/* ------------------------------------------------------------ ceiling */

struct sgemm_ctx {
    float *a, *b, *c;
    int n;
};

/* Seconds of one CEILING_SIZE^3 sgemm with OpenBLAS on every core. */
static double ceiling_once(struct sgemm_ctx *s)
{
    openblas_set_num_threads((int)cores());
    const double t0 = now_seconds();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->n, s->n, s->n, 1.0f,
                s->a, s->n, s->b, s->n, 0.0f, s->c, s->n);
    const double t = now_seconds() - t0;
    attn_blas_single_thread();
    /* OpenBLAS's workers spin for a while after a threaded call; let them
     * sleep before the next pass is timed */
    nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 300000000}, NULL);
    return t;
}

/* -------------------------------------------------------------- torch */

struct torch {
    pid_t pid;
    FILE *to, *from;
};

static bool torch_start(struct torch *t, const char *dir)
{
    int in[2], out[2];
    if (pipe(in) || pipe(out))
        return false;
    t->pid = fork();
    if (t->pid < 0)
        return false;
    if (t->pid == 0) {
        dup2(in[0], STDIN_FILENO);
        dup2(out[1], STDOUT_FILENO);
        close(in[1]);
        close(out[0]);
        execl(PYTHON, PYTHON, TORCH_SCRIPT, dir, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    t->to = fdopen(in[1], "w");
    t->from = fdopen(out[0], "r");
    char line[256];
    if (!t->to || !t->from || !fgets(line, sizeof line, t->from))
        return false;
    printf("reference: %s", line);
    kill(t->pid, SIGSTOP); /* until it is asked (torch_ask) */
    return true;
}

/* Send a command; its one-line answer into line. The script runs only
 * while it answers: PyTorch's idle pools (OpenMP's, and the system
 * OpenBLAS's, whose threads spin for tens of milliseconds after each
 * product) would otherwise take CPU from whatever is timed next. */
static bool torch_ask(struct torch *t, const char *cmd, char *line, size_t len)
{
    kill(t->pid, SIGCONT);
    fprintf(t->to, "%s\n", cmd);
    fflush(t->to);
    const bool answered = fgets(line, (int)len, t->from) != NULL;
    kill(t->pid, SIGSTOP);
    return answered;
}

static double torch_run(struct torch *t, size_t n, int threads)
{
    char cmd[64], line[128];
    snprintf(cmd, sizeof cmd, "run %zu %d", n, threads);
    if (!torch_ask(t, cmd, line, sizeof line))
        return -1.0;
    return strtod(line, NULL);
}

static void torch_stop(struct torch *t)
{
    if (t->pid > 0)
        kill(t->pid, SIGCONT);
    if (t->to)
        fclose(t->to); /* end of input: the script exits */
    if (t->from)
        fclose(t->from);
    if (t->pid > 0)
        waitpid(t->pid, NULL, 0);
}

/* -------------------------------------------------------------- attnd */

static void bench_ids(uint32_t *ids, size_t n, size_t vocab)
{
    for (size_t i = 0; i < n; i++)
        ids[i] = (uint32_t)((7 * i + 1000) % vocab);
}

static double attnd_run(const struct xf_model *m, const uint32_t *ids, size_t n,
                        unsigned want, float **hidden_copy)
{
    const struct xf_run run = {.ids = ids,
                               .n = n,
                               .want = want,
                               .layer = XF_ALL_LAYERS,
                               .threads = cores()};
    struct xf_result r;
    struct attn_error err;
    const double t0 = now_seconds();
    struct xf_plan plan;
    attn_status st = xf_plan(m, &run, &plan, &err);
    if (st == ATTN_OK)
        st = xf_forward(&plan, NULL, &r, &err);
    const double t = now_seconds() - t0;
    if (st != ATTN_OK) {
        fprintf(stderr, "bench_bert: %s\n", err.message);
        return -1.0;
    }
    if (hidden_copy) { /* the last layer's hidden states */
        const size_t H = m->hidden;
        *hidden_copy = malloc(n * H * sizeof(float));
        if (*hidden_copy)
            memcpy(*hidden_copy, r.hidden_states + m->layers * n * H,
                   n * H * sizeof(float));
    }
    xf_result_free(&r);
    return t;
}

/* Both sides compute the same network: the largest difference of the
 * last hidden states over n wordpieces, or -1. */
static double same_network(const struct xf_model *m, struct torch *t,
                           const uint32_t *ids, size_t n)
{
    char path[] = "/tmp/bench-bert-XXXXXX", cmd[128], line[64];
    const int fd = mkstemp(path);
    if (fd < 0)
        return -1.0;
    close(fd);
    snprintf(cmd, sizeof cmd, "dump %zu %s", n, path);
    float *mine = NULL;
    double worst = -1.0;
    if (torch_ask(t, cmd, line, sizeof line) &&
        attnd_run(m, ids, n, XF_WANT_HIDDEN, &mine) >= 0 && mine) {
        const size_t count = n * m->hidden;
        float *theirs = malloc(count * sizeof *theirs);
        FILE *f = fopen(path, "rb");
        if (theirs && f && fread(theirs, sizeof *theirs, count, f) == count) {
            worst = 0.0;
            for (size_t i = 0; i < count; i++) {
                const double d = fabs((double)mine[i] - (double)theirs[i]);
                if (!(d <= worst))
                    worst = d;
            }
        }
        if (f)
            fclose(f);
        free(theirs);
    }
    free(mine);
    remove(path);
    return worst;
}

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
    if (!dir || rounds < 1 || rounds > 64) {
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
    if (!torch_start(&torch, dir)) {
        fprintf(stderr, "bench_bert: %s %s did not start (python3-torch?)\n",
                PYTHON, TORCH_SCRIPT);
        return 1;
    }
    struct sgemm_ctx sg = {.n = CEILING_SIZE};
    const size_t sq = (size_t)CEILING_SIZE * CEILING_SIZE;
    sg.a = malloc(sq * sizeof(float));
    sg.b = malloc(sq * sizeof(float));
    sg.c = malloc(sq * sizeof(float));
    if (!sg.a || !sg.b || !sg.c)
        return 1;
    for (size_t i = 0; i < sq; i++) {
        sg.a[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
        sg.b[i] = (float)((i * 53) % 97) / 97.0f - 0.5f;
    }
    const char *core_env = getenv("OPENBLAS_CORETYPE");
    printf("OpenBLAS core: %s (OPENBLAS_CORETYPE=%s), %u cores; attnd: a team "
           "of %u threads with 1 BLAS thread each; PyTorch on 1 and 2 "
           "threads; %d interleaved rounds, medians\n",
           openblas_get_corename(), core_env ? core_env : "unset", cores(),
           cores(), rounds);
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
        /* Each side is timed on its second run in a row: the first wakes
         * its threads and brings the clocks up (a core left idle for even
         * a few hundred milliseconds runs the next 100 ms markedly slower
         * here), and outlasts the spinning of the previous side's idle
         * OpenBLAS threads. bert_torch.py does the same for PyTorch. */
        double ce[64], at[64], t1[64], t2[64];
        for (int r = 0; r < rounds; r++) {
            ceiling_once(&sg);
            ce[r] = ceiling_once(&sg);
            attnd_run(m, ids, n, XF_WANT_WEIGHTS, NULL);
            at[r] = attnd_run(m, ids, n, XF_WANT_WEIGHTS, NULL);
            t1[r] = torch_run(&torch, n, 1);
            t2[r] = torch_run(&torch, n, 2);
            if (at[r] < 0 || t1[r] < 0 || t2[r] < 0) {
                fprintf(stderr, "bench_bert: a run failed\n");
                return 1;
            }
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
            .attnd_ms = 1e3 * median(at, (size_t)rounds),
            .torch1_ms = 1e3 * median(t1, (size_t)rounds),
            .torch2_ms = 1e3 * median(t2, (size_t)rounds),
            .ceiling = 2.0 * CEILING_SIZE * CEILING_SIZE * CEILING_SIZE /
                       median(ce, (size_t)rounds) * 1e-9,
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
    free(sg.a);
    free(sg.b);
    free(sg.c);
    model_free(model);
    return 0;
}
