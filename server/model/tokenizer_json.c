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

/* What the files give, before the core builds from it. */
struct reading {
    struct bpe_spec spec;
    struct bpe_norm_step steps[BPE_MAX_NORM_STEPS];
    struct bpe_split splits[BPE_MAX_SPLITS];
    struct bpe_string *vocab;
    struct bpe_merge *merges;
    struct bpe_added_token *added;
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

/* vocab: {token: id}, each id once; an id below the largest that no token
 * has is a gap (cl100k's vocabulary has 15). */
static bool read_vocab(const cJSON *vocab, const char *where, struct reading *r)
{
    if (!cJSON_IsObject(vocab))
        return model_fail(r->err, r->err_len, "%s is not an object", where);
    const size_t count = (size_t)cJSON_GetArraySize(vocab);
    if (count == 0 || count > BPE_MAX_VOCAB)
        return model_fail(r->err, r->err_len,
                          "%s has %zu tokens; 1 to %zu are allowed", where,
                          count, BPE_MAX_VOCAB);
    size_t n = 0;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        const double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!(d >= 0 && d < (double)BPE_MAX_VOCAB) || (double)(size_t)d != d)
            return model_fail(r->err, r->err_len,
                              "%s['%.64s'] is not an id from 0 to %zu", where,
                              e->string, BPE_MAX_VOCAB - 1);
        n = (size_t)d + 1 > n ? (size_t)d + 1 : n;
    }
    r->vocab = calloc(n, sizeof *r->vocab);
    if (!r->vocab)
        return model_fail(r->err, r->err_len, "out of memory for %s", where);
    for (const cJSON *e = vocab->child; e; e = e->next) {
        const size_t id = (size_t)e->valuedouble;
        if (r->vocab[id].text)
            return model_fail(r->err, r->err_len,
                              "%s gives id %zu to '%.64s' and to '%.64s'",
                              where, id, r->vocab[id].text, e->string);
        r->vocab[id] = str(e->string);
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

/* merges: ["a b", ...] or [["a", "b"], ...]. */
static bool read_merges(cJSON *merges, struct reading *r)
{
    if (!cJSON_IsArray(merges))
        return model_fail(r->err, r->err_len, "model.merges is not an array");
    const size_t n = (size_t)cJSON_GetArraySize(merges);
    if (n > BPE_MAX_MERGES)
        return model_fail(r->err, r->err_len,
                          "model.merges has %zu merges; at most %zu are "
                          "allowed",
                          n, BPE_MAX_MERGES);
    r->merges = calloc(n ? n : 1, sizeof *r->merges);
    if (!r->merges)
        return model_fail(r->err, r->err_len, "out of memory for the merges");
    size_t i = 0;
    for (cJSON *e = merges->child; e; e = e->next, i++) {
        const cJSON *a = cJSON_IsArray(e) ? cJSON_GetArrayItem(e, 0) : NULL;
        const cJSON *b = cJSON_IsArray(e) ? cJSON_GetArrayItem(e, 1) : NULL;
        if (cJSON_IsString(e)) {
            if (!split_merge(e->valuestring, &r->merges[i]))
                return model_fail(r->err, r->err_len,
                                  "model.merges[%zu] ('%.64s') is not two "
                                  "tokens and one space",
                                  i, e->valuestring);
        } else if (cJSON_GetArraySize(e) == 2 && cJSON_IsString(a) &&
                   cJSON_IsString(b)) {
            r->merges[i].a = str(a->valuestring);
            r->merges[i].b = str(b->valuestring);
        } else {
            return model_fail(r->err, r->err_len,
                              "model.merges[%zu] is neither \"a b\" nor "
                              "[\"a\", \"b\"]",
                              i);
        }
    }
    r->spec.merges = r->merges;
    r->spec.n_merges = n;
    return true;
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
        !read_vocab(key(model, "vocab"), "model.vocab", r) ||
        !read_merges(cJSON_GetObjectItemCaseSensitive(model, "merges"), r))
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
static bool read_gpt2_files(cJSON *vocab, char *merges, size_t merges_len,
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
        doc =
            parse(in->tokenizer_json, in->tokenizer_json_len, *file, file, &r);
        ok = doc && read_tokenizer_json(doc, &r);
    } else if (ok && in->vocab_json && in->merges_txt) {
        *file = "vocab.json";
        doc = parse(in->vocab_json, in->vocab_json_len, *file, file, &r);
        merges = malloc(in->merges_txt_len + 1);
        if (doc && !merges)
            ok = model_fail(err, err_len, "out of memory");
        else if (doc) {
            memcpy(merges, in->merges_txt, in->merges_txt_len);
            merges[in->merges_txt_len] = 0;
            ok = read_gpt2_files(doc, merges, in->merges_txt_len, config, file,
                                 &r);
        } else {
            ok = false;
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
