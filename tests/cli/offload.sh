#!/usr/bin/env bash
# offload.sh: ZeRO-Offload (optimizer state and fp32 master in host memory, the update on the host) in the
# trainer: losses and weights bit for bit the run without offload (1 rank, and 2 ranks with ZeRO-2), no
# optimizer state on the device, the host pool measured = the planner's figure, the copies counted in the
# step events, and the refusals (nvme, stage 0, 16-bit weights).
source "$(dirname "$0")/../lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT" || exit 1
export OMP_NUM_THREADS=1
cfg=configs/synthetic-addition.json
base=(--config "$cfg" --quiet --set train.steps=60 --set scheduler.params.total_steps=60 --set train.eval_interval=0
      --set train.sample_interval=0 --set train.checkpoint_interval=0)
off=(--set zero_optimization.offload_optimizer.device=cpu)
trace() { grep '"kind":"step"' "$1" | grep -o '"loss":[^,]*\|"param_hash":"[0-9a-f]*"'; }
params() { head -n 1 "$1" | grep -o '"params":[0-9]*' | cut -d: -f2; }
mem() { grep '"kind":"mem"' "$1" | tail -n 1 | grep -o "\"$2\":{[^}]*}" | grep -o "\"$3\":[0-9]*" | cut -d: -f2; }
planned() { head -n 1 "$1" | grep -o '"plan":{[^}]*}' | grep -o "\"$2\":[0-9]*" | cut -d: -f2; }
within() { awk -v a="$1" -v b="$2" -v tol="$3" 'BEGIN{d=a-b; if (d<0) d=-d; exit !(b > 0 && d <= tol*b)}'; }
step_field() { grep '"kind":"step"' "$1" | sed -n "${2}p" | grep -o "\"$3\":[0-9.e+-]*" | cut -d: -f2; }
# train NAME RANKS STAGE [more --set ...]
train() {
  local name=$1 n=$2 stage=$3; shift 3
  MIXPAR_PARAM_HASH=1 "$MIXPAR" run -n "$n" -- "$MIXPAR" train "${base[@]}" --set zero_optimization.stage="$stage" \
    --set train.run_dir="$work/$name" "$@" >"$work/$name.log" 2>&1
}

# One rank, ZeRO-Offload of the whole model (fp32), and the bf16 autocast recipe (fp32 weights).
train one 1 1
train one_off 1 1 "${off[@]}"
train bf16 1 1 --set precision.recipe=bf16
train bf16_off 1 1 --set precision.recipe=bf16 "${off[@]}"
loud=("${base[@]:3}")
check_output "offload: the run says what it keeps on the host" 0 "offload: optimizer state and fp32 master on the host" \
  "$MIXPAR" train --config "$cfg" "${loud[@]}" --set zero_optimization.stage=1 "${off[@]}" --set train.run_dir="$work/say"
for pair in "one one_off" "bf16 bf16_off"; do
  set -- $pair
  check "offload: $2 trained 60 steps" test "$(trace "$work/$2/events.rank0.jsonl" | grep -c param_hash)" -eq 60
  check "offload: $2 losses and weights bit for bit $1's" diff <(trace "$work/$1/events.rank0.jsonl") \
    <(trace "$work/$2/events.rank0.jsonl")
done
ev=$work/one_off/events.rank0.jsonl
psi=$(params "$ev")
check "offload: no optimizer state on the device (optim peak 0)" test "$(mem "$ev" peak optim)" = 0
check "offload: without offload the optimizer state is on the device (8 Psi)" \
  test "$(mem "$work/one/events.rank0.jsonl" peak optim)" = $((psi * 8))
host=$(mem "$ev" peak host)
check "offload: host pool $host bytes = master + gradients + m, v = 16 Psi = $((psi * 16))" test "$host" = $((psi * 16))
check "offload: host pool = the planner's host figure ($(planned "$ev" host))" within "$host" "$(planned "$ev" host)" 0.05
for tag in param grad; do
  check "offload: device $tag peak within 5% of the plan" within "$(mem "$ev" peak $tag)" "$(planned "$ev" $tag)" 0.05
done
check "offload: the plan puts neither master nor optimizer state on the device" \
  test "$(planned "$ev" master)$(planned "$ev" optim)" = 00
check "offload: the step event counts 4 Psi bytes down" test "$(step_field "$ev" 5 d2h_bytes)" = $((psi * 4))
check "offload: the step event counts 4 Psi bytes up" test "$(step_field "$ev" 5 h2d_bytes)" = $((psi * 4))
check "offload: copy and update seconds in the step event" bash -c \
  "awk -v c='$(step_field "$ev" 5 copy_s)' -v u='$(step_field "$ev" 5 update_s)' 'BEGIN{exit !(c > 0 && u > 0)}'"

# A checkpoint of an offloaded run (the host's state) resumes exactly: the host master is remade from the weights.
ck=(--set train.checkpoint_interval=30 "${off[@]}")
train half 1 1 "${ck[@]}" --set train.steps=30
MIXPAR_PARAM_HASH=1 "$MIXPAR" train "${base[@]}" --set zero_optimization.stage=1 "${ck[@]}" \
  --set train.run_dir="$work/half" --resume auto >"$work/resume.log" 2>&1
check "offload: resumed from a checkpoint, losses and weights bit for bit the uninterrupted run's" \
  diff <(trace "$work/one_off/events.rank0.jsonl") <(trace "$work/half/events.rank0.jsonl")

# Two ranks, ZeRO-2 with offload: each rank offloads its own shard, ceil(Psi/2) elements.
train z2 2 2 --set train_micro_batch_size_per_gpu=16 --set zero_optimization.reduce_bucket_size=20000
train z2_off 2 2 --set train_micro_batch_size_per_gpu=16 --set zero_optimization.reduce_bucket_size=20000 "${off[@]}"
for rank in 0 1; do
  check "offload: ZeRO-2 rank $rank, losses and weights bit for bit without offload" \
    diff <(trace "$work/z2/events.rank$rank.jsonl") <(trace "$work/z2_off/events.rank$rank.jsonl")
  ev=$work/z2_off/events.rank$rank.jsonl
  check "offload: ZeRO-2 rank $rank, no optimizer state on the device" test "$(mem "$ev" peak optim)" = 0
  host=$(mem "$ev" peak host)
  check "offload: ZeRO-2 rank $rank host pool $host = 16 ceil(Psi/2) = the plan's $(planned "$ev" host) within 5%" \
    within "$host" "$(planned "$ev" host)" 0.05
  check "offload: ZeRO-2 rank $rank copies its shard down (about 2 Psi bytes)" \
    within "$(step_field "$ev" 5 d2h_bytes)" $((psi * 2)) 0.05
done

# Refusals, with exit 2.
check_output "offload: nvme is refused" 2 "nvme" "$MIXPAR" train "${base[@]}" --set zero_optimization.stage=1 \
  --set zero_optimization.offload_optimizer.device=nvme --set train.run_dir="$work/nv"
check_output "offload: stage 0 is refused with a hint" 2 "hint: .*stage to 1 or 2" "$MIXPAR" train "${base[@]}" \
  "${off[@]}" --set train.run_dir="$work/s0"
check_output "offload: bf16-pure (16-bit weights) is refused" 2 "bf16-pure" "$MIXPAR" train "${base[@]}" \
  --set zero_optimization.stage=1 --set precision.recipe=bf16-pure "${off[@]}" --set train.run_dir="$work/bp"
check_output "offload: mixpar plan --offload shows a host row" 0 "host \(offload\) .* 1,991,036,928" \
  "$MIXPAR" plan --preset gpt2-124m --offload
