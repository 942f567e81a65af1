#!/usr/bin/env bash
# experiment.sh: lab 27's experiment (`make lab27`): one tiny job written four ways (a DeepSpeed JSON, Megatron-LM
# arguments, FSDP's arguments, Horovod's settings: the files beside this script), each translated by
# `mixpar config translate` and trained on 2 real ranks for 30 steps; the four loss columns side by side, the fused
# allreduce count of the Horovod run (N gradient tensors -> M fused calls), and the frameworks table generated from
# the translators' own tables. Under a minute on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."

mixpar=build/mixpar
lab=labs/lab27-frameworks
out=runs/lab27
mkdir -p "$out"
[ -x "$mixpar" ] || { echo "lab27: $mixpar is missing; run 'make' first (make lab27 does)" >&2; exit 2; }
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive

needs_lab() { # WHAT LOG: a command that stopped at a stub (exit 86): which lab's region, from its own message
    echo "lab27: $1 waits for a region: $(grep -m1 -o 'lab [0-9]* not done: [^"]*' "$2" || echo "see $2")"
}

frameworks=(deepspeed megatron fsdp horovod)
files=(job-deepspeed.json job-megatron.txt job-fsdp.txt job-horovod.env)
echo "== 1. translate: the same job four ways (mixpar config translate --from F FILE --base job-base.json --world 2)"
blocked=0
for i in 0 1 2 3; do
    f=${frameworks[$i]}
    if "$mixpar" config translate --from "$f" "$lab/${files[$i]}" --base "$lab/job-base.json" --world 2 \
        -o "$out/$f.json" > "$out/$f.translate.log" 2>&1; then :; else
        rc=$?
        if [ "$rc" = 86 ]; then needs_lab "translating $f" "$out/$f.translate.log"; blocked=1; continue; fi
        echo "lab27: translating $f failed:"; cat "$out/$f.translate.log"; exit 1
    fi
    sed 's/^/  /' "$out/$f.translate.log"
done

echo
echo "== 2. train each translation on 2 ranks, 30 steps"
train() {
    local f=$1
    rm -rf "${out:?}/$f"
    if ! "$mixpar" run -n 2 -- "$mixpar" train --config "$out/$f.json" --quiet --set train.run_dir="$out/$f" \
        > "$out/$f.train.log" 2>&1; then
        if grep -q "not done" "$out/$f.train.log"; then
            needs_lab "training the $f translation" "$out/$f.train.log"
            return 1
        fi
        echo "lab27: training $f failed:"; head -n 12 "$out/$f.train.log"; exit 1
    fi
}
trained=()
for f in "${frameworks[@]}"; do
    [ -f "$out/$f.json" ] || continue
    if train "$f"; then trained+=("$f"); fi
done
losses() { grep '"kind":"step"' "$out/$1/events.rank0.jsonl" | grep -o '"loss":[^,]*' | cut -d: -f2; }
if [ "${#trained[@]}" -gt 0 ]; then
    for f in "${trained[@]}"; do losses "$f" > "$out/$f.loss"; done
    printf '%5s' step; for f in "${trained[@]}"; do printf ' %12s' "$f"; done; printf ' %12s\n' "max |diff|"
    paste $(for f in "${trained[@]}"; do echo "$out/$f.loss"; done) |
        awk '{ m = 0; for (i = 2; i <= NF; i++) { d = $i - $1; if (d < 0) d = -d; if (d > m) m = d }
               if (NR % 5 == 0 || NR == 1) { printf "%5d", NR; for (i = 1; i <= NF; i++) printf " %12.7f", $i; printf " %12.1e\n", m }
               if (m > worst) worst = m }
             END { printf "largest difference over all steps: %.1e\n", worst }' | tee "$out/losses.txt"
    {
        echo "# step ${trained[*]}"
        paste $(for f in "${trained[@]}"; do echo "$out/$f.loss"; done) | awk '{ printf "%d", NR; for (i = 1; i <= NF; i++) printf " %s", $i; printf "\n" }'
    } > "$out/losses.dat"
    echo "(DeepSpeed stage 0, Megatron-LM data parallel and Horovod all allreduce each gradient element once: a + b on 2"
    echo " ranks, the same bits in any grouping. FSDP FULL_SHARD reduce-scatters and gathers the same sums: it matches too"
    echo " unless its optimizer step on a shard rounds differently.)"
fi

echo
echo "== 3. Horovod's fusion: gradients -> fused allreduce calls per step (comm events of rank 0)"
if [ -f "$out/horovod/events.rank0.jsonl" ] && [ -f "$out/deepspeed/events.rank0.jsonl" ]; then
    per_step() { awk '/"kind":"comm"/ && /"op":"allreduce"/ { n++ } /"kind":"step"/ { s++ } END { printf "%d", n / s }' "$1"; }
    ds=$(per_step "$out/deepspeed/events.rank0.jsonl"); hv=$(per_step "$out/horovod/events.rank0.jsonl")
    fused=$((hv - ds + 1))
    # Threshold 0 is fusion off: one allreduce per gradient tensor, so its count is the model's tensors.
    rm -rf "${out:?}/horovod-off"
    if "$mixpar" run -n 2 -- "$mixpar" train --config "$out/horovod.json" --quiet --set train.steps=3 \
        --set communication.fusion_threshold=0 --set train.run_dir="$out/horovod-off" > "$out/horovod-off.log" 2>&1; then
        ntensors=$(($(per_step "$out/horovod-off/events.rank0.jsonl") - ds + 1))
    else
        ntensors="?"
    fi
    echo "  HOROVOD_FUSION_THRESHOLD=0 (fusion off): $ntensors allreduce calls per step, one per gradient tensor"
    echo "  DeepSpeed/DDP bucket of 5e8 elements: 1 gradient allreduce per step"
    echo "  Horovod, HOROVOD_FUSION_THRESHOLD=16384 bytes: $ntensors gradients -> $fused fused allreduce calls per step"
    echo "  (each step also allreduces the loss: $ds and $hv allreduce events per step in all)"
    echo "  mixpar trace $out/horovod  (Perfetto) shows the fused calls, one per buffer, on the comm track"
else
    echo "  (needs the DeepSpeed and Horovod runs above)"
fi

echo
echo "== 4. the frameworks table (mixpar config frameworks: generated from the translators' tables)"
"$mixpar" config frameworks | tee "$out/frameworks.txt"
"$mixpar" config frameworks --tsv > "$out/frameworks.tsv"

if [ "${#trained[@]}" -gt 0 ] && command -v gnuplot > /dev/null; then
    cols=""
    i=2
    for f in "${trained[@]}"; do cols="$cols${cols:+, }'$out/losses.dat' using 1:$i with linespoints title '$f'"; i=$((i + 1)); done
    gnuplot -e "set terminal pngcairo size 800,480; set output '$out/losses.png'; set xlabel 'step'; set ylabel 'loss';
                set title 'one job, four frameworks (2 ranks)'; plot $cols" && echo "figure: $out/losses.png"
fi
[ "$blocked" = 0 ] || exit 0
