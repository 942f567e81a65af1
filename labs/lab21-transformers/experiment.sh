#!/usr/bin/env bash
# experiment.sh: lab 21's experiment (`make lab21`), about a minute on 2 cores:
#   1. a GPT-2 block and a LLaMA-style block (RMSNorm, SwiGLU, RoPE) of the same size, 4 layers each, trained on the
#      poetry corpus on 2 data-parallel ranks in bf16 with warmup + cosine and the LLaMA-style weight-decay groups
#      (train.no_decay: your part C); the LLaMA run goes through your RMSNorm, RoPE and SwiGLU code (part A);
#   2. the learning rate your lr_warmup_cosine gives (part B) beside the one the trainer logged at every step;
#   3. validation loss and perplexity of both checkpoints over the whole validation split (your part D);
#   4. two precision probes: the RMSNorm statistic of real activations in fp32 and bf16, and the rotary angles
#      t * freq_i (your rope_frequency) in fp32, bf16 and fp16 up to position 32768.
# Tables on stdout, figures in runs/lab21/*.png.
set -euo pipefail
cd "$(dirname "$0")/../.."

source labs/experiment_lib.sh
experiment_init 21

probe=build/labs/lab21_probe
build_lab_driver "$lab/probe.c" "$probe"
[ -s data/poetry/train.tokens ] || "$mixpar" data build poetry --out data/poetry

# ------------------------------------------------------------------ 1. training
section "1. GPT-2 block vs LLaMA-style block: poetry, 2 ranks, bf16, warmup + cosine, 150 steps"
train_ok=1
for arch in gpt2 llama; do
    echo "== $arch (configs/lab21-$arch.json)"
    rc=0
    needs_lab "$mixpar" run -n 2 -- "$mixpar" train --config "configs/lab21-$arch.json" \
        --set train.run_dir="$out/$arch" > "$out/$arch.log" 2>&1 || rc=$?
    grep -E '^(weight decay|model|precision|data parallel|eval|trained)' "$out/$arch.log" || true
    if [ "$rc" -ne 0 ]; then tail -3 "$out/$arch.log"; train_ok=0; ok_or_todo "$rc"; fi
    echo
done

# Per run: loss and lr per step (step events), validation loss per eval (eval events).
series() {
    awk -v dir="$out" -v name="$1" '
        /"kind":"step"/ { match($0, /"step":[0-9]+/); s = substr($0, RSTART + 7, RLENGTH - 7) + 0
                          match($0, /"loss":[-0-9.e+naif]+/); l = substr($0, RSTART + 7, RLENGTH - 7)
                          match($0, /"lr":[-0-9.e+]+/); lr = substr($0, RSTART + 5, RLENGTH - 5)
                          printf "%d\t%s\t%s\n", s, l, lr > (dir "/" name ".loss.tsv") }
        /"kind":"eval"/ { match($0, /"step":[0-9]+/); s = substr($0, RSTART + 7, RLENGTH - 7) + 0
                          match($0, /"val_loss":[-0-9.e+naif]+/); v = substr($0, RSTART + 11, RLENGTH - 11)
                          printf "%d\t%s\t%.2f\n", s, v, exp(v) > (dir "/" name ".val.tsv") }
    ' "$out/$1/events.rank0.jsonl"
}
if [ "$train_ok" -eq 1 ]; then
    for arch in gpt2 llama; do series "$arch"; done
    printf "%-6s %12s %11s %11s %11s %11s\n" model parameters "loss@1" "loss@141-150" "val loss" "val ppl"
    for arch in gpt2 llama; do
        params=$(grep -m1 '^model:' "$out/$arch.log" | awk '{print $3}')
        awk -F'\t' -v a="$arch" -v p="$params" -v vals="$out/$arch.val.tsv" '
            FNR == 1 { first = $2 } $1 > 140 { tail += $2; n++ }
            END { while ((getline line < vals) > 0) { split(line, f, "\t"); v = f[2]; ppl = f[3] }
                  printf "%-6s %12s %11.4f %11.4f %11.4f %11.2f\n", a, p, first, tail / n, v, ppl }' "$out/$arch.loss.tsv"
    done
    echo
    echo "(val: the trainer's evaluation at step 150, the mean of 7 batch means; perplexity = exp(val loss))"
fi

# ------------------------------------------------------------------ 2. schedule
section "2. warmup + cosine: your lr_warmup_cosine against the lr the trainer logged (peak 1e-3, warmup 15, end 1e-4 at 150)"
sched_ok=0
if [ "$train_ok" -eq 1 ]; then
    rc=0
    needs_lab "$probe" schedule "$out/gpt2.loss.tsv" 15 150 0 1e-3 1e-4 || rc=$?
    ok_or_todo "$rc"
    [ "$rc" -eq 0 ] && sched_ok=1
else
    echo "  (needs the training runs of part 1)"
fi

# ------------------------------------------------------------------ 3. perplexity
section "3. validation loss and perplexity over the whole validation split (your eval_add_losses, eval_perplexity)"
if [ "$train_ok" -eq 1 ]; then
    for arch in gpt2 llama; do
        rc=0
        needs_lab "$probe" eval "$out/$arch/checkpoint.safetensors" || rc=$?
        ok_or_todo "$rc"
    done
    echo
    echo "(every validation token counted once; the last sequence is partial and padded with targets -1, so the mean"
    echo " of batch means gives its few tokens the weight of a whole batch)"
else
    echo "  (needs the training runs of part 1)"
fi

# ------------------------------------------------------------------ 4. precision probes
section "4a. the RMSNorm statistic on real activations of the trained LLaMA-style model: fp32 vs bf16"
rms_ok=0
if [ "$train_ok" -eq 1 ]; then
    rc=0
    needs_lab "$probe" rms "$out/llama/checkpoint.safetensors" "$out/rms.tsv" || rc=$?
    ok_or_todo "$rc"
    [ "$rc" -eq 0 ] && rms_ok=1
else
    echo "  (needs the LLaMA-style run of part 1)"
fi

section "4b. rotary angles t * freq_i in fp32, bf16 and fp16 (head size 32, theta 10000, positions 1..32768)"
rc=0
needs_lab "$probe" rope 32 10000 32768 "$out/rope_angles.tsv" || rc=$?
ok_or_todo "$rc"
rope_ok=$([ "$rc" -eq 0 ] && echo 1 || echo 0)

# ------------------------------------------------------------------ figures
if ! command -v gnuplot > /dev/null; then
    echo "lab21: gnuplot is not installed (make deps installs it); $out/*.tsv are the figures' input" >&2
else
    png_terminal=png
    if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then png_terminal=pngcairo; fi
    section "figures"
    if [ "$train_ok" -eq 1 ]; then
        gnuplot <<EOF2
set terminal $png_terminal size 1100,600
set output "$out/loss.png"
set title "GPT-2 block vs LLaMA-style block, same size (1.17M parameters): poetry, 2 ranks, bf16, warmup + cosine"
set xlabel "step"
set ylabel "loss"
set grid
set key top right
set datafile separator "\t"
plot "$out/gpt2.loss.tsv" using 1:2 with lines lw 2 lc rgb "#0072b2" title "GPT-2: training loss", \
     "$out/llama.loss.tsv" using 1:2 with lines lw 2 lc rgb "#d55e00" title "LLaMA-style: training loss", \
     "$out/gpt2.val.tsv" using 1:2 with linespoints lw 2 pt 7 dt 2 lc rgb "#0072b2" title "GPT-2: validation loss", \
     "$out/llama.val.tsv" using 1:2 with linespoints lw 2 pt 7 dt 2 lc rgb "#d55e00" title "LLaMA-style: validation loss"
EOF2
        echo "  $out/loss.png          training and validation loss of the two blocks"
    fi
    if [ "$rope_ok" -eq 1 ]; then
        gnuplot <<EOF2
set terminal $png_terminal size 1100,600
set output "$out/rope_angles.png"
set title "Rotary angle t * freq_i computed in each format: largest error over the 16 pairs of a head (HS 32, theta 10000)"
set xlabel "position t"
set ylabel "angle error (radians, as a rotation)"
set logscale xy
set xrange [1:32768]
set yrange [1e-9:4]
set format y "10^{%L}"
set grid
set key top left
set datafile separator "\t"
plot "$out/rope_angles.tsv" using 1:(\$2 > 0 ? \$2 : 1e-12) with lines lw 1 lc rgb "#000000" title "fp32", \
     "" using 1:(\$3 > 0 ? \$3 : 1e-12) with lines lw 1 lc rgb "#009e73" title "bf16", \
     "" using 1:(\$4 > 0 ? \$4 : 1e-12) with lines lw 1 lc rgb "#d55e00" title "fp16", \
     0.1 with lines lw 2 dt 2 lc rgb "#999999" title "0.1 rad"
EOF2
        echo "  $out/rope_angles.png   angle error against the position in fp32, bf16 and fp16"
    fi
fi
if [ "$todo" -eq 1 ]; then echo; echo "lab21: some parts need your lab regions (see above); make grade LAB=21 shows which"; fi
