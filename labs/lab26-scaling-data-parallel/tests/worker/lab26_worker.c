/* lab26_worker.c: the program lab 26's tests start on N ranks (build/labs/lab26_worker): lab 12's collective checker
 * (labs/lab12-communication-primitives/tests/worker/collective_worker.h: one collective per count on known inputs,
 * every element compared with the answer, bytes sent counted), built from this tree, so with your hierarchical
 * allreduce. The tests choose the nodes with MIXPAR_RANKS_PER_NODE, which comm_init reads.
 *
 *   MIXPAR_RANKS_PER_NODE=2 mpirun -n 5 build/labs/lab26_worker DIR allreduce hierarchical fp32 sum 0 SEED COUNT... */
#include "../../../lab12-communication-primitives/tests/worker/collective_worker.h"
