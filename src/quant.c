/*
 * quant.c - ggml's quantized blocks widened to float32 in ggml's own
 * order of operations (see quant.h for the layouts).
 *
 * Every product that a sum follows is its own statement: a compiler may
 * fuse a*b + c within one expression (clang does by default), never
 * across statements, and ggml's reference rounds the product first.
 * (Those products are exact as it is, 11-bit scales times 6-bit scales
 * times 5-bit quants; the order is kept so that no reading depends on
 * it.)
 */
#include "quant.h"

#include "attention.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

enum { QK = 32, QK_K = 256 };

/* The fp16 at p (little-endian, any alignment), widened exactly. */
static float half_at(const unsigned char *p)
{
    const uint16_t h = (uint16_t)(p[0] | p[1] << 8);
    float f;
    attn_widen(&h, ATTN_F16, 1, &f);
    return f;
}

static uint32_t u32_at(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* Scale and min j (< 8) of a K-quant block's 12 bytes: j < 4 the low six
 * bits of bytes j and j+4; otherwise a nibble of byte j+4 with the top
 * two bits of byte j-4 (scale) or byte j (min) above it. */
static void scale_min_k4(int j, const unsigned char *q, unsigned *sc,
                         unsigned *m)
{
    if (j < 4) {
        *sc = q[j] & 63u;
        *m = q[j + 4] & 63u;
    } else {
        *sc = (q[j + 4] & 0xFu) | (unsigned)(q[j - 4] >> 6) << 4;
        *m = (unsigned)(q[j + 4] >> 4) | (unsigned)(q[j] >> 6) << 4;
    }
}

void quant_widen_q8_0(const void *src, size_t count, float *dst)
{
    assert(count % QK == 0);
    const unsigned char *b = src;
    for (size_t i = 0; i < count / QK; i++, b += 34, dst += QK) {
        const float d = half_at(b);
        for (int j = 0; j < QK; j++) // y = q d
            dst[j] = (float)(int8_t)b[2 + j] * d;
    }
}

void quant_widen_q4_0(const void *src, size_t count, float *dst)
{
    assert(count % QK == 0);
    const unsigned char *b = src;
    for (size_t i = 0; i < count / QK; i++, b += 18, dst += QK) {
        const float d = half_at(b);
        const unsigned char *qs = b + 2;
        for (int j = 0; j < QK / 2; j++) { // y = (q - 8) d
            dst[j] = (float)((qs[j] & 0x0F) - 8) * d;
            dst[j + QK / 2] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}

void quant_widen_q4_1(const void *src, size_t count, float *dst)
{
    assert(count % QK == 0);
    const unsigned char *b = src;
    for (size_t i = 0; i < count / QK; i++, b += 20, dst += QK) {
        const float d = half_at(b), m = half_at(b + 2);
        const unsigned char *qs = b + 4;
        for (int j = 0; j < QK / 2; j++) { // y = q d + m
            const float p0 = (float)(qs[j] & 0x0F) * d;
            const float p1 = (float)(qs[j] >> 4) * d;
            dst[j] = p0 + m;
            dst[j + QK / 2] = p1 + m;
        }
    }
}

void quant_widen_q5_0(const void *src, size_t count, float *dst)
{
    assert(count % QK == 0);
    const unsigned char *b = src;
    for (size_t i = 0; i < count / QK; i++, b += 22, dst += QK) {
        const float d = half_at(b);
        const uint32_t qh = u32_at(b + 2);
        const unsigned char *qs = b + 6;
        for (int j = 0; j < QK / 2; j++) { // y = (q - 16) d
            const int h0 = (int)(qh >> j & 1u) << 4;
            const int h1 = (int)(qh >> (j + 16) & 1u) << 4;
            dst[j] = (float)(((qs[j] & 0x0F) | h0) - 16) * d;
            dst[j + QK / 2] = (float)(((qs[j] >> 4) | h1) - 16) * d;
        }
    }
}

void quant_widen_q5_1(const void *src, size_t count, float *dst)
{
    assert(count % QK == 0);
    const unsigned char *b = src;
    for (size_t i = 0; i < count / QK; i++, b += 24, dst += QK) {
        const float d = half_at(b), m = half_at(b + 2);
        const uint32_t qh = u32_at(b + 4);
        const unsigned char *qs = b + 8;
        for (int j = 0; j < QK / 2; j++) { // y = q d + m
            const int h0 = (int)(qh >> j & 1u) << 4;
            const int h1 = (int)(qh >> (j + 16) & 1u) << 4;
            const float p0 = (float)((qs[j] & 0x0F) | h0) * d;
            const float p1 = (float)((qs[j] >> 4) | h1) * d;
            dst[j] = p0 + m;
            dst[j + QK / 2] = p1 + m;
        }
    }
}

/* Q4_K and Q5_K (has_qh: the fifth bits at bytes 16..47). */
static void widen_k4(const unsigned char *b, size_t count, float *dst,
                     size_t block_bytes, int has_qh)
{
    assert(count % QK_K == 0);
    for (size_t i = 0; i < count / QK_K; i++, b += block_bytes) {
        const float d = half_at(b), dmin = half_at(b + 2);
        const unsigned char *scales = b + 4;
        const unsigned char *qh = has_qh ? b + 16 : NULL;
        const unsigned char *q = b + (has_qh ? 48 : 16);
        for (int c = 0; c < 4; c++, q += 32) { // 64 values: 2 x 32
            unsigned sc, m;
            scale_min_k4(2 * c, scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            scale_min_k4(2 * c + 1, scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            const unsigned u1 = 1u << 2 * c, u2 = 2u << 2 * c;
            for (int l = 0; l < 32; l++) { // y = (d sc) q - dmin m
                const unsigned h = qh && (qh[l] & u1) ? 16 : 0;
                const float p = d1 * (float)((q[l] & 0xFu) + h);
                *dst++ = p - m1;
            }
            for (int l = 0; l < 32; l++) {
                const unsigned h = qh && (qh[l] & u2) ? 16 : 0;
                const float p = d2 * (float)((q[l] >> 4) + h);
                *dst++ = p - m2;
            }
        }
    }
}

void quant_widen_q4_k(const void *src, size_t count, float *dst)
{
    widen_k4(src, count, dst, 144, 0);
}

void quant_widen_q5_k(const void *src, size_t count, float *dst)
{
    widen_k4(src, count, dst, 176, 1);
}

void quant_widen_q6_k(const void *src, size_t count, float *dst)
{
    assert(count % QK_K == 0);
    const unsigned char *b = src;
    for (size_t i = 0; i < count / QK_K; i++, b += 210) {
        const float d = half_at(b + 208);
        const unsigned char *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        for (int n = 0; n < QK_K; n += 128) {
            for (int l = 0; l < 32; l++) { // y = (d sc) (q - 32)
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (qh[l] & 3) << 4) - 32;
                const int q2 =
                    ((ql[l + 32] & 0xF) | (qh[l] >> 2 & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4) - 32;
                dst[l] = d * (float)sc[is] * (float)q1;
                dst[l + 32] = d * (float)sc[is + 2] * (float)q2;
                dst[l + 64] = d * (float)sc[is + 4] * (float)q3;
                dst[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
            dst += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

static const struct quant_info {
    int type;
    const char *name;
    size_t values, bytes;
    void (*widen)(const void *, size_t, float *);
} quant_infos[] = {
    {QUANT_Q4_0, "Q4_0", QK, 18, quant_widen_q4_0},
    {QUANT_Q4_1, "Q4_1", QK, 20, quant_widen_q4_1},
    {QUANT_Q5_0, "Q5_0", QK, 22, quant_widen_q5_0},
    {QUANT_Q5_1, "Q5_1", QK, 24, quant_widen_q5_1},
    {QUANT_Q8_0, "Q8_0", QK, 34, quant_widen_q8_0},
    {QUANT_Q4_K, "Q4_K", QK_K, 144, quant_widen_q4_k},
    {QUANT_Q5_K, "Q5_K", QK_K, 176, quant_widen_q5_k},
    {QUANT_Q6_K, "Q6_K", QK_K, 210, quant_widen_q6_k},
};

static const struct quant_info *quant_info(int type)
{
    for (size_t i = 0; i < sizeof quant_infos / sizeof quant_infos[0]; i++)
        if (quant_infos[i].type == type)
            return &quant_infos[i];
    return NULL;
}

size_t quant_block_values(int type)
{
    const struct quant_info *q = quant_info(type);
    return q ? q->values : 0;
}

size_t quant_block_bytes(int type)
{
    const struct quant_info *q = quant_info(type);
    return q ? q->bytes : 0;
}

const char *quant_type_name(int type)
{
    const struct quant_info *q = quant_info(type);
    return q ? q->name : NULL;
}

void quant_widen(const void *src, quant_type type, size_t count, float *dst)
{
    const struct quant_info *q = quant_info((int)type);
    assert(q);
    q->widen(src, count, dst);
}
