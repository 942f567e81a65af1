#!/usr/bin/env bash
# 07-amp-training-step.figures.sh: the figures of chapter 07's deck, drawn by gnuplot from real training runs of the
# tiny GPT (configs/tiny-poetry.json): fp16 AMP with clipping at 1.0, its scaler started at 2^28 and probing every
# 25 clean steps, against fp32:
#   07-loss-and-scale.png  the training loss of both runs with the skipped steps marked, and the loss scale
#   07-grad-norm.png       the global norm of the unscaled gradients (what the clip sees) in both runs
# Usage: slides/07-amp-training-step.figures.sh OUTDIR   (needs build/mixpar: `make`). Uses the runs of `make lab07`
# when they are there (runs/lab07/fp16, runs/lab07/fp32); otherwise trains both for 120 steps (about 40 s of CPU).
source "$(dirname "$0")/figures_lib.sh"

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
runs=runs/lab07
if [ ! -s "$runs/fp16/events.rank0.jsonl" ] || [ ! -s "$runs/fp32/events.rank0.jsonl" ]; then
    runs=$data
    common=(--config configs/tiny-poetry.json --quiet --set train.steps=120 --set train.threads=1
            --set train.eval_interval=0 --set train.sample_interval=0 --set train.checkpoint_interval=0
            --set train.hist_interval=0)
    "$mixpar" train "${common[@]}" --set precision.recipe=fp16 --set precision.init_scale=268435456 \
        --set precision.growth_interval=25 --set train.run_dir="$runs/fp16" > /dev/null &
    "$mixpar" train "${common[@]}" --set precision.recipe=fp32 --set train.run_dir="$runs/fp32" > /dev/null &
    wait
fi
# step loss grad_norm scale skipped(1/0), one line per step event
for run in fp16 fp32; do
    awk '/"kind":"step"/ {
             step = loss = norm = scale = ""; skipped = 0
             if (match($0, /"step":[0-9]+/)) step = substr($0, RSTART + 7, RLENGTH - 7)
             if (match($0, /"loss":[^,]+/)) loss = substr($0, RSTART + 7, RLENGTH - 7)
             if (match($0, /"grad_norm":[^,]+/)) norm = substr($0, RSTART + 12, RLENGTH - 12)
             if (match($0, /"scale":[^,]+/)) scale = substr($0, RSTART + 8, RLENGTH - 8)
             if ($0 ~ /"skipped":true/) skipped = 1
             gsub(/"/, "", norm)
             print step, loss, (norm == "nan" ? "NaN" : norm), scale, skipped
         }' "$runs/$run/events.rank0.jsonl" > "$data/$run.dat"
done

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi
gnuplot <<PLOT
set terminal $terminal size 1000,640 font ",12"
set grid
set output "$outdir/07-loss-and-scale.png"
set multiplot layout 2,1
set lmargin 10
set key top right
set ylabel "training loss"
set format x ""
plot "$data/fp32.dat" using 1:2 with lines lw 2 lc rgb "#999999" title "fp32", \
     "$data/fp16.dat" using 1:2 with lines lw 1.5 lc rgb "#0072b2" title "fp16 AMP, clip 1.0", \
     "$data/fp16.dat" using 1:(\$5 == 1 ? \$2 : 1/0) with points pt 7 ps 1 lc rgb "#d55e00" title "skipped step"
set format x "%g"
set xlabel "step"
set ylabel "loss scale"
set logscale y 2
set format y "2^{%L}"
plot "$data/fp16.dat" using 1:4 with steps lw 2 lc rgb "#0072b2" title "scale of the step", \
     "$data/fp16.dat" using 1:(\$5 == 1 ? \$4 : 1/0) with points pt 7 ps 1 lc rgb "#d55e00" title "overflow: skipped, scale halves"
unset multiplot

set output "$outdir/07-grad-norm.png"
unset logscale y
set format y "%g"
set xlabel "step"
set ylabel "global L2 norm of the unscaled gradients"
set key top right
plot "$data/fp32.dat" using 1:3 with lines lw 2 lc rgb "#999999" title "fp32", \
     "$data/fp16.dat" using 1:3 with lines lw 1.5 lc rgb "#0072b2" title "fp16 AMP (skipped steps have no norm)", \
     1 with lines dt 2 lw 1.5 lc rgb "#cc0000" title "max_norm 1.0: a step above it is clipped"
PLOT
