#!/usr/bin/env bash
# 08-framework-policies.figures.sh: the figures of chapter 08's deck, drawn by gnuplot from real mixpar runs:
#   08-bf16-three-ways.png   the tiny GPT in bf16 asked for three ways (PyTorch, Keras, DeepSpeed): one curve
#   08-fp16-differences.png  fp16 at each framework's default scale: loss minus PyTorch's, with Keras started at 2^16
#   08-backoff.png           fp16 from 2^28: the loss scale per step of the three scalers, skipped steps marked
# Usage: slides/08-framework-policies.figures.sh OUTDIR   (needs build/mixpar: `make`). Uses the runs of `make lab08`
# (runs/lab08/*.tsv) when they are there; otherwise runs that experiment first (about a minute and a half).
source "$(dirname "$0")/figures_lib.sh"

runs=runs/lab08
need="bf16-torch bf16-keras bf16-deepspeed fp16-torch fp16-keras fp16-deepspeed fp16-keras-2e16 big-torch big-keras big-deepspeed"
for r in $need; do
    if [ ! -s "$runs/$r.tsv" ]; then labs/lab08-framework-policies/experiment.sh > /dev/null; break; fi
done
for r in $need; do [ -s "$runs/$r.tsv" ] || { echo "$0: $runs/$r.tsv is missing (make lab08 failed?)" >&2; exit 1; }; done

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
# step, Keras - PyTorch, DeepSpeed - PyTorch, Keras at 2^16 - PyTorch (the .tsv columns: step loss scale skip hash)
paste "$runs/fp16-torch.tsv" "$runs/fp16-keras.tsv" "$runs/fp16-deepspeed.tsv" "$runs/fp16-keras-2e16.tsv" |
    awk '{ printf "%d\t%.9g\t%.9g\t%.9g\n", $1, $7 - $2, $12 - $2, $17 - $2 }' > "$data/diff.tsv"

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

gnuplot <<GP
set terminal $terminal size 1000,480 font ",12"
set output "$outdir/08-bf16-three-ways.png"
set xlabel "step"
set ylabel "training loss"
set key top right
plot "$runs/bf16-torch.tsv" using 1:2 with lines lw 6 lc rgb "#bbbbbb" title "PyTorch autocast(bfloat16)", \
     "$runs/bf16-keras.tsv" using 1:2 with lines lw 2 lc rgb "#0072b2" title "Keras mixed_bfloat16", \
     "$runs/bf16-deepspeed.tsv" using 1:2 with points pt 7 ps 0.7 lc rgb "#d55e00" title "DeepSpeed bf16.enabled"

set output "$outdir/08-fp16-differences.png"
set ylabel "loss minus PyTorch's (10^{-6})"
plot "$data/diff.tsv" using 1:(\$2 * 1e6) with linespoints lw 2 pt 7 ps 0.6 lc rgb "#009e73" title "Keras (from 2^{15})", \
     "$data/diff.tsv" using 1:(\$3 * 1e6) with linespoints lw 2 pt 6 ps 0.9 lc rgb "#d55e00" title "DeepSpeed (from 2^{16})", \
     "$data/diff.tsv" using 1:(\$4 * 1e6) with lines lw 2 dt 2 lc rgb "#0072b2" title "Keras started at 2^{16}"

set output "$outdir/08-backoff.png"
set ylabel "loss scale"
set logscale y 2
set format y "2^{%L}"
set xrange [0:12]
set yrange [2**22:2**29]
plot "$runs/big-torch.tsv" using 1:3 with steps lw 2 lc rgb "#0072b2" title "PyTorch GradScaler", \
     "$runs/big-keras.tsv" using 1:(\$3 * 0.9) with steps lw 2 dt 2 lc rgb "#009e73" title "Keras LossScaleOptimizer", \
     "$runs/big-deepspeed.tsv" using 1:(\$3 * 1.1) with steps lw 2 lc rgb "#d55e00" title "DeepSpeed (hysteresis 2)", \
     "$runs/big-torch.tsv" using 1:(\$4 == 1 ? \$3 : 1/0) with points pt 7 ps 1.0 lc rgb "#0072b2" title "skipped", \
     "$runs/big-deepspeed.tsv" using 1:(\$4 == 1 ? \$3 * 1.1 : 1/0) with points pt 6 ps 1.2 lc rgb "#d55e00" notitle
GP
