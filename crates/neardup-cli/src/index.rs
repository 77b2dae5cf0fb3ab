//! `neardup index`: a durable corpus in a data directory (the `neardup-store` crate).
//!
//! Documents go in as texts (fingerprinted here, any `neardup fingerprint` input) or as
//! fingerprints (`--fingerprints`: the JSON lines `neardup fingerprint` writes); queries
//! print one JSON line per query.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use neardup::fingerprint::VERSION;
use neardup::jaccard::Threshold;
use neardup::tables::Blocks;
use neardup_io::docs::{self, id_text};
use neardup_io::fingerprints::{parse_fingerprint_line, U64File};
use neardup_store::{FingerprintStore, StoreConfig};
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::doc_args::parse_threshold;
use crate::doc_args::DocArgs;
use crate::documents::{self, DocAt, DocumentsCmd};
use crate::failure::{note, Failure};
use crate::fpconfig::FingerprintArgs;
use crate::lines::{each_id_batch, each_line};
use crate::maintain::{self, Model};
use crate::output::{reads_of, refuse_overwrite, Named, Output};
use crate::progress::Progress;
use crate::redis::RedisArgs;

/// Documents committed per transaction when inserting in bulk.
const COMMIT_EVERY: usize = 10_000;

/// `neardup index` subcommands.
#[derive(clap::Subcommand, Clone, Debug)]
pub enum IndexCmd {
    /// Makes an empty data directory.
    Create {
        #[command(flatten)]
        at: At,
        /// Largest distance matched.
        #[arg(short, long, default_value_t = 3)]
        distance: u32,
        /// Blocks ('auto': the planner's choice for --expected documents).
        #[arg(short, long, default_value = "auto")]
        blocks: Blocks,
        /// Documents expected, for --blocks auto (with --redis: how finely each band is
        /// split into buckets).
        #[arg(long, default_value_t = 1_000_000)]
        expected: usize,
        /// With --redis: documents at or above this estimated Jaccard similarity of their
        /// word 5-shingle sets are near-duplicates (--distance and --blocks are for the
        /// fingerprint store in a directory).
        #[arg(long, requires = "redis", value_parser = parse_threshold)]
        threshold: Option<Threshold>,
        /// With --redis: index paragraphs too.
        #[arg(long, requires = "redis")]
        paragraphs: bool,
    },
    /// Adds documents (an id already there is replaced). Each batch of 10,000 is on disk
    /// before the next is read.
    Insert {
        #[command(flatten)]
        at: At,
        #[command(flatten)]
        source: Inputs,
        /// Documents expire after this many seconds.
        #[arg(long, value_name = "SECONDS")]
        ttl: Option<u64>,
    },
    /// Removes documents by id: one id per line (unknown ids are counted, not errors).
    Remove {
        #[command(flatten)]
        at: At,
        /// Files of ids, one per line ('-' for standard input, the default).
        #[arg(short, long = "input", default_value = "-")]
        input: Vec<String>,
    },
    /// Finds the stored near-duplicates of each input: one JSON line per query,
    /// {"id", "matches": [{"id", "distance"}]}.
    Query {
        #[command(flatten)]
        at: At,
        #[command(flatten)]
        source: Inputs,
        /// Where to write ('-' for standard output).
        #[arg(short, long, default_value = "-")]
        output: String,
    },
    /// Deletes expired documents.
    Sweep {
        #[command(flatten)]
        at: At,
    },
    /// The directory's settings and size, as JSON.
    Stats {
        #[command(flatten)]
        at: At,
    },
    /// Checks a store without writing it (every page's checksum, then its tables against
    /// each other): one JSON line {"documents", "complete", "problems"}; exit status 2 when
    /// anything is wrong.
    Check {
        /// The data directory.
        dir: String,
    },
    /// Repairs a damaged store: a new file with every readable document takes its place;
    /// the damaged one is kept beside it (neardup.redb.damaged-SECONDS).
    Repair {
        /// The data directory.
        dir: String,
    },
    /// Writes every readable document, damaged store or not, as JSON lines {"id",
    /// "fingerprint", "expires"} (what `index insert --fingerprints` reads back; expiries,
    /// Unix seconds or null, are not).
    Export {
        /// The data directory.
        dir: String,
        /// Where to write ('-' for standard output).
        #[arg(short, long, default_value = "-")]
        output: String,
    },
}

/// Where the corpus is: a data directory (a fingerprint store: simhash fingerprints,
/// matched within --distance bits), or with --redis a document corpus in a Redis Cluster
/// (texts, matched by estimated Jaccard similarity as `neardup serve` decides). With
/// --redis, a first positional argument is an input, not a directory.
#[derive(clap::Args, Clone, Debug)]
#[command(group(clap::ArgGroup::new("at").required(true).multiple(true).args(["dir", "redis"])))]
pub struct At {
    /// The data directory.
    dir: Option<String>,
    #[command(flatten)]
    redis: RedisArgs,
}

/// Documents or fingerprints to insert or query.
#[derive(clap::Args, Clone, Debug)]
pub struct Inputs {
    #[command(flatten)]
    docs: DocArgs,
    #[command(flatten)]
    fingerprint: FingerprintArgs,
    /// The inputs are `neardup fingerprint` output: JSON lines {"id", "fingerprint"}, the
    /// fingerprint a decimal string or a number; or, for a file named *.u64, raw
    /// little-endian u64 fingerprints (as `find-all --format u64` reads), mapped, their ids
    /// their positions from 0, counted on across such files.
    #[arg(long)]
    fingerprints: bool,
}

fn store_err(e: neardup_store::StoreError) -> Failure {
    Failure::input(anyhow!("{e}"))
}

fn open(dir: &str) -> Result<FingerprintStore, Failure> {
    FingerprintStore::open(dir, None).map_err(store_err)
}

/// The store's database file, as [`refuse_overwrite`] names it.
fn store_file(dir: &str) -> String {
    Path::new(dir)
        .join(neardup_store::FILE)
        .to_string_lossy()
        .into_owned()
}

/// What inserting or querying `source` reads.
fn reads(source: &Inputs) -> Vec<Named<'_>> {
    reads_of(
        &source.docs,
        (!source.fingerprints).then_some(&source.fingerprint),
    )
}

/// Runs an `neardup index` subcommand.
pub fn run(cmd: &IndexCmd) -> Result<(), Failure> {
    let at = match cmd {
        // A store's file checked, repaired or exported: always a data directory.
        IndexCmd::Check { dir } | IndexCmd::Repair { dir } | IndexCmd::Export { dir, .. } => {
            return run_dir(cmd, dir)
        }
        IndexCmd::Create { at, .. }
        | IndexCmd::Insert { at, .. }
        | IndexCmd::Remove { at, .. }
        | IndexCmd::Query { at, .. }
        | IndexCmd::Sweep { at }
        | IndexCmd::Stats { at } => at,
    };
    match (&at.dir, &at.redis.redis) {
        (Some(dir), None) => run_dir(cmd, dir),
        (_, Some(_)) => run_docs(&with_redis(cmd)?, &at.redis),
        (None, None) => Err(Failure::input(anyhow!("give a data directory or --redis"))),
    }
}

/// `cmd` with --redis: the first positional argument is then no directory but the first
/// input (clap cannot tell them apart by position), so `neardup index insert --redis URLS
/// docs.jsonl` reads docs.jsonl.
fn with_redis(cmd: &IndexCmd) -> Result<IndexCmd, Failure> {
    let mut cmd = cmd.clone();
    match &mut cmd {
        IndexCmd::Insert { at, source, .. } | IndexCmd::Query { at, source, .. } => {
            if let Some(first) = at.dir.take() {
                source.docs.inputs.insert(0, first);
            }
        }
        IndexCmd::Remove { at, input } => {
            if let Some(first) = at.dir.take() {
                // `--input` defaults to standard input: a file named instead replaces it.
                if input.len() == 1 && input[0] == "-" {
                    input.clear();
                }
                input.insert(0, first);
            }
        }
        IndexCmd::Check { .. } | IndexCmd::Repair { .. } | IndexCmd::Export { .. } => {}
        IndexCmd::Create { at, .. } | IndexCmd::Sweep { at } | IndexCmd::Stats { at } => {
            if let Some(dir) = &at.dir {
                return Err(Failure::input(anyhow!(
                    "'{dir}': a data directory or --redis, not both"
                )));
            }
        }
    }
    Ok(cmd)
}

/// An `neardup index` subcommand on a fingerprint store in directory `dir`.
fn run_dir(cmd: &IndexCmd, dir: &str) -> Result<(), Failure> {
    match cmd {
        IndexCmd::Create {
            distance,
            blocks,
            expected,
            ..
        } => {
            let config = StoreConfig {
                blocks: *blocks,
                distance: *distance,
                fingerprint_version: VERSION,
            };
            let store = FingerprintStore::create(dir, config, *expected).map_err(store_err)?;
            note(format_args!(
                "neardup index: created {dir} (blocks {}, distance {distance})",
                store.config().blocks
            ));
            Ok(())
        }
        IndexCmd::Insert { source, ttl, .. } => {
            refuse_overwrite(&[("the store", &store_file(dir))], &reads(source))?;
            let t = Instant::now();
            let mut store = open(dir)?;
            let opened = t.elapsed().as_secs_f64();
            let ttl = ttl.map(Duration::from_secs);
            let mut count = 0usize;
            each_batch(source, |batch| {
                let docs: Vec<(&str, u64, Option<Duration>)> = batch
                    .iter()
                    .map(|(id, fp)| (id.as_str(), *fp, ttl))
                    .collect();
                store.insert_bulk(&docs, |_| {}).map_err(store_err)?;
                count += docs.len();
                Ok(())
            })?;
            note(format_args!(
                "neardup index: {count} documents inserted; {} stored (opened in {opened:.2} s)",
                store.len()
            ));
            Ok(())
        }
        IndexCmd::Remove { input, .. } => {
            let id_files: Vec<Named<'_>> = input.iter().map(|p| ("an input", p.as_str())).collect();
            refuse_overwrite(&[("the store", &store_file(dir))], &id_files)?;
            let mut store = open(dir)?;
            let (mut asked, mut removed) = (0usize, 0usize);
            each_id_batch(input, COMMIT_EVERY, |chunk| {
                let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
                removed += store.remove_bulk(&refs).map_err(store_err)?;
                asked += refs.len();
                Ok(())
            })?;
            note(format_args!(
                "neardup index: {removed} of {asked} ids removed ({} not stored)",
                asked - removed
            ));
            Ok(())
        }
        IndexCmd::Query { source, output, .. } => {
            let mut store_reads = reads(source);
            let file = store_file(dir);
            store_reads.push(("the store", &file));
            refuse_overwrite(&[("output", output)], &store_reads)?;
            let store = open(dir)?;
            let mut out = Output::create(output)?;
            each_batch(source, |batch| {
                for (id, fp) in batch {
                    let matches: Vec<Value> = store
                        .find_all(fp)
                        .map_err(store_err)?
                        .into_iter()
                        .map(|(m, d)| json!({"id": m, "distance": d}))
                        .collect();
                    out.line(json!({"id": id, "matches": matches}).to_string().as_bytes())?;
                }
                Ok(())
            })?;
            out.finish()
        }
        IndexCmd::Sweep { .. } => {
            let mut store = open(dir)?;
            let n = store.sweep().map_err(store_err)?;
            note(format_args!("neardup index: {n} expired documents deleted"));
            Ok(())
        }
        IndexCmd::Stats { .. } => {
            let t = Instant::now();
            let store = open(dir)?;
            let c = store.config();
            let bytes = std::fs::metadata(std::path::Path::new(dir).join(neardup_store::FILE))
                .map_or(0, |m| m.len());
            let stats = json!({
                "documents": store.len(),
                "blocks": c.blocks.to_string(),
                "distance": c.distance,
                "fingerprint_version": c.fingerprint_version,
                "file_bytes": bytes,
                "memory_bytes": store.heap_bytes(),
                "open_seconds": (t.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
            });
            let mut out = Output::create("-")?;
            out.line(stats.to_string().as_bytes())?;
            out.finish()
        }
        IndexCmd::Check { dir } => maintain::check(dir, Model::Fingerprints),
        IndexCmd::Repair { dir } => maintain::repair(dir, Model::Fingerprints),
        IndexCmd::Export { dir, output } => {
            let file = store_file(dir);
            refuse_overwrite(&[("output", output)], &[("the store", &file)])?;
            let mut out = Output::create(output)?;
            let done = neardup_store::export(dir, |r| {
                let line = json!({
                    "id": r.id,
                    "fingerprint": r.fingerprint.to_string(),
                    "expires": r.expires,
                });
                out.line(line.to_string().as_bytes())
            })
            .map_err(store_err)??;
            out.finish()?;
            if done.complete {
                note(format_args!(
                    "neardup index: {} documents exported",
                    done.documents
                ));
            } else {
                note(format_args!(
                    "neardup index: warning: {dir} is damaged: {} documents exported, others \
                     could not be read ({})",
                    done.documents,
                    done.problems.join("; ")
                ));
            }
            Ok(())
        }
    }
}

/// `neardup index ... --redis`, from before the document model had its own command:
/// carried out as the `neardup documents` command it means, with a note saying so.
fn run_docs(cmd: &IndexCmd, redis: &RedisArgs) -> Result<(), Failure> {
    let at = DocAt {
        data: None,
        redis: redis.clone(),
    };
    let docs = match cmd {
        IndexCmd::Check { .. } | IndexCmd::Repair { .. } | IndexCmd::Export { .. } => {
            return Err(Failure::input(anyhow!(
                "check, repair and export work on a data directory"
            )))
        }
        IndexCmd::Create {
            expected,
            threshold,
            paragraphs,
            ..
        } => DocumentsCmd::Create {
            at,
            threshold: *threshold,
            paragraphs: *paragraphs,
            expected: *expected as u64,
        },
        IndexCmd::Insert { source, ttl, .. } => {
            refuse_fingerprints(source)?;
            DocumentsCmd::Insert {
                at,
                docs: source.docs.clone(),
                ttl: *ttl,
                only_if_unique: false,
            }
        }
        IndexCmd::Remove { input, .. } => DocumentsCmd::Remove {
            at,
            input: input.clone(),
        },
        IndexCmd::Query { source, output, .. } => {
            refuse_fingerprints(source)?;
            DocumentsCmd::Query {
                at,
                docs: source.docs.clone(),
                output: output.clone(),
            }
        }
        IndexCmd::Sweep { .. } => DocumentsCmd::Sweep { at },
        IndexCmd::Stats { .. } => DocumentsCmd::Stats { at },
    };
    crate::note!(
        "neardup index: --redis is the document model, now `neardup documents ... --redis`; this form still works"
    );
    documents::run(&docs)
}

/// A document corpus keeps sketches of texts, which fingerprints alone cannot give.
fn refuse_fingerprints(source: &Inputs) -> Result<(), Failure> {
    if source.fingerprints {
        return Err(Failure::input(anyhow!(
            "--fingerprints: a corpus in Redis stores documents (sketches of their words), \
             so it needs their texts"
        )));
    }
    if let Some(flag) = source.fingerprint.first_given() {
        return Err(Failure::input(anyhow!(
            "{flag} sets simhash fingerprints; a corpus in Redis decides by the Jaccard \
             similarity of word 5-shingles, with the same words for every script"
        )));
    }
    Ok(())
}

/// The inputs as `(id, fingerprint)` batches: ids as strings (a JSON string id as is,
/// any other JSON value as its JSON text).
fn each_batch(
    source: &Inputs,
    mut f: impl FnMut(Vec<(String, u64)>) -> Result<(), Failure>,
) -> Result<(), Failure> {
    if source.fingerprints {
        let mut batch = Vec::new();
        let names: Vec<String> = source.docs.named().cloned().collect();
        let names = if names.is_empty() {
            vec!["-".to_string()]
        } else {
            names
        };
        // Ids of raw fingerprints: positions, counted on across files.
        let mut position = 0u64;
        for path in names {
            if path.ends_with(".u64") {
                let file = U64File::open(&path).map_err(Failure::input)?;
                for &fp in file.values() {
                    batch.push((position.to_string(), fp));
                    position += 1;
                    if batch.len() >= COMMIT_EVERY {
                        f(std::mem::take(&mut batch))?;
                    }
                }
                continue;
            }
            let name = if path == "-" {
                "<stdin>"
            } else {
                path.as_str()
            };
            each_line(&path, |n, line| {
                let parsed = parse_fingerprint_line(line)
                    .map_err(|why| Failure::input(anyhow!("{name}:{n}: {why}")))?;
                if let Some(doc) = parsed {
                    batch.push(doc);
                }
                if batch.len() >= COMMIT_EVERY {
                    f(std::mem::take(&mut batch))?;
                }
                Ok(())
            })?;
        }
        if !batch.is_empty() {
            f(batch)?;
        }
        return Ok(());
    }
    let pipeline = source.fingerprint.pipeline()?;
    let mut pending: Vec<(String, u64)> = Vec::new();
    docs::read::<Failure>(&source.docs.options(), &Progress::hidden(), |batch| {
        let rows: Vec<(String, u64)> = batch
            .par_iter()
            .map(|d| (id_text(&d.id), pipeline.fingerprint(&d.text)))
            .collect();
        pending.extend(rows);
        if pending.len() >= COMMIT_EVERY {
            f(std::mem::take(&mut pending))?;
        }
        Ok(())
    })?;
    if !pending.is_empty() {
        f(pending)?;
    }
    Ok(())
}
