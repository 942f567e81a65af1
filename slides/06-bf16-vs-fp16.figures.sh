#!/usr/bin/env bash
# 06-bf16-vs-fp16.figures.sh: the figures of chapter 06's deck, drawn by gnuplot from real mixpar output:
#   06-sum-error.png  relative error of a running sum of n addends 0.01 kept in fp32, fp16, bf16: plain, Kahan,
#                     fp32 accumulator (mixpar precision sum --tsv)
#   06-loss-gap.png   the tiny GPT's training loss minus fp32's, step by step, for fp16, bf16 and bf16-pure
#   06-range.png      the share of a training state (weights, Adam's m and v) each format keeps, flushes or
#                     overflows (mixpar precision range --checkpoint --tsv)
# Usage: slides/06-bf16-vs-fp16.figures.sh OUTDIR   (needs build/mixpar: `make`). Uses the runs of `make lab06`
# when they are there; otherwise trains the tiny GPT for 40 steps in each precision (about two minutes).
source "$(dirname "$0")/figures_lib.sh"

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
"$mixpar" precision sum --value 0.01 --n 100,200,500,1000,2000,5000,10000,20000,50000,100000,200000,500000,1000000 \
    --tsv > "$data/sum.tsv"

runs=runs/lab06
recipes="fp32 fp16 bf16 bf16-pure"
complete=1
for r in $recipes; do [ -s "$runs/$r/events.rank0.jsonl" ] || complete=0; done
[ -s "$runs/fp32/checkpoint.safetensors" ] || complete=0
if [ "$complete" -eq 0 ]; then
    runs="$data"
    for r in $recipes; do
        extra=()
        [ "$r" = bf16-pure ] && extra=(--set precision.stochastic_rounding=false)
        "$mixpar" train --config configs/tiny-poetry.json --set precision.recipe="$r" --set train.steps=40 \
            --set train.run_name="slides06-$r" --set train.run_dir="$runs/$r" --set train.eval_interval=0 \
            --set train.sample_interval=0 --set train.checkpoint_interval=40 --set train.hist_interval=0 \
            --set train.log_interval=40 "${extra[@]}" > /dev/null
    done
fi
for r in $recipes; do
    awk '/"kind":"step"/ { match($0, /"step":[0-9]+/); s = substr($0, RSTART + 7, RLENGTH - 7)
                           match($0, /"loss":[-0-9.eE+]+/); print s "\t" substr($0, RSTART + 7, RLENGTH - 7) }' \
        "$runs/$r/events.rank0.jsonl" > "$data/loss_$r.tsv"
done
for r in fp16 bf16 bf16-pure; do paste "$data/loss_$r.tsv" "$data/loss_fp32.tsv" > "$data/gap_$r.tsv"; done
"$mixpar" precision range --checkpoint "$runs/fp32/checkpoint.safetensors" --tsv > "$data/range.tsv"
for t in params adam_m adam_v; do
    awk -F'\t' -v t="$t" '$1 == t && $2 != "fp32" { print $2 "\t" $3 "\t" $6 "\t" $7 }' "$data/range.tsv" > "$data/range_$t.tsv"
done

terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then terminal=pngcairo; fi

# One curve per format and method: colour = format, dash and point = method.
curves=""
for fmt in fp32 fp16 bf16; do
    case $fmt in fp32) color="#333333" ;; fp16) color="#d55e00" ;; *) color="#0072b2" ;; esac
    for m in rounded kahan fp32-acc; do
        [ "$fmt" = fp32 ] && [ "$m" = fp32-acc ] && continue
        case $m in rounded) dash=1 point=7 ;; kahan) dash=2 point=6 ;; *) dash=3 point=4 ;; esac
        curves+="${curves:+, }\"$data/sum.tsv\" using (strcol(1) eq \"$fmt\" && strcol(2) eq \"$m\" ? \$3 : 1/0):(\$7 > 1e-9 ? \$7 : 1e-9)"
        curves+=" with linespoints lw 2 dt $dash pt $point ps 0.7 lc rgb \"$color\" title \"$fmt $m\""
    done
done

gnuplot <<PLOT
set terminal $terminal size 1000,520 font ",12"
set datafile separator "\t"

set output "$outdir/06-sum-error.png"
set logscale xy 10
set format x "10^{%L}"
set format y "10^{%L}"
set xlabel "n (addends 0.01)"
set ylabel "relative error (0 drawn at 10^{-9})"
set yrange [1e-9:2]
set key outside right font ",10"
plot $curves

set output "$outdir/06-loss-gap.png"
unset logscale
unset format
set autoscale
set xlabel "step"
set ylabel "loss minus fp32's loss"
set key inside top left
plot "$data/gap_fp16.tsv" using 1:(\$2 - \$4) with lines lw 2 lc rgb "#d55e00" title "fp16 + dynamic scaling", \
     "$data/gap_bf16.tsv" using 1:(\$2 - \$4) with lines lw 2 lc rgb "#0072b2" title "bf16 (fp32 weights)", \
     "$data/gap_bf16-pure.tsv" using 1:(\$2 - \$4) with lines lw 2 lc rgb "#009e73" title "bf16-pure (bf16 weights, round to nearest)", \
     0 with lines lc rgb "#999999" dt 2 notitle

set output "$outdir/06-range.png"
set multiplot layout 1,3 title "share of a training state each format keeps (fp32 run's checkpoint)"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set yrange [0:100]
set ylabel "% of values"
set xlabel ""
set bmargin 5
set key off
set title "weights"
plot "$data/range_params.tsv" using 2:xtic(1) lc rgb "#009e73" title "kept", "" using 3 lc rgb "#d55e00" title "flushed", "" using 4 lc rgb "#cc0000" title "overflow"
set title "Adam m"
unset ylabel
plot "$data/range_adam_m.tsv" using 2:xtic(1) lc rgb "#009e73" title "kept", "" using 3 lc rgb "#d55e00" title "flushed", "" using 4 lc rgb "#cc0000" title "overflow"
set title "Adam v"
set key at screen 0.5, screen 0.04 center horizontal maxrows 1 width 2
plot "$data/range_adam_v.tsv" using 2:xtic(1) lc rgb "#009e73" title "kept", "" using 3 lc rgb "#d55e00" title "flushed to 0", "" using 4 lc rgb "#cc0000" title "overflow"
unset multiplot
PLOT
