/*
 * token_text.c - a token's bytes in a generated text (token_text.h).
 */
#include "token_text.h"

#include <stdlib.h>

bool token_text_append(struct buf *text, const struct model *m, uint32_t id)
{
    char bytes[256];
    const size_t n = tok_token_bytes(&m->tokenizer, id, bytes, sizeof bytes);
    char *big = n > sizeof bytes ? malloc(n) : NULL;
    if (big)
        tok_token_bytes(&m->tokenizer, id, big, n);
    const char *from = big ? big : bytes;
    bool ok = n <= sizeof bytes || big;
    for (size_t i = 0; ok && i < n; i++)
        ok = from[i] ? buf_append(text, &from[i], 1)
                     : buf_append_str(text, "\xEF\xBF\xBD");
    free(big);
    return ok;
}
