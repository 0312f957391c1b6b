/*
 * fuzz_query.c - libFuzzer target for GET /attention: the input is a
 * decoded query string, split into key=value pairs on '&' and '=', read
 * by request_parse_image() and request_parse_query(), then computed and
 * encoded as JSON or PNG.
 *
 * A leading '!' stands for "Accept: image/png" (a PNG without format=png).
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
    const bool accept_png = size > 0 && data[0] == '!';
    if (accept_png) {
        data++;
        size--;
    }
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    struct request_param params[FUZZ_MAX_PARAMS];
    bool overflow;
    const size_t n = fuzz_split_query(text, size, params, &overflow);
    if (!overflow) {
        struct request req;
        struct problem pb;
        memset(&pb, 0, sizeof pb);
        request_init(&req);
        fuzz_answer(&req,
                    request_parse_image(&req, params, n,
                                        accept_png ? IMAGE_PNG : IMAGE_JSON,
                                        &pb) &&
                        request_parse_query(&req, params, n, &fuzz_limits, &pb),
                    &pb);
    }
    free(text);
    return 0;
}
