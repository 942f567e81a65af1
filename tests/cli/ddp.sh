#!/usr/bin/env bash
# ddp.sh: data parallel training on real MPI ranks: N ranks with micro-batch b train like one rank with
# batch N*b, replicas stay bit-identical, buckets are what their size says, communication overlaps
# backward (seen in the events), accumulation with no_sync, and a mismatched launch fails with a message.
source "$(dirname "$0")/../lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT" || exit 1
cfg=configs/synthetic-addition.json
base=(--config "$cfg" --quiet --set train.steps=60 --set scheduler.params.total_steps=60 --set train.eval_interval=0
      --set train.sample_interval=0 --set train.checkpoint_interval=0)
losses() { grep '"kind":"step"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }
max_diff() { paste <(losses "$1") <(losses "$2") | awk '$1 != $3 {bad=1} {d=$2-$4; if (d<0) d=-d; if (d>m) m=d} END {if (bad || NR == 0) print 1e9; else print m + 0}'; }

"$MIXPAR" train "${base[@]}" --set train_micro_batch_size_per_gpu=64 --set train.run_dir="$work/one" >/dev/null 2>&1
MIXPAR_PARAM_HASH=1 "$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" --set train_micro_batch_size_per_gpu=32 \
  --set train.run_dir="$work/two" --set zero_optimization.overlap_comm=true \
  --set zero_optimization.reduce_bucket_size=20000 >"$work/two.log" 2>&1
check "ddp: 2 ranks trained" test -s "$work/two/events.rank1.jsonl"
d=$(max_diff "$work/one/events.rank0.jsonl" "$work/two/events.rank0.jsonl")
check "ddp: 2 ranks x 32 give the losses of 1 rank x 64 (max |diff| $d <= 1e-4)" awk -v d="$d" 'BEGIN{exit !(d <= 1e-4)}'
hashes() { grep -o '"param_hash":"[0-9a-f]*"' "$1"; }
check "ddp: the parameter hashes were written on both ranks (60 steps)" test \
  "$(hashes "$work/two/events.rank0.jsonl" | wc -l)$(hashes "$work/two/events.rank1.jsonl" | wc -l)" = 6060
check "ddp: replicas stay bit-identical after every step" diff <(hashes "$work/two/events.rank0.jsonl") \
  <(hashes "$work/two/events.rank1.jsonl")
buckets() { grep '"kind":"comm"' "$1" | grep -o '"bucket":[0-9]*' | sort -u | wc -l; }
check "ddp: 20000-element buckets split this model into 3" test "$(buckets "$work/two/events.rank0.jsonl")" -eq 3
# Overlap: in every step backward hands bucket 0 to the communication thread before backward ends. Whether
# the thread also starts it before then depends on the machine's load, so that count is shown, not checked.
overlap() { # overlap FIELD: in how many steps bucket 0's FIELD (queued or t0) is before backward's end
  awk -F'"step":' -v field="\"$1\":" '
    /"kind":"span"/ && /"name":"backward"/ { split($2, a, ","); s=a[1]; match($0, /"t1":[0-9.e+-]+/); bend[s]=substr($0, RSTART+5, RLENGTH-5) }
    /"kind":"comm"/ && /"bucket":0/ { match($0, field "[0-9.e+-]+"); c0[++n]=substr($0, RSTART+length(field), RLENGTH-length(field)) }
    END { k=0; for (i=1; i<=n; i++) if (c0[i] + 0 < bend[i] + 0) k++; print k }' "$work/two/events.rank0.jsonl"
}
check_output "ddp: the overlapped run reduces on a communication thread" 0 '"overlap":true' head -n 1 "$work/two/events.rank0.jsonl"
check "ddp: bucket 0 is handed over before backward ends in all 60 steps (its reduction began before it in $(overlap t0))" \
  test "$(overlap queued)" -eq 60

for spec in "1:100000000" "2:60000"; do
  n=${spec%%:*}; size=${spec##*:}
  "$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" --set train_micro_batch_size_per_gpu=32 --set train.run_dir="$work/b$n" \
    --set zero_optimization.reduce_bucket_size="$size" >/dev/null 2>&1
  check "ddp: buckets of $size elements make $n bucket(s)" test "$(buckets "$work/b$n/events.rank0.jsonl")" -eq "$n"
  d=$(max_diff "$work/one/events.rank0.jsonl" "$work/b$n/events.rank0.jsonl")
  check "ddp: with $n bucket(s) the losses still match 1 rank (max |diff| $d)" awk -v d="$d" 'BEGIN{exit !(d <= 1e-4)}'
done

# A frozen embedding and a frozen block (PyTorch's requires_grad=False) next to the tied wte/head, on 4
# ranks: the same losses as 1 rank with the same tensors frozen, replicas identical.
frz=(--set train.freeze="wpe,h.0.*")
"$MIXPAR" train "${base[@]}" "${frz[@]}" --set train_micro_batch_size_per_gpu=64 --set train.run_dir="$work/one_frozen"   >/dev/null 2>&1
MIXPAR_PARAM_HASH=1 "$MIXPAR" run -n 4 -- "$MIXPAR" train "${base[@]}" "${frz[@]}" --set train_micro_batch_size_per_gpu=16   --set train.run_dir="$work/four_frozen" --set zero_optimization.reduce_bucket_size=20000 >/dev/null 2>&1
d=$(max_diff "$work/one_frozen/events.rank0.jsonl" "$work/four_frozen/events.rank0.jsonl")
check "ddp: 4 ranks x 16 with frozen tensors match 1 rank x 64 (max |diff| $d <= 1e-4)" awk -v d="$d" 'BEGIN{exit !(d <= 1e-4)}'
check "ddp: frozen tensors change the run (losses differ from the unfrozen one)" awk -v d="$(max_diff "$work/one/events.rank0.jsonl" "$work/one_frozen/events.rank0.jsonl")" 'BEGIN{exit !(d > 1e-4)}'
check "ddp: 4 replicas with frozen tensors stay bit-identical" bash -c "diff <(grep -o '\"param_hash\":\"[0-9a-f]*\"' '$work/four_frozen/events.rank0.jsonl') <(grep -o '\"param_hash\":\"[0-9a-f]*\"' '$work/four_frozen/events.rank3.jsonl') && test -s '$work/four_frozen/events.rank3.jsonl'"

# Accumulation: 2 ranks x 16 x 2 micro-batches (no_sync on the first) = 1 rank x 64.
"$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" --set train_micro_batch_size_per_gpu=16 \
  --set gradient_accumulation_steps=2 --set train.run_dir="$work/acc" >/dev/null 2>&1
d=$(max_diff "$work/one/events.rank0.jsonl" "$work/acc/events.rank0.jsonl")
check "ddp: 2 ranks x 16 x 2 accumulation steps match 1 rank x 64 (max |diff| $d)" awk -v d="$d" 'BEGIN{exit !(d <= 1e-4)}'
check "ddp: accumulation reduces once per step (one allreduce of gradients per step)" test \
  "$(grep '"kind":"comm"' "$work/acc/events.rank0.jsonl" | grep -c '"bucket":0')" -eq 60

# The classic mistake: ranks started with different models. A message naming them, exit 2, no hang.
check_output "ddp: ranks with different configs are refused" 2 "rank\(s\) 1 differ from rank 0" timeout "$(scaled 60)" \
  "$MIXPAR" run -n 2 -- bash -c "exec '$MIXPAR' train ${base[*]} --set train.run_dir='$work/bad' --set model.layers=\$((2 + OMPI_COMM_WORLD_RANK))"
# Which keys differ, with each rank's value, said once by rank 0: not "the same token file" for a micro-batch,
# not "the same model config" for a learning rate.
timeout 60 "$MIXPAR" run -n 2 -- bash -c "exec '$MIXPAR' train ${base[*]} --set train.run_dir='$work/bad_micro' \
  --set train_micro_batch_size_per_gpu=\$((16 * (1 + OMPI_COMM_WORLD_RANK)))" >"$work/bad_micro.log" 2>&1
check_output "ddp: ranks with different micro-batches are told the key and both values" 0 \
  "config differs across ranks: .*train_micro_batch_size_per_gpu: rank 0 16, rank 1 32" cat "$work/bad_micro.log"
check "ddp: and the message is printed once, not once per rank" test "$(grep -c 'config differs across ranks' "$work/bad_micro.log")" -eq 1
check_output "ddp: ranks with different learning rates are told optimizer.params.lr: rank 0 0.001, rank 1 0.002 (exit 2)" 2 \
  "optimizer.params.lr: rank 0 0.001, rank 1 0.002" timeout 60 "$MIXPAR" run -n 2 -- bash -c \
  "exec '$MIXPAR' train ${base[*]} --set train.run_dir='$work/bad_lr' --set optimizer.params.lr=0.00\$((1 + OMPI_COMM_WORLD_RANK))"

# Deterministic reduction ("communication.deterministic"): the chain allreduce adds the ranks' gradients in rank
# order, so 3 ranks give the same bits with 1 bucket or 3, and the run records the chain in its comm events.
for spec in "1:100000000" "3:30000"; do
  n=${spec%%:*}; size=${spec##*:}
  MIXPAR_PARAM_HASH=1 "$MIXPAR" run -n 3 -- "$MIXPAR" train "${base[@]}" --set train_micro_batch_size_per_gpu=16 \
    --set train.steps=20 --set scheduler.params.total_steps=20 --set scheduler.params.warmup_steps=5 \
    --set communication.deterministic=true --set zero_optimization.reduce_bucket_size="$size" \
    --set train.run_dir="$work/det$n" >/dev/null 2>&1
  check "ddp: deterministic reduction with $n bucket(s) ran on 3 ranks" test "$(buckets "$work/det$n/events.rank0.jsonl")" -eq "$n"
done
check "ddp: deterministic reduction: 1 bucket or 3, the same weights bit for bit after every step" bash -c \
  "diff <(grep -o '\"param_hash\":\"[0-9a-f]*\"' '$work/det1/events.rank0.jsonl') <(grep -o '\"param_hash\":\"[0-9a-f]*\"' '$work/det3/events.rank0.jsonl') && test \$(grep -c param_hash '$work/det1/events.rank0.jsonl') -eq 20"
check "ddp: deterministic reduction uses the chain allreduce" grep -q '"algorithm":"chain"' "$work/det3/events.rank0.jsonl"
check_output "ddp: deterministic reduction with ZeRO is refused" 2 "communication.deterministic" \
  "$MIXPAR" train "${base[@]}" --set train.run_dir="$work/detz" --set zero_optimization.stage=2 --set communication.deterministic=true

# Bitwise equivalence: 4 deterministic ranks x 8 sequences and 1 deterministic rank x 8 sequences x 4 accumulated
# micro-batches (added in order, as the chain adds the ranks) end every step with the same weights, bit for bit;
# without the option they do not (each rank's order and the sgemm's accumulation differ). One thread each, so
# the kernels split their sums the same way.
eq=(--set train.steps=20 --set scheduler.params.total_steps=20 --set scheduler.params.warmup_steps=5 --set train.threads=1
    --set train_micro_batch_size_per_gpu=8)
hashes_of() { grep -o '"param_hash":"[0-9a-f]*"' "$1"; }
for det in true false; do
  MIXPAR_PARAM_HASH=1 "$MIXPAR" run -n 4 -- "$MIXPAR" train "${base[@]}" "${eq[@]}" --set communication.deterministic=$det \
    --set train.run_dir="$work/eq4_$det" >/dev/null 2>&1
  MIXPAR_PARAM_HASH=1 "$MIXPAR" train "${base[@]}" "${eq[@]}" --set communication.deterministic=$det \
    --set gradient_accumulation_steps=4 --set train.run_dir="$work/eq1_$det" >/dev/null 2>&1
done
check "ddp: deterministic, 4 ranks = 1 rank x 4 accumulation steps, weights bit for bit after each of 20 steps" bash -c \
  "diff <(grep -o '\"param_hash\":\"[0-9a-f]*\"' '$work/eq4_true/events.rank0.jsonl') <(grep -o '\"param_hash\":\"[0-9a-f]*\"' '$work/eq1_true/events.rank0.jsonl') && test \$(grep -c param_hash '$work/eq1_true/events.rank0.jsonl') -eq 20"
check "ddp: without the option the same two runs differ in their last bits" test \
  "$(diff <(hashes_of "$work/eq4_false/events.rank0.jsonl") <(hashes_of "$work/eq1_false/events.rank0.jsonl") | wc -l)" -gt 0
