#!/usr/bin/env bash
# 09-numerical-stability.figures.sh: the figures of chapter 09's deck, drawn by gnuplot from real mixpar output:
#   09-stall.png       loss of the tiny GPT with bf16 weights four ways (fp32 master, nearest, stochastic, Kahan), and
#                      the share of weights a step left unchanged (labs/lab09-numerical-stability/stall.c)
#   09-hysteresis.png  the loss scale of DeepSpeed's scaler (hysteresis 1 and 2) and PyTorch's on one overflow
#                      pattern (mixpar amp scaler-trace)
# Usage: slides/09-numerical-stability.figures.sh OUTDIR   (needs build/mixpar: `make`). Uses the runs of `make lab09`
# when they are there; otherwise runs its stall measurement first (about a minute).
source "$(dirname "$0")/figures_lib.sh"

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
stall=runs/lab09/stall
if [ ! -s "$stall/kahan.tsv" ]; then
    labs/lab09-numerical-stability/experiment.sh > /dev/null
fi
pattern="C*3 O C*3 O O C*4 O C O C*3 O O O C*8"
"$mixpar" amp scaler-trace --kind deepspeed --hysteresis 1 --init-scale-power 8 --window 4 --min-scale 1 --tsv \
    "$pattern" > "$data/ds1.tsv"
"$mixpar" amp scaler-trace --kind deepspeed --hysteresis 2 --init-scale-power 8 --window 4 --min-scale 1 --tsv \
    "$pattern" > "$data/ds2.tsv"
"$mixpar" amp scaler-trace --kind pytorch --init-scale 256 --growth-interval 4 --tsv "$pattern" > "$data/pt.tsv"

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

gnuplot <<EOF
set terminal $terminal size 1000,520 font ",12"
set output "$outdir/09-stall.png"
set multiplot layout 1,2
set xlabel "step"
set ylabel "training loss"
set grid
set key top right
plot "$stall/master.tsv" using 1:2 with lines lw 2 lc rgb "#000000" title "fp32 master", \
     "$stall/nearest.tsv" using 1:2 with lines lw 2 lc rgb "#d55e00" title "bf16 nearest", \
     "$stall/stochastic.tsv" using 1:2 with lines lw 2 lc rgb "#0072b2" title "bf16 stochastic", \
     "$stall/kahan.tsv" using 1:2 with lines lw 2 dt 2 lc rgb "#009e73" title "bf16 + Kahan"
set ylabel "% of weights / of updates"
set yrange [0:100]
set key bottom right
plot "$stall/nearest.tsv" using 1:3 with lines lw 2 lc rgb "#d55e00" title "nearest: unchanged", \
     "$stall/stochastic.tsv" using 1:3 with lines lw 2 lc rgb "#0072b2" title "stochastic: unchanged", \
     "$stall/master.tsv" using 1:5 with lines lw 2 dt 2 lc rgb "#000000" title "updates < half an ulp"
unset multiplot

set output "$outdir/09-hysteresis.png"
set datafile separator "\t"
set xlabel "step"
set ylabel "loss scale"
set logscale y 2
set format y "2^{%L}"
set yrange [*:*]
set key top right
plot "$data/pt.tsv" using 1:3 with steps lw 2 lc rgb "#0072b2" title "PyTorch (interval 4)", \
     "$data/ds1.tsv" using 1:3 with steps lw 2 dt 2 lc rgb "#d55e00" title "DeepSpeed, hysteresis 1 (window 4)", \
     "$data/ds2.tsv" using 1:3 with steps lw 2 lc rgb "#009e73" title "DeepSpeed, hysteresis 2", \
     "$data/pt.tsv" using 1:(\$4 == 1 ? \$3 : 1/0) with points pt 7 ps 1 lc rgb "#000000" title "overflow step"
EOF
