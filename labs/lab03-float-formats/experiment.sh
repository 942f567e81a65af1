#!/usr/bin/env bash
# experiment.sh: lab 03's experiment (`make lab03`): telling values through every format, the format table,
# and a figure of where each format's values lie and how far apart they are (runs/lab03/spacing.png).
set -euo pipefail
cd "$(dirname "$0")/../.."

mixpar=build/mixpar
out=runs/lab03
mkdir -p "$out"
[ -x "$mixpar" ] || { echo "lab03: $mixpar is missing; run 'make' first (make lab03 does)" >&2; exit 2; }

section() { printf '\n==== %s\n\n' "$*"; }

# 1. Values that tell a story: 0.1 and 1/3 are not exact in binary; 65504 is fp16's largest value and 65520 the
#    first to overflow; 1e-8 underflows fp16 (a typical small gradient) while 6e-8 survives as a subnormal;
#    3.0e38 fits bf16 but nothing 8-bit; 1e-40 is below fp32's normal range.
#    The fp16 and bf16 rows are your fp/half.c (--lab03); the other formats come from the core's generic encoder.
values=(0.1 0.333333333 65504 65520 1e-8 6e-8 3.0e38 1e-40)
section "mixpar float --lab03 ${values[*]}"
rc=0
"$mixpar" float --lab03 "${values[@]}" 2>"$out/float.err" || rc=$?
if [ "$rc" -eq 86 ]; then
    echo "  (the fp16 and bf16 rows run your fp/half.c: $(grep -o 'lab 03 not done: [^ ]* [^ ]*' "$out/float.err" | head -1);"
    echo "   write lab 03's regions. Meanwhile the other formats:)"
    "$mixpar" float --format fp32 --format tf32 --format e4m3 --format e5m2 "${values[@]}"
elif [ "$rc" -ne 0 ]; then
    cat "$out/float.err" >&2; exit "$rc"
fi

# 2. The formats side by side: bits, bias, range, epsilon.
section "mixpar float --formats"
"$mixpar" float --formats

# 3. Every positive finite value of each format with its relative spacing (ulp / value).
section "relative spacing of every positive finite value (mixpar float --spacing FORMAT)"
# fp16 and bf16 are decoded by your fp16_to_float and bf16_to_float (--lab03).
stubs=0
for format in fp16 bf16 e4m3 e5m2; do
    rc=0
    "$mixpar" float --lab03 --spacing "$format" > "$out/spacing_$format.dat" 2>"$out/float.err" || rc=$?
    if [ "$rc" -eq 86 ]; then
        printf '  %-5s waits for your decoder: %s\n' "$format" "$(grep -o 'lab 03 not done: [^ ]* [^ ]*' "$out/float.err" | head -1)"
        rm -f "$out/spacing_$format.dat"; stubs=1; continue
    elif [ "$rc" -ne 0 ]; then
        cat "$out/float.err" >&2; exit "$rc"
    fi
    printf '  %-5s %6d positive finite values -> %s\n' "$format" \
        "$(grep -vc '^#' "$out/spacing_$format.dat")" "$out/spacing_$format.dat"
done
if [ "$stubs" -eq 1 ]; then
    echo "lab03: the figure needs every format's values; it is drawn once lab 03's decode regions are written"
    exit 0
fi

if ! command -v gnuplot > /dev/null; then
    echo "lab03: gnuplot is not installed (make deps installs it); the data files above are the figure's input" >&2
    exit 0
fi

# The png terminal: pngcairo when this gnuplot has it, else libgd's png.
png_terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then png_terminal=pngcairo; fi

# The lower panel, shared by the png and the text rendering: relative spacing against value. fp32 is drawn as
# the function 2^(floor(log2 x) - 23) / x (its 2^31 values would be too many points). $1 and $2 are the tick
# label formats (the png terminal understands 10^{-40}, the text one does not).
spacing_plot() {
    cat <<EOF
set logscale x 10
set logscale y 2
set format x "$1"
set format y "$2"
set xrange [1e-42:1e40]
set yrange [2.0**-25:1.5]
set xlabel "value"
set ylabel "relative spacing (ulp / value)"
set key top right
set samples 4000
fp32(x) = x >= 2.0**-126 ? 2.0**(floor(log(x)/log(2)) - 23) / x : 2.0**-149 / x
plot "$out/spacing_fp16.dat" using 1:2 with lines lw 2 lc rgb "#9400d3" title "fp16", \\
     "$out/spacing_bf16.dat" using 1:2 with lines lw 2 lc rgb "#009e73" title "bf16", \\
     "$out/spacing_e4m3.dat" using 1:2 with lines lw 2 lc rgb "#56b4e9" title "e4m3", \\
     "$out/spacing_e5m2.dat" using 1:2 with lines lw 2 lc rgb "#e69f00" title "e5m2", \\
     fp32(x) with lines lw 1 lc "black" title "fp32"
EOF
}

gnuplot <<EOF
set terminal $png_terminal size 1200,1000
set output "$out/spacing.png"
set multiplot layout 2,1 title "Where each format's positive values lie, and how far apart they are (mixpar float --spacing)"
# Top: the number line. One row per format, a mark at every representable positive value.
set logscale x 10
set format x "10^{%L}"
set xrange [1e-42:1e40]
set yrange [0.5:4.5]
set ytics ("e4m3" 1, "e5m2" 2, "fp16" 3, "bf16" 4)
set xlabel "value (log scale)"
set title "representable values"
unset key
plot "$out/spacing_e4m3.dat" using 1:(1) with points pt 7 ps 0.3 lc rgb "#56b4e9", \\
     "$out/spacing_e5m2.dat" using 1:(2) with points pt 7 ps 0.3 lc rgb "#e69f00", \\
     "$out/spacing_fp16.dat" using 1:(3) with points pt 7 ps 0.3 lc rgb "#9400d3", \\
     "$out/spacing_bf16.dat" using 1:(4) with points pt 7 ps 0.3 lc rgb "#009e73"
# Bottom: the relative spacing. The flat bands are the normal ranges (between 2^-p-1 and 2^-p for p mantissa
# bits); the rising left edges are the subnormals, which lose precision as they shrink.
set ytics auto
set title "relative spacing: flat band = normal range, rising left edge = subnormals"
$(spacing_plot "10^{%L}" "2^{%L}")
unset multiplot
EOF
echo "  figure: $out/spacing.png"

section "relative spacing (text rendering of the lower panel of $out/spacing.png)"
gnuplot <<EOF
set terminal dumb size 110,34
$(spacing_plot "1e%L" "2^%L")
EOF
