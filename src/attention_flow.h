/*
 * attention_flow.h - attention flow (Abnar and Zuidema 2020): how much of
 * each output token can be traced back to each input token, as the
 * maximum flow through the layers' attention graph. Internal to the core;
 * transformer.h returns it.
 */
#ifndef ATTN_ATTENTION_FLOW_H
#define ATTN_ATTENTION_FLOW_H

#include <stddef.h>

/* Bytes of scratch attention_flow() needs for layers x n tokens. */
size_t attention_flow_bytes(size_t layers, size_t n);

/*
 * The graph has a node for each token at each of layers + 1 levels; an
 * edge from token i at level l + 1 to token j at level l has capacity
 * Ahat_l[i][j], Ahat_l = 0.5 * mean_l + 0.5 * I with each row divided by
 * its sum (the rollout's matrices). out[i][j] is the value of a maximum
 * flow from output token i (level layers) to input token j (level 0).
 * mean: [layers][n][n], each layer's weights averaged over heads;
 * scratch: attention_flow_bytes(); out: [n][n].
 */
void attention_flow(const float *mean, size_t layers, size_t n, void *scratch,
                    float *out);

#endif
