#!/usr/bin/env bash
# 04-stopped-rank-timeout.sh: rank 1 stops answering 2 s into training (SIGSTOP, as a swapped-out, debugger-
# held or wedged process would), so rank 0 waits in its gradient allreduce. MIXPAR_COMM_TIMEOUT=3 turns the
# hang into a message naming the collective and what it waited for, exit 2; mpirun then ends rank 1.
source "$(dirname "$0")/common.sh"
MIXPAR_COMM_TIMEOUT=3 "$M" run -n 2 -- bash -c "if [ \$OMPI_COMM_WORLD_RANK = 1 ]; then (sleep 2; kill -STOP \$\$) & fi; \
  exec '$M' train ${TRAIN[*]} --set train.steps=100000 --set scheduler.params.total_steps=100000 \
  --set train.run_dir='$scratch/run'"
