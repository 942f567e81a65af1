/* mem.c: tagged allocation with per-tag current and peak byte counters (thread-safe). */
#include "base/mem.h"
#include "base/error.h"
#include "base/parse.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every block carries a 64-byte header in front of the user pointer, which keeps the user pointer
 * 64-byte aligned (a cache line, and an AVX-512 vector) and lets mem_free find the tag and size. */
enum { HEADER_BYTES = 64, MEM_MAGIC = 0x6d697870 /* "mixp" */, RESERVED_MAGIC = 0x72657376 /* "resv" */ };
typedef struct {
    uint32_t magic;
    uint32_t tag;
    size_t bytes;
    _Atomic size_t committed; /* reserved blocks: bytes counted now */
    size_t mapped;            /* reserved blocks: bytes of the mapping, header page included */
    char *map_start;          /* reserved blocks: where the mapping starts */
} block_header;

static const char *const tag_names[MEM_NTAGS] = {"param", "grad",  "master", "optim",
                                                 "act",   "comm",  "other",  "host"};

static _Atomic size_t current_bytes[MEM_NTAGS];
static _Atomic size_t peak_bytes[MEM_NTAGS];
static _Atomic size_t current_total;
static _Atomic size_t peak_total;
static _Atomic size_t at_peak_bytes[MEM_NTAGS]; /* each tag's bytes when peak_total was last raised */
static _Atomic size_t given_back_bytes; /* by mem_decommit's madvise calls */

const char *mem_tag_name(mem_tag tag) {
    return (unsigned)tag < MEM_NTAGS ? tag_names[tag] : "?";
}

int mem_tag_from_name(const char *name) {
    for (int t = 0; t < MEM_NTAGS; t++)
        if (strcmp(name, tag_names[t]) == 0) return t;
    return -1;
}

/* Raises *peak to now; true when this call raised it. */
static bool raise_peak(_Atomic size_t *peak, size_t now) {
    size_t seen = atomic_load(peak);
    while (now > seen)
        if (atomic_compare_exchange_weak(peak, &seen, now)) return true;
    return false;
}

/* Each tag's bytes at the moment of a new total peak: what the peak is made of (the per-tag peaks are
 * reached at different moments, so they add up to more than peak_total). Taken without a lock, so with
 * threads allocating at once it is that moment's picture to within their allocations. */
static void note_peak_mix(void) {
    for (int t = 0; t < MEM_NTAGS; t++) atomic_store(&at_peak_bytes[t], atomic_load(&current_bytes[t]));
}

/* Counts `bytes` more (or, negative through `add` false, fewer) under a tag; the totals skip MEM_HOST. */
static void count(mem_tag tag, size_t bytes, int add) {
    if (add) {
        raise_peak(&peak_bytes[tag], atomic_fetch_add(&current_bytes[tag], bytes) + bytes);
        if (tag != MEM_HOST && raise_peak(&peak_total, atomic_fetch_add(&current_total, bytes) + bytes)) note_peak_mix();
    } else {
        atomic_fetch_sub(&current_bytes[tag], bytes);
        if (tag != MEM_HOST) atomic_fetch_sub(&current_total, bytes);
    }
}

/* ------------------------------------------------------------------ live blocks
 * The user pointers of every block not yet freed, in a hash set (open addressing, linear probing). A pointer
 * is looked up here before its header is read, so a second free, or a pointer that never came from mem_alloc,
 * is caught without reading memory that is no longer ours (which is undefined behaviour, and which
 * AddressSanitizer rightly reports). The set takes plain malloc memory, counted under no tag. */
enum { LIVE_EMPTY = 0, LIVE_GONE = 1 }; /* slot states; user pointers are 64-byte aligned, so never 0 or 1 */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *live_slots;
static size_t live_cap, live_used; /* used: live pointers plus LIVE_GONE slots */

static size_t live_hash(uintptr_t p) { return (size_t)((p >> 6) * 0x9E3779B97F4A7C15ull); }

/* The slot holding p, or the empty slot where it would go (the table is never full). Called locked. */
static size_t live_find(uintptr_t p) {
    size_t mask = live_cap - 1, i = live_hash(p) & mask, gone = SIZE_MAX;
    while (live_slots[i] != LIVE_EMPTY && live_slots[i] != p) {
        if (live_slots[i] == LIVE_GONE && gone == SIZE_MAX) gone = i;
        i = (i + 1) & mask;
    }
    return live_slots[i] == p || gone == SIZE_MAX ? i : gone;
}

static void live_add(const void *user) {
    pthread_mutex_lock(&live_lock);
    if (2 * (live_used + 1) > live_cap) { /* grow (or just sweep out LIVE_GONE slots) at half full */
        size_t old_cap = live_cap, cap = old_cap ? old_cap * 2 : 1024;
        uintptr_t *old = live_slots;
        live_slots = calloc(cap, sizeof *live_slots);
        MP_ASSERT(live_slots, "out of memory for the table of live blocks (%zu slots)", cap);
        live_cap = cap;
        live_used = 0;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i] > LIVE_GONE) live_slots[live_find(old[i])] = old[i], live_used++;
        free(old);
    }
    size_t i = live_find((uintptr_t)user);
    if (live_slots[i] == LIVE_EMPTY) live_used++;
    live_slots[i] = (uintptr_t)user;
    pthread_mutex_unlock(&live_lock);
}

/* Whether p is a live block; with `remove`, it is not one any more afterwards. */
static bool live_check(const void *user, bool remove) {
    pthread_mutex_lock(&live_lock);
    bool found = false;
    if (live_cap) {
        size_t i = live_find((uintptr_t)user);
        found = live_slots[i] == (uintptr_t)user;
        if (found && remove) live_slots[i] = LIVE_GONE;
    }
    pthread_mutex_unlock(&live_lock);
    return found;
}

/* ------------------------------------------------------------------ pages: their size, and recycling */

static size_t page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* Reservations this large start on a 2 MiB boundary and ask for transparent huge pages: sharded training
 * commits and gives back hundreds of MB of them every step (a layer's gathered weights, their bf16 copy, its
 * gradients), and each 4 KiB page that comes back costs a page fault (a few us, more in a virtual machine)
 * where a 2 MiB one costs one fault for 512 pages: the zeroing is the same, the faults 512 times fewer. */
enum { HUGE_PAGE_BYTES = 2 << 20 };

/* ------------------------------------------------------------------ recycled pages
 * A decommit followed by a commit elsewhere is sharded training's rhythm: a unit's gathered weights, their bf16
 * copy and its gradients are given back after each use and as many pages are taken again for the next unit,
 * many times a step. A fresh page costs a fault and the kernel's zeroing of it (in a virtual machine the host's
 * work too), and that was half of the 1B capstone's CPU. So the whole 2 MiB pages a decommit takes out of a
 * reserved block are parked in slots of a side mapping instead of being given back: mremap(MREMAP_DONTUNMAP)
 * moves the page tables, not the data, and the range left behind reads as zeros, as a decommit promises. A
 * later commit moves parked pages into its own range (zeroing them by hand unless its caller will overwrite
 * them: mem_commit_to_overwrite).
 *
 * Parked pages are counted under no tag, and they are kept only while the counted bytes plus the parked ones
 * stay within peak_total: a decommit parks what fits under the peak, and an allocation or commit that would
 * push the sum over it gives parked pages back first. So the memory the allocator holds never exceeds the peak
 * it reports (and the planner predicts); parking only keeps pages that the process held at that peak anyway.
 * MIXPAR_RECYCLE_PAGES=0 turns it off (for a side-by-side measurement); so does a kernel without
 * MREMAP_DONTUNMAP (Linux < 5.7) or any failed move, after which decommits give every page back as before. */
enum { SLOTS_PER_AREA = 64, MAX_AREAS = 512 }; /* areas of 128 MiB of address space, at most 64 GiB of slots */
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static char *park_areas[MAX_AREAS];
static int park_nareas;
static uint32_t park_free[SLOTS_PER_AREA * MAX_AREAS], park_full[SLOTS_PER_AREA * MAX_AREAS]; /* slot stacks */
static size_t park_nfree, park_nfull;
static _Atomic size_t parked_bytes;
static _Atomic size_t recycled_bytes; /* moved into committed ranges so far */
static int park_mode;          /* under park_lock: 0 not decided yet, 1 on, -1 off */
static size_t reserved_pieces; /* under park_lock: 2 MiB pieces of all live reservations */
static size_t max_mappings;    /* the kernel's limit on a process's mappings (vm.max_map_count) */

static char *slot_addr(uint32_t slot) {
    return park_areas[slot / SLOTS_PER_AREA] + (size_t)(slot % SLOTS_PER_AREA) * HUGE_PAGE_BYTES;
}

/* Decides once whether pages are recycled. Called locked. */
static bool park_on(void) {
    if (park_mode == 0) {
        const char *env = getenv("MIXPAR_RECYCLE_PAGES");
        park_mode = (env && strcmp(env, "0") == 0) || HUGE_PAGE_BYTES % page_size() != 0 ? -1 : 1;
        max_mappings = 65530;
        FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
        unsigned long n;
        if (f && fscanf(f, "%lu", &n) == 1) max_mappings = n;
        if (f) fclose(f);
    }
    return park_mode > 0;
}

/* Gives the newest parked page back to the system. Called locked, with one parked. */
static void unpark_to_system(void) {
    uint32_t slot = park_full[--park_nfull];
    if (madvise(slot_addr(slot), HUGE_PAGE_BYTES, MADV_DONTNEED) != 0) memset(slot_addr(slot), 0, HUGE_PAGE_BYTES);
    else atomic_fetch_add(&given_back_bytes, HUGE_PAGE_BYTES);
    park_free[park_nfree++] = slot;
    atomic_fetch_sub(&parked_bytes, HUGE_PAGE_BYTES);
}

/* After a move failed: everything parked goes back, and pages are not recycled any more. Called locked. */
static void park_give_up(void) {
    while (park_nfull) unpark_to_system();
    park_mode = -1;
}

/* Parked pages beyond what the peak allows go back to the system. */
static void park_trim(void) {
    if (atomic_load(&parked_bytes) == 0) return;
    pthread_mutex_lock(&park_lock);
    while (park_nfull && atomic_load(&current_total) + atomic_load(&parked_bytes) > atomic_load(&peak_total))
        unpark_to_system();
    pthread_mutex_unlock(&park_lock);
}

/* A free slot, adding an area of them when none is left; false when none can be had. Called locked. */
static bool free_slot(uint32_t *slot) {
    if (park_nfree == 0) {
        if (park_nareas == MAX_AREAS) return false;
        size_t bytes = (size_t)SLOTS_PER_AREA * HUGE_PAGE_BYTES;
        char *raw = mmap(NULL, bytes + HUGE_PAGE_BYTES, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (raw == MAP_FAILED) return false;
        char *area = (char *)(((uintptr_t)raw + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES);
#ifdef MADV_HUGEPAGE
        madvise(area, bytes, MADV_HUGEPAGE); /* a moved huge page keeps its mapping's flags */
#endif
        park_areas[park_nareas] = area;
        for (int i = SLOTS_PER_AREA - 1; i >= 0; i--) park_free[park_nfree++] = (uint32_t)(park_nareas * SLOTS_PER_AREA + i);
        park_nareas++;
    }
    *slot = park_free[--park_nfree];
    return true;
}

/* Parks the whole 2 MiB pages of [lo, hi) (both 2 MiB aligned), from lo up, while the peak allows; returns the
 * bytes parked. Each page moved into a reservation may become a mapping of its own, so parking stops well short
 * of the kernel's limit on mappings. */
static size_t park_pages(char *lo, char *hi) {
    size_t done = 0;
    pthread_mutex_lock(&park_lock);
    if (park_on() && 2 * reserved_pieces + (size_t)park_nareas * SLOTS_PER_AREA < max_mappings / 2) {
        uint32_t slot;
        while (lo + done < hi &&
               atomic_load(&current_total) + atomic_load(&parked_bytes) + HUGE_PAGE_BYTES <= atomic_load(&peak_total) &&
               free_slot(&slot)) {
            if (mremap(lo + done, HUGE_PAGE_BYTES, HUGE_PAGE_BYTES, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
                       slot_addr(slot)) == MAP_FAILED) {
                park_free[park_nfree++] = slot;
                park_give_up();
                break;
            }
            park_full[park_nfull++] = slot;
            atomic_fetch_add(&parked_bytes, HUGE_PAGE_BYTES);
            done += HUGE_PAGE_BYTES;
        }
    }
    pthread_mutex_unlock(&park_lock);
    return done;
}

/* Moves parked pages into the whole 2 MiB pages of [lo, hi) (both aligned), from lo up; returns the bytes filled.
 * With `zero`, they are zeroed (they hold what another range left in them). */
static size_t unpark_pages(char *lo, char *hi, bool zero) {
    size_t done = 0;
    if (atomic_load(&parked_bytes) == 0) return 0;
    pthread_mutex_lock(&park_lock);
    while (lo + done < hi && park_nfull) {
        uint32_t slot = park_full[park_nfull - 1];
        if (mremap(slot_addr(slot), HUGE_PAGE_BYTES, HUGE_PAGE_BYTES, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
                   lo + done) == MAP_FAILED) {
            park_give_up();
            break;
        }
        park_nfull--;
        park_free[park_nfree++] = slot;
        atomic_fetch_sub(&parked_bytes, HUGE_PAGE_BYTES);
        atomic_fetch_add(&recycled_bytes, HUGE_PAGE_BYTES);
        done += HUGE_PAGE_BYTES;
    }
    pthread_mutex_unlock(&park_lock);
    if (zero) memset(lo, 0, done);
    return done;
}

size_t mem_parked_bytes(void) { return atomic_load(&parked_bytes); }
size_t mem_recycled_bytes(void) { return atomic_load(&recycled_bytes); }

/* The 2 MiB-aligned part [*hlo, *hhi) of [lo, hi); empty (*hlo == *hhi) when there is none. */
static void huge_part(char *lo, char *hi, char **hlo, char **hhi) {
    *hlo = (char *)(((uintptr_t)lo + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES);
    *hhi = (char *)((uintptr_t)hi / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES);
    if (*hhi <= *hlo) *hlo = *hhi = hi;
}

/* ------------------------------------------------------------------ allocated blocks */

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
    count(tag, bytes, 1);
    park_trim();
    live_add((char *)raw + HEADER_BYTES);
    return (char *)raw + HEADER_BYTES;
}

static block_header *header_of(const void *p) {
    MP_ASSERT(live_check(p, false), "mem_free/mem_size on a pointer not from mem_alloc (or freed twice): %p", p);
    return (block_header *)((char *)p - HEADER_BYTES);
}

void mem_free(void *p) {
    if (!p) return;
    MP_ASSERT(live_check(p, true), "mem_free on a pointer not from mem_alloc or mem_reserve (or freed twice): %p", p);
    block_header *h = (block_header *)((char *)p - HEADER_BYTES);
    if (h->magic == RESERVED_MAGIC) {
        count((mem_tag)h->tag, atomic_load(&h->committed), 0);
        pthread_mutex_lock(&park_lock);
        reserved_pieces -= h->bytes / HUGE_PAGE_BYTES;
        pthread_mutex_unlock(&park_lock);
        munmap(h->map_start, h->mapped);
        return;
    }
    count((mem_tag)h->tag, h->bytes, 0);
    free(h);
}

/* ------------------------------------------------------------------ reserved blocks */

void *mem_reserve(size_t bytes, mem_tag tag, const char *what) {
    MP_ASSERT((unsigned)tag < MEM_NTAGS, "memory tag %d out of range", (int)tag);
    size_t page = page_size(), pages = (bytes + page - 1) / page;
    bool huge = bytes >= HUGE_PAGE_BYTES && HUGE_PAGE_BYTES % page == 0;
    size_t align = huge ? HUGE_PAGE_BYTES : page;
    size_t mapped = pages * page + align; /* room in front for the header page and the alignment */
    /* Address space only: MAP_NORESERVE asks for no swap reservation, and untouched pages take no memory. */
    char *raw = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
        mp_fail_input(__FILE__, __LINE__, "enough address space for the reservation",
                      "cannot reserve %zu bytes for %s (tag %s)", bytes, what ? what : "?", tag_names[tag]);
    char *user = (char *)(((uintptr_t)raw + page + align - 1) / align * align); /* a header page before it */
#ifdef MADV_HUGEPAGE
    if (huge) madvise(user, pages * page, MADV_HUGEPAGE); /* advice only: without THP it stays 4 KiB pages */
#endif
    block_header *h = (block_header *)(user - HEADER_BYTES);
    h->magic = RESERVED_MAGIC;
    h->tag = (uint32_t)tag;
    h->bytes = bytes;
    atomic_store(&h->committed, 0);
    h->mapped = mapped;
    h->map_start = raw;
    pthread_mutex_lock(&park_lock);
    reserved_pieces += bytes / HUGE_PAGE_BYTES;
    pthread_mutex_unlock(&park_lock);
    live_add(user);
    return user;
}

int mem_is_reserved(const void *p) { return p && header_of(p)->magic == RESERVED_MAGIC; }

static block_header *reserved_header(const void *base, size_t offset, size_t bytes) {
    block_header *h = header_of(base);
    MP_ASSERT(h->magic == RESERVED_MAGIC, "mem_commit/mem_decommit on a block that was not reserved: %p", base);
    MP_ASSERT(offset <= h->bytes && bytes <= h->bytes - offset, "range [%zu, +%zu) outside a reserved block of %zu bytes",
              offset, bytes, h->bytes);
    return h;
}

/* Takes parked pages for the range's whole 2 MiB pages first (the commit raises the count by what it takes from
 * the parked bytes, so their sum does not move), then counts; the rest of the range faults in on first use. */
static void commit_range(void *base, size_t offset, size_t bytes, bool zero) {
    block_header *h = reserved_header(base, offset, bytes);
    atomic_fetch_add(&h->committed, bytes);
    if (h->tag != MEM_HOST) {
        char *hlo, *hhi;
        huge_part((char *)base + offset, (char *)base + offset + bytes, &hlo, &hhi);
        unpark_pages(hlo, hhi, zero);
    }
    count((mem_tag)h->tag, bytes, 1);
    park_trim();
}

void mem_commit(void *base, size_t offset, size_t bytes) { commit_range(base, offset, bytes, true); }
void mem_commit_to_overwrite(void *base, size_t offset, size_t bytes) { commit_range(base, offset, bytes, false); }

/* Whole pages in [lo, hi) go back to the system; should madvise fail, they are zeroed by hand. */
static void give_back(char *lo, char *hi) {
    if (lo >= hi) return;
    /* A private anonymous mapping reads as zeros after MADV_DONTNEED. */
    if (madvise(lo, (size_t)(hi - lo), MADV_DONTNEED) == 0) atomic_fetch_add(&given_back_bytes, (size_t)(hi - lo));
    else memset(lo, 0, (size_t)(hi - lo));
}

void mem_decommit(void *base, size_t offset, size_t bytes) {
    block_header *h = reserved_header(base, offset, bytes);
    MP_ASSERT(atomic_load(&h->committed) >= bytes, "decommitting %zu bytes of a block with %zu committed", bytes,
              atomic_load(&h->committed));
    atomic_fetch_sub(&h->committed, bytes);
    count((mem_tag)h->tag, bytes, 0);
    char *lo = (char *)base + offset, *hi = lo + bytes;
    size_t page = page_size();
    /* Whole pages inside the range are parked (see recycled pages) or go back to the system, and read as zeros
     * again; the partial pages at its ends may hold a neighbouring range that is still in use, so those bytes are
     * zeroed by hand. */
    char *first = (char *)(((uintptr_t)lo + page - 1) / page * page), *last = (char *)((uintptr_t)hi / page * page);
    if (first < last) {
        memset(lo, 0, (size_t)(first - lo));
        memset(last, 0, (size_t)(hi - last));
        char *hlo, *hhi;
        huge_part(first, last, &hlo, &hhi);
        size_t parked = h->tag == MEM_HOST ? 0 : park_pages(hlo, hhi);
        give_back(first, hlo);
        give_back(hlo + parked, last);
    } else {
        memset(lo, 0, bytes);
    }
}

size_t mem_given_back_bytes(void) { return atomic_load(&given_back_bytes); }

uint64_t mem_system_available(const char **bad) {
    const char *given = getenv("MIXPAR_AVAILABLE_MEMORY");
    double bytes;
    if (bad) *bad = NULL;
    if (given && *given) {
        if (parse_bytes(given, &bytes) && bytes >= 1) return (uint64_t)bytes;
        if (bad) *bad = given;
    }
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

size_t mem_size(const void *p) { return header_of(p)->bytes; }
size_t mem_current(mem_tag tag) { return (unsigned)tag < MEM_NTAGS ? atomic_load(&current_bytes[tag]) : 0; }
size_t mem_peak(mem_tag tag) { return (unsigned)tag < MEM_NTAGS ? atomic_load(&peak_bytes[tag]) : 0; }
size_t mem_current_total(void) { return atomic_load(&current_total); }
size_t mem_peak_total(void) { return atomic_load(&peak_total); }
size_t mem_at_peak(mem_tag tag) { return (unsigned)tag < MEM_NTAGS ? atomic_load(&at_peak_bytes[tag]) : 0; }

void mem_reset_peaks(void) {
    for (int t = 0; t < MEM_NTAGS; t++) atomic_store(&peak_bytes[t], atomic_load(&current_bytes[t]));
    atomic_store(&peak_total, atomic_load(&current_total));
    note_peak_mix();
    park_trim(); /* nothing may stay parked above the new peak */
}
