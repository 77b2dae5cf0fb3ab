#!/usr/bin/env python3
"""neardup.ray against `neardup dedup` on one machine: wall time and peak memory of each,
and of the Ray job on 1 and on 2 CPUs, in alternating runs; one JSON line per run, then
the medians. Every run writes the clusters and the deduplicated records, and the Ray
job's are checked equal to the CLI's, byte for byte.

    python benches/ray_bench.py [--runs 5] [--cli target/release/neardup] FILE.jsonl ...

Memory is sampled every 50 ms over the whole process tree (for the Ray job: the driver,
GCS, raylet, object store and workers, all started by the driver's ray.init): peak RSS
summed over processes, and peak PSS (proportional set size: shared pages, such as the
object store's, counted once); CPU seconds (user + system) of the whole tree. The Ray
job's wall time includes starting and stopping Ray; `job` is neardup.ray.dedup alone;
`ray-start` is Ray started and stopped with no job, its own cost.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def tree(root: int) -> list:
    """`root` and its descendants, from /proc."""
    children: dict = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
        except OSError:
            continue
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def cpu(pids: list, seen: dict) -> None:
    """Records the CPU seconds (user + system) each of `pids` has used so far."""
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            # Fields 14 and 15 of stat (utime, stime), counted from the state field (3).
            seen[pid] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            continue


def memory(pids: list) -> tuple:
    """Summed RSS and PSS of `pids`, in bytes."""
    rss = pss = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1]) * 1024
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
        except OSError:
            continue
    return rss, pss


def measured(cmd: list, env=None) -> dict:
    """Runs `cmd`: its wall time, peak summed RSS and PSS of its process tree, and the
    JSON it prints last, if any."""
    peak = [0, 0]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env)
    done = threading.Event()

    seen: dict = {}

    def sample():
        while not done.is_set():
            pids = tree(proc.pid)
            rss, pss = memory(pids)
            cpu(pids, seen)
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, _ = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    # CPU: each process's last sample. A process alone (the CLI) is short: its whole time
    # comes from our children's usage instead (which, with descendants, would count
    # those the root reaped twice).
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = usage.ru_utime + usage.ru_stime
    root = total - measured.cpu_before
    measured.cpu_before = total
    cpu_s = root if set(seen) <= {proc.pid} else sum(seen.values())
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} failed ({proc.returncode})")
    lines = out.decode().strip().splitlines()
    extra = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    return {"wall": round(wall, 3), "cpu_s": round(cpu_s, 2), "rss_mb": round(peak[0] / 1e6),
            "pss_mb": round(peak[1] / 1e6), **extra}


measured.cpu_before = 0.0


def ray_job(path: str, cpus: int, clusters: str, kept: str) -> None:
    """The Ray job itself (run in a child process): prints its own timings. With no path,
    Ray alone: started and stopped, for its own cost."""
    import ray

    import neardup.ray as nray

    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    if not path:
        ray.shutdown()
        return
    start = time.perf_counter()
    result = nray.dedup(path, clusters=clusters, deduplicated=kept)
    job = time.perf_counter() - start
    ray.shutdown()
    print(json.dumps({"job": round(job, 3), "stages": result.stats["seconds"]}))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--job":
        ray_job(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cli", default=str(Path(__file__).resolve().parents[3] / "target" / "release" / "neardup"))
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ray-bench-"))
    for path in args.files:
        results: dict = {"cli": [], "ray-2": [], "ray-1": [], "ray-start": []}
        for run in range(args.runs):
            # Alternating, so that the machine's other load falls on all alike.
            for name in results:
                c, d = tmp / f"{name}-c.jsonl", tmp / f"{name}-d.jsonl"
                if name == "cli":
                    cmd = [args.cli, "dedup", path, "--clusters", str(c), "--deduplicated", str(d), "-q"]
                elif name == "ray-start":
                    cmd = [sys.executable, __file__, "--job", "", "2", "", ""]
                else:
                    cmd = [sys.executable, __file__, "--job", path, name[-1], str(c), str(d)]
                r = measured(cmd)
                if name.startswith("ray-") and name != "ray-start":
                    same = all((tmp / f"{name}-{x}.jsonl").read_bytes() == (tmp / f"cli-{x}.jsonl").read_bytes() for x in "cd")
                    r["equal_to_cli"] = same
                    if not same:
                        raise SystemExit(f"{name} differs from the CLI on {path}")
                results[name].append(r)
                print(json.dumps({"file": path, "run": run, "tool": name, **r}), flush=True)
        summary = {
            name: {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu_s", "rss_mb", "pss_mb", "job") if k in rs[0]}
            for name, rs in results.items()
        }
        print(json.dumps({"file": path, "medians": summary, "runs": args.runs}), flush=True)


if __name__ == "__main__":
    main()
