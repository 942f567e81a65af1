/* decay.h: weight-decay parameter groups (参数分组): which of a model's tensors weight decay applies to, by kind. */
#ifndef MIXPAR_OPTIM_DECAY_H
#define MIXPAR_OPTIM_DECAY_H

#include <stdbool.h>

/* Weight decay pulls every decayed weight toward 0 by lr * wd * w each step (AdamW). That is meant for the weight
 * matrices, a regulariser on their size; a normalisation gain (around 1) or a bias pulled toward 0 only fights the
 * model, and every embedding row shrinks every step while only the rows of the tokens in the batch get a gradient
 * back, so rare tokens fade. Training code therefore splits the parameters into groups:
 *
 *   group       tensors of mixpar's registry (model/model.h)                 decayed by
 *   weight      the matrices of the blocks (qkvw, attprojw, fcw, fcprojw)     every recipe
 *               and an untied output head ("head")
 *   embedding   the token and position embeddings ("wte", "wpe"; a tied head  GPT-2 / nanoGPT (2-D), not LLaMA-style
 *               is wte itself)                                                 recipes (OLMo, many LLaMA trainers)
 *   norm        a normalisation's gain and bias ("ln1w", "ln2b", "lnfw")       none
 *   bias        the other 1-D tensors: the linear layers' biases (GPT-2 only)  none
 *
 * The GPT-2 rule "decay tensors of 2 or more dimensions" (optim_decays_ndim) is no_decay = {norm, bias}; the
 * LLaMA-style rule adds embedding. train.no_decay (train/config.h) chooses the groups for a run. */
typedef enum { DECAY_GROUP_WEIGHT, DECAY_GROUP_EMBEDDING, DECAY_GROUP_NORM, DECAY_GROUP_BIAS, DECAY_NGROUPS } decay_group;

/* The group of a registry tensor, from its name ("h.3.ln1w", "wte", "head") and its number of dimensions. A block's
 * tensors carry the prefix "h.<layer>."; names of norms start with "ln" once the prefix is removed. */
decay_group decay_group_of(const char *name, int ndim);

const char *decay_group_name(decay_group g); /* "weight", "embedding", "norm", "bias" */
/* "norm,bias,embedding" (any order; spaces allowed; empty: none) as a mask of groups (bit g for group g); an
 * unknown name stops with exit 2 and the list of names. "weight" is refused: decaying no matrix is no decay. */
unsigned decay_groups_parse(const char *list);
/* Whether weight decay applies to this tensor when the groups in no_decay are excluded. */
bool decay_applies(const char *name, int ndim, unsigned no_decay);
/* The mask as text, "norm,bias" (names in group order), into out. */
void decay_groups_format(unsigned no_decay, char *out, int outlen);

#endif
