/*
 * options.c - flags and ATTND_* variables, from one table so that --help,
 * the environment and argv can never disagree.
 */
#include "options.h"
#include "budget.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef ATTND_FONT
#define ATTND_FONT "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
#endif

/* K_LIST: a repeatable flag into a struct options_list; its variable is
 * the plural (--model: ATTND_MODELS) and holds the items separated by
 * commas. The flag wins: any item on the command line replaces the
 * variable's list. */
enum kind { K_STRING, K_SIZE, K_UINT, K_BOOL, K_LIST };

struct flag {
    const char *name; /* --name; the variable is ATTND_NAME */
    enum kind kind;
    size_t offset;
    size_t size;   /* of the string field */
    size_t lo, hi; /* numeric range */
    const char *help;
};

#define FIELD(f) offsetof(struct options, f), sizeof(((struct options *)0)->f)

static const struct flag flags[] = {
    {"bind", K_STRING, FIELD(bind), 0, 0, "address to listen on"},
    {"port", K_UINT, FIELD(port), 0, 65535, "TCP port (0: any free port)"},
    {"threads", K_UINT, FIELD(threads), 1, 256,
     "computations at once, one core each (default: the core count)"},
    {"max-body", K_SIZE, FIELD(max_body), 1024, SIZE_MAX / 2,
     "largest request body in bytes"},
    {"max-tokens", K_SIZE, FIELD(max_tokens), 1, 1u << 20,
     "most tokens in one sequence"},
    {"max-dim", K_SIZE, FIELD(max_dim), 1, 1u << 20,
     "largest d_model, d_k, d_v, d_out or embedding width"},
    {"max-heads", K_SIZE, FIELD(max_heads), 1, 1u << 16, "most heads"},
    {"max-output", K_SIZE, FIELD(max_output), 1, SIZE_MAX / 64,
     "most numbers in one response"},
    {"max-flops", K_SIZE, FIELD(max_flops), 1000000, SIZE_MAX / 2,
     "most floating-point operations one request may cost (estimated)"},
    {"max-memory", K_SIZE, FIELD(max_memory), (size_t)16 << 20, SIZE_MAX / 2,
     "bytes all requests together may hold (default: half the machine's "
     "memory)"},
    {"drawn-cache", K_SIZE, FIELD(drawn_cache), 0, SIZE_MAX / 2,
     "bytes of values drawn from seeds (parameters, token embeddings) kept "
     "for later requests (0: none)"},
    {"timeout", K_UINT, FIELD(timeout), 1, 86400,
     "seconds a connection may stay idle"},
    {"receive-seconds", K_UINT, FIELD(receive), 1, 86400,
     "seconds a client has to send a whole request, headers and body, "
     "from the moment the connection may carry it"},
    {"max-connections", K_UINT, FIELD(max_connections), 1, 1u << 20,
     "open connections in all (lowered to what the file limit allows)"},
    {"max-conns-per-ip", K_UINT, FIELD(max_conns_per_ip), 1, 65535,
     "open connections one client address may hold"},
    {"max-queue", K_SIZE, FIELD(max_queue), 0, 1u << 20,
     "requests that may wait for a computation slot before 503"},
    {"max-batch", K_SIZE, FIELD(max_batch), 1, 4096,
     "generations in flight at once, decoded together: each step reads "
     "the weights once for all of them"},
    {"batch-queue", K_SIZE, FIELD(batch_queue), 0, 1u << 20,
     "generations that may wait for a place in the batch before 503"},
    {"batch-wait-seconds", K_UINT, FIELD(batch_wait), 1, 3600,
     "seconds a generation may wait for a place in the batch before 503"},
    {"drain-seconds", K_UINT, FIELD(drain), 0, 3600,
     "on SIGTERM, seconds computations in flight may finish before they "
     "are cancelled"},
    {"api-key", K_STRING, FIELD(api_key), 0, 0,
     "bearer token required on /attention (default: none)"},
    {"web-root", K_STRING, FIELD(web_root), 0, 0, "directory of the web page"},
    {"font", K_STRING, FIELD(font), 0, 0, "TrueType font for image labels"},
    {"quiet", K_BOOL, FIELD(quiet), 0, 1, "no access log"},
    {"model", K_LIST, FIELD(models), 0, 0,
     "NAME=DIR: load the checkpoint in DIR (or the GGUF file DIR names) as "
     "model NAME; repeatable, the "
     "variable lists them separated by commas; without one, random weights "
     "only"},
};
enum { N_FLAGS = sizeof flags / sizeof flags[0] };

static void defaults(struct options *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->bind, sizeof o->bind, "127.0.0.1");
    o->port = 8080;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = cores > 0 ? (unsigned)cores : 1;
    o->max_body = (size_t)32 << 20;
    o->max_tokens = 4096;
    o->max_dim = 4096;
    o->max_heads = 128;
    o->max_output = (size_t)64 << 20;
    o->max_flops = (size_t)1000000000000; /* ~10 s of one core */
    o->max_memory = budget_default_limit();
    o->drawn_cache = (size_t)64 << 20;
    o->timeout = 30;
    o->receive = 60;
    o->max_connections = 1024;
    o->max_conns_per_ip = 64;
    o->max_queue = 64;
    o->max_batch = 16;
    o->batch_queue = 64;
    o->batch_wait = 30;
    o->drain = 8;
    snprintf(o->web_root, sizeof o->web_root, "web");
    snprintf(o->font, sizeof o->font, "%s", ATTND_FONT);
}

/* The variable of flag f: f->var, or ATTND_ and its name in capitals. */
static void variable_of(const struct flag *f, char var[48])
{
    size_t at = (size_t)snprintf(var, 48, "ATTND_");
    for (size_t k = 0; f->name[k] && at + 2 < 48; k++)
        var[at++] = f->name[k] == '-' ? '_' : (char)toupper(f->name[k]);
    if (f->kind == K_LIST)
        var[at++] = 'S';
    var[at] = '\0';
}

static void usage(FILE *out)
{
    struct options d;
    defaults(&d);
    fprintf(out,
            "usage: attnd [options]\n"
            "       attnd --probe URL   (GET URL on this host; exit 0 on "
            "2xx: a health check)\n\n"
            "Every option can also be set by an environment variable, e.g. "
            "--max-body by\nATTND_MAX_BODY; the flag wins.\n\n");
    for (int i = 0; i < N_FLAGS; i++) {
        const struct flag *f = &flags[i];
        char var[48] = "";
        variable_of(f, var);
        const char *p = (const char *)&d + f->offset;
        char shown[1100];
        switch (f->kind) {
        case K_STRING: snprintf(shown, sizeof shown, "\"%s\"", p); break;
        case K_SIZE:
            snprintf(shown, sizeof shown, "%zu",
                     *(const size_t *)(const void *)p);
            break;
        case K_UINT:
            snprintf(shown, sizeof shown, "%u",
                     *(const unsigned *)(const void *)p);
            break;
        case K_BOOL: snprintf(shown, sizeof shown, "off"); break;
        case K_LIST: snprintf(shown, sizeof shown, "none"); break;
        }
        fprintf(out, "  --%-12s %-22s %s (default %s)\n", f->name, var, f->help,
                shown);
    }
}

/* Set flag f from text; false with a message when the value is bad. */
static bool set_value(struct options *o, const struct flag *f,
                      const char *value, const char *source, FILE *err)
{
    char *p = (char *)o + f->offset;
    if (f->kind == K_LIST) {
        struct options_list *list = (struct options_list *)(void *)p;
        if (list->count == OPTIONS_MAX_MODELS) {
            fprintf(err, "attnd: %s: more than %d items\n", source,
                    OPTIONS_MAX_MODELS);
            return false;
        }
        if (strlen(value) >= sizeof list->item[0]) {
            fprintf(err, "attnd: %s: an item is longer than %zu bytes\n",
                    source, sizeof list->item[0] - 1);
            return false;
        }
        snprintf(list->item[list->count++], sizeof list->item[0], "%s", value);
        return true;
    }
    if (f->kind == K_STRING) {
        if (strlen(value) >= f->size) {
            fprintf(err, "attnd: %s: value is longer than %zu bytes\n", source,
                    f->size - 1);
            return false;
        }
        snprintf(p, f->size, "%s", value);
        return true;
    }
    if (f->kind == K_BOOL) {
        const bool on = !strcmp(value, "1") || !strcmp(value, "true");
        if (!on && strcmp(value, "0") && strcmp(value, "false")) {
            fprintf(err, "attnd: %s (\"%s\") must be true or false\n", source,
                    value);
            return false;
        }
        *(bool *)(void *)p = on;
        return true;
    }
    char *end = NULL;
    errno = 0;
    const unsigned long long v = strtoull(value, &end, 10);
    if (!*value || *end || *value == '-' || errno == ERANGE || v < f->lo ||
        v > f->hi) {
        fprintf(err, "attnd: %s (\"%s\") must be an integer from %zu to %zu\n",
                source, value, f->lo, f->hi);
        return false;
    }
    if (f->kind == K_SIZE)
        *(size_t *)(void *)p = (size_t)v;
    else
        *(unsigned *)(void *)p = (unsigned)v;
    return true;
}

/* A list from a variable: items separated by commas. */
static bool set_list(struct options *o, const struct flag *f, const char *text,
                     const char *source, FILE *err)
{
    while (*text) {
        const char *comma = strchr(text, ',');
        const size_t len = comma ? (size_t)(comma - text) : strlen(text);
        if (len >= OPTIONS_MODEL_SPEC) {
            fprintf(err, "attnd: %s: an item is longer than %d bytes\n", source,
                    OPTIONS_MODEL_SPEC - 1);
            return false;
        }
        char item[OPTIONS_MODEL_SPEC];
        snprintf(item, sizeof item, "%.*s", (int)len, text);
        if (len && !set_value(o, f, item, source, err))
            return false;
        text += len + (comma ? 1 : 0);
    }
    return true;
}

enum options_result options_load(struct options *o, int argc, char **argv,
                                 FILE *out, FILE *err)
{
    defaults(o);
    for (int i = 0; i < N_FLAGS; i++) {
        char var[48] = "";
        variable_of(&flags[i], var);
        const char *v = getenv(var);
        if (v && *v && flags[i].kind == K_LIST) {
            if (!set_list(o, &flags[i], v, var, err))
                return OPTIONS_EXIT_ERROR;
        } else if (v && *v && !set_value(o, &flags[i], v, var, err)) {
            return OPTIONS_EXIT_ERROR;
        }
    }
    bool list_on_argv[N_FLAGS] = {false};
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            usage(out);
            return OPTIONS_EXIT_OK;
        }
        if (!strcmp(arg, "--probe")) {
            if (a + 1 >= argc) {
                fprintf(err, "attnd: --probe needs a URL\n");
                return OPTIONS_EXIT_ERROR;
            }
            snprintf(o->probe_url, sizeof o->probe_url, "%s", argv[++a]);
            continue;
        }
        if (strncmp(arg, "--", 2)) {
            fprintf(err, "attnd: unexpected argument \"%s\" (see --help)\n",
                    arg);
            return OPTIONS_EXIT_ERROR;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        const size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const struct flag *f = NULL;
        for (int i = 0; i < N_FLAGS && !f; i++)
            if (strlen(flags[i].name) == len &&
                !strncmp(flags[i].name, name, len))
                f = &flags[i];
        if (!f) {
            fprintf(err, "attnd: unknown option \"%s\" (see --help)\n", arg);
            return OPTIONS_EXIT_ERROR;
        }
        const char *value = eq ? eq + 1 : NULL;
        if (!value && f->kind == K_BOOL)
            value = "true";
        if (!value) {
            if (a + 1 >= argc) {
                fprintf(err, "attnd: --%s needs a value\n", f->name);
                return OPTIONS_EXIT_ERROR;
            }
            value = argv[++a];
        }
        char source[64];
        snprintf(source, sizeof source, "--%s", f->name);
        if (f->kind == K_LIST && !list_on_argv[f - flags]) {
            list_on_argv[f - flags] = true; /* the flag wins */
            ((struct options_list *)(void *)((char *)o + f->offset))->count = 0;
        }
        if (!set_value(o, f, value, source, err))
            return OPTIONS_EXIT_ERROR;
    }
    return OPTIONS_RUN;
}
