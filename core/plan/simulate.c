/* simulate.c: the alpha-beta model of a training step on a cluster: presets, collective costs, strategies (lab 26). */
#include "plan/simulate.h"

#include "base/lab.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ clusters
 * Bandwidths are per GPU and per direction, from the vendors' datasheets (peak figures: nccl-tests typically
 * measures 75-90% of them as busbw); latencies are typical orders of magnitude for one NCCL or MPI message
 * (a few microseconds on NVLink and InfiniBand, tens over TCP on Ethernet), not measurements of ours: the
 * "local" cluster of `mixpar simulate --calibrate` is the measured one. */
enum { GB = 1000 * 1000 * 1000 };
static const sim_cluster CLUSTERS[] = {
    {"dgx-h100-ib",
     "8 x H100 SXM per node, NVLink 4 (900 GB/s per GPU both ways: 450 each way; NVIDIA H100 datasheet), "
     "8 x 400 Gb/s NDR InfiniBand per node, one ConnectX-7 per GPU (NVIDIA DGX H100 datasheet), 989 TFLOP/s dense "
     "bf16, 80 GB",
     8, 450.0 * GB, 3e-6, 50.0 * GB, 6e-6, 989e12, 80.0 * GB},
    {"dgx-a100-ib",
     "8 x A100 SXM per node, NVLink 3 (600 GB/s both ways: 300 each way; NVIDIA A100 datasheet), 8 x 200 Gb/s HDR "
     "InfiniBand per node (NVIDIA DGX A100 datasheet), 312 TFLOP/s dense bf16, 80 GB",
     8, 300.0 * GB, 3e-6, 25.0 * GB, 6e-6, 312e12, 80.0 * GB},
    {"eth-100g",
     "8 x H100 SXM per node with NVLink 4 as dgx-h100-ib, but one 100 Gb/s Ethernet port per node (12.5 GB/s shared "
     "by 8 GPUs, TCP latency)",
     8, 450.0 * GB, 3e-6, 12.5 * GB / 8, 30e-6, 989e12, 80.0 * GB},
};
enum { NCLUSTERS = sizeof CLUSTERS / sizeof CLUSTERS[0] };

int sim_cluster_count(void) { return NCLUSTERS; }
const sim_cluster *sim_cluster_at(int index) { return index >= 0 && index < NCLUSTERS ? &CLUSTERS[index] : NULL; }
bool sim_cluster_find(const char *name, sim_cluster *out) {
    for (int i = 0; i < NCLUSTERS; i++)
        if (strcmp(CLUSTERS[i].name, name) == 0) return *out = CLUSTERS[i], true;
    return false;
}

/* ------------------------------------------------------------------ models
 * The planner's presets, and shapes only the scaling study needs. LLaMA-2 70B (Touvron et al. 2023, "Llama 2"):
 * 80 layers, h = 8192, 64 heads, 8 key/value heads, SwiGLU size 28672, V = 32000, context 4096: 68.98e9
 * parameters. (Not a planner preset: its MLP size does not follow plan_default_ffn's rule.) */
static const plan_model EXTRA_MODELS[] = {
    {"llama-70b", PLAN_ARCH_LLAMA, 80, 8192, 64, 8, 28672, 32000, 4096, false},
};
enum { NEXTRA = sizeof EXTRA_MODELS / sizeof EXTRA_MODELS[0] };

bool sim_model_find(const char *name, plan_model *out) {
    if (plan_preset_find(name, out)) return true;
    for (int i = 0; i < NEXTRA; i++)
        if (strcmp(EXTRA_MODELS[i].name, name) == 0) return *out = EXTRA_MODELS[i], true;
    return false;
}

const char *sim_model_names(void) {
    static char names[512];
    size_t used = 0;
    for (int i = 0; i < plan_preset_count() + NEXTRA; i++) {
        const char *n = i < plan_preset_count() ? plan_preset_at(i)->name : EXTRA_MODELS[i - plan_preset_count()].name;
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", n);
        if (used >= sizeof names) break;
    }
    return names;
}

/* ------------------------------------------------------------------ the cost of collectives */

double sim_ring_allreduce_s(int p, double bytes, double alpha, double bw) {
    /* LAB 26 BEGIN ring allreduce time: 2(p-1) steps, each one message of bytes/p */
    if (p <= 1) return 0.0;
    return 2.0 * (p - 1) * (alpha + bytes / ((double)p * bw));
    /* LAB 26 END */
}

double sim_ring_half_s(int p, double bytes, double alpha, double bw) {
    return p <= 1 ? 0.0 : (p - 1) * (alpha + bytes / ((double)p * bw));
}

double sim_exposed_comm_s(double comm_s, double last_bucket_s, double overlap_s) {
    /* LAB 26 BEGIN exposed communication: what backward cannot hide, plus the last bucket */
    double hidden_part = comm_s - last_bucket_s - overlap_s;
    return (hidden_part > 0 ? hidden_part : 0.0) + last_bucket_s;
    /* LAB 26 END */
}

/* p GPUs on consecutive nodes: k of them per node, q nodes (p <= gpus_per_node: one node, k = p). */
static void node_split(const sim_cluster *c, int p, int *k, int *q) {
    *k = p < c->gpus_per_node ? p : c->gpus_per_node;
    *q = (p + *k - 1) / *k;
}

double sim_allreduce_s(const sim_cluster *c, int p, double bytes) {
    int k, q;
    node_split(c, p, &k, &q);
    return sim_ring_allreduce_s(k, bytes, c->intra_alpha, c->intra_bw) +
           sim_ring_allreduce_s(q, bytes / k, c->inter_alpha, c->inter_bw);
}

double sim_reduce_scatter_s(const sim_cluster *c, int p, double bytes) {
    int k, q;
    node_split(c, p, &k, &q);
    return sim_ring_half_s(k, bytes, c->intra_alpha, c->intra_bw) +
           sim_ring_half_s(q, bytes / k, c->inter_alpha, c->inter_bw);
}

/* ------------------------------------------------------------------ strategies */

/* The data-parallel family as data: how gradients are reduced, what is gathered, what is sharded (ZeRO, lab 19).
 * States per GPU in bf16 mixed precision with Adam: 2 (weights) + 2 (grads) + 12 (fp32 master, m, v) bytes per
 * parameter, each part divided by G where it is sharded. */
typedef struct {
    const char *name;
    bool reduce_scatter;     /* gradients: reduce-scatter (each rank keeps its shard) instead of allreduce */
    bool gather_after_step;  /* allgather the updated weights after the step (ZeRO-1/2) */
    bool gather_per_layer;   /* allgather each layer's weights in forward and again in backward (ZeRO-3) */
    bool shard_weights, shard_grads, shard_optim;
} strategy_info;

static const strategy_info STRATEGIES[SIM_NSTRATEGIES] = {
    [SIM_DP] = {"dp", false, false, false, false, false, false},
    [SIM_ZERO1] = {"zero1", true, true, false, false, false, true},
    [SIM_ZERO2] = {"zero2", true, true, false, false, true, true},
    [SIM_ZERO3] = {"zero3", true, false, true, true, true, true},
    [SIM_3D] = {"3d", false, false, false, false, false, false},
};

const char *sim_strategy_name(sim_strategy s) { return (unsigned)s < SIM_NSTRATEGIES ? STRATEGIES[s].name : "?"; }
int sim_strategy_from_name(const char *name) {
    for (int s = 0; s < SIM_NSTRATEGIES; s++)
        if (strcmp(STRATEGIES[s].name, name) == 0) return s;
    return -1;
}

sim_job sim_job_defaults(void) {
    return (sim_job){.gpus = 8, .strategy = SIM_DP, .mfu = 0.4, .tokens_per_gpu = 16384, .grad_bytes = 2,
                     .param_bytes = 2, .bucket_bytes = 25.0 * (1 << 20), .overlap = true, .tp = 8, .pp = 4,
                     .micro_batches = 16};
}

/* Gradients of `grad_bytes` in buckets of job j reduced over p GPUs: total time, the last bucket's, the count. */
static double bucketed(const sim_cluster *c, int p, double grad_bytes, const sim_job *j, bool reduce_scatter,
                       double *last_s, int *buckets) {
    double b = j->bucket_bytes > 0 && j->bucket_bytes < grad_bytes ? j->bucket_bytes : grad_bytes;
    double n = b > 0 ? ceil(grad_bytes / b) : 1, last = grad_bytes - (n - 1) * b;
    double (*reduce)(const sim_cluster *, int, double) = reduce_scatter ? sim_reduce_scatter_s : sim_allreduce_s;
    *last_s = reduce(c, p, last);
    *buckets = (int)n;
    return (n - 1) * reduce(c, p, b) + *last_s;
}

static void step_data_parallel(const sim_cluster *c, const plan_model *m, const sim_job *j, sim_result *r) {
    const strategy_info *s = &STRATEGIES[j->strategy];
    const int G = j->gpus;
    const double P = j->params, fwd = r->compute_s / 3, bwd = r->compute_s - fwd;
    double last = 0;
    double grads = bucketed(c, G, P * j->grad_bytes, j, s->reduce_scatter, &last, &r->buckets);
    double layer = s->gather_per_layer ? sim_reduce_scatter_s(c, G, P * j->param_bytes / (double)m->layers) : 0;
    double gathers = layer * (double)m->layers; /* one pass: forward, and the same again in backward */
    double after = s->gather_after_step ? sim_reduce_scatter_s(c, G, P * j->param_bytes) : 0;
    r->comm_s = grads + 2 * gathers + after;
    if (j->overlap)
        /* backward hides its gathers and the gradient buckets, forward its gathers but the first layer's */
        r->exposed_s = sim_exposed_comm_s(grads + gathers, last, bwd) + sim_exposed_comm_s(gathers, layer, fwd) + after;
    else
        r->exposed_s = r->comm_s;
    r->state_bytes = P * (2.0 / (s->shard_weights ? G : 1) + 2.0 / (s->shard_grads ? G : 1) +
                          12.0 / (s->shard_optim ? G : 1));
}

/* 3D (Megatron-LM, lab 28): tp GPUs of a node split every layer (4 activation allreduces per layer and micro-batch,
 * 2 forward and 2 backward, of tokens x h bf16 values, on NVLink, not hidden); pp stages pass activations forward and
 * gradients back (one message each per micro-batch, across nodes, 1/tp of it per GPU); the pipeline idles (pp-1)/(m+pp-1) of the time
 * (GPipe/1F1B bubble); data parallel over the remaining G/(tp pp) replicas reduces the 1/(tp pp) of the gradients
 * each GPU holds, across nodes, overlapped with the last micro-batch's backward only. */
static void step_3d(const sim_cluster *c, const plan_model *m, const sim_job *j, sim_result *r) {
    const int tp = j->tp, pp = j->pp, mb = j->micro_batches, G = j->gpus;
    if (tp < 1 || pp < 1 || mb < 1 || G % (tp * pp) != 0) {
        r->feasible = false;
        return;
    }
    const int dp = G / (tp * pp);
    const double h = (double)m->hidden, layers = (double)m->layers / pp;
    const double tokens_mb = j->tokens_per_gpu * tp * pp / mb; /* a replica's tokens per micro-batch */
    const double act = tokens_mb * h * 2;                                 /* bf16 activations of one micro-batch */
    const bool tp_in_node = tp <= c->gpus_per_node;
    double tp_s = mb * layers * 4 *
                  sim_ring_allreduce_s(tp, act, tp_in_node ? c->intra_alpha : c->inter_alpha,
                                       tp_in_node ? c->intra_bw : c->inter_bw);
    /* each of the tp GPUs of a stage sends its 1/tp slice (Megatron's scatter-gather, Narayanan et al. 2021) */
    double pp_s = pp > 1 ? 2.0 * mb * (c->inter_alpha + act / tp / c->inter_bw) : 0;
    r->bubble_s = r->compute_s * (pp - 1) / mb;
    sim_cluster across = *c; /* the dp group taken as one GPU per node (exact when tp fills the node): all network */
    across.gpus_per_node = 1;
    double last = 0;
    double grads = bucketed(&across, dp, j->params / (tp * pp) * j->grad_bytes, j, false, &last, &r->buckets);
    double last_backward = r->compute_s * 2 / 3 / mb;
    r->comm_s = tp_s + pp_s + grads;
    r->exposed_s = tp_s + pp_s + (j->overlap ? sim_exposed_comm_s(grads, last, last_backward) : grads);
    r->state_bytes = 16.0 * j->params / (tp * pp);
}

void sim_step(const sim_cluster *c, const plan_model *m, const sim_job *j, sim_result *out) {
    *out = (sim_result){.feasible = true};
    out->compute_s = 6.0 * j->params * j->tokens_per_gpu / (c->peak_flops * j->mfu);
    if (j->strategy == SIM_3D) step_3d(c, m, j, out);
    else step_data_parallel(c, m, j, out);
    if (!out->feasible) return;
    out->step_s = out->compute_s + out->bubble_s + out->exposed_s;
    out->efficiency = out->compute_s / out->step_s;
}
