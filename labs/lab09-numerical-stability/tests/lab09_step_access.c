/* lab09_step_access.c: compiles core/train/step.c into the lab 09 test binary, so that the tests can call its
 * static write_working_weights directly (llm.c's test_gpt2.c includes train_gpt2.c the same way).
 *
 * In the trainer write_working_weights runs at the end of the AMP step, after the unscale and the update of
 * the loss scale (labs 05 and 07) and a forward and backward pass (lab 02). The tests stand in for all of
 * that: they write what an optimizer would have written into the weights (or the master copy) and call the
 * write-back alone, so they test your region and nothing else. This file defines every function of step.c,
 * so the linker takes none of them from libmixpar.a: the step.c compiled here is the one graded. */
#include "train/step.c"

#include "lab09_model.h"

void lab09_write_working_weights(train_step *s) { write_working_weights(s); }
