/*
 * model_fixture.h - for the server's unit tests of requests on a model:
 * tests/models/f32 loaded as "f32", the limits a request is decoded
 * under, and the drawing font (a PNG request's image is measured as its
 * answer is planned). Use model_fixture_setup and model_fixture_teardown
 * as a cmocka group's setup and teardown.
 */
#ifndef ATTND_TEST_MODEL_FIXTURE_H
#define ATTND_TEST_MODEL_FIXTURE_H

#include "request.h"

/* The limits, their models the one loaded. */
extern struct request_limits fixture_limits;

int model_fixture_setup(void **state);
int model_fixture_teardown(void **state);

#endif
