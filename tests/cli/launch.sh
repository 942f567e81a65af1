#!/usr/bin/env bash
# launch.sh: lab 14's gallery of broken launches: each entry ends within its time limit with exit 2 and the
# message that names its mistake (never a hang); and launch variables that agree still run.
source "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
g=labs/lab14-launching/gallery
# entry | seconds allowed on a quiet machine (scaled) | the message (extended regular expression)
while IFS='|' read -r entry limit pattern; do
  check_output "launch: $entry exits 2 (never a hang) with its message" 2 "$pattern" timeout "$(scaled "$limit")" "$g/$entry.sh" </dev/null
done <<'EOF_TABLE'
01-different-configs|30|rank\(s\) 1 differ from rank 0
02-missing-dataset-on-one-rank|30|cannot read 'data/addition/vocab.json'
03-mismatched-collective-debug|30|rank 1: allreduce count 4 fp32 sum \(native\) +<- differs from rank 0
04-stopped-rank-timeout|40|rank 0 of 2 timed out after [0-9]+\.[0-9] s in allreduce
05-torchrun-rank-out-of-range|10|RANK=2 is not below WORLD_SIZE=2
06-torchrun-missing-variables|10|LOCAL_RANK, MASTER_ADDR, MASTER_PORT missing
07-torchrun-without-mpirun|10|torchrun-style launch variables and no mpirun
08-zero-ranks|10|number of ranks must be a whole number from 1 to 4096, not '0'
09-different-data-on-one-node|30|rank 0: 173863 tokens, 84 batches an epoch; rank 1: 130401 tokens, 63 batches
EOF_TABLE
# The gallery is the list above: a new entry needs its row.
check "launch: every gallery entry is checked here" test "$(ls "$g"/[0-9][0-9]-*.sh | wc -l)" -eq 9

# Variables that agree are not refused: a one-process torchrun job trains, and so does an mpirun job with
# stray torchrun variables in its ranks (OpenMPI's win there; mixpar run itself, outside mpirun, refuses them).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
short=(--config configs/synthetic-addition.json --quiet --set train.steps=3 --set scheduler.params.warmup_steps=1
       --set scheduler.params.total_steps=3 --set train.eval_interval=0 --set train.sample_interval=0
       --set train.checkpoint_interval=0)
check "launch: RANK=0 WORLD_SIZE=1 (torchrun, one process) trains" env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 \
  MASTER_ADDR=localhost MASTER_PORT=29500 timeout "$(scaled 60)" "$MIXPAR" train "${short[@]}" --set train.run_dir="$work/one"
check "launch: in ranks mpirun started, its variables win over stray RANK/WORLD_SIZE" timeout "$(scaled 60)" \
  "$MIXPAR" run -n 2 -- env RANK=9 WORLD_SIZE=3 "$MIXPAR" train "${short[@]}" --set train.run_dir="$work/two"
check_output "launch: mixpar run refuses to start inside a torchrun worker with bad variables" 2 \
  "LOCAL_RANK=3 is not below LOCAL_WORLD_SIZE=2" env RANK=1 WORLD_SIZE=4 LOCAL_RANK=3 LOCAL_WORLD_SIZE=2 \
  MASTER_ADDR=h MASTER_PORT=29500 "$MIXPAR" run -n 2 -- "$MIXPAR" train "${short[@]}"
# The plan before the launch: a 1.1B model under plain DDP on 4 ranks cannot fit on this machine (16 bytes of
# model states per parameter on every rank); ZeRO-3 fits. --dry-run stops after the check, which is made
# against a stated 24 GB (this machine's size), not whatever happens to be free while the tests run.
export MIXPAR_AVAILABLE_MEMORY=24GB
check_output "launch: plain DDP of the 1B model on 4 ranks is refused with the plan" 2 \
  "needs [0-9.]+ GB per rank .* x 4 ranks" \
  "$MIXPAR" run -n 4 --dry-run -- "$MIXPAR" train --config configs/llama-1b-zero3.json --set zero_optimization.stage=0
check_output "launch: the refusal says what would fit (ZeRO-3)" 2 "hint: +shard the model states with zero_optimization.stage 3" \
  "$MIXPAR" run -n 4 --dry-run -- "$MIXPAR" train --config configs/llama-1b-zero3.json --set zero_optimization.stage=0
check_output "launch: the 1B model with ZeRO-3 on 4 ranks passes the check" 0 "mpirun" \
  "$MIXPAR" run -n 4 --dry-run -- "$MIXPAR" train --config configs/llama-1b-zero3.json
check_output "launch: MIXPAR_NO_MEMORY_CHECK=1 skips the check" 0 "mpirun" env MIXPAR_NO_MEMORY_CHECK=1 \
  "$MIXPAR" run -n 4 --dry-run -- "$MIXPAR" train --config configs/llama-1b-zero3.json --set zero_optimization.stage=0
check_output "launch: a bad MIXPAR_AVAILABLE_MEMORY is a usage error" 2 "MIXPAR_AVAILABLE_MEMORY" \
  env MIXPAR_AVAILABLE_MEMORY=lots "$MIXPAR" run -n 4 --dry-run -- "$MIXPAR" train --config configs/llama-1b-zero3.json
unset MIXPAR_AVAILABLE_MEMORY
# The check leaves what it cannot read to the ranks: a vocabulary still to be built is built by rank 0.
check_output "launch: a dataset still to be built does not stop the check" 0 "mpirun" env MIXPAR_AVAILABLE_MEMORY=24GB \
  "$MIXPAR" run -n 2 --dry-run -- "$MIXPAR" train --config configs/tiny-poetry.json --set data.dir="$work/nodata"
check_output "launch: a config with errors is left to the ranks to report" 0 "mpirun" \
  "$MIXPAR" run -n 2 --dry-run -- "$MIXPAR" train --config configs/tiny-poetry.json --set model.layers=-3
