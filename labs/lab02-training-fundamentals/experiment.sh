#!/usr/bin/env bash
# experiment.sh: lab 02's experiment (`make lab02`): the same tiny GPT trained on Tang and Song poetry with
# SGD-momentum, Adam, AdamW and LAMB; a table of final losses and steps to a target loss read from each run's
# event stream, and a figure of the four loss curves (runs/lab02/optimizers.png).
#   experiment.sh           the four runs, the table, the figure (about 45 s on 2 idle cores)
#   experiment.sh --sweep   three learning rates per optimizer, the table only (about 2 minutes)
# Needs your lab 02 regions: until they are done, the first run stops at "lab 02 not done: ..." (exit 86).
set -euo pipefail
cd "$(dirname "$0")/../.."

mixpar=build/mixpar
config=configs/tiny-poetry.json
out=runs/lab02
steps=150      # optimizer steps per run (the config's 20 warmup steps + cosine decay are fitted to these)
window=10      # the training loss is averaged over this many steps before it is compared or reported
target=5.8     # "steps to target": the first step whose 10-step mean training loss is at or below this

[ -x "$mixpar" ] || { echo "lab02: $mixpar is missing; run 'make lab02', which builds it first" >&2; exit 2; }
mode=${1:-}
[ -z "$mode" ] || [ "$mode" = --sweep ] || { echo "usage: $0 [--sweep]" >&2; exit 2; }

# One run per row: optimizer name, DeepSpeed type, learning rate, the rest of optimizer.params (JSON).
# Everything else comes from configs/tiny-poetry.json: batch 16 x 64 tokens, gradient clipping at 1.0, 20 warmup
# steps then cosine decay to 1e-4, seed 1: every run starts from the same weights and sees the same batches.
#   momentum  SGD with momentum 0.9; its step is lr times a running sum of raw gradients, so its lr is large
#   adam      Adam with weight_decay 0.1 added to the gradient (L2 decay). DeepSpeed's "Adam" type is AdamW
#             unless adam_w_mode is false, so it is set here.
#   adamw     the config's own optimizer: the same lr and the same weight_decay 0.1, decoupled from the gradient
#   lamb      Adam's direction, rescaled per tensor by ||p|| / ||update||: a larger lr gives a comparable step
# lr (from experiment.sh --sweep, three values each): momentum 0.3 (0.1 is within noise of it, 1.0 too large);
# lamb 2e-2 (3e-2 reaches the target 4 steps sooner but ends 0.04 worse on validation); adam and adamw share
# the config's 1e-3, so that the only difference between them is where the weight decay goes.
momentum_params='"momentum":0.9,"weight_decay":0'
adam_params='"betas":[0.9,0.95],"eps":1e-8,"weight_decay":0.1'
if [ "$mode" = --sweep ]; then
  out=$out/sweep
  runs=()
  for lr in 0.1 0.3 1.0; do runs+=("momentum SGD $lr $momentum_params"); done
  for lr in 3e-4 1e-3 3e-3; do runs+=("adam Adam $lr $adam_params,\"adam_w_mode\":false"); done
  for lr in 3e-4 1e-3 3e-3; do runs+=("adamw AdamW $lr $adam_params"); done
  for lr in 1e-2 2e-2 3e-2; do runs+=("lamb Lamb $lr $adam_params"); done
else
  runs=(
    "momentum SGD   0.3  $momentum_params"
    "adam     Adam  1e-3 $adam_params,\"adam_w_mode\":false"
    "adamw    AdamW 1e-3 $adam_params"
    "lamb     Lamb  2e-2 $adam_params"
  )
fi
mkdir -p "$out"

now() { date +%s.%N; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
section() { printf '\n==== %s\n\n' "$*"; }
# The arguments as a shell command line, single-quoting those with characters the shell would interpret
# ({"lr":0.3,...} would be brace-expanded), so that a printed command can be pasted back as it is.
shell_words() {
  local word line=""
  for word in "$@"; do
    if [[ $word =~ ^[A-Za-z0-9_./=:+-]+$ ]]; then line+=" $word"; else line+=" '$word'"; fi
  done
  echo "${line# }"
}
# The run directory of a row: the optimizer's name, with the lr in sweep mode.
run_dir_of() { if [ "$mode" = --sweep ]; then echo "$out/$1-lr$2"; else echo "$out/$1"; fi; }

# events.rank0.jsonl -> loss.dat ("step loss mean_of_last_window"), val.dat ("step val_loss"), and one summary
# line on stdout: "final_train final_val steps_to_target" (the mean of the last `window` losses; the last
# evaluation; "-" when the target was never reached). Keys are found by name, so their order does not matter;
# a loss written as "nan" or "inf" (EVENTS.md) stops the summary, which then says so.
summarise() {
  awk -v window="$window" -v target="$target" -v loss_out="$1/loss.dat" -v val_out="$1/val.dat" '
    function field(key,   start, value) {
      if (!match($0, "\"" key "\":\"?[^,}\"]*")) return ""
      start = length(key) + 3                    # past the quoted key and the colon
      value = substr($0, RSTART + start, RLENGTH - start)
      gsub(/"/, "", value)
      return value
    }
    BEGIN { print "# step loss mean_of_last_" window > loss_out; print "# step val_loss" > val_out; reached = "-" }
    /"kind":"step"/ && bad == "" {
      step = field("step"); loss = field("loss")
      if (loss !~ /^-?[0-9]/) { bad = loss " at step " step; next }
      n++; slot = n % window                     # a ring of the last `window` losses
      if (n > window) sum -= ring[slot]
      ring[slot] = loss; sum += loss
      mean = sum / (n < window ? n : window)
      printf "%d %.6f %.6f\n", step, loss, mean > loss_out
      if (reached == "-" && n >= window && mean <= target) reached = step
    }
    /"kind":"eval"/ { val = field("val_loss"); printf "%d %s\n", field("step"), val > val_out }
    END {
      if (bad != "") { printf "diverged(%s) - -\n", bad; exit }
      printf "%.3f %s %s\n", mean, val == "" ? "-" : sprintf("%.3f", val), reached
    }' "$1/events.rank0.jsonl"
}

section "1. ${#runs[@]} runs of $config, $steps steps each (mixpar train; events in $out/<run>/events.rank0.jsonl)"
experiment_start=$(now)
declare -A seconds_of
for row in "${runs[@]}"; do
  read -r name type lr rest <<<"$row"
  run_dir=$(run_dir_of "$name" "$lr")
  rm -rf "$run_dir"
  sets=(--set "optimizer.type=$type" --set "optimizer.params={\"lr\":$lr,$rest}" --set "train.steps=$steps"
        --set train.eval_interval=25 --set train.checkpoint_interval=0 --set train.sample_interval=0
        --set train.hist_interval=0
        --set "train.run_dir=$run_dir")
  echo "\$ $(shell_words "$mixpar" train --config "$config" "${sets[@]}" --quiet)"
  start=$(now)
  rc=0
  "$mixpar" train --config "$config" "${sets[@]}" --quiet || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "lab02: the $name run failed (mixpar train exited with status $rc); no table without all the runs." >&2
    [ "$rc" -eq 86 ] && echo "lab02: finish the lab 02 regions first; make grade LAB=02 shows which tests fail." >&2
    exit "$rc"
  fi
  seconds_of[$run_dir]=$(seconds_since "$start")
  echo "  $name: ${seconds_of[$run_dir]} s"
done

section "2. Results (train: mean training loss of the last $window steps; val: the evaluation at step $steps)"
printf '%-10s %6s %10s %8s %14s %8s\n' optimizer lr train val "steps to $target" seconds
for row in "${runs[@]}"; do
  read -r name _ lr _ <<<"$row"
  run_dir=$(run_dir_of "$name" "$lr")
  read -r train val reached < <(summarise "$run_dir")
  [ "$reached" = - ] && reached="not in $steps"
  printf '%-10s %6s %10s %8s %14s %8s\n' "$name" "$lr" "$train" "$val" "$reached" "${seconds_of[$run_dir]}"
done
echo
echo "The first loss is about ln 2842 = 7.95 (2842 characters, a uniform guess). Per-step data:"
echo "$out/<run>/loss.dat (step, loss, $window-step mean) and val.dat (step, validation loss)."

if [ "$mode" = --sweep ]; then
  echo "whole sweep: $(seconds_since "$experiment_start") s"
  exit 0
fi
if ! command -v gnuplot > /dev/null; then
  echo "lab02: gnuplot is not installed (make deps installs it); the .dat files above are the figure's input" >&2
  exit 0
fi

# The training curves (and the target as a dashed line), shared by the png and the text rendering.
# $1: more plot elements after them (the png adds the validation points).
curves() {
  local plot="plot" sep=""
  for row in "${runs[@]}"; do
    read -r name _ lr _ <<<"$row"
    plot+="$sep \"$out/$name/loss.dat\" using 1:3 with lines lw 2 title \"$name (lr $lr)\""
    sep=", \\"$'\n'
  done
  cat <<EOF
set xlabel "optimizer step"
set ylabel "training loss ($window-step mean)"
set xrange [0:$steps]
set yrange [4.5:8.2]
set key top right
$plot, \\
  $target with lines dashtype 2 lc "gray" title "target $target"$1
EOF
}

# Validation points in the colour of their curve: gnuplot's line types 1..4, in the order of the curves.
val_points=""
index=1
for row in "${runs[@]}"; do
  read -r name _ <<<"$row"
  val_points+=", \\"$'\n'"  \"$out/$name/val.dat\" using 1:2 with points pt 7 ps 1 lt $index title \"$name: validation\""
  index=$((index + 1))
done
png_terminal=png
if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then png_terminal=pngcairo; fi
gnuplot <<EOF
set terminal $png_terminal size 1000,620
set output "$out/optimizers.png"
set title "Tiny GPT (L=4, C=128) on poetry, four optimizers (lines: training loss, dots: validation loss)"
$(curves "$val_points")
EOF
echo "figure: $out/optimizers.png"

section "3. The training curves (text rendering of $out/optimizers.png, without the validation points)"
gnuplot <<EOF
set terminal dumb size 110,32
$(curves "")
EOF
echo "whole experiment: $(seconds_since "$experiment_start") s"
