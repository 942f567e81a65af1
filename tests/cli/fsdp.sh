#!/usr/bin/env bash
# fsdp.sh: ZeRO-3 and FSDP's strategies on real MPI ranks: DDP's losses (fp32 and bf16), model-state bytes per
# rank equal to the planner's, communication per step against the ZeRO paper's 3 Psi / 2 Psi, reductions that
# overlap backward, 16-bit gathers under bf16, prefetch that raises the gathered peak by a block, an exact resume
# from a stage-3 checkpoint (and on one rank), and the refusals: a hybrid group that does not divide the world,
# two ways of sharding at once, fp8 on sharded weights.
source "$(dirname "$0")/../lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT" || exit 1
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
base=(--config configs/synthetic-addition.json --quiet --set train.steps=40 --set scheduler.params.total_steps=40
      --set scheduler.params.warmup_steps=10 --set train.eval_interval=20 --set train.sample_interval=0
      --set train.checkpoint_interval=0 --set train.log_interval=40)
losses() { grep '"kind":"step"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }
max_diff() { paste <(losses "$1") <(losses "$2") | awk '$1 != $3 {bad=1} {d=$2-$4; if (d<0) d=-d; if (d>m) m=d} END {if (bad || NR == 0) print 1e9; else print m + 0}'; }
# run NAME RANKS [more --set ...]
run() {
  local name=$1 n=$2; shift 2
  "$MIXPAR" run -n "$n" -- "$MIXPAR" train "${base[@]}" --set train.run_dir="$work/$name" "$@" >"$work/$name.log" 2>&1
}
header() { head -n 1 "$work/$1/events.rank0.jsonl"; }
plan_of() { header "$1" | grep -o '"plan":{[^}]*}' | grep -o "\"$2\":[0-9]*" | cut -d: -f2; }
peak() { grep '"kind":"mem"' "$work/$1/events.rank$3.jsonl" | tail -n 1 | grep -o '"peak":{[^}]*}' | grep -o "\"$2\":[0-9]*" | cut -d: -f2; }
step_field() { grep '"kind":"step"' "$work/$1/events.rank0.jsonl" | sed -n 5p | grep -o "\"$2\":[0-9]*" | cut -d: -f2; }
within() { awk -v a="$1" -v b="$2" -v tol="$3" 'BEGIN{d=a-b; if (d<0) d=-d; exit !(b > 0 && d <= tol*b)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", a/b}'; }

# ---- 2 ranks: ZeRO-3 (DeepSpeed's keys) against DDP, fp32 and bf16 autocast
run ddp2 2
run z3 2 --set zero_optimization.stage=3
run ddp2_bf16 2 --set precision.recipe=bf16
run z3_bf16 2 --set precision.recipe=bf16 --set zero_optimization.stage=3
for pair in "ddp2 z3" "ddp2_bf16 z3_bf16"; do
  set -- $pair
  d=$(max_diff "$work/$1/events.rank0.jsonl" "$work/$2/events.rank0.jsonl")
  check "fsdp: $2's losses equal DDP's over 40 steps on 2 ranks (max |diff| $d <= 1e-5)" awk -v d="$d" 'BEGIN{exit !(d <= 1e-5)}'
done
# Under bf16 on the 16-bit kernel the blocks are gathered in 16 bits, straight into the weight cache (fsdp.c's
# gather_half): the same losses as above with half the gathered bytes of the blocks (the tied root stays fp32).
# Without the kernel there is no 16-bit cache, and the gathers stay fp32.
g32=$(step_field z3 gather_bytes) g16=$(step_field z3_bf16 gather_bytes)
if header z3_bf16 | grep -q '"matmul":"bf16 ([a-z0-9-]* kernel)"'; then
  check "fsdp: bf16 ZeRO-3 gathers $(ratio "$g16" "$g32") of fp32's bytes (16-bit blocks, fp32 root: 0.5-0.6)" \
    awk -v a="$g16" -v b="$g32" 'BEGIN{exit !(b > 0 && a >= 0.5*b && a <= 0.6*b)}'
else
  check "fsdp: bf16 ZeRO-3 without the 16-bit kernel gathers fp32's bytes ($g16 = $g32)" test "${g16:-x}" = "$g32"
fi
# LLaMA (untied head): the embeddings and the head are units of their own; under bf16 the blocks and the head
# come in 16 bits (with the kernel; without it the gathered matmul weights are rounded where they are, no
# cache): still DDP's losses bit for bit.
lbase=(--config configs/tiny-llama-poetry.json --set train.steps=10 --set scheduler.params.total_steps=10
       --set scheduler.params.warmup_steps=2 --set train.eval_interval=5 --set train.sample_interval=0
       --set train_micro_batch_size_per_gpu=4 --set precision.recipe=bf16)
run lddp 2 "${lbase[@]}"
run lz3 2 "${lbase[@]}" --set zero_optimization.stage=3
d=$(max_diff "$work/lddp/events.rank0.jsonl" "$work/lz3/events.rank0.jsonl")
check "fsdp: LLaMA bf16 under ZeRO-3 has DDP's losses (max |diff| $d <= 1e-5)" awk -v d="$d" 'BEGIN{exit !(d <= 1e-5)}'
# On 3 ranks a block (184,576 values) does not split evenly: the 16-bit gather goes through the staging buffer.
# Still DDP's losses bit for bit.
run lddp3 3 "${lbase[@]}" --set train_micro_batch_size_per_gpu=3 --set train.steps=6
run lz3_3 3 "${lbase[@]}" --set train_micro_batch_size_per_gpu=3 --set train.steps=6 --set zero_optimization.stage=3
d=$(max_diff "$work/lddp3/events.rank0.jsonl" "$work/lz3_3/events.rank0.jsonl")
check "fsdp: LLaMA bf16 under ZeRO-3 on 3 ranks (uneven shards) has DDP's losses (max |diff| $d)" test "$d" = 0
check_output "fsdp: the run header says stage 3, FULL_SHARD" 0 '"zero_stage":3,"fsdp":"FULL_SHARD","shard_size":2' header z3
# Recycled pages (base/mem.h): with blocks of 11 MB, the pages a unit gives back are reused by the next one, and
# the losses are those of a run that gives every page back to the system.
wide=("${lbase[@]}" --set model.layers=2 --set model.channels=512 --set model.heads=8 --set model.kv_heads=4
      --set model.ffn=1344 --set train.steps=4 --set train.eval_interval=0 --set zero_optimization.stage=3)
run wide 2 "${wide[@]}"
MIXPAR_RECYCLE_PAGES=0 run wide_given_back 2 "${wide[@]}"
recycled() { grep '"kind":"mem"' "$work/$1/events.rank$2.jsonl" | tail -n 1 | grep -o '"recycled":[0-9]*' | cut -d: -f2; }
d=$(max_diff "$work/wide/events.rank0.jsonl" "$work/wide_given_back/events.rank0.jsonl")
check "fsdp: recycled pages change no loss (max |diff| $d against MIXPAR_RECYCLE_PAGES=0)" test "$d" = 0
check "fsdp: MIXPAR_RECYCLE_PAGES=0 reuses no page ($(recycled wide_given_back 1) bytes)" test "$(recycled wide_given_back 1)" = 0
# Whether this kernel moves pages with mremap(MREMAP_DONTUNMAP) (Linux 5.7 and later), tried on a mapping of our own.
kernel_moves_pages() {
  python3 - <<'PY'
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype, libc.mremap.restype = ctypes.c_void_p, ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
a = libc.mmap(None, 8192, 3, 0x22, -1, 0)  # PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS
moved = libc.mremap(a, 4096, 4096, 1 | 2 | 4, a + 4096)  # MREMAP_MAYMOVE|MREMAP_FIXED|MREMAP_DONTUNMAP
sys.exit(0 if moved not in (None, ctypes.c_void_p(-1).value) else 1)
PY
}
if kernel_moves_pages; then
  check "fsdp: ZeRO-3 on 2 ranks reuses decommitted pages ($(recycled wide 1) bytes on rank 1)" test "$(recycled wide 1)" -gt 0
fi

# ---- 4 ranks: every strategy against DDP; memory against the planner; communication against the paper
q=(--set train_micro_batch_size_per_gpu=8)
run ddp4 4 "${q[@]}"
run full4 4 "${q[@]}" --set fsdp.sharding_strategy=FULL_SHARD --set fsdp.forward_prefetch=true
run sgo4 4 "${q[@]}" --set fsdp.sharding_strategy=SHARD_GRAD_OP
run none4 4 "${q[@]}" --set fsdp.sharding_strategy=NO_SHARD
run hybrid4 4 "${q[@]}" --set fsdp.sharding_strategy=HYBRID_SHARD --set fsdp.hybrid_shard_size=2
psi=$(( $(plan_of ddp4 param) / 4 ))
for r in full4 sgo4 none4 hybrid4; do
  d=$(max_diff "$work/ddp4/events.rank0.jsonl" "$work/$r/events.rank0.jsonl")
  check "fsdp: $r losses equal DDP's on 4 ranks (max |diff| $d <= 1e-5)" awk -v d="$d" 'BEGIN{exit !(d <= 1e-5)}'
  for tag in param grad optim; do
    got=$(peak $r $tag 3) want=$(plan_of $r $tag)
    check "fsdp: $r rank 3 $tag bytes $got = the planner's $want within 5%" within "${got:-0}" "${want:-0}" 0.05
  done
done
# Bytes one rank sends per step, in fp32 elements x 4: all-gathers and reduce-scatters move (N-1)/N of Psi each.
full=$(step_field full4 comm_bytes) sgo=$(step_field sgo4 comm_bytes) none=$(step_field none4 comm_bytes)
three=$(( 3 * psi * 3 / 4 * 4 )) two=$(( 2 * psi * 3 / 4 * 4 ))
check "fsdp: FULL_SHARD sends $(ratio "$full" "$three") x 3 Psi per step (the root unit is gathered once: 0.95-1.0)" \
  awk -v a="$full" -v b="$three" 'BEGIN{exit !(a <= b && a >= 0.95*b)}'
check "fsdp: SHARD_GRAD_OP sends $(ratio "$sgo" "$two") x 2 Psi per step (one all-gather fewer)" within "$sgo" "$two" 0.01
check "fsdp: NO_SHARD sends $(ratio "$none" "$two") x 2 Psi per step (DDP's all-reduce)" within "$none" "$two" 0.01
check "fsdp: FULL_SHARD gathers more than SHARD_GRAD_OP (its blocks again for backward)" test \
  "$(( $(step_field full4 gather_bytes) > $(step_field sgo4 gather_bytes) ))" = 1
overlap=$(awk -F'"step":' '
  /"kind":"span"/ && /"name":"backward"/ { split($2, a, ","); s=a[1]; match($0, /"t1":[0-9.e+-]+/); bend[s]=substr($0, RSTART+5, RLENGTH-5) }
  /"kind":"step"/ { split($2, a, ","); cur=a[1]+1 }
  /"kind":"comm"/ && /"op":"reduce_scatter"/ && !(cur in first) { match($0, /"t0":[0-9.e+-]+/); first[cur]=substr($0, RSTART+5, RLENGTH-5) }
  END { k=0; for (s in bend) if ((s in first) && first[s] < bend[s]) k++; print k }' "$work/full4/events.rank0.jsonl")
check "fsdp: the first reduce-scatter of a step starts before its backward ends (in $overlap of 40 steps)" test "${overlap:-0}" -ge 20

# ---- ZeRO-3 with offload_optimizer: the shards' optimizer state and master on the host, same losses
run z3off 2 --set zero_optimization.stage=3 --set zero_optimization.offload_optimizer.device=cpu
d=$(max_diff "$work/z3/events.rank0.jsonl" "$work/z3off/events.rank0.jsonl")
check "fsdp: ZeRO-3 with the optimizer offloaded has ZeRO-3's losses (max |diff| $d)" test "$d" = 0
check "fsdp: ZeRO-3 offload keeps no optimizer state on the device" test "$(peak z3off optim 0)" = 0
check "fsdp: ZeRO-3 offload's host pool is 16 bytes per shard element (the planner's)" \
  within "$(peak z3off host 0)" "$(plan_of z3off host)" 0.05

# ---- prefetch: a block gathered ahead costs a block of memory
run noprefetch 2 --set zero_optimization.stage=3 --set zero_optimization.stage3_prefetch_bucket_size=0 --set train.steps=5
run prefetch 2 --set zero_optimization.stage=3 --set train.steps=5
a=$(peak noprefetch comm 0) b=$(peak prefetch comm 0)
check "fsdp: prefetch raises the gathered peak ($a -> $b bytes)" test "${b:-0}" -gt "${a:-0}"

# ---- checkpoints: resume a stage-3 run exactly; resume it on one rank with the same global batch
run whole 2 --set zero_optimization.stage=3
run part 2 --set zero_optimization.stage=3 --set train.steps=20 --set train.checkpoint_interval=20
"$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" --set zero_optimization.stage=3 --set train.run_dir="$work/part" \
  --resume auto >"$work/resume.log" 2>&1
d=$(max_diff "$work/whole/events.rank0.jsonl" "$work/part/events.rank0.jsonl")
check "fsdp: a stage-3 checkpoint resumes bit for bit (max |diff| $d)" test "$d" = 0
check "fsdp: a stage-3 run saves a shard per rank" test -s "$work/part/checkpoint.sharded/rank-00001-of-00002.safetensors"
"$MIXPAR" train "${base[@]}" --set train_micro_batch_size_per_gpu=64 --set train.run_dir="$work/one" \
  --resume "$work/part/checkpoint.sharded" >"$work/one.log" 2>&1
d=$(paste <(losses "$work/one/events.rank0.jsonl") <(losses "$work/whole/events.rank0.jsonl" | tail -n 20) |
    awk '{d=$2-$4; if (d<0) d=-d; if (d>m) m=d} END {print (NR == 20) ? m + 0 : 1e9}')
check "fsdp: the stage-3 checkpoint resumes on one rank (max |diff| $d <= 1e-4)" awk -v d="$d" 'BEGIN{exit !(d <= 1e-4)}'

# HYBRID_SHARD: the two groups hold copies of the same shards; the first group's ranks save them, once.
hyb=("${q[@]}" --set fsdp.sharding_strategy=HYBRID_SHARD --set fsdp.hybrid_shard_size=2)
run hyb_part 4 "${hyb[@]}" --set train.steps=20 --set train.checkpoint_interval=20
"$MIXPAR" run -n 4 -- "$MIXPAR" train "${base[@]}" "${hyb[@]}" --set train.run_dir="$work/hyb_part" --resume auto \
  >"$work/hyb_resume.log" 2>&1
d=$(max_diff "$work/hybrid4/events.rank0.jsonl" "$work/hyb_part/events.rank0.jsonl")
check "fsdp: a HYBRID_SHARD checkpoint saves each shard once and resumes bit for bit (max |diff| $d)" test "$d" = 0

# A plain DDP run's single-file checkpoint, resumed with ZeRO-3: each rank takes its shards of the file.
run ddp_part 2 --set train.steps=20 --set train.checkpoint_interval=20
"$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" --set zero_optimization.stage=3 --set train.run_dir="$work/ddp_part" \
  --resume "$work/ddp_part/checkpoint.safetensors" >"$work/ddp_resume.log" 2>&1
d=$(max_diff "$work/ddp2/events.rank0.jsonl" "$work/ddp_part/events.rank0.jsonl")
check "fsdp: a DDP checkpoint resumes under ZeRO-3 (max |diff| $d <= 1e-5)" awk -v d="$d" 'BEGIN{exit !(d <= 1e-5)}'

# ---- refusals
check_output "fsdp: a hybrid group that does not divide the world is refused" 2 "hybrid_shard_size" \
  "$MIXPAR" run -n 4 -- "$MIXPAR" train "${base[@]}" --set train.run_dir="$work/bad1" \
  --set fsdp.sharding_strategy=HYBRID_SHARD --set fsdp.hybrid_shard_size=3
check_output "fsdp: an fsdp section with zero_optimization.stage 2 is refused" 2 "not both" \
  "$MIXPAR" train "${base[@]}" --set train.run_dir="$work/bad2" --set zero_optimization.stage=2 \
  --set fsdp.sharding_strategy=FULL_SHARD
check_output "fsdp: fp8 on sharded weights is refused" 2 "fp8" \
  "$MIXPAR" run -n 2 -- "$MIXPAR" train "${base[@]}" --set train.run_dir="$work/bad3" --set zero_optimization.stage=3 \
  --set precision.recipe=fp8
