#!/usr/bin/env bash
# train.sh: command-line checks of `mixpar train` and `mixpar sample`: a real short run, bit-identical
# resume, events, checkpoints, and exit 2 with a message for each kind of bad input.
source "$(dirname "$0")/../lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT" || exit 1
cfg=configs/synthetic-addition.json
common=(--set scheduler.params.total_steps=60 --set train.checkpoint_interval=30 --quiet)
train() { "$MIXPAR" train --config "$cfg" "${common[@]}" "$@"; }
losses() { grep '"kind":"step"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }

check "train: 60 steps of the addition task run" train --set train.steps=60 --set train.run_dir="$work/a"
first_last=$(losses "$work/a/events.rank0.jsonl" | awk 'NR==1{a=$2} END{print a, $2}')
check "train: the loss falls by more than 0.3 nats ($first_last)" awk -v fl="$first_last" 'BEGIN{split(fl, x, " "); exit !(x[2] < x[1] - 0.3)}'
check "train: every event line is JSON with the schema version" bash -c \
  "[ \$(grep -c '^{\"v\":1,\"kind\":\"' '$work/a/events.rank0.jsonl') -eq \$(wc -l < '$work/a/events.rank0.jsonl') ]"
check_output "train: run header, steps, spans, mem and eval events are written" 0 "eval" bash -c \
  "grep -o '\"kind\":\"[a-z]*\"' '$work/a/events.rank0.jsonl' | sort -u | tr '\n' ' ' | grep -q 'run.*span.*step' && grep -o '\"kind\":\"eval\"' '$work/a/events.rank0.jsonl' | head -1"
check "train: a checkpoint was written" test -s "$work/a/checkpoint.safetensors"

# Resume: 30 steps, stop, resume to 60: steps 31..60 must equal the uninterrupted run's, bit for bit.
train --set train.steps=30 --set train.run_dir="$work/b" >/dev/null 2>&1
check "train: resume from a checkpoint runs" train --set train.steps=60 --set train.run_dir="$work/b" --resume auto
check "train: resumed losses equal the uninterrupted run's bit for bit" diff <(losses "$work/a/events.rank0.jsonl") \
  <(losses "$work/b/events.rank0.jsonl")
check_output "train: the resumed run's stream says where it resumed" 0 '"resumed_at":30' cat "$work/b/events.rank0.jsonl"

check_output "sample: text from the checkpoint" 0 "^12\+34=" "$MIXPAR" sample --checkpoint "$work/a/checkpoint.safetensors" \
  --prompt "12+34=" --tokens 8
check "sample: the same seed gives the same text" bash -c "[ \"\$('$MIXPAR' sample --checkpoint '$work/a/checkpoint.safetensors' --seed 5)\" = \"\$('$MIXPAR' sample --checkpoint '$work/a/checkpoint.safetensors' --seed 5)\" ]"

# Bad input: a message and exit 2, and nothing already saved is damaged.
cp "$work/a/checkpoint.safetensors" "$work/saved.safetensors"
check_output "train: a missing config file" 2 "cannot|No such" "$MIXPAR" train --config "$work/none.json"
check_output "train: --config is required" 2 "--config FILE is required" "$MIXPAR" train
check_output "train: an unknown key names its path and the closest key" 2 "model.chanels.*did you mean model.channels" \
  train --set model.chanels=64 --set train.run_dir="$work/c"
check_output "train: batch sizes that break the batch rule" 2 "train_batch_size" \
  train --set train_batch_size=100 --set train.run_dir="$work/c"
check_output "train: a model that cannot fit --max-memory" 2 "fits in train.max_memory" \
  train --set train.max_memory=1MB --set train.run_dir="$work/c"
check_output "train: fp16 and bf16 both enabled" 2 "fp16.enabled.*bf16.enabled|bf16.enabled.*fp16.enabled" \
  train --set fp16.enabled=true --set bf16.enabled=true --set train.run_dir="$work/c"
head -c 5000 "$work/saved.safetensors" > "$work/truncated.safetensors"
check_output "train: resuming from a truncated checkpoint" 2 "truncated|offset|short" \
  train --set train.steps=60 --set train.run_dir="$work/c" --resume "$work/truncated.safetensors"
check_output "train: a dataset that does not exist" 2 "a dataset of .mixpar data list" \
  train --set data.dataset=nope --set train.run_dir="$work/c"
check_output "sample: a prompt character outside the vocabulary" 2 "not among the vocabulary" \
  "$MIXPAR" sample --checkpoint "$work/a/checkpoint.safetensors" --prompt "12+x"
check_output "sample: a bad temperature" 2 "temperature" "$MIXPAR" sample --checkpoint "$work/a/checkpoint.safetensors" --temperature -1
check_output "train: fp16 with bf16 is refused before anything runs" 2 "fp16.enabled and bf16.enabled are both true" \
  train --set bf16.enabled=true --set fp16.enabled=true --set train.run_dir="$work/c"
check_output "train: a sample_prompt outside the vocabulary is refused before training, as mixpar sample does" 2 \
  "train.sample_prompt \"12\+x\": character 'x' .*not among the vocabulary" \
  train --set train.steps=60 --set train.sample_prompt=12+x --set train.run_dir="$work/prompt"
check "train: and nothing was trained" test ! -e "$work/prompt/events.rank0.jsonl"
cp -r "$work/a" "$work/done"
check_output "train: resuming at train.steps says the run is already complete (exit 0)" 0 \
  "at step 60, which is train.steps: the run is already complete, nothing to train" \
  train --set train.steps=60 --set train.run_dir="$work/done" --resume auto
check_output "train: resuming with train.steps below the checkpoint's step is refused (exit 2)" 2 \
  "is at step 60, train.steps is 40: there is nothing to train" \
  train --set train.steps=40 --set train.run_dir="$work/done" --resume auto
check "train: the saved checkpoint is intact after all that" cmp "$work/a/checkpoint.safetensors" "$work/saved.safetensors"

# Checkpoint tools: inspect, and llm.c's GPT-2 format out and back in.
check_output "checkpoint info lists tensors and metadata" 0 "h\.0\.qkvw +F32 +\(192, 64\)" "$MIXPAR" checkpoint info "$work/a/checkpoint.safetensors"
check_output "checkpoint export-llmc writes llm.c's format" 0 "version 3, fp32" "$MIXPAR" checkpoint export-llmc \
  "$work/a/checkpoint.safetensors" "$work/model.bin"
check_output "checkpoint import-llmc reads it back" 0 "parameters from" "$MIXPAR" checkpoint import-llmc "$work/model.bin" "$work/back.safetensors"
check "checkpoint llm.c round trip keeps every weight bit for bit" bash -c \
  "'$MIXPAR' checkpoint export-llmc '$work/back.safetensors' '$work/again.bin' >/dev/null && cmp '$work/again.bin' '$work/model.bin'"
check_output "checkpoint import-llmc rejects a file that is not llm.c's" 2 "magic|20240326" "$MIXPAR" checkpoint import-llmc \
  "$work/a/checkpoint.safetensors" "$work/x.safetensors"
