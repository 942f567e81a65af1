/* train_profile.c: the trainer's profiling run: the roof, the profiler around each step, the table at the end. */
#include "train/train_profile.h"

#include "base/error.h"
#include "prof/bf16_peak.h"
#include "prof/gemm_kernels.h"
#include "prof/prof.h"
#include "prof/roofline.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct train_profile {
    prof *p;
    prof_roof roof;
    const char *products_kernel16; /* the 16-bit kernel of the model's products, or NULL */
    char table_path[4200];
    char header[1024]; /* the table's "# key value" lines about the run */
    long steps;        /* steps profiled */
};

train_profile *train_profile_start(const char *run_dir, int rank, int world, const model_config *mc, int T,
                                   double tokens_per_step, const char *products_kernel16) {
    train_profile *tp = calloc(1, sizeof *tp);
    MP_ASSERT(tp, "out of memory");
    prof_measure_roof(&tp->roof);
    tp->products_kernel16 = products_kernel16;
    tp->p = prof_create(rank, NULL, NULL);
    char path[4200];
    snprintf(path, sizeof path, "%s/trace.rank%d.json", run_dir, rank);
    prof_open_trace(tp->p, path);
    snprintf(tp->table_path, sizeof tp->table_path, "%s/profile.rank%d.tsv", run_dir, rank);
    char kernels[400]; /* the sgemm peak is only read right beside the kernels that reached it */
    snprintf(tp->header, sizeof tp->header,
             "# rank %d\n# world %d\n# arch %s\n# layers %d\n# channels %d\n"
             "# heads %d\n# kv_heads %d\n# ffn %d\n# vocab %d\n# context %d\n# tied %d\n# seq_len %d\n"
             "# tokens_per_step %.9g\n# threads %d\n# cpus %ld\n# gemm_kernels %s\n",
             rank, world, model_arch_name(mc->arch), mc->L, mc->C, mc->NH,
             mc->KVH, mc->F, mc->V, mc->maxT, mc->tied ? 1 : 0, T, tokens_per_step,
             omp_get_max_threads(), sysconf(_SC_NPROCESSORS_ONLN),
             prof_describe_gemm_kernels(kernels, sizeof kernels));
    prof_name_thread(tp->p, "compute");
    prof_activate(tp->p);
    return tp;
}

void train_profile_step_begin(train_profile *tp) {
    if (tp) prof_begin(tp->p, "step");
}

void train_profile_step_end(train_profile *tp) {
    if (!tp) return;
    prof_end(tp->p, "step");
    prof_flush(tp->p); /* the trace holds this step now, and stays valid JSON if the run stops */
    if (tp->steps++ == 0) prof_reset_stats(tp->p); /* the table leaves the warm-up step out (if there are more) */
}

void train_profile_finish(train_profile *tp) {
    if (!tp) return;
    prof_activate(NULL);
    /* The roof again, after the run: on a shared machine a neighbour's load can pull one measurement down; the
     * better of the two is the closer to what the machine can do (as bench/amp_perf does). */
    prof_roof after;
    prof_measure_roof(&after);
    double peak = fmax(tp->roof.peak_flops, after.peak_flops), bandwidth = fmax(tp->roof.bandwidth, after.bandwidth);
    FILE *f = fopen(tp->table_path, "w");
    if (!f) MP_FAIL("a writable run folder", "%s: %s", tp->table_path, strerror(errno));
    fprintf(f, "# mixpar profile table (core/train/train_profile.h)\n%s# peak_flops %.6g\n# bandwidth %.6g\n# steps %ld\n",
            tp->header, peak, bandwidth, tp->steps > 1 ? tp->steps - 1 : tp->steps);
    if (tp->products_kernel16) /* after the steps only: the 1536^3 product grows the kernel's packing areas (MEM_OTHER)
                                * past a small model's, which the run's memory figures would show */
        fprintf(f, "# products_kernel %s\n# products_peak_flops %.6g\n", tp->products_kernel16,
                fmax(prof_measure_bf16_gemm_flops(1536), prof_measure_bf16_gemm_flops(1536)));
    fprintf(f, "kind\tname\tcalls\ttotal_s\tself_s\tflops\tbytes\n");
    size_t n;
    const prof_stat *st = prof_stats(tp->p, &n);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\t%s\t%lld\t%.9g\t%.9g\t%.9g\t%.9g\n", prof_kind_name(st[i].kind), st[i].name, st[i].calls,
                st[i].total, st[i].self, st[i].cost.flops, st[i].cost.bytes);
    if (fclose(f) != 0) MP_FAIL("a writable run folder", "%s: %s", tp->table_path, strerror(errno));
    prof_free(tp->p);
    free(tp);
}
