#!/usr/bin/env bash
# slides.sh: every slide deck renders as one slide per "# " heading of its source (tools/slides.sh --check),
# and the check itself catches a deck whose slides sit under "## " headings.
source "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
if ! command -v pandoc >/dev/null; then echo "not ok - slides: pandoc is missing (make deps installs it)"; exit 1; fi
tools/slides.sh --check
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tools" "$work/slides"
cp tools/slides.sh "$work/tools/"
printf '%s\n' '# Chapter 99' 'intro' '' '## First' 'a' '' '## Second' 'b' > "$work/slides/99-planted.md"
check_output "slides: a deck of one '#' and two '##' headings is caught" 1 "renders as 1 slides, its source has 1" \
  "$work/tools/slides.sh" --check
