//! [`DocumentStore`]: a durable corpus of documents that decides near-duplicates as
//! `neardup dedup` does — by the estimated Jaccard similarity of their word 5-shingle sets,
//! at the threshold the store was made with — for the service.
//!
//! Each document is kept as its [`Signature`] but its band keys (sketch, simhash
//! fingerprint, text hash; 168 bytes), with its id and expiry, in redb (`packed.rs`), and
//! its band keys in the keys file beside it (`keys.rs`); with paragraphs, each
//! paragraph's whole signature and span too. The band keys of every live document (and
//! paragraph) are indexed in memory ([`BandIndex`]): the documents' built from the keys
//! file when the store opens, the paragraphs' read from a snapshot or rebuilt; the ids
//! are in memory too (`ids.rs`). A query finds its candidates there, reads their signatures in a read
//! transaction and decides as every backend does (`decide.rs`), so it answers exactly what
//! batch deduplication would.
//!
//! Writes come in batches ([`DocumentStore::apply`]), decided in order against the store
//! and the batch's earlier writes ([`decide::plan`]); the plan is carried out in one
//! transaction, one fsync for the whole batch — so a caller that queues concurrent
//! requests and applies them together gets group commit, and `only_if_unique` inserts
//! stay atomic: of two near-identical documents in one batch, only the first gets in. The
//! fsync is of the write-ahead log (`log.rs`). redb takes the batches of a tenth of a
//! second in one transaction and commits it without an fsync ([`COALESCE`]), readers
//! seeing its rows meanwhile through an overlay; a checkpoint now and then makes such
//! commits durable at once.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use neardup::corpus::{BandIndex, BandIndexReader};
use neardup::decide::Signature;
use neardup::jaccard::{BandKeys, Threshold, BANDS, SKETCH_VERSION};
use redb::{Database, ReadableTable};

use crate::backend::{Backend, BackendReader};
use crate::batch::{decode_batch, encode_batch};
use crate::clock::{expired, Clock, SystemClock};
use crate::decide::{
    self, Candidates, Checked, DocRecord, Hit, Insert, Outcome, ParagraphHit, Plan, Step,
};
use crate::decide::{StoreView, StoredDoc, StoredParagraphs, Write};
use crate::dir::DOC_FORMAT;
use crate::error::{db, Result, StoreError};
use crate::file::{self, guard, open_error, Db};
use crate::ids::{Found, IdMap};
use crate::keys::{KeyFile, KeyReader, KEY_CRCS};
use crate::log::{Log, Writeback};
use crate::packed::{self, DOCS};
use crate::prepare::{other_version, DocConfig, Prepared, Preparer, MAX_PARAGRAPHS};
use crate::rows::{new_instance, paragraphs_bytes, paragraphs_of, stored_signature_of, PARA_BYTES};
use crate::rows::{EXPIRY, META, PARAS, REMOVED};
use crate::snapshot::{self, SnapshotJob};

/// Checkpoints at least this often while writes come ([`DocumentStore::with_checkpoint_every`]).
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Bytes of write-ahead log that make a checkpoint due however recent the last one.
const LOG_LIMIT: u64 = 64 << 20;

/// How long one redb transaction takes batches before its commit (without an fsync: the
/// log made each batch durable). A commit copies every B-tree page its writes touched,
/// in every table and in redb's own: a batch of two or three puts at 30M documents wrote
/// 137 KB, so under a steady stream of small batches the disk's write-back, not the
/// work, set the pace, and stalled the writer. Batches of the same transaction share
/// those pages.
const COALESCE: Duration = Duration::from_millis(100);

/// Documents the overlay holds at most before the open transaction commits: each batch
/// publishes a copy of it (of its pointers to the rows).
const OVERLAY_ROWS: usize = 4096;

/// What queries need besides the indexes: the database, the settings, the clock, and
/// the rows the writer's open transaction holds.
#[derive(Clone)]
struct View {
    path: PathBuf,
    db: Arc<Db>,
    config: DocConfig,
    clock: Arc<dyn Clock>,
    overlay: Arc<ArcSwap<Overlay>>,
    /// Each live id's document ([`IdMap`]): changed by the writer after it publishes a
    /// batch's overlay, so a reader that reads it before the overlay finds each document
    /// it names there or in the database.
    ids: Arc<RwLock<IdMap>>,
    /// The documents' band keys (a document's row holds the rest of its signature).
    keys: KeyReader,
}

/// The rows written by the batches that the writer's open transaction holds, which no
/// read transaction sees before its commit: readers see each write once it returns, as
/// the index does. A reader takes the overlay before it begins its read transaction, and
/// the writer publishes an empty one only after the commit, so each row is in one or the
/// other; neither side waits for the other.
#[derive(Clone, Default)]
struct Overlay {
    /// Documents put or removed since the last commit: the row, or `None` once removed.
    docs: HashMap<u64, Option<Arc<Row>>>,
    /// Ids changed since the last commit: the document they name, or `None`.
    ids: HashMap<String, Option<u64>>,
}

/// A document as the overlay holds it: its rows' values.
struct Row {
    id: String,
    expires: u64,
    signature: Signature,
    paragraphs: Vec<(Range<u32>, Signature)>,
}

impl Overlay {
    /// The steps of a plan carried out, in order (each id's last step wins, as in the
    /// tables).
    fn add(&mut self, plan: &Plan, paragraphs: bool) {
        for step in &plan.steps {
            match step {
                Step::Remove { id, internal } => {
                    self.ids.insert(id.clone(), None);
                    self.docs.insert(*internal, None);
                }
                Step::Insert(put) => {
                    self.ids.insert(put.id.clone(), Some(put.internal));
                    let paras = &put.doc.paragraphs;
                    let kept = if paragraphs {
                        paras[..paras.len().min(MAX_PARAGRAPHS as usize)].to_vec()
                    } else {
                        Vec::new()
                    };
                    self.docs.insert(
                        put.internal,
                        Some(Arc::new(Row {
                            id: put.id.clone(),
                            expires: put.expires,
                            signature: put.doc.signature,
                            paragraphs: kept,
                        })),
                    );
                }
            }
        }
    }
}

impl View {
    /// The live near-duplicates of `query` among the candidate documents `ids`.
    fn hits(&self, query: &Signature, ids: &[u64]) -> Result<Vec<Hit>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        guard(&self.path, || {
            let path = &self.path;
            let now = self.clock.now();
            let overlay = self.overlay();
            let txn = db!(path, self.db.begin_read())?;
            let docs = db!(path, txn.open_table(DOCS))?;
            let mut candidates = Candidates::with_capacity(ids.len());
            for &internal in ids {
                match overlay.docs.get(&internal) {
                    Some(Some(row)) => {
                        if !expired(row.expires, now) {
                            candidates.add(internal, row.id.clone(), row.signature);
                        }
                        continue;
                    }
                    Some(None) => continue,
                    None => {}
                }
                // Gone since the index was read: removed after this query began.
                let live = packed::find(path, &docs, internal, |row| {
                    // Before the signature is read: an expired document is not looked at.
                    if expired(row.expires, now) {
                        return Ok(None);
                    }
                    // The decision reads no band key.
                    Ok(Some((
                        row.id.to_string(),
                        stored_signature_of(path, row.signature, [0; BANDS])?,
                    )))
                })?;
                if let Some((id, sig)) = live.flatten() {
                    candidates.add(internal, id, sig);
                }
            }
            Ok(candidates.decide(self.config.rule(), query))
        })
    }

    /// The stored documents sharing near-duplicate paragraphs with `paras` (the query's),
    /// whose candidates per paragraph are `found` (paragraph ids).
    fn paragraph_hits(
        &self,
        paras: &[(Range<u32>, Signature)],
        found: &[Vec<u64>],
    ) -> Result<Vec<ParagraphHit>> {
        if found.iter().all(Vec::is_empty) {
            return Ok(Vec::new());
        }
        let found: Vec<Vec<(u64, usize)>> = found
            .iter()
            .map(|ids| {
                ids.iter()
                    .map(|&pid| (pid / MAX_PARAGRAPHS, (pid % MAX_PARAGRAPHS) as usize))
                    .collect()
            })
            .collect();
        guard(&self.path, || {
            let path = &self.path;
            let now = self.clock.now();
            let overlay = self.overlay();
            let txn = db!(path, self.db.begin_read())?;
            let docs = db!(path, txn.open_table(DOCS))?;
            let para_table = db!(path, txn.open_table(PARAS))?;
            // Per stored document a candidate names: its id and paragraphs, if it is live.
            let mut stored: HashMap<u64, Option<StoredParagraphs>> = HashMap::new();
            for &(internal, _) in found.iter().flatten() {
                if let std::collections::hash_map::Entry::Vacant(slot) = stored.entry(internal) {
                    if let Some(row) = overlay.docs.get(&internal) {
                        slot.insert(
                            row.as_ref()
                                .filter(|r| !expired(r.expires, now))
                                .map(|r| (r.id.clone(), r.paragraphs.clone())),
                        );
                        continue;
                    }
                    let id = packed::find(path, &docs, internal, |row| {
                        Ok((!expired(row.expires, now)).then(|| row.id.to_string()))
                    })?;
                    let entry = match id.flatten() {
                        Some(id) => {
                            let list = match db!(path, para_table.get(internal))? {
                                Some(p) => paragraphs_of(path, p.value())?,
                                None => Vec::new(),
                            };
                            Some((id, list))
                        }
                        _ => None,
                    };
                    slot.insert(entry);
                }
            }
            Ok(decide::paragraph_hits(
                self.config.rule(),
                paras,
                &found,
                stored,
            ))
        })
    }

    /// The overlay as it is now: taken before a read transaction begins.
    fn overlay(&self) -> Arc<Overlay> {
        self.overlay.load_full()
    }

    fn get(&self, id: &str) -> Result<Option<StoredDoc>> {
        guard(&self.path, || {
            let now = self.clock.now();
            loop {
                if let Some(got) = self.get_once(id, now)? {
                    return Ok(got);
                }
            }
        })
    }

    /// [`View::get`] at `now`; `None` when a write came between reading the id map and
    /// the overlay and the id is to be looked up again.
    fn get_once(&self, id: &str, now: u64) -> Result<Option<Option<StoredDoc>>> {
        {
            let path = &self.path;
            // The map before the overlay: whatever it names is in one or the other,
            // unless a commit came between (a document it names is then missing).
            let found = read(&self.ids).get(id);
            let overlay = self.overlay();
            // An id the open transaction changed names a row of the overlay, or nothing.
            if let Some(named) = overlay.ids.get(id) {
                let row = named.and_then(|i| overlay.docs.get(&i)?.clone());
                return Ok(Some(row.filter(|r| !expired(r.expires, now)).map(|r| {
                    StoredDoc {
                        id: id.to_string(),
                        signature: r.signature,
                        expires: (r.expires != 0).then_some(r.expires),
                        paragraphs: r.paragraphs.len(),
                    }
                })));
            }
            let Some(found) = found else {
                return Ok(Some(None));
            };
            let txn = db!(path, self.db.begin_read())?;
            let docs = db!(path, txn.open_table(DOCS))?;
            let row = packed::find(path, &docs, found.internal(), |row| {
                // A maybe is the id's only if the row says so.
                match found {
                    Found::Maybe(_) if row.id != id => Ok(None),
                    _ => Ok(Some((row.expires, row.signature.to_vec()))),
                }
            })?;
            let Some((expires, signature)) = row.flatten() else {
                // Not the id's, or removed since the map was read: look again if the
                // map changed meanwhile.
                let again = read(&self.ids).get(id) != Some(found);
                return Ok((!again).then_some(None));
            };
            let internal = found.internal();
            if expired(expires, now) {
                return Ok(Some(None));
            }
            let signature = stored_signature_of(path, &signature, self.keys.keys_of(internal)?)?;
            let paras = db!(path, txn.open_table(PARAS))?;
            let paragraphs = match db!(path, paras.get(internal))? {
                Some(p) => p.value().len() / PARA_BYTES,
                None => 0,
            };
            Ok(Some(Some(StoredDoc {
                id: id.to_string(),
                signature,
                expires: (expires != 0).then_some(expires),
                paragraphs,
            })))
        }
    }
}

/// The id map to read: a writer that panicked while holding it failed the store, and
/// left the map as whole as each of its steps.
fn read(ids: &RwLock<IdMap>) -> RwLockReadGuard<'_, IdMap> {
    ids.read().unwrap_or_else(PoisonError::into_inner)
}

fn write(ids: &RwLock<IdMap>) -> RwLockWriteGuard<'_, IdMap> {
    ids.write().unwrap_or_else(PoisonError::into_inner)
}

/// A durable corpus of documents with string ids, deciding near-duplicates at a Jaccard
/// threshold. The writer; [`DocumentStore::reader`] gives query handles for other threads.
pub struct DocumentStore {
    view: View,
    /// The band keys of every document numbered: the index's source.
    keys: KeyFile,
    docs: BandIndex,
    paras: BandIndex,
    next_id: u64,
    /// Matches a put's outcome lists ([`DocumentStore::with_max_matches`]).
    max_matches: usize,
    /// Write transactions committed (the "commit" setting).
    commit: u64,
    /// The commit of the snapshot on disk, when it is known to be this store's.
    snapshot_commit: Option<u64>,
    /// The "instance" setting; stores made before snapshots get one with their first.
    instance: Option<u64>,
    opened: Opened,
    /// A call met damage (a panic in redb): the database may be in any state.
    /// Why the store takes no more calls, once its database or log failed
    /// ([`DocumentStore::failure`]).
    failed: Option<String>,
    /// Commits save redb's allocator state ([`DocumentStore::with_quick_repair`]).
    quick_repair: bool,
    /// Opening walked the whole file to repair it ([`DocumentStore::repaired`]).
    repaired: bool,
    /// Batches committed to redb without an fsync since the last checkpoint, durable here.
    log: Log,
    /// The write transaction that takes the batches until its commit ([`COALESCE`]),
    /// and when it began; its rows are readers' through the overlay until then.
    pending: Option<redb::WriteTransaction>,
    pending_since: Instant,
    /// When the database was last made durable ([`DocumentStore::checkpoint`]).
    checkpointed: Instant,
    /// How long batches may wait in the log ([`DocumentStore::with_checkpoint_every`]).
    checkpoint_every: Duration,
    /// Batches the open replayed from the log ([`DocumentStore::replayed`]).
    replayed: usize,
    writeback: Writeback,
    /// The next checkpoint commits even with nothing logged: the durable commits'
    /// settings changed ([`DocumentStore::with_quick_repair`]).
    settle: bool,
    /// Memory the store may use ([`OpenOptions::memory_budget`]), and its page cache's.
    budget: Option<u64>,
    cache: usize,
    /// [`OpenOptions::rebuild_in_place`].
    in_place: bool,
}

impl Drop for DocumentStore {
    fn drop(&mut self) {
        // Best effort: what is not checkpointed is in the log, which the next open replays.
        let _ = self.checkpoint();
        if let Some(dir) = self.view.path.parent() {
            file::release(dir);
        }
    }
}

impl std::fmt::Debug for DocumentStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocumentStore")
            .field("path", &self.view.path)
            .field("len", &self.docs.len())
            .field("config", &self.view.config)
            .finish_non_exhaustive()
    }
}

/// Query handles on a [`DocumentStore`] for other threads; cheap to clone. They never wait for
/// the writer, and see each write once it returns.
#[derive(Clone)]
pub struct DocumentReader {
    view: View,
    docs: BandIndexReader,
    paras: BandIndexReader,
}

impl std::fmt::Debug for DocumentReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocumentReader")
            .field("path", &self.view.path)
            .finish_non_exhaustive()
    }
}

impl DocumentReader {
    /// As [`DocumentStore::check`].
    pub fn check(&self, doc: &Prepared) -> Result<Checked> {
        let sig = &doc.signature;
        let found = self.docs.lookup(&sig.index_keys());
        Ok(Checked {
            hits: self.view.hits(sig, &found.ids)?,
            partial: found.crowded,
        })
    }

    /// As [`DocumentStore::check`] of `text` prepared by `preparer`, but the simhash
    /// fingerprint (which only the reported distances need) is computed only when the
    /// text has candidates: most texts checked have none.
    pub fn check_text(&self, preparer: &Preparer, text: &str) -> Result<Checked> {
        let mut sig = preparer.partial(text);
        let found = self.docs.lookup(&sig.index_keys());
        if found.ids.is_empty() {
            return Ok(Checked::default());
        }
        preparer.complete(&mut sig, text);
        Ok(Checked {
            hits: self.view.hits(&sig, &found.ids)?,
            partial: found.crowded,
        })
    }

    /// As [`DocumentStore::check_paragraphs`].
    pub fn check_paragraphs(&self, doc: &Prepared) -> Result<Vec<ParagraphHit>> {
        let keys: Vec<_> = doc.paragraphs.iter().map(|(_, s)| s.index_keys()).collect();
        let found: Vec<Vec<u64>> = self
            .paras
            .lookup_many(&keys)
            .into_iter()
            .map(|c| c.ids)
            .collect();
        self.view.paragraph_hits(&doc.paragraphs, &found)
    }

    /// As [`DocumentStore::get`].
    pub fn get(&self, id: &str) -> Result<Option<StoredDoc>> {
        self.view.get(id)
    }

    /// Documents stored, as of now (expired ones until swept).
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The store's settings.
    pub fn config(&self) -> DocConfig {
        self.view.config
    }
}

/// How [`DocumentStore::open`] made its indexes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opened {
    /// The store was just made.
    Created,
    /// Read from the snapshot, then brought up to date with this many documents added
    /// or removed since it was taken.
    Snapshot {
        /// Documents (and their removals) applied after reading the snapshot.
        caught_up: usize,
    },
    /// Rebuilt from every stored signature, for this reason.
    Rebuilt {
        /// Why the snapshot was not used.
        why: String,
    },
}

/// `internal`, unless it is numbered past `next_id`: damage, named as `what` it numbers.
fn numbered(path: &Path, internal: u64, next_id: u64, what: &str) -> Result<u64> {
    if internal >= next_id {
        return Err(StoreError::Damaged {
            path: path.to_path_buf(),
            detail: format!("{what} {internal}: numbered past next_id {next_id}"),
        });
    }
    Ok(internal)
}

/// Puts the ids of the documents numbered `from` on into `ids`, checked against
/// `next_id`; how many.
fn doc_ids(
    path: &Path,
    txn: &redb::ReadTransaction,
    next_id: u64,
    from: u64,
    ids: &mut IdMap,
) -> Result<usize> {
    let table = db!(path, txn.open_table(DOCS))?;
    let mut added = 0;
    packed::each_from(path, &table, from, |row| {
        let internal = numbered(path, row.internal, next_id, "document")?;
        let named = match ids.get(row.id) {
            None => None,
            Some(Found::Sure(other)) => Some(other),
            Some(Found::Maybe(other)) => packed::find(path, &table, other, |r| Ok(r.id == row.id))?
                .filter(|&same| same)
                .map(|_| other),
        };
        if let Some(other) = named {
            return Err(StoreError::Damaged {
                path: path.to_path_buf(),
                detail: format!("documents {other} and {internal} are both {:?}", row.id),
            });
        }
        ids.insert(row.id, internal);
        added += 1;
        Ok(())
    })?;
    Ok(added)
}

/// The index of the live documents `live` (increasing), built from the keys file a band
/// at a time, each band checked against what the database vouches for
/// ([`keys::KEY_CRCS`]: `vouched`) of its first `len` documents.
fn docs_index(
    keys: &KeyReader,
    live: &[u64],
    len: u64,
    vouched: &HashMap<(u64, u8), (u32, u32)>,
) -> Result<BandIndex> {
    // Increasing: the last is the largest, and every key looked up below is in range.
    if let Some(&last) = live.last().filter(|&&last| last >= len) {
        return Err(StoreError::Damaged {
            path: keys.path().to_path_buf(),
            detail: format!("document {last} is live, but only {len} are numbered"),
        });
    }
    let failed = std::sync::Mutex::new(None);
    // Every document numbered is live (a store just loaded): each band as read. Else
    // each band is read here first, then its live documents' keys taken.
    let whole = live.len() as u64 == len;
    let all = std::sync::Mutex::new(Vec::new());
    let index = BandIndex::from_band_keys(live.to_vec(), |band, into| {
        // This band's reads, and the next band's (read next), go to the disk at once
        // instead of one by one.
        keys.will_need(band, len);
        keys.will_need(band + 1, len);
        let vouched_for = |chunk| vouched.get(&(chunk, band as u8)).copied();
        let read = match whole {
            true => keys.band(band, len, vouched_for, into),
            false => {
                let mut all = all.lock().unwrap_or_else(PoisonError::into_inner);
                keys.band(band, len, vouched_for, &mut all).map(|()| {
                    into.extend(live.iter().map(|&i| all[i as usize]));
                })
            }
        };
        match read {
            Ok(()) => true,
            Err(e) => {
                *failed.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
                false
            }
        }
    })?;
    match index {
        Some(index) => Ok(index),
        None => Err(failed
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .unwrap_or_else(|| StoreError::Damaged {
                path: keys.path().to_path_buf(),
                detail: "a band of keys could not be read".into(),
            })),
    }
}

/// The band keys of the paragraphs of the documents numbered `from` on, by index id.
fn para_keys(
    path: &Path,
    txn: &redb::ReadTransaction,
    next_id: u64,
    from: u64,
) -> Result<Vec<(u64, BandKeys)>> {
    let table = db!(path, txn.open_table(PARAS))?;
    let mut keys = Vec::new();
    for row in db!(path, table.range(from..))? {
        let (internal, v) = db!(path, row)?;
        // A number past next_id would also overflow the paragraph ids.
        let internal = numbered(path, internal.value(), next_id, "paragraphs of document")?;
        for (i, (_, sig)) in paragraphs_of(path, v.value())?.iter().enumerate() {
            keys.push((internal * MAX_PARAGRAPHS + i as u64, sig.index_keys()));
        }
    }
    Ok(keys)
}

/// The paragraphs' index and the id map of every stored document, built in one pass.
fn rebuild_indexes(
    path: &Path,
    txn: &redb::ReadTransaction,
    config: DocConfig,
    next_id: u64,
) -> Result<(BandIndex, IdMap)> {
    let mut ids = IdMap::default();
    doc_ids(path, txn, next_id, 0, &mut ids)?;
    let paras = if config.paragraphs {
        BandIndex::from_docs(para_keys(path, txn, next_id, 0)?)?
    } else {
        BandIndex::new()
    };
    Ok((paras, ids))
}

/// The paragraphs' index and id map of a snapshot brought up to the database's state:
/// the removals logged since it was taken, then the documents numbered since. How many
/// documents of both.
fn catch_up(
    path: &Path,
    txn: &redb::ReadTransaction,
    config: DocConfig,
    next_id: u64,
    header: snapshot::Header,
    mut paras: BandIndex,
    ids: &mut IdMap,
) -> Result<(BandIndex, usize)> {
    let log = db!(path, txn.open_table(REMOVED))?;
    let mut gone = Vec::new();
    let mut gone_paras = Vec::new();
    for row in db!(path, log.range((header.commit + 1, 0)..))? {
        let (key, count) = db!(path, row)?;
        let internal = key.value().1;
        gone.push(internal);
        let count = count.value().min(MAX_PARAGRAPHS);
        gone_paras.extend((0..count).map(|p| internal.saturating_mul(MAX_PARAGRAPHS) + p));
    }
    paras.remove_bulk(&gone_paras);
    ids.remove_documents(&gone.iter().copied().collect());
    let added = doc_ids(path, txn, next_id, header.next_id, ids)?;
    if config.paragraphs {
        paras.insert_bulk(&para_keys(path, txn, next_id, header.next_id)?)?;
    }
    Ok((paras, gone.len() + added))
}

/// How a document store's database file is opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Bytes of redb's page cache; `None` for redb's default (1 GiB). Checks and commits
    /// read the B-tree pages through it, so a store larger than it reads from the kernel
    /// page by page.
    pub cache_bytes: Option<usize>,
    /// Bytes of memory the store may use, its page cache included ([`memory_needed`]):
    /// opening a store whose index would not fit fails at once (before reading it), and
    /// a write whose new documents would not fit is refused ([`StoreError::Memory`]).
    pub memory_budget: Option<u64>,
    /// Rebuilds of the index's main part run on the writer's thread and let go of the old
    /// main part band by band as they build the new one, while no reader of the store
    /// exists ([`DocumentStore::reader`]): a rebuild then needs about a fifth of the index
    /// beside it, not as much again. For a writer alone with the store (`neardup load`);
    /// with readers, rebuilds still run on the writer's thread (writes wait for them), but
    /// beside the old main part.
    pub rebuild_in_place: bool,
}

/// redb's page cache when none is set.
const DEFAULT_CACHE: usize = 1 << 30;

/// Memory of the process beside the index and the cache: the runtime, request buffers,
/// a batch of writes.
const BASE_MEMORY: u64 = 128 << 20;

/// Bytes a document of the index's recent levels takes (its twenty entries, keys, id and
/// place in the id map).
const LEVEL_BYTES: u64 = 300;

/// Bytes the index's recent levels take at most over `docs` documents: a 32nd of them,
/// more when rebuilt in place ([`BandIndex::levels_cap`]).
fn levels_needed(docs: usize, in_place: bool) -> u64 {
    BandIndex::levels_cap(docs, in_place).min(docs) as u64 * LEVEL_BYTES
}

/// Bytes a document takes in the id map, at most: 12 in its arrays, and a sixteenth of
/// them waiting in its tables of changes at about 32 each.
const ID_BYTES: u64 = 14;

/// Memory a store of `docs` documents (without paragraphs) needs at most while it serves,
/// with `cache` bytes of page cache: its index, as much again while the index's main part
/// is rebuilt beside the old one (each time the documents grow by a 32nd), or a fifth of
/// it when rebuilt in place ([`OpenOptions::rebuild_in_place`]: two bands being built
/// and the ids in slot order), the levels of recent writes, the id map, and the rest of
/// the process (128 MB).
pub fn memory_needed(docs: usize, cache: usize, in_place: bool) -> u64 {
    main_needed(docs, in_place)
        + levels_needed(docs, in_place)
        + docs as u64 * ID_BYTES
        + cache as u64
        + BASE_MEMORY
}

/// The index's main part of `docs` documents and its rebuild's ([`memory_needed`]).
fn main_needed(docs: usize, in_place: bool) -> u64 {
    let main = BandIndex::main_bytes(docs) as u64;
    main + if in_place { main / 5 } else { main }
}

/// [`memory_needed`] with the paragraphs' index of `paras` paragraphs.
fn needed(docs: usize, paras: usize, cache: usize, in_place: bool) -> u64 {
    memory_needed(docs, cache, in_place)
        + if paras > 0 {
            main_needed(paras, in_place) + levels_needed(paras, in_place)
        } else {
            0
        }
}

impl OpenOptions {
    fn builder(self) -> redb::Builder {
        let mut builder = Database::builder();
        if let Some(bytes) = self.cache_bytes {
            builder.set_cache_size(bytes);
        }
        builder
    }
}

/// [`StoreError::Memory`] when `docs` documents (and `paras` paragraphs) need more than
/// `budget` bytes with `cache` bytes of page cache.
fn over_budget(
    dir: &Path,
    (docs, paras): (usize, usize),
    cache: usize,
    in_place: bool,
    budget: u64,
) -> Result<()> {
    let need = needed(docs, paras, cache, in_place);
    if need <= budget {
        return Ok(());
    }
    let mb = |b: u64| b.div_ceil(1 << 20);
    let index = BandIndex::main_bytes(docs) as u64;
    Err(StoreError::Memory {
        path: dir.to_path_buf(),
        detail: format!(
            "{docs} documents{} need about {} MB of memory: their index {} MB, {} while its \
             main part is rebuilt, {} MB of page cache and {} MB for the rest; the memory \
             budget is {} MB",
            if paras > 0 {
                format!(" and {paras} paragraphs")
            } else {
                String::new()
            },
            mb(need),
            mb(index),
            if in_place {
                "a fifth more"
            } else {
                "as much again"
            },
            mb(cache as u64),
            mb(BASE_MEMORY),
            mb(budget)
        ),
    })
}

impl DocumentStore {
    /// Makes a new document store in `dir` (created if missing), as every store is made:
    /// aside, committed, then published whole, so that a crash leaves no store or a whole
    /// one.
    pub fn create(dir: impl AsRef<Path>, config: DocConfig) -> Result<DocumentStore> {
        DocumentStore::create_with(dir, config, OpenOptions::default())
    }

    /// [`DocumentStore::create`] with `options`.
    pub fn create_with(
        dir: impl AsRef<Path>,
        config: DocConfig,
        options: OpenOptions,
    ) -> Result<DocumentStore> {
        let instance = new_instance();
        let init = |partial: &Path, txn: &redb::WriteTransaction| {
            let mut meta = db!(partial, txn.open_table(META))?;
            for (k, v) in [
                ("format", DOC_FORMAT),
                ("threshold", config.threshold.get().to_bits()),
                ("paragraphs", u64::from(config.paragraphs)),
                (
                    "fingerprint_version",
                    u64::from(neardup::fingerprint::VERSION),
                ),
                ("sketch_version", u64::from(SKETCH_VERSION)),
                ("next_id", 0),
                ("instance", instance),
                ("commit", 0),
                ("snapshot_commit", 0),
            ] {
                db!(partial, meta.insert(k, v))?;
            }
            db!(partial, txn.open_table(DOCS))?;
            db!(partial, txn.open_table(PARAS))?;
            db!(partial, txn.open_table(EXPIRY))?;
            db!(partial, txn.open_table(REMOVED))?;
            db!(partial, txn.open_table(KEY_CRCS))?;
            Ok(())
        };
        let open = |dir: &Path, path: PathBuf, db: Database| {
            let keys = KeyFile::open(dir, instance, 0, |_, _| None)?;
            let log = Log::create(dir)?;
            let writeback = Writeback::start(&path);
            Ok(DocumentStore {
                view: View {
                    path,
                    db: Arc::new(Db::new(db)),
                    config,
                    clock: Arc::new(SystemClock),
                    overlay: Arc::default(),
                    ids: Arc::default(),
                    keys: keys.reader(),
                },
                keys,
                docs: BandIndex::new().rebuilds_in_place(options.rebuild_in_place),
                paras: BandIndex::new().rebuilds_in_place(options.rebuild_in_place),
                next_id: 0,
                commit: 0,
                snapshot_commit: None,
                instance: Some(instance),
                opened: Opened::Created,
                failed: None,
                max_matches: decide::MAX_MATCHES,
                quick_repair: false,
                repaired: false,
                log,
                pending: None,
                pending_since: Instant::now(),
                checkpointed: Instant::now(),
                checkpoint_every: CHECKPOINT_EVERY,
                replayed: 0,
                writeback,
                settle: false,
                budget: options.memory_budget,
                cache: options.cache_bytes.unwrap_or(DEFAULT_CACHE),
                in_place: options.rebuild_in_place,
            })
        };
        file::create_store(dir.as_ref(), &options.builder(), init, open)
    }

    /// Opens the document store in `dir` and rebuilds its indexes. With `expect`, its
    /// settings must be those on disk.
    pub fn open(dir: impl AsRef<Path>, expect: Option<DocConfig>) -> Result<DocumentStore> {
        DocumentStore::open_with(dir, expect, OpenOptions::default())
    }

    /// [`DocumentStore::open`] with `options`.
    pub fn open_with(
        dir: impl AsRef<Path>,
        expect: Option<DocConfig>,
        options: OpenOptions,
    ) -> Result<DocumentStore> {
        file::open_store(dir.as_ref(), |dir, path| {
            DocumentStore::open_file(dir, path, expect, options)
        })
    }

    fn open_file(
        dir: &Path,
        path: &Path,
        expect: Option<DocConfig>,
        options: OpenOptions,
    ) -> Result<DocumentStore> {
        let path = path.to_path_buf();
        // redb calls this only when it must walk the whole file to repair it: the last
        // commit before an unclean stop was not a quick-repair one.
        let repaired = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = Arc::clone(&repaired);
        let mut builder = options.builder();
        builder
            .set_repair_callback(move |_| seen.store(true, std::sync::atomic::Ordering::Relaxed));
        let mut db = file::open_db(&builder, &path).map_err(|e| open_error(dir, &path, e))?;
        let repaired = repaired.load(std::sync::atomic::Ordering::Relaxed);
        crate::rows::pack_old_rows(&path, &db)?;
        crate::rows::drop_id_table(&path, &db)?;
        if crate::rows::move_keys_out(dir, &path, &db)? {
            // Every row was written again: the old pages are free, and would stay in the
            // file (twice the rows' size) without a compaction.
            db!(&path, db.compact())?;
        }
        let txn = db!(&path, db.begin_read())?;
        let meta = txn.open_table(META).map_err(|e| StoreError::Foreign {
            path: path.clone(),
            detail: format!("no neardup settings in it ({e})"),
        })?;
        let get = |key: &str| -> Result<u64> {
            match db!(&path, meta.get(key))? {
                Some(v) => Ok(v.value()),
                None => Err(StoreError::Foreign {
                    path: path.clone(),
                    detail: format!("setting \"{key}\" is missing"),
                }),
            }
        };
        let format = get("format")?;
        if format > DOC_FORMAT {
            return Err(StoreError::Foreign {
                path: path.clone(),
                detail: format!(
                    "a document store of a newer format ({format}; this build reads {DOC_FORMAT})"
                ),
            });
        }
        if format != DOC_FORMAT {
            return Err(StoreError::Foreign {
                path: path.clone(),
                detail: format!(
                    "a fingerprint store (format {format}), not a document store: use `neardup index` on it"
                ),
            });
        }
        for (key, want) in [
            (
                "fingerprint_version",
                u64::from(neardup::fingerprint::VERSION),
            ),
            ("sketch_version", u64::from(SKETCH_VERSION)),
        ] {
            let have = get(key)?;
            if have != want {
                return Err(StoreError::Foreign {
                    path: path.clone(),
                    detail: other_version(key, have, want),
                });
            }
        }
        let threshold =
            Threshold::new(f64::from_bits(get("threshold")?)).map_err(|e| StoreError::Foreign {
                path: path.clone(),
                detail: format!("its threshold: {e}"),
            })?;
        let config = DocConfig {
            threshold,
            paragraphs: get("paragraphs")? != 0,
        };
        if let Some(want) = expect {
            if want != config {
                return Err(StoreError::Mismatch {
                    path: path.clone(),
                    stored: describe(&config),
                    requested: describe(&want),
                });
            }
        }
        let next_id = get("next_id")?;
        if let Some(budget) = options.memory_budget {
            // As of the last checkpoint (or every number given, in a store that has none).
            let n = db!(&path, meta.get("documents"))?.map_or(next_id, |v| v.value()) as usize;
            over_budget(
                dir,
                (n, 0),
                options.cache_bytes.unwrap_or(DEFAULT_CACHE),
                options.rebuild_in_place,
                budget,
            )?;
        }
        let setting = |key: &str| -> Result<Option<u64>> {
            Ok(db!(&path, meta.get(key))?.map(|v| v.value()))
        };
        let commit = setting("commit")?.unwrap_or(0);
        let instance = setting("instance")?;
        let pruned = setting("snapshot_commit")?.unwrap_or(0);
        let usable = |h: &snapshot::Header| {
            Some(h.instance) == instance
                && (pruned..=commit).contains(&h.commit)
                && h.next_id <= next_id
                && h.threshold_bits == config.threshold.get().to_bits()
                && h.paragraphs == config.paragraphs
        };
        let mut snapshot_commit = None;
        let Some(keys_of) = instance else {
            return Err(StoreError::Damaged {
                path: path.clone(),
                detail: "setting \"instance\" is missing".into(),
            });
        };
        let vouched: HashMap<(u64, u8), (u32, u32)> = {
            let table = db!(&path, txn.open_table(KEY_CRCS))?;
            let mut all = HashMap::new();
            for row in db!(&path, table.iter())? {
                let (k, v) = db!(&path, row)?;
                all.insert(k.value(), v.value());
            }
            all
        };
        let keys = KeyFile::open(dir, keys_of, next_id, |chunk, band| {
            vouched.get(&(chunk, band as u8)).copied()
        })?;
        let (paras, ids, opened) = match snapshot::read(dir, usable) {
            Ok(Some((header, paras, mut ids))) => {
                let (paras, caught_up) =
                    catch_up(&path, &txn, config, next_id, header, paras, &mut ids)?;
                snapshot_commit = Some(header.commit);
                (paras, ids, Opened::Snapshot { caught_up })
            }
            found => {
                let why = match found {
                    Ok(_) if instance.is_none() => "no snapshot yet".to_string(),
                    Ok(_) if snapshot::path(dir).exists() => {
                        "the snapshot is of an older state".to_string()
                    }
                    Ok(_) => "no snapshot".to_string(),
                    Err(e) => format!("the snapshot cannot be read ({e})"),
                };
                let (paras, ids) = rebuild_indexes(&path, &txn, config, next_id)?;
                (paras, ids, Opened::Rebuilt { why })
            }
        };
        drop(meta);
        drop(txn);
        let docs = docs_index(&keys.reader(), &ids.live(), next_id, &vouched)?;
        let (log, records) = Log::open(dir)?;
        let writeback = Writeback::start(&path);
        let mut store = DocumentStore {
            view: View {
                path,
                db: Arc::new(Db::new(db)),
                config,
                clock: Arc::new(SystemClock),
                overlay: Arc::default(),
                ids: Arc::new(RwLock::new(ids)),
                keys: keys.reader(),
            },
            keys,
            docs: docs.rebuilds_in_place(options.rebuild_in_place),
            paras: paras.rebuilds_in_place(options.rebuild_in_place),
            next_id,
            commit,
            snapshot_commit,
            instance,
            opened,
            failed: None,
            max_matches: decide::MAX_MATCHES,
            quick_repair: false,
            repaired,
            log,
            pending: None,
            pending_since: Instant::now(),
            checkpointed: Instant::now(),
            checkpoint_every: CHECKPOINT_EVERY,
            replayed: 0,
            writeback,
            settle: false,
            budget: options.memory_budget,
            cache: options.cache_bytes.unwrap_or(DEFAULT_CACHE),
            in_place: options.rebuild_in_place,
        };
        store.fits(0)?;
        store.replay(records)?;
        Ok(store)
    }

    /// Applies the logged batches the database does not hold yet (those after its last
    /// durable commit), deciding each as it was decided, then checkpoints.
    fn replay(&mut self, records: Vec<Vec<u8>>) -> Result<()> {
        let path = self.log.path().to_path_buf();
        for record in records {
            let (commit, now, writes) = decode_batch(&path, &record)?;
            if commit <= self.commit {
                continue;
            }
            if commit != self.commit + 1 {
                return Err(StoreError::Damaged {
                    path,
                    detail: format!(
                        "the write-ahead log goes on at commit {commit}, the database ends at {}",
                        self.commit
                    ),
                });
            }
            self.decide(writes, now, None)?;
            self.replayed += 1;
        }
        self.checkpoint_now()
    }

    /// Uses `clock` for expiry instead of the system clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> DocumentStore {
        self.view.clock = clock;
        self
    }

    /// Whether each durable commit (a checkpoint) also saves redb's allocator state, with
    /// a two-phase commit (redb's quick-repair; off unless asked, `neardup serve` asks).
    /// Then an open after a crash reads that state back instead of walking the whole file
    /// to rebuild it, which takes about as long as reading the store (5–7 s at 1.9M
    /// documents, where a start from the snapshot takes 1 s). The price: each checkpoint
    /// costs a second fsync and the state's pages, and a file whose last commit is damaged
    /// (cut short, say) is refused by redb instead of falling back to the commit before.
    /// It applies from the next checkpoint, which comes before the next write (or call
    /// [`DocumentStore::checkpoint`]): an open after a crash is quick when the last checkpoint
    /// before it was made this way.
    pub fn with_quick_repair(mut self, on: bool) -> DocumentStore {
        self.quick_repair = on;
        self.settle = true;
        self
    }

    /// Whether opening had to repair the database file by walking all of it: the store
    /// was not closed cleanly, and its last commit was made without quick-repair.
    pub fn repaired(&self) -> bool {
        self.repaired
    }

    /// How long acknowledged batches may wait in the write-ahead log before one durable
    /// commit of the database takes them all (default [`CHECKPOINT_EVERY`]; zero: before
    /// every batch). Longer makes fewer, larger checkpoints, and a longer replay after a
    /// crash.
    pub fn with_checkpoint_every(mut self, every: Duration) -> DocumentStore {
        self.checkpoint_every = every;
        self
    }

    /// Batches of writes that opening the store replayed from the write-ahead log: those
    /// acknowledged but not yet checkpointed when the last process stopped.
    pub fn replayed(&self) -> usize {
        self.replayed
    }

    /// Makes every write so far durable in the database file itself, and empties the
    /// write-ahead log. Done now and then by [`DocumentStore::apply`], before a snapshot and
    /// when the store is dropped; a caller may do it when idle.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.refuse_if_broken()?;
        let path = self.view.path.clone();
        let result = guard(&path, || self.checkpoint_now());
        self.note_failure(&result);
        result
    }

    fn checkpoint_due(&self) -> bool {
        self.settle
            || self.log.bytes() >= LOG_LIMIT
            || (self.log.bytes() > 0 && self.checkpointed.elapsed() >= self.checkpoint_every)
    }

    fn checkpoint_now(&mut self) -> Result<()> {
        if self.log.bytes() > 0 || self.settle || self.pending.is_some() {
            // The open transaction (or an empty one), durable: redb's commit makes the
            // non-durable ones before it durable with it.
            self.commit_pending(true)?;
            self.log.clear()?;
            self.settle = false;
        }
        self.checkpointed = Instant::now();
        Ok(())
    }

    /// The open write transaction, or a new one (non-durable until told otherwise).
    fn write_txn(&mut self) -> Result<redb::WriteTransaction> {
        if let Some(txn) = self.pending.take() {
            return Ok(txn);
        }
        let mut txn = self.begin_write()?;
        txn.set_durability(redb::Durability::None);
        self.pending_since = Instant::now();
        Ok(txn)
    }

    /// Commits the open write transaction (an empty one if none is open), `durable` or
    /// not; its rows are then readers' through the database, and the overlay empties.
    fn commit_pending(&mut self, durable: bool) -> Result<()> {
        let mut txn = self.write_txn()?;
        if durable {
            txn.set_durability(redb::Durability::Immediate);
            // For the memory budget's check at the next open, before the index is read.
            let live = read(&self.view.ids).len() as u64;
            let mut meta = db!(&self.view.path, txn.open_table(META))?;
            db!(&self.view.path, meta.insert("documents", live))?;
            // The keys this commit numbered, durable first, then vouched for.
            let mut crcs = db!(&self.view.path, txn.open_table(KEY_CRCS))?;
            for (at, vouched) in self.keys.sync()? {
                db!(&self.view.path, crcs.insert(at, vouched))?;
            }
        }
        db!(&self.view.path, txn.commit())?;
        if !self.view.overlay.load().docs.is_empty() {
            self.view.overlay.store(Arc::default());
        }
        if !durable {
            self.writeback.committed();
        }
        Ok(())
    }

    /// A write transaction, quick-repair as set.
    fn begin_write(&self) -> Result<redb::WriteTransaction> {
        let path = &self.view.path;
        let mut txn = db!(path, self.view.db.begin_write())?;
        txn.set_quick_repair(self.quick_repair);
        Ok(txn)
    }

    /// The settings on disk.
    pub fn config(&self) -> DocConfig {
        self.view.config
    }

    /// A preparer for this store's documents.
    pub fn preparer(&self) -> Preparer {
        Preparer::new(self.view.config)
    }

    /// Documents stored (expired ones until swept).
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Bytes of memory held by the in-memory indexes and the id map.
    pub fn heap_bytes(&self) -> usize {
        self.docs.heap_bytes() + self.paras.heap_bytes() + read(&self.view.ids).heap_bytes()
    }

    /// A query handle for other threads.
    pub fn reader(&self) -> DocumentReader {
        DocumentReader {
            view: self.view.clone(),
            docs: self.docs.reader(),
            paras: self.paras.reader(),
        }
    }

    /// The stored near-duplicates of `doc` (live ones), most similar first.
    pub fn check(&self, doc: &Prepared) -> Result<Checked> {
        self.refuse_if_broken()?;
        self.reader().check(doc)
    }

    /// The stored documents that share near-duplicate paragraphs with `doc` (prepared
    /// with paragraphs), by the share of its text they cover.
    pub fn check_paragraphs(&self, doc: &Prepared) -> Result<Vec<ParagraphHit>> {
        self.refuse_if_broken()?;
        self.reader().check_paragraphs(doc)
    }

    /// The live document stored under `id`.
    pub fn get(&self, id: &str) -> Result<Option<StoredDoc>> {
        self.refuse_if_broken()?;
        self.view.get(id)
    }

    /// [`StoreError::Memory`] unless the store with `more` documents fits its memory
    /// budget (if it has one).
    fn fits(&self, more: usize) -> Result<()> {
        let Some(budget) = self.budget else {
            return Ok(());
        };
        let dir = self.view.path.parent().unwrap_or(Path::new("."));
        let paras = self.paras.len();
        let more_paras = if paras > 0 { more * 8 } else { 0 };
        over_budget(
            dir,
            (self.len() + more, paras + more_paras),
            self.cache,
            self.in_place,
            budget,
        )
    }

    /// The memory budget ([`OpenOptions::memory_budget`]), if the store has one.
    pub fn memory_budget(&self) -> Option<u64> {
        self.budget
    }

    /// What the store needs of its memory budget now ([`memory_needed`], paragraphs
    /// included).
    pub fn memory_needed(&self) -> u64 {
        needed(self.len(), self.paras.len(), self.cache, self.in_place)
    }

    fn refuse_if_broken(&self) -> Result<()> {
        match &self.failed {
            Some(detail) => Err(StoreError::Failed {
                path: self.view.path.clone(),
                detail: detail.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Lists at most `n` matches in a put's outcome (the most similar), counting the
    /// rest ([`decide::MAX_MATCHES`] by default).
    pub fn with_max_matches(mut self, n: usize) -> DocumentStore {
        self.max_matches = n;
        self
    }

    /// Why the store takes no more calls, if it does not: a call met damage, or its
    /// database or log failed in a way it cannot go on from (redb refuses every call after
    /// an I/O error in a commit). Opening it again recovers every acknowledged write.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Marks the store failed after `result`, when its error leaves the store unusable:
    /// damage, an I/O error of the database, a batch whose outcome is unknown. A write
    /// refused before anything was written (its log record cut off again) leaves it be.
    fn note_failure<T>(&mut self, result: &Result<T>) {
        if let Err(e) = result {
            let fatal = matches!(
                e,
                StoreError::Damaged { .. } | StoreError::Db { .. } | StoreError::Unsure { .. }
            );
            if fatal && self.failed.is_none() {
                self.failed = Some(e.to_string());
            }
        }
    }

    /// Applies `writes` in order, in one transaction, durable (its record fsynced in the
    /// write-ahead log) before the indexes change and before it returns; what each did, in
    /// order. A put of a text
    /// without words matches only its copies.
    pub fn apply(&mut self, writes: Vec<Write>) -> Result<Vec<Outcome>> {
        self.refuse_if_broken()?;
        self.fits(puts(&writes))?;
        let path = self.view.path.clone();
        let result = guard(&path, || self.apply_unguarded(writes));
        self.note_failure(&result);
        result
    }

    /// Applies `writes` as [`DocumentStore::apply`] decides them, made durable by one
    /// commit of the database itself rather than a record of the write-ahead log: for
    /// loading many documents at once (`neardup load`), where the log would write every
    /// document twice. Each call costs a durable commit of the file (two fsyncs with
    /// quick-repair), so it is for large batches. A crash before it returns loses the
    /// whole batch and nothing before it.
    pub fn apply_bulk(&mut self, writes: Vec<Write>) -> Result<Vec<Outcome>> {
        self.refuse_if_broken()?;
        self.fits(puts(&writes))?;
        let path = self.view.path.clone();
        let result = guard(&path, || {
            // What the log holds goes into the database first: this batch follows it.
            self.checkpoint_now()?;
            let now = self.view.clock.now();
            let outcomes = self.decide(writes, now, None)?;
            self.commit_pending(true)?;
            self.checkpointed = Instant::now();
            Ok(outcomes)
        });
        self.note_failure(&result);
        result
    }

    fn apply_unguarded(&mut self, writes: Vec<Write>) -> Result<Vec<Outcome>> {
        if self.checkpoint_due() {
            self.checkpoint_now()?;
        }
        let now = self.view.clock.now();
        let record = encode_batch(self.commit + 1, now, &writes, self.view.config.paragraphs);
        let outcomes = self.decide(writes, now, Some(&record))?;
        if self.pending_since.elapsed() >= COALESCE
            || self.view.overlay.load().docs.len() >= OVERLAY_ROWS
        {
            // The batch is in the log: whatever fails now, it may be durable.
            self.commit_pending(false).map_err(|e| StoreError::Unsure {
                path: self.view.path.clone(),
                detail: e.to_string(),
            })?;
        }
        Ok(outcomes)
    }

    /// Decides `writes` at `now` ([`decide::plan`]) and carries the plan out as commit
    /// `self.commit + 1` in the open write transaction, after `record` (the batch as the
    /// log keeps it; none when replaying it) is durable in the log; the rows go to the
    /// overlay, then the indexes change. The transaction commits later, with the batches
    /// after it ([`COALESCE`], a checkpoint).
    fn decide(
        &mut self,
        writes: Vec<Write>,
        now: u64,
        record: Option<&[u8]>,
    ) -> Result<Vec<Outcome>> {
        let path = self.view.path.clone();
        let path = &path;
        let txn = self.write_txn()?;
        let commit = self.commit + 1;
        // Reads only: on an error the transaction stays as it was, the batches before
        // this one in it.
        let planned = Tables::open(path, &txn).and_then(|t| {
            let ids = read(&self.view.ids);
            let before = TablesView {
                path,
                tables: &t,
                index: &self.docs,
                ids: &ids,
            };
            let rule = self.view.config.rule();
            decide::plan(&before, rule, now, self.next_id, self.max_matches, writes)
        });
        let plan = match planned {
            Ok(plan) => plan,
            Err(e) => {
                self.pending = Some(txn);
                return Err(e);
            }
        };
        if let Some(record) = record {
            // On failure the record is cut off (or the error says it may not be): the
            // batch stored nothing.
            if let Err(e) = self.log.append(record) {
                self.pending = Some(txn);
                return Err(e);
            }
        }
        // Past this point the batch may be durable whatever fails.
        let unsure = |e: StoreError| match record {
            Some(_) => StoreError::Unsure {
                path: path.clone(),
                detail: e.to_string(),
            },
            None => e,
        };
        let paragraphs = self.view.config.paragraphs;
        let removed = (|| {
            let mut t = Tables::open(path, &txn)?;
            let removed = carry_out(path, &mut t, &plan, paragraphs)?;
            let mut meta = db!(path, txn.open_table(META))?;
            db!(path, meta.insert("next_id", plan.next_id))?;
            db!(path, meta.insert("commit", commit))?;
            let mut log = db!(path, txn.open_table(REMOVED))?;
            for &(internal, ref paras) in &removed {
                db!(path, log.insert((commit, internal), paras.len() as u64))?;
            }
            Ok(removed)
        })()
        .map_err(unsure)?;
        if record.is_some() {
            // A batch applied in bulk or replayed returns after its commit (or before any
            // reader exists): only the service's batches need the overlay.
            let mut overlay = Overlay::clone(&self.view.overlay.load());
            overlay.add(&plan, paragraphs);
            self.view.overlay.store(Arc::new(overlay));
        }
        // After the overlay: a reader that finds an id in the map finds its row.
        set_ids(path, &mut write(&self.view.ids), &plan).map_err(unsure)?;
        // Every number the plan gave, in order (zeros for one it gave no document).
        let first = self.keys.len();
        let mut numbered = vec![[0u32; BANDS]; plan.next_id.saturating_sub(first) as usize];
        for step in &plan.steps {
            if let Step::Insert(put) = step {
                if let Some(slot) = put.internal.checked_sub(first) {
                    if let Some(keys) = numbered.get_mut(slot as usize) {
                        *keys = put.doc.signature.index_keys();
                    }
                }
            }
        }
        self.keys.append(first, &numbered).map_err(unsure)?;
        self.pending = Some(txn);
        self.next_id = plan.next_id;
        self.commit = commit;
        self.update_indexes(&plan, removed).map_err(unsure)?;
        Ok(plan.outcomes)
    }

    /// Brings the indexes up to a committed plan, which removed `removed` (documents and
    /// their paragraphs' index ids).
    fn update_indexes(&mut self, plan: &Plan, removed: Vec<(u64, Vec<u64>)>) -> Result<()> {
        let (docs, paras): (Vec<u64>, Vec<Vec<u64>>) = removed.into_iter().unzip();
        let paras: Vec<u64> = paras.into_iter().flatten().collect();
        self.docs.remove_bulk(&docs);
        if !paras.is_empty() {
            self.paras.remove_bulk(&paras);
        }
        // A document put and replaced within this batch never reaches them.
        let live: Vec<(u64, &Prepared)> = plan.survivors().map(|i| (i.internal, &*i.doc)).collect();
        let doc_keys: Vec<(u64, BandKeys)> = live
            .iter()
            .map(|(i, d)| (*i, d.signature.index_keys()))
            .collect();
        self.docs.insert_bulk(&doc_keys)?;
        if self.view.config.paragraphs {
            let para_keys: Vec<(u64, BandKeys)> = live
                .iter()
                .flat_map(|(i, d)| {
                    d.paragraphs
                        .iter()
                        .take(MAX_PARAGRAPHS as usize)
                        .enumerate()
                        .map(move |(p, (_, s))| (i * MAX_PARAGRAPHS + p as u64, s.index_keys()))
                })
                .collect();
            self.paras.insert_bulk(&para_keys)?;
        }
        Ok(())
    }

    /// Deletes every expired document; how many.
    pub fn sweep(&mut self) -> Result<usize> {
        self.refuse_if_broken()?;
        let path = self.view.path.clone();
        let now = self.view.clock.now();
        // Read in the writer's open transaction, which holds every batch: an id put
        // again since it expired names its new document only there.
        let ids: Result<Vec<String>> = guard(&path, || {
            let txn = self.write_txn()?;
            let read = (|| {
                let t = Tables::open(&path, &txn)?;
                let mut out = Vec::new();
                for row in db!(&path, t.expiry.range(..=(now, u64::MAX)))? {
                    let (key, _) = db!(&path, row)?;
                    let (_, internal) = key.value();
                    if let Some(id) =
                        packed::find(&path, &t.docs, internal, |row| Ok(row.id.to_string()))?
                    {
                        out.push(id);
                    }
                }
                Ok(out)
            })();
            self.pending = Some(txn);
            read
        });
        self.note_failure(&ids);
        let ids = ids?;
        let n = ids.len();
        if n > 0 {
            self.apply(ids.into_iter().map(|id| Write::Delete { id }).collect())?;
        }
        Ok(n)
    }

    /// How [`DocumentStore::open`] made the indexes.
    pub fn opened(&self) -> &Opened {
        &self.opened
    }

    /// [`DocumentStore::compact_index`] of the paragraphs' index alone: the one a snapshot
    /// saves in its form (the documents' index is built afresh from the keys file at each
    /// open, with no levels). What a load does before its snapshot: a service started on
    /// the store then goes longest before a rebuild of its own, which holds the old main
    /// part beside the new.
    pub fn compact_paragraphs(&mut self) -> bool {
        self.paras.compact()
    }

    /// Rebuilds the indexes' main parts now where their levels of recent writes hold at
    /// least half of what starts a rebuild ([`BandIndex::compact`]); says whether any was.
    pub fn compact_index(&mut self) -> bool {
        let docs = self.docs.compact();
        let paras = self.paras.compact();
        docs || paras
    }

    /// Writes a snapshot of the indexes beside the database, so that the next open reads
    /// it instead of rebuilding them: [`DocumentStore::begin_snapshot`], written here, then
    /// [`DocumentStore::snapshot_written`].
    pub fn save_snapshot(&mut self) -> Result<()> {
        let job = self.begin_snapshot()?;
        job.write()?;
        self.snapshot_written(&job)
    }

    /// The indexes as they are now, to write on another thread with
    /// [`SnapshotJob::write`] while writes go on (nothing is copied); then
    /// [`DocumentStore::snapshot_written`].
    pub fn begin_snapshot(&mut self) -> Result<SnapshotJob> {
        // A snapshot names a commit the database holds durably, for an open to catch up from.
        self.checkpoint()?;
        let path = self.view.path.clone();
        let instance = match self.instance {
            Some(i) => i,
            None => {
                let i = new_instance();
                guard(&path, || {
                    let txn = self.begin_write()?;
                    {
                        let mut meta = db!(&path, txn.open_table(META))?;
                        db!(&path, meta.insert("instance", i))?;
                        db!(&path, txn.open_table(REMOVED))?;
                    }
                    db!(&path, txn.commit())
                })?;
                self.instance = Some(i);
                i
            }
        };
        Ok(SnapshotJob {
            dir: path.parent().unwrap_or(Path::new(".")).to_path_buf(),
            header: snapshot::Header {
                instance,
                commit: self.commit,
                next_id: self.next_id,
                threshold_bits: self.view.config.threshold.get().to_bits(),
                paragraphs: self.view.config.paragraphs,
            },
            paras: self.paras.snapshot(),
            ids: write(&self.view.ids).frozen(),
        })
    }

    /// Whether the indexes changed since the snapshot on disk was taken (or there is none).
    pub fn snapshot_due(&self) -> bool {
        self.snapshot_commit != Some(self.commit)
    }

    /// Forgets the removals that `job`, now written, holds: the log keeps only what a
    /// later open must still apply.
    pub fn snapshot_written(&mut self, job: &SnapshotJob) -> Result<()> {
        self.refuse_if_broken()?;
        let path = self.view.path.clone();
        let through = job.header.commit;
        self.snapshot_commit = Some(through);
        let result = guard(&path, || {
            // In the open transaction (the batches since the snapshot began), made durable
            // with it.
            let txn = self.write_txn()?;
            let pruned: Result<()> = (|| {
                let mut log = db!(&path, txn.open_table(REMOVED))?;
                db!(&path, log.retain_in(..(through + 1, 0), |_, _| false))?;
                let mut meta = db!(&path, txn.open_table(META))?;
                let pruned = db!(&path, meta.get("snapshot_commit"))?.map_or(0, |v| v.value());
                db!(&path, meta.insert("snapshot_commit", pruned.max(through)))?;
                Ok(())
            })();
            self.pending = Some(txn);
            pruned?;
            self.commit_pending(true)
        });
        self.note_failure(&result);
        result
    }
}

/// The puts among `writes`: the documents they may add.
fn puts(writes: &[Write]) -> usize {
    writes
        .iter()
        .filter(|w| matches!(w, Write::Put { .. }))
        .count()
}

/// The tables a write changes.
struct Tables<'t> {
    docs: redb::Table<'t, u64, &'static [u8]>,
    paras: redb::Table<'t, u64, &'static [u8]>,
    expiry: redb::Table<'t, (u64, u64), ()>,
}

impl<'t> Tables<'t> {
    fn open(path: &Path, txn: &'t redb::WriteTransaction) -> Result<Tables<'t>> {
        Ok(Tables {
            docs: db!(path, txn.open_table(DOCS))?,
            paras: db!(path, txn.open_table(PARAS))?,
            expiry: db!(path, txn.open_table(EXPIRY))?,
        })
    }
}

/// The documents a write transaction holds before it changes anything, as the decision
/// sees them: ids and documents from its tables, candidates from the band index (which
/// the writer changes only after the commit).
struct TablesView<'a, 't> {
    path: &'a Path,
    tables: &'a Tables<'t>,
    index: &'a BandIndex,
    ids: &'a IdMap,
}

impl StoreView for TablesView<'_, '_> {
    fn id(&self, id: &str) -> Result<Option<u64>> {
        match self.ids.get(id) {
            None => Ok(None),
            Some(Found::Sure(internal)) => Ok(Some(internal)),
            Some(Found::Maybe(internal)) => {
                let named = packed::find(self.path, &self.tables.docs, internal, |row| {
                    Ok(row.id == id)
                })?;
                match named {
                    Some(true) => Ok(Some(internal)),
                    Some(false) => Ok(None),
                    None => Err(StoreError::Damaged {
                        path: self.path.to_path_buf(),
                        detail: format!("an id names document {internal}, which is missing"),
                    }),
                }
            }
        }
    }

    fn candidates(&self, keys: &BandKeys) -> Result<neardup::corpus::Candidates> {
        Ok(self.index.lookup(keys))
    }

    fn index_reader(&self) -> Option<BandIndexReader> {
        // The writer publishes every state it holds: a reader answers as `index` does.
        Some(self.index.reader())
    }

    fn document(&self, internal: u64) -> Result<Option<DocRecord>> {
        packed::find(self.path, &self.tables.docs, internal, |row| {
            Ok(DocRecord {
                id: row.id.to_string(),
                expires: row.expires,
                // The decision reads no band key of a stored document.
                signature: stored_signature_of(self.path, row.signature, [0; BANDS])?,
            })
        })
    }
}

/// Writes `plan`'s steps into the tables, in the plan's order (which numbers new
/// documents upwards); the documents it removed, each with the index ids of its
/// paragraphs. With `paragraphs`, a document's paragraphs are kept (up to
/// [`MAX_PARAGRAPHS`]). The ids are the id map's ([`set_ids`]).
fn carry_out(
    path: &Path,
    t: &mut Tables<'_>,
    plan: &Plan,
    paragraphs: bool,
) -> Result<Vec<(u64, Vec<u64>)>> {
    let mut removed = Vec::new();
    // The documents' rows of a run of puts go in together, each pack written once; a
    // removal (which may be of a document put just before) waits for them.
    let mut puts: Vec<(&Insert, [u8; Signature::STORED_BYTES])> = Vec::new();
    let put_rows = |t: &mut Tables<'_>,
                    puts: &mut Vec<(&Insert, [u8; Signature::STORED_BYTES])>| {
        let rows: Vec<packed::Row<'_>> = puts
            .iter()
            .map(|(put, sig)| packed::Row {
                internal: put.internal,
                id: &put.id,
                expires: put.expires,
                signature: sig,
            })
            .collect();
        packed::insert_all(path, &mut t.docs, &rows)?;
        puts.clear();
        Ok::<(), StoreError>(())
    };
    for step in &plan.steps {
        match step {
            Step::Remove { internal, .. } => {
                put_rows(t, &mut puts)?;
                removed.push(delete(path, t, *internal)?);
            }
            Step::Insert(put) => {
                let internal = put.internal;
                puts.push((put, put.doc.signature.to_stored_bytes()));
                let paras = &put.doc.paragraphs;
                let paras = if paragraphs {
                    &paras[..paras.len().min(MAX_PARAGRAPHS as usize)]
                } else {
                    &[][..]
                };
                if !paras.is_empty() {
                    db!(path, t.paras.insert(internal, &paragraphs_bytes(paras)[..]))?;
                }
                if put.expires != 0 {
                    db!(path, t.expiry.insert((put.expires, internal), ()))?;
                }
            }
        }
    }
    put_rows(t, &mut puts)?;
    Ok(removed)
}

/// `plan`'s steps in the id map, in order.
fn set_ids(path: &Path, ids: &mut IdMap, plan: &Plan) -> Result<()> {
    for step in &plan.steps {
        match step {
            Step::Remove { id, internal } => {
                if !ids.remove(id, *internal) {
                    return Err(StoreError::Damaged {
                        path: path.to_path_buf(),
                        detail: format!(
                            "id {id:?} names another document than {internal}, which the \
                             decision removed"
                        ),
                    });
                }
            }
            Step::Insert(put) => ids.insert(&put.id, put.internal),
        }
    }
    Ok(())
}

/// Deletes document `internal`'s rows: its internal id and the index ids of its
/// paragraphs.
fn delete(path: &Path, t: &mut Tables<'_>, internal: u64) -> Result<(u64, Vec<u64>)> {
    let expires = packed::remove(path, &mut t.docs, internal)?;
    let paras = db!(path, t.paras.remove(internal))?.map_or(0, |v| v.value().len() / PARA_BYTES);
    if let Some(e) = expires.filter(|&e| e != 0) {
        db!(path, t.expiry.remove((e, internal)))?;
    }
    let para_ids = (0..paras as u64)
        .map(|p| internal * MAX_PARAGRAPHS + p)
        .collect();
    Ok((internal, para_ids))
}

fn describe(c: &DocConfig) -> String {
    format!(
        "threshold {}, paragraphs {}",
        c.threshold,
        if c.paragraphs { "on" } else { "off" }
    )
}

impl Backend for DocumentStore {
    type Reader = DocumentReader;

    fn reader(&self) -> DocumentReader {
        DocumentStore::reader(self)
    }

    fn apply(&mut self, writes: Vec<Write>) -> Result<Vec<Outcome>> {
        DocumentStore::apply(self, writes)
    }

    fn sweep(&mut self) -> Result<usize> {
        DocumentStore::sweep(self)
    }

    fn len(&self) -> usize {
        DocumentStore::len(self)
    }

    fn config(&self) -> DocConfig {
        DocumentStore::config(self)
    }

    fn begin_snapshot(&mut self) -> Result<Option<SnapshotJob>> {
        DocumentStore::begin_snapshot(self).map(Some)
    }

    fn snapshot_written(&mut self, job: &SnapshotJob) -> Result<()> {
        DocumentStore::snapshot_written(self, job)
    }

    fn snapshot_due(&self) -> bool {
        DocumentStore::snapshot_due(self)
    }

    fn failure(&self) -> Option<String> {
        DocumentStore::failure(self).map(str::to_string)
    }

    fn limit_matches(&mut self, n: usize) {
        self.max_matches = n;
    }

    fn memory(&self) -> (u64, Option<u64>) {
        (DocumentStore::memory_needed(self), self.budget)
    }
}

impl BackendReader for DocumentReader {
    fn check(&self, doc: &Prepared) -> Result<Checked> {
        DocumentReader::check(self, doc)
    }

    fn check_text(&self, preparer: &Preparer, text: &str) -> Result<Checked> {
        DocumentReader::check_text(self, preparer, text)
    }

    fn check_paragraphs(&self, doc: &Prepared) -> Result<Vec<ParagraphHit>> {
        DocumentReader::check_paragraphs(self, doc)
    }

    fn get(&self, id: &str) -> Result<Option<StoredDoc>> {
        DocumentReader::get(self, id)
    }

    fn len(&self) -> usize {
        DocumentReader::len(self)
    }

    fn config(&self) -> DocConfig {
        DocumentReader::config(self)
    }
}
