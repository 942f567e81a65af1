#!/usr/bin/env bash
# 30-microscaling.figures.sh: the figures of chapter 30's deck, drawn by gnuplot from real mixpar output:
#   30-mx-snr.png      SNR of the tiny GPT's weights, activations and gradients in every MX format, per-tensor fp8
#                      and bf16 (labs/lab30-microscaling/mx_table.c)
#   30-mxfp8-loss.png  the tiny GPT's loss with MXFP8 matmuls, per-tensor fp8 and bf16 (mixpar train)
#   30-fp4-grid.png    the values an MXFP4 block can hold at its scale, against NVFP4's (mixpar float --block)
# Usage: slides/30-microscaling.figures.sh OUTDIR   (needs build/mixpar: `make`). Uses the runs of `make lab30` when
# they are there; otherwise runs the experiment first (about a minute).
source "$(dirname "$0")/figures_lib.sh"

out=runs/lab30
if [ ! -s "$out/snr.tsv" ] || [ ! -s "$out/mxfp8.loss.tsv" ] || [ ! -s "$out/fp8-tensor.loss.tsv" ]; then
    labs/lab30-microscaling/experiment.sh > /dev/null
fi

# One block of 16 values spread over a binade and a half, in MXFP4 and NVFP4: value in, value out.
grid=$(mktemp)
trap 'rm -f "$grid"' EXIT
values=$(awk 'BEGIN { for (i = 0; i < 16; i++) printf "%.6g ", 0.1 * exp(i * log(50) / 15) }')
# shellcheck disable=SC2086
"$mixpar" float --block mxfp4 $values | awk '$1 ~ /^[0-9]+$/ && NF == 5 { print $2, $4 }' > "$grid.mx"
# shellcheck disable=SC2086
"$mixpar" float --block nvfp4 $values | awk '$1 ~ /^[0-9]+$/ && NF == 5 { print $2, $4 }' > "$grid.nv"

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

gnuplot <<GP
set terminal $terminal size 1000,520 font ",12"
set output "$outdir/30-mx-snr.png"
set ylabel "SNR (dB)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -30
set grid ytics
set key top right
set datafile separator "\t"
set yrange [0:62]
plot "$out/snr.tsv" using 3:xtic(1) title "weights" lc rgb "#0072b2", \
     "" using 4 title "activations" lc rgb "#009e73", \
     "" using 5 title "weight gradients" lc rgb "#e69f00", \
     "" using 6 title "activations, one channel x100 (the others)" lc rgb "#d55e00"

set output "$outdir/30-mxfp8-loss.png"
set datafile separator whitespace
unset style
set style data lines
set xtics norotate
set autoscale y
set xlabel "step"
set ylabel "training loss"
set grid
plot "$out/bf16.loss.tsv" using 1:2 with lines lw 2 lc rgb "#000000" title "bf16", \
     "$out/mxfp8.loss.tsv" using 1:2 with lines lw 2 dt 2 lc rgb "#0072b2" title "MXFP8 (blocks of 32)", \
     "$out/fp8-tensor.loss.tsv" using 1:2 with lines lw 2 dt 3 lc rgb "#d55e00" title "fp8, per-tensor delayed scaling"

set output "$outdir/30-fp4-grid.png"
set logscale xy
set xlabel "value in"
set ylabel "value out"
set key top left
plot x with lines lw 1 lc rgb "#999999" title "exact", \
     "$grid.mx" using 1:(\$2 > 0 ? \$2 : 1/0) with linespoints lw 2 pt 7 lc rgb "#0072b2" title "MXFP4 (E8M0 scale)", \
     "$grid.nv" using 1:(\$2 > 0 ? \$2 : 1/0) with linespoints lw 2 pt 6 dt 2 lc rgb "#d55e00" title "NVFP4 (e4m3 scale)"
GP
rm -f "$grid.mx" "$grid.nv"
