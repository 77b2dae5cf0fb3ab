#!/usr/bin/env bash
# Fuzzes every parser and file format neardup reads (fuzz/fuzz_targets/), one target after
# another, each for SECONDS (default 60), starting from the committed corpus in
# fuzz/corpus/TARGET. Installs what it needs: the nightly toolchain (rustup) and cargo-fuzz
# (crates.io). A target that finds a panic, a hang (-timeout) or too much memory
# (-rss_limit_mb, -malloc_limit_mb) fails the run, after every target has had its turn; the
# input that did it is in fuzz/artifacts/TARGET/.
#
#   scripts/fuzz.sh [SECONDS [TARGET...]]   run (every target when none is named)
#   scripts/fuzz.sh cmin [TARGET...]        minimise the corpora before committing them
#
# FUZZ_CORPUS_DIR=DIR runs on a copy of the corpora in DIR, leaving fuzz/corpus as it is
# (CI does); FUZZ_BUILD_FLAGS adds flags to `cargo fuzz build`.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if [[ "$(cargo +nightly fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]]; then
    cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi

mode=run
if [[ "${1:-}" == cmin ]]; then
    mode=cmin
    shift
fi
seconds=60
if [[ "$mode" == run && $# -gt 0 ]]; then
    seconds=$1
    shift
fi
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

# shellcheck disable=SC2086 # FUZZ_BUILD_FLAGS is a list of flags
cargo +nightly fuzz build ${FUZZ_BUILD_FLAGS:-}

if [[ "$mode" == cmin ]]; then
    for t in "${targets[@]}"; do
        cargo +nightly fuzz cmin ${FUZZ_BUILD_FLAGS:-} "$t" -- -rss_limit_mb=2048 -timeout=10
    done
    exit 0
fi

failed=()
for t in "${targets[@]}"; do
    corpus=fuzz/corpus/$t
    mkdir -p "$corpus"
    if [[ -n "${FUZZ_CORPUS_DIR:-}" ]]; then
        mkdir -p "$FUZZ_CORPUS_DIR/$t"
        cp -r "$corpus/." "$FUZZ_CORPUS_DIR/$t/"
        corpus=$FUZZ_CORPUS_DIR/$t
    fi
    echo "== fuzz $t for ${seconds}s"
    # The store target runs a few inputs a second (each opens a store): its inputs, lists
    # of edits, may be long from the start.
    extra=()
    if [[ "$t" == store_file ]]; then
        extra=(-len_control=0 -max_len=128)
    fi
    # One job on one core; an input that takes over 10 s or 2 GB (or asks for 1 GB at
    # once) is a finding, as a panic is.
    # shellcheck disable=SC2086
    if ! cargo +nightly fuzz run ${FUZZ_BUILD_FLAGS:-} "$t" "$corpus" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
        -print_final_stats=1 "${extra[@]}"; then
        failed+=("$t")
    fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzz: findings in: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
