#!/usr/bin/env bash
# experiment.sh: lab 19's experiment (`make lab19`): DDP, ZeRO-1, ZeRO-2 and ZeRO-3 on 2 and 4 real ranks, the
# same model and global batch: per-rank memory by tag against the planner's (2+2+K)Psi/N-style prediction, the
# bytes each rank sends per step against 2 Psi / 3 Psi, and the losses against DDP's. Under two minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."

mixpar=build/mixpar
out=runs/lab19
steps=${STEPS:-10}
mkdir -p "$out"
[ -x "$mixpar" ] || { echo "lab19: $mixpar is missing; run 'make' first (make lab19 does)" >&2; exit 2; }
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive

# One run: NAME RANKS STAGE. Synthetic addition widened to 8 blocks (GPT-2, C 64: Psi = 402944; 8 buckets of one
# block each, so stage 2's in-flight buckets are a small part of the gradients), AdamW in fp32, global batch 32
# rows (32/N per rank, so every N sees the same data), buckets of 20000 elements for stage 2.
train() {
    local name=$1 n=$2 stage=$3
    rm -rf "$out/$name"
    "$mixpar" run -n "$n" -- "$mixpar" train --config configs/synthetic-addition.json --quiet --set model.layers=8 --set train.steps="$steps" \
        --set scheduler.params.total_steps="$steps" --set scheduler.params.warmup_steps=2 --set train.eval_interval=0 \
        --set train.sample_interval=0 --set train.hist_interval=0 --set train.checkpoint_interval=0 \
        --set train_micro_batch_size_per_gpu=$((32 / n)) --set zero_optimization.stage="$stage" \
        --set zero_optimization.reduce_bucket_size=20000 --set zero_optimization.overlap_comm=true \
        --set train.run_dir="$out/$name" > "$out/$name.log" 2>&1
}
tag() { grep -o "\"$2\":{[^}]*}" "$1" | tail -n 1 | grep -o "\"$3\":[0-9]*" | cut -d: -f2; }
losses() { grep '"kind":"step"' "$1" | grep -o '"loss":[^,]*' | cut -d: -f2; }

printf '\n==== 1. memory per rank (rank 0, KiB) and bytes per step, %d steps; fp32 AdamW: 4 + 4 + 8 bytes per parameter\n\n' "$steps"
printf '%-6s %-6s | %8s %8s %8s | %8s %8s %8s | %6s | %12s %7s | %s\n' ranks stage param grad optim "plan p" "plan g" \
    "plan o" ratio "sent/step" "x Psi" "max |loss - DDP's|"
for n in 2 4; do
    for stage in 0 1 2 3; do
        name=n$n-stage$stage
        if ! train "$name" "$n" "$stage"; then
            if grep -m1 "not done" "$out/$name.log"; then echo "lab19: this run waits for that region"; continue; fi
            echo "lab19: run $name failed:"; head -n 8 "$out/$name.log"; exit 1
        fi
        ev=$out/$name/events.rank0.jsonl
        psi=$(head -n 1 "$ev" | grep -o '"params":[0-9]*' | cut -d: -f2)
        p=$(tag "$ev" peak param) g=$(tag "$ev" peak grad) o=$(tag "$ev" peak optim)
        pp=$(tag "$ev" plan param) pg=$(tag "$ev" plan grad) po=$(tag "$ev" plan optim)
        sent=$(grep '"kind":"step"' "$ev" | tail -n +2 | grep -o '"comm_bytes":[0-9]*' | cut -d: -f2 | awk '{s+=$1} END {printf "%.0f", s/NR}')
        # Bytes per step in units of (N-1)/N x 4 Psi: what one bandwidth-optimal all-gather or reduce-scatter sends.
        unit=$(awk -v n="$n" -v psi="$psi" 'BEGIN { print (n - 1) / n * 4 * psi }')
        diff=$(paste <(losses "$out/n$n-stage0/events.rank0.jsonl") <(losses "$ev") |
               awk '{d=$1-$2; if (d<0) d=-d; if (d>m) m=d} END {printf "%.1e", m}')
        printf '%-6s %-6s | %8.1f %8.1f %8.1f | %8.1f %8.1f %8.1f | %6.3f | %12s %7.3f | %s\n' "$n" "$stage" \
            "$(awk -v x="$p" 'BEGIN{print x/1024}')" "$(awk -v x="$g" 'BEGIN{print x/1024}')" \
            "$(awk -v x="$o" 'BEGIN{print x/1024}')" "$(awk -v x="$pp" 'BEGIN{print x/1024}')" \
            "$(awk -v x="$pg" 'BEGIN{print x/1024}')" "$(awk -v x="$po" 'BEGIN{print x/1024}')" \
            "$(awk -v a=$((p + g + o)) -v b=$((pp + pg + po)) 'BEGIN{print a/b}')" "$sent" \
            "$(awk -v s="$sent" -v u="$unit" 'BEGIN{print s/u}')" "$diff"
    done
done
cat <<'NOTE'
(param, grad, optim: the run's peak bytes per tag on rank 0 (MEM_PARAM, MEM_GRAD, MEM_OPTIM); plan: the planner's
 bytes for that stage and N, the ZeRO paper's formulas with 4 + 4 + 8 bytes (fp32 weights, fp32 gradients, AdamW's
 m and v); ratio: measured / planned model states. x Psi: bytes sent per step / ((N-1)/N x 4 Psi): 2 for DDP's
 allreduce and ZeRO-1/2's reduce-scatter + all-gather, just under 3 for ZeRO-3 (its root unit is gathered once).
 Stage 2's gradients: the shard plus the buckets in flight, about two (core/dist/zero.h), over the planner's shard.)
NOTE

printf '\n==== 2. the same formulas at scale: mixpar plan, GPT-2 1.5B, fp16-mixed (2 + 2 + 12 bytes), 64 ranks\n\n'
"$mixpar" plan --preset gpt2-1.5b --recipe fp16-mixed --zero all --world 64 | sed -n '3,10p'
echo
echo "lab19: results in $out/ (one run folder per row: events.rank<R>.jsonl)"
