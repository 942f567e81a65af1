#!/usr/bin/env bash
# profile.sh: command-line checks of train.profile and `mixpar profile` (lab 23): a profiled run writes a trace that
# is whole JSON and a table whose spans nest, the report names kernels on the roofline and a bottleneck, profiling
# leaves the training bit-identical, and bad input exits 2.
source "$(dirname "$0")/../lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1

base=(--config configs/tiny-poetry.json --quiet --set train.steps=2 --set scheduler.type=constant
      --set train.eval_interval=0 --set train.sample_interval=0 --set train.checkpoint_interval=0
      --set train.hist_interval=0)
MIXPAR_PARAM_HASH=1 timeout "$(scaled 60)" "$MIXPAR" train "${base[@]}" --set train.profile=true \
    --set train.run_dir="$work/on" > /dev/null 2>&1
MIXPAR_PARAM_HASH=1 timeout "$(scaled 60)" "$MIXPAR" train "${base[@]}" --set train.run_dir="$work/off" > /dev/null 2>&1

check "train.profile writes trace.rank0.json and profile.rank0.tsv" \
  test -s "$work/on/trace.rank0.json" -a -s "$work/on/profile.rank0.tsv"
check "without train.profile neither file is written" \
  test ! -e "$work/off/trace.rank0.json" -a ! -e "$work/off/profile.rank0.tsv"
check "profiling leaves the training bit-identical (the same parameter hash after each step)" \
  bash -c "diff <(grep -o '\"param_hash\":\"[0-9a-f]*\"' '$work/on/events.rank0.jsonl') \
                <(grep -o '\"param_hash\":\"[0-9a-f]*\"' '$work/off/events.rank0.jsonl')"
check_output "the trace ends with the closing brackets after the last step" 0 '^\]\}$' tail -n 1 "$work/on/trace.rank0.json"
check_output "the trace names the process and the compute thread" 0 \
  '"process_name".*"rank 0".*"thread_name".*"compute"' bash -c "tr -d '\n' < '$work/on/trace.rank0.json'"
# one step counted (the first is warm-up); forward ran once, a block_fwd per layer (4), and self <= total everywhere
check_output "the table counts the second step: step 1, forward 1, block_fwd 4 calls, and 0 <= self <= total" 0 \
  "^1 1 4 ok$" awk -F'\t' 'NR > 1 && $1 != "kind" && !/^#/ { if ($5 < -1e-9 || $5 > $4 + 1e-9) bad = 1; c[$2] = $3 }
                            END { print c["step"], c["forward"], c["block_fwd"], bad ? "bad" : "ok" }' \
  "$work/on/profile.rank0.tsv"
check_output "mixpar profile: the top kernels with their bound, the bottleneck and MFU" 0 \
  "top kernels by time.*matmul_bwd:[a-z]+ .*(compute|memory)-bound.*bottleneck: .*MFU: " \
  bash -c "'$MIXPAR' profile '$work/on' --top 20 --roofline '$work/roof.tsv' --trace '$work/all.json' | tr '\n' ' '"
check_output "mixpar profile names what ran the fp32 products beside the sgemm peak they reached" 0 \
  "sgemm peak [0-9.]+ GFLOP/s.* (fp32 products: mixpar's AVX-512 kernel|OpenBLAS kernels: [A-Za-z0-9]+)" \
  bash -c "'$MIXPAR' profile '$work/on' | tr '\n' ' '"
check_output "--roofline writes one point per kernel" 0 "^2[0-9]$" bash -c "grep -vc '^#' '$work/roof.tsv'"
check_output "--trace writes one Chrome trace of every rank" 0 '^\{"traceEvents":\[\{"name":"process_name"' \
  head -c 60 "$work/all.json"
check_output "mixpar help lists profile" 0 "profile +a profiled run" "$MIXPAR" help

# ---- a bf16 run (model_lowp.c): its products, conversions and casts are kernels too, none inside another
MIXPAR_PARAM_HASH=1 timeout "$(scaled 60)" "$MIXPAR" train "${base[@]}" --set bf16.enabled=true --set train.profile=true \
    --set train.run_dir="$work/bf16" > /dev/null 2>&1
MIXPAR_PARAM_HASH=1 timeout "$(scaled 60)" "$MIXPAR" train "${base[@]}" --set bf16.enabled=true \
    --set train.run_dir="$work/bf16-off" > /dev/null 2>&1
check "profiling a bf16 run leaves its training bit-identical" \
  bash -c "diff <(grep -o '\"param_hash\":\"[0-9a-f]*\"' '$work/bf16/events.rank0.jsonl') \
                <(grep -o '\"param_hash\":\"[0-9a-f]*\"' '$work/bf16-off/events.rank0.jsonl') &&
           grep -q param_hash '$work/bf16/events.rank0.jsonl'"
check_output "a bf16 run's table has its products, norms, attention, conversions and weight cast as kernels" 0 \
  "^ok$" awk -F'\t' '$1 == "kernel" { k[$2] = 1 }
                     END { print (k["matmul_fwd:qkv"] && k["matmul_bwd:head"] && k["norm_bwd"] && k["attention_fwd"] &&
                                  k["convert"] && k["cast_weights"] && k["crossentropy_fwd"]) ? "ok" : "missing" }' \
  "$work/bf16/profile.rank0.tsv"
check_output "no kernel's time holds another's: every kernel's self time is its whole time" 0 "^[1-9][0-9]* 0$" \
  bash -c "grep -o '\"cat\":\"kernel\",\"ph\":\"X\",\"ts\":[^,]*,\"dur\":[0-9.e+-]*.*\"self_us\":[0-9.e+-]*' \
             '$work/bf16/trace.rank0.json' |
           awk -F'\"dur\":|,|\"self_us\":' '{ n++; d = \$5; s = \$NF; if (d - s > 1e-6 * d + 1e-9) bad++ }
                                                END { print n, bad + 0 }'"
# Where the products ran on a bf16 kernel the table carries its peak, and the report places them against it; where
# they did not (no AVX512_BF16), it says nothing of one and the sgemm peak stays their roof.
if grep -q '^# products_kernel ' "$work/bf16/profile.rank0.tsv"; then
  check_output "mixpar profile places a bf16 run's products, and MFU, against the bf16 kernel's peak" 0 \
    "the products ran on the [a-z0-9-]+ kernel: its bf16 peak, measured in the run, [0-9.]+ GFLOP/s.*matmul_fwd:qkv .*MFU: .* kernel's peak; [0-9.]+% of 1 x the sgemm peak" \
    bash -c "'$MIXPAR' profile '$work/bf16' --top 40 | tr '\n' ' '"
else
  check_output "mixpar profile: a bf16 run without a bf16 kernel keeps the sgemm peak as its products' roof" 0 \
    "matmul_fwd:qkv .*MFU: .*against 1 x the sgemm peak\)" bash -c "'$MIXPAR' profile '$work/bf16' --top 40 | tr '\n' ' '"
fi
check "an fp32 run's report names no 16-bit kernel" \
  bash -c "out=\$('$MIXPAR' profile '$work/on') && ! grep -q 'products ran on' <<< \"\$out\""
# ---- tensor and sequence parallel (the model-parallel loop, mp_step.c): profiled as well, its communication outside
# the kernels it sits between, and each token counted once
timeout "$(scaled 120)" "$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" --set tensor_model_parallel_size=2 \
    --set sequence_parallel=true --set bf16.enabled=true --set train.profile=true --set train.run_dir="$work/tp" \
    > /dev/null 2>&1
check_output "a tensor-parallel run writes both ranks' tables, each with a replica's tokens shared by its 2 ranks" 0 \
  "^512 512 $" bash -c "grep -h '^# tokens_per_step ' '$work/tp/profile.rank0.tsv' '$work/tp/profile.rank1.tsv' |
                        cut -d' ' -f3 | tr '\n' ' '"
check_output "a tensor-parallel run's report: the pipeline phase, the kernels, its exposed communication, MFU" 0 \
  "step [0-9.]+ ms: pipeline [0-9.]+ grad_sync_wait [0-9.]+ optimizer [0-9.]+ .*matmul_fwd:qkv .*rank 1 communication: [0-9]+ calls.*MFU: " \
  bash -c "'$MIXPAR' profile '$work/tp' --top 40 | tr '\n' ' '"
for r in 0 1; do
  check_output "tensor parallel, rank $r: no kernel holds another (the all-gathers and reductions sit between them)" 0 \
    "^[1-9][0-9]* 0$" \
    bash -c "grep -o '\"cat\":\"kernel\",\"ph\":\"X\",\"ts\":[^,]*,\"dur\":[0-9.e+-]*.*\"self_us\":[0-9.e+-]*' \
               '$work/tp/trace.rank$r.json' |
             awk -F'\"dur\":|,|\"self_us\":' '{ n++; d = \$5; s = \$NF; if (d - s > 1e-6 * d + 1e-9) bad++ }
                                                  END { print n, bad + 0 }'"
done

mkdir -p "$work/shared"
cp "$work/on/"*.rank0.* "$work/shared/"
sed -i -e 's/^# threads .*/# threads 2/' -e 's/^# cpus .*/# cpus 1/' "$work/shared/profile.rank0.tsv"
check_output "ranks whose threads outnumber the CPUs: MFU is called a guide" 0 "share 1 CPUs.*only a guide" \
  "$MIXPAR" profile "$work/shared"

# ---- bad input
check_output "no run: exit 2 with the usage" 2 "which run" "$MIXPAR" profile
check_output "a run without train.profile: exit 2, says how to profile" 2 "train.profile=true" "$MIXPAR" profile "$work/off"
mkdir -p "$work/bad"
printf '# peak_flops 1e9\nkind\tname\tcalls\ttotal_s\tself_s\tflops\tbytes\nkernel\tx\tmany\n' > "$work/bad/profile.rank0.tsv"
check_output "a broken table: exit 2 naming the file and line" 2 "profile.rank0.tsv: not a profile table \(line 3" \
  "$MIXPAR" profile "$work/bad"
grep -v '^# products_' "$work/on/profile.rank0.tsv" > "$work/bad/profile.rank0.tsv"
echo '# products_kernel avx512-bf16' >> "$work/bad/profile.rank0.tsv"
check_output "a 16-bit kernel's name without its peak: exit 2" 2 "products_peak_flops together" \
  "$MIXPAR" profile "$work/bad"
sed 's/^# threads .*/# threads 1e300/' "$work/on/profile.rank0.tsv" > "$work/bad/profile.rank0.tsv"
check_output "a count out of any range (threads 1e300): exit 2 naming the line" 2 "not a profile table \(line [0-9]+" \
  "$MIXPAR" profile "$work/bad"
check_output "--top 0: exit 2" 2 "--top wants a number" "$MIXPAR" profile "$work/on" --top 0
check_output "an unknown option: exit 2" 2 "unexpected argument '--frobnicate'" "$MIXPAR" profile "$work/on" --frobnicate
check_output "train.profile must be a boolean: exit 2" 2 "profile" \
  "$MIXPAR" train "${base[@]}" --set train.profile=maybe --set train.run_dir="$work/x"
