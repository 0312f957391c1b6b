/*
 * options.h - the server's settings: every limit is a flag and an ATTND_*
 * environment variable (the flag wins), listed by --help.
 */
#ifndef ATTND_OPTIONS_H
#define ATTND_OPTIONS_H

#include "options_list.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct options {
    char bind[64];
    unsigned port;
    unsigned threads; /* compute slots, one core each */
    size_t max_body;  /* bytes */
    size_t max_tokens;
    size_t max_dim;
    size_t max_heads;
    size_t max_output;  /* floats in one response */
    size_t max_flops;   /* estimated floating-point operations of one request */
    size_t max_memory;  /* bytes all requests together may hold */
    size_t drawn_cache; /* bytes of values drawn from seeds kept; 0: none */
    unsigned timeout;   /* seconds a connection may stay idle */
    unsigned receive;   /* seconds to receive a whole request */
    unsigned max_connections;  /* open connections in all */
    unsigned max_conns_per_ip; /* open connections from one client address */
    size_t max_queue;          /* requests waiting for a compute slot */
    size_t max_batch;          /* generations decoded together at most */
    size_t batch_queue;        /* generations that may wait for a place */
    unsigned batch_wait;       /* seconds one may wait */
    unsigned drain;            /* seconds a stop gives computations in flight */
    char api_key[256];         /* "" = none */
    char web_root[1024];
    char font[1024];
    bool quiet;          /* no access log */
    char probe_url[512]; /* --probe: check a URL and exit */
    /* the checkpoints to load, "NAME=DIR" each, in the order given */
    struct options_list models;
};

enum options_result { OPTIONS_RUN, OPTIONS_EXIT_OK, OPTIONS_EXIT_ERROR };

/* Defaults, then environment, then argv. Messages go to err. */
enum options_result options_load(struct options *o, int argc, char **argv,
                                 FILE *out, FILE *err);

#endif
