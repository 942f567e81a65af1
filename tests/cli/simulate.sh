#!/usr/bin/env bash
# simulate.sh: command-line checks of `mixpar simulate`: the scaling table, --tsv and --plot, the calibration
# against a comm-bench output, and exit 2 on bad input.
source "$(dirname "$0")/../lib.sh"
sim() { "$MIXPAR" simulate "$@"; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

check_output "simulate states the compute formula with its numbers" 0 \
  "compute per step = 6 x params x tokens / \(GPUs x peak x MFU\) = 6 x 6.74e\+09 x 16384 / \(989 TFLOP/s x 0.40\) = 1674.5 ms" sim
check_output "simulate llama-70b: plain DP states (16 bytes/param) do not fit an 80 GB GPU" 0 \
  "^  dp +8 +1 .* 1103\.6! " sim --model llama-70b --strategy dp --gpus 8
check_output "simulate: 3d skips GPU counts that are not a multiple of tp x pp" 0 "not a multiple of tp x pp" \
  sim --strategy 3d --gpus 8
check_output "simulate --list names the presets and their sources" 0 "^eth-100g .*100 Gb/s Ethernet" sim --list
check "simulate: DP efficiency on 100 Gb/s Ethernet falls below InfiniBand's at 1,024 GPUs" bash -c \
  "ib=\$('$MIXPAR' simulate --model gpt2-1.5b --strategy dp --gpus 1024 --tsv /dev/stdout | awk -F'\t' '\$1==\"dp\"{print \$9}');
   eth=\$('$MIXPAR' simulate --model gpt2-1.5b --cluster eth-100g --strategy dp --gpus 1024 --tsv /dev/stdout | awk -F'\t' '\$1==\"dp\"{print \$9}');
   awk -v a=\"\$ib\" -v b=\"\$eth\" 'BEGIN { exit !(b < a && a <= 1) }'"
check "simulate --tsv: a header and one row per strategy and GPU count" bash -c \
  "'$MIXPAR' simulate --gpus 8,64 --strategy dp,zero3 --tsv '$tmp/s.tsv' >/dev/null && [ \$(grep -vc '^#' '$tmp/s.tsv') -eq 4 ] &&
   head -1 '$tmp/s.tsv' | grep -q '^#strategy'"
if command -v gnuplot >/dev/null; then
  check "simulate --plot writes a PNG" bash -c \
    "'$MIXPAR' simulate --gpus 8,64,512 --plot '$tmp/s.png' >/dev/null && [ -s '$tmp/s.png' ]"
fi
cat > "$tmp/bench.txt" <<'BENCH'
# mixpar comm-bench: 4 ranks (mpi backend), fp32, 20 timed calls per size (fewer past --budget 0.3 s), 3 warm-up
# hierarchical: 2 ranks per node, 2 nodes
#
# op              algo              size(B)        count   type    time(us)  algbw(GB/s)  busbw(GB/s)  #wrong
  allreduce       ring                 4096         1024   fp32       69.00        0.059        0.089       0
  allreduce       ring              1048576       262144   fp32     1110.00        0.945        1.417       0
  allreduce       hierarchical         4096         1024   fp32       50.00        0.082        0.123       0
#
# alpha-beta fit per algorithm: t = alpha + size / beta (weighted least squares over the sizes)
# op              algo            alpha(us)   beta(GB/s)  sizes
  allreduce       ring                60.00        1.000      2
BENCH
# ring: alpha = 60 us / (2 x 3) = 10 us per message, B = 1 GB/s x 2 x 3 / 4 = 1.5 GB/s; 4096 B: 60 + 4.096 = 64.10 us;
# hierarchical, 2 nodes of 2: 2 x (10 + 4096/(2 x 1.5e9)) + 2 x (10 + 2048/(2 x 1.5e9)) us = 22.73 + 21.37 = 44.10 us,
# 11.8% below the 50 us measured.
check_output "simulate --calibrate: the ring's fit gives the link, 64.10 us predicted at 4 KiB" 0 \
  "^  ring +4096 +69\.00 +64\.10 +-7\.1" sim --calibrate "$tmp/bench.txt"
check_output "simulate --calibrate: hierarchical predicted from the ring's link, 44.10 us at 4 KiB" 0 \
  "^  hierarchical +4096 +50\.00 +44\.10 +-11\.8" sim --calibrate "$tmp/bench.txt"
check_output "simulate --calibrate: the link in the header" 0 "alpha = 10\.00 us per message, B = 1\.500 GB/s" \
  sim --calibrate "$tmp/bench.txt"

check_output "simulate rejects an unknown cluster" 2 "unknown cluster 'dgx-b300'" sim --cluster dgx-b300
check_output "simulate rejects an unknown model" 2 "unknown model 'gpt5'.*llama-70b" sim --model gpt5
check_output "simulate rejects --mfu 1.5" 2 "--mfu takes a number from" sim --mfu 1.5
check_output "simulate rejects a bad --gpus list" 2 "--gpus takes up to" sim --gpus 8,x
check_output "simulate rejects an unknown strategy" 2 "--strategy takes dp, zero1" sim --strategy zero4
check_output "simulate rejects a bad bucket" 2 "--bucket takes a size" sim --bucket 12Q
check_output "simulate rejects an unknown option" 2 "unknown option '--gpu'" sim --gpu 8
check_output "simulate --calibrate rejects a file that is not comm-bench output" 2 "is not comm-bench output" \
  sim --calibrate /etc/hostname
check_output "simulate --calibrate rejects a missing file" 2 "cannot read" sim --calibrate "$tmp/none.txt"
