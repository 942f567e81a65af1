/* algo_binomial.c: binomial-tree broadcast and reduce (lab 12): log2(p) rounds, the number of ranks that
 * hold the data doubling every round (broadcast) or halving (reduce). Best for small messages. */
#include "comm/algo.h"

#include "base/lab.h"

/* Ranks are renumbered so the root is virtual rank 0: vrank = (rank - root) mod p, and virtual rank v is
 * real rank (v + root) mod p. In the tree, the parent of v is v with its lowest set bit cleared, and the
 * children of v are v + 2^k for every 2^k below v's lowest set bit (and below p). With p = 8:
 *
 *   round 1:  0 -> 4                 (distance 4)
 *   round 2:  0 -> 2,  4 -> 6        (distance 2)
 *   round 3:  0 -> 1,  2 -> 3,  4 -> 5,  6 -> 7
 *
 * A rank first receives from its parent (found by scanning the bits of v from the lowest up), then sends
 * to its children, farthest first, so the subtrees that are deepest start earliest. */
void algo_binomial_broadcast(comm_t *c, void *buf, size_t count, comm_dtype dt, int root) {
    const int p = comm_size(c), vrank = comm_mod(comm_rank(c) - root, p);
    /* LAB 12 BEGIN binomial broadcast: receive from the parent, then send to the children, farthest first */
    int mask = 1;
    while (mask < p) {
        if (vrank & mask) {
            algo_recv(c, buf, count, comm_mod(vrank - mask + root, p), dt);
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (vrank + mask < p) algo_send(c, buf, count, comm_mod(vrank + mask + root, p), dt);
    /* LAB 12 END */
}

/* Reduce is the broadcast run backwards: a rank first collects from its children, nearest first (each
 * child's subtree has finished by then), folding each into its buffer, then sends the result to its
 * parent. The root ends with the reduction; the others' buffers hold partial results. */
void algo_binomial_reduce(comm_t *c, void *buf, size_t count, comm_dtype dt, comm_redop op, int root) {
    const int p = comm_size(c), vrank = comm_mod(comm_rank(c) - root, p);
    /* LAB 12 BEGIN binomial reduce: fold in the children, nearest first, then send to the parent */
    for (int mask = 1; mask < p; mask <<= 1) {
        if (vrank & mask) {
            algo_send(c, buf, count, comm_mod(vrank - mask + root, p), dt);
            break;
        }
        if (vrank + mask < p) algo_recv_reduce(c, buf, count, comm_mod(vrank + mask + root, p), dt, op);
    }
    /* LAB 12 END */
}
