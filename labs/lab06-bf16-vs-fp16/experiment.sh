#!/usr/bin/env bash
# experiment.sh: lab 06's experiment (`make lab06`): (1) running sums kept in fp32, fp16 and bf16, plain, with Kahan's
# compensation and with an fp32 accumulator: the error table and where each stalls; (2) the tiny GPT trained 150 steps
# in fp32, fp16 with dynamic loss scaling, bf16 (autocast) and bf16-pure (bf16 weights, updates rounded to nearest):
# loss curves and the final gap; (3) each format's range, and the share of a real training state (weights, Adam's m
# and v) each keeps; (4) which hardware has fp16 and bf16 math.
# Tables on stdout, figures in runs/lab06/*.png.
set -euo pipefail
cd "$(dirname "$0")/../.."

mixpar=build/mixpar
out=runs/lab06
steps=150
[ -x "$mixpar" ] || { echo "lab06: $mixpar is missing; run 'make' first (make lab06 does)" >&2; exit 2; }
mkdir -p "$out"

section() { printf '\n==== %s\n\n' "$*"; }
todo=0
# Runs a command that needs the lab's regions; while they are LAB_TODO stubs (exit 86) it says so and goes on.
needs_lab() {
    local rc=0
    "$@" || rc=$?
    if [ "$rc" -eq 86 ]; then todo=1; echo "  (this part runs once your lab 06 regions are written)"; return 0; fi
    return "$rc"
}

# 1. Swamping: a running sum that stops growing.
section "mixpar precision sum --value 0.01: 10^2 .. 10^6 addends 0.01"
needs_lab "$mixpar" precision sum --value 0.01
section "mixpar precision sum --uniform 0,0.02: the same count of random addends (mean 0.01)"
needs_lab "$mixpar" precision sum --uniform 0,0.02
section "mixpar precision sum --value 1 --n 255,256,257,1000,2048,2049,3000 --format bf16 --format fp16"
needs_lab "$mixpar" precision sum --value 1 --n 255,256,257,1000,2048,2049,3000 --format bf16 --format fp16
ns=100,200,500,1000,2000,5000,10000,20000,50000,100000,200000,500000,1000000
sums_ok=0
if "$mixpar" precision sum --value 0.01 --n $ns --tsv > "$out/sum_value.tsv.part" 2> /dev/null; then
    mv "$out/sum_value.tsv.part" "$out/sum_value.tsv"
    "$mixpar" precision sum --uniform 0,0.02 --n $ns --tsv > "$out/sum_uniform.tsv"
    sums_ok=1
else
    rm -f "$out/sum_value.tsv.part"
fi

# 2. The same model in three precisions. The runs see the same batches in the same order (same seed), so the
#    difference between their curves is the precision's alone. Single-threaded, all three at once: on two cores that
#    is faster than one two-threaded run after the other.
section "$steps steps of configs/tiny-poetry.json in fp32, fp16 (dynamic loss scaling), bf16, and bf16-pure"
# bf16-pure keeps the weights themselves in bf16 and rounds each update to nearest (stochastic_rounding false):
# the running sum of part 1, with the weight as the sum and the update as the addend.
rm -rf "$out"/{fp32,fp16,bf16,bf16-pure}
pids=()
for recipe in fp32 fp16 bf16 bf16-pure; do
    extra=()
    [ "$recipe" = fp32 ] && extra=(--set train.checkpoint_interval=$steps) # its optimizer state for part 3
    [ "$recipe" = bf16-pure ] && extra=(--set precision.stochastic_rounding=false)
    OMP_NUM_THREADS=1 "$mixpar" train --config configs/tiny-poetry.json --set precision.recipe=$recipe \
        --set train.steps=$steps --set train.eval_interval=$steps --set train.eval_batches=8 \
        --set train.sample_interval=0 --set train.checkpoint_interval=0 --set train.hist_interval=0 \
        --set train.log_interval=50 --set train.run_name=lab06-$recipe --set train.run_dir="$out/$recipe" \
        "${extra[@]}" > "$out/$recipe.log" 2>&1 &
    pids+=("$recipe:$!")
done
trained=()
for job in "${pids[@]}"; do
    recipe=${job%%:*} rc=0
    wait "${job##*:}" || rc=$?
    if [ "$rc" -eq 86 ]; then
        echo "  $recipe: waits for a lab: $(grep -m1 'not done' "$out/$recipe.log" || true)"
    elif [ "$rc" -ne 0 ]; then
        echo "lab06: the $recipe run failed (exit $rc); the end of $out/$recipe.log:" >&2
        tail -n 15 "$out/$recipe.log" >&2
        exit 1
    else
        echo "  $recipe: $(tail -n 1 "$out/$recipe.log")"
        trained+=("$recipe")
    fi
done
# loss per step, one column per run (the runs that finished)
for recipe in "${trained[@]}"; do
    awk '/"kind":"step"/ { match($0, /"step":[0-9]+/); s = substr($0, RSTART + 7, RLENGTH - 7)
                           match($0, /"loss":[-0-9.eE+]+/); print s "\t" substr($0, RSTART + 7, RLENGTH - 7) }' \
        "$out/$recipe/events.rank0.jsonl" > "$out/loss_$recipe.tsv"
done
if [ "${#trained[@]}" -gt 0 ]; then
    section "final losses (train: mean of the last 20 steps; validation: 8 batches at step $steps)"
    printf '%-10s %-12s %11s %11s %11s %11s %8s\n' recipe "loss scaler" "train loss" "gap" "val loss" "gap" skipped
    ref_train="" ref_val=""
    for recipe in "${trained[@]}"; do
        f="$out/$recipe/events.rank0.jsonl"
        read -r train val skipped prec < <(awk -v steps=$steps '
            /"kind":"run"/ { match($0, /"scaler":"[^"]*"/); sc = substr($0, RSTART + 10, RLENGTH - 11) }
            /"kind":"step"/ { match($0, /"step":[0-9]+/); s = substr($0, RSTART + 7, RLENGTH - 7) + 0
                              match($0, /"loss":[-0-9.eE+]+/); l = substr($0, RSTART + 7, RLENGTH - 7) + 0
                              match($0, /"skipped_total":[0-9]+/); sk = substr($0, RSTART + 16, RLENGTH - 16) + 0
                              if (s > steps - 20) { sum += l; n++ } }
            /"kind":"eval"/ { match($0, /"val_loss":[-0-9.eE+]+/); v = substr($0, RSTART + 11, RLENGTH - 11) + 0 }
            END { printf "%.4f %.4f %d scaler_%s\n", sum / n, v, sk, sc }' "$f")
        if [ "$recipe" = fp32 ]; then ref_train=$train ref_val=$val; fi
        gap=$([ -n "$ref_train" ] && awk -v a="$train" -v b="$ref_train" 'BEGIN { printf "%+.4f", a - b }' || echo "-")
        val_gap=$([ -n "$ref_val" ] && awk -v a="$val" -v b="$ref_val" 'BEGIN { printf "%+.4f", a - b }' || echo "-")
        printf '%-10s %-12s %11s %11s %11s %11s %8s\n' "$recipe" "${prec#scaler_}" "$train" "$gap" "$val" "$val_gap" \
            "$skipped"
    done
    echo "(gap: minus fp32's; the runs saw the same batches, so the gap is the precision's alone)"
fi

# 3. The range probe: each format's limits, then a real training state against them.
checkpoint="$out/fp32/checkpoint.safetensors"
if [ -s "$checkpoint" ]; then
    section "mixpar precision range --checkpoint $checkpoint   (the fp32 run after $steps steps)"
    needs_lab "$mixpar" precision range --checkpoint "$checkpoint"
else
    section "mixpar precision range"
    needs_lab "$mixpar" precision range
fi

# 4. Hardware. Facts with their sources (see the handout's table for the references), then this machine's own flags.
section "which hardware computes in fp16 and bf16"
cat <<'EOF'
hardware                       fp16 math                            bf16 math                              source
NVIDIA V100 (Volta)            tensor cores (fp32 accumulate)       none                                   [1]
NVIDIA A100 (Ampere)           tensor cores                         tensor cores (and TF32)                [1]
NVIDIA H100, H200 (Hopper)     tensor cores                         tensor cores (and fp8 e4m3, e5m2)      [1]
Google Cloud TPU               -                                    matmuls in bf16, fp32 accumulate       [3]
Intel Cooper Lake, Sapphire    -                                    AVX512_BF16: convert, dot -> fp32      [4]
  Rapids; AMD Zen 4
Intel Sapphire Rapids          (AMX-FP16: Granite Rapids)           AMX-BF16 tile matmul -> fp32           [5]
x86 with AVX512-FP16           fp16 arithmetic (flag avx512_fp16)   -                                      [8]
Arm                            Armv8.2-A FP16 arithmetic (optional) Armv8.6-A BF16: BFDOT, BFMMLA -> fp32  [6] [7] [10]
(sources: labs/lab06-bf16-vs-fp16/README.md, "Which hardware computes in 16 bits")
EOF
echo
echo "this machine: $(grep -m1 'model name' /proc/cpuinfo 2> /dev/null | sed 's/.*: //' || echo unknown CPU)"
flags=$(grep -m1 '^flags' /proc/cpuinfo 2> /dev/null | tr ' ' '\n' || true)
for f in f16c avx512_fp16 avx512_bf16 amx_bf16 amx_fp16; do
    if grep -qx "$f" <<<"$flags"; then echo "  $f: yes"; else echo "  $f: no"; fi
done
if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
    nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader | sed 's/^/  GPU: /; s/, / (compute capability /; s/$/)/'
else
    echo "  no NVIDIA GPU visible (nvidia-smi)"
fi
echo "(mixpar computes every format in software on the CPU, so the experiment runs anywhere; on hardware with these"
echo " instructions the same rounding happens in the arithmetic units)"

if ! command -v gnuplot > /dev/null; then
    echo "lab06: gnuplot is not installed (make deps installs it); the .tsv files in $out are the figures' input" >&2
    exit 0
fi
png_terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then png_terminal=pngcairo; fi
if [ "$sums_ok" -eq 1 ]; then
    # One curve per format and method: colour = format, dash and point = method.
    curves() {
        local file=$1 list="" fmt m color dash point
        for fmt in fp32 fp16 bf16; do
            case $fmt in fp32) color="#333333" ;; fp16) color="#d55e00" ;; *) color="#0072b2" ;; esac
            for m in rounded kahan fp32-acc; do
                [ "$fmt" = fp32 ] && [ "$m" = fp32-acc ] && continue # the same as fp32 rounded
                case $m in rounded) dash=1 point=7 ;; kahan) dash=2 point=6 ;; *) dash=3 point=4 ;; esac
                list+="${list:+, }\"$file\" using (strcol(1) eq \"$fmt\" && strcol(2) eq \"$m\" ? \$3 : 1/0):(\$7 > 1e-9 ? \$7 : 1e-9)"
                list+=" with linespoints lw 2 dt $dash pt $point ps 0.7 lc rgb \"$color\" title \"$fmt $m\""
            done
        done
        echo "$list"
    }
    gnuplot <<EOF
set terminal $png_terminal size 1200,560
set output "$out/sum_error.png"
set multiplot layout 1,2 title "relative error of a running sum of n addends, by format and method (mixpar precision sum)"
set datafile separator "\t"
set logscale xy 10
set format x "10^{%L}"
set format y "10^{%L}"
set xlabel "n (addends)"
set ylabel "|sum - exact| / exact  (0 drawn at 10^{-9})"
set yrange [1e-9:2]
set key bottom right font ",9"
set title "addends all 0.01"
plot $(curves "$out/sum_value.tsv")
set title "addends uniform in [0, 0.02)"
plot $(curves "$out/sum_uniform.tsv")
unset multiplot
EOF
fi
if [ "${#trained[@]}" -gt 0 ]; then
    # The runs against each other (fp32, when it ran, is run A): mixpar plot overlays their losses (and the
    # validation loss at step $steps) and draws each run's loss minus run A's, step by step: the gap.
    plot_runs=()
    for recipe in "${trained[@]}"; do plot_runs+=("$out/$recipe"); done
    "$mixpar" plot "${plot_runs[@]}" --out "$out" > "$out/plot.log" ||
        { echo "lab06: mixpar plot failed; see $out/plot.log" >&2; exit 1; }
fi
section "figures"
[ "$sums_ok" -eq 1 ] && echo "  $out/sum_error.png   relative error of running sums vs n, per format and method"
[ "${#trained[@]}" -gt 0 ] && echo "  $out/loss.png        loss curves of the runs (mixpar plot)"
[ "${#trained[@]}" -gt 1 ] && echo "  $out/loss_gap.png    each run's loss minus ${trained[0]}'s, step by step (mixpar plot)"
if [ "$todo" -eq 1 ]; then echo; echo "lab06: some parts need your lab 06 regions (see above); make grade LAB=06 shows which"; fi
