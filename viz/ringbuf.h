/* ringbuf.h: a ring buffer of fixed-size records that keeps the newest `capacity` of a stream. */
#ifndef MIXPAR_VIZ_RINGBUF_H
#define MIXPAR_VIZ_RINGBUF_H

#include <stddef.h>

/* A live run can go on for days; the visualizer keeps the newest records of each stream (steps, spans,
 * comm calls) in one of these, so its memory stays bounded. Storage is allocated on the first push.
 *
 *     vz_ring steps;
 *     vz_ring_init(&steps, sizeof(vz_step), 1 << 16);
 *     vz_step *s = vz_ring_push(&steps);     // the slot of the new newest record (the oldest is dropped when full)
 *     const vz_step *oldest = vz_ring_at(&steps, 0);
 */
typedef struct {
    unsigned char *data;      /* capacity * item_size bytes, allocated on first push */
    size_t item_size;
    size_t capacity;
    size_t start;             /* index of the oldest record */
    size_t count;             /* records held, <= capacity */
    unsigned long long dropped; /* records pushed out by newer ones */
} vz_ring;

void vz_ring_init(vz_ring *r, size_t item_size, size_t capacity);
void vz_ring_free(vz_ring *r);
void vz_ring_clear(vz_ring *r);
/* A zeroed slot for a new newest record. */
void *vz_ring_push(vz_ring *r);
/* Record i, 0 being the oldest held; NULL when i >= count. */
void *vz_ring_at(const vz_ring *r, size_t i);
/* The newest record, NULL when empty. */
void *vz_ring_last(const vz_ring *r);
/* Drop the newest record (a resumed run rewinds its steps). */
void vz_ring_pop_last(vz_ring *r);

#endif
