//! `neardup index`: a durable corpus in a data directory (the `neardup-store` crate).
//!
//! Documents go in as texts (fingerprinted here, any `neardup fingerprint` input) or as
//! fingerprints (`--fingerprints`: the JSON lines `neardup fingerprint` writes); queries
//! print one JSON line per query.

use std::time::{Duration, Instant};

use anyhow::anyhow;
use neardup::fingerprint::VERSION;
use neardup::tables::Blocks;
use neardup_store::{Store, StoreConfig};
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::docs::{self, DocArgs};
use crate::failure::Failure;
use crate::fpconfig::FingerprintArgs;
use crate::input::Source;
use crate::output::Output;
use crate::progress::Progress;

/// Documents committed per transaction when inserting in bulk.
const COMMIT_EVERY: usize = 10_000;

/// `neardup index` subcommands.
#[derive(clap::Subcommand, Clone, Debug)]
pub enum IndexCmd {
    /// Makes an empty data directory.
    Create {
        /// The data directory.
        dir: String,
        /// Largest distance matched.
        #[arg(short, long, default_value_t = 3)]
        distance: u32,
        /// Blocks ('auto': the planner's choice for --expected documents).
        #[arg(short, long, default_value = "auto")]
        blocks: Blocks,
        /// Documents expected, for --blocks auto.
        #[arg(long, default_value_t = 1_000_000)]
        expected: usize,
    },
    /// Adds documents (an id already there is replaced). Each batch of 10,000 is on disk
    /// before the next is read.
    Insert {
        /// The data directory.
        dir: String,
        #[command(flatten)]
        source: Inputs,
        /// Documents expire after this many seconds.
        #[arg(long, value_name = "SECONDS")]
        ttl: Option<u64>,
    },
    /// Removes documents by id: one id per line (unknown ids are counted, not errors).
    Remove {
        /// The data directory.
        dir: String,
        /// Files of ids, one per line ('-' for standard input, the default).
        #[arg(short, long = "input", default_value = "-")]
        input: Vec<String>,
    },
    /// Finds the stored near-duplicates of each input: one JSON line per query,
    /// {"id", "matches": [{"id", "distance"}]}.
    Query {
        /// The data directory.
        dir: String,
        #[command(flatten)]
        source: Inputs,
        /// Where to write ('-' for standard output).
        #[arg(short, long, default_value = "-")]
        output: String,
    },
    /// Deletes expired documents.
    Sweep {
        /// The data directory.
        dir: String,
    },
    /// The directory's settings and size, as JSON.
    Stats {
        /// The data directory.
        dir: String,
    },
}

/// Documents or fingerprints to insert or query.
#[derive(clap::Args, Clone, Debug)]
pub struct Inputs {
    #[command(flatten)]
    docs: DocArgs,
    #[command(flatten)]
    fingerprint: FingerprintArgs,
    /// The inputs are `neardup fingerprint` output: JSON lines {"id", "fingerprint"}, the
    /// fingerprint a decimal string or a number.
    #[arg(long)]
    fingerprints: bool,
}

fn store_err(e: neardup_store::StoreError) -> Failure {
    Failure::input(anyhow!("{e}"))
}

fn open(dir: &str) -> Result<Store, Failure> {
    Store::open(dir, None).map_err(store_err)
}

/// Runs an `neardup index` subcommand.
pub fn run(cmd: &IndexCmd) -> Result<(), Failure> {
    match cmd {
        IndexCmd::Create {
            dir,
            distance,
            blocks,
            expected,
        } => {
            let config = StoreConfig {
                blocks: *blocks,
                distance: *distance,
                fingerprint_version: VERSION,
            };
            let store = Store::create(dir, config, *expected).map_err(store_err)?;
            eprintln!(
                "neardup index: created {dir} (blocks {}, distance {distance})",
                store.config().blocks
            );
            Ok(())
        }
        IndexCmd::Insert { dir, source, ttl } => {
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
            eprintln!(
                "neardup index: {count} documents inserted; {} stored (opened in {opened:.2} s)",
                store.len()
            );
            Ok(())
        }
        IndexCmd::Remove { dir, input } => {
            let mut store = open(dir)?;
            let (mut asked, mut removed) = (0usize, 0usize);
            for path in input {
                let mut ids: Vec<String> = Vec::new();
                let src = Source::open(path)?;
                let name = src.name.clone();
                for line in src.lines() {
                    let line = line.map_err(|e| Failure::io(anyhow!("cannot read {name}: {e}")))?;
                    let id = line.trim_end_matches('\r');
                    if !id.is_empty() {
                        ids.push(id.to_string());
                    }
                }
                for chunk in ids.chunks(COMMIT_EVERY) {
                    let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
                    removed += store.remove_bulk(&refs).map_err(store_err)?;
                    asked += refs.len();
                }
            }
            eprintln!(
                "neardup index: {removed} of {asked} ids removed ({} not stored)",
                asked - removed
            );
            Ok(())
        }
        IndexCmd::Query {
            dir,
            source,
            output,
        } => {
            let mut out = Output::create(output)?;
            let store = open(dir)?;
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
        IndexCmd::Sweep { dir } => {
            let mut store = open(dir)?;
            let n = store.sweep().map_err(store_err)?;
            eprintln!("neardup index: {n} expired documents deleted");
            Ok(())
        }
        IndexCmd::Stats { dir } => {
            let t = Instant::now();
            let store = open(dir)?;
            let c = store.config();
            let bytes = std::fs::metadata(std::path::Path::new(dir).join(neardup_store::FILE))
                .map_or(0, |m| m.len());
            println!(
                "{}",
                json!({
                    "documents": store.len(),
                    "blocks": c.blocks.to_string(),
                    "distance": c.distance,
                    "fingerprint_version": c.fingerprint_version,
                    "file_bytes": bytes,
                    "memory_bytes": store.heap_bytes(),
                    "open_seconds": (t.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
                })
            );
            Ok(())
        }
    }
}

/// The inputs as `(id, fingerprint)` batches: ids as strings (a JSON string id as is,
/// any other JSON value as its JSON text).
fn each_batch(
    source: &Inputs,
    mut f: impl FnMut(Vec<(String, u64)>) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let id_text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    if source.fingerprints {
        let mut batch = Vec::new();
        let names: Vec<String> = source
            .docs
            .inputs
            .iter()
            .chain(&source.docs.input_flags)
            .cloned()
            .collect();
        let names = if names.is_empty() {
            vec!["-".to_string()]
        } else {
            names
        };
        for path in names {
            let src = Source::open(&path)?;
            let name = src.name.clone();
            for (n, line) in src.lines().enumerate() {
                let line = line.map_err(|e| Failure::io(anyhow!("cannot read {name}: {e}")))?;
                if line.trim().is_empty() {
                    continue;
                }
                let bad = |why: &str| Failure::input(anyhow!("{name}:{}: {why}", n + 1));
                let v: Value = serde_json::from_str(&line)
                    .map_err(|e| bad(&format!("not valid JSON: {e}")))?;
                let fp = match &v["fingerprint"] {
                    Value::String(s) => s.parse::<u64>().ok(),
                    Value::Number(x) => x.as_u64(),
                    _ => None,
                }
                .ok_or_else(|| {
                    bad("no \"fingerprint\" that is a u64 (decimal string or number)")
                })?;
                let id = match v.get("id") {
                    Some(id) if !id.is_null() => id_text(id),
                    _ => return Err(bad("no \"id\"")),
                };
                batch.push((id, fp));
                if batch.len() >= COMMIT_EVERY {
                    f(std::mem::take(&mut batch))?;
                }
            }
        }
        if !batch.is_empty() {
            f(batch)?;
        }
        return Ok(());
    }
    let pipeline = source.fingerprint.pipeline()?;
    let mut pending: Vec<(String, u64)> = Vec::new();
    docs::read(&source.docs, &Progress::hidden(), |batch| {
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
