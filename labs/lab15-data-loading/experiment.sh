#!/usr/bin/env bash
# experiment.sh: lab 15's experiment (`make lab15`): which samples each of 3 ranks takes from N=10 over two
# epochs, with padding and with drop_last (bench/sampler_show), then the prefetching loader's throughput with
# 0, 1 and 2 worker threads when preparing a batch costs a real tokenisation of text (bench/loader_bench), then
# `mixpar train` on 1 and 2 ranks with the sampler in the loop. About a minute on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."

out=runs/lab15
mkdir -p "$out"
make -s build/bench/sampler_show build/bench/loader_bench

section() { printf '\n==== %s\n\n' "$*"; }

# Both programs go through the sampler, so an unfinished LAB 15 region stops them ("lab 15 not done").
if ! build/bench/sampler_show --epochs 1 > /dev/null 2>&1; then
    echo "lab15: the sampler does not run yet; finish the LAB 15 regions in core/data/sampler.c:" >&2
    build/bench/sampler_show --epochs 1 2>&1 | tail -3 >&2 || true
    exit 1
fi

# 1. Per-rank sample sets: N=10 samples on world=3 ranks, shuffled with seed 0, epochs 0 and 1, as PyTorch's
#    DistributedSampler(num_replicas=3, rank=r, shuffle=True, seed=0, drop_last=...) would split them (with
#    mixpar's own permutation). '*' marks a sample taken twice in the epoch.
section "build/bench/sampler_show --n 10 --world 3 --epochs 2"
build/bench/sampler_show --n 10 --world 3 --epochs 2 | tee "$out/sampler.txt"

section "build/bench/sampler_show --n 10 --world 3 --epochs 1 --no-shuffle"
build/bench/sampler_show --n 10 --world 3 --epochs 1 --no-shuffle | tee -a "$out/sampler.txt"

# 2. Loader throughput. Each batch's preparation tokenises PREP bytes of text on a worker; the step tokenises
#    STEP bytes on the caller. With 0 workers they add up; with workers they overlap, as far as the cores allow.
prep=${PREP:-256K} step=${STEP:-256K} batches=${BATCHES:-80}
section "build/bench/loader_bench --workers 0,1,2 --batches $batches --prep-bytes $prep --step-bytes $step"
build/bench/loader_bench --workers 0,1,2 --batches "$batches" --prep-bytes "$prep" --step-bytes "$step" \
    | tee "$out/loader.txt"

section "the same with a cheap step (--step-bytes 16K): the loader is the bottleneck"
build/bench/loader_bench --workers 0,1,2 --batches "$batches" --prep-bytes "$prep" --step-bytes 16K \
    | tee -a "$out/loader.txt"
# 3. Your sampler in the training loop: `mixpar train` with data.sampler=distributed takes each rank's rows
#    from dist_sampler (and prefetches them on a worker thread). 2 ranks x 32 rows against 1 rank x 64: the
#    same 64 windows make each global batch, so the losses agree to rounding. (2 ranks need lab 13's DDP.)
steps=${STEPS:-40}
train=(build/mixpar train --config configs/synthetic-addition.json --quiet --set data.sampler=distributed
       --set train.steps="$steps" --set scheduler.params.total_steps="$steps" --set scheduler.params.warmup_steps=5
       --set train.eval_interval=0 --set train.sample_interval=0 --set train.checkpoint_interval=0)
section "3. mixpar train --set data.sampler=distributed: 1 rank x 64 rows vs 2 ranks x 32, $steps steps"
make -s build/mixpar
"${train[@]}" --set train_micro_batch_size_per_gpu=64 --set train.run_dir="$out/train1" > /dev/null
if build/mixpar run -n 2 -- "${train[@]}" --set train_micro_batch_size_per_gpu=32 --set train.run_dir="$out/train2" \
        > "$out/train2.log" 2>&1; then
    losses() { grep '"kind":"step"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }
    paste <(losses "$out/train1/events.rank0.jsonl") <(losses "$out/train2/events.rank0.jsonl") | awk -v n="$steps" '
        BEGIN { printf "%6s %14s %14s %10s\n", "step", "1 rank x 64", "2 ranks x 32", "|diff|" }
        { d = $2 - $4; if (d < 0) d = -d; if (d > m) m = d
          if ($1 % 10 == 0 || $1 == 1) printf "%6d %14.6f %14.6f %10.2e\n", $1, $2, $4, d }
        END { printf "max |diff| over %d steps: %.2e\n", n, m }' | tee "$out/train.txt"
    grep -o '"data":{[^}]*}' "$out/train2/events.rank0.jsonl" | head -n 1
else
    grep -m1 "not done" "$out/train2.log" || tail -n 5 "$out/train2.log"
    echo "lab15: the 2-rank run stopped (the line above says why)"
fi
echo
echo "  tables: $out/sampler.txt, $out/loader.txt, $out/train.txt"
