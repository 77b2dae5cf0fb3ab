#!/usr/bin/env bash
# Every speed comparison of docs/benchmarks.md ("Side by side") in one run: neardup and its
# peers on the same files, back to back, ROUNDS times, one JSON line per measurement on
# standard output (progress on standard error). scripts/side_by_side.py turns them into the
# tables.
#
#   scripts/side_by_side.sh NEARDUP PEERS_DIR NATURAL SECOND [ROUNDS] > runs.jsonl
#
# NEARDUP: the neardup binary (a release build). PEERS_DIR: the peer harness (its run.sh,
# bench.py, score_dedup.py; peers installed and gen_data.py --text run, as its README says).
# NATURAL, SECOND: JSON Lines corpora ({"id", "text"}) to fingerprint and deduplicate, e.g.
# the natural corpus of Python, npm and changelog files and one of man pages, copyright
# files and Rust's HTML docs (docs/benchmarks.md says how they were made). ROUNDS: 3.
#
# Timing: the peers time themselves (their JSON lines); neardup's commands are timed from
# outside with /usr/bin/time (whole processes) or time themselves (`neardup bench`). Every
# line records the 1-minute load average: on a shared machine read CPU seconds beside wall
# time, and ratios taken within a round.
set -euo pipefail
ND=$(realpath "$1")
PEERS=$(realpath "$2")
NATURAL=$(realpath "$3")
SECOND=$(realpath "$4")
ROUNDS=${5:-3}
PEERS_HOME=${PEERS_HOME:-$HOME/.cache/neardup-peers}
DATA=${PEERS_DATA:-$PEERS_HOME/data}
PY=$PEERS_HOME/venv/bin/python
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

load() { cut -d' ' -f1 /proc/loadavg; }

# A whole neardup process, one JSON line: wall and CPU seconds, peak RSS (PEER names it).
whole() {
    local label=$1 mb=$2
    shift 2
    local l
    l=$(load)
    /usr/bin/time -f '%e %U %S %M' -o "$TMP/time" "$@" > /dev/null
    read -r wall user sys rss < "$TMP/time"
    printf '{"peer": "%s", "variant": "%s", "workload": "%s", "threads": %s, "mb": %s, "seconds": %s, "cpu_s": %.2f, "max_rss_mb": %.0f, "loadavg": %s}\n' \
        "${PEER:-neardup}" "$label" "${WORKLOAD}" "${RAYON_NUM_THREADS:-2}" "$mb" "$wall" "$(echo "$user + $sys" | bc)" "$(echo "$rss / 1024" | bc)" "$l"
}

mb_of() { "$PY" -c 'import json,sys; print(round(sum(len(json.loads(l)["text"].encode()) for l in open(sys.argv[1], encoding="utf-8")) / 1e6, 3))' "$1"; }

# gaoya's fingerprinting on any corpus: the harness reads corpus.jsonl from PEERS_DATA.
corpus_dir() {
    local dir=$TMP/$2
    mkdir -p "$dir"
    ln -sf "$1" "$dir/corpus.jsonl"
    echo '{"files": {"corpus": "corpus.jsonl"}}' > "$dir/manifest.json"
    echo "$dir"
}
NAT_DIR=$(corpus_dir "$NATURAL" natural)
SEC_DIR=$(corpus_dir "$SECOND" second)
NAT_MB=$(mb_of "$NATURAL")
SEC_MB=$(mb_of "$SECOND")
PEERS_MB=$(mb_of "$DATA/corpus.jsonl")
DEDUP_MB=$(mb_of "$DATA/dedup.jsonl")

for round in $(seq "$ROUNDS"); do
    echo "# round $round, $(date +%T), load $(load)" >&2
    printf '{"round": %d, "loadavg": %s}\n' "$round" "$(load)"

    echo "# index" >&2
    "$PEERS/run.sh" index mih-rs faiss gaoya 2>/dev/null | grep -v '"variant": *"\(hash24\|flat\|mh4x16-par\|par\)"' || true
    RAYON_NUM_THREADS=1 "$ND" bench index --index "$DATA/index_1m.u64" \
        --queries "$DATA/queries_100k.u64" --truth "$DATA/queries_100k_truth.i64" --repeats 3

    echo "# fingerprints" >&2
    for dir in "$DATA" "$NAT_DIR" "$SEC_DIR"; do
        PEERS_DATA=$dir REPEATS=3 "$PY" "$PEERS/bench.py" fp gaoya word | sed "s|}\$|, \"corpus\": \"$dir\"}|"
    done
    WORKLOAD=fp
    export RAYON_NUM_THREADS=1
    whole "fingerprint $DATA/corpus.jsonl" "$PEERS_MB" "$ND" fingerprint "$DATA/corpus.jsonl" -o /dev/null
    whole "fingerprint $NATURAL" "$NAT_MB" "$ND" fingerprint "$NATURAL" -o /dev/null
    whole "fingerprint $SECOND" "$SEC_MB" "$ND" fingerprint "$SECOND" -o /dev/null
    unset RAYON_NUM_THREADS
    RAYON_NUM_THREADS=1 "$ND" bench fingerprint --input "$DATA/corpus.jsonl,$NATURAL,$SECOND" --repeats 3 |
        grep '"serial"'

    echo "# dedup" >&2
    "$PEERS/run.sh" dedup datasketch gaoya 2>/dev/null || true
    # rensa, as its users run it, on the planted copies: scored like the others.
    l=$(load)
    /usr/bin/time -f '%e %U %S %M' -o "$TMP/time" "$PY" "$PEERS/../natural/peers.py" \
        "$DATA/dedup.jsonl" "$TMP/rensa.jsonl" rensa-t0.8 > /dev/null
    read -r wall user sys rss < "$TMP/time"
    "$PY" "$PEERS/score_dedup.py" "$TMP/rensa.jsonl" --seconds "$wall" \
        --cpu-s "$(echo "$user + $sys" | bc)" --max-rss-mb "$((rss / 1024))" \
        --impl "rensa 0.5.0 RMinHashDeduplicator(threshold 0.8, 128 perm, use_lsh), keep-first" |
        sed "s|\"peer\": *\"neardup\"|\"peer\": \"rensa\"|; s|}\$|, \"threads\": 1, \"loadavg\": $l}|"
    for threads in 1 2; do
        l=$(load)
        RAYON_NUM_THREADS=$threads /usr/bin/time -f '%e %U %S %M' -o "$TMP/time" \
            "$ND" dedup "$DATA/dedup.jsonl" --pairs "$TMP/pairs.jsonl" -q
        read -r wall user sys rss < "$TMP/time"
        "$PY" "$PEERS/score_dedup.py" "$TMP/pairs.jsonl" --seconds "$wall" \
            --cpu-s "$(echo "$user + $sys" | bc)" --max-rss-mb "$((rss / 1024))" \
            --impl "neardup dedup, $threads threads" | sed "s|}\$|, \"threads\": $threads, \"loadavg\": $l}|"
    done
    # The natural corpora: neardup and rensa (the fastest MinHash peer), whole processes.
    for corpus in "$NATURAL" "$SECOND"; do
        WORKLOAD=dedup
        for threads in 1 2; do
            RAYON_NUM_THREADS=$threads whole "dedup $corpus" "$(mb_of "$corpus")" \
                "$ND" dedup "$corpus" --pairs "$TMP/pairs.jsonl" --clusters "$TMP/clusters.jsonl" -q
        done
        # The sketches alone deciding every pair, as rensa's do.
        PEER="neardup --estimate" RAYON_NUM_THREADS=2 whole "dedup $corpus" "$(mb_of "$corpus")" \
            "$ND" dedup "$corpus" --estimate --pairs "$TMP/pairs.jsonl" --clusters "$TMP/clusters.jsonl" -q
        l=$(load)
        /usr/bin/time -f '%e %U %S %M' -o "$TMP/time" "$PY" "$PEERS/../natural/peers.py" \
            "$corpus" "$TMP/rensa.jsonl" rensa-t0.8 > /dev/null
        read -r wall user sys rss < "$TMP/time"
        printf '{"peer": "rensa", "variant": "dedup %s", "workload": "dedup", "threads": 1, "seconds": %s, "cpu_s": %.2f, "max_rss_mb": %d, "loadavg": %s}\n' \
            "$corpus" "$wall" "$(echo "$user + $sys" | bc)" "$((rss / 1024))" "$l"
    done

    echo "# all pairs" >&2
    "$PEERS/run.sh" allpairs mih-rs gaoya 2>/dev/null || true
    "$ND" bench find-all --input "$DATA/allpairs_1m.u64" --truth "$DATA/allpairs_1m_truth.u64" \
        --blocks auto --repeats 5
done
