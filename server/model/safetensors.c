/*
 * safetensors.c - the safetensors header reader (safetensors.h).
 *
 * The JSON is parsed by length with cJSON; each tensor's entry is checked
 * as it is read; then the ranges are sorted by their start and walked once,
 * which finds overlaps, holes and a data section longer than its tensors.
 */
#include "safetensors.h"
#include "fail.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[ST_N_DTYPES] = {
    [ST_F64] = {"F64", 8},         [ST_F32] = {"F32", 4},
    [ST_F16] = {"F16", 2},         [ST_BF16] = {"BF16", 2},
    [ST_I64] = {"I64", 8},         [ST_I32] = {"I32", 4},
    [ST_I16] = {"I16", 2},         [ST_I8] = {"I8", 1},
    [ST_U64] = {"U64", 8},         [ST_U32] = {"U32", 4},
    [ST_U16] = {"U16", 2},         [ST_U8] = {"U8", 1},
    [ST_BOOL] = {"BOOL", 1},       [ST_F8_E4M3] = {"F8_E4M3", 1},
    [ST_F8_E5M2] = {"F8_E5M2", 1},
};

/* JSON numbers are doubles: integers are exact up to 2^53. */
#define MAX_EXACT 9007199254740992.0

const char *st_dtype_name(st_dtype d)
{
    return d < ST_N_DTYPES ? dtypes[d].name : "?";
}

size_t st_dtype_size(st_dtype d)
{
    return d < ST_N_DTYPES ? dtypes[d].size : 0;
}

void st_header_free(struct st_header *h)
{
    if (!h)
        return;
    free(h->tensors);
    free(h->names);
    memset(h, 0, sizeof *h);
}

const struct st_tensor *st_find(const struct st_header *h, const char *name)
{
    for (size_t i = 0; i < h->count; i++)
        if (strcmp(h->tensors[i].name, name) == 0)
            return &h->tensors[i];
    return NULL;
}

/* A JSON number that is a whole number in [0, 2^53]. */
static bool whole(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v))
        return false;
    const double d = v->valuedouble;
    if (!(d >= 0.0 && d <= MAX_EXACT) || floor(d) != d)
        return false;
    *out = (uint64_t)d;
    return true;
}

/* One tensor's entry, checked on its own against a data section of
 * data_len bytes that starts at data_start. */
static bool read_entry(const cJSON *e, size_t data_start, size_t data_len,
                       struct st_tensor *t, char *err, size_t err_len)
{
    const char *name = e->string;
    if (!cJSON_IsObject(e))
        return model_fail(err, err_len,
                          "tensor '%s': its entry is not an "
                          "object",
                          name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dtype) || !cJSON_IsArray(shape) ||
        !cJSON_IsArray(offsets))
        return model_fail(err, err_len,
                          "tensor '%s': needs a string \"dtype\" and arrays "
                          "\"shape\" and \"data_offsets\"",
                          name);
    t->dtype = ST_N_DTYPES;
    for (int d = 0; d < ST_N_DTYPES; d++)
        if (strcmp(dtype->valuestring, dtypes[d].name) == 0)
            t->dtype = (st_dtype)d;
    if (t->dtype == ST_N_DTYPES)
        return model_fail(err, err_len, "tensor '%s': unknown dtype '%.32s'",
                          name, dtype->valuestring);
    const int ndim = cJSON_GetArraySize(shape);
    if (ndim > ST_MAX_DIMS)
        return model_fail(err, err_len,
                          "tensor '%s': %d dimensions, more than %d", name,
                          ndim, ST_MAX_DIMS);
    t->ndim = (size_t)ndim;
    t->elements = 1;
    for (int i = 0; i < ndim; i++) {
        if (!whole(cJSON_GetArrayItem(shape, i), &t->shape[i]))
            return model_fail(err, err_len,
                              "tensor '%s': shape[%d] is not a whole number "
                              "from 0 to 2^53",
                              name, i);
        if (__builtin_mul_overflow(t->elements, t->shape[i], &t->elements))
            return model_fail(err, err_len,
                              "tensor '%s': its shape's size overflows", name);
    }
    uint64_t begin, end, bytes;
    if (cJSON_GetArraySize(offsets) != 2 ||
        !whole(cJSON_GetArrayItem(offsets, 0), &begin) ||
        !whole(cJSON_GetArrayItem(offsets, 1), &end))
        return model_fail(err, err_len,
                          "tensor '%s': data_offsets must be two whole "
                          "numbers [begin, end]",
                          name);
    if (end < begin)
        return model_fail(err, err_len,
                          "tensor '%s': data_offsets [%llu, %llu] end "
                          "before they begin",
                          name, (unsigned long long)begin,
                          (unsigned long long)end);
    if (end > data_len)
        return model_fail(err, err_len,
                          "tensor '%s': data_offsets [%llu, %llu] reach past "
                          "the %zu bytes of data (is the file truncated?)",
                          name, (unsigned long long)begin,
                          (unsigned long long)end, data_len);
    if (__builtin_mul_overflow(t->elements, (uint64_t)dtypes[t->dtype].size,
                               &bytes) ||
        bytes != end - begin)
        return model_fail(
            err, err_len,
            "tensor '%s': data_offsets [%llu, %llu] hold %llu "
            "bytes, but %s of %llu elements needs %llu",
            name, (unsigned long long)begin, (unsigned long long)end,
            (unsigned long long)(end - begin), dtypes[t->dtype].name,
            (unsigned long long)t->elements,
            (unsigned long long)(t->elements * dtypes[t->dtype].size));
    t->offset = data_start + (size_t)begin;
    t->bytes = (size_t)bytes;
    return true;
}

static bool metadata_ok(const cJSON *meta, char *err, size_t err_len)
{
    if (!cJSON_IsObject(meta))
        return model_fail(err, err_len, "__metadata__ is not an object");
    const cJSON *v;
    cJSON_ArrayForEach(v, meta) if (!cJSON_IsString(v)) return model_fail(
        err, err_len, "__metadata__ '%s' is not a string", v->string);
    return true;
}

static int by_offset(const void *a, const void *b)
{
    const struct st_tensor *x = *(const struct st_tensor *const *)a;
    const struct st_tensor *y = *(const struct st_tensor *const *)b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const struct st_tensor *const *)a)->name,
                  (*(const struct st_tensor *const *)b)->name);
}

/* Names unique; ranges disjoint and covering the data exactly. */
static bool layout_ok(const struct st_header *h, size_t data_start,
                      size_t data_len, char *err, size_t err_len)
{
    if (h->count == 0)
        return data_len == 0
                   ? true
                   : model_fail(err, err_len, "%zu bytes of data but no tensor",
                                data_len);
    const struct st_tensor **sorted = malloc(h->count * sizeof *sorted);
    if (!sorted)
        return model_fail(err, err_len, "out of memory");
    for (size_t i = 0; i < h->count; i++)
        sorted[i] = &h->tensors[i];
    bool ok = true;
    qsort(sorted, h->count, sizeof *sorted, by_name);
    for (size_t i = 1; i < h->count && ok; i++)
        if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0)
            ok = model_fail(err, err_len,
                            "tensor '%s' appears twice in the header",
                            sorted[i]->name);
    qsort(sorted, h->count, sizeof *sorted, by_offset);
    // overlaps first (a moved range leaves a hole too, but the overlap is
    // what went wrong), then holes
    size_t end = data_start; /* the furthest end so far */
    const struct st_tensor *owner = NULL;
    for (size_t i = 0; i < h->count && ok; i++) {
        const struct st_tensor *t = sorted[i];
        if (t->offset < end && t->bytes > 0)
            ok = model_fail(err, err_len,
                            "tensor '%s': data_offsets [%zu, %zu] overlap "
                            "tensor '%s'",
                            t->name, t->offset - data_start,
                            t->offset - data_start + t->bytes, owner->name);
        if (t->offset + t->bytes > end) {
            end = t->offset + t->bytes;
            owner = t;
        }
    }
    size_t at = data_start; /* every byte before this belongs to a tensor */
    for (size_t i = 0; i < h->count && ok; i++) {
        const struct st_tensor *t = sorted[i];
        if (t->offset > at)
            ok = model_fail(err, err_len,
                            "bytes %zu to %zu of the data belong to no "
                            "tensor (before tensor '%s')",
                            at - data_start, t->offset - data_start, t->name);
        if (t->offset + t->bytes > at)
            at = t->offset + t->bytes;
    }
    if (ok && at != data_start + data_len)
        ok = model_fail(err, err_len,
                        "the last %zu bytes of the data belong to no tensor",
                        data_start + data_len - at);
    free(sorted);
    return ok;
}

bool st_header_parse(const unsigned char *bytes, size_t len,
                     struct st_header *out, char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    if (len < 8)
        return model_fail(err, err_len,
                          "%zu bytes, too short for the 8-byte header length",
                          len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | bytes[i];
    if (n > len - 8)
        return model_fail(err, err_len,
                          "the header length (%llu) is larger than the %zu "
                          "bytes that follow it (is the file truncated?)",
                          (unsigned long long)n, len - 8);
    if (n > ST_MAX_HEADER)
        return model_fail(err, err_len,
                          "the header length (%llu) is over the %zu allowed",
                          (unsigned long long)n, ST_MAX_HEADER);
    const char *text = (const char *)bytes + 8;
    if (n < 2 || text[0] != '{')
        return model_fail(err, err_len,
                          "the header does not start with a JSON object");
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(text, (size_t)n, &end, false);
    if (!doc || !cJSON_IsObject(doc)) {
        // on failure cJSON leaves end where it stopped
        const size_t where =
            end >= text && end <= text + n ? (size_t)(end - text) : 0;
        cJSON_Delete(doc);
        return model_fail(err, err_len,
                          "the header is not valid JSON (near byte %zu of "
                          "it)",
                          where);
    }
    for (const char *p = end; p < text + n; p++)
        if (*p != ' ') {
            cJSON_Delete(doc);
            return model_fail(err, err_len,
                              "the header has bytes other than spaces after "
                              "its JSON object (byte %zu of it)",
                              (size_t)(p - text));
        }
    const size_t data_start = 8 + (size_t)n, data_len = len - data_start;

    // count, and lay the names out in one block
    size_t count = 0, name_bytes = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, doc)
    {
        if (strcmp(e->string, "__metadata__") == 0)
            continue;
        count++;
        name_bytes += strlen(e->string) + 1;
    }
    out->tensors = calloc(count ? count : 1, sizeof *out->tensors);
    out->names = malloc(name_bytes ? name_bytes : 1);
    if (!out->tensors || !out->names) {
        cJSON_Delete(doc);
        st_header_free(out);
        return model_fail(err, err_len, "out of memory for the header");
    }
    bool ok = true;
    char *name_at = out->names;
    cJSON_ArrayForEach(e, doc)
    {
        if (strcmp(e->string, "__metadata__") == 0) {
            ok = metadata_ok(e, err, err_len);
        } else {
            struct st_tensor *t = &out->tensors[out->count++];
            const size_t nl = strlen(e->string) + 1;
            memcpy(name_at, e->string, nl);
            t->name = name_at;
            name_at += nl;
            ok = read_entry(e, data_start, data_len, t, err, err_len);
        }
        if (!ok)
            break;
    }
    cJSON_Delete(doc);
    if (ok)
        ok = layout_ok(out, data_start, data_len, err, err_len);
    if (!ok)
        st_header_free(out);
    return ok;
}
