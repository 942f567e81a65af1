# common.sh: sourced by every gallery entry: the repository root, mixpar, a scratch folder removed on exit,
# and a short training run on the tiny addition config (the same for every rank unless an entry changes it).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
cd "$ROOT" || exit 1
M="$ROOT/build/mixpar"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# 20 steps, no evaluation or samples: a second or two on 2 ranks.
TRAIN=(--config "$ROOT/configs/synthetic-addition.json" --quiet --set train.steps=20
       --set scheduler.params.warmup_steps=5 --set scheduler.params.total_steps=20 --set train.eval_interval=0
       --set train.sample_interval=0 --set train.checkpoint_interval=0 --set data.dir="$ROOT/data")
