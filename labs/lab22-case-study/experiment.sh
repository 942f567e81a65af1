#!/usr/bin/env bash
# experiment.sh: lab 22's experiment (`make lab22`), about a minute on 2 cores: the whole pipeline once.
#   1. corpus -> your byte-level BPE (vocabulary 512) -> 4 training shards with checksummed headers + val.tokens
#      (mixpar data build poetry --tokenizer bpe --vocab 512 --shards 4); compression against bytes and characters,
#      the first merges as text, and the round trip of the whole corpus (decoded tokens vs the text's sha256);
#   2. training on 2 ranks (mpirun), bf16, ZeRO-2, a checkpoint every 30 steps: one run uninterrupted, one killed
#      with SIGKILL after step 75 and resumed from its step-60 checkpoint; the two loss curves compared bit for bit
#      (with LAB22_STEPS=N: a checkpoint every N/4 steps, the kill after 5N/8, the resume from N/2);
#   3. poems sampled from the final checkpoint, decoded with your BPE.
# Tables on stdout, figures in runs/lab22/*.png.
set -euo pipefail
cd "$(dirname "$0")/../.."

source labs/experiment_lib.sh
experiment_init 22

# Stops the experiment where a lab region is still a LAB_TODO stub (exit 86), saying which part waited for it.
needs_lab() {
    local rc=0
    "$@" || rc=$?
    if [ "$rc" -eq 86 ]; then
        echo
        echo "lab22: this step needs your lab 22 regions (core/data/bpe.c: BPE training, encode, decode;"
        echo "       core/data/tokens.c: tokfile_shard_header); everything after it trains on their output."
        echo "       make grade LAB=22 shows which are done."
        exit 0
    fi
    return "$rc"
}

driver=build/labs/lab22_bpe_table
build_lab_driver "$lab/bpe_table.c" "$driver"

# ------------------------------------------------------------------ 1. data
section "1. corpus -> BPE -> shards (mixpar data build poetry --tokenizer bpe --vocab 512 --shards 4)"
data=$out/data
needs_lab "$mixpar" data build poetry --tokenizer bpe --vocab 512 --shards 4 --out "$data/poetry"
"$mixpar" data build poetry --out "$data/poetry-char" > /dev/null # the character tokenizer, for comparison
ls -l "$data/poetry" | awk 'NR > 1 { printf "  %8d  %s\n", $5, $NF }'
echo
needs_lab "$driver" "$data/poetry" "$data/poetry-char"
echo
"$mixpar" data info "$data/poetry/train-00001-of-00004.tokens" -n 0 | sed 's/^/  /'
# The round trip of the whole corpus: train shards + val decoded with the BPE must be the text info.json hashed.
want=$(awk -F'"' '/"text"/ { t = 1 } t && /"sha256"/ { print $4; exit }' "$data/poetry/info.json")
got=$({ "$mixpar" data decode "$data/poetry/train.tokens"; "$mixpar" data decode "$data/poetry/val.tokens"; } | sha256sum | cut -d' ' -f1)
if [ "$want" = "$got" ]; then echo "round trip: decode(shards + val) has the corpus text's sha256 ${want:0:16}...: identical"
else echo "round trip FAILED: decoded text sha256 $got, the corpus text's $want"; exit 1; fi
# A flipped byte in a copy of a shard is caught when it is opened.
cp "$data/poetry/train-00002-of-00004.tokens" "$out/flipped.tokens"
printf '\x01' | dd of="$out/flipped.tokens" bs=1 seek=1000 conv=notrunc status=none
echo "a copy of shard 2 with byte 1000 overwritten:"
"$mixpar" data info "$out/flipped.tokens" -n 0 2>&1 | sed 's/^/  /' | head -4 || true

# ------------------------------------------------------------------ 2. training, kill, resume
section "2. 2 ranks, bf16, ZeRO-2, a checkpoint every quarter of the run: uninterrupted vs killed, then resumed"
# LAB22_STEPS=600 make lab22 trains 5 times longer (about 5 minutes) for samples that look more like poems: at 120
# steps the loss sits at the tokens' unigram entropy, a plateau the model leaves after about 100 steps.
steps=${LAB22_STEPS:-120}
if ! [[ "$steps" =~ ^[0-9]+$ ]] || [ "$steps" -lt 40 ]; then echo "lab22: LAB22_STEPS must be a number >= 40" >&2; exit 2; fi
interval=$((steps / 4)) # checkpoints at 1/4, 1/2, 3/4 and the end; the kill comes after 5/8, resumed from 1/2
resume_from=$((2 * interval)) kill_after=$((2 * interval + interval / 2))
train_opts=(--config configs/tiny-poetry.json --set data.dir="$data" --set data.dataset=poetry
            --set bf16.enabled=true --set zero_optimization.stage=2 --set model.layers=2 --set model.channels=96
            --set train_micro_batch_size_per_gpu=8 --set optimizer.params.lr=2e-3 --set train.steps=$steps
            --set scheduler.params.warmup_steps=10 --set train.checkpoint_interval=$interval
            --set train.eval_interval=0 --set train.sample_interval=0 --set train.hist_interval=0
            --set train.log_interval=$interval)
# Every step event carries a hash of the parameters (MIXPAR_PARAM_HASH): equal lines mean equal weights too.
export MIXPAR_PARAM_HASH=1
rm -rf "$out/full" "$out/killed"
echo "== full: $steps steps, uninterrupted"
"$mixpar" run -n 2 -- "$mixpar" train "${train_opts[@]}" --set train.run_dir="$out/full" --set train.run_name=full \
    > "$out/full.log" 2>&1 || { tail -5 "$out/full.log"; exit 1; }
grep -E '^(step|trained)' "$out/full.log"

# The same run in a session of its own, so one kill -9 reaches mpirun and both ranks.
echo
echo "== killed: the same run, SIGKILL once rank 0 has logged step $kill_after (its last checkpoint: step $resume_from)"
setsid "$mixpar" run -n 2 -- "$mixpar" train "${train_opts[@]}" --set train.run_dir="$out/killed" \
    --set train.run_name=killed > "$out/killed.log" 2>&1 &
job=$!
last=0
while kill -0 "$job" 2>/dev/null; do
    last=$(grep -o '"kind":"step","rank":0,"t":[^,]*,"step":[0-9]*' "$out/killed/events.rank0.jsonl" 2>/dev/null |
           tail -1 | sed 's/.*"step"://') || true
    [ "${last:-0}" -ge "$kill_after" ] && break
    sleep 0.05
done
if ! kill -0 "$job" 2>/dev/null; then echo "lab22: the run ended (step ${last:-0}) before it could be killed" >&2; exit 1; fi
kill -KILL -- "-$job"
wait "$job" 2>/dev/null || true
killed_at=$(grep -c '"kind":"step","rank":0' "$out/killed/events.rank0.jsonl")
echo "  killed (SIGKILL to mpirun and both ranks) with $killed_at steps logged; checkpoint.sharded/ holds step" \
     "$("$mixpar" checkpoint info "$out/killed/checkpoint.sharded" | awk '$2 == "step" { print $3; exit }')"
echo
echo "== resumed: mixpar train ... --resume auto (from the step-$resume_from checkpoint, to step $steps)"
"$mixpar" run -n 2 -- "$mixpar" train "${train_opts[@]}" --set train.run_dir="$out/killed" --set train.run_name=killed \
    --resume auto > "$out/resumed.log" 2>&1 || { tail -5 "$out/resumed.log"; exit 1; }
grep -E '^(resum|step|trained)' "$out/resumed.log"

# step, loss and parameter hash of every step (for steps logged twice, before the kill and after the resume, the
# later one: the run's curve as it stands), and every line logged, in order, for the figure.
curve() {
    awk '/"kind":"step"/ && /"rank":0/ {
        match($0, /"step":[0-9]+/); s = substr($0, RSTART + 7, RLENGTH - 7) + 0
        match($0, /"loss":[^,]+/); l = substr($0, RSTART + 7, RLENGTH - 7)
        match($0, /"param_hash":"[0-9a-f]+"/); h = substr($0, RSTART + 14, RLENGTH - 15)
        line[s] = s "\t" l "\t" h; if (s > n) n = s
        print s "\t" l "\t" ++k > all }
        END { for (s = 1; s <= n; s++) print line[s] }' all="$2" "$1/events.rank0.jsonl"
}
curve "$out/full" "$out/full.all.tsv" > "$out/full.tsv"
curve "$out/killed" "$out/killed.all.tsv" > "$out/resumed.tsv"
echo
printf "%6s %14s %14s %18s\n" step "loss full" "loss resumed" "param hash"
join -t $'\t' "$out/full.tsv" "$out/resumed.tsv" | awk -F'\t' -v k="$kill_after" -v c="$resume_from" -v i="$interval" '
    $1 == 1 || $1 % i == 0 || $1 == c + 1 || $1 == k || $1 == k + 1 { printf "%6d %14s %14s %18s%s\n", $1, $2, $4, $3,
        ($2 == $4 && $3 == $5) ? "" : "   DIFFERENT" }'
echo
if diff "$out/full.tsv" "$out/resumed.tsv" > "$out/resume.diff"; then
    echo "diff of the loss lines (step, loss to 9 digits, parameter hash): none. The killed-and-resumed run's curve"
    echo "is the uninterrupted one bit for bit, all $(wc -l < "$out/full.tsv") steps."
else
    echo "the curves DIFFER ($(grep -c '^<' "$out/resume.diff") lines; $out/resume.diff):"; head -6 "$out/resume.diff"; exit 1
fi
# Steps after the checkpoint up to the kill were computed twice in the killed run's folder: before the kill and after the resume.
awk '$1 > c { if (seen[$1] != "" && seen[$1] != $2) d++; if (seen[$1] != "") twice++; seen[$1] = $2 }
     END { printf "steps %d-%d ran twice in that folder (before the kill, after the resume): %d pairs, %d differ\n", c + 1, k,
           twice, d }' c="$resume_from" k="$killed_at" "$out/killed.all.tsv"

# ------------------------------------------------------------------ 3. samples
section "3. poems from the final checkpoint (mixpar sample, decoded with your BPE)"
"$mixpar" checkpoint consolidate "$out/killed/checkpoint.sharded" "$out/final.safetensors" > /dev/null
for seed in 1 2 3; do
    echo "-- seed $seed"
    "$mixpar" sample --checkpoint "$out/final.safetensors" --prompt "床前明月光，" --tokens 60 --seed "$seed" |
        head -6 | sed 's/^/  /'
done

# ------------------------------------------------------------------ figure
if ! command -v gnuplot > /dev/null; then
    echo "lab22: gnuplot is not installed (make deps installs it); $out/*.tsv are the figure's input" >&2
    exit 0
fi
png_terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then png_terminal=pngcairo; fi
# The killed run's lines in the order logged: the first run up to the kill, then the resumed one from step 61.
awk -F'\t' 'NR > 1 && $1 <= prev { print "\n" } { print; prev = $1 }' "$out/killed.all.tsv" > "$out/killed.segments.tsv"
gnuplot <<EOF
set terminal $png_terminal size 1100,600
set output "$out/resume_loss.png"
set title "Training loss, 2 ranks, bf16, ZeRO-2: uninterrupted, and killed after step $killed_at then resumed from step $resume_from"
set xlabel "step"
set ylabel "training loss"
set grid
set key at graph 0.45, graph 0.97
set arrow from $resume_from, graph 0 to $resume_from, graph 1 nohead dt 3 lc rgb "#999999"
set arrow from $killed_at, graph 0 to $killed_at, graph 1 nohead dt 2 lc rgb "#d55e00"
set label "checkpoint (step $resume_from)" at $resume_from + 1, graph 0.95
set label "SIGKILL" at $killed_at + 1, graph 0.88 tc rgb "#d55e00"
plot "$out/full.tsv" using 1:2 with lines lw 3 lc rgb "#000000" title "uninterrupted", \
     "$out/killed.segments.tsv" index 0 using 1:2 with points pt 7 ps 0.6 lc rgb "#d55e00" title "killed run, before the kill", \
     "$out/killed.segments.tsv" index 1 using 1:2 with points pt 6 ps 1.0 lc rgb "#0072b2" title "resumed from the checkpoint"
EOF
section "figures"
echo "  $out/resume_loss.png   the two loss curves overlaid"
