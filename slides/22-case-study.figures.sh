#!/usr/bin/env bash
# 22-case-study.figures.sh: the figure of chapter 22's deck, drawn by gnuplot from real mixpar output:
#   22-resume-loss.png   the loss of a 2-rank bf16 ZeRO-2 run, uninterrupted, and the same run killed with SIGKILL
#                        and resumed from its checkpoint (labs/lab22-case-study/experiment.sh, mixpar train)
# Usage: slides/22-case-study.figures.sh OUTDIR   (needs build/mixpar: `make`). Uses the runs of `make lab22` when
# they are there; otherwise runs the experiment first (about a minute).
source "$(dirname "$0")/figures_lib.sh"

out=runs/lab22
if [ ! -s "$out/full.tsv" ] || [ ! -s "$out/killed.segments.tsv" ]; then
    labs/lab22-case-study/experiment.sh > /dev/null
fi
# The checkpoint the resume started from, and the last step logged before the kill: from the runs themselves.
resume_from=$(awk -F'\t' 'NR > 1 && $1 <= prev { print $1 - 1; exit } { prev = $1 }' "$out/killed.all.tsv")
killed_at=$(awk -F'\t' 'NR > 1 && $1 <= prev { print prev; exit } { prev = $1 }' "$out/killed.all.tsv")

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

gnuplot <<GP
set terminal $terminal size 1000,520 font ",12"
set output "$outdir/22-resume-loss.png"
set xlabel "step"
set ylabel "training loss"
set grid
set key at graph 0.45, graph 0.97
set arrow from $resume_from, graph 0 to $resume_from, graph 1 nohead dt 3 lc rgb "#999999"
set arrow from $killed_at, graph 0 to $killed_at, graph 1 nohead dt 2 lc rgb "#d55e00"
set label "checkpoint" at $resume_from + 1, graph 0.95
set label "SIGKILL" at $killed_at + 1, graph 0.88 tc rgb "#d55e00"
plot "$out/full.tsv" using 1:2 with lines lw 3 lc rgb "#000000" title "uninterrupted", \
     "$out/killed.segments.tsv" index 0 using 1:2 with points pt 7 ps 0.6 lc rgb "#d55e00" title "killed run, before the kill", \
     "$out/killed.segments.tsv" index 1 using 1:2 with points pt 6 ps 1.0 lc rgb "#0072b2" title "resumed from the checkpoint"
GP
echo "$outdir/22-resume-loss.png"
