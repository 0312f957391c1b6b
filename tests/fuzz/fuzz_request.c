/*
 * fuzz_request.c - libFuzzer target for POST /attention: a JSON body
 * through request_parse_json(), then compute and encode.
 *
 * Input: the body, optionally preceded by one line starting with '?' that
 * holds the URL's PNG options (format=png&head=mean...), which the server
 * reads with request_parse_image() before the body. So the corpus stays
 * readable JSON and PNG answers are reached too.
 */
#include "pipeline.h"

#include <stdint.h>
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *query, *copy;
    struct request_param params[FUZZ_MAX_PARAMS];
    size_t n_params, body_len;
    if (!fuzz_split_input(data, size, &query, params, &n_params, &copy,
                          &body_len))
        return 0;

    struct request req;
    struct problem pb;
    memset(&pb, 0, sizeof pb);
    request_init(&req);
    fuzz_answer(&req,
                request_parse_image(&req, params, n_params, IMAGE_JSON, &pb) &&
                    request_parse_json(&req, copy, body_len, &fuzz_limits, &pb),
                &pb);
    free(copy);
    free(query);
    return 0;
}
