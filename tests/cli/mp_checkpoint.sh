#!/usr/bin/env bash
# mp_checkpoint.sh: checkpoints of dp x tp x pp runs on real MPI ranks (train/mp_checkpoint.h): a 2x2x2 run
# (ZeRO-1, sequence parallel) writes a shard per rank in the whole model's layout with a manifest of the mesh
# and the splits; it resumes on its own mesh bit for bit, and without sequence parallel (it changes no
# parameter's layout) within 1e-6 relative on 1x4x2 (also as 8 micro-batches of 1 row),
# 2x1x4, 1x2x2 interleaved, the data-parallel trainer on 1 rank and on 2 with ZeRO-1; a mesh resumes a 1-rank
# run's single file. `mixpar checkpoint consolidate` gives one safetensors file whose weights are a 1-rank
# run's bit for bit (learning rate 0: every run keeps the initial weights, so a misplaced slice shows) for
# GPT-2 on 2x2x2 and on 2 chunks a stage, LLaMA on 2x2x2; mixpar sample reads it. Hostile safetensors
# files and damaged shards exit 2 naming what is wrong; DeepSpeed's pipeline keys translate.
source "$(dirname "$0")/../lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT" || exit 1
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
# One loader batch is 2 rows on every layout (dp x micro-batch = 2) and a step is 4 of them (gradient
# accumulation = the pipeline's micro-batches), so every layout reads the same rows in the same steps.
cat >"$work/gpt2.json" <<'EOF'
{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4, "gradient_clipping": 1.0,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.1}},
 "model": {"arch": "gpt2", "layers": 4, "channels": 32, "heads": 4, "context": 16, "tied": true},
 "data": {"dataset": "poetry", "seq_len": 16},
 "train": {"steps": 12, "eval_interval": 0, "sample_interval": 0, "checkpoint_interval": 6, "hist_interval": 0}}
EOF
losses() { grep '"kind":"step"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }
# worst relative difference of two runs' step losses over steps 7..12 (1e9 when they do not line up)
max_rel() { paste <(losses "$1" | awk '$1 > 6') <(losses "$2" | awk '$1 > 6') | awk '$1 != $3 {bad=1}
  {d=($2-$4)/$4; if (d<0) d=-d; if (d>m) m=d} END {if (bad || NR != 6) print 1e9; else printf "%.2e\n", m}'; }
# train DIR RANKS TP PP [SETTING | --resume PATH ...]: dp = RANKS / (TP x PP); micro-batch 2 / dp
train() {
  local dir=$1 n=$2 tp=$3 pp=$4 sets=() x; shift 4
  while [ $# -gt 0 ]; do
    if [ "$1" = --resume ]; then sets+=(--resume "$2"); shift 2; else sets+=(--set "$1"); shift; fi
  done
  local launch=("$MIXPAR" run -n "$n" --)
  [ "$n" = 1 ] && launch=()
  timeout -k 5 "$(scaled 120)" "${launch[@]}" "$MIXPAR" train --config "$work/gpt2.json" --quiet \
    --set train.run_dir="$dir" --set tensor_model_parallel_size="$tp" --set pipeline_model_parallel_size="$pp" \
    --set train_micro_batch_size_per_gpu=$((2 * tp * pp / n)) "${sets[@]}" >"$dir.log" 2>&1
}
ck=checkpoint.sharded

# References: one rank, 12 steps; 2x2x2 with ZeRO-1 and sequence parallel, 12 steps; the same stopped at step 6.
train "$work/one" 1 1 1
train "$work/full" 8 2 2 zero_optimization.stage=1 sequence_parallel=true
train "$work/half" 8 2 2 zero_optimization.stage=1 train.steps=6 sequence_parallel=true
check "mp_checkpoint: 2x2x2 wrote an index and 8 shards" test -s "$work/half/$ck/index.json" -a \
  -s "$work/half/$ck/rank-00007-of-00008.safetensors"
check "mp_checkpoint: no temporary directory left" test ! -e "$work/half/$ck.tmp"
check_output "mp_checkpoint: the manifest names the mesh" 0 '"mesh": "\{\\"dp\\": 2, \\"tp\\": 2, \\"pp\\": 2, \\"chunks\\": 1, \\"zero_stage\\": 1' \
  cat "$work/half/$ck/index.json"
check_output "mp_checkpoint: the manifest says how qkvw is split over tp and which stage holds it" 0 \
  'h.3.qkvw\\", \\"shape\\": \[96, 32\], \\"offset\\": [0-9]+, \\"split\\": \\"qkv_head_rows\\", \\"tp_dim\\": 0, \\"stage\\": 1' \
  cat "$work/half/$ck/index.json"
check_output "mp_checkpoint: info reads it: 8 shards of the whole model's buffers, step 6" 0 \
  "8 shards, buffers of [0-9]+ floats, step 6" "$MIXPAR" checkpoint info "$work/half/$ck"

resume() { local name=$1; shift; cp -r "$work/half" "$work/$name"; rm -f "$work/$name"/events.*; train "$work/$name" "$@" --resume "$work/half/$ck"; }
resume same 8 2 2 zero_optimization.stage=1 sequence_parallel=true
check "mp_checkpoint: resumed on 2x2x2: steps 7-12 equal the unbroken run's bit for bit" \
  diff <(losses "$work/full/events.rank0.jsonl" | awk '$1 > 6') <(losses "$work/same/events.rank0.jsonl")
# Another mesh adds its partial sums in another order (tp's allreduces, the dp average, the norm over the
# mp group), so its weights at step 6 differ from 2x2x2's in the last bits: not bit for bit, but within
# 1e-6 relative of an unbroken run on that mesh (and of one rank, which every mesh follows within 1e-5:
# tests/cli/model_parallel.sh). A misplaced slice or lost optimizer state would be orders of magnitude more.
train "$work/full142" 8 4 2
resume 1x4x2 8 4 2
r=$(max_rel "$work/full142/events.rank0.jsonl" "$work/1x4x2/events.rank0.jsonl")
check "mp_checkpoint: 2x2x2's checkpoint resumed on 1x4x2: steps 7-12 within 1e-6 of an unbroken 1x4x2 run's (worst $r)" \
  awk -v r="$r" 'BEGIN{exit !(r <= 1e-6)}'
# 1x4x2-m8 splits the same 8 rows a step as 8 micro-batches of 1 row: the loader position is converted by rows.
for spec in "2x1x4 8 1 4" "1x4x2-m8 8 4 2 train_micro_batch_size_per_gpu=1 gradient_accumulation_steps=8" \
            "1x2x2-interleaved 4 2 2 pipeline_schedule=interleaved num_layers_per_virtual_pipeline_stage=1" \
            "dp1 1 1 1" "dp2-zero1 2 1 1 zero_optimization.stage=1"; do
  read -r name n tp pp extra <<<"$spec"
  resume "$name" "$n" "$tp" "$pp" $extra
  r=$(max_rel "$work/one/events.rank0.jsonl" "$work/$name/events.rank0.jsonl")
  check "mp_checkpoint: 2x2x2's checkpoint (sequence parallel) resumed on $name without: steps 7-12 within 1e-6 of one rank's (worst $r)" \
    awk -v r="$r" 'BEGIN{exit !(r <= 1e-6)}'
done
check "mp_checkpoint: the 1x4x2 run saved its own checkpoint (dp 1: 8 shards, no ZeRO)" \
  grep -q '\\"dp\\": 1, \\"tp\\": 4, \\"pp\\": 2, \\"chunks\\": 1, \\"zero_stage\\": 0' "$work/1x4x2/$ck/index.json"
# A 1-rank run's single file, resumed by a 1x2x2 mesh.
train "$work/onehalf" 1 1 1 train.steps=6
mkdir -p "$work/fromfile"
train "$work/fromfile" 4 2 2 --resume "$work/onehalf/checkpoint.safetensors"
r=$(max_rel "$work/one/events.rank0.jsonl" "$work/fromfile/events.rank0.jsonl")
check "mp_checkpoint: a 1-rank file resumed on 1x2x2: steps 7-12 within 1e-6 of one rank's (worst $r)" \
  awk -v r="$r" 'BEGIN{exit !(r <= 1e-6)}'

# consolidate: learning rate 0 keeps the initial weights, which every mesh draws exactly as one rank does, so
# the consolidated weights of a GPT-2 on 2x2x2 and of a LLaMA (GQA, SwiGLU's gate and up rows, an untied
# head) on 2x2x2, and of a GPT-2 on 1x2x2 with two model chunks a stage, must be a 1-rank run's bit for bit.
zero=(optimizer.params.lr=0 train.steps=2 train.checkpoint_interval=2)
llama=(model.arch=llama model.kv_heads=2 model.tied=false)
train "$work/z-one" 1 1 1 "${zero[@]}"
train "$work/z-222" 8 2 2 zero_optimization.stage=1 "${zero[@]}"
train "$work/z-llama-one" 1 1 1 "${zero[@]}" "${llama[@]}"
train "$work/z-llama-222" 8 2 2 "${zero[@]}" "${llama[@]}"
train "$work/z-interleaved" 4 2 2 "${zero[@]}" pipeline_schedule=interleaved num_layers_per_virtual_pipeline_stage=1
check_output "mp_checkpoint: consolidate -o writes one file of 3 buffers from 8 shards" 0 \
  "wrote .*3 buffers of [0-9]+ parameters from 8 shards" "$MIXPAR" checkpoint consolidate "$work/z-222/$ck" -o "$work/z-222.safetensors"
"$MIXPAR" checkpoint consolidate "$work/z-llama-222/$ck" "$work/z-llama-222.safetensors" >/dev/null
compare() { python3 tests/cli/safetensors_compare.py "$@"; }
check_output "mp_checkpoint: 2x2x2 consolidated weights equal a 1-rank run's bit for bit" 0 "52 tensors, all equal" \
  compare "$work/z-one/checkpoint.safetensors" "$work/z-222.safetensors" --prefix ""
check_output "mp_checkpoint: LLaMA on 2x2x2: consolidated weights equal a 1-rank run's bit for bit" 0 "[0-9]+ tensors, all equal" \
  compare "$work/z-llama-one/checkpoint.safetensors" "$work/z-llama-222.safetensors" --prefix ""
"$MIXPAR" checkpoint consolidate "$work/z-interleaved/$ck" "$work/z-interleaved.safetensors" >/dev/null
check_output "mp_checkpoint: 1x2x2 interleaved (2 model chunks a stage): consolidated weights equal a 1-rank run's bit for bit" \
  0 "52 tensors, all equal" compare "$work/z-one/checkpoint.safetensors" "$work/z-interleaved.safetensors" --prefix ""
check_output "mp_checkpoint: consolidated Adam moments equal a 1-rank run's within 1e-5" 0 "104 tensors, all within" \
  compare "$work/z-one/checkpoint.safetensors" "$work/z-222.safetensors" --prefix optim. --rtol 1e-5
sample() { "$MIXPAR" sample --checkpoint "$1" --tokens 16 --seed 3 2>&1; }
check "mp_checkpoint: mixpar sample reads the consolidated file and writes what the 1-rank file gives" \
  diff <(sample "$work/z-one/checkpoint.safetensors") <(sample "$work/z-222.safetensors")
check "mp_checkpoint: ... which is text ($(sample "$work/z-222.safetensors" | head -c 40 | tr '\n' ' '))" \
  test "$(sample "$work/z-222.safetensors" | wc -c)" -gt 16
check_output "mp_checkpoint: inspect lists its tensors" 0 "h.3.fcprojw +F32 +\(32, 128\)" \
  "$MIXPAR" checkpoint inspect "$work/z-222.safetensors"

# Hostile files: exit 2 and what is wrong, never a crash.
f="$work/z-222.safetensors"
python3 tests/cli/safetensors_compare.py --make-hostile "$f" "$work/bad"
check_output "mp_checkpoint: a truncated file: exit 2" 2 "data_offsets .* but the file ends at byte offset" "$MIXPAR" checkpoint inspect "$work/bad-truncated.safetensors"
check_output "mp_checkpoint: a header length past the end: exit 2" 2 "header length [0-9]+ at byte offset 0, but only [0-9]+ bytes follow" "$MIXPAR" checkpoint inspect "$work/bad-header-length.safetensors"
check_output "mp_checkpoint: overlapping data offsets: exit 2" 2 "data_offsets \[0, [0-9]+\] overlap tensor" "$MIXPAR" checkpoint inspect "$work/bad-overlap.safetensors"
check_output "mp_checkpoint: an unknown dtype: exit 2" 2 "has dtype F33" "$MIXPAR" checkpoint inspect "$work/bad-dtype.safetensors"
check_output "mp_checkpoint: a damaged shard stops the mesh's resume: exit 2 naming it" 2 "rank-00003-of-00008.safetensors" \
  bash -c "cp -r '$work/half' '$work/damaged' && truncate -s 100 '$work/damaged/$ck/rank-00003-of-00008.safetensors' &&
           timeout -k 5 $(scaled 60) '$MIXPAR' run -n 4 -- '$MIXPAR' train --config '$work/gpt2.json' --quiet \
           --set train.run_dir='$work/damaged' --set tensor_model_parallel_size=2 --set pipeline_model_parallel_size=2 \
           --set train_micro_batch_size_per_gpu=2 --resume auto"
mesh4() { # mesh4 RUN_DIR [SETTING...]: 1x2x2 resuming the 2x2x2 checkpoint
  local dir=$1 sets=() x; shift
  for x in "$@"; do sets+=(--set "$x"); done
  timeout -k 5 "$(scaled 60)" "$MIXPAR" run -n 4 -- "$MIXPAR" train --config "$work/gpt2.json" --quiet \
    --set train.run_dir="$dir" --set tensor_model_parallel_size=2 --set pipeline_model_parallel_size=2 "${sets[@]}" \
    --resume "$work/half/$ck"
}
check_output "mp_checkpoint: another model's checkpoint: exit 2" 2 "holds buffers of [0-9]+ floats, the model has [0-9]+" \
  mesh4 "$work/other" train_micro_batch_size_per_gpu=2 model.channels=64
check_output "mp_checkpoint: a data position that is no whole batch of the new layout (48 rows read, batches of 5): exit 2" 2 \
  "stopped after 48 rows of epoch 0; this run's batches are 5 rows" mesh4 "$work/rows" train_micro_batch_size_per_gpu=5

# fp16 with a dynamic loss scale on 1x2x2: the scale (it grows every 2 clean steps here) and its counters resume
# where they were, so steps 7-12 have the unbroken run's scales and losses.
scales() { grep '"kind":"step"' "$1" | grep -o '"step":[0-9]*\|"scale":[0-9.e+-]*' | paste -sd' ' | sed 's/ "step"/\n"step"/g'; }
fp16=(fp16.enabled=true fp16.initial_scale_power=12 fp16.loss_scale_window=2)
train "$work/fp16-full" 4 2 2 "${fp16[@]}"
train "$work/fp16-half" 4 2 2 "${fp16[@]}" train.steps=6
cp -r "$work/fp16-half" "$work/fp16-resumed"; rm -f "$work/fp16-resumed"/events.*
train "$work/fp16-resumed" 4 2 2 "${fp16[@]}" --resume "$work/fp16-half/$ck"
check "mp_checkpoint: fp16 on 1x2x2 resumed at step 6: the loss scale of steps 7-12 is the unbroken run's" \
  diff <(scales "$work/fp16-full/events.rank0.jsonl" | tail -n 6) <(scales "$work/fp16-resumed/events.rank0.jsonl")
last=$(scales "$work/fp16-half/events.rank0.jsonl" | tail -n 1)
check "mp_checkpoint: ... and by step 6 the scale had moved from 4096 (so a reset would show: $last)" \
  test -n "$last" -a "${last##*:}" != 4096
check "mp_checkpoint: fp16 resumed: steps 7-12 equal the unbroken run's losses bit for bit" \
  diff <(losses "$work/fp16-full/events.rank0.jsonl" | awk '$1 > 6') <(losses "$work/fp16-resumed/events.rank0.jsonl")

# DeepSpeed's pipeline section through `mixpar config translate`.
cat >"$work/ds.json" <<'EOF'
{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8,
 "pipeline": {"stages": 2, "partition_method": "parameters", "activation_checkpoint_interval": 1,
              "seed_layers": false, "pipe_partitioned": true, "grad_partitioned": true}}
EOF
tr() { "$MIXPAR" config translate --from deepspeed "$1" --base configs/tiny-poetry.json --world 4 "${@:2}"; }
tr "$work/ds.json" -o "$work/ds-out.json" >/dev/null 2>&1
check_output "mp_checkpoint: deepspeed pipeline.stages is pipeline_model_parallel_size" 0 \
  '"pipeline_model_parallel_size":[[:space:]]*2' cat "$work/ds-out.json"
check_output "mp_checkpoint: deepspeed activation_checkpoint_interval 1 checkpoints every block" 0 \
  '"policy":[[:space:]]*"every"' cat "$work/ds-out.json"
check_output "mp_checkpoint: deepspeed pipe_partitioned is not mapped, with the reason" 0 \
  "not mapped: pipeline.pipe_partitioned: the hidden state sent between stages is whole" tr "$work/ds.json"
sed -i -e 's/"parameters"/"uniform"/' -e 's/"activation_checkpoint_interval": 1/"activation_checkpoint_interval": 3/' "$work/ds.json"
check_output "mp_checkpoint: deepspeed partition_method uniform is not mapped, with the reason" 0 \
  "not mapped: pipeline.partition_method: mixpar balances the stages by parameters" tr "$work/ds.json"
check_output "mp_checkpoint: deepspeed activation_checkpoint_interval 3 is not mapped, with the reason" 0 \
  "not mapped: pipeline.activation_checkpoint_interval.*different trade" tr "$work/ds.json"
