/*
 * bench_attention.c - speed and memory of the attention core, measured
 * against this machine's own cblas_sgemm in the same run.
 *
 *   bench_attention [--json FILE] [--quick]
 *   bench_attention --rss N D_MODEL HEADS   (one forward; prints peak RSS)
 *
 * For each shape it reports the median time of a forward pass with and
 * without weights, its GFLOP/s, and as the ceiling the GFLOP/s of a 2048^3
 * cblas_sgemm on all cores. The three are timed in interleaved rounds (one
 * sgemm, one pass without weights, one with), so that a busy neighbour on
 * a shared machine slows both sides of each ratio alike. The forward pass runs
 * its own team of one thread per core with single-threaded OpenBLAS, as the
 * core's threading policy says; the ceiling gives OpenBLAS all the cores.
 * Memory is measured in a fresh process so that nothing else counts.
 */
#include "attention.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CEILING_SIZE 2048

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int compare_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, compare_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

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

static unsigned cores(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

/* Seconds of one CEILING_SIZE^3 sgemm with OpenBLAS on every core. */
static double ceiling_once(struct sgemm_ctx *s)
{
    openblas_set_num_threads((int)cores());
    const double t = run_sgemm(s);
    attn_blas_single_thread();
    /* OpenBLAS's workers spin for a while after a threaded call before
     * they sleep; let them, so they do not compete with the pass timed
     * next */
    nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 300000000}, NULL);
    return t;
}

struct shape {
    size_t n, d_model, heads;
};

struct row {
    struct shape shape;
    double flops, ms_weights, ms_plain, ceiling;
};

static bool bench_shape(struct shape sh, struct sgemm_ctx *sg, bool quick,
                        struct row *out)
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
                /* resolved for every set it runs */
                .want = ATTN_WANT_OUTPUT | ATTN_WANT_WEIGHTS},
        .x = x};
    struct attn_error err;
    if (attn_config_resolve(&f.cfg, &err) != ATTN_OK) {
        fprintf(stderr, "bench: %s\n", err.message);
        free(x);
        return false;
    }
    out->shape = sh;
    out->flops = attn_flops(&f.cfg);
    /* rounds until min_rounds are done and budget seconds spent */
    enum { MAX_ROUNDS = 41 };
    const int min_rounds = quick ? 3 : 7;
    const double budget = quick ? 0.5 : 4.0;
    double sgemm_s[MAX_ROUNDS], plain_s[MAX_ROUNDS], weights_s[MAX_ROUNDS];
    int rounds = 0;
    double spent = 0.0;
    bool ok = run_forward(&f) >= 0; /* warm up caches and OpenBLAS buffers */
    while (ok && rounds < MAX_ROUNDS &&
           (rounds < min_rounds || spent < budget)) {
        sgemm_s[rounds] = ceiling_once(sg);
        f.cfg.want = ATTN_WANT_OUTPUT;
        run_forward(&f); /* caches and clocks back up after the pause */
        plain_s[rounds] = run_forward(&f);
        f.cfg.want = ATTN_WANT_OUTPUT | ATTN_WANT_WEIGHTS;
        weights_s[rounds] = run_forward(&f);
        ok = plain_s[rounds] >= 0 && weights_s[rounds] >= 0;
        spent += sgemm_s[rounds] + plain_s[rounds] + weights_s[rounds];
        rounds++;
    }
    free(x);
    if (!ok)
        return false;
    const double n = sg->n;
    out->ceiling = 2.0 * n * n * n / median(sgemm_s, (size_t)rounds) * 1e-9;
    out->ms_plain = 1e3 * median(plain_s, (size_t)rounds);
    out->ms_weights = 1e3 * median(weights_s, (size_t)rounds);
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
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rss") && i + 3 < argc)
            return rss_child(strtoul(argv[i + 1], NULL, 10),
                             strtoul(argv[i + 2], NULL, 10),
                             strtoul(argv[i + 3], NULL, 10));
        if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = true;
        else {
            fprintf(stderr, "usage: %s [--json FILE] [--quick]\n", argv[0]);
            return 2;
        }
    }
    attn_blas_single_thread();
    const struct shape shapes[] = {
        {10, 64, 8},     {128, 256, 8},  {512, 768, 12},
        {1024, 768, 12}, {4096, 512, 8},
    };
    enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };
    struct sgemm_ctx sg = {.n = CEILING_SIZE};
    const size_t sq = (size_t)CEILING_SIZE * CEILING_SIZE;
    sg.a = malloc(sq * sizeof(float));
    sg.b = malloc(sq * sizeof(float));
    sg.c = malloc(sq * sizeof(float));
    if (!sg.a || !sg.b || !sg.c)
        return 1;
    fill(sg.a, sq, 1);
    fill(sg.b, sq, 2);

    const char *core_env = getenv("OPENBLAS_CORETYPE");
    printf("OpenBLAS core: %s (OPENBLAS_CORETYPE=%s), %u cores, forward team "
           "of %u threads with 1 BLAS thread each\n",
           openblas_get_corename(), core_env ? core_env : "unset", cores(),
           cores());
    printf("%6s %6s %5s %9s | %12s %8s | %12s %8s | %10s %7s %7s\n", "N", "d",
           "heads", "GFLOP", "ms(weights)", "GFLOP/s", "ms(no wts)", "GFLOP/s",
           "sgemm GF/s", "ratio", "ratio_w");
    struct row rows[N_SHAPES];
    for (int i = 0; i < N_SHAPES; i++) {
        if (!bench_shape(shapes[i], &sg, quick, &rows[i]))
            return 1;
        const struct row *r = &rows[i];
        const double gf_w = r->flops / (r->ms_weights * 1e-3) * 1e-9;
        const double gf_p = r->flops / (r->ms_plain * 1e-3) * 1e-9;
        printf("%6zu %6zu %5zu %9.3f | %12.3f %8.1f | %12.3f %8.1f | %10.1f "
               "%7.2f %7.2f\n",
               r->shape.n, r->shape.d_model, r->shape.heads, r->flops * 1e-9,
               r->ms_weights, gf_w, r->ms_plain, gf_p, r->ceiling,
               gf_p / r->ceiling, gf_w / r->ceiling);
        fflush(stdout);
    }
    const struct shape mem_shape = {16384, 256, 4};
    long before = -1, peak = -1;
    const bool have_rss =
        measure_rss("/proc/self/exe", mem_shape, &before, &peak);
    if (have_rss)
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
                    "\"ratio_no_weights\": %.4f, \"ratio_weights\": %.4f}",
                    i ? "," : "", r->shape.n, r->shape.d_model, r->shape.heads,
                    r->flops * 1e-9, r->ms_weights, gf_w, r->ms_plain, gf_p,
                    r->ceiling, gf_p / r->ceiling, gf_w / r->ceiling);
        }
        fprintf(fp,
                "\n], \"memory\": {\"n\": %zu, \"d_model\": %zu, \"heads\": "
                "%zu, \"peak_rss_kib\": %ld, \"rss_before_call_kib\": %ld}}\n",
                mem_shape.n, mem_shape.d_model, mem_shape.heads, peak, before);
        fclose(fp);
    }
    free(sg.a);
    free(sg.b);
    free(sg.c);
    return 0;
}
