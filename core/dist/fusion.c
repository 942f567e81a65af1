/* fusion.c: Horovod's tensor fusion: the plan of which tensor goes into which fusion buffer, pack, allreduce, unpack. */
#include "dist/fusion.h"

#include "base/error.h"
#include "base/lab.h"
#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

struct fusion {
    int ntensors;
    fusion_entry *entries;   /* (ntensors) in ready order: the head's layer first, a layer's last tensor first */
    int *layer_of;           /* (ntensors) the layer of each entry, in the same order */
    int nbuffers;
    int *first;              /* (nbuffers + 1) buffer b holds entries [first[b], first[b + 1]) */
    size_t *elems;           /* (nbuffers) elements of each buffer */
    float *buffer;           /* the fusion buffer: the largest buffer's elements (MEM_COMM) */
    int ready;               /* entries ready in this backward */
    int launched;            /* buffers handed out by fusion_next_complete in this backward */
};

/* ------------------------------------------------------------------ the rule (lab 27) */

int fusion_assign(const size_t *sizes, int n, size_t threshold, int *buffer_of) {
    /* LAB 27 BEGIN fusion plan: tensors in ready order join the open buffer while it stays within the threshold */
    int buffer = -1;
    size_t filled = 0;
    for (int i = 0; i < n; i++) {
        /* An exact fit joins; what would pass the threshold flushes the open buffer first. A tensor larger than
         * the threshold finds the buffer non-empty or opens one and fills it past the threshold, so it goes alone. */
        if (buffer < 0 || (filled > 0 && filled + sizes[i] > threshold)) {
            buffer++;
            filled = 0;
        }
        filled += sizes[i];
        buffer_of[i] = buffer;
    }
    return buffer + 1;
    /* LAB 27 END */
}

size_t fusion_pack(const float *grads, fusion_entry *entries, int n, float *buffer) {
    /* LAB 27 BEGIN pack: copy each tensor's gradients into the fusion buffer, one after another, noting where */
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        entries[i].at = at;
        memcpy(buffer + at, grads + entries[i].offset, entries[i].count * sizeof *buffer);
        at += entries[i].count;
    }
    return at;
    /* LAB 27 END */
}

void fusion_unpack(float *grads, const fusion_entry *entries, int n, const float *buffer) {
    /* LAB 27 BEGIN unpack: each tensor's averaged values back where they came from */
    for (int i = 0; i < n; i++)
        memcpy(grads + entries[i].offset, buffer + entries[i].at, entries[i].count * sizeof *grads);
    /* LAB 27 END */
}

/* ------------------------------------------------------------------ the plan for a model */

/* Ready order: layers from the head down (model_backward's order), a layer's tensors from the last to the
 * first (the gradient buffer is filled from its end towards its start). */
static int by_ready_order(const void *a, const void *b) {
    const model_tensor *x = a, *y = b;
    if (x->layer != y->layer) return x->layer > y->layer ? -1 : 1;
    return x->offset > y->offset ? -1 : x->offset < y->offset ? 1 : 0;
}

fusion *fusion_create(const model_tensor *tensors, int ntensors, size_t threshold_elems) {
    MP_ASSERT(ntensors > 0, "a model without tensors");
    fusion *f = calloc(1, sizeof *f);
    model_tensor *order = malloc((size_t)ntensors * sizeof *order);
    size_t *sizes = malloc((size_t)ntensors * sizeof *sizes);
    int *buffer_of = malloc((size_t)ntensors * sizeof *buffer_of);
    f->entries = calloc((size_t)ntensors, sizeof *f->entries);
    f->layer_of = malloc((size_t)ntensors * sizeof *f->layer_of);
    MP_ASSERT(f && order && sizes && buffer_of && f->entries && f->layer_of, "out of memory");
    memcpy(order, tensors, (size_t)ntensors * sizeof *order);
    qsort(order, (size_t)ntensors, sizeof *order, by_ready_order);
    f->ntensors = ntensors;
    for (int i = 0; i < ntensors; i++) {
        f->entries[i] = (fusion_entry){.offset = order[i].offset, .count = order[i].size};
        f->layer_of[i] = order[i].layer;
        sizes[i] = order[i].size;
    }
    f->nbuffers = fusion_assign(sizes, ntensors, threshold_elems, buffer_of);
    MP_ASSERT(f->nbuffers >= 1 && f->nbuffers <= ntensors, "fusion_assign gave %d buffers for %d tensors", f->nbuffers,
              ntensors);
    f->first = calloc((size_t)f->nbuffers + 1, sizeof *f->first);
    f->elems = calloc((size_t)f->nbuffers, sizeof *f->elems);
    MP_ASSERT(f->first && f->elems, "out of memory");
    size_t largest = 0;
    for (int i = 0, b = 0; i < ntensors; i++) {
        MP_ASSERT(buffer_of[i] == b || buffer_of[i] == b + 1, "fusion_assign: tensor %d in buffer %d after buffer %d "
                  "(buffers are consecutive in ready order, from 0)", i, buffer_of[i], b);
        if (buffer_of[i] == b + 1) f->first[++b] = i;
        f->elems[b] += sizes[i];
        if (f->elems[b] > largest) largest = f->elems[b];
    }
    f->first[f->nbuffers] = ntensors;
    f->buffer = mem_alloc(largest * sizeof *f->buffer, MEM_COMM, "fusion buffer");
    free(order);
    free(sizes);
    free(buffer_of);
    return f;
}

void fusion_free(fusion *f) {
    if (!f) return;
    mem_free(f->buffer);
    free(f->entries);
    free(f->layer_of);
    free(f->first);
    free(f->elems);
    free(f);
}

int fusion_buffers(const fusion *f) { return f->nbuffers; }

const fusion_entry *fusion_buffer_entries(const fusion *f, int b, int *count) {
    MP_ASSERT(b >= 0 && b < f->nbuffers, "fusion buffer %d of %d", b, f->nbuffers);
    *count = f->first[b + 1] - f->first[b];
    return f->entries + f->first[b];
}

size_t fusion_buffer_elems(const fusion *f, int b) {
    MP_ASSERT(b >= 0 && b < f->nbuffers, "fusion buffer %d of %d", b, f->nbuffers);
    return f->elems[b];
}

void fusion_buffer_span(const fusion *f, int b, size_t *lo, size_t *hi) {
    int n;
    const fusion_entry *e = fusion_buffer_entries(f, b, &n);
    *lo = SIZE_MAX;
    *hi = 0;
    for (int i = 0; i < n; i++) {
        if (e[i].offset < *lo) *lo = e[i].offset;
        if (e[i].offset + e[i].count > *hi) *hi = e[i].offset + e[i].count;
    }
}

void fusion_start(fusion *f) { f->ready = f->launched = 0; }

int fusion_next_complete(fusion *f, int layer) {
    while (f->ready < f->ntensors && f->layer_of[f->ready] >= layer) f->ready++;
    if (f->launched < f->nbuffers && f->first[f->launched + 1] <= f->ready) return f->launched++;
    return -1;
}

void fusion_reduce(fusion *f, int b, ddp_hook *hook, comm_t *c, float *grads, comm_algo algo) {
    int n;
    fusion_entry *e = f->entries + f->first[b];
    n = f->first[b + 1] - f->first[b];
    size_t packed = fusion_pack(grads, e, n, f->buffer);
    MP_ASSERT(packed == f->elems[b], "fusion_pack packed %zu elements of buffer %d, which holds %zu", packed, b,
              f->elems[b]);
    ddp_hook_reduce(hook, c, f->buffer, 0, packed, algo);
    fusion_unpack(grads, e, n, f->buffer);
}
