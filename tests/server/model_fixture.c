/*
 * model_fixture.c - a loaded model and the limits for the server's unit
 * tests (model_fixture.h).
 */
#include "model_fixture.h"
#include "heatmap.h"
#include "models.h"

#include <stdio.h>

static struct models models;

struct request_limits fixture_limits = {
    .max_tokens = 64, .max_dim = 256, .max_heads = 16, .max_output = 1 << 20};

int model_fixture_setup(void **state)
{
    (void)state;
    static struct options_list specs = {.item = {"f32=tests/models/f32"},
                                        .count = 1};
    char err[512];
    if (!models_load(&models, &specs, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    fixture_limits.models = &models;
    if (heatmap_font_init(NULL, err, sizeof err) != DRAW_OK) {
        fprintf(stderr, "heatmap_font_init: %s\n", err);
        return -1;
    }
    return 0;
}

int model_fixture_teardown(void **state)
{
    (void)state;
    models_free(&models);
    heatmap_font_free();
    return 0;
}
