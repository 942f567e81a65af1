#!/usr/bin/env bash
# 03-float-formats.figures.sh: the figures of chapter 03's deck, from `mixpar float --spacing`, drawn by gnuplot:
#   03-spacing.png     relative spacing (ulp / value) of every positive fp16, bf16, e4m3, e5m2 value; fp32 as a line
#   03-range.png       every positive finite value of each format on one log axis (dynamic range)
#   03-numberline.png  the e4m3 and e5m2 values in [0, 4] on a linear axis (steps double at each power of two)
# Usage: slides/03-float-formats.figures.sh OUTDIR   (run from anywhere; needs build/mixpar: `make`)
source "$(dirname "$0")/figures_lib.sh"

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
for format in fp16 bf16 e4m3 e5m2; do "$mixpar" float --spacing "$format" > "$data/$format.dat"; done

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

# One colour per format in every figure.
gnuplot <<EOF
set terminal $terminal size 1000,560 font ",12"
fp16_color = "#9400d3"; bf16_color = "#009e73"; e4m3_color = "#56b4e9"; e5m2_color = "#e69f00"

set output "$outdir/03-spacing.png"
set logscale x 10
set logscale y 2
set format x "10^{%L}"
set format y "2^{%L}"
set xrange [1e-42:1e40]
set yrange [2.0**-25:1.5]
set xlabel "value"
set ylabel "relative spacing (ulp / value)"
set key top right
set samples 4000
fp32(x) = x >= 2.0**-126 ? 2.0**(floor(log(x)/log(2)) - 23) / x : 2.0**-149 / x
plot "$data/fp16.dat" using 1:2 with lines lw 2 lc rgb fp16_color title "fp16 (5 exp, 10 mant)", \
     "$data/bf16.dat" using 1:2 with lines lw 2 lc rgb bf16_color title "bf16 (8, 7)", \
     "$data/e4m3.dat" using 1:2 with lines lw 2 lc rgb e4m3_color title "e4m3 (4, 3)", \
     "$data/e5m2.dat" using 1:2 with lines lw 2 lc rgb e5m2_color title "e5m2 (5, 2)", \
     fp32(x) with lines lw 1 lc "black" title "fp32 (8, 23)"

set output "$outdir/03-range.png"
unset logscale y
set format y "%g"
set yrange [0.5:4.5]
set ytics ("e4m3" 1, "e5m2" 2, "fp16" 3, "bf16" 4)
set xlabel "value (log scale)"
unset ylabel
unset key
plot "$data/e4m3.dat" using 1:(1) with points pt 7 ps 0.4 lc rgb e4m3_color, \
     "$data/e5m2.dat" using 1:(2) with points pt 7 ps 0.4 lc rgb e5m2_color, \
     "$data/fp16.dat" using 1:(3) with points pt 7 ps 0.4 lc rgb fp16_color, \
     "$data/bf16.dat" using 1:(4) with points pt 7 ps 0.4 lc rgb bf16_color

set output "$outdir/03-numberline.png"
unset logscale x
set format x "%g"
set xrange [-0.05:4.1]
set xtics 0.5
set yrange [0:3]
set ytics ("e5m2" 1, "e4m3" 2)
set xlabel "value (linear scale)"
set grid xtics
plot "$data/e5m2.dat" using 1:(1):(0):(0.35) with vectors nohead lw 2 lc rgb e5m2_color, \
     "$data/e4m3.dat" using 1:(2):(0):(0.35) with vectors nohead lw 2 lc rgb e4m3_color, \
     "+" using (0):(1):(0):(0.35) every ::0::0 with vectors nohead lw 2 lc rgb e5m2_color, \
     "+" using (0):(2):(0):(0.35) every ::0::0 with vectors nohead lw 2 lc rgb e4m3_color
EOF
echo "03-float-formats figures: $outdir/03-spacing.png $outdir/03-range.png $outdir/03-numberline.png"
