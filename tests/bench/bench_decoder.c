/*
 * bench_decoder.c - the core's LLaMA decoder against PyTorch and against
 * this machine's own cblas_sgemm, in the same run, and the memory a
 * loaded decoder holds.
 *
 *   bench_decoder DIR... [--rounds R] [--json FILE] [--decoding-only]
 *
 * Each DIR holds a LLaMA checkpoint with its tokenizer (make bench writes
 * Llama-3.2-1B-sized random ones, F32 and BF16, with
 * tests/models/generate_decoders.py --llama-1b). For each, in turn:
 *
 * - resident memory: this process's VmRSS before model_load(), after it,
 *   and after one 128-token pass (every layer's weights returned, the
 *   result freed); the differences against the safetensors files' size.
 *   The matrices are read in place from a read-only mapping at the width
 *   they are stored in, so after a pass the mapped pages a pass reads
 *   (all of them but the embedding rows of tokens not asked for) are
 *   resident, and nothing else the size of the weights should be.
 * - speed: for 128 and 512 tokens, every layer's attention weights
 *   returned, interleaved rounds of the sgemm ceiling, attnd's pass and
 *   the same network in PyTorch float32 eager over the same file
 *   (tests/bench/llama_torch.py, 16-bit weights widened at load) on 1 and
 *   2 threads, as bench_torch.h describes; medians. Before timing, both
 *   sides' last hidden states (after the final norm) must agree within
 *   TOLERANCE.
 * - decoding (bench_decode.h): the time to the first token of a
 *   128-token prompt through a KV cache and of each of 32 greedy tokens
 *   after it, against the bound the same run's read bandwidth sets (the
 *   best of bandwidth.h's read loops, measured before each round).
 * - serving: the peak resident memory (VmHWM) of $ATTND_BIN (default
 *   build/attnd) started with --model on the folder (by
 *   tests/integration/harness.c, on a loopback port) while it answers one
 *   POST /attention of a 128-token text (its tokenizer's BOS included),
 *   with the default return: every layer's weights, as JSON.
 *
 * The network's products per layer are 2NH(hD + 2gD) for q, k and v,
 * 2N hD H for the output projection, 6NHJ (J the intermediate size) for the
 * gated feed-forward and 4N^2 hD for QK^T and PV over every pair, as PyTorch
 * computes them. attnd's count takes the causal triangle only (N(N+1)/2 pairs a
 * head), and leaves out what the last layer does after its weights (its PV,
 * output projection and feed-forward: nothing reads them when no hidden
 * state is returned, and src/transformer.c skips them); its GFLOP/s are
 * those products over its time.
 */
#include "bench_clock.h"
#include "bench_decode.h"
#include "bench_torch.h"
#include "harness.h"
#include "model/model.h"

#include <cblas.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TORCH_SCRIPT "tests/bench/llama_torch.py"
#define SERVE_TOKENS 128
#define TOLERANCE 1e-3
#define MAX_DIRS 4
#define MIB (1024.0 * 1024.0)

/* The targets. */
#define TARGET_F32_SPEEDUP 1.2
#define TARGET_16BIT_SPEEDUP 1.0
#define TARGET_RESIDENT 1.05           /* x the file size */
#define TARGET_FRACTION 0.7            /* of the sgemm ceiling, at 512 */
#define TARGET_PEAK_EXTRA (96.0 * MIB) /* over the file size */
#define TARGET_OF_BOUND 0.5            /* tokens a second, of the bound */
#define DECODE_TOKENS 32               /* timed after each prompt */

static const size_t lengths[] = {128, 512};
enum { N_LENGTHS = 2 };

struct memory {
    size_t baseline, loaded, after_pass;     /* VmRSS */
    size_t file_after_pass, anon_after_pass; /* RssFile, RssAnon, less the
                                                baseline's */
};

struct serving {
    bool ok;
    size_t loaded_hwm, peak_hwm; /* VmHWM once serving, after the answer */
    size_t tokens, answer_bytes;
};

struct checkpoint {
    const char *dir;
    const char *dtype;
    size_t file_bytes;
    struct memory mem;
    struct serving serve;
    double agree[N_LENGTHS];
    struct timing t[N_LENGTHS];
    double net_gflop[N_LENGTHS], attnd_gflop[N_LENGTHS];
    struct decoding dec;
    /* PyTorch's decoding loop, medians: to the first token, a token, on
     * 1 and 2 threads */
    double torch_first_ms[2], torch_token_ms[2];
};

/* PyTorch's greedy decoding loop with a KV cache after the same prompt,
 * rounds times on 1 and on 2 threads; medians. */
static bool torch_decoding(struct torch *torch, int rounds,
                           struct checkpoint *c)
{
    double first[2][BENCH_MAX_ROUNDS], token[2][BENCH_MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 2; k++)
            if (!torch_decode(torch, SERVE_TOKENS, DECODE_TOKENS, k + 1,
                              &first[k][r], &token[k][r]))
                return false;
    for (int k = 0; k < 2; k++) {
        c->torch_first_ms[k] = 1e3 * median(first[k], (size_t)rounds);
        c->torch_token_ms[k] = 1e3 * median(token[k], (size_t)rounds);
    }
    return true;
}

static size_t self_status(const char *field)
{
    return status_bytes(getpid(), field);
}

/* The bytes of the folder's *.safetensors files. */
static size_t safetensors_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    size_t total = 0;
    const struct dirent *e;
    while (d && (e = readdir(d))) {
        const size_t len = strlen(e->d_name);
        if (len < 12 || strcmp(e->d_name + len - 12, ".safetensors"))
            continue;
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!stat(path, &st))
            total += (size_t)st.st_size;
    }
    if (d)
        closedir(d);
    return total;
}

/* A text of exactly `want` tokens under tok (what it adds included), of
 * common words; NULL if none is found. */
static char *text_of_tokens(const struct tokenizer *tok, size_t want)
{
    static const char *const words[] = {" the", " cat", " sat", " on",
                                        " the", " mat", ".",    " a",
                                        " dog", " and", ",",    " it"};
    enum { N_WORDS = sizeof words / sizeof *words };
    const size_t cap = want * 8 + 64;
    char *text = malloc(cap);
    if (!text)
        return NULL;
    size_t len = (size_t)snprintf(text, cap, "The");
    size_t next = 0;
    for (;;) {
        struct tok_encoding enc;
        struct attn_error err;
        if (tok_encode(tok, text, len, NULL, 0, 0, &enc, &err) != ATTN_OK)
            break;
        const size_t count = enc.count;
        tok_encoding_free(&enc);
        if (count == want)
            return text;
        if (count > want || len + 16 > cap)
            break;
        /* the next word that does not overshoot */
        bool grown = false;
        for (size_t k = 0; k < N_WORDS && !grown; k++) {
            const char *w = words[(next + k) % N_WORDS];
            memcpy(text + len, w, strlen(w) + 1);
            if (tok_encode(tok, text, len + strlen(w), NULL, 0, 0, &enc,
                           &err) != ATTN_OK)
                break;
            if (enc.count <= want) {
                len += strlen(w);
                next = (next + k + 1) % N_WORDS;
                grown = true;
            } else {
                text[len] = '\0';
            }
            tok_encoding_free(&enc);
        }
        if (!grown)
            break;
    }
    free(text);
    return NULL;
}

/* The server's peak resident memory around one request of text. */
static struct serving serve_once(const char *dir, const char *text)
{
    struct serving out = {0};
    char model_arg[4200];
    snprintf(model_arg, sizeof model_arg, "bench=%s", dir);
    const char *const args[] = {"--model", model_arg, NULL};
    struct server s;
    if (!server_start(&s, args)) {
        fprintf(stderr, "bench_decoder: the server did not start on %s\n", dir);
        return out;
    }
    out.loaded_hwm = status_bytes(s.pid, "VmHWM:");
    const size_t cap = strlen(text) + 64;
    char *body = malloc(cap);
    struct reply r = {0};
    if (body) {
        snprintf(body, cap, "{\"model\":\"bench\",\"sentence\":\"%s\"}", text);
        if (post_json(&s, "/attention", body, &r) && r.status == 200) {
            const char *c = strstr(r.body, "\"config\":{\"tokens\":");
            out.tokens = c ? strtoull(c + 19, NULL, 10) : 0;
            out.answer_bytes = r.len;
            out.peak_hwm = status_bytes(s.pid, "VmHWM:");
            out.ok = out.tokens == SERVE_TOKENS;
        } else {
            fprintf(stderr,
                    "bench_decoder: the request was answered %ld: %.300s\n",
                    r.status, r.body ? r.body : "(nothing)");
        }
        reply_free(&r);
    }
    free(body);
    server_stop(&s, 30.0);
    return out;
}

static bool bench_checkpoint(const char *dir, struct sgemm_ctx *sg, int rounds,
                             struct checkpoint *c)
{
    memset(c, 0, sizeof *c);
    c->dir = dir;
    c->file_bytes = safetensors_bytes(dir);
    const size_t base_file = self_status("RssFile:"),
                 base_anon = self_status("RssAnon:");
    c->mem.baseline = self_status("VmRSS:");
    char err[1024];
    struct model *model = NULL;
    if (!model_load("bench", dir, &model, err, sizeof err)) {
        fprintf(stderr, "bench_decoder: %s\n", err);
        return false;
    }
    c->mem.loaded = self_status("VmRSS:");
    const struct xf_model *m = &model->xf;
    c->dtype = attn_dtype_name((int)m->layer[0].q_w.dtype);
    printf("\n%s: %s, %zu layers, hidden %zu, %zu heads on %zu KV heads of "
           "%zu, intermediate %zu, vocab %zu; %.1f MB of safetensors\n",
           dir, c->dtype, m->layers, m->hidden, m->heads, m->kv_heads,
           m->head_dim, m->intermediate, m->vocab_size, c->file_bytes / 1e6);
    uint32_t ids[512];
    bench_ids(ids, SERVE_TOKENS, m->vocab_size);
    struct xf_result pass = {0};
    const bool ran =
        attnd_run(m, ids, SERVE_TOKENS, XF_WANT_WEIGHTS, &pass) >= 0;
    xf_result_free(&pass);
    if (!ran)
        return false;
    c->mem.after_pass = self_status("VmRSS:");
    c->mem.file_after_pass = self_status("RssFile:") - base_file;
    c->mem.anon_after_pass = self_status("RssAnon:") - base_anon;
    printf("resident, less the %.1f MiB before loading: %.1f MiB loaded, "
           "%.1f MiB after a %d-token pass (%.1f MiB of the mapped files, "
           "%.1f MiB anonymous): %.3f x the files\n",
           c->mem.baseline / MIB, (c->mem.loaded - c->mem.baseline) / MIB,
           (c->mem.after_pass - c->mem.baseline) / MIB, SERVE_TOKENS,
           c->mem.file_after_pass / MIB, c->mem.anon_after_pass / MIB,
           (double)(c->mem.after_pass - c->mem.baseline) /
               (double)c->file_bytes);
    char *text = text_of_tokens(&model->tokenizer, SERVE_TOKENS);
    if (!text) {
        fprintf(stderr,
                "bench_decoder: no text of %d tokens under %s's "
                "tokenizer\n",
                SERVE_TOKENS, dir);
        return false;
    }

    struct torch torch = {0};
    if (!torch_start(&torch, TORCH_SCRIPT, dir)) {
        fprintf(stderr, "bench_decoder: %s %s did not start (python3-torch?)\n",
                BENCH_PYTHON, TORCH_SCRIPT);
        return false;
    }
    bool ok = true;
    for (int k = 0; k < N_LENGTHS && ok; k++) {
        const size_t n = lengths[k];
        bench_ids(ids, n, m->vocab_size);
        c->agree[k] = same_network(m, &torch, ids, n);
        if (c->agree[k] < 0 || c->agree[k] > TOLERANCE) {
            fprintf(stderr,
                    "bench_decoder: attnd and PyTorch disagree on %s, N=%zu "
                    "(largest difference of the last hidden states %g)\n",
                    dir, n, c->agree[k]);
            ok = false;
            break;
        }
        printf("N=%zu: the last hidden states agree within %.2g\n", n,
               c->agree[k]);
        decoder_products(m, n, &c->net_gflop[k], &c->attnd_gflop[k]);
        ok = time_rounds(m, &torch, sg, ids, n, rounds, &c->t[k]);
        if (!ok)
            fprintf(stderr, "bench_decoder: a run failed\n");
        fflush(stdout);
    }
    if (ok) {
        /* the read bandwidth's block only for this part, so that the
         * memory figures above do not hold it */
        struct bandwidth_probe *probe = bandwidth_probe_new(BANDWIDTH_BYTES);
        ok = probe &&
             bench_decoding(m, SERVE_TOKENS, DECODE_TOKENS, rounds, probe,
                            stdout, &c->dec) &&
             torch_decoding(&torch, rounds, c);
        bandwidth_probe_free(probe);
        if (ok)
            printf("decoding after a %zu-token prompt: first token %.1f ms, "
                   "then %.1f ms a token (%.2f tokens/s); reading %.1f GB/s "
                   "(%s), %.1f MB of weights a token: at most %.2f "
                   "tokens/s, %.2f of it; PyTorch's loop: first token %.1f / "
                   "%.1f ms, then %.1f / %.1f ms a token (1 / 2 threads)\n",
                   c->dec.prompt, c->dec.first_token_ms, c->dec.token_ms,
                   c->dec.tokens_s, c->dec.read_gbs, c->dec.read_how,
                   c->dec.bytes_per_token / 1e6, c->dec.bound_tokens_s,
                   c->dec.tokens_s / c->dec.bound_tokens_s,
                   c->torch_first_ms[0], c->torch_first_ms[1],
                   c->torch_token_ms[0], c->torch_token_ms[1]);
        fflush(stdout);
    }
    torch_stop(&torch);
    model_free(model);
    if (ok) {
        c->serve = serve_once(dir, text);
        ok = c->serve.ok;
        if (ok)
            printf("serving one %zu-token request (every layer's weights, "
                   "%.1f MB of JSON): VmHWM %.1f MiB once loaded, %.1f MiB "
                   "after the answer, %.1f MiB over the files\n",
                   c->serve.tokens, c->serve.answer_bytes / 1e6,
                   c->serve.loaded_hwm / MIB, c->serve.peak_hwm / MIB,
                   ((double)c->serve.peak_hwm - (double)c->file_bytes) / MIB);
    }
    free(text);
    return ok;
}

static double speedup(const struct checkpoint *c, int k)
{
    return torch_best_ms(&c->t[k]) / c->t[k].attnd_ms;
}

static double fraction(const struct checkpoint *c, int k)
{
    return c->attnd_gflop[k] / (c->t[k].attnd_ms * 1e-3) /
           c->t[k].ceiling_gflops;
}

static void print_table(const struct checkpoint *cs, int count)
{
    printf("\n%5s %5s %8s %8s | %10s %10s %10s | %8s | %9s %9s %9s\n", "dtype",
           "N", "GFLOP", "attnd's", "attnd ms", "torch1 ms", "torch2 ms",
           "speedup", "attnd GF/s", "sgemm GF/s", "fraction");
    for (int i = 0; i < count; i++)
        for (int k = 0; k < N_LENGTHS; k++) {
            const struct checkpoint *c = &cs[i];
            const struct timing *t = &c->t[k];
            printf("%5s %5zu %8.1f %8.1f | %10.1f %10.1f %10.1f | %7.2fx | "
                   "%9.1f %9.1f %9.2f\n",
                   c->dtype, lengths[k], c->net_gflop[k], c->attnd_gflop[k],
                   t->attnd_ms, t->torch1_ms, t->torch2_ms, speedup(c, k),
                   c->attnd_gflop[k] / (t->attnd_ms * 1e-3), t->ceiling_gflops,
                   fraction(c, k));
        }
}

static void print_targets(const struct checkpoint *cs, int count)
{
    printf("\ntargets:\n");
    for (int i = 0; i < count; i++) {
        const struct checkpoint *c = &cs[i];
        const bool f32 = !strcmp(c->dtype, "F32");
        const double want = f32 ? TARGET_F32_SPEEDUP : TARGET_16BIT_SPEEDUP;
        const double worst =
            speedup(c, 0) < speedup(c, 1) ? speedup(c, 0) : speedup(c, 1);
        printf("  %-4s >= %.1fx PyTorch at 128 and 512: %.2fx, %.2fx: %s\n",
               c->dtype, want, speedup(c, 0), speedup(c, 1),
               worst >= want ? "met" : "NOT met");
        printf("  %-4s >= %.2f of the sgemm ceiling at 512: %.2f: %s\n",
               c->dtype, TARGET_FRACTION, fraction(c, 1),
               fraction(c, 1) >= TARGET_FRACTION ? "met" : "NOT met");
        const double resident = (double)(c->mem.after_pass - c->mem.baseline) /
                                (double)c->file_bytes;
        if (!f32)
            printf("  %-4s resident weights <= %.2f x the file: %.3f: %s\n",
                   c->dtype, TARGET_RESIDENT, resident,
                   resident <= TARGET_RESIDENT ? "met" : "NOT met");
        const double extra = (double)c->serve.peak_hwm - (double)c->file_bytes;
        printf("  %-4s peak RSS serving one %d-token request <= the file + "
               "%.0f MiB: + %.1f MiB: %s\n",
               c->dtype, SERVE_TOKENS, TARGET_PEAK_EXTRA / MIB, extra / MIB,
               extra <= TARGET_PEAK_EXTRA ? "met" : "NOT met");
        const double of_bound = c->dec.tokens_s / c->dec.bound_tokens_s;
        printf("  %-4s decoding >= %.1f of the memory bound: %.2f: %s\n",
               c->dtype, TARGET_OF_BOUND, of_bound,
               of_bound >= TARGET_OF_BOUND ? "met" : "NOT met");
    }
}

static bool write_json(const char *path, const struct checkpoint *cs, int count,
                       int rounds)
{
    FILE *fp = fopen(path, "w");
    if (!fp) {
        fprintf(stderr, "bench_decoder: %s: %s\n", path, strerror(errno));
        return false;
    }
    fprintf(fp,
            "{\"corename\": \"%s\", \"cores\": %u, \"rounds\": %d, "
            "\"checkpoints\": [",
            openblas_get_corename(), cores(), rounds);
    for (int i = 0; i < count; i++) {
        const struct checkpoint *c = &cs[i];
        fprintf(fp,
                "%s\n {\"dir\": \"%s\", \"dtype\": \"%s\", \"file_bytes\": %zu,"
                "\n  \"rss\": {\"baseline\": %zu, \"loaded\": %zu, "
                "\"after_pass\": %zu, \"file_after_pass\": %zu, "
                "\"anon_after_pass\": %zu},"
                "\n  \"serving\": {\"tokens\": %zu, \"answer_bytes\": %zu, "
                "\"hwm_loaded\": %zu, \"hwm_peak\": %zu},"
                "\n  \"decoding\": {\"prompt\": %zu, \"tokens\": %zu, "
                "\"first_token_ms\": %.3f, \"token_ms\": %.3f, "
                "\"read_gbs\": %.3f, \"read_how\": \"%s\", "
                "\"bytes_per_token\": %.0f, "
                "\"bound_tokens_s\": %.3f, \"tokens_s\": %.3f, "
                "\"torch_first_token_ms\": [%.3f, %.3f], "
                "\"torch_token_ms\": [%.3f, %.3f]},"
                "\n  \"cases\": [",
                i ? "," : "", c->dir, c->dtype, c->file_bytes, c->mem.baseline,
                c->mem.loaded, c->mem.after_pass, c->mem.file_after_pass,
                c->mem.anon_after_pass, c->serve.tokens, c->serve.answer_bytes,
                c->serve.loaded_hwm, c->serve.peak_hwm, c->dec.prompt,
                c->dec.tokens, c->dec.first_token_ms, c->dec.token_ms,
                c->dec.read_gbs, c->dec.read_how, c->dec.bytes_per_token,
                c->dec.bound_tokens_s, c->dec.tokens_s, c->torch_first_ms[0],
                c->torch_first_ms[1], c->torch_token_ms[0],
                c->torch_token_ms[1]);
        for (int k = 0; k < N_LENGTHS; k++) {
            const struct timing *t = &c->t[k];
            fprintf(fp,
                    "%s\n   {\"n\": %zu, \"agree\": %.3g, \"matmul_gflop\": "
                    "%.3f, \"attnd_gflop\": %.3f, \"attnd_ms\": %.3f, "
                    "\"torch_1_thread_ms\": %.3f, \"torch_2_threads_ms\": "
                    "%.3f, \"speedup\": %.3f, \"sgemm_gflops\": %.2f, "
                    "\"fraction_of_sgemm\": %.4f}",
                    k ? "," : "", lengths[k], c->agree[k], c->net_gflop[k],
                    c->attnd_gflop[k], t->attnd_ms, t->torch1_ms, t->torch2_ms,
                    speedup(c, k), t->ceiling_gflops, fraction(c, k));
        }
        fprintf(fp, "]}");
    }
    fprintf(fp, "\n]}\n");
    fclose(fp);
    return true;
}

/* The decoding part alone (--decoding-only): a quick look while working
 * on it; make bench runs everything. */
static bool decoding_only(const char *dir, int rounds)
{
    char err[1024];
    struct model *model = NULL;
    if (!model_load("bench", dir, &model, err, sizeof err)) {
        fprintf(stderr, "bench_decoder: %s\n", err);
        return false;
    }
    struct decoding d;
    struct bandwidth_probe *probe = bandwidth_probe_new(BANDWIDTH_BYTES);
    const bool ok =
        probe && bench_decoding(&model->xf, SERVE_TOKENS, DECODE_TOKENS, rounds,
                                probe, stdout, &d);
    if (ok)
        printf("%s: first token %.1f ms, then %.1f ms a token (%.2f "
               "tokens/s); %.1f GB/s (%s), %.1f MB a token: bound %.2f "
               "tokens/s, %.2f of it\n",
               dir, d.first_token_ms, d.token_ms, d.tokens_s, d.read_gbs,
               d.read_how, d.bytes_per_token / 1e6, d.bound_tokens_s,
               d.tokens_s / d.bound_tokens_s);
    bandwidth_probe_free(probe);
    model_free(model);
    return ok;
}

int main(int argc, char **argv)
{
    const char *dirs[MAX_DIRS], *json_path = NULL;
    int n_dirs = 0, rounds = 5;
    bool only_decoding = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--decoding-only"))
            only_decoding = true;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = (int)strtol(argv[++i], NULL, 10);
        else if (argv[i][0] != '-' && n_dirs < MAX_DIRS)
            dirs[n_dirs++] = argv[i];
        else
            n_dirs = -MAX_DIRS - 1;
    }
    if (n_dirs < 1 || rounds < 1 || rounds > BENCH_MAX_ROUNDS) {
        fprintf(stderr,
                "usage: %s DIR... (1-%d) [--rounds R (1-%d)] [--json FILE] "
                "[--decoding-only]\n",
                argv[0], MAX_DIRS, BENCH_MAX_ROUNDS);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    attn_blas_single_thread();
    if (only_decoding) {
        printf("OpenBLAS core: %s; %u cores; %d rounds, medians\n",
               openblas_get_corename(), cores(), rounds);
        for (int i = 0; i < n_dirs; i++)
            if (!decoding_only(dirs[i], rounds))
                return 1;
        return 0;
    }
    struct sgemm_ctx sg;
    if (!ceiling_init(&sg))
        return 1;
    /* OpenBLAS's buffers and threads in place before any baseline */
    ceiling_once(&sg);
    print_setup(rounds);
    struct checkpoint cs[MAX_DIRS];
    for (int i = 0; i < n_dirs; i++)
        if (!bench_checkpoint(dirs[i], &sg, rounds, &cs[i]))
            return 1;
    print_table(cs, n_dirs);
    print_targets(cs, n_dirs);
    ceiling_free(&sg);
    if (json_path && !write_json(json_path, cs, n_dirs, rounds))
        return 1;
    return 0;
}
