/*
 * models.h - the checkpoints a server loads at start-up (--model
 * NAME=DIR, ATTND_MODELS), looked up by name for every request, with
 * their per-model counters for /metrics. Loaded before the port opens and
 * never changed after: requests read them from every thread without a
 * lock; only the counters are written, atomically.
 */
#ifndef ATTND_MODELS_H
#define ATTND_MODELS_H

#include "buf.h"
#include "model.h"
#include "options_list.h"

#include <stdatomic.h>
#include <time.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MODELS_MAX 16

struct models_entry {
    struct model *model;  /* owned */
    uint64_t fingerprint; /* of its files, for GET answers' ETags */
    time_t loaded;        /* when: GET /v1/models' "created" */
    atomic_uint_fast64_t requests, flops;
};

struct models {
    size_t count;
    struct models_entry entry[MODELS_MAX];
};

/*
 * Load every "NAME=DIR" of specs into set (zeroed by the caller),
 * in order. A spec without '=', a name given twice or a checkpoint that
 * does not load fails the whole: false with one line in err, and nothing
 * is left loaded. On success release set with models_free().
 */
bool models_load(struct models *set, const struct options_list *specs,
                 char *err, size_t err_len);
void models_free(struct models *set);

/* The model named name[0..len), or NULL. */
struct models_entry *models_find(struct models *set, const char *name,
                                 size_t len);

/* The names, quoted and separated by ", " ("none loaded" when empty),
 * for a message. */
void models_names(const struct models *set, char *out, size_t out_len);

/* GET /models: {"models": [{name, layers, heads, ...}]}; the caller
 * frees it; NULL when memory runs out. */
char *models_document(const struct models *set, size_t *len);

/* A request of e was answered, with flops of work. */
void models_count(struct models_entry *e, double flops);

/* The per-model counters in Prometheus' text format, appended to out. */
bool models_metrics(struct models *set, struct buf *out);

#endif
