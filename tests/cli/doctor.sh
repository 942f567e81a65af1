#!/usr/bin/env bash
# doctor.sh: `mixpar doctor` on real small runs: a healthy run (exit 0), a diverging one, a leaking program, replicas
# that drift apart on two MPI ranks, a stuck loss scale, the OOM estimate before a launch, and exit 2 on bad input
# (a missing directory, a malformed event line named by file:line, unknown options).
source "$(dirname "$0")/../lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT" || exit 1
export OMP_NUM_THREADS=1
base=(--config configs/synthetic-addition.json --quiet --set train.steps=40 --set scheduler.params.warmup_steps=5
      --set train.eval_interval=0 --set train.sample_interval=0 --set train.checkpoint_interval=0
      --set train.hist_interval=0)
doctor() { "$MIXPAR" doctor "$@"; }

"$MIXPAR" train "${base[@]}" --set train.run_dir="$work/healthy" >/dev/null 2>&1
check_output "doctor: a healthy run exits 0" 0 "^healthy: .*1 rank\(s\), 40 steps" doctor "$work/healthy"

"$MIXPAR" train "${base[@]}" --set optimizer.params.lr=0.3 --set scheduler.params.warmup_steps=0 \
  --set gradient_clipping=0 --set train.run_dir="$work/spike" >/dev/null 2>&1
check_output "doctor: lr 0.3 without warmup is a loss spike with its step" 1 \
  "EVIDENCE rank 0 step [0-9]+: loss [0-9.]+ > 1.5 x [0-9.]+" doctor "$work/spike"

"$MIXPAR" train "${base[@]}" --set fp16.enabled=true --set fp16.loss_scale=1e9 --set train.max_consecutive_skips=0 \
  --set train.run_dir="$work/skipped" >/dev/null 2>&1
check_output "doctor: a static scale of 1e9 skips every step" 1 "the last 40 steps were all skipped" doctor "$work/skipped"

labs/lab24-common-problems/zoo/build_programs.sh
build/labs/lab24_zoo_bugs leak "$work/leak" >/dev/null
check_output "doctor: 64 KiB kept a step is a leak of 65536 bytes a step" 1 "tag act: \+65536 bytes a step" \
  doctor "$work/leak"
build/labs/lab24_zoo_bugs leak "$work/noleak" --fixed >/dev/null
check_output "doctor: freed each step is healthy" 0 "^healthy" doctor "$work/noleak"

timeout "$(scaled 60)" "$MIXPAR" run -n 2 -- build/labs/lab24_zoo_bugs desync "$work/desync" >/dev/null 2>&1
check_output "doctor: found_inf not reduced: replicas differ from step 5, rank 1" 1 \
  "EVIDENCE step 5: rank 1's parameter hash" doctor "$work/desync"
MIXPAR_PARAM_HASH=1 timeout "$(scaled 120)" "$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" \
  --set train.steps=10 --set train.run_dir="$work/ddp" >/dev/null 2>&1
check_output "doctor: two DDP ranks with parameter hashes are healthy" 0 "^healthy: .*2 rank\(s\), 10 steps" \
  doctor "$work/ddp"

MIXPAR_DEBUG_SAME_SHARD=1 MIXPAR_PARAM_HASH=1 timeout "$(scaled 120)" "$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" \
  --set train.steps=10 --set train.run_dir="$work/same" >/dev/null 2>&1
check_output "doctor: two ranks reading the same shard are named" 1 "every rank reads the same data" doctor "$work/same"

check_output "doctor --config: 128 sequences do not fit 32MB, activations named" 1 \
  "the largest tag is act" doctor --config configs/synthetic-addition.json \
  --set train_micro_batch_size_per_gpu=128 --max-memory 32MB
check_output "doctor --config: 16 sequences fit" 0 "^fits" doctor --config configs/synthetic-addition.json \
  --set train_micro_batch_size_per_gpu=16 --max-memory 32MB
check_output "doctor --zoo prints a config bug's overrides" 0 "fp16.loss_scale=1e9" doctor --zoo scale-stuck-at-minimum

check_output "doctor: a missing directory exits 2" 2 "expected: a run directory" doctor "$work/nothing-here"
mkdir -p "$work/bad" && cp "$work/healthy/events.rank0.jsonl" "$work/bad/"
printf '{"v":1,"kind":"step","rank":0,"t":1}\nnot json\n{"v":1,"kind":"step"}\n' >"$work/bad/events.rank1.jsonl"
check_output "doctor: a malformed line is named by file:line" 2 "events.rank1.jsonl:2: a malformed line" doctor "$work/bad"
check_output "doctor: an unknown option exits 2" 2 "unknown option" doctor --frobnicate
check_output "doctor: an unknown zoo bug exits 2" 2 "unknown zoo bug" doctor --zoo no-such-bug
check_output "doctor is listed in mixpar help" 0 "doctor" "$MIXPAR" help
