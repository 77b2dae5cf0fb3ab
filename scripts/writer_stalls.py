#!/usr/bin/env python3
"""Where the writer of a running `neardup serve` waits, and how much it writes.

  sudo python3 scripts/writer_stalls.py PID [--seconds 180] [--every 0.01] [--min-wait 0.1]

Samples the kernel stack of the server's `neardup-writer` thread (and of its
`neardup-writeback` thread beside it) every --every seconds from /proc/PID/task/TID/stack,
which only root may read, for --seconds or until the server stops. Each run of samples in
which the writer sleeps in the kernel outside its queue (not waiting on a futex or epoll
for work) for longer than --min-wait is printed: when it began, how long it lasted, the
writer's most frequent stacks and the writeback thread's stack halfway through. The last
lines give the bytes the process wrote (/proc/PID/io `write_bytes`, what reached the
block layer, and `wchar`, what its write calls passed) per second over the sampling.

docs/service.md ("What the mix's stalls are") was measured with it during the 90/10 mix
of scripts/service_load.py on a 30M store. Standard library only; Linux.
"""
import argparse
import glob
import os
import sys
import time

# Waits for work, not stalls: the writer idles on its queue (a futex) between batches.
IDLE = ("futex", "do_epoll", "ep_poll")


def threads(pid):
    """Thread name -> its /proc directory."""
    out = {}
    for d in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(os.path.join(d, "comm"), encoding="utf-8") as f:
                out[f.read().strip()] = d
        except OSError:
            pass
    return out


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def frames(stack, n=8):
    """The first n function names of a kernel stack, innermost first."""
    names = [line.split("] ", 1)[-1].split("+")[0] for line in stack.splitlines() if line.strip()]
    return " <- ".join(names[:n])


def io(pid):
    """(write_bytes, wchar) of the process."""
    fields = dict(line.split(": ", 1) for line in read(f"/proc/{pid}/io").splitlines())
    return int(fields["write_bytes"]), int(fields["wchar"])


def report(run, out):
    """Prints one stall: a run of (time, state, writer stack, writeback stack) samples."""
    took = run[-1][0] - run[0][0]
    began = time.strftime("%H:%M:%S", time.localtime(run[0][0]))
    print(f"writer waited {took:.3f} s from {began} ({len(run)} samples)", file=out)
    counts = {}
    for _, state, stack, _ in run:
        key = (state, frames(stack))
        counts[key] = counts.get(key, 0) + 1
    for (state, stack), c in sorted(counts.items(), key=lambda kv: -kv[1])[:3]:
        print(f"  {c} samples, state {state}: {stack or '(no kernel stack)'}", file=out)
    middle = run[len(run) // 2][3]
    if middle is not None:
        print(f"  writeback thread meanwhile: {frames(middle) or '(running)'}", file=out)
    out.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pid", type=int)
    ap.add_argument("--seconds", type=float, default=180.0)
    ap.add_argument("--every", type=float, default=0.01)
    ap.add_argument("--min-wait", type=float, default=0.1)
    args = ap.parse_args()
    named = threads(args.pid)
    # Thread names are cut to 15 bytes by the kernel.
    writer = named.get("neardup-writer")
    writeback = named.get("neardup-writeback"[:15])
    if writer is None:
        sys.exit(f"no thread named neardup-writer in process {args.pid} (threads: {sorted(named)})")
    try:
        read(os.path.join(writer, "stack"))
        start_io, start = io(args.pid), time.time()
    except PermissionError:
        sys.exit("kernel stacks and /proc/PID/io need root: run it with sudo")
    last_io, last = start_io, start
    run, stalls = [], 0
    out = sys.stdout
    while time.time() - start < args.seconds:
        now = time.time()
        try:
            stack = read(os.path.join(writer, "stack"))
            state = read(os.path.join(writer, "stat")).rsplit(") ", 1)[1].split()[0]
            beside = read(os.path.join(writeback, "stack")) if writeback else None
            last_io, last = io(args.pid), now
        except (OSError, IndexError):
            break  # the server stopped
        waiting = state == "D" or (state == "S" and stack.strip() and not any(w in stack for w in IDLE))
        if waiting:
            run.append((now, state, stack, beside))
        else:
            if run and run[-1][0] - run[0][0] >= args.min_wait:
                report(run, out)
                stalls += 1
            run = []
        time.sleep(args.every)
    span = max(last - start, 1e-9)
    wrote, passed = last_io[0] - start_io[0], last_io[1] - start_io[1]
    print(f"{stalls} waits of {args.min_wait} s or more in {span:.1f} s; written "
          f"{wrote / span / 1e6:.1f} MB/s to the block layer, {passed / span / 1e6:.1f} MB/s "
          f"through write calls", file=out)


if __name__ == "__main__":
    main()
