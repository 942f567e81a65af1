#!/usr/bin/env bash
# ddp_hooks.sh: DDP communication hooks on 2 real MPI ranks: every hook trains (the loss falls), the replicas
# stay bit-identical, the bytes sent per step shrink as each compressor's arithmetic says (fp16/bf16 half,
# top-k 1% about 2%, PowerSGD rank 2 exactly the ratio its factor shapes give), and an unknown hook name
# stops the run with a message naming the key (exit 2).
source "$(dirname "$0")/../lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT" || exit 1
cfg=configs/synthetic-addition.json # gpt2, L=2, C=64, context 32
base=(--config "$cfg" --quiet --set train.steps=60 --set scheduler.params.total_steps=60 --set train.eval_interval=0
      --set train.sample_interval=0 --set train.checkpoint_interval=0 --set train_micro_batch_size_per_gpu=32)
steps() { grep '"kind":"step"' "$1"; }
field() { grep -o "\"$2\":[^,}]*" "$1" | head -n "${3:-1000000}" | sed -E "s/\"$2\"://; s/\"//g"; }

declare -A bytes
for hook in allreduce fp16 bf16 topk powersgd; do
  MIXPAR_PARAM_HASH=1 "$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" --set train.run_dir="$work/$hook" \
    --set communication.hook=$hook --set communication.topk_ratio=0.01 --set communication.powersgd_rank=2 \
    >"$work/$hook.log" 2>&1
  r0=$work/$hook/events.rank0.jsonl r1=$work/$hook/events.rank1.jsonl
  check "hooks: $hook trained 60 steps on 2 ranks" test "$(steps "$r0" 2>/dev/null | wc -l)" -eq 60
  check "hooks: $hook is named in the run header" grep -q "\"hook\":\"$hook\"" "$r0"
  # The loss falls: the mean of the last 10 steps is at least 0.1 below the first step's.
  fell=$(steps "$r0" | field /dev/stdin loss | awk 'NR == 1 {f = $1} NR > 50 {s += $1; n++} END {printf "%.4f -> %.4f", f, s / n; exit !(n && s / n < f - 0.1)}')
  check "hooks: $hook: the loss falls ($fell)" test $? -eq 0
  check "hooks: $hook: replicas are bit-identical after every step" diff <(field "$r0" param_hash) <(field "$r1" param_hash)
  check "hooks: $hook: rank 0 wrote 60 parameter hashes" test "$(field "$r0" param_hash | wc -l)" -eq 60
  bytes[$hook]=$(steps "$r0" | field /dev/stdin comm_bytes 1)
done
plain=${bytes[allreduce]:-0}
# Plain fp32 allreduce of P parameters on 2 ranks sends 2(p-1)/p x 4P = 4P bytes per step.
params=$(field "$work/allreduce/events.rank0.jsonl" params 1)
check "hooks: allreduce sends 4 bytes per parameter (padded vocabulary rows too) on 2 ranks ($plain for $params)" \
  test "$plain" -ge $((4 * params)) -a $((plain % 4)) -eq 0
ratio() { awk -v a="$1" -v b="$plain" 'BEGIN {printf "%.4f", a / b}'; }
for h in fp16 bf16; do
  r=$(ratio "${bytes[$h]}")
  check "hooks: $h sends half of allreduce's bytes (${bytes[$h]} / $plain = $r)" awk -v r="$r" 'BEGIN {exit !(r > 0.49 && r < 0.51)}'
done
r=$(ratio "${bytes[topk]}")
check "hooks: top-k 1% sends ~2% of allreduce's bytes (index + value per entry; ${bytes[topk]} / $plain = $r)" \
  awk -v r="$r" 'BEGIN {exit !(r > 0.015 && r < 0.03)}'
# PowerSGD rank 2: each (m, n) matrix sends r(m + n) floats, if that is smaller than mn; vectors go whole.
# The model: wte (Vp, C), wpe (32, C), per layer qkvw (3C, C), attprojw (C, C), fcw (4C, C), fcprojw (C, 4C),
# and 13C of vectors per layer + 2C for the final norm. Vp from the fp32 bytes: 4P = 4(Vp C + 32 C + L(12C^2 + 13C) + 2C).
want=$(awk -v P=$((plain / 4)) -v C=64 -v L=2 -v T=32 -v r=2 'function mat(m, n) {return r * (m + n) < m * n ? r * (m + n) : m * n}
  BEGIN {Vp = (P - T * C - L * (12 * C * C + 13 * C) - 2 * C) / C
         f = mat(Vp, C) + mat(T, C) + L * (mat(3 * C, C) + mat(C, C) + mat(4 * C, C) + mat(C, 4 * C) + 13 * C) + 2 * C
         print 4 * f}')
check "hooks: PowerSGD rank 2 sends r(m+n) floats per matrix (${bytes[powersgd]} bytes, the shapes say $want; ratio $(ratio "${bytes[powersgd]}"))" \
  test "${bytes[powersgd]}" = "$want"
check_output "hooks: an unknown hook name stops the run (exit 2) naming communication.hook" 2 \
  'communication\.hook.*top-k|top-k.*communication\.hook' timeout "$(scaled 60)" \
  "$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" --set train.run_dir="$work/bad" --set communication.hook=top-k
