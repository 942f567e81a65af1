#!/usr/bin/env bash
# viz.sh: command-line checks of `mixpar viz`, `mixpar plot` and `mixpar trace` on the shipped sample runs
# (viz/samples/): deterministic snapshots of every panel showing the run's own numbers, a live session in
# tmux (following a growing file, switching panels, resizing, the too-small screen, help, quitting), the
# plot files, the trace, and exit 2 with a message for each kind of bad input.
source "$(dirname "$0")/../lib.sh"
work=$(mktemp -d)
sock="mixpar-viz-test-$$"
tmux_() { LANG=C.UTF-8 tmux -L "$sock" "$@"; }
trap 'tmux_ kill-server 2>/dev/null; rm -rf "$work"' EXIT
cd "$ROOT" || exit 1
poetry=viz/samples/tiny-poetry
addition=viz/samples/synthetic-addition
export LANG=C.UTF-8
snap() { "$MIXPAR" viz --snapshot "$@"; }

# ---------------------------------------------------------------- snapshots
for run in "$poetry" "$addition"; do
  for panel in loss underflow comm memory; do
    snap "$run" --panel "$panel" >"$work/a.txt" 2>&1
    snap "$run" --panel "$panel" >"$work/b.txt" 2>&1
    check "snapshot: $panel panel of $(basename "$run") is the same twice" cmp "$work/a.txt" "$work/b.txt"
  done
done

ev="$poetry/events.rank0.jsonl"
last_step=$(grep '"kind":"step"' "$ev" | tail -n 1)
loss=$(sed -E 's/.*"loss":([^,]+),.*/\1/' <<<"$last_step" | awk '{printf "%.4f", $1}')
step=$(sed -E 's/.*"step":([0-9]+),.*/\1/' <<<"$last_step")
val=$(grep '"kind":"eval"' "$ev" | tail -n 1 | sed -E 's/.*"val_loss":([^,}]+).*/\1/' | awk '{printf "%.4f", $1}')
check_output "snapshot: loss panel shows the last step, its loss and the last validation loss ($step, $loss, $val)" 0 \
  "step $step/100  loss $loss  val $val" snap "$poetry" --panel loss
check_output "snapshot: loss panel draws braille charts with axes" 0 "learning rate.*tokens/s" snap "$poetry" --panel loss

# embeddings' share rounded to 0 in fp16, from the last hist event of layer -1
hist=$(grep '"kind":"hist"' "$ev" | grep '"layer":-1,' | tail -n 1)
fp16_zero=$(sed -E 's/.*"count":([0-9]+),.*"fp16":\{"subnormal":([0-9]+),"underflow":([0-9]+).*/\3 \1/' <<<"$hist" |
  awk '{printf "%.2f%%", 100 * $1 / $2}')
check_output "snapshot: underflow panel shows embeddings' fp16 share rounded to zero ($fp16_zero)" 0 \
  "^fp16 +$fp16_zero" snap "$poetry" --panel underflow
check_output "snapshot: underflow panel draws the format ranges with a legend" 0 \
  "normal   ▒ subnormal   · rounds to 0   × overflow" snap "$poetry" --panel underflow
check_output "snapshot: underflow panel --layer picks a layer" 0 "gradient exponents: block 2, step" \
  snap "$poetry" --panel underflow --layer 2
check_output "snapshot: underflow panel is honest about fp32's loss scale" 0 "loss scale 1 at every step \(fp32 run: no loss scaling\)" \
  snap "$poetry" --panel underflow
# What fp16 really flushed in backward: the heat map's per-layer run totals are `mixpar precision flushed`'s.
fp16=viz/samples/fp16-scale1
snap "$fp16" --panel underflow --width 100 --height 30 >"$work/heat.txt"
check_output "snapshot: underflow panel labels what was flushed apart from what a cast would flush" 0 \
  "was flushed in backward \(fp16 rounding events, steps 1\.\.100\)" cat "$work/heat.txt"
check_output "snapshot: and its histogram side says 'if cast'" 0 "^if cast +zero +subnormal +overflow" cat "$work/heat.txt"
while IFS=$'\t' read -r label pct _; do
  case "$label" in "#"*|all) continue ;; "block "*) row="b${label#block }" ;; lnf+head) row=head ;; *) continue ;; esac
  want=$(awk -v p="$pct" 'BEGIN { printf "%.4f%%", p }')
  check_output "snapshot: heat map row $row shows the flushed share precision flushed reports ($want)" 0 \
    "^[ >]$row .* $want\$" cat "$work/heat.txt"
done < <("$MIXPAR" precision flushed "$fp16/events.rank0.jsonl" --tsv)
rows=$(grep -c '"kind":"rounding".*"layer":0,' "$fp16/events.rank0.jsonl")
check_output "snapshot: the loss scale (1) and skipped steps (0) sit under the heat map" 0 "^scale .* 1\$" cat "$work/heat.txt"
check_output "snapshot: skipped steps row" 0 "^skip +0\$" cat "$work/heat.txt"
check "snapshot: block 0 had $rows rounding events, each flushing some gradients: its row has no 'none' cell" \
  bash -c "grep '^ b0 ' '$work/heat.txt' | grep -qv '·'"
# --step N: the run as it stood after step N; block 0's run total is then the sum of its events up to 50
b0_50=$(grep '"kind":"rounding"' "$fp16/events.rank0.jsonl" | grep '"layer":0,' |
  sed -E 's/.*"step":([0-9]+),.*"grads":\{"values":[0-9]+,"nonzero":([0-9]+),"flushed":([0-9]+).*/\1 \2 \3/' |
  awk '$1 <= 50 { n += $2; f += $3 } END { printf "%.4f%%", 100 * f / n }')
check_output "snapshot --step 50: the loss panel stops at step 50" 0 "^step 50/100 " snap "$fp16" --step 50
check_output "snapshot --step 50: the heat map covers steps 1..50, block 0 totals $b0_50 as its events say" 0 \
  "steps 1\.\.50\).*|^ b0 .* $b0_50\$" snap "$fp16" --step 50 --panel underflow
check "snapshot --step 50: block 0's total is $b0_50" bash -c "$MIXPAR viz --snapshot $fp16 --step 50 --panel underflow | grep -Eq '^ b0 .* $b0_50\$'"
check_output "snapshot --step 50: the histogram drawn is step 50's" 0 "gradient exponents: embeddings, step 50," snap "$fp16" --step 50 --panel underflow
check_output "viz: --step without --snapshot is refused" 2 "--step N picks the step a --snapshot shows" "$MIXPAR" viz "$fp16" --step 5
check_output "viz: --step -1 is refused" 2 "step" "$MIXPAR" viz --snapshot "$fp16" --step -1
check_output "snapshot: at 72x20 the layers that do not fit are counted" 0 "\+1 more layers" \
  snap "$fp16" --panel underflow --width 72 --height 20
check_output "snapshot: the timeline keeps each short optimizer span (O) and data wait (*) beside long spans" 0 \
  "^r0  comp.*B+O\*F.*B+O\*F" snap "$fp16" --panel comm --width 100 --height 30
check_output "snapshot: MPI's native allreduce is named, not drawn as a ring" 0 "algorithm: native \(MPI library\).*no ring is drawn" \
  snap viz/samples/ddp-2 --panel comm --width 100 --height 30
check "snapshot: and no ring cells are drawn for it" bash -c "! $MIXPAR viz --snapshot viz/samples/ddp-2 --panel comm | grep -Eq '^rank 0 +[[<]'"
check_output "snapshot: comm panel of a single-rank run says so and models the ring" 0 \
  "no comm events: a single-rank run" snap "$poetry" --panel comm
check_output "snapshot: comm panel ring view is labelled as the alpha-beta model" 0 "ring allreduce, alpha-beta model: 4.66 MB over 4 ranks" \
  snap "$poetry" --panel comm
peak=$(grep '"kind":"mem"' "$ev" | tail -n 1 | sed -E 's/.*"peak_total":([0-9]+).*/\1/' | awk '{printf "%.1f MB", $1 / 1e6}')
check_output "snapshot: memory panel shows the allocator's peak ($peak) beside the plan" 0 "peak│.*│ +$peak" snap "$poetry" --panel memory
check_output "snapshot: memory panel table has every tag" 0 "other.*total" bash -c "$MIXPAR viz --snapshot $poetry --panel memory | tr '\n' ' '"
check "snapshot: --ascii writes ASCII only" bash -c "! $MIXPAR viz --snapshot $poetry --panel underflow --ascii | LC_ALL=C grep -q '[^ -~]'"
check_output "snapshot: below the minimum size is refused (a snapshot cannot be enlarged; live shows the too-small screen)" 2 \
  "a snapshot needs at least 72 columns and 20 rows.*got --width 60 --height 15; use --width 72 --height 20" \
  snap "$poetry" --width 60 --height 15
check_output "snapshot: --width 1 is refused, not drawn as a too-small screen" 2 "needs at least 72 columns.*got --width 1 " \
  snap "$poetry" --width 1
check_output "snapshot: the minimum size itself is drawn" 0 "step 100/100" snap "$poetry" --width 72 --height 20
check_output "snapshot: --width and --height size the frame" 0 "^.{130}" snap "$poetry" --width 140 --height 40 --panel underflow

# 80x24 leaves things out, and says so: ranks, table columns, layers.
mkdir -p "$work/six"
for r in 0 1 2 3 4 5; do cp "viz/samples/ddp-2/events.rank$((r % 2)).jsonl" "$work/six/events.rank$r.jsonl"; done
check_output "snapshot 80x24: the timeline counts the ranks it leaves out" 0 "^\+2 more ranks \(up/down\)" \
  snap "$work/six" --panel comm --width 80 --height 24
check_output "snapshot 80x24: the comm table counts the columns it leaves out (busbw)" 0 "^collective .*algbw \+1 more" \
  snap "$work/six" --panel comm --width 80 --height 24
check_output "snapshot 80x24: the memory bars count the ranks they leave out" 0 "\+3 more ranks \(up/down\)" \
  snap "$work/six" --panel memory --width 80 --height 24
check_output "snapshot 80x24: the layer table counts the columns it leaves out (e4m3, e5m2)" 0 "layer fp16 zero  fp16 sub \+3 cols" \
  snap "$work/six" --panel underflow --width 80 --height 24

# A crafted run: malformed lines, an unknown kind, a newer schema, a truncated last line: shown, not fatal.
mkdir -p "$work/odd"
head -n 40 "$ev" >"$work/odd/events.rank0.jsonl"
printf '%s\n' 'not json' '{"v":1,"kind":"weather","rank":0,"t":9}' '{"v":2,"kind":"step","rank":0,"t":9,"step":99}' \
  >>"$work/odd/events.rank0.jsonl"
printf '{"v":1,"kind":"step","rank":0,"t":9.5,"st' >>"$work/odd/events.rank0.jsonl"
odd=$(snap "$work/odd" 2>&1)
check_output "snapshot: a malformed line is counted in the status bar" 0 "1 malformed" echo "$odd"
check_output "snapshot: a truncated last line is counted" 0 "1 truncated" echo "$odd"
check_output "snapshot: a newer schema version is explained" 0 "1 event of schema version 2 skipped: this reader knows version 1 \(rebuild mixpar\)" echo "$odd"
check_output "snapshot: and counted in the status bar" 0 "1 newer \\(v2\\)" echo "$odd"
check_output "snapshot: an unknown kind is counted and named" 0 "1 unknown \(weather\)" echo "$odd"

# ---------------------------------------------------------------- live, in tmux
# The run grows while we watch: half its lines and a partial line first, the rest later.
mkdir -p "$work/live"
lines=$(wc -l <"$ev")
head -n $((lines / 2)) "$ev" >"$work/live/events.rank0.jsonl"
next=$(sed -n "$((lines / 2 + 1))p" "$ev")
printf '%s' "${next:0:30}" >>"$work/live/events.rank0.jsonl"
screen_() { tmux_ capture-pane -p -t viz; }
wait_for() { # wait_for PATTERN: up to 5 s (scaled) for the pane to match
  for _ in $(seq "$(scaled 50)"); do screen_ | grep -Eq -- "$1" && return 0; sleep 0.1; done
  screen_ | sed 's/^/    | /' >&2; return 1
}
tmux_ new-session -d -x 100 -y 30 -s viz \
  "'$MIXPAR' viz --refresh 50 '$work/live'; echo \"viz exited with \$?\"; sleep 60"
half_step=$(head -n $((lines / 2)) "$ev" | grep '"kind":"step"' | tail -n 1 | sed -E 's/.*"step":([0-9]+),.*/\1/')
check "tmux: live view shows the steps written so far (step $half_step)" wait_for "step $half_step/100"
{ printf '%s\n' "${next:30}"; tail -n +$((lines / 2 + 2)) "$ev"; } >>"$work/live/events.rank0.jsonl"
check "tmux: it follows the file as it grows, the partial line included (step $step)" wait_for "step $step/100  loss $loss"
check "tmux: no line was counted malformed" bash -c "! tmux -L '$sock' capture-pane -p -t viz | grep -q malformed"
tmux_ send-keys -t viz 2
check "tmux: key 2 shows the underflow panel" wait_for "gradient exponents: embeddings"
tmux_ send-keys -t viz Down Down
check "tmux: down arrows choose block 1" wait_for "gradient exponents: block 1"
tmux_ send-keys -t viz Tab
check "tmux: tab moves to the comm panel" wait_for "ring allreduce"
tmux_ send-keys -t viz 4
check "tmux: key 4 shows the memory panel" wait_for "memory per rank by tag"
tmux_ resize-window -t viz -x 60 -y 15
check "tmux: a 60x15 terminal gets the too-small screen" wait_for "needs 72x20, have 60x15"
tmux_ resize-window -t viz -x 120 -y 35
check "tmux: enlarged again, the panel comes back at the new size" wait_for "^rank 0 .*peak/plan"
check "tmux: the status bar sits on the new last row" bash -c "tmux -L '$sock' capture-pane -p -t viz | sed -n 35p | grep -q 'h help  q quit'"
tmux_ send-keys -t viz h
check "tmux: h shows the help" wait_for "any key closes it"
tmux_ send-keys -t viz x
wait_gone() { # wait_gone PATTERN: up to 5 s (scaled) for the pane to stop matching
  for _ in $(seq "$(scaled 50)"); do screen_ | grep -Eq -- "$1" || return 0; sleep 0.1; done
  screen_ | sed 's/^/    | /' >&2; return 1
}
check "tmux: any key closes the help" wait_gone "any key closes it"
tmux_ send-keys -t viz q
check "tmux: q quits cleanly (exit 0)" wait_for "viz exited with 0"
# --layer and --rank are checked live too, once the run header has arrived: curses ends, the message stays.
for bad in "--layer 99:--layer 99: .* has gradient histograms for layers -1 \\(embeddings\\) to 4 \\(head\\)" \
           "--rank 5:--rank 5: .* has 1 rank \\(0\\)"; do
  tmux_ kill-session -t viz 2>/dev/null
  tmux_ new-session -d -x 150 -y 30 -s viz "'$MIXPAR' viz --refresh 50 ${bad%%:*} '$poetry'; echo \"viz exited with \$?\"; sleep 60"
  check "tmux: live ${bad%%:*} on a run without it exits 2 with a message" wait_for "${bad#*:}"
  check "tmux: live ${bad%%:*}: exit code 2" wait_for "viz exited with 2"
done

# Replay controls: at a crawl (x0.001) no step arrives on its own; . and , step, > and < change the speed.
tmux_ kill-session -t viz 2>/dev/null
tmux_ new-session -d -x 100 -y 30 -s viz "'$MIXPAR' viz --refresh 50 --replay --speed 0.001 '$fp16'; echo \"viz exited with \$?\"; sleep 60"
check "tmux replay: it starts at the run header (x0.001)" wait_for "replay x0.001"
tmux_ send-keys -t viz . . .
check "tmux replay: . three times steps to step 3" wait_for "^step 3/100 "
check "tmux replay: and pauses the clock" wait_for "PAUSED"
tmux_ send-keys -t viz ,
check "tmux replay: , steps back to step 2" wait_for "^step 2/100 "
tmux_ send-keys -t viz '>' '>'
check "tmux replay: > > doubles the speed twice" wait_for "replay x0.004"
tmux_ send-keys -t viz '<'
check "tmux replay: < halves it" wait_for "replay x0.002"
# the step cursor (underflow): g N Enter replays up to step N; left/right move it; End follows the newest again
tmux_ send-keys -t viz 2 g 3 0
check "tmux cursor: g opens the step prompt in the status bar" wait_for "go to step: 30_"
tmux_ send-keys -t viz Enter
check "tmux cursor: Enter replays to step 30, the status bar shows the cursor" wait_for "cursor step 30"
check "tmux cursor: and the histograms drawn are step 30's" wait_for "^gradient exponents: .*, step 30 \\(cursor 30\\)"
tmux_ send-keys -t viz Left
check "tmux cursor: left moves it to step 29: the newest histogram at or before it is step 20's" \
  wait_for "^gradient exponents: .*, step 20 \\(cursor 29\\)"
check "tmux cursor: the status bar follows" wait_for "cursor step 29"
tmux_ send-keys -t viz End
check "tmux cursor: End follows the newest step again" wait_for "^gradient exponents: .*, step 30, "
check "tmux cursor: and the status bar drops it" wait_gone "cursor step"
tmux_ send-keys -t viz q
check "tmux replay: q quits cleanly" wait_for "viz exited with 0"

# Two runs replayed side by side on one clock: . steps both, the loss panel names both.
tmux_ kill-session -t viz 2>/dev/null
tmux_ new-session -d -x 160 -y 40 -s viz "'$MIXPAR' viz --refresh 50 --replay --speed 0.001 '$addition' '$fp16'; echo \"viz exited with \$?\"; sleep 60"
check "tmux two runs: both run headers named" wait_for "^B fp16-scale1 \\(synthetic-addition, fp16, 1 rank\\)"
tmux_ send-keys -t viz . .
check "tmux two runs: . . steps run A to step 2" wait_for "^A synthetic-addition .* step 2  loss"
check "tmux two runs: and run B with it" wait_for "^B fp16-scale1 .* step 2  loss"
tmux_ send-keys -t viz 2
check "tmux two runs: the underflow panel shows B's heat map beside A's histogram" wait_for "│was flushed \\(fp16, steps 1..2\\)"
tmux_ send-keys -t viz q
check "tmux two runs: q quits cleanly" wait_for "viz exited with 0"

# The step cursor ranges over both runs: fp16-scale1 (A) ends at step 100, synthetic-addition (B) goes on to 200.
tmux_ kill-session -t viz 2>/dev/null
tmux_ new-session -d -x 160 -y 48 -s viz "'$MIXPAR' viz --refresh 50 --replay --speed 0.001 '$fp16' '$addition'; echo \"viz exited with \$?\"; sleep 60"
check "tmux two runs, cursor: both runs shown" wait_for "^B synthetic-addition \\("
tmux_ send-keys -t viz 2 g 1 5 0 Enter
check "tmux two runs, cursor: g 150 Enter goes past run A's end (it was held at A's 100 steps)" wait_for "cursor step 150"
check "tmux two runs, cursor: run A says where it ended" wait_for "run A ended at step 100"
check "tmux two runs, cursor: run B draws its newest histograms at or before step 150 (step 140's)" \
  wait_for "│gradient exponents: embeddings, step 140 \\(cursor 150\\)"
check "tmux two runs, cursor: run A draws its last ones (step 100's)" wait_for "^gradient exponents: embeddings, step 100 \\(cursor 150\\)"
tmux_ send-keys -t viz Left
check "tmux two runs, cursor: left moves it to step 149, still past run A's end" wait_for "cursor step 149"
check "tmux two runs, cursor: and run A still says so" wait_for "run A ended at step 100"
tmux_ send-keys -t viz q
check "tmux two runs, cursor: q quits cleanly" wait_for "viz exited with 0"

# --big, for a projector: no dim text (SGR 2), bright colours (SGR 90-97), chart lines of blocks, not braille.
has_braille() { LC_ALL=C grep -q $'\xe2[\xa0-\xa3]'; } # U+2800..U+28FF in UTF-8, from stdin
blocks_no_braille() { local s; s=$(cat); grep -q '[▀▄█]' <<<"$s" && ! has_braille <<<"$s"; }
pane_sgr() { tmux_ capture-pane -e -p -t viz | grep -q $'\e\\['"$1"'m'; } # pane_sgr 2: some cell is dim
big_session() { # big_session [--big]: replay the poetry sample to its end in a 100x30 pane with colours
  tmux_ kill-session -t viz 2>/dev/null
  tmux_ new-session -d -x 100 -y 30 -s viz "TERM=xterm-256color '$MIXPAR' viz $* --refresh 50 --replay --speed 10000 '$poetry'; echo \"viz exited with \$?\"; sleep 60"
}
big_session
check "tmux --big: (without it) the replay reaches the last step" wait_for "step 100/100"
check "tmux --big: without it, labels and axes are dim (SGR 2): what a projector washes out" pane_sgr 2
tmux_ send-keys -t viz q
big_session --big
check "tmux --big: the replay reaches the last step" wait_for "step 100/100"
no_dim() { ! pane_sgr 2; }
bright_bold() { pane_sgr '9[0-7]' && pane_sgr 1; }
check "tmux --big: no dim text anywhere on the screen" no_dim
check "tmux --big: bright colours (SGR 90-97), bold (SGR 1)" bright_bold
big_pane() { tmux_ capture-pane -p -t viz | blocks_no_braille; }
check "tmux --big: the loss is drawn in blocks a cell thick, no braille" big_pane
tmux_ send-keys -t viz q
check "tmux --big: q quits cleanly" wait_for "viz exited with 0"

# The live view started before the trainer: it waits for the first event file, then follows it.
mkdir -p "$work/later"
tmux_ kill-session -t viz 2>/dev/null
tmux_ new-session -d -x 100 -y 30 -s viz "'$MIXPAR' viz --refresh 50 '$work/later'; echo \"viz exited with \$?\"; sleep 60"
check "tmux: live view of a run directory with no event file yet waits for it" wait_for "waiting for .*later to start"
cp "$ev" "$work/later/events.rank0.jsonl"
check "tmux: and shows the run once its events appear (step $step)" wait_for "step $step/100  loss $loss"
check "tmux: the waiting note is gone" wait_gone "waiting for"
tmux_ send-keys -t viz q
check "tmux: q quits the waiting view cleanly" wait_for "viz exited with 0"

# make demo: q closes the visualizer, the training goes on; Ctrl-C then stops the training too.
sed -e 's/"steps": 600/"steps": 3000/' -e "s|\"seed\": 1,|\"seed\": 1, \"run_dir\": \"$work/demo\",|" \
  configs/synthetic-addition.json >"$work/demo.json"
trainer_running() { ps -eo args | grep -v grep | grep -q -- "train --config $work/demo.json"; }
tmux_ kill-session -t viz 2>/dev/null
tmux_ new-session -d -x 100 -y 30 -s viz "bash viz/demo.sh '$work/demo.json' '$work/demo'; echo \"demo exited with \$?\"; sleep 60"
wait_long() { # wait_long PATTERN: up to 60 s (scaled): the demo's trainer may build the dataset first
  for _ in $(seq "$(scaled 600)"); do screen_ | grep -Eq -- "$1" && return 0; sleep 0.1; done
  screen_ | sed 's/^/    | /' >&2; return 1
}
check "tmux demo: the visualizer opens on the training's events" wait_long "step [0-9]+/3000"
tmux_ send-keys -t viz q
check "tmux demo: after q the training goes on (its log is shown)" wait_for "visualizer closed; the training goes on"
check "tmux demo: the trainer is still running" trainer_running
tmux_ send-keys -t viz C-c
check "tmux demo: Ctrl-C after q stops the demo" wait_for "demo stopped \(training stopped\)"
trainer_gone() { for _ in $(seq "$(scaled 100)"); do trainer_running || return 0; sleep 0.1; done; return 1; }
check "tmux demo: and the training with it" trainer_gone
tmux_ kill-session -t viz 2>/dev/null
# should the demo have failed to stop it, do not leave a trainer running on the machine
for pid in $(ps -eo pid=,args= | awk -v c="train --config $work/demo.json" 'index($0, c) && !/awk/ { print $1 }'); do
  kill -TERM "$pid" 2>/dev/null
done

# ---------------------------------------------------------------- plot and trace
check_output "plot: figures of the poetry sample" 0 "6 figures written, 1 skipped" "$MIXPAR" plot "$poetry" --out "$work/plots"
for fig in loss loss_scale underflow memory memory_time timeline; do
  check "plot: $fig.png is a PNG and $fig.svg an SVG, with their script" bash -c \
    "head -c 8 '$work/plots/$fig.png' | od -An -c | grep -q 'P   N   G' && grep -q '<svg' '$work/plots/$fig.svg' && [ -s '$work/plots/$fig.gp' ]"
done
check_output "plot: the comm figure of a single-rank run is skipped with a note" 0 "skipped comm_bandwidth: no comm events" \
  "$MIXPAR" plot "$poetry" --out "$work/plots"
check "plot: loss.dat holds one line per step" bash -c "[ \$(grep -vc '^#' '$work/plots/loss.dat') -eq \$(grep -c '\"kind\":\"step\"' '$ev') ]"
check_output "plot: --term draws with gnuplot's dumb terminal; titles name the run directory, recipe and world" 0 \
  "tiny-poetry \\(tiny-poetry, fp32, 1 rank\\): loss" "$MIXPAR" plot "$poetry" --out "$work/dumb" --term
"$MIXPAR" plot viz/samples/ddp-2 --out "$work/ddp-plots" >/dev/null 2>&1
check_output "plot: a DDP run's titles name its world size and strategy" 0 "set title 'ddp-2 \\(synthetic-addition, fp32, 2 ranks, DDP\\): loss'" \
  cat "$work/ddp-plots/loss.gp"
check_output "plot: the loss scale is on a log2 axis labelled 2^k" 0 "set format y '2\\^%L'" cat "$work/ddp-plots/loss_scale.gp"
check_output "plot: bandwidth ticks carry SI prefixes, never 0.0000001" 0 "set format y '%.0s %cB/s'" cat "$work/ddp-plots/comm_bandwidth.gp"
check_output "plot: the timeline key names data and the loss allreduce, under the plot" 0 \
  "set key outside right.*loss allreduce.*data wait" bash -c "tr '\\n' ' ' <'$work/ddp-plots/timeline.gp'"
check_output "plot: make plots RUN=... runs it" 0 "figures written" make -s plots RUN="$addition" OUT="$work/mkplots"

# runs side by side
check_output "plot: two runs side by side" 0 "7 figures written, 2 skipped" "$MIXPAR" plot "$addition" "$fp16" --out "$work/cmp"
for fig in loss loss_gap loss_scale flushed flushed_steps memory memory_time; do
  check "plot two runs: $fig.png and $fig.svg written" bash -c \
    "head -c 8 '$work/cmp/$fig.png' | od -An -c | grep -q 'P   N   G' && grep -q '<svg' '$work/cmp/$fig.svg'"
done
steps_a=$(grep -c '"kind":"step"' "$addition/events.rank0.jsonl"); steps_b=$(grep -c '"kind":"step"' "$fp16/events.rank0.jsonl")
check "plot two runs: loss.dat holds both runs, one block each ($steps_a + $steps_b steps)" bash -c \
  "[ \$(awk 'NF && !/^#/' '$work/cmp/loss.dat' | wc -l) -eq $((steps_a + steps_b)) ] && grep -q '^# run 2: fp16-scale1 (synthetic-addition, fp16, 1 rank)' '$work/cmp/loss.dat'"
check_output "plot two runs: the loss figure plots both blocks, labelled by run" 0 \
  "index 0 .*title 'synthetic-addition \\(synthetic-addition, fp32, 1 rank\\): train'.*index 1 .*title 'fp16-scale1 \\(synthetic-addition, fp16, 1 rank\\): train'" \
  cat "$work/cmp/loss.gp"
check "plot two runs: memory_time.dat has a block per run and rank, as many lines as mem events" bash -c \
  "grep -q '^# run 2: fp16-scale1 .*, rank 0' '$work/cmp/memory_time.dat' && [ \$(awk 'NF && !/^#/' '$work/cmp/memory_time.dat' | wc -l) -eq \$(cat '$addition/events.rank0.jsonl' '$fp16/events.rank0.jsonl' | grep -c '\"kind\":\"mem\"') ]"
gap_of() { awk 'NF && !/^#/ { print $1, $2 }' "$work/cmp/loss_gap.dat"; }
loss_diff() { paste <(grep '"kind":"step"' "$addition/events.rank0.jsonl" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/') \
  <(grep '"kind":"step"' "$fp16/events.rank0.jsonl" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/') |
  awk '$1 == $3 { printf "%s %.9g\n", $1, $4 - $2 }'; }
same_gaps() { # the same steps, the same differences within 1e-7
  paste <(gap_of) <(loss_diff) | awk '{ d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || NF != 4 || d > 1e-7) bad = 1 }
    END { exit !(NR > 0 && !bad) }'; }
check "plot two runs: loss_gap.dat holds B's loss minus A's at each of the $(loss_diff | wc -l) steps both have" same_gaps
flushed_steps_of() { awk 'NF && !/^#/ { printf "%s %.4f\n", $1, $2 }' "$work/cmp/flushed_steps.dat"; }
precision_steps_of() { "$MIXPAR" precision flushed --steps "$fp16/events.rank0.jsonl" | awk '!/^#/ { printf "%s %.4f\n", $1, $2 }'; }
check "plot two runs: flushed_steps.dat holds, step by step, the share mixpar precision flushed --steps gives ($(precision_steps_of | wc -l) steps)" \
  bash -c "[ -n \"\$1\" ] && [ \"\$1\" = \"\$2\" ]" _ "$(flushed_steps_of)" "$(precision_steps_of)"
check_output "plot two runs: memory.dat has a peak column per run" 0 "^act [0-9.]+ [0-9.]+$" cat "$work/cmp/memory.dat"
check_output "plot two runs: flushed leaves out the fp32 run with a note" 0 "synthetic-addition has no rounding events" \
  "$MIXPAR" plot "$addition" "$fp16" --out "$work/cmp"
check_output "plot two runs: the titles name both runs" 0 "set title 'synthetic-addition vs fp16-scale1: loss'" cat "$work/cmp/loss.gp"
check_output "snapshot --cursor 35: the underflow panel draws the histograms of step 30 (the newest at or before it)" 0 \
  "^gradient exponents: block 0, step 30 \\(cursor 35\\)" snap "$fp16" --panel underflow --layer 0 --cursor 35
check_output "snapshot --cursor 35: the status bar shows the cursor" 0 "^snapshot \\| cursor step 35 " snap "$fp16" --panel underflow --cursor 35
check_output "snapshot of two runs, --cursor 150 past run A's end: A says so, B draws step 140's histograms" 0 \
  "^ A  fp16-scale1 .*run A ended at step 100 .*│ B  synthetic-addition" snap "$fp16" "$addition" --panel underflow --cursor 150 --width 160 --height 48
big_snap() { snap --big "$@" | blocks_no_braille; }
check "snapshot --big: the charts are blocks, not braille" big_snap "$poetry"
braille_snap() { snap "$@" | has_braille; }
check "snapshot: (without --big they are braille)" braille_snap "$poetry"
check "snapshot --big of two runs side by side: blocks too" big_snap "$addition" "$fp16" --width 120 --height 36
check_output "80x24: the underflow panel says how many formats its 'if cast' table left out" 0 "^\\+2 more formats" \
  snap "$fp16" --panel underflow --width 80 --height 24
check_output "80x24: a line cut short by the screen ends in '>' (the loss panel's tokens/s)" 0 "^step 100/100  loss .*>$" \
  snap viz/samples/ddp-2 --panel loss --width 80 --height 24
check_output "220x60: and that line is whole there, with tokens/s and the scale" 0 "^step 100/100  loss .* tok/s  scale 1 *$" \
  snap viz/samples/ddp-2 --panel loss --width 220 --height 60
check_output "snapshot of two runs: the loss panel overlays them with a legend" 0 "A train .*B train" \
  snap "$addition" "$fp16" --width 120 --height 36
check_output "snapshot of two runs: each header row has its run's last loss" 0 "^B fp16-scale1 \\(synthetic-addition, fp16, 1 rank\\)  step 100  loss" \
  snap "$addition" "$fp16" --width 120 --height 36
check_output "snapshot of two runs: memory side by side at 160 columns" 0 "^ A  synthetic-addition .*│ B  fp16-scale1" \
  snap "$addition" "$fp16" --panel memory --width 160 --height 40
check_output "plot: a missing second run" 2 "does not exist" "$MIXPAR" plot "$addition" "$work/none" --out "$work/cmp2"
check_output "viz: a missing second run" 2 "does not exist" "$MIXPAR" viz --snapshot "$addition" "$work/none"

check_output "trace: the poetry sample exports" 0 "300 spans, 0 comm calls" "$MIXPAR" trace "$poetry" -o "$work/trace.json"
check "trace: the file is a JSON object with traceEvents" bash -c "head -c 40 '$work/trace.json' | grep -q '^{\"displayTimeUnit\":\"ms\"' && tail -c 4 '$work/trace.json' | grep -q ']}'"
"$MIXPAR" trace viz/samples/ddp-2 -o "$work/ddp-trace.json" >/dev/null
check_output "trace: a run with wall clocks in its headers puts every rank on one clock" 0 '"clocks":"aligned by wall clock"' \
  head -c 300 "$work/ddp-trace.json"
# the first gradient allreduce ends at one instant on both ranks: 7 us apart aligned, 768 us on the ranks' own clocks
first_end() { grep '"cat":"comm"' "$work/ddp-trace.json" | grep -m1 "\"pid\":$1," | sed -E 's/.*"ts":([0-9.e+-]+),"dur":([0-9.e+-]+).*/\1 \2/' |
  awk '{ printf "%.3f", $1 + $2 }'; }
check "trace: rank 0's and rank 1's first collective end within 100 us ($(first_end 0) vs $(first_end 1) us)" \
  awk -v a="$(first_end 0)" -v b="$(first_end 1)" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && b > 0 && d < 100) }'
calls=$(grep -c '"kind":"comm"' viz/samples/ddp-2/events.rank0.jsonl)
check "trace: a flow arrow joins each of the $calls collectives from rank 0 to rank 1" bash -c \
  "[ \$(grep -c '\"ph\":\"s\",\"pid\":0,' '$work/ddp-trace.json') -eq $calls ] && [ \$(grep -c '\"ph\":\"f\",\"pid\":1,' '$work/ddp-trace.json') -eq $calls ]"
check_output "snapshot: the comm panel says per rank how much communication no compute hid, and idle time" 0 \
  "^in view, comm not under compute \\| idle: r0 [0-9.]+ [um]?s [0-9]+% \\| [0-9.]+ [um]?s [0-9]+%  r1 " snap viz/samples/ddp-2 --panel comm
check_output "snapshot: the comm panel aligns the ranks by wall clock" 0 "clocks aligned by wall clock" snap viz/samples/ddp-2 --panel comm

# ---------------------------------------------------------------- pipeline parallel (viz/samples/pp-4: 4 stages, 1f1b)
pp4=viz/samples/pp-4
# the marks a stage's pp spans of one step stand for, in the order the stage wrote (= ran) them: forward of
# micro-batch k the digit k, its backward the letter a + k
pp_marks() { # pp_marks STAGE STEP
  grep '"name":"pp_' "$pp4/events.rank$1.jsonl" | grep "\"step\":$2," |
    sed -E 's/.*"name":"pp_([a-z]+)".*"micro":([0-9]+),.*/\1 \2/' |
    awk '{ printf "%s", $1 == "forward" ? sprintf("%d", $2 % 10) : sprintf("%c", 97 + $2 % 26) }'
}
# a stage's row of the drawn schedule, its idle cells dropped and each span's run of cells made one mark
pp_row() { # pp_row STAGE SNAPSHOT_FILE
  grep -E "^s$1 +r[0-9]+ +│" "$2" | sed 's/.*│//' | tr -d '. ' | sed -E 's/(.)\1+/\1/g'
}
pp_last=$(grep '"kind":"step"' "$pp4/events.rank0.jsonl" | tail -n 1 | sed -E 's/.*"step":([0-9]+),.*/\1/')
snap "$pp4" --panel comm --width 160 --height 48 >"$work/pp.txt"
check_output "pipeline: the comm panel draws the schedule of the newest step ($pp_last)" 0 \
  "^pipeline schedule: 1f1b, 4 stages x 8 micro-batches, step $pp_last: .*clocks aligned by wall clock" cat "$work/pp.txt"
for st in 0 1 2 3; do
  want=$(pp_marks "$st" "$pp_last")
  check "pipeline: stage $st's row runs the forwards and backwards in the order of its span events ($want)" \
    test "$(pp_row "$st" "$work/pp.txt")" = "$want"
done
snap "$pp4" --panel comm --width 160 --height 48 --cursor 2 >"$work/pp2.txt"
check "pipeline: --cursor 2 draws step 2's schedule, in its events' order on every stage" bash -c \
  "grep -q '^pipeline schedule: .*, step 2 (cursor 2):' '$work/pp2.txt' && $(for st in 0 1 2 3; do
     printf '[ \"%s\" = \"%s\" ] && ' "$(pp_row "$st" "$work/pp2.txt")" "$(pp_marks "$st" 2)"; done) true"
check "pipeline: stage 0 starts with its 4 warm-up forwards and stage 3 alternates from its first (1F1B)" bash -c \
  "grep -Eq '^s0 +r0 +│0+1+2+3+' '$work/pp.txt' && grep -Eq '^s3 +r3 +│\\.*0+a+1+b+' '$work/pp.txt'"
step_pipe() { grep '"kind":"step"' "$pp4/events.rank$1.jsonl" | grep "\"step\":$pp_last," | sed -E "s/.*\"$2\":([0-9.e+-]+).*/\\1/"; }
pct() { awk -v x="$1" 'BEGIN { printf "%.0f%%", 100 * x }'; }
b0=$(pct "$(step_pipe 0 bubble)"); b3=$(pct "$(step_pipe 3 bubble)"); order=$(pct "$(step_pipe 0 bubble_schedule)")
check_output "pipeline: the bubble line has (p-1)/(vm+p-1) = 3/11, the schedule's order ($order) and each stage's measured bubble (s0 $b0, s3 $b3)" 0 \
  "^bubble \\(p-1\\)/\\(vm\\+p-1\\)=3/11 27%, order $order, measured s0 $b0 .* s3 $b3" cat "$work/pp.txt"
sends=$(cat "$pp4"/events.rank*.jsonl | grep '"kind":"comm"' | grep '"op":"send"' | grep -c '"group":"pp"')
embed=$(cat "$pp4"/events.rank*.jsonl | grep '"kind":"comm"' | grep -c '"group":"embed"')
check_output "pipeline: the calls are counted by the group they ran on (pp send $sends, embed allreduce $embed)" 0 \
  "^calls by group: pp .*send $sends.* \\| embed allreduce $embed" cat "$work/pp.txt"
check_output "plot: a pipeline-parallel run gets the pipeline figure" 0 "wrote .*/pipeline.png and pipeline.svg" \
  "$MIXPAR" plot "$pp4" --out "$work/pp-plots"
check "plot: pipeline.dat holds every pp span of the step, stage by stage in the order run (stage 2: $(pp_marks 2 "$pp_last"))" bash -c \
  "[ \$(grep -vc '^#' '$work/pp-plots/pipeline.dat') -eq \$(cat $pp4/events.rank*.jsonl | grep '\"name\":\"pp_' | grep -c '\"step\":$pp_last,') ] &&
   [ \"\$(awk '\$1 == 2 { printf \"%s\", \$4 == 1 ? sprintf(\"%d\", \$5 % 10) : sprintf(\"%c\", 97 + \$5 % 26) }' '$work/pp-plots/pipeline.dat')\" = '$(pp_marks 2 "$pp_last")' ]"
check_output "plot: its title gives the bubble measured per stage against (p-1)/(vm+p-1)" 0 \
  "bubble: \\(p-1\\)/\\(vm\\+p-1\\) = 27%, the schedule''s order 27%, measured s0 $b0 .* s3 $b3" cat "$work/pp-plots/pipeline.gp"
"$MIXPAR" trace "$pp4" -o "$work/pp-trace.json" >/dev/null
check "trace: each rank of a pipeline run has a track named for its stage" bash -c \
  "for r in 0 1 2 3; do grep -q \"\\\"pid\\\":\$r,\\\"tid\\\":3,\\\"args\\\":{\\\"name\\\":\\\"pipeline stage \$r\\\"}\" '$work/pp-trace.json' || exit 1; done"
pp_spans=$(cat "$pp4"/events.rank*.jsonl | grep -c '"name":"pp_')
check "trace: every pp span ($pp_spans) is a slice F<k> or B<k> on a stage's track" bash -c \
  "[ \$(grep -Eo '\"name\":\"[FB][0-9]+\",\"ph\":\"X\",\"pid\":[0-9]+,\"tid\":3,' '$work/pp-trace.json' | wc -l) -eq $pp_spans ]"
check_output "pipeline: at 80x24 every stage is drawn, with the bubble line" 0 "s3 +r3 +│.*bubble \\(p-1\\)" \
  bash -c "'$MIXPAR' viz --snapshot '$pp4' --panel comm --width 80 --height 24 | tr '\\n' ' '"
check_output "pipeline: so is it on the smallest screen (72x20)" 0 "^s3 +r3 +│" snap "$pp4" --panel comm --width 72 --height 20

# ---------------------------------------------------------------- bad input: a message and exit 2
mkdir -p "$work/empty" "$work/bad"
printf 'garbage\n{"v":1}\n' >"$work/bad/events.rank0.jsonl"
printf '{"v":7,"kind":"step","rank":0,"t":1}\n' >"$work/newer.jsonl"
mkdir -p "$work/newer" && mv "$work/newer.jsonl" "$work/newer/events.rank0.jsonl"
check_output "viz: a missing run directory" 2 "does not exist" "$MIXPAR" viz "$work/none"
check_output "viz: a directory without event files" 2 "holds no events.rank<R>.jsonl" "$MIXPAR" viz --snapshot "$work/empty"
check_output "viz: a file instead of a directory" 2 "is not a directory" "$MIXPAR" viz --snapshot "$ev"
check_output "viz: no RUN_DIR" 2 "RUN_DIR is required" "$MIXPAR" viz
check_output "viz: an unknown option" 2 "unknown option '--colour'" "$MIXPAR" viz --colour "$poetry"
check_output "viz: an unknown panel" 2 "--panel expects loss, underflow, comm or memory" "$MIXPAR" viz --snapshot "$poetry" --panel gpu
check_output "viz: --layer 99 is not a layer of the run" 2 \
  "--layer 99: .*tiny-poetry has gradient histograms for layers -1 \(embeddings\) to 4 \(head\); choose one" \
  "$MIXPAR" viz --snapshot "$poetry" --layer 99
check_output "viz: --layer 3 is not a layer of a 2-layer run (-1..2)" 2 "layers -1 \(embeddings\) to 2 \(head\)" \
  "$MIXPAR" viz --snapshot "$addition" --panel underflow --layer 3
check_output "viz: --layer 4 (the head) of the poetry run is accepted" 0 "gradient exponents: head" \
  "$MIXPAR" viz --snapshot "$poetry" --panel underflow --layer 4
check_output "viz: --rank 5 is not a rank of a 1-rank run" 2 "--rank 5: .*tiny-poetry has 1 rank \(0\); choose one" \
  "$MIXPAR" viz --snapshot "$poetry" --rank 5
check_output "viz: --rank 2 is not a rank of a 2-rank run" 2 "--rank 2: .*ddp-2 has 2 ranks \(0 to 1\)" \
  "$MIXPAR" viz --snapshot viz/samples/ddp-2 --panel memory --rank 2
check_output "viz: --rank 1 of a 2-rank run is accepted" 0 "2 ranks" "$MIXPAR" viz --snapshot viz/samples/ddp-2 --panel memory --rank 1
mkdir -p "$work/nolayers"
printf '%s\n' '{"v":1,"kind":"run","rank":0,"t":0,"name":"nolayers","world":1}' \
  '{"v":1,"kind":"step","rank":0,"t":1,"step":1,"loss":2.5}' >"$work/nolayers/events.rank0.jsonl"
check_output "viz: --layer on a run with no layers to choose from" 2 "--layer 0: .* has no layers to choose from" \
  "$MIXPAR" viz --snapshot "$work/nolayers" --layer 0
check_output "viz: a zero width" 2 "--width expects a whole number from 1" "$MIXPAR" viz --snapshot "$poetry" --width 0
check_output "viz: --speed without --replay" 2 "--speed sets the pace of --replay" "$MIXPAR" viz "$poetry" --speed 2
check_output "viz: a negative speed" 2 "--speed expects a positive factor" "$MIXPAR" viz --replay "$poetry" --speed -1
check_output "viz: live mode needs a terminal" 2 "(stdin|stdout) is not a terminal" bash -c "'$MIXPAR' viz '$poetry' >'$work/out.txt'"
check_output "viz: and says what to use instead" 2 "hint: +for text output use mixpar viz --snapshot" \
  bash -c "'$MIXPAR' viz '$poetry' </dev/null"
check_output "plot: a missing run directory" 2 "does not exist" "$MIXPAR" plot "$work/none"
check_output "plot: two runs, the second malformed" 2 "no readable events in .*/bad .*2 malformed" "$MIXPAR" plot "$addition" "$work/bad" --out "$work/badplots2"
check_output "viz: two runs, the second malformed" 2 "no readable events in .*/bad" "$MIXPAR" viz --snapshot "$addition" "$work/bad"
check_output "viz: five runs are too many" 2 "at most 4 runs side by side" "$MIXPAR" viz --snapshot "$addition" "$addition" "$addition" "$addition" "$addition"
check_output "plot: only malformed lines" 2 "no readable events.*2 malformed" "$MIXPAR" plot "$work/bad" --out "$work/badplots"
check_output "trace: only a newer schema" 2 "rebuild it" "$MIXPAR" trace "$work/newer" -o "$work/newer.json"
check "trace: nothing is left behind when it fails" bash -c "[ ! -e '$work/newer.json' ] && [ ! -e '$work/newer.json.tmp' ]"
check_output "trace: -o without a file" 2 "-o needs a file name" "$MIXPAR" trace "$poetry" -o
mkdir -p "$work/bin" && cp "$MIXPAR" "$work/bin/mixpar"
check_output "viz: without build/mixpar-viz beside mixpar, a clear error" 2 "the visualizer is missing: .*/bin/mixpar-viz" \
  "$work/bin/mixpar" viz "$poetry"
