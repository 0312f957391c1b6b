/*
 * jsonin.h - typed reads from a cJSON tree with problem reports that name
 * the field, the value and its JSON pointer.
 */
#ifndef ATTND_JSONIN_H
#define ATTND_JSONIN_H

#include "budget.h"
#include "problem.h"

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Parse len bytes of JSON text: the root, or NULL with *end where parsing
 * stopped and *nomem telling a failed allocation from bad text (a 503 is
 * not a 400). The caller deletes the root with cJSON_Delete().
 */
cJSON *jsonin_parse(const char *text, size_t len, const char **end,
                    bool *nomem);

/*
 * A request's body as one JSON document, nothing but space after the
 * value. NULL with pb set: 400 naming the byte, 422 naming the pointer,
 * or 503 out of memory. The caller frees the result with cJSON_Delete().
 *
 * texts: the JSON pointers of the strings a tokenizer reads (a route's
 * texts, e.g. "/prompt"), each "*" standing for any one key or index;
 * NULL-terminated, or NULL for none. A text may hold any character,
 * \u0000 included: read it with jsonin_text(), which gives its bytes and
 * length (cJSON's strings end at their first NUL). Every other string
 * holding a \u0000 (a key, a model's name, an enum value) is refused
 * with a 422 naming its pointer and its value, so that no reader of a
 * name sees it cut short.
 */
cJSON *jsonin_parse_body(const char *body, size_t len, const char *const *texts,
                         struct problem *pb);

/* Whether pointer is one of texts (as jsonin_parse_body() matches). */
bool jsonin_is_text(const char *const *texts, const char *pointer);

/*
 * A string value's bytes and their count, NULs included. A string that
 * holds a NUL carries its length in its node's valuedouble, which cJSON
 * leaves unused for strings: jsonin_parse_body() and jsonin_text_create()
 * write it, and only this reads it. cJSON_Duplicate() and cJSON's
 * printers copy a string to its first NUL: a text is copied with
 * jsonin_text_create().
 */
const char *jsonin_text(const cJSON *v, size_t *len);

/* A new string node of s[0..len), NULs included, for jsonin_text(); NULL
 * when out of memory. The caller owns it (cJSON_Delete(), or a parent). */
cJSON *jsonin_text_create(const char *s, size_t len);

/* s[0..len) for a message: at most 40 bytes, quoted, control characters,
 * quotes and backslashes written as JSON escapes (\u0000), "..." when it
 * is cut. out holds 256 bytes at least. */
void jsonin_show_text(const char *s, size_t len, char *out, size_t cap);

/* A JSON pointer (RFC 6901) under construction, and its dotted name for
 * messages: "/embeddings/3/5" and "embeddings[3][5]". */
struct jpath {
    char pointer[128];
    char name[128];
};

void jpath_root(struct jpath *p, const char *key);
void jpath_key(struct jpath *out, const struct jpath *parent, const char *key);
void jpath_index(struct jpath *out, const struct jpath *parent, size_t index);

/* "a string", "an array", ... for messages. */
const char *jsonin_kind(const cJSON *v);

/* The value's text for messages: numbers as given, strings quoted and
 * shortened, containers by kind. */
void jsonin_show(const cJSON *v, char *out, size_t len);

/* v as a message shows it: the fewest digits (15 to 17) that read back
 * as v, into out (len bytes, 32 enough). */
void jsonin_show_number(double v, char *out, size_t len);

bool jsonin_size(const cJSON *v, const struct jpath *at, size_t lo, size_t hi,
                 size_t *out, struct problem *pb);
bool jsonin_bool(const cJSON *v, const struct jpath *at, bool *out,
                 struct problem *pb);
/* root's member name as a boolean into *out: fallback when it is absent
 * or null. */
bool jsonin_flag(const cJSON *root, const char *name, bool fallback, bool *out,
                 struct problem *pb);
bool jsonin_float(const cJSON *v, const struct jpath *at, float *out,
                  struct problem *pb);
bool jsonin_u64(const cJSON *v, const struct jpath *at, uint64_t *out,
                struct problem *pb);
/* One of names[0..n); *out gets its index. */
bool jsonin_enum(const cJSON *v, const struct jpath *at,
                 const char *const *names, size_t n, int *out,
                 struct problem *pb);

/* The rank argument that accepts 2, 3 or 4 dimensions (a mask's). */
#define JSONIN_RANK_MASK (-1)

/*
 * A rectangular array of numbers of rank 1 to 4 (rank 0 accepts 2 or 3,
 * JSONIN_RANK_MASK 2 to 4) into a new float array (the caller frees it).
 * dims gets the shape;
 * ragged rows, non-numbers, empty arrays and values outside float32 are
 * refused with the exact position. max_elements caps the total; the array
 * is reserved on hold (NULL: not counted) before it is allocated.
 */
bool jsonin_tensor(const cJSON *v, const struct jpath *at, int rank,
                   size_t max_elements, struct budget_hold *hold, float **out,
                   size_t dims[4], int *rank_out, struct problem *pb);

/* The same for booleans (true, false, 1, 0) into uint8_t. */
bool jsonin_bool_tensor(const cJSON *v, const struct jpath *at, int rank,
                        size_t max_elements, struct budget_hold *hold,
                        uint8_t **out, size_t dims[4], int *rank_out,
                        struct problem *pb);

/* A mask of 2 to 4 dimensions whose leaves are booleans (as 1 and 0),
 * numbers, or the string "-inf"; a number at or below ATTN_MASK_NEVER
 * and "-inf" become -INFINITY. values: [count], owned by the caller. */
struct jsonin_mask {
    float *values;
    size_t count, dims[4];
    int rank;
    size_t first_bool;  /* flat index of the first JSON boolean; SIZE_MAX */
    size_t first_other; /* of the first leaf neither 0 nor 1; SIZE_MAX */
};
bool jsonin_mask_tensor(const cJSON *v, const struct jpath *at,
                        size_t max_elements, struct budget_hold *hold,
                        struct jsonin_mask *out, struct problem *pb);

/* The pointer of element flat of an array of shape dims under at. */
void jsonin_pointer_at(const struct jpath *at, const size_t *dims, int rank,
                       size_t flat, struct jpath *out);

#endif
