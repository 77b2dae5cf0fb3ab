#!/usr/bin/env python3
"""Were the generator's planted near-duplicates found? Reads the truth of `neardup bench
gen-docs --truth` ({"a", "b", "jaccard"}: b a planted copy of a) and the outcomes of
`neardup load --only-if-unique --outcomes F [--matched-only]` ({"id", "inserted",
"matches"}), and prints, per band of exact Jaccard similarity, how many planted copies the
load's decision (the service's) found their original among their matches.

  python3 scripts/truth_found.py truth.jsonl outcomes.jsonl [--threshold 0.8]

A copy whose original was itself refused (a near-duplicate of an earlier document) is
counted apart: it may match that earlier document instead. Below about the threshold
plus 0.05 a copy can be missed by design: the sketch estimates the similarity (root mean
square error about 0.02) and the bands find a pair at the threshold with probability
0.9995 (docs/dedup.md). Plain Python 3.
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("truth")
    ap.add_argument("outcomes")
    ap.add_argument("--threshold", type=float, default=0.8)
    args = ap.parse_args()
    wanted = {}
    with open(args.truth) as f:
        for line in f:
            p = json.loads(line)
            wanted.setdefault(p["b"], []).append((p["a"], p["jaccard"]))
    found = {}
    refused = set()
    with open(args.outcomes) as f:
        for line in f:
            o = json.loads(line)
            if o["id"] in wanted:
                found[o["id"]] = set(o["matches"])
            if not o["inserted"]:
                refused.add(o["id"])
    edges = [1.0001, 0.95, 0.9, 0.85, args.threshold + 0.02, args.threshold, args.threshold - 0.05, 0.0]
    bands = [{"from": lo, "to": min(hi, 1.0), "pairs": 0, "found": 0, "original_refused": 0}
             for hi, lo in zip(edges, edges[1:])]
    for b, pairs in wanted.items():
        for a, j in pairs:
            band = next(x for x in bands if x["from"] <= j)
            if a in refused:
                band["original_refused"] += 1
                continue
            band["pairs"] += 1
            band["found"] += int(a in found.get(b, ()))
    for band in bands:
        band["recall"] = round(band["found"] / band["pairs"], 6) if band["pairs"] else None
        print(json.dumps(band))


if __name__ == "__main__":
    main()
