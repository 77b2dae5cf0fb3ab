#!/bin/bash
# service_scale.sh N WORK [NEARDUP]: `neardup serve` at N documents (10M, 100M), measured
# as docs/service.md reports it. Needs wrk, curl, zstd, python3 and GNU time; WORK needs
# about N x 300 bytes of disk (the store) and the machine about N x 120 bytes of memory
# for the index and id map (twice the index while its main part is rebuilt, see `neardup
# serve --memory`). A run cut short (the generator killed: the load stops at the line cut
# short, "loading stopped after N documents") goes on from step 2 when run again with
# that N.
#
# 1. load: `neardup bench gen-docs` (2 KB documents, a tenth of them planted near-copies,
#    their exact Jaccard similarity in truth.jsonl) streams into `neardup load
#    --only-if-unique` through a pipe: no corpus on disk. Prints the load's summary, its
#    time and peak RSS, and the planted copies found per band of similarity.
# 2. disk: du of the store after the load (a clean stop): the files' sizes (du -sb), and
#    the blocks they take (du): redb's file is sparse where it has room not yet written.
# 3. start: `neardup serve` on it until /healthz answers; its RSS then (no request yet).
# 4. load test: 20,000 check bodies and put bodies from the documents after the stored
#    ones (gen-docs --first N: 2.22M documents, 4.7 GB), then wrk with 32 connections:
#    checks, the 90/10 mix, bulk checks (scripts/service_load.py, 200,000 put bodies),
#    then ten minutes of the mix, a minute a run, on 2,000,000 further put bodies, each
#    put once: every PUT stores a text not yet stored, as a crawler's would.
# 5. du after the runs and a restart; the start after a kill -9 (scripts/crash_start.sh).
#
# Each step prints JSON lines (or GNU time's lines) to WORK/results.txt as well.
set -euo pipefail
n=$1
work=$2
bin=${3:-target/release/neardup}
store=$work/store
mkdir -p "$work"
out=$work/results.txt
say() { echo "$@" | tee -a "$out"; }
say "# service_scale.sh $n $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"

if [ ! -d "$store" ]; then
  /usr/bin/time -f 'gen: wall_s %e user_s %U sys_s %S maxrss_kb %M' -o "$work/gen.time" \
    "$bin" bench gen-docs -n "$n" --doc-bytes 2000 --output - --truth "$work/truth.jsonl" \
    | /usr/bin/time -f 'load: wall_s %e user_s %U sys_s %S maxrss_kb %M' -o "$work/load.time" \
      "$bin" load --data "$store" --create --only-if-unique --outcomes "$work/outcomes.jsonl" \
        --matched-only - | tee -a "$out"
  cat "$work/gen.time" "$work/load.time" | tee -a "$out"
  python3 scripts/truth_found.py "$work/truth.jsonl" "$work/outcomes.jsonl" | tee -a "$out"
fi
say "disk_after_load_bytes $(du -sb "$store" | cut -f1) allocated $(du -s --block-size=1 "$store" | cut -f1) $(ls -l "$store" | tr -s ' ' | cut -d' ' -f5,9 | tr '\n' ' ')"

tail=$work/tail.jsonl
if [ ! -f "$tail" ]; then
  "$bin" bench gen-docs -n $((n + 2220000)) --first "$n" --doc-bytes 2000 --output "$tail"
fi

port=18188
/usr/bin/time -f 'serve: user_s %U sys_s %S maxrss_kb %M' -o "$work/start.time" \
  "$bin" serve --data "$store" --listen 127.0.0.1:$port --snapshot-every 0 2>"$work/start.err" &
tpid=$!
t0=$(date +%s.%N)
until curl -sf http://127.0.0.1:$port/healthz >/dev/null; do sleep 0.05; done
t1=$(date +%s.%N)
spid=$(pgrep -P $tpid)
say "start_s $(echo "$t1 - $t0" | bc) rss_kb $(awk '/^VmRSS/{print $2}' /proc/$spid/status) $(grep -o 'index.*' "$work/start.err" | head -1)"
curl -s http://127.0.0.1:$port/metrics | grep -E '^neardup_(memory|documents|resident)' | tee -a "$out"
kill -TERM "$spid"; wait $tpid || true

python3 scripts/service_load.py --corpus "$tail" --corpus-first "$n" --stored "$n" --reuse \
  --data "$store" --neardup "$bin" --queries 20000 --put-bodies 200000 \
  --scenarios check,mix,bulkcheck --seconds 30 --serve-arg=--snapshot-every --serve-arg=0 \
  | tee -a "$out"
python3 scripts/service_load.py --corpus "$tail" --corpus-first "$n" --stored "$n" --reuse \
  --data "$store" --neardup "$bin" --queries 20000 --put-skip 200000 --put-bodies 2000000 \
  --scenarios mix,mix,mix,mix,mix,mix,mix,mix,mix,mix --seconds 60 \
  --samples "$work/samples.jsonl" --serve-arg=--snapshot-every --serve-arg=0 | tee -a "$out"
say "disk_after_runs_bytes $(du -sb "$store" | cut -f1) allocated $(du -s --block-size=1 "$store" | cut -f1)"

scripts/crash_start.sh "$bin" "$store" true | tee -a "$out"
say "disk_after_crash_bytes $(du -sb "$store" | cut -f1) allocated $(du -s --block-size=1 "$store" | cut -f1)"
