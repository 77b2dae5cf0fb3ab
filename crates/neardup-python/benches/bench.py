#!/usr/bin/env python3
"""Times the Python module on the peers' workloads; one JSON line per result.

    python benches/bench.py fp CORPUS.jsonl          # fingerprint_many over every "text"
    python benches/bench.py allpairs FPS.u64 [K]     # find_all among little-endian u64s

Each figure is the best of REPEATS (default 3) runs. Run the peers on the same files in
the same session to compare (for example gaoya's Python word fingerprints, and the
`neardup find-all` / `simhash-find-all` commands under hyperfine or /usr/bin/time).
"""
import json
import os
import sys
import time

import neardup
from neardup import simhash

REPEATS = int(os.environ.get("REPEATS", "3"))


def best(f):
    times = []
    out = None
    for _ in range(REPEATS):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return min(times), out


def emit(**fields):
    print(json.dumps({"peer": "neardup-python", **fields}), flush=True)


def fp(path):
    with open(path, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    mb = sum(len(t.encode()) for t in texts) / 1e6
    one, _ = best(lambda: [neardup.fingerprint(t) for t in texts])
    many, _ = best(lambda: neardup.fingerprint_many(texts))
    # The features gaoya's `word` variant votes with: word unigrams, unweighted.
    unigrams = neardup.Fingerprinter(window=1, weighting="none")
    like, _ = best(lambda: unigrams.fingerprint_many(texts))
    for variant, s in [("fingerprint, one call per text", one), ("fingerprint_many", many),
                       ("fingerprint_many, window=1 weighting='none'", like)]:
        emit(workload="fp", variant=variant, docs=len(texts), mb=round(mb, 2),
             seconds=round(s, 4), throughput=round(len(texts) / s), unit="docs/s")


def allpairs(path, k):
    import array
    values = array.array("Q")
    with open(path, "rb") as f:
        values.frombytes(f.read())
    as_list = values.tolist()
    inputs = [("list", as_list), ("array.array('Q') buffer", values)]
    try:
        import numpy
        inputs.append(("numpy uint64", numpy.frombuffer(values.tobytes(), dtype=numpy.uint64)))
    except ImportError:
        pass
    for name, data in inputs:
        s, pairs = best(lambda: neardup.find_all(data, distance=k))
        emit(workload="allpairs", variant=f"neardup.find_all (blocks auto), {name}",
             n=len(values), distance=k, seconds=round(s, 4), pairs=len(pairs))
        s, pairs = best(lambda: simhash.find_all(data, k + 1, k))
        emit(workload="allpairs", variant=f"simhash.find_all ({k + 1} blocks), {name}",
             n=len(values), distance=k, seconds=round(s, 4), pairs=len(pairs))


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("fp", "allpairs"):
        sys.exit(__doc__)
    if sys.argv[1] == "fp":
        fp(sys.argv[2])
    else:
        allpairs(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3)
