/*
 * model_load.c - a checkpoint folder into a struct model (model.h), the
 * same way for every family.
 *
 * The order: config.json, whose model_type picks the family's row
 * (family.h), which reads the rest of it; the family's tokenizer files;
 * then model.safetensors: its header is read and checked, every tensor the
 * family names is found (under the family's prefix, or an older spelling
 * it allows), its dtype and shape checked against the config, its values
 * checked finite; the rest of the network's namespace must be empty (a
 * tensor there means a network the config does not describe), and what
 * lies outside it (task heads, buffers) is ignored. Every failure frees
 * everything and reports one line.
 */
#include "model.h"
#include "fail.h"
#include "family.h"
#include "model_files.h"
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors data is little-endian, used in place");

#define MAX_JSON_BYTES ((size_t)1 << 20)

/* ---------------------------------------------------------- the tensors */

void model_tensor_put(struct model_tensor *t, struct xf_matrix *matrix,
                      const float **vector, size_t rows, size_t cols,
                      const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->rows = rows;
    t->cols = cols;
    t->what = what;
    t->matrix = matrix;
    t->vector = vector;
}

/* The width the core reads a safetensors dtype at. */
static xf_dtype dtype_of(st_dtype d)
{
    return d == ST_F16 ? XF_F16 : d == ST_BF16 ? XF_BF16 : XF_F32;
}

/* Whether element e of a 16-bit tensor is Inf or NaN: its exponent bits
 * all set. */
static bool half_nonfinite(const unsigned char *src, xf_dtype dtype, size_t e)
{
    uint16_t h;
    memcpy(&h, src + 2 * e, 2);
    const uint16_t exp = dtype == XF_F16 ? 0x7c00 : 0x7f80;
    return (h & exp) == exp;
}

/* The tensors found for wanted[i], in the file. */
struct found {
    const struct st_tensor *t;
    bool in_place;
};

struct loader {
    struct model *m;
    const char *name, *path; /* the model's name, the file's path */
    char *err;
    size_t err_len;
};

static bool fail_tensor(struct loader *ld, const char *tensor, const char *fmt,
                        ...) __attribute__((format(printf, 3, 4)));

static bool fail_tensor(struct loader *ld, const char *tensor, const char *fmt,
                        ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return model_fail(ld->err, ld->err_len, "model '%s': %s: tensor '%s': %s",
                      ld->name, ld->path, tensor, what);
}

static bool find_tensor(struct loader *ld, const struct st_header *h,
                        const char *prefix, const struct model_tensor *w,
                        struct found *f)
{
    char full[160], old[160];
    snprintf(full, sizeof full, "%s%s", prefix, w->name);
    f->t = st_find(h, full);
    const struct family *fam = ld->m->family;
    if (fam->legacy_name && fam->legacy_name(full, old, sizeof old)) {
        const struct st_tensor *t_old = st_find(h, old);
        if (f->t && t_old)
            return fail_tensor(ld, full,
                               "present under its legacy name "
                               "'%s' too",
                               old);
        if (!f->t)
            f->t = t_old;
    }
    if (!f->t)
        return fail_tensor(ld, full, "missing");
    const struct st_tensor *t = f->t;
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16)
        return fail_tensor(ld, t->name,
                           "dtype %s is not supported (F32, F16 or BF16)",
                           st_dtype_name(t->dtype));
    const size_t want_dims = w->cols ? 2 : 1;
    if (t->ndim != want_dims || t->shape[0] != w->rows ||
        (w->cols && t->shape[1] != w->cols)) {
        char got[160] = "[";
        for (size_t d = 0; d < t->ndim; d++) {
            const size_t at = strlen(got);
            snprintf(got + at, sizeof got - at, "%s%llu", d ? ", " : "",
                     (unsigned long long)t->shape[d]);
        }
        const size_t at = strlen(got);
        snprintf(got + at, sizeof got - at, "]");
        if (w->cols)
            return fail_tensor(ld, t->name,
                               "shape %s, but config.json gives [%zu, %zu] "
                               "(%s)",
                               got, w->rows, w->cols, w->what);
        return fail_tensor(ld, t->name,
                           "shape %s, but config.json gives [%zu] (%s)", got,
                           w->rows, w->what);
    }
    // a matrix is read at its own width; a vector, small, as float32
    const size_t width = t->dtype == ST_F32 ? 4 : 2;
    f->in_place = (t->dtype == ST_F32 || w->matrix) && t->offset % width == 0;
    return true;
}

/* A tensor of the file that no named tensor took: fine outside the
 * network's namespace, an error inside it. */
static bool check_unused(struct loader *ld, const struct st_header *h,
                         const char *prefix, const bool *used)
{
    const size_t pl = strlen(prefix);
    for (size_t i = 0; i < h->count; i++) {
        if (used[i])
            continue;
        const char *name = h->tensors[i].name;
        if (strncmp(name, prefix, pl) != 0)
            continue;
        if (ld->m->family->in_network(name + pl))
            return fail_tensor(ld, name,
                               "not part of a %s of %zu layers as "
                               "config.json describes",
                               ld->m->family->network, ld->m->xf.layers);
    }
    return true;
}

/* Point every named slot at its data, converting what must be; check
 * every value is finite. */
static bool take_tensors(struct loader *ld, const struct model_tensor *w,
                         const struct found *f, size_t n)
{
    struct model *m = ld->m;
    size_t converted = 0;
    for (size_t i = 0; i < n; i++)
        if (!f[i].in_place)
            converted += f[i].t->elements;
    if (converted) {
        m->converted = malloc(converted * sizeof(float));
        if (!m->converted)
            return model_fail(ld->err, ld->err_len,
                              "model '%s': %s: out of memory for %zu bytes of "
                              "converted tensors",
                              ld->name, ld->path, converted * sizeof(float));
        m->converted_bytes = converted * sizeof(float);
    }
    float *next = m->converted;
    const unsigned char *base = m->map;
    for (size_t i = 0; i < n; i++) {
        const struct st_tensor *t = f[i].t;
        const unsigned char *src = base + t->offset;
        struct xf_matrix held = {.data = src, .dtype = dtype_of(t->dtype)};
        if (!f[i].in_place) { /* widened to float32, or realigned */
            xf_widen(src, held.dtype, t->elements, next);
            held = (struct xf_matrix){.data = next, .dtype = XF_F32};
            next += t->elements;
        }
        m->weight_bytes += t->elements * xf_dtype_size(held.dtype);
        for (size_t e = 0; e < t->elements; e++) {
            const bool bad = held.dtype == XF_F32
                                 ? !isfinite(((const float *)held.data)[e])
                                 : half_nonfinite(held.data, held.dtype, e);
            if (!bad)
                continue;
            float v;
            xf_widen((const char *)held.data + e * xf_dtype_size(held.dtype),
                     held.dtype, 1, &v);
            return fail_tensor(ld, t->name, "element %zu is %s", e,
                               isnan(v) ? "NaN" : "Inf");
        }
        if (w[i].matrix)
            *w[i].matrix = held;
        else
            *w[i].vector = held.data;
    }
    return true;
}

static bool load_safetensors(struct loader *ld, const struct model_files *files)
{
    struct model *m = ld->m;
    char path[MODEL_PATH_BYTES];
    char why[400];
    if (!model_files_path(files, "model.safetensors", path))
        return false;
    ld->path = path;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return model_fail(ld->err, ld->err_len, "model '%s': %s: %s", ld->name,
                          path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return model_fail(ld->err, ld->err_len,
                          "model '%s': %s: not a regular file", ld->name, path);
    }
    if (st.st_size > 0) {
        void *map =
            mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            close(fd);
            return model_fail(ld->err, ld->err_len, "model '%s': %s: mmap: %s",
                              ld->name, path, strerror(errno));
        }
        m->map = map;
        m->map_bytes = (size_t)st.st_size;
    }
    close(fd); /* the mapping stays */

    struct st_header h;
    if (!st_header_parse(m->map, m->map_bytes, &h, why, sizeof why))
        return model_fail(ld->err, ld->err_len, "model '%s': %s: %s", ld->name,
                          path, why);
    const char *prefix = m->family->prefix(&h);
    const size_t n = m->family->tensor_count(&m->xf);
    struct model_tensor *w = calloc(n, sizeof *w);
    struct found *f = calloc(n, sizeof *f);
    bool *used = calloc(h.count ? h.count : 1, sizeof *used);
    bool ok = w && f && used;
    if (!ok)
        model_fail(ld->err, ld->err_len, "model '%s': out of memory", ld->name);
    if (ok) {
        m->family->name_tensors(m, w);
        for (size_t i = 0; i < n && ok; i++) {
            ok = find_tensor(ld, &h, prefix, &w[i], &f[i]);
            if (ok)
                used[f[i].t - h.tensors] = true;
        }
    }
    ok = ok && check_unused(ld, &h, prefix, used);
    ok = ok && take_tensors(ld, w, f, n);
    free(w);
    free(f);
    free(used);
    st_header_free(&h);
    return ok;
}

/* ------------------------------------------------------------ the model */

static bool name_ok(const char *name, char *err, size_t err_len)
{
    const size_t n = strlen(name);
    bool ok = n >= 1 && n <= MODEL_NAME_MAX;
    for (size_t i = 0; ok && i < n; i++) {
        const char c = name[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
             (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    }
    if (!ok)
        return model_fail(err, err_len,
                          "model name '%.80s': 1 to %d characters of "
                          "A-Z a-z 0-9 . _ -",
                          name, MODEL_NAME_MAX);
    return true;
}

void model_free(struct model *m)
{
    if (!m)
        return;
    if (m->map)
        munmap((void *)m->map, m->map_bytes);
    free(m->converted);
    free(m->layers);
    tok_free(&m->tokenizer);
    free(m);
}

/* config.json: its model_type picks the family, which reads the rest. */
static bool read_config(struct model *m, const struct model_files *files)
{
    char *text;
    size_t len;
    if (!model_files_read(files, "config.json", MAX_JSON_BYTES, false, &text,
                          &len))
        return false;
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    char why[400] = "";
    bool ok = doc != NULL;
    if (!ok)
        snprintf(why, sizeof why, "not valid JSON");
    else if (!cJSON_IsObject(doc))
        ok = model_fail(why, sizeof why, "not a JSON object");
    // a config.json without model_type is BERT's, as attnd first read it
    const cJSON *type =
        ok ? cJSON_GetObjectItemCaseSensitive(doc, "model_type") : NULL;
    const char *name = "bert";
    if (ok && type && !cJSON_IsNull(type)) {
        if (!cJSON_IsString(type))
            ok = model_fail(why, sizeof why, "model_type is not a string");
        else
            name = type->valuestring;
    }
    if (ok) {
        m->family = family_find(name, strlen(name));
        if (!m->family) {
            char known[200];
            family_names(known, sizeof known);
            ok = model_fail(why, sizeof why,
                            "model_type '%.64s' is not supported (%s)", name,
                            known);
        }
    }
    ok = ok && m->family->read_config(doc, &m->xf, why, sizeof why);
    cJSON_Delete(doc);
    if (!ok)
        return model_files_fail(files, "config.json", "%s", why);
    m->layers = calloc(m->xf.layers, sizeof *m->layers);
    if (!m->layers)
        return model_fail(files->err, files->err_len,
                          "model '%s': out of memory", m->name);
    m->xf.layer = m->layers;
    return true;
}

bool model_load(const char *name, const char *dir, struct model **out,
                char *err, size_t err_len)
{
    *out = NULL;
    if (!name_ok(name, err, err_len))
        return false;
    struct model *m = calloc(1, sizeof *m);
    if (!m)
        return model_fail(err, err_len, "model '%s': out of memory", name);
    snprintf(m->name, sizeof m->name, "%s", name);
    struct loader ld = {
        .m = m, .name = name, .path = "", .err = err, .err_len = err_len};
    const struct model_files files = {
        .name = name, .dir = dir, .err = err, .err_len = err_len};
    bool ok = read_config(m, &files) && m->family->open_tokenizer(m, &files) &&
              load_safetensors(&ld, &files);
    if (ok) {
        struct attn_error aerr = {0};
        if (xf_model_check(&m->xf, &aerr))
            ok = model_fail(err, err_len, "model '%s': %s/config.json: %s",
                            name, dir, aerr.message);
    }
    if (!ok) {
        model_free(m);
        return false;
    }
    *out = m;
    return true;
}
