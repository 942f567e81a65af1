#!/usr/bin/env bash
# 24-common-problems.figures.sh: the figures of chapter 24's deck, drawn by gnuplot from real runs of the bug zoo:
#   24-zoo-losses.png   training loss of zoo entries 01 (fp16, lr 10), 04 (lr 0.3, no warmup) and 03 (bf16 weights
#                       without a master copy), broken and fixed (mixpar train, labs/lab24-common-problems/zoo)
#   24-zoo-leak.png     entry 07: bytes under the act tag after each step, broken (kept) and fixed (freed)
# Usage: slides/24-common-problems.figures.sh OUTDIR   (needs build/mixpar: `make`). Uses the runs of `make lab24`
# when they are there; otherwise runs the experiment first (about 80 s).
source "$(dirname "$0")/figures_lib.sh"

out=runs/lab24
if [ ! -s "$out/04-loss-spike-no-warmup-fixed.loss.tsv" ] || [ ! -s "$out/07-memory-leak.mem.tsv" ]; then
    labs/lab24-common-problems/experiment.sh > /dev/null
fi
terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

gnuplot <<GP
set terminal $terminal size 1000,520 font ",12"
set output "$outdir/24-zoo-losses.png"
set xlabel "step"; set ylabel "training loss"; set logscale y; set grid; set key top right
plot "$out/01-fp16-lr-too-high.loss.tsv" using 1:2 with lines lw 2 lc rgb "#d55e00" title "01 fp16, lr 10 (NaN from step 8)", \
     "$out/01-fp16-lr-too-high-fixed.loss.tsv" using 1:2 with lines lw 2 dt 2 lc rgb "#d55e00" title "01 fixed", \
     "$out/04-loss-spike-no-warmup.loss.tsv" using 1:2 with lines lw 2 lc rgb "#0072b2" title "04 lr 0.3, no warmup", \
     "$out/04-loss-spike-no-warmup-fixed.loss.tsv" using 1:2 with lines lw 2 dt 2 lc rgb "#0072b2" title "04 fixed", \
     "$out/03-bf16-no-master-weights.loss.tsv" using 1:2 with lines lw 2 lc rgb "#009e73" title "03 bf16 weights, lr 1e-5", \
     "$out/03-bf16-no-master-weights-fixed.loss.tsv" using 1:2 with lines lw 2 dt 2 lc rgb "#009e73" title "03 fixed"
set output "$outdir/24-zoo-leak.png"
unset logscale y; set ylabel "bytes under tag act"; set key top left
plot "$out/07-memory-leak.mem.tsv" using 1:2 with linespoints lw 2 pt 7 ps 0.5 lc rgb "#d55e00" title "kept: +64 KiB a step", \
     "$out/07-memory-leak-fixed.mem.tsv" using 1:2 with linespoints lw 2 pt 6 ps 0.5 lc rgb "#000000" title "freed each step"
GP
echo "$outdir/24-zoo-losses.png $outdir/24-zoo-leak.png"
