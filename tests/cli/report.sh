#!/usr/bin/env bash
# report.sh: `mixpar report` on real small runs: a 2-rank ZeRO-3 + bf16 + activation-checkpointing LLaMA (the 1B
# capstone's code path, scaled down) whose report's numbers are checked against its event files (parameters, final
# loss, tokens, each rank's peak bytes, MFU from --peak), its figures; the capstone check on a 1-rank run (pass, each
# rule failing, a checkpoint of another model); exit 2 on bad input (no directory, no events, a malformed or
# truncated event file, bad options).
source "$(dirname "$0")/../lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT" || exit 1
export OMP_NUM_THREADS=1
mini=(--config configs/llama-1b-zero3.json --quiet --set model.layers=2 --set model.channels=128 --set model.heads=4
      --set model.kv_heads=2 --set model.ffn=352 --set model.context=64 --set model.vocab=2842 --set train.steps=4
      --set train.eval_interval=4 --set activation_checkpointing.policy=every)
# field FILE KEY: the first number after "KEY": in the lines of FILE given on stdin
num() { grep -o "\"$1\":[-0-9.e+]*" | head -n 1 | cut -d: -f2; }

timeout "$(scaled 120)" "$MIXPAR" run -n 2 -- "$MIXPAR" train "${mini[@]}" --set train.run_dir="$work/zero3" >/dev/null 2>&1
check_output "report: a 2-rank ZeRO-3 run's report is written" 0 "^report: $work/zero3/report/report.md" \
  "$MIXPAR" report "$work/zero3" --peak 10
md="$work/zero3/report/report.md"
params=$(head -n 1 "$work/zero3/events.rank0.jsonl" | num params)
loss=$(grep '"kind":"step"' "$work/zero3/events.rank0.jsonl" | tail -n 1 | num loss)
val=$(grep '"kind":"eval"' "$work/zero3/events.rank0.jsonl" | tail -n 1 | num val_loss)
check "report: the parameters are the run header's ($params)" grep -q "^| parameters | $params |" "$md"
check "report: the final training loss is the last step event's ($loss)" \
  grep -q "^| final training loss (step 4) | $(awk -v x="$loss" 'BEGIN{printf "%.4f", x}') |" "$md"
check "report: the final validation loss is the last eval event's ($val)" \
  grep -q "^| final validation loss (step 4) | $(awk -v x="$val" 'BEGIN{printf "%.4f", x}') |" "$md"
check "report: tokens = 4 steps x 1 row x 64 tokens x 2 ranks = 512" grep -q "^| tokens | 512 |" "$md"
check "report: FSDP FULL_SHARD over 2 ranks, bf16, checkpointing every block" \
  bash -c "grep -q '2 ranks, FSDP FULL_SHARD (ZeRO stage 3)' '$md' && grep -q 'recipe bf16' '$md' && grep -q '| activation checkpointing | every |' '$md'"
for r in 0 1; do
  peak=$(grep '"kind":"mem"' "$work/zero3/events.rank$r.jsonl" | tail -n 1 | grep -o '"peak":{[^}]*}')
  p=$(num param <<<"$peak") a=$(num act <<<"$peak") c=$(num comm <<<"$peak")
  plan=$(head -n 1 "$work/zero3/events.rank$r.jsonl" | grep -o '"plan":{[^}]*}' | num param)
  ratio=$(awk -v m="$p" -v q="$plan" 'BEGIN{printf "%.3f", m / q}')
  check "report: rank $r's peak param bytes ($p) against the plan's ($plan): ratio $ratio" \
    grep -q "^| param | $plan | $p | $ratio | ok |" <(sed -n "/^Rank $r:/,/^Rank $((r + 1)):/p" "$md")
  # ZeRO-3's gathered units and unreduced gradients (comm) are planned too: the plan is their worst case (a faster
  # communication thread holds less), so the measured peak is at most the plan's, give or take the padded vocabulary.
  check "report: rank $r's peak act ($a) and comm ($c, at most 1.05 x the plan's) bytes" \
    bash -c "sed -n '/^Rank $r:/,/^\$/p;/^Rank $r:/,/^## /p' '$md' | grep -q '^| act | [0-9]* | $a |' &&
             sed -n '/^Rank $r:/,/^## /p' '$md' | grep '^| comm | [0-9]* | $c |' |
               awk -F' [|] ' '{ exit !(\$3 + 0 <= 1.05 * \$2) }'"
done
# MFU = tokens/s x FLOPs a token / (10 GFLOP/s x 2 ranks), from the report's own tokens/s and FLOPs lines
tps=$(grep -o '^| tokens/s | [0-9.]*' "$md" | awk '{print $4}')
fpt=$(grep -o '^| model FLOPs a token | [0-9.e+]*' "$md" | awk '{print $7}')
mfu=$(awk -v t="$tps" -v f="$fpt" 'BEGIN{printf "%.2f", 100 * t * f / 20e9}')
got_mfu=$(grep -o '^| MFU | [0-9.]*% of 20 GFLOP/s' "$md" | awk '{print $4}' | tr -d %)
check "report: MFU ${got_mfu:-none}% = $tps tokens/s x $fpt FLOPs / (10 GFLOP/s x 2 ranks) = $mfu% (to 0.01)" \
  awk -v a="${got_mfu:-nan}" -v b="$mfu" 'BEGIN{exit !(a - b <= 0.011 && b - a <= 0.011)}'
# 6N + 12 L T h for L=2, h=128, T=64, GQA (2 of 4 heads: K, V 64 wide), SwiGLU F=352, untied V=2842 head
check "report: model FLOPs a token = 6 x 732416 + 12 x 2 x 64 x 128 = 4591104" grep -q "^| model FLOPs a token | 4.591e+06 = 6N 4.394e+06 (N = 732416" "$md"
for f in loss loss_scale throughput memory memory_time timeline; do
  check "report: figure $f.png drawn and linked" bash -c "test -s '$work/zero3/report/$f.png' && grep -q '($f.png)' '$md'"
done
check_output "report: without a peak MFU is unknown" 0 "MFU unknown" "$MIXPAR" report "$work/zero3" --no-figures -o "$work/plain.md"

# The capstone check on a finished 1-rank run with a checkpoint.
tiny=(--config configs/tiny-llama-poetry.json --quiet --set train.steps=6 --set scheduler.params.warmup_steps=2
      --set train.eval_interval=6 --set train.checkpoint_interval=6 --set train.sample_interval=0 --set train.hist_interval=0)
timeout "$(scaled 120)" "$MIXPAR" train "${tiny[@]}" --set train.run_dir="$work/cap" >/dev/null 2>&1
check_output "report --capstone: within loose rules it passes, with the recomputed validation loss" 0 \
  "capstone: PASS" "$MIXPAR" report "$work/cap" --capstone --params 1e6:2e6 --target-loss 9 --no-figures
check "report --capstone: the markdown has the check's table" grep -q "^| validation loss, recomputed (fp32, [0-9]* tokens) | [0-9.]* | at most 9.0000 |" "$work/cap/report/report.md"
check_output "report --capstone: 1.47M parameters are outside the course's 10M-20M" 1 \
  "capstone: FAIL: 1465984 parameters: the capstone's model has 10000000 to 20000000" "$MIXPAR" report "$work/cap" --capstone --no-figures
check_output "report --capstone: 6144 tokens are over a budget of 6000" 1 "6144 training tokens: over the budget of 6000" \
  "$MIXPAR" report "$work/cap" --capstone --params 1e6:2e6 --max-tokens 6000 --target-loss 9 --no-figures
check_output "report --capstone: a target of 1.0 is not reached in 6 steps" 1 "validation loss [0-9.]+ recomputed from the weights: above the target 1.0000" \
  "$MIXPAR" report "$work/cap" --capstone --params 1e6:2e6 --target-loss 1 --no-figures
timeout "$(scaled 120)" "$MIXPAR" train "${tiny[@]}" --set model.channels=64 --set train.run_dir="$work/other" >/dev/null 2>&1
cp -r "$work/cap" "$work/forged" && cp "$work/other/checkpoint.safetensors" "$work/forged/checkpoint.safetensors"
sed -i "s|$work/cap/|$work/forged/|g" "$work/forged/events.rank0.jsonl"
check_output "report --capstone: another model's checkpoint in the run is refused" 1 "differs from the run header's" \
  "$MIXPAR" report "$work/forged" --capstone --params 0:1e9 --target-loss 9 --no-figures
check_output "report --capstone: a ZeRO-3 run has no single final checkpoint file" 1 "no final checkpoint" \
  "$MIXPAR" report "$work/zero3" --capstone --no-figures

# Bad input: exit 2 with the reason.
check_output "report: no such directory, exit 2" 2 "no-such-run" "$MIXPAR" report "$work/no-such-run"
mkdir -p "$work/empty"
check_output "report: a directory without events, exit 2" 2 "events.rank" "$MIXPAR" report "$work/empty"
mkdir -p "$work/corrupt" && { head -n 3 "$work/cap/events.rank0.jsonl"; echo '{"v":1,"kind":"step",'; tail -n 2 "$work/cap/events.rank0.jsonl"; } >"$work/corrupt/events.rank0.jsonl"
check_output "report: a malformed line is named by file:line, exit 2" 2 "events.rank0.jsonl:4: a malformed line" "$MIXPAR" report "$work/corrupt"
mkdir -p "$work/truncated" && { cat "$work/cap/events.rank0.jsonl"; printf '{"v":1,"kind":"step","rank":0,"t":9'; } >"$work/truncated/events.rank0.jsonl"
check_output "report: a truncated last line, exit 2" 2 "is truncated" "$MIXPAR" report "$work/truncated"
mkdir -p "$work/headless" && grep -v '"kind":"run"' "$work/cap/events.rank0.jsonl" >"$work/headless/events.rank0.jsonl"
check_output "report: no run header, exit 2" 2 "run header" "$MIXPAR" report "$work/headless"
check_output "report: --peak needs a number, exit 2" 2 "--peak needs a number" "$MIXPAR" report "$work/cap" --peak fast
check_output "report: unknown option, exit 2" 2 "unknown option '--colour'" "$MIXPAR" report "$work/cap" --colour
check_output "report: no RUN_DIR, exit 2" 2 "a RUN_DIR is needed" "$MIXPAR" report
check_output "report: listed in mixpar help" 0 "report .*markdown report of a run" "$MIXPAR" help
