//! `neardup dedup`: documents in; clusters of near-duplicates, pairs, and the corpus
//! without its copies out.
//!
//! Two passes over the input, so memory holds 44 bytes per document and never the texts:
//!
//! 1. read (one thread) → fingerprint (all threads): per document its 256-bit fingerprint,
//!    a hash of its text and its length;
//! 2. match the fingerprints ([`neardup::batch::dedup`]) → clusters, representatives;
//! 3. read again: the ids of clustered documents, and the records to keep, streamed out;
//!    then clusters and pairs are written.
//!
//! Standard input is copied to a temporary file first, for the second pass.

use std::fmt::Write as _;
use std::io::Write;
use std::time::Instant;

use anyhow::anyhow;
use neardup::batch::{self, Dedup, WideMatcher};
use neardup::fingerprint::{
    Fingerprinter, Wide, DEFAULT_LANE_DISTANCE, DEFAULT_WIDE_DISTANCE, LANES,
};
use neardup::tables::Blocks;
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::docs::{self, Doc, DocArgs, ReadStats};
use crate::failure::Failure;
use crate::fpconfig::FingerprintArgs;
use crate::output::Output;
use crate::progress::Progress;

/// Which member of a cluster represents it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Keep {
    /// The first in input order.
    First,
    /// The longest text (the first of equals).
    Longest,
    /// The shortest text (the first of equals).
    Shortest,
}

/// Settings of `neardup dedup`.
#[derive(clap::Args, Clone, Debug)]
pub struct DedupCmd {
    #[command(flatten)]
    docs: DocArgs,
    #[command(flatten)]
    fingerprint: FingerprintArgs,
    /// Write every cluster of two or more documents, one JSON line each:
    /// {"cluster", "size", "representative", "members": [{"id", "distance"}, …]}, the
    /// distance being to the representative ('-' for standard output).
    #[arg(long, value_name = "FILE")]
    clusters: Option<String>,
    /// Write every near-duplicate pair, one JSON line each: {"a", "b", "distance"}.
    #[arg(long, value_name = "FILE")]
    pairs: Option<String>,
    /// Write the input without its near-duplicates: every record but the cluster members
    /// that do not represent their cluster. Lines of JSON Lines and --lines inputs are
    /// written as read; whole-file documents as {"id", "text"} lines.
    #[arg(long, value_name = "FILE")]
    deduplicated: Option<String>,
    /// Which member represents a cluster (and stays in --deduplicated).
    #[arg(long, value_enum, default_value = "first")]
    keep: Keep,
    /// Also write the summary as JSON.
    #[arg(long, value_name = "FILE")]
    stats_json: Option<String>,
    /// Near-duplicates: 256-bit fingerprints at most this many bits apart.
    #[arg(short, long, default_value_t = DEFAULT_WIDE_DISTANCE)]
    distance: u32,
    /// Candidates: pairs at most this many bits apart in at least one 64-bit lane.
    #[arg(long, default_value_t = DEFAULT_LANE_DISTANCE)]
    lane_distance: u32,
    /// Blocks of the lanes' tables ('auto': the planner's choice for the corpus).
    #[arg(short, long, default_value = "auto")]
    blocks: Blocks,
    /// No summary on standard error.
    #[arg(short, long)]
    quiet: bool,
}

/// Per document, what the first pass keeps.
#[derive(Default)]
struct Fingerprints {
    fps: Vec<Wide>,
    text_hashes: Vec<u64>,
    lens: Vec<u32>,
}

/// Seconds per phase.
#[derive(Default)]
struct Timings {
    fingerprint: f64,
    matching: f64,
    write: f64,
}

/// Runs `neardup dedup`.
pub fn run(cmd: &DedupCmd) -> Result<(), Failure> {
    let start = Instant::now();
    if cmd.fingerprint.compat.is_some() {
        return Err(Failure::input(anyhow!(
            "dedup uses neardup's own fingerprints; --compat is for `neardup fingerprint`"
        )));
    }
    if cmd.distance > 64 * LANES as u32 {
        return Err(Failure::input(anyhow!(
            "--distance {} is more than the 256 bits of a fingerprint",
            cmd.distance
        )));
    }
    let fingerprinter = cmd.fingerprint.fingerprinter()?;
    // Refuse bad layouts before any work.
    batch::layout(cmd.blocks, 1 << 20, cmd.lane_distance).map_err(Failure::input)?;
    let mut outputs = Outputs::create(cmd)?;

    let mut args = cmd.docs.clone();
    let _stdin_copy = spool_stdin(&mut args)?;
    let progress = Progress::for_stderr();
    let mut timings = Timings::default();

    let t = Instant::now();
    let (prints, stats) = fingerprint_all(&args, &fingerprinter, &progress)?;
    timings.fingerprint = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let n = prints.fps.len();
    let layout = batch::layout(cmd.blocks, n, cmd.lane_distance).map_err(Failure::input)?;
    let blocks = layout.blocks();
    let total = (layout.tables().len() * LANES) as u64;
    progress.phase("matching", Some(total));
    let bar = progress.clone();
    let matcher = WideMatcher::new(layout, cmd.distance).on_progress(move |p| bar.set(p.done));
    let found = batch::dedup(
        &prints.fps,
        &prints.text_hashes,
        &matcher,
        outputs.pairs.is_some(),
    )
    .map_err(Failure::input)?;
    let reps: Vec<u32> = found
        .clusters
        .iter()
        .map(|c| representative(c, &prints.lens, cmd.keep))
        .collect();
    timings.matching = t.elapsed().as_secs_f64();

    let t = Instant::now();
    if outputs.any() {
        write_outputs(
            &mut args,
            &mut outputs,
            &found,
            &reps,
            &prints,
            n,
            &progress,
        )?;
    }
    progress.finish();
    outputs.finish()?;
    timings.write = t.elapsed().as_secs_f64();

    let summary = summary(cmd, &stats, &found, n, blocks, &timings, start);
    if !cmd.quiet {
        print_summary(&summary, &stats, &found);
    }
    if let Some(path) = &cmd.stats_json {
        let text = serde_json::to_string_pretty(&summary)
            .map_err(|e| Failure::io(anyhow!("cannot write {path}: {e}")))?;
        let mut out = Output::create(path)?;
        out.line(text.trim_end().as_bytes())?;
        out.finish()?;
    }
    Ok(())
}

/// The outputs asked for, created (truncated) before any work so a bad path fails at once.
struct Outputs {
    clusters: Option<Output>,
    pairs: Option<Output>,
    deduplicated: Option<Output>,
}

impl Outputs {
    fn create(cmd: &DedupCmd) -> Result<Outputs, Failure> {
        let paths = [
            &cmd.clusters,
            &cmd.pairs,
            &cmd.deduplicated,
            &cmd.stats_json,
        ];
        let given: Vec<&String> = paths.iter().filter_map(|p| p.as_ref()).collect();
        if given.iter().filter(|p| p.as_str() == "-").count() > 1 {
            return Err(Failure::input(anyhow!(
                "only one output can be standard output ('-')"
            )));
        }
        // Writing over an input would destroy it before the second pass reads it.
        let inputs: Vec<std::path::PathBuf> = cmd
            .docs
            .inputs
            .iter()
            .chain(&cmd.docs.input_flags)
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
        for out in &given {
            if let Ok(path) = std::fs::canonicalize(out) {
                if inputs.iter().any(|i| path.starts_with(i)) {
                    return Err(Failure::input(anyhow!(
                        "output '{out}' is an input: write the results elsewhere"
                    )));
                }
            }
        }
        let open = |p: &Option<String>| p.as_deref().map(Output::create).transpose();
        let out = Outputs {
            clusters: open(&cmd.clusters)?,
            pairs: open(&cmd.pairs)?,
            deduplicated: open(&cmd.deduplicated)?,
        };
        if let Some(path) = &cmd.stats_json {
            if path != "-" {
                std::fs::File::create(path)
                    .map_err(|e| Failure::input(anyhow!("cannot create output '{path}': {e}")))?;
            }
        }
        Ok(out)
    }

    fn any(&self) -> bool {
        self.clusters.is_some() || self.pairs.is_some() || self.deduplicated.is_some()
    }

    fn finish(self) -> Result<(), Failure> {
        for out in [self.clusters, self.pairs, self.deduplicated]
            .into_iter()
            .flatten()
        {
            out.finish()?;
        }
        Ok(())
    }
}

/// Copies standard input, if it is an input, to a temporary file the second pass can read
/// again; the file is deleted when the returned handle drops.
fn spool_stdin(args: &mut DocArgs) -> Result<Option<tempfile::NamedTempFile>, Failure> {
    let names = args.inputs.iter().chain(&args.input_flags);
    let reads_stdin = names.clone().count() == 0 || names.into_iter().any(|n| n == "-");
    if !reads_stdin {
        return Ok(None);
    }
    let mut file = tempfile::NamedTempFile::new().map_err(|e| {
        Failure::io(anyhow!(
            "cannot create a temporary file for standard input: {e}"
        ))
    })?;
    std::io::copy(&mut std::io::stdin().lock(), &mut file)
        .and_then(|_| file.flush())
        .map_err(|e| {
            Failure::io(anyhow!(
                "cannot copy standard input to a temporary file: {e}"
            ))
        })?;
    args.stdin_file = Some(file.path().to_string_lossy().into_owned());
    Ok(Some(file))
}

/// Pass 1: every document's fingerprint, text hash and length, in input order. Reading
/// runs on its own thread, a couple of batches ahead of the fingerprinting.
fn fingerprint_all(
    args: &DocArgs,
    fingerprinter: &Fingerprinter,
    progress: &Progress,
) -> Result<(Fingerprints, ReadStats), Failure> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Doc>>(2);
    let mut out = Fingerprints::default();
    std::thread::scope(|scope| {
        let reader = scope.spawn(move || {
            docs::read_as(args, progress, "fingerprinting", |batch| {
                // The receiver only hangs up after an error of its own, reported below.
                tx.send(batch)
                    .map_err(|_| Failure::io(anyhow!("fingerprinting stopped")))
            })
        });
        for batch in rx {
            let rows: Vec<(Wide, u64, u32)> = batch
                .par_iter()
                .map(|d| {
                    (
                        fingerprinter.fingerprint_wide(&d.text),
                        xxhash_rust::xxh3::xxh3_64(d.text.as_bytes()),
                        u32::try_from(d.text.len()).unwrap_or(u32::MAX),
                    )
                })
                .collect();
            for (fp, hash, len) in rows {
                out.fps.push(fp);
                out.text_hashes.push(hash);
                out.lens.push(len);
            }
        }
        let stats = reader
            .join()
            .map_err(|_| Failure::io(anyhow!("the reader thread panicked")))??;
        // Growth left up to half of each vector spare: give it back before matching.
        out.fps.shrink_to_fit();
        out.text_hashes.shrink_to_fit();
        out.lens.shrink_to_fit();
        Ok((out, stats))
    })
}

/// The member of `cluster` (in input order) that `keep` picks.
fn representative(cluster: &[u32], lens: &[u32], keep: Keep) -> u32 {
    let len = |d: &u32| lens[*d as usize];
    let pick = match keep {
        Keep::First => cluster.first(),
        // max_by_key returns the last of equals; the first is wanted.
        Keep::Longest => cluster.iter().rev().max_by_key(|d| len(d)),
        Keep::Shortest => cluster.iter().min_by_key(|d| len(d)),
    };
    pick.copied().unwrap_or_default()
}

/// Pass 2 and the writes: ids of clustered documents, the kept records, clusters, pairs.
#[allow(clippy::too_many_arguments)]
fn write_outputs(
    args: &mut DocArgs,
    outputs: &mut Outputs,
    found: &Dedup,
    reps: &[u32],
    prints: &Fingerprints,
    n: usize,
    progress: &Progress,
) -> Result<(), Failure> {
    // Documents whose ids the clusters and pairs need, in input order.
    let mut involved: Vec<u32> = Vec::new();
    if outputs.clusters.is_some() || outputs.pairs.is_some() {
        involved = found.clusters.concat();
        involved.par_sort_unstable();
    }
    let mut dropped = vec![false; if outputs.deduplicated.is_some() { n } else { 0 }];
    if !dropped.is_empty() {
        for (cluster, &rep) in found.clusters.iter().zip(reps) {
            for &d in cluster {
                dropped[d as usize] = d != rep;
            }
        }
    }
    args.keep_records = outputs.deduplicated.is_some();
    let mut ids: Vec<String> = Vec::with_capacity(involved.len());
    let mut next = 0usize;
    let mut index = 0usize;
    let stats = docs::read_as(args, progress, "writing", |batch| {
        for doc in batch {
            if index >= n {
                index += 1;
                continue;
            }
            if involved.get(next) == Some(&(index as u32)) {
                ids.push(doc.id.to_string());
                next += 1;
            }
            if let Some(out) = &mut outputs.deduplicated {
                if !dropped[index] {
                    match &doc.record {
                        Some(line) => out.line(line.as_bytes())?,
                        None => out.line(
                            json!({"id": doc.id, "text": doc.text})
                                .to_string()
                                .as_bytes(),
                        )?,
                    }
                }
            }
            index += 1;
        }
        Ok(())
    })?;
    if stats.docs as usize != n {
        return Err(Failure::input(anyhow!(
            "the input changed during the run: {n} documents on the first read, {} on the second",
            stats.docs
        )));
    }
    let id = |d: u32| -> &str {
        involved
            .binary_search(&d)
            .map_or("null", |i| ids[i].as_str())
    };
    if let Some(out) = &mut outputs.clusters {
        for (c, (cluster, &rep)) in found.clusters.iter().zip(reps).enumerate() {
            let mut line = format!(
                r#"{{"cluster":{c},"size":{},"representative":{},"members":["#,
                cluster.len(),
                id(rep)
            );
            for (i, &d) in cluster.iter().enumerate() {
                let distance =
                    batch::wide_distance(&prints.fps[d as usize], &prints.fps[rep as usize]);
                if i > 0 {
                    line.push(',');
                }
                // Into the line itself: no string per member.
                let _ = write!(line, r#"{{"id":{},"distance":{distance}}}"#, id(d));
            }
            line.push_str("]}");
            out.line(line.as_bytes())?;
        }
    }
    if let Some(out) = &mut outputs.pairs {
        for p in &found.pairs {
            let line = format!(
                r#"{{"a":{},"b":{},"distance":{}}}"#,
                id(p.a as u32),
                id(p.b as u32),
                p.distance
            );
            out.line(line.as_bytes())?;
        }
    }
    Ok(())
}

/// The summary, as --stats-json writes it.
fn summary(
    cmd: &DedupCmd,
    stats: &ReadStats,
    found: &Dedup,
    n: usize,
    blocks: usize,
    timings: &Timings,
    start: Instant,
) -> Value {
    let removable = found.removable();
    let seconds = start.elapsed().as_secs_f64();
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    json!({
        "documents": n,
        "bytes": stats.bytes,
        "exact_duplicates": found.exact_duplicates,
        "near_duplicates": removable - found.exact_duplicates,
        "clusters": found.clusters.len(),
        "largest_cluster": found.clusters.iter().map(Vec::len).max().unwrap_or(0),
        "kept": n as u64 - removable,
        "pairs": cmd.pairs.as_ref().map(|_| found.pairs.len()),
        "wordless": found.wordless,
        "invalid_utf8": stats.invalid_utf8,
        "skipped_invalid": stats.skipped,
        "seconds": {
            "fingerprint": round(timings.fingerprint),
            "match": round(timings.matching),
            "write": round(timings.write),
            "total": round(seconds),
        },
        "mb_per_s": round(stats.bytes as f64 / 1e6 / seconds.max(1e-9)),
        "docs_per_s": (n as f64 / seconds.max(1e-9)).round(),
        "settings": {
            "distance": cmd.distance,
            "lane_distance": cmd.lane_distance,
            "blocks": blocks,
            "keep": format!("{:?}", cmd.keep).to_lowercase(),
            "fingerprint_version": neardup::fingerprint::VERSION,
        },
    })
}

fn print_summary(s: &Value, stats: &ReadStats, found: &Dedup) {
    let num = |k: &str| s[k].as_u64().unwrap_or(0);
    let secs = |k: &str| s["seconds"][k].as_f64().unwrap_or(0.0);
    let mut lines = vec![
        format!(
            "neardup dedup: {} documents, {:.1} MB in {:.2} s ({:.1} MB/s, {:.0} documents/s)",
            num("documents"),
            stats.bytes as f64 / 1e6,
            secs("total"),
            s["mb_per_s"].as_f64().unwrap_or(0.0),
            s["docs_per_s"].as_f64().unwrap_or(0.0),
        ),
        format!("  exact duplicates  {}", num("exact_duplicates")),
        format!("  near-duplicates   {}", num("near_duplicates")),
        format!(
            "  clusters          {} (largest {})",
            num("clusters"),
            num("largest_cluster")
        ),
        format!("  kept              {}", num("kept")),
        format!(
            "  phases            fingerprint {:.2} s, match {:.2} s, write {:.2} s",
            secs("fingerprint"),
            secs("match"),
            secs("write")
        ),
    ];
    if let Some(p) = s["pairs"].as_u64() {
        lines.insert(5, format!("  pairs             {p}"));
    }
    if found.wordless > 0 {
        lines.push(format!(
            "  warning: {} documents have no words; they match identical texts only",
            found.wordless
        ));
    }
    if stats.invalid_utf8 > 0 {
        lines.push(format!(
            "  warning: {} documents held invalid UTF-8, read as U+FFFD",
            stats.invalid_utf8
        ));
    }
    if stats.skipped > 0 {
        lines.push(format!(
            "  warning: skipped {} invalid JSON lines (--skip-invalid)",
            stats.skipped
        ));
    }
    let mut err = std::io::stderr().lock();
    for line in lines {
        // A closed standard error loses the summary, nothing else.
        let _ = writeln!(err, "{line}");
    }
}
