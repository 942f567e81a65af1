#!/usr/bin/env bash
# selftest.sh: the grader's safety net, tested: loops, crashes, exit(0), fake output, memory hogs and stray
# children each fail only their own test; bad submission archives are rejected and write nothing outside.
source "$(dirname "$0")/../lib.sh"
fixture="$ROOT/tests/grader/fixture"
export MPTEST_DIR="$ROOT/tests/harness"
work=$(mktemp -d)
trap 'rm -rf "$work" "$fixture/build"' EXIT

cd "$fixture" || exit 1
out=$("$GRADER" grade 99 --json "$work/results.json" 2>&1); rc=$?
verdict() { grep -E "^== Test $1 == " <<<"$out" | awk '{print $5}'; }
expect() { # expect TEST OK|FAIL [PATTERN in the test's output]
  local got; got=$(verdict "$1")
  if [ "$got" = "$2" ]; then echo "ok - grader: $1 is $2"; else
    echo "not ok - grader: $1 should be $2, was '${got:-missing}'"; printf '%s\n' "$out" | sed 's/^/    /' | tail -n 40; fi
}
expect correct_code_passes OK
expect infinite_loop_times_out FAIL
expect crash_fails_only_its_test FAIL
expect exit_zero_does_not_pass FAIL
expect fake_output_does_not_pass FAIL
expect memory_hog_is_stopped FAIL
expect stray_child_is_reaped OK
expect failed_check_fails FAIL
check_output "grader: timeout message names the likely cause" 0 "TIMEOUT after 2 s \(likely an infinite loop\)" echo "$out"
check_output "grader: score line and non-zero exit unless full marks" 0 "^Score: 20/80$" bash -c "echo '$(grep '^Score' <<<"$out")'; [ $rc -ne 0 ]"
check_output "grader: results.json in the Gradescope format" 0 '"max_score"' cat "$work/results.json"
check "grader: results.json has score 20 and 8 tests" bash -c \
  "grep -q '\"score\":[[:space:]]*20,' '$work/results.json' && [ \$(grep -c '\"status\"' '$work/results.json') -eq 8 ]"
check_output "grader: MIXPAR_TIME_SCALE raises limits" 1 "TIMEOUT after 4 s" \
  env MIXPAR_TIME_SCALE=2 "$GRADER" grade 99 --filter infinite_loop
check_output "grader: a name filter runs only matching tests" 1 "^Score: 0/10$" "$GRADER" grade 99 --filter fake_output

# Submissions: a good one is graded; bad archives are rejected with a message and nothing escapes.
"$GRADER" submit 99 -o "$work/good.tar" >/dev/null
check_output "submission: a good archive is graded from a clean copy" 0 "lab 99 regions spliced" \
  "$GRADER" grade 99 --submission "$work/good.tar" --filter correct
check_output "splice: builds the grading copy and runs no test" 0 "^build/grading/lab99: lab 99 regions spliced and built$" \
  bash -c "out=\$('$GRADER' splice 99 --submission '$work/good.tar') && echo \"\$out\" && ! grep -q '== Test' <<<\"\$out\""
check_output "splice: a missing submission is a clear error" 2 "cannot open the submission" \
  "$GRADER" splice 99 --submission "$work/none.tar"
mkdir -p "$work/src/core/demo" && cp core/demo/demo.c "$work/src/core/demo/"
( cd "$work/src" && tar -cf "$work/dotdot.tar" --transform 's,^,../,' core/demo/demo.c 2>/dev/null
  tar -cPf "$work/abs.tar" "$work/src/core/demo/demo.c"
  ln -s /etc/passwd core/demo/link.c && tar -cf "$work/link.tar" core/demo/link.c
  sed '/LAB 99/d' core/demo/demo.c > core/demo/demo2.c && mv core/demo/demo2.c core/demo/demo.c
  tar -cf "$work/noregion.tar" core/demo/demo.c
  gzip -c "$work/good.tar" > "$work/good.tar.gz"
  head -c 700 "$work/good.tar" > "$work/truncated.tar" )
check_output "submission: '..' in a path is rejected" 2 "'\.\.' component" "$GRADER" grade 99 --submission "$work/dotdot.tar"
check_output "submission: an absolute path is rejected" 2 "absolute path" "$GRADER" grade 99 --submission "$work/abs.tar"
check_output "submission: a symbolic link is rejected" 2 "symbolic link" "$GRADER" grade 99 --submission "$work/link.tar"
check_output "submission: missing regions are rejected" 2 "0 region\(s\) of lab 99" "$GRADER" grade 99 --submission "$work/noregion.tar"
check_output "submission: a gzip file is rejected with advice" 2 "gzip-compressed" "$GRADER" grade 99 --submission "$work/good.tar.gz"
check_output "submission: a truncated archive is rejected" 2 "truncated" "$GRADER" grade 99 --submission "$work/truncated.tar"
check_output "submission: a missing file is a clear error" 2 "cannot open the submission" "$GRADER" grade 99 --submission "$work/none.tar"
check "submission: nothing was written outside the grading folder" bash -c "[ ! -e '$work/core' ] && [ ! -e '$fixture/../core' ]"

# Region markers: malformed, unbalanced, nested and unknown-lab markers are errors naming file:line.
bad="$work/bad" && mkdir -p "$bad/core/x" "$bad/labs/lab99-x"
marker_case() { # NAME PATTERN FILE-CONTENTS
  printf '%b' "$3" > "$bad/core/x/x.c"
  check_output "regions: $1" 2 "$2" bash -c "cd '$bad' && '$GRADER' regions"
}
marker_case "unclosed region" "x.c:1: the region of lab 99 opened here never ends" '/* LAB 99 BEGIN a */\nint x;\n'
marker_case "END without BEGIN" "x.c:2: LAB 99 END without a BEGIN" 'int x;\n/* LAB 99 END */\n'
marker_case "nested regions" "x.c:2: LAB 99 BEGIN inside the open region" '/* LAB 99 BEGIN a */\n/* LAB 99 BEGIN b */\n/* LAB 99 END */\n/* LAB 99 END */\n'
marker_case "mismatched lab numbers" "x.c:2: LAB 98 END closes the region of lab 99" '/* LAB 99 BEGIN a */\n/* LAB 98 END */\n'
marker_case "malformed marker" "x.c:1: malformed lab marker" 'x = 1; /* LAB 99 BEGIN a */\n'
marker_case "unknown lab" "x.c:1: region of lab 42, but there is no labs/lab42" '/* LAB 42 BEGIN a */\n/* LAB 42 END */\n'

# Lab rules: a region may not use what lab.json forbids (outside comments and strings).
rules="$work/rules" && mkdir -p "$rules/core/demo"
sed 's|    return a + b;|    /* calling system() would be cheating */ const char *s = "popen"; (void)s;\n    return a + b;|' \
  core/demo/demo.c > "$rules/core/demo/demo.c"
( cd "$rules" && tar -cf "$work/comment.tar" core/demo/demo.c )
check_output "rules: a forbidden name in a comment or string is fine" 0 "^Score: 10/10$" \
  "$GRADER" grade 99 --submission "$work/comment.tar" --filter correct
sed 's|    return a + b;|    if (system("true") != 0) return 0;\n    return a + b;|' core/demo/demo.c > "$rules/core/demo/demo.c"
( cd "$rules" && tar -cf "$work/system.tar" core/demo/demo.c )
check_output "rules: a forbidden call scores 0 and says why" 1 "uses system, which lab 99 does not allow: the self-test forbids" \
  "$GRADER" grade 99 --submission "$work/system.tar" --filter correct
