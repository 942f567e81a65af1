#!/usr/bin/env bash
# 23-profiling.figures.sh: the figures of chapter 23's deck, drawn by gnuplot from real mixpar output:
#   23-roofline.png      the tiny GPT-2's kernels on the roofline measured in the same run (mixpar train with
#                        train.profile=true, then mixpar profile --roofline)
#   23-kernel-time.png   milliseconds per step by kernel, colored memory- or compute-bound
# Usage: slides/23-profiling.figures.sh OUTDIR   (needs build/mixpar: `make`). Uses the runs of `make lab23` when
# they are there; otherwise runs the experiment first (under half a minute).
source "$(dirname "$0")/figures_lib.sh"

out=runs/lab23
if [ ! -s "$out/gpt2_roofline.tsv" ] || [ ! -s "$out/gpt2/profile.rank0.tsv" ]; then
    labs/lab23-profiling/experiment.sh > /dev/null
fi
read -r peak bw < <(awk '/^# peak_flops/ {p = $3} /^# bandwidth/ {b = $3} END {print p / 1e9, b / 1e9}' \
                    "$out/gpt2/profile.rank0.tsv")
grep -v '^#' "$out/gpt2_roofline.tsv" | sort -t$'\t' -k5,5g > "$outdir/23-kernels-by-time.tsv"

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

gnuplot <<EOF
set terminal $terminal size 1000,560 font ",12" noenhanced
set output "$outdir/23-roofline.png"
set xlabel "arithmetic intensity (FLOP per byte)"
set ylabel "GFLOP/s achieved"
set logscale xy
set xrange [0.05:200]
set yrange [0.1:2 * $peak]
set grid
set key bottom right
set datafile separator "\t"
roof(x) = (x * $bw < $peak) ? x * $bw : $peak
plot roof(x) with lines lw 3 lc rgb "#000000" title sprintf("roof: %.0f GFLOP/s, %.1f GB/s", $peak, $bw), \
     "$out/gpt2_roofline.tsv" using (stringcolumn(4) eq "memory-bound" ? \$2 : 1/0):3 with points pt 7 ps 1.6 lc rgb "#d55e00" title "memory-bound", \
     "" using (stringcolumn(4) eq "compute-bound" ? \$2 : 1/0):3 with points pt 5 ps 1.6 lc rgb "#0072b2" title "compute-bound", \
     "" using 2:3:1 with labels offset 0,1 font ",8" notitle

set output "$outdir/23-kernel-time.png"
unset logscale
set xlabel "ms per step"
set ylabel ""
set xrange [0:*]
set yrange [-1:*]
set style fill solid 0.8 border -1
set grid x
set ytics font ",9"
plot "$outdir/23-kernels-by-time.tsv" using (\$5 * 0.5):0:(\$5 * 0.5):(0.35):(stringcolumn(4) eq "memory-bound" ? 0xd55e00 : 0x0072b2):ytic(1) \
     with boxxyerrorbars lc rgb variable notitle

set output "$outdir/23-kernel-time.png"
unset logscale
set xlabel "ms per step"
set ylabel ""
set xrange [0:*]
set yrange [-1:*]
set style fill solid 0.8 border -1
set grid x
set ytics font ",9"
plot "$outdir/23-kernels-by-time.tsv" using (\$5 * 0.5):0:(\$5 * 0.5):(0.35):(stringcolumn(4) eq "memory-bound" ? 0xd55e00 : 0x0072b2):ytic(1) \
     with boxxyerrorbars lc rgb variable notitle
EOF
rm -f "$outdir/23-kernels-by-time.tsv"
echo "wrote $outdir/23-roofline.png, $outdir/23-kernel-time.png"
