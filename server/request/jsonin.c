/*
 * jsonin.c - typed, bounded reads from cJSON trees. Every refusal names
 * the field as the client wrote it, the value it sent, and its pointer.
 */
#include "jsonin.h"
#include "jsonnum.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cJSON allocates through these, so that a parse that failed for want of
 * memory says so; the flag is the parsing thread's own. */
static _Thread_local bool allocation_failed;

static void *noting_malloc(size_t n)
{
    void *p = malloc(n);
    if (!p)
        allocation_failed = true;
    return p;
}

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

static void install_hooks(void)
{
    cJSON_Hooks hooks = {.malloc_fn = noting_malloc, .free_fn = free};
    cJSON_InitHooks(&hooks);
}

cJSON *jsonin_parse(const char *text, size_t len, const char **end, bool *nomem)
{
    pthread_once(&hooks_once, install_hooks);
    allocation_failed = false;
    *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, end, false);
    *nomem = !root && allocation_failed;
    return root;
}

void jpath_root(struct jpath *p, const char *key)
{
    jpath_key(p, NULL, key);
}

/* Append src to dst (capacity cap), cutting it short rather than
 * overflowing: pointers and names are for messages, and fields that long
 * are refused anyway. */
static void append(char *dst, size_t cap, const char *src)
{
    const size_t used = strnlen(dst, cap - 1);
    size_t n = strlen(src);
    if (n > cap - 1 - used)
        n = cap - 1 - used;
    memcpy(dst + used, src, n);
    dst[used + n] = '\0';
}

/* n bytes of src after the used ones of dst (capacity cap), cut short as
 * append() cuts: returns the bytes now used. */
static size_t append_n(char *dst, size_t cap, size_t used, const char *src,
                       size_t n)
{
    if (n > cap - 1 - used)
        n = cap - 1 - used;
    memcpy(dst + used, src, n);
    return used + n;
}

/* append()'s result, with the lengths kept as it goes: every key of a
 * body gets a path, and append() measured both strings for each byte. */
void jpath_key(struct jpath *out, const struct jpath *parent, const char *key)
{
    struct jpath p; /* out may be parent */
    const size_t cap = sizeof p.pointer, name_cap = sizeof p.name;
    size_t used = 0, named = 0;
    if (parent) {
        used = append_n(p.pointer, cap, 0, parent->pointer,
                        strlen(parent->pointer));
        named =
            append_n(p.name, name_cap, 0, parent->name, strlen(parent->name));
    }
    used = append_n(p.pointer, cap, used, "/", 1);
    for (const char *k = key; *k; k++) /* RFC 6901 escapes */
        used = *k == '~'   ? append_n(p.pointer, cap, used, "~0", 2)
               : *k == '/' ? append_n(p.pointer, cap, used, "~1", 2)
                           : append_n(p.pointer, cap, used, k, 1);
    p.pointer[used] = '\0';
    if (named)
        named = append_n(p.name, name_cap, named, ".", 1);
    named = append_n(p.name, name_cap, named, key, strlen(key));
    p.name[named] = '\0';
    memcpy(out->pointer, p.pointer, used + 1);
    memcpy(out->name, p.name, named + 1);
}

/* v in decimal between open and close, into out (24 bytes at least):
 * every array element of a request gets a path, so no printf. */
static void decimal_between(char *out, char open, size_t v, const char *close)
{
    *out++ = open;
    out += jsonnum_uint(v, out);
    while ((*out++ = *close++))
        ;
}

void jpath_index(struct jpath *out, const struct jpath *parent, size_t index)
{
    struct jpath p = *parent;
    char num[24];
    decimal_between(num, '/', index, "");
    append(p.pointer, sizeof p.pointer, num);
    decimal_between(num, '[', index, "]");
    append(p.name, sizeof p.name, num);
    *out = p;
}

const char *jsonin_kind(const cJSON *v)
{
    if (!v)
        return "missing";
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsBool(v))
        return "a boolean";
    if (cJSON_IsNull(v))
        return "null";
    if (cJSON_IsArray(v))
        return "an array";
    return "an object";
}

void jsonin_show_number(double v, char *out, size_t len)
{
    // the fewest digits that read back as v: 2.0000001 as sent, not
    // rounded into a range it is out of, nor 2.0000000999999998
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(out, len, "%.*g", digits, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

void jsonin_show(const cJSON *v, char *out, size_t len)
{
    if (cJSON_IsNumber(v))
        jsonin_show_number(v->valuedouble, out, len);
    else if (cJSON_IsString(v)) {
        size_t n;
        const char *s = jsonin_text(v, &n);
        jsonin_show_text(s, n, out, len);
    } else if (cJSON_IsBool(v))
        snprintf(out, len, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else
        snprintf(out, len, "%s", jsonin_kind(v));
}

static bool wrong_type(const cJSON *v, const struct jpath *at,
                       const char *expected, struct problem *pb)
{
    char shown[64];
    jsonin_show(v, shown, sizeof shown);
    if (cJSON_IsNumber(v) || cJSON_IsString(v) || cJSON_IsBool(v))
        return problem_set(pb, 422, at->pointer, "%s is %s (%s); expected %s",
                           at->name, jsonin_kind(v), shown, expected);
    return problem_set(pb, 422, at->pointer, "%s is %s; expected %s", at->name,
                       jsonin_kind(v), expected);
}

bool jsonin_size(const cJSON *v, const struct jpath *at, size_t lo, size_t hi,
                 size_t *out, struct problem *pb)
{
    if (!cJSON_IsNumber(v))
        return wrong_type(v, at, "an integer", pb);
    const double d = v->valuedouble;
    // (double)hi may round up past hi (SIZE_MAX - 1 to 2^64): a size is
    // below 2^64 first, then compared as an integer
    if (d == floor(d) && d >= (double)lo && d < 0x1p64 && (size_t)d <= hi) {
        *out = (size_t)d;
        return true;
    }
    char shown[32]; /* formatted for a refusal only */
    jsonin_show_number(d, shown, sizeof shown);
    if (d != floor(d))
        return problem_set(pb, 422, at->pointer, "%s (%s) must be an integer",
                           at->name, shown);
    // a caller taking any size checks its own bound after this: name the
    // range only where it is the field's
    if (hi != SIZE_MAX - 1)
        return problem_set(pb, 422, at->pointer,
                           "%s (%s) must be between %zu and %zu", at->name,
                           shown, lo, hi);
    return d < (double)lo
               ? problem_set(pb, 422, at->pointer,
                             "%s (%s) must be at least %zu", at->name, shown,
                             lo)
               : problem_set(pb, 422, at->pointer, "%s (%s) is too large",
                             at->name, shown);
}

bool jsonin_bool(const cJSON *v, const struct jpath *at, bool *out,
                 struct problem *pb)
{
    if (!cJSON_IsBool(v))
        return wrong_type(v, at, "true or false", pb);
    *out = cJSON_IsTrue(v);
    return true;
}

static bool to_float(const cJSON *v, const struct jpath *at, float *out,
                     struct problem *pb)
{
    const double d = v->valuedouble;
    if (!isfinite(d) || fabs(d) > FLT_MAX) {
        char shown[32];
        jsonin_show_number(d, shown, sizeof shown);
        return problem_set(pb, 422, at->pointer,
                           "%s (%s) is outside the float32 range", at->name,
                           shown);
    }
    *out = (float)d;
    return true;
}

bool jsonin_float(const cJSON *v, const struct jpath *at, float *out,
                  struct problem *pb)
{
    if (!cJSON_IsNumber(v))
        return wrong_type(v, at, "a number", pb);
    return to_float(v, at, out, pb);
}

bool jsonin_u64(const cJSON *v, const struct jpath *at, uint64_t *out,
                struct problem *pb)
{
    if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        char *end = NULL;
        if (*s < '0' || *s > '9' || strlen(s) > 20)
            return problem_set(pb, 422, at->pointer,
                               "%s (\"%.40s\") must be an unsigned 64-bit "
                               "integer",
                               at->name, s);
        errno = 0;
        const unsigned long long u = strtoull(s, &end, 10);
        if (*end || errno == ERANGE)
            return problem_set(pb, 422, at->pointer,
                               "%s (\"%.40s\") must be an unsigned 64-bit "
                               "integer",
                               at->name, s);
        *out = (uint64_t)u;
        return true;
    }
    if (!cJSON_IsNumber(v))
        return wrong_type(v, at, "an unsigned 64-bit integer", pb);
    const double d = v->valuedouble;
    /* A JSON number from 2^53 on may already have lost digits: 2^53 + 1
     * reads as 2^53, so 2^53 itself is refused too. */
    if (d != floor(d) || d < 0 || d >= 9007199254740992.0) {
        char shown[32];
        jsonin_show_number(d, shown, sizeof shown);
        return problem_set(pb, 422, at->pointer,
                           "%s (%s) must be an integer from 0 to 2^53 - 1; "
                           "send larger seeds as a string of digits",
                           at->name, shown);
    }
    *out = (uint64_t)d;
    return true;
}

bool jsonin_enum(const cJSON *v, const struct jpath *at,
                 const char *const *names, size_t n, int *out,
                 struct problem *pb)
{
    if (cJSON_IsString(v))
        for (size_t i = 0; i < n; i++)
            if (!strcmp(v->valuestring, names[i])) {
                *out = (int)i;
                return true;
            }
    /* the names allowed, written out only for the refusal */
    char allowed[160] = "";
    size_t used = 0;
    for (size_t i = 0; i < n && used < sizeof allowed; i++)
        used +=
            (size_t)snprintf(allowed + used, sizeof allowed - used, "%s\"%s\"",
                             i ? (i + 1 == n ? " or " : ", ") : "", names[i]);
    if (!cJSON_IsString(v))
        return wrong_type(v, at, allowed, pb);
    return problem_set(pb, 422, at->pointer, "%s (\"%.40s\") must be %s",
                       at->name, v->valuestring, allowed);
}

/* ------------------------------------------------------------- tensors */

/* Walk the shape of v: depth and sizes, refusing ragged or empty arrays.
 * Leaves are checked by the caller's element reader. */
static bool tensor_shape(const cJSON *v, const struct jpath *at, int rank,
                         size_t dims[4], int *rank_out, struct problem *pb)
{
    if (!cJSON_IsArray(v))
        return wrong_type(v, at, rank == 1 ? "an array" : "an array of arrays",
                          pb);
    int depth = 0;
    const cJSON *probe = v;
    while (cJSON_IsArray(probe) && depth < 5) {
        const int len = cJSON_GetArraySize(probe);
        if (len == 0) {
            if (depth == 0)
                return problem_set(pb, 422, at->pointer, "%s is empty",
                                   at->name);
            struct jpath first = *at;
            for (int d = 0; d < depth; d++)
                jpath_index(&first, &first, 0);
            return problem_set(pb, 422, first.pointer, "%s is empty",
                               first.name);
        }
        if (depth < 4) /* a fifth level is only counted, to be refused */
            dims[depth] = (size_t)len;
        depth++;
        probe = probe->child;
    }
    const bool rank_ok = rank == JSONIN_RANK_MASK ? depth >= 2 && depth <= 4
                         : rank                   ? depth == rank
                                                  : depth == 2 || depth == 3;
    if (!rank_ok) {
        if (rank == JSONIN_RANK_MASK)
            return problem_set(pb, 422, at->pointer,
                               "%s has %d dimension%s; expected 2 (query "
                               "tokens x keys), 3 (batch or batch x heads "
                               "first) or 4 (batch x heads x query tokens "
                               "x keys)",
                               at->name, depth, depth == 1 ? "" : "s");
        if (rank)
            return problem_set(pb, 422, at->pointer,
                               "%s has %d dimension%s; expected %d", at->name,
                               depth, depth == 1 ? "" : "s", rank);
        return problem_set(pb, 422, at->pointer,
                           "%s has %d dimension%s; expected 2 (tokens x "
                           "width) or 3 (batch x tokens x width)",
                           at->name, depth, depth == 1 ? "" : "s");
    }
    *rank_out = depth;
    return true;
}

typedef bool (*leaf_reader)(const cJSON *v, const struct jpath *at, void *dst,
                            size_t i, struct problem *pb);

static bool read_float_leaf(const cJSON *v, const struct jpath *at, void *dst,
                            size_t i, struct problem *pb)
{
    if (!cJSON_IsNumber(v))
        return wrong_type(v, at, "a number", pb);
    return to_float(v, at, (float *)dst + i, pb);
}

static bool read_bool_leaf(const cJSON *v, const struct jpath *at, void *dst,
                           size_t i, struct problem *pb)
{
    uint8_t *b = dst;
    if (cJSON_IsBool(v)) {
        b[i] = cJSON_IsTrue(v);
        return true;
    }
    if (cJSON_IsNumber(v) && (v->valuedouble == 0 || v->valuedouble == 1)) {
        b[i] = v->valuedouble != 0;
        return true;
    }
    return wrong_type(v, at, "true, false, 1 or 0", pb);
}

/* Fill dst in row-major order, checking every row's length against dims;
 * with read NULL, only check the shape (nothing is written). */
static bool tensor_fill(const cJSON *v, const struct jpath *at, int level,
                        int rank, const size_t dims[4], leaf_reader read,
                        void *dst, size_t *next, struct problem *pb)
{
    const size_t len = (size_t)cJSON_GetArraySize(v);
    if (len != dims[level]) {
        const char *what = level + 1 == rank ? "numbers" : "rows";
        return problem_set(pb, 422, at->pointer, "%s has %zu %s; expected %zu",
                           at->name, len, what, dims[level]);
    }
    size_t i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, v)
    {
        struct jpath sub;
        jpath_index(&sub, at, i++);
        if (level + 1 < rank) {
            if (!cJSON_IsArray(item))
                return wrong_type(item, &sub, "an array", pb);
            if (!tensor_fill(item, &sub, level + 1, rank, dims, read, dst, next,
                             pb))
                return false;
        } else if (read && !read(item, &sub, dst, (*next)++, pb)) {
            return false;
        }
    }
    return true;
}

static bool tensor_read(const cJSON *v, const struct jpath *at, int rank,
                        size_t max_elements, struct budget_hold *hold,
                        size_t elem, leaf_reader read, void **out,
                        size_t dims[4], int *rank_out, struct problem *pb)
{
    *out = NULL;
    dims[0] = dims[1] = dims[2] = dims[3] = 1;
    if (!tensor_shape(v, at, rank, dims, rank_out, pb))
        return false;
    /* The whole shape first: sizes read off the first row of each level
     * must hold for every row before anything is sized from them, so that
     * a ragged array costs nothing (what is allocated is then at most
     * what the body holds). */
    size_t next = 0;
    if (!tensor_fill(v, at, 0, *rank_out, dims, NULL, NULL, &next, pb))
        return false;
    size_t count = 1;
    for (int i = 0; i < *rank_out; i++) {
        if (dims[i] > max_elements || count > max_elements / dims[i])
            return problem_set(pb, 422, at->pointer,
                               "%s holds more than %zu numbers", at->name,
                               max_elements);
        count *= dims[i];
    }
    if (hold && !budget_reserve(hold, count * elem, at->name, false, pb))
        return false;
    void *dst = malloc(count * elem);
    if (!dst)
        return problem_set(pb, 503, at->pointer,
                           "out of memory reading %s (%zu numbers)", at->name,
                           count);
    if (!tensor_fill(v, at, 0, *rank_out, dims, read, dst, &next, pb)) {
        free(dst);
        return false;
    }
    *out = dst;
    return true;
}

bool jsonin_tensor(const cJSON *v, const struct jpath *at, int rank,
                   size_t max_elements, struct budget_hold *hold, float **out,
                   size_t dims[4], int *rank_out, struct problem *pb)
{
    void *p;
    const bool ok = tensor_read(v, at, rank, max_elements, hold, sizeof(float),
                                read_float_leaf, &p, dims, rank_out, pb);
    *out = p;
    return ok;
}

bool jsonin_bool_tensor(const cJSON *v, const struct jpath *at, int rank,
                        size_t max_elements, struct budget_hold *hold,
                        uint8_t **out, size_t dims[4], int *rank_out,
                        struct problem *pb)
{
    void *p;
    const bool ok = tensor_read(v, at, rank, max_elements, hold, 1,
                                read_bool_leaf, &p, dims, rank_out, pb);
    *out = p;
    return ok;
}

/* A mask leaf: a boolean, a number, or "-inf". Each kind's first place is
 * remembered for the caller's decision. */
static bool read_mask_leaf(const cJSON *v, const struct jpath *at, void *dst,
                           size_t i, struct problem *pb)
{
    struct jsonin_mask *m = dst;
    float value = 0.0f;
    if (cJSON_IsBool(v)) {
        value = cJSON_IsTrue(v) ? 1.0f : 0.0f;
        if (m->first_bool == SIZE_MAX)
            m->first_bool = i;
    } else if (cJSON_IsString(v) && !strcmp(v->valuestring, "-inf")) {
        value = -INFINITY;
        if (m->first_other == SIZE_MAX)
            m->first_other = i;
    } else if (cJSON_IsNumber(v)) {
        /* far below float32's range is still "never", not an error */
        if (v->valuedouble <= (double)ATTN_MASK_NEVER)
            value = -INFINITY;
        else if (!to_float(v, at, &value, pb))
            return false;
        if (value != 0.0f && value != 1.0f && m->first_other == SIZE_MAX)
            m->first_other = i;
    } else {
        return wrong_type(v, at,
                          "true, false, a number or \"-inf\" (JSON has no "
                          "-Infinity)",
                          pb);
    }
    m->values[i] = value;
    return true;
}

bool jsonin_mask_tensor(const cJSON *v, const struct jpath *at,
                        size_t max_elements, struct budget_hold *hold,
                        struct jsonin_mask *out, struct problem *pb)
{
    memset(out, 0, sizeof *out);
    out->first_bool = out->first_other = SIZE_MAX;
    size_t *dims = out->dims;
    dims[0] = dims[1] = dims[2] = dims[3] = 1;
    if (!tensor_shape(v, at, JSONIN_RANK_MASK, dims, &out->rank, pb))
        return false;
    size_t next = 0;
    if (!tensor_fill(v, at, 0, out->rank, dims, NULL, NULL, &next, pb))
        return false;
    size_t count = 1;
    for (int i = 0; i < out->rank; i++) {
        if (dims[i] > max_elements || count > max_elements / dims[i])
            return problem_set(pb, 422, at->pointer,
                               "%s holds more than %zu numbers", at->name,
                               max_elements);
        count *= dims[i];
    }
    if (hold &&
        !budget_reserve(hold, count * sizeof(float), at->name, false, pb))
        return false;
    out->values = malloc(count * sizeof(float));
    if (!out->values)
        return problem_set(pb, 503, at->pointer,
                           "out of memory reading %s (%zu numbers)", at->name,
                           count);
    out->count = count;
    if (!tensor_fill(v, at, 0, out->rank, dims, read_mask_leaf, out, &next,
                     pb)) {
        free(out->values);
        out->values = NULL;
        return false;
    }
    return true;
}

void jsonin_pointer_at(const struct jpath *at, const size_t *dims, int rank,
                       size_t flat, struct jpath *out)
{
    size_t index[4] = {0}, rest = flat;
    for (int k = rank - 1; k >= 0; k--) {
        index[k] = rest % dims[k];
        rest /= dims[k];
    }
    *out = *at;
    for (int k = 0; k < rank; k++)
        jpath_index(out, out, index[k]);
}

/* Whether body's strings are JSON's: no control character written raw,
 * which JSON forbids in strings (a 400 naming the byte); *nul tells
 * whether a string holds a \u0000 escape. One pass: a backslash escapes
 * the byte after it, so "\\u0000" is no escape. */
static bool strings_ok(const char *body, size_t len, bool *nul,
                       struct problem *pb)
{
    bool in_string = false;
    *nul = false;
    for (size_t at = 0; at < len; at++) {
        const unsigned char c = (unsigned char)body[at];
        if (!in_string) {
            in_string = c == '"';
            continue;
        }
        if (c == '"') {
            in_string = false;
        } else if (c < 0x20) {
            return problem_set(pb, 400, "",
                               "the body is not valid JSON: a control "
                               "character (0x%02x) is written raw in a "
                               "string at byte %zu of %zu",
                               c, at, len);
        } else if (c == '\\') {
            if (len - at >= 6 && !memcmp(body + at + 1, "u0000", 5))
                *nul = true;
            at++; /* the escaped byte */
        }
    }
    return true;
}

bool jsonin_is_text(const char *const *texts, const char *pointer)
{
    for (size_t i = 0; texts && texts[i]; i++) {
        const char *pat = texts[i], *p = pointer;
        while (*pat) {
            if (*pat == '*') { /* one whole key or index */
                pat++;
                while (*p && *p != '/')
                    p++;
            } else if (*pat++ != *p++) {
                break;
            }
        }
        if (!*pat && !*p)
            return true;
    }
    return false;
}

const char *jsonin_text(const cJSON *v, size_t *len)
{
    *len = v->valuedouble > 0 ? (size_t)v->valuedouble : strlen(v->valuestring);
    return v->valuestring;
}

cJSON *jsonin_text_create(const char *s, size_t len)
{
    cJSON *v = cJSON_CreateString("");
    char *bytes = v ? cJSON_malloc(len + 1) : NULL;
    if (!bytes) {
        cJSON_Delete(v);
        return NULL;
    }
    memcpy(bytes, s, len);
    bytes[len] = '\0';
    cJSON_free(v->valuestring);
    v->valuestring = bytes;
    v->valuedouble = memchr(s, 0, len) ? (double)len : 0;
    return v;
}

void jsonin_show_text(const char *s, size_t len, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    char shown[256];
    size_t n = 0;
    shown[n++] = '"';
    for (size_t i = 0; i < len && i < 40; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) {
            const char esc[] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            memcpy(shown + n, esc, sizeof esc);
            n += sizeof esc;
        } else {
            if (c == '"' || c == '\\')
                shown[n++] = '\\';
            shown[n++] = (char)c;
        }
    }
    if (len > 40) {
        memcpy(shown + n, "...", 3);
        n += 3;
    }
    shown[n++] = '"';
    shown[n] = '\0';
    snprintf(out, cap, "%s", shown);
}

/* One string literal of a body, as cJSON decodes it: its bytes, and
 * where its first NUL is among them (SIZE_MAX: none). */
struct literal {
    size_t bytes, first_nul;
};

static unsigned hex4(const char *p)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        const char c = p[i];
        v = v << 4 | (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
}

/* The next string literal of body from *at on, and *at past it. The
 * body has parsed, so every literal is whole and its escapes valid (a
 * high surrogate is followed by its low one): each \uXXXX is the UTF-8
 * bytes of its code point, or 4 for a surrogate pair. */
static struct literal next_literal(const char *body, size_t len, size_t *at)
{
    struct literal lit = {0, SIZE_MAX};
    size_t i = *at;
    while (i < len && body[i] != '"')
        i++;
    for (i++; i < len && body[i] != '"'; i++) {
        if (body[i] != '\\') {
            lit.bytes++;
            continue;
        }
        if (body[++i] != 'u') {
            lit.bytes++;
            continue;
        }
        const unsigned cp = hex4(body + i + 1);
        i += 4;
        if (cp == 0 && lit.first_nul == SIZE_MAX)
            lit.first_nul = lit.bytes;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            lit.bytes += 4;
            i += 6; /* its low surrogate */
        } else {
            lit.bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
        }
    }
    *at = i + 1;
    return lit;
}

struct text_walk {
    const char *body;
    size_t len, at; /* the body, and where its next literal starts */
    const char *const *texts;
};

/* The texts' names, for a refusal: "sentence, context.sentence" */
static void texts_named(const char *const *texts, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; texts && texts[i] && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? ", " : "",
                                 texts[i]);
}

/* Every string of node (at path) and below, in the body's order, its
 * literal read alongside: a string holding a NUL is given its length when
 * it is a text and refused otherwise; a key holding one is refused. */
static bool walk_texts(struct text_walk *w, cJSON *node,
                       const struct jpath *path, struct problem *pb)
{
    if (cJSON_IsString(node)) {
        const struct literal lit = next_literal(w->body, w->len, &w->at);
        if (lit.first_nul == SIZE_MAX)
            return true;
        // the literal read must be this string: its bytes to the NUL
        if (lit.first_nul != strlen(node->valuestring))
            return problem_set(pb, 500, path->pointer,
                               "%s could not be read back from the body",
                               path->name[0] ? path->name : "a string");
        node->valuedouble = (double)lit.bytes;
        if (jsonin_is_text(w->texts, path->pointer))
            return true;
        char shown[256], names[160];
        jsonin_show_text(node->valuestring, lit.bytes, shown, sizeof shown);
        texts_named(w->texts, names, sizeof names);
        return problem_set(pb, 422, path->pointer,
                           "%s (%s) holds a NUL character (\\u0000), which "
                           "only a text a tokenizer reads may hold (%s)",
                           path->name[0] ? path->name : "the body", shown,
                           names[0] ? names : "none in this request");
    }
    size_t index = 0;
    for (cJSON *c = node->child; c; c = c->next, index++) {
        struct jpath at;
        if (cJSON_IsObject(node)) {
            const struct literal key = next_literal(w->body, w->len, &w->at);
            jpath_key(&at, path, c->string);
            if (key.first_nul != SIZE_MAX) {
                char shown[256];
                // cJSON's key holds its bytes past the NUL too
                jsonin_show_text(c->string, key.bytes, shown, sizeof shown);
                return problem_set(pb, 422, at.pointer,
                                   "the key %s holds a NUL character "
                                   "(\\u0000); a key may hold none",
                                   shown);
            }
        } else {
            jpath_index(&at, path, index);
        }
        if (!walk_texts(w, c, &at, pb))
            return false;
    }
    return true;
}

/* The document of a body, by length: as jsonin_parse(), then nothing
 * but space after the first value, which JSON allows only one of. */
static cJSON *parse_document(const char *body, size_t len, struct problem *pb)
{
    const char *end;
    bool nomem;
    cJSON *root = jsonin_parse(body, len, &end, &nomem);
    if (nomem) {
        problem_set(pb, 503, "",
                    "out of memory reading the body (%zu bytes); try again "
                    "later",
                    len);
        pb->retry_after = 1;
        return NULL;
    }
    if (!root) {
        const size_t offset = end ? (size_t)(end - body) : 0;
        problem_set(pb, 400, "",
                    "the body is not valid JSON (error at byte %zu of %zu)",
                    offset, len);
        return NULL;
    }
    for (const char *p = end; p && p < body + len; p++)
        if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
            cJSON_Delete(root);
            problem_set(pb, 400, "",
                        "the body is not valid JSON (unexpected data at byte "
                        "%zu of %zu)",
                        (size_t)(p - body), len);
            return NULL;
        }
    return root;
}

static int by_name(const void *a, const void *b)
{
    const cJSON *const *x = a, *const *y = b;
    return strcmp((*x)->string, (*y)->string);
}

/* The first key that node (at path) or any object inside
 * it holds twice, refused as I-JSON (RFC 7493) refuses it: one reader
 * taking the first and another the last would read two requests. Each
 * object's keys are sorted, so the work is n log n in the body's keys;
 * the nesting is cJSON's, at most CJSON_NESTING_LIMIT deep. */
static bool keys_once(const cJSON *node, const struct jpath *path,
                      struct problem *pb)
{
    size_t n = 0;
    const cJSON *c;
    for (c = node->child; c; c = c->next)
        n++;
    if (cJSON_IsObject(node) && n > 1) {
        const cJSON **keys = malloc(n * sizeof *keys);
        if (!keys) {
            problem_set(pb, 503, "", "out of memory reading the body");
            pb->retry_after = 1;
            return false;
        }
        size_t i = 0;
        for (c = node->child; c; c = c->next)
            keys[i++] = c;
        qsort(keys, n, sizeof *keys, by_name);
        for (i = 1; i < n && strcmp(keys[i - 1]->string, keys[i]->string); i++)
            ;
        if (i < n) {
            struct jpath at;
            jpath_key(&at, path, keys[i]->string);
            free(keys);
            return problem_set(pb, 400, at.pointer,
                               "%s is given twice: a key may appear once in "
                               "an object",
                               at.name);
        }
        free(keys);
    }
    size_t index = 0;
    for (c = node->child; c; c = c->next, index++) {
        if (!c->child) /* nothing inside: no keys, and no path needed */
            continue;
        struct jpath at;
        if (cJSON_IsObject(node))
            jpath_key(&at, path, c->string);
        else
            jpath_index(&at, path, index);
        if (!keys_once(c, &at, pb))
            return false;
    }
    return true;
}

cJSON *jsonin_parse_body(const char *body, size_t len, const char *const *texts,
                         struct problem *pb)
{
    bool nul;
    cJSON *root =
        strings_ok(body, len, &nul, pb) ? parse_document(body, len, pb) : NULL;
    const struct jpath top = {"", ""};
    struct text_walk w = {body, len, 0, texts};
    // NULs first: a key cut at its NUL could seem given twice
    if (root && ((nul && !walk_texts(&w, root, &top, pb)) ||
                 !keys_once(root, &top, pb))) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

bool jsonin_flag(const cJSON *root, const char *name, bool fallback, bool *out,
                 struct problem *pb)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    *out = fallback;
    if (!v || cJSON_IsNull(v))
        return true;
    struct jpath at;
    jpath_root(&at, name);
    return jsonin_bool(v, &at, out, pb);
}
