/*
 * fuzz_request.c - libFuzzer target for POST /attention: a JSON body
 * through request_parse_json(), then compute and encode.
 *
 * Input: the body, optionally preceded by one line starting with '?' that
 * holds the URL's PNG options (format=png&head=mean...), which the server
 * reads with request_parse_png() before the body. So the corpus stays
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
    const char *body = (const char *)data;
    size_t body_len = size;
    char *query = NULL;
    struct request_param params[FUZZ_MAX_PARAMS];
    size_t n_params = 0;
    if (size > 0 && data[0] == '?') {
        const uint8_t *nl = memchr(data, '\n', size);
        const size_t qlen = nl ? (size_t)(nl - data) - 1 : size - 1;
        query = malloc(qlen + 1);
        if (!query)
            return 0;
        memcpy(query, data + 1, qlen);
        bool overflow;
        n_params = fuzz_split_query(query, qlen, params, &overflow);
        if (overflow) {
            free(query);
            return 0;
        }
        body = nl ? (const char *)nl + 1 : body + size;
        body_len = size - (size_t)(body - (const char *)data);
    }
    /* the body in a buffer of exactly its size, so ASan sees any read
     * past len: the parser's contract is by length, not by a NUL */
    char *copy = malloc(body_len ? body_len : 1);
    if (!copy) {
        free(query);
        return 0;
    }
    memcpy(copy, body, body_len);

    struct request req;
    struct problem pb;
    memset(&pb, 0, sizeof pb);
    request_init(&req);
    fuzz_answer(&req,
                request_parse_png(&req, params, n_params, false, &pb) &&
                    request_parse_json(&req, copy, body_len, &fuzz_limits, &pb),
                &pb);
    free(copy);
    free(query);
    return 0;
}
