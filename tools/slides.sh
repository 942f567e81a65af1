#!/usr/bin/env bash
# slides.sh: `make slides`: each slides/NN-slug.md becomes build/slides/NN-slug.html, one self-contained file
# (pandoc's dzslides, images embedded) that works offline. Figures come from slides/NN-slug.figures.sh,
# which writes PNGs made by gnuplot from real mixpar output into the folder it is given.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/slides
mkdir -p "$out/fig"
shopt -s nullglob
decks=(slides/[0-9][0-9]-*.md)
if [ ${#decks[@]} -eq 0 ]; then echo "no decks in slides/"; exit 0; fi
for deck in "${decks[@]}"; do
  name=$(basename "$deck" .md)
  figures="slides/$name.figures.sh"
  if [ -x "$figures" ]; then
    "$figures" "$out/fig" || { echo "slides: $figures failed" >&2; exit 1; }
  fi
  pandoc -s -t dzslides --self-contained --resource-path="$out:slides" -o "$out/$name.html" "$deck"
  echo "slides: $out/$name.html"
done
