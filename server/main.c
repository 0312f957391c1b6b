/*
 * main.c - attnd: settings, start, signals, drain.
 *
 * SIGINT and SIGTERM are taken by sigwait() in the main thread, which is
 * the only thread that sees them: the server answers every new request
 * 503, lets the computations in flight finish for --drain-seconds, cancels
 * the rest, and exits 0 once each has had its answer (http.h).
 *
 * The models of --model are loaded before the port opens: a checkpoint
 * that does not load stops the server with the loader's one line and exit
 * status 2, the status of every bad setting.
 */
#include "attention.h"
#include "heatmap.h"
#include "http.h"
#include "models.h"
#include "options.h"
#include "probe.h"

#include <pthread.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_t main_thread;

static void pass_to_main(int sig)
{
    pthread_kill(main_thread, sig);
}

int main(int argc, char **argv)
{
    struct options opt;
    switch (options_load(&opt, argc, argv, stdout, stderr)) {
    case OPTIONS_EXIT_OK: return 0;
    case OPTIONS_EXIT_ERROR: return 2;
    case OPTIONS_RUN: break;
    }
    if (opt.probe_url[0])
        return probe_url(opt.probe_url, 5) ? 0 : 1;

        /* Block the stop signals before any thread of ours starts, so every
         * such thread inherits the mask and only sigwait() below receives
         * them. Threads a library started before main() (OpenBLAS's) do not
         * block them: a signal that lands there is passed on to this thread,
         * where it waits for sigwait(), or stays pending while the server
         * drains, instead of ending the process. */
#ifdef __GLIBC__
    /* Large blocks (results, canvases, bodies) come and go with every
     * request. glibc raises its mmap threshold as such blocks are freed,
     * and then serves them from heaps that seldom shrink, so resident
     * memory would keep every request's high-water mark. A fixed
     * threshold maps each large block on its own and unmaps it when
     * freed. */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    /* Below it, blocks come and go from each thread's heap; giving the
     * heap's top back to the kernel whenever 128 KB are free (glibc's
     * default) would cost a system call per small request. Each heap
     * keeps at most this much instead. */
    mallopt(M_TRIM_THRESHOLD, 4 << 20);
#endif
    main_thread = pthread_self();
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    struct sigaction pass = {.sa_handler = pass_to_main};
    sigemptyset(&pass.sa_mask);
    sigaction(SIGINT, &pass, NULL);
    sigaction(SIGTERM, &pass, NULL);
    signal(SIGPIPE, SIG_IGN);

    char err[1024];
    if (heatmap_font_init(opt.font, err, sizeof err) != DRAW_OK) {
        fprintf(stderr, "attnd: %s\n", err);
        return 1;
    }
    attn_blas_single_thread();   /* the core's threading policy */
    static struct models models; /* lives until the process ends */
    if (!models_load(&models, &opt.models, err, sizeof err)) {
        fprintf(stderr, "attnd: %s\n", err);
        heatmap_font_free();
        return 2;
    }
    for (size_t i = 0; i < models.count; i++) {
        const struct model *m = models.entry[i].model;
        fprintf(stderr,
                "attnd: model \"%s\": %zu layers, %zu heads, hidden %zu, "
                "%.1f MiB of %s weights%s\n",
                m->name, m->xf.layers, m->xf.heads, m->xf.hidden,
                (double)m->weight_bytes / (1 << 20),
                m->source.file_type[0]
                    ? m->source.file_type
                    : attn_dtype_name((int)m->xf.word_emb.dtype),
                strcmp(m->source.container, "gguf") ? "" : " (GGUF)");
        // a template that cannot be rendered is named now, not at the
        // first chat request
        for (size_t t = 0; t < m->chat.count; t++)
            if (!m->chat.t[t].compiled)
                fprintf(stderr,
                        "attnd: model \"%s\": chat template \"%s\" (%s) "
                        "cannot be rendered: %s; chat requests on it are "
                        "refused\n",
                        m->name, m->chat.t[t].name, m->chat.source,
                        m->chat.t[t].error);
    }
    struct http_server *srv = http_start(&opt, &models);
    if (!srv) {
        models_free(&models);
        heatmap_font_free();
        return 1;
    }
    fprintf(stderr, "attnd: serving http://%s:%u/ (%u computation%s at once)\n",
            opt.bind, http_port(srv), opt.threads, opt.threads == 1 ? "" : "s");
    int sig = 0;
    sigwait(&stop, &sig);
    fprintf(stderr, "attnd: %s: finishing requests in flight\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    http_drain_and_stop(srv, opt.drain);
    models_free(&models);
    heatmap_font_free();
    fprintf(stderr, "attnd: stopped\n");
    return 0;
}
