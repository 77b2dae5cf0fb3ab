//! Scoring a dedup against a known truth (`neardup eval --truth`): how right it is on a
//! corpus whose near-duplicate pairs are known, at a threshold.
//!
//! The truth file lists every pair of documents with a word 5-shingle Jaccard similarity of
//! at least 0.5 (`{"a": id, "b": id, "jaccard": j}` per line; pairs not listed are below),
//! as [`crate::corpus`] writes it. At threshold `T`, with a tolerance of 0.1 below and 0.05
//! above it:
//!
//! - **pair precision**: reported pairs whose Jaccard is at least `T − 0.1`;
//! - **pair recall**: pairs with Jaccard at least `T + 0.05` that are reported;
//! - **wrongly removed**: removed documents whose Jaccard with the document kept for them
//!   is below `T − 0.1` (data lost that no one asked to lose);
//! - **missed**: pairs with Jaccard at least `T + 0.05` whose documents are both kept.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;

use neardup::batch;
use serde_json::{json, Value};

use crate::Error;

/// Jaccard bands that recall is reported in.
const BANDS: [(f64, f64, &str); 6] = [
    (1.0, f64::INFINITY, "1"),
    (0.9, 1.0, "0.9-1"),
    (0.8, 0.9, "0.8-0.9"),
    (0.7, 0.8, "0.7-0.8"),
    (0.6, 0.7, "0.6-0.7"),
    (0.5, 0.6, "0.5-0.6"),
];

/// The truth's pairs by document position, `(smaller, larger)` → Jaccard. Pairs naming a
/// document that is not in `ids` (the corpus's, in input order) are an error: the file
/// belongs to another corpus.
pub fn read(path: &str, ids: &[String]) -> Result<HashMap<(u32, u32), f64>, Error> {
    let index: HashMap<&str, u32> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i as u32))
        .collect();
    let file = std::fs::File::open(path).map_err(|error| Error::TruthOpen {
        path: path.into(),
        error,
    })?;
    let mut truth = HashMap::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|error| Error::TruthRead {
            path: path.into(),
            line: n + 1,
            error,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let bad = |why: &str| Error::TruthLine {
            path: path.into(),
            line: n + 1,
            why: why.into(),
        };
        let v: Value = serde_json::from_str(&line).map_err(|e| bad(&format!("not JSON: {e}")))?;
        let id = |key: &str| -> Result<u32, Error> {
            let id = match &v[key] {
                Value::String(s) => s.clone(),
                Value::Null => return Err(bad(&format!("no \"{key}\""))),
                other => other.to_string(),
            };
            index
                .get(id.as_str())
                .copied()
                .ok_or_else(|| bad(&format!("document {id:?} is not in the corpus")))
        };
        let (a, b) = (id("a")?, id("b")?);
        let j = v["jaccard"]
            .as_f64()
            .ok_or_else(|| bad("no number \"jaccard\""))?;
        truth.insert((a.min(b), a.max(b)), j);
    }
    Ok(truth)
}

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// The figures of dedup's result `found` at threshold `t` against `truth` (as [`read`]
/// returns it): one JSON row.
pub fn score(found: &batch::Dedup, truth: &HashMap<(u32, u32), f64>, t: f64) -> Value {
    let (lo, hi) = (t - 0.1, t + 0.05);
    let jaccard = |a: u32, b: u32| -> f64 {
        if a == b {
            1.0
        } else {
            truth.get(&(a.min(b), a.max(b))).copied().unwrap_or(0.0)
        }
    };
    let reported: HashSet<(u32, u32)> = found.pairs.iter().map(|p| (p.a, p.b)).collect();
    let precise = found
        .pairs
        .iter()
        .filter(|p| jaccard(p.a, p.b) >= lo)
        .count();
    let wanted: Vec<&(u32, u32)> = truth
        .iter()
        .filter(|(_, &j)| j >= hi)
        .map(|(p, _)| p)
        .collect();
    let recalled = wanted.iter().filter(|p| reported.contains(p)).count();
    let mut by_band = serde_json::Map::new();
    for (low, high, label) in BANDS {
        let band: Vec<&(u32, u32)> = truth
            .iter()
            .filter(|(_, &j)| j >= low && j < high)
            .map(|(p, _)| p)
            .collect();
        let got = band.iter().filter(|p| reported.contains(p)).count();
        by_band.insert(
            label.into(),
            json!({"pairs": band.len(), "recall": round(got as f64 / band.len().max(1) as f64, 4)}),
        );
    }
    let mut removed: HashSet<u32> = HashSet::new();
    let mut wrong = 0u64;
    for c in &found.clusters {
        for m in &c.members {
            if m.doc != c.representative {
                removed.insert(m.doc);
                wrong += u64::from(jaccard(m.doc, c.representative) < lo);
            }
        }
    }
    let missed = wanted
        .iter()
        .filter(|(a, b)| !removed.contains(a) && !removed.contains(b))
        .count();
    let ratio = |x: usize, of: usize| round(x as f64 / of.max(1) as f64, 4);
    json!({
        "threshold": t,
        "pairs": found.pairs.len(),
        "pair_precision": ratio(precise, found.pairs.len()),
        "pair_recall": ratio(recalled, wanted.len()),
        "truth_pairs": wanted.len(),
        "recall_by_band": by_band,
        "removed": removed.len(),
        "wrongly_removed": wrong,
        "wrongly_removed_share": ratio(wrong as usize, removed.len()),
        "missed": missed,
        "missed_share": ratio(missed, wanted.len()),
        "largest_cluster": found.clusters.iter().map(|c| c.members.len()).max().unwrap_or(0),
    })
}

/// The rows of [`score`] for a corpus of `docs` documents as a Markdown table.
pub fn table(rows: &[Value], docs: usize) -> Vec<String> {
    let mut out = vec![
        format!("{docs} documents; tolerance 0.1 below and 0.05 above each threshold T"),
        String::new(),
        "| T | pairs | precision (J ≥ T − 0.1) | recall (J ≥ T + 0.05) | removed | wrongly removed | missed | largest cluster |".into(),
        "|---|---|---|---|---|---|---|---|".into(),
    ];
    for r in rows {
        out.push(format!(
            "| {} | {} | {:.4} | {:.4} | {} | {} ({:.2}%) | {} ({:.2}%) | {} |",
            r["threshold"],
            r["pairs"],
            r["pair_precision"].as_f64().unwrap_or(0.0),
            r["pair_recall"].as_f64().unwrap_or(0.0),
            r["removed"],
            r["wrongly_removed"],
            100.0 * r["wrongly_removed_share"].as_f64().unwrap_or(0.0),
            r["missed"],
            100.0 * r["missed_share"].as_f64().unwrap_or(0.0),
            r["largest_cluster"],
        ));
    }
    out
}
