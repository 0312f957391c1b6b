/*
 * bert_config.h - the parts of a checkpoint's config.json and
 * tokenizer_config.json that the encoder and its tokenizer need.
 */
#ifndef ATTND_BERT_CONFIG_H
#define ATTND_BERT_CONFIG_H

#include "bert.h"

#include <stdbool.h>
#include <stddef.h>

struct bert_config {
    size_t layers;          /* num_hidden_layers */
    size_t heads;           /* num_attention_heads */
    size_t hidden;          /* hidden_size */
    size_t intermediate;    /* intermediate_size */
    size_t vocab_size;      /* vocab_size */
    size_t max_positions;   /* max_position_embeddings */
    size_t type_vocab_size; /* type_vocab_size; 2 when absent */
    float layer_norm_eps;   /* layer_norm_eps; 1e-12 when absent */
    bert_act act;           /* hidden_act: "gelu" or "gelu_new"; gelu when
                               absent */
};

/*
 * Read config.json's text[0..len). The sizes are required; the rest takes
 * transformers' BertConfig defaults when absent. Anything that would make
 * the network differ from the one bert.h computes is refused: a
 * model_type other than "bert", a position_embedding_type other than
 * "absolute", a decoder, another activation. On failure returns false with
 * one line in err naming the key and its value.
 */
bool bert_config_parse(const char *text, size_t len, struct bert_config *out,
                       char *err, size_t err_len);

/*
 * Read tokenizer_config.json's text[0..len) into *do_lower_case (true,
 * BertTokenizer's default, when the key is absent). Settings the core's
 * tokenizer cannot follow are refused: strip_accents set apart from
 * lowercasing, tokenize_chinese_chars or do_basic_tokenize false.
 */
bool bert_tokenizer_config_parse(const char *text, size_t len,
                                 bool *do_lower_case, char *err,
                                 size_t err_len);

#endif
