#!/usr/bin/env bash
# 10-skipped-collective: rank 1 skips one allreduce at step 3; rank 0 waits in it until the communicator's timeout
# (the CPU analogue of an NCCL watchdog timeout). MIXPAR_COMM_TIMEOUT shortens the wait to 5 s here;
# MIXPAR_COMM_DEBUG=1 would name the mismatch at once.
cd "$(dirname "$0")/../../../.." && labs/lab24-common-problems/zoo/build_programs.sh || exit 2
echo "\$ MIXPAR_COMM_TIMEOUT=5 mixpar run -n 2 -- zoo_bugs skip-collective $ZOO_FIXED"
MIXPAR_COMM_TIMEOUT=5 timeout 60 build/mixpar run -n 2 -- build/labs/lab24_zoo_bugs skip-collective $ZOO_FIXED \
    > "$ZOO_RUN_DIR/run.log" 2>&1
rc=$?
grep -vE "^$|^-+$|^Primary job|^Child job|^mpirun|^(  )?(process|Process name|Exit code|PID)" "$ZOO_RUN_DIR/run.log" | cut -c1-200 | head -12
echo "(exit $rc)"
[ "$rc" -eq 0 ] && exit 0 || exit 1
