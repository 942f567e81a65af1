#!/usr/bin/env bash
# 25-advanced-mixed-precision.figures.sh: the figures of chapter 25's deck, drawn by gnuplot from real mixpar output:
#   25-fp8-loss.png       the tiny GPT's loss in bf16, fp8 with delayed scaling and fp8 unscaled (mixpar train)
#   25-norm-stats.png     the relative error of the variance of 768 activations, per format and method, against
#                         mean/spread (labs/lab25-advanced-mixed-precision/norm_table.c)
#   25-scaler-tuning.png  PyTorch's loss scale under a fixed ceiling, three initial scales, two growth intervals
#                         (mixpar amp scaler-trace)
#   25-batchnorm.png      per-rank BN against SyncBN on 4 ranks: the normalisation error against the per-rank batch
#                         (build/labs/lab25_worker experiment)
# Usage: slides/25-advanced-mixed-precision.figures.sh OUTDIR   (needs build/mixpar: `make`). Uses the runs of
# `make lab25` when they are there; otherwise runs the experiment first (about a minute).
source "$(dirname "$0")/figures_lib.sh"

out=runs/lab25
if [ ! -s "$out/fp8-unscaled.loss.tsv" ] || [ ! -s "$out/norm_768.tsv" ] || [ ! -s "$out/ceiling.txt" ] || [ ! -s "$out/batchnorm_iid_sync.tsv" ]; then
    labs/lab25-advanced-mixed-precision/experiment.sh > /dev/null
fi
c=$(cat "$out/ceiling.txt") # the ceiling 2^c the experiment's scaler traces assumed

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

gnuplot <<EOF
set terminal $terminal size 1000,520 font ",12"
set output "$outdir/25-fp8-loss.png"
set xlabel "step"
set ylabel "training loss"
set grid
set key top right
plot "$out/bf16.loss.tsv" using 1:2 with lines lw 2 lc rgb "#000000" title "bf16", \
     "$out/fp8.loss.tsv" using 1:2 with lines lw 2 dt 2 lc rgb "#0072b2" title "fp8, delayed scaling", \
     "$out/fp8-unscaled.loss.tsv" using 1:2 with lines lw 2 lc rgb "#d55e00" title "fp8, scale 1"

set output "$outdir/25-norm-stats.png"
set datafile separator "\t"
set xlabel "M / sigma"
set ylabel "relative error of the variance"
set logscale xy
set xrange [0.8:12000]
set yrange [1e-8:2e4]
set format y "10^{%L}"
set key bottom right
plot "$out/norm_768.tsv" using (\$1 == 0 ? 0.9 : \$1):2 with linespoints lw 2 pt 7 lc rgb "#000000" title "fp32 two-pass", \
     "" using (\$1 == 0 ? 0.9 : \$1):3 with linespoints lw 2 pt 6 dt 2 lc rgb "#000000" title "fp32 one-pass", \
     "" using (\$1 == 0 ? 0.9 : \$1):4 with linespoints lw 2 pt 7 lc rgb "#009e73" title "bf16 two-pass", \
     "" using (\$1 == 0 ? 0.9 : \$1):5 with linespoints lw 2 pt 6 dt 2 lc rgb "#009e73" title "bf16 one-pass", \
     "" using (\$1 == 0 ? 0.9 : \$1):6 with linespoints lw 2 pt 7 lc rgb "#d55e00" title "fp16 two-pass", \
     "" using (\$1 == 0 ? 0.9 : \$1):7 with linespoints lw 2 pt 6 dt 2 lc rgb "#d55e00" title "fp16 one-pass"

set output "$outdir/25-scaler-tuning.png"
unset logscale
set logscale y 2
set format y "2^{%L}"
set xrange [0:10000]
set yrange [2**8:2**26]
set xlabel "step"
set ylabel "loss scale"
plot for [s in "10 16 24"] "$out/scaler_s".s."_n200.tsv" using 1:3 with steps lw 2 title "init 2^{".s."}, interval 200", \
     for [s in "10 16 24"] "$out/scaler_s".s."_n2000.tsv" using 1:3 with steps lw 2 dt 2 title "init 2^{".s."}, interval 2000", \
     2**$c with lines lw 1 dt 3 lc rgb "#999999" title "ceiling 2^{$c}"

set output "$outdir/25-batchnorm.png"
unset logscale
set logscale xy
set format y "%g"
set xrange [0.8:40]
set yrange [*:*]
set xlabel "samples per rank (16 positions each), 4 ranks"
set ylabel "rms error of y against (x - mu) / sigma"
set key top right
plot "$out/batchnorm_iid_per_rank.tsv" using 2:4 with linespoints lw 2 pt 7 lc rgb "#d55e00" title "per-rank BN, training", \
     "$out/batchnorm_iid_sync.tsv" using 2:4 with linespoints lw 2 pt 7 lc rgb "#0072b2" title "SyncBN, training", \
     "$out/batchnorm_iid_per_rank.tsv" using 2:5 with linespoints lw 2 pt 6 dt 2 lc rgb "#d55e00" title "per-rank BN, eval", \
     "$out/batchnorm_iid_sync.tsv" using 2:5 with linespoints lw 2 pt 6 dt 2 lc rgb "#0072b2" title "SyncBN, eval"
EOF
