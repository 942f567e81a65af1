#!/usr/bin/env bash
# data_bpe.sh: `mixpar data build --tokenizer bpe --vocab N --shards N` (lab 22): a BPE dataset in shards that
# trains, decodes back to its text and samples; bad options, a bad merge list and a changed shard exit 2.
source "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT

# ---------------------------------------------------------------- options
check_output "bpe: --vocab without --tokenizer bpe" 2 "add --tokenizer bpe" "$MIXPAR" data build grammar --vocab 300 --out "$w/x"
check_output "bpe: --vocab below 257" 2 "--vocab expects a whole number >= 257" \
  "$MIXPAR" data build grammar --tokenizer bpe --vocab 200 --out "$w/x"
check_output "bpe: --vocab above 4096" 2 "--vocab expects 257 to 4096" \
  "$MIXPAR" data build grammar --tokenizer bpe --vocab 5000 --out "$w/x"
check_output "bpe: --shards 0" 2 "--shards expects a whole number >= 1" "$MIXPAR" data build grammar --shards 0 --out "$w/x"
check_output "bpe: --help names the options" 0 "--shards N" "$MIXPAR" data build --help

# ---------------------------------------------------------------- a BPE dataset in shards
check_output "bpe: grammar builds with a BPE of 300 ids into 3 shards" 0 "bpe vocabulary 300" \
  "$MIXPAR" data build grammar --size 500 --tokenizer bpe --vocab 300 --shards 3 --out "$w/grammar"
check "bpe: three shards and no train.tokens" bash -c \
  "ls '$w/grammar'/train-0000[0-2]-of-00003.tokens >/dev/null && [ ! -e '$w/grammar/train.tokens' ]"
check_output "bpe: data info joins the shards" 0 "shards +3, joined in order" "$MIXPAR" data info "$w/grammar/train.tokens" -n 4
check_output "bpe: data info on one shard shows its place" 0 "shard +1 of 3" "$MIXPAR" data info "$w/grammar/train-00001-of-00003.tokens" -n 0
check "bpe: the shards and val.tokens decode to the text info.json hashed" bash -c \
  "want=\$(awk -F'\"' '/\"text\"/ { t = 1 } t && /\"sha256\"/ { print \$4; exit }' '$w/grammar/info.json');
   got=\$({ '$MIXPAR' data decode '$w/grammar/train.tokens'; '$MIXPAR' data decode '$w/grammar/val.tokens'; } | sha256sum | cut -c1-64);
   [ \"\$want\" = \"\$got\" ]"
check_output "bpe: a second build is a no-op" 0 "up to date" \
  "$MIXPAR" data build grammar --size 500 --tokenizer bpe --vocab 300 --shards 3 --out "$w/grammar"
check_output "bpe: a build without shards replaces them" 0 "built" \
  "$MIXPAR" data build grammar --size 500 --tokenizer bpe --vocab 300 --out "$w/g1"
"$MIXPAR" data build grammar --size 500 --tokenizer bpe --vocab 300 --shards 2 --out "$w/g1" >/dev/null
check "bpe: rebuilding with --shards removes the old train.tokens" bash -c \
  "[ ! -e '$w/g1/train.tokens' ] && ls '$w/g1'/train-0000[01]-of-00002.tokens >/dev/null"
check_output "bpe: encode and decode any bytes, invalid UTF-8 too" 0 "^[0-9 ]+$" \
  bash -c "printf 'the \\xff\\xfe cat' | '$MIXPAR' data encode '$w/grammar/vocab.json'"
check "bpe: training reads the shards" timeout "$(scaled 60)" "$MIXPAR" train --config configs/tiny-poetry.json --quiet \
  --set data.dir="$w" --set data.dataset=grammar --set model.layers=1 --set model.channels=32 --set model.context=16 \
  --set data.seq_len=16 --set train_micro_batch_size_per_gpu=4 --set train.steps=3 --set scheduler.params.warmup_steps=1 --set train.eval_interval=0 \
  --set train.sample_interval=0 --set train.hist_interval=0 --set train.checkpoint_interval=3 \
  --set train.run_dir="$w/run"
check_output "bpe: mixpar sample decodes with the BPE" 0 "^the" "$MIXPAR" sample --checkpoint "$w/run/checkpoint.safetensors" \
  --prompt "the" --tokens 8

# ---------------------------------------------------------------- bad files
cp "$w/grammar/train-00001-of-00003.tokens" "$w/flip.tokens"
printf '\x01' | dd of="$w/flip.tokens" bs=1 seek=100 conv=notrunc status=none
check_output "bpe: a changed byte in a shard is caught by its sha256" 2 "have sha256 [0-9a-f]+; the header records" \
  "$MIXPAR" data info "$w/flip.tokens" -n 0
cp "$w/flip.tokens" "$w/grammar/train-00001-of-00003.tokens"
check_output "bpe: training refuses a set with a changed shard" 2 "train-00001-of-00003.tokens.*have sha256" \
  "$MIXPAR" train --config configs/tiny-poetry.json --quiet --set data.dir="$w" --set data.dataset=grammar --set train.steps=2 --set scheduler.params.warmup_steps=1 \
  --set train.run_dir="$w/run2"
rm "$w/grammar/train-00002-of-00003.tokens"
check_output "bpe: a missing shard is named" 2 "train-00001-of-00003.tokens|cannot open .*train-00002-of-00003" \
  "$MIXPAR" data info "$w/grammar/train.tokens" -n 0
sed 's/"merges":\t\[\[/"merges":\t[[999, /' "$w/grammar/vocab.json" > "$w/badmerge.json"
check_output "bpe: a merge list with a wrong pair is refused" 2 "merges" "$MIXPAR" data encode "$w/badmerge.json" "abc"
sed 's/"vocab_size":\t300/"vocab_size":\t301/; s/"vocab_size": 300/"vocab_size": 301/' "$w/grammar/vocab.json" > "$w/badsize.json"
check_output "bpe: vocab_size that does not match the merges" 2 "256 \+ the number of" "$MIXPAR" data encode "$w/badsize.json" "abc"
