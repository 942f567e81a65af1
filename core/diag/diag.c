/* diag.c: the diagnosis rules of diag.h: divergence, memory leak, replica desync, out of memory before launch. */
#include "diag/diag.h"

#include "base/lab.h"
#include "base/mem.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------ divergence */

bool diag_find_divergence(const double *loss, long n, const diag_divergence_rule *rule, diag_divergence *out) {
    *out = (diag_divergence){.kind = DIAG_HEALTHY, .index = -1, .value = NAN, .reference = NAN};
    /* LAB 24 BEGIN divergence rule: the first non-finite loss, or a loss above factor x the running minimum */
    /* The minimum over the last `window` finite points is the level the run had reached; a healthy noisy loss
     * wanders around it by a few percent, a divergence leaves it by a factor. Scanning back over the window is
     * O(n x window), small next to anything that produced the series. */
    long seen = 0; /* finite points before i */
    for (long i = 0; i < n; i++) {
        if (!isfinite(loss[i])) {
            *out = (diag_divergence){.kind = DIAG_NONFINITE, .index = i, .value = loss[i], .reference = NAN};
            return true;
        }
        if (seen >= rule->min_history) {
            double lowest = INFINITY;
            for (long j = i - 1; j >= 0 && j >= i - rule->window; j--)
                if (isfinite(loss[j]) && loss[j] < lowest) lowest = loss[j];
            if (isfinite(lowest) && loss[i] > rule->factor * lowest) {
                *out = (diag_divergence){.kind = DIAG_SPIKE, .index = i, .value = loss[i], .reference = lowest};
                return true;
            }
        }
        seen++;
    }
    return false;
    /* LAB 24 END */
}

/* ------------------------------------------------------------------ memory leak */

bool diag_find_leak(const double *step, const double *bytes, long n, const diag_leak_rule *rule, diag_leak *out) {
    memset(out, 0, sizeof *out);
    long first = (long)floor(rule->skip_fraction * (double)n);
    out->first = first;
    out->used = n - first;
    if (out->used < rule->min_samples) return false;
    /* LAB 24 BEGIN leak rule: least-squares slope of bytes over steps, significant against the scatter */
    /* Centred sums (x - mean) keep the arithmetic exact enough for byte counts in the billions. The standard error
     * of the slope is sqrt(residual variance / Sxx) with n - 2 degrees of freedom: a flat series with noise has a
     * slope of a few standard errors at most, a leak grows by the same bytes every step and stands out. */
    long m = out->used;
    const double *x = step + first, *y = bytes + first;
    double mx = 0, my = 0;
    for (long i = 0; i < m; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= (double)m;
    my /= (double)m;
    double sxx = 0, sxy = 0;
    for (long i = 0; i < m; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
    }
    if (sxx <= 0) return false; /* every sample at one step: no slope */
    double slope = sxy / sxx, ssr = 0;
    for (long i = 0; i < m; i++) {
        double r = y[i] - (my + slope * (x[i] - mx));
        ssr += r * r;
    }
    out->slope = slope;
    out->slope_se = sqrt(ssr / (double)(m - 2) / sxx);
    double xmin = x[0], xmax = x[0];
    for (long i = 1; i < m; i++) {
        if (x[i] < xmin) xmin = x[i];
        if (x[i] > xmax) xmax = x[i];
    }
    out->growth = slope * (xmax - xmin);
    out->leak = slope > 0 && slope >= rule->min_t * out->slope_se && out->growth >= rule->min_growth;
    return out->leak;
    /* LAB 24 END */
}

/* ------------------------------------------------------------------ replicas that drift apart */

bool diag_find_desync(const uint64_t *hash, int nranks, long nsteps, diag_desync *out) {
    *out = (diag_desync){.desync = false, .step_index = -1, .rank = -1};
    /* LAB 24 BEGIN desync rule: the first step, and at it the lowest rank, whose parameter hash differs from rank 0's */
    /* Steps outer, ranks inner: the earliest step is what matters (after one step apart, replicas stay apart), and
     * at that step the lowest rank that differs. A missing hash on either side says nothing. */
    for (long s = 0; s < nsteps; s++) {
        uint64_t want = hash[s]; /* rank 0 */
        if (want == DIAG_NO_HASH) continue;
        for (int r = 1; r < nranks; r++) {
            uint64_t got = hash[(long)r * nsteps + s];
            if (got != DIAG_NO_HASH && got != want) {
                *out = (diag_desync){.desync = true, .step_index = s, .rank = r, .expected = want, .got = got};
                return true;
            }
        }
    }
    return false;
    /* LAB 24 END */
}

/* ------------------------------------------------------------------ out of memory, before launch */

/* What lowers each tag's bytes on one rank (the config keys of train/config.c). */
static const char *const oom_fix_by_tag[MEM_NTAGS] = {
    [MEM_PARAM] = "shard the weights: zero_optimization.stage=3 (or FSDP) over more ranks",
    [MEM_GRAD] = "shard the gradients: zero_optimization.stage=2 (or 3)",
    [MEM_MASTER] = "shard the master weights: zero_optimization.stage=1 (or more), or offload them "
                   "(zero_optimization.offload_optimizer.device=cpu)",
    [MEM_OPTIM] = "shard the optimizer states: zero_optimization.stage=1 (or more), or offload them "
                  "(zero_optimization.offload_optimizer.device=cpu)",
    [MEM_ACT] = "keep fewer activations: a smaller train_micro_batch_size_per_gpu (with more "
                "gradient_accumulation_steps for the same batch), activation_checkpointing.policy=every",
    [MEM_COMM] = "smaller buckets: zero_optimization.reduce_bucket_size",
    [MEM_OTHER] = "a shorter data.seq_len or a smaller model",
    [MEM_HOST] = "host memory is not on the device",
};

bool diag_check_oom(const plan_result *plan, uint64_t limit, diag_oom *out) {
    memset(out, 0, sizeof *out);
    out->limit = limit;
    /* LAB 24 BEGIN OOM estimate: the plan's device bytes against the limit, and the tag to cut */
    /* The device holds every tag but host (ZeRO-Offload's share lives in host memory). The tag with the most
     * bytes is where a fix pays most; the table above says which config key shrinks it. */
    uint64_t need = 0, most = 0;
    int biggest = MEM_PARAM;
    for (int t = 0; t < MEM_NTAGS; t++) {
        if (t == MEM_HOST) continue;
        need += plan->bytes[t];
        if (plan->bytes[t] > most) {
            most = plan->bytes[t];
            biggest = t;
        }
    }
    out->need = need;
    out->biggest = biggest;
    out->share = need ? (double)most / (double)need : 0;
    out->fix = oom_fix_by_tag[biggest];
    out->fits = limit == 0 || need <= limit;
    return out->fits;
    /* LAB 24 END */
}
