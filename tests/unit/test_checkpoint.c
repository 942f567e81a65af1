/* test_checkpoint.c: Criterion tests of core/train/checkpoint: bit-exact round trips, the safetensors layout, every
 * corruption (with its message), atomic saves under failure, and llm.c GPT-2 export/import. */
#include "unit_files.h"
#include "train/checkpoint.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- a fake registry
 * The GPT-2 names of checkpoint.h, layer-major, as model.c lays them out. Within a layer the order is
 * deliberately not llm.c's, so the llm.c mapping is shown to go by name, not by position. */

enum { MAX_TENSORS = 512 };

typedef struct {
    model_tensor t[MAX_TENSORS];
    int n;
    size_t floats;
} registry;

static void reg_add(registry *r, const char *name, int layer, int rows, int cols) {
    cr_assert_lt(r->n, MAX_TENSORS);
    model_tensor *t = &r->t[r->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->size = (size_t)rows * (size_t)(cols ? cols : 1);
    t->offset = r->floats;
    t->layer = layer;
    t->decay = cols != 0;
    r->floats += t->size;
}

static registry gpt2_registry(int L, int C, int Vp, int maxT) {
    registry r = {.n = 0};
    reg_add(&r, "wte", -1, Vp, C);
    reg_add(&r, "wpe", -1, maxT, C);
    static const struct {
        const char *name;
        int rows_mult, cols_mult; /* of C; cols 0: a vector */
    } block[] = {{"fcprojb", 1, 0}, {"fcprojw", 1, 4}, {"ln1w", 1, 0}, {"ln1b", 1, 0}, {"qkvw", 3, 1},
                 {"qkvb", 3, 0},    {"attprojw", 1, 1}, {"attprojb", 1, 0}, {"ln2w", 1, 0}, {"ln2b", 1, 0},
                 {"fcw", 4, 1},     {"fcb", 4, 0}};
    for (int l = 0; l < L; l++)
        for (size_t k = 0; k < sizeof block / sizeof block[0]; k++) {
            char name[48];
            snprintf(name, sizeof name, "h.%d.%s", l, block[k].name);
            reg_add(&r, name, l, block[k].rows_mult * C, block[k].cols_mult * C);
        }
    reg_add(&r, "lnfw", L, C, 0);
    reg_add(&r, "lnfb", L, C, 0);
    return r;
}

/* Every bit pattern matters: NaNs with payloads, -0, subnormals and infinities must come back as they went. */
static float *pattern_buffer(size_t n, uint32_t seed) {
    float *p = malloc(n * sizeof *p + 4);
    cr_assert_not_null(p);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        uint32_t bits = x;
        if (i % 97 == 1) bits = 0x7fc00001u + (x & 0xff); /* NaN with a payload */
        if (i % 101 == 2) bits = 0x80000000u;              /* -0 */
        if (i % 103 == 3) bits = x & 0x007fffffu;          /* subnormal */
        if (i % 107 == 4) bits = 0xff800000u;              /* -inf */
        memcpy(&p[i], &bits, 4);
    }
    return p;
}

static float *sentinel_buffer(size_t n) {
    float *p = malloc(n * sizeof *p + 4);
    cr_assert_not_null(p);
    memset(p, 0xA5, n * sizeof *p);
    return p;
}

static bool all_sentinel(const float *p, size_t n) {
    const uint8_t *b = (const uint8_t *)p;
    for (size_t i = 0; i < n * sizeof *p; i++)
        if (b[i] != 0xA5) return false;
    return true;
}

/* Files in dir whose name contains ".tmp.": what a failed atomic write must not leave behind. */
static int temp_files_in(const char *dir) {
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

static char *line_of(const data_err *err) {
    static char line[2048];
    return (char *)data_err_line(err, line, sizeof line);
}

/* A small model with Adam state: parameters, m and v, each a pattern of its own. */
typedef struct {
    registry reg;
    float *params, *m, *v;
    ckpt_buffer buffers[3];
} fixture;

static fixture make_fixture(int L, int C, int Vp, int maxT, uint32_t seed) {
    fixture fx;
    fx.reg = gpt2_registry(L, C, Vp, maxT);
    fx.params = pattern_buffer(fx.reg.floats, seed);
    fx.m = pattern_buffer(fx.reg.floats, seed + 1);
    fx.v = pattern_buffer(fx.reg.floats, seed + 2);
    fx.buffers[0] = (ckpt_buffer){"", fx.params, fx.reg.floats};
    fx.buffers[1] = (ckpt_buffer){"optim.m.", fx.m, fx.reg.floats};
    fx.buffers[2] = (ckpt_buffer){"optim.v.", fx.v, fx.reg.floats};
    return fx;
}

static void free_fixture(fixture *fx) {
    free(fx->params);
    free(fx->m);
    free(fx->v);
}

static const ckpt_meta sample_meta[] = {
    {"step", "300"},
    {"config", "{\"model\": {\"arch\": \"gpt2\"}, \"note\": \"quotes \\\" and\\nnewlines\"}"},
    {"rng", "12345678901234567890"},
    {"loader.epoch", "2"},
    {"loss_scale", "65536"},
    {"poem", "床前明月光"},
};
enum { NMETA = sizeof sample_meta / sizeof sample_meta[0] };

/* ---------------------------------------------------------------- round trips */

Test(ckpt, round_trip_is_bit_identical_with_metadata) {
    char *dir = unit_tmpdir("ckpt");
    char path[600];
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    fixture fx = make_fixture(2, 16, 40, 8, 7);
    data_err err;
    cr_assert(ckpt_save(path, fx.reg.t, fx.reg.n, fx.buffers, 3, sample_meta, NMETA, &err), "%s", line_of(&err));

    float *p = sentinel_buffer(fx.reg.floats), *m = sentinel_buffer(fx.reg.floats), *v = sentinel_buffer(fx.reg.floats);
    ckpt_buffer into[3] = {{"", p, fx.reg.floats}, {"optim.m.", m, fx.reg.floats}, {"optim.v.", v, fx.reg.floats}};
    ckpt_file *f = ckpt_open(path, &err);
    cr_assert_not_null(f, "%s", line_of(&err));
    cr_assert(ckpt_read(f, fx.reg.t, fx.reg.n, into, 3, CKPT_STRICT, &err), "%s", line_of(&err));
    cr_expect_eq(memcmp(p, fx.params, fx.reg.floats * 4), 0, "parameters differ after a round trip");
    cr_expect_eq(memcmp(m, fx.m, fx.reg.floats * 4), 0, "optim.m differs after a round trip");
    cr_expect_eq(memcmp(v, fx.v, fx.reg.floats * 4), 0, "optim.v differs after a round trip");

    cr_expect_eq(ckpt_meta_count(f), NMETA + 1, "the caller's metadata and 'format'");
    cr_expect_str_eq(ckpt_meta_get(f, "format"), "mixpar-ckpt-1");
    for (int i = 0; i < NMETA; i++) {
        const char *got = ckpt_meta_get(f, sample_meta[i].key);
        cr_assert_not_null(got, "metadata %s lost", sample_meta[i].key);
        cr_expect_str_eq(got, sample_meta[i].value);
    }
    cr_expect_null(ckpt_meta_get(f, "absent"));
    uint64_t step, rng;
    double scale;
    cr_expect(ckpt_meta_u64(f, "step", &step, NULL) && step == 300);
    cr_expect(ckpt_meta_u64(f, "rng", &rng, NULL) && rng == 12345678901234567890ull, "a full 64-bit value");
    cr_expect(ckpt_meta_double(f, "loss_scale", &scale, NULL) && scale == 65536.0);
    cr_expect(!ckpt_meta_u64(f, "poem", &step, &err));
    cr_expect(strstr(err.found, "metadata 'poem'"), "%s", err.found);
    cr_expect(!ckpt_meta_u64(f, "absent", &step, &err));
    cr_expect(strstr(err.found, "no metadata 'absent'"), "%s", err.found);
    ckpt_close(f);

    /* ckpt_load: the same in one call. */
    memset(p, 0, fx.reg.floats * 4);
    cr_assert(ckpt_load(path, fx.reg.t, fx.reg.n, into, 3, &err), "%s", line_of(&err));
    cr_expect_eq(memcmp(p, fx.params, fx.reg.floats * 4), 0);
    free(p), free(m), free(v);
    free_fixture(&fx);
    unit_remove_tree(dir);
}

Test(ckpt, file_is_standard_safetensors_in_registry_order) {
    char *dir = unit_tmpdir("ckpt");
    char path[600];
    snprintf(path, sizeof path, "%s/c.safetensors", dir);
    fixture fx = make_fixture(1, 8, 16, 4, 3);
    cr_assert(ckpt_save(path, fx.reg.t, fx.reg.n, fx.buffers, 2, sample_meta, 2, NULL));
    /* Read it back here with nothing but the format's definition. */
    size_t size;
    uint8_t *bytes = unit_read_file(path, &size);
    uint64_t n;
    memcpy(&n, bytes, 8);
    cr_assert_leq(8 + n, size);
    cr_expect_eq((8 + n) % 8, 0, "the data starts 8-byte aligned");
    cJSON *h = cJSON_ParseWithLength((const char *)bytes + 8, n);
    cr_assert_not_null(h, "the header is JSON");
    const cJSON *it = h->child;
    cr_assert_str_eq(it->string, "__metadata__", "metadata first");
    cr_expect_str_eq(cJSON_GetObjectItem(it, "step")->valuestring, "300");
    uint64_t offset = 0;
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < fx.reg.n; i++) {
            it = it->next;
            cr_assert_not_null(it);
            char key[128];
            snprintf(key, sizeof key, "%s%s", fx.buffers[b].prefix, fx.reg.t[i].name);
            cr_expect_str_eq(it->string, key, "entries in registry order, buffer after buffer");
            cr_expect_str_eq(cJSON_GetObjectItem(it, "dtype")->valuestring, "F32");
            const cJSON *shape = cJSON_GetObjectItem(it, "shape");
            cr_expect_eq(cJSON_GetArraySize(shape), fx.reg.t[i].ndim);
            cr_expect_eq(cJSON_GetArrayItem(shape, 0)->valueint, fx.reg.t[i].shape[0]);
            const cJSON *off = cJSON_GetObjectItem(it, "data_offsets");
            cr_expect_eq((uint64_t)cJSON_GetArrayItem(off, 0)->valuedouble, offset);
            cr_expect_eq((uint64_t)cJSON_GetArrayItem(off, 1)->valuedouble, offset + fx.reg.t[i].size * 4);
            const float *src = fx.buffers[b].data + fx.reg.t[i].offset;
            cr_expect_eq(memcmp(bytes + 8 + n + offset, src, fx.reg.t[i].size * 4), 0, "%s's bytes", key);
            offset += fx.reg.t[i].size * 4;
        }
    cr_expect_null(it->next, "nothing else in the header");
    cr_expect_eq(8 + n + offset, size, "the file ends with the last tensor");
    cJSON_Delete(h);
    free(bytes);
    free_fixture(&fx);
    unit_remove_tree(dir);
}

Test(ckpt, allow_extra_loads_parameters_alone) {
    char *dir = unit_tmpdir("ckpt");
    char path[600];
    snprintf(path, sizeof path, "%s/c.safetensors", dir);
    fixture fx = make_fixture(1, 8, 16, 4, 5);
    cr_assert(ckpt_save(path, fx.reg.t, fx.reg.n, fx.buffers, 3, NULL, 0, NULL));
    float *p = sentinel_buffer(fx.reg.floats);
    ckpt_buffer only[1] = {{"", p, fx.reg.floats}};
    ckpt_file *f = ckpt_open(path, NULL);
    data_err err;
    cr_expect(!ckpt_read(f, fx.reg.t, fx.reg.n, only, 1, CKPT_STRICT, &err), "strict: optim.* are extra");
    cr_expect(strstr(err.found, "tensor 'optim.m.wte' is in the file but not in the model"), "%s", err.found);
    cr_expect(all_sentinel(p, fx.reg.floats), "a refused read writes nothing");
    cr_assert(ckpt_read(f, fx.reg.t, fx.reg.n, only, 1, CKPT_ALLOW_EXTRA, &err), "%s", line_of(&err));
    cr_expect_eq(memcmp(p, fx.params, fx.reg.floats * 4), 0);
    ckpt_close(f);
    free(p);
    free_fixture(&fx);
    unit_remove_tree(dir);
}

Test(ckpt, bad_metadata_is_refused_before_writing) {
    char *dir = unit_tmpdir("ckpt");
    char path[600];
    snprintf(path, sizeof path, "%s/c.safetensors", dir);
    fixture fx = make_fixture(1, 8, 16, 4, 5);
    data_err err;
    ckpt_meta reserved[] = {{"format", "mine"}};
    cr_expect(!ckpt_save(path, fx.reg.t, fx.reg.n, fx.buffers, 1, reserved, 1, &err));
    cr_expect(strstr(err.found, "metadata key 'format'"), "%s", err.found);
    ckpt_meta twice[] = {{"step", "1"}, {"step", "2"}};
    cr_expect(!ckpt_save(path, fx.reg.t, fx.reg.n, fx.buffers, 1, twice, 2, &err));
    cr_expect(strstr(err.found, "'step' given twice"), "%s", err.found);
    cr_expect_neq(access(path, F_OK), 0, "nothing written");
    free_fixture(&fx);
    unit_remove_tree(dir);
}

/* ---------------------------------------------------------------- corruptions */

/* A good file from the fixture, its bytes, and the header length. */
typedef struct {
    char *dir;
    char path[600];
    fixture fx;
    uint8_t *bytes;
    size_t size;
    uint64_t n;
} saved;

static saved save_good(void) {
    saved s;
    s.dir = unit_tmpdir("ckpt");
    snprintf(s.path, sizeof s.path, "%s/c.safetensors", s.dir);
    s.fx = make_fixture(2, 8, 16, 4, 11);
    cr_assert(ckpt_save(s.path, s.fx.reg.t, s.fx.reg.n, s.fx.buffers, 3, sample_meta, NMETA, NULL));
    s.bytes = unit_read_file(s.path, &s.size);
    memcpy(&s.n, s.bytes, 8);
    return s;
}

static void free_saved(saved *s) {
    free(s->bytes);
    free_fixture(&s->fx);
    unit_remove_tree(s->dir);
}

/* Writes `header` (padded) + data bytes as a safetensors file. */
static void write_safetensors(const char *path, const char *header, const void *data, size_t data_len) {
    size_t n = strlen(header);
    size_t padded = (n + 7) / 8 * 8;
    uint8_t *buf = calloc(1, 8 + padded + data_len + 1);
    uint64_t len = padded;
    memcpy(buf, &len, 8);
    memcpy(buf + 8, header, n);
    memset(buf + 8 + n, ' ', padded - n);
    if (data_len) memcpy(buf + 8 + padded, data, data_len);
    unit_write_file(path, buf, 8 + padded + data_len);
    free(buf);
}

/* Opening must fail, with a message holding `want`; the caller's buffers stay as they were. */
static void expect_open_fails(const char *path, const char *want, const char *why) {
    data_err err;
    memset(&err, 0, sizeof err);
    ckpt_file *f = ckpt_open(path, &err);
    if (f) ckpt_close(f);
    cr_assert_null(f, "%s: the file was accepted", why);
    cr_expect(strstr(line_of(&err), want), "%s: message lacks '%s':\n  %s", why, want, line_of(&err));
}

/* A cut file must be refused, with a message for the region the cut falls in. */
static void expect_cut_refused(const char *path, size_t len, size_t size, uint64_t n) {
    cr_assert_eq(truncate(path, (off_t)len), 0);
    data_err err;
    ckpt_file *f = ckpt_open(path, &err);
    if (f) ckpt_close(f);
    cr_assert_null(f, "a file cut to %zu of %zu bytes was accepted", len, size);
    const char *want = len < 8 ? "inside the header length" : len < 8 + n ? "header length" : "truncated";
    cr_assert(strstr(line_of(&err), want), "cut at %zu: message lacks '%s': %s", len, want, line_of(&err));
}

Test(ckpt, truncation_anywhere_is_refused) {
    char *dir = unit_tmpdir("ckpt");
    char path[600];
    snprintf(path, sizeof path, "%s/c.safetensors", dir);
    /* A tiny model: every length short of the whole file, so each region is cut at every byte: the
     * length, the header, the start of the data, inside and between tensors. */
    fixture tiny = make_fixture(1, 2, 4, 2, 17);
    cr_assert(ckpt_save(path, tiny.reg.t, tiny.reg.n, tiny.buffers, 1, sample_meta, 1, NULL));
    size_t size;
    uint8_t *bytes = unit_read_file(path, &size);
    uint64_t n;
    memcpy(&n, bytes, 8);
    for (size_t len = size; len-- > 0;) expect_cut_refused(path, len, size, n);
    free(bytes);
    free_fixture(&tiny);

    /* A larger one with Adam state: cut at each tensor's first and last byte. */
    saved s = save_good();
    ckpt_file *f = ckpt_open(s.path, NULL);
    int entries = ckpt_entry_count(f);
    uint64_t *cuts = malloc(2 * (size_t)entries * sizeof *cuts);
    for (int i = 0; i < entries; i++) {
        const ckpt_entry *e = ckpt_entry_at(f, i);
        cuts[2 * i] = ckpt_data_start(f) + e->begin + 1;
        cuts[2 * i + 1] = ckpt_data_start(f) + e->end - 1;
    }
    ckpt_close(f);
    for (int i = 0; i < 2 * entries; i++) {
        unit_write_file(s.path, s.bytes, s.size);
        expect_cut_refused(s.path, cuts[i], s.size, s.n);
    }
    free(cuts);
    /* Cut inside the last tensor: the message names it and the byte offset where the file ends. */
    unit_write_file(s.path, s.bytes, s.size - 2);
    expect_open_fails(s.path, "tensor 'optim.v.lnfb' data_offsets", "cut inside optim.v.lnfb");
    char want[128];
    snprintf(want, sizeof want, "the file ends at byte offset %zu", s.size - 2);
    expect_open_fails(s.path, want, "cut inside optim.v.lnfb");
    free_saved(&s);
    unit_remove_tree(dir);
}

Test(ckpt, header_length_too_large_or_zero) {
    saved s = save_good();
    uint64_t big = s.size; /* more than the bytes after the length */
    memcpy(s.bytes, &big, 8);
    unit_write_file(s.path, s.bytes, s.size);
    char want[128];
    snprintf(want, sizeof want, "header length %zu at byte offset 0, but only %zu bytes follow", s.size, s.size - 8);
    expect_open_fails(s.path, want, "length too large");
    uint64_t zero = 0;
    memcpy(s.bytes, &zero, 8);
    unit_write_file(s.path, s.bytes, s.size);
    expect_open_fails(s.path, "header length 0", "length zero");
    free_saved(&s);
}

Test(ckpt, bad_json_names_the_byte_offset) {
    saved s = save_good();
    /* Break the JSON in the middle of the header: a key followed by ',' instead of ':'. */
    size_t at = 8 + s.n / 2;
    while (s.bytes[at] != ':') at++;
    s.bytes[at] = ',';
    unit_write_file(s.path, s.bytes, s.size);
    expect_open_fails(s.path, "invalid JSON at byte offset", "broken JSON");
    expect_open_fails(s.path, "header", "broken JSON");
    /* Not an object at all. */
    s.bytes[8] = '[';
    unit_write_file(s.path, s.bytes, s.size);
    expect_open_fails(s.path, "byte 0x5b at byte offset 8", "an array header");
    free_saved(&s);
}

Test(ckpt, dtype_problems_are_named) {
    char *dir = unit_tmpdir("ckpt");
    char path[600];
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    float data[4] = {1, 2, 3, 4};
    write_safetensors(path, "{\"w\":{\"dtype\":\"Q4\",\"shape\":[4],\"data_offsets\":[0,16]}}", data, 16);
    expect_open_fails(path, "tensor 'w' has dtype Q4", "unknown dtype");
    /* A valid safetensors file, but F16 where the model needs F32: refused by ckpt_read. */
    write_safetensors(path, "{\"w\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[0,16]}}", data, 16);
    ckpt_file *f = ckpt_open(path, NULL);
    registry r = {.n = 0};
    reg_add(&r, "w", 0, 8, 0);
    float *into = sentinel_buffer(8);
    ckpt_buffer b[1] = {{"", into, 8}};
    data_err err;
    cr_assert(!ckpt_read(f, r.t, r.n, b, 1, CKPT_STRICT, &err));
    cr_expect(strstr(err.found, "tensor 'w' has dtype F16"), "%s", err.found);
    cr_expect(all_sentinel(into, 8));
    ckpt_close(f);
    /* F32 with a shape that does not match its bytes. */
    write_safetensors(path, "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", data, 16);
    expect_open_fails(path, "data_offsets [0, 16] span 16 bytes, but F32 [3] needs 12", "shape vs offsets");
    free(into);
    unit_remove_tree(dir);
}

Test(ckpt, shape_mismatch_with_the_model_is_named) {
    saved s = save_good();
    registry other = gpt2_registry(2, 12, 16, 4); /* C = 12, not 8 */
    float *p = sentinel_buffer(other.floats);
    ckpt_buffer b[1] = {{"", p, other.floats}};
    ckpt_file *f = ckpt_open(s.path, NULL);
    data_err err;
    cr_assert(!ckpt_read(f, other.t, other.n, b, 1, CKPT_ALLOW_EXTRA, &err));
    cr_expect(strstr(err.found, "tensor 'wte' has shape [16, 8] in the file, [16, 12] in the model"), "%s", err.found);
    cr_expect(all_sentinel(p, other.floats), "nothing copied before every check passed");
    ckpt_close(f);
    free(p);
    free_saved(&s);
}

Test(ckpt, overlapping_and_gapped_offsets_are_refused) {
    char *dir = unit_tmpdir("ckpt");
    char path[600];
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    float data[9] = {0};
    write_safetensors(path,
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
                      data, 24);
    expect_open_fails(path, "tensor 'b' data_offsets [8, 24] overlap tensor 'a' [0, 16]", "overlap");
    write_safetensors(path,
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[20,36]}}",
                      data, 36);
    expect_open_fails(path, "4 unused bytes at byte offset", "hole");
    write_safetensors(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", data, 20);
    expect_open_fails(path, "4 bytes after the last tensor", "trailing bytes");
    write_safetensors(path,
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,32]}}",
                      data, 32);
    expect_open_fails(path, "tensor 'a' appears twice", "repeated name");
    write_safetensors(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,0]}}", data, 16);
    expect_open_fails(path, "begin <= end", "reversed offsets");
    write_safetensors(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16],\"x\":1}}", data, 16);
    expect_open_fails(path, "tensor 'a' has a field 'x'", "unknown field");
    write_safetensors(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4]}}", data, 16);
    expect_open_fails(path, "tensor 'a' has no 'data_offsets'", "missing field");
    write_safetensors(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]}}", data, 16);
    expect_open_fails(path, "shape[0] is not one", "negative dim");
    write_safetensors(path, "{\"__metadata__\":{\"step\":3},\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
                      data, 16);
    expect_open_fails(path, "metadata 'step' is not a string", "numeric metadata");
    write_safetensors(path,
                      "{\"__metadata__\":{\"format\":\"mixpar-ckpt-2\"},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
                      data, 16);
    expect_open_fails(path, "format 'mixpar-ckpt-2'", "newer format");
    /* A foreign file with its own metadata and a scalar is fine. */
    write_safetensors(path,
                      "{\"__metadata__\":{\"format\":\"pt\"},\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[16,20]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}",
                      data, 20);
    data_err err;
    ckpt_file *f = ckpt_open(path, &err);
    cr_assert_not_null(f, "%s", line_of(&err));
    cr_expect_eq(ckpt_entry_count(f), 2);
    cr_expect_eq(ckpt_entry_find(f, "s")->ndim, 0);
    cr_expect_eq(ckpt_entry_find(f, "a")->shape[1], 2);
    cr_expect_null(ckpt_entry_find(f, "b"));
    ckpt_close(f);
    unit_remove_tree(dir);
}

Test(ckpt, missing_tensor_is_named) {
    char *dir = unit_tmpdir("ckpt");
    char path[600];
    snprintf(path, sizeof path, "%s/c.safetensors", dir);
    fixture fx = make_fixture(2, 8, 16, 4, 13);
    /* Saved without the last tensor, loaded with all of them. */
    cr_assert(ckpt_save(path, fx.reg.t, fx.reg.n - 1, fx.buffers, 1, NULL, 0, NULL));
    float *p = sentinel_buffer(fx.reg.floats);
    ckpt_buffer b[1] = {{"", p, fx.reg.floats}};
    data_err err;
    cr_assert(!ckpt_load(path, fx.reg.t, fx.reg.n, b, 1, &err));
    cr_expect(strstr(err.found, "tensor 'lnfb' [8] is missing"), "%s", err.found);
    cr_expect(all_sentinel(p, fx.reg.floats));
    /* Parameters saved alone, loaded with the optimizer's moments. */
    cr_assert(ckpt_save(path, fx.reg.t, fx.reg.n, fx.buffers, 1, NULL, 0, NULL));
    ckpt_buffer with_m[2] = {{"", p, fx.reg.floats}, {"optim.m.", fx.m, fx.reg.floats}};
    cr_assert(!ckpt_load(path, fx.reg.t, fx.reg.n, with_m, 2, &err));
    cr_expect(strstr(err.found, "tensor 'optim.m.wte' [16, 8] is missing"), "%s", err.found);
    cr_expect(all_sentinel(p, fx.reg.floats));
    free(p);
    free_fixture(&fx);
    unit_remove_tree(dir);
}

/* Each corruption also stops a command (err == NULL) with exit code 2. */
typedef struct {
    const char *name;
    int how; /* 0 truncate; 1 length too big; 2 bad JSON; 3 missing tensor; 4 wrong shape; 5 overlap; 6 empty file */
} corruption;

static const corruption corruptions[] = {{"truncated", 0}, {"length", 1}, {"json", 2}, {"missing", 3},
                                         {"shape", 4},     {"overlap", 5}, {"empty", 6}};

ParameterizedTestParameters(ckpt, every_corruption_exits_2) {
    return cr_make_param_array(corruption, corruptions, sizeof corruptions / sizeof corruptions[0]);
}

ParameterizedTest(const corruption *c, ckpt, every_corruption_exits_2, .exit_code = 2) {
    saved s = save_good();
    unit_remove_when_exiting(s.dir);
    registry reg = s.fx.reg;
    switch (c->how) {
    case 0: unit_write_file(s.path, s.bytes, s.size - 5); break;
    case 1: {
        uint64_t big = s.size;
        memcpy(s.bytes, &big, 8);
        unit_write_file(s.path, s.bytes, s.size);
        break;
    }
    case 2: s.bytes[9] = '#'; unit_write_file(s.path, s.bytes, s.size); break;
    case 3: reg_add(&reg, "extra.tensor", 0, 2, 0); break;
    case 4: reg.t[0].shape[0] = 8; reg.t[0].size = 8 * 8; break;
    case 5: {
        float data[6] = {0};
        write_safetensors(s.path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", data, 16);
        break;
    }
    case 6: unit_write_file(s.path, "", 0); break;
    }
    float *p = sentinel_buffer(reg.floats), *m = sentinel_buffer(reg.floats), *v = sentinel_buffer(reg.floats);
    ckpt_buffer b[3] = {{"", p, reg.floats}, {"optim.m.", m, reg.floats}, {"optim.v.", v, reg.floats}};
    ckpt_load(s.path, reg.t, reg.n, b, 3, NULL);
    cr_assert_fail("'%s' was loaded", c->name);
}

Test(ckpt, missing_file_is_named) {
    data_err err;
    cr_assert_null(ckpt_open("/tmp/mixpar-no-such.safetensors", &err));
    cr_expect(strstr(err.found, "cannot open '/tmp/mixpar-no-such.safetensors'"), "%s", err.found);
}

/* ---------------------------------------------------------------- atomic saves */

/* Saves v1, then tries v2 with a failure; the file must still be v1, with no temporary left. */
static void expect_failed_save_keeps_old(ckpt_fail_stage stage, const char *want) {
    char *dir = unit_tmpdir("ckpt");
    char path[600];
    snprintf(path, sizeof path, "%s/c.safetensors", dir);
    fixture v1 = make_fixture(1, 8, 16, 4, 21), v2 = make_fixture(1, 8, 16, 4, 22);
    cr_assert(ckpt_save(path, v1.reg.t, v1.reg.n, v1.buffers, 3, sample_meta, 1, NULL));
    size_t n1;
    uint8_t *before = unit_read_file(path, &n1);
    ckpt_inject_failure(stage);
    data_err err;
    cr_assert(!ckpt_save(path, v2.reg.t, v2.reg.n, v2.buffers, 3, sample_meta, 2, &err), "stage %d: save succeeded",
              (int)stage);
    cr_expect(strstr(line_of(&err), want), "stage %d: message lacks '%s': %s", (int)stage, want, line_of(&err));
    size_t n2;
    uint8_t *after = unit_read_file(path, &n2);
    cr_expect(n1 == n2 && memcmp(before, after, n1) == 0, "stage %d: the old checkpoint changed", (int)stage);
    cr_expect_eq(temp_files_in(dir), 0, "stage %d: a temporary file was left behind", (int)stage);
    /* The injection is used once: the next save works and replaces the file. */
    cr_assert(ckpt_save(path, v2.reg.t, v2.reg.n, v2.buffers, 3, NULL, 0, NULL));
    float *p = sentinel_buffer(v2.reg.floats);
    ckpt_buffer b[3] = {{"", p, v2.reg.floats}, {"optim.m.", v1.m, v1.reg.floats}, {"optim.v.", v1.v, v1.reg.floats}};
    cr_assert(ckpt_load(path, v2.reg.t, v2.reg.n, b, 3, NULL));
    cr_expect_eq(memcmp(p, v2.params, v2.reg.floats * 4), 0, "the later save replaced the file");
    free(p);
    free(before);
    free(after);
    free_fixture(&v1);
    free_fixture(&v2);
    unit_remove_tree(dir);
}

Test(ckpt, failure_at_any_stage_keeps_the_old_file) {
    expect_failed_save_keeps_old(CKPT_FAIL_CREATE, "cannot create");
    expect_failed_save_keeps_old(CKPT_FAIL_WRITE, "writing");
    expect_failed_save_keeps_old(CKPT_FAIL_SYNC, "syncing");
    expect_failed_save_keeps_old(CKPT_FAIL_RENAME, "renaming");
}

/* A real full disk: the file-size limit makes write() fail part-way, as ENOSPC would (EFBIG here). */
Test(ckpt, disk_full_mid_write_keeps_the_old_file) {
    char *dir = unit_tmpdir("ckpt");
    char path[600];
    snprintf(path, sizeof path, "%s/c.safetensors", dir);
    fixture v1 = make_fixture(2, 32, 64, 16, 31), v2 = make_fixture(2, 32, 64, 16, 32);
    cr_assert(ckpt_save(path, v1.reg.t, v1.reg.n, v1.buffers, 3, NULL, 0, NULL));
    size_t n1;
    uint8_t *before = unit_read_file(path, &n1);
    signal(SIGXFSZ, SIG_IGN); /* get EFBIG from write() instead of the signal */
    struct rlimit old, lim;
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = n1 / 2;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    data_err err;
    bool ok = ckpt_save(path, v2.reg.t, v2.reg.n, v2.buffers, 3, NULL, 0, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    cr_assert(!ok, "the save passed a file-size limit of %zu bytes", n1 / 2);
    cr_expect(strstr(err.found, "File too large"), "%s", err.found);
    size_t n2;
    uint8_t *after = unit_read_file(path, &n2);
    cr_expect(n1 == n2 && memcmp(before, after, n1) == 0, "the old checkpoint changed");
    cr_expect_eq(temp_files_in(dir), 0, "a temporary file was left behind");
    free(before);
    free(after);
    free_fixture(&v1);
    free_fixture(&v2);
    unit_remove_tree(dir);
}

Test(ckpt, rename_over_a_directory_fails_cleanly) {
    char *dir = unit_tmpdir("ckpt");
    char path[600];
    snprintf(path, sizeof path, "%s/taken", dir);
    cr_assert_eq(mkdir(path, 0755), 0);
    fixture fx = make_fixture(1, 8, 16, 4, 3);
    data_err err;
    cr_assert(!ckpt_save(path, fx.reg.t, fx.reg.n, fx.buffers, 1, NULL, 0, &err));
    cr_expect(strstr(err.found, "renaming"), "%s", err.found);
    struct stat st;
    cr_expect(stat(path, &st) == 0 && S_ISDIR(st.st_mode), "the directory is still there");
    cr_expect_eq(temp_files_in(dir), 0);
    free_fixture(&fx);
    unit_remove_tree(dir);
}

Test(ckpt, missing_directory_is_named) {
    fixture fx = make_fixture(1, 8, 16, 4, 3);
    data_err err;
    cr_assert(!ckpt_save("/tmp/mixpar-no-such-dir/c.safetensors", fx.reg.t, fx.reg.n, fx.buffers, 1, NULL, 0, &err));
    cr_expect(strstr(err.found, "cannot create '/tmp/mixpar-no-such-dir/c.safetensors.tmp."), "%s", err.found);
    free_fixture(&fx);
}

Test(ckpt, failed_save_exits_2_without_err, .exit_code = 2) {
    fixture fx = make_fixture(1, 8, 16, 4, 3);
    ckpt_save("/tmp/mixpar-no-such-dir/c.safetensors", fx.reg.t, fx.reg.n, fx.buffers, 1, NULL, 0, NULL);
}

/* ---------------------------------------------------------------- llm.c */

static const ckpt_llmc_dims small_dims = {.maxT = 8, .V = 30, .L = 3, .NH = 2, .C = 8, .Vp = 32};

Test(llmc, export_then_import_gives_identical_tensors) {
    char *dir = unit_tmpdir("ckpt");
    char path[600];
    snprintf(path, sizeof path, "%s/model.bin", dir);
    registry r = gpt2_registry(small_dims.L, small_dims.C, small_dims.Vp, small_dims.maxT);
    float *params = pattern_buffer(r.floats, 41);
    data_err err;
    cr_assert(ckpt_llmc_export(path, r.t, r.n, params, r.floats, &small_dims, &err), "%s", line_of(&err));
    ckpt_llmc_dims dims;
    cr_assert(ckpt_llmc_read_dims(path, &dims, &err), "%s", line_of(&err));
    cr_expect(memcmp(&dims, &small_dims, sizeof dims) == 0, "header dims round trip");
    float *back = sentinel_buffer(r.floats);
    cr_assert(ckpt_llmc_import(path, r.t, r.n, back, r.floats, &dims, &err), "%s", line_of(&err));
    cr_expect_eq(memcmp(back, params, r.floats * 4), 0, "tensors differ after export and import");
    free(back);
    free(params);
    unit_remove_tree(dir);
}

/* The file llm.c reads: the header ints, then each tensor for all layers, tensor-major. Checked here
 * from the format's definition, independently of the code's table. */
Test(llmc, export_writes_llmc_layout) {
    char *dir = unit_tmpdir("ckpt");
    char path[600];
    snprintf(path, sizeof path, "%s/model.bin", dir);
    const ckpt_llmc_dims d = small_dims;
    registry r = gpt2_registry(d.L, d.C, d.Vp, d.maxT);
    float *params = pattern_buffer(r.floats, 43);
    cr_assert(ckpt_llmc_export(path, r.t, r.n, params, r.floats, &d, NULL));
    size_t size;
    uint8_t *bytes = unit_read_file(path, &size);
    int32_t h[256];
    memcpy(h, bytes, sizeof h);
    cr_expect_eq(h[0], 20240326);
    cr_expect_eq(h[1], 3);
    cr_expect(h[2] == d.maxT && h[3] == d.V && h[4] == d.L && h[5] == d.NH && h[6] == d.C && h[7] == d.Vp);
    for (int i = 8; i < 256; i++) cr_expect_eq(h[i], 0, "header int %d", i);
    size_t C = (size_t)d.C, L = (size_t)d.L;
    size_t total = (size_t)d.Vp * C + (size_t)d.maxT * C + L * (2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C +
                                                                  4 * C * C + 4 * C + 4 * C * C + C) + 2 * C;
    cr_expect_eq(total, r.floats, "the registry holds GPT-2's parameters");
    cr_expect_eq(size, 1024 + 4 * total);
    /* h.1.qkvw sits after wte, wpe, ln1w (L*C), ln1b (L*C), and layer 0's qkvw (3C*C). */
    size_t at = 1024 + 4 * ((size_t)d.Vp * C + (size_t)d.maxT * C + 2 * L * C + 3 * C * C);
    int qkvw1 = -1, lnfb = -1;
    for (int i = 0; i < r.n; i++) {
        if (strcmp(r.t[i].name, "h.1.qkvw") == 0) qkvw1 = i;
        if (strcmp(r.t[i].name, "lnfb") == 0) lnfb = i;
    }
    cr_assert(qkvw1 >= 0 && lnfb >= 0);
    cr_expect_eq(memcmp(bytes + at, params + r.t[qkvw1].offset, 3 * C * C * 4), 0, "h.1.qkvw where llm.c reads it");
    cr_expect_eq(memcmp(bytes + size - 4 * C, params + r.t[lnfb].offset, C * 4), 0, "lnfb last");
    free(bytes);
    free(params);
    unit_remove_tree(dir);
}

static void write_llmc_header(const char *path, int32_t magic, int32_t version, size_t extra_bytes) {
    int32_t h[256] = {magic, version, small_dims.maxT, small_dims.V, small_dims.L, small_dims.NH, small_dims.C,
                      small_dims.Vp};
    size_t n = sizeof h + extra_bytes;
    uint8_t *buf = calloc(1, n);
    memcpy(buf, h, sizeof h);
    unit_write_file(path, buf, n);
    free(buf);
}

Test(llmc, bf16_version_and_wrong_magic_are_refused) {
    char *dir = unit_tmpdir("ckpt");
    char path[600];
    snprintf(path, sizeof path, "%s/model.bin", dir);
    ckpt_llmc_dims dims;
    data_err err;
    write_llmc_header(path, 20240326, 5, 64);
    cr_assert(!ckpt_llmc_read_dims(path, &dims, &err));
    cr_expect(strstr(err.found, "version 5 (bf16)"), "%s", err.found);
    cr_expect(strstr(err.hint, "not supported yet"), "%s", err.hint);
    write_llmc_header(path, 20240326, 4, 64);
    cr_assert(!ckpt_llmc_read_dims(path, &dims, &err));
    cr_expect(strstr(err.found, "version 4"), "%s", err.found);
    write_llmc_header(path, 20240520, 1, 64);
    cr_assert(!ckpt_llmc_read_dims(path, &dims, &err));
    cr_expect(strstr(err.found, "magic 20240520"), "%s", err.found);
    cr_expect(strstr(err.hint, "token file"), "%s", err.hint);
    unit_write_file(path, "short", 5);
    cr_assert(!ckpt_llmc_read_dims(path, &dims, &err));
    cr_expect(strstr(err.found, "ends at byte offset 5, inside the header"), "%s", err.found);
    unit_remove_tree(dir);
}

Test(llmc, bf16_checkpoint_exits_2, .exit_code = 2) {
    char path[] = "/tmp/mixpar-test-llmc-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    unit_remove_when_exiting(path);
    write_llmc_header(path, 20240326, 5, 64);
    ckpt_llmc_dims dims;
    ckpt_llmc_read_dims(path, &dims, NULL);
}

Test(llmc, truncated_file_names_the_tensor_and_offset) {
    char *dir = unit_tmpdir("ckpt");
    char path[600];
    snprintf(path, sizeof path, "%s/model.bin", dir);
    registry r = gpt2_registry(small_dims.L, small_dims.C, small_dims.Vp, small_dims.maxT);
    float *params = pattern_buffer(r.floats, 47);
    cr_assert(ckpt_llmc_export(path, r.t, r.n, params, r.floats, &small_dims, NULL));
    size_t size;
    uint8_t *bytes = unit_read_file(path, &size);
    float *into = sentinel_buffer(r.floats);
    /* Every cut is refused and leaves the parameters alone. */
    for (size_t len = 0; len < size; len += 4) {
        unit_write_file(path, bytes, len);
        data_err err;
        cr_assert(!ckpt_llmc_import(path, r.t, r.n, into, r.floats, NULL, &err), "cut at %zu accepted", len);
    }
    cr_expect(all_sentinel(into, r.floats), "a refused import wrote parameters");
    /* Cut inside the last layer's fcprojw: named, with the offset where the file ends. */
    size_t C = 8;
    size_t fcprojw_last_end = size - 4 * (2 * C + 3 * C); /* before fcprojb (L*C), lnfw, lnfb */
    unit_write_file(path, bytes, fcprojw_last_end - 8);
    data_err err;
    cr_assert(!ckpt_llmc_import(path, r.t, r.n, into, r.floats, NULL, &err));
    char want[200];
    snprintf(want, sizeof want, "ends at byte offset %zu, but tensor 'h.2.fcprojw' needs bytes [%zu, %zu)",
             fcprojw_last_end - 8, fcprojw_last_end - 4 * 4 * C * C, fcprojw_last_end);
    cr_expect(strstr(err.found, want), "want: %s\nfound: %s", want, err.found);
    /* Extra bytes at the end are refused too. */
    uint8_t *longer = calloc(1, size + 8);
    memcpy(longer, bytes, size);
    unit_write_file(path, longer, size + 8);
    cr_assert(!ckpt_llmc_import(path, r.t, r.n, into, r.floats, NULL, &err));
    cr_expect(strstr(err.found, "8 bytes after byte offset"), "%s", err.found);
    free(longer);
    free(into);
    free(bytes);
    free(params);
    unit_remove_tree(dir);
}

Test(llmc, registry_must_be_gpt2_with_the_files_shapes) {
    char *dir = unit_tmpdir("ckpt");
    char path[600];
    snprintf(path, sizeof path, "%s/model.bin", dir);
    registry r = gpt2_registry(small_dims.L, small_dims.C, small_dims.Vp, small_dims.maxT);
    float *params = pattern_buffer(r.floats + 64, 53);
    cr_assert(ckpt_llmc_export(path, r.t, r.n, params, r.floats, &small_dims, NULL));
    data_err err;
    /* Another width. */
    registry wide = gpt2_registry(small_dims.L, 16, small_dims.Vp, small_dims.maxT);
    float *into = sentinel_buffer(wide.floats);
    cr_assert(!ckpt_llmc_import(path, wide.t, wide.n, into, wide.floats, NULL, &err));
    cr_expect(strstr(err.found, "tensor 'wte' is [32, 8] in llm.c's layout, [32, 16] in the model"), "%s", err.found);
    cr_expect(all_sentinel(into, wide.floats));
    free(into);
    /* An untied head has no place in llm.c's format. */
    registry untied = r;
    reg_add(&untied, "lm_head", small_dims.L, small_dims.Vp, small_dims.C);
    float *big = pattern_buffer(untied.floats, 59);
    cr_assert(!ckpt_llmc_export(path, untied.t, untied.n, big, untied.floats, &small_dims, &err));
    cr_expect(strstr(err.found, "the model's tensor 'lm_head' has no place"), "%s", err.found);
    /* A registry without biases (LLaMA-like) lacks llm.c's tensors. */
    registry nob = {.n = 0};
    for (int i = 0; i < r.n; i++) {
        size_t n = strlen(r.t[i].name);
        if (r.t[i].name[n - 1] == 'b') continue;
        reg_add(&nob, r.t[i].name, r.t[i].layer, r.t[i].shape[0], r.t[i].ndim == 2 ? r.t[i].shape[1] : 0);
    }
    cr_assert(!ckpt_llmc_export(path, nob.t, nob.n, big, nob.floats, &small_dims, &err));
    cr_expect(strstr(err.found, "the model has no tensor 'h.0.ln1b' [8]"), "%s", err.found);
    /* Dimensions that cannot be a model. */
    ckpt_llmc_dims bad = small_dims;
    bad.NH = 3;
    cr_assert(!ckpt_llmc_export(path, r.t, r.n, params, r.floats, &bad, &err));
    cr_expect(strstr(err.found, "C 8, NH 3"), "%s", err.found);
    free(big);
    free(params);
    unit_remove_tree(dir);
}
