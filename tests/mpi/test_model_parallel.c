/* test_model_parallel.c: GPT-2 and LLaMA tiny models trained on dp x tp x pp meshes of real ranks give one rank's losses and gradient norms, in fp32 and under the bf16 and fp16 recipes, with and without sequence parallel (its collectives and activation bytes against the planner); an overflow on one rank skips the step on all; an evaluation after a step reads the updated weights; pipeline schedules' bubble and in-flight micro-batches. */
#include "mpi_check.h"

#include "amp/policy.h"
#include "amp/scaler.h"
#include "base/events.h"
#include "base/mem.h"
#include "dist/pp.h"
#include "fp/accumulate.h"
#include "model/model.h"
#include "model/model_lowp.h"
#include "plan/parallel.h"
#include "train/mp_step.h"
#include "train/step.h"

#include <math.h>

/* Run under mpirun on 8 ranks (tests/mpi/run.sh); every mesh below uses all 8. Usage:
 *     test_model_parallel [EVENTS_DIR]     with a directory, each rank writes the pipeline's span events
 *                                          of the last case there (events.rankN.jsonl) */

enum { STEPS = 20, ROWS = 8, T = 16 }; /* a step's global batch: ROWS sequences of T tokens */
static const double LR = 3e-3, CLIP = 1.0, TOLERANCE = 1e-5;
/* The gradient norm's: TOLERANCE at the first step; later ones wider, as a norm of small gradients moves
 * more than the loss once the ranks' summation orders have trained slightly different weights. */
static const double NORM_TOLERANCE = 1e-3;
static const uint64_t SEED = 1234;

typedef struct {
    const char *name;
    model_config cfg;
} tiny_model;

/* tp up to 4 and pp up to 8: heads, kv heads, ffn and vocabulary divisible by 4, 8 layers. */
static tiny_model tiny_models[] = {
    {"gpt2 (tied, GELU, LayerNorm)", {.arch = MODEL_GPT2, .V = 64, .maxT = T, .L = 8, .C = 32, .NH = 4, .tied = true}},
    {"llama (untied, SwiGLU, RMSNorm, GQA 8/4)",
     {.arch = MODEL_LLAMA, .V = 64, .maxT = T, .L = 8, .C = 64, .NH = 8, .KVH = 4, .tied = false}},
};

/* A step's tokens: sequences where each next token follows from the last one most of the time, so the
 * loss has something to learn. targets[i] = inputs[i + 1] within a row. */
static void make_batch(int step, int V, int *inputs, int *targets) {
    for (int r = 0; r < ROWS; r++) {
        int seq[T + 1];
        seq[0] = (int)(mp_hash32(SEED + (uint64_t)step, (uint64_t)r) % (uint32_t)V);
        for (int t = 1; t <= T; t++) {
            uint32_t h = mp_hash32(SEED * 31u + (uint64_t)step * 977u + (uint64_t)r, (uint64_t)t);
            seq[t] = h % 4u ? (seq[t - 1] * 5 + 3) % V : (int)(h >> 8) % V;
        }
        for (int t = 0; t < T; t++) inputs[r * T + t] = seq[t], targets[r * T + t] = seq[t + 1];
    }
}

/* The loss scaler a recipe runs with here: none for fp32 and bf16; for fp16 PyTorch's GradScaler from 2^10,
 * growing every 4 clean steps, so the scale changes during a run (and never overflows this tiny model). */
static amp_scaler_config test_scaler(amp_recipe recipe) {
    if (recipe != AMP_RECIPE_FP16) return amp_scaler_kind_get(AMP_SCALER_NONE)->defaults;
    amp_scaler_config c = amp_scaler_kind_get(AMP_SCALER_PYTORCH)->defaults;
    c.init_scale = 1024, c.growth_interval = 4;
    return c;
}

/* Per step: the loss, the global gradient norm (before clipping) and the loss scale used. */
typedef struct {
    float loss[STEPS];
    double norm[STEPS];
    float scale[STEPS];
} run_trace;

/* One rank's run: train_step (the single-rank trainer's step) over ROWS micro-batches of 1 row, the whole
 * model computing in the recipe's mode (model_lowp.c's path for bf16 and fp16). */
static void reference_run(const model_config *cfg, const optim_config *opt, amp_recipe recipe, run_trace *out) {
    model *m = model_create(cfg);
    model_init(m, SEED);
    train_step ts;
    train_step_init(&ts, m, opt, CLIP);
    if (recipe != AMP_RECIPE_FP32) {
        model_precision prec = {.compute = recipe == AMP_RECIPE_FP16 ? MODEL_COMPUTE_FP16 : MODEL_COMPUTE_BF16};
        model_set_precision(m, &prec);
        amp_scaler_config sc = test_scaler(recipe);
        train_step_set_amp(&ts, recipe, &sc, false, SEED);
    }
    int *in = xmalloc(ROWS * T * sizeof(int)), *tg = xmalloc(ROWS * T * sizeof(int));
    for (int s = 0; s < STEPS; s++) {
        make_batch(s, cfg->V, in, tg);
        train_step_result r = train_step_run(&ts, in, tg, 1, T, ROWS, LR);
        out->loss[s] = r.loss, out->norm[s] = r.grad_norm, out->scale[s] = r.update.scale;
    }
    free(in), free(tg);
    train_step_free(&ts);
    model_free(m);
}

/* Rank 0's reference run, on every rank. */
static void shared_reference(const model_config *cfg, const optim_config *opt, amp_recipe recipe, run_trace *out) {
    if (rank == 0) reference_run(cfg, opt, recipe, out);
    MPI_Bcast(out, sizeof *out, MPI_BYTE, 0, MPI_COMM_WORLD);
}

/* The worst relative difference of two series over the steps (NaN stays worst), and where it was. */
static double worst_rel(const double *got, const double *want, int n, int *at) {
    double worst = 0;
    *at = 0;
    for (int i = 0; i < n; i++) {
        double rel = fabs(got[i] - want[i]) / fabs(want[i]);
        if (!(rel <= worst)) worst = rel, *at = i;
    }
    return worst;
}

typedef struct {
    int dp, tp, pp;
    pp_schedule schedule;
    int chunks; /* interleaved's v */
    int zero;   /* ZeRO stage over dp */
    bool sp;    /* sequence parallel (dist/sp.h) */
    int rows;   /* sequences per micro-batch (B): ROWS / dp / rows micro-batches per step */
} mesh_case;

/* Cases 0 and 6 are the same mesh without and with sequence parallel (their activation bytes are compared);
 * case 7 runs sequence parallel on tp 4 with 2 sequences per micro-batch (each rank's slice is 2 runs of
 * T/4 positions: the reordering path of the all-gather and the reduce-scatter), for the first model only. */
static const mesh_case cases[] = {
    {2, 2, 2, PP_1F1B, 1, 0, false, 1}, {1, 2, 4, PP_1F1B, 1, 0, false, 1},     {1, 2, 4, PP_GPIPE, 1, 0, false, 1},
    {1, 2, 4, PP_INTERLEAVED, 2, 0, false, 1}, {2, 4, 1, PP_1F1B, 1, 1, false, 1}, {1, 1, 8, PP_1F1B, 1, 0, false, 1},
    {2, 2, 2, PP_1F1B, 1, 0, true, 1},  {1, 4, 2, PP_1F1B, 1, 0, true, 2},
};
enum { NCASES = sizeof cases / sizeof cases[0], CASE_TP = 0, CASE_SP = 6, CASE_SP_ROWS = 7 };

/* Sequence parallel's collectives on the tp group over a run (comm_stats of the mesh's "tp" group, whose
 * comm events carry "group":"tp"), per micro-batch: each block all-gathers ln1 and ln2 forward and again
 * backward (for the weight gradients) and the two output gradients dres, and reduce-scatters attproj's and
 * fcproj's outputs and the qkv and fc input gradients: 6 all-gathers and 4 reduce-scatters; the embeddings
 * one reduce-scatter forward and one all-gather backward; the head an all-gather forward and backward and
 * a reduce-scatter backward. The only allreduces left on tp are the vocab-parallel loss's three small
 * ones per micro-batch (row max, sum of exp, target logit: N floats each) and the norms' gradients once a
 * step: no activation goes through an allreduce any more. */
static void check_sp_collectives(const tiny_model *tm, const mesh_case *mc, mp_step *s, int m) {
    mesh_t *mesh = mp_step_mesh(s);
    const int *first = mp_step_stages(s);
    long blocks = first[mesh->pp_rank + 1] - first[mesh->pp_rank], embed = mesh->pp_rank == 0,
         head = mesh->pp_rank == mesh->pp_size - 1;
    comm_stats_t st;
    comm_stats(mesh->tp, &st);
    struct {
        comm_op op;
        long want;
    } expect[] = {
        {COMM_OP_ALLGATHER, (long)STEPS * m * (6 * blocks + embed + 2 * head)},
        {COMM_OP_REDUCE_SCATTER, (long)STEPS * m * (4 * blocks + embed + head)},
        {COMM_OP_ALLREDUCE, (long)STEPS * (1 + 3 * m * head)},
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        if ((long)st.calls[expect[i].op] != expect[i].want)
            complain("%s sequence parallel on dp%d x tp%d x pp%d, stage %d (%ld blocks%s%s): %llu %s calls on the tp "
                     "group, expected %ld: %s", tm->name, mc->dp, mc->tp, mc->pp, mesh->pp_rank, blocks,
                     embed ? ", embeddings" : "", head ? ", head" : "", (unsigned long long)st.calls[expect[i].op],
                     comm_op_name(expect[i].op), expect[i].want,
                     expect[i].op == COMM_OP_ALLREDUCE ? "an activation still summed by allreduce, or the norms' "
                                                         "gradients summed per micro-batch instead of per step"
                                                       : "a column-parallel input not gathered, or a row-parallel "
                                                         "output not reduce-scattered");
    reportf("%s sequence parallel on dp%d x tp%d x pp%d: the tp group all-gathers and reduce-scatters the sequence "
            "(6 and 4 per block and micro-batch), allreduces only the loss's row statistics and the norms' gradients",
            tm->name, mc->dp, mc->tp, mc->pp);
}

/* Trains one model on one mesh and compares with the reference; checks the pipeline's in-flight count.
 * Returns this rank's most activation bytes (MEM_ACT) during the last step. */
static size_t run_case(const tiny_model *tm, const mesh_case *mc, const optim_config *opt, const run_trace *ref,
                       ev_writer *ev) {
    int B = mc->rows, m = ROWS / mc->dp / B; /* micro-batches per dp rank: the global batch stays ROWS rows */
    mp_layout lay = {.dp = mc->dp, .tp = mc->tp, .pp = mc->pp, .micro_batches = m, .schedule = mc->schedule,
                     .chunks = mc->chunks, .zero_stage = mc->zero, .sequence_parallel = mc->sp};
    size_t optim_before = mem_current(MEM_OPTIM);
    mp_step *s = mp_step_create(world, &tm->cfg, &lay, opt, CLIP, SEED, ev);
    mesh_t *mesh = mp_step_mesh(s);
    /* AdamW's m and v: for the whole shard, or under ZeRO-1 for this dp rank's 1/dp of it */
    size_t optim = mem_current(MEM_OPTIM) - optim_before, whole = 2 * sizeof(float) * mp_step_params(s);
    if (mc->zero ? !(optim * mc->dp <= whole + 2 * sizeof(float) * mc->dp && optim * mc->dp + whole / 10 >= whole)
                 : optim != whole)
        complain("optimizer state %zu bytes for a shard of %zu parameters (ZeRO-%d over dp %d)", optim,
                 mp_step_params(s), mc->zero, mc->dp);
    int *in = xmalloc(ROWS * T * sizeof(int)), *tg = xmalloc(ROWS * T * sizeof(int));
    double loss[STEPS], ref_loss[STEPS], norm[STEPS];
    for (int step = 0; step < STEPS; step++) {
        make_batch(step, tm->cfg.V, in, tg);
        size_t mine = (size_t)mesh->dp_rank * m * B * T; /* this dp rank's rows */
        mp_step_result r = mp_step_run(s, in + mine, tg + mine, B, T, LR, step);
        loss[step] = r.loss, norm[step] = r.grad_norm, ref_loss[step] = ref->loss[step];
    }
    if (mc->sp) check_sp_collectives(tm, mc, s, m);
    int worst_step;
    double worst = worst_rel(loss, ref_loss, STEPS, &worst_step);
    if (!(worst <= TOLERANCE))
        complain("step %d: loss %.7f, one rank %.7f (relative %.2e > %.0e): a shard's slice, a missing tp "
                 "reduction or a wrong pipeline hand-off", worst_step, loss[worst_step], ref_loss[worst_step], worst,
                 TOLERANCE);
    int norm_step;
    double norm_worst = worst_rel(norm, ref->norm, STEPS, &norm_step), first_norm = fabs(norm[0] - ref->norm[0]) / ref->norm[0];
    if (!(first_norm <= TOLERANCE) || !(norm_worst <= NORM_TOLERANCE))
        complain("step %d: gradient norm %.7f, one rank %.7f (relative %.2e > %.0e): each parameter must count "
                 "once (tp-replicated norms' weights on one tp rank, the tied copy not at all, stages summed)",
                 first_norm <= TOLERANCE ? norm_step + 1 : 1, first_norm <= TOLERANCE ? norm[norm_step] : norm[0],
                 first_norm <= TOLERANCE ? ref->norm[norm_step] : ref->norm[0],
                 first_norm <= TOLERANCE ? norm_worst : first_norm, first_norm <= TOLERANCE ? NORM_TOLERANCE : TOLERANCE);
    reportf("%s on dp%d x tp%d x pp%d (%s, %d micro-batches of %d%s%s%s): %d losses within %.0e of one rank (worst "
            "%.1e), gradient norms within %.0e at step 1 (%.1e) and %.0e after (%.1e)", tm->name, mc->dp, mc->tp, mc->pp,
            pp_schedule_names[mc->schedule], m, B, mc->chunks > 1 ? ", 2 chunks" : "", mc->zero ? ", ZeRO-1 over dp" : "",
            mc->sp ? ", sequence parallel" : "", STEPS, TOLERANCE, worst, TOLERANCE, first_norm, NORM_TOLERANCE, norm_worst);

    /* In flight: GPipe holds all m micro-batches' activations; 1F1B at most min(p - s, m) <= p; interleaved
     * what its order says (chunk-micro-batches of 1/v of the stage's blocks each). */
    const pp_stats *st = pp_get_stats(mp_step_pipeline(s));
    int stage = mesh->pp_rank, want = mc->schedule == PP_GPIPE ? m : (mc->pp - stage < m ? mc->pp - stage : m);
    if (mc->schedule == PP_INTERLEAVED) {
        int order_says[16];
        pp_schedule_bubble(mc->schedule, mc->pp, m, mc->chunks, 1, 1, order_says);
        want = order_says[stage];
    }
    if (st->max_in_flight != want || (mc->chunks == 1 && st->slots != want))
        complain("stage %d: %d micro-batches in flight, %d activation slots; expected %d (%s, p=%d, m=%d)", stage,
                 st->max_in_flight, st->slots, want, pp_schedule_names[mc->schedule], mc->pp, m);
    if (mc->schedule == PP_1F1B && st->max_in_flight > mc->pp)
        complain("1F1B held %d micro-batches on stage %d, more than p = %d", st->max_in_flight, stage, mc->pp);
    if (mc->pp > 1)
        reportf("%s on dp%d x tp%d x pp%d (%s): micro-batches in flight per stage as the schedule says", tm->name,
                mc->dp, mc->tp, mc->pp, pp_schedule_names[mc->schedule]);
    if (rank == 0 && mc->pp > 1)
        printf("    stage 0: %d in flight, activations %.1f KB, measured bubble %.2f (schedule %.2f, formula %.2f)\n",
               st->max_in_flight, st->act_peak_bytes / 1e3, st->bubble, st->bubble_schedule,
               pp_bubble_formula(mc->pp, m, mc->chunks));
    size_t act = st->act_peak_bytes;
    free(in), free(tg);
    mp_step_free(s);
    return act;
}

/* The planner's bytes of activations per rank (plan/parallel.h with course_model: core/model's own tensors,
 * fp32) for one of the cases on this rank's stage. */
static uint64_t planned_activations(const tiny_model *tm, const mesh_case *mc) {
    const model_config *c = &tm->cfg;
    plan_model pm = {.name = "custom", .arch = c->arch == MODEL_GPT2 ? PLAN_ARCH_GPT2 : PLAN_ARCH_LLAMA,
                     .layers = (uint64_t)c->L, .hidden = (uint64_t)c->C, .heads = (uint64_t)c->NH,
                     .kv_heads = (uint64_t)c->KVH, .ffn = (uint64_t)c->F, .vocab = (uint64_t)c->Vp,
                     .context = (uint64_t)c->maxT, .tied_head = c->tied};
    plan_run run = plan_run_defaults(&pm);
    run.recipe = PLAN_RECIPE_FP32, run.world = (uint64_t)mc->dp, run.batch = (uint64_t)mc->rows, run.seq = T;
    run.dropout = false, run.recompute = PLAN_RECOMPUTE_NONE;
    plan_parallel par = {.tp = (uint64_t)mc->tp, .pp = (uint64_t)mc->pp,
                         .micro_batches = (uint64_t)(ROWS / mc->dp / mc->rows), .gpipe = mc->schedule == PP_GPIPE,
                         .sequence_parallel = mc->sp, .course_model = true};
    plan_stage stages[8];
    plan_parallel_stages(&pm, &run, &par, stages);
    int first[9], stage = rank / (mc->dp * mc->tp);
    pp_balance_stages(c, mc->pp, first);
    if ((uint64_t)(first[stage + 1] - first[stage]) != stages[stage].blocks)
        complain("stage %d: the model runs %d blocks, the planner spreads %llu: not the same stage to compare", stage,
                 first[stage + 1] - first[stage], (unsigned long long)stages[stage].blocks);
    return stages[stage].bytes[MEM_ACT];
}

/* Sequence parallel's memory: the activation bytes (the allocator's MEM_ACT at the pipeline's peak) of the
 * tp-only and the sequence-parallel run of the same mesh equal the planner's within 5%, and sequence
 * parallel saves what the planner says it saves (the residual stream's and the norms' tensors / tp). */
static void check_sp_memory(const tiny_model *tm, size_t measured_tp, size_t measured_sp) {
    const mesh_case *tp = &cases[CASE_TP], *sp = &cases[CASE_SP];
    uint64_t plan_tp = planned_activations(tm, tp), plan_sp = planned_activations(tm, sp);
    double off_tp = fabs((double)measured_tp - (double)plan_tp) / (double)plan_tp;
    double off_sp = fabs((double)measured_sp - (double)plan_sp) / (double)plan_sp;
    double saved = (double)measured_tp - (double)measured_sp, planned_saving = (double)plan_tp - (double)plan_sp;
    int stage = rank / (tp->dp * tp->tp);
    if (!(off_tp <= 0.05) || !(off_sp <= 0.05))
        complain("stage %d: activations %zu bytes with tp only, %zu with sequence parallel; the planner's %llu and %llu "
                 "(off by %.1f%% and %.1f%% > 5%%): a tensor kept whole that sequence parallel should slice, or the "
                 "planner's list out of step with core/model", stage, measured_tp, measured_sp,
                 (unsigned long long)plan_tp, (unsigned long long)plan_sp, 100 * off_tp, 100 * off_sp);
    else if (!(planned_saving > 0 && fabs(saved - planned_saving) <= 0.05 * planned_saving))
        complain("stage %d: sequence parallel saved %.0f bytes of activations, the planner %.0f", stage, saved,
                 planned_saving);
    if (rank == 0 || rank == nranks - 1)
        printf("    stage %d: activations %zu bytes tp only (plan %llu), %zu with sequence parallel (plan %llu): "
               "%.1f%% saved\n", stage, measured_tp, (unsigned long long)plan_tp, measured_sp,
               (unsigned long long)plan_sp, 100 * saved / (double)measured_tp);
    reportf("%s on dp2 x tp2 x pp2: activation bytes per rank (MEM_ACT) with and without sequence parallel equal the "
            "planner's within 5%% (%.2f%%, %.2f%%), and sequence parallel saves the planned %.0f bytes", tm->name,
            100 * off_tp, 100 * off_sp, planned_saving);
}

/* ---------------------------------------------------------------- mixed precision on the mesh */

/* Per-recipe tolerances against one rank running the same recipe on the whole model: the shards' sums run
 * in another order (tp splits the matmuls' inner sums, dp the micro-batches' sum), so a value near a
 * rounding boundary of bf16 (8 significant bits) or fp16 (11) can round the other way, and 20 steps of
 * training carry it on. */
typedef struct {
    amp_recipe recipe;
    double loss_tol, norm_tol;
} amp_tolerance;
static const amp_tolerance amp_tolerances[] = {
    {AMP_RECIPE_BF16, 1e-2, 1.5e-1},
    {AMP_RECIPE_FP16, 3e-3, 1e-1},
};
enum { FIRST_NORM_TOLERANCE_PPM = 1000 }; /* the first step's norm, before training carries differences on */

/* Watches a shard's activations as forward computes them (model_act_probe): under autocast every one that
 * a matmul reads or writes, the attention probabilities and the MLP activation hold values of the format;
 * only the residual stream (encoded, res2, res3) is carried in fp32. */
typedef struct {
    const fp_format *fmt;
    size_t checked, outside;
    char first[64];
} format_probe;

static void check_in_format(void *ctx, int layer, const char *name, float *x, size_t n) {
    format_probe *p = ctx;
    if (!strcmp(name, "encoded") || !strcmp(name, "res2") || !strcmp(name, "res3")) return;
    for (size_t i = 0; i < n; i++, p->checked++)
        if (fp_round_to(p->fmt, x[i]) != x[i] && !p->outside++)
            snprintf(p->first, sizeof p->first, "%s of layer %d: %.9g", name, layer, x[i]);
}

/* One mesh of 8 ranks trained under a recipe (mp_step_set_amp) for STEPS steps: its trace. */
static void mesh_run(const tiny_model *tm, const mesh_case *mc, const optim_config *opt, amp_recipe recipe,
                     long inject_rank, long inject_at, run_trace *out, bool *local_inf, bool *skipped) {
    int m = ROWS / mc->dp;
    mp_layout lay = {.dp = mc->dp, .tp = mc->tp, .pp = mc->pp, .micro_batches = m, .schedule = mc->schedule,
                     .chunks = mc->chunks, .zero_stage = mc->zero, .sequence_parallel = mc->sp};
    mp_step *s = mp_step_create(world, &tm->cfg, &lay, opt, CLIP, SEED, NULL);
    amp_scaler_config sc = test_scaler(recipe);
    mp_step_set_amp(s, recipe, &sc);
    if (rank == inject_rank) mp_step_inject_inf(s, inject_at);
    format_probe probe = {.fmt = amp_recipe_get(recipe)->low};
    for (int j = 0; j < mp_step_chunks(s); j++) model_set_act_probe(mp_step_model(s, j), check_in_format, &probe);
    mesh_t *mesh = mp_step_mesh(s);
    int *in = xmalloc(ROWS * T * sizeof(int)), *tg = xmalloc(ROWS * T * sizeof(int));
    size_t n = mp_step_params(s);
    float *before = xmalloc(n * sizeof(float));
    for (int step = 0; step < STEPS; step++) {
        make_batch(step, tm->cfg.V, in, tg);
        size_t mine = (size_t)mesh->dp_rank * m * T;
        if (step == inject_at) memcpy(before, model_params(mp_step_model(s, 0)), n * sizeof(float));
        mp_step_result r = mp_step_run(s, in + mine, tg + mine, 1, T, LR, step);
        out->loss[step] = r.loss, out->norm[step] = r.grad_norm, out->scale[step] = r.update.scale;
        if (local_inf) local_inf[step] = r.found_inf_local;
        if (skipped) skipped[step] = r.skipped;
        if (step == inject_at && r.skipped && memcmp(before, model_params(mp_step_model(s, 0)), n * sizeof(float)))
            complain("step %d was skipped but this rank's weights changed", step + 1);
    }
    if (!probe.checked || probe.outside)
        complain("%zu of %zu activation values are not %s values (first: %s): the shard does not compute in %s",
                 probe.outside, probe.checked, probe.fmt->name, probe.first, probe.fmt->name);
    /* An evaluation after the last step reads the updated weights. pp_run holds each chunk's weights over its
     * micro-batches (model_hold_weights: cast once a step) and must release them before the update; a forward
     * after a release casts afresh. So releasing them again here must not change the evaluation's loss. */
    size_t mine = (size_t)mesh->dp_rank * m * T;
    float after_step = pp_evaluate(mp_step_pipeline(s), in + mine, tg + mine, m, 1, T);
    for (int j = 0; j < mp_step_chunks(s); j++) model_hold_weights(mp_step_model(s, j), false);
    float recast = pp_evaluate(mp_step_pipeline(s), in + mine, tg + mine, m, 1, T);
    if (memcmp(&after_step, &recast, sizeof recast))
        complain("%s: an evaluation after the last step gave loss %.9g, and %.9g once the weights were cast again: "
                 "the pipeline's step left its weights held, so the evaluation read the cast from before the update",
                 amp_recipe_get(recipe)->name, after_step, recast);
    reportf("%s on dp%d x tp%d x pp%d%s under %s: activations in %s, and an evaluation after the last step reads the "
            "updated weights", tm->name, mc->dp, mc->tp, mc->pp, mc->sp ? " with sequence parallel" : "",
            amp_recipe_get(recipe)->name, probe.fmt->name);
    free(before), free(in), free(tg);
    mp_step_free(s);
}

/* One recipe's run on a mesh against one rank's run of the recipe: losses, norms and loss scales within the
 * recipe's tolerance (the report says how far the fp32 run is: the shards really compute in the format). */
static void compare_recipe_run(const tiny_model *tm, const mesh_case *mc, const amp_tolerance *tol, const run_trace *ref,
                               const run_trace *got, const run_trace *fp32) {
    const char *name = amp_recipe_get(tol->recipe)->name;
    double loss[STEPS], want[STEPS], base[STEPS];
    for (int i = 0; i < STEPS; i++) loss[i] = got->loss[i], want[i] = ref->loss[i], base[i] = fp32->loss[i];
    int at, norm_at, base_at;
    double worst = worst_rel(loss, want, STEPS, &at), norm_worst = worst_rel(got->norm, ref->norm, STEPS, &norm_at);
    double from_fp32 = worst_rel(loss, base, STEPS, &base_at); /* for the report: how far fp32 is */
    if (!(worst <= tol->loss_tol))
        complain("%s%s step %d: loss %.6f, one rank %.6f (relative %.2e > %.0e)", name,
                 mc->sp ? " with sequence parallel" : "", at + 1, loss[at], want[at], worst, tol->loss_tol);
    else if (!(norm_worst <= tol->norm_tol))
        complain("%s step %d: gradient norm %.6f, one rank %.6f (relative %.2e > %.0e): the norm of the unscaled "
                 "gradients, each parameter once", name, norm_at + 1, got->norm[norm_at], ref->norm[norm_at],
                 norm_worst, tol->norm_tol);
    double first_norm = fabs(got->norm[0] - ref->norm[0]) / ref->norm[0];
    if (!(first_norm <= FIRST_NORM_TOLERANCE_PPM * 1e-6))
        complain("%s step 1: gradient norm %.6f, one rank %.6f (relative %.2e > %.0e): the norm of the unscaled "
                 "gradients, each parameter once", name, got->norm[0], ref->norm[0], first_norm,
                 FIRST_NORM_TOLERANCE_PPM * 1e-6);
    for (int i = 0; i < STEPS; i++)
        if (got->scale[i] != ref->scale[i]) {
            complain("%s step %d: loss scale %g, one rank %g: the scaler must see one rank's found_inf", name, i + 1,
                     got->scale[i], ref->scale[i]);
            break;
        }
    reportf("%s on dp%d x tp%d x pp%d%s under %s: losses within %.0e of one rank's %s run (worst "
            "%.1e; fp32 is %.1e away), gradient norms within %.2g (%.1e; step 1 %.1e), one rank's loss scales",
            tm->name, mc->dp, mc->tp, mc->pp, mc->sp ? " with sequence parallel" : "", name, tol->loss_tol, name,
            worst, from_fp32, tol->norm_tol, norm_worst, first_norm);
}

/* bf16 and fp16 on a 2x2x2 mesh give one rank's losses, norms and loss scales within the recipe's
 * tolerance; with_sp: bf16 again with sequence parallel on the same mesh. */
static void check_recipe_on_mesh(const tiny_model *tm, const optim_config *opt, const run_trace *fp32, bool with_sp) {
    const mesh_case mc = {2, 2, 2, PP_1F1B, 1, 0, false, 1}, sp = {2, 2, 2, PP_1F1B, 1, 0, true, 1};
    for (size_t k = 0; k < sizeof amp_tolerances / sizeof amp_tolerances[0]; k++) {
        const amp_tolerance *tol = &amp_tolerances[k];
        run_trace ref, got;
        shared_reference(&tm->cfg, opt, tol->recipe, &ref);
        mesh_run(tm, &mc, opt, tol->recipe, -1, -1, &got, NULL, NULL);
        compare_recipe_run(tm, &mc, tol, &ref, &got, fp32);
        if (!with_sp || tol->recipe != AMP_RECIPE_BF16) continue;
        mesh_run(tm, &sp, opt, tol->recipe, -1, -1, &got, NULL, NULL);
        compare_recipe_run(tm, &sp, tol, &ref, &got, fp32);
    }
}

/* fp16 on 2x2x2 with an inf planted in the gradients of world rank 5 alone (dp 0, tp 1, stage 1) at step 3:
 * only rank 5 finds it, every rank skips that step with the same scale, halves the scale, and keeps its
 * weights; the other steps are taken. */
static void check_planted_overflow(const tiny_model *tm, const optim_config *opt) {
    const mesh_case mc = {2, 2, 2, PP_1F1B, 1, 0, false, 1};
    enum { PLANT_RANK = 5, PLANT_AT = 2 };
    run_trace got;
    bool local[STEPS], skipped[STEPS];
    mesh_run(tm, &mc, opt, AMP_RECIPE_FP16, PLANT_RANK, PLANT_AT, &got, local, skipped);
    for (int i = 0; i < STEPS; i++) {
        bool plant = i == PLANT_AT;
        if (local[i] != (plant && rank == PLANT_RANK))
            complain("step %d: this rank's own found_inf %d, expected %d", i + 1, local[i], plant && rank == PLANT_RANK);
        else if (skipped[i] != plant)
            complain("step %d: skipped %d on this rank, expected %d (an overflow on rank %d skips every rank's step)",
                     i + 1, skipped[i], plant, PLANT_RANK);
    }
    if (got.scale[PLANT_AT + 1] != got.scale[PLANT_AT] / 2)
        complain("the step after the overflow used scale %g, expected %g / 2 (GradScaler's backoff)",
                 got.scale[PLANT_AT + 1], got.scale[PLANT_AT]);
    float scales[8 * STEPS];
    MPI_Allgather(got.scale, STEPS, MPI_FLOAT, scales, STEPS, MPI_FLOAT, MPI_COMM_WORLD);
    if (memcmp(scales, scales + (size_t)rank * STEPS, sizeof got.scale))
        complain("this rank's loss scales differ from rank 0's");
    reportf("%s on dp2 x tp2 x pp2 under fp16: an inf in rank %d's gradients at step %d skips the step on all 8 "
            "ranks (weights kept, found_inf_local on rank %d only) and halves the same scale everywhere", tm->name,
            PLANT_RANK, PLANT_AT + 1, PLANT_RANK);
}

/* The schedules' bubble from their order alone equals (p-1)/(m+p-1), with backward as long as forward
 * or twice as long; GPipe holds m micro-batches, 1F1B min(p - s, m). */
static void check_schedule_bubbles(void) {
    int in_flight[16];
    for (int kind = 0; kind < PP_INTERLEAVED; kind++)
        for (int p = 1; p <= 8; p++)
            for (int m = 1; m <= 12; m++)
                for (double tb = 1; tb <= 2; tb++) {
                    double got = pp_schedule_bubble(kind, p, m, 1, 1.0, tb, in_flight), want = pp_bubble_formula(p, m, 1);
                    if (fabs(got - want) > 1e-12)
                        complain("%s p=%d m=%d t_bwd=%g: bubble %.6f, formula (p-1)/(m+p-1) = %.6f",
                                 pp_schedule_names[kind], p, m, tb, got, want);
                    for (int s = 0; s < p; s++) {
                        int expect = kind == PP_GPIPE ? m : (p - s < m ? p - s : m);
                        if (in_flight[s] != expect)
                            complain("%s p=%d m=%d stage %d: %d in flight, expected %d", pp_schedule_names[kind], p,
                                     m, s, in_flight[s], expect);
                    }
                }
    report("gpipe and 1f1b: bubble from the schedule order = (p-1)/(m+p-1); in flight m and min(p-s, m)");
    /* Interleaved: v chunks shrink the bubble v-fold, to (p-1)/(v m + p - 1), for m a multiple of p. */
    for (int p = 2; p <= 8; p++)
        for (int v = 2; v <= 4; v++)
            for (int m = p; m <= 3 * p; m += p) {
                double got = pp_schedule_bubble(PP_INTERLEAVED, p, m, v, 1.0, 1.0, in_flight);
                double want = pp_bubble_formula(p, m, v), plain = pp_bubble_formula(p, m, 1);
                if (fabs(got - want) > 1e-12)
                    complain("interleaved p=%d m=%d v=%d: bubble %.6f, formula (p-1)/(vm+p-1) = %.6f (1f1b's %.6f)", p,
                             m, v, got, want, plain);
            }
    report("interleaved: bubble from the schedule order = (p-1)/(v m + p - 1), v times smaller than 1f1b's ramp");
}

int main(int argc, char **argv) {
    start_under_mpirun(&argc, &argv, "test_model_parallel");
    if (nranks != 8) {
        if (rank == 0) fprintf(stderr, "test_model_parallel: run me on 8 ranks (every mesh here has 8)\n");
        comm_finalize(world);
        return 2;
    }
    ev_writer *ev = argc > 1 ? ev_open(argv[1], rank) : NULL;
    check_schedule_bubbles();
    optim_config opt = optim_config_default(OPTIM_ADAMW);
    for (size_t k = 0; k < sizeof tiny_models / sizeof tiny_models[0]; k++) {
        tiny_model *tm = &tiny_models[k];
        model_config_complete(&tm->cfg);
        run_trace reference;
        shared_reference(&tm->cfg, &opt, AMP_RECIPE_FP32, &reference);
        size_t act[NCASES];
        for (int c = 0; c < NCASES; c++) {
            act[c] = 0;
            if (c == CASE_SP_ROWS && k > 0) continue; /* the reordering path once is enough (make test's time) */
            act[c] = run_case(tm, &cases[c], &opt, &reference,
                              k + 1 == sizeof tiny_models / sizeof tiny_models[0] && c == 2 ? ev : NULL);
        }
        /* Cases 1 and 2 are the same 1x2x4 mesh with 8 micro-batches under 1f1b and gpipe: on the first
         * stage GPipe's activations (the allocator's MEM_ACT) are 8 micro-batches', 1F1B's 4 (p). */
        int stage = rank / 2; /* dp 1 x tp 2: ranks 2s and 2s+1 are stage s */
        size_t want = act[1] / (size_t)(4 - stage) * 8;
        if (act[2] != want)
            complain("stage %d: gpipe held %zu bytes of activations, 1f1b %zu; expected gpipe = 1f1b x 8/%d = %zu",
                     stage, act[2], act[1], 4 - stage, want);
        reportf("%s on 1x2x4: gpipe's activation bytes (MEM_ACT) are m/min(p-s, m) times 1f1b's on every stage",
                tm->name);
        check_sp_memory(tm, act[CASE_TP], act[CASE_SP]);
        check_recipe_on_mesh(tm, &opt, &reference, k == 0);
        if (k == 0) check_planted_overflow(tm, &opt);
    }
    if (ev) ev_close(ev);
    comm_finalize(world);
    return failed_checks ? 1 : 0;
}
