#!/usr/bin/env bash
# ddp_throughput.sh: data-parallel scaling on this machine: 1 rank on one core vs 2 ranks on one core each,
# the same per-rank batch, measured side by side in one run. Prints tokens/s of each, the ratio (goal: at
# least 1.8x), and from the events how much of each step's allreduce time ran while backward was running.
# Usage: bench/ddp_throughput.sh [STEPS] [CONFIG]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-40}
cfg=${2:-configs/tiny-poetry.json}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(--config "$cfg" --quiet --set train.steps="$steps" --set scheduler.params.total_steps="$steps"
        --set train.eval_interval=0 --set train.sample_interval=0 --set train.checkpoint_interval=0
        --set train.hist_interval=0 --set train.threads=1)
tps() { # median tokens/s of the steps after the first 5, from one rank's events
  grep '"kind":"step"' "$1" | sed -E 's/.*"tokens_per_s":([0-9.e+]+).*/\1/' | tail -n +6 | sort -g |
    awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'
}
build/mixpar train "${common[@]}" --set train.run_dir="$out/one" >/dev/null
# What this machine can do for two independent single-threaded trainings at once: the ceiling for 2 ranks
# (a shared or busy host gives less than 2x; DDP's own cost is what separates it from that ceiling).
build/mixpar train "${common[@]}" --set train.run_dir="$out/solo_a" >/dev/null &
build/mixpar train "${common[@]}" --set train.run_dir="$out/solo_b" >/dev/null
wait
build/mixpar run -n 2 -- build/mixpar train "${common[@]}" --set train.run_dir="$out/two" \
  --set zero_optimization.overlap_comm=true --set zero_optimization.reduce_bucket_size=300000 >/dev/null
one=$(tps "$out/one/events.rank0.jsonl")
pair=$(awk -v a="$(tps "$out/solo_a/events.rank0.jsonl")" -v b="$(tps "$out/solo_b/events.rank0.jsonl")" 'BEGIN{print a+b}')
# tokens_per_s in the events is per rank: the job's rate is the sum over the ranks.
two=$(awk -v a="$(tps "$out/two/events.rank0.jsonl")" -v b="$(tps "$out/two/events.rank1.jsonl")" 'BEGIN{print a+b}')
echo "config $cfg, $steps steps, one thread per rank"
printf "1 rank alone               : %9.0f tokens/s\n" "$one"
printf "2 independent runs at once : %9.0f tokens/s (%.2fx: what the machine gives two processes)\n" "$pair" \
  "$(awk -v a="$one" -v b="$pair" 'BEGIN{print b/a}')"
printf "2 DDP ranks                : %9.0f tokens/s (%.2fx of one rank, goal >= 1.8x; %.0f%% of the two-process ceiling)\n" \
  "$two" "$(awk -v a="$one" -v b="$two" 'BEGIN{print b/a}')" "$(awk -v a="$pair" -v b="$two" 'BEGIN{print 100*b/a}')"
# Hidden communication: for each step, the part of the gradient allreduces (bucketed) that overlaps the
# backward span, over their total time.
awk -F'"step":' '
  function val(key,   m) { match($0, "\"" key "\":[0-9.e+-]+"); return substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3) + 0 }
  /"kind":"span"/ && /"name":"backward"/ { b0[++nb]=val("t0"); b1[nb]=val("t1") }
  /"kind":"comm"/ && /"bucket":/ { c0[++nc]=val("t0"); c1[nc]=val("t1") }
  END {
    for (i = 1; i <= nc; i++) {
      tot += c1[i] - c0[i]
      for (j = 1; j <= nb; j++) { lo = c0[i] > b0[j] ? c0[i] : b0[j]; hi = c1[i] < b1[j] ? c1[i] : b1[j]; if (hi > lo) hid += hi - lo }
    }
    if (tot > 0) printf "gradient allreduce: %.1f ms in all, %.0f%% of it while backward ran\n", tot * 1e3, 100 * hid / tot
  }' "$out/two/events.rank0.jsonl"
