#!/usr/bin/env bash
# float.sh: command-line checks of `mixpar float` and of the mixpar tool itself: tables, notes, exit 2 on bad input.
source "$(dirname "$0")/../lib.sh"
fl() { "$MIXPAR" float "$@"; }

check_output "float 0.1 in fp16 has the right bits" 0 "fp16 +0\|01011\|1001100110 +0x2e66" fl 0.1
check_output "float 0.1 in bf16 has the right bits" 0 "bf16 +0\|01111011\|1001101 +0x3dcd" fl 0.1
check_output "float 65504 is fp16's max, exact" 0 "fp16 +0\|11110\|1111111111 +0x7bff +65504 " fl 65504
check_output "float 65520 overflows fp16 to inf" 0 "fp16 .*inf .*overflow" fl --format fp16 65520
check_output "float 65519 rounds (it is not clamped)" 0 "fp16 .*0x7bff .*rounded$" fl --format fp16 65519
check_output "float 1e-8 underflows fp16 and not bf16" 0 "fp16 .*underflow: rounds to 0" fl 1e-8
check_output "float 500 in e4m3 is NaN (no inf)" 0 "e4m3 .*NaN \(no inf\)" fl --format e4m3 500
check_output "float accepts hex floats, -0, inf and nan" 0 "nan" fl 0x1p-24 -0 inf nan
check_output "float --formats lists e4m3's max 448 and min subnormal 2^-9" 0 "e4m3 .*448.*0\.001953125" fl --formats
check_output "float --table e4m3 has 256 rows" 0 "^256$" bash -c "'$MIXPAR' float --table e4m3 | grep -cE '^ *(0x)?[0-9a-f]+ '"
check_output "float --spacing fp16 starts at the smallest subnormal" 0 "^5\.9604644[78][0-9]*e-08 1$" bash -c \
  "'$MIXPAR' float --spacing fp16 | grep -v '^#' | head -n 1"
check_output "float stochastic rounding is seeded" 0 "." bash -c \
  "[ \"\$('$MIXPAR' float --round stochastic --seed 3 0.1)\" = \"\$('$MIXPAR' float --round stochastic --seed 3 0.1)\" ] && echo same"
check "float --lab03 (fp/half.c) gives the generic encoder's fp16 and bf16 rows" bash -c \
  "diff <('$MIXPAR' float --format fp16 --format bf16 0.1 65520 6e-8 1e-40 nan | grep -E '^(fp16|bf16) ') \
        <('$MIXPAR' float --lab03 --format fp16 --format bf16 0.1 65520 6e-8 1e-40 nan | grep -E '^(fp16|bf16) ')"
check "float --lab03 --spacing fp16 decodes as the generic decoder" bash -c \
  "diff <('$MIXPAR' float --spacing fp16 | grep -v '^#') <('$MIXPAR' float --lab03 --spacing fp16 | grep -v '^#')"
check_output "float --lab03 refuses a rounding mode lab 03's codecs do not have" 2 "with --round zero" fl --lab03 --round zero 1

check_output "float rejects a non-number" 2 "expected" fl abc
check_output "float rejects an unknown format" 2 "format" fl --format fp12 1
check_output "float rejects a missing argument" 2 "." fl --format
check_output "float rejects a table of a 32-bit format" 2 "." fl --table fp32
check_output "mixpar with no command prints usage, exit 2" 2 "usage: mixpar COMMAND" "$MIXPAR"
check_output "mixpar rejects an unknown command" 2 "unknown command 'nope'" "$MIXPAR" nope
check_output "mixpar --help lists the commands" 0 "^  plan " "$MIXPAR" --help
