//! Faults and bad input, end to end: no command writes over what it reads or the store it
//! uses (by any path to it), none panics on an output that fills up, and each bad input is
//! an error that names it.

#![cfg(unix)]

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::neardup;
use serde_json::Value;

/// Runs a binary of this crate in `cwd`, standard output to `stdout`, no standard input.
fn run_in(bin: &str, cwd: &Path, args: &[&str], stdout: Stdio) -> Output {
    Command::new(bin)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

const NEARDUP: &str = env!("CARGO_BIN_EXE_neardup");
const FIND_ALL: &str = env!("CARGO_BIN_EXE_simhash-find-all");
const FIND_CLUSTERS: &str = env!("CARGO_BIN_EXE_simhash-find-clusters");

fn fails(o: &Output, code: i32, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{err}");
    assert!(err.contains(needle), "{err:?} lacks {needle:?}");
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

const DOCS: &str = "{\"id\":\"a\",\"text\":\"the quick brown fox jumps over the lazy dog\"}\n\
                    {\"id\":\"b\",\"text\":\"the quick brown fox jumped over the lazy dog\"}\n\
                    {\"id\":\"c\",\"text\":\"an unrelated sentence about something else\"}\n";

/// A directory with docs.jsonl, fps.txt (decimal fingerprints), ids.txt, a whole idf table
/// and weights, and a store `store` holding the documents.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("docs.jsonl"), DOCS).unwrap();
    std::fs::write(p.join("fps.txt"), "1\n3\n1024\n").unwrap();
    std::fs::write(p.join("ids.txt"), "a\n").unwrap();
    std::fs::write(p.join("weights.json"), "{\"fox\": 2.0}").unwrap();
    ok(&run_in(
        NEARDUP,
        p,
        &["idf", "docs.jsonl", "-o", "table.idf", "--min-df", "1"],
        Stdio::null(),
    ));
    ok(&run_in(
        NEARDUP,
        p,
        &["index", "create", "store"],
        Stdio::null(),
    ));
    ok(&run_in(
        NEARDUP,
        p,
        &["index", "insert", "store", "docs.jsonl"],
        Stdio::null(),
    ));
    dir
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if !path.ends_with("neardup.pid") {
                out.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_command_writes_over_its_inputs_or_store() {
    let dir = workspace();
    let p = dir.path();
    std::os::unix::fs::symlink("docs.jsonl", p.join("link.jsonl")).unwrap();
    std::os::unix::fs::symlink("store/neardup.redb", p.join("store.link")).unwrap();
    std::fs::hard_link(p.join("fps.txt"), p.join("fps.hard")).unwrap();
    std::fs::create_dir(p.join("corpus")).unwrap();
    std::fs::copy(p.join("docs.jsonl"), p.join("corpus/docs.jsonl")).unwrap();
    let before = snapshot(p);
    // (binary, arguments, what the message says)
    let cases: &[(&str, &[&str], &str)] = &[
        // The case: the store's own file as the query's output, by every path.
        (
            NEARDUP,
            &[
                "index",
                "query",
                "store",
                "docs.jsonl",
                "-o",
                "store/neardup.redb",
            ],
            "is the store",
        ),
        (
            NEARDUP,
            &[
                "index",
                "query",
                "store",
                "docs.jsonl",
                "-o",
                "./store/../store/neardup.redb",
            ],
            "is the store",
        ),
        (
            NEARDUP,
            &[
                "index",
                "query",
                "./store",
                "docs.jsonl",
                "-o",
                "store.link",
            ],
            "is the store",
        ),
        (
            NEARDUP,
            &[
                "index",
                "query",
                "store",
                "docs.jsonl",
                "-o",
                "./docs.jsonl",
            ],
            "is an input",
        ),
        (
            NEARDUP,
            &[
                "index",
                "query",
                "store",
                "--fingerprints",
                "-i",
                "docs.jsonl",
                "-o",
                "link.jsonl",
            ],
            "is an input",
        ),
        (
            NEARDUP,
            &[
                "index",
                "query",
                "store",
                "docs.jsonl",
                "--weighting",
                "tfidf",
                "--idf",
                "table.idf",
                "-o",
                "table.idf",
            ],
            "is the idf table",
        ),
        (
            NEARDUP,
            &["index", "export", "store", "-o", "store/neardup.redb"],
            "is the store",
        ),
        // The store is written: it may not be read as documents or ids.
        (
            NEARDUP,
            &["index", "insert", "store", "store/neardup.redb"],
            "the store",
        ),
        (
            NEARDUP,
            &["index", "insert", "store", "."],
            "inside an input",
        ),
        (
            NEARDUP,
            &["index", "remove", "store", "-i", "store.link"],
            "the store",
        ),
        // Every other command with an output.
        (
            NEARDUP,
            &["fingerprint", "docs.jsonl", "-o", "link.jsonl"],
            "is an input",
        ),
        (
            NEARDUP,
            &["fingerprint", "corpus", "-o", "corpus/out.jsonl"],
            "inside an input",
        ),
        (
            NEARDUP,
            &[
                "fingerprint",
                "docs.jsonl",
                "--weighting",
                "custom",
                "--weights",
                "weights.json",
                "-o",
                "./weights.json",
            ],
            "is the weights",
        ),
        (
            NEARDUP,
            &["idf", "docs.jsonl", "-o", "docs.jsonl"],
            "is an input",
        ),
        (
            NEARDUP,
            &[
                "idf",
                "docs.jsonl",
                "--weighting",
                "tfidf",
                "--idf",
                "table.idf",
                "-o",
                "table.idf",
            ],
            "is the idf table",
        ),
        (
            NEARDUP,
            &["dedup", "docs.jsonl", "--deduplicated", "./link.jsonl"],
            "is an input",
        ),
        (
            NEARDUP,
            &[
                "dedup",
                "docs.jsonl",
                "--clusters",
                "c.jsonl",
                "--pairs",
                "./c.jsonl",
            ],
            "the same file",
        ),
        (
            NEARDUP,
            &["find-all", "-i", "fps.txt", "-o", "./fps.txt"],
            "is the input",
        ),
        (
            NEARDUP,
            &["find-clusters", "-i", "fps.txt", "-o", "fps.hard"],
            "is the input",
        ),
        (
            NEARDUP,
            &[
                "eval",
                "docs.jsonl",
                "-o",
                "docs.jsonl",
                "--configs",
                "default",
            ],
            "is an input",
        ),
        (
            FIND_ALL,
            &["-i", "fps.txt", "-o", "fps.hard"],
            "is the input",
        ),
        (
            FIND_CLUSTERS,
            &["-i", "./fps.txt", "-o", "fps.txt"],
            "is the input",
        ),
    ];
    for (bin, args, needle) in cases {
        let o = run_in(bin, p, args, Stdio::piped());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
        assert_eq!(snapshot(p), before, "{args:?} changed a file");
    }
    // Standard output redirected onto an input (`>> docs.jsonl`, which would never end).
    let append = File::options()
        .append(true)
        .open(p.join("docs.jsonl"))
        .unwrap();
    let o = run_in(
        NEARDUP,
        p,
        &["fingerprint", "docs.jsonl"],
        Stdio::from(append),
    );
    fails(&o, 2, "is an input");
    // The benchmarks print to standard output too.
    for (args, needle) in [
        (
            &["bench", "fingerprint", "--input", "docs.jsonl"][..],
            "is an input",
        ),
        (
            &["bench", "fingerprint", "--input", "fps.txt,./docs.jsonl"][..],
            "is an input",
        ),
        (
            &["bench", "find-all", "--input", "docs.jsonl"][..],
            "is the input",
        ),
    ] {
        let append = File::options()
            .append(true)
            .open(p.join("docs.jsonl"))
            .unwrap();
        let o = run_in(NEARDUP, p, args, Stdio::from(append));
        fails(&o, 2, needle);
    }
    // And standard input read from the output.
    let o = Command::new(NEARDUP)
        .args(["find-all", "-o", "fps.txt"])
        .current_dir(p)
        .stdin(File::open(p.join("fps.txt")).unwrap())
        .output()
        .unwrap();
    fails(&o, 2, "is the input");
    assert_eq!(snapshot(p), before);
    // The store still opens, whole.
    let stats = run_in(NEARDUP, p, &["index", "stats", "store"], Stdio::piped());
    ok(&stats);
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(stats["documents"], 3);
    // Outputs apart from the inputs are fine, and /dev/null is never refused.
    ok(&run_in(
        NEARDUP,
        p,
        &[
            "index",
            "query",
            "store",
            "docs.jsonl",
            "-o",
            "store/results.jsonl",
        ],
        Stdio::null(),
    ));
    ok(&run_in(
        NEARDUP,
        p,
        &["find-all", "-i", "/dev/null", "-o", "/dev/null"],
        Stdio::null(),
    ));
}

#[test]
fn a_full_output_is_exit_1_with_a_message_for_every_command() {
    if !Path::new("/dev/full").exists() {
        return;
    }
    let dir = workspace();
    let p = dir.path();
    std::fs::write(
        p.join("fps.u64"),
        [1u64, 3, 1024].map(u64::to_le_bytes).concat(),
    )
    .unwrap();
    let cases: &[(&str, &[&str])] = &[
        (NEARDUP, &["--help"]),
        (NEARDUP, &["--version"]),
        (NEARDUP, &["index", "--help"]),
        (NEARDUP, &["index", "stats", "store"]),
        (NEARDUP, &["index", "check", "store"]),
        (NEARDUP, &["index", "export", "store"]),
        (NEARDUP, &["index", "query", "store", "docs.jsonl"]),
        (NEARDUP, &["fingerprint", "docs.jsonl"]),
        (NEARDUP, &["dedup", "docs.jsonl", "--deduplicated", "-"]),
        (NEARDUP, &["dedup", "docs.jsonl", "--stats-json", "-"]),
        (NEARDUP, &["find-all", "-i", "fps.txt"]),
        (NEARDUP, &["find-clusters", "-i", "fps.txt"]),
        (
            NEARDUP,
            &[
                "eval",
                "docs.jsonl",
                "--configs",
                "default",
                "--originals",
                "2",
            ],
        ),
        (
            NEARDUP,
            &[
                "bench",
                "find-all",
                "--input",
                "fps.txt",
                "--repeats",
                "1",
                "--blocks",
                "4",
            ],
        ),
        (
            NEARDUP,
            &[
                "bench",
                "fingerprint",
                "--input",
                "docs.jsonl",
                "--repeats",
                "1",
            ],
        ),
        (
            NEARDUP,
            &[
                "bench",
                "index",
                "--index",
                "fps.u64",
                "--queries",
                "fps.u64",
                "--repeats",
                "1",
            ],
        ),
        (FIND_ALL, &["-i", "fps.txt"]),
        (FIND_CLUSTERS, &["-i", "fps.txt"]),
        (FIND_ALL, &["--help"]),
    ];
    for (bin, args) in cases {
        let full = File::options().write(true).open("/dev/full").unwrap();
        let o = run_in(bin, p, args, Stdio::from(full));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("cannot write"), "{args:?}: {err}");
        assert!(err.contains("No space left on device"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // Written files too (-o /dev/full): idf writes its table in one go.
    let o = run_in(
        NEARDUP,
        p,
        &["idf", "docs.jsonl", "-o", "/dev/full"],
        Stdio::null(),
    );
    fails(&o, 1, "No space left on device");
    let o = run_in(
        NEARDUP,
        p,
        &["fingerprint", "docs.jsonl", "-o", "/dev/full"],
        Stdio::null(),
    );
    fails(&o, 1, "cannot write /dev/full");
    // A full standard error loses the messages, never the exit status.
    let full = File::options().write(true).open("/dev/full").unwrap();
    let o = Command::new(NEARDUP)
        .args(["index", "stats", "no-such-store"])
        .current_dir(p)
        .stderr(Stdio::from(full))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let full = File::options().write(true).open("/dev/full").unwrap();
    let o = Command::new(NEARDUP)
        .args(["index", "create", "other"])
        .current_dir(p)
        .stderr(Stdio::from(full))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn create_with_a_bad_distance_blames_it_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("new");
    let d = d.to_str().unwrap();
    for distance in ["65", "64"] {
        let o = neardup(&["index", "create", d, "--distance", distance], b"");
        fails(
            &o,
            2,
            &format!("neardup: error: distance {distance} is more than 63"),
        );
        assert!(!Path::new(d).exists(), "create left {d} behind");
    }
    let o = neardup(
        &["index", "create", d, "--distance", "5", "--blocks", "3"],
        b"",
    );
    fails(&o, 2, "blocks");
    assert!(!Path::new(d).exists(), "create left {d} behind");
}

#[test]
fn bad_bytes_in_id_and_fingerprint_lists_name_file_and_line() {
    let dir = workspace();
    let p = dir.path();
    std::fs::write(p.join("bad-ids.txt"), b"a\r\nok\n\xff\xfeb\n").unwrap();
    let o = run_in(
        NEARDUP,
        p,
        &["index", "remove", "store", "-i", "bad-ids.txt"],
        Stdio::null(),
    );
    fails(&o, 2, "bad-ids.txt:3: not UTF-8");
    // Nothing was removed: the list is read whole first.
    let o = run_in(NEARDUP, p, &["index", "stats", "store"], Stdio::piped());
    let stats: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(stats["documents"], 3);
    let o = neardup(
        &["index", "remove", &p.join("store").to_string_lossy()],
        b"a\n\x80\n",
    );
    fails(&o, 2, "<stdin>:2: not UTF-8");
    let o = neardup(
        &[
            "index",
            "insert",
            &p.join("store").to_string_lossy(),
            "--fingerprints",
        ],
        b"{\"id\":\"x\",\"fingerprint\":\"1\"}\n{\"id\":\"\xff\",\"fingerprint\":\"1\"}\n",
    );
    fails(&o, 2, "<stdin>:2: not UTF-8");
    // CRLF lists are fine.
    let o = run_in(
        NEARDUP,
        p,
        &["index", "remove", "store", "-i", "ids.txt"],
        Stdio::null(),
    );
    ok(&o);
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 of 1 ids removed"));
}

#[test]
fn a_damaged_store_is_an_error_then_checked_exported_and_repaired() {
    let dir = workspace();
    let p = dir.path();
    // A store in use for a while: written in several commits, its file ends in free
    // pages (the last one holds nothing of it).
    let big = p.join("big");
    let config = neardup_store::StoreConfig {
        blocks: neardup::tables::Blocks::Fixed(6),
        distance: 3,
        fingerprint_version: 2,
    };
    let mut store = neardup_store::FingerprintStore::create(&big, config, 0).unwrap();
    let ids: Vec<String> = (0..2000).map(|i| format!("d{i:04}")).collect();
    for chunk in ids.chunks(500) {
        let docs: Vec<(&str, u64, Option<std::time::Duration>)> = chunk
            .iter()
            .map(|id| (id.as_str(), xxhash_rust::xxh3::xxh3_64(id.as_bytes()), None))
            .collect();
        store.insert_bulk(&docs, |_| {}).unwrap();
    }
    drop(store);
    std::fs::rename(p.join("store"), p.join("small")).unwrap();
    std::fs::rename(&big, p.join("store")).unwrap();
    let file = p.join("store/neardup.redb");
    let whole = std::fs::read(&file).unwrap();
    let o = run_in(
        NEARDUP,
        p,
        &["index", "export", "store", "-o", "before.jsonl"],
        Stdio::null(),
    );
    ok(&o);
    let before = std::fs::read_to_string(p.join("before.jsonl")).unwrap();
    assert_eq!(before.lines().count(), 2000);
    let last_page = whole.len() - 4096;

    // Cut short, as a full disk or an interrupted copy leaves it: every command that
    // opens it says so, and `check` says what to do.
    for len in [whole.len() / 2, last_page] {
        std::fs::write(&file, &whole[..len]).unwrap();
        for args in [
            &["index", "stats", "store"][..],
            &["index", "query", "store", "docs.jsonl"],
            &["index", "insert", "store", "docs.jsonl"],
            &["index", "remove", "store", "-i", "ids.txt"],
            &["index", "sweep", "store"],
        ] {
            let o = run_in(NEARDUP, p, args, Stdio::piped());
            fails(
                &o,
                2,
                "store/neardup.redb: the store file is damaged: cut short",
            );
            assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
        }
        let o = run_in(NEARDUP, p, &["index", "check", "store"], Stdio::piped());
        fails(&o, 2, "neardup index repair store");
        let report: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(report["problems"][0]
            .as_str()
            .unwrap()
            .contains("cut short"));
        assert!(
            std::fs::read(&file).unwrap() == whole[..len],
            "check wrote the store"
        );
    }
    // Export reads what it can: here everything, what was cut was free pages.
    let o = run_in(
        NEARDUP,
        p,
        &["index", "export", "store", "-o", "after.jsonl"],
        Stdio::null(),
    );
    ok(&o);
    assert!(std::fs::read_to_string(p.join("after.jsonl")).unwrap() == before);

    // Repair puts a whole store in place and keeps the damaged file.
    let o = run_in(NEARDUP, p, &["index", "repair", "store"], Stdio::null());
    ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("2000 documents kept (all of them)"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let kept: Vec<_> = std::fs::read_dir(p.join("store"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|path| path.to_string_lossy().contains("damaged"))
        .collect();
    assert_eq!(kept.len(), 1);
    assert!(std::fs::read(&kept[0]).unwrap() == whole[..last_page]);
    ok(&run_in(
        NEARDUP,
        p,
        &["index", "check", "store"],
        Stdio::null(),
    ));
    let o = run_in(
        NEARDUP,
        p,
        &["index", "query", "store", "--fingerprints", "before.jsonl"],
        Stdio::piped(),
    );
    ok(&o);
    let text = String::from_utf8(o.stdout).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        first["matches"][0],
        serde_json::json!({"id": "d0000", "distance": 0})
    );
    // The export is what `index insert --fingerprints` reads back.
    ok(&run_in(
        NEARDUP,
        p,
        &["index", "create", "copy"],
        Stdio::null(),
    ));
    ok(&run_in(
        NEARDUP,
        p,
        &["index", "insert", "copy", "--fingerprints", "after.jsonl"],
        Stdio::null(),
    ));
    ok(&run_in(
        NEARDUP,
        p,
        &["index", "export", "copy", "-o", "copy.jsonl"],
        Stdio::null(),
    ));
    assert!(std::fs::read_to_string(p.join("copy.jsonl")).unwrap() == before);

    // Cut in half, most of it is gone: export says so (and exits 0 with what it read).
    std::fs::write(&file, &whole[..whole.len() / 2]).unwrap();
    let o = run_in(
        NEARDUP,
        p,
        &["index", "export", "store", "-o", "half.jsonl"],
        Stdio::null(),
    );
    ok(&o);
    assert!(String::from_utf8_lossy(&o.stderr).contains("warning: store is damaged"));
}

#[test]
fn a_store_in_use_names_the_process() {
    let dir = workspace();
    let p = dir.path();
    // An insert that has opened the store and waits for its standard input.
    let mut holder = Command::new(NEARDUP)
        .args(["index", "insert", "store", "--fingerprints"])
        .current_dir(p)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // It has the store once it has said so (the file naming the holder).
    let pid = holder.id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::read_to_string(p.join("store/neardup.pid")).ok() != Some(format!("{pid}\n")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the holder never opened the store"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = run_in(NEARDUP, p, &["index", "stats", "store"], Stdio::piped());
    let message = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{message}");
    assert!(message.contains(&format!("(pid {pid})")), "{message}");
    assert!(message.contains("in use by another process"), "{message}");
    assert!(!message.contains("not readable"), "{message}");
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success());
    ok(&run_in(
        NEARDUP,
        p,
        &["index", "stats", "store"],
        Stdio::null(),
    ));
}

/// Found by fuzzing (fuzz/fuzz_targets/parquet_documents.rs): a Parquet file whose row
/// group says it holds more rows than its column does made parquet 55 panic (arrow-rs
/// #9992) when invalid rows are skipped; parquet 60 says so, and a panic of the parquet
/// crate would be an error too.
#[test]
fn a_damaged_parquet_file_is_an_error_not_a_panic() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/damaged.parquet"
    );
    for args in [
        &["fingerprint", "--skip-invalid", fixture][..],
        &["fingerprint", fixture],
        &["dedup", "--skip-invalid", fixture, "--clusters", "-"],
    ] {
        let o = neardup(args, b"");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("damaged.parquet"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let o = neardup(&["fingerprint", "--skip-invalid", fixture], b"");
    fails(&o, 2, "damaged.parquet: not readable as Parquet");
}

/// Found by fuzzing (fuzz/fuzz_targets/weight_map.rs): a weight the fingerprinter refuses
/// was an error that did not say which file it came from.
#[test]
fn a_bad_weight_names_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let weights = dir.path().join("weights.json");
    for (json, why) in [
        (
            "{\"dog\": -1}",
            "weight of 'dog' must be a finite number of at least 0, got -1",
        ),
        ("{\"dog\": 1e39}", "weight of 'dog' must be a finite number"),
        ("[1, 2]", "expected a JSON object of token weights"),
    ] {
        std::fs::write(&weights, json).unwrap();
        let w = weights.to_str().unwrap();
        let docs = dir.path().join("docs.jsonl");
        std::fs::write(&docs, "{\"text\": \"the dog\"}\n").unwrap();
        let o = neardup(
            &[
                "fingerprint",
                "--weighting",
                "custom",
                "--weights",
                w,
                docs.to_str().unwrap(),
            ],
            b"",
        );
        fails(&o, 2, &format!("'{w}': {why}"));
    }
}

/// Found by fuzzing (fuzz/fuzz_targets/parquet_documents.rs): a 187-byte file whose footer
/// declares a list of 136 million schema elements (where a number was) made parquet 55
/// reserve 12 GB before reading one (arrow-rs #10920): an abort where the system refuses
/// it, as it does here under a 2 GB address-space limit. parquet 60 checks the list.
#[test]
fn a_parquet_footer_declaring_a_huge_list_is_an_error_without_reserving_it() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/huge-list.parquet"
    );
    let o = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 2000000 && exec \"$0\" fingerprint \"$1\"")
        .args([NEARDUP, fixture])
        .output()
        .unwrap();
    fails(&o, 2, "huge-list.parquet: not readable as Parquet");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("memory allocation"));
}

/// Found by fuzzing (fuzz/fuzz_targets/parquet_documents.rs): a 266-byte file whose page
/// header declares a collection of two billion booleans kept parquet 60 skipping them for
/// minutes (75 s in a release build, 185 s in a test build): it skips a boolean element as
/// if it took no byte. The page headers are walked first, and such a file refused at once.
#[test]
fn a_parquet_page_header_that_would_spin_the_reader_is_refused_at_once() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/spinning-header.parquet"
    );
    let started = std::time::Instant::now();
    let o = neardup(&["fingerprint", "--format", "parquet", fixture], b"");
    fails(&o, 2, "spinning-header.parquet: not readable as Parquet: a page header of row group 0, column 0 is damaged");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}
