#!/usr/bin/env bash
# experiment.sh: lab 20's experiment (`make lab20`): FSDP's strategies on 4 real ranks (FULL_SHARD, SHARD_GRAD_OP,
# NO_SHARD, HYBRID_SHARD in groups of 2) against DDP: memory per rank by tag, the peak of communication buffers
# (gathered units), bytes per step, step time and the losses; then forward/backward prefetch and
# limit_all_gathers on FULL_SHARD; the bytes held as each block starts (the worker's probe); and the
# visualizer's memory and comm panels of the FULL_SHARD run. Under two minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."

mixpar=build/mixpar
worker=build/labs/lab20_worker
out=runs/lab20
steps=${STEPS:-8}
mkdir -p "$out"
[ -x "$mixpar" ] || { echo "lab20: $mixpar is missing; run 'make' first (make lab20 does)" >&2; exit 2; }
make -s "$worker"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive

# One run on 4 ranks: NAME, then --set overrides. Synthetic addition with 4 blocks (Psi = 203008), AdamW fp32,
# micro-batch 8 per rank.
train() {
    local name=$1; shift
    rm -rf "$out/$name"
    if ! "$mixpar" run -n 4 -- "$mixpar" train --config configs/synthetic-addition.json --quiet --set train.steps="$steps" \
        --set scheduler.params.total_steps="$steps" --set scheduler.params.warmup_steps=2 --set train.eval_interval=0 \
        --set train.sample_interval=0 --set train.hist_interval=0 --set train.checkpoint_interval=0 \
        --set train_micro_batch_size_per_gpu=8 --set model.layers=4 --set train.run_dir="$out/$name" "$@" \
        > "$out/$name.log" 2>&1; then
        if grep -m1 "not done" "$out/$name.log"; then return 1; fi
        echo "lab20: run $name failed:"; head -n 8 "$out/$name.log"; exit 1
    fi
}
tag() { grep -o "\"$2\":{[^}]*}" "$1" | tail -n 1 | grep -o "\"$3\":[0-9]*" | cut -d: -f2; }
kib() { awk -v x="${1:-0}" 'BEGIN { printf "%.1f", x / 1024 }'; }
mean_field() { grep '"kind":"step"' "$1" | tail -n +2 | grep -o "\"$2\":[0-9.e+-]*" | cut -d: -f2 | awk '{s+=$1} END {print NR ? s/NR : 0}'; }
losses() { grep '"kind":"step"' "$1" | grep -o '"loss":[^,]*' | cut -d: -f2; }
# Mean step time (ms) after the first: from a step's forward start to its optimizer end.
step_ms() {
    awk '/"kind":"span"/ { match($0, /"step":[0-9]+/); s = substr($0, RSTART + 7, RLENGTH - 7) + 0
           match($0, /"t0":[0-9.e+-]+/); t0 = substr($0, RSTART + 5, RLENGTH - 5)
           match($0, /"t1":[0-9.e+-]+/); t1 = substr($0, RSTART + 5, RLENGTH - 5)
           if ($0 ~ /"name":"forward"/) a[s] = t0; if ($0 ~ /"name":"optimizer"/) b[s] = t1 }
         END { for (s in b) if (s > 1 && (s in a)) { t += b[s] - a[s]; n++ } printf "%.1f", n ? 1e3 * t / n : 0 }' "$1"
}
row() {
    local label=$1 name=$2 ev=$out/$2/events.rank0.jsonl
    local psi unit
    psi=$(head -n 1 "$ev" | grep -o '"params":[0-9]*' | cut -d: -f2)
    unit=$(awk -v p="$psi" 'BEGIN { print 3 / 4 * 4 * p }') # one bandwidth-optimal collective of the model, N = 4
    local diff
    diff=$(paste <(losses "$out/ddp/events.rank0.jsonl") <(losses "$ev") | awk '{d=$1-$2; if (d<0) d=-d; if (d>m) m=d} END {printf "%.1e", m}')
    printf '%-28s | %7s %7s %7s | %9s | %6.2f %6.2f %6.2f | %7s | %s\n' "$label" "$(kib "$(tag "$ev" peak param)")" \
        "$(kib "$(tag "$ev" peak grad)")" "$(kib "$(tag "$ev" peak optim)")" "$(kib "$(tag "$ev" peak comm)")" \
        "$(awk -v x="$(mean_field "$ev" gather_bytes)" -v u="$unit" 'BEGIN { print x / u }')" \
        "$(awk -v x="$(mean_field "$ev" reduce_bytes)" -v u="$unit" 'BEGIN { print x / u }')" \
        "$(awk -v x="$(mean_field "$ev" comm_bytes)" -v u="$unit" 'BEGIN { print x / u }')" "$(step_ms "$ev")" "$diff"
}
header() {
    printf '%-28s | %7s %7s %7s | %9s | %6s %6s %6s | %7s | %s\n' "$1" param grad optim "peak comm" gather reduce total \
        step_ms "max |loss - DDP's|"
}

printf '\n==== 1. strategies on 4 ranks, %d steps (rank 0; KiB; bytes per step in units of 3/4 x 4 Psi)\n\n' "$steps"
train ddp --set zero_optimization.stage=0 || { echo "lab20: DDP (lab 13) must run first"; exit 1; }
header strategy
row "DDP" ddp
for s in FULL_SHARD SHARD_GRAD_OP NO_SHARD HYBRID_SHARD; do
    train "$s" --set fsdp.sharding_strategy="$s" --set fsdp.hybrid_shard_size=2 || { echo "lab20: $s waits for that region"; continue; }
    row "$s" "$s"
done
cat <<'NOTE'
(param, grad, optim: the shards a rank keeps (MEM_PARAM, MEM_GRAD, MEM_OPTIM); peak comm: the most bytes of
 gathered units, unreduced gradient spans and their staging held at once (MEM_COMM); gather, reduce: bytes sent
 per step. FULL_SHARD gathers every block twice (forward, backward): 2 + 1 = 3 minus the root's second gather;
 SHARD_GRAD_OP keeps blocks from forward to backward: 1 + 1; NO_SHARD is DDP (allreduce: 2); HYBRID_SHARD gathers
 and reduce-scatters inside a group of 2 and all-reduces the shards across the 2 groups.)
NOTE

printf '\n==== 2. FULL_SHARD on 4 ranks: prefetch and limit_all_gathers\n\n'
header "fwd / bwd / limit"
for fwd in false true; do
    for bwd in NONE BACKWARD_PRE; do
        for limit in true false; do
            [ "$fwd" = false ] && [ "$bwd" = NONE ] && [ "$limit" = false ] && continue # no prefetch: the limit is moot
            name=pf-$fwd-$bwd-$limit
            train "$name" --set fsdp.sharding_strategy=FULL_SHARD --set fsdp.forward_prefetch="$fwd" \
                --set fsdp.backward_prefetch="$bwd" --set fsdp.limit_all_gathers="$limit" || continue
            row "$fwd / $bwd / $limit" "$name"
        done
    done
done

printf '\n==== 3. bytes gathered as each block starts (lab20_worker --forward-held: FULL_SHARD, 4 blocks, 2 ranks)\n\n'
for setting in "0 1 no prefetch" "1 1 forward_prefetch, limit_all_gathers" "1 0 forward_prefetch, no limit"; do
    set -- $setting
    line=$("$mixpar" run -n 2 -- "$worker" --forward-held 4 "$1" "$2" 2>&1 | grep -m1 "root=" || true)
    [ -n "$line" ] || { echo "lab20: the probe waits for the lab's regions"; break; }
    shift 2
    echo "$line" | awk -v what="$*" '{ split($1, r, "="); split($2, b, "="); split($3, h, "="); n = split(h[2], v, ",")
        printf "%-40s", what; for (i = 1; i <= n; i++) printf "  block %d: root + %.2f blocks", i - 1, (v[i] / 4 - r[2]) / b[2]; printf "\n" }'
done

printf '\n==== 4. the visualizer on the FULL_SHARD run: memory panel, then comm panel\n\n'
if [ -d "$out/FULL_SHARD" ]; then
    "$mixpar" viz --snapshot "$out/FULL_SHARD" --panel memory --width 100 --height 26 | tee "$out/memory-panel.txt"
    "$mixpar" viz --snapshot "$out/FULL_SHARD" --panel comm --width 110 --height 24 | tee "$out/comm-panel.txt"
fi
echo
echo "lab20: results in $out/ (one run folder per row; memory-panel.txt, comm-panel.txt)"
