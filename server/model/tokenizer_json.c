/*
 * tokenizer_json.c - tokenizer.json (or vocab.json and merges.txt) and
 * tokenizer_config.json into the core's BPE tokenizer (tokenizer_json.h).
 *
 * Each part of tokenizer.json maps onto one field of struct bpe_spec, and
 * only the forms the core follows exactly are accepted; docs/tokenizers.md
 * lists them. The strings of the spec point into the parsed documents,
 * which live until bpe_tokenizer_new() has copied them.
 */
#include "tokenizer_json.h"
#include "bpe.h"
#include "fail.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The Split regexes the core has scanners for, as tokenizer.json writes
 * them (after JSON unescaping). */
static const struct {
    const char *regex;
    enum bpe_pattern pattern;
} known_regexes[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     BPE_PATTERN_LLAMA3},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     BPE_PATTERN_QWEN2},
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!"
     "\\S)|\\s+",
     BPE_PATTERN_GPT2},
    {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}"
     "\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]"
     "?"
     "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'"
     "s|"
     "'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r"
     "\\n]+|\\s+(?!\\S)|\\s+",
     BPE_PATTERN_O200K},
};

/* Some bytes of a JSON text: one value. */
struct span {
    const char *text;
    size_t len;
};

/* What the files give, before the core builds from it. */
struct reading {
    struct bpe_spec spec;
    struct bpe_norm_step steps[BPE_MAX_NORM_STEPS];
    struct bpe_split splits[BPE_MAX_SPLITS];
    struct bpe_string *vocab;
    struct bpe_merge *merges;
    struct bpe_added_token *added;
    char *vocab_text, *merges_text;      /* their strings, unescaped */
    struct span vocab_span, merges_span; /* in tokenizer.json, when found */
    char *err;
    size_t err_len;
};

static const cJSON *key(const cJSON *obj, const char *name)
{
    return cJSON_GetObjectItemCaseSensitive(obj, name);
}

static bool is_null(const cJSON *v)
{
    return !v || cJSON_IsNull(v);
}

/* An object's "type", or "" when it has none. */
static const char *type_of(const cJSON *obj)
{
    const cJSON *t = key(obj, "type");
    return cJSON_IsString(t) ? t->valuestring : "";
}

/* A boolean key: absent or null is fallback. */
static bool flag(const cJSON *obj, const char *name, bool fallback,
                 const char *where, bool *out, struct reading *r)
{
    const cJSON *v = key(obj, name);
    if (is_null(v)) {
        *out = fallback;
        return true;
    }
    if (!cJSON_IsBool(v))
        return model_fail(r->err, r->err_len, "%s.%s is not true or false",
                          where, name);
    *out = cJSON_IsTrue(v);
    return true;
}

static struct bpe_string str(const char *s)
{
    return (struct bpe_string){s, strlen(s)};
}

/* The id of token s: an added token's, else the vocabulary's; -1. */
static int64_t find_id(const struct reading *r, const char *s)
{
    const size_t len = strlen(s);
    for (size_t i = 0; i < r->spec.n_added; i++)
        if (r->added[i].content.len == len &&
            memcmp(r->added[i].content.text, s, len) == 0)
            return r->added[i].id;
    for (size_t i = 0; i < r->spec.n_vocab; i++)
        if (r->vocab[i].text && r->vocab[i].len == len &&
            memcmp(r->vocab[i].text, s, len) == 0)
            return (int64_t)i;
    return -1;
}

/* ------------------------------------------------------------ the model */

/*
 * The vocabulary and the merges are nearly all of a tokenizer.json (31 of
 * Gemma 3's 33 MB), and a cJSON tree of them would take six times that:
 * so they are read from their text here, their strings unescaped into one
 * block each, and cJSON parses only the rest of the file.
 */

/* Where reading a JSON text stands. */
struct lex {
    const char *s;
    size_t n, at;
};

static void lex_space(struct lex *x)
{
    while (x->at < x->n && (x->s[x->at] == ' ' || x->s[x->at] == '\t' ||
                            x->s[x->at] == '\n' || x->s[x->at] == '\r'))
        x->at++;
}

/* Past c, after any space; false, not moving past it, if c is not next. */
static bool lex_take(struct lex *x, char c)
{
    lex_space(x);
    if (x->at < x->n && x->s[x->at] == c) {
        x->at++;
        return true;
    }
    return false;
}

static bool lex_hex4(struct lex *x, uint32_t *v)
{
    if (x->n - x->at < 4)
        return false;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        const char c = x->s[x->at++];
        const int d = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
        if (d < 0)
            return false;
        *v = *v << 4 | (uint32_t)d;
    }
    return true;
}

static size_t put_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A string, unescaped into out (NULL: only checked), NUL-terminated; its
 * length into *len. Never longer than its JSON text, quotes included, so
 * the text's length in all is room for every string in it. A \u0000 is
 * refused when read: the strings are C strings from here on. */
static bool lex_string(struct lex *x, char *out, size_t *len)
{
    if (!lex_take(x, '"'))
        return false;
    size_t o = 0;
    while (x->at < x->n) {
        const unsigned char c = (unsigned char)x->s[x->at++];
        if (c == '"') {
            if (out)
                out[o] = 0;
            *len = o;
            return true;
        }
        if (c < 0x20)
            return false;
        if (c != '\\') {
            if (out)
                out[o] = (char)c;
            o++;
            continue;
        }
        if (x->at == x->n)
            return false;
        const char e = x->s[x->at++];
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *k = e ? strchr(from, e) : NULL;
        if (k) {
            if (out)
                out[o] = to[k - from];
            o++;
            continue;
        }
        uint32_t cp, low;
        if (e != 'u' || !lex_hex4(x, &cp) || (cp == 0 && out) ||
            (cp >= 0xDC00 && cp <= 0xDFFF))
            return false;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            // a high surrogate, then its low one
            if (x->n - x->at < 2 || x->s[x->at] != '\\' ||
                x->s[x->at + 1] != 'u')
                return false;
            x->at += 2;
            if (!lex_hex4(x, &low) || low < 0xDC00 || low > 0xDFFF)
                return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        char buf[4];
        const size_t k8 = put_utf8(buf, cp);
        if (out)
            memcpy(out + o, buf, k8);
        o += k8;
    }
    return false;
}

/* Past one value of any kind. Only as strict as finding the members of
 * the objects around the vocabulary and merges needs: cJSON checks all
 * but those two, which their readers check. */
static bool lex_skip(struct lex *x)
{
    lex_space(x);
    if (x->at == x->n)
        return false;
    size_t len;
    const char c = x->s[x->at];
    if (c == '"')
        return lex_string(x, NULL, &len);
    if (c != '{' && c != '[') {
        const size_t from = x->at;
        while (x->at < x->n && !strchr(",:]} \t\n\r\"{[", x->s[x->at]))
            x->at++;
        return x->at > from;
    }
    size_t depth = 0;
    while (x->at < x->n) {
        const char d = x->s[x->at];
        if (d == '"') {
            if (!lex_string(x, NULL, &len))
                return false;
            continue;
        }
        x->at++;
        if (d == '{' || d == '[')
            depth++;
        else if ((d == '}' || d == ']') && --depth == 0)
            return true;
    }
    return false;
}

/* A member's key as it is written (escapes left alone), and past it. */
static bool lex_raw_key(struct lex *x, struct span *key)
{
    lex_space(x);
    const size_t from = x->at;
    size_t len;
    if (!lex_string(x, NULL, &len))
        return false;
    *key = (struct span){x->s + from + 1, x->at - from - 2};
    return true;
}

static bool span_is(struct span s, const char *name)
{
    return s.len == strlen(name) && memcmp(s.text, name, s.len) == 0;
}

/* A number (as strtod reads it) into *v. */
static bool lex_number(struct lex *x, double *v)
{
    lex_space(x);
    char buf[32];
    size_t k = 0;
    while (x->at < x->n && x->s[x->at] &&
           strchr("0123456789+-.eE", x->s[x->at])) {
        if (k == sizeof buf - 1)
            return false;
        buf[k++] = x->s[x->at++];
    }
    buf[k] = 0;
    char *end;
    *v = strtod(buf, &end);
    return k > 0 && *end == 0;
}

/*
 * Where model.vocab and model.merges are in tokenizer.json's text: each
 * value's span (the first of each name, as cJSON's lookups find them),
 * left empty when not found. False when the text is not an object of
 * members as far as this reads it; cJSON then says what is wrong.
 */
static bool find_model_parts(const char *s, size_t n, struct span *vocab,
                             struct span *merges)
{
    struct lex x = {s, n, 0};
    bool in_model = false, model_seen = false;
    if (!lex_take(&x, '{'))
        return false;
    if (lex_take(&x, '}'))
        return true;
    for (;;) {
        struct span key;
        if (!lex_raw_key(&x, &key) || !lex_take(&x, ':'))
            return false;
        lex_space(&x);
        const bool opens = x.at < n && s[x.at] == '{';
        if (!in_model && !model_seen && opens && span_is(key, "model")) {
            // into the model's members
            x.at++;
            in_model = model_seen = true;
            lex_space(&x);
            if (!(x.at < n && s[x.at] == '}'))
                continue;
        } else {
            struct span *want = NULL;
            if (in_model && span_is(key, "vocab") && !vocab->text)
                want = vocab;
            else if (in_model && span_is(key, "merges") && !merges->text)
                want = merges;
            const size_t from = x.at;
            if (!lex_skip(&x))
                return false;
            if (want)
                *want = (struct span){s + from, x.at - from};
        }
        // after a value: another member, or the end of the objects around
        for (;;) {
            if (lex_take(&x, ','))
                break;
            if (!lex_take(&x, '}'))
                return false;
            if (!in_model)
                return true;
            in_model = false;
        }
    }
}

/* vocab: {token: id, ...} from its text; each id once, and an id below
 * the largest that no token has is a gap (cl100k's vocabulary has 15).
 * The ids first, for the array's size; then the tokens. */
static bool read_vocab(struct span text, const char *where, struct reading *r)
{
    struct lex x = {text.text, text.len, 0};
    size_t count = 0, n = 0, len;
    double d;
    if (!lex_take(&x, '{'))
        return model_fail(r->err, r->err_len, "%s is not an object", where);
    for (bool more = !lex_take(&x, '}'); more; count++) {
        struct span key;
        if (!lex_raw_key(&x, &key) || !lex_take(&x, ':'))
            return model_fail(r->err, r->err_len, "%s is not valid JSON",
                              where);
        if (!lex_number(&x, &d) || !(d >= 0 && d < (double)BPE_MAX_VOCAB) ||
            (double)(size_t)d != d)
            return model_fail(r->err, r->err_len,
                              "%s['%.*s'] is not an id from 0 to %zu", where,
                              (int)(key.len < 64 ? key.len : 64), key.text,
                              BPE_MAX_VOCAB - 1);
        n = (size_t)d + 1 > n ? (size_t)d + 1 : n;
        if (lex_take(&x, '}'))
            more = false;
        else if (!lex_take(&x, ','))
            return model_fail(r->err, r->err_len, "%s is not valid JSON",
                              where);
    }
    lex_space(&x);
    if (count == 0 || count > BPE_MAX_VOCAB || x.at != x.n)
        return model_fail(r->err, r->err_len,
                          x.at != x.n ? "%s is not valid JSON"
                                      : "%s has %zu tokens; 1 to %zu are "
                                        "allowed",
                          where, count, BPE_MAX_VOCAB);
    r->vocab = calloc(n, sizeof *r->vocab);
    r->vocab_text = malloc(text.len);
    if (!r->vocab || !r->vocab_text)
        return model_fail(r->err, r->err_len, "out of memory for %s", where);
    x.at = 0;
    lex_take(&x, '{');
    for (size_t i = 0, o = 0; i < count; i++) {
        char *token = r->vocab_text + o;
        if (!lex_string(&x, token, &len))
            return model_fail(r->err, r->err_len,
                              "%s: a token is not a string without NUL", where);
        lex_take(&x, ':');
        lex_number(&x, &d);
        lex_take(&x, ',');
        const size_t id = (size_t)d;
        if (r->vocab[id].text)
            return model_fail(r->err, r->err_len,
                              "%s gives id %zu to '%.64s' and to '%.64s'",
                              where, id, r->vocab[id].text, token);
        r->vocab[id] = (struct bpe_string){token, len};
        o += len + 1;
    }
    r->spec.vocab = r->vocab;
    r->spec.n_vocab = n;
    return true;
}

/* One "a b" merge into m, cut at its one space. */
static bool split_merge(char *line, struct bpe_merge *m)
{
    char *space = strchr(line, ' ');
    if (!space || space == line || !space[1] || strchr(space + 1, ' '))
        return false;
    *space = 0;
    m->a = str(line);
    m->b = str(space + 1);
    return true;
}

/* One merge of model.merges at x: "a b", or ["a", "b"] with each string
 * into out (NULL: only checked), past its text. */
static bool lex_merge(struct lex *x, char *out, struct bpe_merge *m,
                      size_t *used)
{
    size_t la, lb;
    lex_space(x);
    if (x->at < x->n && x->s[x->at] == '"') {
        if (!lex_string(x, out, &la))
            return false;
        *used = la + 1;
        return !out || split_merge(out, m);
    }
    if (!lex_take(x, '[') || !lex_string(x, out, &la) || !lex_take(x, ',') ||
        !lex_string(x, out ? out + la + 1 : NULL, &lb) || !lex_take(x, ']'))
        return false;
    *used = la + lb + 2;
    if (out) {
        m->a = (struct bpe_string){out, la};
        m->b = (struct bpe_string){out + la + 1, lb};
    }
    return true;
}

/* merges: ["a b", ...] or [["a", "b"], ...], from their text. */
static bool read_merges(struct span text, struct reading *r)
{
    struct lex x = {text.text, text.len, 0};
    size_t n = 0, used;
    struct bpe_merge m;
    if (!lex_take(&x, '['))
        return model_fail(r->err, r->err_len, "model.merges is not an array");
    for (bool more = !lex_take(&x, ']'); more; n++) {
        if (!lex_merge(&x, NULL, &m, &used))
            return model_fail(r->err, r->err_len,
                              "model.merges[%zu] is neither \"a b\" nor "
                              "[\"a\", \"b\"]",
                              n);
        if (lex_take(&x, ']'))
            more = false;
        else if (!lex_take(&x, ','))
            return model_fail(r->err, r->err_len,
                              "model.merges is not valid JSON");
        if (n >= BPE_MAX_MERGES)
            return model_fail(r->err, r->err_len,
                              "model.merges has more than %zu merges",
                              BPE_MAX_MERGES);
    }
    lex_space(&x);
    if (x.at != x.n)
        return model_fail(r->err, r->err_len, "model.merges is not valid JSON");
    r->merges = calloc(n ? n : 1, sizeof *r->merges);
    r->merges_text = malloc(text.len);
    if (!r->merges || !r->merges_text)
        return model_fail(r->err, r->err_len, "out of memory for the merges");
    x.at = 0;
    lex_take(&x, '[');
    for (size_t i = 0, o = 0; i < n; i++) {
        char *at = r->merges_text + o;
        if (!lex_merge(&x, at, &r->merges[i], &used))
            return model_fail(r->err, r->err_len,
                              "model.merges[%zu] ('%.64s') is not two tokens "
                              "and one space",
                              i, at);
        lex_take(&x, ',');
        o += used;
    }
    r->spec.merges = r->merges;
    r->spec.n_merges = n;
    return true;
}

/* tokenizer.json's text with model.vocab and model.merges cut out (each
 * value null), for cJSON; NULL when out of memory. */
static char *without_parts(const char *s, size_t n, struct span a,
                           struct span b, size_t *len)
{
    if (!a.text || (b.text && b.text < a.text)) {
        const struct span t = a;
        a = b;
        b = t;
    }
    char *out = malloc(n + 8); // "null" may be longer than "{}" or "[]"
    if (!out)
        return NULL;
    size_t o = 0, at = 0;
    const struct span cut[2] = {a, b};
    for (size_t i = 0; i < 2; i++) {
        if (!cut[i].text)
            continue;
        const size_t from = (size_t)(cut[i].text - s);
        memcpy(out + o, s + at, from - at);
        o += from - at;
        memcpy(out + o, "null", 4);
        o += 4;
        at = from + cut[i].len;
    }
    memcpy(out + o, s + at, n - at);
    *len = o + n - at;
    return out;
}

/* A string setting that must be null or empty. */
static bool unset(const cJSON *model, const char *name, struct reading *r)
{
    const cJSON *v = key(model, name);
    if (is_null(v) || (cJSON_IsString(v) && !v->valuestring[0]))
        return true;
    return model_fail(r->err, r->err_len,
                      "model.%s '%.64s' is not supported (only null or \"\")",
                      name, cJSON_IsString(v) ? v->valuestring : "?");
}

/* model.vocab or model.merges: from the span cut out of the text, or, when
 * the text was parsed whole, from cJSON's tree printed again. */
static bool read_model_part(const cJSON *model, const char *name,
                            struct span cut, struct reading *r)
{
    char *printed = NULL;
    if (!cut.text) {
        const cJSON *v = key(model, name);
        printed = v ? cJSON_PrintUnformatted(v) : NULL;
        if (v && !printed)
            return model_fail(r->err, r->err_len, "out of memory");
        cut = (struct span){printed ? printed : "",
                            printed ? strlen(printed) : 0};
    }
    const bool ok = strcmp(name, "vocab") == 0
                        ? read_vocab(cut, "model.vocab", r)
                        : read_merges(cut, r);
    free(printed);
    return ok;
}

static bool read_model(cJSON *doc, struct reading *r)
{
    cJSON *model = cJSON_GetObjectItemCaseSensitive(doc, "model");
    if (!cJSON_IsObject(model))
        return model_fail(r->err, r->err_len, "model is missing");
    const char *type = type_of(model);
    if (strcmp(type, "BPE") != 0 && !(type[0] == 0 && key(model, "merges")))
        return model_fail(r->err, r->err_len,
                          "model.type '%.64s' is not supported (attnd reads "
                          "BPE tokenizers)",
                          type[0] ? type : "(none)");
    if (!is_null(key(model, "dropout")))
        return model_fail(r->err, r->err_len,
                          "model.dropout is set: BPE dropout samples merges at "
                          "random, attnd needs the same ids every time");
    if (!unset(model, "continuing_subword_prefix", r) ||
        !unset(model, "end_of_word_suffix", r) ||
        !flag(model, "fuse_unk", false, "model", &r->spec.fuse_unk, r) ||
        !flag(model, "byte_fallback", false, "model", &r->spec.byte_fallback,
              r) ||
        !flag(model, "ignore_merges", false, "model", &r->spec.ignore_merges,
              r) ||
        !read_model_part(model, "vocab", r->vocab_span, r) ||
        !read_model_part(model, "merges", r->merges_span, r))
        return false;
    const cJSON *unk = key(model, "unk_token");
    r->spec.unk_id = -1;
    if (!is_null(unk)) {
        if (!cJSON_IsString(unk))
            return model_fail(r->err, r->err_len,
                              "model.unk_token is not a string");
        // the model's own vocabulary, as the library looks it up
        for (size_t i = 0; i < r->spec.n_vocab; i++)
            if (r->vocab[i].text &&
                strcmp(r->vocab[i].text, unk->valuestring) == 0)
                r->spec.unk_id = (int64_t)i;
        if (r->spec.unk_id < 0)
            return model_fail(r->err, r->err_len,
                              "model.unk_token '%.64s' is not in the "
                              "vocabulary",
                              unk->valuestring);
    }
    return true;
}

/* ------------------------------------------------- the pipeline's parts */

/* A string key, into *out. */
static bool string_key(const cJSON *obj, const char *name, const char *where,
                       struct bpe_string *out, struct reading *r)
{
    const cJSON *v = key(obj, name);
    if (!cJSON_IsString(v))
        return model_fail(r->err, r->err_len, "%s.%s is not a string", where,
                          name);
    *out = str(v->valuestring);
    return true;
}

/* One normalizer, appended to the steps; a Sequence's in order. */
static bool read_norm_step(const cJSON *n, const char *where, int depth,
                           struct reading *r)
{
    const char *type = type_of(n);
    struct bpe_norm_step step = {0};
    if (strcmp(type, "Sequence") == 0 && depth < 4) {
        const cJSON *e;
        cJSON_ArrayForEach(e, key(n, "normalizers"))
        {
            if (!read_norm_step(e, "normalizer.normalizers", depth + 1, r))
                return false;
        }
        return true;
    }
    if (strcmp(type, "NFC") == 0) {
        step.kind = BPE_NORM_STEP_NFC;
    } else if (strcmp(type, "Prepend") == 0) {
        step.kind = BPE_NORM_STEP_PREPEND;
        if (!string_key(n, "prepend", where, &step.content, r))
            return false;
    } else if (strcmp(type, "Replace") == 0) {
        step.kind = BPE_NORM_STEP_REPLACE;
        const cJSON *pattern = key(n, "pattern");
        if (!cJSON_IsString(key(pattern, "String")))
            return model_fail(r->err, r->err_len,
                              "%s: Replace's pattern is not a String (a Regex "
                              "is not supported)",
                              where);
        if (!string_key(pattern, "String", where, &step.pattern, r) ||
            !string_key(n, "content", where, &step.content, r))
            return false;
        if (step.pattern.len == 0)
            return model_fail(r->err, r->err_len,
                              "%s: Replace's pattern is empty", where);
    } else {
        return model_fail(r->err, r->err_len,
                          "%s.type '%.64s' is not supported (NFC, Prepend, "
                          "Replace of a String, or a Sequence of those)",
                          where, type[0] ? type : "(none)");
    }
    if (r->spec.n_norm_steps == BPE_MAX_NORM_STEPS)
        return model_fail(r->err, r->err_len,
                          "normalizer has more than %d steps",
                          BPE_MAX_NORM_STEPS);
    r->steps[r->spec.n_norm_steps++] = step;
    return true;
}

/* normalizer: null, or NFC, Prepend, Replace (a String) and Sequences of
 * those, as steps. */
static bool read_normalizer(const cJSON *n, struct reading *r)
{
    r->spec.normalizer = BPE_NORM_NONE;
    r->spec.norm_steps = r->steps;
    r->spec.n_norm_steps = 0;
    return is_null(n) || read_norm_step(n, "normalizer", 0, r);
}

/* Split's behaviors, as tokenizer.json names them. */
static const struct {
    const char *name;
    enum bpe_split_behavior behavior;
} behaviors[] = {
    {"Isolated", BPE_SPLIT_ISOLATED},
    {"Removed", BPE_SPLIT_REMOVED},
    {"MergedWithPrevious", BPE_SPLIT_MERGED_WITH_PREVIOUS},
    {"MergedWithNext", BPE_SPLIT_MERGED_WITH_NEXT},
    {"Contiguous", BPE_SPLIT_CONTIGUOUS},
};

/* Room for one more split, or a refusal. */
static struct bpe_split *new_split(struct reading *r)
{
    if (r->spec.n_splits == BPE_MAX_SPLITS) {
        model_fail(r->err, r->err_len, "pre_tokenizer has more than %d splits",
                   BPE_MAX_SPLITS);
        return NULL;
    }
    struct bpe_split *sp = &r->splits[r->spec.n_splits++];
    memset(sp, 0, sizeof *sp);
    return sp;
}

/* Split: one of the known regexes or a String, any behavior, inverted or
 * not. */
static bool read_split(const cJSON *p, const char *where, struct reading *r)
{
    const cJSON *pattern = key(p, "pattern");
    const cJSON *re = key(pattern, "Regex");
    const cJSON *literal = key(pattern, "String");
    const cJSON *behavior = key(p, "behavior");
    bool invert;
    if (!flag(p, "invert", false, where, &invert, r))
        return false;
    struct bpe_split *sp = new_split(r);
    if (!sp)
        return false;
    sp->invert = invert;
    size_t b = 0;
    const size_t n_behaviors = sizeof behaviors / sizeof behaviors[0];
    while (b < n_behaviors &&
           !(cJSON_IsString(behavior) &&
             strcmp(behavior->valuestring, behaviors[b].name) == 0))
        b++;
    if (b == n_behaviors)
        return model_fail(
            r->err, r->err_len,
            "%s.behavior '%.32s' is not supported (Isolated, "
            "Removed, MergedWithPrevious, MergedWithNext, "
            "Contiguous)",
            where, cJSON_IsString(behavior) ? behavior->valuestring : "?");
    sp->behavior = behaviors[b].behavior;
    if (cJSON_IsString(literal)) {
        sp->literal = str(literal->valuestring);
        return true;
    }
    if (!cJSON_IsString(re))
        return model_fail(r->err, r->err_len,
                          "%s.pattern is neither a Regex nor a String", where);
    for (size_t i = 0; i < sizeof known_regexes / sizeof known_regexes[0]; i++)
        if (strcmp(re->valuestring, known_regexes[i].regex) == 0) {
            sp->pattern = known_regexes[i].pattern;
            return true;
        }
    return model_fail(r->err, r->err_len,
                      "%s.pattern '%.120s' is not one of the known patterns "
                      "(GPT-2's, Llama 3's and cl100k's, Qwen2's, o200k's)",
                      where, re->valuestring);
}

/* ByteLevel as a pre-tokenizer, last of all: no prefix space (which
 * would add text); its regex, when use_regex, a split of GPT-2's pattern
 * after the splits before it. */
static bool read_byte_level_last(const cJSON *p, const char *where,
                                 struct reading *r)
{
    bool prefix, regex;
    if (!flag(p, "add_prefix_space", true, where, &prefix, r) ||
        !flag(p, "use_regex", true, where, &regex, r))
        return false;
    if (prefix)
        return model_fail(r->err, r->err_len,
                          "%s.add_prefix_space is true, which is not "
                          "supported",
                          where);
    r->spec.byte_level = true;
    if (!regex)
        return true;
    struct bpe_split *sp = new_split(r);
    if (sp)
        sp->pattern = BPE_PATTERN_GPT2;
    return sp != NULL;
}

/* pre_tokenizer: null, ByteLevel, Split, or a Sequence of Splits that may
 * end with a ByteLevel. */
static bool read_pre_tokenizer(const cJSON *p, struct reading *r)
{
    r->spec.pattern = BPE_PATTERN_NONE;
    r->spec.splits = r->splits;
    r->spec.n_splits = 0;
    if (is_null(p))
        return true;
    const char *type = type_of(p);
    if (strcmp(type, "ByteLevel") == 0)
        return read_byte_level_last(p, "pre_tokenizer", r);
    if (strcmp(type, "Split") == 0)
        return read_split(p, "pre_tokenizer", r);
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = key(p, "pretokenizers");
        const int count = cJSON_GetArraySize(list);
        for (int i = 0; i < count; i++) {
            const cJSON *e = cJSON_GetArrayItem(list, i);
            const char *t = type_of(e);
            char where[64];
            snprintf(where, sizeof where, "pre_tokenizer.pretokenizers[%d]", i);
            bool ok;
            if (strcmp(t, "Split") == 0)
                ok = read_split(e, where, r);
            else if (strcmp(t, "ByteLevel") == 0 && i == count - 1)
                ok = read_byte_level_last(e, where, r);
            else
                ok =
                    model_fail(r->err, r->err_len,
                               "%s.type '%.64s' is not supported here (Splits, "
                               "then a ByteLevel last)",
                               where, t[0] ? t : "(none)");
            if (!ok)
                return false;
        }
        return true;
    }
    return model_fail(r->err, r->err_len,
                      "pre_tokenizer.type '%.64s' is not supported (null, "
                      "ByteLevel, Split, or a Sequence of those)",
                      type[0] ? type : "(none)");
}

/* TemplateProcessing's single template: [$A] or [BOS, $A]. */
static bool read_template(const cJSON *p, struct reading *r)
{
    const cJSON *single = key(p, "single");
    const int n = cJSON_GetArraySize(single);
    const cJSON *first = cJSON_GetArrayItem(single, 0);
    const cJSON *last = cJSON_GetArrayItem(single, n - 1);
    const cJSON *seq = key(last, "Sequence");
    const cJSON *seq_id = key(seq, "id");
    if (!cJSON_IsArray(single) || n < 1 || n > 2 || !cJSON_IsString(seq_id) ||
        strcmp(seq_id->valuestring, "A") != 0)
        return model_fail(r->err, r->err_len,
                          "post_processor.single is not supported (only \"$A\" "
                          "or \"BOS $A\")");
    if (n == 1)
        return true;
    const cJSON *special = key(first, "SpecialToken");
    const cJSON *name = key(special, "id");
    if (!cJSON_IsString(name))
        return model_fail(r->err, r->err_len,
                          "post_processor.single[0] is not a SpecialToken");
    const cJSON *entry = key(key(p, "special_tokens"), name->valuestring);
    const cJSON *ids = key(entry, "ids");
    const cJSON *id = cJSON_GetArrayItem(ids, 0);
    if (cJSON_GetArraySize(ids) != 1 || !cJSON_IsNumber(id) ||
        !(id->valuedouble >= 0 && id->valuedouble < (double)BPE_MAX_VOCAB))
        return model_fail(r->err, r->err_len,
                          "post_processor.special_tokens['%.64s'] does not "
                          "give one id",
                          name->valuestring);
    r->spec.bos_id = (int64_t)id->valuedouble;
    return true;
}

/* post_processor: null, ByteLevel (offsets only), TemplateProcessing, or
 * a Sequence of those. */
static bool read_post_processor(const cJSON *p, struct reading *r)
{
    if (is_null(p))
        return true;
    const char *type = type_of(p);
    if (strcmp(type, "ByteLevel") == 0)
        return true;
    if (strcmp(type, "TemplateProcessing") == 0)
        return read_template(p, r);
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *e;
        cJSON_ArrayForEach(e, key(p, "processors"))
        {
            const char *t = type_of(e);
            if (strcmp(t, "TemplateProcessing") == 0) {
                if (!read_template(e, r))
                    return false;
            } else if (strcmp(t, "ByteLevel") != 0) {
                return model_fail(r->err, r->err_len,
                                  "post_processor.processors: type '%.64s' is "
                                  "not supported",
                                  t[0] ? t : "(none)");
            }
        }
        return true;
    }
    return model_fail(r->err, r->err_len,
                      "post_processor.type '%.64s' is not supported (null, "
                      "ByteLevel, TemplateProcessing, Sequence)",
                      type[0] ? type : "(none)");
}

static bool read_added(const cJSON *list, struct reading *r)
{
    if (is_null(list))
        return true;
    if (!cJSON_IsArray(list))
        return model_fail(r->err, r->err_len, "added_tokens is not an array");
    const size_t n = (size_t)cJSON_GetArraySize(list);
    if (n > BPE_MAX_ADDED)
        return model_fail(r->err, r->err_len,
                          "added_tokens has %zu tokens; at most %zu are "
                          "allowed",
                          n, BPE_MAX_ADDED);
    r->added = calloc(n ? n : 1, sizeof *r->added);
    if (!r->added)
        return model_fail(r->err, r->err_len, "out of memory");
    size_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, list)
    {
        struct bpe_added_token *a = &r->added[i];
        const cJSON *id = key(e, "id");
        const cJSON *content = key(e, "content");
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        if (!cJSON_IsNumber(id) || !(id->valuedouble >= 0) ||
            id->valuedouble >= (double)BPE_MAX_VOCAB ||
            (double)(uint32_t)id->valuedouble != id->valuedouble ||
            !cJSON_IsString(content))
            return model_fail(r->err, r->err_len,
                              "%s has no id below %zu, or no content", where,
                              BPE_MAX_VOCAB);
        a->id = (uint32_t)id->valuedouble;
        a->content = str(content->valuestring);
        if (!flag(e, "special", false, where, &a->special, r) ||
            !flag(e, "single_word", false, where, &a->single_word, r) ||
            !flag(e, "lstrip", false, where, &a->lstrip, r) ||
            !flag(e, "rstrip", false, where, &a->rstrip, r) ||
            !flag(e, "normalized", !a->special, where, &a->normalized, r))
            return false;
        if (a->single_word)
            return model_fail(r->err, r->err_len,
                              "%s ('%.64s') has single_word true, which is not "
                              "supported",
                              where, a->content.text);
        i++;
    }
    r->spec.added = r->added;
    r->spec.n_added = n;
    return true;
}

/* Settings of the whole tokenizer that would change the ids. */
static bool read_unused(const cJSON *doc, struct reading *r)
{
    if (!is_null(key(doc, "truncation")))
        return model_fail(r->err, r->err_len,
                          "truncation is set; attnd encodes whole texts");
    if (!is_null(key(doc, "padding")))
        return model_fail(r->err, r->err_len,
                          "padding is set; attnd encodes whole texts");
    return true;
}

static bool read_tokenizer_json(cJSON *doc, struct reading *r)
{
    if (!cJSON_IsObject(doc))
        return model_fail(r->err, r->err_len, "not a JSON object");
    r->spec.bos_id = -1;
    return read_unused(doc, r) && read_model(doc, r) &&
           read_added(key(doc, "added_tokens"), r) &&
           read_normalizer(key(doc, "normalizer"), r) &&
           read_pre_tokenizer(key(doc, "pre_tokenizer"), r) &&
           read_post_processor(key(doc, "post_processor"), r);
}

/* ------------------------------------------- vocab.json and merges.txt */

/* merges.txt (text is a writable copy): "#version" lines skipped, then
 * one "a b" per line. */
static bool read_merges_txt(char *text, size_t len, struct reading *r)
{
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    if (lines > BPE_MAX_MERGES + 1)
        return model_fail(r->err, r->err_len,
                          "%zu lines; at most %zu merges are allowed", lines,
                          BPE_MAX_MERGES);
    r->merges = calloc(lines, sizeof *r->merges);
    if (!r->merges)
        return model_fail(r->err, r->err_len, "out of memory");
    size_t n = 0, line_no = 0;
    for (char *at = text; at < text + len; line_no++) {
        char *end = memchr(at, '\n', (size_t)(text + len - at));
        if (!end)
            end = text + len;
        if (memchr(at, 0, (size_t)(end - at)))
            return model_fail(r->err, r->err_len, "line %zu holds a NUL byte",
                              line_no + 1);
        *end = 0;
        if (end > at && end[-1] == '\r')
            end[-1] = 0;
        if (at[0] && strncmp(at, "#version", 8) != 0 &&
            !split_merge(at, &r->merges[n++]))
            return model_fail(r->err, r->err_len,
                              "line %zu ('%.64s') is not two tokens and one "
                              "space",
                              line_no + 1, at);
        at = end + 1;
    }
    r->spec.merges = r->merges;
    r->spec.n_merges = n;
    return true;
}

/* A token named in tokenizer_config.json: a string or {"content": ...}. */
static const char *config_token(const cJSON *config, const char *name,
                                const char *fallback)
{
    const cJSON *v = key(config, name);
    if (cJSON_IsString(v))
        return v->valuestring;
    const cJSON *c = key(v, "content");
    if (cJSON_IsString(c))
        return c->valuestring;
    return v && cJSON_IsNull(v) ? NULL : fallback;
}

/* GPT-2's files, as transformers' GPT2Converter builds its tokenizer: a
 * byte-level BPE with GPT-2's regex, no normalizer and no BOS; the
 * config's special tokens (each "<|endoftext|>" by default) are added
 * tokens when the vocabulary has them. */
static bool read_gpt2_files(struct span vocab, char *merges, size_t merges_len,
                            const cJSON *config, const char **file,
                            struct reading *r)
{
    *file = "vocab.json";
    if (!read_vocab(vocab, "vocab.json", r))
        return false;
    *file = "merges.txt";
    if (!read_merges_txt(merges, merges_len, r))
        return false;
    *file = "tokenizer_config.json";
    static const char *const names[] = {"bos_token", "eos_token", "unk_token",
                                        "pad_token"};
    r->added = calloc(4, sizeof *r->added);
    if (!r->added)
        return model_fail(r->err, r->err_len, "out of memory");
    for (size_t i = 0; i < 4; i++) {
        const char *s =
            config_token(config, names[i], i < 3 ? "<|endoftext|>" : NULL);
        const int64_t id = s ? find_id(r, s) : -1;
        if (id < 0 || id >= (int64_t)r->spec.n_vocab)
            continue;
        bool seen = false;
        for (size_t k = 0; k < r->spec.n_added; k++)
            seen = seen || r->added[k].id == (uint32_t)id;
        if (!seen)
            r->added[r->spec.n_added++] = (struct bpe_added_token){
                .content = str(s), .id = (uint32_t)id, .special = true};
    }
    r->spec.added = r->added;
    r->spec.byte_level = true;
    r->spec.pattern = BPE_PATTERN_GPT2;
    r->spec.unk_id = -1;
    r->spec.bos_id = -1;
    return true;
}

/* ---------------------------------------------------------------- BOS */

/* The classes whose fast tokenizer rebuilds the post-processor when it
 * loads (transformers' update_post_processor()); a config naming the slow
 * class gets the fast one. */
static const struct {
    const char *name;
    bool bos_default;     /* add_bos_token when the config has none */
    const char *bos_name; /* bos_token when the config has none */
    bool from_slow;       /* add_prefix_space set: rebuilt from the
                             SentencePiece model */
} rebuilt_classes[] = {
    {"LlamaTokenizer", true, "<s>", true},
    {"LlamaTokenizerFast", true, "<s>", true},
    {"CodeLlamaTokenizer", true, "<s>", true},
    {"CodeLlamaTokenizerFast", true, "<s>", true},
    {"GemmaTokenizer", true, "<bos>", false},
    {"GemmaTokenizerFast", true, "<bos>", false},
    {"GPTNeoXTokenizer", false, "<|endoftext|>", false},
    {"GPTNeoXTokenizerFast", false, "<|endoftext|>", false},
};

/*
 * Whose BOS: transformers' LlamaTokenizerFast, GemmaTokenizerFast and
 * GPTNeoXTokenizerFast rebuild the post-processor from
 * tokenizer_config.json's add_bos_token (default true, or false for
 * GPT-NeoX) and add_eos_token (default false) when they load, whatever
 * tokenizer.json says; every other class keeps tokenizer.json's. attnd
 * follows transformers, since the model's attention is computed on what
 * transformers feeds it. An EOS after the text is refused: the interface
 * marks one added token, first. Every fast class also sets a ByteLevel
 * pre-tokenizer's add_prefix_space from the config's (default false),
 * which must then be false.
 */
static bool apply_config(const cJSON *config, struct reading *r)
{
    if (!config)
        return true;
    const cJSON *cls = key(config, "tokenizer_class");
    const char *name = cJSON_IsString(cls) ? cls->valuestring : "";
    size_t k = 0;
    const size_t n_classes = sizeof rebuilt_classes / sizeof rebuilt_classes[0];
    while (k < n_classes && strcmp(name, rebuilt_classes[k].name) != 0)
        k++;
    const bool from_slow = k < n_classes && rebuilt_classes[k].from_slow;
    bool prefix = false;
    if (!from_slow && !flag(config, "add_prefix_space", false,
                            "tokenizer_config", &prefix, r))
        return false;
    if (prefix && r->spec.byte_level)
        return model_fail(r->err, r->err_len,
                          "add_prefix_space is true, which is not supported "
                          "(a space put before the text)");
    if (k == n_classes)
        return true;
    bool bos, eos;
    if (!flag(config, "add_bos_token", rebuilt_classes[k].bos_default,
              "tokenizer_config", &bos, r) ||
        !flag(config, "add_eos_token", false, "tokenizer_config", &eos, r))
        return false;
    if (eos)
        return model_fail(r->err, r->err_len,
                          "add_eos_token is true, which is not supported "
                          "(an EOS after the text)");
    if (from_slow && !is_null(key(config, "add_prefix_space")))
        return model_fail(r->err, r->err_len,
                          "add_prefix_space is set: %s then rebuilds the "
                          "tokenizer from the SentencePiece model, which "
                          "attnd does not read",
                          name);
    r->spec.bos_id = -1;
    if (!bos)
        return true;
    const char *token =
        config_token(config, "bos_token", rebuilt_classes[k].bos_name);
    const int64_t id = token ? find_id(r, token) : -1;
    if (id < 0)
        return model_fail(r->err, r->err_len,
                          "add_bos_token is true, and bos_token '%.64s' is not "
                          "a token",
                          token ? token : "null");
    r->spec.bos_id = id;
    return true;
}

/* ------------------------------------------------------------ building */

static cJSON *parse(const char *text, size_t len, const char *file,
                    const char **bad, struct reading *r)
{
    cJSON *doc = cJSON_ParseWithLength(text, len);
    if (!doc) {
        *bad = file;
        model_fail(r->err, r->err_len, "not valid JSON");
    }
    return doc;
}

/* tokenizer.json: model.vocab and model.merges found in the text and cut
 * out (their spans into r), the rest parsed by cJSON; the whole text when
 * they are not found. */
static cJSON *parse_tokenizer_json(const char *text, size_t len,
                                   const char **bad, struct reading *r)
{
    struct span vocab = {0}, merges = {0};
    if (!find_model_parts(text, len, &vocab, &merges) ||
        (!vocab.text && !merges.text))
        return parse(text, len, "tokenizer.json", bad, r);
    size_t rest_len;
    char *rest = without_parts(text, len, vocab, merges, &rest_len);
    if (!rest) {
        model_fail(r->err, r->err_len, "out of memory");
        return NULL;
    }
    cJSON *doc = parse(rest, rest_len, "tokenizer.json", bad, r);
    free(rest);
    r->vocab_span = vocab;
    r->merges_span = merges;
    return doc;
}

bool tokenizer_json_build(const struct tokenizer_texts *in,
                          struct tokenizer *out, const char **file, char *err,
                          size_t err_len)
{
    memset(out, 0, sizeof *out);
    struct reading r = {.err = err, .err_len = err_len};
    cJSON *config = NULL, *doc = NULL;
    char *merges = NULL;
    bool ok = true;
    *file = "tokenizer_config.json";
    if (in->config) {
        config = parse(in->config, in->config_len, *file, file, &r);
        ok = config != NULL;
        if (ok && !cJSON_IsObject(config))
            ok = model_fail(err, err_len, "not a JSON object");
    }
    if (ok && in->tokenizer_json) {
        *file = "tokenizer.json";
        doc = parse_tokenizer_json(in->tokenizer_json, in->tokenizer_json_len,
                                   file, &r);
        ok = doc && read_tokenizer_json(doc, &r);
    } else if (ok && in->vocab_json && in->merges_txt) {
        *file = "vocab.json";
        merges = malloc(in->merges_txt_len + 1);
        if (!merges) {
            ok = model_fail(err, err_len, "out of memory");
        } else {
            memcpy(merges, in->merges_txt, in->merges_txt_len);
            merges[in->merges_txt_len] = 0;
            ok = read_gpt2_files(
                (struct span){in->vocab_json, in->vocab_json_len}, merges,
                in->merges_txt_len, config, file, &r);
        }
    } else if (ok) {
        *file = "tokenizer.json";
        ok = model_fail(err, err_len,
                        "missing, and there are no vocab.json and merges.txt "
                        "either");
    }
    if (ok) {
        const char *json_file = *file;
        *file = "tokenizer_config.json";
        ok = apply_config(config, &r);
        if (ok)
            *file = in->tokenizer_json ? json_file : "vocab.json";
    }
    if (ok) {
        struct attn_error aerr = {0};
        if (bpe_tokenizer_new(&r.spec, out, &aerr))
            ok = model_fail(err, err_len, "%s", aerr.message);
    }
    cJSON_Delete(doc);
    cJSON_Delete(config);
    free(merges);
    free(r.vocab);
    free(r.merges);
    free(r.added);
    free(r.vocab_text);
    free(r.merges_text);
    return ok;
}

bool tokenizer_json_open(struct model *m, const struct model_files *files)
{
    struct tokenizer_texts in = {0};
    char *json = NULL, *config = NULL, *vocab = NULL, *merges = NULL;
    bool ok =
        model_files_read(files, "tokenizer_config.json",
                         TOKENIZER_CONFIG_MAX_BYTES, true, &config,
                         &in.config_len) &&
        model_files_read(files, "tokenizer.json", TOKENIZER_JSON_MAX_BYTES,
                         true, &json, &in.tokenizer_json_len);
    if (ok && !json)
        ok = model_files_read(files, "vocab.json", TOKENIZER_JSON_MAX_BYTES,
                              true, &vocab, &in.vocab_json_len) &&
             model_files_read(files, "merges.txt", TOKENIZER_JSON_MAX_BYTES,
                              true, &merges, &in.merges_txt_len);
    in.tokenizer_json = json;
    in.config = config;
    in.vocab_json = vocab;
    in.merges_txt = merges;
    char why[400];
    const char *file = "tokenizer.json";
    m->do_lower_case = false;
    if (ok && !tokenizer_json_build(&in, &m->tokenizer, &file, why, sizeof why))
        ok = model_files_fail(files, file, "%s", why);
    if (ok && m->xf.vocab_size &&
        tok_vocab_size(&m->tokenizer) > m->xf.vocab_size) {
        ok = model_files_fail(files, json ? "tokenizer.json" : "vocab.json",
                              "the tokenizer has %zu ids, more than "
                              "config.json's vocab_size %zu",
                              tok_vocab_size(&m->tokenizer), m->xf.vocab_size);
        tok_free(&m->tokenizer);
    }
    free(json);
    free(config);
    free(vocab);
    free(merges);
    return ok;
}
