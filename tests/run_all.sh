#!/usr/bin/env bash
# run_all.sh: `make test`: every suite, independent ones side by side, then the total wall time and one
# closing line "N passed, N failed".
# Instructor edition: the core's unit tests, every lab graded (must be full marks), the grader's self-test,
# the command-line checks, the handout/grade pipeline, and the CUDA compile check when nvcc exists.
# Student edition: every lab's visible tests (failing until the labs are done).
# MIXPAR_TEST_JOBS suites run at once (default 3: on 2 cores a third fills the time the others spend starting
# ranks and waiting for them; 604-623 s against 631-652 s with 2, in runs of one tree one after another); each
# suite's time limit, which only guards against a hang, is scaled by MIXPAR_TIME_SCALE (default 3), so a busy
# machine is slower, never failed.
cd "$(dirname "$0")/.." || exit 2
source tests/lib.sh
edition=${1:-instructor}
jobs=${MIXPAR_TEST_JOBS:-3}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "MIXPAR_TEST_JOBS must be a whole number >= 1, not '$jobs'" >&2; exit 2; }
# Waiting threads sleep instead of spinning: OpenMP's (OMP_WAIT_POLICY) and OpenMPI's ranks (yield when idle). The
# suites share 2 cores, so a spinning wait takes CPU from another suite's work; results are the same either way.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
passed=0
failed=0
logs=$(mktemp -d)
# Stopped early (Ctrl-C, a kill): each running suite's timeout, which leads its own process group, passes the
# signal on to its suite.
trap 'for p in $(jobs -p); do pkill -TERM -P "$p"; kill "$p"; done 2>/dev/null; rm -rf "$logs"' EXIT
started=$SECONDS

# ---------------------------------------------------------------- the suites
# suite NAME LIMIT COMMAND...: queue a suite; LIMIT is its hang guard in seconds on a quiet machine.
# Queue the longest first: with a pool of workers, the long ones then overlap the many short ones.
names=() limits=() commands=()
suite() {
  names+=("$1"); limits+=("$2"); shift 2
  commands+=("$(printf '%q ' "$@")")
}

labs=$(ls -d labs/lab[0-9][0-9]-* 2>/dev/null | sed -E 's|labs/lab([0-9]{2})-.*|\1|')
if [ "$edition" = instructor ]; then
  suite "lab pipeline (handout, student edition fails, reference splice passes)" 900 tests/pipeline.sh
  suite "unit tests (Criterion)" 600 build/tests/unit_tests -j2 --always-succeed
  for t in tests/cli/*.sh; do [ -e "$t" ] && suite "cli: $(basename "$t" .sh)" 300 "$t"; done
  suite "grader self-test" 300 tests/grader/selftest.sh
  # Planted bugs (tests/mutants/): the labs whose tests, regions or mutants changed since the last passing run are
  # run again (each mutant stopped at its first failing test); the others are reported from that run's record.
  suite "planted bugs (mutants) of changed labs" 900 tests/mutants/run.sh --quick --changed
  # The grader's own per-test limits scale with MIXPAR_TIME_SCALE too.
  for lab in $labs; do
    suite "lab $lab graded (instructor edition: full marks)" 300 env MIXPAR_TIME_SCALE="$TIME_SCALE" build/mixpar-grade grade "$lab"
  done
  if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
    suite "cuda compile check" 600 bash -c 'tools/cuda_check.sh && echo "ok - CUDA sources compile and link with NCCL"'
  fi
else
  for lab in $labs; do suite "lab$lab visible tests" 300 env MIXPAR_TIME_SCALE="$TIME_SCALE" build/mixpar-grade grade "$lab"; done
fi

# ---------------------------------------------------------------- shared inputs, made once
# Suites that train read the datasets the configs name (data/addition, data/poetry); two suites building
# one on first use at the same time could see each other's half-written folder, so they are built here.
if [ "$edition" = instructor ]; then
  for dataset in addition poetry; do
    [ -e "data/$dataset/train.tokens" ] && continue
    build/mixpar data build "$dataset" --out "data/$dataset" >/dev/null ||
      { echo "not ok - building data/$dataset for the suites"; failed=$((failed + 1)); }
  done
fi

# ---------------------------------------------------------------- counting
# Count a suite's result lines: "ok - x"/"not ok - x" (shell suites), "== Test x == OK|FAIL" (grader),
# and Criterion's "Synthesis: Tested: N | Passing: P | Failing: F | Crashing: C".
count() { # count NAME LOG RC SECONDS LIMIT CPU_SECONDS
  local name=$1 log=$2 rc=$3 took=$4 limit=$5 cpu=$6 p f synth
  cat "$log"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "not ok - $name timed out after $limit s (MIXPAR_TIME_SCALE=$TIME_SCALE; raise it on a slow machine)" | tee -a "$log"
  fi
  p=$(grep -cE '^(ok - |== Test .* == OK)' "$log")
  f=$(grep -cE '^(not ok - |== Test .* == FAIL)' "$log")
  synth=$(grep -E 'Synthesis: Tested:' "$log" | tail -n 1 | sed 's/\x1b\[[0-9;]*m//g')
  if [ -n "$synth" ]; then
    p=$((p + $(sed -E 's/.*Passing: ([0-9]+).*/\1/' <<<"$synth")))
    f=$((f + $(sed -E 's/.*Failing: ([0-9]+).*/\1/' <<<"$synth") + $(sed -E 's/.*Crashing: ([0-9]+).*/\1/' <<<"$synth")))
  fi
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] &&
     ! grep -qE '^(not ok - |== Test .* == FAIL)|Failing: [1-9]|Crashing: [1-9]' "$log"; then
    # A suite that failed without saying which test: count it as one failure rather than lose it.
    if ! { [ "$edition" = student ] && [[ "$name" == lab* ]]; }; then echo "not ok - $name exited with $rc"; f=$((f + 1)); fi
  fi
  passed=$((passed + p))
  failed=$((failed + f))
  echo "-- $name: $p passed, $f failed ($took s, $cpu s of CPU)"
}

# ---------------------------------------------------------------- the pool
# Each suite runs in the background into its own log; its output is shown whole when it ends, so suites
# running side by side never interleave. Suites share nothing they write: each works in its own temporary
# or grading folder.
echo "make test: ${#names[@]} suites, $jobs at a time (MIXPAR_TEST_JOBS), hang guards x$TIME_SCALE (MIXPAR_TIME_SCALE)"
declare -A pid_of_suite=()
running=0
total_cpu=0
finish_one() {
  local pid i
  wait -n -p pid 2>/dev/null || true
  [ -n "$pid" ] || return 0
  for i in "${!pid_of_suite[@]}"; do
    [ "${pid_of_suite[$i]}" = "$pid" ] || continue
    unset "pid_of_suite[$i]"
    read -r rc took cpu <"$logs/$i.rc"
    echo "== suite: ${names[$i]}"
    count "${names[$i]}" "$logs/$i.log" "$rc" "$took" "$(scaled "${limits[$i]}")" "$cpu"
    total_cpu=$((total_cpu + cpu))
  done
  running=$((running - 1))
}
for i in "${!names[@]}"; do
  while [ "$running" -ge "$jobs" ]; do finish_one; done
  (
    start=$SECONDS
    eval "timeout -k 5 $(scaled "${limits[$i]}") ${commands[$i]}" >"$logs/$i.log" 2>&1 </dev/null
    rc=$?
    # CPU seconds the suite's processes used (user + system, from `times`' children line): the figure to watch
    # for CI's time budget, since on 2 cores the wall time of the whole run follows the CPU time of all suites.
    times >"$logs/$i.times" # here, not in a pipe: a forked `times` would count no children
    cpu=$(tail -n 1 "$logs/$i.times" | awk '{ for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] } } END { printf "%d", s + 0.5 }')
    echo "$rc $((SECONDS - start)) $cpu" >"$logs/$i.rc"
  ) &
  pid_of_suite[$i]=$!
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do finish_one; done

echo
echo "make test: total wall time $((SECONDS - started)) s, CPU time of the suites $total_cpu s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
