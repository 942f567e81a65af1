#!/usr/bin/env bash
# model_parallel.sh: `mixpar train` on dp x tp x pp meshes of real MPI ranks trains the losses of one rank
# (GPT-2 on 2x2x2 with 1f1b and with interleaved + ZeRO-1, LLaMA with GQA on 1x2x2 with gpipe, within 1e-5
# relative over 20 steps); the pipeline's span events show 1F1B holding at most p micro-batches and GPipe
# all m; fp16 on 1x2x2 skips a step with an inf planted on one rank on every rank; invalid meshes exit 2.
# `mixpar plan --tp --pp --micro-batches` gives each stage's bytes per rank and the bubble. Sequence parallel:
# `plan --sp` keeps Korthikanti's sbh(34/t + 5as/(ht)) a block, bad settings exit 2, tp 1 is ignored with
# Megatron's warning, the tp group's comm events are all-gathers and reduce-scatters, and a run's activation
# bytes per rank are `plan --course-model --sp`'s exactly.
# The 8-rank meshes 1x2x4 (1f1b, gpipe, interleaved), 2x4x1 and 1x1x8 of both models are
# tests/mpi/test_model_parallel.c's.
source "$(dirname "$0")/../lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT" || exit 1
export OMP_NUM_THREADS=1
cat >"$work/gpt2.json" <<'EOF'
{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "gradient_clipping": 1.0,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.1}},
 "model": {"arch": "gpt2", "layers": 4, "channels": 64, "heads": 4, "context": 32, "tied": true},
 "data": {"dataset": "poetry", "seq_len": 32},
 "train": {"steps": 20, "eval_interval": 10, "eval_batches": 4, "sample_interval": 0, "checkpoint_interval": 0, "hist_interval": 0}}
EOF
sed -e 's/"arch": "gpt2"/"arch": "llama"/' -e 's/"heads": 4/"heads": 4, "kv_heads": 2/' -e 's/"tied": true/"tied": false/' \
  "$work/gpt2.json" >"$work/llama.json"

losses() { grep '"kind":"step"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }
val_losses() { grep '"kind":"eval"' "$1" | sed -E 's/.*"step":([0-9]+),"val_loss":([^,}]+).*/\1 \2/'; }
# worst relative difference of the two runs' validation losses (steps 10 and 20)
max_val_rel() { paste <(val_losses "$1") <(val_losses "$2") | awk '$1 != $3 {bad=1} {d=($2-$4)/$4; if (d<0) d=-d; if (d>m) m=d}
  END {if (bad || NR != 2) print 1e9; else printf "%.2e\n", m}'; }
# worst relative difference of two runs' step losses (1e9 when the steps do not line up)
max_rel() { paste <(losses "$1") <(losses "$2") | awk '$1 != $3 {bad=1} {d=($2-$4)/$4; if (d<0) d=-d; if (d>m) m=d}
  END {if (bad || NR != 20) print 1e9; else printf "%.2e\n", m}'; }
# the most micro-batches a rank's pipeline held: forwards done whose backward is not, from its span events
most_in_flight() { grep -h '"name":"pp_' "$1" | awk '/pp_forward/ {n++} /pp_backward/ {n--} {if (n>m) m=n} END {print m+0}'; }

run_mesh() { # run_mesh MODEL RANKS TP PP SCHEDULE [SETTING...]
  local model=$1 n=$2 tp=$3 pp=$4 schedule=$5 dir="$work/$1-$2-$3-$4-$5" sets=() x; shift 5
  for x in "$@"; do sets+=(--set "$x"); done
  timeout -k 5 "$(scaled 200)" "$MIXPAR" run -n "$n" -- "$MIXPAR" train --config "$work/$model.json" --quiet \
    --set train.run_dir="$dir" --set tensor_model_parallel_size="$tp" --set pipeline_model_parallel_size="$pp" \
    --set pipeline_schedule="$schedule" "${sets[@]}" >"$dir.log" 2>&1
  echo "$dir"
}

for model in gpt2 llama; do
  "$MIXPAR" train --config "$work/$model.json" --quiet --set train.run_dir="$work/$model-one" >/dev/null 2>&1
done
# gpt2: dp 2 x tp 2 x pp 2, 4 micro-batches a replica; llama: dp 1 x tp 2 x pp 2, 8 micro-batches
for spec in "gpt2 8 2 2 1f1b 4" "llama 4 2 2 gpipe 8"; do
  read -r model n tp pp schedule m <<<"$spec"
  dir=$(run_mesh "$model" "$n" "$tp" "$pp" "$schedule")
  dp=$((n / tp / pp))
  check "model parallel: $model on dp $dp x tp $tp x pp $pp ($schedule) wrote every rank's events" \
    test -s "$dir/events.rank$((n - 1)).jsonl"
  r=$(max_rel "$work/$model-one/events.rank0.jsonl" "$dir/events.rank0.jsonl")
  check "model parallel: $model on dp $dp x tp $tp x pp $pp ($schedule) gives one rank's 20 losses within 1e-5 relative (worst $r)" \
    awk -v r="$r" 'BEGIN{exit !(r <= 1e-5)}'
  r=$(max_val_rel "$work/$model-one/events.rank0.jsonl" "$dir/events.rank$((n - 1)).jsonl")
  check "model parallel: the pipeline's evaluation gives one rank's validation losses at steps 10 and 20 (worst $r)" \
    awk -v r="$r" 'BEGIN{exit !(r <= 1e-5)}'
  # stage 0 is rank 0 (Megatron order: a stage is a block of dp x tp ranks); 20 steps of m micro-batches each
  want=$([ "$schedule" = gpipe ] && echo "$m" || echo "$pp")
  got=$(most_in_flight "$dir/events.rank0.jsonl")
  check "model parallel: $schedule's first stage held $want micro-batches at most (from its span events: $got)" \
    test "$got" = "$want"
  spans=$(grep -c '"name":"pp_' "$dir/events.rank0.jsonl")
  check "model parallel: one span event per forward and per backward of each micro-batch ($spans = 20 x 2 x $m)" \
    test "$spans" -eq $((20 * 2 * m))
done
# interleaved 1F1B (2 chunks of 1 block per stage) with ZeRO-1 over dp, from the config keys
dir=$(run_mesh gpt2 8 2 2 interleaved num_layers_per_virtual_pipeline_stage=1 zero_optimization.stage=1)
r=$(max_rel "$work/gpt2-one/events.rank0.jsonl" "$dir/events.rank0.jsonl")
check "model parallel: gpt2 on 2x2x2, interleaved with 2 chunks and ZeRO-1, gives one rank's losses within 1e-5 (worst $r)" \
  awk -v r="$r" 'BEGIN{exit !(r <= 1e-5)}'
r=$(max_val_rel "$work/gpt2-one/events.rank0.jsonl" "$dir/events.rank0.jsonl")
check "model parallel: interleaved evaluation gives one rank's validation losses (worst $r)" awk -v r="$r" 'BEGIN{exit !(r <= 1e-5)}'
check_output "model parallel: the interleaved run's stage 1 holds blocks 1 and 3 (virtual stages 1 and 3)" 0 \
  '"schedule":"interleaved",.*"zero_stage":1,.*"stage":1,"chunks":2,.*"chunk_blocks":\[1,2,3,4\]' \
  head -n 1 "$dir/events.rank7.jsonl"
# 1F1B on any stage never holds more than p: every rank of the gpt2 run
worst=0
for f in "$work"/gpt2-8-2-2-1f1b/events.rank*.jsonl; do
  got=$(most_in_flight "$f"); [ "$got" -gt "$worst" ] && worst=$got
done
check "model parallel: 1f1b held at most p = 2 micro-batches on every rank ($worst)" test "$worst" -le 2
# the run header names the mesh and the stage's blocks
check_output "model parallel: the run event names dp, tp, pp, the schedule and the stage's blocks" 0 \
  '"model_parallel":\{"dp":2,"tp":2,"pp":2,"schedule":"1f1b","micro_batches":4,.*"stage":1,.*"first_block":2,"last_block":4' \
  head -n 1 "$work/gpt2-8-2-2-1f1b/events.rank7.jsonl"

# ---------------------------------------------------------------- invalid meshes and settings: exit 2
bad() { # bad NAME PATTERN RANKS SETTINGS...
  local name=$1 pattern=$2 n=$3; shift 3
  local sets=() s
  for s in "$@"; do sets+=(--set "$s"); done
  check_output "model parallel refuses $name (exit 2)" 2 "$pattern" timeout -k 5 "$(scaled 60)" \
    "$MIXPAR" run -n "$n" -- "$MIXPAR" train --config "$work/gpt2.json" --quiet --set train.run_dir="$work/bad" "${sets[@]}"
}
bad "a world not divisible by tp x pp" 'world size divisible by tensor_model_parallel_size x pipeline_model_parallel_size' \
  3 tensor_model_parallel_size=2
bad "heads not divisible by tp" 'model.heads = 4 is not divisible by tensor_model_parallel_size = 3' 3 \
  tensor_model_parallel_size=3 train_batch_size=4
bad "kv heads not divisible by tp" 'model.kv_heads = 2 is not divisible by tensor_model_parallel_size = 4' 4 \
  tensor_model_parallel_size=4 model.arch=llama model.kv_heads=2 model.tied=false train_batch_size=4
bad "fewer layers than stages" '4 layers on 8 stages' 8 pipeline_model_parallel_size=8
bad "an unknown schedule" 'pipeline_schedule' 2 pipeline_model_parallel_size=2 pipeline_schedule=zigzag
bad "interleaved without model chunks" 'at least 2 pipeline stages and 2 model chunks per stage' 2 \
  pipeline_model_parallel_size=2 pipeline_schedule=interleaved
bad "interleaved with micro-batches not a multiple of the stages" '6 micro-batches on 4 stages' 4 \
  pipeline_model_parallel_size=4 pipeline_schedule=interleaved num_layers_per_virtual_pipeline_stage=1 \
  train_batch_size=6 model.layers=8
bad "a recipe that stores the weights low" 'precision recipe fp32, bf16 or fp16' 2 tensor_model_parallel_size=2 \
  precision.recipe=bf16-pure

# ---------------------------------------------------------------- mixed precision on the mesh
# fp16 (DeepSpeed's section, no hysteresis) on dp 1 x tp 2 x pp 2 with an inf planted in world rank 3's gradients
# (tp 1 of stage 1) at step 5: every rank skips step 5, only rank 3 found it, the scale halves everywhere.
# The losses' match with one rank under bf16 and fp16 is tests/mpi/test_model_parallel.c's.
dir=$(MIXPAR_INJECT_INF=3:5 run_mesh gpt2 4 2 2 1f1b fp16.enabled=true fp16.initial_scale_power=10 fp16.hysteresis=1 \
  train.steps=8)
check_output "model parallel fp16: the run event names the recipe and the shards' compute" 0 \
  '"precision":\{"recipe":"fp16",.*"scaler":"deepspeed","init_scale":1024,"compute":"fp16"\}' head -n 1 "$dir/events.rank2.jsonl"
step_field() { grep '"kind":"step"' "$1" | grep "\"step\":$2," | sed -E "s/.*\"$3\":([^,}]+).*/\1/"; }
skips=""
for r in 0 1 2 3; do skips+="$(step_field "$dir/events.rank$r.jsonl" 5 skipped)$(step_field "$dir/events.rank$r.jsonl" 4 skipped) "; done
check "model parallel fp16: step 5 skipped and step 4 taken on all 4 ranks ($skips)" test "$skips" = "truefalse truefalse truefalse truefalse "
found=""
for r in 0 1 2 3; do found+="$(step_field "$dir/events.rank$r.jsonl" 5 found_inf_local) "; done
check "model parallel fp16: only rank 3 found the inf itself ($found)" test "$found" = "false false false true "
scales=""
for r in 0 1 2 3; do scales+="$(step_field "$dir/events.rank$r.jsonl" 5 scale)/$(step_field "$dir/events.rank$r.jsonl" 6 scale) "; done
check "model parallel fp16: every rank halves the same scale after the skip ($scales)" test "$scales" = "1024/512 1024/512 1024/512 1024/512 "

# ---------------------------------------------------------------- mixpar plan --tp --pp --micro-batches
check_output "plan: the bubble of 4 stages and 8 micro-batches is 3/11" 0 'bubble +\(p-1\)/\(m\+p-1\) = 3/11 = 0\.273' \
  "$MIXPAR" plan --preset llama-1b --tp 2 --pp 4 --micro-batches 8
inflight() { "$MIXPAR" plan --preset llama-1b --tp 2 --pp 4 --micro-batches 8 "$@" | awk '/^[0-9]+ +[0-9]+-[0-9]+ / {printf "%s ", $8}'; }
check "plan: 1f1b holds 4 3 2 1 micro-batches on the 4 stages ($(inflight))" test "$(inflight)" = "4 3 2 1 "
check "plan: gpipe holds all 8 on every stage ($(inflight --schedule gpipe))" test "$(inflight --schedule gpipe)" = "8 8 8 8 "
# tp 1 x pp 1 is the whole model: the plan's own parameter count
whole=$("$MIXPAR" plan --preset gpt2-124m | sed -nE 's/^params +Psi = ([0-9,]+).*/\1/p')
one=$("$MIXPAR" plan --preset gpt2-124m --tp 1 --pp 1 | awk '/^0 / {print $3}')
check "plan: one stage of one rank holds the whole model ($one = $whole parameters)" test "$one" = "$whole"
check_output "plan: interleaving 3 chunks shrinks the bubble to 3/27" 0 'bubble +\(p-1\)/\(v m\+p-1\) = 3/27 = 0\.111' \
  "$MIXPAR" plan --preset gpt2-124m --pp 4 --micro-batches 8 --schedule interleaved --chunks 3
check_output "plan: --tp not dividing the heads exits 2" 2 'heads = 12 with --tp 5' "$MIXPAR" plan --preset gpt2-124m --tp 5
check_output "plan: more stages than layers exits 2" 2 '12 layers, --pp 16' "$MIXPAR" plan --preset gpt2-124m --pp 16
single=$("$MIXPAR" plan --preset gpt2-124m | awk '/^total / {print $2}')
staged=$("$MIXPAR" plan --preset gpt2-124m --tp 1 --pp 1 | awk '/^0 / {print $10}')
check "plan: tp 1 x pp 1 totals what the single plan does (${staged} GB = $single bytes)" \
  awk -v a="$staged" -v b="$single" 'BEGIN { gsub(",", "", b); d = a - b / 1e9; exit !(d < 0.0005 && d > -0.0005) }'

# ---------------------------------------------------------------- sequence parallel (dist/sp.h)
# Korthikanti et al. 2022: 16-bit GPT-2 with dropout keeps sbh(10 + 24/t + 5as/(ht)) bytes a block under tensor
# parallel and sbh(34/t + 5as/(ht)) with sequence parallel; for gpt2-124m on tp 2 (s 1024, b 1), with the
# final norm's and the head's inputs, the dropout mask and the logits outside the blocks: 0.692 and 0.643 GB.
check_output "plan: tp 2 alone keeps 0.692 GB of activations for gpt2-124m (sbh(10 + 24/t + 5as/ht) a block)" 0 \
  '^0 +0-11 +62,641,920 .* 0\.692 ' "$MIXPAR" plan --preset gpt2-124m --tp 2
check_output "plan: --sp on tp 2 keeps 0.643 GB (sbh(34/t + 5as/ht) a block)" 0 '^0 +0-11 +62,641,920 .* 0\.643 ' \
  "$MIXPAR" plan --preset gpt2-124m --tp 2 --sp
check_output "plan: --sp refuses a sequence not divisible by --tp (exit 2)" 2 'seq divisible by --tp with --sp' \
  "$MIXPAR" plan --preset gpt2-124m --tp 2 --sp --seq 1023
bad "sequence_parallel with data.seq_len not divisible by tp" \
  'data.seq_len divisible by tensor_model_parallel_size under sequence_parallel' 2 tensor_model_parallel_size=2 \
  sequence_parallel=true data.seq_len=31
check_output "sequence_parallel with tensor_model_parallel_size 1 is ignored with a warning, as Megatron-LM does" 0 \
  'warning: sequence_parallel ignored: tensor_model_parallel_size is 1' "$MIXPAR" train --config "$work/gpt2.json" \
  --quiet --set train.run_dir="$work/sp-tp1" --set sequence_parallel=true --set train.steps=1 --set train.eval_interval=0
# a 2-step run on 1x2x2: the tp group's comm events are all-gathers and reduce-scatters; its only allreduce is
# the norms' gradients once a step (stage 0 has no loss)
dir=$(run_mesh gpt2 4 2 2 1f1b sequence_parallel=true train.steps=2 train.eval_interval=0)
tp_ops=$(grep -h '"kind":"comm"' "$dir/events.rank0.jsonl" | grep '"group":"tp"' | sed -E 's/.*"op":"([a-z_]+)".*/\1/' |
  sort | uniq -c | awk '{printf "%s=%s ", $2, $1}')
check "sequence parallel: stage 0's tp group all-gathers and reduce-scatters the sequence, allreduces twice ($tp_ops)" \
  test "$tp_ops" = "allgather=208 allreduce=2 reduce_scatter=144 "
# its activation bytes per rank (the step event's pipeline.act_bytes: MEM_ACT at the pipeline's peak) are the
# planner's for the course's model with --sp, exactly
act_of() { grep '"kind":"step"' "$1" | tail -n 1 | sed -E 's/.*"act_bytes":([0-9]+).*/\1/'; }
measured="stage 0 $(act_of "$dir/events.rank0.jsonl"), stage 1 $(act_of "$dir/events.rank2.jsonl")"
vocab=$(grep -o '"vocab":[0-9]*' "$dir/events.rank0.jsonl" | head -n 1 | cut -d: -f2)
planned=$("$MIXPAR" plan --arch gpt2 --layers 4 --hidden 64 --heads 4 --vocab "$vocab" --context 32 --seq 32 --tp 2 \
  --pp 2 --micro-batches 8 --course-model --sp | sed -nE 's/^activation bytes per rank .*: (stage 0 [0-9]+, stage 1 [0-9]+)$/\1/p')
check "sequence parallel: measured activation bytes per rank equal mixpar plan --course-model --sp's ($measured; plan $planned)" \
  test "$measured" = "$planned"
