/*
 * jinja_filters.h - what the filter files share: each filter's function
 * (jinja_filter_fn), and the helpers the sequence filters use.
 */
#ifndef ATTND_JINJA_FILTERS_H
#define ATTND_JINJA_FILTERS_H

#include "jinja_internal.h"

/* A filter's function: id is its own (for messages), skip how many of
 * a's positional arguments are not its own (map's filter name). */
#define FILTER(name)                                                           \
    jinja_status name(struct jctx *c, const struct jnode *at, int id,          \
                      const jv *v, struct jargs *a, size_t skip, jv *out)

/* jinja_filters_seq.c */
FILTER(jinja_f_first);
FILTER(jinja_f_last);
FILTER(jinja_f_join);
FILTER(jinja_f_list);
FILTER(jinja_f_map);
FILTER(jinja_f_select);
FILTER(jinja_f_reject);
FILTER(jinja_f_selectattr);
FILTER(jinja_f_rejectattr);
FILTER(jinja_f_unique);
FILTER(jinja_f_sort);
FILTER(jinja_f_dictsort);
FILTER(jinja_f_sum);
FILTER(jinja_f_min);
FILTER(jinja_f_max);
FILTER(jinja_f_items);
FILTER(jinja_f_reverse);

/* Bind a's arguments to a filter's parameters (jargs_bind(), naming
 * "filter 'name'" in its errors). */
jinja_status jinja_filter_bind(struct jctx *c, const struct jnode *at, int id,
                               const struct jargs *a, size_t skip,
                               const char *const *names, size_t n,
                               const jv **slots);

#define BIND(names_, slots_)                                                   \
    jinja_filter_bind(c, at, id, a, skip, names_,                              \
                      sizeof names_ / sizeof names_[0], slots_)
#define NO_ARGS() jinja_filter_bind(c, at, id, a, skip, NULL, 0, NULL)

#endif
