/*
 * test_bpe_memory.c - tok_encode_bytes() bounds what the BPE tokenizer's
 * encode allocates. The program is linked with the allocator wrapped
 * (-Wl,--wrap=malloc,...; see the Makefile), so every allocation passes
 * through here; while an encode runs, the bytes it holds are counted, and
 * their peak must not pass the bound the server reserves beforehand, for
 * each normalizer and for texts that stretch a different part of it
 * (spaces that SentencePiece triples, NFC's decompositions, one long
 * pre-token, many added tokens). After the call only the result is left.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "alloc_count.h"

#include "bpe.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char store[600][16];
static struct bpe_string vocab[600];

static size_t add(size_t n, const char *s)
{
    snprintf(store[n], sizeof store[n], "%s", s);
    vocab[n] = (struct bpe_string){store[n], strlen(store[n])};
    return n + 1;
}

/* A byte-level vocabulary (the 256 byte characters, "aa") or a
 * SentencePiece one (<unk> <s> </s>, <0xNN>, U+2581, "a", "aa"). */
static void build(bool sentencepiece, enum bpe_normalizer norm,
                  struct tokenizer *t)
{
    size_t n = 0;
    if (sentencepiece) {
        n = add(add(add(n, "<unk>"), "<s>"), "</s>");
        for (unsigned b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            n = add(n, name);
        }
        n = add(n, "\xe2\x96\x81");
    } else {
        for (unsigned b = 0; b < 256; b++) {
            const int printable = (b >= 0x21 && b <= 0x7E) ||
                                  (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
            unsigned cp = b, k = 0;
            for (unsigned c = 0; !printable && c < b; c++)
                k += !((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) ||
                       c >= 0xAE);
            cp = printable ? b : 0x100 + k;
            char s[3] = {0};
            if (cp < 0x80) {
                s[0] = (char)cp;
            } else {
                s[0] = (char)(0xC0 | cp >> 6);
                s[1] = (char)(0x80 | (cp & 0x3F));
            }
            n = add(n, s);
        }
    }
    if (sentencepiece)
        n = add(n, "a");
    n = add(n, "aa");
    static struct bpe_merge merge = {{"a", 1}, {"a", 1}};
    static struct bpe_added_token added = {{"<x>", 3}, 0,    true, false,
                                           true,       true, false};
    added.id = (uint32_t)n;
    const struct bpe_spec spec = {.vocab = vocab,
                                  .n_vocab = n,
                                  .merges = &merge,
                                  .n_merges = 1,
                                  .added = &added,
                                  .n_added = 1,
                                  .byte_level = !sentencepiece,
                                  .normalizer = norm,
                                  .pattern = sentencepiece ? BPE_PATTERN_NONE
                                                           : BPE_PATTERN_LLAMA3,
                                  .byte_fallback = sentencepiece,
                                  .unk_id = -1,
                                  .bos_id = sentencepiece ? 1 : -1};
    struct attn_error err;
    if (bpe_tokenizer_new(&spec, t, &err))
        fail_msg("%s", err.message);
}

/* text repeated to len bytes (whole copies). */
static char *repeat(const char *text, size_t len, size_t *out_len)
{
    const size_t one = strlen(text), copies = len / one;
    char *s = malloc(copies * one + 1);
    assert_non_null(s);
    for (size_t i = 0; i < copies; i++)
        memcpy(s + i * one, text, one);
    *out_len = copies * one;
    return s;
}

static void check_bound(const struct tokenizer *t, const char *text, size_t len,
                        size_t max_tokens)
{
    const size_t bound = tok_encode_bytes(t, len, 0);
    struct tok_encoding enc;
    alloc_count_start();
    const attn_status st =
        tok_encode(t, text, len, NULL, 0,
                   &(struct tok_options){.max_tokens = max_tokens}, &enc, NULL);
    alloc_count_stop();
    assert_int_equal(alloc_overflowed(), 0);
    if (alloc_peak() > bound)
        fail_msg("%zu bytes of text: encode took %zu bytes, above the bound "
                 "%zu",
                 len, alloc_peak(), bound);
    if (st == ATTN_OK) {
        // what is left is the result, within the bound too
        assert_true(alloc_live() <= bound);
        tok_encoding_free(&enc);
    } else {
        assert_int_equal(alloc_live(), 0);
    }
}

static void test_bound(void **state)
{
    (void)state;
    static const char *const texts[] = {
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "a b c d e f g h i j k l m n o p q r s t u v w x y z ",
        "          ",
        "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8 \xea\xb0\x81 \xe2\x84\xab ",
        "e\xcc\x81\xcc\xa7\xe0\xa5\x98\xef\xac\xac",
        "<x><x> <x>  <x>",
        "\xf0\x9f\x98\x80\xe4\xbd\xa0\t\n\r\n 123456",
    };
    const enum bpe_normalizer norms[] = {BPE_NORM_NONE, BPE_NORM_NFC,
                                         BPE_NORM_SENTENCEPIECE};
    for (size_t k = 0; k < 3; k++) {
        struct tokenizer t;
        build(k == 2, norms[k], &t);
        check_bound(&t, "", 0, 0);
        for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
            for (size_t len = 1; len <= 4096; len *= 8) {
                size_t n;
                char *s = repeat(texts[i], len * strlen(texts[i]), &n);
                check_bound(&t, s, n, 0);
                check_bound(&t, s, n, 5); // stopped at the cap
                free(s);
            }
        }
        tok_free(&t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
