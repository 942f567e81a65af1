#!/usr/bin/env bash
# 07-memory-leak: a training loop that keeps every step's logits; the fix keeps only the number it reports.
cd "$(dirname "$0")/../../../.." && labs/lab24-common-problems/zoo/build_programs.sh || exit 2
echo "\$ zoo_bugs leak $ZOO_RUN_DIR $ZOO_FIXED"
build/labs/lab24_zoo_bugs leak "$ZOO_RUN_DIR" $ZOO_FIXED || exit $?
echo "\$ mixpar doctor $ZOO_RUN_DIR"
build/mixpar doctor "$ZOO_RUN_DIR"
