//! The durable corpus: documents in an embedded redb database, in one data directory; the
//! tables in memory ([`neardup::corpus::Corpus`]), rebuilt when the directory is opened.
//!
//! Every acknowledged write is on disk first: each call is one redb transaction committed
//! with fsync before the in-memory tables change and before it returns (bulk calls commit
//! once for all their documents). A document may carry a time to live: once expired it
//! stops matching at once, and [`Store::sweep`] deletes it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use neardup::corpus::Corpus;
use neardup::tables::Blocks;
use redb::{Database, ReadableTable, TableDefinition};

/// The database file inside a data directory.
pub const FILE: &str = "neardup.redb";

/// Version of the store's on-disk layout.
pub const FORMAT: u64 = 1;

/// Settings, by name: "format", "blocks", "distance", "fingerprint_version", "next_id".
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// External id → (internal id, fingerprint, expiry in Unix seconds or 0 for none).
const DOCS: TableDefinition<&str, (u64, u64, u64)> = TableDefinition::new("docs");
/// Internal id → external id.
const NAMES: TableDefinition<u64, &str> = TableDefinition::new("names");

/// What can go wrong with a data directory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database failed (I/O, or a damaged file).
    #[error("{}: {source}", path.display())]
    Db {
        /// The database file.
        path: PathBuf,
        /// What redb said (boxed: it is large, and errors are rare).
        source: Box<redb::Error>,
    },
    /// The directory holds no store.
    #[error("{}: not a neardup data directory (no {FILE})", .0.display())]
    NotAStore(PathBuf),
    /// `create` on a directory that already holds a store.
    #[error("{}: already a neardup data directory", .0.display())]
    Exists(PathBuf),
    /// The file is a database, but not one of ours, or of another format.
    #[error("{}: {detail}", path.display())]
    Foreign {
        /// The database file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Opened with settings other than those it was made with.
    #[error("{}: made with {stored}, opened with {requested}", path.display())]
    Mismatch {
        /// The database file.
        path: PathBuf,
        /// The settings on disk.
        stored: String,
        /// The settings asked for.
        requested: String,
    },
    /// A layout the core refuses.
    #[error(transparent)]
    Core(#[from] neardup::Error),
    /// The directory cannot be made.
    #[error("{}: {source}", path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// `Result` with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

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

/// The time, in Unix seconds: injectable, so expiry can be tested without waiting.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> u64;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

/// A durable corpus of documents with string ids.
pub struct Store {
    path: PathBuf,
    db: Database,
    corpus: Corpus,
    /// Internal id → expiry, for the documents that have one.
    expiry: HashMap<u64, u64>,
    next_id: u64,
    config: StoreConfig,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .field("len", &self.corpus.len())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn db_err(path: &Path) -> impl Fn(redb::Error) -> StoreError + '_ {
    move |source| StoreError::Db {
        path: path.to_path_buf(),
        source: Box::new(source),
    }
}

/// `?` on any redb error, naming the file.
macro_rules! db {
    ($path:expr, $e:expr) => {
        $e.map_err(|e| db_err($path)(e.into()))
    };
}

impl Store {
    /// Makes a new store in `dir` (created if missing), for about `expected` documents.
    pub fn create(dir: impl AsRef<Path>, config: StoreConfig, expected: usize) -> Result<Store> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(FILE);
        if path.exists() {
            return Err(StoreError::Exists(dir.to_path_buf()));
        }
        let corpus = Corpus::new(config.blocks, config.distance, expected)?;
        let blocks = corpus.layout().blocks();
        let db = db!(&path, Database::create(&path))?;
        let txn = db!(&path, db.begin_write())?;
        {
            let mut meta = db!(&path, txn.open_table(META))?;
            for (k, v) in [
                ("format", FORMAT),
                ("blocks", blocks as u64),
                ("distance", u64::from(config.distance)),
                ("fingerprint_version", u64::from(config.fingerprint_version)),
                ("next_id", 0),
            ] {
                db!(&path, meta.insert(k, v))?;
            }
            db!(&path, txn.open_table(DOCS))?;
            db!(&path, txn.open_table(NAMES))?;
        }
        db!(&path, txn.commit())?;
        Ok(Store {
            path,
            db,
            corpus,
            expiry: HashMap::new(),
            next_id: 0,
            config: StoreConfig {
                blocks: Blocks::Fixed(blocks),
                ..config
            },
            clock: Arc::new(SystemClock),
        })
    }

    /// Opens the store in `dir` and rebuilds its tables. With `expect`, its distance,
    /// fingerprint version and (unless `Auto`) blocks must be those on disk.
    pub fn open(dir: impl AsRef<Path>, expect: Option<StoreConfig>) -> Result<Store> {
        let dir = dir.as_ref();
        let path = dir.join(FILE);
        if !path.is_file() {
            return Err(StoreError::NotAStore(dir.to_path_buf()));
        }
        let db = Database::open(&path).map_err(|e| StoreError::Foreign {
            path: path.clone(),
            detail: format!("not readable as a neardup store: {e}"),
        })?;
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
        let mut docs = Vec::new();
        let mut expiry = HashMap::new();
        for row in db!(&path, docs_table.iter())? {
            let (_, v) = db!(&path, row)?;
            let (internal, fp, expires) = v.value();
            docs.push((internal, fp));
            if expires != 0 {
                expiry.insert(internal, expires);
            }
        }
        let mut corpus = Corpus::new(stored.blocks, stored.distance, docs.len())?;
        corpus.insert_bulk(&docs)?;
        drop(docs_table);
        drop(meta);
        drop(txn);
        Ok(Store {
            path,
            db,
            corpus,
            expiry,
            next_id,
            config: stored,
            clock: Arc::new(SystemClock),
        })
    }

    /// Uses `clock` for expiry instead of the system clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Store {
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
        mut replaced: impl FnMut(Option<u64>),
    ) -> Result<()> {
        let now = self.clock.now();
        let path = self.path.clone();
        let txn = db!(&path, self.db.begin_write())?;
        // Per document: (internal id it replaced, its new internal id, fingerprint, expiry).
        let mut changes: Vec<(Option<u64>, u64, u64, u64)> = Vec::with_capacity(docs.len());
        let mut next_id = self.next_id;
        {
            let mut table = db!(&path, txn.open_table(DOCS))?;
            let mut names = db!(&path, txn.open_table(NAMES))?;
            for &(id, fp, ttl) in docs {
                // Whole seconds, rounded up; a zero ttl is expired at once.
                let expires = ttl.map_or(0, |t| {
                    now.saturating_add(t.as_secs() + u64::from(t.subsec_nanos() > 0))
                        .max(1)
                });
                let internal = next_id;
                next_id += 1;
                let previous =
                    db!(&path, table.insert(id, (internal, fp, expires)))?.map(|v| v.value());
                if let Some((old_internal, old_fp, _)) = previous {
                    db!(&path, names.remove(old_internal))?;
                    changes.push((Some(old_internal), internal, fp, expires));
                    replaced(Some(old_fp));
                } else {
                    changes.push((None, internal, fp, expires));
                    replaced(None);
                }
                db!(&path, names.insert(internal, id))?;
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
        for &(old, internal, fp, expires) in &changes {
            if let Some(old) = old {
                self.corpus.remove(old);
                self.expiry.remove(&old);
            }
            if !gone.contains(&internal) {
                added.push((internal, fp));
                if expires != 0 {
                    self.expiry.insert(internal, expires);
                }
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
        let path = self.path.clone();
        let txn = db!(&path, self.db.begin_write())?;
        let mut gone = Vec::new();
        {
            let mut table = db!(&path, txn.open_table(DOCS))?;
            let mut names = db!(&path, txn.open_table(NAMES))?;
            for &id in ids {
                if let Some(v) = db!(&path, table.remove(id))? {
                    let (internal, _, _) = v.value();
                    db!(&path, names.remove(internal))?;
                    gone.push(internal);
                }
            }
        }
        db!(&path, txn.commit())?;
        for internal in &gone {
            self.corpus.remove(*internal);
            self.expiry.remove(internal);
        }
        Ok(gone.len())
    }

    /// Every live document within the distance of `fp`, as `(id, distance)`, by distance
    /// then id.
    pub fn find_all(&self, fp: u64) -> Result<Vec<(String, u32)>> {
        let now = self.clock.now();
        let hits: Vec<(u64, u32)> = self
            .corpus
            .find_all(fp)
            .into_iter()
            .filter(|(internal, _)| self.live(*internal, now))
            .collect();
        let mut out = self.names(&hits)?;
        out.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        Ok(out)
    }

    /// The nearest live document within the distance of `fp` (the smallest id among
    /// equals), or `None`.
    pub fn find_first(&self, fp: u64) -> Result<Option<(String, u32)>> {
        Ok(self.find_all(fp)?.into_iter().next())
    }

    /// Every stored id with its fingerprint, in id order (expired ones until swept).
    pub fn documents(&self) -> Result<Vec<(String, u64)>> {
        let path = &self.path;
        let txn = db!(path, self.db.begin_read())?;
        let docs = db!(path, txn.open_table(DOCS))?;
        let mut out = Vec::with_capacity(self.len());
        for row in db!(path, docs.iter())? {
            let (id, v) = db!(path, row)?;
            out.push((id.value().to_string(), v.value().1));
        }
        Ok(out)
    }

    /// Deletes every expired document; returns how many.
    pub fn sweep(&mut self) -> Result<usize> {
        let now = self.clock.now();
        let expired: Vec<u64> = self
            .expiry
            .iter()
            .filter(|&(_, &at)| at <= now)
            .map(|(&id, _)| id)
            .collect();
        if expired.is_empty() {
            return Ok(0);
        }
        let names = self.names(&expired.iter().map(|&i| (i, 0)).collect::<Vec<_>>())?;
        let ids: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
        self.remove_bulk(&ids)
    }

    fn live(&self, internal: u64, now: u64) -> bool {
        self.expiry.get(&internal).is_none_or(|&at| at > now)
    }

    /// External ids of internal ones, each with its number.
    fn names(&self, hits: &[(u64, u32)]) -> Result<Vec<(String, u32)>> {
        let path = &self.path;
        let txn = db!(path, self.db.begin_read())?;
        let names = db!(path, txn.open_table(NAMES))?;
        let mut out = Vec::with_capacity(hits.len());
        for &(internal, d) in hits {
            match db!(path, names.get(internal))? {
                Some(name) => out.push((name.value().to_string(), d)),
                None => {
                    return Err(StoreError::Foreign {
                        path: path.clone(),
                        detail: format!("document {internal} has no id: the file is damaged"),
                    })
                }
            }
        }
        Ok(out)
    }
}

fn describe(c: &StoreConfig) -> String {
    format!(
        "blocks {}, distance {}, fingerprint version {}",
        c.blocks, c.distance, c.fingerprint_version
    )
}
