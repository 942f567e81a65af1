/* test_model_parallel.c: GPT-2 and LLaMA tiny models trained on dp x tp x pp meshes of real ranks give one rank's losses; pipeline schedules' bubble and in-flight micro-batches. */
#include "mpi_check.h"

#include "base/events.h"
#include "base/mem.h"
#include "dist/pp.h"
#include "model/model.h"
#include "train/mp_step.h"
#include "train/step.h"

#include <math.h>

/* Run under mpirun on 8 ranks (tests/mpi/run.sh); every mesh below uses all 8. Usage:
 *     test_model_parallel [EVENTS_DIR]     with a directory, each rank writes the pipeline's span events
 *                                          of the last case there (events.rankN.jsonl) */

enum { STEPS = 20, ROWS = 8, T = 16 }; /* a step's global batch: ROWS sequences of T tokens */
static const double LR = 3e-3, CLIP = 1.0, TOLERANCE = 1e-5;
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

/* One rank's losses: train_step (the single-rank trainer's step) over ROWS micro-batches of 1 row. */
static void reference_losses(const model_config *cfg, const optim_config *opt, float *losses) {
    model *m = model_create(cfg);
    model_init(m, SEED);
    train_step ts;
    train_step_init(&ts, m, opt, CLIP);
    int *in = xmalloc(ROWS * T * sizeof(int)), *tg = xmalloc(ROWS * T * sizeof(int));
    for (int s = 0; s < STEPS; s++) {
        make_batch(s, cfg->V, in, tg);
        losses[s] = train_step_run(&ts, in, tg, 1, T, ROWS, LR).loss;
    }
    free(in), free(tg);
    train_step_free(&ts);
    model_free(m);
}

typedef struct {
    int dp, tp, pp;
    pp_schedule schedule;
    int chunks; /* interleaved's v */
    int zero;   /* ZeRO stage over dp */
} mesh_case;

static const mesh_case cases[] = {
    {2, 2, 2, PP_1F1B, 1, 0}, {1, 2, 4, PP_1F1B, 1, 0}, {1, 2, 4, PP_GPIPE, 1, 0}, {1, 2, 4, PP_INTERLEAVED, 2, 0},
    {2, 4, 1, PP_1F1B, 1, 1}, {1, 1, 8, PP_1F1B, 1, 0},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

/* Trains one model on one mesh and compares with the reference; checks the pipeline's in-flight count.
 * Returns this rank's most activation bytes (MEM_ACT) during the last step. */
static size_t run_case(const tiny_model *tm, const mesh_case *mc, const optim_config *opt, const float *reference,
                       ev_writer *ev) {
    int m = ROWS / mc->dp; /* micro-batches per dp rank: the global batch stays ROWS rows of 1 */
    mp_layout lay = {.dp = mc->dp, .tp = mc->tp, .pp = mc->pp, .micro_batches = m, .schedule = mc->schedule,
                     .chunks = mc->chunks, .zero_stage = mc->zero};
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
    double worst = 0;
    int worst_step = 0;
    float got_at_worst = 0;
    for (int step = 0; step < STEPS; step++) {
        make_batch(step, tm->cfg.V, in, tg);
        size_t mine = (size_t)mesh->dp_rank * m * T; /* this dp rank's rows */
        mp_step_result r = mp_step_run(s, in + mine, tg + mine, 1, T, LR, step);
        double rel = fabs((double)r.loss - reference[step]) / fabs((double)reference[step]);
        if (!(rel <= worst)) worst = rel, worst_step = step, got_at_worst = r.loss; /* NaN stays worst */
    }
    if (!(worst <= TOLERANCE))
        complain("step %d: loss %.7f, one rank %.7f (relative %.2e > %.0e): a shard's slice, a missing tp "
                 "reduction or a wrong pipeline hand-off", worst_step, got_at_worst, reference[worst_step], worst,
                 TOLERANCE);
    reportf("%s on dp%d x tp%d x pp%d (%s, %d micro-batches%s%s): %d losses within %.0e of one rank (worst %.1e)",
            tm->name, mc->dp, mc->tp, mc->pp, pp_schedule_names[mc->schedule], m, mc->chunks > 1 ? ", 2 chunks" : "",
            mc->zero ? ", ZeRO-1 over dp" : "", STEPS, TOLERANCE, worst);

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
        float reference[STEPS];
        if (rank == 0) reference_losses(&tm->cfg, &opt, reference);
        MPI_Bcast(reference, STEPS, MPI_FLOAT, 0, MPI_COMM_WORLD);
        size_t act[NCASES];
        for (int c = 0; c < NCASES; c++)
            act[c] = run_case(tm, &cases[c], &opt, reference,
                              k + 1 == sizeof tiny_models / sizeof tiny_models[0] && c == 2 ? ev : NULL);
        /* Cases 1 and 2 are the same 1x2x4 mesh with 8 micro-batches under 1f1b and gpipe: on the first
         * stage GPipe's activations (the allocator's MEM_ACT) are 8 micro-batches', 1F1B's 4 (p). */
        int stage = rank / 2; /* dp 1 x tp 2: ranks 2s and 2s+1 are stage s */
        size_t want = act[1] / (size_t)(4 - stage) * 8;
        if (act[2] != want)
            complain("stage %d: gpipe held %zu bytes of activations, 1f1b %zu; expected gpipe = 1f1b x 8/%d = %zu",
                     stage, act[2], act[1], 4 - stage, want);
        reportf("%s on 1x2x4: gpipe's activation bytes (MEM_ACT) are m/min(p-s, m) times 1f1b's on every stage",
                tm->name);
    }
    if (ev) ev_close(ev);
    comm_finalize(world);
    return failed_checks ? 1 : 0;
}
