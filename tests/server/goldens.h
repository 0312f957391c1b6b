/*
 * goldens.h - replaying the decoder goldens of tests/models/golden/ in the
 * server's unit tests: their number lists, and their greedy continuations
 * through a KV cache.
 */
#ifndef ATTND_TEST_GOLDENS_H
#define ATTND_TEST_GOLDENS_H

#include "model/model.h"

#include <cJSON.h>
#include <stddef.h>

/* The numbers of a JSON list, into a new block (the caller frees it), and
 * their count. */
double *golden_doubles(const cJSON *list, size_t *n);

/*
 * transformers' generate(do_sample=False) from greedy's "prompt": the
 * prompt starts a KV cache, then each greedy token goes through it alone,
 * on one thread or two, and must be greedy's "new" id. With near_tie
 * above 0 the golden's "margins" are read too, and the first step closer
 * than near_tie (the gap of its two largest logits over the largest
 * |logit|) ends the comparison: there float32 may rightly choose the
 * other token. name is for the messages.
 */
void golden_greedy(const struct model *m, const char *name, const cJSON *greedy,
                   double near_tie);

#endif
