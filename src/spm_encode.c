/*
 * spm_encode.c - encoding a text with the SentencePiece tokenizer
 * (spm.h): the special tokens typed in it taken out, then each piece
 * between them merged pair by pair, the best-scoring first.
 *
 * Both steps run in O(n log n) for n bytes of text, with one workspace
 * sized before anything else is done:
 *
 * - The special tokens are tried by rank, each at every place it occurs,
 *   leftmost first, in what earlier ranks left. That is a heap of
 *   (rank, position) candidates: every position starts with the longest
 *   special token found there (a walk down the tokens sorted by key), a
 *   candidate taken when its bytes are all still free, else replaced by
 *   the next shorter token at its position.
 * - The pieces' merges are a heap of neighbouring pairs whose text is a
 *   token, highest score first and then leftmost, entries made stale by
 *   an earlier merge skipped when they come up.
 */
#include "bpe_internal.h"
#include "checked.h"
#include "error.h"
#include "spm.h"
#include "spm_internal.h"

#include <stdlib.h>
#include <string.h>

static const char meta[] = "\xe2\x96\x81"; /* U+2581, written for a space */

/* A special token that may be taken at pos. */
struct candidate {
    uint32_t rank, pos;
};

/* A piece's character, or the token several have become: bytes
 * [off, off + n) of the escaped piece; n is 0 once merged into the one
 * before. prev and next link the ones left, -1 at the ends. */
struct symbol {
    int32_t prev, next;
    uint32_t off, n;
};

/* Two neighbouring symbols whose joined text (size bytes) is a token of
 * that score. */
struct bigram {
    float score;
    int32_t left, right;
    uint32_t size;
};

/* The workspace of one encode, one block; specials only when the
 * vocabulary has special tokens. */
struct work {
    uint8_t *covered;        /* [n] TAKEN_START where a special token
                                starts, TAKEN on its other bytes and the
                                whitespace it strips, else 0 */
    uint32_t *taken_id;      /* [n] the token starting there */
    struct candidate *cands; /* [n] the candidates' heap */
    char *piece;             /* [3 (n + 1)] a piece, escaped */
    struct symbol *syms;     /* [n + 1] */
    struct bigram *pairs;    /* [2 (n + 1)] the pairs' heap */
};

/* The ids made so far, up to cap; over it, encoding stops. */
struct sink {
    uint32_t *ids;
    uint8_t *added;
    size_t count, cap;
    bool over;
    bool unspellable; /* a character had no token, no bytes and no unk */
    uint32_t bad_char;
};

static void put(struct sink *s, uint32_t id, bool added)
{
    if (s->count == s->cap) {
        s->over = true;
        return;
    }
    s->ids[s->count] = id;
    s->added[s->count] = added;
    s->count++;
}

/* ---------------------------------------------------------------- plan */

/* The sizes of the workspace's arrays for len bytes; false on overflow. */
struct plan {
    size_t text, piece, syms, pairs, tokens, work;
};

static bool plan_for(const struct spm_tokenizer *t, size_t len, struct plan *p)
{
    // a piece is at most the text and a space, a symbol a character of
    // it; every space becomes 3 bytes. The pairs' heap holds at most the
    // pairs seeded (symbols - 1) and one more for each merge (which
    // takes one off and puts two on; symbols - 1 merges at most).
    // Tokens: at most 3 a byte of a piece (a space's U+2581 as three byte
    // tokens), 3 more for the space put before each piece, a special
    // token (at least a byte) and the BOS and EOS: 4 a byte and 5
    p->text = len;
    p->syms = len + 1;
    if (!size_mul(p->syms, 3, &p->piece) || !size_mul(p->syms, 2, &p->pairs) ||
        !size_mul(len, 4, &p->tokens) || !size_add_to(&p->tokens, 5))
        return false;
    size_t part;
    p->work = p->piece;
    if (!size_mul(p->syms, sizeof(struct symbol), &part) ||
        !size_add_to(&p->work, part) ||
        !size_mul(p->pairs, sizeof(struct bigram), &part) ||
        !size_add_to(&p->work, part))
        return false;
    if (t->n_special &&
        (!size_mul(len, 1 + sizeof(uint32_t) + sizeof(struct candidate),
                   &part) ||
         !size_add_to(&p->work, part)))
        return false;
    // alignment slack between the arrays
    return size_add_to(&p->work, 4 * 8);
}

static void *align8(char *p)
{
    return (void *)(((uintptr_t)p + 7) & ~(uintptr_t)7);
}

/* The arrays of w carved from mem, as plan_for() sized them. */
static void work_carve(const struct spm_tokenizer *t, const struct plan *p,
                       char *mem, struct work *w)
{
    memset(w, 0, sizeof *w);
    w->syms = align8(mem);
    w->pairs = align8((char *)(w->syms + p->syms));
    char *at = (char *)(w->pairs + p->pairs);
    if (t->n_special) {
        w->cands = align8(at);
        w->taken_id = align8((char *)(w->cands + p->text));
        at = (char *)(w->taken_id + p->text);
        w->covered = (uint8_t *)at;
        at += p->text;
    }
    w->piece = at;
}

/* ------------------------------------------------------- special tokens */

/* The length of the longest special token at s[0..n) shorter than below,
 * its rank into *rank; 0 when none. The tokens sorted by key narrow to
 * those agreeing with s byte by byte; one that ends at depth d is the
 * first of the range there. */
static size_t special_at(const struct spm_tokenizer *t, const char *s, size_t n,
                         size_t below, uint32_t *rank)
{
    const uint32_t *by_key = t->special_rank;
    size_t lo = 0, hi = t->n_special, d = 0, best = 0, len;
    while (lo < hi) {
        spm_key(t, t->special_id[by_key[lo]], &len);
        if (len == d) {
            best = d;
            *rank = by_key[lo];
            if (++lo == hi)
                break;
        }
        if (d == n || d + 1 >= below)
            break;
        // every key in [lo, hi) is longer than d: narrow to byte s[d]
        const unsigned char c = (unsigned char)s[d];
        size_t a = lo, b = hi;
        while (a < b) {
            const size_t mid = a + (b - a) / 2;
            const char *km = spm_key(t, t->special_id[by_key[mid]], &len);
            if ((unsigned char)km[d] < c)
                a = mid + 1;
            else
                b = mid;
        }
        lo = a;
        b = hi;
        while (a < b) {
            const size_t mid = a + (b - a) / 2;
            const char *km = spm_key(t, t->special_id[by_key[mid]], &len);
            if ((unsigned char)km[d] <= c)
                a = mid + 1;
            else
                b = mid;
        }
        hi = a;
        d++;
    }
    return best;
}

static bool cand_before(const struct candidate *a, const struct candidate *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void cand_down(struct candidate *h, size_t n, size_t i)
{
    for (;;) {
        size_t m = i, l = 2 * i + 1, r = l + 1;
        if (l < n && cand_before(&h[l], &h[m]))
            m = l;
        if (r < n && cand_before(&h[r], &h[m]))
            m = r;
        if (m == i)
            return;
        const struct candidate tmp = h[i];
        h[i] = h[m];
        h[m] = tmp;
        i = m;
    }
}

static void cand_push(struct candidate *h, size_t *n, struct candidate c)
{
    size_t i = (*n)++;
    while (i && cand_before(&c, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

/* C's isspace() in the "C" locale, as llama.cpp strips with it. */
static bool c_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

#define TAKEN 1
#define TAKEN_START 2

/* The special tokens in s[0..n), and the whitespace they strip, marked in
 * w->covered; their ids in w->taken_id. */
static void take_special(const struct spm_tokenizer *t, const char *s, size_t n,
                         struct work *w)
{
    struct candidate *heap = w->cands;
    uint8_t *covered = w->covered;
    size_t count = 0;
    memset(covered, 0, n);
    for (size_t p = 0; p < n; p++) {
        uint32_t rank;
        if (special_at(t, s + p, n - p, SIZE_MAX, &rank))
            heap[count++] = (struct candidate){rank, (uint32_t)p};
    }
    for (size_t i = count / 2; i-- > 0;)
        cand_down(heap, count, i);
    while (count) {
        const struct candidate c = heap[0];
        heap[0] = heap[--count];
        cand_down(heap, count, 0);
        if (covered[c.pos])
            continue; // nothing can start here any more
        const uint32_t id = t->special_id[c.rank];
        size_t len;
        spm_key(t, id, &len);
        size_t end = c.pos + len, at = c.pos;
        while (at < end && !covered[at])
            at++;
        if (at < end) {
            // taken in part already: a shorter token here may still fit
            uint32_t rank;
            if (special_at(t, s + c.pos, n - c.pos, len, &rank))
                cand_push(heap, &count, (struct candidate){rank, c.pos});
            continue;
        }
        size_t start = c.pos;
        if (t->strip[id] & SPM_STRIP_LEFT)
            while (start > 0 && !covered[start - 1] && c_space(s[start - 1]))
                start--;
        if (t->strip[id] & SPM_STRIP_RIGHT)
            while (end < n && !covered[end] && c_space(s[end]))
                end++;
        memset(covered + start, TAKEN, end - start);
        covered[c.pos] = TAKEN_START;
        w->taken_id[c.pos] = id;
    }
}

/* ---------------------------------------------------------------- merge */

/* Whether a comes off the heap before b: higher score, then leftmost. */
static bool pair_before(const struct bigram *a, const struct bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void pair_push(struct bigram *h, size_t *n, struct bigram b)
{
    size_t i = (*n)++;
    while (i && pair_before(&b, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = b;
}

static struct bigram pair_pop(struct bigram *h, size_t *n)
{
    const struct bigram top = h[0];
    const struct bigram last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t m = 2 * i + 1;
        if (m >= *n)
            break;
        if (m + 1 < *n && pair_before(&h[m + 1], &h[m]))
            m++;
        if (!pair_before(&h[m], &last))
            break;
        h[i] = h[m];
        i = m;
    }
    if (*n)
        h[i] = last;
    return top;
}

/* The pair left, right onto the heap when their joined text is a token. */
static void try_pair(const struct spm_tokenizer *t, const char *piece,
                     const struct symbol *syms, int32_t left, int32_t right,
                     struct bigram *heap, size_t *n)
{
    if (left < 0 || right < 0)
        return;
    const uint32_t size = syms[left].n + syms[right].n;
    const int64_t id = spm_key_id(t, piece + syms[left].off, size);
    if (id >= 0)
        pair_push(heap, n, (struct bigram){t->scores[id], left, right, size});
}

/* The length of the UTF-8 character starting with byte c, as llama.cpp
 * reads it by the high four bits. */
static size_t char_len(unsigned char c)
{
    static const uint8_t by_high[16] = {1, 1, 1, 1, 1, 1, 1, 1,
                                        1, 1, 1, 1, 2, 2, 3, 4};
    return by_high[c >> 4];
}

/* A symbol left after merging: its token, else its bytes' tokens, else
 * the unk token. */
static void put_symbol(const struct spm_tokenizer *t, const char *s, size_t n,
                       struct sink *out)
{
    const int64_t id = spm_key_id(t, s, n);
    if (id >= 0) {
        put(out, (uint32_t)id, false);
        return;
    }
    bool bytes = true;
    for (size_t i = 0; i < n; i++)
        bytes = bytes && t->byte_id[(unsigned char)s[i]] >= 0;
    if (bytes) {
        for (size_t i = 0; i < n; i++)
            put(out, (uint32_t)t->byte_id[(unsigned char)s[i]], false);
    } else if (t->unk_id >= 0) {
        put(out, (uint32_t)t->unk_id, false);
    } else if (!out->unspellable) {
        uint32_t cp;
        bpe_utf8_next(s, n, 0, &cp);
        out->unspellable = true;
        out->bad_char = cp;
    }
}

/* One piece of text between special tokens, s[0..n) (n > 0): a space
 * before it when space, each " " as U+2581, then merged. */
static void encode_piece(const struct spm_tokenizer *t, const char *s, size_t n,
                         bool space, struct work *w, struct sink *out)
{
    char *piece = w->piece;
    size_t len = 0;
    if (space) {
        memcpy(piece, meta, 3);
        len = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(piece + len, meta, 3);
            len += 3;
        } else {
            piece[len++] = s[i];
        }
    }
    struct symbol *syms = w->syms;
    int32_t count = 0;
    for (size_t off = 0; off < len;) {
        size_t k = char_len((unsigned char)piece[off]);
        if (k > len - off)
            k = len - off;
        syms[count] =
            (struct symbol){count - 1, off + k == len ? -1 : count + 1,
                            (uint32_t)off, (uint32_t)k};
        off += k;
        count++;
    }
    struct bigram *heap = w->pairs;
    size_t queued = 0;
    for (int32_t i = 1; i < count; i++)
        try_pair(t, piece, syms, i - 1, i, heap, &queued);
    while (queued) {
        const struct bigram b = pair_pop(heap, &queued);
        struct symbol *l = &syms[b.left], *r = &syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue; // one of them changed since
        // the right one joins the left one
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            syms[r->next].prev = b.left;
        try_pair(t, piece, syms, l->prev, b.left, heap, &queued);
        try_pair(t, piece, syms, b.left, l->next, heap, &queued);
    }
    for (int32_t i = 0; i >= 0 && !out->over; i = syms[i].next)
        put_symbol(t, piece + syms[i].off, syms[i].n, out);
}

/* The text's ids after the BOS: its pieces and special tokens in order. */
static void encode_text(const struct spm_tokenizer *t, const char *s, size_t n,
                        struct work *w, struct sink *out)
{
    const uint8_t *covered = t->n_special ? w->covered : NULL;
    if (covered)
        take_special(t, s, n, w);
    bool after_special = true; // the first piece gets the space too
    size_t at = 0;
    while (at < n && !out->over) {
        if (covered && covered[at] == TAKEN_START) {
            const uint32_t id = w->taken_id[at];
            size_t len;
            spm_key(t, id, &len);
            put(out, id, false);
            at += len;
            after_special = true;
            continue;
        }
        if (covered && covered[at]) {
            at++; // whitespace a special token stripped
            continue;
        }
        size_t end = at + 1;
        while (end < n && !(covered && covered[end]))
            end++;
        encode_piece(t, s + at, end - at, t->add_space_prefix && after_special,
                     w, out);
        after_special = false;
        at = end;
    }
}

/* ----------------------------------------------------------- interface */

attn_status spm_encode(const void *impl, const char *a, size_t a_len,
                       const char *b, size_t b_len,
                       const struct tok_options *opts, struct tok_encoding *out,
                       struct attn_error *err)
{
    const struct spm_tokenizer *t = impl;
    const size_t max_tokens = opts->max_tokens;
    const bool bos = t->add_bos && !opts->no_special;
    const bool eos = t->add_eos && !opts->no_special;
    (void)b_len;
    memset(out, 0, sizeof *out);
    if (b)
        return attn_fail(err, ATTN_E_INVALID, "sentence_b",
                         "this tokenizer encodes one text: decoder models "
                         "take no sentence_b");
    if (!a)
        a = "", a_len = 0;
    if (a_len > SPM_MAX_INPUT_BYTES)
        return attn_fail(err, ATTN_E_TOO_BIG, "sentence",
                         "sentence has %zu bytes; at most %zu are allowed",
                         a_len, SPM_MAX_INPUT_BYTES);
    const size_t valid = bpe_utf8_valid(a, a_len);
    if (valid != a_len)
        return attn_fail_at(err, ATTN_E_INPUT, "sentence", 1, &valid,
                            "sentence is not valid UTF-8 at byte %zu", valid);
    struct plan p;
    if (!plan_for(t, a_len, &p))
        return attn_fail(err, ATTN_E_TOO_BIG, "sentence",
                         "sentence is too long");
    size_t tokens = p.tokens;
    if (max_tokens && tokens > max_tokens + 1)
        tokens = max_tokens + 1; // one past the cap tells it is passed
    char *mem = malloc(p.work);
    uint32_t *block = malloc(tokens * (sizeof(uint32_t) + 2));
    if (!mem || !block) {
        free(mem);
        free(block);
        return attn_fail(err, ATTN_E_NOMEM, "sentence",
                         "out of memory for a sentence of %zu bytes", a_len);
    }
    struct work w;
    work_carve(t, &p, mem, &w);
    uint8_t *type_ids = (uint8_t *)(block + tokens);
    struct sink s = {.ids = block, .added = type_ids + tokens, .cap = tokens};
    if (bos)
        put(&s, (uint32_t)t->bos_id, true);
    encode_text(t, a, a_len, &w, &s);
    if (eos)
        put(&s, (uint32_t)t->eos_id, true);
    free(mem);
    if (s.unspellable) {
        free(block);
        return attn_fail(err, ATTN_E_INPUT, "sentence",
                         "sentence has U+%04X, which no token spells: the "
                         "vocabulary has no byte token for it and no unk "
                         "token",
                         (unsigned)s.bad_char);
    }
    if (s.over || (max_tokens && s.count > max_tokens)) {
        free(block);
        return attn_fail(err, ATTN_E_TOO_BIG, "sentence",
                         "sentence has more than the %zu tokens allowed%s",
                         max_tokens,
                         bos || eos ? " (with the ones added)" : "");
    }
    memset(type_ids, 0, s.count);
    out->count = s.count;
    out->ids = block;
    out->type_ids = type_ids;
    out->added = s.added;
    return ATTN_OK;
}

size_t spm_encode_bytes(const void *impl, size_t a_len, size_t b_len)
{
    const struct spm_tokenizer *t = impl;
    (void)b_len; // a second text is refused before anything is allocated
    struct plan p;
    size_t out;
    if (a_len > SPM_MAX_INPUT_BYTES || !plan_for(t, a_len, &p) ||
        !size_mul(p.tokens, sizeof(uint32_t) + 2, &out) ||
        !size_add_to(&out, p.work))
        return SIZE_MAX;
    return out;
}
