/*
 * request_fields.h - every field of an /attention request in one table:
 * where it is read, its range and default, how a GET parameter of the same
 * name becomes its JSON value, how the config echo shows it, and the JSON
 * pointer that problems name. The JSON reader, the GET reader, the echo,
 * the pointer map, GET /config and the OpenAPI test all read this table.
 */
#ifndef ATTND_REQUEST_FIELDS_H
#define ATTND_REQUEST_FIELDS_H

#include "buf.h"
#include "request.h"

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* The width of text embeddings when the request gives no d_model. */
#define REQUEST_TEXT_D_MODEL 64

/* How a field is read. Scalars are read by the table's own reader into
 * struct request at `offset`; the others by their step. */
enum request_field_kind {
    FIELD_SIZE,   /* integer in [min, max]; size_t */
    FIELD_BOOL,   /* true or false; bool */
    FIELD_FLOAT,  /* finite float32; float */
    FIELD_SEED,   /* unsigned 64-bit, a number or a string of digits */
    FIELD_ENUM,   /* one of value_name(0), value_name(1), ...; int */
    FIELD_RETURN, /* array of names (request.c) */
    FIELD_INPUT,  /* sentence, tokens or embeddings (request_input.c) */
    FIELD_CONTEXT,
    FIELD_MASK, /* request_mask.c */
    FIELD_KEY_PADDING,
    FIELD_PARAMS, /* request_params.c */
    FIELD_PNG,   /* a query parameter that shapes the image (request_query.c) */
    FIELD_MODEL, /* model, sentence_b (request_model.c) */
    FIELD_LAYER, /* "all" or a layer number (request_model.c) */
    FIELD_INTERVENE /* ablate, dla_target, dla_position
                       (request_intervene.c) */
};

/* Whether a field may be sent with "model" (a loaded checkpoint), which
 * fixes every option of the random-weights mode. */
enum request_field_models {
    MODELS_REFUSED = 0, /* an option the model fixes: 422 with "model" */
    MODELS_ALLOWED,     /* with or without a model */
    MODELS_REQUIRED     /* only with a model */
};

/* Where a field may be sent. */
enum {
    FIELD_IN_BODY = 1u << 0, /* a key of the JSON body */
    FIELD_IN_QUERY = 1u << 1 /* a GET query parameter */
};

/* The upper bound of a FIELD_SIZE: a number, or one of the server's limits. */
enum request_field_limit { LIMIT_FIXED, LIMIT_HEADS, LIMIT_DIM };

struct request_field {
    const char *name;    /* JSON key and query parameter */
    const char *pointer; /* "/" name: what problems point at */
    enum request_field_kind kind;
    unsigned where;                 /* FIELD_IN_* */
    const char *type;               /* the JSON Schema type OpenAPI documents */
    size_t offset;                  /* scalars: the field of struct request */
    size_t min, max;                /* FIELD_SIZE, FIELD_PNG numbers */
    enum request_field_limit limit; /* FIELD_SIZE: what max is */
    const char *(*value_name)(
        int);                 /* FIELD_ENUM: the names, NULL past the last */
    const char *default_json; /* the documented default as JSON; NULL when
                                 it follows from other fields */
    enum request_field_models models; /* with "model" */
    /* The config echo: NULL when the field is not echoed, echo_scalar for
     * the resolved value at offset, or a writer of its own. */
    bool (*echo)(struct buf *out, const struct request *req,
                 const struct request_field *f);
};

extern const struct request_field request_fields[];
extern const size_t request_field_count;

/* The names of with_model values, for /config: "refused", "allowed",
 * "required". */
const char *request_field_models_name(enum request_field_models m);

/* The names "return" takes: an array of the core (want) or one the server
 * adds (extra), in the order the echo lists them. */
struct request_return {
    const char *name;
    unsigned want;       /* enum attn_want bit, or 0 */
    unsigned extra;      /* enum request_extra bit, or 0 */
    unsigned model_want; /* enum xf_want bit with a model, or 0 (refused) */
};
extern const struct request_return request_returns[];
extern const size_t request_return_count;

struct jpath;
/* Read "return" (v, an array of names of request_returns) and hand each
 * row to take(), with its path; example ends the sentence "expected an
 * array of names such as". false, with pb filled, on the first refusal. */
bool request_returns_read(const cJSON *v, const char *example,
                          bool (*take)(struct request *req,
                                       const struct request_return *r,
                                       const struct jpath *at,
                                       struct problem *pb),
                          struct request *req, struct problem *pb);

/* The row named name, or NULL. */
const struct request_field *request_field_find(const char *name);

/* Its index, for struct request's `given` bits. */
size_t request_field_index(const struct request_field *f);

/* Whether the client sent f (in the body or the URL). */
bool request_field_given(const struct request *req,
                         const struct request_field *f);

/* Rows the table may have: struct request marks the given ones in 64
 * bits. */
enum { REQUEST_FIELDS_MOST = 64 };

/* The names a mask may be given by ("none", "causal"), NULL past them. */
const char *request_mask_name(int kind);

/* The names of mask_type and mask_convention, by their enums in
 * request.h; NULL past them. */
const char *request_mask_type_name(int type);
const char *request_mask_convention_name(int convention);

/* The names of an enum row (8 at most), for jsonin_enum(); their count. */
size_t request_field_enum_names(const struct request_field *f,
                                const char *names[8]);

/* The upper bound of f under lim. */
size_t request_field_max(const struct request_field *f,
                         const struct request_limits *lim);

/* Read every scalar field the JSON object root has into req, marking it
 * given; the other kinds are left to their steps. */
bool request_fields_read(struct request *req, const cJSON *root,
                         const struct request_limits *lim, struct problem *pb);

/* The JSON pointers of /attention's texts, the strings a tokenizer
 * reads, for jsonin_parse_body(): only these may hold a NUL (\u0000 in
 * a body, %00 in a URL). NULL-terminated. */
extern const char *const request_texts[];

/* "true" or "1", "false" or "0": a boolean in a URL. */
bool request_bool_from_text(const char *text, bool *out);

/* Whether f's value is a text (or, for "context", holds one). */
bool request_field_is_text(const struct request_field *f);

/* A query parameter's text, value[0..len), as the JSON value its field
 * takes (the caller deletes it): a text with every byte, the others read
 * to their first NUL (request_parse_query() refuses a NUL in them first).
 * NULL with pb set when the text cannot be that value, or with pb left
 * alone when memory ran out. */
cJSON *request_field_from_query(const struct request_field *f,
                                const char *value, size_t len,
                                struct problem *pb);

/* The "config" object of an answer, as req's kind has it: the resolved
 * shape (a model's: its wordpieces' count), then every field the kind
 * echoes, in table order. */
bool request_fields_echo(struct buf *out, const struct request *req);

/* GET /config: every field with its type, range under lim, default, the
 * names an enum takes and where it may be sent; the caller frees it. */
char *request_fields_document(const struct request_limits *lim, size_t *len);

#endif
