//! `neardup dedup --exact`: the candidate pairs whose estimated similarity is near the
//! threshold, decided on the exact Jaccard similarity of their shingle sets.
//!
//! A sketch estimates a pair's similarity with an error (σ ≈ 0.02 at 0.8): at 100M
//! documents with planted copies, 1,613 pairs of similarity ≥ 0.85 were estimated below
//! 0.8 and missed, and a few pairs below 0.75 were estimated above it. The pairs estimated
//! within [`EXACT_MARGIN`] of the threshold (five σ) are decided again on their texts, read a
//! second time: only their documents are tokenized, and their shingle sets go to a
//! temporary file, read back a set at a time, so the budget holds at any corpus size.

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

use anyhow::anyhow;
use neardup::batch::{self, Candidates, Edge, EXACT_MARGIN};
use neardup::jaccard::{self, Threshold};
use neardup_io::docs::{self, Doc, ReadOptions};
use rayon::prelude::*;
use serde_json::{json, Value};

use super::bounded::{text_of, Cuts};
use super::columns::TextKey;
use crate::failure::Failure;
use crate::progress::Progress;

/// What the exact pass needs to read the input again.
pub(crate) struct Reading<'a> {
    pub(crate) args: &'a ReadOptions,
    /// Documents in each batch of the first read.
    pub(crate) batches: &'a [u32],
    pub(crate) progress: &'a Progress,
}

/// What the exact pass did, for the summary.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    /// Pairs estimated within the margin.
    pub(crate) pairs: u64,
    /// Their documents, read again.
    pub(crate) documents: u64,
    /// Of those pairs, those that are near-duplicates.
    pub(crate) accepted: u64,
    /// Seconds spent reading the input again and deciding.
    pub(crate) seconds: f64,
}

impl Counts {
    pub(crate) fn describe(self) -> Value {
        json!({
            "margin": EXACT_MARGIN,
            "pairs": self.pairs,
            "documents": self.documents,
            "accepted": self.accepted,
            "seconds": (self.seconds * 1000.0).round() / 1000.0,
        })
    }
}

/// The edges verified with [`batch::Options::loosened`] options, those estimated within
/// [`EXACT_MARGIN`] of `t` decided again on exact similarities ([`batch::decide_exactly`]).
/// The documents of those pairs (the first of each node) are read again (`reading`);
/// `key_of(docs)` gives the text keys pass 1 gave them, which the texts read again must
/// have.
pub(crate) fn decide(
    c: &Candidates,
    mut edges: Vec<Edge>,
    t: Threshold,
    reading: &Reading<'_>,
    key_of: impl Fn(&[u32]) -> Result<Vec<TextKey>, Failure>,
) -> Result<(Vec<Edge>, Counts), Failure> {
    let start = std::time::Instant::now();
    // Nodes are in the order of their first documents, so these are increasing.
    let docs: Vec<u32> = batch::near_nodes(&edges, t)
        .into_iter()
        .map(|n| c.first(n))
        .collect();
    let mut counts = Counts {
        pairs: edges.iter().filter(|e| batch::near_threshold(e, t)).count() as u64,
        documents: docs.len() as u64,
        ..Counts::default()
    };
    if docs.is_empty() {
        // Every edge is estimated above the margin.
        return Ok((edges, counts));
    }
    if !docs.is_sorted() {
        return Err(Failure::io(anyhow!(
            "dedup's candidates are not in the order of their documents"
        )));
    }
    let keys = key_of(&docs)?;
    let sets = Sets::read(reading, &docs, &keys)?;
    drop(keys);
    counts.accepted = batch::decide_exactly(&mut edges, t, |a, b| {
        sets.similarity(c.first(a), c.first(b))
    })?;
    counts.seconds = start.elapsed().as_secs_f64();
    Ok((edges, counts))
}

/// The shingle sets of some documents, in a temporary file: each document's sorted
/// hashes, 8 bytes each, one after the other in the order of the documents.
struct Sets {
    docs: Vec<u32>,
    /// Where each document's set ends, in hashes.
    ends: Vec<u64>,
    file: File,
}

impl Sets {
    /// Reads the input again, cut into the batches of the first read, and writes the sets
    /// of `docs` (increasing; `keys[i]` the text key of `docs[i]`).
    fn read(reading: &Reading<'_>, docs: &[u32], keys: &[TextKey]) -> Result<Sets, Failure> {
        let failed = |what: &str, e: std::io::Error| {
            Failure::io(anyhow!(
                "cannot {what} the temporary file of --exact's shingle sets (TMPDIR): {e}"
            ))
        };
        let file = tempfile::tempfile().map_err(|e| failed("create", e))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let cuts = Cuts::new(reading.batches);
        // Only the documents wanted are parsed whole.
        let args = ReadOptions {
            ids_only: true,
            keep_records: true,
            ..reading.args.clone()
        };
        let whole = ReadOptions {
            ids_only: false,
            ..reading.args.clone()
        };
        let changed =
            |why: String| Failure::input(anyhow!("the input changed during the run: {why}"));
        let work = |k: u64, batch: &mut [Doc]| -> Result<Vec<Vec<u64>>, String> {
            let (first, end) = cuts.range(k, batch.len()).map(|r| (r.start, r.end))?;
            let from = docs.partition_point(|&d| u64::from(d) < first);
            let to = docs.partition_point(|&d| u64::from(d) < end);
            (from..to)
                .into_par_iter()
                .map(|i| {
                    let doc = docs[i];
                    let text = text_of(&batch[(u64::from(doc) - first) as usize], &whole);
                    if TextKey::of(&text) != keys[i] {
                        return Err(format!("document {doc} is not the text it was"));
                    }
                    Ok(jaccard::shingle_set(&text))
                })
                .collect()
        };
        let mut ends = Vec::with_capacity(docs.len());
        let (mut at, mut read) = (0u64, 0u64);
        docs::read_mapped_mut::<_, Failure>(&args, reading.progress, "exact", work, |sets| {
            for set in sets.map_err(changed)? {
                for h in &set {
                    out.write_all(&h.to_le_bytes())
                        .map_err(|e| failed("write", e))?;
                }
                at += set.len() as u64;
                ends.push(at);
            }
            read += 1;
            Ok(())
        })?;
        if read != reading.batches.len() as u64 || ends.len() != docs.len() {
            return Err(changed(format!(
                "{} documents in {} batches on the first read, fewer on the second",
                cuts.total,
                reading.batches.len()
            )));
        }
        let file = out
            .into_inner()
            .map_err(|e| failed("write", e.into_error()))?;
        Ok(Sets {
            docs: docs.to_vec(),
            ends,
            file,
        })
    }

    /// The exact similarity of documents `a` and `b`, two of the documents read. Their
    /// sets are read into buffers each thread keeps: no allocation a pair.
    fn similarity(&self, a: u32, b: u32) -> Result<f64, Failure> {
        thread_local! {
            static BUFFERS: RefCell<(Vec<u8>, Vec<u64>, Vec<u64>)> = const {
                RefCell::new((Vec::new(), Vec::new(), Vec::new()))
            };
        }
        BUFFERS.with_borrow_mut(|(raw, x, y)| {
            self.read_into(a, raw, x)?;
            self.read_into(b, raw, y)?;
            Ok(jaccard::exact(x, y))
        })
    }

    /// Reads the set of `doc` into `out`, through `raw`.
    fn read_into(&self, doc: u32, raw: &mut Vec<u8>, out: &mut Vec<u64>) -> Result<(), Failure> {
        let i = self
            .docs
            .binary_search(&doc)
            .map_err(|_| Failure::io(anyhow!("--exact did not read document {doc} again")))?;
        let start = i.checked_sub(1).map_or(0, |p| self.ends[p]);
        let len = (self.ends[i] - start) as usize;
        raw.resize(len * 8, 0);
        self.file.read_exact_at(raw, start * 8).map_err(|e| {
            Failure::io(anyhow!(
                "cannot read the temporary file of --exact's shingle sets (TMPDIR): {e}"
            ))
        })?;
        out.clear();
        out.extend(
            raw.chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))),
        );
        Ok(())
    }
}
