#!/usr/bin/env bash
# 13-accumulation-no-divide: gradient accumulation over 8 micro-batches whose loss is not divided by 8, so the summed
# gradient is 8 times the average and SGD with momentum takes steps 8 times too long. The bug is switched on in the
# trainer by MIXPAR_DEBUG_ACCUM_NO_DIVIDE=1 (core/train/step.c, train_step_run); fixed: the loss divided again.
cd "$(dirname "$0")/../../../.."
bug=1
[ -n "$ZOO_FIXED" ] && bug=0
echo "\$ MIXPAR_DEBUG_ACCUM_NO_DIVIDE=$bug mixpar train ... micro-batch 4 x 8 accumulation, SGD momentum lr 0.1"
MIXPAR_DEBUG_ACCUM_NO_DIVIDE=$bug build/mixpar train --config configs/synthetic-addition.json --set data.dir=data \
    --set train.steps=60 --set train.eval_interval=0 --set train.sample_interval=0 --set train.checkpoint_interval=0 \
    --set train.hist_interval=0 --set train.log_interval=10 --set train.run_dir="$ZOO_RUN_DIR" \
    --set train_micro_batch_size_per_gpu=4 --set gradient_accumulation_steps=8 --set gradient_clipping=0 \
    --set 'optimizer={"type": "momentum", "params": {"lr": 0.1, "momentum": 0.9}}' > "$ZOO_RUN_DIR/train.log" 2>&1
rc=$?
grep -E '^(step|trained|mixpar: error|  (expected|found|hint):)|not done' "$ZOO_RUN_DIR/train.log" | cut -c1-110 | tail -7
echo "(mixpar train exit $rc)"
[ "$rc" -eq 86 ] && exit 86
echo "\$ mixpar doctor $ZOO_RUN_DIR"
build/mixpar doctor "$ZOO_RUN_DIR"
