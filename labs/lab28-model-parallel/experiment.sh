#!/usr/bin/env bash
# experiment.sh: lab 28's experiment (`make lab28`), about a minute on 2 cores, on real OpenMPI ranks:
#   1. your pieces against the unsharded computation: the column/row-parallel linear pair on 2 ranks (part A) and
#      the vocab-parallel cross-entropy on 4 ranks (part B), by the lab's worker;
#   2. 3D parallel training: one model (GPT-2, 8 blocks, C 32) trained 6 steps on one rank and on 8 ranks as
#      dp x tp x pp = 2x2x2, 1x2x4, 1x1x8 and 2x4x1 (same global batch): the losses against one rank's, and
#      memory per rank (parameters, gradients, AdamW state, in-flight activations) per layout;
#   3. the schedules on 1x1x4 with 8 micro-batches: GPipe, 1F1B (part C) and interleaved 1F1B (2 chunks a stage):
#      the bubble of each order against (p-1)/(v m+p-1), micro-batches in flight, activation bytes;
#   4. the bubble against the number of micro-batches (1F1B, 4 stages, m = 2 .. 16).
# Tables on stdout; figures runs/lab28/schedule_{gpipe,1f1b,interleaved}.png (stage x time from the span
# events) and runs/lab28/bubble.png.
set -euo pipefail
cd "$(dirname "$0")/../.."

source labs/experiment_lib.sh
experiment_init 28
export OMP_WAIT_POLICY=passive
make -s build/labs/lab28_worker > /dev/null
worker=build/labs/lab28_worker

# Runs a command whose log is $1 (the rest: the command); while a region of this lab is a LAB_TODO stub it says
# which and returns 86, so the parts that do not need it still run.
needs_lab() {
    local log=$1 rc=0
    shift
    "$@" > "$log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ] && grep -q "not done" "$log"; then
        todo=1
        grep -m1 "not done" "$log" | sed 's/^/  /'
        echo "  (this part runs once that region is written)"
        return 86
    fi
    [ "$rc" -eq 0 ] || { echo "lab28: failed ($rc): $*"; tail -n 8 "$log"; exit 1; }
}

# ------------------------------------------------------------------ 1. the pieces against the unsharded computation
section "1. your tp pieces against the unsharded computation (in double): worst |got - want| / max |want| per array"
worst() { # worst error per array over every rank's file, relative to the array's largest value
    cat "$1"/out.rank* | awk '{e=$3-$4; if (e<0) e=-e; w=$4; if (w<0) w=-w; if (e>m[$1]) m[$1]=e; if (w>x[$1]) x[$1]=w; n[$1]++}
        END {for (a in m) printf "  %-8s %6d elements  worst %.1e\n", a, n[a], m[a]/x[a]}' | sort
}
rm -rf "$out/check" && mkdir -p "$out/check/linear" "$out/check/ce"
echo "column-parallel A (H 256 -> 128 rows a rank) and row-parallel B, 2 ranks, N 64, C 64 (part A):"
needs_lab "$out/check/linear.log" "$mixpar" run -n 2 -- "$worker" "$out/check/linear" 1 tp_linear 64 64 256 &&
    worst "$out/check/linear" || true
echo "vocab-parallel cross-entropy, V 1000 padded to 1024, 4 ranks of 256 columns, logits in [-30, 30) (part B):"
needs_lab "$out/check/ce.log" "$mixpar" run -n 4 -- "$worker" "$out/check/ce" 1 vocab_ce 64 1000 1024 30 &&
    worst "$out/check/ce" || true

# ------------------------------------------------------------------ 2. 3D parallel training
steps=6
common=(--config configs/synthetic-addition.json --quiet --set model.layers=8 --set model.channels=32 --set model.padded_vocab=16
        --set train.steps=$steps --set scheduler.params.warmup_steps=2 --set train.eval_interval=0
        --set train.sample_interval=0 --set train.hist_interval=0 --set train.checkpoint_interval=0
        --set train_micro_batch_size_per_gpu=2)
# train NAME RANKS DP TP PP SCHEDULE MICRO_BATCHES [SETTING...]: global batch 2 x m x dp rows
train() {
    local name=$1 n=$2 dp=$3 tp=$4 pp=$5 schedule=$6 m=$7 sets=() x
    shift 7
    for x in "$@"; do sets+=(--set "$x"); done
    rm -rf "$out/$name"
    local cmd=("$mixpar" train "${common[@]}" --set gradient_accumulation_steps="$m" --set train.run_dir="$out/$name"
               --set tensor_model_parallel_size="$tp" --set pipeline_model_parallel_size="$pp"
               --set pipeline_schedule="$schedule" "${sets[@]}")
    [ "$n" -eq 1 ] || cmd=("$mixpar" run -n "$n" -- "${cmd[@]}")
    needs_lab "$out/$name.log" "${cmd[@]}"
}
losses() { grep '"kind":"step"' "$1" | grep -o '"loss":[^,]*' | cut -d: -f2; }
num() { grep -o "\"$2\":[-0-9.e+]*" "$1" | head -n 1 | cut -d: -f2; }
lastnum() { grep -o "\"$2\":[-0-9.e+]*" "$1" | tail -n 1 | cut -d: -f2; }
kib() { awk -v x="$1" 'BEGIN { printf "%.1f", x / 1024 }'; }
# spans RUN P STEP > TSV: the step's pp spans of every stage, "stage micro f|b t0 t1 chunk", ms from its first start
spans() {
    local run=$1 p=$2 step=$3 r
    for ((r = 0; r < p; r++)); do grep '"name":"pp_' "$run/events.rank$r.jsonl" | grep "\"step\":$step,"; done |
        sed -E 's/.*"name":"pp_([a-z]+)".*"t0":([0-9.e+]+),"t1":([0-9.e+]+),"stage":([0-9]+).*"micro":([0-9]+)(.*"chunk":([0-9]+))?.*/\4 \5 \1 \2 \3 \7/' |
        awk '{s[NR]=$1" "$2" "substr($3,1,1); t0[NR]=$4; t1[NR]=$5; c[NR]=$6==""?0:$6; if (NR==1||$4<m) m=$4}
             END {for (i=1;i<=NR;i++) printf "%s %.3f %.3f %s\n", s[i], (t0[i]-m)*1e3, (t1[i]-m)*1e3, c[i]}' | sort -k1,1n -k4,4n
}
# replay TSV P V [TIMELINE]: the bubble of the order the stages ran, each action taking its stage's least measured time for
# its direction and starting as soon as its stage is free and its input made (no transfer time, no waiting for a
# core): what the order implies with the stages as unequal as they really are. TIMELINE gets its actions, as TSV.
replay() {
    awk -v P="$2" -v V="$3" -v timeline="${4:-}" '{st[NR]=$1; mi[NR]=$2; k[NR]=$3; d[NR]=$5-$4; ch[NR]=$6; n=NR}
    END {
        # each action takes the least time its stage took for that direction in the step: the same work each time,
        # so the least is its compute with a core of its own (on a shared machine the others also wait for one)
        for (i = 1; i <= n; i++) { key = st[i] k[i]; if (!(key in med) || d[i] < med[key]) med[key] = d[i] }
        for (i = 1; i <= n; i++) { d[i] = med[st[i] k[i]]; busy += d[i] }
        left = n
        while (left > 0) {
            moved = 0
            for (i = 1; i <= n; i++) {
                if (done[i]) continue
                s = st[i]; if (blocked[s] == 1) continue
                vs = ch[i] * P + s
                if (k[i] == "f") ready = vs == 0 ? 0 : (("f", vs - 1, mi[i]) in end ? end["f", vs - 1, mi[i]] : -1)
                else ready = vs == P * V - 1 ? end["f", vs, mi[i]] : (("b", vs + 1, mi[i]) in end ? end["b", vs + 1, mi[i]] : -1)
                if (ready < 0) { blocked[s] = 1; continue }   # this stage waits: its later actions too
                t = ready > free[s] ? ready : free[s]
                free[s] = t + d[i]; end[k[i], vs, mi[i]] = free[s]; done[i] = 1; left--; moved = 1
                if (timeline != "") printf "%d %d %s %.3f %.3f %d\n", s, mi[i], k[i], t, free[s], ch[i] > timeline
                if (free[s] > span) span = free[s]
            }
            for (s in blocked) delete blocked[s]
            if (!moved) { print "nan"; exit }
        }
        printf "%.3f", 1 - busy / (P * span)
    }' "$1"
}

section "2. 3D parallel training on 8 ranks vs one rank: $steps steps of 16 sequences (GPT-2, 8 blocks, C 32)"
one_ok=1
train one 1 1 1 1 1f1b 8 || one_ok=0
[ "$one_ok" -eq 1 ] && printf '%-6s %-5s | %-12s | %-30s | %s\n' "mesh" "m" "max |dloss|" "rank 0: param grad optim act KiB" "last rank: param grad optim act KiB"
[ "$one_ok" -eq 1 ] && printf '%-6s %-5s | %-12s | %-30s |\n' "1x1x1" 8 "-" \
    "$(kib "$(num $out/one/events.rank0.jsonl param)") $(kib "$(num $out/one/events.rank0.jsonl grad)") $(kib "$(num $out/one/events.rank0.jsonl optim)") (whole model)"
for spec in "2x2x2 2 2 2 4" "1x2x4 1 2 4 8" "1x1x8 1 1 8 8" "2x4x1 2 4 1 4"; do
    [ "$one_ok" -eq 1 ] || break
    read -r mesh dp tp pp m <<<"$spec"
    train "$mesh" 8 "$dp" "$tp" "$pp" 1f1b "$m" || continue
    diff=$(paste <(losses "$out/one/events.rank0.jsonl") <(losses "$out/$mesh/events.rank0.jsonl") |
           awk '{d=$1-$2; if (d<0) d=-d; if (d>x) x=d} END {printf "%.1e", x}')
    row=()
    for r in 0 7; do
        ev=$out/$mesh/events.rank$r.jsonl
        row+=("$(kib "$(num "$ev" param)") $(kib "$(num "$ev" grad)") $(kib "$(num "$ev" optim)") $(kib "$(lastnum "$ev" act_bytes)")")
    done
    printf '%-6s %-5s | %-12s | %-30s | %s\n' "$mesh" "$m" "$diff" "${row[0]}" "${row[1]}"
done
cat <<'NOTE'
(mesh: dp x tp x pp; m: micro-batches a replica per step (gradient accumulation), 2 sequences each, so every mesh
 sees the same 16 sequences a step. param, grad, optim: the rank's bytes (MEM_PARAM, MEM_GRAD, MEM_OPTIM: AdamW's
 m and v); act: the most activation bytes it held during a step (MEM_ACT, the micro-batches in flight). Rank 0 is
 stage 0 (embeddings), rank 7 the last stage (head and loss; the tied embedding's copy). The losses are one
 rank's: the pipeline only moves the arithmetic; averaging dp replicas' gradients sums in another order.)
NOTE

# ------------------------------------------------------------------ 3. the schedules
# Wider blocks for the schedules, so a micro-batch's forward takes milliseconds, not the clock's resolution.
wide=(model.channels=128)
section "3. schedules on 1x1x4, 8 micro-batches (C 128): the bubble of each order and what it holds"
printf '%-12s | %8s %9s %9s %9s | %10s %12s\n' schedule formula "order" replay measured "in flight" "act KiB s0"
for spec in "gpipe 1" "1f1b 1" "interleaved 2"; do
    read -r schedule v <<<"$spec"
    extra=()
    [ "$v" -eq 1 ] || extra=(num_layers_per_virtual_pipeline_stage=1)
    train "pp4-$schedule" 4 1 1 4 "$schedule" 8 "${wide[@]}" "${extra[@]}" || continue
    ev=$out/pp4-$schedule/events.rank0.jsonl
    # the bubble of the order with the step's mean times, measured idle share: mean over steps 2..6
    order=$(grep '"kind":"step"' "$ev" | tail -n +2 | grep -o '"bubble_schedule":[^,]*' | cut -d: -f2 | awk '{s+=$1} END {printf "%.3f", s/NR}')
    meas=$(grep '"kind":"step"' "$ev" | tail -n +2 | grep -o '"bubble":[^,]*' | cut -d: -f2 | awk '{s+=$1} END {printf "%.3f", s/NR}')
    spans "$out/pp4-$schedule" 4 "$steps" > "$out/spans-$schedule.tsv"
    printf '%-12s | %8.3f %9s %9s %9s | %10s %12s\n' "$schedule" "$(lastnum "$ev" bubble_formula)" "$order" \
        "$(replay "$out/spans-$schedule.tsv" 4 "$v" "$out/replay-$schedule.tsv")" "$meas" "$(lastnum "$ev" in_flight)" "$(kib "$(lastnum "$ev" act_bytes)")"
done
cat <<'NOTE'
(formula: (p-1)/(v m+p-1); order: the idle share the schedule's order implies with the step's mean forward and
 backward times (pp_schedule_bubble: equal stages, so the formula); replay: the last step's actions in the order
 each stage ran them (its span events), each taking its stage's least forward or backward time of the step and
 starting as soon as its stage is free and its input made (no transfer time; unequal stages move it off the
 formula); measured: 1 - compute / wall time of stage 0, which with 4 ranks on 2 shared cores is mostly waiting
 for a core, not for a neighbour. in flight: the most micro-batches stage 0 held (forward done, backward not;
 chunk-micro-batches of half the blocks for interleaved); act: its peak activation bytes. GPipe holds all m,
 1F1B at most p, whatever m is.)
NOTE

# ------------------------------------------------------------------ 4. bubble against micro-batches
section "4. the bubble against micro-batches: 1F1B on 4 stages (1x1x4, C 128), 3 steps each"
printf '%-4s | %8s %9s\n' m formula replay
: > "$out/bubble.tsv"
for m in 2 4 8 16; do
    train "sweep-m$m" 4 1 1 4 1f1b "$m" "${wide[@]}" train.steps=3 scheduler.params.warmup_steps=1 || break
    spans "$out/sweep-m$m" 4 3 > "$out/sweep-m$m/spans.tsv"
    f=$(lastnum "$out/sweep-m$m/events.rank0.jsonl" bubble_formula) r=$(replay "$out/sweep-m$m/spans.tsv" 4 1)
    printf '%-4s | %8.3f %9.3f\n' "$m" "$f" "$r"
    echo "$m $f $r" >> "$out/bubble.tsv"
done
echo "(replay: the last step's order of every stage with each stage's least times, as in section 3)"

# ------------------------------------------------------------------ figures
if ! command -v gnuplot > /dev/null; then
    echo "lab28: gnuplot is not installed (make deps installs it); $out/*.tsv are the figures' input" >&2
else
    png_terminal=png
    if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then png_terminal=pngcairo; fi
    section "figures"
    # schedule_S.png: the replay (each stage's real order, its least times: the schedule's shape); and
    # schedule_S_measured.png: the spans as they happened (on a shared machine, stretched by waits for a core).
    for schedule in gpipe 1f1b interleaved; do
        [ -s "$out/spans-$schedule.tsv" ] || continue
        for kind in replay measured; do
            data=$out/replay-$schedule.tsv png=$out/schedule_$schedule.png
            what="the last step's order on every stage, replayed with each stage's least forward and backward times"
            if [ "$kind" = measured ]; then
                data=$out/spans-$schedule.tsv png=$out/schedule_${schedule}_measured.png
                what="the last step's span events as measured (4 ranks on 2 shared cores)"
            fi
            gnuplot <<GP
set terminal $png_terminal size 1200,420
set output "$png"
set title "$schedule, 4 stages, 8 micro-batches: forwards (light) and backwards (dark) by micro-batch\n$what"
set xlabel "time since the step's first forward (ms)"
set ylabel "pipeline stage"
set yrange [3.6:-0.6]
set ytics 1
set grid xtics
set style fill solid 0.9 border lc rgb "#333333"
unset key
plot "$data" using ((\$4+\$5)/2):1:((\$5-\$4)/2):(0.38):(strcol(3) eq "f" ? (\$6 == 0 ? 0x9ecae1 : 0xc7e9c0) : (\$6 == 0 ? 0x08519c : 0x238b45)) \
         with boxxyerror lc rgb variable, \
     "" using ((\$4+\$5)/2):1:(sprintf("%d", \$2)) with labels font ",8" tc rgb "#000000"
GP
            echo "  $png"
        done
    done
    if [ -s "$out/bubble.tsv" ]; then
        gnuplot <<GP
set terminal $png_terminal size 900,500
set output "$out/bubble.png"
set title "The pipeline bubble of 1F1B on 4 stages against the micro-batches a step"
set xlabel "micro-batches m"
set ylabel "idle share of a stage's step"
set logscale x 2
set xrange [1.5:20]
set yrange [0:0.7]
set grid
set samples 200
plot 3/(x+3) with lines lw 2 lc rgb "#000000" title "(p-1)/(m+p-1)", \
     "$out/bubble.tsv" using 1:3 with points pt 7 ps 1.5 lc rgb "#d55e00" title "replay of the last step's spans (measured times, each stage's order)"
GP
        echo "  $out/bubble.png"
    fi
fi
echo
[ "$todo" -eq 0 ] || echo "lab28: some parts wait for your regions (named above); the rest ran"
echo "lab28: results in $out/ (run folders with events.rank<R>.jsonl, spans-*.tsv, bubble.tsv)"
