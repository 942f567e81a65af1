#!/usr/bin/env bash
# sanitize.sh: `make sanitize`: the core under AddressSanitizer + UndefinedBehaviorSanitizer: the unit tests, a short training, a 2-rank ZeRO-2 run and a 3-rank ZeRO-3 run; any sanitizer report fails it.
#
# Built in build/sanitize (make BUILD=build/sanitize SANITIZE=1), so the normal build in build/ is untouched.
# About 280 s of CPU time from a clean build/sanitize (build 150, unit tests 105, runs 25): under 3 minutes on
# 2 free cores; later runs rebuild only what changed.
#
# Why each option:
#   UBSAN_OPTIONS halt_on_error=1: the first undefined behaviour stops the process (the build also has
#     -fno-sanitize-recover=all), so a report cannot scroll past as a warning; print_stacktrace=1 says where.
#   ASAN_OPTIONS detect_leaks:
#     unit tests: 0. Many tests check that bad input stops the program (exit 2 or 3); such an exit leaves its
#       memory to the operating system by design, and LeakSanitizer would call that a leak.
#     single-rank training: 1. It runs without MPI (self backend) and must free what it allocates.
#     2-rank run: 0. OpenMPI leaks at MPI_Init in its MCA components, which MPI_Finalize unloads, so their
#       stacks show as "<unknown module>" and no suppression file can name them.
#   Criterion runs each test in a child process; a sanitizer report there fails that test, and the
#   whole log is also searched for reports below, so nothing is counted as passing after one.
cd "$(dirname "$0")/.." || exit 2
B=build/sanitize
start=$SECONDS
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
asan_common=abort_on_error=0:exitcode=86:strict_string_checks=1:detect_stack_use_after_return=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

# step NAME DETECT_LEAKS TIMEOUT COMMAND...: runs it, then fails on a non-zero exit or any sanitizer report.
# TIMEOUT only guards against a hang: it is scaled by MIXPAR_TIME_SCALE (default 3), as in make test.
step() {
  local name=$1 leaks=$2 limit; limit=$(awk -v t="$3" -v s="${MIXPAR_TIME_SCALE:-3}" 'BEGIN { printf "%d", t * s + 0.5 }'); shift 3
  local t0=$SECONDS log="$work/log" rc
  ASAN_OPTIONS="$asan_common:detect_leaks=$leaks" timeout -k 5 "$limit" "$@" >"$log" 2>&1
  rc=$?
  if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: (Address|UndefinedBehavior|Leak)Sanitizer' "$log"; then
    echo "not ok - sanitize: $name: sanitizer report (exit $rc)"
    grep -E -A40 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$log" | head -n 80 | sed 's/^/    /'
    failed=$((failed + 1))
  elif [ "$rc" -ne 0 ]; then
    echo "not ok - sanitize: $name exited with $rc$([ "$rc" -eq 124 ] && echo " (timed out after $limit s)")"
    tail -n 30 "$log" | sed 's/^/    /'
    failed=$((failed + 1))
  else
    echo "ok - sanitize: $name ($((SECONDS - t0)) s)"
  fi
}

echo "== make sanitize: building in $B with -fsanitize=address,undefined,float-cast-overflow"
if ! make -s -j"${JOBS:-2}" BUILD="$B" SANITIZE=1 "$B/mixpar" "$B/mixpar-viz" "$B/tests/unit_tests" >"$work/build.log" 2>&1; then
  echo "not ok - sanitize: build"
  tail -n 30 "$work/build.log" | sed 's/^/    /'
  exit 1
fi
echo "ok - sanitize: build ($((SECONDS - start)) s)"

step "unit tests (Criterion)" 0 600 "$B/tests/unit_tests" -j2

train=("$B/mixpar" train --config configs/synthetic-addition.json --quiet --set scheduler.params.warmup_steps=2
       --set train.eval_interval=5 --set train.hist_interval=5 --set train.sample_interval=10)
step "training: 10 steps fp16, eval, histograms, sample, checkpoint, leaks checked" 1 300 \
  "${train[@]}" --set train.steps=10 --set scheduler.params.total_steps=15 --set precision.recipe=fp16 \
  --set train.checkpoint_interval=5 --set train.run_dir="$work/one"
step "training: resume from the checkpoint to step 15, leaks checked" 1 300 \
  "${train[@]}" --set train.steps=15 --set scheduler.params.total_steps=15 --set precision.recipe=fp16 \
  --set train.checkpoint_interval=5 --set train.run_dir="$work/one" --resume auto
step "viz --snapshot of that run, every panel" 1 120 bash -c \
  "for p in loss underflow comm memory; do '$B/mixpar' viz --snapshot '$work/one' --panel \$p >/dev/null || exit 1; done"
step "2 ranks: ZeRO stage 2, bf16, 10 steps" 0 300 \
  "$B/mixpar" run -n 2 -- "${train[@]}" --set train.steps=10 --set scheduler.params.total_steps=10 \
  --set precision.recipe=bf16 --set zero_optimization.stage=2 --set train.checkpoint_interval=0 --set train.run_dir="$work/two"
if [ ! -s "$work/two/events.rank1.jsonl" ]; then
  echo "not ok - sanitize: 2 ranks: rank 1 wrote no events (did mpirun start two ranks?)"
  failed=$((failed + 1))
fi

# ZeRO-3 under bf16 on 3 ranks: the 16-bit gathers (blocks split unevenly, through the staging buffer), gradient
# spans committed without zeroing, and the sharded checkpoint.
step "3 ranks: ZeRO stage 3, bf16 LLaMA, 4 steps, sharded checkpoint" 0 300 \
  "$B/mixpar" run -n 3 -- "$B/mixpar" train --config configs/tiny-llama-poetry.json --quiet --set train.steps=4 \
  --set scheduler.params.total_steps=10 --set scheduler.params.warmup_steps=2 --set train.eval_interval=0 \
  --set train.sample_interval=0 --set train_micro_batch_size_per_gpu=2 --set precision.recipe=bf16 \
  --set zero_optimization.stage=3 --set train.checkpoint_interval=4 --set train.run_dir="$work/three"
if [ ! -s "$work/three/checkpoint.sharded/index.json" ]; then
  echo "not ok - sanitize: 3 ranks: no sharded checkpoint"
  failed=$((failed + 1))
fi

echo "make sanitize: $failed failed ($((SECONDS - start)) s)"
[ "$failed" -eq 0 ]
