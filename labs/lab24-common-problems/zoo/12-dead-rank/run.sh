#!/usr/bin/env bash
# 12-dead-rank: two ranks train; rank 1 is killed (SIGKILL, as the kernel's OOM killer does) after 5 seconds. The
# job ends with mpirun's report; the events show how far each rank got. Fixed: checkpoints every 20 steps, and the
# job is started again with --resume auto, continuing from the last one.
cd "$(dirname "$0")/../../../.."
run=$ZOO_RUN_DIR
base="build/mixpar train --config configs/synthetic-addition.json --set data.dir=data --set train.steps=100 \
--set train.eval_interval=0 --set train.sample_interval=0 --set train.hist_interval=0 --set train.log_interval=20 \
--set train.run_dir=$run --set train.checkpoint_interval=20"
kill_rank1='if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec timeout -s KILL 5 '"$base"'; else exec '"$base"'; fi'
echo "\$ mixpar run -n 2 -- mixpar train ... (rank 1 killed after 5 s)"
timeout 120 build/mixpar run -n 2 -- sh -c "$kill_rank1" > "$run/run.log" 2>&1
echo "(exit $?)"
grep -E "^step|killed|signal|exited" "$run/run.log" | cut -c1-200 | tail -4
echo "\$ mixpar doctor $run"
build/mixpar doctor "$run"
rc=$?
if [ -n "$ZOO_FIXED" ]; then
    echo "\$ mixpar run -n 2 -- mixpar train ... --resume auto"
    timeout 120 build/mixpar run -n 2 -- sh -c "exec $base --resume auto" > "$run/resume.log" 2>&1
    grep -E "^(step|trained|resum)" "$run/resume.log" | cut -c1-160 | tail -3
    echo "\$ mixpar doctor $run"
    build/mixpar doctor "$run"
    rc=$?
fi
exit $rc
