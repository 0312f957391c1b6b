/*
 * posenc.c - sinusoidal ("Attention Is All You Need") and rotary (LLaMA,
 * interleaved pairs) position encodings. Angles are computed in double so
 * long sequences keep their precision.
 */
#include "posenc.h"

#include <math.h>
#include <stdbool.h>

void posenc_add_sinusoidal(float *x, size_t n, size_t d, size_t pos0)
{
    for (size_t c = 0; c < d; c++) {
        // PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)
        const double freq = pow(10000.0, -(double)(c & ~(size_t)1) / (double)d);
        const bool odd = c & 1;
        for (size_t r = 0; r < n; r++) {
            const double angle = (double)(pos0 + r) * freq;
            float *v = x + r * d + c;
            *v = (float)((double)*v + (odd ? cos(angle) : sin(angle)));
        }
    }
}

void posenc_apply_rope(float *x, size_t n, size_t ld, size_t heads,
                       size_t d_head, const struct attn_rotary *rope,
                       size_t pos0)
{
    const size_t dims = rope->dims, pairs = dims / 2;
    const bool half = rope->pairing == ATTN_ROPE_HALF;
    // where pair i's two values sit in a head
    const size_t first_step = half ? 1 : 2, second = half ? pairs : 1;
    for (size_t r = 0; r < n; r++) {
        const double pos = (double)(pos0 + r);
        float *row = x + r * ld;
        for (size_t i = 0; i < pairs; i++) {
            const double freq =
                rope->inv_freq
                    ? rope->inv_freq[i]
                    : pow(rope->base, -(double)(2 * i) / (double)dims);
            const double angle = pos * freq;
            const double c = cos(angle) * rope->factor,
                         s = sin(angle) * rope->factor;
            for (size_t a = 0; a < heads; a++) {
                float *p = row + a * d_head + i * first_step;
                const double p0 = p[0], p1 = p[second];
                // (a, b) -> (a cos - b sin, a sin + b cos)
                p[0] = (float)(p0 * c - p1 * s);
                p[second] = (float)(p0 * s + p1 * c);
            }
        }
    }
}
