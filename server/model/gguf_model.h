/*
 * gguf_model.h - a model from llama.cpp's GGUF files: one file, or the
 * parts of the Hub's split form (NAME-00001-of-0000N.gguf and its
 * siblings), mapped read-only and used in place.
 *
 * general.architecture picks the family whose GGUF row names it
 * (family.h). The metadata is read into the config.json that family
 * reads (its struct gguf_key list, under "{arch}."), so each family's
 * own code checks it; tokenizer.ggml.* becomes the tokenizer
 * (gguf_tokenizer.h) and tokenizer.chat_template the chat template; the
 * tensors are taken by llama.cpp's names (tensors.h). Every failure is
 * one line naming the model, the file and what is wrong.
 */
#ifndef ATTND_GGUF_MODEL_H
#define ATTND_GGUF_MODEL_H

#include "model.h"
#include "model_files.h"
#include "shards.h"

#include <stdbool.h>

struct family_table;

/* Whether path names a GGUF file, not a folder: it ends in ".gguf", or
 * it starts with GGUF's magic, whatever its name (an Ollama blob). */
bool gguf_path(const char *path);

/*
 * Load the GGUF model files->dir/file into m (m->name set, the rest
 * zeroed), its family from families. On failure, false with one line in
 * files->err; the caller frees m with model_free().
 */
bool gguf_model_load(struct model *m, const struct family_table *families,
                     const struct model_files *files, const char *file);

/* Whether a GGUF tensor is one the loader or the family's config hook
 * reads itself rather than a family naming it, for a family whose GGUF
 * row allows it (rope_freqs.weight, rope_factors_{short,long}.weight). */
struct family_gguf;
bool gguf_loader_tensor(const struct family_gguf *g, const char *name);

/* llama.cpp's name of a general.file_type ("Q4_K_M", "F16"), or NULL for
 * a number it does not name. */
const char *gguf_file_type_name(uint32_t file_type);

#endif
