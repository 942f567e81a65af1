#!/usr/bin/env bash
# run.sh: planted bugs against each lab's tests. tests/mutants/labNN/*.mutant are plausible student mistakes in
# lab NN's reference regions (tests/mutants/apply.py says the format). For each, the lab's test binary (visible and
# hidden tests, and its worker) is relinked with the mutated file and every test run alone; a mutant is caught by
# the tests that fail. Each lab must have at least 6 mutants, its visible tests must catch at least 80% of them and
# visible plus hidden all of them; a run without any mutant must pass every test (the harness is sound).
# Verdicts come from the tests' own checks only (the grader's comparison with the reference would catch more).
#   tests/mutants/run.sh [--quick] [--changed] [NN ...]   (default: every lab with a tests/mutants/labNN folder)
# --quick stops each mutant's run at its first failing test (visible tests first): the same verdicts, faster, but
# the lines name only that test.
source "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
make -s all lab-tests >/dev/null 2>&1 || { echo "not ok - mutants: build the core and the lab tests (make all lab-tests)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=$(make -s print-mutant-flags)
read -r cflags <<<"$(sed -n 1p <<<"$flags")"
read -r ldlibs <<<"$(sed -n 2p <<<"$flags")"
quick= changed=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=first ;;
    --changed) changed=1 ;;
    *) break ;;
  esac
  shift
done
labs=("$@")
[ ${#labs[@]} -gt 0 ] || labs=($(ls -d tests/mutants/lab[0-9][0-9] 2>/dev/null | sed 's|.*/lab||'))

# The record of the last passing run of each lab's mutants (tests/mutants/verified.txt): "NN digest caught_visible
# total", where the digest covers everything that decides the verdicts of that lab's mutants: its lab.json and
# tests, its hidden tests, its mutants, the files holding its regions (the whole files) and the test harness.
# --changed runs only the labs whose digest differs from the record (make test); the rest are reported from it.
record=tests/mutants/verified.txt
digests=$(python3 tests/mutants/digest.py "${labs[@]}") # "NN digest" lines, one per lab (tests/mutants/digest.py)
lab_digest() { awk -v lab="$1" '$1 == lab {print $2}' <<<"$digests"; }
recorded() { [ -e "$record" ] && awk -v lab="$1" '$1 == lab' "$record"; }
remember() { # remember LAB DIGEST CAUGHT_VISIBLE TOTAL
  local tmp="$record.tmp.$$"
  { [ -e "$record" ] && grep -v "^$1 " "$record" || echo "# lab digest caught_by_visible_tests mutants (tests/mutants/run.sh writes it)"
    echo "$1 $2 $3 $4"; } | LC_ALL=C sort > "$tmp" && mv "$tmp" "$record"
}

# A scratch tree: every entry of this one linked in, but its own build/labs, so that a test that starts
# ./build/labs/labNN_worker starts the mutated one.
tree="$work/tree"
mkdir -p "$tree/build/labs"
for e in * .[!.]*; do [ "$e" = build ] || ln -s "$ROOT/$e" "$tree/$e"; done
for e in build/*; do [ "$e" = build/labs ] || ln -s "$ROOT/$e" "$tree/$e"; done

# build LAB OUT [MUTATED_FILE_DIR]: the lab's test binary (and worker) into $tree/build/labs, with the files of
# MUTATED_FILE_DIR (paths relative to the root) compiled in place of the library's.
build() {
  local lab=$1 dir=$2 objs=() f tests_o="$work/lab$lab-tests.o"
  if [ -n "$dir" ]; then
    while IFS= read -r f; do
      # A file the tests #include (lab 09's tests compile train/step.c into themselves) is not linked as an object of
      # its own (its symbols would be defined twice): the tests are recompiled against the mutated copy instead.
      if grep -qsF "#include \"${f#core/}\"" labs/lab"$lab"-*/tests/*.c grader/hidden/lab"$lab"/*.c; then
        tests_o="$work/lab$lab-tests-mutant.o"
        cc -I"$dir/core" $cflags -Itests/harness -r -nostdlib -o "$tests_o" labs/lab"$lab"-*/tests/*.c \
          grader/hidden/lab"$lab"/*.c || return 1
        continue
      fi
      local o="$dir/${f//\//_}.o"
      cc $cflags -Icore -c "$dir/$f" -o "$o" || return 1
      objs+=("$o")
    done < <(cd "$dir" && find core -name '*.c')
  fi
  cc $cflags -Itests/harness -o "$tree/build/labs/lab${lab}_tests" "$tests_o" "${objs[@]}" \
    build/obj/tests/harness/mptest.o build/libmixpar.a $ldlibs || return 1
  if compgen -G "labs/lab$lab-*/tests/worker/*.c" >/dev/null; then
    cc $cflags -o "$tree/build/labs/lab${lab}_worker" labs/lab$lab-*/tests/worker/*.c "${objs[@]}" build/libmixpar.a $ldlibs || return 1
  fi
}
# run_tests LAB [first]: "PASS name" / "FAIL name" for every test, each alone, with the lab's time limit (scaled).
# With "first" (--quick): the visible tests, then the hidden ones, stopping at the first failure, which is all
# the counts below need (caught by a visible test, or else by a hidden one).
run_tests() {
  local lab=$1 first=$2 limit t
  limit=$(grep -o '"time_limit_s": *[0-9.]*' labs/lab"$lab"-*/lab.json | grep -o '[0-9.]*$')
  for t in $("$tree/build/labs/lab${lab}_tests" --list | grep -vxF -f <(hidden_names "$lab"; echo " ")) \
           $(hidden_names "$lab"); do
    if (cd "$tree" && timeout -k 2 "$(scaled "${limit:-10}")" "build/labs/lab${lab}_tests" --run "$t" >/dev/null 2>&1)
    then echo "PASS $t"; else echo "FAIL $t"; [ -n "$first" ] && return; fi
  done
}
hidden_names() { grep -ho 'MPT_TEST(\w*' grader/hidden/lab"$1"/*.c 2>/dev/null | sed 's/MPT_TEST(//'; }

for lab in "${labs[@]}"; do
  digest=$(lab_digest "$lab")
  if [ -n "$changed" ] && read -r _ was v t < <(recorded "$lab") && [ "$was" = "$digest" ]; then
    echo "ok - lab $lab: its $t mutants were last run on this very content: the visible tests caught $v, visible and hidden all ($record)"
    continue
  fi
  mutants=(tests/mutants/lab"$lab"/*.mutant)
  [ -e "${mutants[0]}" ] || { echo "not ok - lab $lab: no mutants in tests/mutants/lab$lab"; continue; }
  # The test sources, compiled once for this lab.
  cc $cflags -Itests/harness -r -nostdlib -o "$work/lab$lab-tests.o" labs/lab"$lab"-*/tests/*.c grader/hidden/lab"$lab"/*.c \
    2>"$work/err" || { echo "not ok - lab $lab: compile its tests"; sed 's/^/    /' "$work/err" | head; continue; }
  hidden=$(hidden_names "$lab")
  failing="(the reference did not link)"
  if build "$lab" "" 2>"$work/err"; then
    failing=$(run_tests "$lab" | awk '$1 == "FAIL" {print $2}' | paste -sd' ')
    check "lab $lab: every test passes on the reference in the mutant harness${failing:+ (failing: $failing)}" test -z "$failing"
  else
    echo "not ok - lab $lab: link the reference in the mutant harness"; sed 's/^/    /' "$work/err" | head
  fi
  total=0 visible_caught=0 all_caught=0 broken=0 # broken: mutants that did not apply or did not build
  for m in "${mutants[@]}"; do
    name=$(basename "$m" .mutant)
    what=$(sed -n '1s/^# *//p' "$m")
    rm -rf "$work/mutant"; mkdir -p "$work/mutant"
    if ! python3 tests/mutants/apply.py "$lab" "$m" "$work/mutant" >/dev/null 2>"$work/err"; then
      echo "not ok - lab $lab mutant $name: it applies to the reference regions"; sed 's/^/    /' "$work/err"
      broken=$((broken + 1)); continue
    fi
    total=$((total + 1))
    if ! build "$lab" "$work/mutant" 2>"$work/err"; then
      # A bug that does not compile is caught by the compiler, not by the tests: it does not count.
      echo "not ok - lab $lab mutant $name: it compiles (a mutant must be a bug that builds)"; sed 's/^/    /' "$work/err" | head -5
      total=$((total - 1)) broken=$((broken + 1)); continue
    fi
    results=$(run_tests "$lab" "$quick")
    vis=() hid=()
    while read -r verdict t; do
      [ "$verdict" = FAIL ] || continue
      if grep -qxF "$t" <<<"$hidden"; then hid+=("$t"); else vis+=("$t"); fi
    done <<<"$results"
    if [ ${#vis[@]} -gt 0 ]; then visible_caught=$((visible_caught + 1)); fi
    if [ ${#vis[@]} -gt 0 ] || [ ${#hid[@]} -gt 0 ]; then all_caught=$((all_caught + 1)); fi
    echo "# lab $lab mutant $name ($what): visible ${#vis[@]} failing${vis:+ (${vis[*]:0:3})}, hidden ${#hid[@]} failing"
  done
  check "lab $lab: at least 6 mutants apply and build ($total)" test "$total" -ge 6
  check "lab $lab: the visible tests catch at least 80% of the mutants ($visible_caught of $total)" \
    test $((visible_caught * 5)) -ge $((total * 4))
  check "lab $lab: visible and hidden tests catch every mutant ($all_caught of $total)" test "$all_caught" -eq "$total"
  # Only a clean run is recorded: a mutant that no longer applies or builds is reported again on the next run.
  if [ "$total" -ge 6 ] && [ $((visible_caught * 5)) -ge $((total * 4)) ] && [ "$all_caught" -eq "$total" ] &&
     [ -z "$failing" ] && [ "$broken" -eq 0 ]; then remember "$lab" "$digest" "$visible_caught" "$total"; fi
done
