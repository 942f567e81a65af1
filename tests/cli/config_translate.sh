#!/usr/bin/env bash
# config_translate.sh: `mixpar config translate` and `mixpar config frameworks` (lab 27): the four translators on
# real-looking inputs (a Megatron-LM GPT-2 launch script, the ZeRO-3 offload settings of DeepSpeed's docs with bf16, FSDP HYBRID_SHARD,
# Horovod's environment), unmapped keys with reasons, not-yet-runnable model-parallel keys, bad files exit 2.
cd "$(dirname "$0")/../.." || exit 2
source tests/lib.sh
m=build/mixpar
d=labs/lab27-frameworks/tests/data
base=configs/synthetic-addition.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check_output "help lists config" 0 "config +translate" $m help
check_output "megatron gpt2: sequence parallel maps and loads (0 not yet runnable)" 0 "23 settings mapped, 10 not mapped, 0 not yet runnable" \
    $m config translate --from megatron $d/megatron_gpt2_pretrain.sh --base $base --world 4
check_output "megatron: context parallel is not yet runnable (the loader does not know the key)" 0 \
    "not yet runnable: --context-parallel-size -> context_parallel_size" \
    $m config translate --from megatron <(echo "--tensor-model-parallel-size 2 --context-parallel-size 2") --base $base --world 2
check_output "megatron gpt2: data path not mapped with reason" 0 "not mapped: --data-path: mixpar trains on its own datasets" \
    $m config translate --from megatron $d/megatron_gpt2_pretrain.sh --base $base --world 4
$m config translate --from megatron $d/megatron_gpt2_pretrain.sh --base $base --world 4 -o $tmp/mg.json 2>/dev/null
check_output "megatron gpt2: warmup fraction of decay iters, accumulation inferred" 0 '"warmup_steps":[[:space:]]*3200' cat $tmp/mg.json
check_output "megatron gpt2: tensor and pipeline parallel map to Megatron's own keys" 0 \
    '"tensor_model_parallel_size":[[:space:]]*2,' cat $tmp/mg.json
check_output "megatron gpt2: 16 = 2 x 8 accumulation x 1 data-parallel rank (4 ranks / (tp 2 x pp 2))" 0 \
    '"gradient_accumulation_steps":[[:space:]]*8' cat $tmp/mg.json
check_output "deepspeed zero3: nvme path not mapped" 0 "not mapped: zero_optimization.offload_param.nvme_path: parameter offload" \
    $m config translate --from deepspeed $d/deepspeed_zero3_bf16.json --base $base --world 4
$m config translate --from deepspeed $d/deepspeed_zero3_bf16.json --base $base --world 4 -o $tmp/ds.json 2>/dev/null
check_output "deepspeed zero3: stage 3 with cpu optimizer offload and bf16" 0 '"device":[[:space:]]*"cpu"' cat $tmp/ds.json
check_output "fsdp hybrid: shard size from the device mesh" 0 '"hybrid_shard_size":[[:space:]]*2' \
    $m config translate --from fsdp $d/fsdp_hybrid_bf16.txt --base $base --world 4
check_output "fsdp: size-based auto wrap not mapped" 0 "not mapped: auto_wrap_policy: mixpar's FSDP units are whole transformer blocks" \
    $m config translate --from fsdp $d/fsdp_hybrid_bf16.txt --base $base --world 4
check_output "fsdp: bf16 param dtype is autocast bfloat16" 0 '"torch_autocast":[[:space:]]*"bfloat16"' \
    $m config translate --from fsdp $d/fsdp_hybrid_bf16.txt --base $base --world 4
check_output "horovod: fusion on, fp16 compression, threshold" 0 '"fusion_threshold":[[:space:]]*33554432' \
    $m config translate --from horovod $d/horovod_fp16.env --base $base --world 2
check_output "horovod: cycle time not mapped" 0 "not mapped: HOROVOD_CYCLE_TIME" \
    $m config translate --from horovod $d/horovod_fp16.env --base $base --world 2
check_output "horovod alone does not load, says why" 1 "does not load: .*batch size" \
    $m config translate --from horovod $d/horovod_fp16.env
check_output "frameworks table from the tables" 0 "HOROVOD_FUSION_THRESHOLD" $m config frameworks
printf '{"train_batch_size": 16,\n  "bf16": {"enabled": true,}\n}\n' > $tmp/bad.json
check_output "bad deepspeed json: line and offset, exit 2" 2 "invalid JSON at line 2" $m config translate --from deepspeed $tmp/bad.json
printf 'sharding_strategy FULL_SHARD\n' > $tmp/bad.txt
check_output "bad fsdp line: file and line, exit 2" 2 "bad.txt:1" $m config translate --from fsdp $tmp/bad.txt
printf -- '--num-layers 2 --lr\n' > $tmp/bad.args
check_output "megatron argument without value: exit 2" 2 "--lr \(argument 3 of 3\) has none" $m config translate --from megatron $tmp/bad.args
check_output "unknown framework: exit 2" 2 "deepspeed, megatron, fsdp or horovod" $m config translate --from colossal $tmp/bad.args
check_output "missing file: exit 2" 2 "cannot read" $m config translate --from fsdp $tmp/none.txt
