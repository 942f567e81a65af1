#!/usr/bin/env bash
# faults_run.sh: killing the launcher (mpirun or mixpar run, kill -9, at any moment) leaves no rank running and the
# previous checkpoint loadable; one job per run directory (a second exits 2 naming the holder); a rank whose
# launcher died before it started stops; temporaries of killed saves are removed when the next run starts.
source "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
work=$(mktemp -d)
launched=()
cleanup() { local p; for p in "${launched[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$work"; }
trap cleanup EXIT
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
# A ZeRO-2 run (a sharded checkpoint) that saves at every step, so kills land inside saves as often as not.
long=(--config configs/synthetic-addition.json --quiet --set train.steps=100000 --set scheduler.params.total_steps=100000
      --set train.eval_interval=0 --set train.sample_interval=0 --set train.hist_interval=0
      --set train.checkpoint_interval=1 --set zero_optimization.stage=2 --set data.dir="$work/data")
short=(--config configs/synthetic-addition.json --quiet --set train.steps=2 --set scheduler.params.warmup_steps=1
       --set scheduler.params.total_steps=2 --set train.eval_interval=0 --set train.sample_interval=0
       --set train.checkpoint_interval=0 --set data.dir="$work/data")
run="$work/run"
ck="$run/checkpoint.sharded"

# alive PID...: those still running (a zombie has exited; it only waits for its parent to collect it).
alive() { local p s out=""; for p in "$@"; do s=$(ps -o stat= -p "$p" 2>/dev/null) && [[ $s != Z* ]] && out+="$p "; done; echo "$out"; }
# wait_gone PID...: polls (at most 30 s: a generous bound, not a timing assumption) until none is running.
wait_gone() { local i; for i in $(seq 300); do [ -z "$(alive "$@")" ] && return 0; sleep 0.1; done; return 1; }
# wait_ranks LAUNCHER: prints mpirun's pid and its 2 ranks' once both ranks hold the run directory's lock.
wait_ranks() {
  local i mp ranks
  for i in $(seq 600); do
    mp=$(pgrep -P "$1" | head -n 1)
    ranks=$([ -n "$mp" ] && pgrep -P "$mp" | tr '\n' ' ')
    if [ "$(wc -w <<<"$ranks")" -eq 2 ] && [ -n "$(alive "$1")" ]; then
      local r ok=1
      for r in $ranks; do grep -q "^pid $r on .*rank [01] of 2" "$run/run.lock" 2>/dev/null || ok=0; done
      [ $ok = 1 ] && { echo "$mp $ranks"; return 0; }
    fi
    sleep 0.1
  done
  return 1
}
shards_ok() { [ "$("$MIXPAR" checkpoint info "$ck" 2>&1 | grep -c 'sha256 ok')" -eq 2 ]; }
ckpt_step() { "$MIXPAR" checkpoint info "$ck" 2>/dev/null | sed -nE '1s/.*step ([0-9]+).*/\1/p'; }

# A first checkpoint, so that every kill below has a previous one to keep.
timeout 120 "$MIXPAR" run -n 2 -- "$MIXPAR" train "${long[@]}" --set train.steps=2 --set train.run_dir="$run" \
  >"$work/first.log" 2>&1
check "kill: a first 2-rank run wrote a sharded checkpoint" shards_ok

# Kill -9 the launcher, 5 times: mpirun, then mixpar run (which takes mpirun with it), in turn, each a little
# later after the ranks started (in training or in a save: the property must hold whatever the moment).
# (stderr of the loop is dropped: bash's "Killed" notices for the launchers; the checks report on stdout.)
for i in 1 2 3 4 5; do
  "$MIXPAR" run -n 2 -- "$MIXPAR" train "${long[@]}" --resume auto --set train.run_dir="$run" >"$work/kill$i.log" 2>&1 &
  launcher=$!
  launched+=("$launcher")
  if ! procs=$(wait_ranks "$launcher"); then
    echo "not ok - kill $i: the job did not start"; sed 's/^/    /' "$work/kill$i.log" | tail -n 15; continue
  fi
  read -r mpirun rank0 rank1 <<<"$procs"
  launched+=("$mpirun" "$rank0" "$rank1")
  if [ $i = 1 ]; then
    # While the job runs, the run directory is its own: a second job stops at once, naming the holders.
    check_output "lock: a second job on a run directory in use exits 2 naming the holder's pid" 2 \
      "'$run' is in use by another job .*: pid $rank0 on .*rank 0 of 2.*pid $rank1 on .*rank 1 of 2" \
      timeout 60 "$MIXPAR" train "${short[@]}" --set train.run_dir="$run"
    check_output "lock: a second 2-rank job is refused too, with one message" 2 "in use by another job" \
      timeout 60 "$MIXPAR" run -n 2 -- "$MIXPAR" train "${short[@]}" --set zero_optimization.stage=2 --set train.run_dir="$run"
    check "lock: the refused jobs left the holder running" test -n "$(alive "$rank0")" -a -n "$(alive "$rank1")"
  fi
  sleep "0.$((i * 2 - 2))"
  # The ranks (and, when mixpar run is the target, mpirun) are stopped first: a stopped process notices nothing
  # by itself (not even OpenMPI's lost connection), so only the kernel's parent-death SIGKILL can end them.
  if [ $((i % 2)) = 1 ]; then
    target=$mpirun what=mpirun
    kill -STOP "$rank0" "$rank1"
  else
    target=$launcher what="mixpar run"
    kill -STOP "$rank0" "$rank1" "$mpirun"
  fi
  kill -9 "$target"
  check "kill $i: no rank (nor mpirun) survives a kill -9 of $what" wait_gone "$mpirun" "$rank0" "$rank1"
  rm -rf "${TMPDIR:-/tmp}"/ompi.*/pid."$mpirun" 2>/dev/null # the session directory a killed mpirun leaves
  { wait "$launcher"; } 2>/dev/null
  check "kill $i: the previous checkpoint still verifies (sha256 of both shards)" shards_ok
done 2>/dev/null

# Resume on the same directory at once: the lock is free, stale temporaries go, the checkpoint loads.
step=$(ckpt_step)
check_output "kill: a job resumed on the same directory trains on from the checkpoint" 0 "" \
  timeout 120 "$MIXPAR" run -n 2 -- "$MIXPAR" train "${long[@]}" --resume auto --set train.steps=$((step + 2)) \
  --set train.run_dir="$run"
check "kill: the resumed job saved step $((step + 2)), verified" eval '[ "$(ckpt_step)" = $((step + 2)) ] && shards_ok'
check "kill: no temporary is left in the run directory" test -z "$(ls -d "$run"/*.tmp* "$run"/*.old 2>/dev/null)"

# A rank whose launcher was gone before it even started (mpirun killed between its fork and the rank's prctl)
# stops before it touches anything: what comm_init checks after setting the parent-death signal.
sh -c 'exit 0' &
dead=$!
wait "$dead"
machine="$(cat /proc/sys/kernel/random/boot_id)/$(readlink /proc/self/ns/pid)"
check_output "kill: a rank whose launcher is already gone stops at once" 137 \
  "the launcher of this rank \(mpirun, pid $dead\) is gone" env OMPI_COMM_WORLD_SIZE=1 MIXPAR_LAUNCHER_PID="$dead" \
  MIXPAR_LAUNCHER_MACHINE="$machine" "$MIXPAR" train "${short[@]}" --set train.run_dir="$work/orphan"
check "kill: ... and wrote nothing" test ! -e "$work/orphan"

# Temporaries of killed saves: removed when the next run starts (the lock says no one else writes there).
st="$work/stale"
mkdir -p "$st/checkpoint.sharded.tmp"
head -c 1000 /dev/zero >"$st/checkpoint.safetensors.tmp.Ab12Cd"
head -c 500 /dev/zero >"$st/checkpoint.sharded.tmp/rank-00000-of-00002.safetensors"
echo notes >"$st/notes.tmp.txt"
check_output "stale: temporaries of killed saves are removed at start, with their bytes" 0 \
  "removed 2 stale temporary files of interrupted saves from .* \(1500 bytes" \
  "$MIXPAR" train "${short[@]}" --set train.run_dir="$st"
check "stale: the temporary file and directory are gone" test ! -e "$st/checkpoint.safetensors.tmp.Ab12Cd" -a \
  ! -e "$st/checkpoint.sharded.tmp"
check "stale: other files are kept" test -e "$st/notes.tmp.txt"
mkdir -p "$work/old/checkpoint.sharded.old"
echo '{}' >"$work/old/checkpoint.sharded.old/index.json"
"$MIXPAR" train "${short[@]}" --set train.run_dir="$work/old" >/dev/null 2>&1
check "stale: a checkpoint.sharded.old that is the only sharded checkpoint is kept" \
  test -e "$work/old/checkpoint.sharded.old/index.json"
