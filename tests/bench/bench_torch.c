/*
 * bench_torch.c - the parts bench_bert.c, bench_decoder.c and bench_gemma.c
 * share (bench_torch.h).
 */
#include "bench_torch.h"

#include "bench_clock.h"

#include <cblas.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ ceiling */

bool ceiling_init(struct sgemm_ctx *s)
{
    s->n = CEILING_SIZE;
    const size_t sq = (size_t)CEILING_SIZE * CEILING_SIZE;
    s->a = malloc(sq * sizeof(float));
    s->b = malloc(sq * sizeof(float));
    s->c = malloc(sq * sizeof(float));
    if (!s->a || !s->b || !s->c) {
        ceiling_free(s);
        return false;
    }
    for (size_t i = 0; i < sq; i++) {
        s->a[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
        s->b[i] = (float)((i * 53) % 97) / 97.0f - 0.5f;
    }
    return true;
}

double ceiling_once(struct sgemm_ctx *s)
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

void ceiling_free(struct sgemm_ctx *s)
{
    free(s->a);
    free(s->b);
    free(s->c);
    s->a = s->b = s->c = NULL;
}

/* -------------------------------------------------------------- torch */

bool torch_start(struct torch *t, const char *script, const char *dir)
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
        execl(BENCH_PYTHON, BENCH_PYTHON, script, dir, (char *)NULL);
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

/* The script runs only while it answers: PyTorch's idle pools (OpenMP's,
 * and the system OpenBLAS's, whose threads spin for tens of milliseconds
 * after each product) would otherwise take CPU from whatever is timed
 * next. */
bool torch_ask(struct torch *t, const char *cmd, char *line, size_t len)
{
    kill(t->pid, SIGCONT);
    fprintf(t->to, "%s\n", cmd);
    fflush(t->to);
    const bool answered = fgets(line, (int)len, t->from) != NULL;
    kill(t->pid, SIGSTOP);
    return answered;
}

double torch_run(struct torch *t, size_t n, int threads)
{
    char cmd[64], line[128];
    snprintf(cmd, sizeof cmd, "run %zu %d", n, threads);
    if (!torch_ask(t, cmd, line, sizeof line))
        return -1.0;
    return strtod(line, NULL);
}

bool torch_decode(struct torch *t, size_t prompt, size_t tokens, int threads,
                  double *first, double *per_token)
{
    char cmd[64], line[128];
    snprintf(cmd, sizeof cmd, "decode %zu %zu %d", prompt, tokens, threads);
    return torch_ask(t, cmd, line, sizeof line) &&
           sscanf(line, "%lf %lf", first, per_token) == 2;
}

void torch_stop(struct torch *t)
{
    if (t->pid > 0)
        kill(t->pid, SIGCONT);
    if (t->to)
        fclose(t->to); /* end of input: the script exits */
    if (t->from)
        fclose(t->from);
    if (t->pid > 0)
        waitpid(t->pid, NULL, 0);
    *t = (struct torch){0};
}

/* -------------------------------------------------------------- attnd */

void bench_ids(uint32_t *ids, size_t n, size_t vocab)
{
    for (size_t i = 0; i < n; i++)
        ids[i] = (uint32_t)((7 * i + 1000) % vocab);
}

double attnd_run(const struct xf_model *m, const uint32_t *ids, size_t n,
                 unsigned want, struct xf_result *kept)
{
    const struct xf_run run = {.ids = ids,
                               .n = n,
                               .want = want,
                               .layer = XF_ALL_LAYERS,
                               .threads = cores()};
    struct attn_error err;
    const double t0 = now_seconds();
    struct xf_plan plan;
    attn_status st = xf_plan(m, &run, &plan, &err);
    if (st == ATTN_OK)
        st = xf_forward_again(&plan, NULL, kept, &err);
    const double t = now_seconds() - t0;
    if (st != ATTN_OK) {
        fprintf(stderr, "attnd's pass: %s\n", err.message);
        return -1.0;
    }
    return t;
}

double same_network(const struct xf_model *m, struct torch *t,
                    const uint32_t *ids, size_t n)
{
    char path[] = "/tmp/bench-torch-XXXXXX", cmd[128], line[64];
    const int fd = mkstemp(path);
    if (fd < 0)
        return -1.0;
    close(fd);
    snprintf(cmd, sizeof cmd, "dump %zu %s", n, path);
    struct xf_result r = {0};
    double worst = -1.0;
    if (torch_ask(t, cmd, line, sizeof line) &&
        attnd_run(m, ids, n, XF_WANT_HIDDEN, &r) >= 0) {
        /* the last layer's hidden states */
        const float *mine = r.hidden_states + m->layers * n * m->hidden;
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
    xf_result_free(&r);
    remove(path);
    return worst;
}

void decoder_products(const struct xf_model *m, size_t n, double *net,
                      double *attnd)
{
    const double N = (double)n, H = (double)m->hidden,
                 J = (double)m->intermediate, L = (double)m->layers;
    const double hD = (double)(m->heads * m->head_dim),
                 gD = (double)(m->kv_heads * m->head_dim);
    const double qkv = 2 * N * H * (hD + 2 * gD), o = 2 * N * hD * H;
    const double ffn = (m->arch.ffn == XF_FFN_GATED ? 6.0 : 4.0) * N * H * J;
    const double half = hD * N * (N + 1); /* QK^T or PV, causal */
    *net = L * (qkv + o + ffn + 4 * N * N * hD) * 1e-9;
    *attnd = (L * (qkv + half) + (L - 1) * (half + o + ffn)) * 1e-9;
}

/* ------------------------------------------------------------- rounds */

bool time_rounds(const struct xf_model *m, struct torch *t,
                 struct sgemm_ctx *sg, const uint32_t *ids, size_t n,
                 int rounds, struct timing *out)
{
    double ce[BENCH_MAX_ROUNDS], at[BENCH_MAX_ROUNDS], t1[BENCH_MAX_ROUNDS],
        t2[BENCH_MAX_ROUNDS];
    if (rounds < 1 || rounds > BENCH_MAX_ROUNDS)
        return false;
    struct xf_result kept = {0};
    for (int r = 0; r < rounds; r++) {
        /* each side timed on its second run in a row: the first wakes its
         * threads and brings the clocks up (a core left idle for even a few
         * hundred milliseconds runs the next 100 ms markedly slower here),
         * and outlasts the spinning of the previous side's idle OpenBLAS
         * threads; the scripts do the same for PyTorch */
        ceiling_once(sg);
        ce[r] = ceiling_once(sg);
        attnd_run(m, ids, n, XF_WANT_WEIGHTS, &kept);
        at[r] = attnd_run(m, ids, n, XF_WANT_WEIGHTS, &kept);
        t1[r] = torch_run(t, n, 1);
        t2[r] = torch_run(t, n, 2);
        if (at[r] < 0 || t1[r] < 0 || t2[r] < 0) {
            xf_result_free(&kept);
            return false;
        }
    }
    xf_result_free(&kept);
    out->attnd_ms = 1e3 * median(at, (size_t)rounds);
    out->torch1_ms = 1e3 * median(t1, (size_t)rounds);
    out->torch2_ms = 1e3 * median(t2, (size_t)rounds);
    out->ceiling_gflops = 2.0 * CEILING_SIZE * CEILING_SIZE * CEILING_SIZE /
                          median(ce, (size_t)rounds) * 1e-9;
    return true;
}

double torch_best_ms(const struct timing *t)
{
    return t->torch1_ms < t->torch2_ms ? t->torch1_ms : t->torch2_ms;
}

void print_setup(int rounds)
{
    const char *core_env = getenv("OPENBLAS_CORETYPE");
    printf("OpenBLAS core: %s (OPENBLAS_CORETYPE=%s), %u cores; attnd: a team "
           "of %u threads with 1 BLAS thread each; PyTorch on 1 and 2 "
           "threads; %d interleaved rounds, medians\n",
           openblas_get_corename(), core_env ? core_env : "unset", cores(),
           cores(), rounds);
}
