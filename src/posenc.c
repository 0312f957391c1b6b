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
                       size_t d_head, size_t pos0, double base)
{
    const size_t pairs = d_head / 2;
    for (size_t r = 0; r < n; r++) {
        const double pos = (double)(pos0 + r);
        float *row = x + r * ld;
        for (size_t i = 0; i < pairs; i++) {
            const double angle =
                pos * pow(base, -(double)(2 * i) / (double)d_head);
            const double c = cos(angle), s = sin(angle);
            for (size_t a = 0; a < heads; a++) {
                float *pair = row + a * d_head + 2 * i;
                const double p0 = pair[0], p1 = pair[1];
                // (a, b) -> (a cos - b sin, a sin + b cos)
                pair[0] = (float)(p0 * c - p1 * s);
                pair[1] = (float)(p0 * s + p1 * c);
            }
        }
    }
}
