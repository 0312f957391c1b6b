/*
 * probe.h - `attnd --probe URL`: a health check that needs no other
 * program (the container image has no curl).
 */
#ifndef ATTND_PROBE_H
#define ATTND_PROBE_H

#include <stdbool.h>

/* GET an http:// URL on an IPv4 address; true if it answers 2xx within
 * timeout_seconds. */
bool probe_url(const char *url, unsigned timeout_seconds);

#endif
