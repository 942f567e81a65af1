/* fusion.h: Horovod's tensor fusion: ready gradients packed into a fusion buffer up to a threshold, one allreduce per buffer. */
#ifndef MIXPAR_DIST_FUSION_H
#define MIXPAR_DIST_FUSION_H

#include "comm/comm.h"
#include "dist/hooks.h"
#include "model/model.h"

#include <stdbool.h>
#include <stddef.h>

/* Horovod (Sergeev & Del Balso 2018) allreduces gradients tensor by tensor as backward makes them ready.
 * Small tensors would each pay the collective's start-up cost (alpha), so Horovod's tensor fusion (张量融合)
 * copies ready tensors one after another into a fusion buffer (融合缓冲区) of HOROVOD_FUSION_THRESHOLD bytes
 * [64 MiB], allreduces the buffer once, and copies each tensor's averaged values back where they came from.
 *
 * The rule, on the tensors in the order they become ready (sizes in elements, threshold in elements):
 *   - a tensor joins the open buffer if the buffer then holds at most `threshold` elements (an exact fit
 *     joins);
 *   - otherwise the open buffer is sent (flushed) and the tensor opens the next one;
 *   - a tensor larger than the threshold goes alone: it opens a buffer (after a flush) that nothing else
 *     joins. Horovod reduces such a tensor in place; here it is packed like the others.
 *   - threshold 0 (HOROVOD_FUSION_THRESHOLD=0, fusion off) sends every tensor by itself.
 *
 * PyTorch DDP's buckets (dist/ddp.h) are the same idea seen from the other side: DDP groups whole layers
 * in place in the flat gradient buffer and sends a bucket once it holds at least bucket_elems (it may
 * overshoot); Horovod groups tensors, never passes the threshold, and pays two copies per tensor.
 *
 * In mixpar every step makes the tensors ready in the same order on every rank (the layers from the head
 * down to the embeddings, the tensors of a layer from the last to the first), so the plan of which tensor
 * goes into which buffer is made once (fusion_create): Horovod negotiates it through its coordinator every
 * HOROVOD_CYCLE_TIME ms and caches it (its response cache); here a buffer is sent as soon as its last tensor
 * is ready, with no polling cycle.
 *
 *     fusion *f = fusion_create(tensors, ntensors, threshold_elems);   // the plan and the buffer (MEM_COMM)
 *     fusion_start(f);                                   // before each backward; then when layer l is final:
 *     int b; while ((b = fusion_next_complete(f, l)) >= 0) launch buffer b;  (DDP does this, dist/ddp.c)
 *     fusion_reduce(f, b, hook, comm, grads, algo);   // pack, one allreduce, unpack
 */

/* One tensor's place: elements [offset, offset + count) of the gradient buffer, at `at` in its fusion buffer. */
typedef struct {
    size_t offset, count;
    size_t at;
} fusion_entry;

/* The assignment rule above on sizes[0..n) in ready order: buffer_of[i] = the buffer of tensor i (0, 1, ...,
 * consecutive); returns the number of buffers (0 for n = 0). */
int fusion_assign(const size_t *sizes, int n, size_t threshold, int *buffer_of);
/* Copies each entry's gradients grads[offset, offset + count) into buffer, one after another in entry order,
 * setting entry->at to where it lands; returns the elements packed. */
size_t fusion_pack(const float *grads, fusion_entry *entries, int n, float *buffer);
/* The reverse: each entry's buffer[at, at + count) back to grads[offset, offset + count). */
void fusion_unpack(float *grads, const fusion_entry *entries, int n, const float *buffer);

typedef struct fusion fusion;

/* The plan for a model's tensors (frozen tensors included: their gradients are zeros DDP reduces too). */
fusion *fusion_create(const model_tensor *tensors, int ntensors, size_t threshold_elems);
void fusion_free(fusion *f);
int fusion_buffers(const fusion *f);
/* Buffer b's entries (in pack order), its element count, and the span [lo, hi) of the gradient buffer it covers. */
const fusion_entry *fusion_buffer_entries(const fusion *f, int b, int *count);
size_t fusion_buffer_elems(const fusion *f, int b);
void fusion_buffer_span(const fusion *f, int b, size_t *lo, size_t *hi);
/* A backward begins: no tensor is ready. */
void fusion_start(fusion *f);
/* Called once per layer in backward order (L, L-1, ..., -1) when its gradients are final: the next buffer
 * whose tensors are now all ready, or -1; call until -1. */
int fusion_next_complete(fusion *f, int layer);
/* Pack buffer b's tensors, average the fusion buffer over c's ranks through the hook (allreduce, fp16 or bf16:
 * Horovod's compression), unpack. Collective. */
void fusion_reduce(fusion *f, int b, ddp_hook *hook, comm_t *c, float *grads, comm_algo algo);

#endif
