#!/usr/bin/env bash
# 06-torchrun-missing-variables.sh: RANK and WORLD_SIZE exported by hand, the rendezvous forgotten. Every
# rank would otherwise guess its peers; launch_env lists the missing variables, exit 2.
source "$(dirname "$0")/common.sh"
RANK=0 WORLD_SIZE=2 "$M" train "${TRAIN[@]}" --set train.run_dir="$scratch/run"
