#!/usr/bin/env bash
# experiment.sh: lab 07's experiment (`make lab07`): the tiny GPT of configs/tiny-poetry.json trained end to end
# with fp16 AMP and gradient clipping at 1.0, its dynamic loss scaler started far too high (2^28) so that the
# first steps overflow and are skipped while the scale comes down, and probing upwards every 25 clean steps;
# beside it the same run in fp32. Prints the first steps (scale, skipped, grad_norm, loss) from the runs' "step"
# events and a comparison of the two loss curves; draws runs/lab07/amp_training.png (loss and scale against the
# step). The two runs train at once, one thread each: under two minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."

mixpar=build/mixpar
out=runs/lab07
steps=${STEPS:-200}
init_scale=${INIT_SCALE:-268435456} # 2^28
growth=${GROWTH:-25}
mkdir -p "$out"
[ -x "$mixpar" ] || { echo "lab07: $mixpar is missing; run 'make' first (make lab07 does)" >&2; exit 2; }

section() { printf '\n==== %s\n\n' "$*"; }
common=(--config configs/tiny-poetry.json --quiet --set train.steps="$steps" --set train.threads=1
        --set train.eval_interval="$steps" --set train.sample_interval=0 --set train.checkpoint_interval=0
        --set train.hist_interval=0)
fp16_sets=(--set precision.recipe=fp16 --set precision.loss_scaler=pytorch --set precision.init_scale="$init_scale"
           --set precision.growth_interval="$growth")

# The step events of a run as tab-separated columns (a missing key is "-"):
#   step loss grad_norm scale next_scale skipped found_inf_local lr
steps_tsv() {
    awk 'BEGIN { n = split("step loss grad_norm scale next_scale skipped found_inf_local lr", key, " ") }
         /"kind":"step"/ {
             line = ""
             for (i = 1; i <= n; i++) {
                 v = "-"
                 if (match($0, "\"" key[i] "\":(\"[^\"]*\"|[^,}]*)")) {
                     v = substr($0, RSTART + length(key[i]) + 3, RLENGTH - length(key[i]) - 3)
                     gsub(/"/, "", v)
                 }
                 line = line (i > 1 ? "\t" : "") v
             }
             print line
         }' "$1"
}

section "$mixpar train --config configs/tiny-poetry.json: fp16 AMP (scaler from 2^28, growth every $growth clean steps) and fp32, $steps steps each, at once"
echo "  fp16: ${fp16_sets[*]}"
for run in fp16 fp32; do rm -rf "${out:?}/$run"; done
"$mixpar" train "${common[@]}" "${fp16_sets[@]}" --set train.run_name=lab07-fp16 --set train.run_dir="$out/fp16" \
    > "$out/fp16.log" 2>&1 &
pid16=$!
"$mixpar" train "${common[@]}" --set precision.recipe=fp32 --set train.run_name=lab07-fp32 \
    --set train.run_dir="$out/fp32" > "$out/fp32.log" 2>&1 &
pid32=$!
rc16=0 rc32=0
wait "$pid16" || rc16=$?
wait "$pid32" || rc32=$?
[ "$rc32" -eq 0 ] || { cat "$out/fp32.log" >&2; echo "lab07: the fp32 run failed (needs labs 01 and 02)" >&2; exit "$rc32"; }
if [ "$rc16" -eq 86 ]; then
    grep -m1 "not done" "$out/fp16.log" || true
    echo "lab07: the fp16 run stops in the AMP step: write the LAB 07 region (make grade LAB=07 says what is missing)"
    exit 0
fi
[ "$rc16" -eq 0 ] || { cat "$out/fp16.log" >&2; exit "$rc16"; }
steps_tsv "$out/fp16/events.rank0.jsonl" > "$out/fp16.tsv"
steps_tsv "$out/fp32/events.rank0.jsonl" > "$out/fp32.tsv"

section "the first 16 steps of the fp16 run (from its step events), with the fp32 run's loss and norm beside them"
paste "$out/fp16.tsv" "$out/fp32.tsv" | awk -F'\t' '
    BEGIN { printf "%5s %12s %12s %8s %10s %8s %10s %10s %10s\n", "step", "scale", "next_scale", "skipped",
            "grad_norm", "clipped", "loss", "fp32 loss", "fp32 norm" }
    NR <= 16 {
        clipped = ($6 == "true") ? "-" : ($3 > 1.0 ? "yes" : "no")
        printf "%5d %12.0f %12.0f %8s %10s %8s %10.4f %10.4f %10.4f\n", $1, $4, $5, ($6 == "true" ? "yes" : "no"),
               ($6 == "true" ? "nan" : sprintf("%.4f", $3)), clipped, $2, $10, $11 }'
echo "(grad_norm: the global L2 norm of the unscaled gradients, before clipping at 1.0; a skipped step has none)"

section "the whole run: skipped steps, the scale, and the loss against fp32"
awk -F'\t' -v steps="$steps" '
    FNR == 1 { file++ }
    file == 1 { skipped += ($6 == "true"); if ($6 == "true") last_skip = $1; scale = $5; l16[$1] = $2;
                if ($1 > steps - 20) { s16 += $2; n16++ } }
    file == 2 { l32[$1] = $2; if ($1 > steps - 20) { s32 += $2; n32++ } }
    END {
        for (s = 21; s <= steps; s++) { d = l16[s] - l32[s]; if (d < 0) d = -d; if (d > maxd) { maxd = d; at = s } }
        printf "fp16: %d of %d steps skipped (the last at step %d); scale at the end %.0f (2^%d)\n", skipped, steps,
               last_skip, scale, log(scale) / log(2) + 0.5
        printf "mean loss over the last 20 steps: fp16 %.4f, fp32 %.4f (difference %+.4f)\n", s16 / n16, s32 / n32,
               s16 / n16 - s32 / n32
        printf "largest |loss fp16 - loss fp32| at one step after warmup: %.4f (step %d)\n", maxd, at
    }' "$out/fp16.tsv" "$out/fp32.tsv"
for run in fp16 fp32; do
    val=$(grep '"kind":"eval"' "$out/$run/events.rank0.jsonl" | tail -n 1 | sed -E 's/.*"val_loss":([^,}]*).*/\1/')
    printf 'validation loss after %d steps, %s: %s\n' "$steps" "$run" "$val"
done

if ! command -v gnuplot > /dev/null; then
    echo "lab07: gnuplot is not installed (make deps installs it); $out/fp16.tsv and $out/fp32.tsv are the figure's data" >&2
    exit 0
fi
png_terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then png_terminal=pngcairo; fi
gnuplot <<EOF
set terminal $png_terminal size 1100,800
set output "$out/amp_training.png"
set datafile separator "\t"
set multiplot layout 2,1 title "The tiny GPT, fp16 AMP with clipping at 1.0 (scaler from 2^{28}) against fp32: $steps steps"
set key top right
set ylabel "training loss"
set grid
plot "$out/fp32.tsv" using 1:2 with lines lw 2 lc rgb "#999999" title "fp32", \
     "$out/fp16.tsv" using 1:2 with lines lw 1.5 lc rgb "#0072b2" title "fp16 AMP", \
     "$out/fp16.tsv" using 1:(strcol(6) eq "true" ? \$2 : 1/0) with points pt 7 ps 1 lc rgb "#d55e00" title "skipped (overflow)"
set ylabel "loss scale"
set xlabel "step"
set logscale y 2
set format y "2^{%L}"
plot "$out/fp16.tsv" using 1:4 with steps lw 2 lc rgb "#0072b2" title "scale the step ran at", \
     "$out/fp16.tsv" using 1:(strcol(6) eq "true" ? \$4 : 1/0) with points pt 7 ps 1 lc rgb "#d55e00" title "skipped: scale halves"
unset multiplot
EOF
section "figure"
echo "  $out/amp_training.png   loss (fp16 AMP and fp32) and the loss scale against the step, skipped steps marked"
