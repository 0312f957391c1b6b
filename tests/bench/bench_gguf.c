/*
 * bench_gguf.c - attnd on llama.cpp's own GGUF files against llama.cpp's
 * llama-bench on the same files, same threads, same machine, in one run.
 *
 *   bench_gguf FILE.gguf... [--llama-bench PATH] [--rounds R] [--json FILE]
 *
 * make bench gives it the random Llama-3.2-1B-shaped checkpoints
 * bench_decoder reads, converted by llama.cpp's convert_hf_to_gguf.py at
 * F32 and at BF16, and the F32 one quantized by its llama-quantize to
 * Q8_0 and Q4_K_M, and the llama-bench built from the same source
 * (tests/bench/llama_cpp.sh). For each file, in turn:
 *
 * - resident memory: this process's VmRSS before model_load(), after it,
 *   and after one 512-token pass (its peak too, VmHWM, reset before
 *   loading), against the file's size and the pass's own workspace
 *   (xf_plan_bytes()): after a pass it should hold at most 1.05 x the file
 *   + that workspace over what it held before loading;
 * - R interleaved rounds, each: attnd's prompt pass at 128 and 512 tokens
 *   (the last position's logits, nothing else returned: what llama-bench's
 *   ppN times), then llama-bench's prompts on the same file
 *   (-p 128,512 -n 0); then attnd's decoding (bench_decode.h: 32 greedy
 *   tokens after a 128-token prompt through the KV cache, and the read
 *   bandwidth measured just before: the best of bandwidth.h's read loops,
 *   which over the matrices' bytes bounds the tokens a second), then
 *   llama-bench's decoding after 128 tokens of context
 *   (-p 0 -n 32 -d 128): each test of one side next to the same test of
 *   the other. llama-bench runs each with flash attention off and on, one
 *   repetition a round after its own warm-up; llama.cpp's better setting
 *   is taken for each test. Both sides run one thread a core (2 here):
 *   attnd a team of cores() threads with one BLAS thread each,
 *   llama-bench -t cores(). The prompts' tokens differ from round to
 *   round, as real traffic's do; each side's first pass of a round wakes
 *   its threads and is not timed. Each round also measures the share of
 *   the cores other processes took meanwhile (/proc/stat less this
 *   process and llama-bench): a busy neighbour slows llama.cpp, whose
 *   threads wait for each other at every operation, far more than attnd.
 *   The medians are those of the quiet rounds (others under 10%) when
 *   there are 3 or more, of every round otherwise.
 *
 * It prints the medians, the ratios against the targets (those
 * of a file's weight type: quantized, or F32 and BF16), the OpenBLAS core
 * attnd ran with and the backend llama-bench reports (ggml's own CPU
 * kernels unless it was built with GGML_BLAS), the machine's load average
 * before and after, and the commands run, and writes them to --json.
 * Without llama-bench (no PATH, or not executable) it says so in one line
 * and times attnd alone.
 */
#include "bandwidth.h"
#include "bench_clock.h"
#include "bench_decode.h"
#include "bench_torch.h"
#include "model/model.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILES 6
#define MIB (1024.0 * 1024.0)
#define DECODE_PROMPT 128
#define DECODE_TOKENS 32
#define MAX_OUTPUT (4u << 20) /* llama-bench's JSON, at most */
#define MAX_COMMAND 8192

/* The issues' targets, by the weights' type: attnd's tokens/s decoding
 * and on prompts, of llama.cpp's; its decoding, of the bandwidth bound. */
struct targets {
    double decode, prompt, bound;
};
static const struct targets quantized_targets = {0.9, 0.8, 0.7};
static const struct targets float_targets = {1.0, 1.0, 0.9};
#define TARGET_RESIDENT 1.05 /* x the file, + the pass's workspace */
/* A round is quiet when other processes took less than this share of the
 * cores; the medians are the quiet rounds' when there are this many. */
#define QUIET_SHARE 0.10
#define QUIET_ROUNDS 3

static const size_t lengths[] = {128, 512};
enum { N_LENGTHS = 2, N_FA = 2 };

struct memory {
    size_t baseline, loaded, after_pass; /* VmRSS */
    size_t peak;                         /* VmHWM after the pass */
    size_t workspace;                    /* xf_plan_bytes() of the pass */
};

/* One file's results: per round, then medians. */
struct file_bench {
    const char *path;
    const char *dtype; /* the first layer's q matrix's */
    size_t file_bytes;
    struct memory mem;
    double pp_s[N_LENGTHS][BENCH_MAX_ROUNDS]; /* attnd, seconds a pass */
    double token_ms[BENCH_MAX_ROUNDS], read_gbs[BENCH_MAX_ROUNDS];
    /* llama-bench's tokens/s, flash attention off and on */
    double cpp_pp[N_LENGTHS][N_FA][BENCH_MAX_ROUNDS];
    double cpp_tg[N_FA][BENCH_MAX_ROUNDS];
    double bytes_per_token;
    char read_how[BENCH_MAX_ROUNDS][128]; /* the loop that read fastest */
    double others[BENCH_MAX_ROUNDS];      /* the cores' share other processes
                                             took during each round */
    struct targets target;
    /* medians */
    double pp_ts[N_LENGTHS], tg_ts, gbs, bound_ts, others_share;
    const char *gbs_how; /* the loop of the round nearest the median */
    bool quiet_only;     /* the medians are the quiet rounds' */
    int rounds_used;
    double cpp_pp_ts[N_LENGTHS][N_FA], cpp_tg_ts[N_FA];
    bool with_cpp;
};

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

/* CPU seconds the machine's cores have spent busy, from /proc/stat's
 * first line; -1 when it cannot be read. */
static double machine_busy_seconds(void)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    const int got =
        f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7])
          : 0;
    if (f)
        fclose(f);
    if (got != 8)
        return -1.0;
    /* all but idle (v[3]) and iowait (v[4]) */
    const unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    return (double)busy / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds of this process and of the children it has waited for
 * (llama-bench). */
static double own_seconds(void)
{
    struct rusage self, children;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &children);
    const struct rusage *u[2] = {&self, &children};
    double s = 0.0;
    for (int i = 0; i < 2; i++)
        s += (double)u[i]->ru_utime.tv_sec + u[i]->ru_utime.tv_usec * 1e-6 +
             (double)u[i]->ru_stime.tv_sec + u[i]->ru_stime.tv_usec * 1e-6;
    return s;
}

/* VmHWM from here on: writing 5 to clear_refs resets it to VmRSS. */
static void reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

/* A round's prompt: n ids drawn from the round's own stream, so that no
 * two rounds (and no two lengths) send the same text. */
static void round_ids(uint32_t *ids, size_t n, size_t vocab, unsigned round)
{
    uint64_t s = 0x9e3779b97f4a7c15ull * (round + 1) + n;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (uint32_t)((s >> 33) % vocab);
    }
}

/* Seconds of one prompt pass over ids (the last position's logits, on a
 * team of one thread a core); its xf_plan_bytes() into *bytes when not
 * NULL. -1 on failure. */
static double prompt_pass(const struct xf_model *m, const uint32_t *ids,
                          size_t n, size_t *bytes)
{
    const struct xf_run run = {.ids = ids,
                               .n = n,
                               .want = XF_WANT_LOGITS,
                               .layer = XF_ALL_LAYERS,
                               .threads = cores(),
                               .bf16_dots = bench_bf16_dots};
    struct xf_plan plan;
    struct xf_result r;
    struct attn_error err;
    const double t0 = now_seconds();
    attn_status st = xf_plan(m, &run, &plan, &err);
    if (st == ATTN_OK)
        st = xf_forward(&plan, NULL, &r, &err);
    const double t = now_seconds() - t0;
    if (st != ATTN_OK) {
        fprintf(stderr, "bench_gguf: attnd's pass: %s\n", err.message);
        return -1.0;
    }
    if (bytes)
        *bytes = xf_plan_bytes(&plan);
    xf_result_free(&r);
    return t;
}

/* ------------------------------------------------------------ llama.cpp */

/* The two llama-bench commands a round runs on path, in cmd[0] (prompt)
 * and cmd[1] (decoding after DECODE_PROMPT tokens). */
static bool cpp_commands(const char *llama_bench, const char *path,
                         char cmd[2][MAX_COMMAND])
{
    if (strchr(llama_bench, '\'') || strchr(path, '\''))
        return false; /* quoted below in single quotes */
    const unsigned t = cores();
    int a = snprintf(cmd[0], MAX_COMMAND,
                     "'%s' -m '%s' -t %u -p %zu,%zu -n 0 -fa off,on -r 1 "
                     "-o json",
                     llama_bench, path, t, lengths[0], lengths[1]);
    int b = snprintf(cmd[1], MAX_COMMAND,
                     "'%s' -m '%s' -t %u -p 0 -n %d -d %d -fa off,on -r 1 "
                     "-o json",
                     llama_bench, path, t, DECODE_TOKENS, DECODE_PROMPT);
    return a > 0 && a < MAX_COMMAND && b > 0 && b < MAX_COMMAND;
}

/* Run cmd (its stderr dropped) and parse its stdout as llama-bench's JSON
 * array; NULL on failure. The caller owns the result (cJSON_Delete). */
static cJSON *run_json(const char *cmd)
{
    char full[MAX_COMMAND + 32];
    snprintf(full, sizeof full, "%s 2>/dev/null", cmd);
    FILE *p = popen(full, "r");
    if (!p)
        return NULL;
    char *buf = malloc(MAX_OUTPUT);
    size_t len = 0, got = 0;
    while (buf && (got = fread(buf + len, 1, MAX_OUTPUT - len, p)) > 0)
        len += got;
    const int status = pclose(p);
    cJSON *j = NULL;
    if (buf && status == 0 && len < MAX_OUTPUT)
        j = cJSON_ParseWithLength(buf, len);
    free(buf);
    if (j && !cJSON_IsArray(j)) {
        cJSON_Delete(j);
        j = NULL;
    }
    if (!j)
        fprintf(stderr, "bench_gguf: no JSON from: %s\n", cmd);
    return j;
}

static double number(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1.0;
}

/* What llama-bench says it ran on, from its first test: its build, its
 * backends ("CPU": ggml's own kernels; "BLAS" when built with GGML_BLAS)
 * and the CPU. */
static char cpp_commit[64], cpp_backends[64], cpp_cpu[128];

static void copy_string(char *to, size_t size, const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    snprintf(to, size, "%s", cJSON_IsString(v) ? v->valuestring : "?");
}

/* One line on the BLAS llama.cpp ran with, for the report. */
static void print_cpp_backend(FILE *to)
{
    const char *env = getenv("OPENBLAS_CORETYPE");
    if (strstr(cpp_backends, "BLAS"))
        fprintf(to,
                "llama.cpp %s: backends %s: its products through a BLAS "
                "(OpenBLAS's core as above, OPENBLAS_CORETYPE=%s), on %s\n",
                cpp_commit, cpp_backends, env ? env : "unset", cpp_cpu);
    else
        fprintf(to,
                "llama.cpp %s: backends %s: ggml's own CPU kernels, no "
                "OpenBLAS (built without GGML_BLAS), on %s\n",
                cpp_commit, cpp_backends, cpp_cpu);
}

/* llama-bench's command c (0: the prompts, 1: decoding) on f: its
 * tokens/s into round r's slots. */
static bool cpp_run(struct file_bench *f, char cmd[2][MAX_COMMAND], int c,
                    int r)
{
    cJSON *j = run_json(cmd[c]);
    if (!j)
        return false;
    int found = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, j)
    {
        const double fa = number(t, "flash_attn"), ts = number(t, "avg_ts");
        const double np = number(t, "n_prompt"), ng = number(t, "n_gen");
        if ((fa != 0 && fa != 1) || ts <= 0)
            continue;
        const int k = (int)fa;
        if (c == 1 && ng == DECODE_TOKENS) {
            f->cpp_tg[k][r] = ts;
            found++;
        }
        for (int l = 0; c == 0 && l < N_LENGTHS; l++)
            if (np == (double)lengths[l]) {
                f->cpp_pp[l][k][r] = ts;
                found++;
            }
    }
    if (!cpp_backends[0] && cJSON_GetArraySize(j) > 0) {
        const cJSON *first = cJSON_GetArrayItem(j, 0);
        copy_string(cpp_commit, sizeof cpp_commit, first, "build_commit");
        copy_string(cpp_backends, sizeof cpp_backends, first, "backends");
        copy_string(cpp_cpu, sizeof cpp_cpu, first, "cpu_info");
        print_cpp_backend(stdout);
    }
    cJSON_Delete(j);
    if (found != (c == 0 ? N_LENGTHS * N_FA : N_FA)) {
        fprintf(stderr, "bench_gguf: llama-bench gave %d of its tests: %s\n",
                found, cmd[c]);
        return false;
    }
    return true;
}

static double better(const double v[N_FA])
{
    return v[0] > v[1] ? v[0] : v[1];
}

/* ---------------------------------------------------------------- attnd */

static bool bench_memory(const struct xf_model *m, struct file_bench *f,
                         size_t base)
{
    uint32_t ids[512];
    round_ids(ids, lengths[1], m->vocab_size, 1000);
    if (prompt_pass(m, ids, lengths[1], &f->mem.workspace) < 0)
        return false;
    f->mem.after_pass = self_status("VmRSS:");
    f->mem.peak = self_status("VmHWM:");
    const double limit =
        TARGET_RESIDENT * (double)f->file_bytes + (double)f->mem.workspace;
    printf("resident, less the %.1f MiB before loading: %.1f MiB loaded, "
           "%.1f MiB after a %zu-token pass (peak %.1f MiB); the file "
           "%.1f MiB, the pass's workspace %.1f MiB: %.3f x the file, "
           "limit %.2f x the file + the workspace = %.1f MiB\n",
           base / MIB, (f->mem.loaded - base) / MIB,
           (f->mem.after_pass - base) / MIB, lengths[1],
           (f->mem.peak - base) / MIB, f->file_bytes / MIB,
           f->mem.workspace / MIB,
           (double)(f->mem.after_pass - base) / (double)f->file_bytes,
           TARGET_RESIDENT, limit / MIB);
    return true;
}

/* Round r's prompts on m: a wake-up pass, then the prompt passes. */
static bool attnd_prompts(const struct xf_model *m, struct file_bench *f, int r)
{
    uint32_t ids[512];
    round_ids(ids, lengths[0], m->vocab_size, 2u * (unsigned)r + 1);
    if (prompt_pass(m, ids, lengths[0], NULL) < 0)
        return false;
    for (int l = 0; l < N_LENGTHS; l++) {
        round_ids(ids, lengths[l], m->vocab_size, 2u * (unsigned)r);
        f->pp_s[l][r] = prompt_pass(m, ids, lengths[l], NULL);
        if (f->pp_s[l][r] < 0)
            return false;
    }
    return true;
}

/* Round r's decoding on m, after the read bandwidth (probe's; every
 * loop's figure printed in the first round). */
static bool attnd_decoding(const struct xf_model *m, struct file_bench *f,
                           int r, struct bandwidth_probe *probe)
{
    struct decoding d;
    if (!bench_decoding(m, DECODE_PROMPT, DECODE_TOKENS, 1, probe,
                        r ? NULL : stdout, &d))
        return false;
    f->token_ms[r] = d.token_ms;
    f->read_gbs[r] = d.read_gbs;
    snprintf(f->read_how[r], sizeof f->read_how[r], "%s", d.read_how);
    f->bytes_per_token = d.bytes_per_token;
    return true;
}

/* The median of v[r] over the rounds r that use[] keeps. */
static double median_of(const double *v, const bool *use, int rounds)
{
    double kept[BENCH_MAX_ROUNDS];
    size_t n = 0;
    for (int r = 0; r < rounds; r++)
        if (use[r])
            kept[n++] = v[r];
    return median(kept, n);
}

/* Medians over the rounds in which other processes took less than
 * QUIET_SHARE of the cores, when there are QUIET_ROUNDS of them or more
 * (a neighbour on a core stalls llama.cpp's threads, so busy rounds say
 * little of either side); over every round otherwise. */
static void take_medians(struct file_bench *f, int rounds)
{
    bool use[BENCH_MAX_ROUNDS];
    int quiet = 0;
    for (int r = 0; r < rounds; r++)
        quiet += f->others[r] < QUIET_SHARE;
    f->quiet_only = quiet >= QUIET_ROUNDS;
    f->rounds_used = f->quiet_only ? quiet : rounds;
    for (int r = 0; r < rounds; r++)
        use[r] = !f->quiet_only || f->others[r] < QUIET_SHARE;
    double v[BENCH_MAX_ROUNDS];
    for (int l = 0; l < N_LENGTHS; l++) {
        for (int r = 0; r < rounds; r++)
            v[r] = (double)lengths[l] / f->pp_s[l][r];
        f->pp_ts[l] = median_of(v, use, rounds);
        for (int k = 0; f->with_cpp && k < N_FA; k++)
            f->cpp_pp_ts[l][k] = median_of(f->cpp_pp[l][k], use, rounds);
    }
    for (int r = 0; r < rounds; r++)
        v[r] = 1e3 / f->token_ms[r];
    f->tg_ts = median_of(v, use, rounds);
    f->gbs = median_of(f->read_gbs, use, rounds);
    int near = -1;
    for (int r = 0; r < rounds; r++)
        if (use[r] && (near < 0 || fabs(f->read_gbs[r] - f->gbs) <
                                       fabs(f->read_gbs[near] - f->gbs)))
            near = r;
    f->gbs_how = f->read_how[near];
    f->bound_ts = f->gbs * 1e9 / f->bytes_per_token;
    f->others_share = median_of(f->others, use, rounds);
    for (int k = 0; f->with_cpp && k < N_FA; k++)
        f->cpp_tg_ts[k] = median_of(f->cpp_tg[k], use, rounds);
}

static bool is_float(const char *dtype)
{
    return dtype && (!strcmp(dtype, "F32") || !strcmp(dtype, "BF16") ||
                     !strcmp(dtype, "F16"));
}

static bool bench_file(const char *path, const char *llama_bench, int rounds,
                       struct bandwidth_probe *probe, struct file_bench *f)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    struct stat st;
    if (stat(path, &st)) {
        fprintf(stderr, "bench_gguf: %s: %s\n", path, strerror(errno));
        return false;
    }
    f->file_bytes = (size_t)st.st_size;
    reset_peak();
    const size_t base = self_status("VmRSS:");
    f->mem.baseline = base;
    char err[1024];
    struct model *model = NULL;
    if (!model_load("bench", path, &model, err, sizeof err)) {
        fprintf(stderr, "bench_gguf: %s\n", err);
        return false;
    }
    f->mem.loaded = self_status("VmRSS:");
    const struct xf_model *m = &model->xf;
    f->dtype = attn_dtype_name((int)m->layer[0].q_w.dtype);
    f->target = is_float(f->dtype) ? float_targets : quantized_targets;
    printf("\n%s: q %s, ffn_down %s, output %s; %zu layers, hidden %zu, "
           "%zu heads on %zu KV heads of %zu, intermediate %zu, vocab %zu; "
           "%.1f MB\n",
           path, f->dtype, attn_dtype_name((int)m->layer[0].down_w.dtype),
           attn_dtype_name((int)m->lm_head.dtype), m->layers, m->hidden,
           m->heads, m->kv_heads, m->head_dim, m->intermediate, m->vocab_size,
           f->file_bytes / 1e6);
    bool ok = bench_memory(m, f, base);
    char cmd[2][MAX_COMMAND];
    f->with_cpp = llama_bench && access(llama_bench, X_OK) == 0 &&
                  cpp_commands(llama_bench, path, cmd);
    if (f->with_cpp)
        printf("llama.cpp: %s\n           %s\n", cmd[0], cmd[1]);
    for (int r = 0; ok && r < rounds; r++) {
        const double busy0 = machine_busy_seconds(), own0 = own_seconds(),
                     t0 = now_seconds();
        /* each test of one side next to the same test of the other: the
         * machine's read bandwidth moves by tens of percent from one
         * minute to the next, and a minute between two decodings put one
         * in a fast spell and the other in a slow one */
        ok = attnd_prompts(m, f, r) &&
             (!f->with_cpp || cpp_run(f, cmd, 0, r)) &&
             attnd_decoding(m, f, r, probe) &&
             (!f->with_cpp || cpp_run(f, cmd, 1, r));
        /* what the rest of the machine ran meanwhile: a neighbour slows
         * llama.cpp's spinning threads more than attnd's */
        f->others[r] =
            (machine_busy_seconds() - busy0 - (own_seconds() - own0)) /
            ((now_seconds() - t0) * cores());
        if (f->others[r] < 0 || busy0 < 0)
            f->others[r] = 0;
        if (ok) {
            printf("round %d: read %.1f GB/s (%s); attnd pp%zu %.1f, pp%zu "
                   "%.1f, tg%d %.2f tokens/s",
                   r + 1, f->read_gbs[r], f->read_how[r], lengths[0],
                   lengths[0] / f->pp_s[0][r], lengths[1],
                   lengths[1] / f->pp_s[1][r], DECODE_TOKENS,
                   1e3 / f->token_ms[r]);
            if (f->with_cpp)
                printf("; llama.cpp (fa off/on) pp%zu %.1f/%.1f, pp%zu "
                       "%.1f/%.1f, tg%d %.2f/%.2f",
                       lengths[0], f->cpp_pp[0][0][r], f->cpp_pp[0][1][r],
                       lengths[1], f->cpp_pp[1][0][r], f->cpp_pp[1][1][r],
                       DECODE_TOKENS, f->cpp_tg[0][r], f->cpp_tg[1][r]);
            printf("; other processes took %.0f%% of the cores\n",
                   100 * f->others[r]);
            fflush(stdout);
        }
    }
    if (ok)
        take_medians(f, rounds);
    model_free(model);
    return ok;
}

/* ------------------------------------------------------------- reports */

static void print_table(const struct file_bench *fs, int count)
{
    printf("\nmedians, tokens/s (llama.cpp: the better of flash attention "
           "off and on), over the rounds in which other processes took "
           "less than %.0f%% of the cores when there were %d of them, over "
           "every round otherwise\n",
           100 * QUIET_SHARE, QUIET_ROUNDS);
    printf("%-7s %-8s | %9s %9s %7s | %9s %9s\n", "file", "test", "attnd",
           "llama.cpp", "ratio", "fa off", "fa on");
    for (int i = 0; i < count; i++) {
        const struct file_bench *f = &fs[i];
        const char *name =
            strrchr(f->path, '-') ? strrchr(f->path, '-') + 1 : f->path;
        for (int l = 0; l <= N_LENGTHS; l++) {
            char test[16];
            const double mine = l < N_LENGTHS ? f->pp_ts[l] : f->tg_ts;
            const double *cpp = l < N_LENGTHS ? f->cpp_pp_ts[l] : f->cpp_tg_ts;
            if (l < N_LENGTHS)
                snprintf(test, sizeof test, "pp%zu", lengths[l]);
            else
                snprintf(test, sizeof test, "tg%d@%d", DECODE_TOKENS,
                         DECODE_PROMPT);
            if (f->with_cpp)
                printf("%-7.*s %-8s | %9.2f %9.2f %7.3f | %9.2f %9.2f\n",
                       (int)strcspn(name, "."), name, test, mine, better(cpp),
                       mine / better(cpp), cpp[0], cpp[1]);
            else
                printf("%-7.*s %-8s | %9.2f %9s %7s | %9s %9s\n",
                       (int)strcspn(name, "."), name, test, mine, "-", "-", "-",
                       "-");
        }
        printf("%-7.*s bound    | %9.2f  (%.1f GB/s over %.1f MB of matrices "
               "a token; %s)\n",
               (int)strcspn(name, "."), name, f->bound_ts, f->gbs,
               f->bytes_per_token / 1e6, f->gbs_how);
        printf("%-7.*s rounds   | %d %s; other processes took %.0f%% of the "
               "cores (median)\n",
               (int)strcspn(name, "."), name, f->rounds_used,
               f->quiet_only ? "quiet rounds" : "rounds, all of them",
               100 * f->others_share);
    }
}

static const char *verdict(bool met)
{
    return met ? "met" : "NOT met";
}

static void print_targets(const struct file_bench *fs, int count)
{
    printf("\ntargets:\n");
    for (int i = 0; i < count; i++) {
        const struct file_bench *f = &fs[i];
        const char *name =
            strrchr(f->path, '/') ? strrchr(f->path, '/') + 1 : f->path;
        const struct targets *t = &f->target;
        if (f->with_cpp) {
            const double tg = f->tg_ts / better(f->cpp_tg_ts);
            printf("  %s decoding >= %.1f x llama.cpp's: %.3f: %s\n", name,
                   t->decode, tg, verdict(tg >= t->decode));
            for (int l = 0; l < N_LENGTHS; l++) {
                const double pp = f->pp_ts[l] / better(f->cpp_pp_ts[l]);
                printf("  %s prompt of %zu >= %.1f x llama.cpp's: %.3f: %s\n",
                       name, lengths[l], t->prompt, pp,
                       verdict(pp >= t->prompt));
            }
        } else {
            printf("  %s against llama.cpp: not measured (no llama-bench)\n",
                   name);
        }
        const double b = f->tg_ts / f->bound_ts;
        printf("  %s decoding >= %.1f of the bandwidth bound: %.3f: %s\n", name,
               t->bound, b, verdict(b >= t->bound));
        if (f->with_cpp)
            printf("  %s (llama.cpp's decoding: %.3f of the bound)\n", name,
                   better(f->cpp_tg_ts) / f->bound_ts);
        const double held = (double)(f->mem.after_pass - f->mem.baseline);
        const double limit =
            TARGET_RESIDENT * (double)f->file_bytes + (double)f->mem.workspace;
        printf("  %s resident after a pass <= %.2f x the file + the "
               "workspace: %.1f <= %.1f MiB: %s\n",
               name, TARGET_RESIDENT, held / MIB, limit / MIB,
               verdict(held <= limit));
    }
}

/* The machine's load averages over 1, 5 and 15 minutes, as uptime shows
 * them, into text; "?" when /proc/loadavg cannot be read. */
static void load_average(char *text, size_t size)
{
    double a[3];
    FILE *f = fopen("/proc/loadavg", "r");
    const int got = f ? fscanf(f, "%lf %lf %lf", &a[0], &a[1], &a[2]) : 0;
    if (f)
        fclose(f);
    if (got == 3)
        snprintf(text, size, "%.2f %.2f %.2f", a[0], a[1], a[2]);
    else
        snprintf(text, size, "?");
}

static bool write_json(const char *path, const struct file_bench *fs, int count,
                       int rounds, const char *llama_bench,
                       const char load[2][32])
{
    FILE *fp = fopen(path, "w");
    if (!fp) {
        fprintf(stderr, "bench_gguf: %s: %s\n", path, strerror(errno));
        return false;
    }
    fprintf(fp,
            "{\"corename\": \"%s\", \"cores\": %u, \"rounds\": %d, "
            "\"threads\": %u, \"load_average\": [\"%s\", \"%s\"], "
            "\"llama_cpp\": {\"build_commit\": \"%s\", \"backends\": "
            "\"%s\"}, \"resident_of_file\": %.2f,\n \"files\": [",
            openblas_get_corename(), cores(), rounds, cores(), load[0], load[1],
            cpp_commit, cpp_backends, TARGET_RESIDENT);
    for (int i = 0; i < count; i++) {
        const struct file_bench *f = &fs[i];
        char cmd[2][MAX_COMMAND] = {"", ""};
        if (f->with_cpp)
            cpp_commands(llama_bench, f->path, cmd);
        fprintf(fp,
                "%s\n {\"path\": \"%s\", \"dtype\": \"%s\", \"file_bytes\": "
                "%zu,\n  \"rss\": {\"baseline\": %zu, \"loaded\": %zu, "
                "\"after_pass\": %zu, \"peak\": %zu, \"workspace\": %zu, "
                "\"pass_tokens\": %zu, \"within\": %s},\n  \"attnd\": "
                "{\"pp128_ts\": %.3f, \"pp512_ts\": %.3f, \"tg32_ts\": %.3f, "
                "\"read_gbs\": %.3f, \"bytes_per_token\": %.0f, "
                "\"bound_ts\": %.3f, \"of_bound\": %.4f, \"read_how\": "
                "\"%s\"}, \"others_busy\": %.3f, \"rounds_used\": %d, "
                "\"quiet_only\": %s,\n  \"targets\": "
                "{\"decode_of_llama_cpp\": %.2f, \"prompt_of_llama_cpp\": "
                "%.2f, \"decode_of_bound\": %.2f}",
                i ? "," : "", f->path, f->dtype, f->file_bytes, f->mem.baseline,
                f->mem.loaded, f->mem.after_pass, f->mem.peak, f->mem.workspace,
                lengths[1],
                (double)(f->mem.after_pass - f->mem.baseline) <=
                        TARGET_RESIDENT * (double)f->file_bytes +
                            (double)f->mem.workspace
                    ? "true"
                    : "false",
                f->pp_ts[0], f->pp_ts[1], f->tg_ts, f->gbs, f->bytes_per_token,
                f->bound_ts, f->tg_ts / f->bound_ts, f->gbs_how,
                f->others_share, f->rounds_used,
                f->quiet_only ? "true" : "false", f->target.decode,
                f->target.prompt, f->target.bound);
        if (f->with_cpp) {
            fprintf(fp, ",\n  \"llama_cpp\": {\"commands\": [");
            for (int c = 0; c < 2; c++) {
                fputs(c ? ", \"" : "\"", fp);
                for (const char *s = cmd[c]; *s; s++) /* JSON-escaped */
                    fprintf(fp, *s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
                fputc('"', fp);
            }
            fprintf(fp,
                    "], \"pp128_ts\": [%.3f, %.3f], \"pp512_ts\": [%.3f, "
                    "%.3f], \"tg32_ts\": [%.3f, %.3f], \"flash_attn\": "
                    "[\"off\", \"on\"]},\n  \"ratios\": {\"pp128\": %.4f, "
                    "\"pp512\": %.4f, \"tg32\": %.4f, "
                    "\"llama_cpp_tg32_of_bound\": %.4f}",
                    f->cpp_pp_ts[0][0], f->cpp_pp_ts[0][1], f->cpp_pp_ts[1][0],
                    f->cpp_pp_ts[1][1], f->cpp_tg_ts[0], f->cpp_tg_ts[1],
                    f->pp_ts[0] / better(f->cpp_pp_ts[0]),
                    f->pp_ts[1] / better(f->cpp_pp_ts[1]),
                    f->tg_ts / better(f->cpp_tg_ts),
                    better(f->cpp_tg_ts) / f->bound_ts);
        }
        fprintf(fp, "}");
    }
    fprintf(fp, "\n]}\n");
    fclose(fp);
    return true;
}

int main(int argc, char **argv)
{
    const char *files[MAX_FILES], *json_path = NULL, *llama_bench = NULL;
    int n_files = 0, rounds = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--llama-bench") && i + 1 < argc)
            llama_bench = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = (int)strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--products") && i + 1 < argc)
            bench_bf16_dots = !strcmp(argv[++i], "bfloat16");
        else if (argv[i][0] != '-' && n_files < MAX_FILES)
            files[n_files++] = argv[i];
        else
            n_files = -MAX_FILES - 1;
    }
    if (n_files < 1 || rounds < 1 || rounds > BENCH_MAX_ROUNDS) {
        fprintf(stderr,
                "usage: %s FILE.gguf... (1-%d) [--llama-bench PATH] "
                "[--rounds R (1-%d)] [--products float32|bfloat16] "
                "[--json FILE]\n",
                argv[0], MAX_FILES, BENCH_MAX_ROUNDS);
        return 2;
    }
    attn_blas_single_thread();
    const char *core_env = getenv("OPENBLAS_CORETYPE");
    printf("OpenBLAS core: %s (OPENBLAS_CORETYPE=%s), %u cores; attnd: a "
           "team of %u threads with 1 BLAS thread each, %s products; "
           "llama-bench -t %u; %d interleaved rounds, medians\n",
           openblas_get_corename(), core_env ? core_env : "unset", cores(),
           cores(), bench_bf16_dots ? "bfloat16" : "float32", cores(), rounds);
    if (!llama_bench || access(llama_bench, X_OK))
        printf("llama-bench %s: not there, so attnd is timed alone (make "
               "bench builds it with tests/bench/llama_cpp.sh)\n",
               llama_bench ? llama_bench : "not given");
    char load[2][32];
    load_average(load[0], sizeof load[0]);
    printf("load average before (1, 5, 15 minutes): %s\n", load[0]);
    /* the read bandwidth's block, made once: each round's measure reads it */
    struct bandwidth_probe *probe = bandwidth_probe_new(BANDWIDTH_BYTES);
    if (!probe) {
        fprintf(stderr,
                "bench_gguf: no %zu MiB block for the read "
                "bandwidth\n",
                BANDWIDTH_BYTES >> 20);
        return 1;
    }
    static struct file_bench fs[MAX_FILES];
    for (int i = 0; i < n_files; i++)
        if (!bench_file(files[i], llama_bench, rounds, probe, &fs[i]))
            return 1;
    bandwidth_probe_free(probe);
    load_average(load[1], sizeof load[1]);
    print_table(fs, n_files);
    print_targets(fs, n_files);
    printf("\nOpenBLAS core (attnd): %s\n", openblas_get_corename());
    if (cpp_backends[0])
        print_cpp_backend(stdout);
    printf("load average before: %s; after: %s\n", load[0], load[1]);
    if (json_path &&
        !write_json(json_path, fs, n_files, rounds, llama_bench, load))
        return 1;
    return 0;
}
