/*
 * fuzz_patch.c - libFuzzer target for POST /patch: a JSON body through
 * patch_parse(), then the patch run and its answer encoded, JSON or
 * image, as patch_route.c makes it.
 *
 * Input: the body, optionally preceded by one line starting with '?' that
 * holds the URL's parameters (format=png&cell=4...). The work of one
 * input is held to a small --max-flops, as the server holds a request's.
 */
#include "pipeline.h"

#include "models.h"
#include "patch_answer.h"
#include "patch_request.h"

#include <cJSON.h>
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

/* A parsed patch run and answered; aborts on an answer a client could
 * not read. */
static void answer(struct patch_request *p)
{
    const struct model *m = p->entry->model;
    struct xf_patch_result r;
    struct attn_error err;
    if (xf_patch_run(&m->xf, &p->patch, NULL, &r, &err) != ATTN_OK)
        return; /* an overflow of float32, named by the core */
    if (p->format == IMAGE_JSON) {
        size_t len = 0;
        char *json = patch_answer_json(p, &r, &len);
        cJSON *doc = json ? cJSON_ParseWithLength(json, len) : NULL;
        if (json && !doc) {
            fprintf(stderr, "fuzz: /patch answer is not JSON: %.*s\n", (int)len,
                    json);
            abort();
        }
        cJSON_Delete(doc);
        free(json);
    } else {
        unsigned char *image = NULL;
        size_t len = 0;
        char msg[256];
        if (patch_answer_image(p, &r, &image, &len, msg, sizeof msg) ==
                DRAW_OK &&
            p->format == IMAGE_PNG &&
            (len < 8 || memcmp(image, "\x89PNG", 4))) {
            fprintf(stderr, "fuzz: /patch image is not a PNG\n");
            abort();
        }
        free(image);
    }
    xf_patch_result_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *query, *copy;
    struct request_param params[FUZZ_MAX_PARAMS];
    size_t n_params, body_len;
    if (!fuzz_split_input(data, size, &query, params, &n_params, &copy,
                          &body_len))
        return 0;
    struct patch_param pp[FUZZ_MAX_PARAMS];
    for (size_t i = 0; i < n_params; i++)
        pp[i] = (struct patch_param){params[i].key, params[i].value};
    struct request_limits lim = fuzz_limits;
    lim.max_flops = 400000000; /* 0.4 GFLOP: well under a second */
    struct patch_request p;
    struct problem pb;
    memset(&pb, 0, sizeof pb);
    if (patch_parse(&p, copy, body_len, pp, n_params, IMAGE_JSON, &lim, NULL,
                    &pb))
        answer(&p);
    else
        fuzz_check_problem(&pb);
    patch_request_free(&p);
    free(copy);
    free(query);
    return 0;
}
