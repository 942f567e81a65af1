#!/usr/bin/env bash
# zoo.sh: runs one entry of the lab 24 bug zoo, broken or with its fix, then `mixpar doctor` on its run directory.
#   labs/lab24-common-problems/zoo/zoo.sh NN-name [--fixed] [OUT_DIR]     (OUT_DIR default runs/lab24/zoo)
# Config bugs take their overrides from `mixpar doctor --zoo BUG [--fixed]` (core/diag/zoo_fixes.c: the fixes are
# your lab 24 region); the others run their own run.sh. Exit: the doctor's (0 healthy, 1 problems), 86 while a
# region it needs is a stub, 2 on bad input.
set -uo pipefail
cd "$(dirname "$0")/../../.."
here=labs/lab24-common-problems/zoo
mixpar=build/mixpar
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
entry=${1:?usage: zoo.sh NN-name [--fixed] [OUT_DIR]}
fixed=""
[ "${2:-}" = "--fixed" ] && { fixed=--fixed; shift; }
out=${2:-runs/lab24/zoo}
[ -d "$here/$entry" ] || { echo "zoo.sh: no entry $here/$entry" >&2; exit 2; }
bug=${entry#[0-9][0-9]-}
run_dir=$out/$entry${fixed:+-fixed}
rm -rf "$run_dir"
mkdir -p "$run_dir"

# The zoo's base run: the addition task, 60 steps, nothing but training (about a second).
base=(--config configs/synthetic-addition.json --set train.steps=60 --set train.eval_interval=0
      --set train.sample_interval=0 --set train.checkpoint_interval=0 --set train.hist_interval=0
      --set train.log_interval=10 --set data.dir=data --set train.run_dir="$run_dir")

if [ -x "$here/$entry/run.sh" ]; then
    # an entry with its own reproducer (a program, a launch): it writes into $run_dir and may run the doctor
    ZOO_RUN_DIR=$run_dir ZOO_FIXED=$fixed "$here/$entry/run.sh"
    exit $?
fi
overrides=$("$mixpar" doctor --zoo "$bug" $fixed)
rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
sets=()
while read -r kv; do sets+=(--set "$kv"); done <<<"$overrides"
echo "\$ mixpar train --config configs/synthetic-addition.json ${sets[*]}"
"$mixpar" train "${base[@]}" "${sets[@]}" > "$run_dir/train.log" 2>&1
train_rc=$?
grep -E '^(step|trained|mixpar: error|  (expected|found|hint):)|not done' "$run_dir/train.log" | tail -6
echo "(mixpar train exit $train_rc)"
[ "$train_rc" -eq 86 ] && exit 86 # a region the trainer needs is still a stub (named above)
echo "\$ mixpar doctor $run_dir"
if [ -s "$run_dir/events.rank0.jsonl" ]; then
    "$mixpar" doctor "$run_dir"
else
    # refused before the first step (no events): the plan against the limit says why
    "$mixpar" doctor --config configs/synthetic-addition.json "${sets[@]/train.max_memory=*/train.max_memory=0}" \
        --max-memory "$(printf '%s\n' "${sets[@]}" | sed -n 's/^train.max_memory=//p' | tail -1)"
fi
