/*
 * fuzz_gguf_model.c - libFuzzer target for loading a model from a GGUF
 * file (server/model/gguf_model.h): any bytes written as a file and
 * loaded, through the container's reader, the family's keys and names,
 * the tokenizer and the chat templates. fuzz_gguf fuzzes the container
 * alone; this is what is read from an accepted one.
 *
 * Checks beyond the sanitizers: a refusal is one line naming the model and
 * the file, and leaves no model; an accepted model is freed. Seeds: small
 * test models of the llama, SentencePiece, qwen3 and gemma kinds (links
 * to tests/models/gguf/more/).
 */
#include "model/model.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *err)
{
    fprintf(stderr, "fuzz_gguf_model: %s: %s\n", what, err);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0])
        snprintf(path, sizeof path, "/tmp/attnd-fuzz-%ld.gguf", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
    struct model *m = NULL;
    char err[600] = "";
    if (model_load("f", path, &m, err, sizeof err)) {
        if (!m)
            fail("loaded without a model", err);
        model_free(m);
    } else {
        if (m)
            fail("a refusal that leaves a model", err);
        if (!err[0] || strchr(err, '\n') || strncmp(err, "model 'f': ", 11))
            fail("a refusal that is not one line naming the model", err);
    }
    unlink(path);
    return 0;
}
