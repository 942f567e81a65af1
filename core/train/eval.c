/* eval.c: mean loss per token and perplexity from summed per-token losses, ignored positions left out (lab 21). */
#include "train/eval.h"

#include "base/lab.h"

#include <math.h>

void eval_add_losses(eval_totals *t, const float *losses, const int *targets, long N) {
    /* LAB 21 BEGIN add the losses of the counted positions (target >= 0) and count them */
    for (long i = 0; i < N; i++)
        if (targets[i] >= 0) {
            t->loss_sum += losses[i];
            t->tokens++;
        }
    /* LAB 21 END */
}

double eval_mean_loss(const eval_totals *t) {
    return t->tokens > 0 ? t->loss_sum / (double)t->tokens : NAN;
}

double eval_perplexity(const eval_totals *t) {
    /* LAB 21 BEGIN perplexity: exp of the mean loss per counted token; NAN when none was counted */
    if (t->tokens <= 0) return NAN;
    return exp(t->loss_sum / (double)t->tokens);
    /* LAB 21 END */
}
