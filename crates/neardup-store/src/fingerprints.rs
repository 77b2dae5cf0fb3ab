//! [`FingerprintStore`]: the durable corpus of the fingerprint model — documents known by
//! their 64-bit simhash fingerprints, matched within a Hamming distance — in an embedded
//! redb database, in one data directory; the tables in memory
//! ([`neardup::corpus::Corpus`]), rebuilt when the directory is opened.
//!
//! Every acknowledged write is on disk first: each call is one redb transaction committed
//! with fsync before the in-memory tables change and before it returns (bulk calls commit
//! once for all their documents). A document may carry a time to live: once expired it
//! stops matching at once, and [`FingerprintStore::sweep`] deletes it.
//!
//! [`FingerprintStore::reader`] hands out query handles for other threads. Readers never
//! wait for the writer: they query the corpus's latest snapshot and read ids and expiries
//! in a redb read transaction, which sees the last commit.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use neardup::corpus::{Corpus, CorpusReader};
use neardup::tables::Blocks;
use redb::{Database, ReadableTable, ReadableTableMetadata, TableDefinition};

use crate::clock::{expires_at, Clock, SystemClock};
use crate::dir::FORMAT;
use crate::error::{db, Result, StoreError};
use crate::file::{self, guard, open_error, Db};

/// Settings, by name: "format", "blocks", "distance", "fingerprint_version", "next_id".
pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// External id → (internal id, fingerprint, expiry in Unix seconds or 0 for none).
pub(crate) const DOCS: TableDefinition<&str, (u64, u64, u64)> = TableDefinition::new("docs");
/// Internal id → external id.
pub(crate) const NAMES: TableDefinition<u64, &str> = TableDefinition::new("names");
/// Internal id → expiry in Unix seconds, for the documents that have one (from format 2).
pub(crate) const EXPIRES: TableDefinition<u64, u64> = TableDefinition::new("expires");

/// What a store is made with; recorded on disk and checked on every open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// Blocks per fingerprint (`Auto`: the corpus planner's choice for `expected`, then
    /// fixed).
    pub blocks: Blocks,
    /// Largest distance matched.
    pub distance: u32,
    /// The fingerprint format of what is stored (`neardup::fingerprint::VERSION`, or any
    /// number the caller uses to tell its configurations apart).
    pub fingerprint_version: u32,
}

/// A durable corpus of documents with string ids.
pub struct FingerprintStore {
    path: PathBuf,
    db: Arc<Db>,
    corpus: Corpus,
    next_id: u64,
    config: StoreConfig,
    clock: Arc<dyn Clock>,
    /// A call met damage (a panic in redb): the database may be in any state.
    broken: bool,
}

impl Drop for FingerprintStore {
    fn drop(&mut self) {
        if let Some(dir) = self.path.parent() {
            file::release(dir);
        }
    }
}

/// A stored document, as [`FingerprintStore::records`] and [`export`](crate::export) give it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its id.
    pub id: String,
    /// Its fingerprint.
    pub fingerprint: u64,
    /// When it expires, in Unix seconds, if it does.
    pub expires: Option<u64>,
}

impl std::fmt::Debug for FingerprintStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FingerprintStore")
            .field("path", &self.path)
            .field("len", &self.corpus.len())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The settings' first check, before anything is made on disk.
fn check_settings(config: &StoreConfig) -> Result<()> {
    if config.distance > 63 {
        return Err(StoreError::Setting(format!(
            "distance {} is more than 63: a store finds fingerprints within the distance in a \
             layout of at most 64 blocks, one more than the distance",
            config.distance
        )));
    }
    Ok(())
}

impl FingerprintStore {
    /// Makes a new store in `dir` (created if missing), for about `expected` documents.
    ///
    /// The database is made aside under a temporary name, committed (fsync) and only then
    /// given its name: a crash leaves no store or a whole one, never a half-made one.
    /// Settings that cannot make a store are refused before anything is made.
    pub fn create(
        dir: impl AsRef<Path>,
        config: StoreConfig,
        expected: usize,
    ) -> Result<FingerprintStore> {
        check_settings(&config)?;
        let corpus = Corpus::new(config.blocks, config.distance, expected)?;
        let blocks = corpus.layout().blocks();
        let init = |partial: &Path, txn: &redb::WriteTransaction| {
            let mut meta = db!(partial, txn.open_table(META))?;
            for (k, v) in [
                ("format", FORMAT),
                ("blocks", blocks as u64),
                ("distance", u64::from(config.distance)),
                ("fingerprint_version", u64::from(config.fingerprint_version)),
                ("next_id", 0),
            ] {
                db!(partial, meta.insert(k, v))?;
            }
            db!(partial, txn.open_table(DOCS))?;
            db!(partial, txn.open_table(NAMES))?;
            db!(partial, txn.open_table(EXPIRES))?;
            Ok(())
        };
        let open = |_: &Path, path: PathBuf, db: Database| {
            Ok(FingerprintStore {
                path,
                db: Arc::new(Db::new(db)),
                corpus,
                next_id: 0,
                config: StoreConfig {
                    blocks: Blocks::Fixed(blocks),
                    ..config
                },
                clock: Arc::new(SystemClock),
                broken: false,
            })
        };
        file::create_store(dir.as_ref(), &Database::builder(), init, open)
    }

    /// Opens the store in `dir` and rebuilds its tables. With `expect`, its distance,
    /// fingerprint version and (unless `Auto`) blocks must be those on disk.
    ///
    /// A damaged file is a [`StoreError::Damaged`] naming what is wrong
    /// ([`check`](crate::check), [`repair`](crate::repair()) and [`export`](crate::export)
    /// save what can be saved); a directory another `FingerprintStore`
    /// holds is [`StoreError::InUse`].
    pub fn open(dir: impl AsRef<Path>, expect: Option<StoreConfig>) -> Result<FingerprintStore> {
        file::open_store(dir.as_ref(), |dir, path| {
            FingerprintStore::open_file(dir, path, expect)
        })
    }

    fn open_file(dir: &Path, path: &Path, expect: Option<StoreConfig>) -> Result<FingerprintStore> {
        let path = path.to_path_buf();
        let db =
            file::open_db(&Database::builder(), &path).map_err(|e| open_error(dir, &path, e))?;
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
        if format == 1 {
            drop(meta);
            drop(txn);
            upgrade_from_1(&db, &path)?;
            drop(db);
            return FingerprintStore::open_file(dir, &path, expect);
        }
        if crate::dir::is_doc_format(format) {
            return Err(StoreError::Foreign {
                path: path.clone(),
                detail:
                    "a document store, made by `neardup serve --create`: serve it, or export it"
                        .into(),
            });
        }
        if format != FORMAT {
            return Err(StoreError::Foreign {
                path: path.clone(),
                detail: format!("store format {format}, this neardup reads {FORMAT}"),
            });
        }
        let small = |key: &str| -> Result<u32> {
            u32::try_from(get(key)?).map_err(|_| StoreError::Foreign {
                path: path.clone(),
                detail: format!("setting \"{key}\" is out of range"),
            })
        };
        let stored = StoreConfig {
            blocks: Blocks::Fixed(small("blocks")? as usize),
            distance: small("distance")?,
            fingerprint_version: small("fingerprint_version")?,
        };
        if let Some(want) = expect {
            let blocks_ok = want.blocks == Blocks::Auto || want.blocks == stored.blocks;
            if !blocks_ok
                || want.distance != stored.distance
                || want.fingerprint_version != stored.fingerprint_version
            {
                return Err(StoreError::Mismatch {
                    path: path.clone(),
                    stored: describe(&stored),
                    requested: describe(&want),
                });
            }
        }
        let next_id = get("next_id")?;
        let docs_table = db!(&path, txn.open_table(DOCS))?;
        let mut docs = Vec::with_capacity(db!(&path, docs_table.len())? as usize);
        for row in db!(&path, docs_table.iter())? {
            let (_, v) = db!(&path, row)?;
            let (internal, fp, _) = v.value();
            if internal >= next_id {
                return Err(StoreError::Damaged {
                    path: path.clone(),
                    detail: format!("document {internal} is numbered past next_id {next_id}"),
                });
            }
            docs.push((internal, fp));
        }
        let mut corpus = Corpus::new(stored.blocks, stored.distance, docs.len()).map_err(|e| {
            StoreError::Foreign {
                path: path.clone(),
                detail: format!("its settings make no layout: {e}"),
            }
        })?;
        corpus.insert_bulk(&docs)?;
        drop(docs_table);
        drop(meta);
        drop(txn);
        Ok(FingerprintStore {
            path,
            db: Arc::new(Db::new(db)),
            corpus,
            next_id,
            config: stored,
            clock: Arc::new(SystemClock),
            broken: false,
        })
    }

    /// Runs `f` on the store, unless an earlier call met damage; a panic inside (redb on
    /// damage it cannot report) becomes [`StoreError::Damaged`], and the store refuses
    /// every call after it.
    fn guarded<T>(&mut self, f: impl FnOnce(&mut FingerprintStore) -> Result<T>) -> Result<T> {
        if self.broken {
            return Err(StoreError::Damaged {
                path: self.path.clone(),
                detail: "an earlier call met damage in it; see `neardup index check`".into(),
            });
        }
        let path = self.path.clone();
        let result = guard(&path, || f(self));
        if matches!(result, Err(StoreError::Damaged { .. })) {
            self.broken = true;
        }
        result
    }

    /// Uses `clock` for expiry instead of the system clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> FingerprintStore {
        self.clock = clock;
        self
    }

    /// The settings on disk (blocks as fixed when the store was made).
    pub fn config(&self) -> StoreConfig {
        self.config
    }

    /// Documents stored (expired ones included until swept).
    pub fn len(&self) -> usize {
        self.corpus.len()
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.corpus.is_empty()
    }

    /// Bytes of memory held by the in-memory tables ([`Corpus::heap_bytes`]).
    pub fn heap_bytes(&self) -> usize {
        self.corpus.heap_bytes()
    }

    /// Stores `id` with fingerprint `fp`, expiring after `ttl` if given; an id already
    /// stored is replaced (its old fingerprint no longer matches), and that fingerprint is
    /// returned. Durable when it returns.
    pub fn insert(&mut self, id: &str, fp: u64, ttl: Option<Duration>) -> Result<Option<u64>> {
        let mut old = None;
        self.insert_bulk(&[(id, fp, ttl)], |replaced| old = replaced)?;
        Ok(old)
    }

    /// Stores every `(id, fingerprint, ttl)` in one transaction (a later copy of an id
    /// wins); `replaced` hears, per document in order, the fingerprint it replaced.
    pub fn insert_bulk(
        &mut self,
        docs: &[(&str, u64, Option<Duration>)],
        replaced: impl FnMut(Option<u64>),
    ) -> Result<()> {
        self.guarded(|store| store.insert_bulk_unguarded(docs, replaced))
    }

    fn insert_bulk_unguarded(
        &mut self,
        docs: &[(&str, u64, Option<Duration>)],
        mut replaced: impl FnMut(Option<u64>),
    ) -> Result<()> {
        let now = self.clock.now();
        let path = self.path.clone();
        let txn = db!(&path, self.db.begin_write())?;
        // Per document: (internal id it replaced, its new internal id, fingerprint).
        let mut changes: Vec<(Option<u64>, u64, u64)> = Vec::with_capacity(docs.len());
        let mut next_id = self.next_id;
        {
            let mut table = db!(&path, txn.open_table(DOCS))?;
            let mut names = db!(&path, txn.open_table(NAMES))?;
            let mut expiries = db!(&path, txn.open_table(EXPIRES))?;
            for &(id, fp, ttl) in docs {
                let expires = expires_at(now, ttl);
                let internal = next_id;
                next_id += 1;
                let previous =
                    db!(&path, table.insert(id, (internal, fp, expires)))?.map(|v| v.value());
                if let Some((old_internal, old_fp, old_expires)) = previous {
                    db!(&path, names.remove(old_internal))?;
                    if old_expires != 0 {
                        db!(&path, expiries.remove(old_internal))?;
                    }
                    changes.push((Some(old_internal), internal, fp));
                    replaced(Some(old_fp));
                } else {
                    changes.push((None, internal, fp));
                    replaced(None);
                }
                db!(&path, names.insert(internal, id))?;
                if expires != 0 {
                    db!(&path, expiries.insert(internal, expires))?;
                }
            }
            let mut meta = db!(&path, txn.open_table(META))?;
            db!(&path, meta.insert("next_id", next_id))?;
        }
        db!(&path, txn.commit())?;
        // On disk: now the tables. A document replaced within this same call never
        // reaches them.
        self.next_id = next_id;
        let gone: std::collections::HashSet<u64> = changes.iter().filter_map(|c| c.0).collect();
        let mut added = Vec::with_capacity(changes.len());
        for &(old, internal, fp) in &changes {
            if let Some(old) = old {
                self.corpus.remove(old);
            }
            if !gone.contains(&internal) {
                added.push((internal, fp));
            }
        }
        self.corpus.insert_bulk(&added)?;
        Ok(())
    }

    /// Removes `id`; `false` if it was not stored. Durable when it returns.
    pub fn remove(&mut self, id: &str) -> Result<bool> {
        Ok(self.remove_bulk(&[id])? == 1)
    }

    /// Removes every id in one transaction; returns how many were stored (unknown ids are
    /// skipped, not errors).
    pub fn remove_bulk(&mut self, ids: &[&str]) -> Result<usize> {
        self.guarded(|store| store.remove_bulk_unguarded(ids))
    }

    fn remove_bulk_unguarded(&mut self, ids: &[&str]) -> Result<usize> {
        let path = self.path.clone();
        let txn = db!(&path, self.db.begin_write())?;
        let mut gone = Vec::new();
        {
            let mut table = db!(&path, txn.open_table(DOCS))?;
            let mut names = db!(&path, txn.open_table(NAMES))?;
            let mut expiries = db!(&path, txn.open_table(EXPIRES))?;
            for &id in ids {
                if let Some(v) = db!(&path, table.remove(id))? {
                    let (internal, _, expires) = v.value();
                    db!(&path, names.remove(internal))?;
                    if expires != 0 {
                        db!(&path, expiries.remove(internal))?;
                    }
                    gone.push(internal);
                }
            }
        }
        db!(&path, txn.commit())?;
        self.corpus.remove_bulk(&gone);
        Ok(gone.len())
    }

    /// Every live document within the distance of `fp`, as `(id, distance)`, by distance
    /// then id.
    pub fn find_all(&self, fp: u64) -> Result<Vec<(String, u32)>> {
        if self.broken {
            return Err(StoreError::Damaged {
                path: self.path.clone(),
                detail: "an earlier call met damage in it; see `neardup index check`".into(),
            });
        }
        self.view().find_all(&self.corpus.find_all(fp), true)
    }

    /// The nearest live document within the distance of `fp` (the smallest id among
    /// equals), or `None`.
    pub fn find_first(&self, fp: u64) -> Result<Option<(String, u32)>> {
        Ok(self.find_all(fp)?.into_iter().next())
    }

    /// A query handle for other threads: it sees each write once the write returns.
    pub fn reader(&self) -> FingerprintReader {
        FingerprintReader {
            view: self.view(),
            corpus: self.corpus.reader(),
        }
    }

    fn view(&self) -> View {
        View {
            path: self.path.clone(),
            db: Arc::clone(&self.db),
            clock: Arc::clone(&self.clock),
        }
    }

    /// Every stored id with its fingerprint, in id order (expired ones until swept).
    pub fn documents(&self) -> Result<Vec<(String, u64)>> {
        Ok(self
            .records()?
            .into_iter()
            .map(|r| (r.id, r.fingerprint))
            .collect())
    }

    /// Every stored document with its fingerprint and expiry, in id order (expired ones
    /// until swept).
    pub fn records(&self) -> Result<Vec<Record>> {
        let path = &self.path;
        guard(path, || {
            let txn = db!(path, self.db.begin_read())?;
            let docs = db!(path, txn.open_table(DOCS))?;
            let mut out = Vec::with_capacity(self.len());
            for row in db!(path, docs.iter())? {
                let (id, v) = db!(path, row)?;
                let (_, fingerprint, expires) = v.value();
                out.push(Record {
                    id: id.value().to_string(),
                    fingerprint,
                    expires: (expires != 0).then_some(expires),
                });
            }
            Ok(out)
        })
    }

    /// Deletes every expired document; returns how many.
    pub fn sweep(&mut self) -> Result<usize> {
        self.guarded(FingerprintStore::sweep_unguarded)
    }

    fn sweep_unguarded(&mut self) -> Result<usize> {
        let now = self.clock.now();
        let path = &self.path;
        let txn = db!(path, self.db.begin_read())?;
        let expiries = db!(path, txn.open_table(EXPIRES))?;
        let names = db!(path, txn.open_table(NAMES))?;
        let mut expired = Vec::new();
        for row in db!(path, expiries.iter())? {
            let (internal, at) = db!(path, row)?;
            if at.value() <= now {
                expired.push(name_of(path, &names, internal.value())?);
            }
        }
        drop((expiries, names, txn));
        let ids: Vec<&str> = expired.iter().map(String::as_str).collect();
        self.remove_bulk_unguarded(&ids)
    }
}

/// Queries on a [`FingerprintStore`] from another thread; cheap to clone.
#[derive(Clone)]
pub struct FingerprintReader {
    view: View,
    corpus: CorpusReader,
}

impl std::fmt::Debug for FingerprintReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FingerprintReader")
            .field("path", &self.view.path)
            .finish_non_exhaustive()
    }
}

impl FingerprintReader {
    /// As [`FingerprintStore::find_all`].
    pub fn find_all(&self, fp: u64) -> Result<Vec<(String, u32)>> {
        // A match whose id is gone was removed after the corpus snapshot was taken.
        self.view.find_all(&self.corpus.find_all(fp), false)
    }

    /// As [`FingerprintStore::find_first`].
    pub fn find_first(&self, fp: u64) -> Result<Option<(String, u32)>> {
        Ok(self.find_all(fp)?.into_iter().next())
    }

    /// Documents stored, as of now (expired ones included until swept).
    pub fn len(&self) -> usize {
        self.corpus.len()
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a query needs besides the corpus: the database, for ids and expiries.
#[derive(Clone)]
struct View {
    path: PathBuf,
    db: Arc<Db>,
    clock: Arc<dyn Clock>,
}

impl View {
    /// The live ones of `hits` (internal id, distance) with their external ids, by distance
    /// then id. With `strict`, a hit without an id is damage; otherwise it was removed
    /// since the hits were found, and is skipped.
    fn find_all(&self, hits: &[(u64, u32)], strict: bool) -> Result<Vec<(String, u32)>> {
        if hits.is_empty() {
            return Ok(Vec::new());
        }
        guard(&self.path, || self.find_all_unguarded(hits, strict))
    }

    fn find_all_unguarded(&self, hits: &[(u64, u32)], strict: bool) -> Result<Vec<(String, u32)>> {
        let path = &self.path;
        let now = self.clock.now();
        let txn = db!(path, self.db.begin_read())?;
        let names = db!(path, txn.open_table(NAMES))?;
        let expiries = db!(path, txn.open_table(EXPIRES))?;
        let mut out = Vec::with_capacity(hits.len());
        for &(internal, d) in hits {
            if db!(path, expiries.get(internal))?.is_some_and(|at| at.value() <= now) {
                continue;
            }
            match db!(path, names.get(internal))? {
                Some(name) => out.push((name.value().to_string(), d)),
                None if !strict => {}
                None => return Err(damaged(path, internal)),
            }
        }
        out.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        Ok(out)
    }
}

/// The external id of `internal`.
fn name_of(path: &Path, names: &redb::ReadOnlyTable<u64, &str>, internal: u64) -> Result<String> {
    match db!(path, names.get(internal))? {
        Some(name) => Ok(name.value().to_string()),
        None => Err(damaged(path, internal)),
    }
}

fn damaged(path: &Path, internal: u64) -> StoreError {
    StoreError::Damaged {
        path: path.to_path_buf(),
        detail: format!("document {internal} has no id"),
    }
}

/// Adds the expiry table of format 2 to a format-1 store.
fn upgrade_from_1(db: &Database, path: &Path) -> Result<()> {
    let txn = db!(path, db.begin_write())?;
    {
        let docs = db!(path, txn.open_table(DOCS))?;
        let mut expiries = db!(path, txn.open_table(EXPIRES))?;
        for row in db!(path, docs.iter())? {
            let (_, v) = db!(path, row)?;
            let (internal, _, expires) = v.value();
            if expires != 0 {
                db!(path, expiries.insert(internal, expires))?;
            }
        }
        let mut meta = db!(path, txn.open_table(META))?;
        db!(path, meta.insert("format", FORMAT))?;
    }
    db!(path, txn.commit())
}

pub(crate) fn describe(c: &StoreConfig) -> String {
    format!(
        "blocks {}, distance {}, fingerprint version {}",
        c.blocks, c.distance, c.fingerprint_version
    )
}
