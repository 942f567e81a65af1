#!/usr/bin/env bash
# 04-underflow-and-loss-scaling.figures.sh: the figures of chapter 04's deck, drawn by gnuplot from real mixpar output:
#   04-histograms.png  the tiny GPT's gradients at the last recorded step as fp16 saw them, without a loss scale and
#                      at the static scale chosen from its fp32 histogram, with fp16's flush and overflow edges
#   04-flushed.png     the share of the gradients between layers that fp16 flushed to zero, per layer, at scale 1,
#                      1024 and the chosen scale (rounding events, mixpar precision flushed)
# Usage: slides/04-underflow-and-loss-scaling.figures.sh OUTDIR   (needs build/mixpar: `make`). Uses the runs of
# `make lab04` when they are there; otherwise trains the tiny GPT for 20 steps four times (about a minute).
source "$(dirname "$0")/figures_lib.sh"

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
runs=runs/lab04
if [ ! -s "$runs/chosen/events.rank0.jsonl" ] || [ ! -s "$runs/scale1/events.rank0.jsonl" ] ||
    [ ! -s "$runs/static1024/events.rank0.jsonl" ]; then
    runs="$data"
    train() {
        local name=$1
        shift
        "$mixpar" train --config configs/tiny-poetry.json --set train.steps=20 --set train.hist_interval=10 \
            --set scheduler.params.warmup_steps=5 --set train.run_name="slides04-$name" --set train.run_dir="$runs/$name" \
            --set train.eval_interval=0 --set train.sample_interval=0 --set train.checkpoint_interval=0 \
            --set train.log_interval=20 "$@" > /dev/null
    }
    train fp32 --set precision.recipe=fp32
    chosen=$("$mixpar" precision choose-scale "$runs/fp32/events.rank0.jsonl" --scale-only)
    train scale1 --set precision.recipe=fp16 --set precision.loss_scaler=static --set precision.init_scale=1
    train static1024 --set precision.recipe=fp16 --set precision.loss_scaler=static --set precision.init_scale=1024
    train chosen --set precision.recipe=fp16 --set precision.loss_scaler=static --set precision.init_scale="$chosen"
fi
for r in scale1 static1024 chosen; do
    "$mixpar" amp underflow "$runs/$r/events.rank0.jsonl" --step last --bins > "$data/bins_$r.tsv"
done
"$mixpar" precision flushed --tsv "$runs/scale1/events.rank0.jsonl" "$runs/static1024/events.rank0.jsonl" \
    "$runs/chosen/events.rank0.jsonl" > "$data/flushed.tsv"
chosen_scale=$(awk -F'"scale":' '/"kind":"step"/ { split($2, a, ","); s = a[1] } END { print s }' "$runs/chosen/events.rank0.jsonl")

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

gnuplot <<PLOT
set terminal $terminal size 1000,520 font ",12"
set datafile separator "\t"

set output "$outdir/04-histograms.png"
set logscale y 10
set format y "10^{%L}"
set xlabel "binade (floor(log2|g x S|))"
set ylabel "gradients"
set xrange [-50:20]
set yrange [0.8:*]
set key at graph 0.02, graph 0.86 left Left reverse
set arrow from -25, graph 0 to -25, graph 1 nohead dt 2 lc rgb "#999999"
set arrow from -14, graph 0 to -14, graph 1 nohead dt 2 lc rgb "#999999"
set arrow from 16, graph 0 to 16, graph 1 nohead dt 2 lc rgb "#cc0000"
set label "2^{-25}: flushed below" at -25, graph 0.95 right offset -0.5,0
set label "2^{-14}: smallest normal" at -14, graph 0.95 left offset 0.5,0
set label "2^{16}: overflow" at 16, graph 0.95 right offset -0.5,0
plot "$data/bins_scale1.tsv" using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc rgb "#d55e00" title "no scale", \
     "$data/bins_static1024.tsv" using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc rgb "#e69f00" title "S = 1024", \
     "$data/bins_chosen.tsv" using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc rgb "#0072b2" title "S = $chosen_scale (chosen)"

set output "$outdir/04-flushed.png"
unset arrow
unset label
set autoscale x
set yrange [1e-5:100]
set ylabel "flushed (% of nonzero gradients; 0 drawn at 10^{-5})"
set xlabel ""
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set key default
set key top right
plot "$data/flushed.tsv" using (\$2 > 0 ? \$2 : 1e-5):xtic(1) title "no scale" lc rgb "#d55e00", \
     "" using (\$4 > 0 ? \$4 : 1e-5) title "S = 1024" lc rgb "#e69f00", \
     "" using (\$6 > 0 ? \$6 : 1e-5) title "S = $chosen_scale (chosen)" lc rgb "#0072b2"
PLOT
