//! [`DocStore`]: a durable corpus of documents that decides near-duplicates as `neardup
//! dedup` does — by the estimated Jaccard similarity of their word 5-shingle sets, at the
//! threshold the store was made with — for the service.
//!
//! Each document is kept as its [`Signature`] (sketch, band keys, simhash fingerprint,
//! text hash; 248 bytes), with its id and expiry, in redb; with paragraphs, each
//! paragraph's signature and span too. The band keys of every live document (and
//! paragraph) are indexed in memory ([`BandIndex`]), rebuilt when the store opens. A
//! query finds its candidates there, reads their signatures in a read transaction and
//! decides with [`Rule::matches`], so it answers exactly what batch deduplication would.
//!
//! Writes come in batches ([`DocStore::apply`]): one transaction, one fsync, for every
//! write of the batch, each decided in order against the store and the batch's earlier
//! writes — so a caller that queues concurrent requests and applies them together gets
//! group commit, and `only_if_unique` inserts stay atomic: of two near-identical documents
//! in one batch, only the first gets in. The fsync is of the write-ahead log
//! (`log.rs`): redb commits the batch without one, and a checkpoint now and then
//! makes many such commits durable at once.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use neardup::corpus::{BandIndex, BandIndexReader, IdHasher};
use neardup::decide::{Match, Rule, Signature};
use neardup::fingerprint::Fingerprinter;
use neardup::jaccard::{BandKeys, Threshold, BANDS, SKETCH_VERSION};
use redb::{Database, ReadableTable, TableDefinition};

use crate::file::{self, guard, Kind};
use crate::log::{Log, Writeback};
use crate::snapshot;
use crate::{db_err, open_error, Clock, Db, Result, StoreError, SystemClock, FILE};

/// The `format` setting of a document store (a fingerprint store's is [`crate::FORMAT`]).
pub const DOC_FORMAT: u64 = 100;

/// Settings by name: "format", "threshold" (the f64's bits), "paragraphs" (0 or 1),
/// "fingerprint_version", "sketch_version", "next_id"; and for index snapshots
/// ([`crate::snapshot`]) "instance" (random, made with the store), "commit" (write
/// transactions committed) and "snapshot_commit" (the commit the removal log is pruned to).
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// External id → internal id.
const IDS: TableDefinition<&str, u64> = TableDefinition::new("ids");
/// Internal id → (external id, expiry in Unix seconds or 0, signature bytes).
const DOCS: TableDefinition<u64, (&str, u64, &[u8])> = TableDefinition::new("docs");
/// Internal id → its paragraphs: per paragraph its start and end (u32, little-endian)
/// and its signature bytes.
const PARAS: TableDefinition<u64, &[u8]> = TableDefinition::new("paragraphs");
/// (expiry, internal id) of the documents that expire.
const EXPIRY: TableDefinition<(u64, u64), ()> = TableDefinition::new("expiry");
/// (commit, internal id) → paragraphs, of every document removed by that write
/// transaction: what an index snapshot taken before it must still remove
/// ([`crate::snapshot`]). Pruned up to a snapshot once it is durable.
const REMOVED: TableDefinition<(u64, u64), u64> = TableDefinition::new("removed");

/// Why a store of another version of the format is refused: what changed, and what to do.
/// Sketches do not keep their texts, so no store is migrated: they would be compared with
/// sketches of other words.
pub(crate) fn other_version(key: &str, have: u64, want: u64) -> String {
    let why = if key == "sketch_version" && have == 1 {
        " (its sketches take `\\w+` runs as words in every script; since version 2 each \
         character of Chinese, Japanese, Thai and the other scripts written without spaces \
         is a word)"
    } else {
        ""
    };
    format!(
        "{key} {have}; this neardup makes {want}{why}: make a new store and put the \
         documents again"
    )
}

/// Checkpoints at least this often while writes come ([`DocStore::with_checkpoint_every`]).
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Bytes of write-ahead log that make a checkpoint due however recent the last one.
const LOG_LIMIT: u64 = 64 << 20;

/// Paragraphs of a document that are indexed; a paragraph's index id is the document's
/// internal id times this, plus its position.
pub const MAX_PARAGRAPHS: u64 = 4096;
const PARA_BYTES: usize = 8 + Signature::BYTES;

/// What a document store is made with; recorded on disk, checked on every open.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DocConfig {
    /// Documents at or above this estimated Jaccard similarity are near-duplicates.
    pub threshold: Threshold,
    /// Whether paragraphs are indexed too, for [`DocStore::check_paragraphs`].
    pub paragraphs: bool,
}

impl DocConfig {
    /// The rule documents are decided by.
    pub fn rule(&self) -> Rule {
        Rule::Jaccard(self.threshold)
    }
}

/// A document made ready for the store: its signature and, in a store with paragraphs,
/// its paragraphs' spans and signatures. Made by [`Preparer::prepare`] on any thread.
#[derive(Clone, Debug, PartialEq)]
pub struct Prepared {
    /// The whole document's signature.
    pub signature: Signature,
    /// Its paragraphs (empty unless the store indexes them).
    pub paragraphs: Vec<(Range<u32>, Signature)>,
    /// Its length in bytes.
    pub len: u32,
}

/// Turns texts into [`Prepared`] documents for one store's settings; cheap to clone.
#[derive(Clone, Debug)]
pub struct Preparer {
    fingerprinter: Arc<Fingerprinter>,
    config: DocConfig,
}

impl Preparer {
    /// A preparer for a store with `config`.
    pub fn new(config: DocConfig) -> Preparer {
        Preparer {
            fingerprinter: Arc::new(Fingerprinter::default()),
            config,
        }
    }

    /// The document `text`, with its paragraphs when the store indexes them or
    /// `paragraphs` asks for them (a paragraph check of a store without them finds none).
    pub fn prepare(&self, text: &str, paragraphs: bool) -> Prepared {
        let banding = self.config.rule().banding();
        let paras = if self.config.paragraphs || paragraphs {
            Signature::paragraphs(&self.fingerprinter, banding, text)
                .into_iter()
                .map(|(span, sig)| (span.start as u32..span.end as u32, sig))
                .collect()
        } else {
            Vec::new()
        };
        Prepared {
            signature: Signature::of_text(&self.fingerprinter, banding, text),
            paragraphs: paras,
            len: u32::try_from(text.len()).unwrap_or(u32::MAX),
        }
    }

    /// The signature of `text` but its simhash fingerprint (left all zero): enough to
    /// find candidates; [`Preparer::complete`] adds the fingerprint when there are some.
    pub fn partial(&self, text: &str) -> Signature {
        Signature::without_fingerprint(self.config.rule().banding(), text)
    }

    /// Adds `text`'s simhash fingerprint to its [`Preparer::partial`] signature.
    pub fn complete(&self, sig: &mut Signature, text: &str) {
        sig.fingerprint = self.fingerprinter.fingerprint_wide(text);
    }

    /// A document known only by its signature (no paragraphs).
    pub fn from_signature(&self, signature: Signature) -> Prepared {
        Prepared {
            signature,
            paragraphs: Vec::new(),
            len: 0,
        }
    }
}

/// One write of a batch.
#[derive(Clone, Debug)]
pub enum Write {
    /// Stores a document under `id` (replacing what `id` held), expiring after `ttl`; with
    /// `only_if_unique`, only if no other stored document is its near-duplicate.
    Put {
        /// Its id.
        id: String,
        /// The document.
        doc: Box<Prepared>,
        /// Time to live.
        ttl: Option<Duration>,
        /// Refuse it when a near-duplicate is stored.
        only_if_unique: bool,
    },
    /// Removes `id`.
    Delete {
        /// Its id.
        id: String,
    },
}

/// A stored document near a query.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// Its id.
    pub id: String,
    /// Estimated Jaccard similarity to the query (1 for the same text).
    pub similarity: f32,
    /// 256-bit Hamming distance of the fingerprints.
    pub distance: u32,
}

/// What one write did.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// A put: whether the document was stored, whether it replaced one under its id, and
    /// the stored near-duplicates (for an `only_if_unique` put that was refused, the ones
    /// that refused it; otherwise those found when it was stored), most similar first.
    Put {
        /// It is stored now.
        inserted: bool,
        /// It replaced a document stored under its id.
        replaced: bool,
        /// Stored near-duplicates other than itself.
        matches: Vec<Hit>,
    },
    /// A delete: whether the id was stored.
    Delete {
        /// It was stored (and is no more).
        removed: bool,
    },
}

/// A paragraph of the query and the stored paragraph it is a near-duplicate of.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanMatch {
    /// The query paragraph's byte span.
    pub query: Range<u32>,
    /// The stored paragraph's byte span in its document.
    pub stored: Range<u32>,
    /// Their estimated Jaccard similarity.
    pub similarity: f32,
}

/// A stored document that shares near-duplicate paragraphs with a query.
#[derive(Clone, Debug, PartialEq)]
pub struct ParagraphHit {
    /// Its id.
    pub id: String,
    /// The share of the query's paragraph bytes in paragraphs it shares.
    pub coverage: f32,
    /// The query paragraphs it shares, each with its most similar stored paragraph.
    pub spans: Vec<SpanMatch>,
}

/// A stored document, as [`DocStore::get`] gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredDoc {
    /// Its id.
    pub id: String,
    /// Its signature.
    pub signature: Signature,
    /// When it expires, in Unix seconds, if it does.
    pub expires: Option<u64>,
    /// Paragraphs indexed.
    pub paragraphs: usize,
}

/// `?` on any redb error, naming the file.
macro_rules! db {
    ($path:expr, $e:expr) => {
        $e.map_err(|e| db_err($path)(e.into()))
    };
}

fn signature_of(path: &Path, bytes: &[u8]) -> Result<Signature> {
    let bytes: &[u8; Signature::BYTES] = bytes.try_into().map_err(|_| StoreError::Damaged {
        path: path.to_path_buf(),
        detail: format!(
            "a signature of {} bytes, not {}",
            bytes.len(),
            Signature::BYTES
        ),
    })?;
    Ok(Signature::from_bytes(bytes))
}

/// A batch as the write-ahead log keeps it: the commit it makes, the clock it was decided
/// at, and its writes, so that a replay decides exactly as the first time (expiry and
/// `only_if_unique` included). Paragraphs past [`MAX_PARAGRAPHS`], which no table or
/// index takes, and all of them when the store does not index paragraphs, are left out.
fn encode_batch(commit: u64, now: u64, writes: &[Write], paragraphs: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(BATCH_HEAD + writes.len() * (Signature::BYTES + 64));
    out.extend_from_slice(&commit.to_le_bytes());
    out.extend_from_slice(&now.to_le_bytes());
    out.extend_from_slice(&(writes.len() as u64).to_le_bytes());
    fn put_id(out: &mut Vec<u8>, id: &str) {
        out.extend_from_slice(&(id.len() as u64).to_le_bytes());
        out.extend_from_slice(id.as_bytes());
    }
    for write in writes {
        match write {
            Write::Delete { id } => {
                out.push(0);
                put_id(&mut out, id);
            }
            Write::Put {
                id,
                doc,
                ttl,
                only_if_unique,
            } => {
                out.push(1);
                put_id(&mut out, id);
                out.push(u8::from(*only_if_unique) | (u8::from(ttl.is_some()) << 1));
                let ttl = ttl.unwrap_or_default();
                out.extend_from_slice(&ttl.as_secs().to_le_bytes());
                out.extend_from_slice(&ttl.subsec_nanos().to_le_bytes());
                out.extend_from_slice(&doc.len.to_le_bytes());
                out.extend_from_slice(&doc.signature.to_bytes());
                let paras = if paragraphs {
                    &doc.paragraphs[..doc.paragraphs.len().min(MAX_PARAGRAPHS as usize)]
                } else {
                    &[][..]
                };
                let paras = paragraphs_bytes(paras);
                out.extend_from_slice(&(paras.len() as u64).to_le_bytes());
                out.extend_from_slice(&paras);
            }
        }
    }
    out
}

/// Bytes of a logged batch's head: its commit, clock and count of writes.
const BATCH_HEAD: usize = 24;

/// The commit a logged batch makes, its clock and how many writes it holds, read from its
/// head alone; `None` for a record too short to have one.
pub(crate) fn batch_head(bytes: &[u8]) -> Option<(u64, u64, u64)> {
    let mut r = Bytes(bytes.get(..BATCH_HEAD)?);
    Some((r.u64()?, r.u64()?, r.u64()?))
}

/// The error for a logged batch of the log at `path` that does not decode.
pub(crate) fn undecodable(path: &Path) -> StoreError {
    StoreError::Damaged {
        path: path.to_path_buf(),
        detail: "a logged batch of writes that does not decode".into(),
    }
}

/// A logged batch ([`encode_batch`]) read back: commit, clock and writes.
fn decode_batch(path: &Path, bytes: &[u8]) -> Result<(u64, u64, Vec<Write>)> {
    let damaged = || undecodable(path);
    let (commit, now, n) = batch_head(bytes).ok_or_else(damaged)?;
    let mut r = Bytes(&bytes[BATCH_HEAD..]);
    let mut writes = Vec::new();
    for _ in 0..n {
        let tag = r.take(1).ok_or_else(damaged)?[0];
        let id = r.string().ok_or_else(damaged)?;
        writes.push(match tag {
            0 => Write::Delete { id },
            1 => {
                let flags = r.take(1).ok_or_else(damaged)?[0];
                let secs = r.u64().ok_or_else(damaged)?;
                let nanos = r.u32().ok_or_else(damaged)?;
                let len = r.u32().ok_or_else(damaged)?;
                let signature = signature_of(path, r.take(Signature::BYTES).ok_or_else(damaged)?)?;
                let paras = r.u64().ok_or_else(damaged)?;
                let paras = usize::try_from(paras).map_err(|_| damaged())?;
                let paragraphs = paragraphs_of(path, r.take(paras).ok_or_else(damaged)?)?;
                if nanos >= 1_000_000_000 || flags > 3 {
                    return Err(damaged());
                }
                Write::Put {
                    id,
                    doc: Box::new(Prepared {
                        signature,
                        paragraphs,
                        len,
                    }),
                    ttl: (flags & 2 != 0).then(|| Duration::new(secs, nanos)),
                    only_if_unique: flags & 1 != 0,
                }
            }
            _ => return Err(damaged()),
        });
    }
    if !r.0.is_empty() {
        return Err(damaged());
    }
    Ok((commit, now, writes))
}

/// Bytes read from the front.
struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.u64()?).ok()?;
        String::from_utf8(self.take(len)?.to_vec()).ok()
    }
}

/// The paragraphs of a [`PARAS`] row.
fn paragraphs_of(path: &Path, bytes: &[u8]) -> Result<Vec<(Range<u32>, Signature)>> {
    // More than MAX_PARAGRAPHS would give paragraphs the index ids of the next document's.
    if !bytes.len().is_multiple_of(PARA_BYTES) || bytes.len() / PARA_BYTES > MAX_PARAGRAPHS as usize
    {
        return Err(StoreError::Damaged {
            path: path.to_path_buf(),
            detail: format!("a paragraph list of {} bytes", bytes.len()),
        });
    }
    bytes
        .chunks_exact(PARA_BYTES)
        .map(|c| {
            let start = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            let end = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
            Ok((start..end, signature_of(path, &c[8..])?))
        })
        .collect()
}

fn paragraphs_bytes(paras: &[(Range<u32>, Signature)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(paras.len() * PARA_BYTES);
    for (span, sig) in paras {
        out.extend_from_slice(&span.start.to_le_bytes());
        out.extend_from_slice(&span.end.to_le_bytes());
        out.extend_from_slice(&sig.to_bytes());
    }
    out
}

/// A stored document's id and paragraphs.
pub(crate) type StoredParagraphs = (String, Vec<(Range<u32>, Signature)>);

/// The paragraph check's decision, the same over every backend: per stored document,
/// each query paragraph's most similar near-duplicate among its paragraphs, and the share
/// of the query's paragraph bytes those cover; most covered first. `found[i]` names query
/// paragraph `i`'s candidates as (document, paragraph index); `stored` holds every
/// document named, `None` when it is gone or expired.
pub(crate) fn paragraph_hits(
    rule: Rule,
    paras: &[(Range<u32>, Signature)],
    found: &[Vec<(u64, usize)>],
    mut stored: HashMap<u64, Option<StoredParagraphs>>,
) -> Vec<ParagraphHit> {
    let mut by_doc: BTreeMap<u64, Vec<SpanMatch>> = BTreeMap::new();
    for ((span, sig), cands) in paras.iter().zip(found) {
        let mut best: HashMap<u64, SpanMatch> = HashMap::new();
        for &(doc, at) in cands {
            let Some(Some((_, list))) = stored.get(&doc) else {
                continue;
            };
            let Some((other_span, other)) = list.get(at) else {
                continue;
            };
            if let Some(m) = rule.decide(sig, other) {
                if best.get(&doc).is_none_or(|b| m.similarity > b.similarity) {
                    best.insert(
                        doc,
                        SpanMatch {
                            query: span.clone(),
                            stored: other_span.clone(),
                            similarity: m.similarity,
                        },
                    );
                }
            }
        }
        for (doc, m) in best {
            by_doc.entry(doc).or_default().push(m);
        }
    }
    let total: u64 = paras.iter().map(|(s, _)| u64::from(s.end - s.start)).sum();
    let mut out: Vec<ParagraphHit> = by_doc
        .into_iter()
        .filter_map(|(doc, spans)| {
            let (id, _) = stored.remove(&doc).flatten()?;
            let covered: u64 = spans
                .iter()
                .map(|s| u64::from(s.query.end - s.query.start))
                .sum();
            Some(ParagraphHit {
                id,
                coverage: (covered as f64 / total.max(1) as f64) as f32,
                spans,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.coverage
            .total_cmp(&a.coverage)
            .then_with(|| a.id.cmp(&b.id))
    });
    out
}

/// Whether an expiry (0 for none) has passed at `now`.
fn expired(expires: u64, now: u64) -> bool {
    expires != 0 && expires <= now
}

/// What queries need besides the indexes: the database, the settings, the clock.
#[derive(Clone)]
struct View {
    path: PathBuf,
    db: Arc<Db>,
    config: DocConfig,
    clock: Arc<dyn Clock>,
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
            let txn = db!(path, self.db.begin_read())?;
            let docs = db!(path, txn.open_table(DOCS))?;
            let mut candidates = Vec::with_capacity(ids.len());
            let mut names = HashMap::new();
            for &internal in ids {
                // Gone since the index was read: removed after this query began.
                let Some(row) = db!(path, docs.get(internal))? else {
                    continue;
                };
                let (id, expires, sig) = row.value();
                if expired(expires, now) {
                    continue;
                }
                candidates.push((internal, signature_of(path, sig)?));
                names.insert(internal, id.to_string());
            }
            Ok(self
                .config
                .rule()
                .matches(query, candidates)
                .into_iter()
                .filter_map(|(internal, m)| names.remove(&internal).map(|id| hit(id, m)))
                .collect())
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
            let txn = db!(path, self.db.begin_read())?;
            let docs = db!(path, txn.open_table(DOCS))?;
            let para_table = db!(path, txn.open_table(PARAS))?;
            // Per stored document a candidate names: its id and paragraphs, if it is live.
            let mut stored: HashMap<u64, Option<StoredParagraphs>> = HashMap::new();
            for &(internal, _) in found.iter().flatten() {
                if let std::collections::hash_map::Entry::Vacant(slot) = stored.entry(internal) {
                    let entry = match db!(path, docs.get(internal))? {
                        Some(row) if !expired(row.value().1, now) => {
                            let id = row.value().0.to_string();
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
            Ok(paragraph_hits(self.config.rule(), paras, &found, stored))
        })
    }

    fn get(&self, id: &str) -> Result<Option<StoredDoc>> {
        guard(&self.path, || {
            let path = &self.path;
            let now = self.clock.now();
            let txn = db!(path, self.db.begin_read())?;
            let ids = db!(path, txn.open_table(IDS))?;
            let Some(internal) = db!(path, ids.get(id))?.map(|v| v.value()) else {
                return Ok(None);
            };
            let docs = db!(path, txn.open_table(DOCS))?;
            let Some(row) = db!(path, docs.get(internal))? else {
                return Err(StoreError::Damaged {
                    path: path.clone(),
                    detail: format!("id {id:?} names document {internal}, which is missing"),
                });
            };
            let (_, expires, sig) = row.value();
            if expired(expires, now) {
                return Ok(None);
            }
            let paras = db!(path, txn.open_table(PARAS))?;
            let paragraphs = match db!(path, paras.get(internal))? {
                Some(p) => p.value().len() / PARA_BYTES,
                None => 0,
            };
            Ok(Some(StoredDoc {
                id: id.to_string(),
                signature: signature_of(path, sig)?,
                expires: (expires != 0).then_some(expires),
                paragraphs,
            }))
        })
    }
}

fn hit(id: String, m: Match) -> Hit {
    Hit {
        id,
        similarity: m.similarity,
        distance: m.distance,
    }
}

/// A durable corpus of documents with string ids, deciding near-duplicates at a Jaccard
/// threshold. The writer; [`DocStore::reader`] gives query handles for other threads.
pub struct DocStore {
    view: View,
    docs: BandIndex,
    paras: BandIndex,
    next_id: u64,
    /// Write transactions committed (the "commit" setting).
    commit: u64,
    /// The commit of the snapshot on disk, when it is known to be this store's.
    snapshot_commit: Option<u64>,
    /// The "instance" setting; stores made before snapshots get one with their first.
    instance: Option<u64>,
    opened: Opened,
    /// A call met damage (a panic in redb): the database may be in any state.
    broken: bool,
    /// Commits save redb's allocator state ([`DocStore::with_quick_repair`]).
    quick_repair: bool,
    /// Opening walked the whole file to repair it ([`DocStore::repaired`]).
    repaired: bool,
    /// Batches committed to redb without an fsync since the last checkpoint, durable here.
    log: Log,
    /// When the database was last made durable ([`DocStore::checkpoint`]).
    checkpointed: Instant,
    /// How long batches may wait in the log ([`DocStore::with_checkpoint_every`]).
    checkpoint_every: Duration,
    /// Batches the open replayed from the log ([`DocStore::replayed`]).
    replayed: usize,
    writeback: Writeback,
    /// The next checkpoint commits even with nothing logged: the durable commits'
    /// settings changed ([`DocStore::with_quick_repair`]).
    settle: bool,
}

impl Drop for DocStore {
    fn drop(&mut self) {
        // Best effort: what is not checkpointed is in the log, which the next open replays.
        let _ = self.checkpoint();
        if let Some(dir) = self.view.path.parent() {
            file::release(dir);
        }
    }
}

impl std::fmt::Debug for DocStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocStore")
            .field("path", &self.view.path)
            .field("len", &self.docs.len())
            .field("config", &self.view.config)
            .finish_non_exhaustive()
    }
}

/// Query handles on a [`DocStore`] for other threads; cheap to clone. They never wait for
/// the writer, and see each write once it returns.
#[derive(Clone)]
pub struct DocStoreReader {
    view: View,
    docs: BandIndexReader,
    paras: BandIndexReader,
}

impl std::fmt::Debug for DocStoreReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocStoreReader")
            .field("path", &self.view.path)
            .finish_non_exhaustive()
    }
}

impl DocStoreReader {
    /// As [`DocStore::check`].
    pub fn check(&self, doc: &Prepared) -> Result<Vec<Hit>> {
        let sig = &doc.signature;
        self.view
            .hits(sig, &self.docs.candidates(&sig.index_keys()))
    }

    /// As [`DocStore::check`] of `text` prepared by `preparer`, but the simhash
    /// fingerprint (which only the reported distances need) is computed only when the
    /// text has candidates: most texts checked have none.
    pub fn check_text(&self, preparer: &Preparer, text: &str) -> Result<Vec<Hit>> {
        let mut sig = preparer.partial(text);
        let found = self.docs.candidates(&sig.index_keys());
        if found.is_empty() {
            return Ok(Vec::new());
        }
        preparer.complete(&mut sig, text);
        self.view.hits(&sig, &found)
    }

    /// As [`DocStore::check_paragraphs`].
    pub fn check_paragraphs(&self, doc: &Prepared) -> Result<Vec<ParagraphHit>> {
        let found: Vec<Vec<u64>> = doc
            .paragraphs
            .iter()
            .map(|(_, s)| self.paras.candidates(&s.index_keys()))
            .collect();
        self.view.paragraph_hits(&doc.paragraphs, &found)
    }

    /// As [`DocStore::get`].
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

/// How [`DocStore::open`] made its indexes.
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

/// A random number for a new store's "instance" setting.
fn new_instance() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
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

/// The band keys of the documents numbered `from` on, checked against `next_id`.
fn doc_keys(
    path: &Path,
    txn: &redb::ReadTransaction,
    next_id: u64,
    from: u64,
) -> Result<Vec<(u64, BandKeys)>> {
    let table = db!(path, txn.open_table(DOCS))?;
    let mut keys = Vec::new();
    for row in db!(path, table.range(from..))? {
        let (internal, v) = db!(path, row)?;
        let internal = numbered(path, internal.value(), next_id, "document")?;
        keys.push((internal, signature_of(path, v.value().2)?.index_keys()));
    }
    Ok(keys)
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

/// The indexes of every stored document (and paragraph), built in one pass.
fn rebuild_indexes(
    path: &Path,
    txn: &redb::ReadTransaction,
    config: DocConfig,
    next_id: u64,
) -> Result<(BandIndex, BandIndex)> {
    let docs = BandIndex::from_docs(doc_keys(path, txn, next_id, 0)?)?;
    let paras = if config.paragraphs {
        BandIndex::from_docs(para_keys(path, txn, next_id, 0)?)?
    } else {
        BandIndex::new()
    };
    Ok((docs, paras))
}

/// The indexes of a snapshot brought up to the database's state: the removals logged
/// since it was taken, then the documents numbered since. How many of both.
fn catch_up(
    path: &Path,
    txn: &redb::ReadTransaction,
    config: DocConfig,
    next_id: u64,
    header: snapshot::Header,
    mut docs: BandIndex,
    mut paras: BandIndex,
) -> Result<(BandIndex, BandIndex, usize)> {
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
    docs.remove_bulk(&gone);
    paras.remove_bulk(&gone_paras);
    let added = doc_keys(path, txn, next_id, header.next_id)?;
    docs.insert_bulk(&added)?;
    if config.paragraphs {
        paras.insert_bulk(&para_keys(path, txn, next_id, header.next_id)?)?;
    }
    Ok((docs, paras, gone.len() + added.len()))
}

/// A document of the current batch: its internal id and signature, for the
/// `only_if_unique` checks of the batch's later puts.
struct Pending {
    internal: u64,
    signature: Signature,
    keys: BandKeys,
    name: String,
}

/// The puts of one write transaction so far, found by their band keys as the index finds
/// stored documents ([`BandIndex::candidates`]: a nonzero key agreeing in some band).
/// Comparing each put of a bulk request with every put before it cost a tenth of a core
/// at a thousand documents a request. The listings are chained in one vector rather than
/// kept in a vector per key: a map of vectors, and the puts in a B-tree, were a tenth of
/// the server's CPU in bulk inserts (twenty allocations a put, and moving 300-byte puts
/// about in the B-tree's nodes).
struct PendingPuts {
    /// The internal id of the transaction's first put: they are numbered from it, in order.
    first: u64,
    /// By internal id less `first`; `None` once deleted or replaced.
    puts: Vec<Option<Pending>>,
    /// `band << 32 | key` → its latest listing in `chain`.
    heads: HashMap<u64, u32, BuildHasherDefault<IdHasher>>,
    /// Per listing: the put (its index in `puts`) and the listing before it under the
    /// same band key ([`NO_LISTING`] for none).
    chain: Vec<(u32, u32)>,
}

/// The end of a chain of [`PendingPuts`] listings.
const NO_LISTING: u32 = u32::MAX;

impl PendingPuts {
    /// No puts yet; the first will be numbered `first`, and at most `puts` will come (a
    /// sweep's batch of deletes sizes nothing).
    fn new(first: u64, puts: usize) -> PendingPuts {
        PendingPuts {
            first,
            puts: Vec::with_capacity(puts),
            heads: HashMap::with_capacity_and_hasher(puts * BANDS, Default::default()),
            chain: Vec::with_capacity(puts * BANDS),
        }
    }

    /// Adds the next put: its internal id is the next after the puts so far.
    fn push(&mut self, p: Pending) {
        debug_assert_eq!(p.internal, self.first + self.puts.len() as u64);
        let at = self.puts.len() as u32;
        for (band, &key) in p.keys.iter().enumerate() {
            if key != 0 {
                let listing = self.chain.len() as u32;
                let before = self
                    .heads
                    .insert((band as u64) << 32 | u64::from(key), listing)
                    .unwrap_or(NO_LISTING);
                self.chain.push((at, before));
            }
        }
        self.puts.push(Some(p));
    }

    /// Forgets the put `internal` (no-op for a document stored before the transaction).
    fn remove(&mut self, internal: u64) {
        if let Some(slot) = internal
            .checked_sub(self.first)
            .and_then(|i| self.puts.get_mut(i as usize))
        {
            *slot = None;
        }
    }

    /// The puts sharing a band with `keys`, in the order they were put.
    fn sharing(&self, keys: &BandKeys) -> Vec<&Pending> {
        let mut at: Vec<u32> = Vec::new();
        for (band, &key) in keys.iter().enumerate() {
            if key == 0 {
                continue;
            }
            let mut listing = self
                .heads
                .get(&((band as u64) << 32 | u64::from(key)))
                .copied()
                .unwrap_or(NO_LISTING);
            while let Some(&(put, before)) = self.chain.get(listing as usize) {
                at.push(put);
                listing = before;
            }
        }
        at.sort_unstable();
        at.dedup();
        at.iter()
            .filter_map(|&i| self.puts.get(i as usize)?.as_ref())
            .collect()
    }
}

/// How a document store's database file is opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Bytes of redb's page cache; `None` for redb's default (1 GiB). Checks and commits
    /// read the B-tree pages through it, so a store larger than it reads from the kernel
    /// page by page.
    pub cache_bytes: Option<usize>,
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

impl DocStore {
    /// Makes a new document store in `dir` (created if missing), made aside and
    /// published whole as [`crate::Store::create`] does.
    pub fn create(dir: impl AsRef<Path>, config: DocConfig) -> Result<DocStore> {
        DocStore::create_with(dir, config, OpenOptions::default())
    }

    /// [`DocStore::create`] with `options`.
    pub fn create_with(
        dir: impl AsRef<Path>,
        config: DocConfig,
        options: OpenOptions,
    ) -> Result<DocStore> {
        let dir = dir.as_ref();
        let io = |source| StoreError::Io {
            path: dir.to_path_buf(),
            source,
        };
        let new_dir = !dir.exists();
        std::fs::create_dir_all(dir).map_err(io)?;
        let made = DocStore::create_in(dir, config, options);
        if made.is_err() && new_dir {
            let _ = std::fs::remove_dir(dir);
        }
        made
    }

    fn create_in(dir: &Path, config: DocConfig, options: OpenOptions) -> Result<DocStore> {
        let path = dir.join(FILE);
        file::remove_leftovers(dir);
        match file::inspect(&path) {
            Ok(Kind::Missing) => {}
            Ok(Kind::Unfinished) => {
                std::fs::remove_file(&path).map_err(|source| StoreError::Io {
                    path: path.clone(),
                    source,
                })?
            }
            _ => return Err(StoreError::Exists(dir.to_path_buf())),
        }
        let partial = file::aside(dir, "partial");
        let instance = new_instance();
        let made = (|| {
            let db = db!(&partial, options.builder().create(&partial))?;
            let txn = db!(&partial, db.begin_write())?;
            {
                let mut meta = db!(&partial, txn.open_table(META))?;
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
                    db!(&partial, meta.insert(k, v))?;
                }
                db!(&partial, txn.open_table(IDS))?;
                db!(&partial, txn.open_table(DOCS))?;
                db!(&partial, txn.open_table(PARAS))?;
                db!(&partial, txn.open_table(EXPIRY))?;
                db!(&partial, txn.open_table(REMOVED))?;
            }
            db!(&partial, txn.commit())?;
            Ok(db)
        })();
        let db = match made {
            Ok(db) => db,
            Err(e) => {
                let _ = std::fs::remove_file(&partial);
                return Err(e);
            }
        };
        match file::publish(&partial, &path) {
            Ok(true) => {}
            Ok(false) => return Err(StoreError::Exists(dir.to_path_buf())),
            Err(source) => {
                let _ = std::fs::remove_file(&partial);
                return Err(StoreError::Io { path, source });
            }
        }
        file::claim(dir);
        let log = Log::create(dir)?;
        let writeback = Writeback::start(&path);
        Ok(DocStore {
            view: View {
                path,
                db: Arc::new(Db(Some(db))),
                config,
                clock: Arc::new(SystemClock),
            },
            docs: BandIndex::new(),
            paras: BandIndex::new(),
            next_id: 0,
            commit: 0,
            snapshot_commit: None,
            instance: Some(instance),
            opened: Opened::Created,
            broken: false,
            quick_repair: false,
            repaired: false,
            log,
            checkpointed: Instant::now(),
            checkpoint_every: CHECKPOINT_EVERY,
            replayed: 0,
            writeback,
            settle: false,
        })
    }

    /// Opens the document store in `dir` and rebuilds its indexes. With `expect`, its
    /// settings must be those on disk.
    pub fn open(dir: impl AsRef<Path>, expect: Option<DocConfig>) -> Result<DocStore> {
        DocStore::open_with(dir, expect, OpenOptions::default())
    }

    /// [`DocStore::open`] with `options`.
    pub fn open_with(
        dir: impl AsRef<Path>,
        expect: Option<DocConfig>,
        options: OpenOptions,
    ) -> Result<DocStore> {
        file::open_store(dir.as_ref(), |dir, path| {
            DocStore::open_file(dir, path, expect, options)
        })
    }

    fn open_file(
        dir: &Path,
        path: &Path,
        expect: Option<DocConfig>,
        options: OpenOptions,
    ) -> Result<DocStore> {
        let path = path.to_path_buf();
        // redb calls this only when it must walk the whole file to repair it: the last
        // commit before an unclean stop was not a quick-repair one.
        let repaired = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = Arc::clone(&repaired);
        let mut builder = options.builder();
        builder
            .set_repair_callback(move |_| seen.store(true, std::sync::atomic::Ordering::Relaxed));
        let db = file::open_db(&builder, &path).map_err(|e| open_error(dir, &path, e))?;
        let repaired = repaired.load(std::sync::atomic::Ordering::Relaxed);
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
        let (docs, paras, opened) = match snapshot::read(dir, usable) {
            Ok(Some((header, docs, paras))) => {
                let (docs, paras, caught_up) =
                    catch_up(&path, &txn, config, next_id, header, docs, paras)?;
                snapshot_commit = Some(header.commit);
                (docs, paras, Opened::Snapshot { caught_up })
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
                let (docs, paras) = rebuild_indexes(&path, &txn, config, next_id)?;
                (docs, paras, Opened::Rebuilt { why })
            }
        };
        drop(meta);
        drop(txn);
        let (log, records) = Log::open(dir)?;
        let writeback = Writeback::start(&path);
        let mut store = DocStore {
            view: View {
                path,
                db: Arc::new(Db(Some(db))),
                config,
                clock: Arc::new(SystemClock),
            },
            docs,
            paras,
            next_id,
            commit,
            snapshot_commit,
            instance,
            opened,
            broken: false,
            quick_repair: false,
            repaired,
            log,
            checkpointed: Instant::now(),
            checkpoint_every: CHECKPOINT_EVERY,
            replayed: 0,
            writeback,
            settle: false,
        };
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
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> DocStore {
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
    /// [`DocStore::checkpoint`]): an open after a crash is quick when the last checkpoint
    /// before it was made this way.
    pub fn with_quick_repair(mut self, on: bool) -> DocStore {
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
    pub fn with_checkpoint_every(mut self, every: Duration) -> DocStore {
        self.checkpoint_every = every;
        self
    }

    /// Batches of writes that opening the store replayed from the write-ahead log: those
    /// acknowledged but not yet checkpointed when the last process stopped.
    pub fn replayed(&self) -> usize {
        self.replayed
    }

    /// Makes every write so far durable in the database file itself, and empties the
    /// write-ahead log. Done now and then by [`DocStore::apply`], before a snapshot and
    /// when the store is dropped; a caller may do it when idle.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.refuse_if_broken()?;
        let path = self.view.path.clone();
        let result = guard(&path, || self.checkpoint_now());
        if matches!(result, Err(StoreError::Damaged { .. })) {
            self.broken = true;
        }
        result
    }

    fn checkpoint_due(&self) -> bool {
        self.settle
            || self.log.bytes() >= LOG_LIMIT
            || (self.log.bytes() > 0 && self.checkpointed.elapsed() >= self.checkpoint_every)
    }

    fn checkpoint_now(&mut self) -> Result<()> {
        if self.log.bytes() > 0 || self.settle {
            let path = &self.view.path;
            // An empty transaction, durable: redb's commit makes the non-durable ones
            // before it durable with it.
            let txn = self.begin_write()?;
            db!(path, txn.commit())?;
            self.log.clear()?;
            self.settle = false;
        }
        self.checkpointed = Instant::now();
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

    /// Bytes of memory held by the in-memory indexes.
    pub fn heap_bytes(&self) -> usize {
        self.docs.heap_bytes() + self.paras.heap_bytes()
    }

    /// A query handle for other threads.
    pub fn reader(&self) -> DocStoreReader {
        DocStoreReader {
            view: self.view.clone(),
            docs: self.docs.reader(),
            paras: self.paras.reader(),
        }
    }

    /// The stored near-duplicates of `doc` (live ones), most similar first.
    pub fn check(&self, doc: &Prepared) -> Result<Vec<Hit>> {
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

    fn refuse_if_broken(&self) -> Result<()> {
        if self.broken {
            return Err(StoreError::Damaged {
                path: self.view.path.clone(),
                detail: "an earlier call met damage in it; see `neardup index check`".into(),
            });
        }
        Ok(())
    }

    /// Applies `writes` in order, in one transaction, durable (its record fsynced in the
    /// write-ahead log) before the indexes change and before it returns; what each did, in
    /// order. A put of a text
    /// without words matches only its copies.
    pub fn apply(&mut self, writes: Vec<Write>) -> Result<Vec<Outcome>> {
        self.refuse_if_broken()?;
        let path = self.view.path.clone();
        let result = guard(&path, || self.apply_unguarded(writes));
        if matches!(result, Err(StoreError::Damaged { .. })) {
            self.broken = true;
        }
        result
    }

    fn apply_unguarded(&mut self, writes: Vec<Write>) -> Result<Vec<Outcome>> {
        if self.checkpoint_due() {
            self.checkpoint_now()?;
        }
        let now = self.view.clock.now();
        let record = encode_batch(self.commit + 1, now, &writes, self.view.config.paragraphs);
        self.decide(writes, now, Some(&record))
    }

    /// Decides and commits `writes` at `now` as commit `self.commit + 1`: to redb without
    /// an fsync, after `record` (the batch as the log keeps it; none when replaying it) is
    /// durable in the log. Then the indexes.
    fn decide(
        &mut self,
        writes: Vec<Write>,
        now: u64,
        record: Option<&[u8]>,
    ) -> Result<Vec<Outcome>> {
        let path = self.view.path.clone();
        let path = &path;
        let rule = self.view.config.rule();
        let mut txn = self.begin_write()?;
        txn.set_durability(redb::Durability::None);
        let mut outcomes = Vec::with_capacity(writes.len());
        // Index changes, applied after the commit.
        let mut removed: Vec<u64> = Vec::new();
        let mut removed_counts: Vec<u64> = Vec::new();
        let mut removed_paras: Vec<u64> = Vec::new();
        let commit = self.commit + 1;
        let mut added: Vec<(u64, Prepared)> = Vec::new();
        let mut next_id = self.next_id;
        let puts = writes
            .iter()
            .filter(|w| matches!(w, Write::Put { .. }))
            .count();
        let mut pending = PendingPuts::new(next_id, puts);
        {
            let mut t = Tables {
                ids: db!(path, txn.open_table(IDS))?,
                docs: db!(path, txn.open_table(DOCS))?,
                paras: db!(path, txn.open_table(PARAS))?,
                expiry: db!(path, txn.open_table(EXPIRY))?,
            };
            for write in writes {
                match write {
                    Write::Delete { id } => {
                        let gone = delete(path, &mut t, &id)?;
                        let was = gone.is_some();
                        if let Some((internal, para_ids)) = gone {
                            removed.push(internal);
                            removed_counts.push(para_ids.len() as u64);
                            removed_paras.extend(para_ids);
                            pending.remove(internal);
                        }
                        outcomes.push(Outcome::Delete { removed: was });
                    }
                    Write::Put {
                        id,
                        doc,
                        ttl,
                        only_if_unique,
                    } => {
                        let sig = doc.signature;
                        let keys = sig.index_keys();
                        let own = db!(path, t.ids.get(id.as_str()))?.map(|v| v.value());
                        // The near-duplicates stored now: in the index (as this
                        // transaction sees them) and among this batch's puts, each
                        // found by its band keys alike.
                        let found = self.docs.candidates(&keys);
                        let mut candidates = Vec::with_capacity(found.len());
                        let mut names = HashMap::new();
                        for internal in found.into_iter().filter(|&i| Some(i) != own) {
                            if let Some(row) = db!(path, t.docs.get(internal))? {
                                let (name, expires, bytes) = row.value();
                                if !expired(expires, now) {
                                    candidates.push((internal, signature_of(path, bytes)?));
                                    names.insert(internal, name.to_string());
                                }
                            }
                        }
                        for p in pending
                            .sharing(&keys)
                            .into_iter()
                            .filter(|p| Some(p.internal) != own)
                        {
                            if let std::collections::hash_map::Entry::Vacant(slot) =
                                names.entry(p.internal)
                            {
                                candidates.push((p.internal, p.signature));
                                slot.insert(p.name.clone());
                            }
                        }
                        let matches: Vec<Hit> = rule
                            .matches(&sig, candidates)
                            .into_iter()
                            .filter_map(|(i, m)| names.remove(&i).map(|n| hit(n, m)))
                            .collect();
                        if only_if_unique && !matches.is_empty() {
                            outcomes.push(Outcome::Put {
                                inserted: false,
                                replaced: false,
                                matches,
                            });
                            continue;
                        }
                        // `own` was read in this transaction: without it, there is nothing
                        // to delete, and no second search of the ids.
                        let old = match own {
                            Some(_) => delete(path, &mut t, &id)?,
                            None => None,
                        };
                        let replaced = old.is_some();
                        if let Some((internal, para_ids)) = old {
                            removed.push(internal);
                            removed_counts.push(para_ids.len() as u64);
                            removed_paras.extend(para_ids);
                            pending.remove(internal);
                        }
                        // Whole seconds, rounded up; a zero ttl is expired at once.
                        let expires = ttl.map_or(0, |t| {
                            now.saturating_add(t.as_secs() + u64::from(t.subsec_nanos() > 0))
                                .max(1)
                        });
                        let internal = next_id;
                        next_id += 1;
                        db!(path, t.ids.insert(id.as_str(), internal))?;
                        db!(
                            path,
                            t.docs
                                .insert(internal, (id.as_str(), expires, &sig.to_bytes()[..]))
                        )?;
                        let paragraphs = if self.view.config.paragraphs {
                            &doc.paragraphs[..doc.paragraphs.len().min(MAX_PARAGRAPHS as usize)]
                        } else {
                            &[][..]
                        };
                        if !paragraphs.is_empty() {
                            db!(
                                path,
                                t.paras.insert(internal, &paragraphs_bytes(paragraphs)[..])
                            )?;
                        }
                        if expires != 0 {
                            db!(path, t.expiry.insert((expires, internal), ()))?;
                        }
                        pending.push(Pending {
                            internal,
                            signature: sig,
                            keys,
                            name: id,
                        });
                        added.push((internal, *doc));
                        outcomes.push(Outcome::Put {
                            inserted: true,
                            replaced,
                            matches,
                        });
                    }
                }
            }
            let mut meta = db!(path, txn.open_table(META))?;
            db!(path, meta.insert("next_id", next_id))?;
            db!(path, meta.insert("commit", commit))?;
            let mut log = db!(path, txn.open_table(REMOVED))?;
            for (&internal, &count) in removed.iter().zip(&removed_counts) {
                db!(path, log.insert((commit, internal), count))?;
            }
        }
        if let Some(record) = record {
            // On failure the transaction is dropped, undone.
            self.log.append(record)?;
        }
        db!(path, txn.commit())?;
        self.writeback.committed();
        // Durable: now the indexes. A document put and replaced within this batch never
        // reaches them.
        self.next_id = next_id;
        self.commit = commit;
        let gone: std::collections::HashSet<u64> = removed.iter().copied().collect();
        self.docs.remove_bulk(&removed);
        if !removed_paras.is_empty() {
            self.paras.remove_bulk(&removed_paras);
        }
        let live: Vec<&(u64, Prepared)> = added.iter().filter(|(i, _)| !gone.contains(i)).collect();
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
        Ok(outcomes)
    }

    /// Deletes every expired document; how many.
    pub fn sweep(&mut self) -> Result<usize> {
        self.refuse_if_broken()?;
        let path = self.view.path.clone();
        let now = self.view.clock.now();
        let ids: Vec<String> = guard(&path, || {
            let txn = db!(&path, self.view.db.begin_read())?;
            let expiry = db!(&path, txn.open_table(EXPIRY))?;
            let docs = db!(&path, txn.open_table(DOCS))?;
            let mut out = Vec::new();
            for row in db!(&path, expiry.range(..=(now, u64::MAX)))? {
                let (key, _) = db!(&path, row)?;
                let (_, internal) = key.value();
                if let Some(doc) = db!(&path, docs.get(internal))? {
                    out.push(doc.value().0.to_string());
                }
            }
            Ok(out)
        })?;
        let n = ids.len();
        if n > 0 {
            self.apply(ids.into_iter().map(|id| Write::Delete { id }).collect())?;
        }
        Ok(n)
    }

    /// How [`DocStore::open`] made the indexes.
    pub fn opened(&self) -> &Opened {
        &self.opened
    }

    /// Writes a snapshot of the indexes beside the database, so that the next open reads
    /// it instead of rebuilding them: [`DocStore::begin_snapshot`], written here, then
    /// [`DocStore::snapshot_written`].
    pub fn save_snapshot(&mut self) -> Result<()> {
        let job = self.begin_snapshot()?;
        job.write()?;
        self.snapshot_written(&job)
    }

    /// The indexes as they are now, to write on another thread with
    /// [`SnapshotJob::write`] while writes go on (nothing is copied); then
    /// [`DocStore::snapshot_written`].
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
            docs: self.docs.snapshot(),
            paras: self.paras.snapshot(),
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
        guard(&path, || {
            let txn = self.begin_write()?;
            {
                let mut log = db!(&path, txn.open_table(REMOVED))?;
                db!(&path, log.retain_in(..(through + 1, 0), |_, _| false))?;
                let mut meta = db!(&path, txn.open_table(META))?;
                let pruned = db!(&path, meta.get("snapshot_commit"))?.map_or(0, |v| v.value());
                db!(&path, meta.insert("snapshot_commit", pruned.max(through)))?;
            }
            db!(&path, txn.commit())
        })
    }
}

/// A snapshot of a [`DocStore`]'s indexes being written ([`DocStore::begin_snapshot`]).
#[derive(Debug)]
pub struct SnapshotJob {
    dir: PathBuf,
    header: snapshot::Header,
    docs: neardup::corpus::BandSnapshot,
    paras: neardup::corpus::BandSnapshot,
}

impl SnapshotJob {
    /// Writes it, durably, in place of the last one; on any thread.
    pub fn write(&self) -> Result<()> {
        snapshot::write(&self.dir, self.header, &self.docs, &self.paras).map_err(|source| {
            StoreError::Io {
                path: snapshot::path(&self.dir),
                source,
            }
        })
    }

    /// Documents it holds.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether it holds no document.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }
}

/// The tables a write changes.
struct Tables<'t> {
    ids: redb::Table<'t, &'static str, u64>,
    docs: redb::Table<'t, u64, (&'static str, u64, &'static [u8])>,
    paras: redb::Table<'t, u64, &'static [u8]>,
    expiry: redb::Table<'t, (u64, u64), ()>,
}

/// Deletes `id`'s rows; if it was stored, its internal id and the index ids of its
/// paragraphs.
fn delete(path: &Path, t: &mut Tables<'_>, id: &str) -> Result<Option<(u64, Vec<u64>)>> {
    let Some(internal) = db!(path, t.ids.remove(id))?.map(|v| v.value()) else {
        return Ok(None);
    };
    let expires = db!(path, t.docs.remove(internal))?.map(|v| v.value().1);
    let paras = db!(path, t.paras.remove(internal))?.map_or(0, |v| v.value().len() / PARA_BYTES);
    if let Some(e) = expires.filter(|&e| e != 0) {
        db!(path, t.expiry.remove((e, internal)))?;
    }
    let para_ids = (0..paras as u64)
        .map(|p| internal * MAX_PARAGRAPHS + p)
        .collect();
    Ok(Some((internal, para_ids)))
}

fn describe(c: &DocConfig) -> String {
    format!(
        "threshold {}, paragraphs {}",
        c.threshold,
        if c.paragraphs { "on" } else { "off" }
    )
}

/// A stored document as [`crate::check`] and [`crate::repair`] read it: its rows, kept
/// as bytes (a repair writes them back as they were).
pub(crate) struct DocRow {
    id: String,
    expires: u64,
    signature: Vec<u8>,
    paragraphs: Option<Vec<u8>>,
}

/// What can be read of a document store's file (a copy of it, after redb's own check):
/// its settings and every document whose row reads whole.
#[derive(Default)]
pub(crate) struct DocRows {
    /// Every setting of the "meta" table, as stored.
    meta: Vec<(String, u64)>,
    /// Documents by internal id.
    docs: BTreeMap<u64, DocRow>,
    /// Whether every row of the documents table was read.
    pub(crate) complete: bool,
}

impl DocRows {
    /// Documents read.
    pub(crate) fn len(&self) -> usize {
        self.docs.len()
    }

    /// The batches of the write-ahead log in `dir` past this file's last durable commit,
    /// and their writes: acknowledged, and applied by the next open (which replays them).
    pub(crate) fn logged(&self, dir: &Path) -> Result<(u64, u64)> {
        let committed = self.setting("commit").unwrap_or(0);
        let mut pending = (0, 0);
        for record in crate::log::read_records(dir)? {
            let (commit, _, writes) =
                batch_head(&record).ok_or_else(|| undecodable(&dir.join(crate::log::LOG_FILE)))?;
            if commit > committed {
                pending.0 += 1;
                pending.1 += writes;
            }
        }
        Ok(pending)
    }

    fn setting(&self, key: &str) -> Option<u64> {
        self.meta.iter().find(|(k, _)| k == key).map(|&(_, v)| v)
    }

    /// The settings a repaired store is made with, when they are all there and make a
    /// document store of this version; else what is wrong.
    pub(crate) fn settings(&self) -> std::result::Result<DocConfig, String> {
        for key in [
            "format",
            "threshold",
            "paragraphs",
            "fingerprint_version",
            "sketch_version",
            "next_id",
        ] {
            if self.setting(key).is_none() {
                return Err(format!("setting \"{key}\" is missing"));
            }
        }
        let versions = [
            (
                "fingerprint_version",
                u64::from(neardup::fingerprint::VERSION),
            ),
            ("sketch_version", u64::from(SKETCH_VERSION)),
        ];
        for (key, want) in versions {
            let have = self.setting(key).unwrap_or(0);
            if have != want {
                return Err(other_version(key, have, want));
            }
        }
        let bits = self.setting("threshold").unwrap_or(0);
        let threshold =
            Threshold::new(f64::from_bits(bits)).map_err(|e| format!("its threshold: {e}"))?;
        Ok(DocConfig {
            threshold,
            paragraphs: self.setting("paragraphs") != Some(0),
        })
    }
}

/// Reads a document store's tables in `txn` (of the copy at `copy`) into `rows`: the
/// documents first, as they are what a repair keeps (a row whose signature has the wrong
/// length is not kept); then the id, paragraph and expiry tables, checked against them.
/// Every inconsistency goes to `note`.
pub(crate) fn read_rows(
    copy: &Path,
    txn: &redb::ReadTransaction,
    rows: &mut DocRows,
    note: &mut dyn FnMut(String),
) -> Result<()> {
    let meta = db!(copy, txn.open_table(META))?;
    for row in db!(copy, meta.iter())? {
        let (key, value) = db!(copy, row)?;
        rows.meta.push((key.value().to_string(), value.value()));
    }
    if let Err(why) = rows.settings() {
        note(format!("its settings (table \"meta\"): {why}"));
    }
    let next_id = rows.setting("next_id");
    let docs = db!(copy, txn.open_table(DOCS))?;
    let mut by_id: HashMap<String, u64> = HashMap::new();
    for row in db!(copy, docs.iter())? {
        let (internal, v) = db!(copy, row)?;
        let internal = internal.value();
        let (id, expires, signature) = v.value();
        if signature.len() != Signature::BYTES {
            note(format!(
                "document \"{id}\" ({internal}) has a signature of {} bytes, not {}: not kept",
                signature.len(),
                Signature::BYTES
            ));
            continue;
        }
        if let Some(n) = next_id.filter(|&n| internal >= n) {
            note(format!(
                "document \"{id}\" is numbered {internal}, past next_id {n}"
            ));
        }
        if let Some(other) = by_id.insert(id.to_string(), internal) {
            note(format!(
                "documents {other} and {internal} are both \"{id}\" (the later is kept)"
            ));
            rows.docs.remove(&other);
        }
        rows.docs.insert(
            internal,
            DocRow {
                id: id.to_string(),
                expires,
                signature: signature.to_vec(),
                paragraphs: None,
            },
        );
    }
    rows.complete = true;

    let ids = db!(copy, txn.open_table(IDS))?;
    let mut named = std::collections::HashSet::new();
    for row in db!(copy, ids.iter())? {
        let (id, internal) = db!(copy, row)?;
        let (id, internal) = (id.value(), internal.value());
        match rows.docs.get(&internal) {
            Some(doc) if doc.id == id => {
                named.insert(internal);
            }
            Some(doc) => note(format!(
                "id \"{id}\" names document {internal}, which is \"{}\"",
                doc.id
            )),
            None => note(format!(
                "id \"{id}\" names document {internal}, which is missing"
            )),
        }
    }
    for (internal, doc) in &rows.docs {
        if !named.contains(internal) {
            note(format!(
                "document \"{}\" ({internal}) is missing from the id table",
                doc.id
            ));
        }
    }
    let paras = db!(copy, txn.open_table(PARAS))?;
    for row in db!(copy, paras.iter())? {
        let (internal, bytes) = db!(copy, row)?;
        let (internal, bytes) = (internal.value(), bytes.value());
        if !bytes.len().is_multiple_of(PARA_BYTES)
            || bytes.len() / PARA_BYTES > MAX_PARAGRAPHS as usize
        {
            note(format!(
                "document {internal}'s paragraph list has {} bytes, not a multiple of \
                 {PARA_BYTES} up to {MAX_PARAGRAPHS} paragraphs: not kept",
                bytes.len()
            ));
            continue;
        }
        match rows.docs.get_mut(&internal) {
            Some(doc) => doc.paragraphs = Some(bytes.to_vec()),
            None => note(format!(
                "paragraphs of document {internal}, which is missing"
            )),
        }
    }
    let expiry = db!(copy, txn.open_table(EXPIRY))?;
    let mut timed = std::collections::HashSet::new();
    for row in db!(copy, expiry.iter())? {
        let (key, _) = db!(copy, row)?;
        let (at, internal) = key.value();
        match rows.docs.get(&internal) {
            Some(doc) if doc.expires == at => {
                timed.insert(internal);
            }
            other => note(format!(
                "an expiry ({at}) for document {internal}, which has {}",
                other.map_or("none".to_string(), |d| d.expires.to_string())
            )),
        }
    }
    for (internal, doc) in &rows.docs {
        if doc.expires != 0 && !timed.contains(internal) {
            note(format!("document {internal}'s expiry is not indexed"));
        }
    }
    Ok(())
}

/// A new document store file at `path` holding `rows` with their settings, the documents
/// numbered afresh in their order (a damaged number could be past next_id, or overflow
/// the paragraphs' index ids).
pub(crate) fn rebuild(path: &Path, rows: &DocRows) -> Result<()> {
    let db = db!(path, Database::create(path))?;
    let txn = db!(path, db.begin_write())?;
    {
        let mut meta = db!(path, txn.open_table(META))?;
        for (key, value) in &rows.meta {
            // Documents are numbered afresh: an index snapshot of the old file is not
            // of this one.
            if !matches!(
                key.as_str(),
                "next_id" | "instance" | "commit" | "snapshot_commit"
            ) {
                db!(path, meta.insert(key.as_str(), *value))?;
            }
        }
        db!(path, meta.insert("next_id", rows.docs.len() as u64))?;
        db!(path, meta.insert("instance", new_instance()))?;
        db!(path, meta.insert("commit", 0))?;
        db!(path, meta.insert("snapshot_commit", 0))?;
        let mut ids = db!(path, txn.open_table(IDS))?;
        let mut docs = db!(path, txn.open_table(DOCS))?;
        let mut paras = db!(path, txn.open_table(PARAS))?;
        let mut expiry = db!(path, txn.open_table(EXPIRY))?;
        db!(path, txn.open_table(REMOVED))?;
        for (internal, doc) in (0u64..).zip(rows.docs.values()) {
            db!(path, ids.insert(doc.id.as_str(), internal))?;
            db!(
                path,
                docs.insert(internal, (doc.id.as_str(), doc.expires, &doc.signature[..]))
            )?;
            if let Some(p) = &doc.paragraphs {
                db!(path, paras.insert(internal, &p[..]))?;
            }
            if doc.expires != 0 {
                db!(path, expiry.insert((doc.expires, internal), ()))?;
            }
        }
    }
    db!(path, txn.commit())
}
