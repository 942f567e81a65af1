/* sampler_show.c: prints each rank's samples of a few epochs under the distributed sampler's rules (lab 15). */
#include "base/error.h"
#include "base/mem.h"
#include "base/parse.h"
#include "data/sampler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One table per mode: a row per (epoch, rank) with the rank's sample indices; a '*' marks a sample some
 * other position of the epoch also holds (padding's repeats). Then what the epoch left out. */
static void show(uint64_t n, int world, bool shuffle, bool drop_last, uint64_t seed, uint64_t epochs) {
    dist_sampler s;
    dist_sampler_init(&s, n, world, 0, shuffle, seed, drop_last, NULL);
    printf("N=%llu world=%d shuffle=%s seed=%llu drop_last=%s: %llu samples per rank, %llu in all (%s)\n",
           (unsigned long long)n, world, shuffle ? "on" : "off", (unsigned long long)seed, drop_last ? "on" : "off",
           (unsigned long long)s.num_samples, (unsigned long long)s.total_size,
           s.total_size > n   ? "padded: the first total - N of the list are taken twice"
           : s.total_size < n ? "the tail of the list is dropped"
                              : "every sample once");
    uint64_t *mine = mem_alloc((s.num_samples + 1) * sizeof *mine, MEM_OTHER, "samples");
    unsigned *count = mem_alloc(n * sizeof *count, MEM_OTHER, "counts");
    for (uint64_t e = 0; e < epochs; e++) {
        memset(count, 0, n * sizeof *count);
        for (int r = 0; r < world; r++) {
            dist_sampler rs;
            dist_sampler_init(&rs, n, world, r, shuffle, seed, drop_last, NULL);
            dist_sampler_set_epoch(&rs, e);
            dist_sampler_indices(&rs, mine);
            for (uint64_t i = 0; i < rs.num_samples; i++) count[mine[i]]++;
        }
        for (int r = 0; r < world; r++) {
            dist_sampler rs;
            dist_sampler_init(&rs, n, world, r, shuffle, seed, drop_last, NULL);
            dist_sampler_set_epoch(&rs, e);
            dist_sampler_indices(&rs, mine);
            printf("  epoch %llu rank %d:", (unsigned long long)e, r);
            for (uint64_t i = 0; i < rs.num_samples; i++)
                printf(" %3llu%s", (unsigned long long)mine[i], count[mine[i]] > 1 ? "*" : " ");
            printf("\n");
        }
        printf("  epoch %llu left out:", (unsigned long long)e);
        int none = 1;
        for (uint64_t i = 0; i < n; i++)
            if (count[i] == 0) printf(" %llu", (unsigned long long)i), none = 0;
        printf("%s\n", none ? " none" : "");
    }
    mem_free(mine);
    mem_free(count);
}

int main(int argc, char **argv) {
    uint64_t n = 10, seed = 0, epochs = 2;
    int64_t world = 3;
    bool shuffle = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--n") && parse_u64(v, &n) && n >= 1) i++;
        else if (!strcmp(a, "--world") && parse_i64(v, &world) && world >= 1 && world <= 1024) i++;
        else if (!strcmp(a, "--seed") && parse_u64(v, &seed)) i++;
        else if (!strcmp(a, "--epochs") && parse_u64(v, &epochs) && epochs >= 1 && epochs <= 100) i++;
        else if (!strcmp(a, "--no-shuffle")) shuffle = false;
        else {
            fprintf(stderr, "usage: sampler_show [--n N>=1] [--world 1..1024] [--seed S] [--epochs 1..100] [--no-shuffle]\n"
                            "  each rank's samples per epoch, without and with drop_last (core/data/sampler.h)\n"
                            "  bad or unknown argument: '%s'\n", a);
            return 2;
        }
    }
    show(n, (int)world, shuffle, false, seed, epochs);
    printf("\n");
    show(n, (int)world, shuffle, true, seed, epochs);
    return 0;
}
