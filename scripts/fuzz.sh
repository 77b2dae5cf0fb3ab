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
#   scripts/fuzz.sh ci [BUDGET]             CI: install, build and run every target, all
#                                           within BUDGET seconds (default 300), on a copy
#                                           of the corpora
#
# FUZZ_CORPUS_DIR=DIR runs on a copy of the corpora in DIR, leaving fuzz/corpus as it is;
# FUZZ_BUILD_FLAGS adds flags to `cargo fuzz build`.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)

CARGO_FUZZ_VERSION=0.13.2

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if [[ "$(cargo +nightly fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]]; then
    # A debug build: it compiles in half the time, and only drives cargo.
    cargo install cargo-fuzz --locked --debug --version "$CARGO_FUZZ_VERSION"
fi

mode=run
if [[ "${1:-}" == cmin || "${1:-}" == ci ]]; then
    mode=$1
    shift
fi
seconds=60
if [[ "$mode" == run && $# -gt 0 ]]; then
    seconds=$1
    shift
fi
budget=300
if [[ "$mode" == ci && $# -gt 0 ]]; then
    budget=$1
    shift
fi
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

# An input that takes over 10 s or 2 GB (or asks for 1 GB at once) is a finding, as a
# panic is.
limits=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024)
# The store target runs a few inputs a second (each opens a store): its inputs, lists of
# edits, may be long from the start.
extra_of() {
    if [[ "$1" == store_file ]]; then
        echo "-len_control=0 -max_len=128"
    fi
}

if [[ "$mode" == ci ]]; then
    # A short run needs a short build more than fast inputs: no sanitizer (the code is
    # safe Rust; the development runs use AddressSanitizer), no comparison tracing, the
    # dev profile of fuzz/Cargo.toml (light optimisation), in a target directory of its
    # own.
    cargo +nightly fuzz build --dev -s none --no-trace-compares --codegen-units 16 \
        --target-dir target/fuzz-ci
    bin=target/fuzz-ci/x86_64-unknown-linux-gnu/debug
    deadline=$((started + budget))
    copies=target/ci-fuzz-corpus
    rm -rf "$copies"
    failed=()
    left=${#targets[@]}
    for t in "${targets[@]}"; do
        mkdir -p "$copies/$t" "fuzz/artifacts/$t"
        cp -r "fuzz/corpus/$t/." "$copies/$t/"
        # What is left of the budget, shared by the targets still to run; at least 5 s
        # each, so a slow build makes the step a little longer rather than skip targets.
        share=$(((deadline - $(date +%s)) / left))
        share=$((share < 5 ? 5 : share))
        left=$((left - 1))
        echo "== fuzz $t for ${share}s"
        # -max_total_time is not looked at while the corpus is read in (the store
        # target's takes about 40 s of CPU): an interrupt bounds that, which libFuzzer
        # ends with status 72 after its final statistics.
        status=0
        # shellcheck disable=SC2046 # extra_of is a list of flags
        timeout --preserve-status -s INT $((share + 2)) "$bin/$t" "$copies/$t" \
            -artifact_prefix="fuzz/artifacts/$t/" -max_total_time="$share" \
            -print_final_stats=1 "${limits[@]}" $(extra_of "$t") || status=$?
        if [[ $status -ne 0 && $status -ne 72 ]]; then
            failed+=("$t")
        fi
    done
    echo "fuzz: ${#targets[@]} targets in $(($(date +%s) - started)) s, build included"
    if [[ ${#failed[@]} -gt 0 ]]; then
        echo "fuzz: findings in: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
        exit 1
    fi
    exit 0
fi

# shellcheck disable=SC2086 # FUZZ_BUILD_FLAGS is a list of flags
cargo +nightly fuzz build ${FUZZ_BUILD_FLAGS:-}

if [[ "$mode" == cmin ]]; then
    for t in "${targets[@]}"; do
        # shellcheck disable=SC2086
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
    # One job on one core.
    # shellcheck disable=SC2086,SC2046
    if ! cargo +nightly fuzz run ${FUZZ_BUILD_FLAGS:-} "$t" "$corpus" -- \
        -max_total_time="$seconds" -print_final_stats=1 "${limits[@]}" $(extra_of "$t"); then
        failed+=("$t")
    fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzz: findings in: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
