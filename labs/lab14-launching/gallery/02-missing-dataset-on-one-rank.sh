#!/usr/bin/env bash
# 02-missing-dataset-on-one-rank.sh: both ranks run the same config, whose data.dir is the relative path
# data/, from their own working folders ("node 0" and "node 1", as on two machines). Node 0 has the whole
# dataset; node 1 got an interrupted copy: train.tokens arrived, the vocabulary did not. Rank 1 stops with
# the path it could not read, exit 2; mpirun then ends rank 0 instead of leaving it waiting in its first
# collective.
source "$(dirname "$0")/common.sh"
# Node 0's copy: the addition dataset, built once; node 1's: the same minus vocab.json.
mkdir -p "$scratch/node0/data" "$scratch/node1/data/addition"
"$M" data build addition --out "$scratch/node0/data/addition" >/dev/null
cp "$scratch/node0/data/addition/train.tokens" "$scratch/node1/data/addition/"
"$M" run -n 2 -- bash -c "cd '$scratch/node'\$OMPI_COMM_WORLD_RANK && exec '$M' train ${TRAIN[*]} \
  --set data.dir=data --set train.run_dir='$scratch/run'"
