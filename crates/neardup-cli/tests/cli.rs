//! The real binaries on small fixture files: results, formats, and every error message.

mod common;

use std::path::PathBuf;
use std::process::Output;

use common::run;
use serde_json::Value;

fn fixture(name: &str) -> String {
    let p: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "fixtures", name]
        .iter()
        .collect();
    p.to_string_lossy().into_owned()
}

fn neardup(args: &[&str]) -> Output {
    common::neardup(args, b"")
}

fn find_all(args: &[&str]) -> Output {
    run(env!("CARGO_BIN_EXE_simhash-find-all"), args, b"")
}

fn find_clusters(args: &[&str]) -> Output {
    run(env!("CARGO_BIN_EXE_simhash-find-clusters"), args, b"")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// Each line of `text` as a JSON array of u64.
fn arrays(text: &str) -> Vec<Vec<u64>> {
    text.lines()
        .map(|l| serde_json::from_str::<Vec<u64>>(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

fn expected(key: &str) -> Vec<Vec<u64>> {
    let text = std::fs::read_to_string(fixture("basic.expected.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            a.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap().parse().unwrap())
                .collect()
        })
        .collect()
}

fn sorted(mut v: Vec<Vec<u64>>) -> Vec<Vec<u64>> {
    v.sort();
    v
}

#[test]
fn find_all_matches_reference_pairs() {
    for blocks in ["4", "5", "6", "auto"] {
        let o = neardup(&[
            "find-all",
            "-i",
            &fixture("basic.txt"),
            "-b",
            blocks,
            "-d",
            "3",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(
            sorted(arrays(&stdout(&o))),
            expected("pairs"),
            "blocks {blocks}"
        );
        assert!(stdout(&o).starts_with('[') && !stdout(&o).contains(' '));
    }
}

#[test]
fn find_clusters_matches_reference_clusters() {
    let o = neardup(&[
        "find-clusters",
        "--input",
        &fixture("basic.txt"),
        "--blocks",
        "4",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(arrays(&stdout(&o)), expected("clusters"));
}

#[test]
fn drop_ins_print_like_simhash_cpp() {
    let path = fixture("basic.txt");
    let o = find_all(&[
        "--input",
        &path,
        "--output",
        "-",
        "--blocks",
        "4",
        "--distance",
        "3",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(sorted(arrays(&out)), expected("pairs"));
    // A JSON array per line, a < b, spelled as the peers' truth files spell it.
    for line in out.lines() {
        let v = arrays(line).remove(0);
        assert_eq!(line, format!("[{},{}]", v[0], v[1]));
        assert!(v[0] < v[1]);
    }
    assert_eq!(
        stderr(&o),
        format!("Reading hashes from {path}\nComputing matches...\nWriting results to stdout.\n")
    );

    let o = find_clusters(&["-i", &path, "-o", "-", "-b", "5", "-d", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(sorted(arrays(&out)), expected("clusters"));
    assert!(!out.contains(' '));
}

#[test]
fn reads_stdin_and_writes_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pairs.txt");
    let input = std::fs::read(fixture("basic.txt")).unwrap();
    let o = run(
        env!("CARGO_BIN_EXE_simhash-find-all"),
        &["-i", "-", "-o", out.to_str().unwrap(), "-b", "6", "-d", "3"],
        &input,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("Reading hashes from stdin.\n"));
    assert!(stderr(&o).ends_with(&format!("Writing matches to {}\n", out.display())));
    assert!(o.stdout.is_empty());
    let written = std::fs::read_to_string(&out).unwrap();
    assert_eq!(sorted(arrays(&written)), expected("pairs"));
}

#[test]
fn skips_blank_lines_and_crlf() {
    let o = neardup(&["find-all", "-i", &fixture("blank_and_crlf.txt"), "-b", "4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // 255, 239, 238, 206 are pairwise within 3 bits; 51 is 4+ bits from each.
    let expected = vec![
        vec![206, 238],
        vec![206, 239],
        vec![206, 255],
        vec![238, 239],
        vec![238, 255],
        vec![239, 255],
    ];
    assert_eq!(sorted(arrays(&stdout(&o))), expected);
}

#[test]
fn all_zero_and_all_one() {
    let o = neardup(&[
        "find-all",
        "-i",
        &fixture("edges.txt"),
        "-d",
        "1",
        "-b",
        "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        sorted(arrays(&stdout(&o))),
        vec![vec![0, 1], vec![u64::MAX - 1, u64::MAX]]
    );
}

#[test]
fn exact_duplicates_are_opt_in() {
    let path = fixture("duplicates.txt");
    let o = neardup(&["find-all", "-i", &path, "-d", "1"]);
    assert_eq!(arrays(&stdout(&o)), vec![vec![6, 7]]);
    let o = neardup(&["find-all", "-i", &path, "-d", "1", "--exact-duplicates"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        sorted(arrays(&stdout(&o))),
        vec![vec![6, 7], vec![7, 7], vec![1_000_000, 1_000_000]]
    );
}

#[test]
fn empty_input_is_empty_output() {
    let path = fixture("empty.txt");
    for command in ["find-all", "find-clusters"] {
        let o = neardup(&[command, "-i", &path]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn no_progress_on_a_pipe() {
    let o = neardup(&["find-all", "-i", &fixture("basic.txt")]);
    assert!(o.status.success());
    assert_eq!(stderr(&o), "");
}

/// Exit status 2 and a message containing every one of `parts`.
fn assert_input_error(o: &Output, parts: &[&str]) {
    assert_eq!(o.status.code(), Some(2), "stderr: {}", stderr(o));
    let err = stderr(o);
    for part in parts {
        assert!(err.contains(part), "{err:?} lacks {part:?}");
    }
    assert!(!err.contains("panicked"), "{err}");
    assert!(o.stdout.is_empty());
}

#[test]
fn bad_lines_name_file_and_line() {
    let path = fixture("letters.txt");
    let o = neardup(&["find-all", "-i", &path]);
    assert_input_error(
        &o,
        &[&format!("{path}:3:"), "\"abc\"", "unexpected character 'a'"],
    );

    let path = fixture("sign.txt");
    let o = find_all(&["-i", &path, "-b", "4", "-d", "3"]);
    assert_input_error(&o, &[&format!("{path}:2:"), "\"-1\"", "sign"]);

    let path = fixture("overflow.txt");
    let o = find_clusters(&["-i", &path, "-b", "4", "-d", "3"]);
    assert_input_error(
        &o,
        &[&format!("{path}:4:"), "18446744073709551616", "above"],
    );

    let o = run(env!("CARGO_BIN_EXE_neardup"), &["find-all"], b"1\n\n2x\n");
    assert_input_error(&o, &["<stdin>:3:", "\"2x\""]);
}

#[test]
fn bad_layouts_are_rejected_before_reading() {
    // The input does not exist: the layout error must come first.
    let missing = "/nonexistent/fingerprints.txt";
    let cases: [(&[&str], &str); 5] = [
        (&["-b", "0"], "blocks must be at least 1"),
        (&["-b", "65"], "at most 64"),
        (
            &["-b", "3", "-d", "3"],
            "blocks (3) must be greater than distance (3)",
        ),
        (&["-b", "64", "-d", "10"], "tables"),
        (&["-b", "six"], "expected a number of blocks"),
    ];
    for (flags, message) in cases {
        let mut args = vec!["find-all", "-i", missing];
        args.extend_from_slice(flags);
        assert_input_error(&neardup(&args), &[message]);
    }
    assert_input_error(&neardup(&["find-all", "-d", "64"]), &["64"]);
    assert_input_error(&neardup(&["find-all", "-d", "-1"]), &["-1"]);
    assert_input_error(&find_all(&["-d", "x"]), &["x"]);
}

#[test]
fn missing_input_names_the_path() {
    let o = find_all(&["-i", "/nonexistent/fps.txt", "-b", "4", "-d", "3"]);
    assert_input_error(&o, &["/nonexistent/fps.txt", "cannot open input"]);
    let dir = tempfile::tempdir().unwrap();
    let o = neardup(&["find-all", "-i", dir.path().to_str().unwrap()]);
    assert_input_error(&o, &["directory"]);
}

#[test]
fn unwritable_output_is_an_error() {
    let o = neardup(&[
        "find-all",
        "-i",
        &fixture("basic.txt"),
        "-o",
        "/nonexistent/out.txt",
    ]);
    assert_input_error(&o, &["cannot create output '/nonexistent/out.txt'"]);
    if std::path::Path::new("/dev/full").exists() {
        let o = neardup(&["find-all", "-i", &fixture("basic.txt"), "-o", "/dev/full"]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("cannot write /dev/full"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn bundled_example_gives_the_planted_clusters() {
    // README's first command. examples/make_fingerprints.py plants 100 clusters of an
    // original and 1 to 4 copies 1 to 3 bits away (some copied exactly too).
    let path = format!(
        "{}/../../examples/fingerprints.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let o = neardup(&["find-clusters", "--input", &path]);
    assert!(o.status.success(), "{}", stderr(&o));
    let clusters = arrays(&stdout(&o));
    assert_eq!(clusters.len(), 100);
    for c in &clusters {
        assert!((2..=5).contains(&c.len()), "{c:?}");
        // Connected through the original: every member within 3 bits of some member,
        // and within 6 of all.
        for &a in c {
            assert!(c.iter().any(|&b| b != a && (a ^ b).count_ones() <= 3));
            assert!(c.iter().all(|&b| (a ^ b).count_ones() <= 6));
        }
    }
}

/// `neardup bench index` on a small planted workload: every near query finds its source,
/// and bulk and single queries agree (the command checks that itself).
#[test]
fn bench_index_finds_every_planted_query() {
    let dir = tempfile::tempdir().unwrap();
    let mut x = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let index: Vec<u64> = (0..5000).map(|_| next()).collect();
    let (mut queries, mut truth) = (Vec::new(), Vec::new());
    for i in 0..400u64 {
        if i % 2 == 0 {
            let src = next() % index.len() as u64;
            let d = next() % 4;
            let mut q = index[src as usize];
            for b in 0..d {
                q ^= 1 << (b * 13 + next() % 13);
            }
            queries.push(q);
            truth.extend([src, d]);
        } else {
            queries.push(next());
            truth.extend([u64::MAX, u64::MAX]);
        }
    }
    let write = |name: &str, v: &[u64]| {
        let p = dir.path().join(name);
        std::fs::write(
            &p,
            v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
        )
        .unwrap();
        p.to_string_lossy().into_owned()
    };
    let (i, q, t) = (
        write("i.u64", &index),
        write("q.u64", &queries),
        write("t.i64", &truth),
    );
    let o = neardup(&[
        "bench",
        "index",
        "--index",
        &i,
        "--queries",
        &q,
        "--truth",
        &t,
        "--repeats",
        "1",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for l in &lines {
        assert_eq!(l["recall"], 1.0);
        assert_eq!(l["n"], 5000);
        assert_eq!(l["queries"], 400);
    }
    // A truth file of the wrong size is named.
    let short = write("short.i64", &truth[..10]);
    let o = neardup(&[
        "bench",
        "index",
        "--index",
        &i,
        "--queries",
        &q,
        "--truth",
        &short,
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("10 values for 400 queries"));
}

/// 20,000 fingerprints with 300 planted near pairs, as decimal text and as raw u64.
fn many() -> (Vec<u64>, String, Vec<u8>) {
    let mut x = 0x5eed_u64;
    let mut next = || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut fps: Vec<u64> = (0..20_000).map(|_| next()).collect();
    for i in 0..300 {
        let flip = next();
        fps.push(fps[i * 13] ^ (1 << (flip % 64)) ^ (1 << ((flip >> 8) % 64)));
    }
    fps.push(fps[5]); // an exact copy
    let text: String = fps.iter().map(|v| format!("{v}\n")).collect();
    let raw: Vec<u8> = fps.iter().flat_map(|v| v.to_le_bytes()).collect();
    (fps, text, raw)
}

#[test]
fn raw_u64_input_two_levels_and_a_memory_budget_give_the_same_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let (fps, text, raw) = many();
    let dec = dir.path().join("fps.txt");
    let bin = dir.path().join("fps.bin"); // no .u64 name: found by its bytes
    std::fs::write(&dec, &text).unwrap();
    std::fs::write(&bin, &raw).unwrap();
    let (dec, bin) = (dec.to_str().unwrap(), bin.to_str().unwrap());
    let pairs = |args: &[&str]| {
        let mut all = vec!["find-all", "--exact-duplicates", "-d", "3"];
        all.extend_from_slice(args);
        let o = neardup(&all);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        stdout(&o)
    };
    let one = pairs(&["-i", dec, "-b", "5"]);
    assert!(arrays(&one).len() >= 301, "planted pairs and the copy");
    // Raw u64, detected and named: the same bytes out.
    assert_eq!(pairs(&["-i", bin, "-b", "5"]), one);
    assert_eq!(pairs(&["-i", bin, "-b", "5", "--format", "u64"]), one);
    // A memory budget that holds a few hundred keys of a table at a time: the same bytes.
    assert_eq!(pairs(&["-i", bin, "-b", "5", "--memory", "200K"]), one);
    // Two levels of blocks find the same pairs (in their own order).
    let two = pairs(&["-i", bin, "-b", "4x4"]);
    assert_eq!(sorted(arrays(&two)), sorted(arrays(&one)));
    assert_eq!(pairs(&["-i", bin, "-b", "4x4", "--memory", "200K"]), two);
    // Every pair within 3 bits, by brute force over the distinct values.
    let mut sorted_fps = fps.clone();
    sorted_fps.sort_unstable();
    let repeated = sorted_fps
        .chunk_by(|a, b| a == b)
        .filter(|run| run.len() > 1)
        .count();
    let mut distinct = sorted_fps;
    distinct.dedup();
    let mut brute = 0;
    for (i, &a) in distinct.iter().enumerate() {
        brute += distinct[i + 1..]
            .iter()
            .filter(|&&b| (a ^ b).count_ones() <= 3)
            .count();
    }
    assert!(repeated >= 1 && brute >= 250);
    assert_eq!(
        arrays(&two).len(),
        brute + repeated,
        "brute force, and [v,v] for each value given twice"
    );
    // Clusters alike.
    let o = neardup(&["find-clusters", "-i", bin, "-b", "4x4", "--memory", "200K"]);
    let c = neardup(&["find-clusters", "-i", dec, "-b", "5"]);
    assert_eq!(stdout(&o), stdout(&c));
    // A budget too small for the fingerprints themselves, a file that is not whole u64s,
    // a bad layout: errors with exit 2, naming the problem.
    let o = neardup(&["find-all", "-i", bin, "--memory", "100K"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("memory budget"), "{}", stderr(&o));
    let cut = dir.path().join("cut.u64");
    std::fs::write(&cut, &raw[..raw.len() - 3]).unwrap();
    let o = neardup(&["find-all", "-i", cut.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cut.u64"), "{}", stderr(&o));
    let o = neardup(&["find-all", "-i", bin, "-b", "4x3"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--blocks"), "{}", stderr(&o));
}

#[test]
fn the_scale_workload_is_found_whole_and_its_check_catches_a_missing_pair() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (fps, truth, pairs) = (p("fps.u64"), p("truth.jsonl"), p("pairs.jsonl"));
    let gen = |out: &str| {
        neardup(&[
            "bench",
            "gen-fingerprints",
            "-n",
            "60000",
            "--planted",
            "600",
            "--seed",
            "5",
            "-o",
            out,
            "--truth",
            &truth,
        ])
    };
    let o = gen(&fps);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::metadata(&fps).unwrap().len(), 60_000 * 8);
    // The same seed writes the same file.
    let again = p("again.u64");
    assert!(gen(&again).status.success());
    assert_eq!(std::fs::read(&fps).unwrap(), std::fs::read(&again).unwrap());
    let o = neardup(&["find-all", "-i", &fps, "-o", &pairs, "--memory", "1M"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let check = |pairs: &str| {
        neardup(&[
            "bench",
            "check-pairs",
            "-i",
            &fps,
            "--pairs",
            pairs,
            "--truth",
            &truth,
            "--sample",
            "300",
        ])
    };
    let o = check(&pairs);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(report["planted"], 600);
    assert_eq!(report["planted_missed"], 0);
    assert_eq!(report["ok"], true);
    // Without one planted pair, the check fails, and says which count is off.
    let text = std::fs::read_to_string(&pairs).unwrap();
    let planted_line = std::fs::read_to_string(&truth)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    let short: String = text
        .lines()
        .filter(|l| *l != planted_line)
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(short.lines().count() + 1, text.lines().count());
    let cut = p("cut.jsonl");
    std::fs::write(&cut, short).unwrap();
    let o = check(&cut);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("\"planted_missed\":1"),
        "{}",
        stderr(&o)
    );
}
