#!/usr/bin/env bash
# test_data_cli.sh: `mixpar data` from the command line: builds, caching, round trips, and every kind of bad
# input (arguments, corrupt token files, unknown characters, missing packages) rejected with exit code 2.
source "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT

# ---------------------------------------------------------------- usage
check_output "data: no subcommand is a usage error" 2 "usage: mixpar data" "$MIXPAR" data
check_output "data: --help lists the subcommands" 0 "build NAME" "$MIXPAR" data --help
check_output "data: unknown subcommand" 2 "unknown command 'frobnicate'" "$MIXPAR" data frobnicate
check_output "data list: names every dataset" 0 "tang .*fortunes-zh" "$MIXPAR" data list
check_output "data build: unknown dataset lists the names" 2 "datasets are: copy, reverse" "$MIXPAR" data build wikipedia
check_output "data build: no name" 2 "which dataset" "$MIXPAR" data build
check_output "data build: --size must be a count" 2 "--size expects a whole number" "$MIXPAR" data build copy --size abc --out "$w/x"
check_output "data build: --size 0 is refused" 2 "--size expects a whole number >= 1" "$MIXPAR" data build copy --size 0 --out "$w/x"
check_output "data build: --val must be in (0, 1)" 2 "--val expects a fraction" "$MIXPAR" data build copy --val 1.5 --out "$w/x"
check_output "data build: --tokenizer must be char, byte or bpe" 2 "char, byte or bpe, not 'wordpiece'" "$MIXPAR" data build copy --tokenizer wordpiece
check_output "data build: --size does not apply to a corpus" 2 "tang is a corpus" "$MIXPAR" data build tang --size 10
check_output "data build: an option without its value" 2 "--out needs a value" "$MIXPAR" data build copy --out
check_output "data build: unknown option" 2 "unknown option '--colour'" "$MIXPAR" data build copy --colour
check_output "data build: --out that is a file" 2 "not a directory" "$MIXPAR" data build copy --out "$ROOT/Makefile"

# ---------------------------------------------------------------- builds and caching
check_output "data build: addition builds" 0 "built .*vocabulary 14; tokens 1[0-9]+ train" \
  "$MIXPAR" data build addition --size 200 --out "$w/add"
check_output "data build: a second build is a no-op" 0 "up to date" "$MIXPAR" data build addition --size 200 --out "$w/add"
check_output "data build: --force rebuilds" 0 "built \(--force\)" "$MIXPAR" data build addition --size 200 --out "$w/add" --force
check_output "data build: other options rebuild" 0 "built \(the options differ" \
  "$MIXPAR" data build addition --size 200 --seed 5 --out "$w/add"
"$MIXPAR" data build addition --size 200 --seed 5 --out "$w/add2" >/dev/null
check "data build: two builds are byte-identical" bash -c "cd '$w' && for f in train.tokens val.tokens vocab.json info.json; do cmp add/\$f add2/\$f || exit 1; done"
check "data build: info.json's sha256 matches sha256sum" bash -c \
  "grep -A2 '\"train.tokens\"' '$w/add/info.json' | grep -q \$(sha256sum '$w/add/train.tokens' | cut -c1-64)"
check_output "data info: header and decoded text" 0 "MXPTOK01.*" "$MIXPAR" data info "$w/add/train.tokens" -n 20
check_output "data info: decodes with vocab.json beside the file" 0 "  \| [0-9]+\+[0-9]+=[0-9]+" "$MIXPAR" data info "$w/add/train.tokens"
"$MIXPAR" data decode "$w/add/train.tokens" >"$w/train.txt"
check "data decode/encode: decoding then encoding gives the same token file" bash -c \
  "'$MIXPAR' data encode '$w/add/vocab.json' --out '$w/again.tokens' <'$w/train.txt' >/dev/null && cmp '$w/again.tokens' '$w/add/train.tokens'"
check_output "data build: byte tokenizer" 0 "byte vocabulary 256" "$MIXPAR" data build grammar --size 100 --tokenizer byte --out "$w/gb"
check_output "make -C datasets: builds one dataset with DATA=" 0 "data/copy: built" \
  make -s -C datasets copy DATA="$w/data" MIXPAR="$MIXPAR"

# ---------------------------------------------------------------- encoding errors
check_output "data encode: a character outside the vocabulary is named with its position" 2 \
  "'x' \(U\+0078\) at character 3 \(line 1, column 4; byte offset 3\)" "$MIXPAR" data encode "$w/add/vocab.json" "12+x=3"
check_output "data encode: --unk maps it to <unk>" 0 "1 unknown characters mapped to <unk> \(id 13\)" \
  "$MIXPAR" data encode "$w/add/vocab.json" --unk "12+x=3"
check_output "data encode: Chinese outside the vocabulary" 2 "'霜' \(U\+971C\)" "$MIXPAR" data encode "$w/add/vocab.json" "1霜"
check_output "data encode: invalid UTF-8" 2 "invalid UTF-8 at byte offset 1" "$MIXPAR" data encode "$w/add/vocab.json" $'1\xff'
check_output "data encode: missing vocabulary" 2 "cannot read" "$MIXPAR" data encode "$w/none.json" "1"
printf '{"format": "mixpar-vocab-1", "kind": "char", "vocab_size": 3, "unk_id": 2, "tokens": ["b", "a"]}' >"$w/unsorted.json"
check_output "data encode: an unsorted vocab.json is named" 2 '"tokens"\[1\]' "$MIXPAR" data encode "$w/unsorted.json" "a"

# ---------------------------------------------------------------- corrupt token files
good="$w/add/train.tokens"
size=$(stat -c %s "$good")
# patch FILE OFFSET BYTES: overwrite bytes in place (printf escapes such as '\xff\xff').
patch() { printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }
: >"$w/empty.tokens"
head -c 40 "$good" >"$w/header.tokens"
cp "$good" "$w/magic.tokens"; patch "$w/magic.tokens" 0 'GARBAGE!'
head -c $((size - 1)) "$good" >"$w/short.tokens"
cp "$good" "$w/long.tokens"; printf 'xy' >>"$w/long.tokens"
cp "$good" "$w/token.tokens"; patch "$w/token.tokens" 70 '\xff\xff'
head -c 64 "$good" >"$w/zero.tokens"; patch "$w/zero.tokens" 16 '\x00\x00\x00\x00\x00\x00\x00\x00'
cp "$good" "$w/width.tokens"; patch "$w/width.tokens" 8 '\x03'
cp "$good" "$w/version.tokens"; patch "$w/version.tokens" 6 '09'
check_output "data info: missing file" 2 "cannot open" "$MIXPAR" data info "$w/none.tokens"
check_output "data info: empty file" 2 "empty \(0 bytes\).*byte offset 0" "$MIXPAR" data info "$w/empty.tokens"
check_output "data info: truncated header" 2 "inside the header \(truncated\)" "$MIXPAR" data info "$w/header.tokens"
check_output "data info: wrong magic" 2 "47 41 52 42 41 47 45 21 \('GARBAGE!'\) at byte offset 0" "$MIXPAR" data info "$w/magic.tokens"
check_output "data info: data truncated by one byte" 2 "truncated: the data ends at byte offset $((size - 1)), 1 bytes short" \
  "$MIXPAR" data info "$w/short.tokens"
check_output "data info: extra bytes" 2 "2 extra bytes after byte offset $size" "$MIXPAR" data info "$w/long.tokens"
check_output "data info: token >= vocab_size" 2 "token 65535 at index 3 \(byte offset 70\)" "$MIXPAR" data info "$w/token.tokens"
check_output "data info: zero tokens" 2 "token_count 0 at byte offset 16" "$MIXPAR" data info "$w/zero.tokens"
check_output "data info: bad token width" 2 "token_width 3 at byte offset 8" "$MIXPAR" data info "$w/width.tokens"
check_output "data info: unknown format version" 2 'version "09" at byte offset 6' "$MIXPAR" data info "$w/version.tokens"
check_output "data info: a directory" 2 "not a regular file" "$MIXPAR" data info "$w"
check_output "data info: vocab.json of another dataset" 2 "has 256 ids" "$MIXPAR" data info "$good" --vocab "$w/gb/vocab.json"

# ---------------------------------------------------------------- llm.c shards
# le32 N: N as 4 little-endian bytes (printf escapes).
le32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)); }
{ printf "$(le32 20240520)$(le32 1)$(le32 3)"; head -c $((1024 - 12)) /dev/zero; printf '\x50\xc4\xd0\x01\x00\x00'; } >"$w/shard.bin"
check_output "data info: an llm.c GPT-2 shard" 0 "llm.c gpt-2 shard \(magic 20240520 v1\)" "$MIXPAR" data info "$w/shard.bin"
check_output "data info: llm.c shard ids" 0 "ids +50256 464 0" "$MIXPAR" data info "$w/shard.bin"
{ printf "$(le32 20240520)$(le32 3)$(le32 3)"; head -c $((1024 - 12)) /dev/zero; printf '\x50\xc4\xd0\x01\x00\x00'; } >"$w/shard3.bin"
check_output "data info: llm.c shard of the wrong version" 2 "version 3 at byte offset 4" "$MIXPAR" data info "$w/shard3.bin"

# ---------------------------------------------------------------- bounded builds
# A size the disk or the memory cannot take is refused before anything is generated, not run until killed.
check_output "data build: --size 1e15 is refused at once, naming the size, the bytes needed and the bytes free" 2 \
  "--size 1000000000000000 .*needs about [0-9.e+]+ bytes of disk for its token files in .*\([0-9.e+]+ bytes free\)" \
  timeout 30 "$MIXPAR" data build addition --size 1e15 --out "$w/huge"
check "data build: the refused build wrote no tokens" test ! -e "$w/huge/train.tokens"
check_output "data build: the memory a build needs is bounded too" 2 \
  "about [0-9.e+]+ bytes of memory to build \(1e\+06 bytes available\)" \
  env MIXPAR_AVAILABLE_MEMORY=1MB timeout 30 "$MIXPAR" data build addition --size 1M --out "$w/mem"
check_output "data build: the refusal says what would fit" 2 "hint: +a smaller --size: about [0-9.e+]+ examples fit" \
  env MIXPAR_AVAILABLE_MEMORY=1MB timeout 30 "$MIXPAR" data build addition --size 1M --out "$w/mem"

# ---------------------------------------------------------------- token files against info.json's sha256
tc=(--config configs/synthetic-addition.json --quiet --set data.dir="$w/tc" --set train.steps=2
    --set scheduler.params.warmup_steps=1 --set scheduler.params.total_steps=2 --set train.eval_interval=0
    --set train.sample_interval=0 --set train.checkpoint_interval=0 --set train.run_dir="$w/tcrun")
check "train: intact token files train" "$MIXPAR" train "${tc[@]}"
check "train: a verified token file is stamped, so it is hashed once" test -s "$w/tc/addition/.train.tokens.verified"
t="$w/tc/addition/train.tokens"
cp -p "$t" "$w/train.orig"
# One token changed into another valid one: every format check passes, only the digest can tell.
b=$(od -An -tu1 -j 74 -N1 "$t" | tr -d ' ')
patch "$t" 74 "$(printf '\\x%02x' $(((b + 1) % 14)))"
check_output "train: a token file changed after the build exits 2 naming the file, recorded and found sha256" 2 \
  "'$t' has sha256 [0-9a-f]{64}; .*info.json records [0-9a-f]{64}" "$MIXPAR" train "${tc[@]}"
touch -r "$w/train.orig" "$t"
check_output "train: ... also with its mtime set back (the stamp keys on ctime too)" 2 "train.tokens' has sha256" \
  "$MIXPAR" train "${tc[@]}"
check_output "train: the refusal says how to rebuild" 2 "hint: .*mixpar data build addition --force" "$MIXPAR" train "${tc[@]}"
cp "$w/train.orig" "$t"
check "train: the file put back trains again" "$MIXPAR" train "${tc[@]}"
v="$w/tc/addition/val.tokens"
patch "$v" 64 "$(printf '\\x%02x' $((($(od -An -tu1 -j 64 -N1 "$v" | tr -d ' ') + 1) % 14)))"
check_output "train: a changed val.tokens is refused too" 2 "val.tokens' has sha256" "$MIXPAR" train "${tc[@]}"

# ---------------------------------------------------------------- corpora
mkdir -p "$w/nofortunes"
check_output "data build: a missing package is named, with make deps" 2 "make deps.*apt-get install fortunes-zh" \
  env MIXPAR_FORTUNES_DIR="$w/nofortunes" "$MIXPAR" data build tang --out "$w/tang"
if [ -r /usr/share/games/fortunes/tang300 ]; then
  check_output "data build: tang from fortunes-zh" 0 "built .*char vocabulary [0-9]{4}" "$MIXPAR" data build tang --out "$w/tang"
  check_output "data info: Tang poems decoded" 0 "  \| 作者：" "$MIXPAR" data info "$w/tang/train.tokens" -n 100
  check "data build: tang text has no colour codes" bash -c "! '$MIXPAR' data decode '$w/tang/train.tokens' | grep -q \$'\\x1b'"
fi
