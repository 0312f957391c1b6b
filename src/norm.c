/*
 * norm.c - RMS normalisation of rows (norm.h).
 */
#include "norm.h"

#include <math.h>

void norm_rms(const float *x, size_t rows, size_t cols, const float *w,
              float eps, float *y)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        double sq = 0.0;
        for (size_t c = 0; c < cols; c++)
            sq += (double)xr[c] * xr[c];
        const double rstd = 1.0 / sqrt(sq / (double)cols + (double)eps);
        for (size_t c = 0; c < cols; c++)
            yr[c] = w[c] * (float)(xr[c] * rstd);
    }
}
