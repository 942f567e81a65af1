#!/usr/bin/env bash
# experiment.sh: lab 01's experiment (`make lab01` builds first): the memory planner on the course's models,
# why GPT-3 175B needs more than 1 TB of model states, and why one 24 GB card cannot train the 1B model.
set -euo pipefail
cd "$(dirname "$0")/../.."
mixpar=build/mixpar
if [ ! -x "$mixpar" ]; then
  echo "experiment.sh: $mixpar is missing; run 'make lab01', which builds it first" >&2
  exit 2
fi

# Print the command, then run it, so every number below can be reproduced by hand.
plan() {
  echo "\$ mixpar plan $*"
  "$mixpar" plan "$@"
}
section() { printf '\n==== %s\n\n' "$1"; }

section "1. Every preset on one rank: bf16-mixed + AdamW, micro-batch 1 at the full context"
plan --presets --device-memory 24GB

section "2. GPT-3 175B: the model states alone, for each recipe with Adam"
echo "\$ for r in fp32 fp16-mixed bf16-mixed bf16-pure; do mixpar plan --preset gpt3-175b --recipe \$r --optimizer adam --tsv; done"
printf '%-12s %16s %8s %14s\n' recipe params B/param "model states"
for recipe in fp32 fp16-mixed bf16-mixed bf16-pure; do
  # TSV columns: 10 params, 11..14 param grad master optim bytes
  "$mixpar" plan --preset gpt3-175b --recipe "$recipe" --optimizer adam --tsv | tail -n 1 |
    awk -F'\t' '{ states = $11 + $12 + $13 + $14;
                  printf "%-12s %16.0f %8.0f %11.3f TB\n", $2, $10, states / $10, states / 1e12 }'
done
echo
echo "fp32 + Adam (4 + 4 + 8) and mixed precision + Adam (2 + 2 + 4 + 8) both cost 16 bytes a parameter:"
echo "mixed precision saves activations and time, not model states. With Adam that is 2.79 TB before a"
echo "single activation; no device holds it, so the states must be sharded (ZeRO-3, here over 64 ranks):"
plan --preset gpt3-175b --recipe fp16-mixed --optimizer adam --zero 3 --world 64 --recompute full --device-memory 80GB

section "3. The 1.1B LLaMA-style model on one 24 GB card, plain AdamW (no sharding)"
plan --preset llama-1b --device-memory 24GB
echo
echo "Model states are 16 bytes a parameter whatever the batch; only activations scale with b and s."
echo "Selective recompute drops the a*s^2*b attention-score terms: it fits on paper, with little room left"
echo "for the temporaries the plan does not count (lines of the table):"
plan --preset llama-1b --recompute selective --device-memory 24GB | grep -E '^(model states|act|  blocks|total|device)'

section "4. What ZeRO changes for the 1B model: 4 and 8 ranks, each with 24 GB"
plan --preset llama-1b --zero all --world 4 --device-memory 24GB
echo
plan --preset llama-1b --zero all --world 8 --device-memory 24GB
echo
echo "ZeRO divides the model states by N; the activations (8.86 GB here) stay whole on every rank."

section "5. The compute budget: FLOPs = 6 N D + 12 L s h D, time = FLOPs / (G x peak x MFU)"
plan --preset llama-7b --tokens 1T --gpus 2048 --mfu 0.5 | sed -n '/^compute budget/,/GPU-hours/p'
echo
echo "The LLaMA paper reports 82,432 A100 GPU-hours for this run: MFU about 0.47."
echo
echo "\$ for each preset: mixpar plan --preset P --gpus 64 --mfu 0.4 (Chinchilla: 20 tokens per parameter, A100 bf16)"
printf '%-12s %16s %12s %12s %10s %10s\n' model params tokens FLOPs attention days
for p in gpt2-124m llama-1b llama-7b gpt3-175b; do
  "$mixpar" plan --preset "$p" --gpus 64 --mfu 0.4 | awk -v p="$p" '
    /^compute budget/ { match($0, /N = [0-9,]+/); n = substr($0, RSTART + 4, RLENGTH - 4)
                        match($0, /D = [0-9.e+]+/); d = substr($0, RSTART + 4, RLENGTH - 4) }
    /^  attention/ { match($0, /\([0-9.]+%/); att = substr($0, RSTART + 1, RLENGTH - 1) }
    /^  total/ { f = $2 }
    /^  time on/ { match($0, /= [0-9.]+ days/); days = substr($0, RSTART + 2, RLENGTH - 7) }
    END { printf "%-12s %16s %12s %12s %10s %10s\n", p, n, d, f, att, days }'
done
echo
echo "Compute grows as N^2 at Chinchilla's D = 20 N: ten times the parameters, a hundred times the FLOPs."
