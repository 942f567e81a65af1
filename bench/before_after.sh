#!/usr/bin/env bash
# before_after.sh: the kernel and step benchmarks of an older commit and of this tree, run alternately in one go
# (old, new, old, new, ...), so both see the same machine; prints each non-GEMM kernel's best time and share of
# the triad bandwidth, and the GPT-2 124M step (fp32 % of the sgemm peak, bf16 / fp32), old beside new.
# Usage: bench/before_after.sh OLD_REV [ROUNDS]   (default 3 rounds; about 2 minutes a round on 2 cores)
# The old commit is exported (git archive) and built in a temporary folder; logs go to runs/bench/before_after/.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: bench/before_after.sh OLD_REV [ROUNDS]}
rounds=${2:-3}
git rev-parse --verify --quiet "$rev^{commit}" >/dev/null || { echo "before_after: '$rev' is not a commit" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "before_after: ROUNDS must be a whole number >= 1, got '$rounds'" >&2; exit 2; }
old=$(mktemp -d)
trap 'rm -rf "$old"' EXIT
logs=runs/bench/before_after
mkdir -p "$logs"
rm -f "$logs"/*.log
benches=(build/bench/ops_bench build/bench/train_step build/bench/amp_perf)
make -s -j2 "${benches[@]}"
git archive "$rev" | tar -x -C "$old"
mkdir -p "$old/build" && cp build/config.mk build/.deps-ok "$old/build/"
make -s -C "$old" -j2 "${benches[@]}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
for ((r = 1; r <= rounds; r++)); do
  for side in old new; do
    dir=.; [[ $side == old ]] && dir=$old
    "$dir/build/bench/ops_bench" 5 >"$logs/ops_$side.$r.log"
    "$dir/build/bench/train_step" 6 >"$logs/step_$side.$r.log"
    "$dir/build/bench/amp_perf" --recipes fp32,bf16 --steps 3 >"$logs/amp_$side.$r.log"
  done
  echo "round $r of $rounds done"
done
# Per kernel: the best fwd and bwd ms over the rounds, with the share of the triad ops_bench printed for it.
awk -v rounds="$rounds" '
  FNR == 1 { n = split(FILENAME, path, "/"); split(path[n], f, /[_.]/); side = f[2]; per_level = 0 } # ops_SIDE.R.log
  /^per instruction set level/ { per_level = 1 } # the newer ops_bench adds this table after the main one
  !per_level && /^(encoder|layernorm|attention|residual|gelu|crossentropy|rmsnorm|swiglu|rope)/ && NF >= 9 {
    name = substr($0, 1, 16); sub(/ +$/, "", name); rest = substr($0, 42); n = split(rest, v, " ")
    key = name SUBSEP side
    if (!(key in fwd) || v[1] < fwd[key]) { fwd[key] = v[1]; pf[key] = v[n - 2] + 0 }
    if (!(key in bwd) || v[2] < bwd[key]) { bwd[key] = v[2]; pb[key] = v[n] + 0 }
    if (!(name in seen)) { seen[name] = 1; order[++count] = name }
  }
  END {
    printf "%-16s %22s %22s   (best of %d rounds; %% of the triad measured in that run)\n", "kernel", "old fwd / bwd ms", "new fwd / bwd ms", rounds
    for (i = 1; i <= count; i++) {
      o = order[i] SUBSEP "old"; w = order[i] SUBSEP "new"
      printf "%-16s %8.3f %3.0f%% %6.3f %3.0f%%  %8.3f %3.0f%% %6.3f %3.0f%%   x%.1f / x%.1f\n", order[i], fwd[o], pf[o], bwd[o], pb[o],
        fwd[w], pf[w], bwd[w], pb[w], fwd[o] / fwd[w], bwd[o] / bwd[w]
    }
  }' "$logs"/ops_old.*.log "$logs"/ops_new.*.log
for side in old new; do
  # train_step: the fastest round's median step and its % of the peak; ops_bench: its kernels run in step order
  best=$(grep -h '^median step' "$logs"/step_$side.*.log | sort -k3 -g | head -1 | awk '{print $3}')
  peak=$(grep -h -A1 "^median step $best " "$logs"/step_$side.*.log | grep -o '[0-9]*% of peak' | head -1)
  order=$(grep -h 'in step order' "$logs"/ops_$side.*.log | sed -E 's/.*: ([0-9]+) ms.*= ([0-9]+)% of sgemm peak/\1 \2/' |
    sort -g | head -1)
  # amp_perf's speed table, per round: the bf16 and fp32 median steps; the round with the fastest bf16 step
  amp=$(for f in "$logs"/amp_$side.*.log; do
    awk '/^recipe +step s/ { on = 1; next } on && ($1 == "fp32" || $1 == "bf16") { t[$1] = $2 } /^\(/ { on = 0 }
         END { printf "%s %s %.2f\n", t["bf16"], t["fp32"], t["bf16"] / t["fp32"] }' "$f"
  done | sort -g | head -1)
  read -r bf16 fp32 ratio <<<"$amp"
  printf '%s: train_step median %s s (%s); kernels in step order %s ms (%s%% of peak); amp_perf fp32 %s s, bf16 %s s = %sx fp32\n' \
    "$side" "$best" "$peak" "${order% *}" "${order#* }" "$fp32" "$bf16" "$ratio"
done
