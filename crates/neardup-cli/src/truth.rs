//! `neardup eval --truth`: how right `neardup dedup` is on a corpus whose near-duplicate
//! pairs are known, at each of several thresholds, scored by `neardup_eval::truth` (which
//! defines the figures).
//!
//! The documents are read and sketched once, with the band keys of every threshold; each
//! threshold then finds its candidates, verifies and assigns as `neardup dedup
//! --threshold T` does.

use std::time::Instant;

use anyhow::anyhow;
use neardup::batch::{self, Options, Rule};
use neardup::fingerprint::Fingerprinter;
use neardup::jaccard::{Banding, Sketch, Threshold};
use neardup_eval::truth::{read, score, table};
use neardup_io::docs;
use serde_json::{json, Value};

use crate::dedup;
use crate::doc_args::DocArgs;
use crate::failure::Failure;
use crate::output::Output;
use crate::progress::Progress;

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
    let truth = read(truth_path, &ids)?;
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
        let seconds = prepared + started.elapsed().as_secs_f64();
        row["seconds"] = json!((seconds * 1e3).round() / 1e3);
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
