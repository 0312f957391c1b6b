/*
 * params.h - checks of explicit parameters; internal to the core. The
 * layout itself is public: attn_params_layout() in attention.h.
 */
#ifndef ATTN_PARAMS_H
#define ATTN_PARAMS_H

#include "attention.h"

/* Explicit parameters: every weight present, every value finite.
 * A bias is checked whenever present, whether or not the config draws one. */
attn_status params_check(const struct attn_config *cfg,
                         const struct attn_params *p, struct attn_error *err);

#endif
