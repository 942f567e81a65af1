#!/usr/bin/env bash
# experiment.sh: lab 17's experiment (`make lab17`): fp16 AMP under data parallel on 2 MPI ranks.
#   1. A rank-local overflow with the fix: `mixpar train` on 2 ranks with MIXPAR_INJECT_INF=1:5 (an inf in rank 1's
#      averaged gradients at step 5) and MIXPAR_PARAM_HASH=1: both ranks skip step 5 and their weights' hashes stay
#      equal. Table: step, scale, found_inf and skipped per rank, both hashes.
#   2. The same overflow without the fix: the lab's driver (build/labs/lab17_worker, a tiny GPT under DDP and the
#      same AMP step) with found_inf_comm = NULL, so each rank trusts its own flag: the hashes part at step 5 and
#      never meet again. The driver with the agreement, for contrast, stays identical.
#   3. The gradients are reduced while still scaled; the DDP communication hooks fp16 and bf16 send them in 16
#      bits and average them with your part A (amp_reduce_mean16): bytes each rank sends per step and the final
#      loss, fp32 allreduce vs fp16 vs bf16 (plus an fp32 run). Until part A is written those two rows say so.
#   4. Why the unscale comes after the reduction: what fp16 on the wire would flush if the gradients were unscaled
#      first (`mixpar amp underflow` on the fp16-hook run's gradient histograms, at scale 1 and at the run's scale).
# Under two minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."

mixpar=build/mixpar
worker=build/labs/lab17_worker
out=runs/lab17
steps=${STEPS:-80}
micro=${MICRO:-8}
mkdir -p "$out"
[ -x "$mixpar" ] || { echo "lab17: $mixpar is missing; run 'make' first (make lab17 does)" >&2; exit 2; }
make -s "$worker"

section() { printf '\n==== %s\n\n' "$*"; }
# The step events of a run as tab-separated columns (a missing key is "-"):
#   step loss grad_norm scale next_scale skipped found_inf_local param_hash comm_bytes
steps_tsv() {
    awk 'BEGIN { n = split("step loss grad_norm scale next_scale skipped found_inf_local param_hash comm_bytes", key, " ") }
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
yesno() { [ "$1" = true ] || [ "$1" = 1 ] && echo yes || echo no; }
train_base=(--config configs/tiny-poetry.json --quiet --set train_micro_batch_size_per_gpu="$micro"
            --set train.eval_interval=0 --set train.sample_interval=0 --set train.checkpoint_interval=0
            --set train.hist_interval=0)
# Runs `mixpar train` on 2 ranks into $out/NAME; on a LAB_TODO stub (exit 86) says which region and returns 1.
train2() {
    local name=$1; shift
    rm -rf "${out:?}/$name"
    local rc=0
    "$mixpar" run -n 2 -- "$mixpar" train "${train_base[@]}" "$@" --set train.run_name="lab17-$name" \
        --set train.run_dir="$out/$name" > "$out/$name.log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        if grep -q "not done" "$out/$name.log"; then
            grep -m1 "not done" "$out/$name.log"
            echo "  ($name does not run until that region is written)"
            return 1
        fi
        cat "$out/$name.log" >&2
        exit "$rc"
    fi
}

# ---------------------------------------------------------------- 1. with the fix
section "1. MIXPAR_INJECT_INF=1:5 MIXPAR_PARAM_HASH=1 $mixpar run -n 2 -- $mixpar train --config configs/tiny-poetry.json --set precision.recipe=fp16 (10 steps)"
if MIXPAR_INJECT_INF=1:5 MIXPAR_PARAM_HASH=1 train2 inject --set precision.recipe=fp16 --set train.steps=10 \
       --set scheduler.params.warmup_steps=2; then
    steps_tsv "$out/inject/events.rank0.jsonl" > "$out/inject.rank0.tsv"
    steps_tsv "$out/inject/events.rank1.jsonl" > "$out/inject.rank1.tsv"
    printf '%5s %8s %11s %11s %9s %9s %18s %18s %s\n' step scale "inf rank0" "inf rank1" "skip r0" "skip r1" \
        "rank0 param_hash" "rank1 param_hash" ""
    paste "$out/inject.rank0.tsv" "$out/inject.rank1.tsv" | while IFS=$'\t' read -r s _ _ sc _ sk0 f0 h0 _ _ _ _ _ _ sk1 f1 h1 _; do
        printf '%5s %8.0f %11s %11s %9s %9s %18s %18s %s\n' "$s" "$sc" "$(yesno "$f0")" "$(yesno "$f1")" "$(yesno "$sk0")" \
            "$(yesno "$sk1")" "$h0" "$h1" "$([ "$h0" = "$h1" ] && echo same || echo DIFFERENT)"
    done
    echo "(inf rankN: that rank's own found_inf; skip: the agreed decision; hashes: FNV-1a of the weights after the step)"
fi

# ---------------------------------------------------------------- 2. without it
section "2. the same overflow without the agreement: $mixpar run -n 2 -- $worker run DIR 10 1:5 local"
drv=$out/driver
for mode in local agreed; do
    rm -rf "${drv:?}-$mode" && mkdir -p "$drv-$mode"
    opt=(); [ "$mode" = local ] && opt=(local)
    if ! "$mixpar" run -n 2 -- "$worker" run "$drv-$mode" 10 1:5 "${opt[@]}" > "$drv-$mode.log" 2>&1; then
        grep -m1 "not done" "$drv-$mode.log" || tail -n 5 "$drv-$mode.log"
        echo "  (the driver runs the AMP step: lab 07's region; the agreement is lab 17's)"
        continue
    fi
    if [ "$mode" = local ]; then
        printf '%5s %8s %8s %11s %11s %9s %9s %18s %18s\n' step "scale r0" "scale r1" "inf rank0" "inf rank1" "skip r0" \
            "skip r1" "rank0 params" "rank1 params"
        paste -d' ' <(sed 1d "$drv-$mode/rank0.txt") <(sed 1d "$drv-$mode/rank1.txt") | tr '=' ' ' |
            awk '{ printf "%5s %8s %8s %11s %11s %9s %9s %18s %18s %s\n", $2, $8, $22, ($6 ? "yes" : "no"),
                   ($20 ? "yes" : "no"), ($4 ? "yes" : "no"), ($18 ? "yes" : "no"), $14, $28,
                   ($14 == $28 ? "same" : "DIFFERENT") }'
        echo "(found_inf_comm = NULL: rank 1 skips step 5 and halves its scale; rank 0 steps. From then on the ranks"
        echo " average gradients scaled by different S and unscale each by its own: the replicas drift for good.)"
    else
        differ=$(paste -d' ' <(sed 1d "$drv-$mode/rank0.txt") <(sed 1d "$drv-$mode/rank1.txt") | tr '=' ' ' |
                 awk '$14 != $28' | wc -l)
        echo "with the agreement (found_inf_comm = the world): both ranks skip step 5; steps with different hashes: $differ of 10"
    fi
done

# ---------------------------------------------------------------- 3. 16-bit communication
section "3. fp16 AMP on 2 ranks, $steps steps, micro-batch $micro per rank: communication.hook allreduce / fp16 / bf16"
printf '%-22s %12s %7s %11s %17s %s\n' run bytes/step ratio final_loss "max |loss-fp32|" replicas | tee "$out/hooks.txt"
plain="" reference=""
for spec in "fp32, allreduce|precision.recipe=fp32 communication.hook=allreduce" \
            "fp16 AMP, allreduce|precision.recipe=fp16 communication.hook=allreduce" \
            "fp16 AMP, fp16 hook|precision.recipe=fp16 communication.hook=fp16 train.hist_interval=$steps" \
            "fp16 AMP, bf16 hook|precision.recipe=fp16 communication.hook=bf16"; do
    label=${spec%%|*}
    name=$(echo "$label" | tr -d ' ,' | tr 'A-Z' 'a-z')
    sets=(--set train.steps="$steps" --set scheduler.params.total_steps="$steps")
    for kv in ${spec#*|}; do sets+=(--set "$kv"); done
    MIXPAR_PARAM_HASH=1 train2 "$name" "${sets[@]}" || continue
    ev0=$out/$name/events.rank0.jsonl ev1=$out/$name/events.rank1.jsonl
    steps_tsv "$ev0" > "$out/$name.tsv"
    bytes=$(awk -F'\t' 'NR == 2 { print $9 }' "$out/$name.tsv")
    [ -n "$plain" ] || plain=$bytes
    [ -n "$reference" ] || reference=$out/$name.tsv
    final=$(awk -F'\t' '{ l[NR] = $2 } END { for (i = NR - 9; i <= NR; i++) s += l[i]; printf "%.6f", s / 10 }' "$out/$name.tsv")
    gap=$(paste "$out/$name.tsv" "$reference" | awk -F'\t' '{ d = $2 - $11; if (d < 0) d = -d; if (d > m) m = d }
                                                         END { printf "%.2e", m }')
    same=$(cmp -s <(grep -o '"param_hash":"[0-9a-f]*"' "$ev0") <(grep -o '"param_hash":"[0-9a-f]*"' "$ev1") &&
           echo identical || echo DIFFER)
    printf '%-22s %12s %7s %11s %17s %s\n' "$label" "$bytes" "$(awk -v a="$bytes" -v b="$plain" 'BEGIN { printf "%.3f", a / b }')" \
        "$final" "$gap" "$same" | tee -a "$out/hooks.txt"
done
echo "(bytes/step: what one rank sent averaging one step's gradients, the step events' comm_bytes; final_loss: mean"
echo " of the last 10 steps; max |loss-fp32|: the largest gap to the fp32 run's loss at the same step. The hooks"
echo " average the still-scaled gradients S*g, which the scaler keeps in fp16's range; replicas: the two ranks'"
echo " param_hash equal after every step.)"

# ---------------------------------------------------------------- 4. unscale after the reduction
ev=$out/fp16ampfp16hook/events.rank0.jsonl
if [ -s "$ev" ] && grep -q '"kind":"hist"' "$ev"; then
    section "4. what fp16 on the wire keeps: the gradients at the run's scale (as sent) and unscaled (at scale 1)"
    "$mixpar" amp underflow "$ev" --scale 1 | tee "$out/underflow.txt"
    echo
    echo "(the columns @2^0 are what a 16-bit allreduce would do to gradients unscaled BEFORE the reduction; the"
    echo " recorded columns, at the run's scale, what it does to the scaled gradients DDP actually sends)"
fi
