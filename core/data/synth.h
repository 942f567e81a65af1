/* synth.h: synthetic tasks that need no download: copy, reverse, addition, and an English-like grammar. */
#ifndef MIXPAR_DATA_SYNTH_H
#define MIXPAR_DATA_SYNTH_H

#include "data/textbuf.h"

#include <stdint.h>

/* Each generator appends `examples` lines to out, drawn from an rng seeded with `seed`: the same seed and
 * count give the same bytes on every machine. Every line is "PROMPT=ANSWER\n" except for the grammar,
 * whose lines are sentences; a model has learnt a task when it completes the part after '='.
 *   copy:      "qzkf=qzkf\n"        1 to 10 lowercase letters, then the same letters
 *   reverse:   "qzkf=fkzq\n"        ... then the letters reversed
 *   addition:  "123+45=168\n"       two numbers of 1 to 3 digits (no leading zeros) and their sum
 *   grammar:   "The old cat sees a bird near the river.\n"   from a small probabilistic grammar */
void synth_copy(uint64_t seed, uint64_t examples, textbuf *out);
void synth_reverse(uint64_t seed, uint64_t examples, textbuf *out);
void synth_addition(uint64_t seed, uint64_t examples, textbuf *out);
void synth_grammar(uint64_t seed, uint64_t examples, textbuf *out);

#endif
