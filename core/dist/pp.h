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
 * Both have the same bubble (气泡: the share of a stage's step it idles, waiting for its neighbours) with
 * forward and backward of equal cost on every stage:  (p-1) / (m+p-1). Interleaved 1F1B (virtual
 * stages, bubble / v) is not implemented here.
 *
 * Sends are non-blocking (comm_isend) and receives blocking, so no schedule can deadlock on a pair of
 * stages sending to each other; a message's tag is 2k (activation of micro-batch k) or 2k+1 (its
 * gradient). Each micro-batch runs in its own activation slot of the stage's model (model_use_act_slot),
 * allocated at first use (MEM_ACT) and reused once its backward is done, so mem_peak(MEM_ACT) measures
 * the schedule's in-flight activations (pp_stats.act_peak_bytes).
 *
 *     pp *p = pp_create(mesh, stage_model, PP_1F1B, m, ev);
 *     float loss = pp_run(p, inputs, targets, B, T, 1.0f, step);  // inputs/targets: m x (B,T) rows
 *     pp_sum_tied_grads(p);                                          // tied embeddings on pp > 1
 *     const pp_stats *st = pp_get_stats(p);                          // bubble, in-flight micro-batches
 */
typedef enum { PP_GPIPE, PP_1F1B, PP_NSCHEDULES } pp_schedule;
extern const char *const pp_schedule_names[]; /* "gpipe", "1f1b", NULL */
int pp_schedule_from_name(const char *name);   /* -1 when unknown */

typedef struct {
    char kind; /* 'F' forward, 'B' backward */
    int micro; /* micro-batch index */
} pp_action;

/* Stage s of p's 2m actions under a schedule, in the order it runs them. */
void pp_schedule_actions(pp_schedule kind, int p, int s, int m, pp_action *out);

/* The schedule played out with every forward taking t_fwd and every backward t_bwd on every stage, each
 * action starting as soon as its stage is free and its input has arrived (no transfer time): the bubble
 * (idle time of all stages / (p x the makespan)) and each stage's most micro-batches in flight (forwards
 * done whose backward is not; in_flight may be NULL, else p ints). No timing involved: what the order
 * alone implies. */
double pp_schedule_bubble(pp_schedule kind, int p, int m, double t_fwd, double t_bwd, int *in_flight);
/* The textbook bubble (p-1) / (m+p-1). */
double pp_bubble_formula(int p, int m);

/* Blocks per stage, balanced by parameter count: boundaries first[0] = 0 < first[1] < ... < first[p] = L,
 * each stage at least one block, the embeddings counted on the first stage and the final norm and head
 * on the last (so those stages get fewer blocks when the vocabulary is large). Exits 2 when L < p. */
void pp_balance_stages(const model_config *cfg, int p, int *first);
/* Boundaries from an explicit list of blocks per stage ("2,1,1"): exits 2 unless p positive counts
 * summing to L. */
void pp_stages_from_list(const model_config *cfg, int p, const char *list, int *first);

/* What the last step measured on this stage. */
typedef struct {
    int micro_batches, stages, stage;
    double step_s;          /* wall time of the step's schedule on this stage */
    double busy_s;          /* of it, in forward and backward compute */
    double bubble;          /* 1 - busy / step: measured idle share (timing; noisy on shared cores) */
    double bubble_schedule; /* pp_schedule_bubble with this step's mean forward and backward times */
    int max_in_flight;      /* most micro-batches whose forward was done and backward not, on this stage */
    int slots;              /* activation slots the stage's model has made (the peak of in_flight so far) */
    size_t act_peak_bytes;  /* most MEM_ACT bytes during the step (this rank's in-flight activations) */
} pp_stats;

typedef struct pp pp;

/* stage: this rank's model (model_create_shard with this stage's blocks and the mesh's tp share). ev may
 * be NULL; with it every action writes a span event (core/base/EVENTS.md: name "pp_forward" or
 * "pp_backward", stage, micro). */
pp *pp_create(mesh_t *mesh, model *stage, pp_schedule kind, int micro_batches, ev_writer *ev);
void pp_free(pp *p);
/* One step's forwards and backwards of m micro-batches (inputs and targets: m x (B,T), read on the first
 * and the last stage), gradients ADDED to the stage model's buffer with the loss scaled by
 * loss_scale / m (the mean over micro-batches). Returns that mean loss on every rank of the pp group
 * (broadcast from the last stage). */
float pp_run(pp *p, const int *inputs, const int *targets, int B, int T, float loss_scale, long step);
/* Tied embeddings on pp > 1: the first stage's wte and the last stage's copy get the sum of their two
 * gradients (allreduce over the mesh's embed group), so the two copies stay equal. Nothing otherwise. */
void pp_sum_tied_grads(pp *p);
const pp_stats *pp_get_stats(const pp *p);

#endif
