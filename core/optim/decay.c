/* decay.c: weight-decay groups: a registry tensor's group from its name, and the groups a run leaves undecayed. */
#include "optim/decay.h"

#include "base/error.h"
#include "base/lab.h"

#include <stdio.h>
#include <string.h>

static const char *const decay_group_names[DECAY_NGROUPS] = {
    [DECAY_GROUP_WEIGHT] = "weight",
    [DECAY_GROUP_EMBEDDING] = "embedding",
    [DECAY_GROUP_NORM] = "norm",
    [DECAY_GROUP_BIAS] = "bias",
};

const char *decay_group_name(decay_group g) {
    MP_ASSERT(g >= 0 && g < DECAY_NGROUPS, "decay group %d out of range", (int)g);
    return decay_group_names[g];
}

decay_group decay_group_of(const char *name, int ndim) {
    /* LAB 21 BEGIN the group of a tensor: norm (a norm's gain or bias), embedding (wte, wpe), bias (other 1-D), weight */
    const char *base = name;
    if (strncmp(name, "h.", 2) == 0) { /* a block's tensor: "h.<layer>.<name>" */
        const char *dot = strchr(name + 2, '.');
        if (dot) base = dot + 1;
    }
    if (strncmp(base, "ln", 2) == 0) return DECAY_GROUP_NORM;
    if (base == name && (strcmp(name, "wte") == 0 || strcmp(name, "wpe") == 0)) return DECAY_GROUP_EMBEDDING;
    if (ndim < 2) return DECAY_GROUP_BIAS;
    return DECAY_GROUP_WEIGHT;
    /* LAB 21 END */
}

bool decay_applies(const char *name, int ndim, unsigned no_decay) {
    return !(no_decay & (1u << decay_group_of(name, ndim)));
}

unsigned decay_groups_parse(const char *list) {
    unsigned mask = 0;
    const char *p = list ? list : "";
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        size_t len = strcspn(p, ", ");
        int found = -1;
        for (int g = 0; g < DECAY_NGROUPS; g++)
            if (strlen(decay_group_names[g]) == len && strncmp(p, decay_group_names[g], len) == 0) found = g;
        if (found < 0 || found == DECAY_GROUP_WEIGHT)
            MP_FAIL_HINT("train.no_decay: groups of tensors to leave undecayed", "norm, bias, embedding (comma-separated)",
                         "'%.*s'%s", (int)len, p, found == DECAY_GROUP_WEIGHT ? " (weight decay that decays no matrix "
                                                                                 "is weight_decay 0)" : "");
        mask |= 1u << found;
        p += len;
    }
    return mask;
}

void decay_groups_format(unsigned no_decay, char *out, int outlen) {
    int used = 0;
    out[0] = '\0';
    for (int g = 0; g < DECAY_NGROUPS && used < outlen; g++)
        if (no_decay & (1u << g)) used += snprintf(out + used, (size_t)(outlen - used), "%s%s", used ? "," : "", decay_group_names[g]);
}
