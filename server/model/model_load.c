/*
 * model_load.c - a checkpoint folder into a struct model (model.h).
 *
 * The order: config.json (sizes, activation), tokenizer_config.json,
 * vocab.txt, then model.safetensors: its header is read and checked,
 * every tensor the encoder needs is found under its modeling_bert.py name
 * (with or without the "bert." prefix, LayerNorm parameters also as the
 * legacy gamma/beta), its dtype and shape checked against the config, its
 * values checked finite; the rest of the file's encoder namespace must be
 * empty (a tensor there means a network the config does not describe),
 * and what lies outside it (cls.*, pooler.*, task heads) is ignored.
 * Every failure frees everything and reports one line.
 */
#include "model.h"
#include "bert_config.h"
#include "fail.h"
#include "safetensors.h"
#include "vocab.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors data is little-endian, used in place");

#define MAX_JSON_BYTES ((size_t)1 << 20)
#define MAX_VOCAB_BYTES ((size_t)64 << 20)
#define PATH_BYTES 4096

/* ------------------------------------------------------------ the files */

static bool join(char *path, const char *dir, const char *file, char *err,
                 size_t err_len)
{
    const int n = snprintf(path, PATH_BYTES, "%s/%s", dir, file);
    if (n < 0 || n >= PATH_BYTES)
        return model_fail(err, err_len,
                          "%s: the path is too long (over %d bytes) in the "
                          "folder '%.80s...'",
                          file, PATH_BYTES - 1, dir);
    return true;
}

/* The whole of a small file; *text is NULL and true returned when it does
 * not exist and is optional. */
static bool read_small(const char *path, size_t cap, bool optional, char **text,
                       size_t *len, char *err, size_t err_len)
{
    *text = NULL;
    *len = 0;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (optional && errno == ENOENT)
            return true;
        return model_fail(err, err_len, "%s: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return model_fail(err, err_len, "%s: not a regular file", path);
    }
    if ((uintmax_t)st.st_size > cap) {
        close(fd);
        return model_fail(err, err_len,
                          "%s: %jd bytes, more than the %zu "
                          "allowed",
                          path, (intmax_t)st.st_size, cap);
    }
    const size_t want = (size_t)st.st_size;
    char *buf = malloc(want ? want : 1);
    size_t got = 0;
    while (buf && got < want) {
        const ssize_t r = read(fd, buf + got, want - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf || got != want) {
        free(buf);
        return model_fail(err, err_len, "%s: %s", path,
                          buf ? "could not be read whole" : "out of memory");
    }
    *text = buf;
    *len = want;
    return true;
}

/* --------------------------------------------------------- the tensors */

/* One tensor the encoder needs: its plain name (no prefix), its shape,
 * and where its float32 data goes. */
struct wanted {
    char name[96];
    size_t rows, cols; /* cols 0: a vector of rows */
    const char *what;  /* the shape in the config's words */
    const float **slot;
};

static size_t wanted_list(struct model *m, struct wanted *w)
{
    struct bert_model *b = &m->bert;
    const size_t H = b->hidden, J = b->intermediate;
    size_t n = 0;
#define WANT(slot_, rows_, cols_, what_, ...)                                  \
    do {                                                                       \
        snprintf(w[n].name, sizeof w[n].name, __VA_ARGS__);                    \
        w[n].rows = rows_;                                                     \
        w[n].cols = cols_;                                                     \
        w[n].what = what_;                                                     \
        w[n].slot = slot_;                                                     \
        n++;                                                                   \
    } while (0)
    WANT(&b->word_emb, b->vocab_size, H, "vocab_size x hidden_size",
         "embeddings.word_embeddings.weight");
    WANT(&b->pos_emb, b->max_positions, H,
         "max_position_embeddings x hidden_size",
         "embeddings.position_embeddings.weight");
    WANT(&b->type_emb, b->type_vocab_size, H, "type_vocab_size x hidden_size",
         "embeddings.token_type_embeddings.weight");
    WANT(&b->emb_ln_w, H, 0, "hidden_size", "embeddings.LayerNorm.weight");
    WANT(&b->emb_ln_b, H, 0, "hidden_size", "embeddings.LayerNorm.bias");
    for (size_t l = 0; l < b->layers; l++) {
        struct bert_layer *y = &m->layers[l];
        const char *sq = "hidden_size x hidden_size";
#define L(sub) "encoder.layer.%zu." sub, l
        WANT(&y->q_w, H, H, sq, L("attention.self.query.weight"));
        WANT(&y->q_b, H, 0, "hidden_size", L("attention.self.query.bias"));
        WANT(&y->k_w, H, H, sq, L("attention.self.key.weight"));
        WANT(&y->k_b, H, 0, "hidden_size", L("attention.self.key.bias"));
        WANT(&y->v_w, H, H, sq, L("attention.self.value.weight"));
        WANT(&y->v_b, H, 0, "hidden_size", L("attention.self.value.bias"));
        WANT(&y->ao_w, H, H, sq, L("attention.output.dense.weight"));
        WANT(&y->ao_b, H, 0, "hidden_size", L("attention.output.dense.bias"));
        WANT(&y->ln1_w, H, 0, "hidden_size",
             L("attention.output.LayerNorm.weight"));
        WANT(&y->ln1_b, H, 0, "hidden_size",
             L("attention.output.LayerNorm.bias"));
        WANT(&y->in_w, J, H, "intermediate_size x hidden_size",
             L("intermediate.dense.weight"));
        WANT(&y->in_b, J, 0, "intermediate_size", L("intermediate.dense.bias"));
        WANT(&y->out_w, H, J, "hidden_size x intermediate_size",
             L("output.dense.weight"));
        WANT(&y->out_b, H, 0, "hidden_size", L("output.dense.bias"));
        WANT(&y->ln2_w, H, 0, "hidden_size", L("output.LayerNorm.weight"));
        WANT(&y->ln2_b, H, 0, "hidden_size", L("output.LayerNorm.bias"));
#undef L
    }
#undef WANT
    return n;
}

/* name with LayerNorm.weight/bias renamed to gamma/beta, or false when it
 * has no LayerNorm parameter. */
static bool legacy_name(const char *name, char *out, size_t out_len)
{
    const char *ln = strstr(name, "LayerNorm.");
    if (!ln)
        return false;
    const char *tail = ln + strlen("LayerNorm.");
    const char *old = strcmp(tail, "weight") == 0 ? "gamma"
                      : strcmp(tail, "bias") == 0 ? "beta"
                                                  : NULL;
    if (!old)
        return false;
    snprintf(out, out_len, "%.*s%s", (int)(tail - name), name, old);
    return true;
}

static float half_to_float(uint16_t h)
{
    const unsigned exp = h >> 10 & 0x1f, mant = h & 0x3ff;
    float v;
    if (exp == 0)
        v = ldexpf((float)mant, -24); /* zero or subnormal */
    else if (exp == 31)
        v = mant ? NAN : INFINITY;
    else
        v = ldexpf((float)(mant | 0x400), (int)exp - 25);
    return h >> 15 ? -v : v;
}

static float bf16_to_float(uint16_t h)
{
    const uint32_t bits = (uint32_t)h << 16;
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
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
                        const char *prefix, const struct wanted *w,
                        struct found *f)
{
    char full[160], old[160];
    snprintf(full, sizeof full, "%s%s", prefix, w->name);
    f->t = st_find(h, full);
    if (legacy_name(full, old, sizeof old)) {
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
    f->in_place = t->dtype == ST_F32 && t->offset % sizeof(float) == 0;
    return true;
}

/* A tensor of the file that no wanted entry took: fine outside the
 * encoder's namespace and for the two buffers, an error inside it. */
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
        const char *rest = name + pl;
        if (strcmp(rest, "embeddings.position_ids") == 0 ||
            strcmp(rest, "embeddings.token_type_ids") == 0)
            continue;
        if (strncmp(rest, "embeddings.", 11) == 0 ||
            strncmp(rest, "encoder.", 8) == 0)
            return fail_tensor(ld, name,
                               "not part of a BERT encoder of %zu layers as "
                               "config.json describes",
                               ld->m->bert.layers);
    }
    return true;
}

/* Point every wanted slot at its data, converting what must be; check
 * every value is finite. */
static bool take_tensors(struct loader *ld, const struct wanted *w,
                         const struct found *f, size_t n)
{
    struct model *m = ld->m;
    size_t converted = 0;
    for (size_t i = 0; i < n; i++) {
        m->weight_bytes += f[i].t->elements * sizeof(float);
        if (!f[i].in_place)
            converted += f[i].t->elements;
    }
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
        const float *data;
        if (f[i].in_place) {
            data = (const float *)(const void *)src;
        } else {
            for (size_t e = 0; e < t->elements; e++) {
                uint16_t h;
                if (t->dtype == ST_F32) {
                    memcpy(&next[e], src + 4 * e, 4);
                    continue;
                }
                memcpy(&h, src + 2 * e, 2);
                next[e] =
                    t->dtype == ST_F16 ? half_to_float(h) : bf16_to_float(h);
            }
            data = next;
            next += t->elements;
        }
        for (size_t e = 0; e < t->elements; e++)
            if (!isfinite(data[e]))
                return fail_tensor(ld, t->name, "element %zu is %s", e,
                                   isnan(data[e]) ? "NaN" : "Inf");
        *w[i].slot = data;
    }
    return true;
}

static bool load_safetensors(struct loader *ld, const char *dir)
{
    struct model *m = ld->m;
    char path[PATH_BYTES];
    char why[400];
    if (!join(path, dir, "model.safetensors", why, sizeof why))
        return model_fail(ld->err, ld->err_len, "model '%s': %s", ld->name,
                          why);
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
    const char *prefix =
        st_find(&h, "bert.embeddings.word_embeddings.weight") ? "bert." : "";
    const size_t n = 5 + 16 * m->bert.layers;
    struct wanted *w = calloc(n, sizeof *w);
    struct found *f = calloc(n, sizeof *f);
    bool *used = calloc(h.count ? h.count : 1, sizeof *used);
    bool ok = w && f && used;
    if (!ok)
        model_fail(ld->err, ld->err_len, "model '%s': out of memory", ld->name);
    if (ok) {
        const size_t listed = wanted_list(m, w);
        assert(listed == n);
        (void)listed;
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
    bert_vocab_free(m->vocab);
    free(m);
}

static bool load_texts(struct loader *ld, const char *dir)
{
    struct model *m = ld->m;
    char path[PATH_BYTES], why[400];
    char *text;
    size_t len;
    if (!join(path, dir, "config.json", why, sizeof why) ||
        !read_small(path, MAX_JSON_BYTES, false, &text, &len, why, sizeof why))
        return model_fail(ld->err, ld->err_len, "model '%s': %s", ld->name,
                          why);
    struct bert_config c;
    bool ok = bert_config_parse(text, len, &c, why, sizeof why);
    free(text);
    if (!ok)
        return model_fail(ld->err, ld->err_len, "model '%s': %s: %s", ld->name,
                          path, why);
    m->bert = (struct bert_model){.layers = c.layers,
                                  .heads = c.heads,
                                  .hidden = c.hidden,
                                  .intermediate = c.intermediate,
                                  .vocab_size = c.vocab_size,
                                  .max_positions = c.max_positions,
                                  .type_vocab_size = c.type_vocab_size,
                                  .layer_norm_eps = c.layer_norm_eps,
                                  .act = c.act};
    m->layers = calloc(c.layers, sizeof *m->layers);
    if (!m->layers)
        return model_fail(ld->err, ld->err_len, "model '%s': out of memory",
                          ld->name);
    m->bert.layer = m->layers;

    if (!join(path, dir, "tokenizer_config.json", why, sizeof why) ||
        !read_small(path, MAX_JSON_BYTES, true, &text, &len, why, sizeof why))
        return model_fail(ld->err, ld->err_len, "model '%s': %s", ld->name,
                          why);
    m->do_lower_case = true;
    if (text) {
        ok = bert_tokenizer_config_parse(text, len, &m->do_lower_case, why,
                                         sizeof why);
        free(text);
        if (!ok)
            return model_fail(ld->err, ld->err_len, "model '%s': %s: %s",
                              ld->name, path, why);
    }

    if (!join(path, dir, "vocab.txt", why, sizeof why) ||
        !read_small(path, MAX_VOCAB_BYTES, false, &text, &len, why, sizeof why))
        return model_fail(ld->err, ld->err_len, "model '%s': %s", ld->name,
                          why);
    ok = vocab_parse(text, len, c.vocab_size, &m->vocab, why, sizeof why);
    free(text);
    if (!ok)
        return model_fail(ld->err, ld->err_len, "model '%s': %s: %s", ld->name,
                          path, why);
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
    bool ok = load_texts(&ld, dir) && load_safetensors(&ld, dir);
    if (ok) {
        struct attn_error aerr = {0};
        if (bert_model_check(&m->bert, &aerr))
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
