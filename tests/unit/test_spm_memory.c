/*
 * test_spm_memory.c - tok_encode_bytes() bounds what the SentencePiece
 * tokenizer's encode allocates. The program is linked with the allocator
 * wrapped (-Wl,--wrap=malloc,...; see the Makefile), so every allocation
 * passes through here; while an encode runs, the bytes it holds are
 * counted, and their peak must not pass the bound the server reserves
 * beforehand. Four vocabularies made here stretch different parts of it:
 * special tokens and byte fallback (Llama 2's shape), no special token at
 * all (the workspace without the special tokens' arrays), one-byte
 * fallback with an unk token for the rest, and a one-byte user-defined
 * token that strips the whitespace around it, with the EOS and no space
 * prefix. The texts: empty, long runs of one character (spaces, which
 * turn into three bytes each, a letter that merges, a character that
 * falls back to bytes), special tokens back to back, byte fallback of
 * every UTF-8 length, and random texts; each with no cap and with a cap
 * that stops it. After the call only the result is left, and nothing on
 * a refusal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "alloc_count.h"

#include "spm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KINDS = 4 };

static char store[600][16];
static struct spm_string tokens[600];
static float scores[600];
static int32_t types[600];
static uint8_t strip[600];

static size_t add(size_t n, const char *s, float score, int type)
{
    snprintf(store[n], sizeof store[n], "%s", s);
    tokens[n] = (struct spm_string){store[n], strlen(store[n])};
    scores[n] = score;
    types[n] = type;
    strip[n] = 0;
    return n + 1;
}

/* Kind 0: <unk> <s> </s> special, <0xNN>, U+2581 and letters that merge
 * (Llama 2's shape). 1: the same with no special token and no unk. 2: no
 * <0xNN> but the ASCII bytes as one-byte tokens, the rest <unk>. 3: as 0,
 * with "|" a user-defined token stripping the whitespace on both sides,
 * the EOS added, no space prefix. */
static void build(int kind, struct tokenizer *t)
{
    const int special = kind == 1 ? SPM_TOKEN_NORMAL : SPM_TOKEN_CONTROL;
    size_t n = 0;
    n = add(n, "<unk>", 0, kind == 1 ? SPM_TOKEN_NORMAL : SPM_TOKEN_UNKNOWN);
    n = add(n, "<s>", 0, special);
    n = add(n, "</s>", 0, special);
    for (unsigned b = 0; b < 256; b++) {
        char name[8];
        if (kind == 2 && (b == 0 || b >= 0x80 || b == ' '))
            continue;
        if (kind == 2)
            snprintf(name, sizeof name, "%c", (char)b);
        else
            snprintf(name, sizeof name, "<0x%02X>", b);
        if (kind == 2 && (b == 'a' || b == 'b' || b == '|'))
            continue; // below, as letters
        n = add(n, name, -100, kind == 2 ? SPM_TOKEN_NORMAL : SPM_TOKEN_BYTE);
    }
    static const char *const pieces[] = {
        "\xe2\x96\x81",
        "a",
        "b",
        "aa",
        "aaaa",
        "\342\226\201a", // U+2581 a
        "\xe2\x96\x81\xe2\x96\x81",
        "\xe2\x96\x81\xe2\x96\x81\xe2\x96\x81\xe2\x96\x81",
        "ab",
        "\xc3\xa9",
    };
    for (size_t i = 0; i < sizeof pieces / sizeof *pieces; i++)
        n = add(n, pieces[i], -(float)i, SPM_TOKEN_NORMAL);
    if (kind == 3) {
        n = add(n, "|", 0, SPM_TOKEN_USER_DEFINED);
        strip[n - 1] = SPM_STRIP_LEFT | SPM_STRIP_RIGHT;
    }
    const struct spm_spec spec = {.tokens = tokens,
                                  .n_tokens = n,
                                  .scores = scores,
                                  .types = types,
                                  .strip = strip,
                                  .unk_id = kind == 1 ? -1 : 0,
                                  .bos_id = 1,
                                  .eos_id = 2,
                                  .add_bos = true,
                                  .add_eos = kind == 3,
                                  .add_space_prefix = kind != 3};
    struct attn_error err = {0};
    if (spm_tokenizer_new(&spec, t, &err))
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

/* The status of encoding text, whose allocations are held to the bound. */
static attn_status check_bound(const struct tokenizer *t, const char *text,
                               size_t len, size_t max_tokens)
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
        assert_true(enc.count > 0 || len == 0);
        tok_encoding_free(&enc);
    } else {
        assert_int_equal(alloc_live(), 0);
    }
    return st;
}

static void test_bound(void **state)
{
    (void)state;
    static const char *const texts[] = {
        " ",
        "a",
        "\xc3\xa9",
        "<s>",
        "<s></s><unk><s>",
        "| |  |\t\n|",
        // byte fallback of every length: 1 (kind 2's unk), 2, 3, 4
        "\x7f\xc3\xbf\xe4\xbd\xa0\xf0\x9f\x98\x80",
        "a b  aa\tab\n\n",
        " \xe2\x96\x81 a",
    };
    for (int k = 0; k < KINDS; k++) {
        struct tokenizer t;
        build(k, &t);
        check_bound(&t, "", 0, 0);
        check_bound(&t, "", 0, 1);
        for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
            for (size_t len = 1; len <= 4096; len *= 8) {
                size_t n;
                char *s = repeat(texts[i], len * strlen(texts[i]), &n);
                check_bound(&t, s, n, 0);
                check_bound(&t, s, n, 5); // stopped at the cap, most of them
                free(s);
            }
        }
        tok_free(&t);
    }
}

/* A random character of a few kinds: a space, a letter that merges, a
 * special token's text, one of two, three or four bytes. */
static size_t random_char(uint64_t *state, char *out)
{
    static const char *const chars[] = {
        " ",
        "a",
        "b",
        "\t",
        "\n",
        "<s>",
        "</s>",
        "|",
        "<",
        "\xc3\xa9",
        "\xd0\x96",
        "\xe2\x96\x81",
        "\xe4\xbd\xa0",
        "\xf0\x9f\x98\x80",
        "x",
    };
    *state = *state * 6364136223846793005u + 1442695040888963407u;
    const char *c = chars[(*state >> 33) % (sizeof chars / sizeof *chars)];
    const size_t n = strlen(c);
    memcpy(out, c, n);
    return n;
}

static void test_random(void **state)
{
    (void)state;
    uint64_t seed = 7;
    char *s = malloc(4 * 4096);
    assert_non_null(s);
    for (int k = 0; k < KINDS; k++) {
        struct tokenizer t;
        build(k, &t);
        for (int round = 0; round < 200; round++) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            const size_t chars = (size_t)(seed >> 40) % 4096;
            size_t n = 0;
            for (size_t i = 0; i < chars; i++)
                n += random_char(&seed, s + n);
            check_bound(&t, s, n, 0);
            check_bound(&t, s, n, (size_t)round % 7 * 10);
        }
        tok_free(&t);
    }
    free(s);
}

/* A refusal (invalid UTF-8; a character no token spells with no unk; a
 * second text) leaves nothing allocated, within the bound. */
static void test_refused(void **state)
{
    (void)state;
    struct tokenizer t;
    build(1, &t);
    assert_int_equal(check_bound(&t, "a\xff", 2, 0), ATTN_E_INPUT);
    assert_int_equal(check_bound(&t, "a\xc3", 2, 0), ATTN_E_INPUT);
    tok_free(&t);
    // no byte tokens and no unk: "b" is spelt by nothing
    size_t n = 0;
    n = add(n, "a", 0, SPM_TOKEN_NORMAL);
    n = add(n, "\xe2\x96\x81", 0, SPM_TOKEN_NORMAL);
    const struct spm_spec spec = {.tokens = tokens,
                                  .n_tokens = n,
                                  .unk_id = -1,
                                  .bos_id = -1,
                                  .eos_id = -1,
                                  .add_space_prefix = true};
    struct attn_error err = {0};
    if (spm_tokenizer_new(&spec, &t, &err))
        fail_msg("%s", err.message);
    assert_int_equal(check_bound(&t, "a a b", 5, 0), ATTN_E_INPUT);
    alloc_count_start();
    struct tok_encoding enc;
    const attn_status st =
        tok_encode(&t, "a", 1, "a", 1, &(struct tok_options){0}, &enc, &err);
    alloc_count_stop();
    assert_int_equal(st, ATTN_E_INVALID);
    assert_int_equal(alloc_peak(), 0);
    tok_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
