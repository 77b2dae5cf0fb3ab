#!/usr/bin/env python3
"""Load test of `neardup serve` with wrk (Debian's `wrk` package), on loopback.

  python3 scripts/service_load.py --corpus corpus.jsonl.zst --stored 1000000 \\
      --neardup target/release/neardup --seconds 60 [--data DIR] [--keep-data]

1. Starts `neardup serve` on a fresh store in --data (or reuses the store there when it
   already holds --stored documents and --reuse is given), and stores the first --stored
   documents of --corpus through POST /v1/bulk/documents (NDJSON, 1,000 per request, two
   requests in flight), timing it: durable inserts per second in bulk.
2. Takes --queries documents from after the stored ones as the bodies of requests, and
   runs wrk for --seconds each:
   - `check`: POST /v1/check of each body in turn (whole documents);
   - `mix`:   nine checks, then one PUT /v1/documents/q-<n> (new ids: every tenth request
     is a durable insert);
   - `put`:   PUT /v1/documents/p-<n> only (durable single inserts under concurrency);
   - `bulkcheck`: POST /v1/bulk/check of --batch bodies at a time (NDJSON), as a crawler
     that checks what it fetched in batches would: checks per second beside requests.
   The PUTs take their texts from --put-bodies further documents of the corpus (after
   --put-skip more), not from the check bodies, each text once: the runs of one
   invocation go on where the one before stopped. PUTs of texts already stored store
   more and more copies, and each put and check then finds and reads them all, so the
   cost of a request would grow with the run for no reason a real workload has. Texts
   put again (every body used, the runs starting over on them) are counted in each
   run's `put_bodies_wrapped`.
3. Prints one JSON line per scenario: requests/s, latency p50/p99/max (ms, from wrk's own
   histogram), non-2xx answers, the server's CPU seconds per second and its RSS (sampled
   every second from /proc: first, last and peak), so flat p99 and RSS over a long run
   show in the samples written with --samples; and from the server's own histograms
   (/metrics), p50 and p99 and each route's slowest request (the upper bound of their
   bucket), which tells whose requests wrk's maximum was.

The corpus is JSON Lines of {"id", "text"} (scripts/make_corpus.py makes 2 KB documents of
English text, a tenth of them edited copies, some with typographic quotes and dashes);
.zst files are read through the `zstd` program. Plain Python 3 and wrk; nothing else.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

LUA = r"""
local function lines_of(path)
  local out = {}
  for line in io.lines(path) do
    out[#out + 1] = line
  end
  return out, #out
end
local bodies, n = lines_of(os.getenv("LOAD_BODIES"))
local mode = os.getenv("LOAD_MODE")
local prefix = os.getenv("LOAD_PREFIX") or "q"
-- bulkcheck: the check bodies, LOAD_BATCH at a time, as NDJSON bodies made once.
local batch = tonumber(os.getenv("LOAD_BATCH") or "100")
local batches, nb = {}, 0
if mode == "bulkcheck" then
  for i = 1, n - batch + 1, batch do
    nb = nb + 1
    batches[nb] = table.concat(bodies, "\n", i, i + batch - 1)
  end
end
local counter = 0
local thread_id = 0
local next_id = 0
local threads = {}
-- PUT texts are read from the thread's own file as they are needed, each once, from
-- where the previous run of the same invocation left off (LOAD_PUT_POS), so that
-- runs one after the other put new texts; past its end the file starts over (counted in
-- put_wraps).
local put_file = nil
put_pos = 0
put_wraps = 0

function setup(thread)
  thread:set("thread_id", next_id)
  threads[#threads + 1] = thread
  next_id = next_id + 1
end

function init(args)
  counter = thread_id * 7919
  local starts = {}
  for p in string.gmatch(os.getenv("LOAD_PUT_POS") or "", "%d+") do
    starts[#starts + 1] = tonumber(p)
  end
  put_pos = starts[thread_id + 1] or 0
  put_file = assert(io.open(os.getenv("LOAD_PUT_BODIES") .. "." .. thread_id, "rb"))
  put_file:seek("set", put_pos)
end

local function next_put()
  local line = put_file:read("*l")
  if not line then
    put_wraps = put_wraps + 1
    put_file:seek("set", 0)
    line = assert(put_file:read("*l"))
  end
  put_pos = put_file:seek()
  return line
end

local json_headers = { ["Content-Type"] = "application/json" }
local ndjson_headers = { ["Content-Type"] = "application/x-ndjson" }

function request()
  counter = counter + 1
  if mode == "put" or (mode == "mix" and counter % 10 == 0) then
    local body = next_put()
    return wrk.format("PUT", "/v1/documents/" .. prefix .. "-" .. thread_id .. "-" .. counter, json_headers, body)
  end
  if mode == "bulkcheck" then
    return wrk.format("POST", "/v1/bulk/check", ndjson_headers, batches[(counter % nb) + 1])
  end
  return wrk.format("POST", "/v1/check", json_headers, bodies[(counter % n) + 1])
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.stderr:write(string.format(
    'LOADRESULT {"requests": %d, "seconds": %.3f, "p50_ms": %.3f, "p90_ms": %.3f, "p99_ms": %.3f, "max_ms": %.3f, "mean_ms": %.3f, "non2xx": %d, "socket_errors": %d}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1e3,
    latency:percentile(90) / 1e3, latency:percentile(99) / 1e3, latency.max / 1e3,
    latency.mean / 1e3, errors.status, errors.connect + errors.read + errors.write + errors.timeout))
  local pos, wraps = {}, 0
  for _, t in ipairs(threads) do
    pos[#pos + 1] = tostring(t:get("put_pos"))
    wraps = wraps + t:get("put_wraps")
  end
  io.stderr:write(string.format('LOADPUTS {"pos": "%s", "wraps": %d}\n', table.concat(pos, ","), wraps))
end
"""


def lines(path):
    """The corpus's lines (bytes, without the newline)."""
    if path.endswith(".zst"):
        proc = subprocess.Popen(["zstd", "-dcq", path], stdout=subprocess.PIPE)
        try:
            for line in proc.stdout:
                yield line.rstrip(b"\r\n")
        finally:
            proc.stdout.close()
            proc.kill()
            proc.wait()
    else:
        with open(path, "rb") as f:
            for line in f:
                yield line.rstrip(b"\r\n")


def post(url, body, content_type="application/x-ndjson"):
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type})
    with urllib.request.urlopen(req, timeout=600) as r:
        return r.read()


def commit_stats(base):
    """(commits, writes committed, seconds in commits, {le: commits}, bytes the process wrote to
    disk) from the service's /metrics."""
    text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    got, buckets = {}, {}
    for line in text.splitlines():
        for name in ("neardup_commits_total", "neardup_committed_writes_total", "neardup_commit_seconds_sum",
                     "neardup_disk_written_bytes"):
            if line.startswith(name + " "):
                got[name] = float(line.split()[1])
        if line.startswith("neardup_commit_seconds_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[le] = float(line.rsplit(" ", 1)[1])
    return (got.get("neardup_commits_total", 0), got.get("neardup_committed_writes_total", 0),
            got.get("neardup_commit_seconds_sum", 0.0), buckets, got.get("neardup_disk_written_bytes", 0))


def latency_buckets(base):
    """The service's own latency histograms of /v1 requests answered 200: {(route, le): count}."""
    text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("neardup_request_seconds_bucket{") and 'route="/v1/' in line and 'status="200"' in line:
            route = line.split('route="', 1)[1].split('"', 1)[0]
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[(route, le)] = out.get((route, le), 0) + float(line.rsplit(" ", 1)[1])
    return out


def server_quantiles(before, after):
    """Between two latency_buckets: p50/p99 of all routes' requests, and each route's slowest
    request (ms, the upper bound of their histogram bucket)."""
    def bound(le):
        return float("inf") if le == "+Inf" else float(le)

    def shown(le):
        return le if le == "+Inf" else round(float(le) * 1000, 3)

    delta = {k: after[k] - before.get(k, 0) for k in after}
    les = sorted({le for _, le in delta}, key=bound)
    counts = [(le, sum(c for (_, l), c in delta.items() if l == le)) for le in les]
    total = counts[-1][1] if counts else 0
    out = {}
    for q, name in ((0.5, "server_p50_ms_le"), (0.99, "server_p99_ms_le")):
        for le, c in counts:
            if total and c >= q * total:
                out[name] = shown(le)
                break
    # Cumulative buckets: the slowest request is in the first bucket holding them all.
    slowest = {}
    for route in sorted({r for r, _ in delta}):
        n = delta.get((route, "+Inf"), 0)
        if n > 0:
            slowest[route] = next(shown(le) for le in les if delta.get((route, le), 0) >= n)
    out["server_max_ms_le"] = slowest
    return out


def commit_delta(before, after):
    """Commits, writes per commit, mean commit time (ms) and KB written to disk per write
    between two commit_stats."""
    commits = after[0] - before[0]
    if commits <= 0:
        return {"commits": 0}
    les = sorted(after[3], key=lambda le: float("inf") if le == "+Inf" else float(le))
    slowest = next((le for le in les if after[3][le] - before[3].get(le, 0) >= commits), "+Inf")
    writes = after[1] - before[1]
    return {"commits": int(commits), "writes_per_commit": round(writes / commits, 1),
            "disk_kb_per_write": round((after[4] - before[4]) / max(writes, 1) / 1024, 1),
            "commit_ms_mean": round(1000 * (after[2] - before[2]) / commits, 2),
            "commit_max_ms_le": slowest if slowest == "+Inf" else round(float(slowest) * 1000, 3)}


def proc_stats(pid):
    """(CPU seconds, RSS bytes) of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    with open(f"/proc/{pid}/statm") as f:
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return cpu, rss


class Sampler(threading.Thread):
    """Samples a process's CPU and RSS every second."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.samples, self.stop = pid, [], threading.Event()

    def run(self):
        t0 = time.monotonic()
        while not self.stop.is_set():
            try:
                cpu, rss = proc_stats(self.pid)
            except OSError:
                return
            self.samples.append((round(time.monotonic() - t0, 2), cpu, rss))
            self.stop.wait(1.0)


def wait_healthy(base, server):
    # A start builds the index from the keys file: 80 s at 74M documents on this VM.
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"neardup serve exited with {server.returncode}")
        try:
            urllib.request.urlopen(base + "/healthz", timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit("neardup serve did not answer /healthz")


def load(base, it, count, batch=1000, in_flight=2):
    """Stores `count` lines of `it` in bulk; returns the seconds it took."""
    sem = threading.Semaphore(in_flight)
    failures = []

    def send(body):
        try:
            post(base + "/v1/bulk/documents", body)
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(repr(e))
        finally:
            sem.release()

    t0 = time.monotonic()
    threads, chunk, done = [], [], 0
    for line in it:
        chunk.append(line)
        done += 1
        if len(chunk) == batch or done == count:
            sem.acquire()
            t = threading.Thread(target=send, args=(b"\n".join(chunk) + b"\n",))
            t.start()
            threads.append(t)
            threads = [t for t in threads if t.is_alive()]
            chunk = []
            if done % 100_000 == 0:
                print(f"  stored {done:,} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
        if done == count:
            break
    for t in threads:
        t.join()
    if failures:
        sys.exit(f"bulk insert failed: {failures[0]}")
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--stored", type=int, required=True, help="documents stored before the runs")
    ap.add_argument("--corpus-first", type=int, default=0,
                    help="the corpus's first line is this document (with --reuse: a corpus of the "
                         "documents after the stored ones, e.g. `neardup bench gen-docs --first N`)")
    ap.add_argument("--queries", type=int, default=20_000, help="distinct check bodies")
    ap.add_argument("--put-skip", type=int, default=0,
                    help="corpus documents passed over between the check bodies and the put bodies")
    ap.add_argument("--put-bodies", type=int, default=100_000,
                    help="distinct texts for the PUTs, from the documents after the check bodies")
    ap.add_argument("--neardup", default="target/release/neardup")
    ap.add_argument("--data", help="store directory (default: a temporary one)")
    ap.add_argument("--reuse", action="store_true", help="serve the store already in --data")
    ap.add_argument("--more", type=int, default=0,
                    help="with --reuse: first store this many more documents in bulk (timed), after the stored ones")
    ap.add_argument("--serve-arg", action="append", default=[],
                    help="an argument for neardup serve (repeat: --serve-arg=--quick-repair --serve-arg=true)")
    ap.add_argument("--listen", default="127.0.0.1:18181")
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--wrk-threads", type=int, default=1)
    ap.add_argument("--server-threads", type=int, help="neardup serve --threads")
    ap.add_argument("--scenarios", default="check,mix,put")
    ap.add_argument("--batch", type=int, default=100, help="checks per request of the bulkcheck scenario")
    ap.add_argument("--samples", help="write the per-second CPU/RSS samples here (JSON lines)")
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (Debian: apt-get install wrk)")

    tmp = tempfile.mkdtemp(prefix="neardup-load-")
    data = args.data or os.path.join(tmp, "store")
    cmd = [args.neardup, "serve", "--data", data, "--listen", args.listen, "--body-limit", str(64 << 20)]
    if not args.reuse:
        cmd.append("--create")
    if args.server_threads:
        cmd += ["--threads", str(args.server_threads)]
    cmd += args.serve_arg
    base = f"http://{args.listen}"
    server = subprocess.Popen(cmd)
    try:
        t0 = time.monotonic()
        wait_healthy(base, server)
        startup = time.monotonic() - t0
        it = lines(args.corpus)
        result = {"stored": args.stored, "startup_s": round(startup, 2)}
        if not args.reuse:
            c0, cpu0 = commit_stats(base), proc_stats(server.pid)[0]
            secs = load(base, it, args.stored)
            cpu, rss = proc_stats(server.pid)
            result.update(bulk_load_s=round(secs, 1), bulk_inserts_per_s=round(args.stored / secs),
                          rss_after_load_mb=round(rss / 2**20, 1), cpu_after_load_s=round(cpu - cpu0, 1),
                          **commit_delta(c0, commit_stats(base)))
        else:
            for _ in zip(range(max(args.stored - args.corpus_first, 0)), it):
                pass
            if args.more:
                c0, cpu0 = commit_stats(base), proc_stats(server.pid)[0]
                secs = load(base, it, args.more)
                cpu, rss = proc_stats(server.pid)
                result.update(more=args.more, bulk_load_s=round(secs, 1), bulk_inserts_per_s=round(args.more / secs),
                              cpu_load_s=round(cpu - cpu0, 1), **commit_delta(c0, commit_stats(base)))
        bodies = os.path.join(tmp, "bodies.jsonl")
        put_bodies = os.path.join(tmp, "put_bodies.jsonl")
        threads = max(args.wrk_threads, 1)
        for path, count, skip in ((bodies, args.queries, 0), (put_bodies, args.put_bodies, args.put_skip)):
            for _ in zip(range(skip), it):
                pass
            # One file a wrk thread (put bodies dealt in turn): each thread reads its own.
            files = [open(path, "wb")] if path == bodies else [open(f"{path}.{t}", "wb") for t in range(threads)]
            written = 0
            for _, line in zip(range(count), it):
                text = json.loads(line)["text"]
                files[written % len(files)].write(json.dumps({"text": text}).encode() + b"\n")
                written += 1
            # On disk before the runs: a gigabyte of these pages written back during the
            # first minute queued the server's fsyncs behind it (p99 of that minute
            # 320-917 ms, after it 8-12 ms).
            for f in files:
                f.flush()
                os.fsync(f.fileno())
                f.close()
            if written < len(files):
                sys.exit(f"{args.corpus}: {written} documents left after the stored ones for {path}, "
                         f"at least {len(files)} needed")
        put_pos = ""
        du = subprocess.run(["du", "-sb", data], capture_output=True, text=True).stdout.split()
        result["disk_mb"] = round(int(du[0]) / 2**20, 1) if du else None
        print(json.dumps({"scenario": "load", **result}), flush=True)
        lua = os.path.join(tmp, "load.lua")
        with open(lua, "w") as f:
            f.write(LUA)
        for scenario in args.scenarios.split(","):
            sampler = Sampler(server.pid)
            cpu0, _ = proc_stats(server.pid)
            commits0, buckets0 = commit_stats(base), latency_buckets(base)
            sampler.start()
            env = dict(os.environ, LOAD_BODIES=bodies, LOAD_PUT_BODIES=put_bodies, LOAD_PUT_POS=put_pos, LOAD_MODE=scenario, LOAD_BATCH=str(args.batch), LOAD_PREFIX=f"{scenario}{int(time.time())}")
            run = subprocess.run(
                ["wrk", "-t", str(args.wrk_threads), "-c", str(args.connections), "-d", f"{args.seconds}s",
                 "--timeout", "10s", "-s", lua, base],
                env=env, capture_output=True, text=True)
            sampler.stop.set()
            sampler.join()
            cpu1, rss = proc_stats(server.pid)
            commits1, buckets1 = commit_stats(base), latency_buckets(base)
            out = [l for l in run.stderr.splitlines() if l.startswith("LOADRESULT ")]
            if run.returncode != 0 or not out:
                sys.exit(f"wrk failed: {run.stdout}\n{run.stderr}")
            r = json.loads(out[-1][len("LOADRESULT "):])
            puts = [json.loads(l[len("LOADPUTS "):]) for l in run.stderr.splitlines() if l.startswith("LOADPUTS ")]
            if puts:
                put_pos = puts[-1]["pos"]
                r["put_bodies_wrapped"] = puts[-1]["wraps"]
            rss_s = [s[2] for s in sampler.samples] or [rss]
            r.update(scenario=scenario, stored=args.stored, connections=args.connections,
                     requests_per_s=round(r["requests"] / r["seconds"]),
                     server_cpu_per_s=round((cpu1 - cpu0) / r["seconds"], 2),
                     rss_first_mb=round(rss_s[0] / 2**20, 1), rss_last_mb=round(rss_s[-1] / 2**20, 1),
                     rss_peak_mb=round(max(rss_s) / 2**20, 1),
                     server_cpu_us_per_request=round(1e6 * (cpu1 - cpu0) / max(r["requests"], 1), 1),
                     **commit_delta(commits0, commits1), **server_quantiles(buckets0, buckets1))
            if scenario == "bulkcheck":
                r.update(batch=args.batch, checks_per_s=round(args.batch * r["requests"] / r["seconds"]),
                         server_cpu_us_per_check=round(1e6 * (cpu1 - cpu0) / max(args.batch * r["requests"], 1), 1))
            print(json.dumps(r), flush=True)
            if args.samples:
                with open(args.samples, "a") as f:
                    for s in sampler.samples:
                        f.write(json.dumps({"scenario": scenario, "t": s[0], "cpu_s": s[1], "rss": s[2]}) + "\n")
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
