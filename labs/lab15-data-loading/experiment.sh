#!/usr/bin/env bash
# experiment.sh: lab 15's experiment (`make lab15`): which samples each of 3 ranks takes from N=10 over two
# epochs, with padding and with drop_last (bench/sampler_show), then the prefetching loader's throughput with
# 0, 1 and 2 worker threads when preparing a batch costs a real tokenisation of text (bench/loader_bench).
# Under a minute on 2 cores.
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
echo
echo "  tables: $out/sampler.txt, $out/loader.txt"
