#!/usr/bin/env bash
# experiment.sh: lab 15's experiment (`make lab15`): which samples each of 3 ranks takes from N=10 over two
# epochs, with padding and with drop_last (bench/sampler_show), then the prefetching loader's throughput with
# 0, 1 and 2 worker threads when preparing a batch costs a real tokenisation of text (bench/loader_bench), then
# `mixpar train` on 1 and 2 ranks with the sampler in the loop, then uneven sample lengths: every rank's tokens under
# the sampler's strided split and the length-aware one (bench/straggler --plan), and the same two splits on 4 real
# ranks training the tiny GPT, the slowest rank against the mean from their step events. About 80 s on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."

out=runs/lab15
mkdir -p "$out"
make -s build/bench/sampler_show build/bench/loader_bench build/bench/straggler

section() { printf '\n==== %s\n\n' "$*"; }

# Parts 1-3 go through the sampler, so an unfinished LAB 15 region in core/data/sampler.c stops them ("lab 15 not
# done"); part 4 also needs core/data/balance.c. Each part says what it waits for and the others still run.
sampler_parts() {
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
    if ! "${train[@]}" --set train_micro_batch_size_per_gpu=64 --set train.run_dir="$out/train1" > "$out/train1.log" 2>&1
    then
        grep -m1 "not done" "$out/train1.log" || tail -n 5 "$out/train1.log"
        echo "lab15: the 1-rank run stopped (the line above says why: training needs the earlier labs' regions)"
    elif build/mixpar run -n 2 -- "${train[@]}" --set train_micro_batch_size_per_gpu=32 --set train.run_dir="$out/train2" \
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
}
if build/bench/sampler_show --epochs 1 > /dev/null 2>&1; then
    sampler_parts
else
    echo "lab15: parts 1-3 wait for the LAB 15 regions in core/data/sampler.c:"
    build/bench/sampler_show --epochs 1 2>&1 | grep -m1 "not done" || true
fi

# 4. Uneven lengths. A sample is now a poem of the poetry corpus (15 to 1,033 tokens); a step's global batch of 32
#    poems is split over 4 ranks by the sampler's rule (strided: 8 poems each) or by your balance_assign (each poem,
#    longest first, to the rank with the fewest tokens). --plan only counts tokens (your part D regions); the run
#    trains the tiny GPT on 4 real ranks, each on its poems, and averages the gradients with an allreduce: first one
#    epoch strided, then the same epoch balanced. Each rank's step events say how long its compute took.
source labs/experiment_lib.sh
mixpar=build/mixpar lab=labs/lab15-data-loading
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
straggler=(build/bench/straggler --data data/poetry/train.tokens --batch 32)
plan_straggler() { "${straggler[@]}" --plan --world 4 > "$out/straggler_plan.txt"; }
section "4. uneven lengths: ${straggler[*]} --plan --world 4"
rc=0
[ -s data/poetry/train.tokens ] || "$mixpar" data build poetry --out data/poetry > /dev/null || true
if [ ! -s data/poetry/train.tokens ]; then
    echo "lab15: data/poetry/train.tokens is missing and 'build/mixpar data build poetry --out data/poetry' failed (it"
    echo "       needs Debian's fortunes-zh: make deps installs it); part 4 needs that corpus"
    rc=1
else
    needs_lab plan_straggler || rc=$?
    [ "$rc" -eq 0 ] && cat "$out/straggler_plan.txt"
fi
if [ "$rc" -eq 0 ]; then
    section "4 ranks train on the same epoch, strided then balanced (build/mixpar run -n 4 -- ${straggler[*]})"
    rm -rf "$out/straggler"
    "$mixpar" run -n 4 -- "${straggler[@]}" --steps 13 --run-dir "$out/straggler" > "$out/straggler.log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        grep -m1 "not done" "$out/straggler.log" || tail -n 5 "$out/straggler.log"
        echo "lab15: the 4-rank run stopped (the line above says why: it trains the tiny GPT, so it needs lab 02's backward passes)"
    else
        awk -f "$lab/straggler_summary.awk" -v tsv="$out/straggler.tsv" "$out"/straggler/events.rank*.jsonl \
            | tee "$out/straggler.txt"
        echo
        echo "  max/mean: per step, the slowest rank's tokens (or compute seconds) over the mean rank's, averaged over"
        echo "  the steps; CPU seconds do not depend on how busy the machine is, wall seconds do (4 ranks share its cores)."
        echo "  slowest CPU s: the sum over the steps of the slowest rank's compute, what synchronous steps wait for."
        if command -v gnuplot > /dev/null; then
            png_terminal=png
            if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then png_terminal=pngcairo; fi
            gnuplot <<EOF
set terminal $png_terminal size 1100,600
set termoption noenhanced
set output "$out/straggler.png"
set title "4 ranks, one epoch of poems (global batch 32): the slowest rank over the mean, step by step (bench/straggler)"
set datafile separator "\t"
set xlabel "step of the epoch"
set ylabel "slowest rank / mean rank"
set yrange [0.9:*]
set key below horizontal
plot "< grep strided $out/straggler.tsv" using 1:4 with linespoints lw 2 lc rgb "#d55e00" title "strided (equal counts): compute CPU s", \
     "" using 1:3 with lines dt 2 lc rgb "#d55e00" title "strided: tokens", \
     "< grep balanced $out/straggler.tsv" using (\$1 - 13):4 with linespoints lw 2 lc rgb "#0072b2" title "balanced (LPT): compute CPU s", \
     "" using (\$1 - 13):3 with lines dt 2 lc rgb "#0072b2" title "balanced: tokens"
EOF
            echo "  figure: $out/straggler.png"
        fi
    fi
fi
echo
echo "  tables: $out/sampler.txt, $out/loader.txt, $out/train.txt, $out/straggler_plan.txt, $out/straggler.txt"
