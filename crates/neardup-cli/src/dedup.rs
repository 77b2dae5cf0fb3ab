//! `neardup dedup`: documents in; clusters of near-duplicates, pairs, and the corpus
//! without its copies out.
//!
//! Under the Jaccard rule (the default) the run keeps within a memory budget
//! (`--memory`) at any corpus size: the `bounded` module signs every document once (sketch, band
//! keys, text key; no 256-bit fingerprint), keeps that state in memory or spills it,
//! finds copies and candidates by sorting in passes, resolves only the nodes that can be
//! in a cluster, and reads the input again to write, fingerprinting only the texts it
//! writes. With `--distance` or `--report`, two passes keep 124 bytes a document in
//! memory:
//!
//! 1. read (one thread) → fingerprint (all threads): per document its 256-bit fingerprint,
//!    a hash of its text, its length and its band keys (80 bytes) in memory, and its
//!    Jaccard sketch (128 bytes) in a temporary file;
//! 2. candidates from the band keys (or, with --distance, the fingerprints' lanes)
//!    ([`neardup::batch::candidates`]); the sketches of the documents in a candidate pair
//!    read back; verification and assignment ([`neardup::batch::resolve`]) → clusters
//!    around kept documents;
//! 3. read again: the ids of clustered documents, and the records to keep, streamed out;
//!    then clusters and pairs are written.
//!
//! Standard input is copied to a temporary file first, for the second pass.

use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::time::Instant;

use anyhow::anyhow;
use neardup::batch::{self, Dedup, Keep, Options, Rule, Source, WideMatcher};
use neardup::decide::Signature;
use neardup::fingerprint::{Fingerprinter, Wide, DEFAULT_LANE_DISTANCE, LANES};
use neardup::jaccard::{self, BandKeys, Banding, Sketch, Threshold, BANDS};
use neardup::tables::Blocks;
use neardup_io::docs::{self, Doc, ReadOptions, ReadStats};
use neardup_io::records;
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::doc_args::parse_threshold;
use crate::doc_args::DocArgs;
use crate::failure::Failure;
use crate::find::{parse_size, share_of_ram};
use crate::fpconfig::FingerprintArgs;
use crate::output::{reads_of, refuse_overwrite, Named, Output};
use crate::progress::Progress;
use neardup_eval::report::dedup::Collector;

mod against;
mod bounded;
mod columns;
mod exact;
mod names;

use against::{StoreRun, StoredCluster};

/// Passes over each band past which a run says its budget is too small to be quick.
const SLOW_PASSES: u64 = 16;

/// Which document of a group of near-duplicates is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KeepArg {
    /// The first in input order.
    First,
    /// The longest text (the first of equals).
    Longest,
    /// The shortest text (the first of equals).
    Shortest,
}

impl From<KeepArg> for Keep {
    fn from(k: KeepArg) -> Keep {
        match k {
            KeepArg::First => Keep::First,
            KeepArg::Longest => Keep::Longest,
            KeepArg::Shortest => Keep::Shortest,
        }
    }
}

/// Settings of `neardup dedup`.
#[derive(clap::Args, Clone, Debug)]
pub struct DedupCmd {
    #[command(flatten)]
    docs: DocArgs,
    /// The 256-bit fingerprints, which decide with --distance only (with --threshold,
    /// these flags are refused: the words of the Jaccard decision are fixed).
    #[command(flatten, next_help_heading = "Fingerprints (with --distance only)")]
    fingerprint: FingerprintArgs,
    /// Write every kept document with the documents removed for it, one JSON line each:
    /// {"cluster", "size", "representative", "members": [{"id", "similarity", "distance"},
    /// …]}, similarity (estimated Jaccard) and distance (256-bit) being to the
    /// representative ('-' for standard output).
    #[arg(long, value_name = "FILE")]
    clusters: Option<String>,
    /// Write every near-duplicate pair, one JSON line each: {"a", "b", "similarity",
    /// "distance"}.
    #[arg(long, value_name = "FILE")]
    pairs: Option<String>,
    /// Write the input without its near-duplicates: every record but the documents removed
    /// for a kept one. Lines of JSON Lines and --lines inputs are written as read;
    /// whole-file documents as {"id", "text"} lines.
    #[arg(long, value_name = "FILE")]
    deduplicated: Option<String>,
    /// Which document of a group is kept (and stays in --deduplicated).
    #[arg(long, value_enum, default_value = "first")]
    keep: KeepArg,
    /// Also write the summary as JSON.
    #[arg(long, value_name = "FILE")]
    stats_json: Option<String>,
    /// Near-duplicates: documents whose word 5-shingle sets have a Jaccard similarity of at
    /// least this, estimated from 128-byte sketches. Words are lowercased \w+ runs, and
    /// each character of the scripts written without spaces (Chinese, Japanese, Thai,
    /// Lao, Khmer, Myanmar, Tibetan) is a word of its own. Candidates
    /// are the documents whose sketches' band keys agree in some band: at least 99.95% of
    /// the pairs at the threshold.
    #[arg(short, long, default_value_t = Threshold::default(), value_parser = parse_threshold)]
    threshold: Threshold,
    /// Near-duplicates by bits instead of --threshold: 256-bit fingerprints at most this
    /// many bits apart (docs/dedup.md relates the two).
    #[arg(short, long, conflicts_with = "threshold")]
    distance: Option<u32>,
    /// Clusters as connected components of the near-duplicate pairs: a document may then
    /// be removed for one that is not its near-duplicate (A ~ B ~ C removes C for A).
    #[arg(long)]
    closure: bool,
    /// With --distance, the candidates: pairs at most this many bits apart in at least one
    /// 64-bit lane [default: 8].
    #[arg(long, requires = "distance")]
    lane_distance: Option<u32>,
    /// With --distance, the blocks of the lanes' tables ('auto': the planner's choice for
    /// the corpus) [default: auto].
    #[arg(short, long, requires = "distance")]
    blocks: Option<Blocks>,
    /// Memory the run may hold besides its answer, e.g. 4G [default: half of the RAM]:
    /// band keys and text hashes beyond half of it go to temporary files (TMPDIR), and
    /// copies, candidates and verification work in passes, with the same output. Sketches (128 bytes a
    /// document) always go to a temporary file. Not with --distance or --report, which
    /// keep 124 bytes a document in memory.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    memory: Option<u64>,
    /// Decide the candidate pairs whose estimated similarity is within 0.1 of --threshold
    /// on the exact Jaccard similarity of their shingle sets, read again from the input
    /// (one more pass over it, tokenizing only those pairs' documents): no candidate pair
    /// is then kept or let go for the sketches' error of estimate (σ ≈ 0.02 at 0.8).
    /// Candidates come from the bands of the threshold 0.1 lower (3 bins a band at 0.8
    /// instead of 5: a pair at 0.85 is missed once in 190 million), which makes more
    /// candidates to verify. Their pairs and clusters report the exact similarity. The
    /// default with --threshold, but for --report, --against and --save (a store keeps no
    /// texts), which decide on the estimates.
    #[arg(long, conflicts_with = "estimate")]
    exact: bool,
    /// Decide every candidate pair on its sketches' estimated similarity alone, without
    /// reading the input again (not --exact): faster, but a pair within a few hundredths
    /// of --threshold may be decided either way (at 100M documents, 1,613 of 5.2M planted
    /// pairs at 0.85 or more were missed, and 8 of 6.5M documents removed were not
    /// near-duplicates of what they were removed for).
    #[arg(long)]
    estimate: bool,
    /// No summary on standard error.
    #[arg(short, long)]
    quiet: bool,
    /// Write an HTML page of what was removed, for review: the summary, histograms of
    /// cluster sizes and similarities, counts per source, the largest clusters and the
    /// removed documents nearest the threshold beside their kept ones, differences marked
    /// (docs/report.md).
    #[arg(long, value_name = "FILE")]
    report: Option<String>,
    /// Also remove the documents that are near-duplicates of a document stored in this
    /// document store (`neardup serve`'s or `neardup load`'s data directory, or one
    /// --save wrote), by the same rule: the answer is that of deduplicating the stored
    /// documents followed by the input, the stored ones kept whatever --keep says.
    /// Nothing is written to the store (opening it may finish a stopped writer's
    /// commit); no other process may have it open. Its threshold must be --threshold.
    #[arg(long, value_name = "DIR")]
    against: Option<String>,
    /// Add the documents kept to this document store, made with --threshold if it does
    /// not exist; when it does, the input is also deduplicated against it (as
    /// --against). A kept document whose id is already stored, or is another kept
    /// document's, is refused before anything is written (a store holds one document per
    /// id).
    #[arg(long, value_name = "DIR")]
    save: Option<String>,
}

/// Per document, what the first pass keeps: fingerprints, text hashes, lengths and band
/// keys (one list per banding asked for) in memory, sketches in a temporary file (read
/// back only for the documents that need them).
pub(crate) struct Fingerprints {
    pub(crate) fps: Vec<Wide>,
    pub(crate) text_hashes: Vec<u64>,
    pub(crate) lens: Vec<u32>,
    pub(crate) bands: Vec<Vec<BandKeys>>,
    pub(crate) sketches: BufWriter<std::fs::File>,
}

/// Candidates where the rule finds them: band keys for a Jaccard threshold, lanes for a
/// distance; and the settings that say so for the summary.
pub(crate) fn find_candidates(
    prints: &Fingerprints,
    rule: Rule,
    keep: Keep,
    lanes: (Option<Blocks>, Option<u32>),
    progress: &Progress,
) -> Result<(batch::Candidates, Value), Failure> {
    let n = prints.fps.len();
    match rule {
        Rule::Jaccard(_) => {
            progress.phase("matching", None);
            let keys = prints.bands.first().map(Vec::as_slice).unwrap_or_default();
            let leading = batch::Leading {
                keep,
                lens: &prints.lens,
            };
            let c = batch::candidates(
                &prints.fps,
                &prints.text_hashes,
                Source::Bands(keys),
                Some(leading),
            )
            .map_err(Failure::input)?;
            let settings = json!({
                "bands": BANDS,
                "rows": rule.banding().rows(),
                "crowded_runs": c.led_runs(),
            });
            Ok((c, settings))
        }
        Rule::Distance(_) => {
            let (blocks, k) = (
                lanes.0.unwrap_or(Blocks::Auto),
                lanes.1.unwrap_or(DEFAULT_LANE_DISTANCE),
            );
            let layout = batch::layout(blocks, n, k).map_err(Failure::input)?;
            let settings = json!({"lane_distance": k, "blocks": layout.blocks()});
            progress.phase("matching", Some((layout.tables().len() * LANES) as u64));
            let bar = progress.clone();
            let matcher = WideMatcher::new(layout, 0).on_progress(move |p| bar.set(p.done));
            let c = batch::candidates(
                &prints.fps,
                &prints.text_hashes,
                Source::Lanes(&matcher),
                None,
            )
            .map_err(Failure::input)?;
            Ok((c, settings))
        }
    }
}

/// Seconds per phase.
#[derive(Default)]
struct Timings {
    fingerprint: f64,
    matching: f64,
    write: f64,
    /// The steps of matching, under the Jaccard rule.
    steps: Option<bounded::Steps>,
}

/// Runs `neardup dedup`.
pub fn run(cmd: &DedupCmd) -> Result<(), Failure> {
    let start = Instant::now();
    if cmd.fingerprint.compat.is_some() {
        return Err(Failure::input(anyhow!(
            "dedup uses neardup's own fingerprints; --compat is for `neardup fingerprint`"
        )));
    }
    let rule = match cmd.distance {
        Some(d) if d > 64 * LANES as u32 => {
            return Err(Failure::input(anyhow!(
                "--distance {d} is more than the 256 bits of a fingerprint"
            )));
        }
        Some(d) => Rule::Distance(d),
        None => Rule::Jaccard(cmd.threshold),
    };
    if let (Rule::Jaccard(_), Some(flag)) = (rule, cmd.fingerprint.first_given()) {
        // It would change only the `distance` column: a user would think it changed
        // which documents are removed.
        return Err(Failure::input(anyhow!(
            "{flag} sets the 256-bit fingerprints, which decide only with --distance; with \
             --threshold (the default) near-duplicates are decided by the Jaccard similarity \
             of word 5-shingles, with the same words for every script (docs/dedup.md, \
             \"Words\"): drop {flag}, or add --distance N"
        )));
    }
    let options = Options {
        rule,
        keep: cmd.keep.into(),
        closure: cmd.closure,
        pairs: cmd.pairs.is_some(),
    };
    let fingerprinter = cmd.fingerprint.fingerprinter()?;
    // Refuse bad layouts before any work.
    if let Rule::Distance(_) = rule {
        let k = cmd.lane_distance.unwrap_or(DEFAULT_LANE_DISTANCE);
        batch::layout(cmd.blocks.unwrap_or(Blocks::Auto), 1 << 20, k).map_err(Failure::input)?;
    }
    let bandings: Vec<Banding> = match rule {
        Rule::Jaccard(_) => vec![rule.banding()],
        Rule::Distance(_) => Vec::new(),
    };
    if cmd.memory.is_some() && (matches!(rule, Rule::Distance(_)) || cmd.report.is_some()) {
        return Err(Failure::input(anyhow!(
            "--memory bounds the Jaccard rule's state; --distance and --report keep theirs \
             in memory (124 bytes a document): drop --memory"
        )));
    }
    // Texts decide the pairs near the threshold where they can.
    let exact = matches!(rule, Rule::Jaccard(_))
        && !cmd.estimate
        && cmd.report.is_none()
        && cmd.against.is_none()
        && cmd.save.is_none();
    if cmd.exact {
        let other = [
            (cmd.distance.is_some(), "--distance"),
            (cmd.report.is_some(), "--report"),
            (cmd.against.is_some(), "--against"),
            (cmd.save.is_some(), "--save"),
        ];
        if let Some((_, flag)) = other.iter().find(|(given, _)| *given) {
            return Err(Failure::input(anyhow!(
                "--exact reads the texts of the pairs near --threshold again; {flag} decides \
                 without them (a store keeps no texts; --distance and --report decide on \
                 fingerprints and sketches in memory): drop --exact or {flag}"
            )));
        }
    }
    let mut store = StoreRun::open(cmd, rule)?;
    let mut outputs = Outputs::create(cmd)?;

    let mut args = cmd.docs.options();
    let _stdin_copy = spool_stdin(&mut args)?;
    let progress = Progress::for_stderr();
    let mut timings = Timings::default();

    if let (Rule::Jaccard(_), None) = (rule, &cmd.report) {
        let budget = cmd.memory.unwrap_or_else(|| share_of_ram(1, 2));
        let (found, stats, n, mut matching) = run_jaccard(
            &options,
            exact,
            &fingerprinter,
            budget,
            &mut args,
            &mut outputs,
            &mut timings,
            store.as_mut(),
            &progress,
        )?;
        if let (Some(store), Value::Object(map)) = (store, &mut matching) {
            map.insert("store".into(), store.finish(&found));
        }
        let summary = summary(cmd, &options, &stats, &found, n, matching, &timings, start);
        return finish_run(cmd, &summary, &stats, &found);
    }

    let t = Instant::now();
    let (prints, stats) = fingerprint_all(&args, &fingerprinter, &bandings, &progress)?;
    timings.fingerprint = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let n = prints.fps.len();
    let (candidates, matching) = find_candidates(
        &prints,
        rule,
        options.keep,
        (cmd.blocks, cmd.lane_distance),
        &progress,
    )?;
    // The band keys (80 bytes a document) have given their candidates: freed before
    // verification and assignment allocate theirs, which keeps the peak near pass 1's.
    drop(prints.bands);
    let needed = candidates.needs();
    let sketches = read_sketches(prints.sketches, &needed)?;
    let sketch = |doc: u32| {
        needed
            .binary_search(&doc)
            .map_or(Sketch::EMPTY, |i| sketches[i])
    };
    let found = batch::resolve(&candidates, &prints.fps, &prints.lens, sketch, &options);
    drop((candidates, sketches, needed));
    timings.matching = t.elapsed().as_secs_f64();

    let t = Instant::now();
    // The report's samples are chosen now; the second pass fills in their texts.
    let mut report = outputs
        .report
        .take()
        .map(|out| (out, Collector::plan(&found, &prints.text_hashes, rule, n)));
    if outputs.any() || report.is_some() {
        write_outputs(
            &mut args,
            &mut outputs,
            &found,
            n,
            &progress,
            report.as_mut().map(|r| &mut r.1),
        )?;
    }
    progress.finish();
    outputs.finish()?;
    timings.write = t.elapsed().as_secs_f64();

    let summary = summary(cmd, &options, &stats, &found, n, matching, &timings, start);
    finish_run(cmd, &summary, &stats, &found)?;
    if let Some((out, report)) = report {
        let inputs: Vec<String> = cmd.docs.named().cloned().collect();
        out.page(report.render(&summary, &found, &prints.text_hashes, &inputs))?;
    }
    Ok(())
}

/// The summary on standard error and in --stats-json.
fn finish_run(
    cmd: &DedupCmd,
    summary: &Value,
    stats: &ReadStats,
    found: &Dedup,
) -> Result<(), Failure> {
    if !cmd.quiet {
        print_summary(summary, stats, found);
    }
    if let Some(path) = &cmd.stats_json {
        let text = serde_json::to_string_pretty(summary)
            .map_err(|e| Failure::io(anyhow!("cannot write {path}: {e}")))?;
        let mut out = Output::create(path)?;
        out.line(text.trim_end().as_bytes())?;
        out.finish()?;
    }
    Ok(())
}

/// The Jaccard rule's run within `budget` ([`bounded`]): what was found, what reading
/// counted, the documents, and the settings for the summary.
#[allow(clippy::too_many_arguments)]
fn run_jaccard(
    options: &Options,
    exact: bool,
    fingerprinter: &Fingerprinter,
    budget: u64,
    args: &mut ReadOptions,
    outputs: &mut Outputs,
    timings: &mut Timings,
    store: Option<&mut StoreRun>,
    progress: &Progress,
) -> Result<(Dedup, ReadStats, usize, Value), Failure> {
    let mut steps = bounded::Steps::default();
    let t = Instant::now();
    let check = store.as_deref().map(StoreRun::check);
    let (mut signed, stats) = bounded::sign(
        args,
        options.candidate_banding(exact),
        budget,
        check.as_ref(),
        progress,
    )?;
    steps.sign = t.elapsed().as_secs_f64();
    steps.peaks[0] = crate::memory::peak_resident();
    crate::memory::give_back_freed(budget);
    timings.fingerprint = steps.sign;
    let n = signed.len() as usize;
    let spilled = signed.spilled();
    let (passes, one) = bounded::sort_passes(&signed, budget);
    if passes > SLOW_PASSES {
        crate::note!(
            "  warning: --memory {} MiB leaves so little to sort in that each band takes {passes} \
             passes over its column; {} MiB would sort one in a single pass",
            budget >> 20,
            one.div_ceil(1 << 20)
        );
    }

    let t = Instant::now();
    progress.phase("copies", None);
    let copies = bounded::copies(&signed, budget)?;
    steps.copies = t.elapsed().as_secs_f64();
    steps.peaks[1] = crate::memory::peak_resident();
    crate::memory::give_back_freed(budget);
    let t = Instant::now();
    let pairs = bounded::candidate_pairs(&signed, &copies, options.keep, budget, progress)?;
    let crowded = pairs.led;
    signed.drop_band_keys();
    steps.candidates = t.elapsed().as_secs_f64();
    steps.peaks[2] = crate::memory::peak_resident();
    crate::memory::give_back_freed(budget);
    let t = Instant::now();
    progress.phase("verifying", None);
    // Without --deduplicated the exact pass reads what the lists name, and the write reads
    // nothing again.
    let lists_only = (outputs.clusters.is_some() || outputs.pairs.is_some())
        && outputs.deduplicated.is_none()
        && store.is_none();
    let reading = exact::Reading {
        args,
        batches: &signed.batches,
        progress,
        naming: lists_only.then_some(fingerprinter),
    };
    let bounded::Resolved {
        mut found,
        docs,
        keys,
        reads,
        exact: decided,
        named,
    } = bounded::resolve(
        &signed,
        copies,
        pairs,
        options,
        budget,
        exact.then_some(&reading),
    )?;
    let batches = std::mem::take(&mut signed.batches);
    let stored = std::mem::take(&mut signed.stored);
    drop(signed);
    steps.verify = t.elapsed().as_secs_f64();
    steps.peaks[3] = crate::memory::peak_resident();
    crate::memory::give_back_freed(budget);
    timings.matching = steps.copies + steps.candidates + steps.verify;

    let t = Instant::now();
    let saving = store.as_ref().is_some_and(|s| s.saving());
    let removed = if outputs.deduplicated.is_some() || saving {
        found.removed()
    } else {
        Vec::new()
    };
    if let Some(store) = store.as_deref() {
        store.refuse_taken_ids(args, &stored, &removed)?;
    }
    if outputs.any() {
        let involved = involved(outputs, &found);
        // From here on only the involved documents' text keys are looked up: at 100M
        // documents, five times as many documents were in candidate pairs.
        let (docs, keys): (Vec<u32>, Vec<_>) = involved
            .iter()
            .filter_map(|&d| docs.binary_search(&d).ok().map(|i| (d, keys[i])))
            .unzip();
        let dropped = if outputs.deduplicated.is_some() {
            removed.clone()
        } else {
            Vec::new()
        };
        let key_of = |d: u32| docs.binary_search(&d).ok().map(|i| keys[i]);
        let (named, read) = match named {
            Some(names::Named { docs, read }) => (docs, read),
            None => {
                let texts = names::Texts::new(involved.iter().filter_map(|&d| key_of(d)).collect());
                // The records of involved documents are parsed again for their texts.
                args.keep_records = outputs.deduplicated.is_some() || !involved.is_empty();
                args.ids_only = true;
                let naming = names::Naming {
                    docs: &involved,
                    texts,
                    key_of: &key_of,
                    fingerprinter,
                };
                let mut out = outputs.deduplicated.as_mut();
                let read =
                    names::reread(args, &batches, naming, &dropped, progress, |line| match out
                        .as_mut()
                    {
                        Some(o) => o.line(line.as_bytes()),
                        None => Ok(()),
                    })?;
                if read.docs as usize != n {
                    return Err(Failure::input(anyhow!(
                        "the input changed during the run: {n} documents on the first read, {} on the second",
                        read.docs
                    )));
                }
                (involved, read)
            }
        };
        let at = |d: u32| named.binary_search(&d).ok();
        let fp = |d: u32| {
            key_of(d)
                .and_then(|k| read.fingerprint(k))
                .unwrap_or([0; LANES])
        };
        found.set_distances(fp);
        let by_stored = match store.as_deref() {
            Some(s) if outputs.clusters.is_some() => s.clusters(&mut found, &stored, fp)?,
            _ => Vec::new(),
        };
        write_lists(outputs, &found, &by_stored, |d| {
            at(d).and_then(|i| read.ids.get(i)).unwrap_or("null")
        })?;
    }
    progress.finish();
    outputs.finish_lists()?;
    if let Some(store) = store {
        store.save(args, &removed, progress)?;
    }
    timings.write = t.elapsed().as_secs_f64();
    steps.peaks[4] = crate::memory::peak_resident();
    timings.steps = Some(steps);
    let mut settings = json!({
        "bands": BANDS,
        "rows": options.candidate_banding(exact).rows(),
        "memory": budget,
        "spilled": spilled,
        "sketch_reads": reads.describe(),
        "crowded_runs": crowded,
    });
    if let (Some(counts), Value::Object(map)) = (decided, &mut settings) {
        map.insert("exact".into(), counts.describe());
    }
    Ok((found, stats, n, settings))
}

/// Documents whose ids the clusters and pairs asked for name, in input order. (A
/// document of a pair need not be in a cluster: kept, with its near-duplicate removed for
/// another.)
fn involved(outputs: &Outputs, found: &Dedup) -> Vec<u32> {
    let mut involved: Vec<u32> = Vec::new();
    if outputs.clusters.is_some() {
        involved.extend(
            found
                .clusters
                .iter()
                .flat_map(|c| c.members.iter().map(|m| m.doc)),
        );
        involved.extend(found.outside.iter().map(|o| o.doc));
    }
    if outputs.pairs.is_some() {
        involved.extend(found.pairs.iter().flat_map(|p| [p.a, p.b]));
    }
    involved.par_sort_unstable();
    involved.dedup();
    involved
}

/// Writes --clusters and --pairs, `id(doc)` naming each document; then the clusters of
/// documents removed for stored ones (`by_stored`), marked `"stored": true`.
fn write_lists<'a>(
    outputs: &mut Outputs,
    found: &Dedup,
    by_stored: &[StoredCluster],
    id: impl Fn(u32) -> &'a str,
) -> Result<(), Failure> {
    if let Some(out) = &mut outputs.clusters {
        let mut line = String::new();
        for (c, cluster) in found.clusters.iter().enumerate() {
            line.clear();
            let members = cluster.members.iter().map(|m| records::Member {
                id: id(m.doc),
                similarity: m.similarity,
                distance: m.distance,
            });
            records::cluster_line(&mut line, c as u64, id(cluster.representative), members);
            out.line(line.as_bytes())?;
        }
        for (c, cluster) in by_stored.iter().enumerate() {
            line.clear();
            let rep = records::Member {
                id: &cluster.id,
                similarity: 1.0,
                distance: 0,
            };
            let members =
                std::iter::once(rep).chain(cluster.members.iter().map(|o| records::Member {
                    id: id(o.doc),
                    similarity: o.similarity,
                    distance: o.distance,
                }));
            let members: Vec<records::Member<'_>> = members.collect();
            let number = (found.clusters.len() + c) as u64;
            records::cluster_line(&mut line, number, &cluster.id, members.into_iter());
            // The representative is not in the input: say so on its line.
            line.pop();
            line.push_str(r#","stored":true}"#);
            out.line(line.as_bytes())?;
        }
    }
    if let Some(out) = &mut outputs.pairs {
        let mut line = String::new();
        for p in &found.pairs {
            line.clear();
            records::pair_line(&mut line, id(p.a), id(p.b), p.similarity, p.distance);
            out.line(line.as_bytes())?;
        }
    }
    Ok(())
}

/// The outputs asked for, created (truncated) before any work so a bad path fails at once.
struct Outputs {
    clusters: Option<Output>,
    pairs: Option<Output>,
    deduplicated: Option<Output>,
    report: Option<Output>,
}

impl Outputs {
    fn create(cmd: &DedupCmd) -> Result<Outputs, Failure> {
        let paths = [
            &cmd.clusters,
            &cmd.pairs,
            &cmd.deduplicated,
            &cmd.stats_json,
            &cmd.report,
        ];
        let given: Vec<&String> = paths.iter().filter_map(|p| p.as_ref()).collect();
        if given.iter().filter(|p| p.as_str() == "-").count() > 1 {
            return Err(Failure::input(anyhow!(
                "only one output can be standard output ('-')"
            )));
        }
        // Writing over an input would destroy it before the second pass reads it.
        let writes: Vec<Named<'_>> = given.iter().map(|p| ("output", p.as_str())).collect();
        refuse_overwrite(&writes, &reads_of(&cmd.docs, Some(&cmd.fingerprint)))?;
        let open = |p: &Option<String>| p.as_deref().map(Output::create).transpose();
        let out = Outputs {
            clusters: open(&cmd.clusters)?,
            pairs: open(&cmd.pairs)?,
            deduplicated: open(&cmd.deduplicated)?,
            report: open(&cmd.report)?,
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

    fn finish_lists(&mut self) -> Result<(), Failure> {
        for out in [
            self.clusters.take(),
            self.pairs.take(),
            self.deduplicated.take(),
        ]
        .into_iter()
        .flatten()
        {
            out.finish()?;
        }
        Ok(())
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
pub(crate) fn spool_stdin(
    args: &mut ReadOptions,
) -> Result<Option<tempfile::NamedTempFile>, Failure> {
    let reads_stdin = args.inputs.is_empty() || args.inputs.iter().any(|n| n == "-");
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
/// runs on its own thread, a couple of batches ahead of the fingerprinting
/// ([`docs::read_mapped`]).
pub(crate) fn fingerprint_all(
    args: &ReadOptions,
    fingerprinter: &Fingerprinter,
    bandings: &[Banding],
    progress: &Progress,
) -> Result<(Fingerprints, ReadStats), Failure> {
    let spill = tempfile::tempfile().map_err(|e| {
        Failure::io(anyhow!(
            "cannot create a temporary file for the sketches (TMPDIR): {e}"
        ))
    })?;
    let mut out = Fingerprints {
        fps: Vec::new(),
        text_hashes: Vec::new(),
        lens: Vec::new(),
        bands: vec![Vec::new(); bandings.len()],
        sketches: BufWriter::with_capacity(1 << 20, spill),
    };
    let (first, rest) = match bandings.split_first() {
        Some((&first, rest)) => (first, rest),
        None => (Banding::for_threshold(Threshold::default()), &[][..]),
    };
    let rows_of = |batch: &[Doc]| -> Vec<(Signature, u32, Vec<BandKeys>)> {
        batch
            .par_iter()
            .map(|d| {
                let sig = Signature::of_text(fingerprinter, first, &d.text);
                let more = rest
                    .iter()
                    .map(|&b| Sketch::of_text_with_bands(&d.text, b).1);
                let keys = std::iter::once(sig.bands).chain(more);
                let len = u32::try_from(d.text.len()).unwrap_or(u32::MAX);
                (sig, len, keys.take(bandings.len()).collect())
            })
            .collect()
    };
    let stats =
        docs::read_mapped::<_, Failure>(args, progress, "fingerprinting", rows_of, |rows| {
            for (sig, len, keys) in rows {
                out.fps.push(sig.fingerprint);
                out.text_hashes.push(sig.text_hash);
                out.lens.push(len);
                for (list, k) in out.bands.iter_mut().zip(keys) {
                    list.push(k);
                }
                out.sketches
                    .write_all(&sig.sketch.to_bytes())
                    .map_err(|e| {
                        Failure::io(anyhow!("cannot write the sketches' temporary file: {e}"))
                    })?;
            }
            Ok(())
        })?;
    // Growth left up to half of each vector spare: give it back before matching.
    out.fps.shrink_to_fit();
    out.text_hashes.shrink_to_fit();
    out.lens.shrink_to_fit();
    out.bands.iter_mut().for_each(Vec::shrink_to_fit);
    Ok((out, stats))
}

/// The sketches of `needed` (documents in increasing order) from the temporary file pass 1
/// wrote, in that order.
pub(crate) fn read_sketches(
    file: BufWriter<std::fs::File>,
    needed: &[u32],
) -> Result<Vec<Sketch>, Failure> {
    let err =
        |e: std::io::Error| Failure::io(anyhow!("cannot read the sketches' temporary file: {e}"));
    let mut file = file.into_inner().map_err(|e| err(e.into_error()))?;
    file.rewind().map_err(err)?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut out = Vec::with_capacity(needed.len());
    let mut bytes = [0u8; jaccard::BYTES];
    let mut at = 0u32;
    for &doc in needed {
        // Skip to the document: the file holds one sketch per document, in order.
        let skip = u64::from(doc - at) * jaccard::BYTES as u64;
        std::io::copy(&mut (&mut reader).take(skip), &mut std::io::sink()).map_err(err)?;
        reader.read_exact(&mut bytes).map_err(err)?;
        out.push(Sketch::from_bytes(&bytes));
        at = doc + 1;
    }
    Ok(out)
}

/// Pass 2 and the writes: ids of clustered documents, the kept records, clusters, pairs.
fn write_outputs(
    args: &mut ReadOptions,
    outputs: &mut Outputs,
    found: &Dedup,
    n: usize,
    progress: &Progress,
    mut report: Option<&mut Collector>,
) -> Result<(), Failure> {
    let involved = involved(outputs, found);
    let mut dropped = vec![false; if outputs.deduplicated.is_some() { n } else { 0 }];
    if !dropped.is_empty() {
        for cluster in &found.clusters {
            for m in &cluster.members {
                dropped[m.doc as usize] = m.doc != cluster.representative;
            }
        }
    }
    args.keep_records = outputs.deduplicated.is_some();
    // This pass needs the ids, and the input lines for --deduplicated; the texts only for
    // the report's samples (a JSON line is written back as it was read).
    args.ids_only = report.is_none();
    let mut ids: Vec<String> = Vec::with_capacity(involved.len());
    let mut next = 0usize;
    let mut index = 0usize;
    let stats = docs::read_as::<Failure>(args, progress, "writing", |batch| {
        for doc in batch {
            if index >= n {
                index += 1;
                continue;
            }
            if let Some(r) = report.as_deref_mut() {
                r.see(index as u32, &doc.id, &doc.text);
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
        involved.binary_search(&d).map_or_else(
            |_| {
                debug_assert!(false, "document {d} has no id");
                "null"
            },
            |i| ids[i].as_str(),
        )
    };
    write_lists(outputs, found, &[], id)
}

/// The summary, as --stats-json writes it.
#[allow(clippy::too_many_arguments)]
fn summary(
    cmd: &DedupCmd,
    options: &Options,
    stats: &ReadStats,
    found: &Dedup,
    n: usize,
    matching: Value,
    timings: &Timings,
    start: Instant,
) -> Value {
    let removable = found.removable();
    let seconds = start.elapsed().as_secs_f64();
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    let mut settings = json!({
        "threshold": match options.rule { Rule::Jaccard(t) => Some(t.get()), Rule::Distance(_) => None },
        "distance": match options.rule { Rule::Distance(d) => Some(d), Rule::Jaccard(_) => None },
        "closure": options.closure,
        "keep": format!("{:?}", cmd.keep).to_lowercase(),
        "fingerprint_version": neardup::fingerprint::VERSION,
        "sketch_version": jaccard::SKETCH_VERSION,
    });
    if let (Some(to), Value::Object(from)) = (settings.as_object_mut(), matching) {
        to.extend(from);
    }
    json!({
        "documents": n,
        "bytes": stats.bytes,
        "exact_duplicates": found.exact_duplicates,
        "near_duplicates": removable - found.exact_duplicates,
        "clusters": found.clusters.len(),
        "largest_cluster": found.clusters.iter().map(|c| c.members.len()).max().unwrap_or(0),
        "candidates": found.candidates,
        "verified": found.verified,
        "kept": n as u64 - removable,
        "pairs": cmd.pairs.as_ref().map(|_| found.pairs.len()),
        "wordless": found.wordless,
        "invalid_utf8": stats.invalid_utf8,
        "skipped_invalid": stats.skipped,
        "seconds": seconds_of(timings, seconds),
        "peak_rss": peaks_of(timings),
        "mb_per_s": round(stats.bytes as f64 / 1e6 / seconds.max(1e-9)),
        "docs_per_s": (n as f64 / seconds.max(1e-9)).round(),
        "settings": settings,
    })
}

/// Seconds per phase, and under the Jaccard rule per step of matching.
fn seconds_of(timings: &Timings, total: f64) -> Value {
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    let mut s = json!({
        "fingerprint": round(timings.fingerprint),
        "match": round(timings.matching),
        "write": round(timings.write),
        "total": round(total),
    });
    if let (Some(steps), Some(map)) = (timings.steps, s.as_object_mut()) {
        map.insert("copies".into(), json!(round(steps.copies)));
        map.insert("candidates".into(), json!(round(steps.candidates)));
        map.insert("verify".into(), json!(round(steps.verify)));
    }
    s
}

/// The process's peak resident bytes at the end of each step, under the Jaccard rule;
/// `null` otherwise.
fn peaks_of(timings: &Timings) -> Value {
    let Some(steps) = timings.steps else {
        return Value::Null;
    };
    let map: serde_json::Map<String, Value> = bounded::Steps::NAMES
        .iter()
        .zip(steps.peaks)
        .map(|(name, peak)| (name.to_string(), json!(peak)))
        .collect();
    Value::Object(map)
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
    if s["seconds"].get("copies").is_some() {
        lines.push(format!(
            "  matching          copies {:.2} s, candidates {:.2} s, verify {:.2} s{}",
            secs("copies"),
            secs("candidates"),
            secs("verify"),
            if s["settings"]["spilled"] == true {
                " (state spilled to disk: --memory)"
            } else {
                ""
            }
        ));
    }
    if let Some(runs) = s["settings"]["crowded_runs"].as_u64().filter(|&r| r > 0) {
        lines.push(format!(
            "  crowded keys      {runs} band keys shared by more than {} documents: each such \
             document was paired with the {0} of its key that --keep visits first only",
            batch::RUN_LEADERS
        ));
    }
    if let Some(peaks) = s["peak_rss"].as_object() {
        let gb: Vec<(&str, f64)> = bounded::Steps::NAMES
            .iter()
            .filter_map(|&k| Some((k, peaks.get(k)?.as_u64()? as f64 / 1e9)))
            .collect();
        if let Some(max) = gb.iter().map(|&(_, g)| g).reduce(f64::max) {
            let each: Vec<String> = gb.iter().map(|(k, g)| format!("{k} {g:.2}")).collect();
            lines.push(format!(
                "  peak memory       {max:.2} GB (so far, after {} GB)",
                each.join(", ")
            ));
        }
    }
    if let Some(p) = s["pairs"].as_u64() {
        lines.insert(5, format!("  pairs             {p}"));
    }
    let store = &s["settings"]["store"];
    if store.is_object() {
        lines.push(format!(
            "  store             {}: {} documents before; {} removed as near-duplicates of stored ones",
            store["path"].as_str().unwrap_or(""),
            store["stored_before"].as_u64().unwrap_or(0),
            store["removed_for_stored"].as_u64().unwrap_or(0),
        ));
        if let Some(saved) = store["saved"].as_u64() {
            lines.push(format!(
                "  saved             {saved} documents to the store"
            ));
        }
        if let Some(refused) = store["refused_by_store"].as_u64().filter(|&r| r > 0) {
            lines.push(format!(
                "  warning: the store refused {refused} kept documents as near-duplicates of \
                 stored ones: they are in --deduplicated but not in the store"
            ));
        }
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
