/* mp_checkpoint.c: a dp x tp x pp run's shards saved as ranges of the whole model's buffers (ckpt_sharded), loaded back on any mesh by range reads. */
#include "train/mp_checkpoint.h"

#include "amp/scaler.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/parse.h"
#include "data/textbuf.h"
#include "train/ckpt_sharded.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One run of elements: local[0 .. n) of this rank's shard are whole[.. + n) of the whole model's buffer;
 * state_at: where they sit in the optimizer state (NO_STATE for a weights-only list). */
typedef struct {
    float *local;
    size_t whole, n, state_at;
} piece;
typedef struct {
    piece *p;
    int n, cap;
} pieces;
enum { NO_STATE = -1 };

static void push(pieces *ps, float *local, size_t whole, size_t n, size_t state_at) {
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 64;
        ps->p = realloc(ps->p, (size_t)ps->cap * sizeof *ps->p);
        MP_ASSERT(ps->p, "out of memory");
    }
    ps->p[ps->n++] = (piece){local, whole, n, state_at};
}

/* The whole model's registry, for naming each shard tensor's place. */
typedef struct {
    model_tensor *t;
    int n;
    size_t total; /* floats in the whole model's buffer */
} registry;

static const model_tensor *whole_tensor(const registry *reg, const char *name) {
    for (int i = 0; i < reg->n; i++)
        if (strcmp(reg->t[i].name, name) == 0) return &reg->t[i];
    MP_ASSERT(false, "shard tensor '%s' is not in the whole model", name);
    return NULL;
}

/* The tensor a checkpoint takes from this rank: not a tp-replicated one on tp rank > 0, not the tied copy. */
static bool writes_tensor(const model *m, const model_tensor *t) {
    return (!model_tensor_tp_replicated(m, t) || model_get_shard(m)->tp_rank == 0) && !model_tensor_is_tied_copy(m, t);
}

/* Appends the pieces of model m's local elements [lo, lo + n) (tensor by tensor, in local order); their
 * state sits from state_at on (NO_STATE: none). owners_only keeps only the tensors writes_tensor takes. */
static void map_local(const model *m, const registry *reg, size_t lo, size_t n, size_t state_at, bool owners_only,
                      pieces *out) {
    int count;
    const model_tensor *t = model_tensors(m, &count);
    float *base = model_params((model *)m);
    size_t hi = lo + n;
    for (int i = 0; i < count; i++) {
        size_t a = t[i].offset > lo ? t[i].offset : lo, b = t[i].offset + t[i].size < hi ? t[i].offset + t[i].size : hi;
        if (a >= b || (owners_only && !writes_tensor(m, &t[i]))) continue;
        const model_tensor *w = whole_tensor(reg, t[i].name);
        size_t nruns = model_tensor_whole_runs(m, &t[i], NULL, NULL);
        size_t *start = malloc(nruns * sizeof *start), *len = malloc(nruns * sizeof *len);
        MP_ASSERT(start && len, "out of memory");
        model_tensor_whole_runs(m, &t[i], start, len);
        size_t ra = a - t[i].offset, rb = b - t[i].offset; /* tensor-local elements wanted */
        for (size_t k = 0, at = 0; k < nruns && at < rb; at += len[k], k++) {
            size_t x = at > ra ? at : ra, y = at + len[k] < rb ? at + len[k] : rb;
            if (x >= y) continue;
            size_t local = t[i].offset + x;
            push(out, base + local, w->offset + start[k] + (x - at), y - x,
                 state_at == (size_t)NO_STATE ? (size_t)NO_STATE : state_at + (local - lo));
        }
        free(start);
        free(len);
    }
}

/* The pieces of the optimizer state's spans, in state order; owners_only as map_local. */
static void map_state(mp_step *s, const registry *reg, bool owners_only, pieces *out) {
    int nspans;
    const optim_span *spans = mp_step_state_spans(s, &nspans);
    size_t at = 0;
    for (int i = 0; i < nspans; at += spans[i].n, i++) {
        int j = 0;
        const model *m = NULL;
        for (; j < mp_step_chunks(s); j++) {
            m = mp_step_model(s, j);
            const float *p = model_params((model *)m);
            if (spans[i].param >= p && spans[i].param < p + model_num_params(m)) break;
        }
        MP_ASSERT(j < mp_step_chunks(s), "an optimizer span outside every chunk");
        map_local(m, reg, (size_t)(spans[i].param - model_params((model *)m)), spans[i].n, at, owners_only, out);
    }
}

/* Every tensor this rank holds, weights only. */
static void map_weights(mp_step *s, const registry *reg, pieces *out) {
    for (int j = 0; j < mp_step_chunks(s); j++) {
        const model *m = mp_step_model(s, j);
        map_local(m, reg, 0, model_num_params(m), (size_t)NO_STATE, false, out);
    }
}

static ckpt_range *ranges_of(const pieces *ps) {
    ckpt_range *r = malloc(((size_t)ps->n + 1) * sizeof *r);
    MP_ASSERT(r, "out of memory");
    for (int i = 0; i < ps->n; i++) r[i] = (ckpt_range){ps->p[i].whole, ps->p[i].n};
    return r;
}

static registry registry_of(mp_step *s) {
    registry reg;
    const model_config *c = model_get_config(mp_step_model(s, 0));
    reg.t = model_whole_registry(c, &reg.n);
    reg.total = model_count_params(c);
    return reg;
}

/* ---------------------------------------------------------------- the manifest */

/* "mesh": the shape and the virtual stages' first blocks. */
static char *mesh_json(mp_step *s) {
    const mesh_t *mh = mp_step_mesh(s);
    int v = mp_step_chunks(s);
    const int *first = mp_step_stages(s);
    textbuf t = {0};
    textbuf_printf(&t, "{\"dp\": %d, \"tp\": %d, \"pp\": %d, \"chunks\": %d, \"zero_stage\": %d, \"stage_first_blocks\": [",
                   mh->dp_size, mh->tp_size, mh->pp_size, v, mp_step_zero1(s) ? 1 : 0);
    for (int i = 0; i <= mh->pp_size * v; i++) textbuf_printf(&t, "%s%d", i ? ", " : "", first[i]);
    textbuf_puts(&t, "]}");
    return t.data;
}

/* "tensors": each whole tensor's place, split and stage. */
static char *tensors_json(mp_step *s, const registry *reg) {
    const mesh_t *mh = mp_step_mesh(s);
    const model_config *c = model_get_config(mp_step_model(s, 0));
    int vstages = mh->pp_size * mp_step_chunks(s);
    const int *first = mp_step_stages(s);
    textbuf t = {0};
    textbuf_puts(&t, "[");
    for (int i = 0; i < reg->n; i++) {
        const model_tensor *w = &reg->t[i];
        const char *split = model_tensor_split_name(w);
        int dim = strcmp(split, "replicated") == 0 ? -1 : strcmp(split, "cols") == 0 ? 1 : 0;
        int vs = w->layer < 0 ? 0 : w->layer >= c->L ? vstages - 1 : 0;
        while (w->layer >= 0 && w->layer < c->L && !(first[vs] <= w->layer && w->layer < first[vs + 1])) vs++;
        textbuf_printf(&t, "%s\n {\"name\": \"%s\", \"shape\": [%d", i ? "," : "", w->name, w->shape[0]);
        if (w->ndim == 2) textbuf_printf(&t, ", %d", w->shape[1]);
        textbuf_printf(&t, "], \"offset\": %zu, \"split\": \"%s\", \"tp_dim\": %d, \"stage\": %d", w->offset, split,
                       dim, vs % mh->pp_size);
        if (c->tied && strcmp(w->name, "wte") == 0 && mh->pp_size > 1)
            textbuf_printf(&t, ", \"tied_copy_on_stage\": %d", mh->pp_size - 1);
        textbuf_puts(&t, "}");
    }
    textbuf_puts(&t, "\n]");
    return t.data;
}

/* ---------------------------------------------------------------- saving */

bool mp_checkpoint_save(mp_step *s, const char *dir, const ckpt_meta *meta, int nmeta, data_err *err) {
    const mesh_t *mh = mp_step_mesh(s);
    registry reg = registry_of(s);
    size_t total = reg.total;
    pieces ps = {0};
    if (mp_step_zero1(s) || mh->dp_rank == 0) map_state(s, &reg, true, &ps);
    const optim_state *st = mp_step_optim_state(s);
    size_t floats = 0;
    for (int i = 0; i < ps.n; i++) floats += ps.p[i].n;
    int nb = 1 + (st->m != NULL) + (st->v != NULL);
    float *packed = mem_alloc((size_t)nb * (floats ? floats : 1) * sizeof(float), MEM_OTHER, "checkpoint.mp.shard");
    float *params = packed, *m = st->m ? packed + floats : NULL, *v = st->v ? packed + (nb - 1) * floats : NULL;
    size_t at = 0;
    for (int i = 0; i < ps.n; at += ps.p[i].n, i++) {
        const piece *p = &ps.p[i];
        memcpy(params + at, p->local, p->n * sizeof(float));
        if (m) memcpy(m + at, st->m + p->state_at, p->n * sizeof(float));
        if (v) memcpy(v + at, st->v + p->state_at, p->n * sizeof(float));
    }
    ckpt_shard_buffer bufs[3] = {{"params", params}};
    int k = 1;
    if (m) bufs[k++] = (ckpt_shard_buffer){"optim.m", m};
    if (v) bufs[k++] = (ckpt_shard_buffer){"optim.v", v};
    char *mesh = mesh_json(s), *tensors = tensors_json(s, &reg);
    ckpt_meta *all = malloc(((size_t)nmeta + 2) * sizeof *all);
    MP_ASSERT(all, "out of memory");
    if (nmeta) memcpy(all, meta, (size_t)nmeta * sizeof *meta);
    all[nmeta] = (ckpt_meta){"mesh", mesh};
    all[nmeta + 1] = (ckpt_meta){"tensors", tensors};
    ckpt_range *ranges = ranges_of(&ps);
    bool ok = ckpt_sharded_save(dir, mh->world, total, ranges, ps.n, bufs, k, all, nmeta + 2, err);
    free(ranges);
    free(all);
    free(mesh);
    free(tensors);
    mem_free(packed);
    free(ps.p);
    free(reg.t);
    return ok;
}

/* ---------------------------------------------------------------- loading */

/* Where the floats come from: a sharded checkpoint (range reads, collective), or one file read whole. */
typedef struct {
    ckpt_sharded *dir;
    ckpt_file *file;
    float *whole[3]; /* the file's buffers laid out like the whole registry, by buffer index */
    const char *path;
} source;

static const char *const buffer_names[3] = {"params", "optim.m", "optim.v"};

static source open_source(const char *path, const registry *reg, bool has_m, bool has_v) {
    source src = {.path = path};
    struct stat st;
    bool want[3] = {true, has_m, has_v};
    const char *names[3];
    int n = 0;
    for (int b = 0; b < 3; b++)
        if (want[b]) names[n++] = buffer_names[b];
    if (ckpt_sharded_is_dir(path) || (stat(path, &st) == 0 && S_ISDIR(st.st_mode))) {
        src.dir = ckpt_sharded_open(path, NULL);
        ckpt_sharded_check_buffers(src.dir, names, n, NULL);
        return src;
    }
    src.file = ckpt_open(path, NULL);
    size_t total = reg->total;
    static const char *const prefixes[3] = {"", "optim.m.", "optim.v."};
    ckpt_buffer bufs[3];
    int nb = 0;
    for (int b = 0; b < 3; b++) {
        if (!want[b]) continue;
        src.whole[b] = mem_alloc(total * sizeof(float), MEM_OTHER, "checkpoint.mp.whole");
        bufs[nb++] = (ckpt_buffer){prefixes[b], src.whole[b], total};
    }
    ckpt_read(src.file, reg->t, reg->n, bufs, nb, CKPT_STRICT, NULL);
    return src;
}

/* Buffer b's floats at the pieces' whole ranges, into each piece's local place (weights) or its state slot. */
static void read_pieces(const source *src, comm_t *world, const registry *reg, const pieces *ps, int b, float *state) {
    size_t total = reg->total, floats = 0;
    for (int i = 0; i < ps->n; i++) floats += ps->p[i].n;
    float *packed = mem_alloc((floats ? floats : 1) * sizeof(float), MEM_OTHER, "checkpoint.mp.read");
    if (src->dir) {
        ckpt_range *ranges = ranges_of(ps);
        ckpt_shard_buffer buf = {buffer_names[b], packed};
        ckpt_sharded_read_all(src->dir, world, total, ranges, ps->n, &buf, 1, NULL);
        free(ranges);
    } else {
        size_t at = 0;
        for (int i = 0; i < ps->n; at += ps->p[i].n, i++)
            memcpy(packed + at, src->whole[b] + ps->p[i].whole, ps->p[i].n * sizeof(float));
    }
    size_t at = 0;
    for (int i = 0; i < ps->n; at += ps->p[i].n, i++)
        memcpy(state ? state + ps->p[i].state_at : ps->p[i].local, packed + at, ps->p[i].n * sizeof(float));
    mem_free(packed);
}

static const char *meta_value(const source *src, const char *key) {
    return src->dir ? ckpt_sharded_meta_get(src->dir, key) : ckpt_meta_get(src->file, key);
}

static uint64_t meta_number(const source *src, const char *key) {
    const char *value = meta_value(src, key);
    uint64_t x;
    if (!value) MP_FAIL("a checkpoint written by 'mixpar train'", "'%s' has no metadata '%s'", src->path, key);
    if (!parse_u64(value, &x)) MP_FAIL("a whole number", "'%s': metadata '%s' is \"%s\"", src->path, key, value);
    return x;
}

void mp_checkpoint_load(mp_step *s, const char *path, mp_checkpoint_progress *progress) {
    registry reg = registry_of(s);
    optim_state *st = mp_step_optim_state(s);
    source src = open_source(path, &reg, st->m != NULL, st->v != NULL);
    comm_t *world = mp_step_mesh(s)->world;
    pieces weights = {0}, state = {0};
    map_weights(s, &reg, &weights);
    read_pieces(&src, world, &reg, &weights, 0, NULL);
    map_state(s, &reg, false, &state);
    if (st->m) read_pieces(&src, world, &reg, &state, 1, st->m);
    if (st->v) read_pieces(&src, world, &reg, &state, 2, st->v);
    st->step = (long)meta_number(&src, "optim_step");
    progress->step = (long)meta_number(&src, "step");
    progress->loader_epoch = meta_number(&src, "loader_epoch");
    progress->loader_batch = meta_number(&src, "loader_batch");
    progress->loader_rows = meta_value(&src, "loader_rows") ? meta_number(&src, "loader_rows") : 0;
    amp_scaler *scaler = mp_step_scaler(s);
    if (scaler) { /* the loss scale and its counters resume where they were, as in a data-parallel run */
        amp_kv keys[AMP_SCALER_NSTATE], got[AMP_SCALER_NSTATE];
        int n = amp_scaler_save_state(scaler, keys), found = 0;
        for (int i = 0; i < n; i++) {
            const char *value = meta_value(&src, keys[i].key);
            if (!value) continue;
            snprintf(got[found].key, sizeof got[found].key, "%s", keys[i].key);
            snprintf(got[found].value, sizeof got[found].value, "%s", value);
            found++;
        }
        data_err err;
        if (!amp_scaler_load_state(scaler, got, found, &err))
            MP_FAIL_HINT(err.expected, "resume with the precision settings the checkpoint was written with", "%s: %s",
                         path, err.found);
    }
    free(weights.p);
    free(state.p);
    for (int b = 0; b < 3; b++) mem_free(src.whole[b]);
    ckpt_sharded_close(src.dir);
    ckpt_close(src.file);
    free(reg.t);
}
