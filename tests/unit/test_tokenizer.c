/*
 * test_tokenizer.c - attn_tokenize() against hand-written expectations and
 * against tokenizer_cases.h, the tokens an independent Python
 * implementation of BERT's BasicTokenizer gives (tokenizer_cases.py).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "attention.h"
#include "tokenizer_cases.h"

static const struct attn_tokenize_options uncased = {.keep_case = false};
static const struct attn_tokenize_options cased = {.keep_case = true};

/* Tokenize text[len] and check the result is exactly want[n_want]. */
static void check_tokens(const char *text, size_t len,
                         const struct attn_tokenize_options *opts,
                         const char *const *want, size_t n_want)
{
    struct attn_tokens tokens = {0};
    struct attn_error err = {0};
    attn_status status = attn_tokenize(text, len, opts, 0, &tokens, &err);
    if (status != ATTN_OK)
        print_error("attn_tokenize: %s: %s\n", attn_status_name(status),
                    err.message);
    assert_int_equal(status, ATTN_OK);
    for (size_t i = 0; i < tokens.count && i < n_want; i++)
        assert_string_equal(tokens.text[i], want[i]);
    assert_int_equal(tokens.count, n_want);
    if (n_want == 0)
        assert_null(tokens.text);
    attn_tokens_free(&tokens);
    assert_null(tokens.text);
    assert_int_equal(tokens.count, 0);
}

#define WANT(...)                                                              \
    (const char *const[])                                                      \
    {                                                                          \
        __VA_ARGS__                                                            \
    }
#define N_WANT(...) (sizeof(WANT(__VA_ARGS__)) / sizeof(const char *))
/* EXPECT(opts, "text literal", "token", ...): the literal may hold NULs. */
#define EXPECT(opts, text, ...)                                                \
    check_tokens(text, sizeof(text) - 1, opts, WANT(__VA_ARGS__),              \
                 N_WANT(__VA_ARGS__))
#define EXPECT_NONE(opts, text)                                                \
    check_tokens(text, sizeof(text) - 1, opts, NULL, 0)

static void test_default_sentence(void **state)
{
    (void)state;
    EXPECT(&uncased, "The cat chased the mouse because it was hungry", "the",
           "cat", "chased", "the", "mouse", "because", "it", "was", "hungry");
    EXPECT(NULL, "The cat chased the mouse because it was hungry", "the", "cat",
           "chased", "the", "mouse", "because", "it", "was", "hungry");
    EXPECT(&cased, "The cat  chased", "The", "cat", "chased");
}

static void test_punctuation(void **state)
{
    (void)state;
    EXPECT(&uncased, "Hello, world!", "hello", ",", "world", "!");
    EXPECT(&uncased, "don't", "don", "'", "t");
    EXPECT(&uncased, "$5+3=8", "$", "5", "+", "3", "=", "8");
    EXPECT(&uncased, "a^b|c~d`e<f>g", "a", "^", "b", "|", "c", "~", "d", "`",
           "e", "<", "f", ">", "g");
    EXPECT(&uncased, "...", ".", ".", ".");
    // category P* beyond ASCII; symbols (S*) other than ASCII ones are not
    EXPECT(&uncased, "¿Qué?—«sí»", "¿", "que", "?", "—", "«", "si", "»");
    EXPECT(&uncased, "5€ 3×4", "5€", "3×4");
    // U+1FEF (Sk) folds to ` (ASCII, punctuation) only when uncasing
    EXPECT(&uncased,
           "a\xe1\xbf\xaf"
           "b",
           "a", "`", "b");
    EXPECT(&cased,
           "a\xe1\xbf\xaf"
           "b",
           "a\xe1\xbf\xaf"
           "b");
}

static void test_accents(void **state)
{
    (void)state;
    EXPECT(&uncased, "Élan café naïve", "elan", "cafe", "naive");
    EXPECT(&cased, "Élan café naïve", "Élan", "café", "naïve");
    // decomposed input: the combining marks vanish too
    EXPECT(&uncased, "Cafe\xcc\x81 E\xcc\x81\xcc\x82", "cafe", "e");
    EXPECT(&cased, "Cafe\xcc\x81", "Cafe\xcc\x81");
    // marks alone: nothing is left of the word when uncasing
    EXPECT_NONE(&uncased, "\xcc\x81\xcc\x82");
    EXPECT(&cased, "\xcc\x81\xcc\x82", "\xcc\x81\xcc\x82");
    // ǅ lowercases to ǆ, whose decomposition is a compatibility one: kept
    EXPECT(&uncased, "İstanbul straße ẞ ǅ", "istanbul", "straße", "ß", "ǆ");
    // ohm, kelvin and angstrom signs; Roman numeral twelve; circled A
    EXPECT(&uncased,
           "\xe2\x84\xa6 \xe2\x84\xaa \xe2\x84\xab \xe2\x85\xab \xe2\x92\xb6",
           "ω", "k", "a", "\xe2\x85\xbb", "\xe2\x93\x90");
    // docs/math.md: capital sigma is always σ, even at the end of a word
    EXPECT(&uncased, "ΟΔΟΣ σοφος", "οδοσ", "σοφος");
    EXPECT(&uncased, "がぎ", "かき");
}

static void test_cjk(void **state)
{
    (void)state;
    EXPECT(&uncased, "我爱你abc", "我", "爱", "你", "abc");
    EXPECT(&cased, "Hello世界!", "Hello", "世", "界", "!");
    // kana are not CJK ideographs; kanji among them are
    EXPECT(&uncased, "日本語のテキスト", "日", "本", "語", "のテキスト");
    // compatibility ideographs split, and fold to unified ones uncased
    EXPECT(&uncased, "\xef\xa4\x80x", "\xe8\xb1\x88", "x");
    EXPECT(&cased, "\xef\xa4\x80x", "\xef\xa4\x80", "x");
    // supplementary planes: extension B splits; extension G (U+30000) is
    // outside BERT's list
    EXPECT(&uncased, "\xf0\xa0\x80\x80\xf0\xb0\x80\x80\xf0\xb0\x80\x81",
           "\xf0\xa0\x80\x80", "\xf0\xb0\x80\x80\xf0\xb0\x80\x81");
}

static void test_hangul(void **state)
{
    (void)state;
    // 한 = ᄒ ᅡ ᆫ, 국 = ᄀ ᅮ ᆨ, 어 = ᄋ ᅥ (no final jamo)
    EXPECT(&uncased, "한국어",
           "\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab"
           "\xe1\x84\x80\xe1\x85\xae\xe1\x86\xa8"
           "\xe1\x84\x8b\xe1\x85\xa5");
    EXPECT(&cased, "한국어", "한국어");
    // the first and last syllables
    EXPECT(&uncased, "가 힣", "\xe1\x84\x80\xe1\x85\xa1",
           "\xe1\x84\x92\xe1\x85\xb5\xe1\x87\x82");
}

/* Every ASCII character between two letters, against C's classes (the
 * "C" locale): \t \n \r and the space split words; other controls
 * vanish; punctuation stands alone; letters and digits join the word,
 * A-Z lowercased when uncased. */
static void test_ascii_classes(void **state)
{
    (void)state;
    for (int c = 0; c < 0x80; c++) {
        const char text[3] = {'x', (char)c, 'y'};
        const char one[2] = {(char)c, '\0'};
        char word[4] = {'x', (char)c, 'y', '\0'};
        for (int lower = 0; lower < 2; lower++) {
            const struct attn_tokenize_options *opts =
                lower ? &uncased : &cased;
            if (lower && c >= 'A' && c <= 'Z')
                word[1] = (char)(c - 'A' + 'a');
            if (c == '\t' || c == '\n' || c == '\r' || c == ' ')
                check_tokens(text, 3, opts, WANT("x", "y"), 2);
            else if (iscntrl(c))
                check_tokens(text, 3, opts, WANT("xy"), 1);
            else if (ispunct(c))
                check_tokens(text, 3, opts, WANT("x", one, "y"), 3);
            else
                check_tokens(text, 3, opts, WANT(word), 1);
        }
    }
}

static void test_control_and_whitespace(void **state)
{
    (void)state;
    // controls (Cc, Cf) vanish without splitting the word: \x01, ZWSP,
    // soft hyphen, BOM, DEL, NEL (U+0085), even VT and FF
    EXPECT(&uncased,
           "a\x01"
           "b\xe2\x80\x8b"
           "c\xc2\xad"
           "d\xef\xbb\xbf"
           "e",
           "abcde");
    EXPECT(&uncased,
           "a\x7f"
           "b\xc2\x85"
           "c\x0b"
           "d\x0c"
           "e",
           "abcde");
    EXPECT(&uncased,
           "a\0b \xef\xbf\xbd c\xef\xbf\xbd"
           "d",
           "ab", "cd");
    // whitespace: tab, newline, CR, Zs (NBSP, em space, U+3000), and the
    // line and paragraph separators, on which BERT's str.split() splits
    EXPECT(&uncased,
           "a\tb\nc\rd\xc2\xa0"
           "e\xe2\x80\x83"
           "f\xe3\x80\x80"
           "g",
           "a", "b", "c", "d", "e", "f", "g");
    EXPECT(&uncased,
           "a\xe2\x80\xa8"
           "b\xe2\x80\xa9"
           "c",
           "a", "b", "c");
    EXPECT_NONE(&uncased, " \t\n\r\xe3\x80\x80\xc2\xa0");
    EXPECT_NONE(&uncased, "\x01\x02\xe2\x80\x8b");
}

static void test_emoji(void **state)
{
    (void)state;
    // So is not punctuation; the skin tone (Sk) stays, ZWJ (Cf) goes, and
    // variation selector 16 (Mn) goes only when uncasing
    EXPECT(&uncased, "I ❤️ NY 👍🏽 hello👋world", "i", "❤", "ny",
           "👍🏽", "hello👋world");
    EXPECT(&cased, "I ❤️ NY", "I", "❤️", "NY");
    EXPECT(&uncased, "👨‍👩‍👧", "👨👩👧");
}

static void test_special_tokens(void **state)
{
    (void)state;
    const struct attn_tokenize_options special = {.special_tokens = true};
    EXPECT(&special, "Hello, World", "[CLS]", "hello", ",", "world", "[SEP]");
    EXPECT(&special, "", "[CLS]", "[SEP]");
    const struct attn_tokenize_options both = {.keep_case = true,
                                               .special_tokens = true};
    EXPECT(&both, " Hi ", "[CLS]", "Hi", "[SEP]");
}

static void test_combining_order(void **state)
{
    (void)state;
    // NFD sorts non-starters by combining class across characters: the
    // musical stem U+1D165 (216) goes before U+1D16D (226)...
    EXPECT(&uncased, "x\xf0\x9d\x85\xad\xf0\x9d\x85\xa5",
           "x\xf0\x9d\x85\xa5\xf0\x9d\x85\xad");
    EXPECT(&cased, "x\xf0\x9d\x85\xad\xf0\x9d\x85\xa5",
           "x\xf0\x9d\x85\xad\xf0\x9d\x85\xa5");
    // ...through marks with a class and controls, which vanish...
    EXPECT(&uncased, "x\xf0\x9d\x85\xad\xcc\x81\xe2\x80\x8b\xf0\x9d\x85\xa5",
           "x\xf0\x9d\x85\xa5\xf0\x9d\x85\xad");
    // ...but not through a mark of class 0 (U+0941), which ends the run
    EXPECT(&uncased, "x\xf0\x9d\x85\xad\xe0\xa5\x81\xf0\x9d\x85\xa5",
           "x\xf0\x9d\x85\xad\xf0\x9d\x85\xa5");
}

static void test_not_nul_terminated(void **state)
{
    (void)state;
    const char text[] = {'H', 'i', ' ', 'y', 'o', 'u', 'X'};
    check_tokens(text, 6, &uncased, WANT("hi", "you"), 2);
    // a multi-byte character cut by len is truncated, even if the bytes
    // after len would complete it
    struct attn_tokens tokens = {0};
    struct attn_error err = {0};
    assert_int_equal(attn_tokenize("ab\xc3\xa9", 3, NULL, 0, &tokens, &err),
                     ATTN_E_INPUT);
    assert_int_equal(err.index[0], 2);
}

static void test_empty(void **state)
{
    (void)state;
    EXPECT_NONE(&uncased, "");
    EXPECT_NONE(&cased, "   ");
    check_tokens(NULL, 0, NULL, NULL, 0);
}

struct bad_utf8 {
    const char *bytes;
    size_t len;
    size_t offset;       /* the byte the error names */
    const char *message; /* the start of the message */
};

#define BAD(bytes, offset, message)                                            \
    {                                                                          \
        bytes, sizeof(bytes) - 1, offset, message                              \
    }

static void test_invalid_utf8(void **state)
{
    (void)state;
    static const struct bad_utf8 cases[] = {
        BAD("The cat\xff", 7, "sentence has invalid UTF-8 at byte 7 (0xff)"),
        BAD("\xfe", 0, "sentence has invalid UTF-8 at byte 0 (0xfe)"),
        // stray continuation bytes
        BAD("abc\x80", 3, "sentence has invalid UTF-8 at byte 3 (0x80)"),
        BAD("\xc3\xa9\xa9", 2, "sentence has invalid UTF-8 at byte 2 (0xa9)"),
        BAD("\xbf", 0, "sentence has invalid UTF-8 at byte 0 (0xbf)"),
        // overlong forms of '/' and of U+07FF, U+FFFF
        BAD("a\xc0\xaf", 1, "sentence has invalid UTF-8 at byte 1 (0xc0)"),
        BAD("\xc1\xbf", 0, "sentence has invalid UTF-8 at byte 0 (0xc1)"),
        BAD("\xe0\x80\xaf", 0, "sentence has invalid UTF-8 at byte 0 (0xe0)"),
        BAD("\xe0\x9f\xbf", 0, "sentence has invalid UTF-8 at byte 0 (0xe0)"),
        BAD("\xf0\x80\x80\xaf", 0,
            "sentence has invalid UTF-8 at byte 0 (0xf0)"),
        BAD("\xf0\x8f\xbf\xbf", 0,
            "sentence has invalid UTF-8 at byte 0 (0xf0)"),
        // surrogates U+D800 and U+DFFF
        BAD("ok \xed\xa0\x80", 3,
            "sentence has invalid UTF-8 at byte 3 (0xed)"),
        BAD("\xed\xbf\xbf", 0, "sentence has invalid UTF-8 at byte 0 (0xed)"),
        // above U+10FFFF
        BAD("\xf4\x90\x80\x80", 0,
            "sentence has invalid UTF-8 at byte 0 (0xf4)"),
        BAD("\xf5\x80\x80\x80", 0,
            "sentence has invalid UTF-8 at byte 0 (0xf5)"),
        BAD("\xf8\x88\x80\x80\x80", 0,
            "sentence has invalid UTF-8 at byte 0 (0xf8)"),
        // truncated at the end, or cut by a byte that does not continue
        BAD("ab\xe2\x82", 2, "sentence has invalid UTF-8 at byte 2 (0xe2)"),
        BAD("\xc3", 0, "sentence has invalid UTF-8 at byte 0 (0xc3)"),
        BAD("\xf0\x9f\x98", 0, "sentence has invalid UTF-8 at byte 0 (0xf0)"),
        BAD("\xe2\x28\xa1", 0, "sentence has invalid UTF-8 at byte 0 (0xe2)"),
        BAD("\xc3 x", 0, "sentence has invalid UTF-8 at byte 0 (0xc3)"),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct bad_utf8 *c = &cases[i];
        for (int special = 0; special < 2; special++) {
            const struct attn_tokenize_options opts = {.special_tokens =
                                                           special};
            // garbage, which a failure must leave empty
            struct attn_tokens tokens = {7, (char **)&tokens};
            struct attn_error err = {0};
            attn_status status =
                attn_tokenize(c->bytes, c->len, &opts, 0, &tokens, &err);
            if (status != ATTN_E_INPUT ||
                strncmp(err.message, c->message, strlen(c->message)) != 0)
                print_error("case %zu: %s: %s\n", i, attn_status_name(status),
                            err.message);
            assert_int_equal(status, ATTN_E_INPUT);
            assert_string_equal(err.field, "sentence");
            assert_int_equal(err.n_index, 1);
            assert_int_equal(err.index[0], c->offset);
            assert_memory_equal(err.message, c->message, strlen(c->message));
            assert_int_equal(tokens.count, 0);
            assert_null(tokens.text);
        }
    }
    // a NULL err is allowed
    struct attn_tokens tokens = {0};
    assert_int_equal(attn_tokenize("\xff", 1, NULL, 0, &tokens, NULL),
                     ATTN_E_INPUT);
}

static void test_valid_utf8_edges(void **state)
{
    (void)state;
    // the first and last code point of each length, and around surrogates
    EXPECT(&cased,
           "\xc2\x80"
           "a",
           "a"); // U+0080 is a C1 control
    EXPECT(&cased, "\xdf\xbf \xe0\xa0\x80 \xed\x9f\xbf \xee\x80\x80",
           "\xdf\xbf", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xee\x80\x80");
    EXPECT(&cased, "\xef\xbf\xbf \xf0\x90\x80\x80 \xf4\x8f\xbf\xbf",
           "\xef\xbf\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf");
}

static void test_max_tokens(void **state)
{
    (void)state;
    struct attn_tokens tokens = {0};
    struct attn_error err = {0};
    assert_int_equal(attn_tokenize("a b, c", 6, NULL, 4, &tokens, &err),
                     ATTN_OK);
    assert_int_equal(tokens.count, 4);
    attn_tokens_free(&tokens);

    assert_int_equal(attn_tokenize("a b, c", 6, NULL, 3, &tokens, &err),
                     ATTN_E_TOO_BIG);
    assert_string_equal(err.field, "sentence");
    assert_non_null(strstr(err.message, "4 tokens"));
    assert_non_null(strstr(err.message, "(3)"));
    assert_int_equal(tokens.count, 0);
    assert_null(tokens.text);

    // [CLS] and [SEP] count
    const struct attn_tokenize_options special = {.special_tokens = true};
    assert_int_equal(attn_tokenize("a b", 3, &special, 3, &tokens, &err),
                     ATTN_E_TOO_BIG);
    assert_non_null(strstr(err.message, "4 tokens"));
    assert_int_equal(attn_tokenize("a b", 3, &special, 4, &tokens, &err),
                     ATTN_OK);
    assert_int_equal(tokens.count, 4);
    attn_tokens_free(&tokens);

    // invalid UTF-8 is reported even past the cap
    assert_int_equal(attn_tokenize("a b c \xff", 7, NULL, 1, &tokens, &err),
                     ATTN_E_INPUT);
}

static void test_tokens_free(void **state)
{
    (void)state;
    struct attn_tokens tokens = {0};
    attn_tokens_free(&tokens);
    attn_tokens_free(&tokens);
    attn_tokens_free(NULL);
}

/* Print s[len] as hex, for a failing case. */
static void print_hex(const char *label, const char *s, size_t len)
{
    char line[1024];
    size_t used = 0;
    for (size_t i = 0; i < len && used + 4 < sizeof line; i++)
        used += (size_t)snprintf(line + used, sizeof line - used, "%02x ",
                                 (unsigned char)s[i]);
    line[used] = '\0';
    print_error("  %s: %s\n", label, line);
}

static void test_generated_cases(void **state)
{
    (void)state;
    size_t n_cases = sizeof tokenizer_cases / sizeof tokenizer_cases[0];
    size_t failures = 0;
    for (size_t i = 0; i < n_cases; i++) {
        const struct tokenizer_case *c = &tokenizer_cases[i];
        const struct attn_tokenize_options opts = {.keep_case = c->keep_case};
        struct attn_tokens tokens = {0};
        struct attn_error err = {0};
        attn_status status =
            attn_tokenize(c->input, c->input_len, &opts, 0, &tokens, &err);
        bool ok = status == ATTN_OK && tokens.count == c->n_tokens;
        const char *want = c->tokens;
        for (size_t t = 0; ok && t < tokens.count; t++) {
            size_t want_len = strcspn(want, "\001");
            ok = strlen(tokens.text[t]) == want_len &&
                 memcmp(tokens.text[t], want, want_len) == 0;
            want += want_len + 1;
        }
        if (!ok) {
            failures++;
            print_error("case %zu (%s): status %s, %zu tokens, want %zu\n", i,
                        c->keep_case ? "cased" : "uncased",
                        attn_status_name(status), tokens.count, c->n_tokens);
            print_hex("input", c->input, c->input_len);
            print_hex("want", c->tokens, strlen(c->tokens));
            for (size_t t = 0; t < tokens.count; t++)
                print_hex("got", tokens.text[t], strlen(tokens.text[t]));
        }
        attn_tokens_free(&tokens);
    }
    assert_int_equal(failures, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_sentence),
        cmocka_unit_test(test_punctuation),
        cmocka_unit_test(test_accents),
        cmocka_unit_test(test_cjk),
        cmocka_unit_test(test_hangul),
        cmocka_unit_test(test_ascii_classes),
        cmocka_unit_test(test_control_and_whitespace),
        cmocka_unit_test(test_emoji),
        cmocka_unit_test(test_special_tokens),
        cmocka_unit_test(test_combining_order),
        cmocka_unit_test(test_not_nul_terminated),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_valid_utf8_edges),
        cmocka_unit_test(test_max_tokens),
        cmocka_unit_test(test_tokens_free),
        cmocka_unit_test(test_generated_cases),
    };
    return cmocka_run_group_tests_name("tokenizer", tests, NULL, NULL);
}
