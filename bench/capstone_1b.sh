#!/usr/bin/env bash
# capstone_1b.sh: the course's 1B step on this machine: a LLaMA-style 1.1B model (TinyLlama's shape) trained on
# 4 ranks with ZeRO-3 (FSDP FULL_SHARD) and bf16 autocast, where plain DDP cannot start. First shows the
# launcher refusing plain DDP with the plan, then runs STEPS real steps and reports, per rank, the allocator's
# peak bytes (what they are made of, by tag) against the planner's, the step time, tokens/s and the communication per step against
# 3 Psi; then where each rank's step went (compute, waiting for gathers, waiting for reduce-scatters, optimizer,
# other; the profiler's spans, train.profile) and the achieved GFLOP/s over all ranks against the machine's sgemm
# peak (all cores), measured just before and just after the ranks run. Needs about 20 GB of free memory and a few
# minutes (the first minute draws 1.1B weights per rank).
# Usage: bench/capstone_1b.sh [STEPS] [RUN_DIR] [--set key=value ...]
#   extra --set overrides go to both runs, e.g. a scaled-down capstone on the same code path (< 1 GB a rank):
#   bench/capstone_1b.sh 3 runs/capstone-small --set model.layers=4 --set model.channels=512 --set model.heads=8 \
#     --set model.kv_heads=4 --set model.ffn=1344
set -uo pipefail
cd "$(dirname "$0")/.."
steps=${1:-3}
run=${2:-runs/capstone-1b}
shift $(( $# < 2 ? $# : 2 ))
cfg=configs/llama-1b-zero3.json
mixpar=${MIXPAR:-build/mixpar} # MIXPAR=another/build/mixpar compares a build side by side
mkdir -p "$run"
peak_bin=build/bench/gemm_lowp # the machine's sgemm peak, all cores, nothing else running
[ -x "$peak_bin" ] || make -s "$peak_bin" >/dev/null || exit 1
# The peak is that of the fp32 products the core runs: its own AVX-512 kernel where the CPU has AVX-512, whatever
# OPENBLAS_CORETYPE says. Where OpenBLAS runs them and OPENBLAS_CORETYPE pins its kernels (this course's build machines
# set Haswell, which halves the sgemm peak on an AVX-512 CPU), the peak is also measured with OpenBLAS's own choice,
# and both percentages are printed (bench/README.md, "OpenBLAS's kernel set").
"$peak_bin" --kernels
own_peak() {
  if [ -n "${OPENBLAS_CORETYPE:-}" ] && "$peak_bin" --kernels | grep -q '^OpenBLAS kernels'; then
    env -u OPENBLAS_CORETYPE "$peak_bin" --peak
  else echo 0; fi
}
peak_before=$("$peak_bin" --peak) || exit 1
own_before=$(own_peak) || exit 1
if [ $# -eq 0 ]; then
  echo "== plain DDP (zero_optimization.stage 0) on 4 ranks: the launcher checks the plan first"
  "$mixpar" run -n 4 -- "$mixpar" train --config "$cfg" --set zero_optimization.stage=0 \
    --set train.run_dir="$run-ddp"
  echo "(exit $?: refused before any rank started)"
else
  echo "== overrides given ($*): the plain-DDP refusal (for the 1.1B shape) is skipped"
fi
echo
echo "== ZeRO-3 + bf16 on 4 ranks, $steps steps"
start=$(date +%s)
OMP_WAIT_POLICY=passive "$mixpar" run -n 4 -- "$mixpar" train --config "$cfg" --set train.steps="$steps" \
  --set train.run_dir="$run" --set train.profile=true "$@" || exit 1
echo "wall time with start-up: $(( $(date +%s) - start )) s"
peak_after=$("$peak_bin" --peak) || exit 1
own_after=$(own_peak) || exit 1
echo
gbytes() { awk -v b="$1" 'BEGIN{printf "%.2f", b/1e9}'; }
field() { grep -o "\"$2\":[0-9.e+-]*" <<<"$1" | head -n 1 | cut -d: -f2; }
header=$(head -n 1 "$run/events.rank0.jsonl")
plan=$(grep -o '"plan":{[^}]*}' <<<"$header")
psi=$(field "$header" params)
echo "parameters: $psi. Memory per rank in GB: the planner's (the run header's plan) against the allocator's at the"
echo "moment of each rank's peak (the mem event's at_peak: what the peak is made of)"
tags="param grad master optim act comm other"
printf "%-5s" ""; for t in $tags; do printf " %8s" "$t"; done; printf " %9s %13s\n" total "measured/plan"
plan_total=0
printf "%-5s" plan
for t in $tags; do b=$(field "$plan" "$t"); plan_total=$((plan_total + ${b:-0})); printf " %8s" "$(gbytes "${b:-0}")"; done
printf " %9s\n" "$(gbytes "$plan_total")"
for r in 0 1 2 3; do
  mem=$(grep '"kind":"mem"' "$run/events.rank$r.jsonl" | tail -n 1)
  at=$(grep -o '"at_peak":{[^}]*}' <<<"$mem")
  total=$(grep -o '"peak_total":[0-9]*' <<<"$mem" | cut -d: -f2)
  printf "%-5s" "$r"
  for t in $tags; do printf " %8s" "$(gbytes "$(field "$at" "$t")")"; done
  printf " %9s %13s\n" "$(gbytes "$total")" "$(awk -v m="$total" -v p="$plan_total" 'BEGIN{printf "%.3f", m / p}')"
done
# Bytes one rank sends a step: ZeRO-3's 3 Psi (N-1)/N values. With the bf16 kernel the two all-gathers (forward,
# backward) move bf16 (the shard is cast before it is gathered: dist/fsdp.c's gather_half) and the reduce-scatter of
# the gradients fp32; without it all three move fp32.
gather_bytes=4
grep -q '"matmul":"bf16 ([a-z0-9-]* kernel)"' <<<"$header" && gather_bytes=2
grep '"kind":"step"' "$run/events.rank0.jsonl" | while read -r line; do
  s=$(field "$line" step) tps=$(field "$line" tokens_per_s) cb=$(field "$line" comm_bytes)
  awk -v s="$s" -v tps="$tps" -v cb="$cb" -v psi="$psi" -v g="$gather_bytes" 'BEGIN{
    printf "step %d: %.1f s per rank-step, %.1f tokens/s per rank (%.1f for 4 ranks), comm %.2f GB = %.3f x (2 x %d + 4) Psi (N-1)/N\n",
      s, 64 / tps, tps, 4 * tps, cb / 1e9, cb / ((2 * g + 4) * psi * 3 / 4), g }'
done
echo
# Where the time went, per rank, over the steps after the first (profile.rank<R>.tsv: seconds summed over them).
echo "== where each rank's step went (mean over steps 2..$steps; wall seconds; the ranks share the cores, so a span"
echo "   also holds the time its rank was not scheduled: cpu is what the rank's threads really used)"
printf "%-5s %7s %7s %8s %8s %8s %8s %8s | %9s %9s | %9s\n" rank step cpu compute gather_w reduce_w optim other \
  allgather reduce_sc "sgemm pk"
for r in 0 1 2 3; do
  awk -F'\t' -v r="$r" -v ev="$run/events.rank$r.jsonl" '
    /^# steps / { n = $0; sub(/^# steps /, "", n) }
    /^# peak_flops / { pk = $0; sub(/^# peak_flops /, "", pk) }
    $1 == "span" || $1 == "comm" { t[$2] = $4 }
    END {
      if (n <= 0) { printf "%-5s no profiled steps (run at least 2)\n", r; exit }
      cpu = 0; k = 0
      while ((getline line < ev) > 0)
        if (line ~ /"kind":"step"/ && line !~ /"step":1,/ && match(line, /"cpu_s":[0-9.e+-]+/)) {
          cpu += substr(line, RSTART + 8, RLENGTH - 8); k++ }
      compute = t["forward"] + t["backward"] - t["gather_wait"]
      other = t["step"] - t["forward"] - t["backward"] - t["grad_sync_wait"] - t["optimizer"]
      printf "%-5s %7.2f %7.2f %8.2f %8.2f %8.2f %8.2f %8.2f | %9.2f %9.2f | %9.1f\n", r, t["step"] / n,
        k ? cpu / k : 0, compute / n, t["gather_wait"] / n, t["grad_sync_wait"] / n, t["optimizer"] / n, other / n,
        t["allgather"] / n, t["reduce_scatter"] / n, pk / 1e9 }' "$run/profile.rank$r.tsv"
done
echo "(compute: forward + backward less gather_w, the main thread waiting for a layer's all-gather; reduce_w: the"
echo " wait for the last reduce-scatters after backward; allgather, reduce_sc: the communication thread's seconds in"
echo " them, hidden behind compute or not; sgemm pk: GFLOP/s the rank measured, one thread, beside the other ranks)"
echo
# Each rank's kernels by kind (the profiler's kernel rows, model_lowp.c): the products; the casts of the rank's weight
# shards to bf16 before their all-gathers (on the thread that gathers: the communication thread when prefetched);
# the conversions of activations and gradients to and from bf16; the rest (norms, attention, SwiGLU, the loss).
echo "== each rank's kernels by kind (mean over steps 2..$steps; wall seconds; \`$mixpar profile $run\` lists them)"
printf "%-5s %9s %9s %9s %9s\n" rank products casts convert others
for r in 0 1 2 3; do
  awk -F'\t' -v r="$r" '
    /^# steps / { n = $0; sub(/^# steps /, "", n) }
    $1 == "kernel" { if ($2 ~ /^matmul_/) p += $4; else if ($2 == "cast_weights") c += $4;
                     else if ($2 == "convert") v += $4; else o += $4 }
    END { if (n > 0) printf "%-5s %9.2f %9.2f %9.2f %9.2f\n", r, p / n, c / n, v / n, o / n }' "$run/profile.rank$r.tsv"
done
# Achieved FLOP/s over all ranks: 6 x params x tokens of the step (the recomputed forward not counted), against
# the machine's sgemm peak with all cores: the better of the two measurements around the run. (The ranks' own
# one-thread peaks, above, are taken while other ranks start up or measure too, so their sum is no machine figure.)
for r in 0 1 2 3; do cat "$run/profile.rank$r.tsv"; done | awk -F'\t' -v psi="$psi" -v before="$peak_before" \
  -v after="$peak_after" -v own_before="$own_before" -v own_after="$own_after" -v pin="${OPENBLAS_CORETYPE:-}" '
  BEGIN { peak = (before > after ? before : after) * 1e9; own = (own_before > own_after ? own_before : own_after) * 1e9 }
  /^# tokens_per_step / { v = $0; sub(/^# tokens_per_step /, "", v); tokens += v }
  /^# steps / { v = $0; sub(/^# steps /, "", v); n = v }
  $1 == "span" && $2 == "step" { if ($4 > slow) slow = $4 }
  END {
    if (n <= 0) exit
    step = slow / n; flops = 6 * psi * tokens
    printf "achieved: 6 x %.0f params x %d tokens = %.3f TFLOP per step in %.2f s = %.1f GFLOP/s over all ranks;\n",
      psi, tokens, flops / 1e12, step, flops / step / 1e9
    printf "sgemm peak of the machine, all cores: %.1f GFLOP/s (measured just before the run: %.1f, just after: %.1f):\n",
      peak / 1e9, before, after
    printf "%.1f%% of the peak\n", 100 * flops / step / peak
    if (own > 0)
      printf "(OpenBLAS kernels pinned by OPENBLAS_CORETYPE=%s; with its own choice for this CPU the peak is %.1f GFLOP/s " \
             "(before %.1f, after %.1f): %.1f%% of that peak)\n", pin, own / 1e9, own_before, own_after, 100 * flops / step / own }'
