/* pp.h: pipeline parallelism (流水线并行): stages balanced by parameters, GPipe and 1F1B micro-batch schedules, p2p of activations and their gradients, bubble and in-flight memory. */
#ifndef MIXPAR_DIST_PP_H
#define MIXPAR_DIST_PP_H

#include "base/events.h"
#include "dist/mesh.h"
#include "model/model.h"

/* A pipeline of p stages runs a step's batch as m micro-batches (微批次). Stage s holds blocks
 * [first_s, last_s) of the model (model_create_shard); the first stage embeds the tokens, the last one
 * computes the loss. Forward of micro-batch k on stage s ("F k") needs F k of stage s-1 (its hidden
 * state (B,T,C) arrives by p2p in the pp group); backward "B k" needs B k of stage s+1 (the gradient of
 * this stage's output). Schedules (the order each stage runs its 2m actions in):
 *
 *   gpipe  (Huang et al. 2019) all m forwards, then all m backwards. Stage s holds m micro-batches'
 *          activations at its peak.
 *   1f1b   (PipeDream-Flush, Narayanan et al. 2021; Megatron's default) stage s runs min(p-s-1, m)
 *          warm-up forwards, then alternates one forward and one backward, then drains the backwards.
 *          It holds at most min(p-s, m) micro-batches' activations: at most p, whatever m is.
 *
 *   interleaved  (Narayanan et al. 2021; Megatron's interleaved 1F1B) each stage holds v model chunks,
 *          chunk j of stage s being virtual stage j p + s of p v (blocks go round the stages v times); a
 *          micro-batch passes every stage v times, in pieces 1/v as long, so the ramp-up and ramp-down
 *          shrink v-fold. Forwards run the chunks in groups of p micro-batches (m must be a multiple of p);
 *          warm-up (p - s - 1) 2 + (v - 1) p forwards, then 1F1B.
 *
 * The bubble (气泡: the share of a stage's step it idles, waiting for its neighbours) with forward and
 * backward of equal cost on every stage is (p-1) / (m+p-1) for gpipe and 1f1b and (p-1) / (v m + p - 1)
 * for interleaved (Megatron's (p-1)/(v m) of the ideal time, as a share of the whole).
 *
 * Sends are non-blocking (comm_isend) and receives blocking, so no schedule can deadlock on a pair of
 * stages sending to each other; a message's tag is 2k (activation of micro-batch k) or 2k+1 (its
 * gradient). Each micro-batch runs in its own activation slot of the stage's model (model_use_act_slot),
 * allocated at first use (MEM_ACT) and reused once its backward is done, so mem_peak(MEM_ACT) measures
 * the schedule's in-flight activations (pp_stats.act_peak_bytes).
 *
 *     pp *p = pp_create(mesh, &stage_model, 1, PP_1F1B, m, ev);
 *     float loss = pp_run(p, inputs, targets, B, T, 1.0f, step);  // inputs/targets: m x (B,T) rows
 *     pp_sum_tied_grads(p);                                          // tied embeddings on pp > 1
 *     const pp_stats *st = pp_get_stats(p);                          // bubble, in-flight micro-batches
 */
typedef enum { PP_GPIPE, PP_1F1B, PP_INTERLEAVED, PP_NSCHEDULES } pp_schedule;
extern const char *const pp_schedule_names[]; /* "gpipe", "1f1b", "interleaved", NULL */
int pp_schedule_from_name(const char *name);   /* -1 when unknown */

typedef struct {
    char kind; /* 'F' forward, 'B' backward */
    int micro; /* micro-batch index */
    int chunk; /* model chunk (interleaved; 0 otherwise) */
} pp_action;

/* Exits 2 with a message unless the schedule can run p stages, m micro-batches, v chunks per stage
 * (v = 1 except for interleaved, which needs p >= 2, v >= 2 and m a multiple of p). */
void pp_check_schedule(pp_schedule kind, int p, int m, int v);
/* Stage s of p's 2 m v actions under a schedule, in the order it runs them. */
void pp_schedule_actions(pp_schedule kind, int p, int s, int m, int v, pp_action *out);

/* The schedule played out with every forward taking t_fwd and every backward t_bwd (of one chunk) on every stage, each
 * action starting as soon as its stage is free and its input has arrived (no transfer time): the bubble
 * (idle time of all stages / (p x the makespan)) and each stage's most micro-batches in flight (forwards
 * done whose backward is not; in_flight may be NULL, else p ints). No timing involved: what the order
 * alone implies. */
double pp_schedule_bubble(pp_schedule kind, int p, int m, int v, double t_fwd, double t_bwd, int *in_flight);
/* The textbook bubble (p-1) / (v m + p - 1) (v = 1: (p-1) / (m+p-1)). */
double pp_bubble_formula(int p, int m, int v);

/* Blocks per stage, balanced by parameter count: boundaries first[0] = 0 < first[1] < ... < first[p] = L,
 * each stage at least one block, the embeddings counted on the first stage and the final norm and head
 * on the last (so those stages get fewer blocks when the vocabulary is large). Exits 2 when L < p. */
void pp_balance_stages(const model_config *cfg, int p, int *first);
/* Boundaries from an explicit list of blocks per stage ("2,1,1"): exits 2 unless p positive counts
 * summing to L. */
void pp_stages_from_list(const model_config *cfg, int p, const char *list, int *first);

/* What the last step measured on this stage. */
typedef struct {
    int micro_batches, stages, stage, chunks;
    double step_s;          /* wall time of the step's schedule on this stage */
    double busy_s;          /* of it, in forward and backward compute */
    double bubble;          /* 1 - busy / step: measured idle share (timing; noisy on shared cores) */
    double bubble_schedule; /* pp_schedule_bubble with this step's mean forward and backward times */
    int max_in_flight;      /* most micro-batches whose forward was done and backward not, on this stage (in
                             * chunk-micro-batches under interleaved: each holds 1/v of the stage's blocks) */
    int slots;              /* activation slots the stage's chunks have made (the peak of in_flight so far) */
    size_t act_peak_bytes;  /* most MEM_ACT bytes during the step (this rank's in-flight activations) */
} pp_stats;

typedef struct pp pp;

/* chunks: this rank's v models (model_create_shard with each chunk's blocks and the mesh's tp share; v = 1
 * but for interleaved). Exits 2 when the schedule cannot run (pp_check_schedule). ev may be NULL; with it
 * every action writes a span event (core/base/EVENTS.md: name "pp_forward" or "pp_backward", stage,
 * micro, and chunk when v > 1). */
pp *pp_create(mesh_t *mesh, model **chunks, int v, pp_schedule kind, int micro_batches, ev_writer *ev);
void pp_free(pp *p);
/* One step's forwards and backwards of m micro-batches (inputs and targets: m x (B,T), read on the first
 * and the last stage), gradients ADDED to the stage model's buffer with the loss scaled by
 * loss_scale / m (the mean over micro-batches). Returns that mean loss on every rank of the pp group
 * (broadcast from the last stage). */
float pp_run(pp *p, const int *inputs, const int *targets, int B, int T, float loss_scale, long step);
/* Forward only (evaluation): n batches (inputs and targets: n x (B,T)) through the pipeline in the
 * schedule's forward order, activation slot 0 of each chunk, no gradients. Returns the mean of the
 * batches' losses on every rank of the pp group (what one rank's forward on each batch would average). */
float pp_evaluate(pp *p, const int *inputs, const int *targets, int n, int B, int T);
/* Tied embeddings on pp > 1: the first stage's wte (its chunk 0) and the last stage's copy (its chunk v-1) get the sum of their two
 * gradients (allreduce over the mesh's embed group), so the two copies stay equal. Nothing otherwise. */
void pp_sum_tied_grads(pp *p);
const pp_stats *pp_get_stats(const pp *p);

#endif
