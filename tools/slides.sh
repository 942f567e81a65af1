#!/usr/bin/env bash
# slides.sh: `make slides`: each slides/NN-slug.md becomes build/slides/NN-slug.html, one self-contained file
# (pandoc's dzslides, images embedded) that works offline. Figures come from slides/NN-slug.figures.sh,
# which writes PNGs made by gnuplot from real mixpar output into the folder it is given.
# Every deck puts one slide under each level-1 heading ("# Title"); a "## " heading is a sub-heading inside a
# slide, never a slide of its own (pandoc's default would make a deck of "#" and "##" one title and one giant slide).
#   tools/slides.sh            render every deck with its figures
#   tools/slides.sh --check    render every deck without figures and check that it has one slide per "# "
#                              heading of its source (outside code blocks); exits 1 naming a deck that does not
# Chinese editions: slides/zh/NN-slug.md is deck slides/NN-slug.md in Chinese, one slide per English slide in the
# same order, showing the same figures (fig/NAME.png, drawn once by the English deck's figures script); it
# renders to build/slides/zh/NN-slug.html. --check also checks that each has an English deck, the same number
# of slides, and no figure the English deck does not draw.
set -euo pipefail
cd "$(dirname "$0")/.."
pandoc_slides=(pandoc -s -t dzslides --slide-level=1)
shopt -s nullglob
decks=(slides/[0-9][0-9]-*.md)
zh_decks=(slides/zh/[0-9][0-9]-*.md)
if [ ${#decks[@]} -eq 0 ]; then echo "no decks in slides/"; exit 0; fi
# slide_headings DECK: its "# " headings outside code blocks; figures DECK: the figures it shows, sorted
slide_headings() { awk '/^```/{fenced = !fenced} !fenced && /^# /{n++} END{print n + 0}' "$1"; }
figures() { grep -o '](fig/[^)]*)' "$1" | sort -u || true; }

if [ "${1:-}" = --check ]; then
  command -v pandoc >/dev/null || { echo "slides: pandoc is not installed (make deps installs it)" >&2; exit 2; }
  bad=0
  for deck in "${decks[@]}" ${zh_decks[@]+"${zh_decks[@]}"}; do
    headings=$(slide_headings "$deck")
    # Without --self-contained the figures need not exist; the slide count does not depend on them.
    rendered=$("${pandoc_slides[@]}" "$deck" 2>/dev/null | tr '\n' ' ' | grep -o '<section[^>]*class="slide level1' | wc -l)
    if [ "$rendered" -ne "$headings" ] || [ "$headings" -lt 2 ]; then
      echo "not ok - slides: $deck renders as $rendered slides, its source has $headings '# ' headings"; bad=1
    else
      echo "ok - slides: $deck renders as its $headings slides"
    fi
    [ "$(dirname "$deck")" = slides/zh ] || continue
    english=slides/$(basename "$deck")
    if [ ! -f "$english" ]; then
      echo "not ok - slides: $deck has no English deck $english"; bad=1; continue
    fi
    if [ "$(slide_headings "$english")" -ne "$headings" ]; then
      echo "not ok - slides: $deck has $headings slides, its English deck $english has $(slide_headings "$english")"; bad=1
    fi
    extra=$(comm -23 <(figures "$deck") <(figures "$english") | paste -sd' ')
    if [ -n "$extra" ]; then echo "not ok - slides: $deck shows figures $english does not: $extra"; bad=1; fi
  done
  exit "$bad"
fi
[ $# -eq 0 ] || { echo "usage: tools/slides.sh [--check]" >&2; exit 2; }

out=build/slides
mkdir -p "$out/fig"
for deck in "${decks[@]}"; do
  name=$(basename "$deck" .md)
  figures="slides/$name.figures.sh"
  if [ -x "$figures" ]; then
    "$figures" "$out/fig" || { echo "slides: $figures failed" >&2; exit 1; }
  fi
  "${pandoc_slides[@]}" --self-contained --resource-path="$out:slides" -o "$out/$name.html" "$deck"
  echo "slides: $out/$name.html"
done
# The Chinese editions show the figures just drawn for their English decks.
[ ${#zh_decks[@]} -eq 0 ] || mkdir -p "$out/zh"
for deck in ${zh_decks[@]+"${zh_decks[@]}"}; do
  name=$(basename "$deck" .md)
  "${pandoc_slides[@]}" --self-contained --resource-path="$out:slides" -o "$out/zh/$name.html" "$deck"
  echo "slides: $out/zh/$name.html"
done
