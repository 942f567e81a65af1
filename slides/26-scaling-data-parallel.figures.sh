#!/usr/bin/env bash
# 26-scaling-data-parallel.figures.sh: the figures of chapter 26's deck, drawn by gnuplot from real mixpar output:
#   26-model-vs-measured.png   ring and hierarchical allreduce on 4 local ranks (2 nodes of 2): comm-bench's times
#                              against the alpha-beta model fitted on the ring (mixpar comm-bench, simulate --calibrate)
#   26-ib-vs-ethernet.png      LLaMA-7B scaling efficiency from 8 to 1,024 GPUs, DGX H100 with InfiniBand and with
#                              100 Gb/s Ethernet (mixpar simulate)
#   26-bandwidth.png           efficiency against inter-node bandwidth per GPU, LLaMA-7B on 256 GPUs
#   26-bucket.png              efficiency against the gradient bucket size, GPT-2 1.5B DP on 1,024 GPUs
# Usage: slides/26-scaling-data-parallel.figures.sh OUTDIR   (needs build/mixpar: `make`). Uses the runs of
# `make lab26` when they are there; otherwise runs the experiment first (about 20 s).
source "$(dirname "$0")/figures_lib.sh"

out=runs/lab26
if [ ! -s "$out/calibrate.txt" ] || [ ! -s "$out/llama7b-eth.tsv" ] || [ ! -s "$out/bucket.dat" ]; then
    labs/lab26-scaling-data-parallel/experiment.sh > /dev/null
fi
awk '$1 == "ring" { print $2, $3, $4 }' "$out/calibrate.txt" > "$out/model_ring.dat"
awk '$1 == "hierarchical" { print $2, $3, $4 }' "$out/calibrate.txt" > "$out/model_hier.dat"

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

gnuplot <<EOF
set terminal $terminal size 1000,520 font ",12"
set grid

set output "$outdir/26-model-vs-measured.png"
set logscale xy
set xlabel "message (bytes)"
set ylabel "time (us)"
set key top left
plot "$out/model_ring.dat" using 1:2 with points pt 7 lc rgb "#000000" title "ring, measured", \
     "" using 1:3 with lines lw 2 lc rgb "#000000" title "ring, model (fitted)", \
     "$out/model_hier.dat" using 1:2 with points pt 5 lc rgb "#d55e00" title "hierarchical, measured", \
     "" using 1:3 with lines lw 2 dt 2 lc rgb "#d55e00" title "hierarchical, model (predicted)"

unset logscale
set logscale x 2
set xlabel "GPUs"
set ylabel "scaling efficiency (compute / step)"
set yrange [0:1.05]
set key bottom left
set output "$outdir/26-ib-vs-ethernet.png"
plot "$out/llama7b-ib.tsv" using (strcol(1) eq "dp" ? \$2 : 1/0):9 with linespoints lw 2 pt 7 lc rgb "#0072b2" title "dp, InfiniBand", \
     "$out/llama7b-ib.tsv" using (strcol(1) eq "zero3" ? \$2 : 1/0):9 with linespoints lw 2 pt 5 lc rgb "#009e73" title "zero3, InfiniBand", \
     "$out/llama7b-eth.tsv" using (strcol(1) eq "dp" ? \$2 : 1/0):9 with linespoints lw 2 pt 7 dt 2 lc rgb "#0072b2" title "dp, Ethernet", \
     "$out/llama7b-eth.tsv" using (strcol(1) eq "zero3" ? \$2 : 1/0):9 with linespoints lw 2 pt 5 dt 2 lc rgb "#009e73" title "zero3, Ethernet", \
     "$out/llama7b-eth.tsv" using (strcol(1) eq "3d" ? \$2 : 1/0):9 with linespoints lw 2 pt 9 dt 2 lc rgb "#d55e00" title "3d, Ethernet"

set output "$outdir/26-bandwidth.png"
set logscale x 10
set xlabel "inter-node GB/s per GPU"
plot "$out/bandwidth.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#0072b2" title "dp", \
     "" using 1:3 with linespoints lw 2 pt 5 lc rgb "#009e73" title "zero3"

set output "$outdir/26-bucket.png"
set logscale x 2
set format x "%.0b %BB"
set xlabel "gradient bucket"
set key top left
plot "$out/bucket.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#0072b2" title "InfiniBand", \
     "" using 1:3 with linespoints lw 2 pt 5 lc rgb "#d55e00" title "Ethernet"
EOF
