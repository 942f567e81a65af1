#!/usr/bin/env bash
# 11-data-parallel-basics.figures.sh: the figures of chapter 11's deck, from lab 11's worker on 4 ranks
# (linear regression, 8 rows per update), drawn by gnuplot:
#   11-loss.png       evaluation loss vs updates: synchronous (4 ranks x 2 rows, gradients averaged) and
#                     asynchronous (parameter server + 3 workers x 8 rows) at lr 0.1 and 0.9, and at lr 0.9
#                     with the staleness bound K = 1
#   11-staleness.png  staleness of each push: 3 workers in arrival order, and with a straggler (worker 1
#                     sleeping 3 ms per gradient)
# Usage: slides/11-data-parallel-basics.figures.sh OUTDIR   (needs build/mixpar and mpirun; `make` first)
source "$(dirname "$0")/figures_lib.sh"

worker=build/labs/lab11_worker
make -s "$worker"
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
export OMP_NUM_THREADS=1
run4() { "$mixpar" run -n 4 -- "$worker" "$@" > /dev/null; }
for lr in 0.1 0.9; do
    run4 sync "$data" 150 2 "$lr"
    sed -nE 's/^step=([0-9]+) loss=([^ ]+)/\1 \2/p' "$data/rank0.txt" | awk '{ print $1 + 1, $2 }' > "$data/sync-$lr.dat"
    run4 async "$data" 50 8 "$lr" - -
    sed -nE 's/^update=([0-9]+) .*loss=([^ ]+)/\1 \2/p' "$data/rank0.txt" > "$data/async-$lr.dat"
    [ "$lr" = 0.1 ] && sed -nE 's/^hist=//p' "$data/rank0.txt" | tr ',' '\n' | awk '{ print NR - 1, $1 }' > "$data/even.hist"
done
run4 async "$data" 50 8 0.9 - 1
sed -nE 's/^update=([0-9]+) .*loss=([^ ]+)/\1 \2/p' "$data/rank0.txt" > "$data/async-0.9-K1.dat"
run4 async "$data" 50 8 0.1 - - 3000
sed -nE 's/^hist=//p' "$data/rank0.txt" | tr ',' '\n' | awk '{ print NR - 1, $1 }' > "$data/straggler.hist"

gnuplot <<GP
set terminal pngcairo size 900,500
set output "$outdir/11-loss.png"
set title "8 rows per update: synchronous (4 ranks) vs asynchronous (server + 3 workers)"
set xlabel "updates"; set ylabel "evaluation loss"; set logscale y; set grid; set key top right
set yrange [1e-5:10]; set format y "%.0e"
plot "$data/sync-0.1.dat" w l lw 2 t "sync, lr 0.1", "$data/async-0.1.dat" w l lw 2 t "async, lr 0.1", \
     "$data/sync-0.9.dat" w l lw 2 t "sync, lr 0.9", "$data/async-0.9.dat" w l lw 2 t "async, lr 0.9", \
     "$data/async-0.9-K1.dat" w l lw 2 dt 2 t "async K=1, lr 0.9"
set output "$outdir/11-staleness.png"
set title "Staleness of each push (lr 0.1, 150 pushes; bin 15 = 15 or more)"
unset logscale y; set format y "%g"; set yrange [0:*]; set xrange [-0.5:15.5]
set xlabel "staleness = server version at apply - version pulled"; set ylabel "pushes"
set style fill solid 0.6; set boxwidth 0.4
plot "$data/even.hist" u (\$1 - 0.2):2 w boxes t "3 workers, arrival order", \
     "$data/straggler.hist" u (\$1 + 0.2):2 w boxes t "worker 1 a straggler (3 ms per gradient)"
GP
echo "wrote $outdir/11-loss.png $outdir/11-staleness.png"
