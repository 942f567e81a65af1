#!/usr/bin/env bash
# float_block.sh: command-line checks of `mixpar float --block` (lab 30's MX formats): scales, codes, errors, exit 2 on bad input.
source "$(dirname "$0")/../lib.sh"
fl() { "$MIXPAR" float "$@"; }

check_output "float --formats lists the MX formats" 0 "mxfp4-e2m1 +e2m1 +4 +2 +32 +E8M0" fl --formats
check_output "float --block: a block with max 1.0 in mxfp8-e4m3 has scale 2^-8" 0 "block 0: scale 0x77 = 2\^-8" \
    fl --block mxfp8-e4m3 1 0.3
check_output "float --block: 500 saturates at 448 in mxfp8-e4m3" 0 "-500 +0xfe +-448" fl --block mxfp8-e4m3 1 -500
check_output "float --block: an inf gives the NaN scale" 0 "scale 0xff = NaN" fl --block mxfp4 1 inf
check_output "float --block: 33 values are two blocks" 0 "33 values in 2 block" fl --block mxfp6-e2m3 $(seq 1 33)
check_output "float --block nvfp4 shows the tensor scale" 0 "tensor scale \(fp32\): 0.5$" fl --block nvfp4 1344 3
check_output "float --block prints the SNR" 0 "relative error .* SNR .* dB" fl --block mxint8 0.1 0.2 0.3
tmp=$(mktemp)
printf '1 2\n3\t4\n' > "$tmp"
check_output "float --block --file reads numbers" 0 "4 values in 1 block" fl --block mxfp8-e5m2 --file "$tmp"
printf '1 x 3\n' > "$tmp"
check_output "float --block --file with a word that is no number exits 2" 2 "." fl --block mxfp8-e5m2 --file "$tmp"
rm -f "$tmp"
check_output "float --block with an unknown format exits 2" 2 "." fl --block mxfp9 1
check_output "float --block without values exits 2" 2 "." fl --block mxfp4
check_output "float --file without --block exits 2" 2 "." fl --file /dev/null
check_output "float --block with a missing file exits 2" 2 "." fl --block mxfp4 --file /nonexistent/numbers
