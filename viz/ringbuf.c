/* ringbuf.c: a ring buffer of fixed-size records that keeps the newest `capacity` of a stream. */
#include "ringbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vz_ring_init(vz_ring *r, size_t item_size, size_t capacity) {
    memset(r, 0, sizeof *r);
    r->item_size = item_size;
    r->capacity = capacity > 0 ? capacity : 1;
}

void vz_ring_free(vz_ring *r) {
    free(r->data);
    r->data = NULL;
    r->start = r->count = 0;
    r->dropped = 0;
}

void vz_ring_clear(vz_ring *r) {
    r->start = r->count = 0;
    r->dropped = 0;
}

void *vz_ring_push(vz_ring *r) {
    if (!r->data) {
        r->data = calloc(r->capacity, r->item_size);
        if (!r->data) {
            fprintf(stderr, "mixpar viz: out of memory for %zu records of %zu bytes\n", r->capacity, r->item_size);
            exit(3);
        }
    }
    size_t slot;
    if (r->count < r->capacity) {
        slot = (r->start + r->count) % r->capacity;
        r->count++;
    } else {
        slot = r->start; /* full: the oldest record makes room */
        r->start = (r->start + 1) % r->capacity;
        r->dropped++;
    }
    void *p = r->data + slot * r->item_size;
    memset(p, 0, r->item_size);
    return p;
}

void *vz_ring_at(const vz_ring *r, size_t i) {
    if (i >= r->count) return NULL;
    return r->data + ((r->start + i) % r->capacity) * r->item_size;
}

void *vz_ring_last(const vz_ring *r) { return r->count ? vz_ring_at(r, r->count - 1) : NULL; }

void vz_ring_pop_last(vz_ring *r) {
    if (r->count) r->count--;
}
