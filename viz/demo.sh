#!/usr/bin/env bash
# demo.sh CONFIG RUN_DIR: `make demo`: train a model and watch it.
# On a terminal, the training runs in the background (its progress lines go to RUN_DIR/train.log) under the
# live visualizer. q closes the visualizer; the training carries on to its end and the demo shows its log
# meanwhile, so the final sample is still seen. Ctrl-C at any point stops both: the trap sends the trainer
# SIGTERM (a background job of a non-interactive shell ignores SIGINT, so `kill -INT` would do nothing). The
# trainer does not catch SIGTERM: it ends at once, and that is clean, because it writes each event line
# with one write(2) and its checkpoints through a temporary file renamed into place, so nothing is left
# half-written (the next run removes stale temporaries).
# Not on a terminal (CI, a pipe), the training runs in the foreground as it always did, and a text
# snapshot of the visualizer's loss panel ends the output.
cd "$(dirname "$0")/.." || exit 2
config=${1:?usage: viz/demo.sh CONFIG RUN_DIR}
run=${2:?usage: viz/demo.sh CONFIG RUN_DIR}
mixpar=build/mixpar

if [ ! -t 0 ] || [ ! -t 1 ]; then
  "$mixpar" train --config "$config" || exit
  echo
  exec "$mixpar" viz --snapshot "$run" --panel loss
fi

mkdir -p "$run" || exit 2
log="$run/train.log"
rm -f "$run/events.rank0.jsonl" # so the visualizer waits for this run's stream, not the last run's
"$mixpar" train --config "$config" >"$log" 2>&1 &
trainer=$!
trap 'kill -TERM "$trainer" 2>/dev/null; wait "$trainer" 2>/dev/null; echo; echo "demo stopped (training stopped)"; exit 130' INT TERM

# The first run builds the dataset before training starts: wait for the event stream to appear.
echo "starting the training (log: $log); the visualizer opens when its first events are written..."
while [ ! -s "$run/events.rank0.jsonl" ]; do
  if ! kill -0 "$trainer" 2>/dev/null; then
    wait "$trainer"; rc=$?
    cat "$log"
    exit "$rc"
  fi
  sleep 0.2
done

"$mixpar" viz "$run"
if kill -0 "$trainer" 2>/dev/null; then
  echo "visualizer closed; the training goes on to its end (Ctrl-C stops it). Its log, $log:"
  tail -n +1 --pid="$trainer" -f "$log"
else
  cat "$log"
fi
wait "$trainer"
