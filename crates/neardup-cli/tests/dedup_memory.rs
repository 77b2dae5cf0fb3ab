//! `neardup dedup` within a memory budget: with its state spilled to disk and matched in
//! many passes (`--memory` far below what it needs), in memory, and through the
//! all-in-memory path that `--report` takes, every output is the same, byte for byte.

mod common;

use std::path::Path;

use common::corpus::corpus;
use common::neardup;
use serde_json::Value;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs dedup on `input` with `flags` and returns its clusters, pairs, deduplicated
/// output and summary.
fn run(dir: &Path, input: &Path, name: &str, flags: &[&str]) -> (String, String, String, Value) {
    let path = |what: &str| dir.join(format!("{name}.{what}"));
    let (c, p, d, s) = (
        path("clusters"),
        path("pairs"),
        path("dedup"),
        path("stats"),
    );
    let mut args = vec![
        input.to_str().unwrap(),
        "-q",
        "--clusters",
        c.to_str().unwrap(),
        "--pairs",
        p.to_str().unwrap(),
        "--deduplicated",
        d.to_str().unwrap(),
        "--stats-json",
        s.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    let o = neardup(&[&["dedup"][..], &args].concat(), b"");
    assert!(
        o.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let stats: Value = serde_json::from_str(&read(&s)).unwrap();
    (read(&c), read(&p), read(&d), stats)
}

fn with<'a>(flags: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    [flags, more].concat()
}

#[test]
fn spilled_in_memory_and_all_in_memory_runs_write_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    for (seed, n, threshold, keep, closure) in [
        (1, 1500, "0.8", "first", false),
        (2, 1200, "0.6", "longest", false),
        (3, 900, "0.9", "shortest", true),
        (4, 1500, "0.7", "first", true),
    ] {
        let docs = corpus(seed, n);
        let input = dir.path().join(format!("docs{seed}.jsonl"));
        let lines: String = docs.iter().map(|d| format!("{d}\n")).collect();
        std::fs::write(&input, lines).unwrap();
        let report = dir.path().join("report.html");
        // On the estimates: the path of --report decides on them alone.
        let mut flags = vec!["--threshold", threshold, "--keep", keep, "--estimate"];
        if closure {
            flags.push("--closure");
        }
        // --report takes the path that holds everything in memory, as dedup did before
        // it had a budget.
        let all = run(
            dir.path(),
            &input,
            "all",
            &with(&flags, &["--report", report.to_str().unwrap()]),
        );
        let memory = run(dir.path(), &input, "memory", &flags);
        let spilled = run(
            dir.path(),
            &input,
            "spilled",
            &with(&flags, &["--memory", "1"]),
        );
        assert_eq!(memory.3["settings"]["spilled"], false);
        assert_eq!(spilled.3["settings"]["spilled"], true);
        let clusters = all.3["clusters"].as_u64().unwrap();
        assert!(clusters > 20, "seed {seed}: only {clusters} clusters");
        assert!(all.1.lines().count() > 50, "seed {seed}: few pairs");
        for (name, got) in [("in memory", &memory), ("spilled", &spilled)] {
            assert!(got.0 == all.0, "seed {seed}: clusters differ {name}");
            assert!(got.1 == all.1, "seed {seed}: pairs differ {name}");
            assert!(got.2 == all.2, "seed {seed}: deduplicated differs {name}");
            for k in [
                "exact_duplicates",
                "near_duplicates",
                "candidates",
                "verified",
                "wordless",
                "kept",
            ] {
                assert_eq!(got.3[k], all.3[k], "seed {seed}: {k} {name}");
            }
        }
    }
}

/// Verification reads the candidates' sketches all at once, in blocks, or each where it
/// lies, as the budget allows: budgets from 1 byte up give each way, and every way writes
/// the same bytes.
#[test]
fn every_way_of_reading_sketches_gives_the_same_answer() {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus(5, 20_000);
    let input = dir.path().join("docs.jsonl");
    let lines: String = docs.iter().map(|d| format!("{d}\n")).collect();
    std::fs::write(&input, lines).unwrap();
    let reference = run(dir.path(), &input, "reference", &[]);
    assert_eq!(reference.3["settings"]["sketch_reads"], "memory");
    let mut seen = std::collections::BTreeMap::new();
    let mut check = |budget: u64| -> String {
        let budget = budget.to_string();
        let got = run(
            dir.path(),
            &input,
            &format!("budget{budget}"),
            &["--memory", &budget],
        );
        let reads = got.3["settings"]["sketch_reads"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(got.0 == reference.0, "{budget}: clusters differ ({reads})");
        assert!(got.1 == reference.1, "{budget}: pairs differ ({reads})");
        assert!(
            got.2 == reference.2,
            "{budget}: deduplicated differs ({reads})"
        );
        assert_eq!(got.3["candidates"], reference.3["candidates"], "{budget}");
        assert_eq!(got.3["verified"], reference.3["verified"], "{budget}");
        let way = reads.split(' ').next_back().unwrap_or("").to_string();
        seen.entry(way.clone())
            .or_insert_with(Vec::new)
            .push(format!("{budget}: {reads}"));
        way
    };
    // Where the ways change depends on the state's chunks, not on this test: the least
    // budget that does not read each sketch where it lies, by bisection, then up from it
    // by 64 KiB until the sketches fit.
    let (mut low, mut high) = (1u64, 1u64 << 30);
    assert_eq!(check(low), "each");
    assert_ne!(check(high), "each");
    while high - low > 1 << 16 {
        let mid = low + (high - low) / 2;
        if check(mid) == "each" {
            low = mid;
        } else {
            high = mid;
        }
    }
    let mut budget = high;
    while check(budget) != "memory" && budget < high + (64 << 20) {
        budget += 1 << 16;
    }
    for way in ["memory", "blocks", "each"] {
        assert!(
            seen.contains_key(way),
            "no budget read the sketches {way}: {seen:?}"
        );
    }
}

#[test]
fn memory_is_refused_where_it_would_not_bound_anything() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    std::fs::write(&input, "{\"id\": 1, \"text\": \"a b c\"}\n").unwrap();
    let o = neardup(
        &[
            "dedup",
            input.to_str().unwrap(),
            "--distance",
            "40",
            "--memory",
            "1G",
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("drop --memory"));
    let o = neardup(&["dedup", input.to_str().unwrap(), "--memory", "lots"], b"");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected a size"));
}

/// A budget that leaves almost nothing to sort in still gives the answer, and says that
/// it is slow for it (each band read once per pass), naming a budget that takes one pass;
/// that budget is quiet.
#[test]
fn a_budget_too_small_to_be_quick_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    let lines: String = corpus(5, 6000).iter().map(|d| format!("{d}\n")).collect();
    std::fs::write(&input, lines).unwrap();
    let clusters = dir.path().join("clusters.jsonl");
    let warned = |memory: &str| {
        let o = neardup(
            &[
                "dedup",
                input.to_str().unwrap(),
                "-q",
                "--memory",
                memory,
                "--clusters",
                clusters.to_str().unwrap(),
            ],
            b"",
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let warning = err.lines().find(|l| l.contains("passes over its column"));
        (warning.map(str::to_string), read(&clusters))
    };
    let (warning, spilled) = warned("1");
    let warning = warning.expect("no warning at --memory 1");
    let enough = warning
        .split("; ")
        .nth(1)
        .and_then(|w| w.split(' ').next())
        .unwrap_or_else(|| panic!("no budget named: {warning}"));
    let (quiet, in_memory) = warned(&format!("{enough}M"));
    assert_eq!(quiet, None);
    assert!(spilled.lines().count() > 10, "{spilled}");
    assert_eq!(spilled, in_memory);
}
