#!/usr/bin/env python3
"""digest.py: for each lab NN given, prints "NN DIGEST": a digest of everything that decides the verdicts of the lab's
planted bugs (tests/mutants/run.sh): its lab.json and tests, its hidden tests, its mutants, the whole files that hold
its regions, and the test harness. Paths and contents, in sorted order, so every machine computes the same."""
import glob
import hashlib
import json
import os
import sys


def files_of(lab):
    roots = glob.glob(f"labs/lab{lab}-*/tests") + [f"grader/hidden/lab{lab}", f"tests/mutants/lab{lab}", "tests/harness"]
    found = set(glob.glob(f"labs/lab{lab}-*/lab.json"))
    for root in roots:
        for d, _, names in os.walk(root):
            found.update(os.path.join(d, n) for n in names)
    for spec in glob.glob(f"labs/lab{lab}-*/lab.json"):
        with open(spec) as f:
            found.update(json.load(f).get("files", []))
    return sorted(found)


def digest(lab):
    h = hashlib.sha256()
    for path in files_of(lab):
        h.update(path.encode() + b"\0")
        try:
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
        except OSError:
            h.update(b"missing")
    return h.hexdigest()[:16]


for lab in sys.argv[1:]:
    print(lab, digest(lab))
