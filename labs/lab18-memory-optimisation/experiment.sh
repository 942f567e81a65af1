#!/usr/bin/env bash
# experiment.sh: lab 18's experiment (`make lab18`): a 6-block GPT-2 (C=384, 6 heads, T=256, B=4, 10.8M parameters,
# labs/lab18-memory-optimisation/gpt6-grammar.json) trained a few steps under each activation-checkpointing policy
# (none, selective, every_k=3, every_k=2, every): the measured activation peak (MEM_ACT) against the step time, beside
# the planner's prediction, and whether the weights after every step are bit-identical to no recompute's. A table
# (runs/lab18/policies.txt) and a figure (runs/lab18/memory_vs_time.png, and a text rendering). Then part D: the
# same model with its optimizer state and fp32 master offloaded to host memory (ZeRO-Offload) against the device
# optimizer: device and host peaks, step time and copy time (runs/lab18/offload.txt). Under two minutes on
# 2 cores. OUT=DIR writes elsewhere; ROUNDS=R runs every policy R times in turn [2], STEPS=N steps each [3] (the
# first is not timed).
set -euo pipefail
cd "$(dirname "$0")/../.."

mixpar=build/mixpar
config=labs/lab18-memory-optimisation/gpt6-grammar.json
out=${OUT:-runs/lab18}
steps=${STEPS:-3}
rounds=${ROUNDS:-2}
mkdir -p "$out"
[ -x "$mixpar" ] || { echo "lab18: $mixpar is missing; run 'make' first (make lab18 does)" >&2; exit 2; }
[ "$steps" -ge 2 ] || { echo "lab18: STEPS must be at least 2 (the first step is not timed)" >&2; exit 2; }
[ "$rounds" -ge 1 ] || { echo "lab18: ROUNDS must be at least 1" >&2; exit 2; }
rm -f "$out"/*.times

section() { printf '\n==== %s\n\n' "$*"; }
# name | policy | every_k
runs=("none|none|2" "selective|selective|2" "every_k=3|every_k|3" "every_k=2|every_k|2" "every|every|2")

# The planner's activation bytes for the same run (fp32, no dropout). It knows none, selective and full
# (= every); every_k is composed from its per-block figures: k-th blocks keep their input, the others all.
plan_json() {
  "$mixpar" plan --arch gpt2 --layers 6 --hidden 384 --heads 6 --vocab 41 --context 256 --recipe fp32 --batch 4 \
    --seq 256 --dropout off --recompute "$1" --json
}
field() { grep -o "\"$1\": [0-9]*" | head -1 | awk '{print $2}'; }
plan_act() { # policy every_k -> bytes
  local p=$1 k=$2 json
  case $p in
    none|selective) plan_json "$p" | grep -o '"activations": {.*' | field total ;;
    every) plan_json full | grep -o '"activations": {.*' | field total ;;
    every_k)
      json=$(plan_json full | grep -o '"activations": {.*')
      local full kept work outside
      full=$(field block_full <<< "$json"); kept=$(field block_kept <<< "$json")
      work=$(field working_set <<< "$json"); outside=$(field outside <<< "$json")
      awk -v L=6 -v k="$k" -v f="$full" -v b="$kept" -v w="$work" -v o="$outside" \
        'BEGIN {c = int((L + k - 1) / k); printf "%.0f\n", c * b + (L - c) * f + w + o}' ;;
  esac
}

# step_times EVENTS: "forward backward total" of every step after the first (step 1 lays memory out)
step_times() {
  grep '"kind":"span"' "$1" | grep -v '"step":1,' |
    sed -E 's/.*"name":"([a-z]+)","step":([0-9]+),"t0":([0-9.e+-]+),"t1":([0-9.e+-]+).*/\1 \2 \3 \4/' |
    awk '{d[$2, $1] = $4 - $3; t[$2] += $4 - $3} END {for (s in t) printf "%.4f %.4f %.4f\n", d[s, "forward"],
         d[s, "backward"], t[s]}'
}

section "$mixpar train --config $config --set activation_checkpointing.policy=... ($rounds rounds of $steps steps each)"
# The policies run in turns, round after round, each round starting one policy later, so that a machine shared
# with other work slows them alike; each policy's time is its fastest step over all rounds (other work only ever
# slows a step down). mixpar's own kernels run on one thread (gpt6-grammar.json: train.threads): two threads
# wait for each other at every barrier, and on a busy machine that waiting is most of what gets measured.
failed=""
for round in $(seq 1 "$rounds"); do
  for j in "${!runs[@]}"; do
    IFS='|' read -r name policy k <<< "${runs[$(( (j + round - 1) % ${#runs[@]} ))]}"
    case " $failed " in *" $name "*) continue ;; esac
    dir=$out/$name-round$round
    rm -rf "$dir"
    if ! MIXPAR_PARAM_HASH=1 "$mixpar" train --config "$config" --quiet --set train.steps="$steps" \
        --set activation_checkpointing.policy="$policy" --set activation_checkpointing.every_k="$k" \
        --set train.run_dir="$dir" > "$out/$name.log" 2>&1; then
      failed="$failed $name"
      continue
    fi
    step_times "$dir/events.rank0.jsonl" >> "$out/$name.times"
  done
done

printf '%-10s %4s %9s %6s %9s %6s %7s %7s %7s %6s  %s\n' policy ckpt act_MiB ratio plan_MiB m/plan fwd_s bwd_s step_s ratio \
  "weights vs none" | tee "$out/policies.txt"
: > "$out/policies.dat"
base_mem="" base_time="" base_hashes=""
for spec in "${runs[@]}"; do
  IFS='|' read -r name policy k <<< "$spec"
  case " $failed " in *" $name "*)
    printf '%-10s %s\n' "$name" "did not run (an unfinished LAB 18 region?): see $out/$name.log" | tee -a "$out/policies.txt"
    continue ;;
  esac
  ev=$out/$name-round1/events.rank0.jsonl
  # the activation peak: the last mem event's peak.act (the same every round); the weights after every step
  act=$(grep '"kind":"mem"' "$ev" | tail -1 | grep -o '"peak":{[^}]*}' | grep -o '"act":[0-9]*' | cut -d: -f2)
  hashes=$(grep -o '"param_hash":"[0-9a-f]*"' "$ev" | tr '\n' ' ')
  read -r fwd bwd stp < <(sort -k3,3g "$out/$name.times" | head -1)
  [ -n "$base_mem" ] || { base_mem=$act; base_time=$stp; base_hashes=$hashes; }
  same=$([ "$hashes" = "$base_hashes" ] && echo "identical, every step" || echo "DIFFERENT")
  ck=$(awk -v p="$policy" -v k="$k" 'BEGIN {print p == "every" ? 6 : p == "every_k" ? int((6 + k - 1) / k) : 0}')
  plan=$(plan_act "$policy" "$k")
  awk -v n="$name" -v c="$ck" -v a="$act" -v a0="$base_mem" -v p="$plan" -v f="$fwd" -v b="$bwd" -v s="$stp" \
      -v s0="$base_time" -v same="$same" 'BEGIN {
    printf "%-10s %4d %9.1f %6.3f %9.1f %6.3f %7.3f %7.3f %7.3f %6.3f  %s\n", n, c, a / 1048576, a / a0, p / 1048576,
           a / p, f, b, s, s / s0, same}' | tee -a "$out/policies.txt"
  echo "$name $stp $act" >> "$out/policies.dat"
done
echo "ckpt: blocks that rerun their forward in backward; act: measured MEM_ACT peak; plan: \`mixpar plan --recompute\`"
echo "(every_k composed from its per-block figures); times: the fastest of steps 2..$steps over $rounds rounds"

# Part D: the same model with ZeRO-Offload (zero_optimization.stage 1 on one rank: the partition is the whole model)
# against the same run with the optimizer on the device, in turns, OFFLOAD_ROUNDS rounds [2] of $steps steps.
section "$mixpar train --config $config --set zero_optimization.stage=1 --set zero_optimization.offload_optimizer.device=none|cpu"
offload_rounds=${OFFLOAD_ROUNDS:-2}
rm -f "$out"/offload-*.times
for round in $(seq 1 "$offload_rounds"); do
  for device in none cpu; do
    dir=$out/offload-$device-round$round
    rm -rf "$dir"
    if ! MIXPAR_PARAM_HASH=1 "$mixpar" train --config "$config" --quiet --set train.steps="$steps" \
        --set zero_optimization.stage=1 --set zero_optimization.offload_optimizer.device="$device" \
        --set train.run_dir="$dir" > "$out/offload-$device.log" 2>&1; then
      failed="$failed offload-$device"
      continue
    fi
    step_times "$dir/events.rank0.jsonl" >> "$out/offload-$device.times"
  done
done
printf '%-8s %10s %9s %9s %9s %7s %6s %7s %8s %6s  %s\n' offload device_MiB optim_MiB host_MiB plan_MiB step_s ratio \
  copy_s update_s copy% "weights vs none" | tee "$out/offload.txt"
off_base_mem="" off_base_time="" off_base_hashes=""
for device in none cpu; do
  case " $failed " in *" offload-$device "*)
    printf '%-8s %s\n' "$device" "did not run (an unfinished LAB 18 region?): see $out/offload-$device.log" | tee -a "$out/offload.txt"
    continue ;;
  esac
  ev=$out/offload-$device-round1/events.rank0.jsonl
  mem=$(grep '"kind":"mem"' "$ev" | tail -1)
  peak_of() { grep -o '"peak":{[^}]*}' <<< "$mem" | grep -o "\"$1\":[0-9]*" | cut -d: -f2; }
  device_peak=$(grep -o '"peak_total":[0-9]*' <<< "$mem" | cut -d: -f2)
  host_plan=$(head -n 1 "$ev" | grep -o '"plan":{[^}]*}' | grep -o '"host":[0-9]*' | cut -d: -f2)
  hashes=$(grep -o '"param_hash":"[0-9a-f]*"' "$ev" | tr '\n' ' ')
  read -r _ _ stp < <(sort -k3,3g "$out/offload-$device.times" | head -1)
  # mean copy and update seconds of the steps after the first, from the step events' offload object
  read -r copy update < <(grep '"kind":"step"' "$ev" | grep -v '"step":1,' | awk '
    match($0, /"copy_s":[0-9.e+-]+/) {c += substr($0, RSTART + 9, RLENGTH - 9)}
    match($0, /"update_s":[0-9.e+-]+/) {u += substr($0, RSTART + 11, RLENGTH - 11)}
    {n++} END {printf("%.4f %.4f\n", (n ? c / n : 0), (n ? u / n : 0))}')
  [ -n "$off_base_mem" ] || { off_base_mem=$device_peak; off_base_time=$stp; off_base_hashes=$hashes; }
  same=$([ "$hashes" = "$off_base_hashes" ] && echo "identical, every step" || echo "DIFFERENT")
  awk -v n="$device" -v d="$device_peak" -v d0="$off_base_mem" -v o="$(peak_of optim)" -v h="$(peak_of host)" \
      -v p="${host_plan:-0}" -v s="$stp" -v s0="$off_base_time" -v c="$copy" -v u="$update" -v same="$same" 'BEGIN {
    printf "%-8s %10.1f %9.1f %9.1f %9.1f %7.3f %6.3f %7.4f %8.4f %5.1f%%  %s\n", n, d / 1048576, o / 1048576, h / 1048576,
           p / 1048576, s, s / s0, c, u, (s > 0 ? 100 * c / s : 0), same}' | tee -a "$out/offload.txt"
done
echo "device: measured peak of the device tags (host not included); plan: the planner's host bytes (mixpar plan --offload);"
echo "step_s: the fastest step after the first over $offload_rounds rounds; copy_s, update_s: mean per step; copy%: copy_s / step_s"

if ! command -v gnuplot > /dev/null; then
  echo "lab18: gnuplot is not installed (make deps installs it); the table above is the figure's data" >&2
  exit 0
fi
png_terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then png_terminal=pngcairo; fi
plot_cmds() {
  cat <<PLOT
set xlabel "step time (s): forward + backward + optimizer"
set ylabel "activation memory peak (MiB, MEM_ACT)"
set grid
set key off
set offsets graph 0.12, graph 0.12, graph 0.12, graph 0.08
plot "$out/policies.dat" using 2:(\$3/1048576) with points pt 7 ps 1.5, "" using 2:(\$3/1048576):1 with labels offset 0,1 $1
PLOT
}
gnuplot <<EOF2
set terminal $png_terminal size 1000,650 noenhanced
set output "$out/memory_vs_time.png"
set title "Activation checkpointing, GPT-2 6 x 384, B=4, T=256: memory against time"
$(plot_cmds "font ',10'")
EOF2
echo "  figure: $out/memory_vs_time.png"
section "activation peak against step time (text rendering of $out/memory_vs_time.png)"
gnuplot <<EOF2
set terminal dumb size 100,28
$(plot_cmds "")
EOF2
