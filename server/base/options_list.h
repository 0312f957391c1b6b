/*
 * options_list.h - the checkpoints to load, "NAME=DIR" each, as --model
 * and ATTND_MODELS give them: what options.c collects into struct options
 * and models_load() reads, kept below both.
 */
#ifndef ATTND_OPTIONS_LIST_H
#define ATTND_OPTIONS_LIST_H

#include <stddef.h>

/* --model NAME=DIR: at most this many, each this long */
#define OPTIONS_MAX_MODELS 16
#define OPTIONS_MODEL_SPEC 1152

/* In the order given. */
struct options_list {
    char item[OPTIONS_MAX_MODELS][OPTIONS_MODEL_SPEC];
    size_t count;
};

#endif
