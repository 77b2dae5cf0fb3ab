#!/usr/bin/env python3
"""What `neardup dedup --report` costs: the whole process timed with and without it,
runs alternating, medians of wall and CPU (user + system) time reported (docs/report.md).

  python3 scripts/report_overhead.py CORPUS.jsonl [--neardup target/release/neardup] [--runs 7]

Two pairs of settings: with --clusters (the second pass runs either way, so the report adds
only its sampling, counting and page), and without any other output (where --report also
makes the second pass run).
"""
import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus")
    ap.add_argument("--neardup", default="target/release/neardup")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clusters, page = os.path.join(tmp, "clusters.jsonl"), os.path.join(tmp, "report.html")
        base = [args.neardup, "dedup", args.corpus, "--quiet"]
        pairs = [
            ("--clusters", base + ["--clusters", clusters], base + ["--clusters", clusters, "--report", page]),
            ("no other output", base, base + ["--report", page]),
        ]
        # One run of each first, so the file is in the page cache for all.
        for _, without, with_ in pairs:
            subprocess.run(without, check=True)
            subprocess.run(with_, check=True)
        for name, without, with_ in pairs:
            times = {"without": [], "with": []}
            cpu = {"without": [], "with": []}
            for _ in range(args.runs):
                for key, cmd in (("without", without), ("with", with_)):
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    start = time.perf_counter()
                    subprocess.run(cmd, check=True)
                    times[key].append(time.perf_counter() - start)
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu[key].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            for label, t in (("wall", times), ("cpu", cpu)):
                a, b = statistics.median(t["without"]), statistics.median(t["with"])
                print(f"{name}, {label}: without --report {a:.3f} s, with {b:.3f} s "
                      f"(medians of {args.runs}), {b - a:+.3f} s ({100 * (b - a) / a:+.1f}%)")
                print(f"  without: {' '.join(f'{x:.3f}' for x in t['without'])}")
                print(f"  with:    {' '.join(f'{x:.3f}' for x in t['with'])}")
            print(f"  page: {os.path.getsize(page)} bytes")


if __name__ == "__main__":
    main()
