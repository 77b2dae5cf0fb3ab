//! `neardup load` against the store's own writes: loading a corpus stores what putting
//! the same documents one at a time stores, with the same outcome for each (the oracle is
//! the store itself, one put per call, as the service puts them); the generator's stream
//! loads as its file does; bad input is refused by name.

mod common;

use common::neardup;
use neardup_store::{DocConfig, DocumentStore, Outcome, Write};
use serde_json::{json, Value};

/// A text of 60 words from base `base`, with `edits` of its words replaced: texts of one
/// base and few edits are near-duplicates.
fn text(base: usize, edits: &[usize]) -> String {
    let mut words: Vec<String> = (0..60)
        .map(|i| format!("w{}x{}", (i * 31 + base * 17) % 101, (base * 13 + i) % 7))
        .collect();
    for &at in edits {
        words[at % 60] = format!("edit{at}");
    }
    words.join(" ")
}

/// 600 documents: 150 bases, each put again edited (near-duplicates), some ids put twice
/// (a replacement), some texts without words.
fn corpus() -> Vec<(String, String)> {
    let mut docs = Vec::new();
    for i in 0..600usize {
        let base = i % 150;
        let edits: Vec<usize> = (0..(i / 150) * 2).map(|e| e * 7 + i).collect();
        let id = if i % 97 == 5 {
            format!("doc-{}", i - 5)
        } else {
            format!("doc-{i}")
        };
        let t = if i % 211 == 0 {
            "!!! ???".to_string()
        } else {
            text(base, &edits)
        };
        docs.push((id, t));
    }
    docs
}

fn jsonl(docs: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (id, t) in docs {
        out.extend_from_slice(json!({"id": id, "text": t}).to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

/// The lines of an `--outcomes` file.
fn outcome_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// neardup's output with `args` and `stdin`, once it succeeded.
fn succeeds(args: &[&str], stdin: &[u8]) -> std::process::Output {
    let out = neardup(args, stdin);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The outcome of each put, as `neardup load --outcomes` writes it.
fn outcome_line(id: &str, o: &Outcome) -> Value {
    let Outcome::Put {
        inserted,
        replaced,
        matches,
        partial,
        ..
    } = o
    else {
        panic!("{o:?}")
    };
    let names: Vec<&str> = matches.iter().map(|m| m.id.as_str()).collect();
    let mut line = json!({"id": id, "inserted": inserted, "replaced": replaced, "matches": names});
    if *partial {
        line["partial"] = json!(true);
    }
    line
}

#[test]
fn a_load_stores_and_answers_what_single_puts_do() {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus();
    let input = dir.path().join("corpus.jsonl");
    std::fs::write(&input, jsonl(&docs)).unwrap();
    for unique in [true, false] {
        let loaded = dir.path().join(format!("loaded-{unique}"));
        let outcomes = dir.path().join(format!("outcomes-{unique}.jsonl"));
        let mut args = vec![
            "load",
            "--data",
            loaded.to_str().unwrap(),
            "--create",
            "--threshold",
            "0.7",
            "--batch",
            "37",
            "--outcomes",
            outcomes.to_str().unwrap(),
            input.to_str().unwrap(),
        ];
        if unique {
            args.push("--only-if-unique");
        }
        let out = succeeds(&args, b"");
        let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(summary["documents"], 600);

        // The oracle: the same documents, one put a call.
        let config = DocConfig {
            threshold: "0.7".parse().unwrap(),
            paragraphs: false,
        };
        let one_by_one = dir.path().join(format!("single-{unique}"));
        let mut single = DocumentStore::create(&one_by_one, config).unwrap();
        let prep = single.preparer();
        let mut want = Vec::new();
        for (id, t) in &docs {
            let out = single
                .apply(vec![Write::Put {
                    id: id.clone(),
                    doc: Box::new(prep.prepare(t, false)),
                    ttl: None,
                    only_if_unique: unique,
                }])
                .unwrap();
            want.push(outcome_line(id, &out[0]));
        }
        let got = outcome_lines(&outcomes);
        assert_eq!(got, want);
        let refused = want.iter().filter(|w| w["inserted"] == false).count();
        assert_eq!(summary["refused"], refused as u64);
        if unique {
            // Each base's first edited copies (two words in sixty) are refused as
            // near-duplicates of it.
            assert!(refused >= 150, "{refused}");
        } else {
            assert_eq!(refused, 0);
        }

        // The same documents stored, under the same ids; checks answer alike.
        let store = DocumentStore::open(&loaded, Some(config)).unwrap();
        assert_eq!(store.len(), single.len());
        for (id, t) in &docs {
            assert_eq!(store.get(id).unwrap(), single.get(id).unwrap(), "{id}");
            let q = prep.prepare(t, false);
            assert_eq!(store.check(&q).unwrap(), single.check(&q).unwrap());
        }
    }
}

/// 400 distinct near-duplicates of one text (two of its sixty words edited), so that band
/// keys are shared by more documents than a lookup reads of a key (64): the outcomes say
/// which puts such a key cut (`"partial": true`), and only those that had one. In one batch
/// (the batch's own listings) and in batches of 50 (the index's parts).
#[test]
fn a_load_says_which_puts_a_crowded_key_cut() {
    let dir = tempfile::tempdir().unwrap();
    let docs: Vec<(String, String)> = (0..400usize)
        .map(|i| (format!("c{i}"), text(3, &[i % 60, 7 + i / 60])))
        .collect();
    let input = dir.path().join("crowd.jsonl");
    std::fs::write(&input, jsonl(&docs)).unwrap();
    let config = DocConfig {
        threshold: "0.8".parse().unwrap(),
        paragraphs: false,
    };
    let prep = neardup_store::Preparer::new(config);
    let keys: Vec<_> = docs
        .iter()
        .map(|(_, t)| prep.prepare(t, false).signature.bands)
        .collect();
    // Of each document, the most earlier documents any one of its band keys has (an
    // earlier document sharing the same key in the same band).
    let most_sharing: Vec<usize> = (0..docs.len())
        .map(|i| {
            (0..keys[i].len())
                .map(|b| (0..i).filter(|&j| keys[j][b] == keys[i][b]).count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    assert!(
        most_sharing.iter().any(|&n| n > 64),
        "no crowded key: {most_sharing:?}"
    );
    for batch in ["400", "50"] {
        for matched_only in [false, true] {
            let data = dir.path().join(format!("crowd-{batch}-{matched_only}"));
            let outcomes = dir
                .path()
                .join(format!("crowd-{batch}-{matched_only}.jsonl"));
            let mut args = vec![
                "load",
                "--data",
                data.to_str().unwrap(),
                "--create",
                "--batch",
                batch,
                "--outcomes",
                outcomes.to_str().unwrap(),
                input.to_str().unwrap(),
            ];
            if matched_only {
                args.push("--matched-only");
            }
            succeeds(&args, b"");
            let lines = outcome_lines(&outcomes);
            let mut partial = 0;
            for line in &lines {
                let i: usize = line["id"].as_str().unwrap()[1..].parse().unwrap();
                let names = line["matches"].as_array().unwrap();
                if line.get("partial").is_some() {
                    assert_eq!(line["partial"], true, "{line}");
                    // A key read whole gives at most 64, so a cut one had 65 or more.
                    assert!(
                        most_sharing[i] > 64,
                        "batch {batch}: {line} has no key of 65 earlier documents"
                    );
                    partial += 1;
                } else if matched_only {
                    assert!(!names.is_empty(), "batch {batch}: {line}");
                }
            }
            if !matched_only {
                assert_eq!(lines.len(), docs.len());
            }
            if batch == "400" {
                // One batch: a key's listing is crowded once its 65th text came, and the
                // last document shares a key with more than 64 before it.
                assert!(most_sharing[docs.len() - 1] > 64);
                assert_eq!(lines.last().unwrap()["partial"], true, "batch {batch}");
                assert!(partial > 0);
            }
        }
    }
}

#[test]
fn a_load_says_how_many_paragraphs_it_did_not_index() {
    let dir = tempfile::tempdir().unwrap();
    let most = neardup_store::MAX_PARAGRAPHS as usize;
    // Paragraphs each longer than the shortest one kept alone, apart by blank lines.
    let paragraphs = |n: usize, seed: usize| {
        (0..n)
            .map(|i| {
                format!(
                    "Paragraph {i} of ledger {seed}: entry {} was moved from account {} to \
                     account {} after the audit of the {}th quarter, and the clerk noted \
                     the change in the margin beside the total of the page, signing it \
                     with the date.",
                    i * 3 + seed,
                    i * 11 + 2,
                    i % 89,
                    i + seed
                )
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    assert!(paragraphs(1, 0).len() > 200, "each paragraph kept alone");
    let docs = vec![
        ("long".to_string(), paragraphs(most + 5, 1)),
        ("short".to_string(), paragraphs(3, 2)),
        ("within".to_string(), paragraphs(most, 3)),
    ];
    let input = dir.path().join("paragraphs.jsonl");
    std::fs::write(&input, jsonl(&docs)).unwrap();
    for matched_only in [false, true] {
        let data = dir.path().join(format!("store-{matched_only}"));
        let outcomes = dir.path().join(format!("outcomes-{matched_only}.jsonl"));
        let mut args = vec![
            "load",
            "--data",
            data.to_str().unwrap(),
            "--create",
            "--paragraphs",
            "--outcomes",
            outcomes.to_str().unwrap(),
            input.to_str().unwrap(),
        ];
        if matched_only {
            args.push("--matched-only");
        }
        succeeds(&args, b"");
        let lines = outcome_lines(&outcomes);
        let long = json!({"id": "long", "inserted": true, "replaced": false, "matches": [],
            "paragraphs_not_indexed": 5});
        if matched_only {
            assert_eq!(lines, vec![long]);
        } else {
            let plain =
                |id: &str| json!({"id": id, "inserted": true, "replaced": false, "matches": []});
            assert_eq!(lines, vec![long, plain("short"), plain("within")]);
        }
    }
}

#[test]
fn the_generators_stream_loads_as_its_file_does() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gen.jsonl");
    let truth = dir.path().join("truth.jsonl");
    let gen = |output: &str, truth: &str| {
        neardup(
            &[
                "bench",
                "gen-docs",
                "-n",
                "2000",
                "--doc-bytes",
                "400",
                "--seed",
                "9",
                "--output",
                output,
                "--truth",
                truth,
            ],
            b"",
        )
    };
    let written = gen(file.to_str().unwrap(), truth.to_str().unwrap());
    assert!(
        written.status.success(),
        "{}",
        String::from_utf8_lossy(&written.stderr)
    );
    let streamed = gen("-", dir.path().join("truth2.jsonl").to_str().unwrap());
    assert!(streamed.status.success());
    assert_eq!(streamed.stdout, std::fs::read(&file).unwrap());
    assert_eq!(
        std::fs::read(&truth).unwrap(),
        std::fs::read(dir.path().join("truth2.jsonl")).unwrap()
    );

    // Loaded from standard input, only if unique: every planted copy of similarity well
    // above the threshold is refused, and names its original.
    let store = dir.path().join("store");
    let outcomes = dir.path().join("outcomes.jsonl");
    succeeds(
        &[
            "load",
            "--data",
            store.to_str().unwrap(),
            "--create",
            "--only-if-unique",
            "--outcomes",
            outcomes.to_str().unwrap(),
            "-",
        ],
        &streamed.stdout,
    );
    let by_id: std::collections::HashMap<String, Value> = outcome_lines(&outcomes)
        .into_iter()
        .map(|v| (v["id"].as_str().unwrap().to_string(), v))
        .collect();
    assert_eq!(by_id.len(), 2000);
    let mut checked = 0;
    for line in std::fs::read_to_string(&truth).unwrap().lines() {
        let pair: Value = serde_json::from_str(line).unwrap();
        if pair["jaccard"].as_f64().unwrap() < 0.9 {
            continue;
        }
        let (a, b) = (pair["a"].as_str().unwrap(), pair["b"].as_str().unwrap());
        if by_id[a]["inserted"] != true {
            // The original was itself refused (a copy of an earlier one): b may match
            // that earlier one instead.
            continue;
        }
        let outcome = &by_id[b];
        assert_eq!(outcome["inserted"], false, "{line}: {outcome}");
        let names: Vec<&str> = outcome["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_str().unwrap())
            .collect();
        assert!(names.contains(&a), "{line}: {outcome}");
        checked += 1;
    }
    assert!(checked > 50, "{checked}");
}

/// The tail of a large corpus (`--first`, as the scale script writes its queries) is as
/// many documents as it writes, and its rate is of those: the 100M run's tail of 120,000
/// reported 97.8 million a second, counting from document 0.
#[test]
fn the_generators_summary_counts_from_first() {
    let tail = neardup(
        &[
            "bench",
            "gen-docs",
            "-n",
            "40000",
            "--first",
            "39000",
            "--doc-bytes",
            "2000",
            "--output",
            "-",
        ],
        b"",
    );
    let stderr = String::from_utf8_lossy(&tail.stderr);
    assert!(tail.status.success(), "{stderr}");
    assert_eq!(tail.stdout.split(|&b| b == b'\n').count() - 1, 1000);
    let summary: Value = stderr
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no summary in {stderr}"));
    assert_eq!(summary["documents"], 1000, "{summary}");
    let (rate, seconds) = (
        summary["documents_per_s"].as_f64().unwrap(),
        summary["seconds"].as_f64().unwrap(),
    );
    // Seconds are rounded to the millisecond: the product is 1,000 give or take that.
    let implied = rate * seconds;
    assert!((500.0..2000.0).contains(&implied), "{summary}");
}

#[test]
fn bad_input_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = store.to_str().unwrap();
    // Not a store.
    let out = neardup(
        &["load", "--data", s, "-"],
        b"{\"id\": 1, \"text\": \"a b c\"}\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a neardup data directory"));
    // A line that is not JSON: named, and nothing of the input after it stored.
    let out = neardup(
        &["load", "--data", s, "--create", "--format", "jsonl", "-"],
        b"{\"id\": \"a\", \"text\": \"one two three four five six\"}\nnot json\n",
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("<stdin>:2: not valid JSON"));
}

#[test]
fn a_load_stopped_by_a_bad_line_keeps_what_it_read_and_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = store.to_str().unwrap();
    // 600 documents in batches of 100, then a line cut short, as a generator killed
    // mid-write leaves it.
    let docs = corpus();
    let mut input = jsonl(&docs);
    input.extend_from_slice(b"{\"id\": \"cut\", \"text\": \"one two");
    let out = neardup(
        &["load", "--data", s, "--create", "--batch", "100", "-"],
        &input,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("<stdin>:601: not valid JSON"), "{err}");
    // "loading stopped after N documents (M stored)": the documents read before the bad
    // line's block of input.
    let said = err
        .split("loading stopped after ")
        .nth(1)
        .unwrap_or_else(|| panic!("{err}"));
    let numbers: Vec<usize> = said
        .split(|c: char| !c.is_ascii_digit())
        .filter(|n| !n.is_empty())
        .take(2)
        .map(|n| n.parse().unwrap())
        .collect();
    let (read, stored) = (numbers[0], numbers[1]);
    assert!(read > 0 && read < docs.len(), "{err}");
    // Those documents loaded on their own are the oracle of what the stopped load kept.
    let whole = dir.path().join("whole");
    let out = succeeds(
        &["load", "--data", whole.to_str().unwrap(), "--create", "-"],
        &jsonl(&docs[..read]),
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["inserted"], json!(stored));
    let whole = DocumentStore::open(&whole, None).unwrap();
    let opened = DocumentStore::open(&store, None).unwrap();
    assert_eq!(opened.len(), whole.len());
    // The id map came from the snapshot the stopped load saved, not from every row.
    assert!(
        matches!(opened.opened(), neardup_store::Opened::Snapshot { .. }),
        "{:?}",
        opened.opened()
    );
    for (id, _) in &docs {
        assert_eq!(
            opened.get(id).unwrap().map(|d| d.signature),
            whole.get(id).unwrap().map(|d| d.signature),
            "{id}"
        );
    }
}
