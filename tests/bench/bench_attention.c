/*
 * bench_attention.c - speed and memory of the attention core, measured
 * against this machine's own cblas_sgemm and against PyTorch's
 * nn.MultiheadAttention in the same run.
 *
 *   bench_attention [--json FILE] [--quick] [--torch SCRIPT | --no-torch]
 *                   [--shape N D_MODEL HEADS] [--rounds R]
 *   bench_attention --rss N D_MODEL HEADS   (one forward; prints peak RSS)
 *
 * For each shape it reports the median time of a forward pass with and
 * without weights, its GFLOP/s, and as the ceiling the GFLOP/s of a 2048^3
 * cblas_sgemm on all cores. The forward pass is given its parameters (drawn
 * once before the rounds), as PyTorch is. Everything is timed in
 * interleaved rounds (one sgemm, one pass without weights, one with, then
 * PyTorch without and with weights at 1 and at 2 threads), so that a busy
 * neighbour on a shared machine slows both sides of each ratio alike;
 * attnd runs untimed for a moment before it is timed (warm_up()), and
 * PyTorch's process is stopped while the others run. PyTorch runs in a child
 * process (SCRIPT, by default tests/bench/mha_torch.py, under Debian's
 * /usr/bin/python3) on the same input and parameters; its time is the better of
 * its medians at 1 and 2 threads, and its output is compared with attnd's once
 * per shape. The forward pass runs its own team of one thread per core with
 * single-threaded OpenBLAS, as the core's threading policy says; the
 * ceiling gives OpenBLAS all the cores. Memory is measured in a fresh
 * process so that nothing else counts.
 */
#include "bench_clock.h"
#include "attention.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CEILING_SIZE 2048

/* Debian's Python, which sees Debian's PyTorch */
#define TORCH_PYTHON "/usr/bin/python3"

static void fill(float *a, size_t n, uint64_t seed)
{
    const uint64_t key = attn_stream_key(seed, "bench", 5);
    for (size_t i = 0; i < n; i++)
        a[i] =
            (float)((double)(attn_stream_draw(key, i) >> 11) * 0x1.0p-53 * 2.0 -
                    1.0);
}

struct sgemm_ctx {
    float *a, *b, *c;
    int n;
};

static double run_sgemm(void *p)
{
    struct sgemm_ctx *s = p;
    const double t0 = now_seconds();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->n, s->n, s->n, 1.0f,
                s->a, s->n, s->b, s->n, 0.0f, s->c, s->n);
    return now_seconds() - t0;
}

struct forward_ctx {
    struct attn_config cfg;
    const float *x;
};

static double run_forward(void *p)
{
    struct forward_ctx *f = p;
    struct attn_result res;
    struct attn_error err;
    const double t0 = now_seconds();
    const attn_status st = attn_forward(&f->cfg, f->x, NULL, &res, &err);
    const double t = now_seconds() - t0;
    attn_result_free(&res);
    if (st != ATTN_OK) {
        fprintf(stderr, "bench: forward failed: %s\n", err.message);
        return -1.0;
    }
    return t;
}

/* Seconds of one CEILING_SIZE^3 sgemm with OpenBLAS on every core. */
static double ceiling_once(struct sgemm_ctx *s)
{
    openblas_set_num_threads((int)cores());
    const double t = run_sgemm(s);
    attn_blas_single_thread();
    return t;
}

/* Before attnd is timed, it runs untimed for WARM_SECONDS: long enough
 * for the ceiling's OpenBLAS threads, which spin a while after a threaded
 * call, to go to sleep, and for the cores' clocks to come up again after
 * any idle moment (a core left idle a few hundred milliseconds runs the
 * next hundred markedly slower here). A pause would do the first and
 * undo the second. */
#define WARM_SECONDS 0.15

static void warm_up(struct forward_ctx *f)
{
    const double t0 = now_seconds();
    while (run_forward(f) >= 0 && now_seconds() - t0 < WARM_SECONDS)
        ;
}

struct shape {
    size_t n, d_model, heads;
};

/* ------------------------------------------------------------ PyTorch */

/* torch.nn.MultiheadAttention in a child process (tests/bench/
 * mha_torch.py), given the same input and parameters through files in a
 * private folder and asked for one timed call at a time, so that its
 * rounds interleave with attnd's. */
struct torch_child {
    pid_t pid;
    FILE *to, *from;
    char dir[64];
};

static bool write_floats(const char *dir, const char *name, const float *a,
                         size_t n)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return false;
    const bool ok = fwrite(a, sizeof *a, n, fp) == n;
    return fclose(fp) == 0 && ok;
}

static void remove_files(const char *dir)
{
    static const char *const names[] = {"x",  "wq", "wk", "wv", "wo",
                                        "bq", "bk", "bv", "bo", "out"};
    char path[128];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

static void torch_stop(struct torch_child *t)
{
    if (t->pid > 0)
        kill(t->pid, SIGCONT); /* to read its end of input */
    if (t->to)
        fclose(t->to); /* EOF: the child returns */
    if (t->from)
        fclose(t->from);
    if (t->pid > 0)
        waitpid(t->pid, NULL, 0);
    if (t->dir[0])
        remove_files(t->dir);
    memset(t, 0, sizeof *t);
}

/* One line of the child's answer into buf; false at EOF. The child is
 * stopped from its answer until it is asked again (torch_ask()): the idle
 * pools of PyTorch's OpenMP and OpenBLAS spin for a while after each call
 * and would take CPU from what is timed next. */
static bool torch_read(struct torch_child *t, char *buf, size_t size)
{
    const bool got = fgets(buf, (int)size, t->from) != NULL;
    kill(t->pid, SIGSTOP);
    if (!got)
        return false;
    buf[strcspn(buf, "\n")] = '\0';
    return true;
}

/* Send the child a command line (answered through torch_read()). */
static void torch_ask(struct torch_child *t, const char *line)
{
    kill(t->pid, SIGCONT);
    fprintf(t->to, "%s\n", line);
    fflush(t->to);
}

/* Start the child on x and p (square d_model projections, every bias);
 * on failure say why in why and return false. */
static bool torch_start(struct torch_child *t, const char *script,
                        struct shape a, const float *x,
                        const struct attn_params *p, char *why, size_t wsize)
{
    memset(t, 0, sizeof *t);
    snprintf(t->dir, sizeof t->dir, "/tmp/attnd-bench.XXXXXX");
    if (!mkdtemp(t->dir)) {
        t->dir[0] = '\0';
        snprintf(why, wsize, "mkdtemp: %s", strerror(errno));
        return false;
    }
    const size_t d = a.d_model, dd = d * d;
    if (!write_floats(t->dir, "x", x, a.n * d) ||
        !write_floats(t->dir, "wq", p->wq, dd) ||
        !write_floats(t->dir, "wk", p->wk, dd) ||
        !write_floats(t->dir, "wv", p->wv, dd) ||
        !write_floats(t->dir, "wo", p->wo, dd) ||
        !write_floats(t->dir, "bq", p->bq, d) ||
        !write_floats(t->dir, "bk", p->bk, d) ||
        !write_floats(t->dir, "bv", p->bv, d) ||
        !write_floats(t->dir, "bo", p->bo, d)) {
        snprintf(why, wsize, "cannot write the inputs to %s", t->dir);
        torch_stop(t);
        return false;
    }
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) {
        snprintf(why, wsize, "pipe: %s", strerror(errno));
        torch_stop(t);
        return false;
    }
    char n_s[32], d_s[32], h_s[32];
    snprintf(n_s, sizeof n_s, "%zu", a.n);
    snprintf(d_s, sizeof d_s, "%zu", a.d_model);
    snprintf(h_s, sizeof h_s, "%zu", a.heads);
    t->pid = fork();
    if (t->pid == 0) {
        dup2(in[0], STDIN_FILENO);
        dup2(out[1], STDOUT_FILENO);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execl(TORCH_PYTHON, TORCH_PYTHON, script, t->dir, n_s, d_s, h_s,
              (char *)NULL);
        printf("error: cannot run %s: %s\n", TORCH_PYTHON, strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    if (t->pid < 0) {
        close(in[1]);
        close(out[0]);
        snprintf(why, wsize, "fork: %s", strerror(errno));
        torch_stop(t);
        return false;
    }
    t->to = fdopen(in[1], "w");
    t->from = fdopen(out[0], "r");
    char line[256] = "";
    if (!t->to || !t->from || !torch_read(t, line, sizeof line) ||
        strcmp(line, "ready") != 0) {
        snprintf(why, wsize, "%s", line[0] ? line : "the script did not start");
        torch_stop(t);
        return false;
    }
    return true;
}

/* Seconds of one call in the child, or -1. */
static double torch_run(struct torch_child *t, bool weights, int threads)
{
    char line[256];
    char cmd[32];
    snprintf(cmd, sizeof cmd, "run %d %d", weights ? 1 : 0, threads);
    torch_ask(t, cmd);
    if (!torch_read(t, line, sizeof line))
        return -1.0;
    char *end;
    const double s = strtod(line, &end);
    return end != line && *end == '\0' ? s : -1.0;
}

/* Largest difference between the child's output and attnd's, or -1. */
static double torch_diff(struct torch_child *t, const float *ours, size_t n)
{
    char line[256], path[128];
    torch_ask(t, "check");
    if (!torch_read(t, line, sizeof line) || strcmp(line, "ok") != 0)
        return -1.0;
    snprintf(path, sizeof path, "%s/out", t->dir);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return -1.0;
    double worst = 0.0;
    float v;
    size_t i = 0;
    for (; i < n && fread(&v, sizeof v, 1, fp) == 1; i++) {
        const double e = fabs((double)v - (double)ours[i]);
        worst = e > worst ? e : worst;
    }
    fclose(fp);
    return i == n ? worst : -1.0;
}

struct row {
    struct shape shape;
    double flops, ms_weights, ms_plain, ceiling;
    /* PyTorch at its best of 1 and 2 threads; 0 when it did not run */
    double torch_ms_weights, torch_ms_plain;
    int torch_threads_weights, torch_threads_plain;
    double torch_max_diff; /* largest |output difference|, -1 unknown */
};

/* The faster of PyTorch's medians at 1 and 2 threads, and its threads. */
static void torch_best(double ms[2], double *best, int *threads)
{
    *threads = ms[1] < ms[0] ? 2 : 1;
    *best = ms[*threads - 1];
}

static bool bench_shape(struct shape sh, struct sgemm_ctx *sg, bool quick,
                        int min_rounds_asked, const char *torch_script,
                        struct attn_pool *pool, struct row *out)
{
    const size_t nx = sh.n * sh.d_model;
    float *x = malloc(nx * sizeof *x);
    if (!x)
        return false;
    fill(x, nx, sh.n);
    struct forward_ctx f = {
        .cfg = {.n_query = sh.n,
                .d_model = sh.d_model,
                .heads = sh.heads,
                .qkv_bias = true,
                .out_bias = true,
                .threads = cores(),
                .pool = pool,
                /* resolved for every set it runs */
                .want = ATTN_WANT_OUTPUT | ATTN_WANT_WEIGHTS},
        .x = x};
    struct attn_error err;
    struct attn_params params = {0};
    if (attn_config_resolve(&f.cfg, &err) != ATTN_OK ||
        attn_params_draw(&f.cfg, &params, &err) != ATTN_OK) {
        fprintf(stderr, "bench: %s\n", err.message);
        free(x);
        return false;
    }
    /* parameters given, as to PyTorch: the pass is timed, not the draw */
    f.cfg.params = &params;
    f.cfg.params_checked = true;
    memset(out, 0, sizeof *out);
    out->shape = sh;
    out->flops = attn_flops(&f.cfg);
    out->torch_max_diff = -1.0;

    struct torch_child torch = {0};
    bool have_torch = false;
    if (torch_script) {
        char why[256] = "";
        have_torch =
            torch_start(&torch, torch_script, sh, x, &params, why, sizeof why);
        if (!have_torch)
            fprintf(stderr, "bench: PyTorch left out: %s\n", why);
    }
    if (have_torch) {
        struct attn_result res;
        f.cfg.want = ATTN_WANT_OUTPUT;
        if (attn_forward(&f.cfg, x, NULL, &res, &err) == ATTN_OK)
            out->torch_max_diff = torch_diff(&torch, res.output, nx);
        attn_result_free(&res);
    }

    /* rounds until min_rounds are done and budget seconds spent */
    enum { MAX_ROUNDS = 41 };
    const int min_rounds = min_rounds_asked > 0 ? min_rounds_asked
                           : quick              ? 3
                                                : 7;
    const double budget = min_rounds_asked > 0 ? 0.0 : quick ? 0.5 : 4.0;
    double sgemm_s[MAX_ROUNDS], plain_s[MAX_ROUNDS], weights_s[MAX_ROUNDS];
    double torch_s[2][2][MAX_ROUNDS]; /* [weights][threads - 1][round] */
    int rounds = 0;
    double spent = 0.0;
    bool ok = run_forward(&f) >= 0; /* warm up caches and OpenBLAS buffers */
    while (ok && rounds < MAX_ROUNDS &&
           (rounds < min_rounds || spent < budget)) {
        sgemm_s[rounds] = ceiling_once(sg);
        f.cfg.want = ATTN_WANT_OUTPUT;
        warm_up(&f);
        plain_s[rounds] = run_forward(&f);
        f.cfg.want = ATTN_WANT_OUTPUT | ATTN_WANT_WEIGHTS;
        weights_s[rounds] = run_forward(&f);
        ok = plain_s[rounds] >= 0 && weights_s[rounds] >= 0;
        spent += sgemm_s[rounds] + plain_s[rounds] + weights_s[rounds];
        /* threads outside: PyTorch warms up after each change of count */
        for (int t = 0; have_torch && t < 2; t++)
            for (int w = 0; w < 2; w++) {
                torch_s[w][t][rounds] = torch_run(&torch, w, t + 1);
                if (torch_s[w][t][rounds] < 0) {
                    fprintf(stderr, "bench: PyTorch stopped answering\n");
                    ok = false;
                }
                spent += torch_s[w][t][rounds];
            }
        rounds++;
    }
    torch_stop(&torch);
    free(x);
    attn_params_free(&params);
    if (!ok)
        return false;
    const double n = sg->n;
    out->ceiling = 2.0 * n * n * n / median(sgemm_s, (size_t)rounds) * 1e-9;
    out->ms_plain = 1e3 * median(plain_s, (size_t)rounds);
    out->ms_weights = 1e3 * median(weights_s, (size_t)rounds);
    if (have_torch) {
        double ms[2][2];
        for (int w = 0; w < 2; w++)
            for (int t = 0; t < 2; t++)
                ms[w][t] = 1e3 * median(torch_s[w][t], (size_t)rounds);
        torch_best(ms[0], &out->torch_ms_plain, &out->torch_threads_plain);
        torch_best(ms[1], &out->torch_ms_weights, &out->torch_threads_weights);
    }
    return true;
}

/* ------------------------------------------------------------- memory */

static long rss_kib(const char *field)
{
    FILE *fp = fopen("/proc/self/status", "r");
    if (!fp)
        return -1;
    char line[256];
    long kib = -1;
    const size_t len = strlen(field);
    while (fgets(line, sizeof line, fp))
        if (!strncmp(line, field, len))
            kib = strtol(line + len, NULL, 10);
    fclose(fp);
    return kib;
}

/* Child mode: one forward pass without weights; prints
 * "before_kib peak_kib" where before is the RSS with the input allocated. */
static int rss_child(size_t n, size_t d_model, size_t heads)
{
    attn_blas_single_thread();
    float *x = malloc(n * d_model * sizeof *x);
    if (!x)
        return 1;
    fill(x, n * d_model, 1);
    const long before = rss_kib("VmRSS:");
    struct forward_ctx f = {.cfg = {.n_query = n,
                                    .d_model = d_model,
                                    .heads = heads,
                                    .threads = cores(),
                                    .want = ATTN_WANT_OUTPUT},
                            .x = x};
    if (run_forward(&f) < 0)
        return 1;
    printf("%ld %ld\n", before, rss_kib("VmHWM:"));
    free(x);
    return 0;
}

static bool measure_rss(const char *self, struct shape sh, long *before,
                        long *peak)
{
    int fds[2];
    if (pipe(fds) != 0)
        return false;
    const pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        char a[32], b[32], c[32];
        snprintf(a, sizeof a, "%zu", sh.n);
        snprintf(b, sizeof b, "%zu", sh.d_model);
        snprintf(c, sizeof c, "%zu", sh.heads);
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        execl(self, self, "--rss", a, b, c, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[128] = {0};
    ssize_t got = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return got > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
           sscanf(buf, "%ld %ld", before, peak) == 2;
}

/* --------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    const char *json_path = NULL;
    const char *torch_script = "tests/bench/mha_torch.py";
    bool quick = false;
    struct shape only = {0, 0, 0}; /* --shape: this one alone */
    int min_rounds = 0;            /* --rounds: exactly this many */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rss") && i + 3 < argc)
            return rss_child(strtoul(argv[i + 1], NULL, 10),
                             strtoul(argv[i + 2], NULL, 10),
                             strtoul(argv[i + 3], NULL, 10));
        if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--torch") && i + 1 < argc)
            torch_script = argv[++i];
        else if (!strcmp(argv[i], "--no-torch"))
            torch_script = NULL;
        else if (!strcmp(argv[i], "--shape") && i + 3 < argc) {
            only.n = strtoul(argv[i + 1], NULL, 10);
            only.d_model = strtoul(argv[i + 2], NULL, 10);
            only.heads = strtoul(argv[i + 3], NULL, 10);
            i += 3;
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            min_rounds = (int)strtol(argv[++i], NULL, 10);
            if (min_rounds > 41)
                min_rounds = 41; /* MAX_ROUNDS */
        } else {
            fprintf(stderr,
                    "usage: %s [--json FILE] [--quick] [--torch SCRIPT | "
                    "--no-torch] [--shape N D_MODEL HEADS] [--rounds R]\n",
                    argv[0]);
            return 2;
        }
    }
    attn_blas_single_thread();
    const struct shape all_shapes[] = {
        {10, 64, 8},     {128, 256, 8},  {512, 768, 12},
        {1024, 768, 12}, {4096, 512, 8},
    };
    enum { N_ALL = sizeof all_shapes / sizeof all_shapes[0] };
    const struct shape *shapes = only.n ? &only : all_shapes;
    const int N_SHAPES = only.n ? 1 : N_ALL;
    struct sgemm_ctx sg = {.n = CEILING_SIZE};
    const size_t sq = (size_t)CEILING_SIZE * CEILING_SIZE;
    sg.a = malloc(sq * sizeof(float));
    sg.b = malloc(sq * sizeof(float));
    sg.c = malloc(sq * sizeof(float));
    if (!sg.a || !sg.b || !sg.c)
        return 1;
    fill(sg.a, sq, 1);
    fill(sg.b, sq, 2);

    /* the threads of the pass, started once as a long-lived caller would */
    struct attn_pool *pool;
    struct attn_error err;
    if (attn_pool_create(cores(), &pool, &err) != ATTN_OK) {
        fprintf(stderr, "bench: %s\n", err.message);
        return 1;
    }
    const char *core_env = getenv("OPENBLAS_CORETYPE");
    printf("OpenBLAS core: %s (OPENBLAS_CORETYPE=%s), %u cores, forward team "
           "of %u threads (a pool kept between calls) with 1 BLAS thread "
           "each\n",
           openblas_get_corename(), core_env ? core_env : "unset", cores(),
           cores());
    if (torch_script)
        printf("PyTorch: torch.nn.MultiheadAttention by %s %s, best of 1 "
               "and 2 threads (the number after its time); x: attnd's speed "
               "over PyTorch's\n",
               TORCH_PYTHON, torch_script);
    printf("%6s %6s %5s %9s | %12s %8s | %12s %8s | %10s %7s %7s | %12s %6s "
           "| %12s %6s\n",
           "N", "d", "heads", "GFLOP", "ms(weights)", "GFLOP/s", "ms(no wts)",
           "GFLOP/s", "sgemm GF/s", "ratio", "ratio_w", "torch no wts", "x",
           "torch wts", "x_w");
    struct row rows[N_ALL];
    for (int i = 0; i < N_SHAPES; i++) {
        if (!bench_shape(shapes[i], &sg, quick, min_rounds, torch_script, pool,
                         &rows[i]))
            return 1;
        const struct row *r = &rows[i];
        const double gf_w = r->flops / (r->ms_weights * 1e-3) * 1e-9;
        const double gf_p = r->flops / (r->ms_plain * 1e-3) * 1e-9;
        printf("%6zu %6zu %5zu %9.3f | %12.3f %8.1f | %12.3f %8.1f | %10.1f "
               "%7.2f %7.2f",
               r->shape.n, r->shape.d_model, r->shape.heads, r->flops * 1e-9,
               r->ms_weights, gf_w, r->ms_plain, gf_p, r->ceiling,
               gf_p / r->ceiling, gf_w / r->ceiling);
        if (r->torch_ms_plain > 0)
            printf(" | %10.3f %d %6.2f | %10.3f %d %6.2f  (outputs differ by "
                   "%.2g at most)",
                   r->torch_ms_plain, r->torch_threads_plain,
                   r->torch_ms_plain / r->ms_plain, r->torch_ms_weights,
                   r->torch_threads_weights,
                   r->torch_ms_weights / r->ms_weights, r->torch_max_diff);
        printf("\n");
        fflush(stdout);
    }
    const struct shape mem_shape = {16384, 256, 4};
    long before = -1, peak = -1;
    /* one shape asked for: its speed alone */
    const bool have_rss =
        !only.n && measure_rss("/proc/self/exe", mem_shape, &before, &peak);
    if (only.n)
        ;
    else if (have_rss)
        printf("memory: N=%zu d=%zu heads=%zu without weights: peak RSS %.1f "
               "MiB; %.1f MiB before the call (program and the %.1f MiB "
               "input), so the call added %.1f MiB\n",
               mem_shape.n, mem_shape.d_model, mem_shape.heads, peak / 1024.0,
               before / 1024.0,
               mem_shape.n * mem_shape.d_model * 4.0 / (1 << 20),
               (peak - before) / 1024.0);
    else
        printf("memory: measurement failed\n");

    if (json_path) {
        FILE *fp = fopen(json_path, "w");
        if (!fp) {
            fprintf(stderr, "bench: %s: %s\n", json_path, strerror(errno));
            return 1;
        }
        fprintf(fp, "{\"corename\": \"%s\", \"cores\": %u, \"cases\": [",
                openblas_get_corename(), cores());
        for (int i = 0; i < N_SHAPES; i++) {
            const struct row *r = &rows[i];
            const double gf_w = r->flops / (r->ms_weights * 1e-3) * 1e-9;
            const double gf_p = r->flops / (r->ms_plain * 1e-3) * 1e-9;
            fprintf(fp,
                    "%s\n  {\"n\": %zu, \"d_model\": %zu, \"heads\": %zu, "
                    "\"gflop\": %.6f, \"median_ms_weights\": %.4f, "
                    "\"gflops_weights\": %.2f, \"median_ms_no_weights\": %.4f, "
                    "\"gflops_no_weights\": %.2f, \"sgemm_gflops\": %.2f, "
                    "\"ratio_no_weights\": %.4f, \"ratio_weights\": %.4f",
                    i ? "," : "", r->shape.n, r->shape.d_model, r->shape.heads,
                    r->flops * 1e-9, r->ms_weights, gf_w, r->ms_plain, gf_p,
                    r->ceiling, gf_p / r->ceiling, gf_w / r->ceiling);
            if (r->torch_ms_plain > 0)
                fprintf(fp,
                        ", \"torch_median_ms_no_weights\": %.4f, "
                        "\"torch_threads_no_weights\": %d, "
                        "\"torch_median_ms_weights\": %.4f, "
                        "\"torch_threads_weights\": %d, "
                        "\"speedup_over_torch_no_weights\": %.4f, "
                        "\"speedup_over_torch_weights\": %.4f, "
                        "\"max_abs_diff_torch\": %.3g",
                        r->torch_ms_plain, r->torch_threads_plain,
                        r->torch_ms_weights, r->torch_threads_weights,
                        r->torch_ms_plain / r->ms_plain,
                        r->torch_ms_weights / r->ms_weights, r->torch_max_diff);
            fprintf(fp, "}");
        }
        fprintf(fp,
                "\n], \"memory\": {\"n\": %zu, \"d_model\": %zu, \"heads\": "
                "%zu, \"peak_rss_kib\": %ld, \"rss_before_call_kib\": %ld}}\n",
                mem_shape.n, mem_shape.d_model, mem_shape.heads, peak, before);
        fclose(fp);
    }
    attn_pool_free(pool);
    free(sg.a);
    free(sg.b);
    free(sg.c);
    return 0;
}
