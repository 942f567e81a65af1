#!/usr/bin/env bash
# plan.sh: command-line checks of `mixpar plan`: the tables, --json/--tsv, --explain, and exit 2 on bad input.
source "$(dirname "$0")/../lib.sh"
plan() { "$MIXPAR" plan "$@"; }

check_output "plan default is gpt2-124m with its exact count" 0 "Psi = 124,439,808" plan
check_output "plan ZeRO paper table, stage 1" 0 "^1 +optim \+ master .* 31\.406 " \
  plan --params 7.5B --world 64 --zero all --recipe fp16-mixed --optimizer adam
check_output "plan ZeRO paper table, stage 3" 0 "^3 +\+ params .* 1\.875 " \
  plan --params 7.5B --world 64 --zero all --recipe fp16-mixed --optimizer adam
check_output "plan llama-1b does not fit 24 GB" 0 "DOES NOT FIT" plan --preset llama-1b --device-memory 24GB
check_output "plan llama-1b ZeRO-3 over 4 fits 24 GB" 0 "FITS" \
  plan --preset llama-1b --zero 3 --world 4 --device-memory 24GB
check_output "plan presets table lists gpt3-175b" 0 "^gpt3-175b +174,604,259,328" plan --presets
check_output "plan --explain shows the Korthikanti formula" 0 "sbh\(34 \+ 5as/h\)" plan --explain
check_output "plan --json is one object with exact bytes" 0 '"total": 3276660736' plan --json
check_output "plan --tsv has a header and one row" 0 $'^gpt2-124m\tbf16-mixed\tadamw\t0\t1\t1\t1024' plan --tsv
if command -v python3 >/dev/null; then
  check "plan --json parses as JSON" bash -c "'$MIXPAR' plan --presets --json | python3 -m json.tool >/dev/null"
fi
check_output "plan --presets skips what a preset cannot take" 0 "skipped: seq 2048 > T = 1024 for gpt2-124m" \
  plan --presets --seq 2048
check_output "plan custom llama model by flags" 0 "Psi = 44,831,232" \
  plan --arch llama --layers 4 --hidden 512 --heads 8 --kv-heads 2

check_output "plan compute budget: llama-7b on 1T tokens, 2048 GPUs at MFU 0.5" 0 "1\.58 days" \
  plan --preset llama-7b --tokens 1T --gpus 2048 --mfu 0.5
check_output "plan compute budget: Chinchilla's 20 tokens per parameter without --tokens" 0 \
  "D = 2\.489e\+09 tokens \(Chinchilla" plan --gpus 1
check_output "plan rejects --mfu 1.5" 2 "a fraction 0 < MFU <= 1" plan --mfu 1.5
check_output "plan rejects --gpus 2.5" 2 "a whole number of GPUs" plan --gpus 2.5
check_output "plan rejects an unknown preset" 2 "expected: a preset: gpt2-124m" plan --preset gpt5
check_output "plan rejects --zero 5" 2 "ZeRO stage 0, 1, 2, 3 or 'all'" plan --zero 5
check_output "plan rejects --world 0" 2 "at least 1" plan --world 0
check_output "plan rejects a non-number" 2 "a whole number" plan --batch 12abc
check_output "plan rejects heads that do not divide hidden" 2 "--heads 10 or 20" \
  plan --layers 12 --hidden 1000 --heads 12
check_output "plan rejects kv-heads that do not divide heads" 2 "kv-heads 5" plan --preset llama-1b --kv-heads 5
check_output "plan rejects seq beyond GPT-2's positions" 2 "seq 2048 > T = 1024" plan --seq 2048
check_output "plan rejects a bad memory size" 2 "24GB, 80GiB" plan --device-memory 24XB
check_output "plan rejects an unknown option" 2 "unknown option '--bogus'" plan --bogus
check_output "plan rejects sizes that would overflow" 2 "64-bit" plan --layers 100000000 --hidden 100000 --heads 1
check_output "plan --help exits 0" 0 "usage: mixpar plan" plan --help

# ---------------------------------------------------------------- a run's own plan (--config)
# The capstone's shape with 4 blocks on 4 ranks: ZeRO-3's gathered units at their worst are the embeddings'
# gradients, two blocks' weights and gradients, a block's reduced shard and the MPI backend's reduce-scatter segments
# (2 in flight x 4 ranks x 512 KiB), beside the shards. With the bf16 kernel the blocks are gathered in 16 bits
# into the cast cache (other: 2 blocks x 2 bytes x 44,044,288), so of their fp32 weights only the RMSNorm gains
# (2 x 2048 each) are held: 4 x (32000 x 2048 + 2 x 44,044,288 + 2 x 4096 + 11,011,072) + 4,194,304 = 662,769,664
# bytes (what the 4-rank run measures, bench/capstone_1b.sh). Without it the blocks come in fp32 and there is no
# cache: 4 x (32000 x 2048 + 4 x 44,044,288 + 11,011,072) + 4,194,304 = 1,015,091,200.
out=$("$MIXPAR" plan --config configs/llama-1b-zero3.json --world 4 --set model.layers=4)
if grep -Eq '^other +176177152 ' <<<"$out"; then want=662769664; else want=1015091200; fi
check "plan --config: ZeRO-3's gathered units and buffers at their worst ($want bytes)" \
  grep -Eq "^comm +$want " <<<"$out"
check "plan --config: the parameter shard is a quarter of the model (4 x 76,812,800 fp32 bytes)" \
  grep -Eq '^param +307251200 ' <<<"$out"
check "plan --config: the total is the sum of the tags" bash -c \
  'awk '\''$1 == "total" { t = $2 } $1 ~ /^(param|grad|master|optim|act|comm|other)$/ { s += $2 } END { exit !(t == s && t > 0) }'\'' <<<"$1"' _ "$out"
check_output "plan --config takes no model option" 2 "only --world N and --set key=value" \
  plan --config configs/llama-1b-zero3.json --preset llama-7b
check_output "plan --config with a missing file: exit 2" 2 "cannot read" plan --config "$(mktemp -d)/missing.json"
