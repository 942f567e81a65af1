#!/usr/bin/env bash
# 05-torchrun-rank-out-of-range.sh: a hand-written torchrun-style launch that counts ranks from 1 (RANK=2 of
# WORLD_SIZE=2). launch_env names the variables that disagree, exit 2.
source "$(dirname "$0")/common.sh"
RANK=2 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=localhost MASTER_PORT=29500 "$M" train "${TRAIN[@]}" \
  --set train.run_dir="$scratch/run"
