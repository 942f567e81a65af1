#!/usr/bin/env bash
# pipeline.sh: the lab pipeline end to end, for every lab that exists: the student edition builds cleanly,
# every test worth points (visible and hidden) fails on it, and the reference regions spliced into it as
# a submission score full marks again.
source "$(dirname "$0")/lib.sh"
export MIXPAR_TIME_SCALE=${MIXPAR_TIME_SCALE:-3}
cd "$ROOT" || exit 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
student="$work/student"

check "handout: make handout writes the student edition" "$GRADER" handout "$student"
check "handout: no solutions, hidden tests or core tests in it" bash -c \
  "[ ! -e '$student/solutions' ] && [ ! -e '$student/grader/hidden' ] && [ ! -e '$student/tests/unit' ] && [ -e '$student/.student-edition' ]"
regions=$("$GRADER" regions | grep -c '^lab ')
stubs=$(grep -rEo 'LAB_TODO\([0-9]+\);' "$student/core" | wc -l)
check "handout: every one of the $regions regions is a LAB_TODO stub" test "$stubs" -eq "$regions"
build_log="$work/student-build.log"
if make -C "$student" -j2 all lab-tests >"$build_log" 2>&1; then
  check "handout: the student edition builds with no warnings" bash -c "! grep -n 'warning:' '$build_log'"
else
  echo "not ok - handout: the student edition builds"; tail -n 20 "$build_log" | sed 's/^/    /'
fi

# Hidden tests go into a copy of the student edition so that they, too, are shown to fail on stubs.
cp -r grader/hidden "$student/grader/hidden" 2>/dev/null || mkdir -p "$student/grader/hidden"
for lab in $("$GRADER" regions | awk '/^lab /{print $2}' | sort -u); do
  out=$(cd "$student" && "$GRADER" grade "$lab" 2>&1)
  if ! grep -q "^== Test " <<<"$out"; then echo "not ok - student edition: lab $lab graded"; sed 's/^/    /' <<<"$out" | tail -20; continue; fi
  while read -r name verdict; do
    if [ "$verdict" = FAIL ]; then echo "ok - student edition: lab $lab $name fails on the stubs"
    else echo "not ok - student edition: lab $lab $name passes on the stubs (a test that cannot fail?)"; fi
  done < <(awk '/^== Test /{print $3, $5}' <<<"$out")
  "$GRADER" submit "$lab" -o "$work/reference-lab$lab.tar" >/dev/null
  # A lab that "requires" earlier labs (its tests train a real model) is graded in a student edition where
  # those labs' reference regions are spliced in: there its tests must still fail on its own stubs, and
  # its reference must score full marks.
  reqs=$(grep -o '"requires": *\[[^]]*\]' labs/lab"$lab"-*/lab.json 2>/dev/null | grep -o '[0-9]\+' | tr '\n' ' ')
  reqs=${reqs% }
  tree="$student"
  for r in $reqs; do
    rr=$(printf %02d "$r")
    "$GRADER" submit "$rr" -o "$work/reference-lab$rr.tar" >/dev/null
    (cd "$tree" && "$GRADER" splice "$rr" --submission "$work/reference-lab$rr.tar" >/dev/null 2>&1)
    tree="$tree/build/grading/lab$rr"
  done
  if [ -n "$reqs" ]; then
    out=$(cd "$tree" && "$GRADER" grade "$lab" 2>&1)
    fails=$(grep -c "^== Test .* FAIL" <<<"$out"); total=$(grep -c "^== Test " <<<"$out")
    check "student edition + required labs ($reqs): lab $lab's $total tests all fail on its own stubs" \
      test "$fails" -eq "$total" -a "$total" -gt 0
  fi
  check_output "splice: lab $lab reference regions in the student edition${reqs:+ (with labs $reqs done)} score full marks" 0 \
    "^Score: ([0-9.]+)/\\1$" bash -c "cd '$tree' && '$GRADER' grade $lab --submission '$work/reference-lab$lab.tar'"
done
