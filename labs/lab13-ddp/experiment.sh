#!/usr/bin/env bash
# experiment.sh: lab 13's experiment (`make lab13`): DDP on 2 ranks against the single-process DataParallel
# baseline on the same model and global batch: a table of where a step's time goes and how many bytes move;
# then a real `mixpar train` on 2 ranks with overlap on, and the visualizer's comm panel of that run showing
# the bucket allreduces running while backward is still computing. Under two minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."

mixpar=build/mixpar
worker=build/labs/lab13_worker
out=runs/lab13
steps=${STEPS:-20}
micro=${MICRO:-8}
bucket=${BUCKET:-200000}
mkdir -p "$out"
[ -x "$mixpar" ] || { echo "lab13: $mixpar is missing; run 'make' first (make lab13 does)" >&2; exit 2; }
make -s "$worker"
export OMP_NUM_THREADS=1 # one thread per rank and for the baseline: the same cores for both

section() { printf '\n==== %s\n\n' "$*"; }

# 1. The two strategies on the bench model (4 blocks, C=128, about 0.8M parameters), global batch 2 x $micro rows
#    of 32 tokens, plain SGD. DDP: 2 processes, each on its half, buckets of $bucket elements averaged on a
#    communication thread. DataParallel: 1 process, 2 replicas run one after the other, gradients summed
#    onto replica 0, its weights copied back. Then 4 replicas, to see the master's traffic grow.
section "1. DDP (2 ranks) vs DataParallel (1 process), $steps steps, mean per step"
if ! "$mixpar" run -n 2 -- "$worker" ddp-bench "$steps" "$micro" "$bucket" > "$out/ddp.txt" 2> "$out/ddp.err"; then
    grep -m1 "not done" "$out/ddp.err" || tail -n 5 "$out/ddp.err"
    echo "lab13: the DDP row waits for lab 13's regions in core/dist/ddp.c (the line above names the first unfinished"
    echo "       one: ddp_create, on_grads_ready, launch, comm_thread or ddp_wait_pending); the baseline still runs"
    : > "$out/ddp.txt"
fi
# DataParallel runs the model's own backward (lab 02's regions): while they are stubs its rows wait.
dp_ok=1
for k in 2 4; do
    rc=0
    "$worker" dp-bench "$k" "$steps" $((micro * 2 / k)) > "$out/dp$k.txt" 2> "$out/dp$k.err" || rc=$?
    if [ "$rc" -ne 0 ]; then
        grep -m1 "not done" "$out/dp$k.err" || tail -n 3 "$out/dp$k.err"
        [ "$rc" -eq 86 ] || exit "$rc"
        echo "lab13: the DataParallel rows wait for the region named above (the model's backward)"
        dp_ok=0
        break
    fi
done
field() { sed -nE "s/.*[ ]$1=([^ ]+).*/\\1/p" "$2"; }
mb() { awk -v b="${1:-0}" 'BEGIN { printf "%.2f", b / 1048576 }'; }
printf '%-22s %8s %9s %9s %9s %9s %9s %12s %12s\n' strategy step_ms compute scatter gather/ar wait bcast "sent/rank" "master MiB"
if [ -s "$out/ddp.txt" ]; then
    f=$out/ddp.txt
    compute=$(awk -v a="$(field forward_ms "$f")" -v b="$(field backward_ms "$f")" 'BEGIN { printf "%.2f", a + b }')
    printf '%-22s %8s %9s %9s %9s %9s %9s %12s %12s\n' "DDP 2 ranks" "$(field step_ms "$f")" "$compute" - \
        "$(field comm_ms "$f")" "$(field wait_ms "$f")" - "$(mb "$(field bytes_per_step "$f")") MiB" -
fi
for k in 2 4; do
    [ "$dp_ok" = 1 ] || break
    f=$out/dp$k.txt
    moved=$(( $(field gather_bytes "$f") + $(field broadcast_bytes "$f") ))
    printf '%-22s %8s %9s %9s %9s %9s %9s %12s %12s\n' "DataParallel K=$k" "$(field step_ms "$f")" \
        "$(field compute_ms "$f")" "$(field scatter_ms "$f")" "$(field gather_ms "$f")" - "$(field broadcast_ms "$f")" - \
        "$(mb "$moved")"
done
cat <<'NOTE'
(ms per step. DDP: compute = forward + backward on one rank's half; gather/ar = first bucket start to last bucket
 end, mostly hidden under backward; wait = what ddp_finish still waited after backward. DataParallel: compute is all
 replicas in turn; master MiB = gradients read plus weights written by replica 0 per step, (K-1) x 2 x params x 4 B.)
NOTE

# 2. A real training run on 2 ranks, overlap on, 3 buckets: its events carry every bucket's allreduce (t0, t1,
#    bucket) next to the backward span, and the comm panel draws them.
section "2. mixpar train on 2 ranks (synthetic addition, 60 steps, buckets of 20000 elements, overlap on)"
run=$out/ddp-2
rm -rf "$run"
if "$mixpar" run -n 2 -- "$mixpar" train --config configs/synthetic-addition.json --quiet --set train.steps=60 \
    --set scheduler.params.total_steps=60 --set train.eval_interval=0 --set train.sample_interval=0 \
    --set train.checkpoint_interval=0 --set train_micro_batch_size_per_gpu=16 --set zero_optimization.overlap_comm=true \
    --set zero_optimization.reduce_bucket_size=20000 --set train.run_dir="$run" > "$out/train.log" 2>&1; then
    "$mixpar" viz --snapshot "$run" --panel comm | tee "$out/comm-panel.txt"
    # Overlap, counted from the events: steps whose bucket 0 allreduce began before that step's backward ended.
    awk -F'"step":' '
      /"kind":"span"/ && /"name":"backward"/ { split($2, a, ","); s=a[1]; match($0, /"t1":[0-9.e+-]+/); bend[s]=substr($0, RSTART+5, RLENGTH-5) }
      /"kind":"comm"/ && /"bucket":0/ { match($0, /"t0":[0-9.e+-]+/); c0[++n]=substr($0, RSTART+5, RLENGTH-5) }
      END { k=0; for (i=1; i<=n; i++) if (c0[i] < bend[i]) k++; printf "bucket 0 started before backward ended in %d of %d steps\n", k, n }' \
      "$run/events.rank0.jsonl"
else
    if grep -m1 "not done" "$out/train.log"; then
        echo "lab13: the 2-rank training run stops until that region is done"
    else
        echo "lab13: the 2-rank training run failed:"; head -n 8 "$out/train.log"; exit 1
    fi
fi

# 3. The overlap as the tests see it: the worker's overlap mode on 2 ranks, 3 buckets, 2 steps. Step 0 holds
#    backward until the first reduction starts (s before B) and lets the last reduction watch ddp_finish; step 1
#    runs free. s: a reduction starts, e: it ends, B: backward ends, F: ddp_finish returns.
section "3. the order of events on rank 0 (overlap mode: 2 ranks, buckets of 3500 elements)"
mkdir -p "$out/overlap"
if "$mixpar" run -n 2 -- "$worker" overlap "$out/overlap" 3500 1 2 2 > "$out/overlap.log" 2>&1; then
    sed -nE 's/^step=([0-9]+) launched=([^ ]+) reduced=([^ ]+) order=([^ ]+) on_main=([0-9]+) ended_at_finish=([0-9]+).*/step \1: order \4   launched \2   reduced \3   on the main thread \5   ended before finish returned \6/p' \
        "$out/overlap/rank0.txt"
else
    grep -m1 -E "not done|lab13_worker:" "$out/overlap.log" || tail -n 3 "$out/overlap.log"
    echo "lab13: the overlap run waits for lab 13's regions (the line above names the first unfinished one)"
fi
echo
echo "lab13: results in $out/ (ddp.txt, dp2.txt, dp4.txt, comm-panel.txt, the run ddp-2/, overlap/)"
