#!/usr/bin/env bash
# ckpt_sharded.sh: sharded checkpoints of ZeRO runs on real MPI ranks: a shard per rank and an index, an
# exact resume on the same layout, resharding to 4 ranks, to 1 rank without ZeRO, to ZeRO-1, a single file
# resumed by a sharded run, `mixpar checkpoint info` and `consolidate`, and damaged checkpoints refused
# with exit 2 and a message naming the shard or the field.
source "$(dirname "$0")/../lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT" || exit 1
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
cfg=configs/synthetic-addition.json
# The same global batch of 32 sequences whatever the layout: 2 x 16, 4 x 8, 1 x 32.
base=(--config "$cfg" --set train.steps=60 --set scheduler.params.total_steps=60 --set train.eval_interval=0
      --set train.sample_interval=0 --set train.hist_interval=0 --set train.checkpoint_interval=30
      --set zero_optimization.reduce_bucket_size=20000)
losses() { grep '"kind":"step"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }
max_diff() { paste <(losses "$1") <(losses "$2") | awk '$1 != $3 {bad=1} {d=$2-$4; if (d<0) d=-d; if (d>m) m=d} END {if (bad || NR != 60) print 1e9; else print m + 0}'; }
# train RUN_DIR RANKS MICRO_BATCH STAGE [more arguments]
train() {
  local dir=$1 n=$2 b=$3 stage=$4; shift 4
  local launch=("$MIXPAR" run -n "$n" --)
  [ "$n" = 1 ] && launch=()
  timeout "$(scaled 120)" "${launch[@]}" "$MIXPAR" train "${base[@]}" --quiet --set train_micro_batch_size_per_gpu="$b" \
    --set zero_optimization.stage="$stage" --set train.run_dir="$dir" "$@" >"$dir.log" 2>&1
}
ck=checkpoint.sharded

# The reference: 60 uninterrupted steps; and the same run stopped at step 30.
train "$work/full" 2 16 2
train "$work/half" 2 16 2 --set train.steps=30
check "ckpt_sharded: 2 ranks wrote an index and a shard each" test -s "$work/half/$ck/index.json" -a \
  -s "$work/half/$ck/rank-00000-of-00002.safetensors" -a -s "$work/half/$ck/rank-00001-of-00002.safetensors"
check "ckpt_sharded: no single-file checkpoint from a ZeRO run" test ! -e "$work/half/checkpoint.safetensors"
check "ckpt_sharded: no temporary directory left" test ! -e "$work/half/$ck.tmp"
check_output "ckpt_sharded: the run names where its checkpoint goes" 0 "checkpoint.sharded/" \
  "$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" --set train_micro_batch_size_per_gpu=16 \
  --set zero_optimization.stage=2 --set train.steps=1 --set train.run_dir="$work/printout"
check_output "ckpt_sharded: info shows the world and the step" 0 "2 shards, buffers of [0-9]+ floats, step 30" \
  "$MIXPAR" checkpoint info "$work/half/$ck"
check_output "ckpt_sharded: info shows each shard's ranges and checks its sha256" 0 "rank 1 .*sha256 ok, ranges \[" \
  "$MIXPAR" checkpoint info "$work/half/$ck"

# Resumes: copies of the step-30 run, continued to 60 on other layouts.
resume() { local name=$1; shift; cp -r "$work/half" "$work/$name"; train "$work/$name" "$@" --resume auto; }
resume same 2 16 2
check "ckpt_sharded: 2 ranks resumed: losses equal the uninterrupted run's bit for bit" diff \
  <(losses "$work/full/events.rank0.jsonl") <(losses "$work/same/events.rank0.jsonl")
resume four 4 8 2
d=$(max_diff "$work/full/events.rank0.jsonl" "$work/four/events.rank0.jsonl")
check "ckpt_sharded: resharded to 4 ranks (micro-batch 8): losses within 1e-4 (max |diff| $d)" awk -v d="$d" 'BEGIN{exit !(d <= 1e-4)}'
check "ckpt_sharded: the 4-rank run saved 4 shards" grep -q '"world": 4' "$work/four/$ck/index.json"
resume one 1 32 0
d=$(max_diff "$work/full/events.rank0.jsonl" "$work/one/events.rank0.jsonl")
check "ckpt_sharded: resumed on 1 rank without ZeRO (batch 32): losses within 1e-4 (max |diff| $d)" awk -v d="$d" 'BEGIN{exit !(d <= 1e-4)}'
resume stage1 2 16 1
d=$(max_diff "$work/full/events.rank0.jsonl" "$work/stage1/events.rank0.jsonl")
check "ckpt_sharded: resumed by ZeRO-1 (another shard layout): losses within 1e-4 (max |diff| $d)" awk -v d="$d" 'BEGIN{exit !(d <= 1e-4)}'

# consolidate: one file, the same a 1-rank run would load; resumed on 1 rank it continues like the
# sharded directory did; resumed by a 2-rank ZeRO run each rank takes its shard of it.
check_output "ckpt_sharded: consolidate writes one file" 0 "wrote .*3 buffers of [0-9]+ parameters from 2 shards" \
  "$MIXPAR" checkpoint consolidate "$work/half/$ck" "$work/one.safetensors"
mkdir -p "$work/cons"
train "$work/cons" 1 32 0 --resume "$work/one.safetensors"
check "ckpt_sharded: the consolidated file resumed on 1 rank continues exactly as the shards did" diff \
  <(losses "$work/one/events.rank0.jsonl" | tail -n 30) <(losses "$work/cons/events.rank0.jsonl")
mkdir -p "$work/fromfile"
train "$work/fromfile" 2 16 2 --resume "$work/one.safetensors"
check "ckpt_sharded: a single file resumed by 2 ZeRO-2 ranks continues bit for bit" diff \
  <(losses "$work/full/events.rank0.jsonl" | tail -n 30) <(losses "$work/fromfile/events.rank0.jsonl")
check_output "ckpt_sharded: mixpar sample reads the consolidated file" 0 "^12\+34=" \
  "$MIXPAR" sample --checkpoint "$work/one.safetensors" --prompt "12+34=" --tokens 4

# Damaged checkpoints: exit 2, no hang, a message naming the shard or the field.
bad() {
  local name=$1 pattern=$2; shift 2
  cp -r "$work/half" "$work/$name"
  (cd "$work/$name/$ck" && "$@")
  check_output "ckpt_sharded: $name: exit 2 naming it" 2 "$pattern" timeout "$(scaled 60)" "$MIXPAR" run -n 2 -- "$MIXPAR" train \
    "${base[@]}" --quiet --set train_micro_batch_size_per_gpu=16 --set zero_optimization.stage=2 \
    --set train.run_dir="$work/$name" --resume auto
}
bad deleted-shard "shard 'rank-00001-of-00002.safetensors' \(rank 1 of 2\) is missing" rm rank-00001-of-00002.safetensors
bad wrong-total "floats \[[0-9]+, [0-9]+\) are in no shard" sed -i -E 's/"total": ([0-9]+)/"total": \19/' index.json
bad truncated-shard "shard 'rank-00000-of-00002.safetensors' \(rank 0\) .* is [0-9]+ bytes, the index says" \
  truncate -s 4096 rank-00000-of-00002.safetensors
bad no-index "no index" rm index.json
check_output "ckpt_sharded: consolidate of a damaged checkpoint: exit 2" 2 "missing" \
  "$MIXPAR" checkpoint consolidate "$work/deleted-shard/$ck" "$work/never.safetensors"
check "ckpt_sharded: ... and no output file" test ! -e "$work/never.safetensors"
