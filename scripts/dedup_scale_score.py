#!/usr/bin/env python3
"""Scores `neardup dedup` on a `neardup bench gen-docs` corpus against its truth.

The truth lists every planted pair (an original, a copy of it) with its exact Jaccard
similarity. Checked here:

- recall: every planted pair with J >= --must (0.85) is among the reported pairs;
- safety: every removed document is a near-duplicate of the document kept for it: their
  pair is planted with J >= --floor (0.7), or both are copies of one original and the
  triangle inequality of the Jaccard distance bounds their similarity from below by
  J(o, a) + J(o, b) - 1 >= --floor. With --corpus (the directory of zstd shards), the
  removals neither proves are measured on the texts (exact Jaccard of lowercased \w+ word
  5-shingles, read with zstdcat and grep); any removal below --floor is counted as wrong.

    python3 scripts/dedup_scale_score.py --truth truth.jsonl --pairs pairs.jsonl \
        --clusters clusters.jsonl
"""

import argparse
import glob
import json
import re
import subprocess
import sys


def shingles(text):
    """Lowercased \\w+ word 5-shingles (the generator writes words without spaceless
    scripts, so this is what dedup compares)."""
    w = re.findall(r"\w+", text.lower())
    if len(w) < 5:
        return {tuple(w)} if w else set()
    return {tuple(w[i:i + 5]) for i in range(len(w) - 4)}


def texts_of(corpus, ids):
    """The texts of `ids` in the shards of `corpus`: lines found by grep, parsed."""
    found = {}
    pattern = "\n".join(f'"id":"{i}"' for i in sorted(ids))
    for shard in sorted(glob.glob(f"{corpus}/*.jsonl.zst")):
        z = subprocess.Popen(["zstdcat", shard], stdout=subprocess.PIPE)
        g = subprocess.run(["grep", "-F", pattern], stdin=z.stdout, capture_output=True, text=True)
        z.wait()
        for line in g.stdout.splitlines():
            d = json.loads(line)
            if d["id"] in ids:
                found[d["id"]] = d["text"]
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--truth", required=True)
    ap.add_argument("--pairs", required=True)
    ap.add_argument("--clusters", required=True)
    ap.add_argument("--must", type=float, default=0.85)
    ap.add_argument("--floor", type=float, default=0.7)
    ap.add_argument("--corpus", help="directory of the zstd shards, to measure unproven removals")
    a = ap.parse_args()

    planted = {}  # (original, copy) -> J
    original_of = {}  # copy -> (original, J)
    with open(a.truth) as f:
        for line in f:
            t = json.loads(line)
            planted[(t["a"], t["b"])] = t["jaccard"]
            original_of[t["b"]] = (t["a"], t["jaccard"])

    found = set()
    with open(a.pairs) as f:
        for line in f:
            p = json.loads(line)
            x, y = str(p["a"]), str(p["b"])
            found.add((x, y))
            found.add((y, x))

    bins = [(0.0, 0.7), (0.7, 0.8), (0.8, 0.85), (0.85, 0.9), (0.9, 1.01)]
    by_bin = {b: [0, 0] for b in bins}
    must_missed = 0
    for (o, c), j in planted.items():
        hit = (o, c) in found
        for b in bins:
            if b[0] <= j < b[1]:
                by_bin[b][0] += 1
                by_bin[b][1] += hit
        if j >= a.must and not hit:
            must_missed += 1

    removed = planted_ok = sibling_ok = measured_ok = wrong = 0
    unproven = []  # (representative, removed, reported similarity)
    with open(a.clusters) as f:
        for line in f:
            c = json.loads(line)
            rep = str(c["representative"])
            for m in c["members"]:
                d = str(m["id"])
                if d == rep:
                    continue
                removed += 1
                j = planted.get((rep, d), planted.get((d, rep)))
                if j is not None and j >= a.floor:
                    planted_ok += 1
                    continue
                if m.get("similarity") == 1 and m.get("distance") == 0:
                    planted_ok += 1  # the same text
                    continue
                od, oj = original_of.get(d, (None, 0))
                orr, orj = original_of.get(rep, (None, 0))
                if od is not None and od == orr and oj + orj - 1 >= a.floor:
                    sibling_ok += 1
                    continue
                unproven.append((rep, d, m.get("similarity")))

    examples = []
    texts = texts_of(a.corpus, {x for u in unproven for x in u[:2]}) if a.corpus and unproven else {}
    for rep, d, sim in unproven:
        if rep in texts and d in texts:
            j = len(shingles(texts[rep]) & shingles(texts[d])) / max(1, len(shingles(texts[rep]) | shingles(texts[d])))
            if j >= a.floor:
                measured_ok += 1
                continue
        else:
            j = None
        wrong += 1
        if len(examples) < 5:
            examples.append((rep, d, sim, j))

    out = {
        "planted": len(planted),
        "recall_by_jaccard": {
            f"{lo:.2f}-{min(hi, 1.0):.2f}": {
                "pairs": n,
                "found": round(h / n, 4) if n else None,
            }
            for (lo, hi), (n, h) in by_bin.items()
        },
        f"missed_at_or_above_{a.must}": must_missed,
        "removed": removed,
        "removed_for_a_planted_pair": planted_ok,
        "removed_for_a_sibling_copy": sibling_ok,
        "removed_at_or_above_floor_by_the_texts": measured_ok,
        "wrongly_removed": wrong,
        "wrong_examples": examples,
    }
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0 if must_missed == 0 and wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
