#!/usr/bin/env bash
# catchup.sh: falling behind. The instructor releases labs' reference regions (mixpar-grade release), and in a
# student edition `catchup NN` fills the still-stub regions of the labs NN requires from them: regions the student
# wrote stay, nothing changes when a release is missing or wrong, and the student edition cannot release.
source "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
student="$work/student"
"$GRADER" handout "$student" >/dev/null || { echo "not ok - catchup: make the student edition"; exit 1; }
in_student() { (cd "$student" && "$GRADER" "$@"); }

# The student wrote one of lab 13's regions (its first), and nothing else.
ddp=core/dist/ddp.c
python3 - "$student/$ddp" <<'PY'
import re, sys
p = sys.argv[1]; s = open(p).read()
s = re.sub(r'(/\* LAB 13 BEGIN[^\n]*\n)(.*?)(\s*/\* LAB 13 END \*/)', r'\1        /* written by the student */ (void)0;\3', s, count=1, flags=re.S)
open(p, 'w').write(s)
PY
cp -a "$student/core" "$work/core-before"

check_output "catchup: without a release, lab 20's catchup stops and names what is missing" 2 \
  'catchup/lab01.tar, catchup/lab02.tar, catchup/lab13.tar, catchup/lab16.tar, catchup/lab19.tar is missing' in_student catchup 20
check "catchup: ... and changes nothing" diff -r "$work/core-before" "$student/core"
check_output "catchup: a lab that requires none has nothing to catch up on" 0 'nothing to catch up on' in_student catchup 03
check_output "catchup: the student edition cannot release (its regions are not the reference)" 2 \
  'this is the student edition' in_student release 02 -o "$work/x.tar"

mkdir -p "$student/catchup"
for lab in 01 02 13 16 19; do "$GRADER" release "$lab" -o "$student/catchup/lab$lab.tar" >/dev/null; done
cp "$student/catchup/lab01.tar" "$work/lab01.tar"
cp "$student/catchup/lab02.tar" "$student/catchup/lab01.tar" # a release of the wrong lab
check_output "catchup: a release of another lab under lab01.tar is refused" 2 "catchup/lab01.tar is not lab 01's release" \
  in_student catchup 20
check "catchup: ... and changes nothing" diff -r "$work/core-before" "$student/core"
cp "$work/lab01.tar" "$student/catchup/lab01.tar"

check_output "catchup: lab 20's required labs 01, 02, 13, 16, 19 are filled from the releases" 0 \
  'regions filled; your own regions are untouched' in_student catchup 20
check "catchup: no stub of labs 01, 02, 13, 16, 19 is left" bash -c "! grep -rqE 'LAB_TODO\((1|2|13|16|19)\);' '$student/core'"
check "catchup: lab 20's own stubs are still stubs" grep -rq 'LAB_TODO(20);' "$student/core"
check "catchup: the region the student wrote stayed" grep -q 'written by the student' "$student/$ddp"
check "catchup: a file of lab 02 regions only is now the reference's" cmp core/ops/gelu.c "$student/core/ops/gelu.c"
check "catchup: the first versions are kept in .catchup-backup/" cmp "$work/core-before/dist/ddp.c" "$student/.catchup-backup/$ddp"
check_output "catchup: run again, everything is written: nothing changes" 0 'lab 19: your regions are all written' \
  in_student catchup 20
check "catchup: the backups are still the first versions" cmp "$work/core-before/dist/ddp.c" "$student/.catchup-backup/$ddp"
