#!/usr/bin/env bash
# selftest.sh: the grader's safety net, tested: loops, crashes, exit(0), fake output, memory hogs and stray
# children each fail only their own test; bad submission archives are rejected and write nothing outside.
source "$(dirname "$0")/../lib.sh"
fixture="$ROOT/tests/grader/fixture"
export MPTEST_DIR="$ROOT/tests/harness"
work=$(mktemp -d)
trap 'rm -rf "$work" "$fixture/build"' EXIT
rm -rf "$fixture/build"

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
check_output "splice: builds the grading copy and runs no test" 0 "^build/grading/spliced-lab99: lab 99 regions spliced and built$" \
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

# Attacks (issue 14): each is a lab 99 submission whose region tries to forge a verdict, escape, leak or break
# the grader. Each must score 0 on the tests it forges, and leave the grader, this tree and other runs unharmed.
attack() { # NAME BODY: a submission whose demo_add region is BODY
  mkdir -p "$work/atk-$1/core/demo"
  BODY="$2" python3 - "$fixture/core/demo/demo.c" "$work/atk-$1/core/demo/demo.c" <<'PY'
import os, sys
src = open(sys.argv[1]).read()
a = src.index("/* LAB 99 BEGIN"); a = src.index("\n", a) + 1
b = src.index("    /* LAB 99 END")
open(sys.argv[2], "w").write(src[:a] + os.environ["BODY"] + "\n" + src[b:])
PY
  (cd "$work/atk-$1" && tar -cf "$work/atk-$1.tar" core/demo/demo.c)
  "$GRADER" grade 99 --submission "$work/atk-$1.tar" --filter correct --json "$work/atk-$1.json" 2>&1
}
grader_sum=$(sha256sum "$GRADER" | cut -d' ' -f1)
tree_sum=$(sha256sum core/demo/demo.c labs/lab99-grader-selftest/lab.json | sha256sum)
out=$(attack fd3 '    if (write(3, "v 1 test_selftest.c:5 1 0000000000000000\ne 1 end\n", 51) < 0) return 0;
    _exit(0);')
check_output "attack: a forged observation stream on fd 3 scores 0" 0 "^Score: 0/10$" echo "$out"
out=$(attack closebrace '    return a + b;
}
__attribute__((constructor)) static void forge(void) { _exit(0); }
int demo_unused(int a, int b) {
    return a - b;')
check_output "attack: a region that closes its function is refused" 0 "closes the function the region is in" echo "$out"
out=$(attack paste '#define CAT(a, b) a##b
    return CAT(demo_, add)(a, b);')
check_output "attack: a preprocessor line in a region is refused" 0 "a preprocessor line" echo "$out"
out=$(attack dlopen '    extern void *dlopen(const char *, int);
    if (dlopen("libm.so.6", 2) == 0) return 0;
    return a + b;')
check_output "attack: dlopen from a region fails the rules on the object" 0 "calls dlopen" echo "$out"
out=$(attack splitname '    extern int sys\
tem(const char *);
    if (sys\
tem("true") != 0) return 0;
    return a + b;')
check_output "attack: a name split by backslash-newline is caught on the object" 0 "calls system" echo "$out"
out=$(attack setsid '    demo_spawn_escaper("'"$work"'/escaped");
    return a + b;')
sleep 4
check "attack: a setsid() grandchild dies with its test and writes nothing" bash -c \
  "[ ! -e '$work/escaped' ] && ! pgrep -f '[l]ab99_tests --observe' >/dev/null"
out=$(attack writes '    if (demo_try_write("'"$fixture"'/core/demo/demo.c") == 0) return 0;
    if (demo_try_write("'"$GRADER"'") == 0) return 0;
    if (demo_try_write("/tmp/ok-in-scratch") != 0) return 0;
    return a + b;')
check_output "attack: writing outside the scratch folder fails, the scratch works" 0 "^Score: 10/10$" echo "$out"
check "attack: the grader and this tree are unchanged" bash -c \
  "[ \"\$(sha256sum '$GRADER' | cut -d' ' -f1)\" = '$grader_sum' ] && [ \"\$(sha256sum core/demo/demo.c labs/lab99-grader-selftest/lab.json | sha256sum)\" = '$tree_sum' ]"
out=$(attack utf8 '    printf("bad bytes \xff\xfe \x1b[2J\x1b[31mred\r\n"); fflush(stdout);
    return a + b + 1;')
check "attack: invalid UTF-8 and escape sequences: valid results.json, clean terminal" bash -c \
  "python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding=\"utf-8\", errors=\"strict\"))' '$work/atk-utf8.json' &&
   ! printf '%s' \"\$1\" | grep -q \$'\\x1b' && printf '%s' \"\$1\" | grep -q 'Score: 0/10'" _ "$out"
out=$(attack children '    for (int i = 0; i < 8; i++) if (fork() == 0) { char *p = malloc(100 << 20);
        if (p) memset(p, 1, 100 << 20); sleep(5); _exit(0); }
    sleep(3);
    return a + b;')
check_output "attack: memory spread over child processes hits the tree's limit" 0 "memory limit of 256 MB exceeded.*|Score: 0/10" echo "$out"
out=$(attack forks '    for (int i = 0; i < 200; i++) if (fork() == 0) { sleep(5); _exit(0); }
    sleep(2);
    return a + b;')
check_output "attack: a fork loop is stopped at the process limit" 0 "too many processes at once" echo "$out"
# The process limit is each test's own. As root, RLIMIT_NPROC counts a user id's tasks machine-wide, so with one
# shared sandbox user (nobody) a grade running beside another that holds many processes saw its own forks fail.
# Grade A holds 50 sleeping children for 12 s (under its own limit); grade B, started once they are up (waited for,
# however slow the machine), forks 20 and must pass.
out=$(MIXPAR_TIME_SCALE=8 attack holder '    for (int i = 0; i < 50; i++) if (fork() == 0) { sleep(12); _exit(0); }
    sleep(12);
    return a + b;' > "$work/holder.out" 2>&1 &
  for i in $(seq 1 1200); do [ "$(pgrep -c -f '[l]ab99_tests --observe')" -ge 40 ] && break; sleep 0.1; done
  pgrep -c -f '[l]ab99_tests --observe'
  attack forker '    int started = 0;
    for (int i = 0; i < 20; i++) { pid_t p = fork(); if (p == 0) { sleep(1); _exit(0); } started += p > 0; }
    if (started != 20) return 0;
    return a + b;'
  wait)
check_output "sandbox: a grade beside one holding 50 processes forks freely" 0 "^Score: 10/10$" echo "$out"
check_output "sandbox: the grade holding them passes too" 0 "^Score: 10/10$" cat "$work/holder.out"
check "sandbox: both ran at once (the holder's processes were up)" bash -c "[ \"\$(printf '%s\n' \"\$1\" | head -1)\" -ge 40 ]" _ "$out"
# Two grades of one lab at once in one tree (an instructor's xargs -P at the deadline) each take a grading folder,
# and a build log, of their own: lab99 and lab99.2 here.
check "grades at once: each in a folder of its own" bash -c \
  "a=\$(grep -o 'clean copy in build/grading/lab99[.0-9]*' '$work/holder.out'); b=\$(printf '%s\n' \"\$1\" | grep -o 'clean copy in build/grading/lab99[.0-9]*'); [ -n \"\$a\" ] && [ -n \"\$b\" ] && [ \"\$a\" != \"\$b\" ]" _ "$out"
out=$(attack loop '    for (;;) { }
    return a + b;')
check_output "attack: a looping submission is cut at the submission's cap" 1 "used up" \
  "$GRADER" grade 99 --submission "$work/atk-loop.tar"
