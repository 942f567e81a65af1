/* mem.h: tagged allocation; every byte the core allocates is counted under a memory tag. */
#ifndef MIXPAR_BASE_MEM_H
#define MIXPAR_BASE_MEM_H

#include <stddef.h>
#include <stdint.h>

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
    MEM_HOST,   /* offloaded to host memory (ZeRO-Offload's optimizer state and master weights): a separate
                 * pool, not device memory, so it is left out of the totals below */
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
/* The totals are of device memory: every tag but MEM_HOST, whose pool has its own mem_current / mem_peak. */
size_t mem_current_total(void);
size_t mem_peak_total(void);                    /* peak of the sum, not the sum of peaks */
size_t mem_at_peak(mem_tag tag);                /* the tag's bytes at the moment of peak_total */
void mem_reset_peaks(void);                     /* peaks := current values */

/* Reserved blocks: address space for a whole buffer, backed by memory only where committed. ZeRO-3 and
 * FSDP keep the model's full parameter and gradient buffers this way: every layer keeps its address, so
 * all the code that indexes the flat buffers works unchanged, while only the layers gathered right now
 * occupy memory. A block starts all uncommitted and reads as zeros there. Commit and decommit count
 * bytes under the block's tag. Decommit zeroes the range and takes its whole pages out of it: they go back
 * to the operating system (madvise), or, whole 2 MiB pages, are parked for the next commit to reuse while
 * the counted bytes plus the parked ones stay within mem_peak_total (mem.c, recycled pages), so the memory
 * the allocator holds never exceeds the peak it reports. A commit reads as zeros;
 * mem_commit_to_overwrite is for a caller that writes every byte of the range before reading any, and
 * skips zeroing the pages it reuses. Ranges must not overlap a range committed and not yet decommitted
 * (the caller's bookkeeping; no check). mem_free works on a reserved block too and releases what is still
 * committed. */
void *mem_reserve(size_t bytes, mem_tag tag, const char *what);
void mem_commit(void *base, size_t offset, size_t bytes);
void mem_commit_to_overwrite(void *base, size_t offset, size_t bytes);
void mem_decommit(void *base, size_t offset, size_t bytes);
int mem_is_reserved(const void *p);
/* Bytes that decommits have given back to the operating system so far (whole pages, madvise succeeded):
 * what the allocator itself did, so tests need not read the kernel's resident-set accounting. */
size_t mem_given_back_bytes(void);
/* Bytes of whole 2 MiB pages parked now for reuse (counted under no tag; MIXPAR_RECYCLE_PAGES=0: none). */
size_t mem_parked_bytes(void);
/* Bytes of parked pages that commits have reused so far (each a fault and a kernel zeroing saved). */
size_t mem_recycled_bytes(void);

/* Bytes of memory the system can give without swapping: what MIXPAR_AVAILABLE_MEMORY says ("24GB": a check for
 * another machine, and tests) or else /proc/meminfo's MemAvailable; 0 when unknown. A MIXPAR_AVAILABLE_MEMORY
 * that is not a size is ignored and, when bad is not NULL, handed back there for the caller to report. */
uint64_t mem_system_available(const char **bad);

#endif
