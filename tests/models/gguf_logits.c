/* llama.cpp's own numbers for the GGUF goldens (tests/models/generate_gguf.py).
 *
 *   gguf_logits MODEL.gguf N_NEW ID...    evaluate the ids in one batch and
 *       print the last position's logits, then greedy-decode N_NEW tokens
 *       one at a time through the KV cache;
 *   gguf_logits --tokenize MODEL.gguf     the ids of standard input's bytes,
 *       BOS added as the file's metadata says, special tokens parsed.
 *
 * Only llama.h's public API. The context: a KV cache in F32 (type_k and
 * type_v), flash attention off, 2 threads, one sequence. Output is one JSON
 * object on standard output:
 *
 *   {"n_vocab": V, "logits": [V numbers, %.9g],
 *    "greedy": {"new": [ids], "gaps": [top-1 minus top-2 logit],
 *               "margins": [gap / max(1, max |logit|)]}}
 *
 * Build (not part of make; generate_gguf.py does it):
 *   cc -O2 -o gguf_logits tests/models/gguf_logits.c \
 *      -I LLAMA/include -I LLAMA/ggml/include -L BUILD/bin -lllama \
 *      -Wl,-rpath,BUILD/bin
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static struct llama_model *load(const char *path, bool vocab_only)
{
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.vocab_only = vocab_only;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model) {
        fprintf(stderr, "gguf_logits: cannot load %s\n", path);
        exit(1);
    }
    return model;
}

static int tokenize(const char *path)
{
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    size_t got;
    while (text && (got = fread(text + len, 1, cap - len, stdin)) > 0) {
        len += got;
        if (len == cap)
            text = realloc(text, cap *= 2);
    }
    if (!text)
        return 1;
    struct llama_model *model = load(path, true);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int max = (int)len + 8;
    llama_token *ids = malloc((size_t)max * sizeof *ids);
    const int n = llama_tokenize(vocab, text, (int32_t)len, ids, max,
                                 llama_vocab_get_add_bos(vocab), true);
    if (n < 0) {
        fprintf(stderr, "gguf_logits: llama_tokenize failed (%d)\n", n);
        return 1;
    }
    printf("[");
    for (int i = 0; i < n; i++)
        printf(i ? ", %d" : "%d", ids[i]);
    printf("]\n");
    free(ids);
    free(text);
    llama_model_free(model);
    return 0;
}

/* The largest logit (the first among equals) and the gap to the second. */
static int argmax(const float *logits, int n, double *gap, double *scale)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    double second = -INFINITY, top = 0;
    for (int i = 0; i < n; i++) {
        if (i != best && logits[i] > second)
            second = logits[i];
        if (fabs(logits[i]) > top)
            top = fabs(logits[i]);
    }
    *gap = (double)logits[best] - second;
    *scale = top > 1 ? top : 1;
    return best;
}

int main(int argc, char **argv)
{
    llama_log_set(quiet, NULL);
    llama_backend_init();
    if (argc == 3 && strcmp(argv[1], "--tokenize") == 0)
        return tokenize(argv[2]);
    if (argc < 4) {
        fprintf(stderr, "usage: gguf_logits MODEL.gguf N_NEW ID...\n"
                        "       gguf_logits --tokenize MODEL.gguf < TEXT\n");
        return 2;
    }
    const int n_new = atoi(argv[2]);
    const int n = argc - 3;
    llama_token *ids = malloc((size_t)(n + n_new) * sizeof *ids);
    for (int i = 0; i < n; i++)
        ids[i] = atoi(argv[3 + i]);

    struct llama_model *model = load(argv[1], false);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n + n_new + 16);
    cp.n_batch = cp.n_ctx;
    cp.n_ubatch = cp.n_ctx;
    cp.n_seq_max = 1;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "gguf_logits: cannot create a context\n");
        return 1;
    }
    if (llama_decode(ctx, llama_batch_get_one(ids, n))) {
        fprintf(stderr, "gguf_logits: llama_decode failed on the prompt\n");
        return 1;
    }
    const float *logits = llama_get_logits_ith(ctx, -1);
    printf("{\"n_vocab\": %d, \"logits\": [", n_vocab);
    for (int i = 0; i < n_vocab; i++)
        printf(i ? ", %.9g" : "%.9g", (double)logits[i]);
    printf("],\n \"greedy\": {");

    int new_ids[256];
    double gaps[256], margins[256];
    const int steps = n_new < 256 ? n_new : 256;
    for (int t = 0; t < steps; t++) {
        double gap, scale;
        new_ids[t] = argmax(logits, n_vocab, &gap, &scale);
        gaps[t] = gap;
        margins[t] = gap / scale;
        ids[n + t] = new_ids[t];
        if (t + 1 < steps) {
            if (llama_decode(ctx, llama_batch_get_one(ids + n + t, 1))) {
                fprintf(stderr, "gguf_logits: llama_decode failed at step %d\n", t);
                return 1;
            }
            logits = llama_get_logits_ith(ctx, -1);
        }
    }
    printf("\"new\": [");
    for (int t = 0; t < steps; t++)
        printf(t ? ", %d" : "%d", new_ids[t]);
    printf("], \"gaps\": [");
    for (int t = 0; t < steps; t++)
        printf(t ? ", %.9g" : "%.9g", gaps[t]);
    printf("], \"margins\": [");
    for (int t = 0; t < steps; t++)
        printf(t ? ", %.9g" : "%.9g", margins[t]);
    printf("]}}\n");

    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(ids);
    return 0;
}
