#!/usr/bin/env bash
# experiment.sh: lab 23's experiment (`make lab23`), under a minute on 2 cores:
#   1. one rank: the tiny GPT-2 (fp32) trained 3 steps with train.profile=true: the spans (your part A) and the
#      trace (part B) of every step; `mixpar profile` puts each kernel on the roofline measured in the same run
#      (part C), names the bottleneck and gives MFU (lab 10);
#   2. two ranks, DDP: the same model on 2 MPI ranks, gradient buckets reduced on the compute thread after backward
#      (overlap off), then on a communication thread during backward (overlap on): how much of the communication
#      no kernel hides (exposed communication, from the traces);
#   3. figures: the kernels on the roofline, and their time per step.
# Tables on stdout; traces for Perfetto (https://ui.perfetto.dev) and figures in runs/lab23/.
set -euo pipefail
cd "$(dirname "$0")/../.."

source labs/experiment_lib.sh
experiment_init 23

train=(train --config configs/tiny-poetry.json --quiet --set train.steps=3 --set scheduler.type=constant
       --set train.profile=true --set train.eval_interval=0 --set train.sample_interval=0
       --set train.checkpoint_interval=0 --set train.hist_interval=0)

# ------------------------------------------------------------------ 1. one rank
section "1. the tiny GPT-2 (L=4, C=128, B=16, T=64, fp32), 3 steps profiled on one rank (spans: part A, trace: part B)"
rm -rf "$out/gpt2"
rc=0
needs_lab "$mixpar" "${train[@]}" --set train.run_dir="$out/gpt2" > "$out/gpt2.log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then grep -m2 -A1 "not done" "$out/gpt2.log" || tail -4 "$out/gpt2.log"; ok_or_todo "$rc"; fi
single_ok=0
if [ "$rc" -eq 0 ]; then
    rc=0
    needs_lab "$mixpar" profile "$out/gpt2" --top 10 --roofline "$out/gpt2_roofline.tsv" \
        --trace "$out/gpt2_trace.json" || rc=$?
    ok_or_todo "$rc"
    [ "$rc" -eq 0 ] && single_ok=1
    echo
    echo "(roofline position: part C; MFU: lab 10's model FLOPs. The per-rank files: $out/gpt2/trace.rank0.json and"
    echo " $out/gpt2/profile.rank0.tsv; the table leaves the first step, warm-up, out)"
fi

# ------------------------------------------------------------------ 2. two ranks
section "2. the same model on 2 ranks with DDP (mixpar run -n 2), buckets of 150,000 gradients: overlap off, then on"
ddp_runs=("ddp:--set zero_optimization.overlap_comm=false" "ddp-overlap:--set zero_optimization.overlap_comm=true")
for spec in "${ddp_runs[@]}"; do
    name=${spec%%:*}
    read -r -a opts <<<"${spec#*:}"
    echo "== $name (${opts[*]})"
    rm -rf "${out:?}/$name"
    rc=0
    needs_lab "$mixpar" run -n 2 -- "$mixpar" "${train[@]}" --set zero_optimization.reduce_bucket_size=150000 \
        "${opts[@]}" --set train.run_dir="$out/$name" > "$out/$name.log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then grep -m1 -A1 "not done" "$out/$name.log" || tail -4 "$out/$name.log"; ok_or_todo "$rc"; break; fi
    rc=0
    needs_lab "$mixpar" profile "$out/$name" --top 4 --trace "$out/${name}_trace.json" || rc=$?
    ok_or_todo "$rc"
    [ "$rc" -eq 0 ] || break
    echo
done
echo "(exposed: a comm call's time during which no kernel ran on the rank (from its trace): a call on the compute"
echo " thread inside backward is all exposed, one on DDP's comm thread is hidden where backward's kernels run beside"
echo " it. A rank's comm time counts from when it entered the allreduce, so waiting for the slower rank is in it.)"

# ------------------------------------------------------------------ figures
if ! command -v gnuplot > /dev/null; then
    echo "lab23: gnuplot is not installed (make deps installs it); $out/*.tsv are the figures' input" >&2
elif [ "$single_ok" -eq 1 ]; then
    png_terminal=png
    if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then png_terminal=pngcairo; fi
    section "figures"
    read -r peak bw < <(awk '/^# peak_flops/ {p = $3} /^# bandwidth/ {b = $3} END {print p / 1e9, b / 1e9}' \
                        "$out/gpt2/profile.rank0.tsv")
    gnuplot <<EOF
set terminal $png_terminal size 1100,700 noenhanced
set output "$out/roofline.png"
set title sprintf("The tiny GPT-2's kernels on this machine's roofline (sgemm peak %.1f GFLOP/s, triad %.1f GB/s)", $peak, $bw)
set xlabel "arithmetic intensity (FLOP per byte moved, from the shapes)"
set ylabel "GFLOP/s achieved (per step, after the first)"
set logscale xy
set xrange [0.05:200]
set yrange [0.1:2 * $peak]
set grid
set key bottom right
set datafile separator "\t"
roof(x) = (x * $bw < $peak) ? x * $bw : $peak
plot roof(x) with lines lw 3 lc rgb "#000000" title "roof: min(peak, intensity x bandwidth)", \
     "$out/gpt2_roofline.tsv" using (stringcolumn(4) eq "memory-bound" ? \$2 : 1/0):3 with points pt 7 ps 1.6 lc rgb "#d55e00" title "memory-bound kernels", \
     "" using (stringcolumn(4) eq "compute-bound" ? \$2 : 1/0):3 with points pt 5 ps 1.6 lc rgb "#0072b2" title "compute-bound kernels", \
     "" using 2:3:1 with labels offset 0,1 font ",8" notitle
EOF
    echo "  $out/roofline.png     the kernels as points under the measured roof"
    grep -v '^#' "$out/gpt2_roofline.tsv" | sort -t$'\t' -k5,5g > "$out/gpt2_kernels_by_time.tsv"
    gnuplot <<EOF
set terminal $png_terminal size 1100,650 noenhanced
set output "$out/kernel_time.png"
set title "Where a step of the tiny GPT-2 goes, by kernel (one rank, fp32): orange memory-bound, blue compute-bound"
set xlabel "ms per step"
set style fill solid 0.8 border -1
set grid x
set datafile separator "\t"
set ytics font ",9"
set yrange [-1:*]
set xrange [0:*]
plot "$out/gpt2_kernels_by_time.tsv" using (\$5 * 0.5):0:(\$5 * 0.5):(0.35):(stringcolumn(4) eq "memory-bound" ? 0xd55e00 : 0x0072b2):ytic(1) \
     with boxxyerrorbars lc rgb variable notitle
EOF
    echo "  $out/kernel_time.png  ms per step of each kernel (orange: memory-bound, blue: compute-bound)"
    echo "  $out/gpt2_trace.json, $out/ddp_trace.json, $out/ddp-overlap_trace.json: open at https://ui.perfetto.dev"
fi
if [ "$todo" -eq 1 ]; then echo; echo "lab23: some parts need your lab regions (see above); make grade LAB=23 shows which"; fi
