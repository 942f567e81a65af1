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

# The Chinese editions: slides/zh/NN-slug.md has one slide per slide of slides/NN-slug.md and no figure of its own.
zh=$(mktemp -d)
trap 'rm -rf "$work" "$zh"' EXIT
mkdir -p "$zh/tools" "$zh/slides/zh"
cp tools/slides.sh "$zh/tools/"
printf '%s\n' '# One' 'a' '' '![x](fig/98-a.png)' '' '# Two' 'b' > "$zh/slides/98-good.md"
printf '%s\n' '# 一' '甲' '' '![图](fig/98-a.png)' '' '# 二' '乙' > "$zh/slides/zh/98-good.md"
check "slides: a Chinese deck with its English deck's slides and figures passes" "$zh/tools/slides.sh" --check
printf '%s\n' '# 一' '甲' '' '# 二' '乙' '' '# 三' '![图](fig/98-b.png)' > "$zh/slides/zh/98-good.md"
check_output "slides: a Chinese deck with a slide more than its English deck is caught" 1 \
  "zh/98-good.md has 3 slides, its English deck slides/98-good.md has 2" "$zh/tools/slides.sh" --check
check_output "slides: ... and one showing a figure its English deck does not draw" 1 \
  "zh/98-good.md shows figures slides/98-good.md does not: ..fig/98-b.png." "$zh/tools/slides.sh" --check
printf '%s\n' '# 一' '甲' '' '# 二' '乙' > "$zh/slides/zh/97-orphan.md"
check_output "slides: ... and one without an English deck" 1 "zh/97-orphan.md has no English deck" \
  "$zh/tools/slides.sh" --check
