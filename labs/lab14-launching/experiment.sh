#!/usr/bin/env bash
# experiment.sh: lab 14's experiment (`make lab14`): a short data-parallel training run on 4 ranks through
# `mixpar run`, then every entry of the gallery of broken launches (gallery/NN-*.sh): its command, its exit
# code, its time and the first lines of the message it gets. Every entry ends in seconds; under a minute in all.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
lab=labs/lab14-launching
M=$PWD/build/mixpar
[ -x "$M" ] || { echo "lab14: $M is missing; run 'make' first" >&2; exit 2; }
out=runs/lab14
mkdir -p "$out"
export OMP_NUM_THREADS=1

section() { printf '\n==== %s\n\n' "$*"; }
# The message without mpirun's boxed explanations (between lines of dashes) and comm-bench's table header.
message() { awk '/^-----/ { box = !box; next } !box && !/^#/ && NF' "$1" | head -n "${2:-4}"; }

section "1. mixpar run -n 4 -- mixpar train (tiny addition config, 40 steps, micro-batch 8 per rank)"
cmd=("$M" run -n 4 -- "$M" train --config configs/synthetic-addition.json --set train.steps=40
     --set scheduler.params.warmup_steps=5 --set scheduler.params.total_steps=40 --set train.eval_interval=0
     --set train.sample_interval=0 --set train.checkpoint_interval=0 --set train.log_interval=10
     --set train_micro_batch_size_per_gpu=8 --set train.run_dir="$out/run4")
echo "\$ mixpar run -n 4 -- mixpar train --config configs/synthetic-addition.json --set train.steps=40 ..."
t0=$(date +%s.%N)
"${cmd[@]}" > "$out/run4.log" 2>&1
rc=$?
t1=$(date +%s.%N)
grep -E "^(model|data|step|run)" "$out/run4.log" | head -n 12
if grep -q "not done" "$out/run4.log"; then grep -m1 "not done" "$out/run4.log"; fi
printf 'exit %d in %.1f s; event files: %s\n' "$rc" "$(echo "$t1 - $t0" | bc)" \
  "$(ls "$out/run4" 2>/dev/null | grep -c '^events.rank')"

section "2. The gallery of broken launches (each one's command is in its file)"
for entry in "$lab"/gallery/[0-9][0-9]-*.sh; do
  name=$(basename "$entry" .sh)
  printf -- '--- %s\n    %s\n' "$name" "$(sed -n '2s/^# [^:]*: //p' "$entry" | cut -c1-110)"
  t0=$(date +%s.%N)
  timeout 60 "$entry" > "$out/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  printf '    exit %d after %.1f s\n' "$rc" "$(echo "$t1 - $t0" | bc)"
  message "$out/$name.log" 4 | cut -c1-160 | sed 's/^/    | /'
done
