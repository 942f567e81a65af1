#!/usr/bin/env bash
# 28-model-parallel.figures.sh: the figures of chapter 28's deck, drawn by gnuplot from real mixpar runs:
#   28-schedule-gpipe.png, 28-schedule-1f1b.png, 28-schedule-interleaved.png
#                      4 stages, 8 micro-batches: each stage's real order of forwards and backwards (its span
#                      events of the last step), replayed with the stage's least forward and backward times
#   28-schedule-1f1b-measured.png   the same step's spans as they happened (4 ranks on 2 cores)
#   28-bubble.png      1F1B's bubble on 4 stages against the micro-batches: (p-1)/(m+p-1) and the replays
#   28-memory.png      bytes per rank by layout on 8 ranks (model states and in-flight activations)
# Usage: slides/28-model-parallel.figures.sh OUTDIR   (needs build/mixpar: `make`). Uses the runs of `make lab28`
# when they are there; otherwise runs the experiment first (about a minute).
source "$(dirname "$0")/figures_lib.sh"

out=runs/lab28
if [ ! -s "$out/replay-1f1b.tsv" ] || [ ! -s "$out/bubble.tsv" ] || [ ! -s "$out/2x4x1/events.rank7.jsonl" ]; then
    labs/lab28-model-parallel/experiment.sh > /dev/null
fi

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

# schedule DATA PNG TITLE: stage x time, a box per action, light forwards and dark backwards (green: chunk 1)
schedule() {
    gnuplot <<GP
set terminal $terminal size 1100,380 font ",12"
set output "$2"
set title "$3"
set xlabel "time since the step's first forward (ms)"
set ylabel "stage"
set yrange [3.6:-0.6]
set ytics 1
set grid xtics
set style fill solid 0.9 border lc rgb "#333333"
unset key
plot "$1" using ((\$4+\$5)/2):1:((\$5-\$4)/2):(0.38):(strcol(3) eq "f" ? (\$6 == 0 ? 0x9ecae1 : 0xc7e9c0) : (\$6 == 0 ? 0x08519c : 0x238b45)) \
         with boxxyerror lc rgb variable, \
     "" using ((\$4+\$5)/2):1:(sprintf("%d", \$2)) with labels font ",9" tc rgb "#000000"
GP
}
for s in gpipe 1f1b interleaved; do
    schedule "$out/replay-$s.tsv" "$outdir/28-schedule-$s.png" "$s: each stage's order from its span events, its least forward and backward times"
done
schedule "$out/spans-1f1b.tsv" "$outdir/28-schedule-1f1b-measured.png" "1f1b: the same step's spans as measured (4 ranks on 2 shared cores)"

gnuplot <<GP
set terminal $terminal size 1000,520 font ",12"
set output "$outdir/28-bubble.png"
set xlabel "micro-batches m"
set ylabel "bubble: idle share of a stage's step"
set logscale x 2
set xrange [1.5:20]
set yrange [0:0.7]
set grid
set samples 200
plot 3/(x+3) with lines lw 2 lc rgb "#000000" title "(p-1)/(m+p-1), p = 4", \
     "$out/bubble.tsv" using 1:3 with points pt 7 ps 1.6 lc rgb "#d55e00" title "1F1B replayed from the span events"
GP

# memory per rank by layout: rank 0 (first stage) and rank 7 (last stage) of each 8-rank run, KiB
mem=$outdir/.28-memory.tsv
: > "$mem"
for mesh in 2x2x2 1x2x4 1x1x8 2x4x1; do
    for r in 0 7; do
        ev=$out/$mesh/events.rank$r.jsonl
        [ -s "$ev" ] || continue
        states=$(grep -m1 '"kind":"mem"' "$ev" | grep -o '"peak":{[^}]*}' | grep -o '"\(param\|grad\|optim\)":[0-9]*' |
                 cut -d: -f2 | awk '{s+=$1} END {print s/1024}')
        act=$(grep -o '"act_bytes":[0-9]*' "$ev" | cut -d: -f2 | sort -n | tail -n 1)
        echo "\"$mesh r$r\" $states $(awk -v a="$act" 'BEGIN {print a/1024}')" >> "$mem"
    done
done
gnuplot <<GP
set terminal $terminal size 1000,520 font ",12"
set output "$outdir/28-memory.png"
set ylabel "KiB per rank"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border lc rgb "#333333"
set boxwidth 0.7
set key top left
set grid ytics
set xtics rotate by -30
plot "$mem" using 2:xtic(1) lc rgb "#0072b2" title "parameters + gradients + AdamW state", \
     "" using 3 lc rgb "#e69f00" title "activations in flight (peak)"
GP
rm -f "$mem"
echo "figures in $outdir: 28-schedule-{gpipe,1f1b,interleaved}.png, 28-schedule-1f1b-measured.png, 28-bubble.png, 28-memory.png"
