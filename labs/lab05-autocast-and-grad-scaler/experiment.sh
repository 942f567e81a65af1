#!/usr/bin/env bash
# experiment.sh: lab 05's experiment (`make lab05`): the autocast policy table, loss-scaler traces (PyTorch and
# DeepSpeed on the same overflow pattern), and a real measurement: the tiny GPT's gradients from a short fp32 run,
# and what fp16 would do to them with and without a loss scale of 2^16. Figures: runs/lab05/*.png.
set -euo pipefail
cd "$(dirname "$0")/../.."

mixpar=build/mixpar
out=runs/lab05
mkdir -p "$out"
[ -x "$mixpar" ] || { echo "lab05: $mixpar is missing; run 'make' first (make lab05 does)" >&2; exit 2; }

section() { printf '\n==== %s\n\n' "$*"; }
# Runs a command that needs the lab's regions; while they are still LAB_TODO stubs (exit 86) it says so and the
# experiment goes on (the measurement in part 3 does not need them). Any other failure stops the experiment.
# The note names the region that stopped it: the DeepSpeed scaler's hysteresis is lab 09's, not lab 05's. It goes
# to stderr, so a part whose output is redirected to a file still says it on the terminal.
todo=0 waiting=0
needs_lab() {
    local rc=0 err
    err=$(mktemp)
    "$@" 2>"$err" || rc=$?
    waiting=0
    if [ "$rc" -eq 86 ]; then
        todo=1 waiting=1
        echo "  (this part waits for $(grep -m1 -o '^lab [0-9]* not done: .*' "$err" | sed 's/^lab \([0-9]*\) not done: /lab \1: /'), still a stub)" >&2
        rm -f "$err"; return 0
    fi
    cat "$err" >&2; rm -f "$err"
    return "$rc"
}

# 1. Which op runs in which precision, for every recipe; then one recipe explained.
section "mixpar amp policy"
needs_lab "$mixpar" amp policy
section "mixpar amp policy --recipe fp16"
needs_lab "$mixpar" amp policy --recipe fp16

# 2. The dynamic scaler step by step: 2000 clean steps grow the scale, overflows halve it and are skipped.
section "mixpar amp scaler-trace --kind pytorch \"C*2000 O C*5 O O O\""
needs_lab "$mixpar" amp scaler-trace --kind pytorch "C*2000 O C*5 O O O"
section "mixpar amp scaler-trace --kind deepspeed \"C*1000 O C*5 O O O\"   (hysteresis 2, window 1000: lab 09)"
needs_lab "$mixpar" amp scaler-trace --kind deepspeed "C*1000 O C*5 O O O"

# A longer timeline for the figure: long clean stretches, an isolated overflow, then a burst of them (a loss
# spike), then calm again. The same pattern through both scalers.
timeline="C*2500 O C*3000 O C*1200 (O C*3)*4 O O O C*4500"
section "the same overflow pattern through both scalers ($out/timeline_*.tsv)"
timeline_ok=1
for kind in pytorch deepspeed; do
    rm -f "$out/timeline_$kind.tsv"
    needs_lab "$mixpar" amp scaler-trace --kind "$kind" --tsv "$timeline" > "$out/timeline_$kind.tsv.part"
    if [ "$waiting" -eq 0 ] && [ -s "$out/timeline_$kind.tsv.part" ]; then
        mv "$out/timeline_$kind.tsv.part" "$out/timeline_$kind.tsv"
    else
        rm -f "$out/timeline_$kind.tsv.part"
        timeline_ok=0
    fi
done
for kind in pytorch deepspeed; do
    [ -s "$out/timeline_$kind.tsv" ] || continue
    awk -F'\t' -v k="$kind" '!/^#/ {n++; s += $4; last = $5} END {printf "  %-9s %5d steps, %3d skipped, final scale %.9g\n", k, n, s, last}' \
        "$out/timeline_$kind.tsv"
done

# 3. A real measurement. A short fp32 run of configs/tiny-poetry.json writes per-layer gradient exponent
#    histograms ("hist" events) every 10 steps; mixpar amp underflow reads them and shifts the bins by 16 binades
#    to see the same gradients under a loss scale of 2^16.
section "a 30-step fp32 run of configs/tiny-poetry.json with gradient histograms every 10 steps"
rc=0
"$mixpar" train --config configs/tiny-poetry.json --set train.steps=30 --set train.hist_interval=10 \
    --set train.run_name=lab05 --set train.run_dir="$out/run" --set train.eval_interval=0 \
    --set train.sample_interval=0 --set train.checkpoint_interval=0 --set train.log_interval=10 || rc=$?
if [ "$rc" -eq 86 ]; then
    echo "lab05: the trainer needs labs 01, 02 and 04 done (see the message above); the measurement is skipped" >&2
    exit 0
fi
[ "$rc" -eq 0 ] || exit "$rc"
events="$out/run/events.rank0.jsonl"
section "mixpar amp underflow $events --step first"
"$mixpar" amp underflow "$events" --step first
section "mixpar amp underflow $events   (the last step)"
"$mixpar" amp underflow "$events"
"$mixpar" amp underflow "$events" --tsv > "$out/underflow.tsv"
"$mixpar" amp underflow "$events" --bins > "$out/bins.tsv"

if ! command -v gnuplot > /dev/null; then
    echo "lab05: gnuplot is not installed (make deps installs it); the .tsv files above are the figures' input" >&2
    exit 0
fi
png_terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then png_terminal=pngcairo; fi

# Figure 1: the loss scale over the steps, skipped steps marked.
[ "$timeline_ok" -eq 1 ] && gnuplot <<EOF
set terminal $png_terminal size 1100,600
set output "$out/scale_timeline.png"
set title "Loss scale over the steps: the same overflow pattern through PyTorch's GradScaler and DeepSpeed's scaler"
set xlabel "step"
set ylabel "loss scale (log2)"
set logscale y 2
set format y "2^{%L}"
set key below
set datafile separator "\t"
plot "$out/timeline_pytorch.tsv" using 1:3 with steps lw 2 lc rgb "#0072b2" title "pytorch (x2 after 2000 clean, x0.5 on overflow)", \
     "$out/timeline_deepspeed.tsv" using 1:3 with steps lw 2 dt 2 lc rgb "#d55e00" title "deepspeed (window 1000, hysteresis 2)", \
     "$out/timeline_pytorch.tsv" using 1:(\$4 == 1 ? \$3 : 1/0) with points pt 7 ps 0.8 lc rgb "#0072b2" title "skipped (pytorch)", \
     "$out/timeline_deepspeed.tsv" using 1:(\$4 == 1 ? \$3 * 1.15 : 1/0) with points pt 6 ps 0.9 lc rgb "#d55e00" title "skipped (deepspeed)"
EOF

# Figure 2: per layer, the share of nonzero gradients that fp16 flushes to zero or keeps only as subnormals, at scale 1
# and at 2^16; and the exponent histograms with fp16's range, as recorded and shifted by 16 binades.
gnuplot <<EOF
set terminal $png_terminal size 1200,1000
set output "$out/underflow.png"
set multiplot layout 2,1 title "The tiny GPT's gradients in fp16, without and with a loss scale of 2^{16} (mixpar amp underflow)"
set datafile separator "\t"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "share of nonzero gradients (%, log scale)"
set logscale y 10
set yrange [0.001:100]
set key top right
set title "fp16 subnormal (fewer than 11 significant bits) and flushed to zero, per layer"
plot "$out/underflow.tsv" using 4:xtic(1) title "subnormal at scale 1" lc rgb "#e69f00", \
     "" using 3 title "flushed at scale 1" lc rgb "#d55e00", \
     "" using 6 title "subnormal at 2^{16}" lc rgb "#56b4e9", \
     "" using 5 title "flushed at 2^{16}" lc rgb "#0072b2"
set style data linespoints
set title "exponent histogram of all gradients: as recorded, and moved up 16 binades by the scale"
set xlabel "binade (floor(log2|g|))"
set ylabel "gradients"
set yrange [0.8:*]
set xrange [-60:20]
set arrow from -24, graph 0 to -24, graph 1 nohead dt 2 lc rgb "#999999"
set arrow from -14, graph 0 to -14, graph 1 nohead dt 2 lc rgb "#999999"
set arrow from 16, graph 0 to 16, graph 1 nohead dt 2 lc rgb "#cc0000"
set label "fp16 smallest subnormal 2^{-24}" at -24, graph 0.95 right offset -0.5,0
set label "smallest normal 2^{-14}" at -14, graph 0.88 left offset 0.5,0
set label "overflow 2^{16}" at 16, graph 0.95 right offset -0.5,0
plot "$out/bins.tsv" using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc rgb "#e69f00" title "scale 1", \
     "$out/bins.tsv" using (\$1+16):2 with linespoints lw 2 pt 7 ps 0.6 lc rgb "#0072b2" title "scale 2^{16}"
unset multiplot
EOF
section "figures"
[ "$timeline_ok" -eq 1 ] && echo "  $out/scale_timeline.png   the loss scale over the steps, skipped steps marked"
echo "  $out/underflow.png        fp16 underflow per layer, with and without a scale; the exponent histogram"
if [ "$todo" -eq 1 ]; then echo; echo "lab05: some parts wait for regions that are still stubs (named above); make grade LAB=05 checks yours"; fi
