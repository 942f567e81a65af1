/* check.c: what makes a model or a run impossible to plan, said as expected / found / hint. */
#include "plan/plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Plans are exact 64-bit integers; anything near 2^64 would wrap silently, so totals are estimated in
 * double first and refused above this (4.6 exabytes: far beyond any machine). */
#define PLAN_MAX_BYTES 4.6e18

static bool problem(plan_problem *why, const char *expected, const char *hint, const char *found_fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool problem(plan_problem *why, const char *expected, const char *hint, const char *found_fmt, ...) {
    if (!why) return false;
    snprintf(why->expected, sizeof why->expected, "%s", expected);
    snprintf(why->hint, sizeof why->hint, "%s", hint ? hint : "");
    va_list ap;
    va_start(ap, found_fmt);
    vsnprintf(why->found, sizeof why->found, found_fmt, ap);
    va_end(ap);
    return false;
}

/* The divisors of n nearest to `near` from below and from above (0 when there is none up to n). */
static void nearest_divisors(uint64_t n, uint64_t near, uint64_t *below, uint64_t *above) {
    *below = 0;
    *above = 0;
    if (near > n) near = n;
    for (uint64_t d = near; d >= 1; d--)
        if (n % d == 0) {
            *below = d;
            break;
        }
    for (uint64_t d = near + 1; d <= n && d <= near * 4 + 64; d++)
        if (n % d == 0) {
            *above = d;
            break;
        }
}

bool plan_model_check(const plan_model *m, plan_problem *why) {
    const struct {
        const char *flag;
        uint64_t value;
    } sizes[] = {{"--layers", m->layers}, {"--hidden", m->hidden}, {"--heads", m->heads},
                 {"--kv-heads", m->kv_heads}, {"--ffn", m->ffn}, {"--vocab", m->vocab}, {"--context", m->context}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].value == 0)
            return problem(why, "every model size at least 1", NULL, "%s 0", sizes[i].flag);
    if ((unsigned)m->arch >= PLAN_NARCHS)
        return problem(why, "architecture gpt2 or llama", NULL, "architecture number %d", (int)m->arch);
    if (m->hidden % m->heads != 0) {
        uint64_t below, above;
        nearest_divisors(m->hidden, m->heads, &below, &above);
        char hint[200];
        if (above)
            snprintf(hint, sizeof hint, "each head gets h/a channels, so a must divide h: --heads %llu or %llu "
                     "would work", (unsigned long long)below, (unsigned long long)above);
        else
            snprintf(hint, sizeof hint, "each head gets h/a channels, so a must divide h: --heads %llu would work",
                     (unsigned long long)below);
        return problem(why, "heads that divide the hidden size (h = heads x head size)", hint,
                       "hidden %llu, heads %llu: %llu/%llu leaves %llu", (unsigned long long)m->hidden,
                       (unsigned long long)m->heads, (unsigned long long)m->hidden, (unsigned long long)m->heads,
                       (unsigned long long)(m->hidden % m->heads));
    }
    if (m->heads % m->kv_heads != 0)
        return problem(why, "key/value heads that divide the query heads (each KV head serves a/g query heads)",
                       "grouped-query attention needs a whole number of query heads per KV head; "
                       "--kv-heads equal to --heads is plain multi-head attention",
                       "heads %llu, kv-heads %llu", (unsigned long long)m->heads, (unsigned long long)m->kv_heads);
    /* The largest product in the parameter count is L x 4h^2-ish; estimate it in double before any
     * exact arithmetic can wrap. */
    double h = (double)m->hidden, L = (double)m->layers;
    double params = L * (4 * h * h + 3 * h * (double)m->ffn + 13 * h) + 2 * h * ((double)m->vocab + (double)m->context);
    if (params * 16 > PLAN_MAX_BYTES)
        return problem(why, "a model whose states fit in 64-bit byte counts (under 4.6e18 bytes)",
                       "check the sizes for a typo", "about %.3g parameters", params);
    return true;
}

bool plan_run_check(const plan_model *m, const plan_run *run, plan_problem *why) {
    if ((unsigned)run->recipe >= PLAN_NRECIPES || (unsigned)run->optimizer >= PLAN_NOPTIMIZERS ||
        (unsigned)run->recompute >= PLAN_NRECOMPUTES)
        return problem(why, "a recipe, optimizer and recompute policy from the tables", NULL,
                       "recipe %d, optimizer %d, recompute %d", (int)run->recipe, (int)run->optimizer,
                       (int)run->recompute);
    if (run->zero_stage < 0 || run->zero_stage > 3)
        return problem(why, "ZeRO stage 0, 1, 2 or 3", "0 = plain data parallel; 1 shards optimizer states and "
                       "master weights, 2 also gradients, 3 also the weights", "stage %d", run->zero_stage);
    if (run->world == 0)
        return problem(why, "a world size of at least 1 (the number of data-parallel ranks)", NULL, "world 0");
    if (run->batch == 0) return problem(why, "a micro-batch of at least 1 sequence per rank", NULL, "batch 0");
    if (run->seq == 0) return problem(why, "a sequence length of at least 1 token", NULL, "seq 0");
    if (!m) return true;
    if (!plan_model_check(m, why)) return false;
    if (plan_arch_get(m->arch)->learned_positions && run->seq > m->context) {
        char hint[200];
        snprintf(hint, sizeof hint, "use --seq %llu or less, or build a longer model with --context %llu",
                 (unsigned long long)m->context, (unsigned long long)run->seq);
        return problem(why, "a sequence no longer than the model's learned position table (T)", hint,
                       "seq %llu > T = %llu for %s", (unsigned long long)run->seq, (unsigned long long)m->context,
                       m->name);
    }
    double s = (double)run->seq, b = (double)run->batch;
    double per_block = s * b * (40.0 * (double)m->hidden + 5.0 * (double)m->ffn + 5.0 * (double)m->heads * s);
    double act = (double)m->layers * per_block + 8 * s * b * ((double)m->hidden + (double)m->vocab);
    if (act > PLAN_MAX_BYTES)
        return problem(why, "activations that fit in 64-bit byte counts (under 4.6e18 bytes)",
                       "check --seq and --batch for a typo", "about %.3g bytes of activations", act);
    return true;
}
