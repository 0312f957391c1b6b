/*
 * fuzz_openai.c - libFuzzer target for the OpenAI-compatible routes'
 * bodies (server/request/openai_request.h): a completions or chat body
 * decoded, a chat rendered through the model's real template, then the
 * generation planned and run for a few tokens as openai_route.c runs it.
 *
 * Input: the first byte picks the route (even: /v1/completions, odd:
 * /v1/chat/completions), the rest is the body. Checks beyond the
 * sanitizers: a refusal is a problem a client can read (status, detail,
 * a pointer naming a field); a generation stays within what it planned.
 */
#include "pipeline.h"

#include "decoding.h"
#include "models.h"
#include "openai_request.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_init();
    return 0;
}

static bool never_gone(void *arg)
{
    (void)arg;
    return false;
}

/* Each token: its step well formed. */
static bool check_token(void *arg, const struct decode_step *step)
{
    const struct decoding *d = arg;
    const size_t vocab = d->g->req.model.entry->model->xf.vocab_size;
    if (step->id >= vocab || step->text_before > d->text.len) {
        fprintf(stderr, "fuzz_openai: a token out of range\n");
        abort();
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const enum openai_route route =
        data[0] & 1 ? OPENAI_CHAT : OPENAI_COMPLETIONS;
    char *body = malloc(size); /* exactly its bytes, for ASan */
    if (!body)
        return 0;
    memcpy(body, data + 1, size - 1);
    struct request_limits lim = fuzz_limits;
    lim.max_flops = 200000000; /* 0.2 GFLOP: well under a second */
    struct openai_request o;
    struct problem pb;
    memset(&pb, 0, sizeof pb);
    if (!openai_parse(&o, route, body, size - 1, &lim, NULL, 1772701622, &pb)) {
        fuzz_check_problem(&pb);
        openai_request_free(&o);
        free(body);
        return 0;
    }
    // a few tokens, as the route makes them
    if (o.g.max_new > 3)
        o.g.max_new = 3;
    static atomic_bool cancel;
    const size_t prompt = o.g.req.model.enc.count;
    struct decoding d = {.g = &o.g,
                         .prompt = prompt,
                         .capacity = prompt + o.g.max_new,
                         .cancel = &cancel,
                         .row_want = o.row_want,
                         .token = check_token,
                         .gone = never_gone};
    d.arg = &d;
    buf_init(&d.text, (size_t)1 << 20);
    double flops = 0;
    size_t bytes = 0;
    if (decoding_widen(&d) &&
        decoding_plan(&d, &lim, 0, 0, &flops, &bytes, &pb) && o.g.max_new)
        decoding_run(&d);
    else if (pb.status)
        fuzz_check_problem(&pb);
    buf_free(&d.text);
    openai_request_free(&o);
    free(body);
    return 0;
}
