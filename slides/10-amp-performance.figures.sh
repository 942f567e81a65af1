#!/usr/bin/env bash
# 10-amp-performance.figures.sh: the figures of chapter 10's deck, drawn by gnuplot from real mixpar measurements:
#   10-memory-by-tag.png   GPT-2 124M (B=4, T=64): peak MiB per allocator tag under each recipe (bench/amp_perf)
#   10-act-vs-batch.png    GPT-2 124M's activations predicted for growing batches, fp32 and bf16, against the
#                          model states and autocast's weight cache (amp_perf --act-table)
#   10-speed.png           tokens/s and MFU per recipe on this machine (amp_perf)
#   10-accuracy.png        the tiny GPT's training loss minus fp32's under bf16/fp16 AMP and bf16-pure with and
#                          without stochastic rounding (mixpar train; runs/lab10/accuracy_curves.dat, part 4)
# Usage: slides/10-amp-performance.figures.sh OUTDIR   (needs `make`). Uses runs/lab10/perf.tsv from `make lab10`
# when it is there; otherwise runs that experiment first (about a minute on 2 free cores).
source "$(dirname "$0")/figures_lib.sh"

make -s build/bench/amp_perf
[ -s runs/lab10/perf.tsv ] && [ -s runs/lab10/accuracy_curves.dat ] || labs/lab10-amp-performance/experiment.sh > /dev/null
[ -s runs/lab10/perf.tsv ] || { echo "$0: runs/lab10/perf.tsv is missing (make lab10 failed?)" >&2; exit 1; }
perf=runs/lab10/perf.tsv

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
awk -F'\t' '!/^#/ { printf "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\n", $1, $6 / 1048576, $7 / 1048576,
                    $8 / 1048576, $9 / 1048576, $10 / 1048576, $11 / 1048576 }' "$perf" > "$data/memory.tsv"
# tokens, fp32 MiB, bf16 MiB (the act table's rows)
build/bench/amp_perf --act-table --model gpt2-124m | awk '$1 ~ /^[0-9]+$/ && NF == 7 { print $3 "\t" $4 "\t" $5 }' \
    > "$data/act.tsv"
states=$(build/bench/amp_perf --act-table --model gpt2-124m | sed -n 's/.*= \([0-9]*\) MiB$/\1/p')
cache=$(awk -F'\t' '$1 == "bf16" { printf "%.1f", $11 / 1048576 }' "$perf")
cache=${cache:-0}

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

gnuplot <<GP
set terminal $terminal size 1000,500 font ",12"
set termoption noenhanced
set datafile separator "\t"

set output "$outdir/10-memory-by-tag.png"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.6
set ylabel "MiB (peak, by allocator tag)"
set key outside right
set yrange [0:*]
plot "$data/memory.tsv" using 2:xtic(1) title "param" lc rgb "#0072b2", "" using 3 title "grad" lc rgb "#56b4e9", \
     "" using 4 title "master" lc rgb "#cc79a7", "" using 5 title "optim" lc rgb "#009e73", \
     "" using 6 title "act" lc rgb "#e69f00", "" using 7 title "other (weight cache)" lc rgb "#999999"

set output "$outdir/10-speed.png"
set style histogram clustered gap 1
set boxwidth 0.8
set ylabel "tokens/s"
set key inside top right
set offsets 0, 0, graph 0.15, 0
plot "$perf" using 3:xtic(1) title "tokens/s" lc rgb "#0072b2", \
     "" using 0:3:(sprintf("MFU %.0f%%", 100 * \$5)) with labels offset 0,1 notitle

set output "$outdir/10-act-vs-batch.png"
unset style
set style data linespoints
set offsets 0, 0, 0, 0
set logscale xy 2
set xlabel "tokens per micro-batch (B x T)"
set ylabel "MiB"
set key inside top left
set xrange [128:65536]
set xtics ("256" 256, "1024" 1024, "4096" 4096, "16384" 16384, "65536" 65536)
set yrange [64:131072]
plot "$data/act.tsv" using 1:2 lw 2 pt 7 lc rgb "#d55e00" title "activations, fp32", \
     "$data/act.tsv" using 1:3 lw 2 pt 7 lc rgb "#0072b2" title "activations, bf16", \
     $states with lines dt 2 lw 2 lc rgb "#009e73" title "model states (AdamW, 16 B/param)", \
     $cache with lines dt 3 lw 2 lc rgb "#999999" title "bf16 weight cache (MEM_OTHER, this CPU)"
GP

gnuplot <<GP
set terminal $terminal size 1000,480 font ",12" noenhanced
set output "$outdir/10-accuracy.png"
set title "tiny GPT, AdamW lr 1e-4, B=8: training loss minus fp32's (mixpar train, one thread)"
set xlabel "step"; set ylabel "loss - fp32 loss"; set key top left; set grid
plot "runs/lab10/accuracy_curves.dat" using 1:(\$3 - \$2) with lines lw 2 lc rgb "#009e73" title "bf16 AMP", \
     "" using 1:(\$4 - \$2) with lines lw 2 dt 2 lc rgb "#56b4e9" title "fp16 AMP + loss scaling", \
     "" using 1:(\$5 - \$2) with lines lw 2 lc rgb "#d55e00" title "bf16-pure, round to nearest", \
     "" using 1:(\$6 - \$2) with lines lw 2 lc rgb "#0072b2" title "bf16-pure + stochastic rounding"
GP
