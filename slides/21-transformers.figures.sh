#!/usr/bin/env bash
# 21-transformers.figures.sh: the figures of chapter 21's deck, drawn by gnuplot from real mixpar output:
#   21-loss.png          training and validation loss of a GPT-2 block and a LLaMA-style block of the same size,
#                        poetry, 2 ranks, bf16, warmup + cosine (mixpar train, configs/lab21-*.json)
#   21-schedule.png      the learning rate the trainer used at every step of that run (warmup 15, cosine to step 150)
#   21-rope-angles.png   the error of the rotary angle t * freq_i computed in fp32, bf16 and fp16, positions 1..32768
#                        (labs/lab21-transformers/probe.c)
# Usage: slides/21-transformers.figures.sh OUTDIR   (needs build/mixpar: `make`). Uses the runs of `make lab21` when
# they are there; otherwise runs the experiment first (about a minute).
source "$(dirname "$0")/figures_lib.sh"

out=runs/lab21
if [ ! -s "$out/gpt2.loss.tsv" ] || [ ! -s "$out/llama.val.tsv" ] || [ ! -s "$out/rope_angles.tsv" ]; then
    labs/lab21-transformers/experiment.sh > /dev/null
fi

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

gnuplot <<EOF
set terminal $terminal size 1000,520 font ",12"
set datafile separator "\t"
set output "$outdir/21-loss.png"
set xlabel "step"
set ylabel "loss"
set grid
set key top right
plot "$out/gpt2.loss.tsv" using 1:2 with lines lw 2 lc rgb "#0072b2" title "GPT-2 block: training", \
     "$out/llama.loss.tsv" using 1:2 with lines lw 2 lc rgb "#d55e00" title "LLaMA-style block: training", \
     "$out/gpt2.val.tsv" using 1:2 with linespoints lw 2 pt 7 dt 2 lc rgb "#0072b2" title "GPT-2: validation", \
     "$out/llama.val.tsv" using 1:2 with linespoints lw 2 pt 7 dt 2 lc rgb "#d55e00" title "LLaMA-style: validation"

set output "$outdir/21-schedule.png"
set ylabel "learning rate"
set key top right
plot "$out/gpt2.loss.tsv" using 1:3 with lines lw 2 lc rgb "#000000" title "lr at each step (warmup 15, cosine to 1e-4 at 150)"

set output "$outdir/21-rope-angles.png"
set xlabel "position t"
set ylabel "angle error (radians, as a rotation)"
set logscale xy
set xrange [1:32768]
set yrange [1e-9:4]
set format y "10^{%L}"
set key top left
plot "$out/rope_angles.tsv" using 1:(\$2 > 0 ? \$2 : 1e-12) with lines lw 1 lc rgb "#000000" title "fp32", \
     "" using 1:(\$3 > 0 ? \$3 : 1e-12) with lines lw 1 lc rgb "#009e73" title "bf16", \
     "" using 1:(\$4 > 0 ? \$4 : 1e-12) with lines lw 1 lc rgb "#d55e00" title "fp16", \
     0.1 with lines lw 2 dt 2 lc rgb "#999999" title "0.1 rad"
EOF
