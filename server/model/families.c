/*
 * families.c - the table of checkpoint families (family.h): one row per
 * config.json model_type, each defined in its own file. A family is its
 * file and its row here; nothing else names it.
 */
#include "family.h"

#include <stdio.h>
#include <string.h>

/* Each row: the family's definition, and its place in the table. */
// clang-format off
#define FAMILIES(X)                                                            \
    X(family_bert)                                                             \
    X(family_gpt2)                                                             \
    X(family_llama)                                                            \
    X(family_mistral)                                                          \
    X(family_qwen2)                                                            \
    X(family_qwen3)                                                            \
    X(family_olmo2)                                                            \
    X(family_gpt_neox)                                                         \
    X(family_phi3)                                                             \
    X(family_gemma)                                                            \
    X(family_gemma2)                                                           \
    X(family_gemma3_text)                                                      \
    X(family_gemma3)
// clang-format on

#define DECLARE(row) extern const struct family row;
FAMILIES(DECLARE)
#undef DECLARE

#define POINT(row) &row,
static const struct family *const families[] = {FAMILIES(POINT)};
#undef POINT

const struct family_table family_table = {families,
                                          sizeof families / sizeof families[0]};

const struct family *family_find(const struct family_table *t,
                                 const char *model_type, size_t len)
{
    for (size_t i = 0; i < t->count; i++)
        if (strlen(t->row[i]->model_type) == len &&
            memcmp(t->row[i]->model_type, model_type, len) == 0)
            return t->row[i];
    return NULL;
}

const struct family *family_find_gguf(const struct family_table *t,
                                      const char *arch, size_t len)
{
    for (size_t i = 0; i < t->count; i++) {
        const struct family_gguf *g = t->row[i]->gguf;
        if (g && strlen(g->arch) == len && memcmp(g->arch, arch, len) == 0)
            return t->row[i];
    }
    return NULL;
}

void family_names(const struct family_table *t, char *out, size_t out_len)
{
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < t->count && at < out_len; i++) {
        const int n = snprintf(out + at, out_len - at, "%s'%s'", i ? ", " : "",
                               t->row[i]->model_type);
        if (n < 0)
            break;
        at += (size_t)n;
    }
}
