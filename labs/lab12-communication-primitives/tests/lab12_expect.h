/* lab12_expect.h: lab 12's expectations written out independently of mixpar: the bytes each algorithm
 * sends per rank, and the likely mistake behind wrong results of each region. */
#ifndef LAB12_EXPECT_H
#define LAB12_EXPECT_H

#include "lab12_run.h"

#define HINT_RING_RS "in step s rank r sends chunk (r-s-1) mod p to rank r+1 and adds what rank r-1 sends into its " \
    "chunk (r-s-2) mod p; use comm_mod, since C's % keeps the sign (-1 % 4 == -1)"
#define HINT_RING_AG "in step s rank r sends chunk (r-s) mod p (its own first, then the one it received last step) and " \
    "receives chunk (r-s-1) mod p straight into place"
#define HINT_RING_AR "ring allreduce is your reduce-scatter followed by your allgather: make those tests pass first"
#define HINT_BCAST "use virtual ranks v = (rank - root) mod p: receive once, from v minus its lowest set bit, then send " \
    "to v + mask for each smaller mask (farthest first) while v + mask < p; real rank = (v + root) mod p"
#define HINT_REDUCE "the broadcast backwards: for mask = 1, 2, 4, ...: if v has that bit, send to v - mask and stop; " \
    "otherwise, if v + mask < p, receive from v + mask and fold it in"
#define HINT_RHD "halving: the partner is vreal[vrank ^ dist]; the rank with the dist bit clear keeps the lower half " \
    "of its span and sends the upper; doubling: send your span, receive the partner's next to it (below yours " \
    "when your dist bit is set)"

/* Ring allreduce: rank r sends every chunk but its own in reduce-scatter and every chunk but chunk r+1 in
 * allgather, 4 bytes an element (fp32; bf16 is reduced in fp32). */
static inline uint64_t bytes_ring_allreduce(int r, int p, size_t n, int root) {
    (void)root;
    if (p == 1) return 0;
    return 4ull * (2 * n - lab12_chunk_size(n, p, r) - lab12_chunk_size(n, p, (r + 1) % p));
}
/* Ring reduce-scatter and allgather of m elements per rank: p-1 chunks of m. */
static inline uint64_t bytes_ring_blocks_4(int r, int p, size_t m, int root) {
    (void)r, (void)root;
    return 4ull * (uint64_t)(p - 1) * m;
}
static inline uint64_t bytes_ring_blocks_2(int r, int p, size_t m, int root) {
    (void)r, (void)root;
    return 2ull * (uint64_t)(p - 1) * m;
}
/* Binomial broadcast: a rank sends the whole buffer once to each of its children. */
static inline int binomial_children(int r, int p, int root) {
    int v = (r - root + p) % p, kids = 0;
    int low = v ? (v & -v) : 1 << 30; /* the root's children are at every power of two below p */
    for (int mask = 1; mask < low && v + mask < p; mask <<= 1) kids++;
    return kids;
}
static inline uint64_t bytes_binomial_broadcast_4(int r, int p, size_t n, int root) {
    return 4ull * n * (uint64_t)binomial_children(r, p, root);
}
static inline uint64_t bytes_binomial_broadcast_2(int r, int p, size_t n, int root) {
    return 2ull * n * (uint64_t)binomial_children(r, p, root);
}
/* Binomial reduce: every rank but the root sends its partial result once. */
static inline uint64_t bytes_binomial_reduce_4(int r, int p, size_t n, int root) {
    (void)p;
    return r == root ? 0 : 4ull * n;
}

#endif
