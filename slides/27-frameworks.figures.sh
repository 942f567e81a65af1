#!/usr/bin/env bash
# 27-frameworks.figures.sh: the figures of chapter 27's deck, drawn by gnuplot from real mixpar output:
#   27-losses.png   one job written as DeepSpeed JSON, Megatron-LM arguments, FSDP arguments and Horovod settings,
#                   each translated (mixpar config translate) and trained on 2 ranks: the four loss curves
#   27-fusion.png   Horovod's tensor fusion on 2 ranks against the threshold: gradient allreduce calls per step (comm
#                   events) and the fusion buffer's bytes (the run's peak of MEM_COMM), from a sweep of
#                   communication.fusion_threshold
# Usage: slides/27-frameworks.figures.sh OUTDIR   (needs build/mixpar: `make`). Uses the runs of `make lab27` when
# they are there; otherwise runs the experiment first (about 20 s); the sweep takes about 15 s more.
source "$(dirname "$0")/figures_lib.sh"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive

out=runs/lab27
[ -s "$out/losses.dat" ] && [ -s "$out/horovod.json" ] || labs/lab27-frameworks/experiment.sh > /dev/null

# The sweep: the experiment's Horovod config, 8 steps per threshold. Per step (after the first): the allreduce
# calls minus the loss's one (what DDP's single bucket run also makes); and the peak bytes of communication
# buffers, which is the fusion buffer (DDP's buckets are views of the gradients: 0).
sweep=$out/fusion_sweep.tsv
printf '# threshold_bytes\tgradient_allreduces_per_step\tfusion_buffer_bytes\n' > "$sweep"
for bytes in 0 1024 4096 16384 65536 1048576; do
    dir=$out/sweep-$bytes
    rm -rf "$dir"
    "$mixpar" run -n 2 -- "$mixpar" train --config "$out/horovod.json" --quiet --set train.steps=8 \
        --set scheduler.params.total_steps=8 --set communication.fusion_threshold=$bytes --set train.run_dir="$dir" \
        > "$dir.log" 2>&1 || { echo "27-frameworks.figures.sh: the run with threshold $bytes failed:"; tail -5 "$dir.log"; exit 1; }
    peak=$(grep -o '"peak":{[^}]*}' "$dir/events.rank0.jsonl" | tail -n 1 | grep -o '"comm":[0-9]*' | cut -d: -f2)
    # comm events come before their step event: those after step 1's and before step 8's are steps 2 to 8
    awk -v b="$bytes" -v peak="${peak:-0}" '
        /"kind":"step"/ { steps++ }
        /"kind":"comm"/ && /"op":"allreduce"/ && steps >= 1 && steps < 8 { n++ }
        END { printf "%d\t%d\t%d\n", b, n / 7 - 1, peak }' "$dir/events.rank0.jsonl" >> "$sweep"
done

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi
header=$(head -n 1 "$out/losses.dat" | sed 's/^# step //')
gnuplot <<EOF
set terminal $terminal size 1000,520 font ",12"
set output "$outdir/27-losses.png"
set xlabel "step"
set ylabel "training loss (2 ranks)"
set grid
set key top right
names = "$header"
plot for [i=1:words(names)] "$out/losses.dat" using 1:(column(i+1)) with linespoints lw 2 pt i ps 1.2 \
     dt i title word(names, i)

set output "$outdir/27-fusion.png"
set logscale x 2
set xrange [0.5:2**21]
set format x "2^{%L}"
set xlabel "fusion threshold in bytes (HOROVOD FUSION THRESHOLD; 0 drawn at 1)"
set ylabel "gradient allreduce calls per step"
set y2label "fusion buffer (KiB, MEM COMM peak)"
set ytics nomirror
set y2tics
set key top right
plot "$sweep" using (\$1 == 0 ? 1 : \$1):2 with linespoints lw 2 pt 7 lc rgb "#0072b2" title "allreduce calls", \
     "" using (\$1 == 0 ? 1 : \$1):(\$3 / 1024) axes x1y2 with linespoints lw 2 pt 5 dt 2 lc rgb "#d55e00" title "fusion buffer"
EOF
echo "figures in $outdir: 27-losses.png 27-fusion.png; sweep: $sweep"
