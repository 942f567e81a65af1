#!/usr/bin/env bash
# 19-zero-data-parallel.figures.sh: the figures of chapter 19's deck, from real 4-rank (and 2-rank) runs of the
# addition model widened to 8 blocks with ZeRO stages 0-3 (mixpar run -n N, AdamW in fp32), drawn by gnuplot:
#   19-memory.png  per-rank bytes of weights, gradients and optimizer state measured on rank 0 (stacked), and
#                  the planner's total for the same stage (a marker): stage 2's gradients add the buckets in flight
#   19-bytes.png   bytes each rank sends per step, in units of (N-1)/N x 4 Psi, for N = 2 and 4: 2 for
#                  stages 0-2, just under 3 for stage 3
# Usage: slides/19-zero-data-parallel.figures.sh OUTDIR   (needs build/mixpar and mpirun; `make` first)
source "$(dirname "$0")/figures_lib.sh"

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
tag() { grep -o "\"$2\":{[^}]*}" "$1" | tail -n 1 | grep -o "\"$3\":[0-9]*" | cut -d: -f2; }
: > "$data/memory.dat"
: > "$data/bytes.dat"
for n in 2 4; do
    row="$n"
    for stage in 0 1 2 3; do
        run=$data/n$n-s$stage
        "$mixpar" run -n "$n" -- "$mixpar" train --config configs/synthetic-addition.json --quiet --set model.layers=8 --set train.steps=6 \
            --set scheduler.params.total_steps=6 --set scheduler.params.warmup_steps=2 --set train.eval_interval=0 \
            --set train.sample_interval=0 --set train.hist_interval=0 --set train.checkpoint_interval=0 \
            --set train_micro_batch_size_per_gpu=$((32 / n)) --set zero_optimization.stage="$stage" \
            --set zero_optimization.reduce_bucket_size=20000 --set zero_optimization.overlap_comm=true \
            --set train.run_dir="$run" > /dev/null 2>&1
        ev=$run/events.rank0.jsonl
        psi=$(head -n 1 "$ev" | grep -o '"params":[0-9]*' | cut -d: -f2)
        sent=$(grep '"kind":"step"' "$ev" | tail -n +2 | grep -o '"comm_bytes":[0-9]*' | cut -d: -f2 | awk '{s+=$1} END {print s/NR}')
        row="$row $(awk -v s="$sent" -v n="$n" -v p="$psi" 'BEGIN { printf "%.3f", s / ((n - 1) / n * 4 * p) }')"
        if [ "$n" = 4 ]; then
            plan=$(( $(tag "$ev" plan param) + $(tag "$ev" plan grad) + $(tag "$ev" plan optim) ))
            echo "$stage $(tag "$ev" peak param) $(tag "$ev" peak grad) $(tag "$ev" peak optim) $plan" >> "$data/memory.dat"
        fi
    done
    echo "$row" >> "$data/bytes.dat"
done

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi
gnuplot <<PLOT
set terminal $terminal size 860,460 font ",12"
set output "$outdir/19-memory.png"
set style data histogram
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.6
set yrange [0:*]
set grid y
set key top right inside
set xlabel "ZeRO stage (4 ranks, Psi = $psi, 8 blocks, AdamW fp32)"
set ylabel "model states per rank (KiB), rank 0"
plot "$data/memory.dat" using (\$2/1024):xtic(1) lc rgb "#56b4e9" title "weights (measured)", \
     "" using (\$3/1024) lc rgb "#e69f00" title "gradients (measured)", \
     "" using (\$4/1024) lc rgb "#009e73" title "optimizer m, v (measured)", \
     "" using 0:(\$5/1024) with points pt 7 ps 2 lc rgb "black" title "planner's total"

set output "$outdir/19-bytes.png"
set style histogram clustered gap 1
set boxwidth 0.9
set key top left inside
set xlabel "ranks N"
set ylabel "bytes sent per step / ((N-1)/N x 4 Psi)"
set yrange [0:3.5]
plot "$data/bytes.dat" using 2:xtic(1) lc rgb "#999999" title "DDP", "" using 3 lc rgb "#56b4e9" title "ZeRO-1", \
     "" using 4 lc rgb "#e69f00" title "ZeRO-2", "" using 5 lc rgb "#9400d3" title "ZeRO-3"
PLOT
echo "wrote $outdir/19-memory.png $outdir/19-bytes.png"
