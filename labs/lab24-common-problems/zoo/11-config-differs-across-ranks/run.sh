#!/usr/bin/env bash
# 11-config-differs-across-ranks: a launch script that gives each rank its own learning rate (a rank-dependent
# environment variable leaked into --set). The trainer compares the resolved configs of all ranks before anything
# else and stops naming the key. Fixed: the same command line on every rank.
cd "$(dirname "$0")/../../../.."
lr='1e-3'
[ -z "$ZOO_FIXED" ] && lr='$((OMPI_COMM_WORLD_RANK + 1))e-3'
cmd="build/mixpar train --config configs/synthetic-addition.json --set data.dir=data --set train.steps=60 \
--set train.eval_interval=0 --set train.sample_interval=0 --set train.checkpoint_interval=0 --set train.hist_interval=0 \
--set train.log_interval=10 --set train.run_dir=$ZOO_RUN_DIR --set optimizer.params.lr=$lr"
echo "\$ mixpar run -n 2 -- sh -c '... --set optimizer.params.lr=$lr'"
timeout 120 build/mixpar run -n 2 -- sh -c "$cmd" > "$ZOO_RUN_DIR/run.log" 2>&1
rc=$?
grep -E "^(step|trained|mixpar: error|  (expected|found|hint):)" "$ZOO_RUN_DIR/run.log" | cut -c1-220 | head -8
echo "(exit $rc)"
[ "$rc" -eq 0 ] && build/mixpar doctor "$ZOO_RUN_DIR" && exit 0
exit 1
