#!/usr/bin/env bash
# amp.sh: command-line checks of `mixpar amp`: the policy table and the config mappings, scaler traces of each kind
# against hand-worked values, the fp16 underflow table from hist events, exit 2 on bad input; and bench/amp_perf's
# memory table by tag (the model's bytes alone).
source "$(dirname "$0")/../lib.sh"
amp() { "$MIXPAR" amp "$@"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ---- policy
check_output "amp policy: matmul runs fp16 under fp16 AMP, e4m3/e5m2 under fp8" 0 \
  "^matmul +fp32 +tf32 +fp16 +fp16 +bf16 +bf16 +e4m3/e5m2$" amp policy
check_output "amp policy: softmax stays fp32 in every recipe" 0 "^softmax( +fp32){7}$" amp policy
check_output "amp policy: activation follows under autocast, runs low under o2" 0 \
  "^activation +fp32 +fp32 +follow +fp16 +follow +bf16 +follow$" amp policy
check_output "amp policy --recipe fp16-o2: the norm's output is fp16, its statistics fp32" 0 \
  "norm +fp16 +low .*norm_stats +fp32 +fp32" bash -c "'$MIXPAR' amp policy --recipe fp16-o2 | tr '\n' ' '"
check_output "amp policy --keras mixed_float16 maps to fp16 with Keras's scaler from 2^15" 0 \
  "Keras policy 'mixed_float16' -> recipe fp16.*keras .*from 32768" bash -c "'$MIXPAR' amp policy --keras mixed_float16 | tr '\n' ' '"
check_output "amp policy --torch float16 --scaler on maps to fp16 with GradScaler from 2^16" 0 \
  "-> recipe fp16.*pytorch .*from 65536" bash -c "'$MIXPAR' amp policy --torch float16 --scaler on | tr '\n' ' '"
check_output "amp policy --config with fp16 enabled maps to fp16 with DeepSpeed's scaler" 0 \
  "fp16.enabled.*-> recipe fp16.*deepspeed .*hysteresis 2, floor 1" \
  bash -c "'$MIXPAR' amp policy --config configs/tiny-poetry.json --set fp16.enabled=true | tr '\n' ' '"
check_output "amp policy --config: bf16 section maps to bf16" 0 "-> recipe bf16" \
  amp policy --config configs/tiny-poetry.json --set bf16.enabled=true
check_output "amp policy --op overrides one class" 0 "softmax +fp16 +override" amp policy --recipe fp16 --op softmax=low

# ---- scaler-trace (values worked out in tests/unit/test_amp_scaler.c)
check_output "scaler-trace pytorch: growth at step 2000, then 2^16, 2^15, 2^14, 2^13" 0 \
  "2000 +clean +65536 +no +131072 .* 2009 +inf +16384 +yes +8192 .*4 skipped; final scale 8192" \
  bash -c "'$MIXPAR' amp scaler-trace --kind pytorch 'C*2000 O C*5 O O O' | tr '\n' ' '"
check_output "scaler-trace deepspeed: hysteresis 2 absorbs the first overflow" 0 \
  "1001 +inf +131072 +yes +131072 +1 +0 .*1005 +inf +131072 +yes +65536" \
  bash -c "'$MIXPAR' amp scaler-trace --kind deepspeed 'C*1000 O C*3 O' | tr '\n' ' '"
check_output "scaler-trace deepspeed: consecutive hysteresis never halves alternating overflows" 0 \
  "final scale 65536" amp scaler-trace --kind deepspeed --consecutive-hysteresis "(O C)*50"
check_output "scaler-trace deepspeed: an overflow at the minimum stops with the advice, exit 2" 2 \
  "Current loss scale already at minimum.*use bf16" \
  bash -c "set -o pipefail; '$MIXPAR' amp scaler-trace --kind deepspeed --init-scale-power 1 --hysteresis 1 'O O O' 2>&1 | tr '\n' ' '"
check_output "scaler-trace static: skips and says the fixed scale cannot back off" 0 \
  "cannot back off.*1 skipped; final scale 1024" \
  bash -c "'$MIXPAR' amp scaler-trace --kind static --init-scale 1024 'C O C' | tr '\n' ' '"
check_output "scaler-trace keras starts at 2^15" 0 "^ +1 +clean +32768 " amp scaler-trace --kind keras "C"
check_output "scaler-trace --tsv prints one row per step" 0 "^12$" \
  bash -c "'$MIXPAR' amp scaler-trace --tsv '(C*3 N)*3' | grep -vc '^#'"
check_output "scaler-trace: NaN and -inf count as overflows" 0 "2 skipped" amp scaler-trace "C N M C"

# ---- underflow from hist events (a hand-made stream: binades -30 and -20, scale 1)
cat > "$work/events.jsonl" <<'JSON'
{"v":1,"kind":"run","rank":0,"t":0}
{"v":1,"kind":"hist","rank":0,"t":1,"step":5,"tensor":"grad","layer":0,"format":"fp32","scale":1,"count":12,"zero":2,"nonfinite":0,"first_binade":-30,"bins":[4,0,0,0,0,0,0,0,0,0,6],"targets":{"fp16":{"subnormal":6,"underflow":4,"overflow":0}}}
{"v":1,"kind":"hist","rank":0,"t":1,"step":5,"tensor":"grad","layer":1,"format":"fp32","scale":1,"count":10,"zero":0,"nonfinite":0,"first_binade":-1,"bins":[10],"targets":{"fp16":{"subnormal":0,"underflow":0,"overflow":0}}}
JSON
# Layer 0: 4 values in binade -30 (below 2^-25: flushed at scale 1; at 2^16 binade -14, normal) and 6 in binade
# -20 (subnormal at 1; normal at 2^16). Layer 1 (the last layer: lnf+head): binade -1, top binade 15 at 2^16,
# 19 at 2^20: past fp16's top binade (15), so all 10 overflow.
check_output "underflow: 40% flushed at scale 1, none at 2^16" 0 \
  "block 0 +10 +40.000% +40.000% +60.000% +0.000% +0.000% +0" amp underflow "$work/events.jsonl"
check_output "underflow: at 2^20 the binade -1 values overflow fp16" 0 "lnf\\+head +10 .* 10 +19$" \
  amp underflow "$work/events.jsonl" --scale 1048576
check_output "underflow --tsv" 0 "^block 0	10	40.000000	60.000000	0.000000	0.000000	0$" \
  amp underflow "$work/events.jsonl" --tsv

# ---- bad input: exit 2 with a message
check_output "amp with no command prints usage, exit 2" 2 "usage: mixpar amp" amp
check_output "amp rejects an unknown command" 2 "unknown command 'nope'" amp nope
check_output "amp policy rejects an unknown recipe" 2 "recipe" amp policy --recipe fp64
check_output "amp policy rejects fp8 on softmax, naming it" 2 "op softmax=fp8" amp policy --recipe fp8 --op softmax=fp8
check_output "amp policy rejects fp16 autocast without a GradScaler" 2 "GradScaler" amp policy --torch float16
check_output "amp policy rejects Keras float16" 2 "mixed_float16" amp policy --keras float16
check_output "amp policy rejects fp16 and bf16 both enabled" 2 "fp16.enabled" \
  amp policy --config configs/tiny-poetry.json --set fp16.enabled=true --set bf16.enabled=true
check_output "amp policy rejects a negative static loss scale" 2 "fp16.loss_scale" \
  amp policy --config configs/tiny-poetry.json --set fp16.enabled=true --set fp16.loss_scale=-4
check_output "scaler-trace rejects a static scale of 0" 2 "init_scale" amp scaler-trace --kind static --init-scale 0 C
check_output "scaler-trace rejects a bad pattern with its position" 2 "position 3" amp scaler-trace "C X"
check_output "scaler-trace rejects an unclosed group" 2 "')' expected" amp scaler-trace "(C O"
check_output "scaler-trace rejects an option of another kind" 2 "does not apply" amp scaler-trace --kind pytorch --hysteresis 3 C
check_output "scaler-trace needs a pattern" 2 "PATTERN" amp scaler-trace --kind pytorch
check_output "underflow rejects a scale that is not a power of two" 2 "power of two" \
  amp underflow "$work/events.jsonl" --scale 1000
check_output "underflow rejects a missing file" 2 "readable events file" amp underflow "$work/none.jsonl"
check_output "underflow rejects a step without hist events" 2 "--step 7" amp underflow "$work/events.jsonl" --step 7
printf 'not json\n{"v":1}\n' > "$work/bad.jsonl"
check_output "underflow rejects a file that is not JSON lines" 2 "bad.jsonl:1 is not JSON" amp underflow "$work/bad.jsonl"

# ---- bench/amp_perf (lab 10's experiment): its memory table by tag is the model's. It measures an sgemm peak beside
# each step; those 27 MiB of buffers must not show under MEM_OTHER. The tiny fp32 model's own is under 2 MiB on 2
# threads: the fp32 kernel's packing areas (ops/gemm_f32.c, at most 816 KiB a thread) and 0.1 MiB besides.
check_output "amp_perf: the tiny fp32 recipe's MEM_OTHER peak is the model's, not the sgemm peak's buffers" 0 \
  "^fp32( +[0-9.]+){5} +[01]\.[0-9] " env OMP_NUM_THREADS=2 "$ROOT/build/bench/amp_perf" --model tiny --steps 2 \
  --recipes fp32
