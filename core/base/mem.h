/* mem.h: tagged allocation; every byte the core allocates is counted under a memory tag. */
#ifndef MIXPAR_BASE_MEM_H
#define MIXPAR_BASE_MEM_H

#include <stddef.h>

/* What a block of memory is for. The planner (plan/), the event stream and the visualizer all use
 * these categories, so a measured peak can be compared with a predicted one tag by tag. */
typedef enum {
    MEM_PARAM,  /* working weights the forward pass reads */
    MEM_GRAD,   /* gradients of the working weights */
    MEM_MASTER, /* fp32 master copy of low-precision weights */
    MEM_OPTIM,  /* optimizer state: momentum, Adam m and v */
    MEM_ACT,    /* activations kept for backward */
    MEM_COMM,   /* communication buffers: buckets, gather staging */
    MEM_OTHER,  /* everything else */
    MEM_NTAGS
} mem_tag;

const char *mem_tag_name(mem_tag tag);          /* "param", "grad", ... */
int mem_tag_from_name(const char *name);        /* -1 when unknown */

/* Allocate `bytes` (64-byte aligned, zero-filled) under `tag`. Never returns NULL: on failure it
 * stops with a message naming `what`, the size and the tag's current bytes. */
void *mem_alloc(size_t bytes, mem_tag tag, const char *what);
void mem_free(void *p);                         /* NULL is fine */
size_t mem_size(const void *p);                 /* bytes asked for at mem_alloc */

size_t mem_current(mem_tag tag);
size_t mem_peak(mem_tag tag);
size_t mem_current_total(void);
size_t mem_peak_total(void);                    /* peak of the sum, not the sum of peaks */
void mem_reset_peaks(void);                     /* peaks := current values */

#endif
