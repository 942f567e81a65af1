#!/usr/bin/env bash
# 14-every-rank-same-shard: two data parallel ranks whose loader ignores the rank, so both read rank 0's share of
# every global batch (switched on by MIXPAR_DEBUG_SAME_SHARD=1 in core/train/train_data.c). MIXPAR_PARAM_HASH=1 makes
# the trainer write each step's input tokens' hash (batch_hash), which the doctor compares across ranks.
cd "$(dirname "$0")/../../../.."
bug=1
[ -n "$ZOO_FIXED" ] && bug=0
echo "\$ MIXPAR_DEBUG_SAME_SHARD=$bug MIXPAR_PARAM_HASH=1 mixpar run -n 2 -- mixpar train ... (60 steps)"
MIXPAR_DEBUG_SAME_SHARD=$bug MIXPAR_PARAM_HASH=1 timeout 300 build/mixpar run -n 2 -- build/mixpar train \
    --config configs/synthetic-addition.json --set data.dir=data --set train.steps=60 --set train.eval_interval=0 \
    --set train.sample_interval=0 --set train.checkpoint_interval=0 --set train.hist_interval=0 \
    --set train.log_interval=20 --set train.run_dir="$ZOO_RUN_DIR" > "$ZOO_RUN_DIR/train.log" 2>&1
rc=$?
grep -E '^(step|trained|mixpar: error)|not done' "$ZOO_RUN_DIR/train.log" | cut -c1-110 | tail -4
echo "(exit $rc)"
[ "$rc" -eq 86 ] || grep -q "not done" "$ZOO_RUN_DIR/train.log" && exit 86
echo "\$ mixpar doctor $ZOO_RUN_DIR"
build/mixpar doctor "$ZOO_RUN_DIR"
