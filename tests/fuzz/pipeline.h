/*
 * pipeline.h - what the server does with a request once it has been
 * parsed, for the fuzz targets: compute, then encode as JSON or PNG, with
 * the checks a client would make on the answer.
 */
#ifndef ATTND_FUZZ_PIPELINE_H
#define ATTND_FUZZ_PIPELINE_H

#include "problem.h"
#include "request.h"

#include <stdbool.h>
#include <stdint.h>

/* The limits every fuzz target parses with: small enough that one input
 * stays well under a second, large enough to reach every code path. */
extern const struct request_limits fuzz_limits;

/* Start-up as the server's main() does: OpenBLAS on one thread, the
 * label font loaded once. Aborts if the font is missing, since every PNG
 * input would then fail the same uninteresting way. */
void fuzz_init(void);

/*
 * Answer a parsed request as attention_route.c does, through its kind's
 * operations (answer.h): plan (the image measured), run with one thread,
 * then the image when req->png.format asks for one, else the JSON stream
 * read to its end. Takes ownership of req (it is freed here).
 * Aborts when an answer is malformed: a JSON body that does not parse, a
 * PNG without its signature, a problem without a status or detail.
 */
void fuzz_pipeline_run(struct request *req);

/* At most this many query parameters, as http.c's MAX_QUERY_PARAMS. */
#define FUZZ_MAX_PARAMS 64

/*
 * Split text (len bytes, modified in place, text[len] must be writable and
 * is set to NUL) into key=value pairs on '&' and the first '=' of each, as
 * libmicrohttpd hands them to the server after percent-decoding. A pair
 * without '=' gets the value "". Returns how many pairs went into p, at
 * most FUZZ_MAX_PARAMS; more than that is *overflow (the server's 422).
 */
size_t fuzz_split_query(char *text, size_t len, struct request_param *p,
                        bool *overflow);

/*
 * A target's input split as the server gets it: when its first line
 * starts with '?', that line's URL parameters (into params, *n_params of
 * them, their text in *query, which the caller frees), then the body,
 * copied into *body (the caller frees it) of exactly *body_len bytes, so
 * that ASan sees any read past the length a parser was given. false when
 * the parameters overflow or memory runs out: nothing to run.
 */
bool fuzz_split_input(const uint8_t *data, size_t size, char **query,
                      struct request_param *params, size_t *n_params,
                      char **body, size_t *body_len);

/* Check a refusal the way a client sees it: a 4xx/5xx status, a detail,
 * and a problem+json body that parses. Aborts otherwise. */
void fuzz_check_problem(const struct problem *pb);

/* What the server does once parsing ends: a refusal (parsed false) is
 * checked with fuzz_check_problem() and req freed; a parsed request goes
 * through fuzz_pipeline_run(), which frees it. */
void fuzz_answer(struct request *req, bool parsed, const struct problem *pb);

#endif
