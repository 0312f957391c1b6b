/*
 * completion_json.c - what is written of an OpenAI completion
 * (completion.h): its text as it may go out, its head and usage, its
 * log-probabilities in chat's layout and in the legacy one, a token's
 * attention row, a whole answer's choice.
 */
#include "completion.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Characters in UTF-8 bytes: the bytes that do not continue one. */
size_t completion_characters(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* Where text[0..end) may be cut without splitting a character whose
 * bytes are not all there yet. */
static size_t whole_characters(const char *text, size_t end)
{
    for (size_t back = 1; back <= 4 && back <= end; back++) {
        const unsigned char b = (unsigned char)text[end - back];
        if ((b & 0xC0) == 0x80)
            continue; /* a continuation byte: look further back */
        const size_t need = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
        return need > back ? end - back : end;
    }
    return end;
}

/* How much of the text may go out now: not a stop string nor what
 * follows it, not the start of one that the next token may complete,
 * not half a character; and never less than has gone out. */
size_t completion_sendable(const struct completion *c)
{
    const struct generate_request *g = &c->o.g;
    const char *text = c->decoding.text.data;
    const size_t end = c->text_end;
    // a whole stop string the newest token completed: the text ends where
    // the generation's does (decoding_find_stop()), and no later token
    // can complete another
    size_t limit;
    if (!decoding_find_stop(g, text, end, c->sent, &limit)) {
        // else the longest end of the text that begins a stop string,
        // each stop against the text's own end
        size_t held = 0;
        for (size_t i = 0; i < g->n_stop; i++) {
            const size_t len = strlen(g->stop[i]);
            for (size_t k = len - 1 < end ? len - 1 : end; k > held; k--)
                if (!memcmp(text + end - k, g->stop[i], k)) {
                    held = k;
                    break;
                }
        }
        limit = end - held;
    }
    // what has gone out was whole characters, none of a stop string
    const size_t whole = whole_characters(text, limit);
    return whole > c->sent ? whole : c->sent;
}

/* ------------------------------------------------------------ writers */

static bool append_number(struct buf *b, double v)
{
    // a log-probability of a token the model gives none: vLLM's floor
    // at float32's precision, the alternatives' (struct xf_candidate)
    return isfinite(v) ? buf_printf(b, "%.9g", (double)(float)v)
                       : buf_append_str(b, "-9999.0");
}

/* A token's text as JSON (bytes that are not whole UTF-8 as U+FFFD), and
 * optionally its bytes as OpenAI's "bytes" array. */
static bool append_token(struct buf *b, const struct model *m, uint32_t id,
                         bool with_bytes)
{
    char bytes[TOKEN_BYTES + 1];
    size_t n = tok_token_bytes(&m->tokenizer, id, bytes, TOKEN_BYTES);
    n = n < TOKEN_BYTES ? n : TOKEN_BYTES;
    bytes[n] = 0;
    // a byte token's NUL as U+FFFD, as the text shows it
    // (token_text_append()): 0xFF, which starts no character, goes out so
    for (size_t i = 0; i < n; i++)
        if (!bytes[i])
            bytes[i] = '\xff';
    bool ok = buf_append_json_bytes(b, bytes, n);
    if (ok && with_bytes) {
        n = tok_token_bytes(&m->tokenizer, id, bytes, TOKEN_BYTES);
        n = n < TOKEN_BYTES ? n : TOKEN_BYTES;
        ok = buf_append_str(b, ",\"bytes\":[");
        for (size_t i = 0; ok && i < n; i++)
            ok = buf_printf(b, "%s%u", i ? "," : "", (unsigned char)bytes[i]);
        ok = ok && buf_append_str(b, "]");
    }
    return ok;
}

/* One token's log-probabilities in chat's layout: {token, logprob,
 * bytes, top_logprobs: [{token, logprob, bytes}]}. */
bool completion_chat_logprob(struct buf *b, const struct model *m, uint32_t id,
                             double logprob, const struct xf_candidate *top,
                             size_t n_top)
{
    bool ok = buf_append_str(b, "{\"token\":") &&
              append_token(b, m, id, true) &&
              buf_append_str(b, ",\"logprob\":") && append_number(b, logprob) &&
              buf_append_str(b, ",\"top_logprobs\":[");
    for (size_t i = 0; ok && i < n_top; i++)
        ok = buf_append_str(b, i ? ",{\"token\":" : "{\"token\":") &&
             append_token(b, m, top[i].id, true) &&
             buf_append_str(b, ",\"logprob\":") &&
             append_number(b, top[i].score) && buf_append_str(b, "}");
    return ok && buf_append_str(b, "]}");
}

/* The legacy layout's entries of one token, each appended to its array
 * (after a comma when it has any): tokens, token_logprobs, top_logprobs
 * (an object of token to log-probability; null for a first token that
 * has none) and text_offset. */
bool completion_legacy_logprob(struct completion *c, uint32_t id, bool has,
                               double logprob, const struct xf_candidate *top,
                               size_t n_top, size_t offset)
{
    const struct model *m = completion_model(c);
    const bool first = c->lp_tokens.len == 0;
    const char *sep = first ? "" : ",";
    bool ok = buf_append_str(&c->lp_tokens, sep) &&
              append_token(&c->lp_tokens, m, id, false) &&
              buf_append_str(&c->lp_values, sep) &&
              (has ? append_number(&c->lp_values, logprob)
                   : buf_append_str(&c->lp_values, "null")) &&
              buf_append_str(&c->lp_tops, sep) &&
              buf_printf(&c->lp_offsets, "%s%zu", sep, offset);
    if (ok && !has)
        return buf_append_str(&c->lp_tops, "null");
    // the object's keys are the tokens' texts, which byte tokens can
    // share (each byte that is no whole character is U+FFFD): a key
    // already there keeps its first, likelier, token, so that no key is
    // written twice (I-JSON, RFC 7493)
    struct buf keys;
    buf_init(&keys, (size_t)(OPENAI_MAX_LOGPROBS + 1) * (6 * TOKEN_BYTES + 2));
    size_t key_at[OPENAI_MAX_LOGPROBS + 1], n_keys = 0;
    ok = ok && buf_append_str(&c->lp_tops, "{");
    for (size_t i = 0; ok && i < n_top && n_keys <= OPENAI_MAX_LOGPROBS; i++) {
        const size_t from = keys.len;
        ok = append_token(&keys, m, top[i].id, false);
        const size_t len = keys.len - from;
        bool seen = false;
        for (size_t k = 0; ok && !seen && k < n_keys; k++) {
            const size_t k_len =
                (k + 1 < n_keys ? key_at[k + 1] : from) - key_at[k];
            seen = k_len == len &&
                   !memcmp(keys.data + key_at[k], keys.data + from, len);
        }
        if (!ok || seen) {
            keys.len = from; /* the key taken back */
            if (keys.data)
                keys.data[from] = '\0';
            continue;
        }
        key_at[n_keys++] = from;
        ok = buf_append_str(&c->lp_tops, n_keys > 1 ? "," : "") &&
             buf_append(&c->lp_tops, keys.data + from, len) &&
             buf_append_str(&c->lp_tops, ":") &&
             append_number(&c->lp_tops, top[i].score);
    }
    buf_free(&keys);
    return ok && buf_append_str(&c->lp_tops, "}");
}

/* The legacy "logprobs" object of what the buffers hold. */
bool completion_legacy_logprobs(struct buf *b, const struct completion *c)
{
    return buf_append_str(b, "{\"tokens\":[") &&
           buf_append(b, c->lp_tokens.data, c->lp_tokens.len) &&
           buf_append_str(b, "],\"token_logprobs\":[") &&
           buf_append(b, c->lp_values.data, c->lp_values.len) &&
           buf_append_str(b, "],\"top_logprobs\":[") &&
           buf_append(b, c->lp_tops.data, c->lp_tops.len) &&
           buf_append_str(b, "],\"text_offset\":[") &&
           buf_append(b, c->lp_offsets.data, c->lp_offsets.len) &&
           buf_append_str(b, "]}");
}

/* An answer's or a chunk's head: {"id", "object", "created", "model", */
bool completion_head(struct buf *b, const struct completion *c,
                     const char *object)
{
    return buf_printf(b,
                      "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,"
                      "\"model\":",
                      c->id, object, c->created) &&
           buf_append_json_string(b, completion_model(c)->name);
}

bool completion_usage(struct buf *b, const struct completion *c)
{
    const size_t prompt = c->decoding.prompt;
    const size_t made = c->o.g.req.model.enc.count - prompt;
    return buf_printf(b,
                      "\"usage\":{\"prompt_tokens\":%zu,\"completion_tokens\":"
                      "%zu,\"total_tokens\":%zu}",
                      prompt, made, prompt + made);
}

/* text[from, to) as a JSON string (a NUL in it as \u0000). */
bool completion_text(struct buf *b, const char *text, size_t from, size_t to)
{
    return to > from ? buf_append_json_bytes(b, text + from, to - from)
                     : buf_append_str(b, "\"\"");
}

/* A token's attention row as a chunk carries it: {"position", "token_id",
 * "weights" or "mean_weights": [layer][head][key] (one layer asked: no
 * layer dimension)}. */
bool completion_row(struct buf *b, const struct completion *c,
                    const struct decode_step *step)
{
    const struct xf_model *x = &completion_model(c)->xf;
    const bool all = c->o.g.req.model.run.layer == XF_ALL_LAYERS;
    const size_t lw = all ? x->layers : 1;
    const bool heads = c->decoding.row_want == XF_WANT_WEIGHTS;
    const size_t per = heads ? x->heads : 1, keys = step->keys;
    // the row is the query at the position before the new token
    bool ok = buf_printf(b, "{\"position\":%zu,\"token_id\":%u,\"%s\":%s",
                         c->decoding.prompt + step->index - 1, step->id,
                         heads ? "weights" : "mean_weights", all ? "[" : "");
    for (size_t l = 0; ok && l < lw; l++) {
        ok = buf_append_str(b, l ? ",[" : "[");
        for (size_t h = 0; ok && h < per; h++) {
            ok = buf_append_str(b, h ? ",[" : "[");
            const float *r = step->row + (l * per + h) * keys;
            for (size_t k = 0; ok && k < keys; k++)
                ok = buf_printf(b, "%s%.6g", k ? "," : "", (double)r[k]);
            ok = ok && buf_append_str(b, "]");
        }
        ok = ok && buf_append_str(b, "]");
    }
    return ok && buf_append_str(b, all ? "]}" : "}");
}

const char *completion_finish_reason(const struct decoding *d)
{
    return d->why == DECODE_LENGTH ? "length" : "stop";
}

/* The text's end once finished: before a stop string that ended it. */
size_t completion_final_end(const struct completion *c)
{
    return c->decoding.why == DECODE_STOP && c->decoding.stop_at < c->text_end
               ? c->decoding.stop_at
               : c->text_end;
}

/* The choice of a whole answer, its text (after the echoed prompt). */
bool completion_choice(struct buf *b, const struct completion *c)
{
    const char *text = c->decoding.text.data ? c->decoding.text.data : "";
    const size_t end = completion_final_end(c);
    bool ok;
    if (completion_is_chat(c)) {
        ok = buf_append_str(b, "\"choices\":[{\"index\":0,\"message\":{"
                               "\"role\":\"assistant\",\"content\":") &&
             completion_text(b, text, 0, end) &&
             buf_append_str(b, "},\"logprobs\":") &&
             (c->o.logprobs
                  ? buf_append_str(b, "{\"content\":[") &&
                        buf_append(b, c->lp_content.data, c->lp_content.len) &&
                        buf_append_str(b, "]}")
                  : buf_append_str(b, "null"));
    } else {
        struct buf whole;
        buf_init(&whole, c->o.prompt_len + end + 1);
        ok = (!c->o.echo ||
              buf_append(&whole, c->o.prompt_text, c->o.prompt_len)) &&
             buf_append(&whole, text, end) &&
             buf_append_str(b, "\"choices\":[{\"index\":0,\"text\":") &&
             completion_text(b, whole.data ? whole.data : "", 0, whole.len) &&
             buf_append_str(b, ",\"logprobs\":") &&
             (c->o.logprobs ? completion_legacy_logprobs(b, c)
                            : buf_append_str(b, "null"));
        buf_free(&whole);
    }
    return ok && buf_printf(b, ",\"finish_reason\":\"%s\"}],",
                            completion_finish_reason(&c->decoding));
}
