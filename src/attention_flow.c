/*
 * attention_flow.c - attention flow by Dinic's maximum flow, one flow per
 * pair of tokens (attention_flow.h).
 *
 * Every path from an output token to an input token crosses each layer
 * once, so the graph is layered and small (layers x n^2 edges); what costs
 * is the n^2 flows, which is why a caller bounds n.
 */
#include "attention_flow.h"

#include <string.h>

/* A residual capacity below this is spent: the capacities are sums and
 * differences of weights near 1, in double. */
#define SPENT 1e-12

struct graph {
    size_t nodes, edges;  /* edges counts each edge and its reverse */
    size_t *first;        /* [nodes + 1] a node's edges are first[v] ..
                             first[v + 1] - 1 */
    size_t *to, *partner; /* [edges] head, and the index of the reverse */
    double *capacity;     /* [edges] the edge's own (0 for a reverse) */
    double *residual;     /* [edges] what is left in this flow */
    size_t *level, *next, *queue; /* [nodes] Dinic's state */
    size_t *stack;                /* [nodes] the path being pushed */
};

/* The edges of token i at level l + 1, to every token j of level l, and
 * their reverses at j: each node's edges counted first. */
static size_t node(size_t n, size_t level, size_t token)
{
    return level * n + token;
}

size_t attention_flow_bytes(size_t layers, size_t n)
{
    const size_t nodes = (layers + 1) * n, edges = 2 * layers * n * n;
    return (nodes + 1) * sizeof(size_t) + edges * (2 * sizeof(size_t)) +
           edges * 2 * sizeof(double) + nodes * 4 * sizeof(size_t) +
           (size_t)layers * n * n * sizeof(double);
}

/* Lay out g in scratch and fill its edges from the layers' matrices,
 * normalised as the rollout's. ahat: [layers][n][n] in scratch too. */
static void build(struct graph *g, const float *mean, size_t layers, size_t n,
                  void *scratch)
{
    char *at = scratch;
    g->nodes = (layers + 1) * n;
    g->edges = 2 * layers * n * n;
#define TAKE(ptr, count)                                                       \
    do {                                                                       \
        (ptr) = (void *)at;                                                    \
        at += (count) * sizeof *(ptr);                                         \
    } while (0)
    TAKE(g->capacity, g->edges);
    TAKE(g->residual, g->edges);
    double *ahat;
    TAKE(ahat, layers * n * n);
    TAKE(g->first, g->nodes + 1);
    TAKE(g->to, g->edges);
    TAKE(g->partner, g->edges);
    TAKE(g->level, g->nodes);
    TAKE(g->next, g->nodes);
    TAKE(g->queue, g->nodes);
    TAKE(g->stack, g->nodes);
#undef TAKE
    // Ahat_l = 0.5 A_l + 0.5 I, each row divided by its sum
    for (size_t l = 0; l < layers; l++)
        for (size_t i = 0; i < n; i++) {
            double *row = ahat + (l * n + i) * n, sum = 0;
            for (size_t j = 0; j < n; j++) {
                row[j] = 0.5 * mean[(l * n + i) * n + j] + (i == j ? 0.5 : 0);
                sum += row[j];
            }
            for (size_t j = 0; j < n; j++)
                row[j] /= sum;
        }
    // each node's edges: down to the level below (n), up from the level
    // above as reverses (n)
    g->first[0] = 0;
    for (size_t v = 0; v < g->nodes; v++) {
        const size_t level = v / n;
        const size_t count = (level > 0 ? n : 0) + (level < layers ? n : 0);
        g->first[v + 1] = g->first[v] + count;
    }
    // a node's down edges first, then its up (reverse) ones
    for (size_t l = 0; l < layers; l++)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                const size_t from = node(n, l + 1, i), into = node(n, l, j);
                const size_t e = g->first[from] + j;
                const size_t r = g->first[into] + (l > 0 ? n : 0) + i;
                g->to[e] = into;
                g->to[r] = from;
                g->partner[e] = r;
                g->partner[r] = e;
                g->capacity[e] = ahat[(l * n + i) * n + j];
                g->capacity[r] = 0;
            }
}

/* Levels from s by breadth-first search over edges with room; whether t
 * is reached. */
static int levels(struct graph *g, size_t s, size_t t)
{
    for (size_t v = 0; v < g->nodes; v++)
        g->level[v] = (size_t)-1;
    size_t head = 0, tail = 0;
    g->level[s] = 0;
    g->queue[tail++] = s;
    while (head < tail) {
        const size_t v = g->queue[head++];
        for (size_t e = g->first[v]; e < g->first[v + 1]; e++) {
            const size_t w = g->to[e];
            if (g->residual[e] > SPENT && g->level[w] == (size_t)-1) {
                g->level[w] = g->level[v] + 1;
                g->queue[tail++] = w;
            }
        }
    }
    return g->level[t] != (size_t)-1;
}

/* One path from s to t along increasing levels, pushed with its
 * bottleneck; 0 when none is left in this phase. Iterative: the path is
 * at most the number of nodes long. */
static double push_path(struct graph *g, size_t s, size_t t)
{
    size_t depth = 0, v = s;
    for (;;) {
        if (v == t) {
            double bottleneck = 1e300;
            for (size_t k = 0; k < depth; k++)
                if (g->residual[g->stack[k]] < bottleneck)
                    bottleneck = g->residual[g->stack[k]];
            for (size_t k = 0; k < depth; k++) {
                g->residual[g->stack[k]] -= bottleneck;
                g->residual[g->partner[g->stack[k]]] += bottleneck;
            }
            return bottleneck;
        }
        // the next edge of v that leads one level on with room
        size_t e = g->next[v];
        while (e < g->first[v + 1] && !(g->residual[e] > SPENT &&
                                        g->level[g->to[e]] == g->level[v] + 1))
            e++;
        g->next[v] = e;
        if (e < g->first[v + 1]) {
            g->stack[depth++] = e;
            v = g->to[e];
            continue;
        }
        // a dead end: back up, and skip the edge that led here
        if (depth == 0)
            return 0;
        g->level[v] = (size_t)-1;
        depth--;
        v = g->to[g->partner[g->stack[depth]]];
        g->next[v]++;
    }
}

static double max_flow(struct graph *g, size_t s, size_t t)
{
    memcpy(g->residual, g->capacity, g->edges * sizeof *g->residual);
    double total = 0;
    while (levels(g, s, t)) {
        for (size_t v = 0; v < g->nodes; v++)
            g->next[v] = g->first[v];
        double pushed;
        while ((pushed = push_path(g, s, t)) > 0)
            total += pushed;
    }
    return total;
}

void attention_flow(const float *mean, size_t layers, size_t n, void *scratch,
                    float *out)
{
    struct graph g;
    build(&g, mean, layers, n, scratch);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            out[i * n + j] =
                (float)max_flow(&g, node(n, layers, i), node(n, 0, j));
}
