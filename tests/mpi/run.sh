#!/usr/bin/env bash
# run.sh: the communicator's multi-rank suite: every algorithm against MPI's own collectives on 1..8 ranks
# (tests/mpi/test_comm_mpi.c), groups, the dp x tp x pp mesh, pipeline p2p and tensor-parallel linears
# (tests/mpi/test_comm_groups.c), 3D-parallel training against one rank (tests/mpi/test_model_parallel.c),
# the failure paths (debug-mode mismatch, a hung or killed peer, a size
# mismatch; tests/mpi/test_comm_fail.c), and the launcher's and comm-bench's command lines.
# Prints "ok - ..." / "not ok - ..." lines (tests/lib.sh). About a minute on 2 cores.
source "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
if ! make -s all mpi-tests >/dev/null 2>&1; then echo "not ok - build mixpar and tests/mpi (make mpi-tests)"; exit 1; fi
TESTS=build/tests/mpi

# ---------------------------------------------------------------- every algorithm vs MPI, 1..8 ranks
for n in 1 2 3 4 5 6 7 8; do
  out=$(timeout -k 5 "$(scaled 120)" "$MIXPAR" run -n "$n" -- "$TESTS/test_comm_mpi" 2>&1)
  rc=$?
  grep -E '^(ok|not ok) - |^    ' <<<"$out"
  if [ "$rc" -ne 0 ] && ! grep -q '^not ok - ' <<<"$out"; then
    echo "not ok - test_comm_mpi on $n ranks exited with $rc"
    tail -n 15 <<<"$out" | sed 's/^/    /'
  fi
done

# ---------------------------------------------------------------- groups and the mesh, 1..8 ranks
# comm_split vs MPI_Comm_split, every algorithm on a group vs MPI's, every dp x tp x pp mesh, pipeline p2p,
# group events, Megatron's tensor-parallel linear pair (tests/mpi/test_comm_groups.c).
for n in 1 2 3 4 5 6 7 8; do
  out=$(timeout -k 5 "$(scaled 120)" "$MIXPAR" run -n "$n" -- "$TESTS/test_comm_groups" 2>&1)
  rc=$?
  grep -E '^(ok|not ok) - |^    ' <<<"$out"
  if [ "$rc" -ne 0 ] && ! grep -q '^not ok - ' <<<"$out"; then
    echo "not ok - test_comm_groups on $n ranks exited with $rc"
    tail -n 15 <<<"$out" | sed 's/^/    /'
  fi
done

# ---------------------------------------------------------------- model parallel, 8 ranks
# GPT-2 and LLaMA tiny models on dp x tp x pp meshes 2x2x2, 1x2x4 (1f1b, gpipe, interleaved), 2x4x1
# (ZeRO-1 over dp), 1x1x8, and with sequence parallel 2x2x2 and (GPT-2, 2 sequences a micro-batch) 1x4x2 train
# the losses and gradient norms of one rank within 1e-5 over 20 steps (sequence parallel: the tp group's exact
# all-gathers and reduce-scatters, activation bytes per rank equal to the planner's, and bf16 too); bf16
# and fp16 on 2x2x2 against one rank's run of the recipe (activations in the format, per-recipe
# tolerances, the same loss scales); an inf planted on one tp rank skips the step on all 8; schedules'
# bubble, in-flight micro-batches and their activation bytes (tests/mpi/test_model_parallel.c).
out=$(timeout -k 5 "$(scaled 300)" "$MIXPAR" run -n 8 -- "$TESTS/test_model_parallel" 2>&1)
rc=$?
grep -E '^(ok|not ok) - |^    ' <<<"$out"
if [ "$rc" -ne 0 ] && ! grep -q '^not ok - ' <<<"$out"; then
  echo "not ok - test_model_parallel on 8 ranks exited with $rc"
  tail -n 15 <<<"$out" | sed 's/^/    /'
fi

# ---------------------------------------------------------------- failure paths
# check_timed NAME EXIT PATTERN MAX_SECONDS COMMAND...: like check_output, and it must end, not hang: within
# MAX_SECONDS on a quiet machine, scaled by MIXPAR_TIME_SCALE.
check_timed() {
  local name=$1 want=$2 pattern=$3 limit; limit=$(scaled "$4"); shift 4
  local t0 out rc took
  t0=$(date +%s.%N)
  out=$(timeout -k 5 "$limit" "$@" 2>&1); rc=$?
  took=$(echo "$(date +%s.%N) - $t0" | bc)
  if [ "$rc" -eq "$want" ] && grep -Eq -- "$pattern" <<<"$out" && [ "$(echo "$took < $limit" | bc)" = 1 ]; then
    echo "ok - $name (${took%.*} s)"
  else
    echo "not ok - $name (exit $rc, expected $want; ${took} s, limit $limit s; output should match /$pattern/)"
    tail -n 15 <<<"$out" | sed 's/^/    /'
  fi
}

check_timed "debug mode: a mismatched allreduce count stops every rank, naming the ranks and counts" 2 \
  'rank 1: allreduce count 999 fp32 sum \(ring\) +<- differs from rank 0' 30 \
  env MIXPAR_COMM_DEBUG=1 "$MIXPAR" run -n 3 -- "$TESTS/test_comm_fail" mismatch
check_timed "hung peer (SIGSTOP): the others exit 2 after MIXPAR_COMM_TIMEOUT=3 s, naming rank, collective and time" 2 \
  'rank [02] of 3 timed out after [0-9]+\.[0-9] s in allreduce \(ring, 1000 x fp32\), waiting for a message from rank [0-2]' 30 \
  env MIXPAR_COMM_TIMEOUT=3 "$MIXPAR" run -n 3 -- "$TESTS/test_comm_fail" hang
check_timed "killed peer (SIGKILL): mpirun ends the job, no hang" 137 'exited on signal 9' 30 \
  env MIXPAR_COMM_TIMEOUT=3 "$MIXPAR" run -n 3 -- "$TESTS/test_comm_fail" kill
# With --enable-recovery mpirun lets the others run on; they must give up by themselves.
check_timed "killed peer, job kept alive (--enable-recovery): the survivors time out with the message" 0 \
  'rank [02] of 3 timed out after [0-9]+\.[0-9] s in allreduce' 30 \
  env MIXPAR_COMM_TIMEOUT=3 "$MIXPAR" run -n 3 --enable-recovery -- "$TESTS/test_comm_fail" kill
check_timed "a receive shorter than the message: exit 2 naming the disagreement" 2 \
  'rank 1 of 2, in recv: .*truncated.*disagree on the count' 30 \
  "$MIXPAR" run -n 2 -- "$TESTS/test_comm_fail" size
check_timed "an algorithm a collective lacks: exit 2 listing the ones it has" 2 \
  'broadcast: mixpar has no ring algorithm for broadcast \(it has: native, tree\)' 30 \
  "$MIXPAR" run -n 2 -- "$TESTS/test_comm_fail" bad-algo
check_timed "debug mode on a group: a mismatch names the members' world ranks" 2 \
  'rank 1 \(world rank 3\): allreduce count 999 fp32 sum \(ring\) +<- differs from rank 0' 30 \
  env MIXPAR_COMM_DEBUG=1 "$MIXPAR" run -n 4 -- "$TESTS/test_comm_fail" group-mismatch
check_timed "hung peer in a group: its partner times out naming the group and both world ranks" 2 \
  'rank 0 of 2 in group tp \(world rank 2\) timed out after [0-9]+\.[0-9] s in allreduce \(ring, 1000 x fp32\), waiting for a message from rank 1 \(world rank 3\)' 30 \
  env MIXPAR_COMM_TIMEOUT=3 "$MIXPAR" run -n 4 -- "$TESTS/test_comm_fail" group-hang
check_timed "a 2 x 2 x 2 mesh on 3 ranks: exit 2, expected/found/hint" 2 \
  'found: +dp=2 x tp=2 x pp=2 = 8, but the world has 3 ranks' 30 \
  "$MIXPAR" run -n 3 -- "$TESTS/test_comm_fail" bad-mesh
# mpirun itself crashing at shutdown (OpenMPI/PMIx can fault in PMIx_server_finalize after a rank's failure) must
# not hide the ranks' own exit codes. A stand-in mpirun runs the real one, then dies of SIGSEGV.
crash_dir=$(mktemp -d) # also the runs' TMPDIR, where mixpar run keeps the ranks' exit records
crashing_mpirun=$crash_dir/mpirun
printf '#!/bin/sh\n%s "$@"\nkill -SEGV $$\n' "$(command -v mpirun)" > "$crashing_mpirun"
chmod +x "$crashing_mpirun"
crash_run() { # [VAR=value ...] mixpar-run-arguments
  local vars=()
  while [[ "$1" == *=* ]]; do vars+=("$1"); shift; done
  env "${vars[@]}" TMPDIR="$crash_dir" MIXPAR_MPIRUN="$crashing_mpirun" timeout -k 5 "$(scaled 60)" "$MIXPAR" run "$@"
}
check_output "mpirun crashing after every rank exited 2: mixpar run reports 2, and says why" 2 \
  "mpirun crashed \\(signal 11\\) after the ranks had exited; reporting the ranks' exit code, 2" \
  crash_run -n 3 -- "$TESTS/test_comm_fail" bad-mesh
check_output "mpirun crashing after every rank exited 0: mixpar run reports 0" 0 "reporting the ranks' exit code, 0" \
  crash_run -n 2 -- "$TESTS/test_comm_fail" exit 0
out=$(crash_run -n 2 -- "$TESTS/test_comm_fail" kill 2>&1); rc=$?
check "a rank killed by a signal leaves no code: mpirun's crash is reported as it is (139, got $rc)" \
  bash -c '[ "$1" -eq 139 ] && ! grep -q "reporting the ranks" <<<"$2"' _ "$rc" "$out"
check_output "the flake this guards against: a peer times out (exit 2) while mpirun ends the stopped rank, then crashes" 2 \
  "reporting the ranks' exit code, 2" \
  crash_run MIXPAR_COMM_TIMEOUT=3 -n 2 -- "$TESTS/test_comm_fail" hang
check "without a crash, mpirun's code stands: every rank returns 3, mixpar run exits 3" bash -c \
  'timeout -k 5 $1 "$2" run -n 2 -- "$3" exit 3 >/dev/null 2>&1; test $? -eq 3' _ "$(scaled 60)" "$MIXPAR" "$TESTS/test_comm_fail"
# ... nor mpirun hanging in its shutdown after every rank has ended: a stand-in that runs the real one, then sleeps.
hanging_mpirun=$crash_dir/mpirun-hangs
printf '#!/bin/sh\n%s "$@"\nexec sleep 600\n' "$(command -v mpirun)" > "$hanging_mpirun"
chmod +x "$hanging_mpirun"
check_output "mpirun hanging after every rank exited 2: mixpar run stops it and reports 2" 2 \
  "mpirun was still running 10 s after every rank had ended; stopped it; reporting the ranks' exit code, 2" \
  env TMPDIR="$crash_dir" MIXPAR_MPIRUN="$hanging_mpirun" timeout -k 5 "$(scaled 60)" "$MIXPAR" run -n 3 -- "$TESTS/test_comm_fail" bad-mesh
check_output "mpirun hanging after every rank exited 0: mixpar run reports 0" 0 "reporting the ranks' exit code, 0" \
  env TMPDIR="$crash_dir" MIXPAR_MPIRUN="$hanging_mpirun" timeout -k 5 "$(scaled 60)" "$MIXPAR" run -n 2 -- "$TESTS/test_comm_fail" exit 0
check "the ranks' exit records are removed after each run" bash -c '! ls -d "$1"/mixpar-ranks-* 2>/dev/null | grep -q .' _ "$crash_dir"
rm -rf "$crash_dir"
# mpirun may return a moment before the ranks it ended are gone; give them 10 s (scaled).
check "no rank left running after the failure runs" bash -c \
  'for i in $(seq $1); do pgrep -x test_comm_fail >/dev/null || exit 0; sleep 0.5; done; ps -o pid,stat,etime,args -C test_comm_fail; exit 1' \
  _ "$(scaled 20)"

# ---------------------------------------------------------------- mixpar run
cores=$(nproc)
over=$((cores + 1))
check_output "run: -n N gives mpirun -n N" 0 "mpirun -n 3 " "$MIXPAR" run -n 3 --dry-run -- "$MIXPAR" comm-bench
check_output "run: --oversubscribe when ranks ($over) exceed the cores ($cores)" 0 "--oversubscribe" \
  "$MIXPAR" run -n "$over" --dry-run -- "$MIXPAR"
if [ "$cores" -gt 1 ]; then
  check "run: no --oversubscribe when the ranks fit the cores" bash -c \
    "! '$MIXPAR' run -n $cores --dry-run -- '$MIXPAR' | grep -q -- --oversubscribe"
fi
if [ "$(id -u)" = 0 ]; then
  check_output "run: --allow-run-as-root as root" 0 "--allow-run-as-root" "$MIXPAR" run -n 1 --dry-run -- "$MIXPAR"
fi
check_output "run: a one-machine job starts with OpenMPI's own messaging, PMIx's hash store and no PCI discovery" 0 \
  "^OMPI_MCA_pml=ob1 PMIX_MCA_gds=hash HWLOC_COMPONENTS=-pci,-linuxio .*mpirun -n 2 " \
  env -u OMPI_MCA_pml -u PMIX_MCA_gds -u HWLOC_COMPONENTS "$MIXPAR" run -n 2 --dry-run -- "$MIXPAR"
check "run: a setting the environment already has stands (OMPI_MCA_pml=ucx is not overridden)" bash -c \
  "out=\$(env -u PMIX_MCA_gds OMPI_MCA_pml=ucx '$MIXPAR' run -n 2 --dry-run -- '$MIXPAR') && ! grep -q OMPI_MCA_pml <<<\"\$out\" && grep -q PMIX_MCA_gds=hash <<<\"\$out\""
check_output "run: the ranks of a one-machine job run under those settings" 0 "^pml=ob1 gds=hash$" \
  env -u OMPI_MCA_pml -u PMIX_MCA_gds "$MIXPAR" run -n 2 -- sh -c 'echo "pml=$OMPI_MCA_pml gds=$PMIX_MCA_gds"'
hosts=$(mktemp)
echo "localhost slots=2" > "$hosts"
check "run: a job with a hostfile gets none of the one-machine settings" bash -c \
  "out=\$('$MIXPAR' run -n 2 --hostfile '$hosts' --dry-run -- '$MIXPAR') && grep -q '^[^ ]*mpirun ' <<<\"\$out\""
rm -f "$hosts"
check_output "run: MIXPAR_* variables are exported with -x" 0 "-x MIXPAR_ALLREDUCE" \
  env MIXPAR_ALLREDUCE=ring "$MIXPAR" run -n 2 --dry-run -- "$MIXPAR"
check_output "run: the program's exit code comes back" 3 "" "$MIXPAR" run -n 2 -- sh -c 'exit 3'
check_output "run: a rank's environment has MIXPAR_ variables and mpirun's" 0 "OMPI_COMM_WORLD_SIZE=2.*MIXPAR_X=7|MIXPAR_X=7.*OMPI_COMM_WORLD_SIZE=2" \
  env MIXPAR_X=7 "$MIXPAR" run -n 2 -- sh -c 'echo "OMPI_COMM_WORLD_SIZE=$OMPI_COMM_WORLD_SIZE MIXPAR_X=$MIXPAR_X"'
check_output "run: no -n" 2 "say how many ranks" "$MIXPAR" run -- true
check_output "run: -n 0" 2 "whole number from 1" "$MIXPAR" run -n 0 -- true
check_output "run: -n abc" 2 "whole number from 1" "$MIXPAR" run -n abc -- true
check_output "run: missing --" 2 "missing '--'" "$MIXPAR" run -n 2 true
check_output "run: nothing after --" 2 "no program after" "$MIXPAR" run -n 2 --
check_output "run: program not found" 2 "program 'no-such-program' not found" "$MIXPAR" run -n 2 -- no-such-program
# Whoever runs the test (root reads a chmod 000 file; /nonexistent exists on some machines): a path inside a
# fresh folder is surely missing, and a folder is never a hostfile.
hostfile_dir=$(mktemp -d)
check_output "run: missing hostfile" 2 "cannot read the hostfile .*No such file" \
  "$MIXPAR" run -n 2 --hostfile "$hostfile_dir/missing" -- true
check_output "run: a folder as hostfile" 2 "cannot read the hostfile .*not a regular file" \
  "$MIXPAR" run -n 2 --hostfile "$hostfile_dir" -- true
rmdir "$hostfile_dir"
check_output "run: --help names srun --mpi=pmix" 0 "srun --mpi=pmix" "$MIXPAR" run --help
check_output "torchrun-style variables without mpirun: exit 2 naming them" 2 \
  "torchrun-style launch variables and no mpirun: RANK=1 WORLD_SIZE=4 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500" \
  env RANK=1 WORLD_SIZE=4 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 "$MIXPAR" comm-bench --max 8
check_output "run: started by torchrun (WORLD_SIZE=2): exit 2, no nested mpirun jobs" 2 "torchrun-style launch variables" \
  env RANK=0 WORLD_SIZE=2 "$MIXPAR" run -n 2 -- true
check_output "torchrun-style WORLD_SIZE=1 runs as one rank" 0 "1 rank \(self backend\)" \
  env RANK=0 WORLD_SIZE=1 "$MIXPAR" comm-bench --max 8
check_output "MIXPAR_COMM=mpi without mpirun: a singleton MPI job" 0 "1 rank \(mpi backend\)" \
  env MIXPAR_COMM=mpi "$MIXPAR" comm-bench --max 8 --algo ring
check_output "MIXPAR_COMM=bogus: exit 2" 2 "MIXPAR_COMM=self, mpi or nccl" env MIXPAR_COMM=bogus "$MIXPAR" comm-bench
check_output "MIXPAR_ALLREDUCE=bogus: exit 2" 2 "MIXPAR_ALLREDUCE=ring, tree, rhd or native" \
  env MIXPAR_ALLREDUCE=bogus "$MIXPAR" comm-bench
check_output "MIXPAR_COMM_TIMEOUT=-1: exit 2" 2 "a positive number of seconds" env MIXPAR_COMM_TIMEOUT=-1 "$MIXPAR" comm-bench

# ---------------------------------------------------------------- mixpar comm-bench
check_output "comm-bench: every op and algorithm on 3 ranks, no wrong element, fits printed" 0 \
  "ring allreduce (beats tree at every size from|is not faster than tree).*fit" \
  "$MIXPAR" run -n 3 -- "$MIXPAR" comm-bench --op all --algo all --min 4 --max 64K --iters 3 --warmup 1
check "comm-bench: hierarchical allreduce on 5 ranks as nodes of 2 (a smaller last node), no wrong element" bash -c \
  "out=\$('$MIXPAR' run -n 5 -- '$MIXPAR' comm-bench --algo ring,hierarchical --ranks-per-node 2 --min 4 --max 64K --iters 3 --warmup 1) &&
   grep -q '^# hierarchical: 2 ranks per node, 3 nodes' <<<\"\$out\" && grep -q '^  allreduce *hierarchical ' <<<\"\$out\" &&
   grep -q '^# 0 wrong elements in all' <<<\"\$out\""
check_output "comm-bench: bf16 on 4 ranks, no wrong element" 0 "# 0 wrong elements in all" \
  "$MIXPAR" run -n 4 -- "$MIXPAR" comm-bench --op all --dtype bf16 --min 8 --max 16K --iters 2 --warmup 1
check_output "comm-bench: busbw = algbw x 2(p-1)/p for allreduce on 4 ranks" 0 "factors for p = 4: allreduce 2\(p-1\)/p = 1.5" \
  "$MIXPAR" run -n 4 -- "$MIXPAR" comm-bench --max 64 --iters 2
# Large sizes alone leave the latency in the noise; a free fit can then give alpha < 0, which is held at 0.
check "comm-bench: fitted latencies are never negative (large sizes only)" bash -c \
  "'$MIXPAR' run -n 2 -- '$MIXPAR' comm-bench --op allreduce --algo ring,native --min 1M --max 16M --iters 3 --warmup 1 |
   awk '/alpha-beta fit/ {fit=1; next} fit && NF == 5 && \$1 == \"allreduce\" {n++; if (\$3 ~ /^-/) bad=1} END {exit !(n == 2 && !bad)}'"
check_output "comm-bench: unknown op" 2 "--op takes allreduce" "$MIXPAR" comm-bench --op alltoall
check_output "comm-bench: unknown algo" 2 "--algo takes ring" "$MIXPAR" comm-bench --algo butterfly
check_output "comm-bench: bad size" 2 "--max takes a size" "$MIXPAR" comm-bench --max 12Q
check_output "comm-bench: min above max" 2 "larger than --max" "$MIXPAR" comm-bench --min 1M --max 1K
check_output "comm-bench: bad dtype" 2 "--dtype takes" "$MIXPAR" comm-bench --dtype fp64
check_output "comm-bench: --iters 0" 2 "--iters takes a whole number" "$MIXPAR" comm-bench --iters 0
