#!/usr/bin/env bash
# pipeline.sh: the lab pipeline end to end, for every lab that exists: the student edition builds cleanly,
# every test worth points (visible and hidden) fails on it, and the reference regions spliced into it as
# a submission score full marks again.
source "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
export MIXPAR_TIME_SCALE=$TIME_SCALE # the grades below: the grader's per-test limits, scaled as every hang guard
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
student="$work/student"
jobs_at_once=${PIPELINE_JOBS:-2}

check "handout: make handout writes the student edition" "$GRADER" handout "$student"
check "handout: no solutions, hidden tests, planted bugs or core tests in it" bash -c \
  "[ ! -e '$student/solutions' ] && [ ! -e '$student/grader/hidden' ] && [ ! -e '$student/tests/unit' ] &&
   [ ! -e '$student/tests/mutants' ] && [ -e '$student/.student-edition' ]"
nlabs=$(ls -d labs/lab[0-9][0-9]-* | wc -l)
# Its rows: | NN | [title](labs/...) | 中文 | needs | hours | files | points |; every lab has its Chinese title and hours.
check "handout: the student README ends with the table of all $nlabs labs (Chinese titles, hours, files)" bash -c \
  "awk -F' [|] ' '/^[|] [0-9][0-9] [|] \\[/ { rows++; if (\$3 == \"\" || \$5 == \"?\" || \$6 !~ /core/) bad++ }
       END { exit !(rows == $nlabs && bad == 0) }' '$student/README.md'"
regions=$("$GRADER" regions | grep -c '^lab ')
stubs=$(grep -rEo 'LAB_TODO\([0-9]+\);' "$student/core" | wc -l)
check "handout: every one of the $regions regions is a LAB_TODO stub" test "$stubs" -eq "$regions"

# The student edition differs from this tree only in the files with regions (and the handout's own files), so
# it starts from this tree's compiled objects: a file the handout left as it was gets this tree's time, the
# objects come along with theirs, and make compiles only what changed. (Without a build here, all of it.)
if [ -d build/obj ] && [ -e build/libmixpar.a ]; then
  (cd "$student" && find . -path ./build -prune -o -type f -print0) |
    while IFS= read -r -d '' f; do cmp -s "$student/$f" "$f" && touch -r "$f" "$student/$f"; done
  mkdir -p "$student/build"
  cp -a build/obj "$student/build/obj"
  rm -rf "$student/build/obj/tests/unit" "$student/build/obj/tests/cli" "$student/build/obj/tests/mpi" \
    "$student/build/obj/grader/hidden"
  [ -e build/.deps-ok ] && cp -p build/.deps-ok "$student/build/.deps-ok"
fi
# Hidden tests go into the student edition too, so that they are shown to fail on stubs as well.
cp -r grader/hidden "$student/grader/hidden" 2>/dev/null || mkdir -p "$student/grader/hidden"
build_log="$work/student-build.log"
if make -C "$student" -j2 all lab-tests >"$build_log" 2>&1; then
  check "handout: the student edition builds with no warnings ($(grep -c -- ' -c ' "$build_log") files compiled)" \
    bash -c "! grep -n 'warning:' '$build_log'"
else
  echo "not ok - handout: the student edition builds"; tail -n 20 "$build_log" | sed 's/^/    /'
fi

labs=$("$GRADER" regions | awk '/^lab /{print $2}' | sort -u)
for lab in $labs; do "$GRADER" submit "$lab" -o "$work/reference-lab$lab.tar" >/dev/null; done
requires_of() { grep -o '"requires": *\[[^]]*\]' labs/lab"$1"-*/lab.json 2>/dev/null | grep -o '[0-9]\+' | xargs -r printf '%02d\n' | paste -sd, -; }

# run_jobs FUNCTION ARG...: runs FUNCTION ARG for each ARG, at most $jobs_at_once at a time, each writing to
# $work/out.FUNCTION.ARG (shown with show_jobs).
run_jobs() {
  local fn=$1; shift
  for a in "$@"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_at_once" ]; do wait -n; done
    "$fn" "$a" >"$work/out.$fn.$a" 2>&1 &
  done
  wait
}
show_jobs() { local fn=$1; shift; for a in "$@"; do cat "$work/out.$fn.$a"; done; }

# A lab that "requires" earlier labs (its tests train a real model) is graded in a student edition where those
# labs' reference regions are spliced in, all at once: build/grading/spliced-labAA+BB in the student edition. Each set
# of required labs is made once, before the labs that use it.
splice_required() {
  local set=$1 args=() r
  for r in ${set//,/ }; do args+=(--submission "$work/reference-lab$r.tar"); done
  check "student edition + labs $set done: the reference regions of those labs splice and build" \
    bash -c "cd '$student' && '$GRADER' splice $set ${args[*]}"
}
sets=$(for lab in $labs; do requires_of "$lab"; done | grep . | sort -u)
run_jobs splice_required $sets
show_jobs splice_required $sets

one_lab() {
  local lab=$1 reqs tree out fails total
  out=$(cd "$student" && "$GRADER" grade "$lab" 2>&1)
  if ! grep -q "^== Test " <<<"$out"; then echo "not ok - student edition: lab $lab graded"; sed 's/^/    /' <<<"$out" | tail -20; return; fi
  while read -r name verdict; do
    if [ "$verdict" = FAIL ]; then echo "ok - student edition: lab $lab $name fails on the stubs"
    else echo "not ok - student edition: lab $lab $name passes on the stubs (a test that cannot fail?)"; fi
  done < <(awk '/^== Test /{print $3, $5}' <<<"$out")
  # Its answers file is blank there: no question scores (answers.md, part Q).
  if grep -q '^== Question ' <<<"$out"; then
    check "student edition: lab $lab's blank answers.md scores no question" \
      test "$(grep -c '^== Question .* == OK' <<<"$out")" -eq 0
  fi
  reqs=$(requires_of "$lab")
  tree="$student"
  if [ -n "$reqs" ]; then
    tree="$student/build/grading/spliced-lab${reqs//,/+}"
    # There its tests must still fail on its own stubs, and its reference must score full marks.
    out=$(cd "$tree" && "$GRADER" grade "$lab" 2>&1)
    fails=$(grep -c "^== Test .* FAIL" <<<"$out"); total=$(grep -c "^== Test " <<<"$out")
    check "student edition + required labs ($reqs): lab $lab's $total tests all fail on its own stubs" \
      test "$fails" -eq "$total" -a "$total" -gt 0
  fi
  # The visible tests run in a student's own tree, where later labs are still stubs: there the reference regions (and
  # the labs it requires) must pass every one. Hidden tests run only in the course's grading, around the reference
  # of every other lab (a hidden LLaMA test of lab 10 runs lab 21's RoPE): the instructor-edition grade checks them.
  out=$(cd "$tree" && "$GRADER" grade "$lab" --submission "$work/reference-lab$lab.tar" 2>&1)
  failing=$(grep -E '^== Test .* == FAIL' <<<"$out" | grep -v '\[hidden\]' | awk '{print $3}' | paste -sd' ')
  tests_run=$(grep -c '^== Test ' <<<"$out")
  check "splice: lab $lab reference regions in the student edition${reqs:+ (with labs $reqs done)} pass every visible test${failing:+ (failing: $failing)}" \
    bash -c 'test -z "$1" -a "$2" -gt 0 || { printf "%s\n" "$3" | grep -A6 -E "^== Test .* == FAIL" | head -40; exit 1; }' _ \
    "$failing" "$tests_run" "$out"
  # The reference answers: every one readable, and those about one's own run match it (the rest need the key,
  # which only the course's grade has: NOT CHECKED).
  if grep -q '^== Question ' <<<"$out"; then
    failing=$(grep -E '^== Question .* == (WRONG|UNREADABLE|UNANSWERED|UNREAD)' <<<"$out" | awk '{print $3}' | paste -sd' ')
    check "splice: lab $lab reference answers.md: every answer readable, each about the run right${failing:+ (failing: $failing)}" \
      test -z "$failing"
  fi
}
# The labs that take longest first, so the last job does not run alone.
slow_first=$(for lab in $labs; do
  t=$(grep -o '"time_limit_s": *[0-9.]*' labs/lab"$lab"-*/lab.json | awk -F: '{s += $2} END {print int(s)}')
  echo "$t $lab"; done | sort -k1,1nr -k2 | awk '{print $2}')
run_jobs one_lab $slow_first
show_jobs one_lab $labs
