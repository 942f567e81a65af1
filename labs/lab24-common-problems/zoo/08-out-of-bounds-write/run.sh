#!/usr/bin/env bash
# 08-out-of-bounds-write: an off-by-one loop writes one int past a buffer; AddressSanitizer stops it at the write
# (the CPU analogue of CUDA error 700, "an illegal memory access was encountered"; compute-sanitizer finds it there).
cd "$(dirname "$0")/../../../.." && labs/lab24-common-problems/zoo/build_programs.sh || exit 2
echo "\$ zoo_bugs oob $ZOO_FIXED     (built with -fsanitize=address)"
ASAN_OPTIONS=detect_leaks=0 build/labs/lab24_zoo_bugs_asan oob $ZOO_FIXED > "$ZOO_RUN_DIR/asan.log" 2>&1
rc=$?
grep -E "^oob:|ERROR: AddressSanitizer|WRITE of size|#[0-2] |located [0-9]+ bytes" "$ZOO_RUN_DIR/asan.log" | cut -c1-160
echo "(exit $rc)"
[ "$rc" -eq 0 ] && exit 0 || exit 1
