#!/usr/bin/env bash
# 13-ddp.figures.sh: the figures of chapter 13's deck, from a 2-rank DDP training run of the addition model
# (mixpar run -n 2, overlap on, buckets of 20000 elements) and lab 13's worker, drawn by gnuplot:
#   13-timeline.png  rank 0's forward, backward and optimizer spans of 3 steps, with each bucket's allreduce
#                    drawn below: the buckets start while backward is still running
#   13-bytes.png     gradient bytes per step: a DDP rank (ring, 2(N-1)/N x 4P) against the DataParallel master
#                    ((K-1) x 8P), computed from the worker's measured byte counts for N, K = 2 and 4
# Usage: slides/13-ddp.figures.sh OUTDIR   (needs build/mixpar and mpirun; `make` first)
source "$(dirname "$0")/figures_lib.sh"

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
export OMP_NUM_THREADS=1
"$mixpar" run -n 2 -- "$mixpar" train --config configs/synthetic-addition.json --quiet --set train.steps=60 \
    --set scheduler.params.total_steps=60 --set train.eval_interval=0 --set train.sample_interval=0 \
    --set train.checkpoint_interval=0 --set train_micro_batch_size_per_gpu=16 --set zero_optimization.overlap_comm=true \
    --set zero_optimization.reduce_bucket_size=20000 --set train.run_dir="$data/run" > /dev/null 2>&1
ev=$data/run/events.rank0.jsonl
num() { sed -nE "s/.*\"$1\":([0-9.e+-]+).*/\\1/p"; }
# Steps 40 to 42, times in ms from the start of step 40's forward.
origin=$(grep '"kind":"span"' "$ev" | grep '"name":"forward"' | grep '"step":40,' | num t0)
for name in forward backward optimizer; do
    grep '"kind":"span"' "$ev" | grep "\"name\":\"$name\"" | grep -E '"step":(40|41|42),' |
        while read -r line; do
            echo "$(num t0 <<< "$line") $(num t1 <<< "$line")"
        done | awk -v o="$origin" '{ printf "%.3f %.3f\n", ($1 - o) * 1e3, ($2 - o) * 1e3 }' > "$data/$name.dat"
done
end=$(tail -n 1 "$data/optimizer.dat" | awk '{print $2}')
grep '"kind":"comm"' "$ev" | grep '"bucket"' | while read -r line; do
    echo "$(num t0 <<< "$line") $(num t1 <<< "$line") $(num bucket <<< "$line")"
done | awk -v o="$origin" -v e="$end" '{ a = ($1 - o) * 1e3; b = ($2 - o) * 1e3; if (a >= 0 && a <= e) printf "%.3f %.3f %d\n", a, b, $3 }' \
    > "$data/comm.dat"

# Bytes: the worker's own counts on the bench model (P = 813824), one step each.
make -s build/labs/lab13_worker
worker=build/labs/lab13_worker
: > "$data/bytes.dat"
for n in 2 4; do
    ddp=$("$mixpar" run -n "$n" -- "$worker" ddp-bench 2 2 200000 | sed -nE 's/.*bytes_per_step=([0-9]+).*/\1/p')
    dp=$("$worker" dp-bench "$n" 2 2 | sed -nE 's/.*gather_bytes=([0-9]+) broadcast_bytes=([0-9]+).*/\1 \2/p' |
         awk '{ print $1 + $2 }')
    echo "$n $ddp $dp" >> "$data/bytes.dat"
done

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

gnuplot <<PLOT
set terminal $terminal size 1000,420 font ",12"
set output "$outdir/13-timeline.png"
set xlabel "time (ms), rank 0, steps 40-42"
set yrange [-0.2:2.2]
set ytics ("allreduce (bucket)" 0.5, "compute" 1.5)
set grid x
set key outside top center horizontal
set style fill solid 0.8
plot "$data/forward.dat" using (\$1+\$2)/2:(1.5):(\$1):(\$2):(1.2):(1.8) with boxxyerror lc rgb "#56b4e9" title "forward", \
     "$data/backward.dat" using (\$1+\$2)/2:(1.5):(\$1):(\$2):(1.2):(1.8) with boxxyerror lc rgb "#e69f00" title "backward", \
     "$data/optimizer.dat" using (\$1+\$2)/2:(1.5):(\$1):(\$2):(1.2):(1.8) with boxxyerror lc rgb "#009e73" title "optimizer", \
     "$data/comm.dat" using (\$1+\$2)/2:(0.5):(\$1):(\$2):(0.2+0.2*\$3):(0.35+0.2*\$3) with boxxyerror lc rgb "#9400d3" title "bucket allreduce (0 low, 2 high)"

set terminal $terminal size 800,460 font ",12"
set output "$outdir/13-bytes.png"
set yrange [0:*]
set ytics auto
set grid y
set style data histogram
set style histogram clustered gap 1
set boxwidth 0.9
set key top left inside
set xlabel "ranks N (DDP) or replicas K (DataParallel)"
set ylabel "gradient traffic per step (MiB)"
plot "$data/bytes.dat" using (\$2/1048576):xtic(1) lc rgb "#9400d3" title "DDP: bytes one rank sends", \
     "" using (\$3/1048576) lc rgb "#e69f00" title "DataParallel: bytes the master moves"
PLOT
echo "wrote $outdir/13-timeline.png $outdir/13-bytes.png"
