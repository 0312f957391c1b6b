/*
 * config.c - defaults and validation of struct attn_config.
 *
 * Every later stage trusts what this file accepted: after
 * attn_config_resolve() every size is nonzero, consistent, and every
 * product the forward pass will form fits in size_t.
 */
#include "attention.h"
#include "checked.h"
#include "error.h"

#include <limits.h>
#include <math.h>

#define DEFAULT_ROPE_BASE 10000.0

const char *attn_mode_name(int mode)
{
    static const char *const names[] = {"projected", "basic"};
    return mode >= 0 && mode < 2 ? names[mode] : NULL;
}

const char *attn_residual_name(int residual)
{
    static const char *const names[] = {"none", "value", "input"};
    return residual >= 0 && residual < 3 ? names[residual] : NULL;
}

const char *attn_positional_name(int positional)
{
    static const char *const names[] = {"none", "sinusoidal", "rope"};
    return positional >= 0 && positional < 3 ? names[positional] : NULL;
}

float attn_config_scale(const struct attn_config *cfg)
{
    if (cfg->has_scale)
        return cfg->scale;
    return cfg->mode == ATTN_MODE_BASIC ? 1.0f
                                        : (float)(1.0 / sqrt((double)cfg->d_k));
}

/* A per-head size left 0 defaults to d_model / heads, which must divide. */
static attn_status resolve_head_size(size_t *size, const char *field,
                                     size_t d_model, size_t heads,
                                     struct attn_error *err)
{
    if (*size)
        return ATTN_OK;
    if (d_model % heads)
        return attn_fail(err, ATTN_E_INVALID, "heads",
                         "heads (%zu) must divide d_model (%zu) when %s is "
                         "not given",
                         heads, d_model, field);
    *size = d_model / heads;
    return ATTN_OK;
}

static attn_status resolve_shapes(struct attn_config *cfg,
                                  struct attn_error *err)
{
    if (cfg->batch == 0)
        cfg->batch = 1;
    if (cfg->n_query == 0)
        return attn_fail(err, ATTN_E_INVALID, "n_query",
                         "n_query (0): the input has no tokens; at least 1 "
                         "is needed");
    if (cfg->d_model == 0)
        return attn_fail(err, ATTN_E_INVALID, "d_model",
                         "d_model (0) must be at least 1");
    if (!cfg->cross) {
        if (cfg->n_ctx && cfg->n_ctx != cfg->n_query)
            return attn_fail(err, ATTN_E_INVALID, "n_ctx",
                             "n_ctx (%zu) must equal n_query (%zu) in "
                             "self-attention",
                             cfg->n_ctx, cfg->n_query);
        if (cfg->d_ctx && cfg->d_ctx != cfg->d_model)
            return attn_fail(err, ATTN_E_INVALID, "d_ctx",
                             "d_ctx (%zu) must equal d_model (%zu) in "
                             "self-attention",
                             cfg->d_ctx, cfg->d_model);
        cfg->n_ctx = cfg->n_query;
        cfg->d_ctx = cfg->d_model;
    } else {
        if (cfg->n_ctx == 0)
            return attn_fail(err, ATTN_E_INVALID, "n_ctx",
                             "n_ctx (0): the context has no tokens; at least "
                             "1 is needed");
        if (cfg->d_ctx == 0)
            cfg->d_ctx = cfg->d_model;
    }
    if (!cfg->value) {
        if (cfg->d_value && cfg->d_value != cfg->d_ctx)
            return attn_fail(err, ATTN_E_INVALID, "d_value",
                             "d_value (%zu) must equal the context's width "
                             "(%zu) without a value input",
                             cfg->d_value, cfg->d_ctx);
        cfg->d_value = cfg->d_ctx;
        return ATTN_OK;
    }
    if (!cfg->cross)
        return attn_fail(err, ATTN_E_INVALID, "value",
                         "a value input needs a context: keys come from the "
                         "context, values from the value input");
    if (cfg->d_value == 0)
        return attn_fail(err, ATTN_E_INVALID, "d_value",
                         "d_value (0): the value input has no width");
    if (cfg->mode != ATTN_MODE_PROJECTED)
        return attn_fail(err, ATTN_E_INVALID, "value",
                         "a value input needs mode projected: mode basic "
                         "takes V as the context itself");
    if (cfg->positional == ATTN_POS_SINUSOIDAL)
        return attn_fail(err, ATTN_E_INVALID, "value",
                         "a value input cannot take positional "
                         "\"sinusoidal\": positions would be added to the "
                         "keys' rows and not to the values'");
    return ATTN_OK;
}

static attn_status resolve_basic(struct attn_config *cfg,
                                 struct attn_error *err)
{
    if (cfg->heads == 0)
        cfg->heads = 1;
    if (cfg->heads != 1)
        return attn_fail(err, ATTN_E_INVALID, "heads",
                         "heads (%zu) must be 1 in mode basic", cfg->heads);
    if (cfg->kv_heads == 0)
        cfg->kv_heads = 1;
    if (cfg->kv_heads != 1)
        return attn_fail(err, ATTN_E_INVALID, "kv_heads",
                         "kv_heads (%zu) must be 1 in mode basic",
                         cfg->kv_heads);
    if (cfg->d_ctx != cfg->d_model)
        return attn_fail(err, ATTN_E_INVALID, "context",
                         "the context's width (%zu) must equal d_model (%zu) "
                         "in mode basic",
                         cfg->d_ctx, cfg->d_model);
    const struct {
        size_t *size;
        const char *name;
    } same[] = {{&cfg->d_k, "d_k"}, {&cfg->d_v, "d_v"}, {&cfg->d_out, "d_out"}};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        if (*same[i].size && *same[i].size != cfg->d_model)
            return attn_fail(err, ATTN_E_INVALID, same[i].name,
                             "%s (%zu) must equal d_model (%zu) in mode basic",
                             same[i].name, *same[i].size, cfg->d_model);
        *same[i].size = cfg->d_model;
    }
    if (cfg->params)
        return attn_fail(err, ATTN_E_INVALID, "params",
                         "params are not used in mode basic");
    if (cfg->positional == ATTN_POS_ROPE)
        return attn_fail(err, ATTN_E_INVALID, "positional",
                         "positional 'rope' rotates projected queries and "
                         "keys; it needs mode projected");
    /* the appended keys are rows of projected K and V */
    if (cfg->bias_kv)
        return attn_fail(err, ATTN_E_INVALID, "bias_kv",
                         "bias_k and bias_v are appended to projected keys "
                         "and values; they need mode projected");
    if (cfg->zero_attn)
        return attn_fail(err, ATTN_E_INVALID, "add_zero_attn",
                         "add_zero_attn appends a zero key to projected keys; "
                         "it needs mode projected");
    return ATTN_OK;
}

/* The rotary options, defaults filled in: a known pairing, an even count
 * of dims within the head, a base above 1 and a finite factor above 0,
 * and frequencies (when given) finite and above 0. */
void attn_rotary_defaults(struct attn_rotary *r, size_t d_k)
{
    if (r->dims == 0)
        r->dims = d_k;
    if (r->base == 0.0)
        r->base = DEFAULT_ROPE_BASE;
    if (r->factor == 0.0)
        r->factor = 1.0;
}

static attn_status resolve_rotary(struct attn_config *cfg,
                                  struct attn_error *err)
{
    struct attn_rotary *r = &cfg->rope;
    if (r->pairing != ATTN_ROPE_INTERLEAVED && r->pairing != ATTN_ROPE_HALF)
        return attn_fail(err, ATTN_E_INVALID, "rope_pairing",
                         "rope_pairing (%d) is unknown", (int)r->pairing);
    if (cfg->positional != ATTN_POS_ROPE) {
        if (r->inv_freq || r->dims)
            return attn_fail(err, ATTN_E_INVALID,
                             r->inv_freq ? "rope_inv_freq" : "rope_dims",
                             "%s is for positional 'rope'",
                             r->inv_freq ? "rope_inv_freq" : "rope_dims");
        return ATTN_OK;
    }
    attn_rotary_defaults(r, cfg->d_k);
    if (r->dims > cfg->d_k || r->dims % 2)
        return attn_fail(err, ATTN_E_INVALID, "rope_dims",
                         "rope_dims (%zu) must be even and at most d_k (%zu)",
                         r->dims, cfg->d_k);
    if (!(isfinite(r->base) && r->base > 1.0))
        return attn_fail(err, ATTN_E_INVALID, "rope_base",
                         "rope_base (%g) must be a finite number above 1",
                         r->base);
    if (!(isfinite(r->factor) && r->factor > 0.0))
        return attn_fail(err, ATTN_E_INVALID, "rope_factor",
                         "rope_factor (%g) must be finite and above 0",
                         r->factor);
    if (!r->inv_freq)
        return ATTN_OK;
    for (size_t i = 0; i < r->dims / 2; i++)
        if (!(isfinite(r->inv_freq[i]) && r->inv_freq[i] > 0.0))
            return attn_fail_at(err, ATTN_E_INVALID, "rope_inv_freq", 1, &i,
                                "rope_inv_freq[%zu] (%g) must be finite and "
                                "above 0",
                                i, r->inv_freq[i]);
    return ATTN_OK;
}

static attn_status resolve_projected(struct attn_config *cfg,
                                     struct attn_error *err)
{
    if (cfg->heads == 0)
        cfg->heads = ATTN_DEFAULT_HEADS;
    if (cfg->kv_heads == 0)
        cfg->kv_heads = cfg->heads;
    if (cfg->kv_heads > cfg->heads || cfg->heads % cfg->kv_heads)
        return attn_fail(err, ATTN_E_INVALID, "kv_heads",
                         "kv_heads (%zu) must divide heads (%zu)",
                         cfg->kv_heads, cfg->heads);
    attn_status st =
        resolve_head_size(&cfg->d_k, "d_k", cfg->d_model, cfg->heads, err);
    if (st)
        return st;
    st = resolve_head_size(&cfg->d_v, "d_v", cfg->d_model, cfg->heads, err);
    if (st)
        return st;
    if (cfg->positional == ATTN_POS_ROPE && cfg->d_k % 2)
        return attn_fail(err, ATTN_E_INVALID, "d_k",
                         "positional 'rope' rotates pairs, so d_k (%zu) must "
                         "be even",
                         cfg->d_k);
    st = resolve_rotary(cfg, err);
    if (st)
        return st;
    if (cfg->window && !cfg->causal)
        return attn_fail(err, ATTN_E_INVALID, "window",
                         "a sliding window (%zu) slides over causal "
                         "attention: it needs causal",
                         cfg->window);
    if (cfg->qk_norm && cfg->qk_norm_whole)
        return attn_fail(err, ATTN_E_INVALID, "qk_norm_whole",
                         "qk_norm norms each head of q and k and "
                         "qk_norm_whole each projection whole: one or the "
                         "other");
    if ((cfg->qk_norm || cfg->qk_norm_whole) &&
        !(isfinite(cfg->qk_norm_eps) && cfg->qk_norm_eps > 0.0f))
        return attn_fail(err, ATTN_E_INVALID, "qk_norm_eps",
                         "qk_norm_eps (%g) must be finite and above 0",
                         (double)cfg->qk_norm_eps);

    size_t concat;
    if (!size_mul(cfg->heads, cfg->d_v, &concat))
        return attn_fail(err, ATTN_E_TOO_BIG, "heads",
                         "heads (%zu) times d_v (%zu) overflows", cfg->heads,
                         cfg->d_v);
    /* Without W_o, or with V added back, the output is as wide as the
     * concatenated heads; otherwise it keeps the model's width. */
    const bool concat_wide =
        cfg->no_out_proj || cfg->residual == ATTN_RESIDUAL_VALUE;
    if (cfg->d_out == 0)
        cfg->d_out = concat_wide ? concat : cfg->d_model;
    if (cfg->value_wo && !cfg->no_out_proj)
        return attn_fail(err, ATTN_E_INVALID, "value_wo",
                         "value_wo is for a call without its output "
                         "projection (no_out_proj)");
    if (cfg->no_out_proj && cfg->d_out != concat)
        return attn_fail(err, ATTN_E_INVALID, "d_out",
                         "d_out (%zu) must equal heads * d_v (%zu) without an "
                         "output projection",
                         cfg->d_out, concat);
    if (cfg->residual == ATTN_RESIDUAL_VALUE && cfg->d_out != concat)
        return attn_fail(err, ATTN_E_INVALID, "d_out",
                         "residual 'value' needs d_out (%zu) to equal heads * "
                         "d_v (%zu)",
                         cfg->d_out, concat);
    return ATTN_OK;
}

static attn_status check_options(struct attn_config *cfg,
                                 struct attn_error *err)
{
    if (cfg->has_scale && !isfinite(cfg->scale))
        return attn_fail(err, ATTN_E_INVALID, "scale",
                         "scale (%g) must be a finite number",
                         (double)cfg->scale);
    if (!(cfg->dropout >= 0.0f && cfg->dropout < 1.0f))
        return attn_fail(err, ATTN_E_INVALID, "dropout",
                         "dropout (%g) must be at least 0 and below 1",
                         (double)cfg->dropout);
    if (!(isfinite(cfg->softcap) && cfg->softcap >= 0.0f))
        return attn_fail(err, ATTN_E_INVALID, "softcap",
                         "softcap (%g) must be finite and not below 0",
                         (double)cfg->softcap);
    if (cfg->residual == ATTN_RESIDUAL_INPUT && cfg->d_out != cfg->d_model)
        return attn_fail(err, ATTN_E_INVALID, "d_out",
                         "residual 'input' needs d_out (%zu) to equal d_model "
                         "(%zu)",
                         cfg->d_out, cfg->d_model);
    if (cfg->residual != ATTN_RESIDUAL_NONE && cfg->n_ctx != cfg->n_query)
        return attn_fail(err, ATTN_E_INVALID, "residual",
                         "residual '%s' needs as many context tokens (%zu) as "
                         "query tokens (%zu)",
                         attn_residual_name((int)cfg->residual), cfg->n_ctx,
                         cfg->n_query);
    if (cfg->mask_per_head && !cfg->mask && !cfg->mask_bias)
        return attn_fail(err, ATTN_E_INVALID, "mask",
                         "mask_per_head is set but there is no mask");
    if (cfg->mask_per_head)
        cfg->mask_batched = true;
    cfg->n_keys = cfg->n_ctx;
    if (!size_add_to(&cfg->n_keys,
                     (cfg->bias_kv ? 1u : 0u) + (cfg->zero_attn ? 1u : 0u)))
        return attn_fail(err, ATTN_E_TOO_BIG, "n_ctx",
                         "n_ctx (%zu) is too large", cfg->n_ctx);
    if (cfg->want == 0)
        cfg->want = ATTN_WANT_OUTPUT;
    const unsigned known = (ATTN_WANT_POOLED << 1) - 1;
    if (cfg->want & ~known)
        return attn_fail(err, ATTN_E_INVALID, "want",
                         "want (0x%x) has unknown bits", cfg->want);
    // what was computed for the core's own use last time is asked again
    cfg->want &= ~cfg->want_internal;
    cfg->want_internal = 0;
    if ((cfg->want & ATTN_WANT_TOP_K) &&
        (cfg->top_k < 1 || cfg->top_k > ATTN_MAX_TOP_K))
        return attn_fail(err, ATTN_E_INVALID, "top_k",
                         "top_k (%zu) must be 1 to %d", cfg->top_k,
                         ATTN_MAX_TOP_K);
    if (cfg->want & ATTN_WANT_POOLED) {
        // every row's and key's block, checked here so that the pass
        // writes into blocks that exist
        bool ok =
            cfg->pool_row && cfg->pool_col && cfg->pool_rows && cfg->pool_cols;
        for (size_t i = 0; ok && i < cfg->n_query; i++)
            ok = cfg->pool_row[i] == ATTN_POOL_NONE ||
                 cfg->pool_row[i] < cfg->pool_rows;
        for (size_t j = 0; ok && j < cfg->n_keys; j++)
            ok = cfg->pool_col[j] == ATTN_POOL_NONE ||
                 cfg->pool_col[j] < cfg->pool_cols;
        if (!ok)
            return attn_fail(err, ATTN_E_INVALID, "pool",
                             "pooled weights need each row's and key's block "
                             "(below %zu x %zu blocks, or ATTN_POOL_NONE)",
                             cfg->pool_rows, cfg->pool_cols);
    }
    if ((cfg->want & ATTN_WANT_INDUCTION) &&
        (cfg->cross || !cfg->repeat_period ||
         cfg->repeat_start > cfg->n_query ||
         cfg->repeat_period > (cfg->n_query - cfg->repeat_start) / 2))
        return attn_fail(err, ATTN_E_INVALID, "repeat_period",
                         "induction needs self-attention over two copies of "
                         "repeat_period (%zu) tokens from repeat_start (%zu) "
                         "in %zu",
                         cfg->repeat_period, cfg->repeat_start, cfg->n_query);
    // the value-weighted norms need the weights after dropout and V
    if (cfg->want & ATTN_WANT_VALUE_WEIGHTED) {
        if (cfg->mode != ATTN_MODE_PROJECTED)
            return attn_fail(err, ATTN_E_INVALID, "want",
                             "value_weighted needs the value and output "
                             "projections; mode basic has none");
        cfg->want_internal |= (ATTN_WANT_WEIGHTS | ATTN_WANT_V) & ~cfg->want;
    }
    cfg->want |= cfg->want_internal;
    return ATTN_OK;
}

/* Every array the forward pass may form must have a size_t element count;
 * the result as a whole must stay under the caller's cap. */
static attn_status check_sizes(const struct attn_config *cfg,
                               struct attn_error *err)
{
    /* m: the keys, context keys and appended ones */
    const size_t b = cfg->batch, n = cfg->n_query, m = cfg->n_keys;
    const size_t h = cfg->heads, g = cfg->kv_heads;
    size_t wide = cfg->d_model;
    const size_t widths[] = {cfg->d_ctx,   cfg->d_value, h * cfg->d_k,
                             h * cfg->d_v, g * cfg->d_k, g * cfg->d_v,
                             cfg->d_out};
    size_t hk, hv;
    if (!size_mul(h, cfg->d_k, &hk) || !size_mul(h, cfg->d_v, &hv))
        return attn_fail(err, ATTN_E_TOO_BIG, "heads",
                         "heads (%zu) times the head size overflows", h);
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        if (widths[i] > wide)
            wide = widths[i];
    size_t tokens = n > m ? n : m, rows, elems, total = 0;
    if (!size_mul(b, tokens, &rows) || !size_mul(rows, wide, &elems) ||
        elems > SIZE_MAX / sizeof(float) / 8)
        return attn_fail(err, ATTN_E_TOO_BIG, "n_query",
                         "batch (%zu) x tokens (%zu) x width (%zu) is too "
                         "large",
                         b, tokens, wide);
    size_t per_head;
    if (!size_mul3(b, n, m, &per_head) ||
        per_head > SIZE_MAX / sizeof(float) / 8)
        return attn_fail(err, ATTN_E_TOO_BIG, "n_query",
                         "batch (%zu) x tokens (%zu) x context tokens (%zu) "
                         "is too large",
                         b, n, m);
    /* a per-head mask holds heads times as many */
    size_t mask_elems;
    if (cfg->mask_per_head && (!size_mul(per_head, h, &mask_elems) ||
                               mask_elems > SIZE_MAX / sizeof(float) / 8))
        return attn_fail(err, ATTN_E_TOO_BIG, "mask",
                         "a per-head mask of %zu heads of %zu x %zu pairs is "
                         "too large",
                         h, n, m);

    /* OpenBLAS takes int sizes: every width and length must fit one. */
    const struct {
        const char *field;
        size_t value;
    } dims[] = {{"n_query", n},
                {"n_ctx", m},
                {"d_model", cfg->d_model},
                {"d_ctx", cfg->d_ctx},
                {"d_value", cfg->d_value},
                {"d_k", hk},
                {"d_v", hv},
                {"d_out", cfg->d_out}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].value > INT_MAX)
            return attn_fail(err, ATTN_E_TOO_BIG, dims[i].field,
                             "%s (%zu, times heads where it applies) is "
                             "larger than %d",
                             dims[i].field, dims[i].value, INT_MAX);
    /* The parameter tensors, as a projected pass would draw them. */
    struct attn_param_tensor tensors[ATTN_PARAM_COUNT];
    const size_t n_tensors = attn_params_layout(cfg, 0, tensors);
    size_t weights = 0; /* each under SIZE_MAX / 32: the sum cannot wrap */
    for (size_t i = 0; i < n_tensors; i++) {
        size_t count;
        if (!size_mul(tensors[i].rows, tensors[i].cols, &count) ||
            count > SIZE_MAX / sizeof(float) / 8)
            return attn_fail(err, ATTN_E_TOO_BIG, "d_model",
                             "%s would be %zu x %zu, too large",
                             tensors[i].name, tensors[i].rows, tensors[i].cols);
        weights += attn_param_count(&tensors[i]);
    }

    const unsigned w = cfg->want;
    size_t all_heads = 0;
    if ((w & (ATTN_WANT_WEIGHTS | ATTN_WANT_WEIGHTS_RAW | ATTN_WANT_SCORES)) &&
        (!size_mul(per_head, h, &all_heads) ||
         all_heads > SIZE_MAX / sizeof(float) / 8))
        return attn_fail(err, ATTN_E_TOO_BIG, "heads",
                         "weights for %zu heads of %zu x %zu pairs are too "
                         "large",
                         h, n, m);
    size_t top = 0, pooled = 0;
    if ((w & ATTN_WANT_POOLED) &&
        (!size_mul3(b * h, cfg->pool_rows, cfg->pool_cols, &pooled) ||
         pooled > SIZE_MAX / sizeof(float) / 8))
        return attn_fail(err, ATTN_E_TOO_BIG, "pool",
                         "%zu x %zu blocks of %zu heads are too many",
                         cfg->pool_rows, cfg->pool_cols, h);
    if ((w & ATTN_WANT_TOP_K) &&
        (!size_mul3(b * h, n, 2 * cfg->top_k + 1, &top) ||
         top > SIZE_MAX / sizeof(float) / 8))
        return attn_fail(err, ATTN_E_TOO_BIG, "top_k",
                         "top_k (%zu) keys of %zu rows of %zu heads are too "
                         "many",
                         cfg->top_k, b * n, h);
    const struct {
        unsigned bit;
        size_t count;
    } parts[] = {
        {ATTN_WANT_WEIGHTS, all_heads},
        {ATTN_WANT_WEIGHTS_RAW, all_heads},
        {ATTN_WANT_SCORES, all_heads},
        {ATTN_WANT_MEAN_WEIGHTS, per_head},
        {ATTN_WANT_Q, b * n * hk},
        {ATTN_WANT_K, b * m * g * cfg->d_k},
        {ATTN_WANT_V, b * m * g * cfg->d_v},
        {ATTN_WANT_HEADS, b * n * hv},
        {ATTN_WANT_OUTPUT, b * n * cfg->d_out},
        /* doubles, two floats' room each */
        {ATTN_WANT_HEAD_STATS, 2 * b * h * (ATTN_HEAD_STATS + m)},
        {ATTN_WANT_INDUCTION, 2 * b * h},
        /* a key and a weight each, and a count a row */
        {ATTN_WANT_TOP_K, top},
        {ATTN_WANT_POOLED, pooled},
        {ATTN_WANT_VALUE_WEIGHTED, all_heads + per_head},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if ((w & parts[i].bit) && (!size_add_to(&total, parts[i].count) ||
                                   total > SIZE_MAX / sizeof(float) / 8))
            return attn_fail(err, ATTN_E_TOO_BIG, "return",
                             "the requested arrays are too large");
    if (cfg->max_elements && total > cfg->max_elements)
        return attn_fail(err, ATTN_E_TOO_BIG, "return",
                         "the requested arrays hold %zu numbers; the limit is "
                         "%zu",
                         total, cfg->max_elements);
    if (!cfg->max_elements || cfg->mode != ATTN_MODE_PROJECTED)
        return ATTN_OK;
    /* A projected pass may also hold K and V of every sequence, returned
     * or not, and draws the weights the caller does not give: arrays as
     * large as any it returns, from the same sizes, so they meet the same
     * cap.
     * Neither sum can wrap: each term is under SIZE_MAX / 32 by the checks
     * above. */
    const size_t kv = b * m * g * (cfg->d_k + cfg->d_v);
    if (kv > cfg->max_elements)
        return attn_fail(err, ATTN_E_TOO_BIG, "kv_heads",
                         "keys and values of %zu x %zu context tokens with "
                         "kv_heads (%zu) x (d_k + d_v) (%zu) hold %zu numbers; "
                         "the limit is %zu",
                         b, m, g, cfg->d_k + cfg->d_v, kv, cfg->max_elements);
    if (!cfg->params && weights > cfg->max_elements)
        return attn_fail(err, ATTN_E_TOO_BIG, "d_model",
                         "the drawn projection weights hold %zu numbers; the "
                         "limit is %zu",
                         weights, cfg->max_elements);
    /* and so does the working memory of the pass, e.g. the queries and
     * head outputs of a whole sequence that walking keys outside queries
     * holds */
    const size_t scratch = attn_workspace_bytes(cfg) / sizeof(float);
    if (scratch > cfg->max_elements)
        return attn_fail(err, ATTN_E_TOO_BIG, "heads",
                         "the pass would hold %zu numbers of working memory "
                         "(queries and head outputs of %zu tokens with heads "
                         "(%zu) x d_k, d_v (%zu, %zu)); the limit is %zu",
                         scratch, cfg->n_query, cfg->heads, cfg->d_k, cfg->d_v,
                         cfg->max_elements);
    return ATTN_OK;
}

attn_status attn_config_resolve(struct attn_config *cfg, struct attn_error *err)
{
    if (cfg->mode != ATTN_MODE_PROJECTED && cfg->mode != ATTN_MODE_BASIC)
        return attn_fail(err, ATTN_E_INVALID, "mode", "mode (%d) is unknown",
                         (int)cfg->mode);
    if (cfg->positional != ATTN_POS_NONE &&
        cfg->positional != ATTN_POS_SINUSOIDAL &&
        cfg->positional != ATTN_POS_ROPE)
        return attn_fail(err, ATTN_E_INVALID, "positional",
                         "positional (%d) is unknown", (int)cfg->positional);
    if (cfg->residual != ATTN_RESIDUAL_NONE &&
        cfg->residual != ATTN_RESIDUAL_VALUE &&
        cfg->residual != ATTN_RESIDUAL_INPUT)
        return attn_fail(err, ATTN_E_INVALID, "residual",
                         "residual (%d) is unknown", (int)cfg->residual);
    attn_status st = resolve_shapes(cfg, err);
    if (st)
        return st;
    st = cfg->mode == ATTN_MODE_BASIC ? resolve_basic(cfg, err)
                                      : resolve_projected(cfg, err);
    if (st)
        return st;
    st = check_options(cfg, err);
    if (st)
        return st;
    st = check_sizes(cfg, err);
    cfg->resolved = st == ATTN_OK;
    return st;
}
