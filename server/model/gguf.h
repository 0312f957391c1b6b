/*
 * gguf.h - the container of llama.cpp's GGUF files (versions 2 and 3),
 * read in place from bytes the caller holds (mapped or read whole):
 *
 *   "GGUF"  u32 version  u64 n_tensors  u64 n_kv
 *   n_kv x      { string key, u32 value type, value }
 *   n_tensors x { string name, u32 n_dims, u64 dims[n_dims], u32 ggml type,
 *                 u64 offset (from the data section) }
 *   padding to general.alignment (32 when absent), then the data section.
 *
 * All integers are little-endian; a string is a u64 byte count and that
 * many bytes (no NUL). dims[0] is the fastest-varying: a matrix of n_rows
 * rows of n_cols values has dims {n_cols, n_rows}.
 *
 * Everything is checked before it is trusted, and every count against the
 * bytes left before anything is allocated: the magic and version, each
 * key (UTF-8, at most GGUF_MAX_KEY bytes, not twice), each value type and
 * value (strings and arrays within the file, bools 0 or 1, arrays not
 * nested), general.alignment (a UINT32 power of two up to
 * GGUF_MAX_ALIGNMENT), each tensor's name (at most GGUF_MAX_NAME bytes,
 * not twice), dimensions (1 to 4, each at least 1, their product without
 * overflow, a row a whole number of blocks), ggml type and offset (a
 * multiple of the alignment), and the tensors' bytes against the file and
 * against each other (no overlap).
 */
#ifndef ATTND_GGUF_H
#define ATTND_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NAME 64 /* bytes of a tensor's name, as the format says */
#define GGUF_MAX_KEY 256 /* bytes of a metadata key */
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_ALIGNMENT ((size_t)1 << 16)

/* The value types, numbered as in the file. */
typedef enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_type;

/* The ggml tensor types attnd reads, numbered as in ggml.h. */
typedef enum gguf_ggml_type {
    GGUF_GGML_F32 = 0,
    GGUF_GGML_F16 = 1,
    GGUF_GGML_Q4_0 = 2,
    GGUF_GGML_Q4_1 = 3,
    GGUF_GGML_Q5_0 = 6,
    GGUF_GGML_Q5_1 = 7,
    GGUF_GGML_Q8_0 = 8,
    GGUF_GGML_Q8_1 = 9,
    GGUF_GGML_Q2_K = 10,
    GGUF_GGML_Q3_K = 11,
    GGUF_GGML_Q4_K = 12,
    GGUF_GGML_Q5_K = 13,
    GGUF_GGML_Q6_K = 14,
    GGUF_GGML_Q8_K = 15,
    GGUF_GGML_I8 = 24,
    GGUF_GGML_I16 = 25,
    GGUF_GGML_I32 = 26,
    GGUF_GGML_I64 = 27,
    GGUF_GGML_F64 = 28,
    GGUF_GGML_BF16 = 30,
    GGUF_GGML_TYPE_LIMIT = 31 /* every type number is below this */
} gguf_ggml_type;

/* One metadata key-value; its bytes stay in the file. */
struct gguf_kv {
    const char *key; /* NUL-terminated, inside struct gguf_file's names */
    gguf_type type;
    size_t offset;        /* of the value (after its type) in the file */
    const uint8_t *value; /* its raw bytes in place; for a STRING its
                             length prefix, for an ARRAY its first element */
    /* for a STRING: its bytes in place (not NUL-terminated) */
    const char *str;
    uint64_t str_len;
    /* for an ARRAY: its element type and count; a STRING array's elements
     * are listed from struct gguf_file's strings[first_string] */
    gguf_type elem_type;
    uint64_t count;
    size_t first_string;
};

struct gguf_tensor {
    const char *name; /* NUL-terminated, inside struct gguf_file's names */
    uint32_t n_dims;
    uint64_t dims[GGUF_MAX_DIMS]; /* [n_dims], fastest first; 1 past it */
    uint64_t elements;            /* the product of dims */
    gguf_ggml_type type;
    uint64_t offset;     /* from the start of the data section */
    size_t bytes;        /* type's bytes per block x elements / block */
    const uint8_t *data; /* in place: the file's data section + offset */
    size_t info_offset;  /* of its tensor info in the file */
};

/* On success the caller owns it (not the bytes it points into); release it
 * with gguf_free(). */
struct gguf_file {
    uint32_t version;
    uint64_t n_tensors;
    uint64_t n_kv;
    size_t alignment;
    size_t data_offset;  /* of the data section, from the start of the file */
    struct gguf_kv *kvs; /* [n_kv] in file order */
    struct gguf_tensor *tensors; /* [n_tensors] in file order */
    char *names;                 /* every key and name, back to back */
    const uint8_t **strings;     /* every string array element's length
                                    prefix, in place */
    size_t n_strings;
};

/*
 * Read and check a GGUF file held in data[0..len); nothing past len is
 * read. On failure, returns false with one line in err naming the byte
 * offset (or the tensors) at fault and what is wrong, and leaves *out
 * empty. The result points into data, which must outlive it.
 */
bool gguf_parse(const uint8_t *data, size_t len, struct gguf_file *out,
                char *err, size_t err_len);
void gguf_free(struct gguf_file *g);

/* The key-value or tensor called so, or NULL. */
const struct gguf_kv *gguf_find(const struct gguf_file *g, const char *key);
const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *g,
                                           const char *name);

/*
 * Typed getters: true with the value in *out, or false with one line in
 * err naming the key and what was found ("key 'x' is a FLOAT32, not a
 * UINT32", "no key 'x'"). A STRING is given in place with its length.
 */
bool gguf_get_u32(const struct gguf_file *g, const char *key, uint32_t *out,
                  char *err, size_t err_len);
bool gguf_get_i32(const struct gguf_file *g, const char *key, int32_t *out,
                  char *err, size_t err_len);
bool gguf_get_u64(const struct gguf_file *g, const char *key, uint64_t *out,
                  char *err, size_t err_len);
bool gguf_get_f32(const struct gguf_file *g, const char *key, float *out,
                  char *err, size_t err_len);
bool gguf_get_bool(const struct gguf_file *g, const char *key, bool *out,
                   char *err, size_t err_len);
bool gguf_get_string(const struct gguf_file *g, const char *key,
                     const char **out, size_t *out_len, char *err,
                     size_t err_len);
/* An ARRAY's element type, count and raw little-endian elements in place
 * (for a STRING array, the first element's length prefix: read its
 * strings with gguf_array_string()). */
bool gguf_get_array(const struct gguf_file *g, const char *key,
                    gguf_type *elem_type, uint64_t *count,
                    const uint8_t **elems, char *err, size_t err_len);

/* The i-th string of a STRING array kv (i < kv->count), in place. */
const char *gguf_array_string(const struct gguf_file *g,
                              const struct gguf_kv *kv, uint64_t i,
                              size_t *len);

/* The format's name of a value type ("UINT32"), or "?". */
const char *gguf_type_name(gguf_type t);
/* A ggml type's name ("Q4_K"), values per block and bytes per block; 0 for
 * a type attnd does not read. */
const char *gguf_ggml_type_name(uint32_t t);
size_t gguf_ggml_block_size(uint32_t t);
size_t gguf_ggml_type_size(uint32_t t);

#endif
