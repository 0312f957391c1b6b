/*
 * families.c - the table of checkpoint families (family.h): one row per
 * config.json model_type, each defined in its own file. A family is its
 * file and its row here; nothing else names it.
 */
#include "family.h"

#include <stdio.h>
#include <string.h>

/* Each row: the family's definition, and its place in the table. */
#define FAMILIES(X)                                                            \
    X(family_bert)                                                             \
    X(family_gpt2)                                                             \
    X(family_llama) X(family_mistral) X(family_qwen2) X(family_qwen3)          \
        X(family_olmo2) X(family_gemma) X(family_gemma2)                       \
            X(family_gemma3_text) X(family_gemma3)

#define DECLARE(row) extern const struct family row;
FAMILIES(DECLARE)
#undef DECLARE

#define POINT(row) &row,
static const struct family *const families[] = {FAMILIES(POINT)};
#undef POINT

enum { N_FAMILIES = sizeof families / sizeof families[0] };

const struct family *family_find(const char *model_type, size_t len)
{
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (strlen(families[i]->model_type) == len &&
            memcmp(families[i]->model_type, model_type, len) == 0)
            return families[i];
    return NULL;
}

const struct family *family_at(size_t i)
{
    return i < N_FAMILIES ? families[i] : NULL;
}

void family_names(char *out, size_t out_len)
{
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < N_FAMILIES && at < out_len; i++) {
        const int n = snprintf(out + at, out_len - at, "%s'%s'", i ? ", " : "",
                               families[i]->model_type);
        if (n < 0)
            break;
        at += (size_t)n;
    }
}
