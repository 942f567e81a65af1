#!/usr/bin/env bash
# 20-fsdp.figures.sh: the figures of chapter 20's deck, from real runs on 4 ranks (mixpar run -n 4, the addition
# model with 4 blocks, AdamW fp32) and lab 20's forward probe on 2 ranks, drawn by gnuplot:
#   20-strategies.png  per strategy: the shards a rank keeps (param + grad + optim) and the peak of its
#                      communication buffers (gathered units), KiB; and bytes per step (gather, reduce)
#   20-prefetch.png    bytes gathered as each block starts, in blocks beyond the root: no prefetch, prefetch
#                      with limit_all_gathers, prefetch without the limit
# Usage: slides/20-fsdp.figures.sh OUTDIR   (needs build/mixpar and mpirun; `make` first)
source "$(dirname "$0")/figures_lib.sh"

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
make -s build/labs/lab20_worker
tag() { grep -o "\"$2\":{[^}]*}" "$1" | tail -n 1 | grep -o "\"$3\":[0-9]*" | cut -d: -f2; }
mean_field() { grep '"kind":"step"' "$1" | tail -n +2 | grep -o "\"$2\":[0-9.e+-]*" | cut -d: -f2 | awk '{s+=$1} END {print NR ? s/NR : 0}'; }
: > "$data/strategies.dat"
for s in DDP FULL_SHARD SHARD_GRAD_OP NO_SHARD HYBRID_SHARD; do
    if [ "$s" = DDP ]; then set -- --set zero_optimization.stage=0; else set -- --set fsdp.sharding_strategy="$s" --set fsdp.hybrid_shard_size=2; fi
    "$mixpar" run -n 4 -- "$mixpar" train --config configs/synthetic-addition.json --quiet --set train.steps=5 \
        --set scheduler.params.total_steps=5 --set scheduler.params.warmup_steps=2 --set train.eval_interval=0 \
        --set train.sample_interval=0 --set train.hist_interval=0 --set train.checkpoint_interval=0 \
        --set train_micro_batch_size_per_gpu=8 --set model.layers=4 --set train.run_dir="$data/$s" "$@" > /dev/null 2>&1
    ev=$data/$s/events.rank0.jsonl
    psi=$(head -n 1 "$ev" | grep -o '"params":[0-9]*' | cut -d: -f2)
    unit=$(awk -v p="$psi" 'BEGIN { print 3 / 4 * 4 * p }')
    g=$(mean_field "$ev" gather_bytes) r=$(mean_field "$ev" reduce_bytes) c=$(mean_field "$ev" comm_bytes)
    [ "$s" = DDP ] && r=$c
    echo "$s $(( $(tag "$ev" peak param) + $(tag "$ev" peak grad) + $(tag "$ev" peak optim) )) $(tag "$ev" peak comm)" \
        "$(awk -v x="$g" -v u="$unit" 'BEGIN { print x / u }') $(awk -v x="$r" -v u="$unit" 'BEGIN { print x / u }')" \
        >> "$data/strategies.dat"
done
: > "$data/prefetch.dat"
for setting in "0 1" "1 1" "1 0"; do
    "$mixpar" run -n 2 -- build/labs/lab20_worker --forward-held 4 $setting | grep -m1 "root=" |
        awk '{ split($1, r, "="); split($2, b, "="); split($3, h, "="); n = split(h[2], v, ","); printf "%s", NR
               for (i = 1; i <= n; i++) printf " %.3f", (v[i] / 4 - r[2]) / b[2]; printf "\n" }' >> "$data/prefetch.raw"
done
# Transpose: one row per block, one column per setting.
awk '{ for (i = 2; i <= NF; i++) v[NR, i - 1] = $i; n = NF - 1 } END { for (b = 1; b <= n; b++) print b - 1, v[1, b], v[2, b], v[3, b] }' \
    "$data/prefetch.raw" > "$data/prefetch.dat"

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi
gnuplot <<PLOT
set terminal $terminal size 1100,440 font ",12" noenhanced
set output "$outdir/20-strategies.png"
set multiplot layout 1,2
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid y
set yrange [0:*]
set xtics rotate by -20
set key top left inside
set ylabel "KiB per rank (rank 0, 4 ranks)"
plot "$data/strategies.dat" using (\$2/1024):xtic(1) lc rgb "#009e73" title "shards kept (param+grad+optim)", \
     "" using (\$3/1024) lc rgb "#9400d3" title "peak comm (gathered)"
set style histogram rowstacked
set boxwidth 0.6
set ylabel "bytes per step / (3/4 x 4 Psi)"
set yrange [0:3.5]
plot "$data/strategies.dat" using 4:xtic(1) lc rgb "#56b4e9" title "all-gather", "" using 5 lc rgb "#e69f00" title "reduce"
unset multiplot

set terminal $terminal size 800,420 font ",12" noenhanced
set output "$outdir/20-prefetch.png"
set style histogram clustered gap 1
set boxwidth 0.9
set xtics norotate
set yrange [0:4.5]
set xlabel "block starting forward (FULL_SHARD, 4 blocks, 2 ranks)"
set ylabel "blocks gathered (the root aside)"
set key top right inside
plot "$data/prefetch.dat" using 2:xtic(1) lc rgb "#999999" title "no prefetch", \
     "" using 3 lc rgb "#56b4e9" title "forward_prefetch, limit_all_gathers", \
     "" using 4 lc rgb "#e69f00" title "forward_prefetch, no limit"
PLOT
echo "wrote $outdir/20-strategies.png $outdir/20-prefetch.png"
