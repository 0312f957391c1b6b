/*
 * vocab.c - vocab.txt into a struct wordpiece_vocab (vocab.h).
 */
#include "vocab.h"
#include "fail.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The length of the valid UTF-8 sequence at s[0..left), or 0 (RFC 3629:
 * no overlong forms, surrogates or values above U+10FFFF). */
static size_t utf8_length(const unsigned char *s, size_t left)
{
    const unsigned c = s[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80)
        return 1;
    if (c < 0xC2)
        return 0;
    if (c < 0xE0) {
        n = 2;
    } else if (c < 0xF0) {
        n = 3;
        lo = c == 0xE0 ? 0xA0 : lo;
        hi = c == 0xED ? 0x9F : hi;
    } else if (c < 0xF5) {
        n = 4;
        lo = c == 0xF0 ? 0x90 : lo;
        hi = c == 0xF4 ? 0x8F : hi;
    } else {
        return 0;
    }
    if (left < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < n; k++)
        if ((s[k] & 0xC0) != 0x80)
            return 0;
    return n;
}

bool vocab_parse(const char *text, size_t len, size_t max_tokens,
                 struct wordpiece_vocab **out, char *err, size_t err_len)
{
    *out = NULL;
    // the lines, each ended by a NUL in a copy of the text
    char *copy = malloc(len + 1);
    const char **lines = NULL;
    size_t count = 0, cap = 0;
    bool ok = copy != NULL;
    if (!ok)
        return model_fail(err, err_len, "out of memory for %zu bytes", len);
    memcpy(copy, text, len);
    const unsigned char *s = (const unsigned char *)copy;
    for (size_t at = 0, start = 0; ok && at <= len;) {
        const bool end_of_text = at == len;
        if (end_of_text && at == start)
            break; /* the last line ended with its newline */
        if (end_of_text || s[at] == '\n' || s[at] == '\r') {
            if (count == max_tokens) {
                ok = model_fail(err, err_len,
                                "more than %zu lines, the model's vocab_size",
                                max_tokens);
                break;
            }
            if (count == cap) {
                cap = cap ? 2 * cap : 1024;
                const char **grown = realloc(lines, cap * sizeof *lines);
                if (!grown) {
                    ok = model_fail(err, err_len, "out of memory");
                    break;
                }
                lines = grown;
            }
            const size_t nl = !end_of_text && s[at] == '\r' && at + 1 < len &&
                                      s[at + 1] == '\n'
                                  ? 2
                                  : 1;
            lines[count++] = copy + start;
            copy[at] = '\0';
            at += end_of_text ? 1 : nl;
            start = at;
            continue;
        }
        const size_t n = s[at] ? utf8_length(s + at, len - at) : 0;
        if (n == 0)
            ok = model_fail(
                err, err_len, "line %zu has %s at byte %zu of the file",
                count + 1, s[at] ? "invalid UTF-8" : "a NUL byte", at);
        at += n;
    }
    if (ok && count == 0)
        ok = model_fail(err, err_len, "no tokens");
    if (ok) {
        struct attn_error aerr = {0};
        if (wordpiece_vocab_new(lines, count, out, &aerr))
            ok = model_fail(err, err_len, "%s", aerr.message);
    }
    free(lines);
    free(copy);
    return ok;
}
