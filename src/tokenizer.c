/*
 * tokenizer.c - the tokenizer interface (tokenizer.h): calls through a
 * kind's table, and the encoding every kind fills.
 */
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

void tok_encoding_free(struct tok_encoding *enc)
{
    if (!enc)
        return;
    free(enc->ids); // one block: the ids, then the type ids and the flags
    memset(enc, 0, sizeof *enc);
}

attn_status tok_encode(const struct tokenizer *t, const char *a, size_t a_len,
                       const char *b, size_t b_len,
                       const struct tok_options *opts, struct tok_encoding *out,
                       struct attn_error *err)
{
    static const struct tok_options defaults;
    return t->ops->encode(t->impl, a, a_len, b, b_len, opts ? opts : &defaults,
                          out, err);
}

size_t tok_encode_bytes(const struct tokenizer *t, size_t a_len, size_t b_len)
{
    return t->ops->encode_bytes(t->impl, a_len, b_len);
}

size_t tok_vocab_size(const struct tokenizer *t)
{
    return t->ops->vocab_size(t->impl);
}

const char *tok_token_text(const struct tokenizer *t, uint32_t id)
{
    return t->ops->token_text(t->impl, id);
}

bool tok_token_special(const struct tokenizer *t, uint32_t id)
{
    return t->ops->token_special(t->impl, id);
}

size_t tok_token_bytes(const struct tokenizer *t, uint32_t id, char *out,
                       size_t cap)
{
    return t->ops->token_bytes(t->impl, id, out, cap);
}

int64_t tok_token_id(const struct tokenizer *t, const char *text, size_t len)
{
    return t->ops->token_id(t->impl, text, len);
}

const char *tok_name(const struct tokenizer *t)
{
    return t->ops->name;
}

void tok_free(struct tokenizer *t)
{
    if (!t || !t->ops)
        return;
    t->ops->free(t->impl);
    memset(t, 0, sizeof *t);
}
