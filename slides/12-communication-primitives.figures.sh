#!/usr/bin/env bash
# 12-communication-primitives.figures.sh: the figures of chapter 12's deck, from `mixpar comm-bench` on 4 local ranks
# (mixpar run -n 4), drawn by gnuplot:
#   12-busbw.png  bus bandwidth of each allreduce algorithm (ring, tree, rhd, MPI's own) against message size
#   12-time.png   time per allreduce against size, log-log, with each algorithm's fitted alpha + n/beta line
# Usage: slides/12-communication-primitives.figures.sh OUTDIR   (needs build/mixpar and mpirun; `make` first)
source "$(dirname "$0")/figures_lib.sh"

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
"$mixpar" run -n 4 -- "$mixpar" comm-bench --op allreduce --algo all --min 8 --max 16M --iters 20 --warmup 2 \
    --budget 0.25 > "$data/bench.txt"
for algo in ring tree rhd native; do
    awk -v a="$algo" '$1 == "allreduce" && $2 == a { print $3, $6 * 1e-6, $8 }' "$data/bench.txt" > "$data/$algo.dat"
    # the fit line: "  allreduce  ALGO  alpha(us)  beta(GB/s)  sizes" after the "# alpha-beta fit" header
    awk -v a="$algo" '/alpha-beta fit/ { fits = 1 } fits && $1 == "allreduce" && $2 == a { print $3, $4 }' \
        "$data/bench.txt" > "$data/$algo.fit"
done
fit() { read -r alpha beta < "$data/$1.fit"; echo "${alpha:-0}e-6 + x / (${beta:-1}e9)"; }

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

gnuplot <<PLOT
set terminal $terminal size 1000,560 font ",12"
ring_color = "#9400d3"; tree_color = "#009e73"; rhd_color = "#56b4e9"; native_color = "#e69f00"
set logscale x 2
set format x "2^{%L}"
set xlabel "message size (bytes)"
set key top left
set grid

set output "$outdir/12-busbw.png"
set ylabel "bus bandwidth (GB/s) = size / time x 2(p-1)/p"
plot "$data/ring.dat" using 1:3 with linespoints lw 2 pt 7 lc rgb ring_color title "ring", \
     "$data/tree.dat" using 1:3 with linespoints lw 2 pt 5 lc rgb tree_color title "tree", \
     "$data/rhd.dat" using 1:3 with linespoints lw 2 pt 9 lc rgb rhd_color title "recursive halving-doubling", \
     "$data/native.dat" using 1:3 with linespoints lw 2 pt 13 dt 2 lc rgb native_color title "MPI library (native)"

set output "$outdir/12-time.png"
set logscale y 10
set format y "10^{%L}"
set ylabel "time per allreduce (s)"
set samples 200
set xrange [8:16777216]
plot "$data/ring.dat" using 1:2 with points pt 7 lc rgb ring_color title "ring", \
     $(fit ring) with lines lw 2 lc rgb ring_color title "ring: alpha + n / beta", \
     "$data/tree.dat" using 1:2 with points pt 5 lc rgb tree_color title "tree", \
     $(fit tree) with lines lw 2 lc rgb tree_color title "tree: alpha + n / beta"
PLOT
echo "12-communication-primitives figures: $outdir/12-busbw.png $outdir/12-time.png"
