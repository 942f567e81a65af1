#!/usr/bin/env bash
# 16-accumulation-and-compression.figures.sh: the figures of chapter 16's deck, from 2-rank training runs of the
# addition model (mixpar run -n 2) with each DDP communication hook, drawn by gnuplot:
#   16-bytes-vs-loss.png  bytes each rank sends per step against the final loss, one point per hook
#   16-loss-curves.png    the loss curves of allreduce, fp16, top-k 1% and PowerSGD rank 2
# Usage: slides/16-accumulation-and-compression.figures.sh OUTDIR   (needs build/mixpar and mpirun; `make` first)
source "$(dirname "$0")/figures_lib.sh"

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
steps=150
base=(--config configs/synthetic-addition.json --quiet --set train.steps=$steps --set scheduler.params.total_steps=$steps
      --set train.eval_interval=0 --set train.sample_interval=0 --set train.checkpoint_interval=0
      --set train.hist_interval=0 --set train_micro_batch_size_per_gpu=32)
: > "$data/points.dat"
for spec in allreduce:allreduce fp16:fp16 bf16:bf16 topk-10%:topk,0.1,1 topk-1%:topk,0.01,1 \
            powersgd-r1:powersgd,0.01,1 powersgd-r2:powersgd,0.01,2 powersgd-r4:powersgd,0.01,4; do
  name=${spec%%:*}
  IFS=, read -r hook ratio rank <<< "${spec#*:}"
  "$mixpar" run -n 2 -- "$mixpar" train "${base[@]}" --set communication.hook="$hook" \
    --set communication.topk_ratio="${ratio:-0.01}" --set communication.powersgd_rank="${rank:-1}" \
    --set train.run_dir="$data/$name" > /dev/null 2>&1
  ev=$data/$name/events.rank0.jsonl
  grep '"kind":"step"' "$ev" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/' > "$data/$name.loss"
  bytes=$(grep -m1 -o '"comm_bytes":[0-9]*' "$ev" | cut -d: -f2)
  final=$(tail -n 10 "$data/$name.loss" | awk '{s += $2} END {printf "%.4f", s / NR}')
  echo "$name $bytes $final" >> "$data/points.dat"
done

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi
gnuplot <<PLOT
set terminal $terminal size 1000,560 font ",12"
set grid
set output "$outdir/16-bytes-vs-loss.png"
set logscale x 10
set xlabel "bytes sent per step per rank (log scale)"
set ylabel "final loss (mean of last 10 steps)"
set key off
set offsets graph 0.08, graph 0.15, graph 0.08, graph 0.08
plot "$data/points.dat" using 2:3 with points pt 7 ps 1.8 lc rgb "#9400d3", \
     "" using 2:3:1 with labels offset 0,1.1 font ",11"

set output "$outdir/16-loss-curves.png"
unset logscale x
unset offsets
set xlabel "step"
set ylabel "training loss (2 ranks x 32 sequences)"
set key top right
plot "$data/allreduce.loss" using 1:2 with lines lw 2 title "allreduce (fp32)", \
     "$data/fp16.loss" using 1:2 with lines lw 2 title "fp16 (0.5x bytes)", \
     "$data/powersgd-r2.loss" using 1:2 with lines lw 2 title "PowerSGD r=2 (0.06x)", \
     "$data/topk-1%.loss" using 1:2 with lines lw 2 title "top-k 1% (0.02x)"
PLOT
echo "figures: $outdir/16-bytes-vs-loss.png $outdir/16-loss-curves.png"
