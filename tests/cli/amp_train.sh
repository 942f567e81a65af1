#!/usr/bin/env bash
# amp_train.sh: training under every precision recipe from the command line: each recipe trains and says how,
# the three vocabularies (DeepSpeed, Keras, PyTorch) give the identical run, a skipped step and the loss scale
# show in the events, the scaler resumes from a checkpoint, a scaler out of room stops with a diagnosis
# (exit 2), a NaN weight or activation stops the run naming the first bad tensor, and conflicting settings are
# refused naming the keys.
source "$(dirname "$0")/../lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT" || exit 1
base=(--config configs/synthetic-addition.json --quiet --set train.steps=30 --set scheduler.params.total_steps=30
      --set scheduler.params.warmup_steps=5
      --set train.eval_interval=0 --set train.sample_interval=0 --set train.checkpoint_interval=0)
losses() { grep '"kind":"step"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }
last_loss() { losses "$1" | tail -n 1 | cut -d' ' -f2; }
# same_losses A B: both runs wrote their 30 steps and the losses agree exactly.
same_losses() { test "$(losses "$1" | wc -l)" -eq 30 && diff <(losses "$1") <(losses "$2"); }

for r in fp32 tf32 fp16 fp16-o2 bf16 bf16-pure fp8; do
  "$MIXPAR" train "${base[@]}" --set precision.recipe=$r --set train.run_dir="$work/$r" >"$work/$r.log" 2>&1
  check_output "amp train: recipe $r runs and records itself in the run header" 0 "\"recipe\":\"$r\"" \
    head -n 1 "$work/$r/events.rank0.jsonl"
done
ref=$(last_loss "$work/fp32/events.rank0.jsonl")
for r in tf32 fp16 fp16-o2 bf16 bf16-pure fp8; do
  l=$(last_loss "$work/$r/events.rank0.jsonl")
  check "amp train: $r trains like fp32 (loss $l vs $ref after 30 steps, within 5%)" \
    awk -v a="$l" -v b="$ref" 'BEGIN{d=a-b; if (d<0) d=-d; exit !(a + 0 > 0 && b + 0 > 0 && d <= 0.05 * b)}'
done
check "amp train: fp16 starts at GradScaler's 65536" grep -q '"step":1,.*"scale":65536' "$work/fp16/events.rank0.jsonl"

# One run, three vocabularies: identical losses, step by step.
"$MIXPAR" train "${base[@]}" --set bf16.enabled=true --set train.run_dir="$work/ds" >/dev/null 2>&1
"$MIXPAR" train "${base[@]}" --set precision.keras_policy=mixed_bfloat16 --set train.run_dir="$work/keras" >/dev/null 2>&1
"$MIXPAR" train "${base[@]}" --set precision.torch_autocast=bfloat16 --set train.run_dir="$work/torch" >/dev/null 2>&1
check "amp train: DeepSpeed bf16 section and Keras mixed_bfloat16 give identical losses" \
  same_losses "$work/ds/events.rank0.jsonl" "$work/keras/events.rank0.jsonl"
check "amp train: PyTorch autocast(bfloat16) gives the same losses too" \
  same_losses "$work/ds/events.rank0.jsonl" "$work/torch/events.rank0.jsonl"
check "amp train: and they are the bf16 recipe's" \
  same_losses "$work/ds/events.rank0.jsonl" "$work/bf16/events.rank0.jsonl"

# A rank-local overflow at step 5 under fp16: skipped, scale halved, the run goes on.
MIXPAR_INJECT_INF=0:5 "$MIXPAR" train "${base[@]}" --set precision.recipe=fp16 --set train.run_dir="$work/inf" \
  >/dev/null 2>&1
check "amp train: the overflow step is skipped" grep -q '"step":5,.*"scale":65536,"skipped":true' "$work/inf/events.rank0.jsonl"
check "amp train: and the next step runs at half the scale" grep -q '"step":6,.*"scale":32768,"skipped":false' \
  "$work/inf/events.rank0.jsonl"
# bf16 has no scaler to react: the skip comes with a diagnosis naming the first bad tensor.
MIXPAR_INJECT_INF=0:3 "$MIXPAR" train "${base[@]}" --set precision.recipe=bf16 --set train.run_dir="$work/bfinf" \
  >/dev/null 2>&1
check "amp train: a bf16 inf is skipped with a diagnosis event" grep -q '"kind":"diagnosis".*"step":3' \
  "$work/bfinf/events.rank0.jsonl"
# DeepSpeed's scaler with no room: hysteresis 1 and the floor at the initial scale: the first overflow stops the run.
check_output "amp train: a DeepSpeed scale already at its minimum stops the run (exit 2) with advice" 2 \
  "already at (its )?minimum" env MIXPAR_INJECT_INF=0:2 "$MIXPAR" train "${base[@]}" --set fp16.enabled=true \
  --set fp16.hysteresis=1 --set fp16.initial_scale_power=10 --set fp16.min_loss_scale=1024 --set train.run_dir="$work/min"

# Non-finite values that no step can fix stop the run (exit 2) naming the first bad tensor in forward order.
# poke_nan FILE TENSOR ELEMENT: writes a NaN over one fp32 value of a tensor of a safetensors checkpoint.
poke_nan() {
  local header start
  header=$(head -c 8 "$1" | od -An -tu8 | tr -d ' ')
  start=$(head -c $((8 + header)) "$1" | tail -c +9 | grep -o "\"$2\":{[^}]*}" | sed -E 's/.*"data_offsets":\[([0-9]+),.*/\1/')
  printf '\x00\x00\xc0\x7f' | dd of="$1" bs=1 seek=$((8 + header + start + 4 * $3)) conv=notrunc status=none
}
short=(--set train.steps=4 --set scheduler.params.warmup_steps=1)
"$MIXPAR" train "${base[@]}" "${short[@]}" --set train.steps=2 --set train.checkpoint_interval=2 \
  --set train.run_dir="$work/clean" >/dev/null 2>&1
cp "$work/clean/checkpoint.safetensors" "$work/nan.safetensors" && poke_nan "$work/nan.safetensors" h.0.fcprojw 100
check_output "amp train: resuming weights with a NaN in h.0.fcprojw stops at once (exit 2) naming it" 2 \
  "step 3: the loss is .*nan; the first to hold inf/NaN in forward order is the weight h\.0\.fcprojw \(layer 0, element 100\)" \
  "$MIXPAR" train "${base[@]}" "${short[@]}" --set train.run_dir="$work/resumed_nan" --resume "$work/nan.safetensors"
check "amp train: and its diagnosis event blames the checkpoint, not the learning rate" grep -q \
  '"kind":"diagnosis".*"what":"nonfinite_param","layer":0,"tensor":"h.0.fcprojw".*checkpoint it resumed from (step 2)' \
  "$work/resumed_nan/events.rank0.jsonl"
check_output "amp train: an inf in a bf16 activation (MIXPAR_INJECT_INF=0:2:h.1.fch_act@5) is named, exit 2" 2 \
  "the first to hold inf/NaN in forward order is the activation h\.1\.fch_act \(layer 1, element 5\)" \
  env MIXPAR_INJECT_INF=0:2:h.1.fch_act@5 "$MIXPAR" train "${base[@]}" "${short[@]}" --set precision.recipe=bf16 \
  --set train.run_dir="$work/act"
MIXPAR_INJECT_INF=0:2:h.1.fch_act "$MIXPAR" train "${base[@]}" "${short[@]}" --set precision.recipe=fp16 \
  --set train.run_dir="$work/fp16act" >/dev/null 2>&1
check "amp train: the same inf under fp16's dynamic scaler is one skipped step, and the run goes on" bash -c \
  "grep -q '\"step\":2,.*\"skipped\":true' '$work/fp16act/events.rank0.jsonl' && grep -q '\"step\":4,.*\"skipped\":false' '$work/fp16act/events.rank0.jsonl'"
check_output "amp train: a run of skipped steps stops at train.max_consecutive_skips (exit 2)" 2 \
  "step 3: 3 skipped steps in a row \(train.max_consecutive_skips 3\)" "$MIXPAR" train "${base[@]}" "${short[@]}" \
  --set fp16.enabled=true --set fp16.initial_scale_power=100 --set fp16.hysteresis=1 \
  --set train.max_consecutive_skips=3 --set train.run_dir="$work/runaway"
check_output "amp train: MIXPAR_INJECT_INF with a name that is no tensor is refused" 2 \
  "no weight or activation is called 'h\.0\.nope'" env MIXPAR_INJECT_INF=0:2:h.0.nope "$MIXPAR" train "${base[@]}" \
  "${short[@]}" --set train.run_dir="$work/nope"

# The scaler's state resumes from a checkpoint: same losses and scales as the uninterrupted run.
cks=(--set precision.recipe=fp16 --set precision.growth_interval=4 --set train.checkpoint_interval=10)
"$MIXPAR" train "${base[@]}" "${cks[@]}" --set train.run_dir="$work/full" >/dev/null 2>&1
"$MIXPAR" train "${base[@]}" "${cks[@]}" --set train.steps=10 --set train.run_dir="$work/part" >/dev/null 2>&1
"$MIXPAR" train "${base[@]}" "${cks[@]}" --set train.run_dir="$work/part" --resume auto >/dev/null 2>&1
check "amp train: the scale grew every 4 clean steps (65536 -> 2^18 by step 10)" grep -q '"step":10,.*"scale":262144' \
  "$work/full/events.rank0.jsonl"
check "amp train: resumed run has the uninterrupted run's losses and scales" bash -c \
  "test \$(grep -c '\"kind\":\"step\"' '$work/part/events.rank0.jsonl') -eq 30 && diff <(grep '\"kind\":\"step\"' '$work/full/events.rank0.jsonl' | grep -o '\"step\":[0-9]*,\"loss\":[^,]*,\"lr\":[^,]*,\"grad_norm\":[^,]*,\"scale\":[^,]*') <(grep '\"kind\":\"step\"' '$work/part/events.rank0.jsonl' | grep -o '\"step\":[0-9]*,\"loss\":[^,]*,\"lr\":[^,]*,\"grad_norm\":[^,]*,\"scale\":[^,]*')"

# Bad settings: exit 2, the keys named.
check_output "amp train: fp16 and bf16 sections together are refused" 2 "fp16.enabled and bf16.enabled are both true" \
  "$MIXPAR" train "${base[@]}" --set fp16.enabled=true --set bf16.enabled=true
check_output "amp train: a recipe and a DeepSpeed section together are refused" 2 \
  "bf16.enabled and precision.recipe are both given" "$MIXPAR" train "${base[@]}" --set bf16.enabled=true \
  --set precision.recipe=fp16
check_output "amp train: an unknown recipe lists the known ones" 2 "fp32, tf32, fp16, fp16-o2, bf16, bf16-pure, fp8" \
  "$MIXPAR" train "${base[@]}" --set precision.recipe=fp12
check_output "amp train: a negative static scale is refused" 2 "fp16.loss_scale" \
  "$MIXPAR" train "${base[@]}" --set fp16.enabled=true --set fp16.loss_scale=-4
check_output "amp train: fp16 autocast without a GradScaler is refused" 2 "GradScaler" \
  "$MIXPAR" train "${base[@]}" --set precision.torch_autocast=float16
check_output "amp train: a loss scaler on an fp32 run is refused" 2 "precision.loss_scaler" \
  "$MIXPAR" train "${base[@]}" --set precision.loss_scaler=pytorch
