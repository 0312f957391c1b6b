/*
 * params.h - the parameter tensors a config needs, by state_dict name.
 */
#ifndef ATTN_PARAMS_H
#define ATTN_PARAMS_H

#include "attention.h"

enum params_slot {
    PARAMS_WQ,
    PARAMS_BQ,
    PARAMS_WK,
    PARAMS_BK,
    PARAMS_WV,
    PARAMS_BV,
    PARAMS_WO,
    PARAMS_BO,
    PARAMS_MAX_TENSORS
};

struct params_tensor {
    const char *name; /* state_dict name, e.g. "q_proj.weight" */
    enum params_slot slot;
    size_t rows;    /* out_features */
    size_t fan_in;  /* in_features */
    bool is_weight; /* weight [rows][fan_in]; else bias [rows] */
};

/* The tensors a resolved projected config uses, in state_dict order.
 * Biases are listed only when the config draws them. */
size_t params_tensors(const struct attn_config *cfg,
                      struct params_tensor out[PARAMS_MAX_TENSORS]);

/* Number of floats in tensor t. */
size_t params_tensor_count(const struct params_tensor *t);

/* The field of p that holds slot. */
float **params_slot(struct attn_params *p, enum params_slot slot);

/* Explicit parameters: every weight present, every value finite.
 * A bias is checked whenever present, whether or not the config draws one. */
attn_status params_check(const struct attn_config *cfg,
                         const struct attn_params *p, struct attn_error *err);

#endif
