#!/usr/bin/env bash
# 14-launching.figures.sh: the figure of chapter 14's deck, from running lab 14's gallery of broken launches:
#   14-gallery.png  seconds from the launch to the message, per gallery entry (every one ends with exit 2),
#                   against the default MIXPAR_COMM_TIMEOUT of 300 s that a silent hang would otherwise cost
# Usage: slides/14-launching.figures.sh OUTDIR   (needs build/mixpar and mpirun; `make` first)
source "$(dirname "$0")/figures_lib.sh"

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
export OMP_NUM_THREADS=1
: > "$data/gallery.dat"
for entry in labs/lab14-launching/gallery/[0-9][0-9]-*.sh; do
    name=$(basename "$entry" .sh)
    t0=$(date +%s.%N)
    rc=0
    timeout 60 "$entry" > /dev/null 2>&1 || rc=$?
    t1=$(date +%s.%N)
    [ "$rc" -eq 2 ] || { echo "$0: $name exited $rc, expected 2" >&2; exit 1; }
    awk -v n="${name#[0-9][0-9]-}" -v a="$t0" -v b="$t1" 'BEGIN { printf "\"%s\" %.2f\n", n, b - a }' >> "$data/gallery.dat"
done

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

gnuplot <<PLOT
set terminal $terminal size 1000,460 font ",12"
set output "$outdir/14-gallery.png"
set style fill solid 0.8
set boxwidth 0.6
set yrange [0:*]
set offsets 0, 0, 1.2, 0
set termoption noenhanced
set grid y
set ylabel "seconds from launch to message (exit 2)"
set xtics rotate by -25
set key top left inside
set label 1 "a hang waits MIXPAR_COMM_TIMEOUT = 300 s by default" at graph 0.42, graph 0.93
plot "$data/gallery.dat" using 0:2:xtic(1) with boxes lc rgb "#0072b2" title "time to the message", \
     "" using 0:(\$2 + 0.2):(sprintf("%.2f s", \$2)) with labels notitle
PLOT
echo "wrote $outdir/14-gallery.png"
