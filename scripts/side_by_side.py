#!/usr/bin/env python3
"""Tables of a scripts/side_by_side.sh run: medians over the rounds, and each ratio to a
peer taken within a round (the peer and neardup measured minutes apart), then its median.

  python3 scripts/side_by_side.py runs.jsonl
"""
import json
import statistics
import sys
from collections import defaultdict


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, digits=2):
    if x is None:
        return ""
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def main():
    rounds, cur = [], None
    for line in open(sys.argv[1], encoding="utf-8"):
        line = line.strip()
        if not line.startswith("{"):
            continue
        d = json.loads(line)
        if "round" in d:
            cur = []
            rounds.append(cur)
        elif cur is not None:
            cur.append(d)
    print(f"{len(rounds)} rounds; load average {fmt(min(d.get('loadavg') or 0 for r in rounds for d in r), 1)}"
          f"–{fmt(max(d.get('loadavg') or 0 for r in rounds for d in r), 1)}\n")

    def pick(r, **kw):
        for d in r:
            if all(str(d.get(k, "")).startswith(str(v)) for k, v in kw.items()):
                return d
        return None

    # Index queries.
    print("| index, 1M, k = 3 | threads | queries/s | × mih-rs | CPU µs a query | × mih-rs by CPU | recall | memory |")
    print("|---|---|---|---|---|---|---|---|")
    rows = [("neardup, one call a query", dict(peer="neardup", workload="index", variant="one-by-one")),
            ("neardup, bulk", dict(peer="neardup", workload="index", variant="bulk")),
            ("mih-rs 0.3.1", dict(peer="mih-rs", workload="index")),
            ("faiss 1.15.1 IndexBinaryMultiHash 4×16", dict(peer="faiss", workload="index", variant="mh4x16")),
            ("faiss 1.15.1 IndexBinaryMultiHash 2×32", dict(peer="faiss", workload="index", variant="mh2x32")),
            ("gaoya 0.2.2, serial", dict(peer="gaoya", workload="index", variant="serial"))]
    for name, kw in rows:
        got = [(pick(r, **kw), pick(r, peer="mih-rs", workload="index")) for r in rounds]
        got = [(d, m) for d, m in got if d]
        if not got:
            continue
        qps = med([d["throughput"] for d, _ in got])
        ratio = med([d["throughput"] / m["throughput"] for d, m in got if m])
        cpu = med([d["cpu_s"] * 1e6 / d["queries"] for d, _ in got if d.get("cpu_s") is not None])
        ratio_cpu = med([m["cpu_s"] / d["cpu_s"] for d, m in got if m and d.get("cpu_s")])
        d0 = got[0][0]
        mem = (f"{d0['bytes_per_fingerprint']} B/fp, peak {fmt(d0['max_rss_mb'], 0)} MB"
               if "bytes_per_fingerprint" in d0 else f"peak {fmt(d0.get('max_rss_mb'), 0)} MB")
        print(f"| {name} | {d0.get('threads')} | {fmt(qps)} | {fmt(ratio)} | {fmt(cpu)} | {fmt(ratio_cpu)} | {d0.get('recall')} | {mem} |")
    print()

    # Fingerprints.
    print("| fingerprints, one thread | MB | neardup whole process | in process | gaoya `word` | whole ÷ gaoya | by CPU | in process ÷ gaoya |")
    print("|---|---|---|---|---|---|---|---|")
    corpora = []
    for d in rounds[0]:
        if d.get("workload") == "fp" and d.get("peer") == "neardup" and d.get("variant", "").startswith("fingerprint "):
            corpora.append(d["variant"][len("fingerprint "):])
    for i, corpus in enumerate(corpora):
        whole, inproc, gaoya, ratio, ratio_cpu, ratio_in, mb = [], [], [], [], [], [], None
        for r in rounds:
            w = pick(r, workload="fp", peer="neardup", variant=f"fingerprint {corpus}")
            b = next((d for d in r if d.get("workload") == "fp" and d.get("variant") == "serial"
                      and d.get("corpus") == corpus), None)
            g = [d for d in r if d.get("workload") == "fp" and d.get("peer") == "gaoya"]
            g = g[i] if i < len(g) else None
            if not (w and g):
                continue
            mb = w["mb"]
            whole.append(mb / w["seconds"])
            gaoya.append(g["throughput"])
            ratio.append(g["seconds"] / w["seconds"])
            ratio_cpu.append(g["cpu_s"] / w["cpu_s"])
            if b:
                inproc.append(b["throughput"])
                ratio_in.append(g["seconds"] / b["seconds"])
        print(f"| {corpus} | {fmt(mb, 1)} | {fmt(med(whole), 0)} MB/s | {fmt(med(inproc), 0)} MB/s | "
              f"{fmt(med(gaoya), 1)} MB/s | {fmt(med(ratio))}× ({fmt(min(ratio))}–{fmt(max(ratio))}) | {fmt(med(ratio_cpu))}× | "
              f"{fmt(med(ratio_in))}× |")
    print()

    # Dedup on the planted copies.
    print("| dedup, planted copies | threads | wall s | CPU s | peak | precision | recall | F1 |")
    print("|---|---|---|---|---|---|---|---|")
    keys = defaultdict(list)
    for r in rounds:
        for d in r:
            if d.get("workload") == "dedup" and "precision" in d:
                name = d.get("impl") if d["peer"] in ("neardup", "rensa") else d.get("variant")
                keys[(d["peer"], name, d.get("threads"))].append(d)
    for (peer, variant, threads), ds in keys.items():
        print(f"| {peer} {variant or ''} | {threads} | {fmt(med([d['seconds'] for d in ds]))} | "
              f"{fmt(med([d.get('cpu_s') for d in ds]))} | {fmt(med([d.get('max_rss_mb') for d in ds]), 0)} MB | "
              f"{fmt(ds[0]['precision'], 3)} | {fmt(ds[0]['recall'], 3)} | {fmt(ds[0]['f1'], 3)} |")
    print()
    print("| dedup, whole corpus | tool | threads | wall s | CPU s | MB per CPU s | peak |")
    print("|---|---|---|---|---|---|---|")
    keys = defaultdict(list)
    for r in rounds:
        for d in r:
            if d.get("workload") == "dedup" and d.get("variant", "").startswith("dedup "):
                keys[(d["variant"][len("dedup "):], d["peer"], d.get("threads"))].append(d)
    for (corpus, peer, threads), ds in keys.items():
        per_cpu = [d["mb"] / d["cpu_s"] for d in ds if d.get("mb") and d.get("cpu_s")]
        print(f"| {corpus} | {peer} | {threads} | {fmt(med([d['seconds'] for d in ds]))} | "
              f"{fmt(med([d['cpu_s'] for d in ds]))} | {fmt(med(per_cpu), 0) if per_cpu else ''} | "
              f"{fmt(med([d['max_rss_mb'] for d in ds]), 0)} MB |")
    print()

    # All pairs.
    print("| all pairs, 1M | threads | seconds | × neardup | peak |")
    print("|---|---|---|---|---|")
    for name, kw in [("neardup find-all", dict(peer="neardup", workload="allpairs")),
                     ("mih-rs 0.3.1", dict(peer="mih-rs", workload="allpairs")),
                     ("gaoya 0.2.2, par", dict(peer="gaoya", workload="allpairs", variant="par")),
                     ("gaoya 0.2.2, serial", dict(peer="gaoya", workload="allpairs", variant="serial"))]:
        got = [(pick(r, **kw), pick(r, peer="neardup", workload="allpairs")) for r in rounds]
        got = [(d, n) for d, n in got if d and n]
        if not got:
            continue
        print(f"| {name} | {got[0][0].get('threads')} | {fmt(med([d['seconds'] for d, _ in got]), 3)} | "
              f"{fmt(med([d['seconds'] / n['seconds'] for d, n in got]), 1)} | {fmt(got[0][0].get('max_rss_mb'), 0)} MB |")


if __name__ == "__main__":
    main()
