/*
 * gate.c - see gate.h.
 */
#include "gate.h"

void gate_init(struct gate *g, size_t slots, size_t max_waiting)
{
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->freed, NULL);
    g->slots = slots;
    g->max_waiting = max_waiting;
    g->running = g->waiting = 0;
    g->closed = false;
}

void gate_destroy(struct gate *g)
{
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->freed);
}

bool gate_enter(struct gate *g)
{
    pthread_mutex_lock(&g->lock);
    bool admitted = false;
    if (g->closed) {
        admitted = false;
    } else if (g->running < g->slots) {
        admitted = true;
    } else if (g->waiting < g->max_waiting) {
        g->waiting++;
        while (g->running >= g->slots && !g->closed)
            pthread_cond_wait(&g->freed, &g->lock);
        g->waiting--;
        admitted = !g->closed;
    }
    if (admitted)
        g->running++;
    pthread_mutex_unlock(&g->lock);
    return admitted;
}

void gate_leave(struct gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->running--;
    pthread_cond_signal(&g->freed);
    pthread_mutex_unlock(&g->lock);
}

void gate_close(struct gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->closed = true;
    pthread_cond_broadcast(&g->freed);
    pthread_mutex_unlock(&g->lock);
}

bool gate_closed(struct gate *g)
{
    pthread_mutex_lock(&g->lock);
    const bool closed = g->closed;
    pthread_mutex_unlock(&g->lock);
    return closed;
}

size_t gate_waiting(struct gate *g)
{
    pthread_mutex_lock(&g->lock);
    const size_t waiting = g->waiting;
    pthread_mutex_unlock(&g->lock);
    return waiting;
}
