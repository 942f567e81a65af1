#!/usr/bin/env bash
# 15-data-loading.figures.sh: the figures of chapter 15's deck, drawn by gnuplot from real mixpar output:
#   15-sampler.png  which rank takes each of N=10 samples in epochs 0..3 on 3 ranks, padded and drop_last
#                   (bench/sampler_show); a sample taken twice shows two marks, a dropped one none
#   15-loader.png   batches/s of the prefetching loader with 0, 1, 2 workers, for an expensive and a cheap
#                   step (bench/loader_bench)
#   15-straggler.png  per step, the slowest of 4 real ranks over the mean rank (tokens and compute CPU seconds)
#                   for the strided and the length-aware split of one epoch of poems (bench/straggler under
#                   mixpar run -n 4; labs/lab15-data-loading/straggler_summary.awk)
# Usage: slides/15-data-loading.figures.sh OUTDIR   (builds the three bench programs with make)
source "$(dirname "$0")/figures_lib.sh"
make -s build/bench/sampler_show build/bench/loader_bench build/bench/straggler

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
build/bench/sampler_show --n 10 --world 3 --epochs 4 > "$data/sampler.txt"
# "  epoch E rank R:  i i* i ..." -> "epoch rank sample" rows, one file per mode (padded first, drop_last second).
awk '/^N=/ { mode++ } $1 == "epoch" && $3 == "rank" {
        sub(":", "", $4); for (k = 5; k <= NF; k++) { s = $k; sub("\\*", "", s); print $2, $4, s > (dir "/mode" mode ".dat") } }' \
    dir="$data" "$data/sampler.txt"
for step in 256K 16K; do
    build/bench/loader_bench --workers 0,1,2 --batches 80 --prep-bytes 256K --step-bytes "$step" |
        awk '$1 ~ /^[0-9]+$/ { print $1, $2 }' > "$data/loader_$step.dat"
done
OMP_NUM_THREADS=1 "$mixpar" run -n 4 -- build/bench/straggler --data data/poetry/train.tokens --batch 32 --steps 13 \
    --run-dir "$data/straggler" > /dev/null
awk -f labs/lab15-data-loading/straggler_summary.awk -v tsv="$data/straggler.tsv" "$data"/straggler/events.rank*.jsonl \
    > /dev/null

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

gnuplot <<PLOT
set terminal $terminal size 1000,480 font ",12" noenhanced
set output "$outdir/15-sampler.png"
set multiplot layout 1,2 title "N=10 samples on 3 ranks, shuffled with seed + epoch (mixpar sampler_show)"
set xrange [-0.5:3.5]; set yrange [-0.5:9.5]; set xtics 1; set ytics 1
set xlabel "epoch"; set ylabel "sample index"; set grid
set key outside bottom center horizontal
# Two marks for one sample in one epoch sit side by side: offset each rank a little.
set title "padding (drop_last=False): 4 per rank"
plot for [r=0:2] "$data/mode1.dat" using (\$2 == r ? \$1 + (r - 1) * 0.18 : 1/0):3 \
     with points pt 7 ps 2 title sprintf("rank %d", r)
set title "drop_last=True: 3 per rank"
plot for [r=0:2] "$data/mode2.dat" using (\$2 == r ? \$1 + (r - 1) * 0.18 : 1/0):3 \
     with points pt 7 ps 2 title sprintf("rank %d", r)
unset multiplot

set output "$outdir/15-loader.png"
set title "prefetching loader: preparing a batch = tokenising 256 KiB of text (mixpar loader_bench, $(nproc) cores)"
set xrange [-0.5:2.5]; set yrange [0:*]; set ytics autofreq; set grid; set xtics ("0 workers" 0, "1 worker" 1, "2 workers" 2)
set xlabel ""; set ylabel "batches / s"; set key top left
plot "$data/loader_256K.dat" using 1:2 with linespoints lw 2 pt 7 ps 1.5 title "step = tokenising 256 KiB", \
     "$data/loader_16K.dat" using 1:2 with linespoints lw 2 pt 5 ps 1.5 title "step = tokenising 16 KiB"

set output "$outdir/15-straggler.png"
set title "4 ranks, one epoch of poems, 32 a step: slowest rank / mean rank (mixpar bench/straggler)"
set xrange [0.5:13.5]; set yrange [0.9:*]; set xtics 1; set grid
set xlabel "step of the epoch"; set ylabel "slowest rank / mean rank"; set key below horizontal
set datafile separator "\t"
plot "< grep strided $data/straggler.tsv" using 1:4 with linespoints lw 2 pt 7 lc rgb "#d55e00" title "strided: compute CPU s", \
     "" using 1:3 with lines dt 2 lc rgb "#d55e00" title "strided: tokens", \
     "< grep balanced $data/straggler.tsv" using (\$1 - 13):4 with linespoints lw 2 pt 5 lc rgb "#0072b2" title "balanced (LPT): compute CPU s", \
     "" using (\$1 - 13):3 with lines dt 2 lc rgb "#0072b2" title "balanced: tokens"
PLOT
echo "wrote $outdir/15-sampler.png $outdir/15-loader.png $outdir/15-straggler.png"
