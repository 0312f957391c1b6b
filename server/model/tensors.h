/*
 * tensors.h - the tensors a family names (family.h), found in a
 * checkpoint's safetensors files (shards.h) and put into the model's
 * slots, the same way for every family.
 */
#ifndef ATTND_TENSORS_H
#define ATTND_TENSORS_H

#include "model.h"
#include "model_files.h"
#include "shards.h"

#include <stdbool.h>

/*
 * Every tensor m->family names, under its prefix (or an older spelling
 * it allows): its dtype (F32, F16 or BF16) and shape checked against the
 * config, its values checked finite. A matrix is used in place at its
 * width when it is stored as the core reads it; one stored [in][out], or
 * sliced across its rows' elements, is copied once, at its width, into
 * m->converted; a vector that is not F32 is widened there. A tensor left
 * in the network's namespace is an error (a network config.json does not
 * describe); what lies outside it is ignored. Fails through one line in
 * files->err naming the file and the tensor.
 */
bool tensors_take(struct model *m, const struct shards *s,
                  const struct model_files *files);

/* The slots of m's layers (m->layers, [m->xf.layers]), zeroed, for the
 * tensors to fill. Fails through one line in files->err. */
bool tensors_layers(struct model *m, const struct model_files *files);

#endif
