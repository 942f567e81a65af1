#!/usr/bin/env bash
# 03-mismatched-collective-debug.sh: the ranks call allreduce with different counts (rank r starts at 8<<r
# bytes), as when a rank skips a parameter or pads differently. With MIXPAR_COMM_DEBUG=1 every collective
# first compares its arguments across ranks: a table of who called what, exit 2. Without debug mode the
# same bug corrupts memory or waits until MIXPAR_COMM_TIMEOUT.
source "$(dirname "$0")/common.sh"
MIXPAR_COMM_DEBUG=1 "$M" run -n 2 -- bash -c "exec '$M' comm-bench --op allreduce --algo native \
  --min \$((8 << OMPI_COMM_WORLD_RANK)) --max 64K --iters 2"
