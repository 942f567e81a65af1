/* stall.c: lab 09's measurement: the tiny GPT trained with bf16 weights four ways, per step the loss and the share
 * of weights that did not change.
 *
 * The four variants share the config, the initial weights, the batches and the bf16 matmuls; they differ only in
 * how an update reaches the weights:
 *   master      precision.recipe=bf16: fp32 weights (the master copy) under bf16 autocast; the update is applied
 *               in fp32 and the forward pass reads the bf16 rounding of the master
 *   nearest     precision.recipe=bf16-pure, stochastic_rounding=false: bf16 weights, the updated value rounded
 *               to nearest (your write_working_weights, part A)
 *   stochastic  the same with stochastic rounding
 *   kahan       bf16 weights and a bf16 compensation buffer: the update comes out of the same AdamW in fp32
 *               and is added with optim_kahan_bf16_update (part D); gradients stay fp32 (bf16-pure rounds
 *               them to bf16 as well, which matters little: compare nearest and stochastic)
 * "unchanged" counts the weights whose stored bits did not move in a step (for master: the fp32 master, and,
 * beside it, its bf16 rounding, what the forward pass sees). In the master run it also counts the updates
 * smaller than half an ulp of bf16 at their weight: the ones round-to-nearest would throw away.
 *
 * The loss of each variant is the loss `mixpar train` prints with the same settings (same code: config,
 * loader, model_init, train_step); the experiment checks one against the other.
 *
 * usage: stall CONFIG STEPS OUTDIR [VARIANT...] [--set KEY=VALUE]...
 *        writes OUTDIR/VARIANT.tsv (step, loss, unchanged %, bf16 view unchanged %, under half ulp %) and
 *        prints a summary table. Variants: master nearest stochastic kahan (default: all four). */
#include "amp/setup.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/mem.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/tokens.h"
#include "model/model_lowp.h"
#include "optim/compensated.h"
#include "train/config.h"
#include "train/step.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { MAX_SETS = 64 };

typedef enum { V_MASTER, V_NEAREST, V_STOCHASTIC, V_KAHAN, NVARIANTS } variant;

/* The settings each variant adds to the user's; kahan trains through the plain fp32 step and rounds itself. */
static const struct {
    const char *name;
    const char *title;
    const char *sets[2];
} VARIANTS[NVARIANTS] = {
    [V_MASTER] = {"master", "bf16 autocast, fp32 master weights", {"precision.recipe=bf16", NULL}},
    [V_NEAREST] = {"nearest", "bf16 weights, round to nearest",
                   {"precision.recipe=bf16-pure", "precision.stochastic_rounding=false"}},
    [V_STOCHASTIC] = {"stochastic", "bf16 weights, stochastic rounding",
                      {"precision.recipe=bf16-pure", "precision.stochastic_rounding=true"}},
    [V_KAHAN] = {"kahan", "bf16 weights + bf16 Kahan compensation", {"precision.recipe=bf16-pure", NULL}},
};

typedef struct {
    float first_loss, last_loss;       /* the first step's and the mean of the last 10 steps' */
    double unchanged_last;             /* % of stored weights unchanged, mean over the last 10 steps */
    double view_unchanged_last;        /* % of bf16 views unchanged, mean over the last 10 steps */
    double never_changed;              /* % of weights whose bf16 value never changed during the run */
    double below_half_ulp_last;        /* master: % of its moves under half a bf16 ulp (last 10 steps) */
    double drift;                      /* RMS of (weights - the master run's weights) at the end, over RMS of the
                                        * master run's total change: 0 = where fp32 got, 1 = as far off as not
                                        * training at all */
} summary;

static void ensure_dataset(const train_config *cfg) {
    char path[4096];
    struct stat st;
    if (!config_data_path(cfg, "train.tokens", path, sizeof path))
        MP_FAIL("a data path shorter than 4096 bytes", "data.dir '%s'", cfg->data.dir);
    if (stat(path, &st) == 0) return;
    const dataset_spec *spec = dataset_find(cfg->data.dataset);
    if (!spec) MP_FAIL("a dataset mixpar can build", "'%s'", cfg->data.dataset);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", cfg->data.dir, cfg->data.dataset);
    dataset_options opt = dataset_default_options();
    dataset_result res;
    dataset_build(spec, dir, &opt, &res, NULL);
}

/* Half the spacing of bf16 numbers at |w|: an update smaller than this is lost by rounding to nearest. */
static float half_ulp_bf16(float w) {
    float a = fabsf(w);
    if (a < 0x1p-126f) return 0x1p-134f; /* subnormal spacing 2^-133 */
    int e;
    frexpf(a, &e); /* a = f * 2^e, f in [0.5, 1): the binade [2^(e-1), 2^e), spacing 2^(e-1-7) */
    return ldexpf(1.0f, e - 1 - 7 - 1);
}

/* The master run's weights at the start and at the end, for the drift column. */
typedef struct {
    size_t n;
    float *init, *final;
} reference;

static void run_variant(variant v, const char *config_path, const char *const *user_sets, int nuser, long steps,
                        const char *outdir, reference *ref, summary *sum) {
    const char *sets[MAX_SETS];
    int nsets = 0;
    for (int i = 0; i < nuser; i++) sets[nsets++] = user_sets[i];
    for (int i = 0; i < 2 && VARIANTS[v].sets[i]; i++) sets[nsets++] = VARIANTS[v].sets[i];
    char steps_set[64];
    snprintf(steps_set, sizeof steps_set, "train.steps=%ld", steps);
    sets[nsets++] = steps_set;
    train_config cfg;
    config_load(config_path, sets, nsets, 1, &cfg, NULL);
    ensure_dataset(&cfg);
    config_load_vocab(&cfg, NULL);
    amp_setup precision;
    amp_recipe_from_config(&cfg, &precision, NULL);

    /* The trainer's data and model, built the same way (train/trainer.c). */
    char path[4096];
    config_data_path(&cfg, "train.tokens", path, sizeof path);
    tokfile *tokens = tokfile_open(path, NULL);
    const int B = cfg.micro_batch, T = cfg.data.seq_len;
    MP_ASSERT(cfg.grad_accum == 1, "this driver runs one micro-batch per step");
    loader tl;
    loader_init(&tl, tokens, 0, tokens->token_count, B, T, cfg.data.order, cfg.train.seed, NULL);
    model_config mc = cfg.model.model;
    model_config_complete(&mc);
    model *m = model_create(&mc);
    model_init(m, cfg.train.seed);
    model_precision mp = amp_model_precision(&precision);
    model_set_precision(m, &mp);
    train_step ts;
    train_step_init(&ts, m, &cfg.optimizer, cfg.gradient_clipping);
    size_t n = model_num_params(m);
    float *w = model_params(m);
    float *comp = NULL;
    if (v == V_KAHAN) {
        comp = mem_alloc(n * sizeof(float), MEM_OPTIM, "kahan compensation (bf16 values)");
        for (size_t i = 0; i < n; i++) w[i] = optim_round_bf16(w[i]); /* bf16 weights from the start */
    } else {
        train_step_set_amp(&ts, precision.recipe, &precision.scaler, precision.stochastic_rounding, cfg.train.seed);
    }
    float *before = malloc(n * sizeof(float)), *update = malloc(n * sizeof(float));
    float *initial_view = malloc(n * sizeof(float));
    unsigned char *changed_ever = calloc(n, 1);
    MP_ASSERT(before && update && initial_view && changed_ever, "out of memory");
    for (size_t i = 0; i < n; i++) initial_view[i] = optim_round_bf16(w[i]);
    if (v == V_MASTER) {
        ref->init = malloc(n * sizeof(float));
        MP_ASSERT(ref->init, "out of memory");
        memcpy(ref->init, w, n * sizeof(float));
    }

    char tsv_path[4200];
    snprintf(tsv_path, sizeof tsv_path, "%s/%s.tsv", outdir, VARIANTS[v].name);
    FILE *tsv = fopen(tsv_path, "w");
    if (!tsv) MP_FAIL("a writable output folder", "cannot write %s", tsv_path);
    fprintf(tsv, "# %s: %s\n# step\tloss\tunchanged_pct\tbf16_view_unchanged_pct\tunder_half_ulp_pct\n",
            VARIANTS[v].name, VARIANTS[v].title);

    memset(sum, 0, sizeof *sum);
    double loss_tail = 0, unchanged_tail = 0, view_tail = 0, below_tail = 0;
    int tail = 0;
    for (long step = 0; step < steps; step++) {
        loader_next(&tl);
        memcpy(before, w, n * sizeof(float));
        double lr = lr_schedule_at(&cfg.scheduler, step);
        train_step_result r = train_step_run(&ts, tl.inputs, tl.targets, B, T, 1, lr);
        if (v == V_KAHAN && !r.skipped) { /* the fp32 step's update, added to the bf16 weights with compensation */
            for (size_t i = 0; i < n; i++) {
                update[i] = w[i] - before[i];
                w[i] = before[i];
            }
            optim_kahan_bf16_update(w, comp, update, n);
        }
        size_t unchanged = 0, view_unchanged = 0, below = 0, moved = 0;
        for (size_t i = 0; i < n; i++) {
            float view = optim_round_bf16(w[i]), view_before = optim_round_bf16(before[i]);
            unchanged += w[i] == before[i];
            view_unchanged += view == view_before;
            if (view != initial_view[i]) changed_ever[i] = 1;
            if (v == V_MASTER && w[i] != before[i]) {
                moved++;
                below += fabsf(w[i] - before[i]) < half_ulp_bf16(before[i]);
            }
        }
        double pct = 100.0 * unchanged / n, view_pct = 100.0 * view_unchanged / n;
        double below_pct = moved ? 100.0 * below / moved : NAN;
        fprintf(tsv, "%ld\t%.6f\t%.3f\t%.3f\t%.3f\n", step + 1, r.loss, pct, view_pct, below_pct);
        if (step == 0) sum->first_loss = r.loss;
        if (step >= steps - 10) {
            loss_tail += r.loss;
            unchanged_tail += pct;
            view_tail += view_pct;
            below_tail += below_pct;
            tail++;
        }
    }
    fclose(tsv);
    sum->last_loss = (float)(loss_tail / tail);
    sum->unchanged_last = unchanged_tail / tail;
    sum->view_unchanged_last = view_tail / tail;
    sum->below_half_ulp_last = v == V_MASTER ? below_tail / tail : NAN;
    size_t ever = 0;
    for (size_t i = 0; i < n; i++) ever += changed_ever[i];
    sum->never_changed = 100.0 * (double)(n - ever) / n;
    /* How far from where the fp32 master weights got, relative to how far those moved from the start. */
    if (v == V_MASTER) {
        ref->n = n;
        ref->final = malloc(n * sizeof(float));
        MP_ASSERT(ref->final, "out of memory");
        memcpy(ref->final, w, n * sizeof(float));
    }
    sum->drift = NAN;
    if (ref->final && ref->n == n) {
        double off = 0, moved_total = 0;
        for (size_t i = 0; i < n; i++) {
            double d = (double)w[i] - ref->final[i], t = (double)ref->final[i] - ref->init[i];
            off += d * d;
            moved_total += t * t;
        }
        sum->drift = moved_total > 0 ? sqrt(off / moved_total) : NAN;
    }
    free(before);
    free(update);
    free(initial_view);
    free(changed_ever);
    mem_free(comp);
    train_step_free(&ts);
    model_free(m);
    loader_free(&tl);
    tokfile_close(tokens);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s CONFIG STEPS OUTDIR [VARIANT...] [--set KEY=VALUE]...\n"
                        "variants: master nearest stochastic kahan (default: all four)\n", argv[0]);
        return 2;
    }
    const char *config_path = argv[1], *outdir = argv[3];
    char *end;
    long steps = strtol(argv[2], &end, 10);
    if (*end || steps < 10 || steps > 100000) MP_FAIL("STEPS, a whole number from 10 to 100000", "'%s'", argv[2]);
    const char *sets[MAX_SETS];
    int nsets = 0;
    bool wanted[NVARIANTS] = {0}, any = false;
    for (int i = 4; i < argc; i++) {
        if (strcmp(argv[i], "--set") == 0 && i + 1 < argc) {
            if (nsets == MAX_SETS - 4) MP_FAIL("at most 60 --set options", "more");
            sets[nsets++] = argv[++i];
            continue;
        }
        int found = -1;
        for (int k = 0; k < NVARIANTS; k++)
            if (strcmp(argv[i], VARIANTS[k].name) == 0) found = k;
        if (found < 0) MP_FAIL("a variant (master, nearest, stochastic, kahan) or --set KEY=VALUE", "'%s'", argv[i]);
        wanted[found] = any = true;
    }
    mkdir(outdir, 0777);
    summary sums[NVARIANTS];
    reference ref = {0};
    for (int k = 0; k < NVARIANTS; k++) {
        if (any && !wanted[k]) continue;
        double t0 = mp_now();
        run_variant((variant)k, config_path, sets, nsets, steps, outdir, &ref, &sums[k]);
        fprintf(stderr, "%s: %ld steps in %.1f s\n", VARIANTS[k].name, steps, mp_now() - t0);
    }
    printf("%ld steps of each; loss = mean of the last 10 steps; unchanged = weights whose stored bits did not move in a "
           "step (mean of the last 10 steps)\n\n", steps);
    printf("%-11s %-40s %8s %8s %10s %10s %9s %8s\n", "variant", "weights and update", "loss@1", "loss", "unchanged",
           "bf16 view", "never", "off fp32");
    for (int k = 0; k < NVARIANTS; k++) {
        if (any && !wanted[k]) continue;
        const summary *u = &sums[k];
        printf("%-11s %-40s %8.4f %8.4f %9.1f%% %9.1f%% %8.1f%% %8.2f\n", VARIANTS[k].name, VARIANTS[k].title,
               u->first_loss, u->last_loss, u->unchanged_last, u->view_unchanged_last, u->never_changed, u->drift);
    }
    if (!any || wanted[V_MASTER])
        printf("\nmaster run: %.1f%% of its fp32 updates (last 10 steps) were smaller than half a bf16 ulp of their "
               "weight: what round-to-nearest drops\n", sums[V_MASTER].below_half_ulp_last);
    printf("bf16 view: the weight rounded to bf16, what the matmuls read; never: %% of weights whose bf16 value never "
           "changed in the run;\noff fp32: RMS distance from the master run's final weights / RMS of the master "
           "run's total change\n");
    free(ref.init);
    free(ref.final);
    return 0;
}
