//! The online corpus decides as batch deduplication does: documents fed in input order
//! through `Documents::insert_if_unique` are kept exactly when `batch::dedup` (keep first)
//! keeps them, and every match that kept one out is a pair batch reports too.
//!
//! On the bundled corpora here; on the natural corpus of `shared/natural` (or any JSON
//! Lines corpus) with `NEARDUP_CORPUS=/tmp/natural-public/corpus.jsonl cargo test
//! --release -p neardup --test online_agrees_with_batch -- --ignored`.

use std::collections::BTreeSet;

use neardup::batch::{self, Options, Rule, Source};
use neardup::corpus::Documents;
use neardup::decide::Signature;
use neardup::fingerprint::Fingerprinter;
use neardup::jaccard::Threshold;

fn texts(path: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["text"].as_str().unwrap().to_string()
        })
        .collect()
}

/// Batch and online agree on `texts` at `t`; the number of documents removed.
fn agree(texts: &[String], t: f64) -> usize {
    let threshold = Threshold::new(t).unwrap();
    let rule = Rule::Jaccard(threshold);
    let fp = Fingerprinter::default();
    let sigs: Vec<Signature> = texts
        .iter()
        .map(|t| Signature::of_text(&fp, rule.banding(), t))
        .collect();
    let fps: Vec<_> = sigs.iter().map(|s| s.fingerprint).collect();
    let hashes: Vec<u64> = sigs.iter().map(|s| s.text_hash).collect();
    let sketches: Vec<_> = sigs.iter().map(|s| s.sketch).collect();
    let bands: Vec<_> = sigs.iter().map(|s| s.bands).collect();
    let lens: Vec<u32> = texts.iter().map(|t| t.len() as u32).collect();
    let options = Options {
        rule,
        pairs: true,
        ..Options::default()
    };
    let found = batch::dedup(
        &fps,
        &hashes,
        &lens,
        &sketches,
        Source::Bands(&bands),
        &options,
    )
    .unwrap();
    let removed: BTreeSet<u64> = found.removed().into_iter().map(u64::from).collect();
    let pairs: BTreeSet<(u64, u64)> = found
        .pairs
        .iter()
        .map(|p| (u64::from(p.a), u64::from(p.b)))
        .collect();

    let mut online = Documents::new(threshold);
    let mut kept_out = BTreeSet::new();
    for (id, sig) in sigs.iter().enumerate() {
        let id = id as u64;
        let matches = online.insert_if_unique(id, *sig).unwrap();
        for (other, m) in &matches {
            assert!(
                pairs.contains(&(*other.min(&id), *other.max(&id))),
                "{id} ~ {other} ({m:?}) is not a batch pair"
            );
        }
        if !matches.is_empty() {
            kept_out.insert(id);
        }
    }
    assert_eq!(
        kept_out, removed,
        "online kept out other documents than batch removed"
    );
    assert_eq!(online.len(), texts.len() - removed.len());
    removed.len()
}

fn root(path: &str) -> String {
    format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn bundled_corpora() {
    let planted = texts(&root("crates/neardup-cli/tests/fixtures/planted.jsonl"));
    for t in [0.6, 0.8, 0.9] {
        assert!(
            agree(&planted, t) >= 100,
            "the planted copies are found at {t}"
        );
    }
    let kjv = texts(&root("examples/kjv.jsonl"));
    assert_eq!(agree(&kjv, 0.5), 1, "2 Kings 19 and Isaiah 37");
    // Texts without words and exact copies: each copy goes, each wordless text once.
    let mut odd: Vec<String> = ["", "!!!", "", "?", "!!!", "one two three", "one two three"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    odd.extend(planted.iter().take(50).cloned());
    assert_eq!(agree(&odd, 0.8), 3 + agree(&planted[..50], 0.8));
}

#[test]
#[ignore = "needs NEARDUP_CORPUS, a JSON Lines corpus such as shared/natural's"]
fn corpus_from_the_environment() {
    let path = std::env::var("NEARDUP_CORPUS").expect("NEARDUP_CORPUS");
    let texts = texts(&path);
    for t in [0.7, 0.8, 0.9] {
        let removed = agree(&texts, t);
        eprintln!(
            "{path} at {t}: {} documents, {removed} removed by both",
            texts.len()
        );
    }
}
