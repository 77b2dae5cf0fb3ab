#!/usr/bin/env bash
# All-pairs at scale (docs/benchmarks.md, "A billion fingerprints"): writes N random
# fingerprints with planted near copies as raw u64, runs `neardup find-all` on them as a
# whole process under /usr/bin/time -v, and checks the output: every planted pair found,
# and a random sample brute-forced against the whole input.
#
#   scripts/allpairs_scale.sh 1000000000 3            # N, distance; blocks auto
#   BLOCKS=5 scripts/allpairs_scale.sh 100000000 3    # a layout by name (5, 4x4, ...)
#   MEMORY=4G scripts/allpairs_scale.sh 100000000 3   # a memory budget
#
# Needs N * 8 bytes of disk in $WORK (default /tmp/allpairs-scale); the file is kept for
# the next run with the same N and seed (KEEP=0 removes it at the end).
set -euo pipefail
cd "$(dirname "$0")/.."

n=${1:?N}
k=${2:-3}
planted=${PLANTED:-100000}
seed=${SEED:-2026}
work=${WORK:-/tmp/allpairs-scale}
bin=${NEARDUP:-target/release/neardup}
mkdir -p "$work"
fps="$work/fps-$n-$seed.u64"
truth="$work/truth-$n-$seed.jsonl"
pairs="$work/pairs-$n-k$k.jsonl"

if [ ! -s "$fps" ]; then
    "$bin" bench gen-fingerprints -n "$n" --planted "$planted" --max-distance "$k" \
        --seed "$seed" -o "$fps" --truth "$truth"
fi

args=(find-all -i "$fps" -o "$pairs" -d "$k" --blocks "${BLOCKS:-auto}")
[ -n "${MEMORY:-}" ] && args+=(--memory "$MEMORY")
/usr/bin/time -v "$bin" "${args[@]}" 2> "$work/time.txt" || { cat "$work/time.txt"; exit 1; }
grep -E "Elapsed|Maximum resident|User time|System time|Percent of CPU" "$work/time.txt"
"$bin" bench check-pairs -i "$fps" --pairs "$pairs" --truth "$truth" -d "$k" \
    --sample "${SAMPLE:-1000}"
if [ "${KEEP:-1}" = 0 ]; then
    rm -f "$fps" "$truth" "$pairs"
fi
