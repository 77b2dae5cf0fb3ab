//! `neardup dedup` end to end: the planted-copy corpus, the outputs against each other and
//! against the input, every input kind, and every bad input.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::neardup;
use serde_json::Value;

fn ok(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    err
}

fn fails(o: &Output, code: i32, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{err}");
    assert!(err.contains(needle), "{err:?} lacks {needle:?}");
}

fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn id(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// Pairs of a --pairs file, each as (smaller id, larger id).
fn pair_set(path: &Path) -> BTreeSet<(String, String)> {
    json_lines(path)
        .iter()
        .map(|p| {
            let (a, b) = (id(&p["a"]), id(&p["b"]));
            if a < b {
                (a, b)
            } else {
                (b, a)
            }
        })
        .collect()
}

/// Connected components of `pairs`, as sorted id sets.
fn components(pairs: &BTreeSet<(String, String)>) -> BTreeSet<BTreeSet<String>> {
    let mut label: HashMap<String, usize> = HashMap::new();
    let mut sets: Vec<BTreeSet<String>> = Vec::new();
    for (a, b) in pairs {
        let (la, lb) = (label.get(a).copied(), label.get(b).copied());
        let keep = match (la, lb) {
            (Some(x), Some(y)) if x != y => {
                let moved = std::mem::take(&mut sets[y]);
                for m in &moved {
                    label.insert(m.clone(), x);
                }
                sets[x].extend(moved);
                x
            }
            (Some(x), _) | (None, Some(x)) => x,
            (None, None) => {
                sets.push(BTreeSet::new());
                sets.len() - 1
            }
        };
        for m in [a, b] {
            sets[keep].insert(m.clone());
            label.insert(m.clone(), keep);
        }
    }
    sets.into_iter().filter(|s| !s.is_empty()).collect()
}

#[test]
fn planted_copies_are_all_found_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let truth: Vec<(String, String, f64)> = json_lines(Path::new(&fixture("planted_truth.jsonl")))
        .iter()
        .map(|t| (id(&t["a"]), id(&t["b"]), t["jaccard"].as_f64().unwrap()))
        .collect();
    assert!(truth.len() >= 100, "{} planted pairs", truth.len());
    let pairs_of = |truth: &[(String, String, f64)], min: f64| -> BTreeSet<(String, String)> {
        truth
            .iter()
            .filter(|t| t.2 >= min)
            .map(|t| (t.0.clone(), t.1.clone()))
            .collect()
    };
    let groups = components(&pairs_of(&truth, 0.0));
    let group_of: HashMap<&String, usize> = groups
        .iter()
        .enumerate()
        .flat_map(|(i, g)| g.iter().map(move |m| (m, i)))
        .collect();
    // At each threshold, every planted pair clearly above it (the estimate's error is
    // about 0.02) is found; anything found joins copies of one original.
    for (threshold, sure) in [("0.8", 0.85), ("0.65", 0.7)] {
        let pairs = dir.path().join(format!("pairs{threshold}.jsonl"));
        let o = neardup(
            &[
                "dedup",
                &fixture("planted.jsonl"),
                "--threshold",
                threshold,
                "--pairs",
                pairs.to_str().unwrap(),
            ],
            b"",
        );
        ok(&o);
        let found = pair_set(&pairs);
        let want = pairs_of(&truth, sure);
        let missed: Vec<_> = want.difference(&found).collect();
        assert!(
            missed.is_empty(),
            "--threshold {threshold}: missed {} planted pairs: {missed:?}",
            missed.len()
        );
        for (a, b) in &found {
            assert!(
                group_of.contains_key(a) && group_of.get(a) == group_of.get(b),
                "unrelated pair reported: {a} {b}"
            );
        }
        // Every pair found has a similarity at the threshold, and none is known below it
        // by more than the estimate's error.
        let t: f64 = threshold.parse().unwrap();
        let known: HashMap<(String, String), f64> = truth
            .iter()
            .map(|x| ((x.0.clone(), x.1.clone()), x.2))
            .collect();
        for p in json_lines(&pairs) {
            assert!(p["similarity"].as_f64().unwrap() >= t, "{p}");
            let (a, b) = (id(&p["a"]), id(&p["b"]));
            let key = if a < b { (a, b) } else { (b, a) };
            if let Some(&j) = known.get(&key) {
                assert!(j >= t - 0.1, "{key:?} at J {j} found at --threshold {t}");
            }
        }
    }
}

/// Texts that chain: A ~ B and B ~ C at Jaccard 0.81, but A and C only at 0.66.
fn chain() -> Vec<(String, String)> {
    let words = |from: usize, to: usize| -> String {
        (from..to)
            .map(|j| format!("w{}", j * 7919 % 100_003))
            .collect::<Vec<_>>()
            .join(" ")
    };
    vec![
        ("a".into(), words(0, 200)),
        ("b".into(), words(20, 220)),
        ("c".into(), words(40, 240)),
    ]
}

#[test]
fn no_chaining_unless_closure_is_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("chain.jsonl");
    std::fs::write(&input, jsonl(&chain())).unwrap();
    let run = |extra: &[&str]| -> Vec<Value> {
        let out = dir.path().join("c.jsonl");
        let mut args = vec![
            "dedup",
            input.to_str().unwrap(),
            "--threshold",
            "0.75",
            "--clusters",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        ok(&neardup(&args, b""));
        json_lines(&out)
    };
    let members = |c: &Value| -> Vec<String> {
        c["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| id(&m["id"]))
            .collect()
    };
    // B goes with A; C is not A's near-duplicate, so it stays.
    let stars = run(&[]);
    assert_eq!(stars.len(), 1, "{stars:?}");
    assert_eq!(id(&stars[0]["representative"]), "a");
    assert_eq!(members(&stars[0]), ["a", "b"]);
    let b = &stars[0]["members"][1];
    assert!(
        (b["similarity"].as_f64().unwrap() - 176.0 / 216.0).abs() < 0.07,
        "{b}"
    );
    // Components: C goes with A, at its own similarity to A.
    let closure = run(&["--closure"]);
    assert_eq!(closure.len(), 1);
    assert_eq!(members(&closure[0]), ["a", "b", "c"]);
    let c = &closure[0]["members"][2];
    assert!(
        (c["similarity"].as_f64().unwrap() - 156.0 / 236.0).abs() < 0.07,
        "{c}"
    );
}

/// A small corpus: near-duplicate families, an exact copy, unrelated texts.
fn corpus() -> Vec<(String, String)> {
    let base = [
        "The quick brown fox jumps over the lazy dog near the quiet river bank, while the farmer watches from the hill and the sun sets slowly behind the old stone mill.",
        "In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness was upon the face of the deep.",
        "Rust is a systems programming language that runs blazingly fast, prevents segfaults, and guarantees thread safety without a garbage collector at all.",
    ];
    let mut docs = Vec::new();
    for (i, b) in base.iter().enumerate() {
        docs.push((format!("orig{i}"), b.to_string()));
        docs.push((format!("longer{i}"), format!("{b} Indeed it does.")));
        docs.push((format!("upper{i}"), b.to_uppercase()));
    }
    docs.push(("exact0".into(), base[0].to_string()));
    for i in 0..20u64 {
        // Words of their own: no two share a shingle.
        let words: Vec<String> = (0..25u64)
            .map(|j| format!("w{}", (i * 7919 + j * 104_729) % 100_003))
            .collect();
        docs.push((format!("other{i}"), words.join(" ")));
    }
    docs
}

fn jsonl(docs: &[(String, String)]) -> String {
    docs.iter()
        .map(|(id, text)| format!("{}\n", serde_json::json!({"id": id, "text": text})))
        .collect()
}

#[test]
fn outputs_agree_with_each_other_and_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus();
    let input = dir.path().join("docs.jsonl");
    std::fs::write(&input, jsonl(&docs)).unwrap();
    let out = |n: &str| dir.path().join(n);
    for keep in ["first", "longest", "shortest"] {
        let o = neardup(
            &[
                "dedup",
                input.to_str().unwrap(),
                "--clusters",
                out("c.jsonl").to_str().unwrap(),
                "--pairs",
                out("p.jsonl").to_str().unwrap(),
                "--deduplicated",
                out("d.jsonl").to_str().unwrap(),
                "--stats-json",
                out("s.json").to_str().unwrap(),
                "--keep",
                keep,
            ],
            b"",
        );
        let summary = ok(&o);
        let text: HashMap<&str, &str> =
            docs.iter().map(|(i, t)| (i.as_str(), t.as_str())).collect();
        let order: HashMap<&str, usize> = docs
            .iter()
            .enumerate()
            .map(|(n, (i, _))| (i.as_str(), n))
            .collect();

        // Clusters are the components of the pairs; each family of copies is one.
        let pairs = pair_set(&out("p.jsonl"));
        let clusters = json_lines(&out("c.jsonl"));
        let as_sets: BTreeSet<BTreeSet<String>> = clusters
            .iter()
            .map(|c| {
                c["members"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| id(&m["id"]))
                    .collect()
            })
            .collect();
        assert_eq!(as_sets, components(&pairs));
        let expected: BTreeSet<BTreeSet<String>> = (0..3)
            .map(|i| {
                let mut s: BTreeSet<String> = ["orig", "longer", "upper"]
                    .iter()
                    .map(|p| format!("{p}{i}"))
                    .collect();
                if i == 0 {
                    s.insert("exact0".into());
                }
                s
            })
            .collect();
        assert_eq!(as_sets, expected, "{summary}");

        // Members in input order, the representative at distance 0, sizes right.
        let mut dropped = BTreeSet::new();
        for c in &clusters {
            let members: Vec<String> = c["members"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| id(&m["id"]))
                .collect();
            assert_eq!(c["size"].as_u64(), Some(members.len() as u64));
            assert!(members
                .windows(2)
                .all(|w| order[w[0].as_str()] < order[w[1].as_str()]));
            let rep = id(&c["representative"]);
            let len = |m: &String| text[m.as_str()].len();
            let want = match keep {
                "first" => members[0].clone(),
                "longest" => members.iter().rev().max_by_key(|m| len(m)).unwrap().clone(),
                _ => members.iter().min_by_key(|m| len(m)).unwrap().clone(),
            };
            assert_eq!(rep, want, "--keep {keep}");
            for m in c["members"].as_array().unwrap() {
                if id(&m["id"]) == rep {
                    assert_eq!(m["distance"], 0);
                    assert_eq!(m["similarity"], 1);
                } else {
                    // Removed only for a near-duplicate of its own.
                    let (a, b) = (id(&m["id"]), rep.clone());
                    assert!(pairs.contains(&if a < b { (a, b) } else { (b, a) }));
                    assert!(m["similarity"].as_f64().unwrap() >= 0.8);
                    dropped.insert(id(&m["id"]));
                }
            }
        }
        // The exact copy is at distance 0 from its original.
        let exact = json_lines(&out("p.jsonl"))
            .into_iter()
            .find(|p| id(&p["a"]) == "orig0" && id(&p["b"]) == "exact0")
            .unwrap();
        assert_eq!(exact["distance"], 0);

        // --deduplicated: the input lines, unchanged and in order, minus the dropped.
        let input_text = std::fs::read_to_string(&input).unwrap();
        let want: Vec<&str> = input_text
            .lines()
            .zip(&docs)
            .filter(|(_, (i, _))| !dropped.contains(i))
            .map(|(l, _)| l)
            .collect();
        let got = std::fs::read_to_string(out("d.jsonl")).unwrap();
        assert_eq!(got.lines().collect::<Vec<_>>(), want);

        let stats: Value =
            serde_json::from_str(&std::fs::read_to_string(out("s.json")).unwrap()).unwrap();
        assert_eq!(stats["documents"], docs.len());
        assert_eq!(stats["exact_duplicates"], 1);
        assert_eq!(stats["near_duplicates"], 6);
        assert_eq!(stats["clusters"], 3);
        assert_eq!(stats["largest_cluster"], 4);
        assert_eq!(stats["kept"], docs.len() - 7);
        assert_eq!(stats["pairs"], pairs.len());
        assert!(summary.contains("exact duplicates  1"), "{summary}");
    }
}

#[test]
fn text_files_lines_stdin_and_compressed_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus();
    // A directory of text files, one document each, ids their paths.
    let tree = dir.path().join("tree");
    for (i, (name, text)) in docs.iter().enumerate() {
        let p = tree.join(format!("{}/{name}.txt", i % 3));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let dedup_out = dir.path().join("d.jsonl");
    let clusters = dir.path().join("c.jsonl");
    ok(&neardup(
        &[
            "dedup",
            tree.to_str().unwrap(),
            "--clusters",
            clusters.to_str().unwrap(),
            "--deduplicated",
            dedup_out.to_str().unwrap(),
        ],
        b"",
    ));
    let c = json_lines(&clusters);
    assert_eq!(c.len(), 3);
    assert!(c.iter().all(|c| id(&c["representative"]).ends_with(".txt")));
    let kept = json_lines(&dedup_out);
    assert_eq!(kept.len(), docs.len() - 7);
    for k in &kept {
        let path = id(&k["id"]);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), id(&k["text"]));
    }

    // One document per line, from standard input and from a .gz file: the same clusters,
    // ids `<stdin>:N` and `path:N`, kept lines as read.
    let lines: String = docs.iter().map(|(_, t)| format!("{t}\n")).collect();
    let gz = dir.path().join("docs.txt.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(lines.as_bytes()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let from_stdin = neardup(&["dedup", "--lines", "--clusters", "-"], lines.as_bytes());
    ok(&from_stdin);
    let stdin_clusters: Vec<Value> = String::from_utf8(from_stdin.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(stdin_clusters.len(), 3);
    assert_eq!(id(&stdin_clusters[0]["representative"]), "<stdin>:1");
    let o = neardup(
        &[
            "dedup",
            "--lines",
            gz.to_str().unwrap(),
            "--deduplicated",
            "-",
        ],
        b"",
    );
    ok(&o);
    let want: Vec<&str> = lines.lines().filter(|l| !l.is_empty()).collect();
    let got = String::from_utf8(o.stdout).unwrap();
    assert_eq!(got.lines().count(), want.len() - 7);
    assert!(got.lines().all(|l| want.contains(&l)));
}

#[test]
fn bad_json_is_an_error_with_file_and_line_or_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("bad.jsonl");
    let mut text = jsonl(&corpus());
    text.insert_str(
        0,
        "{\"id\": \"x\", \"text\": \"fine\"}\n{\"id\": broken\n{\"id\": \"no text\"}\n",
    );
    std::fs::write(&input, &text).unwrap();
    let path = input.to_str().unwrap();
    fails(
        &neardup(&["dedup", path, "--clusters", "-"], b""),
        2,
        &format!("{path}:2: not valid JSON"),
    );
    let o = neardup(&["dedup", path, "--skip-invalid", "--stats-json", "-"], b"");
    let err = ok(&o);
    assert!(err.contains("skipped 2 invalid JSON lines"), "{err}");
    let stats: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(stats["skipped_invalid"], 2);
    assert_eq!(stats["documents"], corpus().len() + 1);

    let missing = dir.path().join("missing.jsonl");
    std::fs::write(&missing, "{\"id\": 1, \"body\": \"x\"}\n").unwrap();
    let m = missing.to_str().unwrap();
    fails(
        &neardup(&["dedup", m], b""),
        2,
        &format!("{m}:1: no \"text\" field"),
    );
    // --text-field names it.
    ok(&neardup(&["dedup", m, "--text-field", "body"], b""));
}

#[test]
fn empty_input_is_an_empty_result() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let (c, d) = (dir.path().join("c.jsonl"), dir.path().join("d.jsonl"));
    let o = neardup(
        &[
            "dedup",
            empty.to_str().unwrap(),
            "--clusters",
            c.to_str().unwrap(),
            "--deduplicated",
            d.to_str().unwrap(),
            "--stats-json",
            "-",
        ],
        b"",
    );
    let err = ok(&o);
    assert!(err.contains("0 documents"), "{err}");
    assert_eq!(std::fs::read(&c).unwrap(), b"");
    assert_eq!(std::fs::read(&d).unwrap(), b"");
    let stats: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(stats["documents"], 0);
    assert_eq!(stats["clusters"], 0);
    // Empty standard input too.
    ok(&neardup(&["dedup", "--clusters", "-"], b""));
}

/// A Chinese and a Japanese text of about 150 characters without spaces, and a Thai one.
const SPACELESS_TEXTS: [&str; 3] = [
    "近似重复文档检测是搜索引擎和语料清洗中的基本问题。网页爬虫每天都会抓取大量内容几乎相同的页面，\
     例如转载的新闻、镜像站点以及只改动了广告和日期的页面。如果不加以去重，索引会变得臃肿，\
     训练语料中也会出现大量重复，模型因此记住了不该记住的内容。中文没有空格，所以词的边界并不明显。",
    "日本語の文章には単語の間に空白がないため、近似重複の検出では文字ごとに区切る方法がよく使われる。\
     ウェブから集めた文書には、同じ記事の転載や日付だけが異なるページが数多く含まれている。\
     これらを取り除かないと、検索の索引は大きくなり、学習用のデータにも偏りが生じてしまう。",
    "ภาษาไทยเขียนติดกันโดยไม่มีช่องว่างระหว่างคำ การตรวจหาเอกสารที่เกือบซ้ำกันจึงต้องแบ่งข้อความเป็นตัวอักษร \
     หน้าเว็บจำนวนมากมีเนื้อหาเกือบเหมือนกัน เช่น ข่าวที่ถูกนำไปเผยแพร่ซ้ำ หรือหน้าที่เปลี่ยนเพียงวันที่",
];

#[test]
fn scripts_without_spaces_are_compared_a_character_at_a_time() {
    // A copy with one character changed in each text is a near-duplicate (its character
    // 5-gram Jaccard is about 0.95), where whole `\w+` runs made it a stranger; the three
    // texts are not near-duplicates of each other.
    let mut docs = Vec::new();
    for (i, text) in SPACELESS_TEXTS.iter().enumerate() {
        let mut chars: Vec<char> = text.chars().collect();
        let middle = chars.len() / 2;
        chars[middle] = if chars[middle] == '的' { '地' } else { '的' };
        docs.push((format!("doc{i}"), text.to_string()));
        docs.push((format!("copy{i}"), chars.into_iter().collect::<String>()));
    }
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, jsonl(&docs)).unwrap();
    let pairs = dir.path().join("pairs.jsonl");
    ok(&neardup(
        &[
            "dedup",
            input.to_str().unwrap(),
            "--pairs",
            pairs.to_str().unwrap(),
            "-q",
        ],
        b"",
    ));
    let want: BTreeSet<(String, String)> = (0..3)
        .map(|i| (format!("copy{i}"), format!("doc{i}")))
        .collect();
    assert_eq!(pair_set(&pairs), want);
}

#[test]
fn fingerprint_flags_are_refused_where_they_would_not_decide() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, jsonl(&corpus())).unwrap();
    let path = input.to_str().unwrap();
    for flags in [
        &["--tokenizer", "jieba"][..],
        &["--window", "3"],
        &["--weighting", "none"],
        &["--lambda", "0.3"],
        &["--no-nfkc"],
        &["--min-paragraph", "100"],
    ] {
        let mut args = vec!["dedup", path, "--pairs", "-", "-q"];
        args.extend_from_slice(flags);
        let o = neardup(&args, b"");
        fails(
            &o,
            2,
            &format!("{} sets the 256-bit fingerprints", flags[0]),
        );
        fails(&o, 2, "--distance");
        // With --distance the fingerprints decide, and the flag is taken.
        if flags[0] != "--tokenizer" {
            args.extend_from_slice(&["--distance", "20"]);
            ok(&neardup(&args, b""));
        }
    }
}

#[test]
fn unwritable_output_fails_before_reading_anything() {
    // Standard input stays open: a run that started reading would never end.
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["dedup", "--clusters", "/nonexistent-dir/c.jsonl"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _stdin = child.stdin.take();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("dedup waited for input before checking its output");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let o = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot create output '/nonexistent-dir/c.jsonl'"),
        "{err}"
    );
}

#[test]
fn refuses_outputs_that_would_clobber_or_collide() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    let text = jsonl(&corpus());
    std::fs::write(&input, &text).unwrap();
    let p = input.to_str().unwrap();
    fails(
        &neardup(&["dedup", p, "--deduplicated", p], b""),
        2,
        "is an input",
    );
    assert_eq!(std::fs::read_to_string(&input).unwrap(), text);
    fails(
        &neardup(&["dedup", p, "--clusters", "-", "--pairs", "-"], b""),
        2,
        "only one output",
    );
    fails(
        &neardup(&["dedup", p, "--compat", "simhash-py"], b""),
        2,
        "--compat",
    );
    fails(
        &neardup(&["dedup", p, "--distance", "300"], b""),
        2,
        "256 bits",
    );
    fails(
        &neardup(
            &["dedup", p, "--distance", "40", "--lane-distance", "64"],
            b"",
        ),
        2,
        "blocks",
    );
    // Lanes are the distance rule's candidates; a threshold's come from band keys.
    fails(
        &neardup(&["dedup", p, "--lane-distance", "6"], b""),
        2,
        "--distance",
    );
}

#[test]
fn non_string_ids_and_missing_ids() {
    let input = "{\"id\": 7, \"text\": \"alpha beta gamma delta epsilon zeta eta theta\"}\n\
                 {\"text\": \"alpha beta gamma delta epsilon zeta eta theta\"}\n\
                 {\"id\": {\"k\": [1]}, \"text\": \"alpha beta gamma delta epsilon zeta eta theta iota\"}\n";
    let o = neardup(&["dedup", "--clusters", "-"], input.as_bytes());
    ok(&o);
    let c: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids: Vec<&Value> = c["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["id"])
        .collect();
    assert_eq!(
        ids,
        [
            &Value::from(7),
            &Value::from("<stdin>:2"),
            &serde_json::json!({"k": [1]})
        ]
    );
    assert_eq!(c["size"], 3);
}

/// Writes `docs` as Parquet (snappy pages): an INT64 `id` column and an optional UTF-8
/// `body` column, `None` texts as nulls.
#[cfg(feature = "parquet")]
fn write_parquet(path: &Path, docs: &[(i64, Option<&str>)]) {
    use std::sync::Arc;

    use parquet::basic::Compression;
    use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;

    let schema = Arc::new(
        parse_message_type("message docs { REQUIRED INT64 id; OPTIONAL BYTE_ARRAY body (UTF8); }")
            .unwrap(),
    );
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build(),
    );
    let mut writer =
        SerializedFileWriter::new(std::fs::File::create(path).unwrap(), schema, props).unwrap();
    let mut group = writer.next_row_group().unwrap();
    let ids: Vec<i64> = docs.iter().map(|d| d.0).collect();
    let mut col = group.next_column().unwrap().unwrap();
    col.typed::<Int64Type>()
        .write_batch(&ids, None, None)
        .unwrap();
    col.close().unwrap();
    let texts: Vec<ByteArray> = docs
        .iter()
        .filter_map(|d| d.1)
        .map(ByteArray::from)
        .collect();
    let levels: Vec<i16> = docs.iter().map(|d| i16::from(d.1.is_some())).collect();
    let mut col = group.next_column().unwrap().unwrap();
    col.typed::<ByteArrayType>()
        .write_batch(&texts, Some(&levels), None)
        .unwrap();
    col.close().unwrap();
    group.close().unwrap();
    writer.close().unwrap();
}

#[cfg(feature = "parquet")]
#[test]
fn parquet_input() {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus();
    let rows: Vec<(i64, Option<&str>)> = docs
        .iter()
        .enumerate()
        .map(|(i, (_, t))| (i as i64 * 10, Some(t.as_str())))
        .collect();
    let path = dir.path().join("docs.parquet");
    write_parquet(&path, &rows);
    let p = path.to_str().unwrap();
    let (c, d) = (dir.path().join("c.jsonl"), dir.path().join("d.jsonl"));
    let o = neardup(
        &[
            "dedup",
            p,
            "--text-column",
            "body",
            "--clusters",
            c.to_str().unwrap(),
            "--deduplicated",
            d.to_str().unwrap(),
        ],
        b"",
    );
    ok(&o);
    // The same clusters as from JSON Lines, by the integer ids of the id column.
    let clusters = json_lines(&c);
    let members: BTreeSet<Vec<i64>> = clusters
        .iter()
        .map(|c| {
            c["members"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["id"].as_i64().unwrap())
                .collect()
        })
        .collect();
    let by_name: HashMap<&str, i64> = docs
        .iter()
        .enumerate()
        .map(|(i, (n, _))| (n.as_str(), i as i64 * 10))
        .collect();
    let want: BTreeSet<Vec<i64>> = [
        vec!["orig0", "longer0", "upper0", "exact0"],
        vec!["orig1", "longer1", "upper1"],
        vec!["orig2", "longer2", "upper2"],
    ]
    .iter()
    .map(|g| {
        let mut ids: Vec<i64> = g.iter().map(|n| by_name[n]).collect();
        ids.sort();
        ids
    })
    .collect();
    assert_eq!(members, want);
    // Kept rows come out as {"id", "text"} lines.
    let kept = json_lines(&d);
    assert_eq!(kept.len(), docs.len() - 7);
    assert_eq!(kept[0], serde_json::json!({"id": 0, "text": docs[0].1}));

    // A null text is an error naming the file and row, or skipped and counted.
    let mut with_null = rows.clone();
    with_null.insert(2, (99, None));
    write_parquet(&path, &with_null);
    fails(
        &neardup(&["dedup", p, "--text-column", "body"], b""),
        2,
        &format!("{p}:3: column \"body\" is null"),
    );
    let err = ok(&neardup(
        &["dedup", p, "--text-column", "body", "--skip-invalid"],
        b"",
    ));
    assert!(err.contains("skipped 1"), "{err}");
    // A missing column lists the ones there are; a file that is not Parquet says so.
    fails(
        &neardup(&["dedup", p], b""),
        2,
        "no column \"text\" (columns: id, body)",
    );
    let fake = dir.path().join("fake.parquet");
    std::fs::write(&fake, "not parquet").unwrap();
    fails(
        &neardup(&["dedup", fake.to_str().unwrap()], b""),
        2,
        "not readable as Parquet",
    );
}

/// `neardup eval --truth` scores exactly what `neardup dedup` outputs at each threshold:
/// its figures, recomputed here from dedup's own --pairs and --clusters files, agree.
#[test]
fn eval_with_a_truth_file_scores_what_dedup_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let truth: HashMap<(String, String), f64> =
        json_lines(Path::new(&fixture("planted_truth.jsonl")))
            .iter()
            .map(|t| {
                let (a, b) = (id(&t["a"]), id(&t["b"]));
                let key = if a < b { (a, b) } else { (b, a) };
                (key, t["jaccard"].as_f64().unwrap())
            })
            .collect();
    let jaccard = |a: &str, b: &str| -> f64 {
        let key = if a < b { (a, b) } else { (b, a) };
        truth
            .get(&(key.0.to_string(), key.1.to_string()))
            .copied()
            .unwrap_or(0.0)
    };
    // Dedup's default (the pairs near the threshold decided on their texts), then
    // --estimate: each scored as dedup outputs it.
    for mode in [&[][..], &["--estimate"][..]] {
        let rows = dir.path().join("eval.jsonl");
        ok(&neardup(
            &[
                "eval",
                &fixture("planted.jsonl"),
                "--truth",
                &fixture("planted_truth.jsonl"),
                "--thresholds",
                "0.65,0.8",
                "-o",
                rows.to_str().unwrap(),
            ]
            .iter()
            .chain(mode)
            .copied()
            .collect::<Vec<&str>>(),
            b"",
        ));
        let rows = json_lines(&rows);
        assert_eq!(rows.len(), 2);
        for row in rows {
            let t = row["threshold"].as_f64().unwrap();
            let (pairs, clusters) = (dir.path().join("p.jsonl"), dir.path().join("c.jsonl"));
            ok(&neardup(
                &[
                    "dedup",
                    &fixture("planted.jsonl"),
                    "--threshold",
                    &t.to_string(),
                    "--pairs",
                    pairs.to_str().unwrap(),
                    "--clusters",
                    clusters.to_str().unwrap(),
                    "-q",
                ]
                .iter()
                .chain(mode)
                .copied()
                .collect::<Vec<&str>>(),
                b"",
            ));
            let decided = if mode.is_empty() { "exact" } else { "estimate" };
            assert_eq!(row["decided"], decided, "{row}");
            let found = pair_set(&pairs);
            let precise = found
                .iter()
                .filter(|(a, b)| jaccard(a, b) >= t - 0.1)
                .count();
            let wanted: Vec<&(String, String)> = truth
                .iter()
                .filter(|(_, &j)| j >= t + 0.05)
                .map(|(p, _)| p)
                .collect();
            let recalled = wanted.iter().filter(|p| found.contains(p)).count();
            let mut removed = BTreeSet::new();
            let mut wrong = 0;
            for c in json_lines(&clusters) {
                let rep = id(&c["representative"]);
                for m in c["members"].as_array().unwrap() {
                    let m = id(&m["id"]);
                    if m != rep {
                        wrong += usize::from(jaccard(&m, &rep) < t - 0.1);
                        removed.insert(m);
                    }
                }
            }
            let missed = wanted
                .iter()
                .filter(|(a, b)| !removed.contains(a) && !removed.contains(b))
                .count();
            let ratio = |x: usize, of: usize| ((x as f64 / of.max(1) as f64) * 1e4).round() / 1e4;
            assert_eq!(row["pairs"], found.len(), "{row}");
            assert_eq!(row["pair_precision"], ratio(precise, found.len()), "{row}");
            assert_eq!(row["pair_recall"], ratio(recalled, wanted.len()), "{row}");
            assert_eq!(row["truth_pairs"], wanted.len(), "{row}");
            assert_eq!(row["removed"], removed.len(), "{row}");
            assert_eq!(row["wrongly_removed"], wrong, "{row}");
            assert_eq!(row["missed"], missed, "{row}");
            // The planted set is clean: a real check, not a tautology, that something was found.
            assert!(found.len() >= 100 && recalled == wanted.len(), "{row}");
        }
    }
}

#[test]
fn eval_truth_naming_unknown_documents_is_an_error_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let truth = dir.path().join("truth.jsonl");
    std::fs::write(&truth, "{\"a\": \"doc/1\", \"b\": \"doc/2\", \"jaccard\": 0.9}\n{\"a\": \"nope\", \"b\": \"doc/2\", \"jaccard\": 0.9}\n").unwrap();
    let o = neardup(
        &[
            "eval",
            &fixture("planted.jsonl"),
            "--truth",
            truth.to_str().unwrap(),
        ],
        b"",
    );
    fails(
        &o,
        2,
        "truth.jsonl:2: document \"nope\" is not in the corpus",
    );
}

/// Originals of 200 words, each with copies that replace 1 to 9 of its words: pairs of
/// exact Jaccard similarity from about 0.65 to 0.98, many within a sketch's error of 0.8.
fn near_threshold_corpus() -> Vec<(String, String)> {
    let mut s = 0x005E_ED0E_8AC7_u64;
    let word = |s: &mut u64| format!("x{}", common::corpus::next(s) % 100_000);
    let mut docs = Vec::new();
    for o in 0..80 {
        let original: Vec<String> = (0..200).map(|_| word(&mut s)).collect();
        docs.push((format!("o{o}"), original.join(" ")));
        for c in 0..4 {
            let mut copy = original.clone();
            let edits = 1 + common::corpus::next(&mut s) % 9;
            for _ in 0..edits {
                let at = (common::corpus::next(&mut s) % 200) as usize;
                copy[at] = word(&mut s);
            }
            docs.push((format!("o{o}c{c}"), copy.join(" ")));
        }
    }
    docs
}

/// Files of one `neardup dedup INPUT --pairs --clusters --stats-json -q` run named `name`
/// in `dir`, with `--deduplicated` when `kept`, and `extra`: the pairs, clusters, kept
/// documents and summary's paths.
fn lists_run(
    dir: &Path,
    input: &Path,
    name: &str,
    extra: &[&str],
    kept: bool,
) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let path = |what: &str| dir.join(format!("{name}.{what}"));
    let (pairs, clusters, kept_path, stats) =
        (path("pairs"), path("clusters"), path("kept"), path("stats"));
    let mut args = vec![
        "dedup",
        input.to_str().unwrap(),
        "--pairs",
        pairs.to_str().unwrap(),
        "--clusters",
        clusters.to_str().unwrap(),
        "--stats-json",
        stats.to_str().unwrap(),
        "-q",
    ];
    if kept {
        args.extend_from_slice(&["--deduplicated", kept_path.to_str().unwrap()]);
    }
    args.extend_from_slice(extra);
    ok(&neardup(&args, b""));
    (pairs, clusters, kept_path, stats)
}

/// The oracle: the Jaccard similarity of two texts' sets of five consecutive words (the
/// texts are lowercase words and single spaces, so these are their shingles).
fn shingle_jaccard(a: &str, b: &str) -> f64 {
    let set = |t: &str| -> BTreeSet<String> {
        let w: Vec<&str> = t.split(' ').collect();
        w.windows(5).map(|s| s.join(" ")).collect()
    };
    let (a, b) = (set(a), set(b));
    a.intersection(&b).count() as f64 / a.union(&b).count() as f64
}

#[test]
fn exact_reports_the_pairs_at_the_threshold_by_their_texts() {
    let dir = tempfile::tempdir().unwrap();
    let docs = near_threshold_corpus();
    let input = dir.path().join("near.jsonl");
    std::fs::write(&input, jsonl(&docs)).unwrap();
    let text: HashMap<&str, &str> = docs.iter().map(|(i, t)| (i.as_str(), t.as_str())).collect();
    // Every pair of copies of one original (others share no shingle), by the oracle.
    let mut truth: HashMap<(String, String), f64> = HashMap::new();
    for (i, (a, ta)) in docs.iter().enumerate() {
        for (b, tb) in &docs[i + 1..] {
            if a.split('c').next() == b.split('c').next() {
                let key = if a < b {
                    (a.clone(), b.clone())
                } else {
                    (b.clone(), a.clone())
                };
                truth.insert(key, shingle_jaccard(ta, tb));
            }
        }
    }
    let want: BTreeSet<(String, String)> = truth
        .iter()
        .filter(|(_, &j)| j >= 0.8)
        .map(|(k, _)| k.clone())
        .collect();
    let near = truth
        .values()
        .filter(|&&j| (0.75..0.85).contains(&j))
        .count();
    assert!(near >= 100, "only {near} pairs near the threshold");

    let run = |name: &str, extra: &[&str]| lists_run(dir.path(), &input, name, extra, true);

    // The estimates alone get some pairs near 0.8 wrong on this corpus: the test can fail.
    let (estimated, ..) = run("estimated", &["--estimate"]);
    assert_ne!(
        pair_set(&estimated),
        want,
        "no estimate was wrong: the corpus tests nothing"
    );

    let (pairs, clusters, kept, stats) = run("exact", &["--exact"]);
    assert_eq!(pair_set(&pairs), want);
    // Exact is the default.
    let (default, ..) = run("default", &[]);
    assert_eq!(
        std::fs::read(&default).unwrap(),
        std::fs::read(&pairs).unwrap()
    );
    for p in json_lines(&pairs) {
        let (a, b) = (id(&p["a"]), id(&p["b"]));
        let key = if a < b { (a, b) } else { (b, a) };
        let (j, similarity) = (truth[&key], p["similarity"].as_f64().unwrap());
        // Estimated above the margin, or decided on the texts: then it is the exact one
        // (written to three decimals).
        assert!(
            similarity >= 0.9 || (similarity - (j * 1000.0).round() / 1000.0).abs() < 1e-9,
            "{key:?}: similarity {similarity}, exact {j}"
        );
    }
    // Every document removed is a near-duplicate of the one kept for it, by the oracle.
    for c in json_lines(&clusters) {
        let rep = id(&c["representative"]);
        for m in c["members"].as_array().unwrap() {
            let m = id(&m["id"]);
            if m != rep {
                let j = shingle_jaccard(text[rep.as_str()], text[m.as_str()]);
                assert!(j >= 0.8, "{m} removed for {rep} at J {j}");
            }
        }
    }
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let counted = &s["settings"]["exact"];
    assert!(
        counted["pairs"].as_u64().unwrap() >= near as u64 / 2,
        "{counted}"
    );
    assert!(
        counted["accepted"].as_u64() <= counted["pairs"].as_u64(),
        "{counted}"
    );

    assert_eq!(counted["sets"], "memory", "{counted}");

    // Within budgets from too small to hold anything to a few MiB over the reserve: the
    // same bytes, whether the sets are kept in memory, in buckets read whole, or in
    // buckets read a pair at a time.
    let mut ways = BTreeSet::new();
    for budget in [
        "1", "49M", "50M", "51M", "52M", "54M", "56M", "60M", "64M", "80M",
    ] {
        let name = format!("budget-{budget}");
        let (p, c, k, st) = run(&name, &["--exact", "--memory", budget]);
        for (a, b) in [(&pairs, &p), (&clusters, &c), (&kept, &k)] {
            assert_eq!(
                std::fs::read(a).unwrap(),
                std::fs::read(b).unwrap(),
                "{b:?}"
            );
        }
        let s: Value = serde_json::from_str(&std::fs::read_to_string(&st).unwrap()).unwrap();
        let sets = s["settings"]["exact"]["sets"].as_str().unwrap().to_string();
        ways.insert(if sets.contains("pair at a time") {
            "by pairs"
        } else if sets.contains("buckets") {
            "buckets"
        } else {
            "memory"
        });
    }
    assert_eq!(
        ways,
        BTreeSet::from(["buckets", "by pairs", "memory"]),
        "the budgets did not try every way of keeping the sets"
    );
}

/// Without --deduplicated the exact pass also reads the ids and fingerprints the lists
/// name, and the input is not read a third time: the lists are those of a run that reads
/// it again to write the kept documents, copies (a node of several documents) included,
/// whether the sets are kept in memory, in buckets, or read a pair at a time.
#[test]
fn exact_lists_alone_are_those_written_beside_the_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let mut docs = near_threshold_corpus();
    let copies: Vec<(String, String)> = docs
        .iter()
        .step_by(7)
        .map(|(i, t)| (format!("{i}-copy"), t.clone()))
        .collect();
    docs.extend(copies);
    let input = dir.path().join("near.jsonl");
    std::fs::write(&input, jsonl(&docs)).unwrap();
    let run = |name: &str, extra: &[&str], kept: bool| {
        let (pairs, clusters, _, stats) = lists_run(dir.path(), &input, name, extra, kept);
        let s: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        (
            std::fs::read(pairs).unwrap(),
            std::fs::read(clusters).unwrap(),
            s,
        )
    };
    for budget in [None, Some("1"), Some("52M")] {
        let extra: Vec<&str> = budget.iter().flat_map(|b| ["--memory", b]).collect();
        let name = budget.unwrap_or("default");
        let (pairs, clusters, _) = run(&format!("{name}-kept"), &extra, true);
        let (alone_pairs, alone_clusters, stats) = run(&format!("{name}-alone"), &extra, false);
        let lines = String::from_utf8(clusters.clone()).unwrap();
        let copy_in_cluster = lines.lines().any(|l| {
            let c: Value = serde_json::from_str(l).unwrap();
            let members = c["members"].as_array().unwrap().clone();
            members
                .iter()
                .any(|m| m["id"].as_str().unwrap().ends_with("-copy"))
        });
        assert!(
            copy_in_cluster,
            "no copy is in a cluster: the test tests no copies"
        );
        assert_eq!(pairs, alone_pairs, "{name}");
        assert_eq!(clusters, alone_clusters, "{name}");
        assert!(
            stats["settings"]["exact"]["named"].as_u64().unwrap() > 0,
            "{stats}"
        );
    }
}

#[test]
fn exact_is_refused_where_no_texts_decide() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let report = dir.path().join("r.html");
    let input = fixture("planted.jsonl");
    for (flag, value) in [
        ("--distance", "10"),
        ("--report", report.to_str().unwrap()),
        ("--against", store.to_str().unwrap()),
        ("--save", store.to_str().unwrap()),
    ] {
        let o = neardup(&["dedup", &input, "--exact", flag, value], b"");
        fails(&o, 2, &format!("drop --exact or {flag}"));
        assert!(
            !store.exists() && !report.exists(),
            "{flag} wrote before refusing"
        );
    }
}

/// Two templates stored many times over, each copy with a word of its own and some with
/// a few words more, and three unrelated texts: families whose band keys crowd (more than
/// `RUN_LEADERS` = 64 documents a key).
fn crowded_corpus() -> Vec<(String, String)> {
    let mut seed = 0x5eed_u64;
    let mut word = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        format!("w{}", (seed >> 33) % 5000)
    };
    let templates: Vec<Vec<String>> = (0..2).map(|_| (0..200).map(|_| word()).collect()).collect();
    let mut docs = Vec::new();
    for (t, copies) in [(0usize, 300usize), (1, 100)] {
        for i in 0..copies {
            let mut words = templates[t].clone();
            words.insert((i * 7) % 200, format!("copy{t}x{i}"));
            words.extend((0..(i * 13) % 6).map(|k| format!("tail{k}")));
            docs.push((format!("t{t}-{i}"), words.join(" ")));
        }
    }
    for u in 0..3 {
        docs.push((
            format!("u{u}"),
            (0..200).map(|_| word()).collect::<Vec<_>>().join(" "),
        ));
    }
    docs
}

#[test]
fn crowded_families_are_one_cluster_each_under_every_keep_rule() {
    let dir = tempfile::tempdir().unwrap();
    let docs = crowded_corpus();
    let input = dir.path().join("crowded.jsonl");
    std::fs::write(&input, jsonl(&docs)).unwrap();
    let family = |id: &str| id.split('-').next().unwrap().to_string();
    for keep in ["first", "longest", "shortest"] {
        let (clusters, pairs, stats) = (
            dir.path().join("c.jsonl"),
            dir.path().join("p.jsonl"),
            dir.path().join("s.json"),
        );
        for p in [&clusters, &pairs, &stats] {
            let _ = std::fs::remove_file(p);
        }
        ok(&neardup(
            &[
                "dedup",
                input.to_str().unwrap(),
                "--keep",
                keep,
                "--clusters",
                clusters.to_str().unwrap(),
                "--pairs",
                pairs.to_str().unwrap(),
                "--stats-json",
                stats.to_str().unwrap(),
            ],
            b"",
        ));
        let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        assert!(
            stats["settings"]["crowded_runs"].as_u64().unwrap() > 0,
            "{stats}"
        );
        // What every pair would give: each family one cluster, led by the document the
        // rule keeps (the first of equals), the unrelated texts kept alone.
        let mut want = BTreeSet::new();
        for t in ["t0", "t1"] {
            let members: Vec<&(String, String)> =
                docs.iter().filter(|d| family(&d.0) == t).collect();
            let best = members
                .iter()
                .enumerate()
                .min_by_key(|(i, d)| match keep {
                    "longest" => (-(d.1.len() as i64), *i),
                    "shortest" => (d.1.len() as i64, *i),
                    _ => (0, *i),
                })
                .map(|(_, d)| d.0.clone())
                .unwrap();
            want.insert((best, members.len() as u64));
        }
        let got: BTreeSet<(String, u64)> = json_lines(&clusters)
            .iter()
            .map(|c| (id(&c["representative"]), c["size"].as_u64().unwrap()))
            .collect();
        assert_eq!(got, want, "--keep {keep}");
        // Pairs: within a family only, each document with the kept one among them, and
        // not every pair of the family (49,800).
        let listed = pair_set(&pairs);
        assert!(listed
            .iter()
            .all(|(a, b)| family(a) == family(b) && !a.starts_with('u')));
        assert!(listed.len() < 49_800, "{} pairs", listed.len());
        for (best, _) in &want {
            let fam = family(best);
            for (d, _) in docs.iter().filter(|d| family(&d.0) == fam && &d.0 != best) {
                let p = if d < best {
                    (d.clone(), best.clone())
                } else {
                    (best.clone(), d.clone())
                };
                assert!(listed.contains(&p), "--keep {keep}: {p:?} not listed");
            }
        }
    }
}
