//! `neardup load`: documents into a document store (`neardup serve`'s) offline, from the
//! files `neardup dedup` reads. Texts are signed on every core; the signed documents are
//! decided in large batches by the store's one decision, in input order, exactly as the
//! service decides a put (`"only_if_unique"` included); each batch is one durable commit
//! of the store, made on a thread of its own while the next batch is signed. The service
//! then starts on the store as it is.

use std::io::Write as _;
use std::sync::mpsc::{sync_channel, Receiver};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use neardup::jaccard::Threshold;
use neardup_io::docs::{self, Doc};
use neardup_store::{DocConfig, DocumentStore, OpenOptions, Outcome, Prepared, Write};
use rayon::prelude::*;
use serde_json::json;

use crate::doc_args::parse_threshold;
use crate::doc_args::DocArgs;
use crate::failure::store_failure;
use crate::failure::Failure;
use crate::progress::Progress;

/// Settings of `neardup load`.
#[derive(clap::Args, Clone, Debug)]
pub struct LoadCmd {
    /// The store's data directory. No other process may have it open (`neardup serve`
    /// holds it while it runs).
    #[arg(long, value_name = "DIR")]
    data: String,
    /// Make a new store in --data first, with --threshold and --paragraphs.
    #[arg(long)]
    create: bool,
    /// With --create: documents at or above this estimated Jaccard similarity of their word
    /// 5-shingle sets are near-duplicates.
    #[arg(long, requires = "create", value_parser = parse_threshold)]
    threshold: Option<Threshold>,
    /// With --create: index paragraphs too.
    #[arg(long, requires = "create")]
    paragraphs: bool,
    /// Store a document only if no near-duplicate of it is stored (or loaded before it),
    /// as a put with "only_if_unique": a crawl's first copy gets in, later ones are
    /// refused.
    #[arg(long)]
    only_if_unique: bool,
    /// Seconds each loaded document lives (as a put's "ttl"); they never expire without.
    #[arg(long, value_name = "SECONDS")]
    ttl: Option<u64>,
    /// Documents decided and committed together: larger batches make fewer commits.
    #[arg(long, value_name = "N", default_value_t = BATCH as u64,  value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    batch: u64,
    /// Write each document's outcome here, one JSON line a document in input order:
    /// {"id", "inserted", "replaced", "matches"} (matches: the ids of the near-duplicates
    /// found, most similar first), and "partial": true when a band key shared by more than
    /// 64 documents cut the candidates, and "paragraphs_not_indexed": N when a stored
    /// document has N paragraphs past the first 4,096, as the service answers a put.
    #[arg(long, value_name = "FILE")]
    outcomes: Option<String>,
    /// With --outcomes: only the documents that met a near-duplicate (refused, or stored
    /// with matches), were partial or had paragraphs not indexed, so that a load of 100
    /// million writes a tenth as many lines.
    #[arg(long, requires = "outcomes")]
    matched_only: bool,

    /// Megabytes of the database's page cache (default 1024), as `neardup serve --cache-mb`.
    #[arg(long, value_name = "MB", value_parser = clap::value_parser!(u64).range(1..=1 << 30))]
    cache_mb: Option<u64>,
    /// Memory the load may use, its page cache included, e.g. 12G (as `neardup serve
    /// --memory`): a store whose index would not fit is refused before the first batch.
    #[arg(long, value_name = "SIZE", value_parser = crate::find::parse_size)]
    memory: Option<u64>,
    #[command(flatten)]
    docs: DocArgs,
}

/// What a load counted.
#[derive(Default)]
pub(crate) struct Counts {
    pub(crate) documents: u64,
    pub(crate) inserted: u64,
    pub(crate) replaced: u64,
    pub(crate) refused: u64,
    commits: u64,
    commit_seconds: f64,
}

/// Documents decided and committed together by default.
pub(crate) const BATCH: usize = 50_000;

/// A batch of signed documents for the writer: their ids and puts.
type Batch = Vec<Write>;

/// Runs `neardup load`.
pub fn run(cmd: &LoadCmd) -> Result<(), Failure> {
    let started = Instant::now();
    let options = OpenOptions {
        cache_bytes: cmd.cache_mb.and_then(|mb| usize::try_from(mb << 20).ok()),
        memory_budget: cmd.memory,
        // The load is the store's only user: its rebuilds need no second main part.
        rebuild_in_place: true,
    };
    let store = if cmd.create {
        let config = DocConfig {
            threshold: cmd.threshold.unwrap_or_default(),
            paragraphs: cmd.paragraphs,
        };
        DocumentStore::create_with(&cmd.data, config, options)
    } else {
        DocumentStore::open_with(&cmd.data, None, options)
    }
    .map_err(store_failure)?;
    let before = store.len();
    let opened = started.elapsed();
    let mut outcomes = match &cmd.outcomes {
        Some(path) => Some(
            std::fs::File::create(path)
                .map(|f| std::io::BufWriter::with_capacity(1 << 20, f))
                .map_err(|e| Failure::input(anyhow!("cannot create '{path}': {e}")))?,
        ),
        None => None,
    };
    let puts = Puts {
        ttl: cmd.ttl.map(Duration::from_secs),
        only_if_unique: cmd.only_if_unique,
        batch: usize::try_from(cmd.batch).unwrap_or(usize::MAX),
    };
    let progress = Progress::for_stderr();
    let (store, stats, counts) = load(
        store,
        &cmd.docs.options(),
        &[],
        &puts,
        &progress,
        (&mut outcomes, cmd.matched_only),
    )?;
    progress.finish();
    finish(store)?;
    let seconds = started.elapsed().as_secs_f64();
    let loading = seconds - opened.as_secs_f64();
    let line = json!({
        "documents": counts.documents,
        "inserted": counts.inserted,
        "replaced": counts.replaced,
        "refused": counts.refused,
        "stored_before": before,
        "bytes": stats.bytes,
        "commits": counts.commits,
        "commit_seconds": round3(counts.commit_seconds),
        "open_seconds": round3(opened.as_secs_f64()),
        "seconds": round3(seconds),
        "documents_per_s": (counts.documents as f64 / loading.max(1e-9)).round(),
    });
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| Failure::io(anyhow!("cannot write the summary: {e}")))
}

/// How loaded documents are put: as a put with these "ttl" and "only_if_unique", `batch`
/// of them decided and committed together.
pub(crate) struct Puts {
    pub(crate) ttl: Option<Duration>,
    pub(crate) only_if_unique: bool,
    pub(crate) batch: usize,
}

/// Where each outcome goes (a file of JSON lines), and whether only the matched ones.
type OutcomesTo<'a> = (&'a mut Option<std::io::BufWriter<std::fs::File>>, bool);

/// Ends a load: the paragraphs' index's recent writes taken into its main part when they
/// are half way to a rebuild (the documents' index is built whole from the keys file when
/// the store opens), the snapshot saved (the service then reads the id map and the
/// paragraphs' index from it instead of every row) and the store checkpointed and closed.
pub(crate) fn finish(mut store: DocumentStore) -> Result<(), Failure> {
    store.compact_paragraphs();
    store.save_snapshot().map_err(store_failure)?;
    store.checkpoint().map_err(store_failure)
}

/// Loads the documents of `read` but those at the positions `skip` (increasing, in input
/// order) into `store`: `neardup load`, `neardup documents insert --data`, and `neardup
/// dedup --save`. Gives the store back with what was read and what the store decided.
pub(crate) fn load(
    store: DocumentStore,
    read: &docs::ReadOptions,
    skip: &[u32],
    puts: &Puts,
    progress: &Progress,
    outcomes: OutcomesTo<'_>,
) -> Result<(DocumentStore, docs::ReadStats, Counts), Failure> {
    // A crash while loading then costs no walk of the whole file at the next start.
    let store = store.with_quick_repair(true);
    let preparer = store.preparer();
    let batch_size = puts.batch;
    let (to_writer, batches) = sync_channel::<Batch>(1);
    // Signing gets a thread pool of its own, fed by a reading thread: when the writer
    // falls behind, the signers wait for it, and the store's index work (its folds and
    // rebuilds, on the global pool) must never wait for them in turn. Signing on the
    // global pool (as `read_mapped` does) deadlocked there at the first rebuild of the
    // index that came while the signers waited.
    let signers = rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("neardup-sign-{i}"))
        .build()
        .map_err(|e| Failure::io(anyhow!("cannot start the signing threads: {e}")))?;
    let (to_signers, read_batches) = sync_channel::<Vec<Doc>>(2 * signers.current_num_threads());
    std::thread::scope(|scope| {
        let (outcomes, matched_only) = outcomes;
        let writer = scope.spawn(move || write_batches(store, batches, outcomes, matched_only));
        let reader = scope.spawn(move || {
            let mut at = 0u64;
            let mut skip = skip.iter().map(|&d| u64::from(d)).peekable();
            docs::read_as::<Failure>(read, progress, "loading", |mut docs| {
                if skip.peek().is_some() {
                    docs.retain(|_| {
                        let skipped = skip.next_if_eq(&at).is_some();
                        at += 1;
                        !skipped
                    });
                }
                // The signers hung up: they failed, and say why below.
                to_signers
                    .send(docs)
                    .map_err(|_| Failure::io(anyhow!("the signers stopped")))
            })
        });
        let mut pending: Batch = Vec::with_capacity(batch_size.min(1 << 20));
        let mut sent = Ok(());
        for docs in read_batches {
            let signed: Vec<(String, Prepared)> = signers.install(|| {
                docs.par_iter()
                    .map(|d| (docs::id_text(&d.id), preparer.prepare(&d.text, false)))
                    .collect()
            });
            for (id, doc) in signed {
                pending.push(Write::Put {
                    id,
                    doc: Box::new(doc),
                    ttl: puts.ttl,
                    only_if_unique: puts.only_if_unique,
                });
            }
            if pending.len() >= batch_size {
                let full =
                    std::mem::replace(&mut pending, Vec::with_capacity(batch_size.min(1 << 20)));
                if to_writer.send(full).is_err() {
                    // The writer failed, and says why below.
                    sent = Err(Failure::io(anyhow!("the writer stopped")));
                    break;
                }
            }
        }
        let read_stats = reader
            .join()
            .unwrap_or_else(|_| Err(Failure::io(anyhow!("the reading thread panicked"))));
        // What was read before a bad line is stored too: the load ends where its input
        // went wrong, not at the last full batch.
        if sent.is_ok() && !pending.is_empty() {
            let _ = to_writer.send(pending);
        }
        drop(to_writer);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(Failure::io(anyhow!("the writer thread panicked"))));
        // A writer's failure explains a reading that stopped.
        let (store, counts) = written?;
        sent?;
        match read_stats {
            Ok(stats) => Ok((store, stats, counts)),
            Err(failure) => {
                // Saved with its snapshot: without one, the next start reads every row
                // back for the id map, at 100M a read of the whole database.
                finish(store)?;
                Err(Failure {
                    status: failure.status,
                    error: failure.error.context(format!(
                        "loading stopped after {} documents ({} stored)",
                        counts.documents, counts.inserted
                    )),
                })
            }
        }
    })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Applies every batch that comes, in order, each in one durable commit; gives the store
/// back. Each outcome goes to `outcomes`, when there is such a file.
fn write_batches(
    mut store: DocumentStore,
    batches: Receiver<Batch>,
    outcomes: &mut Option<std::io::BufWriter<std::fs::File>>,
    matched_only: bool,
) -> Result<(DocumentStore, Counts), Failure> {
    let mut counts = Counts::default();
    for batch in batches {
        let ids: Vec<(String, usize)> = match outcomes {
            Some(_) => batch
                .iter()
                .map(|w| match w {
                    Write::Put { id, doc, .. } => (id.clone(), doc.paragraphs_not_indexed()),
                    Write::Delete { id } => (id.clone(), 0),
                })
                .collect(),
            None => Vec::new(),
        };
        let took = Instant::now();
        let done = store.apply_bulk(batch).map_err(store_failure)?;
        counts.commit_seconds += took.elapsed().as_secs_f64();
        counts.commits += 1;
        for (i, outcome) in done.iter().enumerate() {
            counts.documents += 1;
            let Outcome::Put {
                inserted,
                replaced,
                matches,
                partial,
                ..
            } = outcome
            else {
                continue;
            };
            counts.inserted += u64::from(*inserted);
            counts.replaced += u64::from(*replaced);
            counts.refused += u64::from(!*inserted);
            let (id, not_indexed) = ids.get(i).map_or((None, 0), |(id, n)| (Some(id), *n));
            let unindexed = if *inserted { not_indexed } else { 0 };
            if matched_only && *inserted && matches.is_empty() && !*partial && unindexed == 0 {
                continue;
            }
            if let Some(out) = outcomes.as_mut() {
                let names: Vec<&str> = matches.iter().map(|m| m.id.as_str()).collect();
                let mut line = json!({
                    "id": id,
                    "inserted": inserted,
                    "replaced": replaced,
                    "matches": names,
                });
                // As the service's answers: said only when a crowded key cut the candidates.
                if *partial {
                    line["partial"] = json!(true);
                }
                if unindexed > 0 {
                    line["paragraphs_not_indexed"] = json!(unindexed);
                }
                writeln!(out, "{line}")
                    .map_err(|e| Failure::io(anyhow!("cannot write the outcomes: {e}")))?;
            }
        }
    }
    if let Some(out) = outcomes.as_mut() {
        out.flush()
            .map_err(|e| Failure::io(anyhow!("cannot write the outcomes: {e}")))?;
    }
    Ok((store, counts))
}
