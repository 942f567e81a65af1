#!/usr/bin/env bash
# precision.sh: command-line checks of `mixpar precision` (labs 04 and 06): running sums, the range probe, flush
# counts and the static scale from crafted event files, and exit 2 with a message on bad input.
source "$(dirname "$0")/../lib.sh"
pr() { "$MIXPAR" precision "$@"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check_output "precision sum: bf16 adding 1 stalls at 256" 0 "^bf16   rounded +256 +256$" pr sum --value 1 --n 300,1000 --format bf16 --method rounded
check_output "precision sum: fp16 adding 0.01 stalls at 32" 0 "^fp16   rounded +32$" pr sum --value 0.01 --n 10000 --format fp16 --method rounded
check_output "precision sum --tsv: one row per format, method and n" 0 "^8$" bash -c \
  "'$MIXPAR' precision sum --tsv --n 10,100 --format fp16 --format bf16 --method rounded --method kahan | grep -vc '^#'"
check_output "precision sum --uniform is seeded" 0 "same" bash -c \
  "[ \"\$('$MIXPAR' precision sum --uniform 0,1 --seed 4 --n 50)\" = \"\$('$MIXPAR' precision sum --uniform 0,1 --seed 4 --n 50)\" ] && echo same"
check_output "precision range: fp16 has 30 normal and 10 subnormal binades" 0 "^fp16 .*65504 .* 40 +\( *30 +\+ 10\)" pr range
check_output "precision range: bf16 keeps fp32's 254 normal binades" 0 "^bf16 .*\(254 +\+ 7\)" pr range --format bf16

# A crafted run: hist events of one layer at scale 2^10 (binades 0..5 recorded = -10..-5 unscaled), rounding events.
cat > "$tmp/events.rank0.jsonl" <<'JSON'
{"v":1,"kind":"run","rank":0,"t":0,"name":"crafted","world":1}
{"v":1,"kind":"hist","rank":0,"t":1,"step":1,"tensor":"grad","layer":0,"format":"fp32","scale":1024,"count":7,"zero":1,"nonfinite":0,"first_binade":0,"bins":[1,1,1,1,1,1]}
{"v":1,"kind":"hist","rank":0,"t":1,"step":1,"tensor":"grad","layer":1,"format":"fp32","scale":1024,"count":2,"zero":0,"nonfinite":0,"first_binade":-30,"bins":[2]}
{"v":1,"kind":"rounding","rank":0,"t":1,"step":1,"layer":0,"compute":"fp16","grads":{"values":100,"nonzero":80,"flushed":8,"overflowed":0,"saturated":0},"acts":{"values":0,"nonzero":0,"flushed":0,"overflowed":0,"saturated":0}}
{"v":1,"kind":"rounding","rank":0,"t":1,"step":1,"layer":1,"compute":"fp16","grads":{"values":100,"nonzero":100,"flushed":0,"overflowed":2,"saturated":0},"acts":{"values":0,"nonzero":0,"flushed":0,"overflowed":0,"saturated":0}}
JSON
# top binade -5 unscaled, margin 1: k = 15 - 1 + 5 = 19
check_output "precision choose-scale: 2^19 for gradients up to binade -5, margin 1" 0 "^524288$" \
  pr choose-scale "$tmp/events.rank0.jsonl" --scale-only
check_output "precision choose-scale: margin 3 gives 2^17" 0 "static scale: 2\^17 = 131072" \
  pr choose-scale "$tmp/events.rank0.jsonl" --margin 3
check_output "precision choose-scale: the binade -40 values flush at scale 1, not at 2^19" 0 "^all +8 +-40 +-5 +25\.0000% +0\.0000%" \
  pr choose-scale "$tmp/events.rank0.jsonl"
check_output "precision flushed: 10% of block 0's nonzero gradients, 2 overflowed in block 1" 0 \
  "block 0 +10\.0000%" pr flushed "$tmp/events.rank0.jsonl"
check_output "precision flushed --steps: step 1, 8 of 180" 0 "^1	4\.444444	2$" pr flushed --steps "$tmp/events.rank0.jsonl"

check_output "precision rejects an unknown command" 2 "unknown command 'nope'" pr nope
check_output "precision sum rejects n = 0" 2 "counts from 1" pr sum --n 0
check_output "precision sum rejects an empty count between commas" 2 "--n '1,,2': count 2 is empty" pr sum --n 1,,2
check_output "precision sum rejects a leading comma" 2 "--n ',5': count 1 is empty" pr sum --n ,5
check_output "precision sum rejects a trailing comma" 2 "--n '5,': count 2 is empty" pr sum --n 5,
check_output "precision sum rejects an empty --n" 2 "give at least one count" pr sum --n ''
check_output "precision sum names the bad count" 2 "--n '1,x,2': count 2 is 'x'" pr sum --n 1,x,2
check_output "precision sum still takes 10K,1e3" 0 "^bf16   rounded +256 +256$" pr sum --value 1 --n 10K,1e3 --format bf16 --method rounded
check_output "precision sum rejects a bad --uniform" 2 "LO < HI" pr sum --uniform 1,0
check_output "precision sum rejects an unknown method" 2 "rounded, kahan or fp32-acc" pr sum --method pairwise
check_output "precision range rejects a missing checkpoint" 2 "." pr range --checkpoint "$tmp/none.safetensors"
check_output "precision flushed needs rounding events" 2 "rounding" pr flushed viz/samples/tiny-poetry/events.rank0.jsonl
check_output "precision choose-scale rejects a missing file" 2 "readable events file" pr choose-scale "$tmp/none.jsonl"
check_output "precision choose-scale rejects a negative margin" 2 "margin" pr choose-scale "$tmp/events.rank0.jsonl" --margin -1
check_output "precision choose-scale rejects a step with no histograms" 2 "no step 7" pr choose-scale "$tmp/events.rank0.jsonl" --step 7
printf '{"v":1,"kind":"hist","step":1,"layer":0,"scale":3,"first_binade":0,"bins":[1]}\n' > "$tmp/bad.jsonl"
check_output "precision choose-scale rejects a scale that is not a power of two" 2 "power-of-two" pr choose-scale "$tmp/bad.jsonl"
printf 'not json\n{"v":1}\n' > "$tmp/junk.jsonl"
check_output "precision choose-scale rejects a file that is not JSON lines" 2 "not JSON" pr choose-scale "$tmp/junk.jsonl"
check_output "precision --help lists the commands" 0 "choose-scale EVENTS" pr --help
