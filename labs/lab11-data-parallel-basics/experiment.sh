#!/usr/bin/env bash
# experiment.sh: lab 11's experiment (`make lab11`): synchronous data-parallel SGD (4 ranks, gradients averaged)
# against an asynchronous parameter server (rank 0 serves, 3 workers push as they finish), on the lab's linear
# regression, at three learning rates. Both see 8 rows per update, so the only difference is staleness. A
# table of the loss after 25, 50 and 150 updates with each run's staleness, and gnuplot figures of loss vs
# updates and of the staleness histogram. Under a minute on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."

mixpar=build/mixpar
worker=build/labs/lab11_worker
out=runs/lab11
updates=${UPDATES:-150} # updates per run: sync steps, or 3 workers x updates/3 pushes
lrs=${LRS:-"0.1 0.5 0.9"}
mkdir -p "$out"
[ -x "$mixpar" ] || { echo "lab11: $mixpar is missing; run 'make' first (make lab11 does)" >&2; exit 2; }
make -s "$worker"
export OMP_NUM_THREADS=1

# Runs the worker on 4 ranks; on failure names the unfinished region and stops.
run4() {
    local log=$1; shift
    if ! "$mixpar" run -n 4 -- "$worker" "$@" > "$log" 2>&1; then
        grep -m1 "not done" "$log" || tail -n 5 "$log"
        echo "lab11: the run failed (the line above names the cause; finish the LAB 11 regions in core/dist/ps.c)" >&2
        exit 1
    fi
}

loss_at() { sed -nE "s/^$1=$2 .*loss=([^ ]+).*/\\1/p" "$3"; }
printf '%-6s %5s %12s %12s %12s %10s %9s\n' mode lr "loss@25" "loss@50" "loss@$updates" "staleness" "max"
for lr in $lrs; do
    # Synchronous: 4 ranks x 2 rows = 8 rows per update, every rank takes every step.
    run4 "$out/sync-$lr.log" sync "$out" "$updates" 2 "$lr"
    mv "$out/rank0.txt" "$out/sync-$lr.txt"
    rm -f "$out"/rank[1-3].txt
    f=$out/sync-$lr.txt
    printf '%-6s %5s %12.4g %12.4g %12.4g %10s %9s\n' sync "$lr" "$(loss_at step 24 "$f")" "$(loss_at step 49 "$f")" \
        "$(loss_at step $((updates - 1)) "$f")" 0 0
    # Asynchronous: rank 0 serves, 3 workers x 8 rows per push, each push applied as it arrives.
    run4 "$out/async-$lr.log" async "$out" $((updates / 3)) 8 "$lr" -
    mv "$out/rank0.txt" "$out/async-$lr.txt"
    f=$out/async-$lr.txt
    mean=$(sed -nE 's/^pushes=([0-9]+) .*staleness_sum=([0-9]+) .*/\2 \1/p' "$f" | awk '{ printf "%.2f", $1 / $2 }')
    max=$(sed -nE 's/.*staleness_max=([0-9]+).*/\1/p' "$f")
    printf '%-6s %5s %12.4g %12.4g %12.4g %10s %9s\n' async "$lr" "$(loss_at update 25 "$f")" \
        "$(loss_at update 50 "$f")" "$(loss_at update "$updates" "$f")" "$mean" "$max"
done

# Data files for the figures: "update loss" per run, and the staleness histogram of each async run.
for f in "$out"/sync-*.txt; do sed -nE 's/^step=([0-9]+) loss=([^ ]+)/\1 \2/p' "$f" | awk '{ print $1 + 1, $2 }' > "${f%.txt}.dat"; done
for f in "$out"/async-*.txt; do
    sed -nE 's/^update=([0-9]+) .*loss=([^ ]+)/\1 \2/p' "$f" > "${f%.txt}.dat"
    sed -nE 's/^hist=//p' "$f" | tr ',' '\n' | awk '{ print NR - 1, $1 }' > "${f%.txt}.hist"
done
echo
echo "staleness histogram of the asynchronous runs (pushes per staleness 0, 1, 2, ...; the last bin is >= 15):"
for f in "$out"/async-*.hist; do printf '  lr %-4s %s\n' "$(basename "$f" .hist | cut -d- -f2)" "$(awk '{ printf "%s ", $2 }' "$f")"; done

if command -v gnuplot > /dev/null; then
    first=$(echo "$lrs" | awk '{ print $1 }'); last=$(echo "$lrs" | awk '{ print $NF }')
    gnuplot <<GP
set terminal pngcairo size 900,520
set output "$out/loss.png"
set title "Linear regression, 8 rows per update: synchronous (4 ranks) vs asynchronous (server + 3 workers)"
set xlabel "updates"; set ylabel "evaluation loss"; set logscale y; set grid; set key top right
set yrange [1e-5:10]; set format y "%.0e"
plot "$out/sync-$first.dat" w l lw 2 t "sync, lr $first", "$out/async-$first.dat" w l lw 2 t "async, lr $first", \
     "$out/sync-$last.dat" w l lw 2 t "sync, lr $last", "$out/async-$last.dat" w l lw 2 t "async, lr $last"
set output "$out/staleness.png"
set title "Staleness of each push (asynchronous, 3 workers, lr $first)"
unset logscale y; set yrange [0:*]; set xrange [-0.5:15.5]
set xlabel "staleness (server version at apply - version pulled; 15 = 15 or more)"; set ylabel "pushes"
set style fill solid 0.6; set boxwidth 0.8
plot "$out/async-$first.hist" w boxes t ""
GP
    echo; echo "figures: $out/loss.png $out/staleness.png"
fi
