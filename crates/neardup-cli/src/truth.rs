//! `neardup eval --truth`: how right `neardup dedup` is on a corpus whose near-duplicate
//! pairs are known, at each of several thresholds, scored by `neardup_eval::truth` (which
//! defines the figures).
//!
//! The documents are read and sketched once, with the band keys of every threshold; each
//! threshold then finds its candidates, verifies and assigns as `neardup dedup
//! --threshold T` does (`--estimate` too, when asked): a second read takes the ids, and
//! the shingle sets of the documents whose pairs are decided on their texts.

use std::time::Instant;

use anyhow::anyhow;
use neardup::batch::{self, Edge, Options, Rule};
use neardup::fingerprint::Fingerprinter;
use neardup::jaccard::{self, Banding, Sketch, Threshold};
use neardup_eval::truth::{read, score, table};
use neardup_io::docs;
use rayon::prelude::*;
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
/// JSON line each (or a Markdown table): with the pairs near each threshold decided on
/// their texts, as `neardup dedup` does by default, or on the sketches alone (`estimate`,
/// as `neardup dedup --estimate`).
pub fn run(
    args: &DocArgs,
    truth_path: &str,
    thresholds: &[f64],
    estimate: bool,
    markdown: bool,
    out: &mut Output,
) -> Result<Scores, Failure> {
    let thresholds: Vec<Threshold> = thresholds
        .iter()
        .map(|&t| Threshold::new(t).map_err(Failure::input))
        .collect::<Result<_, _>>()?;
    let exact = !estimate;
    let options: Vec<Options> = thresholds
        .iter()
        .map(|&t| Options {
            rule: Rule::Jaccard(t),
            pairs: true,
            ..Options::default()
        })
        .collect();
    let start = Instant::now();
    let mut args = args.options();
    let _stdin_copy = dedup::spool_stdin(&mut args)?;
    let progress = Progress::for_stderr();
    let bandings: Vec<Banding> = options.iter().map(|o| o.candidate_banding(exact)).collect();
    let (prints, _) =
        dedup::fingerprint_all(&args, &Fingerprinter::default(), &bandings, &progress)?;
    let n = prints.fps.len();
    let candidates: Vec<batch::Candidates> = (0..thresholds.len())
        .map(|i| {
            batch::candidates(
                &prints.fps,
                &prints.text_hashes,
                batch::Source::Bands(&prints.bands[i]),
                // The truth of the banding itself: every pair of every run.
                None,
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
    let fp = |doc: u32| prints.fps[doc as usize];
    // Verified as dedup verifies: under the exact rule, from the margin below the
    // threshold up, the pairs near it decided below on their texts.
    let mut edges: Vec<Vec<Edge>> = candidates
        .iter()
        .zip(&options)
        .map(|(c, o)| {
            let rule = if exact { o.loosened().rule } else { o.rule };
            batch::verify(c.pairs(), |n| sketch(c.first(n)), |n| fp(c.first(n)), rule)
        })
        .collect();
    // The documents whose shingle sets the exact rule needs, at any threshold.
    let mut wanted: Vec<u32> = Vec::new();
    if exact {
        for ((c, e), t) in candidates.iter().zip(&edges).zip(&thresholds) {
            wanted.extend(batch::near_nodes(e, *t).iter().map(|&n| c.first(n)));
        }
        wanted.sort_unstable();
        wanted.dedup();
    }
    let mut ids: Vec<String> = Vec::with_capacity(n);
    let mut sets: Vec<Vec<u64>> = Vec::with_capacity(wanted.len());
    docs::read_as::<Failure>(&args, &progress, "reading ids", |batch| {
        let first = ids.len() as u64;
        let end = first + batch.len() as u64;
        let from = wanted.partition_point(|&d| u64::from(d) < first);
        let to = wanted.partition_point(|&d| u64::from(d) < end);
        sets.par_extend(
            wanted[from..to]
                .par_iter()
                .map(|&d| jaccard::shingle_set(&batch[(u64::from(d) - first) as usize].text)),
        );
        ids.extend(batch.into_iter().map(|d| match d.id {
            Value::String(s) => s,
            other => other.to_string(),
        }));
        Ok(())
    })?;
    progress.finish();
    if ids.len() != n || sets.len() != wanted.len() {
        return Err(Failure::input(anyhow!(
            "the input changed during the run: {n} documents on the first read, {} on the second",
            ids.len()
        )));
    }
    let truth = read(truth_path, &ids)?;
    let set = |doc: u32| wanted.binary_search(&doc).ok().map(|i| sets[i].as_slice());
    let prepared = start.elapsed().as_secs_f64();
    let mut rows = Vec::new();
    for (((&t, c), o), edges) in thresholds
        .iter()
        .zip(&candidates)
        .zip(&options)
        .zip(&mut edges)
    {
        let started = Instant::now();
        let mut edges = std::mem::take(edges);
        if exact {
            // Every node of a near pair has its set read above.
            batch::decide_on_sets(&mut edges, t, |n| set(c.first(n)));
        }
        let len = |doc: u32| prints.lens[doc as usize];
        let found = batch::resolve_verified(c, edges, fp, len, sketch, o, |_| None)
            .map_err(Failure::input)?;
        let mut row = score(&found, &truth, t.get());
        row["rows"] = json!(o.candidate_banding(exact).rows());
        row["decided"] = json!(if exact { "exact" } else { "estimate" });
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
