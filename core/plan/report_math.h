/* report_math.h: the arithmetic behind a run's report (lab 29): the tokens a run trained on, its throughput over
 * steps, and the memory plan checked against what the allocator measured. */
#ifndef MIXPAR_PLAN_REPORT_MATH_H
#define MIXPAR_PLAN_REPORT_MATH_H

/* A capstone (综合实战项目) is judged on three numbers, and each is easy to get subtly wrong:
 *
 * Tokens: the compute budget of a run. One optimizer step consumes every data-parallel rank's micro-batches:
 *
 *     tokens = steps * B * T * accumulation * dp_world      (B micro-batch rows, T tokens a row)
 *
 * (DeepSpeed's train_batch_size = B * accumulation * dp_world sequences a step.) Under tensor or pipeline
 * parallel only the dp replicas read different data, so dp_world, not the number of ranks, counts.
 *
 * Throughput: each step event carries its own tokens/s. The run's rate is total tokens over total time, so
 * with the same tokens every step it is the HARMONIC mean of the steps' rates, not their arithmetic mean (a slow
 * step costs more time than a fast step saves). The first steps warm caches and thread pools, so a report
 * leaves `skip` of them out.
 *
 * Plan against measurement: the planner (lab 01) predicts bytes per allocator tag; the run's mem events record
 * the peak per tag. The check divides measured by planned, per tag, and calls a tag off when the ratio leaves
 * [1 - tolerance, 1 + tolerance] (the capstone's tolerance is 5%). A tag the plan does not model (plan 0: the
 * communication buffers and the loader's, say) has no ratio to check; it still counts in the device total, which
 * is checked the same way. */

#include <stdbool.h>
#include <stdint.h>

/* The batch shape of a run, from its config (train/config.h). */
typedef struct {
    long steps;     /* optimizer steps */
    int micro_batch; /* B: rows of one forward (train_micro_batch_size_per_gpu) */
    int seq_len;     /* T: tokens a row */
    int grad_accum;  /* micro-batches accumulated per step (gradient_accumulation_steps) */
    int dp_world;    /* data-parallel replicas that read different rows */
} report_batch;

/* Tokens the run's steps consumed, over every data-parallel rank. Fields must be >= 1 (steps >= 0). */
uint64_t report_run_tokens(const report_batch *b);

/* The run's tokens per second from the steps' own rates (n values, each > 0 and finite), leaving out the first
 * `skip`: total tokens / total time with the same tokens a step. NAN when no step is left. */
double report_run_tokens_per_s(const double *tokens_per_s, long n, long skip);

/* One tag's check. */
typedef struct {
    uint64_t plan, measured; /* bytes */
    bool planned;            /* plan > 0: the planner models this tag */
    double ratio;            /* measured / plan; NAN when not planned */
    bool off;                /* planned, and the ratio is outside [1 - tolerance, 1 + tolerance] */
} report_tag_check;

/* Checks ntags tags (plan[i] against measured[i]) with a relative tolerance (0.05 for 5%); fills out[ntags]
 * and returns how many tags are off. */
int report_check_plan(const uint64_t *plan, const uint64_t *measured, int ntags, double tolerance,
                      report_tag_check *out);

#endif
