#!/usr/bin/env bash
# sampler.sh: the trainer's two samplers on real MPI ranks: with PyTorch's DistributedSampler ("distributed",
# lab 15's code, prefetched by worker threads) N ranks x b train like 1 rank x N*b; worker threads change nothing;
# a run resumed mid-epoch continues bit for bit; ranks with different data are stopped (exit 2) instead of one
# running out of data early; bad settings exit 2.
source "$(dirname "$0")/../lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT" || exit 1

# A small dataset, so runs cross epochs: 26127 tokens = 816 windows of 32; on 2 ranks 408 each, 12 batches of 32.
"$MIXPAR" data build addition --size 3000 --out "$work/data/addition" >/dev/null
base=(--config configs/synthetic-addition.json --quiet --set data.dir="$work/data" --set train.steps=30
      --set scheduler.params.total_steps=30 --set scheduler.params.warmup_steps=5 --set train.eval_interval=0
      --set train.sample_interval=0 --set train.checkpoint_interval=0)
dist=(--set data.sampler=distributed)
losses() { grep '"kind":"step"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }
max_diff() { paste <(losses "$1") <(losses "$2") | awk '$1 != $3 {bad=1} {d=$2-$4; if (d<0) d=-d; if (d>m) m=d} END {if (bad || NR == 0) print 1e9; else print m + 0}'; }
hashes() { grep -o '"param_hash":"[0-9a-f]*"' "$1"; }

# 1 rank x 64 and 2 ranks x 32 with the distributed sampler: each global batch holds the same 64 windows
# (rank r takes positions r, r+2, ... of the epoch's order), so the losses agree to rounding.
"$MIXPAR" train "${base[@]}" "${dist[@]}" --set train_micro_batch_size_per_gpu=64 --set train.run_dir="$work/one" \
  >"$work/one.log" 2>&1
MIXPAR_PARAM_HASH=1 "$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" "${dist[@]}" --set train_micro_batch_size_per_gpu=32 \
  --set train.run_dir="$work/two" >"$work/two.log" 2>&1
check "sampler: 2 ranks trained with the distributed sampler" test -s "$work/two/events.rank1.jsonl"
check "sampler: the run header records the sampler and its epoch (12 batches a rank)" grep -q \
  '"data":{"sampler":"distributed","batches_per_epoch":12}' "$work/two/events.rank0.jsonl"
d=$(max_diff "$work/one/events.rank0.jsonl" "$work/two/events.rank0.jsonl")
check "sampler: distributed, 2 ranks x 32 give the losses of 1 rank x 64 over 2.5 epochs (max |diff| $d <= 1e-4)" \
  awk -v d="$d" 'BEGIN{exit !(d <= 1e-4)}'
check "sampler: distributed, replicas stay bit-identical" bash -c \
  "diff <(grep -o '\"param_hash\":\"[0-9a-f]*\"' '$work/two/events.rank0.jsonl') <(grep -o '\"param_hash\":\"[0-9a-f]*\"' '$work/two/events.rank1.jsonl') && test \$(grep -c param_hash '$work/two/events.rank1.jsonl') -eq 30"
"$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" --set train_micro_batch_size_per_gpu=32 --set train.run_dir="$work/glob" \
  >/dev/null 2>&1
check "sampler: the global sampler shuffles by its own rule (other batches, other losses)" \
  awk -v d="$(max_diff "$work/glob/events.rank0.jsonl" "$work/two/events.rank0.jsonl")" 'BEGIN{exit !(d > 1e-3 && d < 1e9)}'

# Worker threads prepare batches ahead; they change when a batch is read, not which: 0 and 2 workers, same bits.
for w in 0 2; do
  MIXPAR_PARAM_HASH=1 "$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" "${dist[@]}" --set data.workers=$w \
    --set train_micro_batch_size_per_gpu=32 --set train.run_dir="$work/w$w" >/dev/null 2>&1
done
check "sampler: 0 or 2 prefetch workers, the same weights bit for bit after each of 30 steps" bash -c \
  "diff <(grep -o '\"param_hash\":\"[0-9a-f]*\"' '$work/w0/events.rank0.jsonl') <(grep -o '\"param_hash\":\"[0-9a-f]*\"' '$work/w2/events.rank0.jsonl') && test \$(grep -c param_hash '$work/w2/events.rank0.jsonl') -eq 30"

# Resume mid-epoch (step 17 = epoch 1, batch 5): the resumed run takes the batches the whole run took.
cks=("${dist[@]}" --set train_micro_batch_size_per_gpu=32 --set train.checkpoint_interval=17 --set data.drop_last=true)
"$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" "${cks[@]}" --set train.run_dir="$work/full" >/dev/null 2>&1
"$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" "${cks[@]}" --set train.steps=17 --set train.run_dir="$work/part" \
  >/dev/null 2>&1
check "sampler: the checkpoint holds the data position (epoch 1, batch 5)" bash -c \
  "'$MIXPAR' checkpoint info '$work/part/checkpoint.safetensors' | tr -s ' ' | grep -Fxq ' meta loader_epoch 1' &&
   '$MIXPAR' checkpoint info '$work/part/checkpoint.safetensors' | tr -s ' ' | grep -Fxq ' meta loader_batch 5'"
"$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" "${cks[@]}" --set train.run_dir="$work/part" --resume auto \
  >"$work/resume.log" 2>&1
check "sampler: the resumed run took steps 18 to 30" test "$(losses "$work/part/events.rank0.jsonl" | wc -l)" -eq 30
check "sampler: a run resumed mid-epoch has the uninterrupted run's losses, bit for bit" \
  diff <(losses "$work/full/events.rank0.jsonl") <(losses "$work/part/events.rank0.jsonl")

# The classic mistake: each machine with its own copy of the data, and the copies differ. Here two working
# directories stand for two machines; data.dir "data" is relative, so the configs agree and the data do not.
for spec in A:3000 B:2500; do
  "$MIXPAR" data build addition --size "${spec#*:}" --out "$work/${spec%%:*}/data/addition" >/dev/null
done
mpi=(mpirun --oversubscribe); [ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
one=("$MIXPAR" train --config "$ROOT/configs/synthetic-addition.json" --quiet --set train.steps=5
     --set scheduler.params.total_steps=30 --set scheduler.params.warmup_steps=5 --set train.run_dir="$work/mism" "${dist[@]}")
check_output "sampler: ranks with different data stop with a message naming them (exit 2, no hang)" 2 \
  "rank 1: 21769 tokens, 10 batches an epoch.*|runs out of data early" \
  timeout "$(scaled 60)" "${mpi[@]}" -n 1 -wdir "$work/A" "${one[@]}" : -n 1 -wdir "$work/B" "${one[@]}"

# Bad settings: exit 2, the key named.
check_output "sampler: data.workers 3 is refused" 2 "data.workers" \
  "$MIXPAR" train "${base[@]}" "${dist[@]}" --set data.workers=3
check_output "sampler: data.drop_last with the global sampler is refused" 2 "data.drop_last with data.sampler" \
  "$MIXPAR" train "${base[@]}" --set data.drop_last=true
check_output "sampler: an unknown sampler is refused" 2 "data.sampler" \
  "$MIXPAR" train "${base[@]}" --set data.sampler=random
check_output "sampler: a batch larger than a rank's share of an epoch is refused" 2 "at least B windows per rank" \
  "$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" "${dist[@]}" --set train_micro_batch_size_per_gpu=500
