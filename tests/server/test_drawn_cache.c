/*
 * test_drawn_cache.c - the cache of values drawn from seeds: what it lends is
 * exactly what attn_params_draw() and attn_embed_token() draw; a second
 * look finds it; it stays
 * within its cap by forgetting the least recently used tensor that no
 * lease holds, and never one that is held; once full, it keeps a value
 * only on its second draw, so that one-off seeds pass through without
 * forgetting what is in use; a tensor over the cap is drawn
 * for its lease alone; cap 0 keeps nothing. A lease of some tensors
 * (those a pass reads) leaves the others NULL, and attn_forward() with
 * them alone answers the same bits as with all; a later lease that
 * needs one left out draws it then, the same as drawn whole. Its table
 * grows with its entries, however small they are.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "drawn_cache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct attn_config config(uint64_t seed, size_t d_model, size_t heads)
{
    struct attn_config cfg = {.n_query = 3,
                              .d_model = d_model,
                              .heads = heads,
                              .seed = seed,
                              .want = ATTN_WANT_OUTPUT};
    struct attn_error err;
    assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_OK);
    return cfg;
}

/* The lent parameters are the drawn ones, bit for bit. */
static void same_as_drawn(const struct attn_config *cfg,
                          struct attn_params *lent)
{
    struct attn_params drawn;
    struct attn_error err;
    assert_int_equal(attn_params_draw(cfg, &drawn, &err), ATTN_OK);
    struct attn_param_tensor t[ATTN_PARAM_COUNT];
    const size_t n = attn_params_layout(cfg, 0, t);
    assert_true(n > 0);
    for (size_t i = 0; i < n; i++) {
        const float *a = attn_params_tensor(lent, t[i].slot);
        const float *b = attn_params_tensor(&drawn, t[i].slot);
        assert_non_null(a);
        assert_memory_equal(a, b, attn_param_count(&t[i]) * sizeof(float));
    }
    attn_params_free(&drawn);
}

static void test_lends_what_is_drawn_and_finds_it_again(void **state)
{
    (void)state;
    struct drawn_cache c;
    drawn_cache_init(&c, (size_t)1 << 20);
    const struct attn_config cfg = config(7, 32, 4);
    struct attn_params p1, p2;
    struct drawn_lease l1, l2;
    struct attn_error err;
    assert_true(drawn_params_lease(&c, &cfg, &p1, &l1, &err));
    same_as_drawn(&cfg, &p1);
    struct drawn_cache_stats s;
    drawn_cache_stats(&c, &s);
    assert_int_equal(s.hits[DRAWN_PARAM], 0);
    assert_true(s.misses[DRAWN_PARAM] > 0 &&
                s.entries == s.misses[DRAWN_PARAM]);
    assert_true(drawn_params_lease(&c, &cfg, &p2, &l2, &err));
    assert_ptr_equal(p1.wq, p2.wq); /* shared, not drawn again */
    drawn_cache_stats(&c, &s);
    assert_int_equal(s.hits[DRAWN_PARAM], s.misses[DRAWN_PARAM]);
    /* another seed is another tensor */
    const struct attn_config other = config(8, 32, 4);
    struct attn_params p3;
    struct drawn_lease l3;
    assert_true(drawn_params_lease(&c, &other, &p3, &l3, &err));
    assert_ptr_not_equal(p3.wq, p1.wq);
    same_as_drawn(&other, &p3);
    drawn_lease_end(&l1);
    drawn_lease_end(&l2);
    drawn_lease_end(&l3);
    drawn_cache_free(&c);
}

static void test_within_cap_and_never_a_held_one(void **state)
{
    (void)state;
    /* d_model 64, 8 heads: four 64x64 weights and four biases, about
     * 66 KB a seed; a cap of 150 KB holds two seeds */
    struct drawn_cache c;
    drawn_cache_init(&c, 150000);
    struct attn_params held;
    struct drawn_lease held_lease;
    struct attn_error err;
    const struct attn_config first = config(1, 64, 8);
    assert_true(drawn_params_lease(&c, &first, &held, &held_lease, &err));
    /* each seed twice: a full cache keeps it on the second draw */
    for (uint64_t seed = 2; seed < 10; seed++)
        for (int draw = 0; draw < 2; draw++) {
            const struct attn_config cfg = config(seed, 64, 8);
            struct attn_params p;
            struct drawn_lease l;
            assert_true(drawn_params_lease(&c, &cfg, &p, &l, &err));
            same_as_drawn(&cfg, &p);
            drawn_lease_end(&l);
            struct drawn_cache_stats s;
            drawn_cache_stats(&c, &s);
            assert_true(s.bytes <= s.cap);
        }
    /* the first seed was held all along: still the same memory, intact */
    same_as_drawn(&first, &held);
    struct drawn_cache_stats s;
    drawn_cache_stats(&c, &s);
    assert_true(s.evictions > 0);
    drawn_lease_end(&held_lease);
    drawn_cache_free(&c);
}

static void test_over_the_cap_or_off_is_drawn_alone(void **state)
{
    (void)state;
    struct attn_error err;
    const struct attn_config cfg = config(3, 64, 8);
    for (int off = 0; off < 2; off++) {
        struct drawn_cache c;
        drawn_cache_init(&c, off ? 0 : 1000); /* 1 KB: no weight fits */
        struct attn_params p;
        struct drawn_lease l;
        assert_true(drawn_params_lease(&c, &cfg, &p, &l, &err));
        same_as_drawn(&cfg, &p);
        struct drawn_cache_stats s;
        drawn_cache_stats(&c, &s);
        assert_int_equal(s.bytes, off ? 0 : s.bytes);
        assert_true(s.bytes <= 1000);
        drawn_lease_end(&l);
        drawn_cache_free(&c);
    }
    /* and with no cache at all */
    struct attn_params p;
    struct drawn_lease l;
    assert_true(drawn_params_lease(NULL, &cfg, &p, &l, &err));
    same_as_drawn(&cfg, &p);
    drawn_lease_end(&l);
}

/* Token embeddings: the drawn ones, kept and found again, the same word
 * twice in one call drawn (or looked up) once; another seed or width is
 * another one. */
static void test_token_embeddings(void **state)
{
    (void)state;
    char *words[] = {"the", "cat", "the", "sat", "caf\xc3\xa9"};
    const size_t n = 5, dim = 12;
    float want[5 * 12], got[5 * 12];
    for (size_t t = 0; t < n; t++)
        attn_embed_token(words[t], strlen(words[t]), 42, dim, want + t * dim);
    struct drawn_cache c;
    drawn_cache_init(&c, (size_t)1 << 20);
    for (int pass = 0; pass < 2; pass++) {
        memset(got, 0, sizeof got);
        drawn_embed_tokens(&c, words, n, 42, dim, got);
        assert_memory_equal(got, want, sizeof want);
    }
    struct drawn_cache_stats s;
    drawn_cache_stats(&c, &s);
    assert_int_equal(s.entries, 4); /* "the" once */
    assert_int_equal(s.misses[DRAWN_TOKEN], 4);
    assert_int_equal(s.hits[DRAWN_TOKEN], 4);
    /* another seed: other values, not the kept ones */
    drawn_embed_tokens(&c, words, 1, 43, dim, got);
    attn_embed_token("the", 3, 43, dim, want);
    assert_memory_equal(got, want, dim * sizeof(float));
    /* no cache: drawn each time, the same */
    drawn_embed_tokens(NULL, words, 1, 43, dim, got);
    assert_memory_equal(got, want, dim * sizeof(float));
    drawn_cache_free(&c);
}

/* Small entries by the thousand: the table grows to a slot an entry or
 * more, and every one is found again, the same bits, after each growth. */
static void test_many_small_entries(void **state)
{
    (void)state;
    enum { WORDS = 5000, DIM = 8 };
    static char text[WORDS][8];
    static char *words[WORDS];
    static float want[WORDS * DIM], got[WORDS * DIM];
    for (size_t t = 0; t < WORDS; t++) {
        snprintf(text[t], sizeof text[t], "w%zu", t);
        words[t] = text[t];
        attn_embed_token(words[t], strlen(words[t]), 7, DIM, want + t * DIM);
    }
    struct drawn_cache c;
    drawn_cache_init(&c, (size_t)64 << 20);
    struct drawn_cache_stats s;
    drawn_cache_stats(&c, &s);
    const size_t first_slots = s.slots;
    assert_true(first_slots < WORDS);
    for (int pass = 0; pass < 2; pass++) {
        memset(got, 0, sizeof got);
        drawn_embed_tokens(&c, words, WORDS, 7, DIM, got);
        assert_memory_equal(got, want, sizeof want);
    }
    drawn_cache_stats(&c, &s);
    assert_int_equal(s.entries, WORDS);
    assert_int_equal(s.misses[DRAWN_TOKEN], WORDS);
    assert_int_equal(s.hits[DRAWN_TOKEN], WORDS); /* all on the second pass */
    assert_true(s.slots >= s.entries);
    assert_true(s.slots * (sizeof(void *) + 1) <= s.cap / 8);
    /* a cap that holds about a tenth of them: the first fill it, the
     * others pass through (drawn once while it is full), the table keeps
     * its slots, and what is lent is still what is drawn */
    drawn_cache_free(&c);
    drawn_cache_init(&c, s.bytes / 10);
    drawn_embed_tokens(&c, words, WORDS, 7, DIM, got);
    assert_memory_equal(got, want, sizeof want);
    drawn_cache_stats(&c, &s);
    assert_true(s.bytes <= s.cap);
    assert_true(s.entries < WORDS / 5 && s.entries > 0);
    assert_true(s.slots * (sizeof(void *) + 1) <= s.cap / 8 ||
                s.slots == first_slots);
    assert_int_equal(s.evictions, 0);
    assert_int_equal(s.passes, WORDS - s.entries);
    const size_t first_fill = s.entries; /* words [0, first_fill) */
    /* drawn again, each of the last ten is kept, the oldest forgotten */
    for (size_t t = WORDS - 10; t < WORDS; t++)
        for (int draw = 0; draw < 2; draw++) {
            memset(got, 0, DIM * sizeof(float));
            drawn_embed_tokens(&c, words + t, 1, 7, DIM, got);
            assert_memory_equal(got, want + t * DIM, DIM * sizeof(float));
        }
    drawn_cache_stats(&c, &s);
    assert_true(s.evictions >= 10 && s.bytes <= s.cap);
    const uint64_t hits = s.hits[DRAWN_TOKEN];
    memset(got, 0, sizeof got);
    drawn_embed_tokens(&c, words + WORDS - 10, 10, 7, DIM, got);
    assert_memory_equal(got, want + (WORDS - 10) * DIM,
                        10 * DIM * sizeof(float));
    drawn_cache_stats(&c, &s);
    assert_int_equal(s.hits[DRAWN_TOKEN], hits + 10); /* all ten kept */
    /* the oldest went, and every other word of the first fill is found
     * still, those whose slots lost an entry too (its tag redone) */
    const size_t gone = s.evictions, misses = s.misses[DRAWN_TOKEN];
    assert_true(gone < first_fill);
    drawn_embed_tokens(&c, words + gone, first_fill - gone, 7, DIM, got);
    assert_memory_equal(got, want + gone * DIM,
                        (first_fill - gone) * DIM * sizeof(float));
    drawn_cache_stats(&c, &s);
    assert_int_equal(s.misses[DRAWN_TOKEN], misses);
    assert_int_equal(s.hits[DRAWN_TOKEN], hits + 10 + first_fill - gone);
    drawn_cache_free(&c);
}

/* A stream of one-off seeds through a full cache: each is drawn for its
 * request alone, the same values, and what the cache held is still
 * there; a seed that comes back is kept then. */
static void test_one_off_seeds_pass_through(void **state)
{
    (void)state;
    /* d_model 32, 4 heads: about 17 KB a seed; room for three */
    struct drawn_cache c;
    drawn_cache_init(&c, 60000);
    struct attn_error err;
    const struct attn_config hot = config(1, 32, 4);
    struct attn_params p;
    struct drawn_lease l;
    assert_true(drawn_params_lease(&c, &hot, &p, &l, &err));
    drawn_lease_end(&l);
    for (uint64_t seed = 100; seed < 200; seed++) {
        const struct attn_config cfg = config(seed, 32, 4);
        assert_true(drawn_params_lease(&c, &cfg, &p, &l, &err));
        same_as_drawn(&cfg, &p);
        drawn_lease_end(&l);
    }
    struct drawn_cache_stats s;
    drawn_cache_stats(&c, &s);
    assert_true(s.bytes <= s.cap);
    assert_int_equal(s.evictions, 0);
    assert_true(s.passes > 0);
    const uint64_t hits = s.hits[DRAWN_PARAM];
    assert_true(drawn_params_lease(&c, &hot, &p, &l, &err));
    same_as_drawn(&hot, &p);
    drawn_lease_end(&l);
    drawn_cache_stats(&c, &s);
    assert_true(s.hits[DRAWN_PARAM] > hits); /* the first seed stayed */
    /* the last one-off seed, drawn again, is kept; a third lease finds it */
    const struct attn_config back = config(199, 32, 4);
    assert_true(drawn_params_lease(&c, &back, &p, &l, &err));
    drawn_lease_end(&l);
    drawn_cache_stats(&c, &s);
    assert_true(s.evictions > 0 && s.bytes <= s.cap);
    const uint64_t before = s.hits[DRAWN_PARAM];
    struct attn_params q;
    struct drawn_lease m;
    assert_true(drawn_params_lease(&c, &back, &q, &m, &err));
    same_as_drawn(&back, &q);
    drawn_lease_end(&m);
    drawn_cache_stats(&c, &s);
    assert_true(s.hits[DRAWN_PARAM] > before);
    drawn_cache_free(&c);
}

/* A cap of 50,000 bytes almost filled by two held seeds (d_model 32, 4
 * heads: about 17 KB a seed), leased into p and l; returns the bytes of
 * room left beside them. */
static size_t hold_two_seeds(struct drawn_cache *c, struct attn_params p[2],
                             struct drawn_lease l[2])
{
    drawn_cache_init(c, 50000);
    struct attn_error err;
    for (int i = 0; i < 2; i++) {
        const struct attn_config cfg = config((uint64_t)i + 1, 32, 4);
        assert_true(drawn_params_lease(c, &cfg, &p[i], &l[i], &err));
    }
    struct drawn_cache_stats s;
    drawn_cache_stats(c, &s);
    assert_true(s.bytes <= s.cap);
    return s.cap - s.bytes;
}

/* A word twice in one text is one draw, copied to its second place: in a
 * full cache it is passed over once, not kept as if drawn a second time
 * (which would forget what another request keeps for a value no request
 * may ask for again); drawn again in a later call, it is kept. So in a
 * long text too, whose places are looked up a batch at a time. */
static void test_a_word_twice_is_one_draw(void **state)
{
    (void)state;
    struct drawn_cache c;
    /* room for one 16-wide token entry: under 2 * (about 160) bytes */
    drawn_cache_init(&c, 195);
    char a[] = "a", b[] = "b";
    char *first[] = {a}, *twice[] = {b, a, b};
    float got[3 * 16], want[3 * 16];
    drawn_embed_tokens(&c, first, 1, 3, 16, got);
    struct drawn_cache_stats s;
    drawn_cache_stats(&c, &s);
    assert_int_equal(s.entries, 1);
    drawn_embed_tokens(&c, twice, 3, 3, 16, got);
    for (size_t t = 0; t < 3; t++)
        attn_embed_token(twice[t], 1, 3, 16, want + t * 16);
    assert_memory_equal(got, want, sizeof want);
    drawn_cache_stats(&c, &s);
    assert_int_equal(s.hits[DRAWN_TOKEN], 1);   /* "a" */
    assert_int_equal(s.misses[DRAWN_TOKEN], 2); /* "b", once */
    assert_int_equal(s.passes, 1);
    assert_int_equal(s.evictions, 0);
    drawn_embed_tokens(&c, twice, 1, 3, 16, got); /* "b" again: kept */
    drawn_cache_stats(&c, &s);
    assert_int_equal(s.passes, 1);
    assert_int_equal(s.evictions, 1);
    assert_int_equal(s.entries, 1);

    /* 300 places, "x" at the first and the last, "b" (kept) between */
    enum { LONG = 300 };
    char x[] = "x";
    char *text[LONG];
    for (size_t t = 0; t < LONG; t++)
        text[t] = t == 0 || t == LONG - 1 ? x : b;
    float *long_got = malloc(LONG * 16 * sizeof *long_got);
    assert_non_null(long_got);
    drawn_embed_tokens(&c, text, LONG, 3, 16, long_got);
    attn_embed_token("x", 1, 3, 16, want);
    assert_memory_equal(long_got, want, 16 * sizeof(float));
    assert_memory_equal(long_got + (LONG - 1) * 16, want, 16 * sizeof(float));
    drawn_cache_stats(&c, &s);
    assert_int_equal(s.passes, 2);    /* "x", once */
    assert_int_equal(s.evictions, 1); /* "b" stays */
    /* what the long text's list of its places took, to be reserved */
    assert_int_equal(drawn_embed_tokens_scratch(9), 0);
    assert_true(drawn_embed_tokens_scratch(LONG) > LONG * 2 * sizeof(uint32_t));
    free(long_got);
    drawn_cache_free(&c);
}

/* What a full cache remembers of a value it passed over: a value that is
 * kept already is neither counted as passed nor remembered (a word twice
 * in one call); and a second draw that finds no room beside the leases
 * stays remembered, so that the next draw keeps it once they end. */
static void test_what_passing_over_remembers(void **state)
{
    (void)state;
    struct drawn_cache c;
    /* room for one 16-wide token entry: under 2 * (about 160) bytes */
    drawn_cache_init(&c, 195);
    char a[] = "a";
    char *twice[] = {a, a};
    float got[2 * 16];
    drawn_embed_tokens(&c, twice, 2, 3, 16, got);
    struct drawn_cache_stats s;
    drawn_cache_stats(&c, &s);
    assert_int_equal(s.entries, 1);
    assert_int_equal(s.passes, 0);
    drawn_cache_free(&c);

    struct attn_params p[2];
    struct drawn_lease l[2];
    const size_t dim = hold_two_seeds(&c, p, l) / sizeof(float) + 16;
    struct drawn_cache_stats held;
    drawn_cache_stats(&c, &held);
    float *out = malloc(dim * sizeof *out);
    assert_non_null(out);
    char t0[] = "t0";
    char *word[] = {t0};
    for (int draw = 0; draw < 2; draw++) /* passed, then no room */
        drawn_embed_tokens(&c, word, 1, 9, dim, out);
    drawn_cache_stats(&c, &s);
    assert_int_equal(s.entries, held.entries);
    assert_int_equal(s.passes, held.passes + 1);
    for (int i = 0; i < 2; i++)
        drawn_lease_end(&l[i]);
    drawn_embed_tokens(&c, word, 1, 9, dim, out); /* the third: kept */
    drawn_cache_stats(&c, &s);
    assert_int_equal(s.passes, held.passes + 1);
    assert_true(s.evictions > held.evictions);
    const uint64_t hits = s.hits[DRAWN_TOKEN];
    drawn_embed_tokens(&c, word, 1, 9, dim, out);
    drawn_cache_stats(&c, &s);
    assert_int_equal(s.hits[DRAWN_TOKEN], hits + 1);
    free(out);
    drawn_cache_free(&c);
}

/* With leases holding most of the cap, a token whose entry does not fit
 * in the room left is drawn for its request alone (the same values), and
 * nothing held is forgotten to make room: the cache never over its cap,
 * even while held. Once the leases end, room is made again. */
static void test_no_room_beside_held(void **state)
{
    (void)state;
    struct drawn_cache c;
    struct attn_params p[2];
    struct drawn_lease l[2];
    /* each token's values alone larger than the room left */
    const size_t dim = hold_two_seeds(&c, p, l) / sizeof(float) + 16;
    struct drawn_cache_stats before;
    drawn_cache_stats(&c, &before);
    enum { WORDS = 20 };
    char text[WORDS][8];
    char *words[WORDS];
    float *want = malloc(WORDS * dim * sizeof *want);
    float *got = malloc(WORDS * dim * sizeof *got);
    for (size_t t = 0; t < WORDS; t++) {
        snprintf(text[t], sizeof text[t], "t%zu", t);
        words[t] = text[t];
        attn_embed_token(words[t], strlen(words[t]), 9, dim, want + t * dim);
    }
    drawn_embed_tokens(&c, words, WORDS, 9, dim, got);
    assert_memory_equal(got, want, WORDS * dim * sizeof *got);
    struct drawn_cache_stats s;
    drawn_cache_stats(&c, &s);
    assert_int_equal(s.bytes, before.bytes); /* none kept */
    assert_int_equal(s.entries, before.entries);
    assert_int_equal(s.evictions, before.evictions); /* none held forgotten */
    for (int i = 0; i < 2; i++) {
        const struct attn_config cfg = config((uint64_t)i + 1, 32, 4);
        same_as_drawn(&cfg, &p[i]); /* intact */
        drawn_lease_end(&l[i]);
    }
    /* no longer held: the token makes room for itself on its next draw
     * if its first (above) is still remembered, else on the one after */
    for (int draw = 0; draw < 2; draw++) {
        drawn_embed_tokens(&c, words, 1, 9, dim, got);
        assert_memory_equal(got, want, dim * sizeof *got);
    }
    drawn_cache_stats(&c, &s);
    assert_true(s.bytes <= s.cap);
    assert_true(s.evictions > before.evictions);
    free(want);
    free(got);
    drawn_cache_free(&c);
}

/* Which of the results' arrays of want are there, each filled. */
static const float *const *result_arrays(const struct attn_result *r, size_t *n)
{
    static const float *a[8];
    a[0] = r->weights;
    a[1] = r->scores;
    a[2] = r->q;
    a[3] = r->k;
    a[4] = r->v;
    a[5] = r->heads_out;
    a[6] = r->output;
    a[7] = r->mean_weights;
    *n = 8;
    return a;
}

static void test_only_what_the_pass_reads(void **state)
{
    (void)state;
    const unsigned wants[] = {
        ATTN_WANT_WEIGHTS,
        ATTN_WANT_WEIGHTS | ATTN_WANT_SCORES | ATTN_WANT_Q | ATTN_WANT_K,
        ATTN_WANT_MEAN_WEIGHTS | ATTN_WANT_HEAD_STATS,
        ATTN_WANT_V,
        ATTN_WANT_HEADS,
        ATTN_WANT_OUTPUT,
        ATTN_WANT_WEIGHTS | ATTN_WANT_OUTPUT,
        ATTN_WANT_VALUE_WEIGHTED,
    };
    enum { N = 5, D = 16 };
    float x[N * D];
    for (size_t i = 0; i < N * D; i++)
        x[i] = (float)sin(0.37 * (double)i);
    struct drawn_cache c;
    drawn_cache_init(&c, (size_t)1 << 20);
    for (size_t w = 0; w < sizeof wants / sizeof *wants; w++)
        for (int variant = 0; variant < 4; variant++) {
            struct attn_config cfg = {.n_query = N,
                                      .d_model = D,
                                      .heads = 4,
                                      .seed = 100 + w,
                                      .want = wants[w]};
            cfg.qkv_bias = cfg.out_bias = variant & 1;
            cfg.bias_kv = variant == 3;
            cfg.residual =
                variant == 2 ? ATTN_RESIDUAL_VALUE : ATTN_RESIDUAL_NONE;
            cfg.causal = variant == 3;
            struct attn_error err;
            assert_int_equal(attn_config_resolve(&cfg, &err), ATTN_OK);
            const unsigned slots = drawn_params_needed(&cfg);
            const bool weights_alone =
                !(cfg.want &
                  ~(ATTN_WANT_WEIGHTS | ATTN_WANT_SCORES | ATTN_WANT_Q |
                    ATTN_WANT_K | ATTN_WANT_MEAN_WEIGHTS |
                    ATTN_WANT_HEAD_STATS)) &&
                cfg.residual != ATTN_RESIDUAL_VALUE;
            if (weights_alone)
                assert_int_equal(
                    slots & (1u << ATTN_PARAM_WV | 1u << ATTN_PARAM_WO), 0);
            struct attn_params some, all;
            struct drawn_lease ls, la;
            assert_true(
                drawn_params_lease_some(&c, &cfg, slots, &some, &ls, &err));
            for (int s = 0; s < ATTN_PARAM_COUNT; s++)
                if (!(slots & 1u << s))
                    assert_null(
                        attn_params_tensor(&some, (enum attn_param_slot)s));
            struct attn_result r1, r2;
            cfg.params = &some;
            cfg.params_checked = true;
            assert_int_equal(attn_forward(&cfg, x, NULL, &r1, &err), ATTN_OK);
            /* then all of them: the ones taken found again, the others
             * drawn now, every one as attn_params_draw() draws it */
            assert_true(drawn_params_lease(&c, &cfg, &all, &la, &err));
            same_as_drawn(&cfg, &all);
            if (some.wq)
                assert_ptr_equal(some.wq, all.wq);
            cfg.params = &all;
            assert_int_equal(attn_forward(&cfg, x, NULL, &r2, &err), ATTN_OK);
            size_t n1, n2;
            const float *const *a1 = result_arrays(&r1, &n1);
            const float *got[8];
            memcpy(got, a1, sizeof got);
            const float *const *a2 = result_arrays(&r2, &n2);
            const size_t m = r2.n_keys;
            const size_t sizes[8] = {4 * N * m, 4 * N * m, N * D, N * D,
                                     m * D,     N * D,     N * D, N * m};
            for (size_t i = 0; i < n2; i++) {
                assert_true((got[i] == NULL) == (a2[i] == NULL));
                if (got[i])
                    assert_memory_equal(got[i], a2[i],
                                        sizes[i] * sizeof(float));
            }
            attn_result_free(&r1);
            attn_result_free(&r2);
            drawn_lease_end(&ls);
            drawn_lease_end(&la);
        }
    drawn_cache_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lends_what_is_drawn_and_finds_it_again),
        cmocka_unit_test(test_within_cap_and_never_a_held_one),
        cmocka_unit_test(test_over_the_cap_or_off_is_drawn_alone),
        cmocka_unit_test(test_token_embeddings),
        cmocka_unit_test(test_many_small_entries),
        cmocka_unit_test(test_one_off_seeds_pass_through),
        cmocka_unit_test(test_a_word_twice_is_one_draw),
        cmocka_unit_test(test_what_passing_over_remembers),
        cmocka_unit_test(test_no_room_beside_held),
        cmocka_unit_test(test_only_what_the_pass_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
