# lib.sh: helpers for the shell test suites: each check prints "ok - NAME" or "not ok - NAME" plus why.
# Sourced by tests/*/*.sh; tests/run_all.sh counts those lines.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MIXPAR="$ROOT/build/mixpar"
GRADER="$ROOT/build/mixpar-grade"

# Time limits in tests only guard against hangs, so they must hold on a busy machine: every one is scaled by
# MIXPAR_TIME_SCALE (default 3; set it higher on a slow or crowded machine). No check passes or fails by
# how fast something ran.
TIME_SCALE=${MIXPAR_TIME_SCALE:-3}
# scaled SECONDS: SECONDS x MIXPAR_TIME_SCALE, rounded to whole seconds.
scaled() { awk -v t="$1" -v s="$TIME_SCALE" 'BEGIN { printf "%d\n", t * s + 0.5 }'; }

# check NAME COMMAND...: passes when the command exits 0.
check() {
  local name=$1; shift
  local out
  if out=$("$@" 2>&1); then echo "ok - $name"; else
    echo "not ok - $name"; printf '%s\n' "$out" | tail -n 15 | sed 's/^/    /'; fi
}

# check_output NAME EXPECTED_EXIT PATTERN COMMAND...: passes when the command exits with EXPECTED_EXIT
# and its output (stdout and stderr) matches the extended regular expression PATTERN.
check_output() {
  local name=$1 want=$2 pattern=$3; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -eq "$want" ] && grep -Eq -- "$pattern" <<<"$out"; then echo "ok - $name"; else
    echo "not ok - $name (exit $rc, expected $want; output should match /$pattern/)"
    printf '%s\n' "$out" | tail -n 15 | sed 's/^/    /'; fi
}
