#!/usr/bin/env bash
# openmp_clauses.sh: every combined `parallel for simd` whose if clause decides only whether to start threads
# says so (`if (parallel: ...)`). An if clause without the modifier applies to the simd part as well, so a
# span under the threshold runs one element at a time: AdamW over a span of 24576 values took 3.6x as long
# per value as over a long one (optim_bench). Then the check is shown to catch a planted clause.
source "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
planted=$(mktemp -d)
trap 'rm -rf "$planted"' EXIT
# unmodified_ifs FILE...: each "file:line: pragma" whose combined simd construct has an if without a modifier.
# A sum (reduction(+)) is left out: vectorising it would add in another order and change its bits (LAMB's
# sums of squares over a small span keep their one-at-a-time order on purpose).
unmodified_ifs() { grep -HnP '#pragma omp parallel for simd.* if \((?!parallel:)' "$@" | grep -v 'reduction(+' || true; }
# find, not git ls-files: the check must also read a tree without .git (a student edition, an unpacked copy)
mapfile -t sources < <(find core bench viz labs -name '*.[ch]' | sort)
found=$(unmodified_ifs "${sources[@]}")
if [ "${#sources[@]}" -lt 100 ]; then
  echo "not ok - openmp: found only ${#sources[@]} C sources under core, bench, viz and labs"
elif [ -z "$found" ]; then
  echo "ok - openmp: the ${#sources[@]} C sources give every parallel-for-simd if clause the parallel: modifier"
else
  echo "not ok - openmp: parallel-for-simd if clauses without parallel: (small spans would run unvectorised)"
  sed 's/^/    /' <<<"$found"
fi
printf '%s\n' 'void f(float *x, long n) {' '#pragma omp parallel for simd schedule(static) if (n > 99)' \
  '    for (long i = 0; i < n; i++) x[i] *= 2;' '}' > "$planted/planted.c"
check "openmp: the check names a planted if clause without the modifier" \
  bash -c "$(declare -f unmodified_ifs); unmodified_ifs '$planted/planted.c' | grep -q 'planted.c:2:'"
