/*
 * rng.h - internal helpers over the keyed streams of attention.h.
 */
#ifndef ATTN_RNG_H
#define ATTN_RNG_H

#include <stddef.h>
#include <stdint.h>

/* Draw n of the stream as a double in [0, 1) with 53 random bits. */
double rng_unit(uint64_t key, uint64_t n);

/* attn_stream_key(seed, prefix + text) without building the label. */
uint64_t rng_key_prefixed(uint64_t seed, const char *prefix, const char *text,
                          size_t len);

#endif
