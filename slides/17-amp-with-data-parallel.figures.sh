#!/usr/bin/env bash
# 17-amp-with-data-parallel.figures.sh: the figures of chapter 17's deck, drawn by gnuplot from real 2-rank runs
# (mixpar run -n 2):
#   17-scales.png  the loss scale of each rank of lab 17's driver (a tiny GPT under DDP with the AMP step) when
#                  rank 1 alone finds an inf at step 5: with found_inf agreed across the ranks, and without
#   17-wire.png    the exponent histogram of the tiny GPT's gradients as DDP sends them under fp16 AMP (scale
#                  2^16) and as they would be sent unscaled, with fp16's limits (hist events, mixpar amp underflow)
# Usage: slides/17-amp-with-data-parallel.figures.sh OUTDIR   (needs build/mixpar and mpirun: `make`; it builds
# build/labs/lab17_worker when it is missing). Uses the fp16-hook run of `make lab17` when it is there;
# otherwise trains 20 steps on 2 ranks (about 10 s).
source "$(dirname "$0")/figures_lib.sh"

worker=build/labs/lab17_worker
[ -x "$worker" ] || make -s "$worker" >&2
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT

# The driver, 16 steps, the inf on rank 1 at step 5: agreed, and each rank alone ("local").
for mode in agreed local; do
    mkdir -p "$data/$mode"
    opt=(); [ "$mode" = local ] && opt=(local)
    "$mixpar" run -n 2 -- "$worker" run "$data/$mode" 16 1:5 "${opt[@]}" > /dev/null
    for r in 0 1; do
        sed 1d "$data/$mode/rank$r.txt" | tr '=' ' ' | awk '{ print $2, $8, $4 }' > "$data/$mode.$r.dat" # step scale skipped
    done
done

events=runs/lab17/fp16ampfp16hook/events.rank0.jsonl
if [ ! -s "$events" ] || ! grep -q '"kind":"hist"' "$events"; then
    "$mixpar" run -n 2 -- "$mixpar" train --config configs/tiny-poetry.json --quiet --set precision.recipe=fp16 \
        --set communication.hook=fp16 --set train_micro_batch_size_per_gpu=8 --set train.steps=20 \
        --set scheduler.params.warmup_steps=5 --set train.hist_interval=20 --set train.eval_interval=0 \
        --set train.sample_interval=0 --set train.checkpoint_interval=0 --set train.run_dir="$data/run" > /dev/null
    events=$data/run/events.rank0.jsonl
fi
"$mixpar" amp underflow "$events" --bins > "$data/bins.tsv"
scale=$(grep '"kind":"hist"' "$events" | tail -n 1 | sed -E 's/.*"scale":([0-9.e+]+).*/\1/')
shift_binades=$(awk -v s="$scale" 'BEGIN { printf "%d", log(s) / log(2) + 0.5 }')

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi
gnuplot <<PLOT
set terminal $terminal size 1000,520 font ",12"
set grid

set output "$outdir/17-scales.png"
set xlabel "step"
set ylabel "loss scale"
set logscale y 2
set format y "2^{%L}"
set key top left
set xrange [0.5:16.5]
plot "$data/agreed.0.dat" using 1:2 with linespoints lw 3 pt 7 lc rgb "#009e73" title "agreed: rank 0 and rank 1 (the same)", \
     "$data/local.0.dat" using 1:2 with linespoints lw 2 pt 5 dt 2 lc rgb "#0072b2" title "each rank alone: rank 0", \
     "$data/local.1.dat" using 1:2 with linespoints lw 2 pt 9 dt 2 lc rgb "#d55e00" title "each rank alone: rank 1 (the inf at step 5)"

set output "$outdir/17-wire.png"
unset logscale y
unset xrange
set format y "%g"
set logscale y 10
set xlabel "binade (floor(log2|g|))"
set ylabel "gradients"
set xrange [-50:20]
set yrange [0.8:*]
set key top left
set datafile separator "\t"
set arrow from -24, graph 0 to -24, graph 1 nohead dt 2 lc rgb "#999999"
set arrow from -14, graph 0 to -14, graph 1 nohead dt 2 lc rgb "#999999"
set arrow from 16, graph 0 to 16, graph 1 nohead dt 2 lc rgb "#cc0000"
set label "2^{-24}: smallest fp16" at -24, graph 0.62 right offset -0.5,0
set label "2^{-14}: smallest normal" at -14, graph 0.55 left offset 0.5,0
set label "overflow" at 16, graph 0.95 right offset -0.5,0
plot "$data/bins.tsv" using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc rgb "#0072b2" title "as sent: scaled by 2^{$shift_binades}", \
     "$data/bins.tsv" using (\$1-$shift_binades):2 with linespoints lw 2 pt 7 ps 0.6 lc rgb "#e69f00" title "if unscaled before the allreduce"
PLOT
