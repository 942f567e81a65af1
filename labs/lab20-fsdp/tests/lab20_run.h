/* lab20_run.h: lab 20's own helpers on top of lab 19's runner: the fsdp section as overrides, and the forward
 * probe (lab20_worker --forward-held): the gathered bytes each block starts with, per prefetch setting. */
#ifndef LAB20_RUN_H
#define LAB20_RUN_H

#include "../../lab19-zero-data-parallel/tests/lab19_run.h"

enum { LAB20 = 20, LAB20_MAX_LAYERS = 8 };

typedef struct {
    size_t root, block;                 /* floats of the root unit and of one block */
    double held[LAB20_MAX_LAYERS];      /* MEM_COMM bytes held as each block starts */
    int layers;
    char what[160];
} lab20_held;

/* One FULL_SHARD forward on `ranks` ranks with forward prefetch and limit_all_gathers on or off. */
static inline void lab20_forward_held(lab20_held *h, int ranks, int layers, bool prefetch, bool limit) {
    const char *worker = "./build/labs/lab20_worker";
    MPT_REQUIRE(access(worker, X_OK) == 0, "%s is missing: 'make labtests LAB=20' (or make grade LAB=20) builds it", worker);
    MPT_REQUIRE(layers <= LAB20_MAX_LAYERS, "at most %d layers", LAB20_MAX_LAYERS);
    memset(h, 0, sizeof *h);
    h->layers = layers;
    snprintf(h->what, sizeof h->what, "FULL_SHARD forward, %d blocks, %d ranks, forward_prefetch %s, limit_all_gathers %s",
             layers, ranks, prefetch ? "on" : "off", limit ? "on" : "off");
    char a_layers[8];
    snprintf(a_layers, sizeof a_layers, "%d", layers);
    char *argv[] = {(char *)worker, "--forward-held", a_layers, prefetch ? "1" : "0", limit ? "1" : "0", NULL};
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("MIXPAR_COMM_TIMEOUT", "20", 1);
    comm_launch_opts o = {.ranks = ranks, .timeout_s = LAB19_WAIT_S, .quiet = true};
    char *output = NULL;
    int rc = comm_launch_run(&o, argv, &output);
    if (rc != 0)
        mpt_fail_stop(__FILE__, __LINE__, "%s: mpirun exited with %d: %s\n      ranks' output (end):\n%s", h->what, rc,
                      strstr(output, "lab 20 not done") ? "a region of this lab is still a LAB_TODO stub"
                      : strstr(output, "not done")      ? "a region of an earlier lab is still a stub"
                      : rc == 124                       ? "the ranks did not finish (a gather one rank never made?)"
                                                        : "a rank failed (see its output)",
                      lab19_tail(output ? output : "", 1500));
    const char *line = strstr(output, "root=");
    int used = 0;
    MPT_REQUIRE(line && sscanf(line, "root=%zu block=%zu held=%n", &h->root, &h->block, &used) == 2 && used > 0,
                "%s: no 'root=... block=... held=...' line in the output:\n%s", h->what, lab19_tail(output, 800));
    const char *p = line + used;
    for (int l = 0; l < layers; l++) {
        char *end;
        h->held[l] = strtod(p, &end);
        MPT_REQUIRE(end != p, "%s: %d held values expected in '%s'", h->what, layers, line);
        p = *end == ',' ? end + 1 : end;
    }
    free(output);
}

/* Bytes of the root plus `blocks` gathered blocks (fp32). */
static inline double lab20_bytes(const lab20_held *h, int blocks) { return 4.0 * ((double)h->root + blocks * (double)h->block); }

#endif
