/*
 * bench_patch.c - activation patching over heads in the core
 * (src/patching.h) against the loop TransformerLens runs for it, in
 * PyTorch, on the same checkpoint in the same run, and the memory a patch
 * holds against what xf_patch_cost() says it will.
 *
 *   bench_patch DIR... [--rounds R] [--threads T[,T...]]
 *                      [--batch-rows B[,B...]] [--torch-heads K]
 *                      [--seed S] [--json FILE]
 *
 * Each DIR holds a LLaMA checkpoint with its tokenizer (make bench writes
 * Llama-3.2-1B-sized random ones, F32 and BF16, with
 * tests/models/generate_decoders.py --llama-1b). The inputs are 32-token
 * prompts of random ids below the tokenizer's size, a clean one and a
 * corrupted one that differs from it at one random position (not the
 * last), and the metric is the logit difference of two random tokens at
 * the last position; every timed run draws its own, so no side can serve
 * one from a cache. For each checkpoint, in turn:
 *
 * - agreement: one patch over every head by attnd (threads and batch
 *   rows the first of each list) and, for a few of its heads (some
 *   fixed, the ones of largest effect), the same patched runs in PyTorch
 *   (tests/bench/patch_torch.py). Each normalised effect, (patched -
 *   corrupted) / (clean - corrupted) of each side's own runs, must agree
 *   within TOLERANCE x max(1, |effect|), and the clean and corrupted
 *   metrics within TOLERANCE x max(1, |metric|); else the bench stops.
 * - batch rows: with more than one value given, SELECT_ROUNDS whole
 *   patches at each on the first thread count, in turn; the one of the
 *   least time is used for the rest.
 * - xf_patch_cost(): its bytes and GFLOP, and its own time (the median
 *   of COST_REPEATS calls).
 * - speed: R interleaved rounds, each running for every thread count
 *   attnd's whole patch (xf_patch_run, over = XF_PATCH_HEADS, denoising:
 *   layers x heads patched runs and the two unpatched ones), then
 *   PyTorch's loop on as many threads on that round's input
 *   (torch.set_num_threads, and its OpenBLAS's threads, which otherwise
 *   take every core). attnd is timed after a plain pass
 *   of the corrupted input that wakes its team and the clocks; PyTorch
 *   after one plain pass too. PyTorch's process is stopped while attnd
 *   runs (bench_torch.h).
 * - memory: this process's peak resident size over each timed patch
 *   (VmHWM, reset through /proc/self/clear_refs just before it) less its
 *   resident size then, after malloc_trim() has given back what earlier
 *   runs freed (the loaded model's mapping, wholly resident since the
 *   loader read it, is in both): the most over the rounds, beside
 *   xf_patch_cost()'s bytes.
 *
 * PyTorch's loop is TransformerLens's get_act_patch_attn_head_out_all_pos:
 * a clean pass that keeps every layer's z (run_with_cache), a corrupted
 * pass, then for each of the layers x heads a whole forward pass of the
 * corrupted input (every layer, the logits of every position) with a hook
 * setting that head's z to the clean run's, and the metric. Every patched
 * pass costs the same whichever head it patches, so a round times K of
 * them (--torch-heads, default 32, spread over every layer) and counts the
 * loop as the clean and corrupted passes plus layers x heads times the
 * median patched pass. The speedup is that over attnd's time, medians of
 * the rounds, on as many threads; and against PyTorch's fastest loop
 * among the thread counts measured.
 */
#include "bench_clock.h"
#include "bench_torch.h"
#include "model/model.h"
#include "patching.h"

#include <cblas.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TORCH_SCRIPT "tests/bench/patch_torch.py"
#define TOKENS 32
#define TOLERANCE 1e-3
#define MAX_DIRS 4
#define MAX_LIST 8
#define COST_REPEATS 201
#define SELECT_ROUNDS 2
#define VERIFY_FIXED 5
#define VERIFY_TOP 3
#define MIB (1024.0 * 1024.0)

/* The target: attnd's patch over heads against PyTorch's loop. */
#define TARGET_SPEEDUP 3.0

/* ------------------------------------------------------------- inputs */

static uint64_t splitmix(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static uint32_t below(uint64_t *state, size_t bound)
{
    return (uint32_t)(splitmix(state) % bound);
}

/* A clean prompt, its corruption at one position and the metric's
 * tokens. */
struct input {
    uint32_t clean[TOKENS], corrupted[TOKENS];
    size_t position; /* where they differ */
    uint32_t correct, incorrect;
};

static void draw_input(uint64_t *state, size_t vocab, struct input *in)
{
    for (size_t i = 0; i < TOKENS; i++)
        in->clean[i] = in->corrupted[i] = below(state, vocab);
    in->position = below(state, TOKENS - 1);
    in->corrupted[in->position] =
        (in->clean[in->position] + 1 + below(state, vocab - 1)) % vocab;
    in->correct = below(state, vocab);
    in->incorrect = (in->correct + 1 + below(state, vocab - 1)) % vocab;
}

static struct xf_patch patch_of(const struct input *in, unsigned threads,
                                size_t batch_rows)
{
    return (struct xf_patch){.clean = in->clean,
                             .corrupted = in->corrupted,
                             .n = TOKENS,
                             .over = XF_PATCH_HEADS,
                             .noise = false,
                             .metric = {.kind = XF_METRIC_LOGIT_DIFF,
                                        .correct = in->correct,
                                        .incorrect = in->incorrect},
                             .threads = threads,
                             .batch_rows = batch_rows};
}

/* ------------------------------------------------------------- memory */

static size_t self_status(const char *field)
{
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    size_t kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, strlen(field)))
            kib = strtoull(line + strlen(field), NULL, 10);
    if (f)
        fclose(f);
    return kib * 1024;
}

/* VmHWM back to VmRSS; false where the kernel does not have it. */
static bool reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return false;
    const bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

/* -------------------------------------------------------------- attnd */

/* A plain pass of the corrupted input on threads threads: wakes the team
 * and brings the clocks up before a timed patch. */
static bool warm_up(const struct xf_model *m, const struct input *in,
                    unsigned threads)
{
    const struct xf_run run = {.ids = in->corrupted,
                               .n = TOKENS,
                               .want = XF_WANT_LAST_ROWS,
                               .layer = XF_ALL_LAYERS,
                               .threads = threads};
    struct xf_plan plan;
    struct xf_result r;
    struct attn_error err;
    attn_status st = xf_plan(m, &run, &plan, &err);
    if (!st)
        st = xf_forward(&plan, NULL, &r, &err);
    if (st) {
        fprintf(stderr, "bench_patch: the plain pass: %s\n", err.message);
        return false;
    }
    xf_result_free(&r);
    return true;
}

/* One whole patch, timed, after a plain pass; *peak: VmHWM over it less
 * VmRSS before it (0 where it cannot be read). With keep, its result is
 * the caller's, else freed. -1 on failure. */
static double attnd_patch(const struct xf_model *m, const struct input *in,
                          unsigned threads, size_t batch_rows, size_t *peak,
                          struct xf_patch_result *keep)
{
    if (!warm_up(m, in, threads))
        return -1.0;
    const struct xf_patch p = patch_of(in, threads, batch_rows);
    struct xf_patch_result r;
    struct attn_error err;
    malloc_trim(0); /* what earlier runs freed, back to the system */
    const bool peak_known = reset_peak();
    const size_t before = self_status("VmRSS:");
    const double t0 = now_seconds();
    const attn_status st = xf_patch_run(m, &p, NULL, &r, &err);
    const double t = now_seconds() - t0;
    const size_t hwm = self_status("VmHWM:");
    if (peak)
        *peak = peak_known && hwm > before ? hwm - before : 0;
    if (st) {
        fprintf(stderr, "bench_patch: xf_patch_run: %s\n", err.message);
        return -1.0;
    }
    if (keep)
        *keep = r;
    else
        xf_patch_result_free(&r);
    return t;
}

/* -------------------------------------------------------------- torch */

/* "effects" or "time" with the input and heads [k] (layer, head pairs);
 * the answer into line. */
static bool torch_patch(struct torch *t, const char *verb, unsigned threads,
                        const struct input *in, const size_t *heads, size_t k,
                        char *line, size_t len)
{
    const size_t cap = 64 + 2 * TOKENS * 12 + k * 2 * 24;
    char *cmd = malloc(cap);
    if (!cmd)
        return false;
    size_t at = (size_t)snprintf(cmd, cap, "%s %u %u %u %d", verb, threads,
                                 in->correct, in->incorrect, TOKENS);
    for (size_t i = 0; i < TOKENS; i++)
        at += (size_t)snprintf(cmd + at, cap - at, " %u", in->clean[i]);
    for (size_t i = 0; i < TOKENS; i++)
        at += (size_t)snprintf(cmd + at, cap - at, " %u", in->corrupted[i]);
    at += (size_t)snprintf(cmd + at, cap - at, " %zu", k);
    for (size_t i = 0; i < k; i++)
        at += (size_t)snprintf(cmd + at, cap - at, " %zu %zu", heads[2 * i],
                               heads[2 * i + 1]);
    const bool ok = torch_ask(t, cmd, line, len);
    free(cmd);
    return ok;
}

/* PyTorch's side of one round. */
struct torch_round {
    int threads, blas_threads; /* torch.get_num_threads(), OpenBLAS's */
    double clean, corrupted, pass, fastest, slowest; /* seconds */
};

static bool torch_time(struct torch *t, unsigned threads,
                       const struct input *in, const size_t *heads, size_t k,
                       struct torch_round *out)
{
    char line[512];
    return torch_patch(t, "time", threads, in, heads, k, line, sizeof line) &&
           sscanf(line, "%d %d %lf %lf %lf %lf %lf", &out->threads,
                  &out->blas_threads, &out->clean, &out->corrupted, &out->pass,
                  &out->fastest, &out->slowest) == 7;
}

/* K heads spread over every layer, a round's own: (layer, head) pairs. */
static void spread_heads(const struct xf_model *m, size_t k, size_t round,
                         size_t *heads)
{
    for (size_t i = 0; i < k; i++) {
        heads[2 * i] = i * m->layers / k;
        heads[2 * i + 1] = (i * 11 + round * 5) % m->heads;
    }
}

/* ------------------------------------------------------------- checks */

struct agreement {
    size_t heads[2 * (VERIFY_FIXED + VERIFY_TOP)], count;
    double clean[2], corrupted[2];               /* attnd, torch */
    double effect[2][VERIFY_FIXED + VERIFY_TOP]; /* attnd, torch */
    double worst; /* largest |difference| / max(1, |value|) */
};

static double rel_diff(double mine, double theirs)
{
    const double scale = fabs(theirs) > 1.0 ? fabs(theirs) : 1.0;
    return fabs(mine - theirs) / scale;
}

static bool has_head(const struct agreement *a, size_t layer, size_t head)
{
    for (size_t i = 0; i < a->count; i++)
        if (a->heads[2 * i] == layer && a->heads[2 * i + 1] == head)
            return true;
    return false;
}

/* attnd's patch of in and PyTorch's runs of some of its heads agree. */
static bool agree(const struct xf_model *m, struct torch *t,
                  const struct input *in, unsigned threads, size_t batch_rows,
                  struct agreement *a)
{
    memset(a, 0, sizeof *a);
    struct xf_patch_result r;
    if (attnd_patch(m, in, threads, batch_rows, NULL, &r) < 0)
        return false;
    const size_t L = m->layers, h = m->heads;
    const size_t fixed[VERIFY_FIXED][2] = {{0, 0},
                                           {L / 4, h / 2 + 1},
                                           {L / 2, h / 4},
                                           {3 * L / 4, h - 2},
                                           {L - 1, h - 1}};
    for (size_t i = 0; i < VERIFY_FIXED; i++) {
        a->heads[2 * a->count] = fixed[i][0];
        a->heads[2 * a->count + 1] = fixed[i][1];
        a->count++;
    }
    for (size_t k = 0; k < VERIFY_TOP; k++) { /* the largest effects */
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < r.runs; i++)
            if (!has_head(a, i / h, i % h) &&
                (best == SIZE_MAX || fabs(r.patched[i] - r.corrupted) >
                                         fabs(r.patched[best] - r.corrupted)))
                best = i;
        a->heads[2 * a->count] = best / h;
        a->heads[2 * a->count + 1] = best % h;
        a->count++;
    }
    char line[4096];
    bool ok = torch_patch(t, "effects", threads, in, a->heads, a->count, line,
                          sizeof line);
    double theirs[2 + VERIFY_FIXED + VERIFY_TOP];
    char *at = line;
    for (size_t i = 0; ok && i < 2 + a->count; i++) {
        char *end;
        theirs[i] = strtod(at, &end);
        ok = end != at;
        at = end;
    }
    if (!ok) {
        fprintf(stderr, "bench_patch: PyTorch's effects: %.200s\n", line);
        xf_patch_result_free(&r);
        return false;
    }
    a->clean[0] = r.clean, a->corrupted[0] = r.corrupted;
    a->clean[1] = theirs[0], a->corrupted[1] = theirs[1];
    a->worst =
        fmax(rel_diff(r.clean, theirs[0]), rel_diff(r.corrupted, theirs[1]));
    const double span = theirs[0] - theirs[1];
    for (size_t i = 0; i < a->count; i++) {
        const size_t run = a->heads[2 * i] * h + a->heads[2 * i + 1];
        if (!xf_patch_effect(&r, run, &a->effect[0][i]) || span == 0.0) {
            fprintf(stderr, "bench_patch: no effect can be measured\n");
            ok = false;
            break;
        }
        a->effect[1][i] = (theirs[2 + i] - theirs[1]) / span;
        a->worst = fmax(a->worst, rel_diff(a->effect[0][i], a->effect[1][i]));
    }
    xf_patch_result_free(&r);
    return ok;
}

/* ------------------------------------------------------------- bench */

struct sizes {
    unsigned threads[MAX_LIST];
    size_t batch_rows[MAX_LIST];
    int n_threads, n_batch_rows;
};

/* One thread count's rounds, medians. */
struct case_timing {
    unsigned threads;
    int torch_threads, torch_blas_threads;
    size_t cost_bytes, peak_extra;
    double cost_gflop, cost_us;
    double attnd_ms, torch_pass_ms, torch_clean_ms, torch_corrupted_ms;
    double torch_loop_ms; /* clean + corrupted + runs x a pass */
};

struct checkpoint {
    const char *dir;
    const char *dtype;
    size_t file_loaded, vocab, runs, batch_rows;
    double batch_ms[MAX_LIST]; /* at each candidate */
    struct agreement agreement;
    struct case_timing c[MAX_LIST];
};

static double speedup(const struct case_timing *c)
{
    return c->torch_loop_ms / c->attnd_ms;
}

/* PyTorch's fastest loop among the thread counts of c, against t. */
static double speedup_best(const struct checkpoint *c, int n_threads,
                           const struct case_timing *t)
{
    double best = INFINITY;
    for (int k = 0; k < n_threads; k++)
        best = fmin(best, c->c[k].torch_loop_ms);
    return best / t->attnd_ms;
}

/* xf_patch_cost()'s bytes and GFLOP for threads, and its own time. */
static bool cost_of(const struct xf_model *m, const struct input *in,
                    size_t batch_rows, struct case_timing *c)
{
    const struct xf_patch p = patch_of(in, c->threads, batch_rows);
    double times[COST_REPEATS], flops = 0;
    struct attn_error err;
    for (int i = 0; i < COST_REPEATS; i++) {
        const double t0 = now_seconds();
        if (xf_patch_cost(m, &p, &c->cost_bytes, &flops, &err)) {
            fprintf(stderr, "bench_patch: xf_patch_cost: %s\n", err.message);
            return false;
        }
        times[i] = now_seconds() - t0;
    }
    c->cost_us = 1e6 * median(times, COST_REPEATS);
    c->cost_gflop = flops * 1e-9;
    return true;
}

/* The fastest of the batch sizes: SELECT_ROUNDS whole patches at each,
 * in turn (forwards, then backwards), each size's least time. */
static bool choose_batch(const struct xf_model *m, const struct sizes *sz,
                         uint64_t *rng, size_t vocab, struct checkpoint *c)
{
    c->batch_rows = sz->batch_rows[0];
    if (sz->n_batch_rows < 2)
        return true;
    for (int k = 0; k < sz->n_batch_rows; k++)
        c->batch_ms[k] = INFINITY;
    for (int r = 0; r < SELECT_ROUNDS; r++)
        for (int i = 0; i < sz->n_batch_rows; i++) {
            const int k = r % 2 ? sz->n_batch_rows - 1 - i : i;
            struct input in;
            draw_input(rng, vocab, &in);
            const double t = attnd_patch(m, &in, sz->threads[0],
                                         sz->batch_rows[k], NULL, NULL);
            if (t < 0)
                return false;
            printf("batch_rows %zu (%zu sequences a batch), %u threads: "
                   "%.1f ms\n",
                   sz->batch_rows[k], sz->batch_rows[k] / TOKENS,
                   sz->threads[0], 1e3 * t);
            fflush(stdout);
            if (1e3 * t < c->batch_ms[k])
                c->batch_ms[k] = 1e3 * t;
        }
    double best = INFINITY;
    for (int k = 0; k < sz->n_batch_rows; k++)
        if (c->batch_ms[k] < best) {
            best = c->batch_ms[k];
            c->batch_rows = sz->batch_rows[k];
        }
    printf("batch_rows %zu: the fastest\n", c->batch_rows);
    return true;
}

static bool bench_checkpoint(const char *dir, const struct sizes *sz,
                             int rounds, size_t torch_heads, uint64_t seed,
                             struct checkpoint *c)
{
    memset(c, 0, sizeof *c);
    c->dir = dir;
    char err[1024];
    struct model *model = NULL;
    if (!model_load("bench", dir, &model, err, sizeof err)) {
        fprintf(stderr, "bench_patch: %s\n", err);
        return false;
    }
    c->file_loaded = self_status("VmRSS:");
    const struct xf_model *m = &model->xf;
    c->dtype = attn_dtype_name((int)m->layer[0].q_w.dtype);
    const size_t tok_vocab = tok_vocab_size(&model->tokenizer);
    c->vocab = tok_vocab < m->vocab_size ? tok_vocab : m->vocab_size;
    uint64_t rng = seed;
    struct input in;
    draw_input(&rng, c->vocab, &in);
    const struct xf_patch p0 = patch_of(&in, sz->threads[0], 0);
    c->runs = xf_patch_runs(m, &p0);
    printf("\n%s: %s, %zu layers, %zu heads, vocab %zu, ids below %zu (the "
           "tokenizer's); %zu patched runs of %d tokens; VmRSS %.1f MiB once "
           "loaded\n",
           dir, c->dtype, m->layers, m->heads, m->vocab_size, c->vocab, c->runs,
           TOKENS, c->file_loaded / MIB);

    struct torch torch = {0};
    if (!torch_start(&torch, TORCH_SCRIPT, dir)) {
        fprintf(stderr, "bench_patch: %s %s did not start (python3-torch?)\n",
                BENCH_PYTHON, TORCH_SCRIPT);
        model_free(model);
        return false;
    }
    bool ok =
        agree(m, &torch, &in, sz->threads[0], sz->batch_rows[0], &c->agreement);
    const struct agreement *a = &c->agreement;
    if (ok) {
        printf("agreement (corrupted at %zu, metric logit[%u] - logit[%u]): "
               "clean %.6f / %.6f, corrupted %.6f / %.6f (attnd / PyTorch); "
               "effects:",
               in.position, in.correct, in.incorrect, a->clean[0], a->clean[1],
               a->corrupted[0], a->corrupted[1]);
        for (size_t i = 0; i < a->count; i++)
            printf(" L%zuH%zu %.5f / %.5f", a->heads[2 * i],
                   a->heads[2 * i + 1], a->effect[0][i], a->effect[1][i]);
        printf("; largest difference %.2g\n", a->worst);
        if (!(a->worst <= TOLERANCE)) {
            fprintf(stderr,
                    "bench_patch: attnd and PyTorch disagree on %s (largest "
                    "relative difference %g > %g)\n",
                    dir, a->worst, TOLERANCE);
            ok = false;
        }
        fflush(stdout);
    }
    ok = ok && choose_batch(m, sz, &rng, c->vocab, c);
    for (int k = 0; ok && k < sz->n_threads; k++) {
        c->c[k].threads = sz->threads[k];
        ok = cost_of(m, &in, c->batch_rows, &c->c[k]);
        if (ok)
            printf("threads %u, batch_rows %zu: xf_patch_cost %.1f MiB, "
                   "%.1f GFLOP, %.1f us a call\n",
                   c->c[k].threads, c->batch_rows, c->c[k].cost_bytes / MIB,
                   c->c[k].cost_gflop, c->c[k].cost_us);
    }
    fflush(stdout);

    double at[MAX_LIST][BENCH_MAX_ROUNDS], pass[MAX_LIST][BENCH_MAX_ROUNDS],
        loop[MAX_LIST][BENCH_MAX_ROUNDS], clean[MAX_LIST][BENCH_MAX_ROUNDS],
        corrupted[MAX_LIST][BENCH_MAX_ROUNDS];
    size_t *heads = malloc(2 * torch_heads * sizeof *heads);
    ok = ok && heads;
    for (int r = 0; ok && r < rounds; r++)
        for (int k = 0; ok && k < sz->n_threads; k++) {
            struct case_timing *ct = &c->c[k];
            draw_input(&rng, c->vocab, &in);
            size_t peak = 0;
            const double t =
                attnd_patch(m, &in, ct->threads, c->batch_rows, &peak, NULL);
            struct torch_round tr;
            spread_heads(m, torch_heads, (size_t)r, heads);
            ok = t >= 0 &&
                 torch_time(&torch, ct->threads, &in, heads, torch_heads, &tr);
            if (!ok) {
                fprintf(stderr, "bench_patch: a run failed\n");
                break;
            }
            if (peak > ct->peak_extra)
                ct->peak_extra = peak;
            ct->torch_threads = tr.threads;
            ct->torch_blas_threads = tr.blas_threads;
            at[k][r] = 1e3 * t;
            pass[k][r] = 1e3 * tr.pass;
            clean[k][r] = 1e3 * tr.clean;
            corrupted[k][r] = 1e3 * tr.corrupted;
            loop[k][r] =
                1e3 * (tr.clean + tr.corrupted + (double)c->runs * tr.pass);
            printf("round %d, %u threads: attnd %.1f ms (peak +%.1f MiB); "
                   "PyTorch on %d (BLAS %d): clean %.1f ms, "
                   "corrupted %.1f ms, a patched pass %.1f ms (%.1f to "
                   "%.1f over %zu), the loop %.1f ms: %.2fx\n",
                   r + 1, ct->threads, at[k][r], peak / MIB, tr.threads,
                   tr.blas_threads, clean[k][r], corrupted[k][r], pass[k][r],
                   1e3 * tr.fastest, 1e3 * tr.slowest, torch_heads, loop[k][r],
                   loop[k][r] / at[k][r]);
            fflush(stdout);
        }
    for (int k = 0; ok && k < sz->n_threads; k++) {
        struct case_timing *ct = &c->c[k];
        ct->attnd_ms = median(at[k], (size_t)rounds);
        ct->torch_pass_ms = median(pass[k], (size_t)rounds);
        ct->torch_clean_ms = median(clean[k], (size_t)rounds);
        ct->torch_corrupted_ms = median(corrupted[k], (size_t)rounds);
        ct->torch_loop_ms = median(loop[k], (size_t)rounds);
    }
    free(heads);
    torch_stop(&torch);
    model_free(model);
    return ok;
}

/* ------------------------------------------------------------- report */

static void print_table(const struct checkpoint *cs, int count,
                        const struct sizes *sz)
{
    printf("\n%5s %7s %10s | %10s %8s %8s | %11s %11s | %8s %8s | %9s "
           "%9s\n",
           "dtype", "threads", "batch_rows", "attnd ms", "a run ms", "GFLOP/s",
           "torch pass", "torch loop", "speedup", "vs best", "cost MiB",
           "peak MiB");
    for (int i = 0; i < count; i++)
        for (int k = 0; k < sz->n_threads; k++) {
            const struct checkpoint *c = &cs[i];
            const struct case_timing *t = &c->c[k];
            printf("%5s %7u %10zu | %10.1f %8.2f %8.1f | %11.1f %11.1f | "
                   "%7.2fx %7.2fx | %9.1f %9.1f\n",
                   c->dtype, t->threads, c->batch_rows, t->attnd_ms,
                   t->attnd_ms / (double)c->runs,
                   t->cost_gflop / (t->attnd_ms * 1e-3), t->torch_pass_ms,
                   t->torch_loop_ms, speedup(t),
                   speedup_best(c, sz->n_threads, t), t->cost_bytes / MIB,
                   t->peak_extra / MIB);
        }
}

static void print_targets(const struct checkpoint *cs, int count,
                          const struct sizes *sz)
{
    printf("\ntargets:\n");
    for (int i = 0; i < count; i++)
        for (int k = 0; k < sz->n_threads; k++) {
            const struct case_timing *t = &cs[i].c[k];
            const double best = speedup_best(&cs[i], sz->n_threads, t);
            printf("  %-4s %u threads: patching over heads >= %.1fx "
                   "PyTorch's loop on as many: %.2fx: %s; against its "
                   "fastest: %.2fx: %s\n",
                   cs[i].dtype, t->threads, TARGET_SPEEDUP, speedup(t),
                   speedup(t) >= TARGET_SPEEDUP ? "met" : "NOT met", best,
                   best >= TARGET_SPEEDUP ? "met" : "NOT met");
        }
}

static bool write_json(const char *path, const struct checkpoint *cs, int count,
                       const struct sizes *sz, int rounds, size_t torch_heads)
{
    FILE *fp = fopen(path, "w");
    if (!fp) {
        fprintf(stderr, "bench_patch: %s: %s\n", path, strerror(errno));
        return false;
    }
    fprintf(fp,
            "{\"corename\": \"%s\", \"cores\": %u, \"rounds\": %d, "
            "\"tokens\": %d, \"torch_heads_timed\": %zu, \"checkpoints\": [",
            attn_blas_core(), cores(), rounds, TOKENS, torch_heads);
    for (int i = 0; i < count; i++) {
        const struct checkpoint *c = &cs[i];
        const struct agreement *a = &c->agreement;
        fprintf(fp,
                "%s\n {\"dir\": \"%s\", \"dtype\": \"%s\", \"vocab\": %zu, "
                "\"runs\": %zu, \"rss_loaded\": %zu, \"batch_rows\": %zu,"
                "\n  \"batch_rows_ms\": [",
                i ? "," : "", c->dir, c->dtype, c->vocab, c->runs,
                c->file_loaded, c->batch_rows);
        for (int k = 0; k < sz->n_batch_rows && sz->n_batch_rows > 1; k++)
            fprintf(fp, "%s{\"batch_rows\": %zu, \"ms\": %.3f}", k ? ", " : "",
                    sz->batch_rows[k], c->batch_ms[k]);
        fprintf(fp,
                "],\n  \"agreement\": {\"largest\": %.3g, \"clean\": [%.9g, "
                "%.9g], \"corrupted\": [%.9g, %.9g], \"heads\": [",
                a->worst, a->clean[0], a->clean[1], a->corrupted[0],
                a->corrupted[1]);
        for (size_t h = 0; h < a->count; h++)
            fprintf(fp,
                    "%s{\"layer\": %zu, \"head\": %zu, \"attnd\": %.9g, "
                    "\"torch\": %.9g}",
                    h ? ", " : "", a->heads[2 * h], a->heads[2 * h + 1],
                    a->effect[0][h], a->effect[1][h]);
        fprintf(fp, "]},\n  \"cases\": [");
        for (int k = 0; k < sz->n_threads; k++) {
            const struct case_timing *t = &c->c[k];
            fprintf(fp,
                    "%s\n   {\"threads\": %u, \"torch_threads\": %d, "
                    "\"torch_blas_threads\": %d, "
                    "\"attnd_ms\": %.3f, \"cost_bytes\": %zu, "
                    "\"cost_gflop\": %.3f, \"cost_us\": %.3f, "
                    "\"peak_extra\": %zu, \"torch_pass_ms\": %.3f, "
                    "\"torch_clean_ms\": %.3f, \"torch_corrupted_ms\": %.3f, "
                    "\"torch_loop_ms\": %.3f, \"speedup\": %.3f, "
                    "\"speedup_vs_torch_fastest\": %.3f}",
                    k ? "," : "", t->threads, t->torch_threads,
                    t->torch_blas_threads, t->attnd_ms, t->cost_bytes,
                    t->cost_gflop, t->cost_us, t->peak_extra, t->torch_pass_ms,
                    t->torch_clean_ms, t->torch_corrupted_ms, t->torch_loop_ms,
                    speedup(t), speedup_best(c, sz->n_threads, t));
        }
        fprintf(fp, "]}");
    }
    fprintf(fp, "\n]}\n");
    fclose(fp);
    return true;
}

/* ------------------------------------------------------------------ main */

/* "a,b,c" into out [MAX_LIST]; its count, or -1. */
static int parse_list(const char *s, size_t *out)
{
    int count = 0;
    while (*s) {
        char *end;
        errno = 0;
        const unsigned long long v = strtoull(s, &end, 10);
        if (end == s || errno || v == 0 || count == MAX_LIST)
            return -1;
        out[count++] = (size_t)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return count ? count : -1;
}

int main(int argc, char **argv)
{
    const char *dirs[MAX_DIRS], *json_path = NULL;
    int n_dirs = 0, rounds = 3;
    size_t torch_heads = 32;
    uint64_t seed = 20240;
    struct sizes sz = {.threads = {2},
                       .n_threads = 1,
                       .batch_rows = {256, 512, 1024},
                       .n_batch_rows = 3};
    for (int i = 1; i < argc; i++) {
        size_t list[MAX_LIST];
        if (!strcmp(argv[i], "--json") && i + 1 < argc) {
            json_path = argv[++i];
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = (int)strtol(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--torch-heads") && i + 1 < argc) {
            torch_heads = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            sz.n_threads = parse_list(argv[++i], list);
            for (int k = 0; k < sz.n_threads; k++)
                sz.threads[k] = list[k] > 256 ? 0 : (unsigned)list[k];
        } else if (!strcmp(argv[i], "--batch-rows") && i + 1 < argc) {
            sz.n_batch_rows = parse_list(argv[++i], sz.batch_rows);
        } else if (argv[i][0] != '-' && n_dirs < MAX_DIRS) {
            dirs[n_dirs++] = argv[i];
        } else {
            n_dirs = -MAX_DIRS - 1;
        }
    }
    bool bad_threads = sz.n_threads < 1;
    for (int k = 0; k < sz.n_threads; k++)
        bad_threads = bad_threads || sz.threads[k] == 0;
    if (n_dirs < 1 || rounds < 1 || rounds > BENCH_MAX_ROUNDS || bad_threads ||
        sz.n_batch_rows < 1 || torch_heads < 1 || torch_heads > 4096) {
        fprintf(stderr,
                "usage: %s DIR... (1-%d) [--rounds R (1-%d)] [--threads "
                "T[,T...]] [--batch-rows B[,B...]] [--torch-heads K] "
                "[--seed S] [--json FILE]\n",
                argv[0], MAX_DIRS, BENCH_MAX_ROUNDS);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    attn_blas_single_thread();
    const char *core_env = getenv("OPENBLAS_CORETYPE");
    printf("OpenBLAS core: %s (OPENBLAS_CORETYPE=%s), %u cores; attnd: "
           "xf_patch_run over heads, denoising, %d-token prompts, a team of "
           "T threads with 1 BLAS thread each; PyTorch's loop on T threads "
           "(torch.set_num_threads and its OpenBLAS's), %zu patched passes "
           "timed a round; "
           "%d interleaved rounds, medians\n",
           attn_blas_core(), core_env ? core_env : "unset", cores(), TOKENS,
           torch_heads, rounds);
    struct checkpoint cs[MAX_DIRS];
    for (int i = 0; i < n_dirs; i++)
        if (!bench_checkpoint(dirs[i], &sz, rounds, torch_heads,
                              seed + (uint64_t)i, &cs[i]))
            return 1;
    print_table(cs, n_dirs, &sz);
    print_targets(cs, n_dirs, &sz);
    if (json_path &&
        !write_json(json_path, cs, n_dirs, &sz, rounds, torch_heads))
        return 1;
    return 0;
}
