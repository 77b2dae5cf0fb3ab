//! `neardup documents`: the document model offline — texts matched by the estimated
//! Jaccard similarity of their word 5-shingles, as `neardup serve` decides — in the data
//! directory `neardup serve --data` keeps, or in a Redis Cluster (`--redis`).
//!
//! `neardup index` is the other model: 64-bit simhash fingerprints matched within a
//! Hamming distance.

use std::time::Duration;

use neardup::jaccard::Threshold;
use neardup_io::docs::{self, id_text};
use neardup_store::{Backend, BackendReader, DocConfig, DocumentStore, Outcome, Write};
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::doc_args::{parse_threshold, DocArgs};
use crate::failure::{store_failure, Failure};
use crate::load;
use crate::maintain::{self, Model};
use crate::output::{reads_of, refuse_overwrite, Named, Output};
use crate::progress::Progress;
use crate::redis::RedisArgs;

/// Documents per batch: one durable commit in a data directory, one round of pipelines
/// and one `WAIT` in Redis.
const DOC_BATCH: usize = 1_000;

/// `neardup documents` subcommands.
#[derive(clap::Subcommand, Clone, Debug)]
pub enum DocumentsCmd {
    /// Makes an empty corpus.
    Create {
        #[command(flatten)]
        at: DocAt,
        /// Documents at or above this estimated Jaccard similarity of their word
        /// 5-shingle sets are near-duplicates.
        #[arg(long, value_parser = parse_threshold)]
        threshold: Option<Threshold>,
        /// Index paragraphs too.
        #[arg(long)]
        paragraphs: bool,
        /// Documents expected (in Redis: how finely each band is split into buckets).
        #[arg(long, default_value_t = 1_000_000)]
        expected: u64,
    },
    /// Adds documents (an id already there is replaced), in durable batches of 1,000.
    Insert {
        #[command(flatten)]
        at: DocAt,
        #[command(flatten)]
        docs: DocArgs,
        /// Documents expire after this many seconds.
        #[arg(long, value_name = "SECONDS")]
        ttl: Option<u64>,
        /// Store a document only when no near-duplicate of it is stored (or inserted
        /// before it by this command), as a put with `"only_if_unique": true` decides.
        #[arg(long)]
        only_if_unique: bool,
    },
    /// Removes documents by id: one id per line (unknown ids are counted, not errors).
    Remove {
        #[command(flatten)]
        at: DocAt,
        /// Files of ids, one per line ('-' for standard input, the default).
        #[arg(value_name = "INPUT", default_value = "-")]
        input: Vec<String>,
    },
    /// Finds the stored near-duplicates of each input document: one JSON line per query,
    /// {"id", "matches": [{"id", "similarity", "distance"}]}.
    Query {
        #[command(flatten)]
        at: DocAt,
        #[command(flatten)]
        docs: DocArgs,
        /// Where to write ('-' for standard output).
        #[arg(short, long, default_value = "-")]
        output: String,
    },
    /// Deletes expired documents.
    Sweep {
        #[command(flatten)]
        at: DocAt,
    },
    /// The corpus's settings and size, as JSON.
    Stats {
        #[command(flatten)]
        at: DocAt,
    },
    /// Checks a data directory's store without writing it (every page's checksum, then
    /// its tables against each other): one JSON line {"documents", "complete",
    /// "problems", "logged"}; exit status 2 when anything is wrong.
    Check {
        /// The data directory.
        #[arg(long, value_name = "DIR")]
        data: String,
    },
    /// Repairs a damaged store: a new file with every readable document takes its place;
    /// the damaged one is kept beside it (neardup.redb.damaged-SECONDS).
    Repair {
        /// The data directory.
        #[arg(long, value_name = "DIR")]
        data: String,
    },
}

/// Where the corpus is: a data directory or a Redis Cluster.
#[derive(clap::Args, Clone, Debug)]
#[command(group(clap::ArgGroup::new("at").required(true).args(["data", "redis"])))]
pub struct DocAt {
    /// The data directory (as `neardup serve --data` keeps it).
    #[arg(long, value_name = "DIR")]
    pub data: Option<String>,
    #[command(flatten)]
    pub redis: RedisArgs,
}

/// Runs an `neardup documents` subcommand.
pub fn run(cmd: &DocumentsCmd) -> Result<(), Failure> {
    let at = match cmd {
        DocumentsCmd::Check { data } => return maintain::check(data, Model::Documents),
        DocumentsCmd::Repair { data } => return maintain::repair(data, Model::Documents),
        DocumentsCmd::Create { at, .. }
        | DocumentsCmd::Insert { at, .. }
        | DocumentsCmd::Remove { at, .. }
        | DocumentsCmd::Query { at, .. }
        | DocumentsCmd::Sweep { at }
        | DocumentsCmd::Stats { at } => at,
    };
    let create = match cmd {
        DocumentsCmd::Create {
            threshold,
            paragraphs,
            expected,
            ..
        } => Some((
            DocConfig {
                threshold: threshold.unwrap_or_default(),
                paragraphs: *paragraphs,
            },
            *expected,
        )),
        _ => None,
    };
    let store_file = at.data.as_deref().map(|dir| {
        std::path::Path::new(dir)
            .join(neardup_store::FILE)
            .to_string_lossy()
            .into_owned()
    });
    refuse_overwrites(cmd, store_file.as_deref())?;
    match &at.data {
        Some(dir) => {
            let mut store = match create {
                Some((config, _)) => DocumentStore::create(dir, config),
                None => DocumentStore::open(dir, None),
            }
            .map_err(store_failure)?;
            if let DocumentsCmd::Insert {
                docs,
                ttl,
                only_if_unique,
                ..
            } = cmd
            {
                // The way `neardup load` loads: signing on every core beside the writer.
                let puts = load::Puts {
                    ttl: ttl.map(Duration::from_secs),
                    only_if_unique: *only_if_unique,
                    batch: load::BATCH,
                };
                let progress = Progress::for_stderr();
                let (store, _, counts) = load::load(
                    store,
                    &docs.options(),
                    &[],
                    &puts,
                    &progress,
                    (&mut None, false),
                )?;
                progress.finish();
                note_inserted(
                    counts.documents,
                    counts.inserted,
                    *only_if_unique,
                    store.len(),
                );
                return load::finish(store);
            }
            on(cmd, &mut store, dir, at)?;
            // The service then starts from the snapshot instead of rebuilding the index.
            if !matches!(cmd, DocumentsCmd::Query { .. } | DocumentsCmd::Stats { .. }) {
                store.save_snapshot().map_err(store_failure)?;
            }
            store.checkpoint().map_err(store_failure)
        }
        None => {
            let mut store = at
                .redis
                .open(create.map(|c| c.0), create.map_or(0, |c| c.1))?;
            on(cmd, &mut store, &at.redis.describe(), at)
        }
    }
}

/// Says what an insert did: `stored` of `read` documents, `now` in the store.
fn note_inserted(read: u64, stored: u64, only_if_unique: bool, now: usize) {
    let skipped = if only_if_unique {
        format!(", {} near-duplicates not stored", read - stored)
    } else {
        String::new()
    };
    crate::note!("neardup documents: {stored} of {read} documents inserted{skipped}; {now} stored");
}

/// Refuses a command that would write over what it reads: the store file (`store`, in a
/// data directory) or the query's output.
fn refuse_overwrites(cmd: &DocumentsCmd, store: Option<&str>) -> Result<(), Failure> {
    let store: Vec<Named<'_>> = store.map(|f| ("the store", f)).into_iter().collect();
    match cmd {
        DocumentsCmd::Insert { docs, .. } => refuse_overwrite(&store, &reads_of(docs, None)),
        DocumentsCmd::Remove { input, .. } => {
            let ids: Vec<Named<'_>> = input
                .iter()
                .map(|p| ("a file of ids", p.as_str()))
                .collect();
            refuse_overwrite(&store, &ids)
        }
        DocumentsCmd::Query { docs, output, .. } => {
            let mut reads = reads_of(docs, None);
            reads.extend(store);
            refuse_overwrite(&[("the output", output.as_str())], &reads)
        }
        DocumentsCmd::Create { .. }
        | DocumentsCmd::Sweep { .. }
        | DocumentsCmd::Stats { .. }
        | DocumentsCmd::Check { .. }
        | DocumentsCmd::Repair { .. } => Ok(()),
    }
}

/// Carries out `cmd` on `store` (found at `place`, for messages).
fn on<B: Backend>(
    cmd: &DocumentsCmd,
    store: &mut B,
    place: &str,
    at: &DocAt,
) -> Result<(), Failure> {
    match cmd {
        DocumentsCmd::Create { .. } => {
            let c = store.config();
            crate::note!(
                "neardup documents: created {place} (threshold {}, paragraphs {})",
                c.threshold,
                if c.paragraphs { "on" } else { "off" }
            );
            Ok(())
        }
        DocumentsCmd::Insert {
            docs,
            ttl,
            only_if_unique,
            ..
        } => {
            let (read, stored) =
                insert(store, docs, ttl.map(Duration::from_secs), *only_if_unique)?;
            note_inserted(read as u64, stored as u64, *only_if_unique, store.len());
            Ok(())
        }
        DocumentsCmd::Remove { input, .. } => {
            let (asked, removed) = remove(store, input)?;
            crate::note!(
                "neardup documents: {removed} of {asked} ids removed ({} not stored)",
                asked - removed
            );
            Ok(())
        }
        DocumentsCmd::Query { docs, output, .. } => {
            let mut out = Output::create(output)?;
            query(store, docs, &mut out)?;
            out.finish()
        }
        DocumentsCmd::Sweep { .. } => {
            let n = store.sweep().map_err(store_failure)?;
            crate::note!("neardup documents: {n} expired documents deleted");
            Ok(())
        }
        DocumentsCmd::Stats { .. } => {
            let c = store.config();
            let mut stats = json!({
                "documents": store.len(),
                "threshold": c.threshold.get(),
                "paragraphs": c.paragraphs,
            });
            match &at.data {
                Some(dir) => stats["data"] = json!(dir),
                None => stats["namespace"] = json!(at.redis.redis_namespace),
            }
            let mut out = Output::create("-")?;
            out.line(stats.to_string().as_bytes())?;
            out.finish()
        }
        // Carried out on the directory's file before any store is opened (`run`).
        DocumentsCmd::Check { data } | DocumentsCmd::Repair { data } => Err(Failure::input(
            anyhow::anyhow!("{data}: check and repair work on the directory, not an open store"),
        )),
    }
}

/// Puts the documents of `source` into `store`, in batches: how many were read, and how
/// many stored.
pub(crate) fn insert<B: Backend>(
    store: &mut B,
    source: &DocArgs,
    ttl: Option<Duration>,
    only_if_unique: bool,
) -> Result<(usize, usize), Failure> {
    let preparer = store.preparer();
    let (mut read, mut stored) = (0usize, 0usize);
    docs::read::<Failure>(&source.options(), &Progress::hidden(), |batch| {
        for chunk in batch.chunks(DOC_BATCH) {
            let writes: Vec<Write> = chunk
                .par_iter()
                .map(|d| Write::Put {
                    id: id_text(&d.id),
                    doc: Box::new(preparer.prepare(&d.text, false)),
                    ttl,
                    only_if_unique,
                })
                .collect();
            read += writes.len();
            let outcomes = store.apply(writes).map_err(store_failure)?;
            stored += outcomes
                .iter()
                .filter(|o| matches!(o, Outcome::Put { inserted: true, .. }))
                .count();
        }
        Ok(())
    })?;
    Ok((read, stored))
}

/// Removes the ids listed in the files `input`, one a line: how many were asked for, and
/// how many were stored.
pub(crate) fn remove<B: Backend>(
    store: &mut B,
    input: &[String],
) -> Result<(usize, usize), Failure> {
    let (mut asked, mut removed) = (0usize, 0usize);
    crate::lines::each_id_batch(input, DOC_BATCH, |chunk| {
        let writes = chunk.iter().map(|id| Write::Delete { id: id.clone() });
        let outcomes = store.apply(writes.collect()).map_err(store_failure)?;
        removed += outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Delete { removed: true }))
            .count();
        asked += chunk.len();
        Ok(())
    })?;
    Ok((asked, removed))
}

/// One JSON line per document of `source`: its stored near-duplicates.
pub(crate) fn query<B: Backend>(
    store: &B,
    source: &DocArgs,
    out: &mut Output,
) -> Result<(), Failure> {
    let reader = store.reader();
    let preparer = store.preparer();
    docs::read::<Failure>(&source.options(), &Progress::hidden(), |batch| {
        let answers: Vec<Result<Value, Failure>> = batch
            .par_iter()
            .map(|d| {
                let checked = reader
                    .check_text(&preparer, &d.text)
                    .map_err(store_failure)?;
                let matches: Vec<Value> = checked
                    .hits
                    .into_iter()
                    .map(
                        |h| json!({"id": h.id, "similarity": h.similarity, "distance": h.distance}),
                    )
                    .collect();
                let mut line = json!({"id": id_text(&d.id), "matches": matches});
                // As the service's checks say it: near-duplicates may be missing.
                if checked.partial {
                    line["partial"] = Value::Bool(true);
                }
                Ok(line)
            })
            .collect();
        for a in answers {
            out.line(a?.to_string().as_bytes())?;
        }
        Ok(())
    })?;
    Ok(())
}
