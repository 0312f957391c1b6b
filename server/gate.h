/*
 * gate.h - the compute gate: at most `slots` computations run at once (one
 * core each), at most `max_waiting` wait for a slot, and the next one is
 * turned away at once, so that a burst costs a queue, not the machine.
 */
#ifndef ATTND_GATE_H
#define ATTND_GATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

struct gate {
    pthread_mutex_t lock;
    pthread_cond_t freed;
    size_t slots, max_waiting;
    size_t running, waiting;
    bool closed; /* stopping: nothing more is admitted */
};

void gate_init(struct gate *g, size_t slots, size_t max_waiting);
void gate_destroy(struct gate *g);

/* Take a slot, waiting if the queue has room; false when it has none, or
 * when the gate is closed (before or while waiting). */
bool gate_enter(struct gate *g);
void gate_leave(struct gate *g);

/* Admit nothing more, and turn away those waiting. */
void gate_close(struct gate *g);
bool gate_closed(struct gate *g);

/* How many wait for a slot now. */
size_t gate_waiting(struct gate *g);

#endif
