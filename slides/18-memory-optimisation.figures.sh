#!/usr/bin/env bash
# 18-memory-optimisation.figures.sh: the figures of chapter 18's deck, drawn by gnuplot from mixpar output:
#   18-memory-vs-time.png  measured activation peak against step time per recompute policy (lab 18's experiment:
#                          a 6-block GPT-2, C=384, B=4, T=256, 4 training steps per policy)
#   18-act-vs-seq.png      the planner's activation bytes for GPT-2 124M (fp32, B=4) against the sequence length,
#                          with no recompute, selective and full recompute
# Usage: slides/18-memory-optimisation.figures.sh OUTDIR   (needs build/mixpar; `make` first)
source "$(dirname "$0")/figures_lib.sh"

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
OUT="$data/lab18" labs/lab18-memory-optimisation/experiment.sh > "$data/experiment.log" 2>&1 ||
  { echo "$0: lab 18's experiment failed (see it with make lab18)" >&2; tail -5 "$data/experiment.log" >&2; exit 1; }

: > "$data/seq.dat"
for s in 64 128 256 384 512 640 768 896 1024; do
  row="$s"
  for r in none selective full; do
    act=$("$mixpar" plan --preset gpt2-124m --recipe fp32 --batch 4 --seq "$s" --dropout off --recompute "$r" --json |
          grep -o '"activations": {.*' | grep -o '"total": [0-9]*' | awk '{print $2}')
    row="$row $act"
  done
  echo "$row" >> "$data/seq.dat"
done

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi
gnuplot <<PLOT
set terminal $terminal size 1000,560 font ",12" noenhanced
set grid
set output "$outdir/18-memory-vs-time.png"
set xlabel "step time (s): forward + backward + optimizer, 2 cores"
set ylabel "activation peak (MiB, measured MEM_ACT)"
set key off
set offsets graph 0.12, graph 0.12, graph 0.12, graph 0.08
plot "$data/lab18/policies.dat" using 2:(\$3/1048576) with points pt 7 ps 1.8 lc rgb "#9400d3", \
     "" using 2:(\$3/1048576):1 with labels offset 0,1.1 font ",11"

set output "$outdir/18-act-vs-seq.png"
unset offsets
set xlabel "sequence length s (tokens), GPT-2 124M, fp32, batch 4"
set ylabel "activations (GiB, mixpar plan)"
set key top left
plot "$data/seq.dat" using 1:(\$2/2**30) with linespoints lw 2 pt 7 title "none", \
     "" using 1:(\$3/2**30) with linespoints lw 2 pt 7 title "selective (drop att)", \
     "" using 1:(\$4/2**30) with linespoints lw 2 pt 7 title "full (keep block inputs)"
PLOT
echo "figures: $outdir/18-memory-vs-time.png $outdir/18-act-vs-seq.png"
