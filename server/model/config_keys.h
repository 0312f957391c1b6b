/*
 * config_keys.h - reading config.json's keys, as every family does: each
 * reader takes the parsed document and a key, and on failure returns
 * false with one line in err naming the key and its value.
 */
#ifndef ATTND_CONFIG_KEYS_H
#define ATTND_CONFIG_KEYS_H

#include "transformer.h"

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* A whole number from 1 to cap into *out; fallback when absent (or
 * null) and not required. */
bool config_size(const cJSON *doc, const char *name, size_t cap, bool required,
                 size_t fallback, size_t *out, char *err, size_t err_len);

/* A string key that, when present, must be allowed. */
bool config_string_is(const cJSON *doc, const char *name, const char *allowed,
                      char *err, size_t err_len);

/* A string key into *out (fallback when absent or null). */
bool config_string(const cJSON *doc, const char *name, const char *fallback,
                   const char **out, char *err, size_t err_len);

/* true or false into *out; fallback when absent or null. */
bool config_bool(const cJSON *doc, const char *name, bool fallback, bool *out,
                 char *err, size_t err_len);

/* A flag that must not be true: "NAME is true; " and why. */
bool config_flag_off(const cJSON *doc, const char *name, const char *why,
                     char *err, size_t err_len);

/* An epsilon: a number above 0 (as float32) and at most 1, into *out;
 * fallback when absent. */
bool config_eps(const cJSON *doc, const char *name, float fallback, float *out,
                char *err, size_t err_len);

/* Token ids: one, or a list of at most max, each below below, into
 * ids[*count]; none when absent or null (as generation_config.json's and
 * config.json's eos_token_id, which may be either). */
bool config_ids(const cJSON *doc, const char *name, size_t below, size_t max,
                unsigned *ids, size_t *count, char *err, size_t err_len);

/* rope_scaling: *scaling the object and *type its rope_type (newer
 * files) or type (older ones), both NULL when it is absent, null, or of
 * type "default"; false when it is not an object. */
bool config_rope_scaling(const cJSON *doc, const cJSON **scaling,
                         const char **type, char *err, size_t err_len);

/* The sizes a Hugging Face decoder's config.json names alike, into c:
 * num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads
 * (the heads when absent; it must divide them), intermediate_size,
 * vocab_size, max_position_embeddings (max_positions when absent) and
 * head_dim (head_dim when absent, or with head_dim 0 hidden / heads,
 * which must then divide). */
bool config_decoder_sizes(const cJSON *doc, size_t max_positions,
                          size_t head_dim, struct xf_model *c, char *err,
                          size_t err_len);

/* A finite number above 0 into *out; fallback when absent or null. */
bool config_positive(const cJSON *doc, const char *name, double fallback,
                     double *out, char *err, size_t err_len);

#endif
