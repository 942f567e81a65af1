#!/usr/bin/env bash
# 07-torchrun-without-mpirun.sh: a correct torchrun-style worker (rank 0 of 2), started without mpirun.
# mixpar's ranks meet through MPI, not at MASTER_ADDR:MASTER_PORT, so it stops with the mapping to mpirun's
# variables instead of training alone as rank 0 of 1, exit 2.
source "$(dirname "$0")/common.sh"
RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=localhost MASTER_PORT=29500 "$M" train \
  "${TRAIN[@]}" --set train.run_dir="$scratch/run"
