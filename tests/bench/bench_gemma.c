/*
 * bench_gemma.c - a Gemma 2 prompt pass in attnd against the same network
 * in PyTorch, over the same weights, in one run.
 *
 *   bench_gemma SMALL DIR [--rounds R] [--json FILE]
 *   bench_gemma --passes DIR N THREADS COUNT
 *
 * SMALL is a small Gemma 2 checkpoint with float64 goldens
 * (tests/models/gemma2); DIR a Gemma-2-2B-sized one (make bench writes a
 * random BF16 one with tests/models/generate_gemma.py --gemma2-2b). The
 * reference is tests/bench/gemma_torch.py: Gemma2Model as transformers'
 * modeling_gemma2.py runs it eagerly with output_attentions=True, in
 * float32 over the weights widened at load.
 *
 * - The same network, on SMALL first: for three texts longer than its
 *   sliding window, every layer's attention weights, the last hidden
 *   states (after the final norm) and the last position's logits (after
 *   the final soft cap) of both sides must agree within the float32
 *   tolerances below (its soft caps, 3 and 5, and its window, 4, are
 *   small enough to matter there). Then, on DIR, the last hidden states at
 *   each length and the logits at the shortest, within the looser
 *   tolerances of 26 layers of 2304-term sums.
 * - Speed, on DIR: prompts of 32, 128 and 512 tokens (lengths[]), each
 *   round a different stretch of the corpus below (varied prose,
 *   dialogue, code, numbers, accents and CJK that the small tokenizer
 *   spells out in bytes), encoded by the checkpoint's tokenizer (BOS
 *   included) and cut to the length; PyTorch reads the same ids. Each round, for each length: the
 *   sgemm ceiling, then for each thread setting (one thread per core,
 *   then one) attnd's pass (xf_plan() and xf_forward(), every layer's
 *   attention weights returned, on a team of that many threads over
 *   single-threaded OpenBLAS) and PyTorch's on as many threads
 *   (torch.set_num_threads and its OpenBLAS's openblas_set_num_threads
 *   alike); each side timed on its second run in a row, PyTorch's process
 *   stopped while the others run (bench_torch.h). Medians over the
 *   rounds; the ratios are PyTorch's median over attnd's on the same
 *   threads, with the median, least and most of the rounds' own ratios
 *   beside them (a neighbour's load slows both sides of a round alike,
 *   less so of two medians), and PyTorch's fastest setting over
 *   attnd's.
 *
 * --passes runs COUNT passes of attnd alone over an N-token prompt on
 * THREADS threads and prints each one's time, and the CLOCK_MONOTONIC
 * seconds the passes began and ended at, for a profiler to keep to them
 * (perf record -k CLOCK_MONOTONIC, then perf report --time BEGIN,END).
 *
 * The GFLOP are decoder_products()'s (bench_torch.h): the network's
 * products as PyTorch computes them, and attnd's (the causal triangle;
 * the last layer stops after its weights). The prompts are shorter than
 * the 4096-token window, so sliding and global layers compute the same.
 */
#include "bench_clock.h"
#include "bench_torch.h"
#include "model/model.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TORCH_SCRIPT "tests/bench/gemma_torch.py"
#define TARGET_SPEEDUP 1.2 /* x PyTorch on the same threads */
/* SMALL: float32 against float32, values of order 1 */
#define TOL_SMALL_WEIGHTS 1e-5
#define TOL_SMALL_HIDDEN 1e-4
#define TOL_SMALL_LOGITS 1e-4
/* DIR: the last hidden states and logits */
#define TOL_HIDDEN 1e-3
#define TOL_LOGITS 1e-3
#define MAX_TOKENS 512

static const size_t lengths[] = {32, 128, 512};
enum { N_LENGTHS = sizeof lengths / sizeof lengths[0] };
static const size_t check_lengths[] = {12, 29, 47};
enum { N_CHECKS = sizeof check_lengths / sizeof check_lengths[0] };

/* Texts as traffic brings them: a prompt starts at a different one each
 * round and length and goes on through the next ones. */
static const char *const corpus[] = {
    "The committee met on Tuesday to discuss the budget for next year, "
    "and after three hours of debate it agreed to fund the new library.",
    "user: Can you explain why the sky is blue?\nmodel: Sunlight is "
    "scattered by the molecules of the air, and blue light is scattered "
    "more than red light because its wavelength is shorter.",
    "def mean(values):\n    total = 0\n    for v in values:\n        total "
    "+= v\n    return total / len(values)\n",
    "In 1969, 600 million people watched the landing; the module touched "
    "down at 20:17 UTC with about 25 seconds of fuel left.",
    "She opened the door slowly. The room was dark, and somewhere a clock "
    "was ticking, louder than any clock she had heard before.",
    "Preheat the oven to 180 degrees. Mix 250 g of flour, 2 eggs and a "
    "pinch of salt, then bake for 35 minutes until golden.",
    "Les enfants ont mangé des crêpes au café près de la gare, puis ils "
    "sont allés au musée.",
    "SELECT name, count(*) FROM orders WHERE total > 100 GROUP BY name "
    "ORDER BY 2 DESC;",
    "The cat sat on the mat. The dog looked at the cat, and the cat looked "
    "back at the dog without moving at all.",
    "Q: What is 17 times 23? A: 17 times 23 is 391, since 17 times 20 is "
    "340 and 17 times 3 is 51.",
    "東京の天気は晴れです。 The weather in Tokyo is clear today, with a "
    "high of 21 degrees.",
    "Error: connection refused (errno 111) while reading "
    "/var/run/service.sock; retrying in 5 s.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and "
    "oxygen, and nearly all life on land depends on it.",
    "<start_of_turn>user\nWrite a short poem about the sea.<end_of_turn>\n"
    "<start_of_turn>model\nGrey waves fold over, the gulls cry, and the "
    "tide goes out again.",
    "The quick brown fox jumps over the lazy dog, but the lazy dog does "
    "not care and goes back to sleep in the sun.",
    "Revenue grew 12.5% to $4.2 billion in the third quarter, while costs "
    "rose 8% and the margin widened by 1.3 points.",
};
enum { N_CORPUS = sizeof corpus / sizeof corpus[0] };

/* The first n ids of the corpus read from text start on, as the
 * tokenizer encodes it (what it adds included), into ids: the sentences
 * are added until the encoding has n tokens or more; false if the corpus
 * is too short or the tokenizer fails. */
static bool text_ids(const struct tokenizer *tok, size_t start, size_t n,
                     uint32_t *ids)
{
    size_t cap = 1, len = 0;
    for (size_t i = 0; i < N_CORPUS; i++)
        cap += strlen(corpus[i]) + 1;
    char *text = malloc(cap * 4);
    if (!text)
        return false;
    text[0] = '\0';
    bool ok = false;
    /* the corpus up to four times over, from start on */
    for (size_t i = 0; i < 4 * N_CORPUS && !ok; i++) {
        const char *s = corpus[(start + i) % N_CORPUS];
        len += (size_t)snprintf(text + len, cap * 4 - len, "%s%s",
                                len ? " " : "", s);
        struct tok_encoding enc;
        struct attn_error err;
        if (tok_encode(tok, text, len, NULL, 0, NULL, &enc, &err) !=
            ATTN_OK) {
            fprintf(stderr, "bench_gemma: %s\n", err.message);
            break;
        }
        if (enc.count >= n) {
            memcpy(ids, enc.ids, n * sizeof *ids);
            ok = true;
        }
        tok_encoding_free(&enc);
    }
    free(text);
    return ok;
}

/* ids [n] into path, little-endian uint32, as torch_protocol.py reads
 * them. */
static bool write_ids(const char *path, const uint32_t *ids, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    const bool ok = fwrite(ids, sizeof *ids, n, f) == n;
    return fclose(f) == 0 && ok;
}

/* One pass of attnd over ids on a team of threads threads (each with
 * single-threaded OpenBLAS), asking for want; into *r (the caller frees
 * it with xf_result_free()). */
static bool attnd_result(const struct xf_model *m, const uint32_t *ids,
                         size_t n, unsigned want, unsigned threads,
                         struct xf_result *r)
{
    const struct xf_run run = {.ids = ids,
                               .n = n,
                               .want = want,
                               .layer = XF_ALL_LAYERS,
                               .threads = threads};
    struct xf_plan plan;
    struct attn_error err;
    attn_status st = xf_plan(m, &run, &plan, &err);
    if (st == ATTN_OK)
        st = xf_forward(&plan, NULL, r, &err);
    if (st != ATTN_OK)
        fprintf(stderr, "bench_gemma: attnd's pass: %s\n", err.message);
    return st == ATTN_OK;
}

/* PyTorch's answer to "CMD N PATH IDS": count floats, read from PATH into
 * a malloc'd array; NULL on failure. */
static float *torch_floats(struct torch *t, const char *cmd, size_t n,
                           const char *ids_path, size_t count)
{
    char path[] = "/tmp/bench-gemma-XXXXXX", line[4400], answer[64];
    const int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    close(fd);
    snprintf(line, sizeof line, "%s %zu %s %s", cmd, n, path, ids_path);
    float *out = malloc(count * sizeof *out);
    FILE *f = NULL;
    if (!out || !torch_ask(t, line, answer, sizeof answer) ||
        strncmp(answer, "ok", 2) || !(f = fopen(path, "rb")) ||
        fread(out, sizeof *out, count, f) != count) {
        free(out);
        out = NULL;
    }
    if (f)
        fclose(f);
    remove(path);
    return out;
}

/* The largest |a - b| over count values; INFINITY where either is not
 * finite or b is missing. */
static double largest_difference(const float *a, const float *b,
                                 size_t count)
{
    if (!a || !b)
        return INFINITY;
    double worst = 0.0;
    for (size_t i = 0; i < count; i++) {
        const double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= worst))
            worst = d;
    }
    return worst;
}

/* What the two sides' numbers differed by, at most. */
struct agreement {
    double weights, hidden, logits;
};

/* Both sides over ids [n]: every layer's weights (with_weights), the last
 * hidden states, and the logits (with_logits); the largest differences. */
static bool compare_sides(const struct xf_model *m, struct torch *t,
                          const char *ids_path, const uint32_t *ids, size_t n,
                          bool with_weights, bool with_logits,
                          struct agreement *a)
{
    const unsigned want = XF_WANT_HIDDEN | (with_weights ? XF_WANT_WEIGHTS : 0) |
                          (with_logits ? XF_WANT_LOGITS : 0);
    struct xf_result r;
    if (!attnd_result(m, ids, n, want, cores(), &r))
        return false;
    const size_t H = m->hidden, L = m->layers;
    *a = (struct agreement){0};
    float *theirs = torch_floats(t, "dump", n, ids_path, n * H);
    a->hidden = largest_difference(r.hidden_states + L * n * H, theirs, n * H);
    free(theirs);
    if (with_weights) {
        const size_t count = L * m->heads * n * n;
        theirs = torch_floats(t, "attn", n, ids_path, count);
        a->weights = largest_difference(r.weights, theirs, count);
        free(theirs);
    }
    if (with_logits) {
        theirs = torch_floats(t, "logits", n, ids_path, m->vocab_size);
        a->logits = largest_difference(r.logits, theirs, m->vocab_size);
        free(theirs);
    }
    xf_result_free(&r);
    return true;
}

/* The small checkpoint: both sides compute the same network. */
static bool check_small(const char *dir, const char *ids_path,
                        struct agreement *worst)
{
    char err[1024];
    struct model *model = NULL;
    if (!model_load("small", dir, &model, err, sizeof err)) {
        fprintf(stderr, "bench_gemma: %s\n", err);
        return false;
    }
    const struct xf_model *m = &model->xf;
    struct torch torch = {0};
    if (!torch_start(&torch, TORCH_SCRIPT, dir)) {
        fprintf(stderr, "bench_gemma: %s %s did not start (python3-torch?)\n",
                BENCH_PYTHON, TORCH_SCRIPT);
        model_free(model);
        return false;
    }
    *worst = (struct agreement){0};
    bool ok = true;
    for (size_t k = 0; k < N_CHECKS && ok; k++) {
        uint32_t ids[64];
        const size_t n = check_lengths[k];
        struct agreement a;
        ok = text_ids(&model->tokenizer, 5 * k, n, ids) &&
             write_ids(ids_path, ids, n) &&
             compare_sides(m, &torch, ids_path, ids, n, true, true, &a);
        if (!ok)
            break;
        printf("%s, %zu tokens: every layer's weights within %.2g, the last "
               "hidden states within %.2g, the logits within %.2g\n",
               dir, n, a.weights, a.hidden, a.logits);
        worst->weights = fmax(worst->weights, a.weights);
        worst->hidden = fmax(worst->hidden, a.hidden);
        worst->logits = fmax(worst->logits, a.logits);
    }
    torch_stop(&torch);
    model_free(model);
    if (ok && !(worst->weights <= TOL_SMALL_WEIGHTS &&
                worst->hidden <= TOL_SMALL_HIDDEN &&
                worst->logits <= TOL_SMALL_LOGITS)) {
        fprintf(stderr,
                "bench_gemma: attnd and PyTorch disagree on %s (tolerances: "
                "weights %g, hidden states %g, logits %g)\n",
                dir, TOL_SMALL_WEIGHTS, TOL_SMALL_HIDDEN, TOL_SMALL_LOGITS);
        ok = false;
    }
    return ok;
}

/* The thread settings, both sides alike: a team of one thread per core,
 * then one thread (PyTorch: torch.set_num_threads and its OpenBLAS's). */
enum { MAX_SETTINGS = 2 };

static unsigned settings(unsigned *threads)
{
    threads[0] = cores();
    threads[1] = 1;
    return cores() > 1 ? 2 : 1;
}

/* One length's medians and ratios, for each thread setting. */
struct length_timing {
    double attnd_ms[MAX_SETTINGS], torch_ms[MAX_SETTINGS];
    double ratio[MAX_SETTINGS];       /* PyTorch's median over attnd's */
    double ratio_median[MAX_SETTINGS]; /* the median, least and most of */
    double ratio_min[MAX_SETTINGS];    /* the rounds' own ratios */
    double ratio_max[MAX_SETTINGS];
    double ratio_best;              /* fastest over fastest */
    double ceiling_gflops;
    double net_gflop, attnd_gflop;
    struct agreement agree;
};

/* Seconds of attnd's pass over ids on threads threads (XF_WANT_WEIGHTS:
 * every layer's attention weights returned); -1 on failure. */
static double attnd_seconds(const struct xf_model *m, const uint32_t *ids,
                            size_t n, unsigned threads)
{
    struct xf_result r;
    const double t0 = now_seconds();
    if (!attnd_result(m, ids, n, XF_WANT_WEIGHTS, threads, &r))
        return -1.0;
    const double t = now_seconds() - t0;
    xf_result_free(&r);
    return t;
}

/* Seconds of PyTorch's second pass in a row over the ids in ids_path. */
static double torch_seconds(struct torch *t, size_t n, unsigned threads,
                            const char *ids_path)
{
    char cmd[4200], line[128];
    snprintf(cmd, sizeof cmd, "run %zu %u %s", n, threads, ids_path);
    if (!torch_ask(t, cmd, line, sizeof line))
        return -1.0;
    return strtod(line, NULL);
}

/* The timed rounds over the prompts ids[r][k] (lengths[k] tokens each),
 * written to paths[r][k]. */
static bool time_gemma(const struct xf_model *m, struct torch *t,
                       struct sgemm_ctx *sg, int rounds,
                       uint32_t (*ids)[N_LENGTHS][MAX_TOKENS],
                       char (*paths)[N_LENGTHS][64], struct length_timing *out)
{
    static double ce[N_LENGTHS][BENCH_MAX_ROUNDS],
        at[N_LENGTHS][MAX_SETTINGS][BENCH_MAX_ROUNDS],
        pt[N_LENGTHS][MAX_SETTINGS][BENCH_MAX_ROUNDS],
        ratio[N_LENGTHS][MAX_SETTINGS][BENCH_MAX_ROUNDS];
    unsigned threads[MAX_SETTINGS];
    const unsigned S = settings(threads);
    for (int r = 0; r < rounds; r++) {
        for (size_t k = 0; k < N_LENGTHS; k++) {
            const size_t n = lengths[k];
            printf("  round %d, N=%zu:", r + 1, n);
            /* each side on its second run in a row (bench_torch.h) */
            ceiling_once(sg);
            ce[k][r] = ceiling_once(sg);
            for (unsigned s = 0; s < S; s++) {
                attnd_seconds(m, ids[r][k], n, threads[s]);
                at[k][s][r] = attnd_seconds(m, ids[r][k], n, threads[s]);
                pt[k][s][r] = torch_seconds(t, n, threads[s], paths[r][k]);
                if (at[k][s][r] < 0 || pt[k][s][r] < 0)
                    return false;
                ratio[k][s][r] = pt[k][s][r] / at[k][s][r];
                printf("%s %u thread%s: attnd %.1f ms, PyTorch %.1f ms "
                       "(%.2fx)",
                       s ? ";" : "", threads[s], threads[s] > 1 ? "s" : "",
                       1e3 * at[k][s][r], 1e3 * pt[k][s][r], ratio[k][s][r]);
            }
            printf("\n");
            fflush(stdout);
        }
    }
    const size_t R = (size_t)rounds;
    for (size_t k = 0; k < N_LENGTHS; k++) {
        struct length_timing *o = &out[k];
        double fast_attnd = INFINITY, fast_torch = INFINITY;
        for (unsigned s = 0; s < S; s++) {
            o->ratio_min[s] = o->ratio_max[s] = ratio[k][s][0];
            for (size_t r = 1; r < R; r++) {
                o->ratio_min[s] = fmin(o->ratio_min[s], ratio[k][s][r]);
                o->ratio_max[s] = fmax(o->ratio_max[s], ratio[k][s][r]);
            }
            o->ratio_median[s] = median(ratio[k][s], R);
            o->attnd_ms[s] = 1e3 * median(at[k][s], R);
            o->torch_ms[s] = 1e3 * median(pt[k][s], R);
            o->ratio[s] = o->torch_ms[s] / o->attnd_ms[s];
            fast_attnd = fmin(fast_attnd, o->attnd_ms[s]);
            fast_torch = fmin(fast_torch, o->torch_ms[s]);
        }
        o->ratio_best = fast_torch / fast_attnd;
        o->ceiling_gflops = 2.0 * CEILING_SIZE * CEILING_SIZE * CEILING_SIZE /
                            median(ce[k], R) * 1e-9;
    }
    return true;
}

struct run {
    const char *small, *dir, *dtype;
    int rounds;
    struct agreement small_agree;
    struct length_timing t[N_LENGTHS];
};

static bool bench_dir(struct run *run, struct sgemm_ctx *sg,
                      const char *tmp_dir)
{
    char err[1024];
    struct model *model = NULL;
    if (!model_load("bench", run->dir, &model, err, sizeof err)) {
        fprintf(stderr, "bench_gemma: %s\n", err);
        return false;
    }
    const struct xf_model *m = &model->xf;
    run->dtype = attn_dtype_name((int)m->layer[0].q_w.dtype);
    printf("\n%s: %s, %zu layers, hidden %zu, %zu heads on %zu KV heads of "
           "%zu, intermediate %zu, vocab %zu, scale %.4g, soft caps %g and "
           "%g\n",
           run->dir, run->dtype, m->layers, m->hidden, m->heads, m->kv_heads,
           m->head_dim, m->intermediate, m->vocab_size, (double)m->attn_scale,
           (double)m->attn_softcap, (double)m->final_softcap);
    /* every prompt, before anything is timed */
    uint32_t(*ids)[N_LENGTHS][MAX_TOKENS] =
        malloc((size_t)run->rounds * sizeof *ids);
    char(*paths)[N_LENGTHS][64] = malloc((size_t)run->rounds * sizeof *paths);
    bool ok = ids && paths;
    for (int r = 0; r < run->rounds && ok; r++)
        for (size_t k = 0; k < N_LENGTHS && ok; k++) {
            snprintf(paths[r][k], sizeof paths[r][k], "%s/ids-%d-%zu", tmp_dir,
                     r, k);
            ok = text_ids(&model->tokenizer, (size_t)r * 3 + k * 7, lengths[k],
                          ids[r][k]) &&
                 write_ids(paths[r][k], ids[r][k], lengths[k]);
        }
    if (!ok)
        fprintf(stderr, "bench_gemma: no prompts of %zu tokens\n",
                lengths[N_LENGTHS - 1]);
    struct torch torch = {0};
    if (ok && !torch_start(&torch, TORCH_SCRIPT, run->dir)) {
        fprintf(stderr, "bench_gemma: %s %s did not start\n", BENCH_PYTHON,
                TORCH_SCRIPT);
        ok = false;
    }
    for (size_t k = 0; k < N_LENGTHS && ok; k++) {
        struct length_timing *o = &run->t[k];
        decoder_products(m, lengths[k], &o->net_gflop, &o->attnd_gflop);
        ok = compare_sides(m, &torch, paths[0][k], ids[0][k], lengths[k],
                           false, k == 0, &o->agree);
        if (ok && !(o->agree.hidden <= TOL_HIDDEN &&
                    o->agree.logits <= TOL_LOGITS)) {
            fprintf(stderr,
                    "bench_gemma: attnd and PyTorch disagree on %s, N=%zu: "
                    "hidden states %g, logits %g\n",
                    run->dir, lengths[k], o->agree.hidden, o->agree.logits);
            ok = false;
        }
        if (ok)
            printf("N=%zu: the last hidden states agree within %.2g%s\n",
                   lengths[k], o->agree.hidden,
                   k == 0 ? "" : " (logits: at the first length)");
        if (ok && k == 0)
            printf("N=%zu: the logits (after the final soft cap) agree "
                   "within %.2g\n",
                   lengths[k], o->agree.logits);
    }
    fflush(stdout);
    if (ok)
        ok = time_gemma(m, &torch, sg, run->rounds, ids, paths, run->t);
    if (torch.pid)
        torch_stop(&torch);
    for (int r = 0; paths && r < run->rounds; r++)
        for (size_t k = 0; k < N_LENGTHS; k++)
            remove(paths[r][k]);
    free(ids);
    free(paths);
    model_free(model);
    return ok;
}

static void print_results(const struct run *run)
{
    unsigned threads[MAX_SETTINGS];
    const unsigned S = settings(threads);
    printf("\n%5s %5s %7s %7s", "dtype", "N", "GFLOP", "attnd's");
    for (unsigned s = 0; s < S; s++)
        printf(" | %2u thr: %8s %8s %6s %17s", threads[s], "attnd ms",
               "torch ms", "ratio", "rounds");
    printf(" | %6s | %8s %8s %8s\n", "best", "attnd GF/s", "sgemm GF/s",
           "fraction");
    for (size_t k = 0; k < N_LENGTHS; k++) {
        const struct length_timing *t = &run->t[k];
        const double gfs = t->attnd_gflop / (t->attnd_ms[0] * 1e-3);
        printf("%5s %5zu %7.1f %7.1f", run->dtype, lengths[k], t->net_gflop,
               t->attnd_gflop);
        for (unsigned s = 0; s < S; s++)
            printf(" |         %8.1f %8.1f %5.2fx %5.2fx %5.2f-%4.2fx",
                   t->attnd_ms[s], t->torch_ms[s], t->ratio[s],
                   t->ratio_median[s], t->ratio_min[s], t->ratio_max[s]);
        printf(" | %5.2fx | %10.1f %10.1f %8.2f\n", t->ratio_best, gfs,
               t->ceiling_gflops, gfs / t->ceiling_gflops);
    }
    printf("(ratio: PyTorch's median over attnd's on the same threads; "
           "rounds: the median, least and most of the rounds' own ratios; "
           "best: "
           "PyTorch's fastest setting over attnd's; GF/s: attnd's products "
           "on %u threads)\n",
           threads[0]);
    printf("\ntarget: attnd >= %.1fx PyTorch on the same threads at every "
           "length:",
           TARGET_SPEEDUP);
    bool met = true;
    for (size_t k = 0; k < N_LENGTHS; k++)
        for (unsigned s = 0; s < S; s++) {
            printf(" %.2fx (N=%zu, %u thr.)", run->t[k].ratio[s], lengths[k],
                   threads[s]);
            met = met && run->t[k].ratio[s] >= TARGET_SPEEDUP;
        }
    printf(": %s\n", met ? "met" : "NOT met");
}

static bool write_json(const char *path, const struct run *run)
{
    FILE *fp = fopen(path, "w");
    if (!fp) {
        fprintf(stderr, "bench_gemma: %s: %s\n", path, strerror(errno));
        return false;
    }
    unsigned threads[MAX_SETTINGS];
    const unsigned S = settings(threads);
    const char *env = getenv("OPENBLAS_CORETYPE");
    fprintf(fp,
            "{\"corename\": \"%s\", \"openblas_coretype\": \"%s\", "
            "\"cores\": %u, \"rounds\": %d,\n"
            " \"small\": {\"dir\": \"%s\", \"weights\": %.3g, \"hidden\": "
            "%.3g, \"logits\": %.3g},\n"
            " \"dir\": \"%s\", \"dtype\": \"%s\", \"cases\": [",
            openblas_get_corename(), env ? env : "", cores(), run->rounds,
            run->small, run->small_agree.weights, run->small_agree.hidden,
            run->small_agree.logits, run->dir, run->dtype);
    for (size_t k = 0; k < N_LENGTHS; k++) {
        const struct length_timing *t = &run->t[k];
        fprintf(fp,
                "%s\n  {\"n\": %zu, \"agree_hidden\": %.3g, "
                "\"agree_logits\": %.3g, \"matmul_gflop\": %.3f, "
                "\"attnd_gflop\": %.3f, \"sgemm_gflops\": %.2f, "
                "\"speedup_best\": %.3f, \"threads\": [",
                k ? "," : "", lengths[k], t->agree.hidden, t->agree.logits,
                t->net_gflop, t->attnd_gflop, t->ceiling_gflops,
                t->ratio_best);
        for (unsigned s = 0; s < S; s++)
            fprintf(fp,
                    "%s{\"threads\": %u, \"attnd_ms\": %.3f, \"torch_ms\": "
                    "%.3f, \"speedup\": %.3f, \"round_speedup_median\": "
                    "%.3f, \"round_speedup_min\": %.3f, "
                    "\"round_speedup_max\": %.3f}",
                    s ? ", " : "", threads[s], t->attnd_ms[s], t->torch_ms[s],
                    t->ratio[s], t->ratio_median[s], t->ratio_min[s],
                    t->ratio_max[s]);
        fprintf(fp, "]}");
    }
    fprintf(fp, "\n]}\n");
    fclose(fp);
    return true;
}

/* --passes: attnd's passes alone, for a profiler. */
static int passes_only(const char *dir, size_t n, unsigned threads, int count)
{
    char err[1024];
    struct model *model = NULL;
    if (!model_load("bench", dir, &model, err, sizeof err)) {
        fprintf(stderr, "bench_gemma: %s\n", err);
        return 1;
    }
    uint32_t *ids = malloc(n * sizeof *ids);
    bool ok = ids && text_ids(&model->tokenizer, 0, n, ids);
    printf("passes from %.6f\n", now_seconds());
    for (int p = 0; p < count && ok; p++) {
        const double t = attnd_seconds(&model->xf, ids, n, threads);
        ok = t >= 0;
        printf("pass %d: %.1f ms\n", p + 1, 1e3 * t);
    }
    printf("passes to %.6f\n", now_seconds());
    free(ids);
    model_free(model);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 6 && !strcmp(argv[1], "--passes")) {
        const size_t n = strtoul(argv[3], NULL, 10);
        const long threads = strtol(argv[4], NULL, 10);
        const int count = (int)strtol(argv[5], NULL, 10);
        if (n < 1 || n > MAX_TOKENS || threads < 1 || threads > 64 ||
            count < 1) {
            fprintf(stderr, "bench_gemma --passes DIR N (1-%d) THREADS "
                            "(1-64) COUNT\n",
                    MAX_TOKENS);
            return 2;
        }
        attn_blas_single_thread();
        return passes_only(argv[2], n, (unsigned)threads, count);
    }
    struct run run = {.rounds = 5};
    const char *json_path = NULL;
    int positional = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            run.rounds = (int)strtol(argv[++i], NULL, 10);
        else if (argv[i][0] != '-' && positional == 0 && ++positional)
            run.small = argv[i];
        else if (argv[i][0] != '-' && positional == 1 && ++positional)
            run.dir = argv[i];
        else
            positional = -1;
    }
    if (positional != 2 || run.rounds < 1 || run.rounds > BENCH_MAX_ROUNDS) {
        fprintf(stderr,
                "usage: %s SMALL DIR [--rounds R (1-%d)] [--json FILE]\n"
                "       %s --passes DIR N THREADS COUNT\n",
                argv[0], BENCH_MAX_ROUNDS, argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    attn_blas_single_thread();
    char tmp_dir[] = "/tmp/bench-gemma-XXXXXX";
    if (!mkdtemp(tmp_dir))
        return 1;
    char ids_path[64];
    snprintf(ids_path, sizeof ids_path, "%s/ids", tmp_dir);
    struct sgemm_ctx sg;
    bool ok = ceiling_init(&sg);
    if (ok) {
        ceiling_once(&sg);
        print_setup(run.rounds);
        printf("here both sides run on %u threads and then on 1\n", cores());
        ok = check_small(run.small, ids_path, &run.small_agree);
        remove(ids_path);
    }
    if (ok)
        printf("%s: the same network on both sides, within %g (weights), %g "
               "(last hidden states) and %g (logits)\n",
               run.small, TOL_SMALL_WEIGHTS, TOL_SMALL_HIDDEN,
               TOL_SMALL_LOGITS);
    ok = ok && bench_dir(&run, &sg, tmp_dir);
    ceiling_free(&sg);
    rmdir(tmp_dir);
    if (!ok)
        return 1;
    print_results(&run);
    if (json_path && !write_json(json_path, &run))
        return 1;
    return 0;
}
