#!/usr/bin/env bash
# recompute.sh: activation checkpointing through `mixpar train`: every policy trains the addition model with the
# losses and weights of no recompute, bit for bit, on one rank and under DDP on 2 ranks (the recompute runs inside
# DDP's backward hooks); the activation peak falls; bad policies and DeepSpeed's own keys are refused (exit 2).
source "$(dirname "$0")/../lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT" || exit 1
base=(--config configs/synthetic-addition.json --quiet --set train.steps=10 --set scheduler.params.total_steps=10
      --set scheduler.params.warmup_steps=5 --set model.layers=4
      --set train.eval_interval=0 --set train.sample_interval=0 --set train.checkpoint_interval=0
      --set train.hist_interval=0)
# "loss hash" per step; nothing at all when the run wrote no events (same_steps then fails)
steps() { [ -s "$1" ] && grep '"kind":"step"' "$1" | grep -o '"loss":[^,]*\|"param_hash":"[0-9a-f]*"' | paste -d' ' - -; }
# same_steps A B: both runs have 10 steps with a loss and a weight hash each, and they agree line for line
same_steps() { [ "$(steps "$1" | grep -c param_hash)" -eq 10 ] && diff <(steps "$1") <(steps "$2"); }
peak_act() { grep '"kind":"mem"' "$1" | tail -n 1 | grep -o '"peak":{[^}]*}' | grep -o '"act":[0-9]*' | cut -d: -f2; }
# train NAME RANKS POLICY K
train() {
  local name=$1 n=$2 policy=$3 k=$4
  local cmd=("$MIXPAR" train "${base[@]}" --set activation_checkpointing.policy="$policy"
             --set activation_checkpointing.every_k="$k" --set train.run_dir="$work/$name")
  if [ "$n" -gt 1 ]; then cmd=("$MIXPAR" run -n "$n" -- "${cmd[@]}" --set train_micro_batch_size_per_gpu=16); fi
  MIXPAR_PARAM_HASH=1 "${cmd[@]}" >"$work/$name.log" 2>&1
}

train none 1 none 2
check "recompute: the addition model trains 10 steps with no recompute" \
  test "$(steps "$work/none/events.rank0.jsonl" | grep -c param_hash)" -eq 10
for spec in every:2 every_k:2 every_k:3 selective:2; do
  policy=${spec%%:*} k=${spec#*:}
  name=$policy-$k label=$policy
  [ "$policy" = every_k ] && label="every_k=$k"
  train "$name" 1 "$policy" "$k"
  check "recompute: $label losses and weights equal no recompute's, bit for bit, over 10 steps" \
    same_steps "$work/$name/events.rank0.jsonl" "$work/none/events.rank0.jsonl"
  a=$(peak_act "$work/none/events.rank0.jsonl") b=$(peak_act "$work/$name/events.rank0.jsonl")
  check "recompute: $label activation peak $b below no recompute's $a" test "${b:-0}" -gt 0 -a "${b:-0}" -lt "${a:-0}"
  b=""
done

if command -v mpirun >/dev/null; then
  train ddp-none 2 none 2
  train ddp-every 2 every_k 2
  check "recompute: DDP on 2 ranks with every_k=2 equals DDP without, bit for bit" \
    same_steps "$work/ddp-every/events.rank1.jsonl" "$work/ddp-none/events.rank0.jsonl"
fi

check_output "recompute: an unknown policy is refused, naming the policies" 2 'activation_checkpointing.policy.*"selective"' \
  "$MIXPAR" train "${base[@]}" --set activation_checkpointing.policy=full --set train.run_dir="$work/bad"
check_output "recompute: DeepSpeed's own keys are unknown keys here, with the keys there are" 2 \
  'partition_activations: unknown key' \
  "$MIXPAR" train "${base[@]}" --set activation_checkpointing.partition_activations=true --set train.run_dir="$work/bad"
check_output "recompute: every_k below 1 is refused" 2 'activation_checkpointing.every_k' \
  "$MIXPAR" train "${base[@]}" --set activation_checkpointing.every_k=0 --set train.run_dir="$work/bad"
