/*
 * softmax.c - numerically stable softmax: the row maximum is subtracted
 * before exponentiating, so logits of +-1e4 neither overflow nor vanish
 * wholesale, and sums are kept in double.
 */
#include "softmax.h"

#include <math.h>

static float row_max(const float *s, size_t m)
{
    float mx = -INFINITY;
    for (size_t j = 0; j < m; j++)
        if (s[j] > mx)
            mx = s[j];
    return mx;
}

bool softmax_row(float *s, size_t m)
{
    const float mx = row_max(s, m);
    if (mx == -INFINITY) {
        for (size_t j = 0; j < m; j++)
            s[j] = 0.0f;
        return false;
    }
    double sum = 0.0;
    for (size_t j = 0; j < m; j++) {
        s[j] = expf(s[j] - mx); // exp(-inf) is exactly 0 for masked keys
        sum += s[j];
    }
    const double inv = 1.0 / sum;
    for (size_t j = 0; j < m; j++)
        s[j] = (float)(s[j] * inv);
    return true;
}

void softmax_online_init(struct softmax_online *st)
{
    st->max = -INFINITY;
    st->sum = 0.0;
}

float softmax_online_block(struct softmax_online *st, float *s, size_t m)
{
    const float block_max = row_max(s, m);
    if (block_max == -INFINITY) {
        for (size_t j = 0; j < m; j++)
            s[j] = 0.0f;
        return 1.0f;
    }
    // online softmax: rescale the running sum when the max grows
    float rescale = 1.0f;
    if (block_max > st->max) {
        rescale = st->max == -INFINITY ? 0.0f : expf(st->max - block_max);
        st->sum *= rescale;
        st->max = block_max;
    }
    double sum = 0.0;
    for (size_t j = 0; j < m; j++) {
        s[j] = expf(s[j] - st->max);
        sum += s[j];
    }
    st->sum += sum;
    return rescale;
}
