#!/usr/bin/env bash
# answers.sh: the graded answers files (labs/labNN-slug/answers.md, lab.json "questions", part Q of a grade).
# On lab 05 (numbers, a letter, text, and two questions about the student's own scaler run): the reference answers
# score full marks, a wrong number or a repeated answer loses exactly that question's points, a wrong answer about
# one's own run is compared with what the submitted code computes, text answers reach results.json, malformed files
# (binary garbage, a 200 KB line, NUL bytes, a 10 MB line, none at all) get a clear message and never a crash, and
# the handout blanks every answer line, so no expected value leaks into the student edition.
source "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lab=05
limit=$(scaled 200)

"$GRADER" submit "$lab" -o "$work/ref.tar" >/dev/null || { echo "not ok - submit $lab"; exit 0; }
mkdir "$work/ref" && tar -xf "$work/ref.tar" -C "$work/ref"
rel=$(cd "$work/ref" && ls labs/*/answers.md)
check "submit: the archive carries $rel with the regions" test -s "$work/ref/$rel"

# variant NAME: a copy of the reference submission's files in $work/NAME, whose answers file the caller edits;
# pack NAME: $work/NAME.tar from them (plain ustar, as a student's tar might make it).
variant() { cp -r "$work/ref" "$work/$1"; }
pack() { (cd "$work/$1" && tar --format=ustar --owner=0 --group=0 -cf "../$1.tar" -- *); }
# grade_q NAME: the questions part of a grade of $work/NAME.tar (its output; results.json in $work/NAME.json).
grade_q() { timeout -k 5 "$limit" "$GRADER" grade "$lab" --submission "$work/$1.tar" --filter question_ --json "$work/$1.json" 2>&1; }
# matches TEXT PATTERN: TEXT matches the extended regular expression PATTERN.
matches() { grep -Eq -- "$2" <<<"$1"; }
# set_answer NAME ID TEXT: the answer line of question ID in variant NAME becomes "ID: TEXT".
set_answer() { sed -i "s|^$2:.*|$2: $3|" "$work/$1/$rel"; }

out=$(grade_q ref)
check "reference answers: part Q full marks" matches "$out" "Part Q. questions: 10/10"
check "reference answers: a question about the student's own run is checked against that run" \
  matches "$out" "== Question Q9 == OK"
check "results.json lists every answer; text answers are kept for the teacher, with correct null" python3 -c "
import json, sys
r = json.load(open('$work/ref.json'))
a = {x['id']: x for x in r['answers']}
assert a['Q1']['kind'] == 'text' and len(a['Q1']['answer']) > 40 and a['Q1']['correct'] is None, a['Q1']
assert a['Q8']['answer'] == '2000' and a['Q8']['correct'] is True, a['Q8']
assert any(t['name'] == 'question_Q8' and t['max_score'] == 2 for t in r['tests'])
"

variant wrong; set_answer wrong Q8 2001; pack wrong
out=$(grade_q wrong); rc=$?
check "a wrong number loses exactly its question's points" matches "$out" "Part Q. questions: 8/10"
check "a grade short of full marks exits 1" test "$rc" -eq 1
check "a wrong number: only that question is marked wrong" test "$(grep -c '== Question .* == WRONG' <<<"$out")" -eq 1
check "results.json marks the wrong answer false" python3 -c "
import json; a = {x['id']: x for x in json.load(open('$work/wrong.json'))['answers']}
assert a['Q8']['correct'] is False and a['Q10']['correct'] is True"

variant twice; set_answer twice Q9 7; printf 'Q10: 0.05\nQ99: 3\n' >> "$work/twice/$rel"; pack twice
out=$(grade_q twice)
check "a wrong answer about one's own run names the value the submitted code computes" \
  matches "$out" "gives 6; you wrote 7"
check "a question answered twice scores 0, with both lines named" matches "$out" "answered twice \(lines [0-9]+ and [0-9]+\)"
check "an answer to a question the lab does not have is noted" matches "$out" "Q99 \(line [0-9]+\) is not a question"
check "a question answered twice and a wrong one: the others keep their points" matches "$out" "Part Q. questions: 6/10"

variant garbage; head -c 20000 /dev/urandom | tr -d '\000' > "$work/garbage/$rel"; pack garbage
check_output "binary garbage (no NUL bytes) as answers: every question 0, a clean grade" 1 "Part Q. questions: 0/10" grade_q garbage

variant long; { printf 'Q8: '; head -c 200000 /dev/zero | tr '\0' 7; echo; } > "$work/long/$rel"; pack long
check_output "an answers file over 64 KB is not read, with a message" 1 \
  "is 2000[0-9]+ bytes, more than the 65536 an answers file may have" grade_q long

variant nul; printf 'Q8: 2000\0\n' > "$work/nul/$rel"; pack nul
check_output "NUL bytes in the answers file: the archive is refused with a message" 2 "contains NUL bytes" grade_q nul

variant huge; { printf 'Q8: '; head -c 10000000 /dev/zero | tr '\0' 1; echo; } > "$work/huge/$rel"; pack huge
check_output "a 10 MB line: the archive is refused with a message" 2 "too large \(entry 'labs/.*answers.md'" grade_q huge

variant missing; rm -r "$work/missing/labs"; pack missing
out=$(grade_q missing)
check "no answers file in the submission: each question 0, and the grade says why" \
  matches "$out" "there is no labs/lab05-[a-z0-9-]*/answers.md"
check "no answers file: the submission is not rejected, only part Q scores 0" \
  matches "$out" "Part Q. questions: 0/10"

"$GRADER" handout "$work/stu" >/dev/null
check "handout: every answers file's answer lines are blank (no expected value leaks)" bash -c \
  "! grep -HnE '^[[:space:]]*Q[0-9]+[a-z]?:[[:space:]]*[^[:space:]]' '$work'/stu/labs/*/answers.md"
check "handout: it still has every question line of this tree's answers files" bash -c \
  "for f in labs/*/answers.md; do [ \"\$(grep -cE '^Q[0-9]+[a-z]?:' \$f)\" -eq \"\$(grep -cE '^Q[0-9]+[a-z]?:' '$work/stu/'\$f)\" ] || exit 1; done"
check "handout: no reference answer of any lab reaches its answers file (beyond the questions' own text)" python3 -c "
import glob, re, sys
bad = []
for f in glob.glob('labs/*/answers.md'):
    text = open(f).read()
    given = dict(re.findall(r'^(Q[0-9]+[a-z]?):[ \t]*(.*)$', text, re.M))
    questions = re.sub(r'(?m)^Q[0-9]+[a-z]?:.*$', '', text)  # the instructor's file without its answer lines
    student = open('$work/stu/' + f).read()
    for q, a in given.items():
        a = a.strip()
        if not a: continue
        pattern = r'(?<![0-9A-Za-z.])' + re.escape(a) + r'(?![0-9A-Za-z])'
        if len(re.findall(pattern, student)) > len(re.findall(pattern, questions)):
            bad.append(f + ' ' + q + ' ' + a[:40])
sys.exit('; '.join(bad)) if bad else None
"
variant blank; cp "$work/stu/$rel" "$work/blank/$rel"; pack blank
out=$(grade_q blank)
check "the student edition's blank answers score 0 on part Q" matches "$out" "Part Q. questions: 0/10"
check "blank answers: each says where to write it" matches "$out" "no answer: write it after 'Q8:' in labs/lab05-"
