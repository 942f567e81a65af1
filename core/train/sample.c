/* sample.c: autoregressive sampling with temperature and top-k. */
#include "train/sample.h"

#include "base/error.h"

#include <math.h>
#include <stdlib.h>

int sample_from_logits(const float *logits, int V, float temperature, int top_k, mp_rng *rng) {
    MP_ASSERT(temperature > 0 && V > 0, "temperature %g, V %d", temperature, V);
    /* The k-th largest logit is the cut-off; ties at the cut-off are all kept. */
    float cutoff = -INFINITY;
    if (top_k > 0 && top_k < V) {
        float *sorted = malloc((size_t)V * sizeof(float));
        MP_ASSERT(sorted, "out of memory");
        for (int i = 0; i < V; i++) sorted[i] = logits[i];
        /* Partial selection: move the k largest to the front (k is small). */
        for (int i = 0; i < top_k; i++) {
            int best = i;
            for (int j = i + 1; j < V; j++)
                if (sorted[j] > sorted[best]) best = j;
            float tmp = sorted[i];
            sorted[i] = sorted[best];
            sorted[best] = tmp;
        }
        cutoff = sorted[top_k - 1];
        free(sorted);
    }
    float max = -INFINITY;
    for (int i = 0; i < V; i++)
        if (logits[i] >= cutoff && logits[i] > max) max = logits[i];
    double total = 0;
    for (int i = 0; i < V; i++)
        if (logits[i] >= cutoff) total += exp((logits[i] - max) / temperature);
    double u = mp_rng_uniform(rng) * total, acc = 0;
    int last = 0;
    for (int i = 0; i < V; i++) {
        if (logits[i] < cutoff) continue;
        acc += exp((logits[i] - max) / temperature);
        last = i;
        if (u < acc) return i;
    }
    return last; /* rounding left u just past the end */
}

int sample_generate(model *m, int *tokens, int nprompt, int ntokens, const sample_options *opt) {
    const model_config *c = model_get_config(m);
    mp_rng rng;
    mp_rng_seed(&rng, opt->seed);
    int n = nprompt;
    if (n == 0) tokens[n++] = 0, ntokens--;
    for (int k = 0; k < ntokens; k++) {
        int start = n > c->maxT ? n - c->maxT : 0, T = n - start;
        model_forward(m, tokens + start, NULL, 1, T);
        tokens[n++] = sample_from_logits(model_logits(m, 0, T - 1), c->V, opt->temperature, opt->top_k, &rng);
    }
    return n;
}
