#!/usr/bin/env bash
# experiment_lib.sh: what the labs' experiment.sh scripts share: the start (paths, threads, the built tool), section
# titles, running a part that may stop at a LAB_TODO stub, and building a lab's own C driver against the core.
# Sourced from the repository root: `source labs/experiment_lib.sh; experiment_init 21`.

# experiment_init NN: sets mixpar (the tool), out (runs/labNN, created) and lab (the lab's folder); one OpenMP thread
# per process unless told otherwise: the numbers do not depend on it, and on a busy machine threads that wait for
# each other by spinning are many times slower than one thread.
experiment_init() {
    mixpar=build/mixpar
    out=runs/lab$1
    lab=$(ls -d labs/lab"$1"-* 2>/dev/null | head -n 1)
    export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
    mkdir -p "$out"
    [ -x "$mixpar" ] || { echo "lab$1: $mixpar is missing; run 'make' first (make lab$1 does)" >&2; exit 2; }
}

section() { printf '\n==== %s\n\n' "$*"; }

# needs_lab COMMAND...: runs a command that needs lab regions; while they are still LAB_TODO stubs (exit 86) it says
# so, sets todo=1 and returns 86, so that the parts that do not need them still run. A lab whose later parts all
# depend on the stopped one defines its own needs_lab after sourcing this file.
todo=0
needs_lab() {
    local rc=0
    "$@" || rc=$?
    if [ "$rc" -eq 86 ]; then todo=1; echo "  (this part runs once the lab regions named above are written)"; return 86; fi
    return "$rc"
}
# ok_or_todo RC: goes on after a part that finished or waited for a stub (86); stops the experiment on anything else.
ok_or_todo() { [ "$1" -eq 0 ] || [ "$1" -eq 86 ] || exit "$1"; }

# build_lab_driver SOURCE BINARY: compiles a lab's own program (a table, a probe) against the core's library when
# the binary is missing or older than either.
build_lab_driver() {
    local src=$1 bin=$2
    [ -x "$bin" ] && [ ! "$src" -nt "$bin" ] && [ ! build/libmixpar.a -nt "$bin" ] && return 0
    mkdir -p "$(dirname "$bin")"
    cc -std=gnu11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -fopenmp -Icore $(mpicc --showme:compile 2>/dev/null) \
        -o "$bin" "$src" build/libmixpar.a -lopenblas -lcjson -lm -pthread -fopenmp \
        $(mpicc --showme:link 2>/dev/null)
}
