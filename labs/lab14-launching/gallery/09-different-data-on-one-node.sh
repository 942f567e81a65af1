#!/usr/bin/env bash
# 09-different-data-on-one-node.sh: node 1 has an older, smaller build of the dataset at the same path.
# Both ranks run the same config from their own working folders ("node 0" and "node 1"), so the config hash
# agrees; with fewer batches an epoch rank 1 would run out of data first. The trainer compares every rank's
# tokens, batches an epoch and a fingerprint of the tokens before the first step and stops both, exit 2.
source "$(dirname "$0")/common.sh"
mkdir -p "$scratch/node0/data" "$scratch/node1/data"
"$M" data build addition --out "$scratch/node0/data/addition" >/dev/null
"$M" data build addition --size 15000 --out "$scratch/node1/data/addition" >/dev/null
"$M" run -n 2 -- bash -c "cd '$scratch/node'\$OMPI_COMM_WORLD_RANK && exec '$M' train ${TRAIN[*]} \
  --set data.dir=data --set data.sampler=distributed --set train.run_dir='$scratch/run'"
