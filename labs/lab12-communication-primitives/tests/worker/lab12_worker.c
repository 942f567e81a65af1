/* lab12_worker.c: the program lab 12's tests start on N ranks (build/labs/lab12_worker): collective_worker.h, a
 * header so that lab 26's worker can be the same program (a worker's sources are its folder's .c files). */
#include "collective_worker.h"
