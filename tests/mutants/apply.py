#!/usr/bin/env python3
"""apply.py: applies one planted bug (a .mutant file) to copies of the core files it names, inside lab NN's regions.

Usage: apply.py LAB MUTANT OUTDIR   -> writes OUTDIR/<path> for each file the mutant changes; prints those paths.

A .mutant file:
    # one line: the bug, as a student would make it
    file: core/amp/scaler.c
    - if (successful == s->cfg.growth_interval) {
    + if (successful > s->cfg.growth_interval) {
Each run of '-' lines is found (compared without leading and trailing blanks) as consecutive lines of ONE place
inside the bodies of the lab's regions in that file, and replaced by the '+' lines that follow (none: deleted),
with the first replaced line's indentation. A block that matches nowhere or in several places is an error
(exit 2), so a mutant never silently stops applying when the reference changes."""
import os
import re
import sys


def fail(msg):
    print(f"apply.py: {msg}", file=sys.stderr)
    sys.exit(2)


def region_lines(lines, lab):
    """Indices of the lines inside lab `lab`'s region bodies."""
    inside, out = False, set()
    begin = re.compile(r"/\* LAB %02d BEGIN\b" % lab)
    end = re.compile(r"/\* LAB %02d END \*/" % lab)
    for i, line in enumerate(lines):
        if begin.search(line):
            inside = True
        elif end.search(line):
            inside = False
        elif inside:
            out.add(i)
    return out


def parse(path):
    hunks, what, current_file, minus, plus = [], None, None, [], []
    def flush():
        nonlocal minus, plus
        if minus:
            hunks.append((current_file, minus, plus))
        elif plus:
            fail(f"{path}: '+' lines without the '-' lines they replace")
        minus, plus = [], []
    for n, raw in enumerate(open(path, encoding="utf-8"), 1):
        line = raw.rstrip("\n")
        if line.startswith("#") and what is None:
            what = line[1:].strip()
        elif line.startswith("file:"):
            flush()
            current_file = line[5:].strip()
        elif line.startswith("- ") or line == "-":
            if plus:
                flush()
            if current_file is None:
                fail(f"{path}:{n}: a '-' line before any 'file:' line")
            minus.append(line[2:].strip())
        elif line.startswith("+ ") or line == "+":
            if not minus:
                fail(f"{path}:{n}: '+' without '-' lines before it")
            plus.append(line[2:])
        elif line.strip() == "":
            flush()
        else:
            fail(f"{path}:{n}: expected '# what', 'file: PATH', '- old line' or '+ new line'")
    flush()
    if not what:
        fail(f"{path}: the first line must be '# the bug, in one line'")
    if not hunks:
        fail(f"{path}: no '-' lines: a mutant must change something")
    return what, hunks


def main():
    if len(sys.argv) != 4:
        fail("usage: apply.py LAB MUTANT OUTDIR")
    lab, mutant, outdir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    _, hunks = parse(mutant)
    texts = {}
    for path, minus, plus in hunks:
        if path not in texts:
            if not os.path.isfile(path):
                fail(f"{mutant}: no file {path}")
            texts[path] = open(path, encoding="utf-8").read().split("\n")
        lines = texts[path]
        inside = region_lines(lines, lab)
        found = [i for i in range(len(lines) - len(minus) + 1)
                 if all(i + k in inside and lines[i + k].strip() == minus[k] for k in range(len(minus)))]
        if len(found) != 1:
            fail(f"{mutant}: {path}: the lines '{minus[0]}'... match {len(found)} places in lab {lab:02d}'s regions "
                 "(expected exactly one)")
        i = found[0]
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        lines[i : i + len(minus)] = [indent + p if p.strip() else "" for p in plus]
    for path, lines in texts.items():
        target = os.path.join(outdir, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        print(path)


main()
