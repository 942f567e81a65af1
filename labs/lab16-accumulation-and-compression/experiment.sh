#!/usr/bin/env bash
# experiment.sh: lab 16's experiment (`make lab16`): the tiny addition model trained on 2 MPI ranks with every
# communication hook (plain fp32 allreduce, fp16, bf16, top-k at 10% and 1%, PowerSGD of rank 1, 2 and 4), plus
# plain allreduce with 2 and 4 no_sync accumulation micro-steps (your part C) for the same global batch: bytes
# each rank sends per optimizer step against the final loss, as a table (runs/lab16/hooks.txt) and a figure
# (runs/lab16/bytes_vs_loss.png, and a text rendering). A row whose run stops at a LAB_TODO stub says which lab's
# region it waits for (the fp16 and bf16 rows need lab 17's 16-bit reduction). Under two minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."

mixpar=build/mixpar
out=runs/lab16
steps=${STEPS:-150}
mkdir -p "$out"
[ -x "$mixpar" ] || { echo "lab16: $mixpar is missing; run 'make' first (make lab16 does)" >&2; exit 2; }

section() { printf '\n==== %s\n\n' "$*"; }
base=(--config configs/synthetic-addition.json --quiet --set train.steps="$steps"
      --set scheduler.params.total_steps="$steps" --set train.eval_interval=0 --set train.sample_interval=0
      --set train.checkpoint_interval=0 --set train.hist_interval=0 --set train_micro_batch_size_per_gpu=32)

# name | overrides
runs=(
  "allreduce|communication.hook=allreduce"
  "allreduce+accum2|communication.hook=allreduce train_micro_batch_size_per_gpu=16 gradient_accumulation_steps=2"
  "allreduce+accum4|communication.hook=allreduce train_micro_batch_size_per_gpu=8 gradient_accumulation_steps=4"
  "fp16|communication.hook=fp16"
  "bf16|communication.hook=bf16"
  "topk-10%|communication.hook=topk communication.topk_ratio=0.1"
  "topk-1%|communication.hook=topk communication.topk_ratio=0.01"
  "powersgd-r1|communication.hook=powersgd communication.powersgd_rank=1"
  "powersgd-r2|communication.hook=powersgd communication.powersgd_rank=2"
  "powersgd-r4|communication.hook=powersgd communication.powersgd_rank=4"
)

section "$mixpar run -n 2 -- $mixpar train --config configs/synthetic-addition.json --set communication.hook=... ($steps steps each)"
printf '%-18s %14s %8s %11s %11s %s\n' hook bytes/step ratio first_loss final_loss note | tee "$out/hooks.txt"
: > "$out/hooks.dat"
plain=""
for spec in "${runs[@]}"; do
  name=${spec%%|*}
  sets=()
  for kv in ${spec#*|}; do sets+=(--set "$kv"); done
  dir=$out/$name
  rm -rf "$dir"
  if ! MIXPAR_PARAM_HASH=1 "$mixpar" run -n 2 -- "$mixpar" train "${base[@]}" "${sets[@]}" --set train.run_dir="$dir" \
      > "$out/$name.log" 2>&1; then
    waits=$(grep -m1 -o 'lab [0-9]* not done: [^ ]* [a-z_0-9]*' "$out/$name.log" || true)
    [ -z "$waits" ] || waits="$waits (its region is still a stub)"
    [ -n "$waits" ] || waits=$(grep -m1 'found:' "$out/$name.log" | sed 's/^ *//' || true)
    printf '%-18s %s\n' "$name" "did not run: ${waits:+$waits; }see $out/$name.log" | tee -a "$out/hooks.txt"
    continue
  fi
  ev0=$dir/events.rank0.jsonl ev1=$dir/events.rank1.jsonl
  bytes=$(grep -m1 -o '"comm_bytes":[0-9]*' "$ev0" | cut -d: -f2)
  [ -n "$plain" ] || plain=$bytes
  # first loss, and the final loss as the mean of the last 10 steps (one step's loss is noisy)
  read -r first final < <(grep '"kind":"step"' "$ev0" | grep -o '"loss":[^,]*' | cut -d: -f2 |
                          awk '{l[NR] = $1} END {for (i = NR - 9; i <= NR; i++) s += l[i]; printf "%.4f %.4f\n", l[1], s / 10}')
  same=$(cmp -s <(grep -o '"param_hash":"[0-9a-f]*"' "$ev0") <(grep -o '"param_hash":"[0-9a-f]*"' "$ev1") &&
         echo "replicas identical" || echo "REPLICAS DIFFER")
  ratio=$(awk -v a="$bytes" -v b="$plain" 'BEGIN {printf "%.4f", a / b}')
  printf '%-18s %14s %8s %11s %11s %s\n' "$name" "$bytes" "$ratio" "$first" "$final" "$same" | tee -a "$out/hooks.txt"
  echo "$name $bytes $final" >> "$out/hooks.dat"
done

if [ ! -s "$out/hooks.dat" ]; then
  echo "lab16: no run finished (each row above names the region it waits for): no figure" >&2
  exit 0
fi
if ! command -v gnuplot > /dev/null; then
  echo "lab16: gnuplot is not installed (make deps installs it); the table above is the figure's data" >&2
  exit 0
fi
png_terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then png_terminal=pngcairo; fi
plot_cmds() {
  cat <<PLOT
set logscale x 10
set xlabel "bytes sent per step per rank"
set ylabel "final loss (mean of the last 10 steps)"
set grid
set key off
set offsets graph 0.08, graph 0.15, graph 0.08, graph 0.08
plot "$out/hooks.dat" using 2:3 with points pt 7 ps 1.5, "" using 2:3:1 with labels offset 0,1 $1
PLOT
}
gnuplot <<EOF2
set terminal $png_terminal size 1000,650
set output "$out/bytes_vs_loss.png"
set title "DDP communication hooks, 2 ranks, $steps steps: bytes on the wire against final loss"
$(plot_cmds "font ',9'")
EOF2
echo "  figure: $out/bytes_vs_loss.png"
section "final loss against bytes per step (text rendering of $out/bytes_vs_loss.png)"
gnuplot <<EOF2
set terminal dumb size 100,28
$(plot_cmds "")
EOF2
