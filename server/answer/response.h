/*
 * response.h - an attention result as a JSON body, produced piece by piece
 * so that a weights array of millions of numbers is formatted straight
 * into the socket's buffer, never held as a tree or a whole text.
 */
#ifndef ATTND_RESPONSE_H
#define ATTND_RESPONSE_H

#include "request.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct response_stream;

/*
 * A stream over the JSON body for req and res, which it borrows: both must
 * outlive the stream. NULL when memory runs out. The body: tokens,
 * context_tokens, config, the requested arrays in a fixed order, warnings.
 * The same request always gives the same bytes.
 */
struct response_stream *response_stream_new(const struct request *req,
                                            const struct attn_result *res);

/* The same for a request on a model (REQUEST_MODEL) and the encoder's
 * result res: model, tokens, token_type_ids, config, then weights,
 * mean_weights, hidden_states and rollout as asked. */
struct response_stream *response_stream_new_model(const struct request *req,
                                                  const struct xf_result *res);

/* The body without its last newline, to be a member of a larger JSON
 * value (an event's data is one line). Before the first read. */
void response_stream_inline(struct response_stream *s);

/* At most the bytes a stream over req's answer holds: its staging buffer
 * and its text (tokens, config, warnings); of a model's answer with
 * response_stream_bytes_model(). */
size_t response_stream_bytes(const struct request *req);
size_t response_stream_bytes_model(const struct request *req);

/* Bytes of a model's logit lens as JSON at most (SIZE_MAX past the text
 * an answer may hold, response_text_cap()), from the request alone. */
size_t response_lens_bytes(const struct request *req);
size_t response_text_cap(void);

/* The JSON text of sparse_weights and of head_stats (response.c writes
 * them whole), from the request alone; SIZE_MAX past the cap. */
size_t response_sparse_bytes(const struct request *req);
size_t response_stats_bytes(const struct request *req);

/* A 422 in pb when they would not fit an answer's text together: naming
 * top_k, or return. */
bool response_measures_fit(const struct request *req, struct problem *pb);

/* Copy up to max bytes of the body into out; 0 at the end. */
size_t response_stream_read(struct response_stream *s, char *out, size_t max);

void response_stream_free(struct response_stream *s);

/* The "warnings" of a result, e.g. fully masked query rows, as a JSON
 * array (the caller frees it); also used for PNG text chunks. */
char *response_warnings_json(const struct request *req,
                             const struct attn_result *res);

#endif
