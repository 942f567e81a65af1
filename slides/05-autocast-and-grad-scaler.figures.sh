#!/usr/bin/env bash
# 05-autocast-and-grad-scaler.figures.sh: the figures of chapter 05's deck, drawn by gnuplot from real mixpar output:
#   05-scale-timeline.png  the loss scale of PyTorch's and DeepSpeed's scalers on one overflow pattern (scaler-trace)
#   05-underflow.png       the tiny GPT's gradient exponent histogram, as recorded and moved up 16 binades by a
#                          loss scale of 2^16, with fp16's limits (hist events of an fp32 run, mixpar amp underflow)
# Usage: slides/05-autocast-and-grad-scaler.figures.sh OUTDIR   (needs build/mixpar: `make`). Uses the run of
# `make lab05` when there is one; otherwise trains the tiny GPT for 10 steps (about 10 s) to get histograms.
source "$(dirname "$0")/figures_lib.sh"

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
pattern="C*2500 O C*3000 O C*1200 (O C*3)*4 O O O C*4500"
for kind in pytorch deepspeed; do "$mixpar" amp scaler-trace --kind "$kind" --tsv "$pattern" > "$data/$kind.tsv"; done

events=runs/lab05/run/events.rank0.jsonl
if [ ! -s "$events" ]; then
    "$mixpar" train --config configs/tiny-poetry.json --set train.steps=10 --set train.hist_interval=10 \
        --set scheduler.params.warmup_steps=2 --set train.run_name=slides05 --set train.run_dir="$data/run" \
        --set train.eval_interval=0 --set train.sample_interval=0 --set train.checkpoint_interval=0 \
        --set train.log_interval=10 > /dev/null
    events="$data/run/events.rank0.jsonl"
fi
"$mixpar" amp underflow "$events" --bins > "$data/bins.tsv"

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

gnuplot <<EOF
set terminal $terminal size 1000,520 font ",12"
set datafile separator "\t"

set output "$outdir/05-scale-timeline.png"
set xlabel "step"
set ylabel "loss scale"
set logscale y 2
set format y "2^{%L}"
set key below
plot "$data/pytorch.tsv" using 1:3 with steps lw 2 lc rgb "#0072b2" title "PyTorch GradScaler", \
     "$data/deepspeed.tsv" using 1:3 with steps lw 2 dt 2 lc rgb "#d55e00" title "DeepSpeed (hysteresis 2, window 1000)", \
     "$data/pytorch.tsv" using 1:(\$4 == 1 ? \$3 : 1/0) with points pt 7 ps 0.8 lc rgb "#0072b2" title "skipped step"

set output "$outdir/05-underflow.png"
unset logscale
unset format
set logscale y 10
set xlabel "binade (floor(log2|g|))"
set ylabel "gradients"
set xrange [-60:20]
set yrange [0.8:*]
set key inside top left vertical
set arrow from -24, graph 0 to -24, graph 1 nohead dt 2 lc rgb "#999999"
set arrow from -14, graph 0 to -14, graph 1 nohead dt 2 lc rgb "#999999"
set arrow from 16, graph 0 to 16, graph 1 nohead dt 2 lc rgb "#cc0000"
set label "2^{-24}: smallest fp16" at -24, graph 0.72 right offset -0.5,0
set label "2^{-14}: smallest normal" at -14, graph 0.64 left offset 0.5,0
set label "overflow" at 16, graph 0.95 right offset -0.5,0
plot "$data/bins.tsv" using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc rgb "#e69f00" title "gradients (scale 1)", \
     "$data/bins.tsv" using (\$1+16):2 with linespoints lw 2 pt 7 ps 0.6 lc rgb "#0072b2" title "times 2^{16}"
EOF
