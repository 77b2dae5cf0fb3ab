//! `neardup eval --truth`: how right `neardup dedup` is on a corpus whose near-duplicate
//! pairs are known, at each of several thresholds.
//!
//! The truth file lists every pair of documents with a word 5-shingle Jaccard similarity of
//! at least 0.5 (`{"a": id, "b": id, "jaccard": j}` per line; pairs not listed are below).
//! At threshold `T`, with a tolerance of 0.1 below and 0.05 above it:
//!
//! - **pair precision**: reported pairs whose Jaccard is at least `T − 0.1`;
//! - **pair recall**: pairs with Jaccard at least `T + 0.05` that are reported;
//! - **wrongly removed**: removed documents whose Jaccard with the document kept for them
//!   is below `T − 0.1` (data lost that no one asked to lose);
//! - **missed**: pairs with Jaccard at least `T + 0.05` whose documents are both kept.
//!
//! The documents are read and sketched once, with the band keys of every threshold; each
//! threshold then finds its candidates, verifies and assigns as `neardup dedup
//! --threshold T` does.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::time::Instant;

use anyhow::anyhow;
use neardup::batch::{self, Options, Rule};
use neardup::fingerprint::Fingerprinter;
use neardup::jaccard::{Banding, Sketch, Threshold};
use neardup_io::docs;
use serde_json::{json, Value};

use crate::dedup;
use crate::doc_args::DocArgs;
use crate::failure::Failure;
use crate::output::Output;
use crate::progress::Progress;

/// Jaccard bands that recall is reported in.
const BANDS: [(f64, f64, &str); 6] = [
    (1.0, f64::INFINITY, "1"),
    (0.9, 1.0, "0.9-1"),
    (0.8, 0.9, "0.8-0.9"),
    (0.7, 0.8, "0.7-0.8"),
    (0.6, 0.7, "0.6-0.7"),
    (0.5, 0.6, "0.5-0.6"),
];

/// What [`run`] scored: its rows (one per threshold, as written) and the corpus size.
pub struct Scores {
    pub rows: Vec<Value>,
    pub documents: usize,
}

/// Scores dedup on `args`'s documents against `truth_path` at each of `thresholds`, one
/// JSON line each (or a Markdown table).
pub fn run(
    args: &DocArgs,
    truth_path: &str,
    thresholds: &[f64],
    markdown: bool,
    out: &mut Output,
) -> Result<Scores, Failure> {
    let thresholds: Vec<Threshold> = thresholds
        .iter()
        .map(|&t| Threshold::new(t).map_err(Failure::input))
        .collect::<Result<_, _>>()?;
    let start = Instant::now();
    let mut args = args.options();
    let _stdin_copy = dedup::spool_stdin(&mut args)?;
    let progress = Progress::for_stderr();
    let bandings: Vec<Banding> = thresholds
        .iter()
        .map(|&t| Rule::Jaccard(t).banding())
        .collect();
    let (prints, _) =
        dedup::fingerprint_all(&args, &Fingerprinter::default(), &bandings, &progress)?;
    let n = prints.fps.len();
    let mut ids: Vec<String> = Vec::with_capacity(n);
    docs::read_as::<Failure>(&args, &progress, "reading ids", |batch| {
        ids.extend(batch.into_iter().map(|d| match d.id {
            Value::String(s) => s,
            other => other.to_string(),
        }));
        Ok(())
    })?;
    progress.finish();
    if ids.len() != n {
        return Err(Failure::input(anyhow!(
            "the input changed during the run: {n} documents on the first read, {} on the second",
            ids.len()
        )));
    }
    let truth = read_truth(truth_path, &ids)?;
    let candidates: Vec<batch::Candidates> = (0..thresholds.len())
        .map(|i| {
            batch::candidates(
                &prints.fps,
                &prints.text_hashes,
                batch::Source::Bands(&prints.bands[i]),
            )
            .map_err(Failure::input)
        })
        .collect::<Result<_, _>>()?;
    let mut needed: Vec<u32> = candidates.iter().flat_map(|c| c.needs()).collect();
    needed.sort_unstable();
    needed.dedup();
    let sketches = dedup::read_sketches(prints.sketches, &needed)?;
    let sketch = |doc: u32| {
        needed
            .binary_search(&doc)
            .map_or(Sketch::EMPTY, |i| sketches[i])
    };
    let prepared = start.elapsed().as_secs_f64();
    let mut rows = Vec::new();
    for (&t, c) in thresholds.iter().zip(&candidates) {
        let started = Instant::now();
        let options = Options {
            rule: Rule::Jaccard(t),
            pairs: true,
            ..Options::default()
        };
        let found = batch::resolve(c, &prints.fps, &prints.lens, sketch, &options);
        let mut row = score(&found, &truth, t.get());
        row["rows"] = json!(Rule::Jaccard(t).banding().rows());
        row["seconds"] = json!(round(prepared + started.elapsed().as_secs_f64(), 3));
        rows.push(row);
    }
    if markdown {
        for line in table(&rows, n) {
            out.line(line.as_bytes())?;
        }
    } else {
        for r in &rows {
            out.line(r.to_string().as_bytes())?;
        }
    }
    Ok(Scores { rows, documents: n })
}

/// The truth's pairs by document position, `(smaller, larger)` → Jaccard. Pairs naming a
/// document that is not in the corpus are an error: the file belongs to another corpus.
fn read_truth(path: &str, ids: &[String]) -> Result<HashMap<(u32, u32), f64>, Failure> {
    let index: HashMap<&str, u32> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i as u32))
        .collect();
    let file = std::fs::File::open(path)
        .map_err(|e| Failure::input(anyhow!("cannot read the truth file '{path}': {e}")))?;
    let mut truth = HashMap::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| Failure::io(anyhow!("{path}:{}: {e}", n + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        let bad = |what: &str| Failure::input(anyhow!("{path}:{}: {what}", n + 1));
        let v: Value = serde_json::from_str(&line).map_err(|e| bad(&format!("not JSON: {e}")))?;
        let id = |key: &str| -> Result<u32, Failure> {
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

/// The figures of one threshold.
fn score(found: &batch::Dedup, truth: &HashMap<(u32, u32), f64>, t: f64) -> Value {
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

/// The rows as a Markdown table.
fn table(rows: &[Value], docs: usize) -> Vec<String> {
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
