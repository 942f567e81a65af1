#!/usr/bin/env bash
# 01-course-intro.figures.sh OUTDIR: the chapter 01 figures, drawn by gnuplot from `mixpar plan --tsv` output:
#   lab01-zero-stages.png     memory per rank by category for ZeRO stages 0-3 (llama-1b, 8 ranks)
#   lab01-presets.png         model states vs activations per preset (one rank, log scale)
#   lab01-act-vs-seq.png      activation bytes of llama-1b against sequence length, per recompute policy
source "$(dirname "$0")/figures_lib.sh"
out=$outdir
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# TSV columns (see `mixpar plan --help`): 1 model 4 zero 7 seq 8 recompute 10 params
#                                         11 param 12 grad 13 master 14 optim 15 act 16 total (bytes)
"$mixpar" plan --preset llama-1b --zero all --world 8 --tsv >"$tmp/stages.tsv"
gnuplot <<EOF
set terminal pngcairo size 900,540 font "Sans,12"
set output "$out/lab01-zero-stages.png"
set title "llama-1b, bf16-mixed + AdamW, b = 1, s = 2048: memory per rank over N = 8 ranks"
set ylabel "GB per rank (10^9 bytes)"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.6
set key outside right top
set grid ytics
set yrange [0:*]
set xtics ("ZeRO-0" 0, "ZeRO-1" 1, "ZeRO-2" 2, "ZeRO-3" 3)
plot "$tmp/stages.tsv" using (\$11/1e9) title "param", '' using (\$12/1e9) title "grad", \
     '' using (\$13/1e9) title "master", '' using (\$14/1e9) title "optim", '' using (\$15/1e9) title "act"
EOF

"$mixpar" plan --presets --tsv >"$tmp/presets.tsv"
gnuplot <<EOF
set terminal pngcairo size 900,540 font "Sans,12"
set output "$out/lab01-presets.png"
set title "One rank, bf16-mixed + AdamW, micro-batch 1 at full context"
set ylabel "GB (log scale)"
set logscale y
set yrange [0.1:10000]
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set key left top
set grid ytics
set xtics rotate by -20
set arrow from graph 0, first 24 to graph 1, first 24 nohead dt 2 lw 2
set label "24 GB card" at graph 0.01, first 30
set arrow from graph 0, first 1000 to graph 1, first 1000 nohead dt 3
set label "1 TB" at graph 0.01, first 1250
plot "$tmp/presets.tsv" using ((\$11+\$12+\$13+\$14)/1e9):xtic(1) title "model states", \
     '' using (\$15/1e9) title "activations"
EOF

for seq in 256 512 1024 2048 4096 8192; do
  for policy in none selective full; do
    "$mixpar" plan --preset llama-1b --seq "$seq" --recompute "$policy" --tsv | tail -n 1
  done
done >"$tmp/seq.tsv"
gnuplot <<EOF
set terminal pngcairo size 900,540 font "Sans,12"
set output "$out/lab01-act-vs-seq.png"
set title "llama-1b activations, b = 1, bf16: the a*s^2*b score terms grow with s squared"
set xlabel "sequence length s (tokens)"
set ylabel "activation GB"
set logscale x 2
set key left top
set grid
plot "< grep -P '\\\\tnone\\\\t' $tmp/seq.tsv" using 7:(\$15/1e9) with linespoints lw 2 title "no recompute", \
     "< grep -P '\\\\tselective\\\\t' $tmp/seq.tsv" using 7:(\$15/1e9) with linespoints lw 2 title "selective", \
     "< grep -P '\\\\tfull\\\\t' $tmp/seq.tsv" using 7:(\$15/1e9) with linespoints lw 2 title "full"
EOF
echo "figures: $out/lab01-zero-stages.png $out/lab01-presets.png $out/lab01-act-vs-seq.png"
