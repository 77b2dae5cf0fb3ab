#!/usr/bin/env bash
# `neardup dedup` at scale: N documents of about 1 KB with planted near-duplicates and
# their truth, generated into zstd shards (`neardup bench gen-docs`, no plain-text copy on
# disk), then deduplicated twice, in memory and within --memory, each run timed by phase
# (--stats-json), its peak RSS taken (/usr/bin/time -v) and scored against the truth
# (scripts/dedup_scale_score.py: every planted pair with J >= 0.85 found, nothing removed
# that is not a near-duplicate of what it was removed for).
#
#   N=10000000 scripts/dedup_scale.sh            # 10M: ~10 GB of text, ~4 GB of zstd
#   N=100000000 MEMORY=4G scripts/dedup_scale.sh # 100M: ~100 GB of text
#   FLAGS=--estimate N=10000000 scripts/dedup_scale.sh # every pair on the sketches alone
#                                                    # (by default the pairs near the
#                                                    # threshold are decided on their texts)
#
# Disk: the shards (about 40% of the text), plus dedup's temporary files in TMPDIR: 128
# bytes a document of sketches, and with --memory 92 bytes a document of band keys and
# text hashes. KEEP=1 keeps the corpus for another run; it is deleted otherwise.
set -euo pipefail

N=${N:-10000000}
MEMORY=${MEMORY:-4G}
DIR=${DIR:-/tmp/dedup-scale-$N}
BIN=${BIN:-target/release/neardup}
SHARDS=${SHARDS:-32}
SEED=${SEED:-1}
RUNS=${RUNS:-"memory budget"}
read -r -a extra <<< "${FLAGS:-}"
here=$(cd "$(dirname "$0")" && pwd)

mkdir -p "$DIR"
if [ ! -f "$DIR/truth.jsonl" ]; then
  echo "== generating $N documents into $DIR/corpus" >&2
  /usr/bin/time -f "gen-docs: %e s wall, %U+%S s CPU, %M KB peak" \
    "$BIN" bench gen-docs -n "$N" --doc-bytes 1000 --planted 0.1 --max-edit 0.04 \
      --seed "$SEED" --shards "$SHARDS" -o "$DIR/corpus" --truth "$DIR/truth.jsonl"
  du -sh "$DIR/corpus" >&2
fi

for run in $RUNS; do
  flags=("${extra[@]}")
  [ "$run" = budget ] && flags+=(--memory "$MEMORY")
  echo "== dedup ($run${flags[*]:+: ${flags[*]}}), load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  /usr/bin/time -v -o "$DIR/$run.time" \
    "$BIN" dedup "$DIR/corpus" "${flags[@]}" --pairs "$DIR/$run.pairs.jsonl" \
      --clusters "$DIR/$run.clusters.jsonl" --stats-json "$DIR/$run.stats.json"
  grep -E "Elapsed|Maximum resident|User time|System time" "$DIR/$run.time" >&2
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(json.dumps({"documents": s["documents"], "bytes": s["bytes"], "seconds": s["seconds"], "pairs": s["pairs"], "near_duplicates": s["near_duplicates"], "spilled": s["settings"].get("spilled")}))' "$DIR/$run.stats.json"
  python3 "$here/dedup_scale_score.py" --truth "$DIR/truth.jsonl" \
    --pairs "$DIR/$run.pairs.jsonl" --clusters "$DIR/$run.clusters.jsonl" \
    --corpus "$DIR/corpus" || true
done
if [ "$RUNS" = "memory budget" ]; then
  cmp "$DIR/memory.pairs.jsonl" "$DIR/budget.pairs.jsonl" && \
  cmp "$DIR/memory.clusters.jsonl" "$DIR/budget.clusters.jsonl" && \
    echo "in memory and within --memory $MEMORY: the same pairs and clusters, byte for byte" >&2
fi
[ "${KEEP:-0}" = 1 ] || rm -rf "$DIR/corpus"
