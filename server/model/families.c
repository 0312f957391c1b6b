/*
 * families.c - the table of checkpoint families (family.h): one row per
 * config.json model_type, each defined in its own file.
 */
#include "family.h"

#include <stdio.h>
#include <string.h>

static const struct family *const families[] = {
    &family_bert,    &family_gpt2,  &family_llama,
    &family_mistral, &family_qwen2, &family_qwen3,
};

enum { N_FAMILIES = sizeof families / sizeof families[0] };

const struct family *family_find(const char *model_type, size_t len)
{
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (strlen(families[i]->model_type) == len &&
            memcmp(families[i]->model_type, model_type, len) == 0)
            return families[i];
    return NULL;
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
