/*
 * rng.c - keyed SplitMix64 streams and the deterministic token embeddings
 * drawn from them. docs/math.md, "Random streams", is the normative spec;
 * a Python user must be able to reproduce every number from it.
 */
#include "attention.h"
#include "rng.h"

#include <math.h>
#include <string.h>

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

uint64_t attn_fnv1a64(const void *bytes, size_t len)
{
    const unsigned char *p = bytes;
    uint64_t h = FNV_OFFSET;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * FNV_PRIME;
    return h;
}

uint64_t attn_stream_key(uint64_t seed, const char *label, size_t label_len)
{
    return seed ^ attn_fnv1a64(label, label_len);
}

static uint64_t mix64(uint64_t z)
{
    RNG_MIX64(z);
    return z;
}

/* Draw n is the (n+1)-th SplitMix64 output, so any element is reachable
 * without generating the ones before it: threads and blocks may draw in any
 * order and still agree. */
uint64_t attn_stream_draw(uint64_t key, uint64_t n)
{
    return mix64(key + (n + 1) * RNG_GAMMA);
}

double rng_unit(uint64_t key, uint64_t n)
{
    return (double)(attn_stream_draw(key, n) >> 11) * 0x1.0p-53;
}

uint64_t rng_key_prefixed(uint64_t seed, const char *prefix, const char *text,
                          size_t len)
{
    uint64_t h = FNV_OFFSET;
    for (const unsigned char *p = (const unsigned char *)prefix; *p; p++)
        h = (h ^ *p) * FNV_PRIME;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)text[i]) * FNV_PRIME;
    return seed ^ h;
}

void rng_normal_pair(uint64_t key, size_t i, size_t dim, float *out)
{
    const double two_pi = 6.283185307179586476925286766559;
    // Box-Muller: two uniforms give two independent standard normals
    const double u1 = 1.0 - rng_unit(key, 2 * i);
    const double u2 = rng_unit(key, 2 * i + 1);
    const double r = sqrt(-2.0 * log(u1));
    out[2 * i] = (float)(r * cos(two_pi * u2));
    if (2 * i + 1 < dim)
        out[2 * i + 1] = (float)(r * sin(two_pi * u2));
}

void attn_embed_token(const char *text, size_t len, uint64_t seed, size_t dim,
                      float *out)
{
    rng_normals(rng_key_prefixed(seed, "token:", text, len), dim, out);
}
