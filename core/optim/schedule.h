/* schedule.h: the learning rate at each optimizer step: constant, warmup then constant, warmup then linear
 * decay, warmup then cosine decay; DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR map onto these.
 *
 * t is the index of the optimizer step about to be taken: 0 for the first step (DeepSpeed's
 * last_batch_iteration, llm.c's step). W = warmup_steps, T = total_steps. Exact formulas:
 *
 *   warmup, t < W:     lr = start + (peak - start) * r
 *                      r = t / W                  (ramp "linear")
 *                      r = ln(t + 1) / ln(W)      (ramp "log", DeepSpeed's default; needs W >= 2)
 *                      so lr(0) = start and the peak is first reached at t = W.
 *   after warmup, t >= W:
 *     constant         lr = peak                  (no warmup phase: W = 0)
 *     warmup_constant  lr = peak
 *     warmup_linear    lr = end + (peak - end) * max(0, (T - t) / max(1, T - W))
 *     warmup_cosine    lr = end + (peak - end) * (1 + cos(pi * q)) / 2,   q = min(1, (t - W) / max(1, T - W))
 *   Both decays start at the peak at t = W, reach `end` at t = T and stay there after T.
 *
 * DeepSpeed names (the "scheduler" block of a DeepSpeed config; their defaults in brackets):
 *   WarmupLR        warmup_min_lr [0] -> start, warmup_max_lr [0.001] -> peak, warmup_num_steps [1000] -> W,
 *                   warmup_type ["log"] -> ramp. Kind warmup_constant. Same values as DeepSpeed. Note that
 *                   the peak is warmup_max_lr, 0.001 unless set: DeepSpeed ignores the optimizer's lr here.
 *   WarmupDecayLR   the same keys plus total_num_steps -> T; the decay ends at warmup_min_lr. Kind warmup_linear.
 *                   Same values as DeepSpeed.
 *   WarmupCosineLR  total_num_steps -> T, warmup_num_steps [1000], warmup_type ["log"], and ratios of the
 *                   optimizer's lr: warmup_min_ratio [0] -> start = ratio*lr, cos_min_ratio [0.0001] ->
 *                   end = ratio*lr, peak = lr. Kind warmup_cosine. Differs from DeepSpeed after the warmup:
 *                   DeepSpeed measures the decay from t - W + 1 (so it is one step ahead: below the peak at
 *                   t = W, at the end value at t = T - 1) and does not stop at T (the cosine rises again after
 *                   it). Here q = (t - W)/(T - W), clamped, as in llm.c and most training code.
 *   DeepSpeed raises warmup_num_steps below 2 to 2 (for every warmup type); so does this module for these
 *   three names. Our own names take any W >= 0 with the linear ramp.
 */
#ifndef MIXPAR_OPTIM_SCHEDULE_H
#define MIXPAR_OPTIM_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>

struct cJSON;

typedef enum { LR_CONSTANT, LR_WARMUP_CONSTANT, LR_WARMUP_LINEAR, LR_WARMUP_COSINE, LR_NKINDS } lr_kind;
typedef enum { LR_RAMP_LINEAR, LR_RAMP_LOG } lr_ramp;

typedef struct {
    lr_kind kind;
    double peak;           /* lr at the end of warmup, held (constant) or decayed from */
    double start;          /* lr at t = 0, the start of warmup */
    double end;            /* lr at t >= T for the decays */
    long warmup_steps;     /* W >= 0 */
    long total_steps;      /* T, where the decays end */
    lr_ramp ramp;
} lr_schedule;

/* The learning rate of step t (t >= 0; negative t is treated as 0). */
double lr_schedule_at(const lr_schedule *s, long t);

const char *lr_kind_name(lr_kind kind);       /* "constant", "warmup_constant", "warmup_linear", "warmup_cosine" */
lr_schedule lr_schedule_constant(double lr);
/* Warmup from 0 over W steps to peak, then cosine to end at T: the usual GPT recipe. */
lr_schedule lr_schedule_warmup_cosine(double peak, long warmup_steps, long total_steps, double end);

/* Warmup + cosine on its own (lab 21): lr(t) for the warmup_cosine formula above with the linear ramp,
 * lr(0) = start, lr(W) = peak, lr(T) = end and after; t < 0 counts as 0. The same values as lr_schedule_at on
 * lr_schedule{LR_WARMUP_COSINE, peak, start, end, W, T, LR_RAMP_LINEAR}. */
double lr_warmup_cosine(long t, long W, long T, double start, double peak, double end);

/* A schedule by name with its defaults, the optimizer's lr as peak. Names: ours (above) and DeepSpeed's
 * (WarmupLR, WarmupDecayLR, WarmupCosineLR; case ignored). Unknown names stop with exit 2. */
lr_schedule lr_schedule_from_name(const char *name, double optimizer_lr);
/* Sets a parameter by name. Ours: lr (peak), warmup_start_lr, min_lr (end), warmup_steps, total_steps,
 * warmup_type (0 linear, 1 log). DeepSpeed's: warmup_min_lr, warmup_max_lr, warmup_num_steps, total_num_steps,
 * warmup_min_ratio, cos_min_ratio (ratios of optimizer_lr, as passed to from_name). Bad keys/values: exit 2. */
void lr_schedule_set(lr_schedule *s, const char *key, double value, double optimizer_lr);
/* Checks the whole schedule (log ramp needs W >= 2, decays need T >= W, lrs finite and >= 0): exit 2. */
void lr_schedule_check(const lr_schedule *s);
/* The DeepSpeed "scheduler" block {"type": "WarmupCosineLR", "params": {...}}; warmup_type is "linear" or
 * "log". optimizer_lr is the optimizer's lr (WarmupCosineLR's peak). Errors stop with exit 2. */
lr_schedule lr_schedule_from_json(const struct cJSON *scheduler, double optimizer_lr);
/* One line for logs: "warmup_cosine peak=0.0006 start=0 end=6e-05 warmup=700 (linear) total=19073". */
void lr_schedule_format(const lr_schedule *s, char *out, size_t outlen);

#endif
