#!/usr/bin/env bash
# experiment.sh: lab 04's experiment (`make lab04`): the tiny GPT (configs/tiny-poetry.json) for 60 steps in fp32 and
# in fp16 with no loss scale, a static scale of 1024, the static scale chosen from the fp32 run's gradient histogram
# (your amp_scale_choose) and PyTorch's dynamic scaler: the share of gradients fp16 flushes to zero per layer, the
# exponent histograms against fp16's range, the final losses. Tables on stdout, figures in runs/lab04/*.png (the
# run-against-run ones drawn by `mixpar plot`).
set -euo pipefail
cd "$(dirname "$0")/../.."

mixpar=build/mixpar
out=runs/lab04
steps=60
[ -x "$mixpar" ] || { echo "lab04: $mixpar is missing; run 'make' first (make lab04 does)" >&2; exit 2; }
mkdir -p "$out"

section() { printf '\n==== %s\n\n' "$*"; }

# Each run trains single-threaded, two at a time: on two cores that is faster than one two-threaded run after the
# other. A run's output goes to runs/lab04/NAME.log; its events to runs/lab04/NAME/events.rank0.jsonl.
train() {
    local name=$1
    shift
    OMP_NUM_THREADS=1 "$mixpar" train --config configs/tiny-poetry.json --set train.steps=$steps \
        --set train.hist_interval=10 --set train.eval_interval=0 --set train.sample_interval=0 \
        --set train.checkpoint_interval=0 --set train.log_interval=20 --set train.run_name="lab04-$name" \
        --set train.run_dir="$out/$name" "$@" > "$out/$name.log" 2>&1
}
# Waits for the runs started in the background; a run that stopped at a lab region that is not written yet
# (exit 86) is reported with the message it printed. Other failures stop the experiment.
waiting_for_labs=0
wait_runs() {
    local failed=0
    for job in "$@"; do
        local name=${job%%:*} pid=${job##*:} rc=0
        wait "$pid" || rc=$?
        if [ "$rc" -eq 86 ]; then
            waiting_for_labs=1
            echo "  $name: needs a lab that is not done yet: $(grep -m1 'not done' "$out/$name.log" || true)"
        elif [ "$rc" -ne 0 ]; then
            echo "  $name failed (exit $rc); the end of $out/$name.log:" >&2
            tail -n 15 "$out/$name.log" >&2
            failed=1
        else
            echo "  $name: $(tail -n 1 "$out/$name.log")"
        fi
    done
    [ "$failed" -eq 0 ] || exit 1
}
ran() { [ -s "$out/$1/events.rank0.jsonl" ] && grep -q '"kind":"step".*"step":'$steps'[,}]' "$out/$1/events.rank0.jsonl"; }

section "$steps steps of configs/tiny-poetry.json: fp32, and fp16 with no loss scale (static scale 1)"
rm -rf "$out"/{fp32,scale1,static1024,chosen,dynamic}
train fp32 --set precision.recipe=fp32 &
j1=$!
train scale1 --set precision.recipe=fp16 --set precision.loss_scaler=static --set precision.init_scale=1 &
j2=$!
wait_runs "fp32:$j1" "scale1:$j2"
ran fp32 || { echo "lab04: the fp32 run did not finish; the rest needs it" >&2; exit 0; }

section "a static scale from the fp32 run's gradients at step 1: mixpar precision choose-scale"
rc=0
"$mixpar" precision choose-scale "$out/fp32/events.rank0.jsonl" --margin 1 || rc=$?
if [ "$rc" -eq 86 ]; then
    echo "lab04: choose-scale needs your lab 04 regions (make grade LAB=04 says which); the fp16 runs follow without it" >&2
    chosen=
else
    [ "$rc" -eq 0 ] || exit "$rc"
    chosen=$("$mixpar" precision choose-scale "$out/fp32/events.rank0.jsonl" --margin 1 --scale-only)
fi

section "fp16 with a static scale of 1024${chosen:+, the chosen static scale $chosen,} and PyTorch's dynamic scaler"
jobs_started=()
train static1024 --set precision.recipe=fp16 --set precision.loss_scaler=static --set precision.init_scale=1024 &
jobs_started+=("static1024:$!")
if [ -n "$chosen" ]; then
    train chosen --set precision.recipe=fp16 --set precision.loss_scaler=static --set precision.init_scale="$chosen" &
    jobs_started+=("chosen:$!")
fi
wait_runs "${jobs_started[@]}"
train dynamic --set precision.recipe=fp16 --set precision.loss_scaler=pytorch &
wait_runs "dynamic:$!"

fp16_runs=()
for r in scale1 static1024 chosen dynamic; do ran "$r" && fp16_runs+=("$r"); done
if [ "${#fp16_runs[@]}" -eq 0 ]; then
    echo
    echo "lab04: no fp16 run finished: they need labs 05 and 07 (the loss scaler's unscale and the AMP step)."
    echo "Until then: build/mixpar amp underflow $out/fp32/events.rank0.jsonl (what fp16 would flush, from the"
    echo "fp32 run's histograms) and build/mixpar viz --replay $out/fp32 (the underflow panel)."
    exit 0
fi
events=()
for r in "${fp16_runs[@]}"; do events+=("$out/$r/events.rank0.jsonl"); done

section "the share of the gradients entering each matmul that fp16 flushed to zero, over all $steps steps"
"$mixpar" precision flushed "${events[@]}"
"$mixpar" precision flushed --tsv "${events[@]}" > "$out/flushed.tsv"
"$mixpar" precision flushed --steps "${events[@]}" > "$out/flushed_steps.tsv"

section "the runs side by side (loss: mean of the last 10 steps)"
printf '%-11s %-26s %10s %8s %10s\n' run "precision" "loss" skipped "final S"
for r in fp32 "${fp16_runs[@]}"; do
    f="$out/$r/events.rank0.jsonl"
    awk -v run="$r" -v steps=$steps '
        /"kind":"run"/ { match($0, /"recipe":"[^"]*"/); recipe = substr($0, RSTART + 10, RLENGTH - 11)
                         match($0, /"scaler":"[^"]*"/); scaler = substr($0, RSTART + 10, RLENGTH - 11) }
        /"kind":"step"/ { match($0, /"step":[0-9]+/); s = substr($0, RSTART + 7, RLENGTH - 7) + 0
                          match($0, /"loss":[-0-9.eE+]+/); l = substr($0, RSTART + 7, RLENGTH - 7) + 0
                          match($0, /"skipped_total":[0-9]+/); sk = substr($0, RSTART + 16, RLENGTH - 16) + 0
                          match($0, /"next_scale":[-0-9.eE+]+/); sc = substr($0, RSTART + 13, RLENGTH - 13) + 0
                          if (s > steps - 10) { sum += l; n++ } }
        END { printf "%-11s %-26s %10.4f %8d %10s\n", run, recipe " / " scaler, sum / n, sk, scaler == "none" ? "-" : sprintf("%g", sc) }' "$f"
done

section "the underflow panel of the unscaled run: mixpar viz --snapshot $out/scale1 --panel underflow"
if ran scale1; then
    "$mixpar" viz --snapshot "$out/scale1" --panel underflow --width 110 --height 30 --no-color --ascii || true
fi
echo "(replay any run in the terminal: build/mixpar viz --replay $out/<run>; the underflow panel is the second)"

# Exponent histograms of the last recorded step, as each run recorded them (at its own scale: what fp16 saw).
for r in "${fp16_runs[@]}"; do "$mixpar" amp underflow "$out/$r/events.rank0.jsonl" --step last --bins > "$out/bins_$r.tsv"; done

if ! command -v gnuplot > /dev/null; then
    echo "lab04: gnuplot is not installed (make deps installs it); the .tsv files in $out are the figures' input" >&2
    exit 0
fi
# The runs against each other (fp32 is run A): mixpar plot overlays their losses, each fp16 run's gap to fp32,
# the loss scales, and what fp16 really flushed per layer and over the steps (rounding events; fp32 has none).
section "the runs overlaid: mixpar plot fp32 ${fp16_runs[*]} --out $out"
plot_runs=("$out/fp32")
for r in "${fp16_runs[@]}"; do plot_runs+=("$out/$r"); done
"$mixpar" plot "${plot_runs[@]}" --out "$out" | grep -v '^wrote ' || true

# Exponent histograms against fp16's range: not an overlay mixpar plot draws (each run at its own scale).
png_terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then png_terminal=pngcairo; fi
colors=("#d55e00" "#e69f00" "#0072b2" "#009e73")
hists=""
for i in "${!fp16_runs[@]}"; do
    r=${fp16_runs[$i]}
    c=${colors[$i]}
    hists+="${hists:+, }\"$out/bins_$r.tsv\" using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc rgb \"$c\" title \"$r\""
done
gnuplot <<EOF
set terminal $png_terminal size 1100,900
set datafile separator "\t"
set output "$out/histograms.png"
set title "gradient exponent histograms at step $steps as fp16 saw them (each run at its own scale)"
set logscale y 10
set format y "10^{%L}"
set yrange [0.8:*]
set xrange [-50:20]
set xlabel "binade (floor(log2|g * S|))"
set ylabel "gradients"
set key at graph 0.02, graph 0.86 left Left reverse
set arrow from -25, graph 0 to -25, graph 1 nohead dt 2 lc rgb "#999999"
set arrow from -14, graph 0 to -14, graph 1 nohead dt 2 lc rgb "#999999"
set arrow from 16, graph 0 to 16, graph 1 nohead dt 2 lc rgb "#cc0000"
set label "below 2^{-25}: flushed" at -25, graph 0.95 right offset -0.5,0
set label "2^{-14}: smallest normal" at -14, graph 0.88 left offset 0.5,0
set label "2^{16}: overflow" at 16, graph 0.95 right offset -0.5,0
plot $hists
EOF
section "figures"
echo "  $out/flushed.png        the share fp16 flushed to zero per layer, per run (mixpar plot)"
echo "  $out/flushed_steps.png  the same over the steps, all layers (mixpar plot)"
echo "  $out/loss.png  $out/loss_gap.png  $out/loss_scale.png   losses, the gap to fp32, the scales (mixpar plot)"
echo "  $out/histograms.png     the exponent histograms against fp16's range"
if [ "$waiting_for_labs" -eq 1 ]; then echo; echo "lab04: some runs wait for later labs (see above)"; fi
