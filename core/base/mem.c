/* mem.c: tagged allocation with per-tag current and peak byte counters (thread-safe). */
#include "base/mem.h"
#include "base/error.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Every block carries a 64-byte header in front of the user pointer, which keeps the user pointer
 * 64-byte aligned (a cache line, and an AVX-512 vector) and lets mem_free find the tag and size. */
enum { HEADER_BYTES = 64, MEM_MAGIC = 0x6d697870 /* "mixp" */ };
typedef struct {
    uint32_t magic;
    uint32_t tag;
    size_t bytes;
} block_header;

static const char *const tag_names[MEM_NTAGS] = {"param", "grad", "master", "optim", "act", "comm", "other"};

static _Atomic size_t current_bytes[MEM_NTAGS];
static _Atomic size_t peak_bytes[MEM_NTAGS];
static _Atomic size_t current_total;
static _Atomic size_t peak_total;

const char *mem_tag_name(mem_tag tag) {
    return (unsigned)tag < MEM_NTAGS ? tag_names[tag] : "?";
}

int mem_tag_from_name(const char *name) {
    for (int t = 0; t < MEM_NTAGS; t++)
        if (strcmp(name, tag_names[t]) == 0) return t;
    return -1;
}

static void raise_peak(_Atomic size_t *peak, size_t now) {
    size_t seen = atomic_load(peak);
    while (now > seen && !atomic_compare_exchange_weak(peak, &seen, now)) {
    }
}

void *mem_alloc(size_t bytes, mem_tag tag, const char *what) {
    MP_ASSERT((unsigned)tag < MEM_NTAGS, "memory tag %d out of range", (int)tag);
    void *raw = NULL;
    if (bytes > SIZE_MAX - HEADER_BYTES || posix_memalign(&raw, HEADER_BYTES, HEADER_BYTES + bytes) != 0) {
        mp_fail_input(__FILE__, __LINE__, "enough memory for the allocation",
                      "out of memory allocating %zu bytes for %s (tag %s, %zu bytes already held by it)",
                      bytes, what ? what : "?", tag_names[tag], atomic_load(&current_bytes[tag]));
    }
    memset(raw, 0, HEADER_BYTES + bytes);
    block_header *h = raw;
    h->magic = MEM_MAGIC;
    h->tag = (uint32_t)tag;
    h->bytes = bytes;
    raise_peak(&peak_bytes[tag], atomic_fetch_add(&current_bytes[tag], bytes) + bytes);
    raise_peak(&peak_total, atomic_fetch_add(&current_total, bytes) + bytes);
    return (char *)raw + HEADER_BYTES;
}

static block_header *header_of(const void *p) {
    block_header *h = (block_header *)((char *)p - HEADER_BYTES);
    MP_ASSERT(h->magic == MEM_MAGIC, "mem_free/mem_size on a pointer not from mem_alloc (or freed twice): %p", p);
    return h;
}

void mem_free(void *p) {
    if (!p) return;
    block_header *h = header_of(p);
    atomic_fetch_sub(&current_bytes[h->tag], h->bytes);
    atomic_fetch_sub(&current_total, h->bytes);
    h->magic = 0; /* so a second free is caught rather than corrupting the counters */
    free(h);
}

size_t mem_size(const void *p) { return header_of(p)->bytes; }
size_t mem_current(mem_tag tag) { return (unsigned)tag < MEM_NTAGS ? atomic_load(&current_bytes[tag]) : 0; }
size_t mem_peak(mem_tag tag) { return (unsigned)tag < MEM_NTAGS ? atomic_load(&peak_bytes[tag]) : 0; }
size_t mem_current_total(void) { return atomic_load(&current_total); }
size_t mem_peak_total(void) { return atomic_load(&peak_total); }

void mem_reset_peaks(void) {
    for (int t = 0; t < MEM_NTAGS; t++) atomic_store(&peak_bytes[t], atomic_load(&current_bytes[t]));
    atomic_store(&peak_total, atomic_load(&current_total));
}
