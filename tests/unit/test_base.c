/* test_base.c: Criterion tests of core/base: tagged allocation, event lines, strict parsing, rng. */
#include "base/events.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/rng.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

Test(mem, counts_current_and_peak_per_tag) {
    size_t param0 = mem_current(MEM_PARAM), act0 = mem_current(MEM_ACT);
    void *a = mem_alloc(1000, MEM_PARAM, "a");
    void *b = mem_alloc(3000, MEM_ACT, "b");
    cr_expect_eq(mem_current(MEM_PARAM), param0 + 1000);
    cr_expect_eq(mem_current(MEM_ACT), act0 + 3000);
    mem_free(b);
    cr_expect_eq(mem_current(MEM_ACT), act0);
    cr_expect_geq(mem_peak(MEM_ACT), act0 + 3000, "the peak remembers the freed block");
    mem_reset_peaks();
    cr_expect_eq(mem_peak(MEM_ACT), act0, "reset brings peaks down to current");
    cr_expect_eq(mem_size(a), 1000);
    mem_free(a);
    mem_free(NULL);
}

Test(mem, blocks_are_aligned_and_zeroed) {
    unsigned char *p = mem_alloc(257, MEM_OTHER, "probe");
    cr_expect_eq((uintptr_t)p % 64, 0, "64-byte alignment");
    for (int i = 0; i < 257; i++) cr_assert_eq(p[i], 0);
    mem_free(p);
}

Test(mem, total_peak_is_peak_of_sum) {
    mem_reset_peaks();
    size_t base = mem_current_total();
    void *a = mem_alloc(100, MEM_GRAD, "a");
    mem_free(a);
    void *b = mem_alloc(100, MEM_OPTIM, "b");
    cr_expect_eq(mem_peak_total(), base + 100, "two blocks never alive together peak at one block");
    mem_free(b);
}

Test(mem, host_pool_is_outside_the_device_total) {
    size_t base = mem_current_total();
    void *h = mem_alloc(4096, MEM_HOST, "offloaded");
    cr_expect_eq(mem_current_total(), base, "host memory is not device memory");
    cr_expect_eq(mem_current(MEM_HOST), 4096);
    mem_free(h);
    cr_expect_eq(mem_current(MEM_HOST), 0);
}

/* How many of the pages in [p, p + bytes) are resident, by mincore(2). */
static size_t resident_pages(const void *p, size_t bytes) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = (bytes + page - 1) / page, n = 0;
    unsigned char *vec = malloc(pages);
    cr_assert_not_null(vec);
    cr_assert_eq(mincore((void *)p, bytes, vec), 0, "mincore: %s", strerror(errno));
    for (size_t i = 0; i < pages; i++) n += vec[i] & 1;
    free(vec);
    return n;
}

/* What the allocator promises, checked by its own counters and by the pages themselves (mincore), not by
 * the process's resident-set size, whose accounting differs between kernels (huge pages, lazy counters). */
Test(mem, reserved_blocks_count_and_hold_only_committed_ranges) {
    size_t before = mem_current(MEM_PARAM), n = 64u << 20; /* 64 MiB of address space */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    float *p = mem_reserve(n, MEM_PARAM, "reserved");
    cr_assert(mem_is_reserved(p));
    cr_expect_eq((uintptr_t)p % page, 0, "a reserved block starts on a page");
    cr_expect_eq(mem_current(MEM_PARAM), before, "a reservation alone counts nothing");
    for (size_t i = 0; i < n / sizeof(float); i += 1024) cr_assert_eq(p[i], 0.0f, "reads as zeros");
    size_t offset = 1000, bytes = 32u << 20; /* starts and ends inside a page */
    mem_commit(p, offset, bytes);
    cr_expect_eq(mem_current(MEM_PARAM), before + bytes);
    for (size_t i = 250; i < 250 + (8u << 20); i++) p[i] = 1.0f;
    p[249] = 7.0f; /* a neighbour sharing the first page stays alive */
    size_t given_back = mem_given_back_bytes(), parked = mem_parked_bytes();
    mem_decommit(p, offset, bytes);
    cr_expect_eq(mem_current(MEM_PARAM), before);
    size_t first = (offset + page - 1) / page * page, last = (offset + bytes) / page * page;
    cr_expect_eq(mem_given_back_bytes() - given_back + mem_parked_bytes() - parked, last - first,
                 "decommit takes out exactly the whole pages inside the range (%zu bytes): given back or parked",
                 last - first);
    cr_expect_eq(resident_pages((char *)p + first, last - first), 0, "no page taken out is still resident there");
    cr_expect_eq(p[249], 7.0f, "bytes outside the range are kept");
    cr_expect_eq(p[250], 0.0f, "the range reads as zeros again");
    cr_expect_eq(p[250 + (8u << 20) - 1], 0.0f);
    mem_commit(p, 0, 4096);
    mem_free(p);
    cr_expect_eq(mem_current(MEM_PARAM), before, "freeing releases what was still committed");
}

/* Whether this kernel moves pages with mremap(MREMAP_DONTUNMAP) (Linux 5.7 and later), tried on a mapping of our own. */
static bool kernel_moves_pages(void) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *a = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(a, MAP_FAILED);
    a[0] = 1;
    bool moved = mremap(a, page, page, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, a + page) != MAP_FAILED;
    munmap(a, 2 * page);
    return moved;
}

/* Recycled pages: a decommit parks whole 2 MiB pages, a later commit elsewhere takes them, zeroed; what is
 * counted plus what is parked never exceeds the reported peak. */
Test(mem, decommitted_pages_are_recycled_within_the_peak) {
    const char *off = getenv("MIXPAR_RECYCLE_PAGES");
    bool recycling = kernel_moves_pages() && !(off && strcmp(off, "0") == 0);
    size_t mib = 1u << 20, n = 16 * mib;
    float *p = mem_reserve(64 * mib, MEM_GRAD, "recycled");
    cr_assert_eq((uintptr_t)p % (2 * mib), 0, "a large reservation starts on a 2 MiB page");
    mem_commit(p, 0, n);
    for (size_t i = 0; i < n / sizeof(float); i++) p[i] = 1.0f + (float)(i % 7);
    size_t parked = mem_parked_bytes(), given_back = mem_given_back_bytes();
    mem_decommit(p, 0, n);
    cr_expect_eq(mem_parked_bytes() - parked + mem_given_back_bytes() - given_back, n);
    if (recycling) cr_expect_eq(mem_parked_bytes() - parked, n, "all 8 pages of 2 MiB parked, under the peak");
    cr_expect_leq(mem_current_total() + mem_parked_bytes(), mem_peak_total(), "counted plus parked within the peak");
    cr_expect_eq(resident_pages(p, n), 0, "the decommitted range holds no page");
    cr_expect_eq(p[12345], 0.0f, "and reads as zeros");

    /* Another range, not 2 MiB aligned: its 7 whole huge pages take parked ones; the count rises by 16 MiB, so
     * the eighth parked page would take counted plus parked over the peak, and goes back to the system. */
    given_back = mem_given_back_bytes();
    size_t recycled = mem_recycled_bytes();
    mem_commit(p, 32 * mib + 4096, n);
    if (recycling) cr_expect_eq(mem_recycled_bytes() - recycled, 7 * 2 * mib, "the commit reused 7 pages of 2 MiB");
    cr_expect_eq(mem_parked_bytes(), parked, "nothing stays parked at the peak");
    if (recycling)
        cr_expect_eq(mem_given_back_bytes() - given_back, 2 * mib, "7 parked pages taken, 1 given back (%zu bytes)",
                     mem_given_back_bytes() - given_back);
    for (size_t i = 0; i < n / sizeof(float); i += 1024 + 3)
        cr_assert_eq(p[(32 * mib + 4096) / sizeof(float) + i], 0.0f, "a commit reads as zeros, reused pages too (at %zu)", i);

    mem_commit_to_overwrite(p, 0, 2 * mib);
    for (size_t i = 0; i < 2 * mib / sizeof(float); i++) p[i] = 5.0f; /* the caller writes all of it */
    cr_expect_eq(mem_current(MEM_GRAD), n + 2 * mib);

    /* an allocation that would take counted plus parked above the peak gives parked pages back first */
    mem_decommit(p, 32 * mib + 4096, n);
    if (recycling) cr_expect_gt(mem_parked_bytes(), 0);
    void *big = mem_alloc(12 * mib, MEM_OTHER, "pushes the count up");
    cr_expect_leq(mem_current_total() + mem_parked_bytes(), mem_peak_total(), "trimmed to the peak");
    mem_free(big);
    mem_reset_peaks();
    cr_expect_eq(mem_parked_bytes(), 0, "resetting the peak to the count leaves nothing parked");
    mem_free(p);
}

Test(mem, tag_names_round_trip) {
    for (int t = 0; t < MEM_NTAGS; t++) cr_expect_eq(mem_tag_from_name(mem_tag_name(t)), t);
    cr_expect_eq(mem_tag_from_name("nope"), -1);
}

Test(mem, double_free_is_an_internal_error, .exit_code = 3) {
    void *p = mem_alloc(8, MEM_OTHER, "p");
    mem_free(p);
    mem_free(p);
}

/* A reserved block's header page is unmapped by the first free: the second must still be caught, not crash. */
Test(mem, double_free_of_a_reserved_block_is_an_internal_error, .exit_code = 3) {
    void *p = mem_reserve(1 << 20, MEM_OTHER, "p");
    mem_free(p);
    mem_free(p);
}

/* Caught without reading the 64 bytes in front of the pointer, which are not the caller's (ASan checks that). */
Test(mem, free_of_a_pointer_not_from_mem_alloc_is_an_internal_error, .exit_code = 3) {
    void *p = malloc(8);
    mem_free(p);
}

Test(events, writes_valid_json_lines) {
    char dir[] = "/tmp/mixpar-events-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char run[512];
    snprintf(run, sizeof run, "%s/run/a", dir);
    ev_writer *w = ev_open(run, 3);
    ev_begin(w, "step");
    ev_int(w, "step", 7);
    ev_num(w, "loss", 2.5);
    ev_num(w, "scale", INFINITY);
    ev_str(w, "note", "quote \" backslash \\ newline \n tab \t 春");
    double xs[3] = {1, NAN, -0.5};
    ev_nums(w, "xs", xs, 3);
    ev_object_begin(w, "inner");
    ev_bool(w, "ok", true);
    ev_object_end(w);
    ev_end(w);
    ev_mem(w, 7);
    char path[600];
    snprintf(path, sizeof path, "%s", ev_path(w));
    ev_close(w);

    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "events.rank3.jsonl exists");
    char line[4096];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        cr_assert_not_null(j, "line %d is valid JSON: %s", lines + 1, line);
        cr_expect_eq(cJSON_GetObjectItem(j, "v")->valueint, EVENTS_SCHEMA_VERSION);
        cr_expect_eq(cJSON_GetObjectItem(j, "rank")->valueint, 3);
        if (lines == 0) {
            cr_expect_str_eq(cJSON_GetObjectItem(j, "kind")->valuestring, "step");
            cr_expect_eq(cJSON_GetObjectItem(j, "step")->valueint, 7);
            cr_expect_float_eq(cJSON_GetObjectItem(j, "loss")->valuedouble, 2.5, 1e-12);
            cr_expect_str_eq(cJSON_GetObjectItem(j, "scale")->valuestring, "inf");
            cr_expect_str_eq(cJSON_GetObjectItem(j, "note")->valuestring, "quote \" backslash \\ newline \n tab \t 春");
            cr_expect_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "xs"), 1)->valuestring, "nan");
            cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "inner"), "ok")));
        } else {
            cr_expect_str_eq(cJSON_GetObjectItem(j, "kind")->valuestring, "mem");
            cr_expect_not_null(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "peak"), "act"));
        }
        cJSON_Delete(j);
        lines++;
    }
    fclose(f);
    cr_expect_eq(lines, 2);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

Test(events, unwritable_directory_is_bad_input, .exit_code = 2) { ev_open("/proc/mixpar-cannot-exist/run", 0); }

Test(parse, numbers_must_be_whole_strings) {
    double d;
    int64_t i;
    uint64_t u;
    cr_expect(parse_double("0.1", &d) && d == 0.1);
    cr_expect(parse_double("0x1p-24", &d) && d == ldexp(1, -24));
    cr_expect(parse_double("-inf", &d) && isinf(d) && d < 0);
    cr_expect(parse_double("1e-320", &d) && d > 0, "subnormal doubles are accepted");
    cr_expect(!parse_double("12abc", &d));
    cr_expect(!parse_double("", &d));
    cr_expect(!parse_double(" 3", &d));
    cr_expect(!parse_double("1e999", &d), "overflow is rejected");
    cr_expect(parse_i64("-42", &i) && i == -42);
    cr_expect(!parse_i64("4.2", &i));
    cr_expect(!parse_u64("-1", &u), "no silent wrap of negatives");
}

Test(parse, counts_and_bytes_with_suffixes) {
    double v;
    cr_expect(parse_count("124M", &v) && v == 124e6);
    cr_expect(parse_count("1.5B", &v) && v == 1.5e9);
    cr_expect(parse_count("50257", &v) && v == 50257);
    cr_expect(!parse_count("12Q", &v));
    cr_expect(!parse_count("-3", &v));
    cr_expect(parse_bytes("24GB", &v) && v == 24e9);
    cr_expect(parse_bytes("24GiB", &v) && v == 24.0 * (1 << 30));
    cr_expect(parse_bytes("80G", &v) && v == 80.0 * (1 << 30), "a bare G means GiB");
    cr_expect(!parse_bytes("24 GB", &v));
}

Test(rng, same_seed_same_stream_and_uniform_in_range) {
    mp_rng a, b;
    mp_rng_seed(&a, 1234);
    mp_rng_seed(&b, 1234);
    for (int i = 0; i < 1000; i++) cr_assert_eq(mp_rng_u64(&a), mp_rng_u64(&b));
    double sum = 0, sumsq = 0;
    for (int i = 0; i < 100000; i++) {
        float u = mp_rng_uniform(&a);
        cr_assert(u >= 0.0f && u < 1.0f);
        float n = mp_rng_normal(&b);
        sum += n;
        sumsq += (double)n * n;
    }
    cr_expect(fabs(sum / 100000) < 0.02, "normal mean near 0 (got %g)", sum / 100000);
    cr_expect(fabs(sumsq / 100000 - 1) < 0.03, "normal variance near 1 (got %g)", sumsq / 100000);
}

Test(rng, hash_is_stateless_and_spreads_bits) {
    cr_expect_eq(mp_hash32(7, 100), mp_hash32(7, 100));
    cr_expect_neq(mp_hash32(7, 100), mp_hash32(8, 100));
    int ones = 0;
    for (uint64_t i = 0; i < 4096; i++) ones += __builtin_popcount(mp_hash32(99, i));
    cr_expect(ones > 4096 * 16 - 800 && ones < 4096 * 16 + 800, "about half the bits set (got %d)", ones);
}
