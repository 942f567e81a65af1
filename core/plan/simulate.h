/* simulate.h: an alpha-beta model of data-parallel training on a cluster: step time and scaling efficiency (lab 26). */
#ifndef MIXPAR_PLAN_SIMULATE_H
#define MIXPAR_PLAN_SIMULATE_H

/* How well does data parallelism (数据并行) scale from one node to a thousand GPUs? Each GPU computes its share
 * of the batch at a fraction (MFU) of its peak, then the gradients are reduced over links of two kinds: fast ones
 * inside a node (NVLink) and a slower network between nodes (InfiniBand, Ethernet). A message of n bytes over
 * one link costs alpha + n / B (the alpha-beta or Hockney model: alpha the latency, B the bandwidth), so a ring
 * allreduce over p ranks, 2(p-1) steps each carrying n/p bytes, costs
 *
 *     T_ring(p, n) = 2 (p-1) (alpha + n / (p B))
 *
 * and the hierarchical allreduce (core/comm/algo_hier.c) on q nodes of k GPUs costs a ring inside the node plus
 * a ring of n/k across the nodes: T_ring_intra(k, n) + T_ring_inter(q, n/k).
 *
 * Compute (PaLM's model FLOPs, lab 10): a step of `tokens` tokens on G GPUs takes
 *
 *     t_compute = 6 x Psi x tokens / (G x peak x MFU)
 *
 * one third forward, two thirds backward. DDP (lab 13) reduces gradients in buckets while backward still runs, so
 * only what does not fit under the backward pass shows, plus the last bucket, which can only start when backward
 * ends:
 *
 *     exposed = max(0, comm - last_bucket - backward) + last_bucket
 *
 * Smaller buckets start earlier and shrink the last one, but each pays alpha again. step = t_compute + exposed;
 * the scaling efficiency (扩展效率) is t_compute / step: 1 is linear scaling.
 *
 *     sim_cluster c;  sim_cluster_find("dgx-h100-ib", &c);
 *     sim_job j = sim_job_defaults();  plan_model m;  sim_model_find("llama-7b", &m);
 *     j.params = plan_model_params(&m);  ...  j.gpus = 64;
 *     sim_result r;  sim_step(&c, &m, &j, &r);     // r.step_s, r.exposed_s, r.efficiency */

#include <stdbool.h>

#include "plan/plan.h"

/* ------------------------------------------------------------------ clusters */

typedef struct {
    char name[24];
    const char *about;   /* the hardware and where the figures come from */
    int gpus_per_node;
    double intra_bw;     /* bytes/s per GPU, one direction, inside a node */
    double intra_alpha;  /* seconds per message inside a node */
    double inter_bw;     /* bytes/s per GPU between nodes (a node's network bandwidth / its GPUs) */
    double inter_alpha;  /* seconds per message between nodes */
    double peak_flops;   /* dense bf16 FLOP/s per GPU */
    double gpu_bytes;    /* memory per GPU */
} sim_cluster;

int sim_cluster_count(void);
const sim_cluster *sim_cluster_at(int index);
bool sim_cluster_find(const char *name, sim_cluster *out); /* false when unknown */

/* The models: every planner preset (plan/tables.c) and the larger ones only the simulator needs (llama-70b). */
bool sim_model_find(const char *name, plan_model *out);
const char *sim_model_names(void); /* "gpt2-124m, ..., llama-70b" */

/* ------------------------------------------------------------------ the cost of collectives (lab 26) */

/* Ring allreduce of `bytes` over p ranks on links of latency alpha (s) and bandwidth bw (bytes/s):
 * 2 (p-1) (alpha + bytes / (p bw)); 0 for p = 1. */
double sim_ring_allreduce_s(int p, double bytes, double alpha, double bw);
/* Ring reduce-scatter or allgather (`bytes`: the whole buffer): (p-1) (alpha + bytes / (p bw)), half the above. */
double sim_ring_half_s(int p, double bytes, double alpha, double bw);
/* The part of `comm_s` seconds of bucketed communication that backward (overlap_s seconds of compute) cannot hide:
 * the last bucket (last_bucket_s of comm_s) always shows. */
double sim_exposed_comm_s(double comm_s, double last_bucket_s, double overlap_s);

/* Collectives over p GPUs of cluster c on consecutive nodes: a ring inside the node when p <= gpus_per_node,
 * else hierarchical (ring in the node, ring of bytes/k across the p/k nodes). */
double sim_allreduce_s(const sim_cluster *c, int p, double bytes);
double sim_reduce_scatter_s(const sim_cluster *c, int p, double bytes); /* also an allgather's time */

/* ------------------------------------------------------------------ one training step */

typedef enum { SIM_DP, SIM_ZERO1, SIM_ZERO2, SIM_ZERO3, SIM_3D, SIM_NSTRATEGIES } sim_strategy;
const char *sim_strategy_name(sim_strategy s); /* "dp", "zero1", "zero2", "zero3", "3d" */
int sim_strategy_from_name(const char *name);  /* -1 when unknown */

typedef struct {
    double params;         /* Psi */
    int gpus;
    sim_strategy strategy;
    double mfu;            /* model FLOPs utilisation of the compute (0 < mfu <= 1) */
    double tokens_per_gpu; /* tokens per GPU per step (weak scaling: the global batch grows with the GPUs) */
    double grad_bytes;     /* bytes per gradient element on the wire: 2 (bf16) or 4 (fp32) */
    double param_bytes;    /* bytes per parameter gathered by ZeRO: 2 (bf16 working weights) */
    double bucket_bytes;   /* gradient bucket (DDP's bucket_cap); <= 0: one bucket of everything */
    bool overlap;          /* reduce buckets while backward runs */
    int tp, pp, micro_batches; /* 3D: tensor-parallel size (within a node), pipeline stages, micro-batches */
} sim_job;

sim_job sim_job_defaults(void); /* dp, mfu 0.4, 16384 tokens/GPU, bf16, 25 MiB buckets, overlap, tp 8 pp 4 m 16 */

typedef struct {
    bool feasible;         /* false: the GPU count does not fit the strategy (3D: a multiple of tp x pp) */
    double compute_s;      /* 6 Psi tokens / (G peak MFU) */
    double bubble_s;       /* 3D: the pipeline's idle time, compute x (pp-1)/m */
    double comm_s;         /* all communication of the step */
    double exposed_s;      /* what the compute does not hide */
    double step_s;         /* compute + bubble + exposed */
    double efficiency;     /* compute / step */
    double state_bytes;    /* model states per GPU (bf16 weights and grads, fp32 master and Adam: 16 bytes/param) */
    int buckets;           /* gradient buckets per step */
} sim_result;

/* One step of job j on cluster c for model m (its layers and width size the 3D activations). */
void sim_step(const sim_cluster *c, const plan_model *m, const sim_job *j, sim_result *out);

#endif
