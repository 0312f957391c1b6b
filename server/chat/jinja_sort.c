/*
 * jinja_sort.c - Python's sorted(): stable, by keys compared with the
 * ordering of jinja_order() (an error for keys that do not compare),
 * every comparison a step. A merge sort, so that n log n comparisons
 * bound it whatever the keys.
 */
#include "jinja_internal.h"

#include <string.h>

struct sorter {
    struct jctx *c;
    const struct jnode *at;
    const jv *keys;
    bool lower, reverse;
};

/* Whether keys[b] sorts strictly before keys[a] (a stays first when
 * they tie: stability, reversed or not). */
static jinja_status before(struct sorter *s, size_t a, size_t b, bool *out)
{
    int cmp;
    jinja_status st = jinja_step(s->c, 1);
    if (st == JINJA_OK)
        st = jv_order(s->c, s->at, &s->keys[b], &s->keys[a], "<", s->lower,
                      &cmp);
    if (st != JINJA_OK)
        return st;
    if (cmp == 2) /* NaN: Python's < is false */
        cmp = 0;
    *out = s->reverse ? cmp > 0 : cmp < 0;
    return JINJA_OK;
}

static jinja_status merge_sort(struct sorter *s, size_t *v, size_t *tmp,
                               size_t n)
{
    /* bottom-up: runs of width 1, 2, 4, ... merged into tmp and back */
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            const size_t mid = lo + width < n ? lo + width : n;
            const size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                bool b;
                const jinja_status st = before(s, v[i], v[j], &b);
                if (st != JINJA_OK)
                    return st;
                tmp[k++] = b ? v[j++] : v[i++];
            }
            while (i < mid)
                tmp[k++] = v[i++];
            while (j < hi)
                tmp[k++] = v[j++];
        }
        memcpy(v, tmp, n * sizeof *v);
    }
    return JINJA_OK;
}

jinja_status jinja_sort(struct jctx *c, const struct jnode *at, const jv *keys,
                        size_t n, bool lower, bool reverse, size_t *order)
{
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    if (n < 2)
        return JINJA_OK;
    size_t *tmp = jinja_alloc(c, n * sizeof *tmp);
    if (!tmp)
        return c->status;
    struct sorter s = {
        .c = c, .at = at, .keys = keys, .lower = lower, .reverse = reverse};
    const jinja_status st = merge_sort(&s, order, tmp, n);
    jinja_release(c, tmp, n * sizeof *tmp);
    return st;
}
