#!/usr/bin/env bash
# 09-replicas-drift: two ranks; rank 1 finds an inf in its own gradient at step 5 and skips the step, rank 0 never
# hears of it and applies the averaged (inf) gradient. Fixed: found_inf is reduced (max) before anyone decides.
cd "$(dirname "$0")/../../../.." && labs/lab24-common-problems/zoo/build_programs.sh || exit 2
echo "\$ mixpar run -n 2 -- zoo_bugs desync $ZOO_RUN_DIR $ZOO_FIXED"
build/mixpar run -n 2 -- build/labs/lab24_zoo_bugs desync "$ZOO_RUN_DIR" $ZOO_FIXED > "$ZOO_RUN_DIR/run.log" 2>&1
rc=$?
grep -E "^desync:|not done" "$ZOO_RUN_DIR/run.log" | head -4
[ "$rc" -eq 0 ] || { echo "(exit $rc)"; grep -q "not done" "$ZOO_RUN_DIR/run.log" && exit 86; exit "$rc"; }
echo "\$ mixpar doctor $ZOO_RUN_DIR"
build/mixpar doctor "$ZOO_RUN_DIR"
