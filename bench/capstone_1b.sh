#!/usr/bin/env bash
# capstone_1b.sh: the course's 1B step on this machine: a LLaMA-style 1.1B model (TinyLlama's shape) trained on
# 4 ranks with ZeRO-3 (FSDP FULL_SHARD) and bf16 autocast, where plain DDP cannot start. First shows the
# launcher refusing plain DDP with the plan, then runs STEPS real steps and reports, per rank, the allocator's
# peak bytes by tag against the planner's, the step time, tokens/s and the communication per step against
# 3 Psi. Needs about 20 GB of free memory and a few minutes (the first minute draws 1.1B weights per rank).
# Usage: bench/capstone_1b.sh [STEPS] [RUN_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
steps=${1:-3}
run=${2:-runs/capstone-1b}
cfg=configs/llama-1b-zero3.json
mkdir -p "$run"
echo "== plain DDP (zero_optimization.stage 0) on 4 ranks: the launcher checks the plan first"
build/mixpar run -n 4 -- build/mixpar train --config "$cfg" --set zero_optimization.stage=0 \
  --set train.run_dir="$run-ddp"
echo "(exit $?: refused before any rank started)"
echo
echo "== ZeRO-3 + bf16 on 4 ranks, $steps steps"
start=$(date +%s)
OMP_WAIT_POLICY=passive build/mixpar run -n 4 -- build/mixpar train --config "$cfg" --set train.steps="$steps" \
  --set train.run_dir="$run" || exit 1
echo "wall time with start-up: $(( $(date +%s) - start )) s"
echo
gbytes() { awk -v b="$1" 'BEGIN{printf "%.2f", b/1e9}'; }
field() { grep -o "\"$2\":[0-9.e+-]*" <<<"$1" | head -n 1 | cut -d: -f2; }
header=$(head -n 1 "$run/events.rank0.jsonl")
plan=$(grep -o '"plan":{[^}]*}' <<<"$header")
psi=$(field "$header" params)
echo "parameters: $psi; plan per rank: param $(gbytes "$(field "$plan" param)") GB, grad $(gbytes "$(field "$plan" grad)") GB, optim $(gbytes "$(field "$plan" optim)") GB, act $(gbytes "$(field "$plan" act)") GB"
printf "%-5s %9s %9s %9s %9s %9s %11s\n" rank param grad optim comm other "peak total"
for r in 0 1 2 3; do
  peak=$(grep '"kind":"mem"' "$run/events.rank$r.jsonl" | tail -n 1 | grep -o '"peak":{[^}]*}')
  total=$(grep '"kind":"mem"' "$run/events.rank$r.jsonl" | tail -n 1 | grep -o '"peak_total":[0-9]*' | cut -d: -f2)
  printf "%-5s %9s %9s %9s %9s %9s %11s\n" "$r" "$(gbytes "$(field "$peak" param)")" "$(gbytes "$(field "$peak" grad)")" \
    "$(gbytes "$(field "$peak" optim)")" "$(gbytes "$(field "$peak" comm)")" "$(gbytes "$(field "$peak" other)")" \
    "$(gbytes "$total") GB"
done
grep '"kind":"step"' "$run/events.rank0.jsonl" | while read -r line; do
  s=$(field "$line" step) tps=$(field "$line" tokens_per_s) cb=$(field "$line" comm_bytes)
  awk -v s="$s" -v tps="$tps" -v cb="$cb" -v psi="$psi" 'BEGIN{
    printf "step %d: %.1f s per rank-step, %.1f tokens/s per rank (%.1f for 4 ranks), comm %.2f GB = %.3f x 3 Psi (N-1)/N\n",
      s, 64 / tps, tps, 4 * tps, cb / 1e9, cb / (3 * psi * 4 * 3 / 4) }'
done
