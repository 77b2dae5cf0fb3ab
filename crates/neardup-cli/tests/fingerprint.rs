//! `neardup fingerprint` and `neardup idf` on real files: every input kind, the output,
//! and every bad input.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Output;

use common::neardup;
use neardup::fingerprint::{compat, Fingerprinter};
use serde_json::Value;

fn lines(o: &Output) -> Vec<Value> {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn fp(v: &Value) -> u64 {
    v["fingerprint"].as_str().unwrap().parse().unwrap()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, bytes).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn json_lines_in_input_order_across_batches() {
    // More documents than one batch, so order must survive parallel work.
    let texts: Vec<String> = (0..10_000)
        .map(|i| format!("document number {i} says {} things", i * 7 % 13))
        .collect();
    let input: String = texts
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{}\n", serde_json::json!({"id": i, "text": t})))
        .collect();
    let out = lines(&neardup(&["fingerprint"], input.as_bytes()));
    let f = Fingerprinter::default();
    assert_eq!(out.len(), texts.len());
    for (i, (line, text)) in out.iter().zip(&texts).enumerate() {
        assert_eq!(line["id"], Value::from(i));
        assert_eq!(fp(line), f.fingerprint(text));
    }
}

#[test]
fn fields_ids_and_numbers() {
    let input = b"{\"key\": \"a\", \"body\": \"alpha beta gamma\"}\n\n{\"body\": \"no key\"}\n";
    let out = lines(&neardup(
        &[
            "fingerprint",
            "--text-field",
            "body",
            "--id-field",
            "key",
            "--numbers",
        ],
        input,
    ));
    assert_eq!(out[0]["id"], "a");
    assert_eq!(out[1]["id"], "<stdin>:3");
    let f = Fingerprinter::default();
    assert_eq!(
        out[0]["fingerprint"].as_u64().unwrap(),
        f.fingerprint("alpha beta gamma")
    );
}

#[test]
fn text_files_directories_and_compression() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = write(d, "docs/a.txt", b"the first document, plain text");
    let b = write(d, "docs/sub/b.md", b"a second one, in a sub-directory");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(b"{\"id\": \"g\", \"text\": \"gzipped json lines\"}\n")
        .unwrap();
    let g = write(d, "more.jsonl.gz", &gz.finish().unwrap());
    let z = write(
        d,
        "lines.txt.zst",
        &zstd::encode_all(&b"one line\nanother line\n"[..], 0).unwrap(),
    );
    let out = lines(&neardup(
        &["fingerprint", &d.join("docs").to_string_lossy(), "-i", &g],
        b"",
    ));
    let ids: Vec<&str> = out.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![a.as_str(), b.as_str(), "g"]);
    let f = Fingerprinter::default();
    assert_eq!(fp(&out[0]), f.fingerprint("the first document, plain text"));
    assert_eq!(fp(&out[2]), f.fingerprint("gzipped json lines"));
    let out = lines(&neardup(&["fingerprint", "--lines", &z], b""));
    assert_eq!(out.len(), 2);
    assert_eq!(out[1]["id"], format!("{z}:2"));
    assert_eq!(fp(&out[1]), f.fingerprint("another line"));
}

#[test]
fn compat_pipelines_are_the_reference_functions() {
    let texts = [
        "Jabberwocky: 'Twas brillig, and the slithy toves",
        "naïve café ÜBER",
    ];
    let input: String = texts
        .iter()
        .map(|t| format!("{}\n", serde_json::json!({"text": t})))
        .collect();
    let py = lines(&neardup(
        &["fingerprint", "--compat", "simhash-py"],
        input.as_bytes(),
    ));
    let cpp = lines(&neardup(
        &["fingerprint", "--compat", "simhash-cpp-legacy"],
        input.as_bytes(),
    ));
    for (i, t) in texts.iter().enumerate() {
        assert_eq!(fp(&py[i]), compat::text_fingerprint(t));
        assert_eq!(fp(&cpp[i]), compat::legacy_cpp_fingerprint(t.as_bytes()));
    }
}

#[test]
fn paragraphs_have_spans_and_fingerprints() {
    let text = "First paragraph, long enough to stand alone here.\n\nSecond paragraph, also long enough for itself.";
    let input = format!("{}\n", serde_json::json!({"id": 1, "text": text}));
    let out = lines(&neardup(
        &["fingerprint", "--paragraphs", "--min-paragraph", "20"],
        input.as_bytes(),
    ));
    let paras = out[0]["paragraphs"].as_array().unwrap();
    assert_eq!(paras.len(), 2);
    let f = Fingerprinter::builder().min_paragraph(20).build().unwrap();
    for (p, want) in paras.iter().zip(f.paragraphs(text)) {
        assert_eq!(p["start"].as_u64().unwrap() as usize, want.start);
        assert_eq!(p["end"].as_u64().unwrap() as usize, want.end);
        assert_eq!(fp(p), want.fingerprint);
    }
}

#[test]
fn settings_change_fingerprints() {
    // A contraction and a number (ascii differs), upper case, and repeated bigrams (tf
    // differs).
    let input = b"{\"text\": \"Some words, don't stop: 42 more. Words again and again and again, and again and again, then the end.\"}\n";
    let base = fp(&lines(&neardup(&["fingerprint"], input))[0]);
    for flags in [
        vec!["--window", "1"],
        vec!["--tokenizer", "char:4"],
        vec!["--tokenizer", "ascii"],
        vec!["--weighting", "none"],
        vec!["--no-lowercase"],
    ] {
        let mut args = vec!["fingerprint"];
        args.extend(flags.iter());
        let got = fp(&lines(&neardup(&args, input))[0]);
        assert_ne!(got, base, "{flags:?}");
    }
}

#[test]
fn idf_table_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let corpus: String = (0..50)
        .map(|i| {
            format!(
                "{}\n",
                serde_json::json!({"text": format!("common words here and rare{i} token{}", i % 5)})
            )
        })
        .collect();
    let docs = write(dir.path(), "c.jsonl", corpus.as_bytes());
    let table = dir.path().join("idf.bin");
    let t = table.to_str().unwrap();
    let o = neardup(
        &["idf", &docs, "-o", t, "--window", "1", "--min-df", "1"],
        b"",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("over 50 documents"));
    let out = lines(&neardup(
        &[
            "fingerprint",
            &docs,
            "--window",
            "1",
            "--weighting",
            "tfidf",
            "--idf",
            t,
        ],
        b"",
    ));
    assert_eq!(out.len(), 50);
    // Missing or bad tables are named.
    let o = neardup(
        &[
            "fingerprint",
            "--weighting",
            "tfidf",
            "--idf",
            "/nonexistent/idf",
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent/idf"));
    let o = neardup(
        &["fingerprint", "--weighting", "tfidf", "--idf", &docs],
        b"",
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not an idf table"), "{}", stderr(&o));
    let o = neardup(&["fingerprint", "--weighting", "tfidf"], b"");
    assert!(stderr(&o).contains("needs --idf"));
}

#[test]
fn bad_input_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        dir.path(),
        "bad.jsonl",
        b"{\"text\": \"ok\"}\n{\"text\": \nx\n",
    );
    let o = neardup(&["fingerprint", &bad], b"");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!("{bad}:2: not valid JSON")),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("panicked"));

    let o = neardup(&["fingerprint", &bad, "--skip-invalid"], b"");
    assert_eq!(lines(&o).len(), 1);
    assert!(stderr(&o).contains("skipped 2 invalid JSON lines"));

    let o = neardup(&["fingerprint"], b"{\"id\": 1, \"text\": 5}\n");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("<stdin>:1: field \"text\" is not a string but a number"));

    let o = neardup(&["fingerprint", "/nonexistent/docs.jsonl"], b"");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot read input '/nonexistent/docs.jsonl'"));

    let o = neardup(&["fingerprint", "--weights", "w.json"], b"");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("need --weighting"));

    let o = neardup(&["fingerprint", "--tokenizer", "char:0"], b"");
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn invalid_utf8_and_empty_documents_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let latin1 = write(dir.path(), "latin1.txt", b"caf\xe9 cr\xe8me br\xfbl\xe9e");
    let empty = write(dir.path(), "empty.txt", b"  \n");
    let o = neardup(&["fingerprint", &latin1, &empty], b"");
    let out = lines(&o);
    assert_eq!(
        fp(&out[0]),
        Fingerprinter::default().fingerprint("caf\u{fffd} cr\u{fffd}me br\u{fffd}l\u{fffd}e")
    );
    assert_eq!(fp(&out[1]), 0);
    let err = stderr(&o);
    assert!(err.contains("1 documents held invalid UTF-8"), "{err}");
    assert!(err.contains("1 empty documents (fingerprint 0)"), "{err}");
}

#[test]
fn eval_scores_and_exports() {
    let dir = tempfile::tempdir().unwrap();
    // Thirty distinct documents of pseudo-random prose.
    let words = [
        "river", "stone", "light", "market", "winter", "garden", "letter", "engine", "harbor",
        "forest", "silver", "window", "thunder", "meadow", "candle", "bridge", "ocean", "paper",
        "signal", "orchard", "valley", "copper", "lantern", "island", "mirror",
    ];
    let corpus: String = (0..30u64)
        .map(|d| {
            let mut x = d.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let text: Vec<&str> = (0..150)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    words[((x >> 33) % words.len() as u64) as usize]
                })
                .collect();
            format!(
                "{}\n",
                serde_json::json!({"id": format!("d{d}"), "text": text.join(" ") + "."})
            )
        })
        .collect();
    let docs = write(dir.path(), "corpus.jsonl", corpus.as_bytes());
    let export = dir.path().join("set");
    let o = neardup(
        &[
            "eval",
            &docs,
            "--originals",
            "10",
            "--levels",
            "0.9,0.7",
            "--configs",
            "default",
            "--max-k",
            "4",
            "--export",
            export.to_str().unwrap(),
        ],
        b"",
    );
    let rows = lines(&o);
    assert_eq!(rows.len(), 5, "k = 0..4");
    for (k, r) in rows.iter().enumerate() {
        assert_eq!(r["k"], k);
        let p = r["precision"].as_f64().unwrap();
        let rec = r["recall_hi"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&p) && (0.0..=1.0).contains(&rec));
    }
    // Recall cannot fall as k grows.
    let recalls: Vec<f64> = rows
        .iter()
        .map(|r| r["recall_hi"].as_f64().unwrap())
        .collect();
    assert!(recalls.windows(2).all(|w| w[0] <= w[1]));
    let truth = std::fs::read_to_string(export.join("dedup_truth.jsonl")).unwrap();
    let planted = truth.lines().filter(|l| l.contains("\"mixed\"")).count();
    assert_eq!(planted, 20, "10 originals x 2 levels");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(export.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["files"]["dedup"], "dedup.jsonl");
    assert_eq!(
        std::fs::read_to_string(export.join("dedup.jsonl"))
            .unwrap()
            .lines()
            .count(),
        50
    );
}

#[test]
fn json_lines_edge_cases_read_as_a_json_parser_reads_them() {
    let f = Fingerprinter::default();
    // Escapes of every kind, a surrogate pair, ids as numbers, null, missing and strings
    // with escapes, duplicate keys (the last wins), nested objects before the text, a key
    // spelled with an escape, a text field inside a nested object that is not the text.
    let input = concat!(
        "{\"id\": 1, \"text\": \"tab\\there \\\"quoted\\\" back\\\\slash \\u00e9t\\u00e9 \\ud83d\\ude00 end\"}\n",
        "{\"id\": null, \"text\": \"null id\"}\n",
        "{\"text\": \"missing id\"}\n",
        "{\"id\": \"a\\\"b\", \"text\": \"escaped id\"}\n",
        "{\"id\": 2.5, \"text\": \"first\", \"text\": \"second\", \"id\": 3}\n",
        "{\"meta\": {\"text\": \"inner\", \"list\": [1, {\"x\": null}]}, \"text\": \"outer\", \"id\": 4}\n",
        "{\"te\\u0078t\": \"escaped key\", \"id\": 5}\n",
        "{\"text\": [1], \"text\": \"string wins\", \"id\": 6}\n",
    );
    let out = lines(&neardup(&["fingerprint"], input.as_bytes()));
    let want = [
        (
            Value::from(1),
            "tab\there \"quoted\" back\\slash été \u{1f600} end",
        ),
        (Value::Null, "null id"),
        (Value::from("<stdin>:3"), "missing id"),
        (Value::from("a\"b"), "escaped id"),
        (Value::from(3), "second"),
        (Value::from(4), "outer"),
        (Value::from(5), "escaped key"),
        (Value::from(6), "string wins"),
    ];
    assert_eq!(out.len(), want.len());
    for (line, (id, text)) in out.iter().zip(want) {
        assert_eq!(line["id"], id);
        assert_eq!(fp(line), f.fingerprint(text), "{text}");
    }

    // Invalid UTF-8 inside a JSON string reads as U+FFFD and is counted.
    let o = neardup(&["fingerprint"], b"{\"text\": \"caf\xe9 au lait\"}\n");
    assert_eq!(fp(&lines(&o)[0]), f.fingerprint("caf\u{fffd} au lait"));
    assert!(stderr(&o).contains("1 documents held invalid UTF-8"));

    // What a JSON parser rejects is still an error naming the line: a lone surrogate, a
    // number out of range, trailing characters, a text that is not a string in the end.
    for (bad, why) in [
        (
            "{\"text\": \"lone \\ud800\"}",
            "not valid JSON: unexpected end of hex escape",
        ),
        (
            "{\"text\": \"x\", \"n\": 1e400}",
            "not valid JSON: number out of range",
        ),
        ("{\"text\": \"x\"} y", "not valid JSON: trailing characters"),
        (
            "{\"text\": \"x\", \"text\": null}",
            "field \"text\" is not a string but null",
        ),
        ("[{\"text\": \"x\"}]", "not a JSON object"),
    ] {
        let input = format!("{{\"text\": \"fine\"}}\n{bad}\n");
        let o = neardup(&["fingerprint"], input.as_bytes());
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(
            stderr(&o).contains(&format!("<stdin>:2: {why}")),
            "{bad}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn output_is_what_serde_json_writes() {
    // Ids of every kind, with and without --numbers and --paragraphs: the bytes of the
    // JSON line are those of the `Value` the line used to be built as.
    let input = concat!(
        "{\"id\": \"plain\", \"text\": \"one two three\"}\n",
        "{\"id\": \"tab\\tand \\\"quote\\\" and \\u0001\", \"text\": \"four five\"}\n",
        "{\"id\": -7, \"text\": \"six\"}\n",
        "{\"id\": 1.50, \"text\": \"seven\"}\n",
        "{\"id\": [1, {\"b\": true}], \"text\": \"eight\\n\\nnine ten\"}\n",
        "{\"id\": null, \"text\": \"\"}\n",
    );
    for flags in [
        &[][..],
        &["--numbers"],
        &["--paragraphs", "--numbers"],
        &["--paragraphs"],
    ] {
        let mut args = vec!["fingerprint"];
        args.extend_from_slice(flags);
        let o = neardup(&args, input.as_bytes());
        assert!(o.status.success());
        let text = String::from_utf8(o.stdout.clone()).unwrap();
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            assert_eq!(line, v.to_string(), "{flags:?}");
        }
    }
}
