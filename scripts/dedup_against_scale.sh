#!/usr/bin/env bash
# `neardup dedup --against` / `--save` at scale: a store of the first OLD documents (made
# by `neardup dedup OLD --save STORE`, so it holds what dedup kept), then NEW documents
# that follow them (the same generator and seed, so their planted near-duplicates point
# back into OLD as often as into NEW) deduplicated against it, then saved into it. Each
# step timed (--stats-json) with its peak RSS (/usr/bin/time -v).
#
#   scripts/dedup_against_scale.sh                      # 10M stored, 1M new
#   OLD=1000000 NEW=100000 scripts/dedup_against_scale.sh
#
# Disk: the two corpora in zstd (about 40% of their text) and the store (about 800 bytes
# a document); KEEP=1 keeps them, they are deleted otherwise.
set -euo pipefail

OLD=${OLD:-10000000}
NEW=${NEW:-1000000}
DIR=${DIR:-/tmp/dedup-against-$OLD}
BIN=${BIN:-target/release/neardup}
SEED=${SEED:-1}
TOTAL=$((OLD + NEW))

mkdir -p "$DIR"
gen() { # first, n, file
  "$BIN" bench gen-docs -n "$2" --first "$1" --doc-bytes 1000 --planted 0.1 \
    --max-edit 0.04 --seed "$SEED" -o "$3"
}
[ -f "$DIR/old.jsonl.zst" ] || gen 0 "$OLD" "$DIR/old.jsonl.zst"
[ -f "$DIR/new.jsonl.zst" ] || gen "$OLD" "$TOTAL" "$DIR/new.jsonl.zst"
du -sh "$DIR"/*.zst >&2

step() { # name, dedup arguments...
  local name=$1
  shift
  echo "== $name, load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  /usr/bin/time -v -o "$DIR/$name.time" "$BIN" dedup "$@" -q --stats-json "$DIR/$name.json"
  python3 - "$DIR/$name.json" "$DIR/$name.time" <<'EOF'
import json, re, sys
s = json.load(open(sys.argv[1]))
t = open(sys.argv[2]).read()
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1))
cpu = sum(float(re.search(p + r": ([\d.]+)", t).group(1))
          for p in (r"User time \(seconds\)", r"System time \(seconds\)"))
print(json.dumps({"documents": s["documents"], "kept": s["kept"],
                  "store": s["settings"].get("store"), "seconds": s["seconds"],
                  "cpu_seconds": round(cpu, 1), "peak_rss_mb": rss // 1024}))
EOF
}

rm -rf "$DIR/store"
step save-old "$DIR/old.jsonl.zst" --save "$DIR/store"
du -sh "$DIR/store" >&2
step against "$DIR/new.jsonl.zst" --against "$DIR/store" --deduplicated /dev/null
step save-new "$DIR/new.jsonl.zst" --save "$DIR/store"
du -sh "$DIR/store" >&2

[ "${KEEP:-0}" = 1 ] || rm -rf "$DIR"
