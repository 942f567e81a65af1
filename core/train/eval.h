/* eval.h: language-model evaluation from per-token losses: the mean loss over the counted tokens and perplexity. */
#ifndef MIXPAR_TRAIN_EVAL_H
#define MIXPAR_TRAIN_EVAL_H

/* Perplexity (困惑度) is exp of the mean cross-entropy per token: the number of equally likely tokens the model is
 * as unsure as. It is a mean over TOKENS, not over batches: with positions ignored (target -1, the padding and
 * prompt masking of ops/crossentropy.h, whose loss there is 0), batches count different numbers of tokens, and a
 * mean of batch means would weigh a token of a short batch more. So an evaluation adds up the losses and counts
 * the tokens, batch after batch, and divides once at the end:
 *
 *     eval_totals tot = {0};
 *     for each batch: crossentropy_forward(losses, lse, logits, targets, N, V, Vp);
 *                     eval_add_losses(&tot, losses, targets, N);
 *     printf("loss %.4f, perplexity %.2f\n", eval_mean_loss(&tot), eval_perplexity(&tot));
 *
 * A model that knows nothing (uniform over V tokens) has loss ln V and perplexity V. */
typedef struct {
    double loss_sum; /* sum of the counted tokens' losses, in double: a float sum of 10^6 losses would lose digits */
    long tokens;     /* tokens counted: positions whose target is >= 0 */
} eval_totals;

/* Adds the losses (N) of the positions whose target (N) is >= 0; a position with target -1 adds nothing. */
void eval_add_losses(eval_totals *t, const float *losses, const int *targets, long N);
/* loss_sum / tokens; NAN when no token was counted. */
double eval_mean_loss(const eval_totals *t);
/* exp(mean loss); NAN when no token was counted. */
double eval_perplexity(const eval_totals *t);

#endif
