/*
 * bert_ops.c - the elementwise pieces of the BERT encoder: LayerNorm and
 * the two GELU forms transformers names "gelu" and "gelu_new".
 */
#include "bert.h"

#include <math.h>

void bert_layer_norm(const float *x, size_t rows, size_t cols, const float *w,
                     const float *b, float eps, float *y)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        // mean and biased variance in double: two passes, no cancellation
        double sum = 0.0;
        for (size_t c = 0; c < cols; c++)
            sum += xr[c];
        const double mean = sum / (double)cols;
        double sq = 0.0;
        for (size_t c = 0; c < cols; c++) {
            const double d = xr[c] - mean;
            sq += d * d;
        }
        const double rstd = 1.0 / sqrt(sq / (double)cols + (double)eps);
        for (size_t c = 0; c < cols; c++)
            yr[c] = (float)((xr[c] - mean) * rstd) * w[c] + b[c];
    }
}

void bert_activation(bert_act act, float *x, size_t count)
{
    if (act == BERT_ACT_GELU) {
        // x/2 * (1 + erf(x / sqrt 2)); 0.7071... = 1 / sqrt 2
        for (size_t i = 0; i < count; i++)
            x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
        return;
    }
    // x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    for (size_t i = 0; i < count; i++) {
        const float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
    }
}
