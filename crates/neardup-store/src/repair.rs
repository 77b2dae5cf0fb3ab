//! Damaged stores: [`check`] says what is wrong, [`export`] reads out every document that
//! can be read, [`repair`] puts a whole store in place of a damaged one and keeps the
//! damaged file beside it.
//!
//! All three work on a copy of the file, holding the original's lock so that no `Store`
//! writes it meanwhile; the original is never written. A file cut short is copied and
//! lengthened with zeros to the length its header records (redb's files end in free pages
//! more often than not: what is cut is often nothing). On the copy, redb's own integrity
//! check ([`redb::Database::check_integrity`], which verifies every page's checksum and
//! repairs what a crash can leave) runs first; then the store's tables are read and checked
//! against each other: every document has its name and its expiry, nothing else does.
//!
//! A document store ([`crate::DocumentStore`], `neardup serve`'s) is checked and repaired the
//! same way, with its own tables (documents, paragraphs, expiries, and an old store's ids);
//! [`export`] is for
//! fingerprint stores only, as a document store's documents are signatures that no command
//! reads back in.

use std::collections::{HashMap, HashSet};
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use neardup::tables::Blocks;
use redb::{Database, ReadableTable};

use crate::batch::{batch_head, undecodable};
use crate::dir::{FILE, FORMAT, LOG_FILE};
use crate::error::{db, Result, StoreError};
use crate::file::{self, guard, Kind};
use crate::fingerprints::{describe, Record, StoreConfig, DOCS, EXPIRES, META, NAMES};
use crate::rows::{self, DocRows};

/// What [`check`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Check {
    /// Documents that could be read.
    pub documents: u64,
    /// Everything wrong, in words; empty when the store is whole.
    pub problems: Vec<String>,
    /// Whether every document could be read (a [`repair`] keeps them all).
    pub complete: bool,
    /// A document store's batches of writes in its write-ahead log past the database's
    /// last checkpoint, and their writes: acknowledged, not in `documents`, and applied
    /// when the store is next opened.
    pub logged: (u64, u64),
}

/// What [`export`] read out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Export {
    /// Documents handed out.
    pub documents: u64,
    /// Whether that is every document (`false`: the rest is unreadable; see `problems`).
    pub complete: bool,
    /// What is wrong with the store, as [`check`] says it.
    pub problems: Vec<String>,
}

/// What [`repair`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Repair {
    /// What was wrong; empty when nothing was, and nothing was done.
    pub problems: Vec<String>,
    /// Documents in the repaired store.
    pub documents: u64,
    /// Whether every document was kept.
    pub complete: bool,
    /// Where the damaged file was kept.
    pub kept: Option<PathBuf>,
}

/// Problems past this many are counted, not listed.
const MAX_PROBLEMS: usize = 20;

/// A store's file, read as far as it can be.
struct Examined {
    /// The copy, removed when this drops.
    copy: Copy,
    /// The lock on the original, held while this lives.
    _lock: redb::backends::FileBackend,
    settings: Option<(StoreConfig, u64)>,
    records: Vec<Record>,
    /// What a document store (`neardup serve`'s) holds, when the file is one.
    docs: Option<DocRows>,
    complete: bool,
    problems: Vec<String>,
}

/// A file removed when dropped.
struct Copy(PathBuf);

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Examined {
    /// Documents read.
    fn documents(&self) -> u64 {
        match &self.docs {
            Some(rows) => rows.len() as u64,
            None => self.records.len() as u64,
        }
    }

    fn note(&mut self, problem: String) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(problem);
        } else if self.problems.len() == MAX_PROBLEMS {
            self.problems.push("(more problems not listed)".into());
        }
    }
}

/// Locks the database file at `path` as redb does, without reading it.
fn lock(dir: &Path, path: &Path) -> Result<redb::backends::FileBackend> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io)?;
    redb::backends::FileBackend::new(f).map_err(|e| match e {
        redb::DatabaseError::DatabaseAlreadyOpen => StoreError::InUse {
            path: dir.to_path_buf(),
            pid: file::holder(dir),
        },
        e => StoreError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        },
    })
}

fn examine(dir: &Path) -> Result<Examined> {
    let path = dir.join(FILE);
    if !path.is_file() {
        return Err(StoreError::NotAStore(dir.to_path_buf()));
    }
    file::remove_leftovers(dir);
    let mut problems = Vec::new();
    match file::inspect(&path) {
        Ok(Kind::Missing) => return Err(StoreError::NotAStore(dir.to_path_buf())),
        Ok(Kind::Unfinished) => return Err(StoreError::Unfinished(dir.to_path_buf())),
        Ok(Kind::Redb) => {}
        Err(StoreError::Damaged { detail, .. }) => problems.push(detail),
        Err(e) => return Err(e),
    }
    let lock = lock(dir, &path)?;
    let copy = Copy(file::aside(dir, "check"));
    let io = |source| StoreError::Io {
        path: copy.0.clone(),
        source,
    };
    std::fs::copy(&path, &copy.0).map_err(io)?;
    let want = file::expected_len(&copy.0);
    if let Some(want) = want {
        let f = OpenOptions::new().write(true).open(&copy.0).map_err(io)?;
        if f.metadata().map_err(io)?.len() < want {
            f.set_len(want).map_err(io)?;
        }
    }
    let mut found = Examined {
        copy,
        _lock: lock,
        settings: None,
        records: Vec::new(),
        docs: None,
        complete: false,
        problems,
    };
    if want.is_none() {
        // Without a layout redb cannot read it, and may read damaged sizes whole.
        found.note("its header's layout is unreadable: nothing in it can be read".into());
        return Ok(found);
    }
    let copy = found.copy.0.clone();
    // redb's check, on a database of its own: its repair may leave it unusable.
    let integrity = guard(&copy, || {
        let mut db =
            file::open_db(&Database::builder(), &copy).map_err(|e| StoreError::Damaged {
                path: copy.clone(),
                detail: format!("redb cannot open it: {e}"),
            })?;
        db.check_integrity().map_err(|e| StoreError::Damaged {
            path: copy.clone(),
            detail: format!("redb's integrity check failed: {e}"),
        })
    });
    match integrity {
        Ok(true) => {}
        Ok(false) => found.note(
            "redb found damage in its pages or commit slots, and repaired it in the copy".into(),
        ),
        Err(StoreError::Damaged { detail, .. }) => {
            found.note(detail);
            return Ok(found);
        }
        Err(e) => return Err(e),
    }
    if let Err(e) = guard(&copy, || read_tables(&copy, &mut found)) {
        let detail = match e {
            StoreError::Damaged { detail, .. } => detail,
            e => e.to_string(),
        };
        let read = found.documents();
        found.note(format!("reading stopped after {read} documents: {detail}"));
    }
    Ok(found)
}

/// Reads the store's tables from the (repaired) copy into `found`, noting every
/// inconsistency.
fn read_tables(copy: &Path, found: &mut Examined) -> Result<()> {
    let db = db!(copy, file::open_db(&Database::builder(), copy))?;
    let txn = db!(copy, db.begin_read())?;
    // A document store has tables of its own.
    let format = match txn.open_table(META) {
        Ok(meta) => db!(copy, meta.get("format"))?.map(|v| v.value()),
        Err(_) => None,
    };
    if format.is_some_and(crate::dir::is_doc_format) {
        let mut problems = Vec::new();
        let rows = found.docs.insert(DocRows::default());
        let read = rows::read_rows(copy, &txn, rows, &mut |p| problems.push(p));
        found.complete = rows.complete;
        for p in problems {
            found.note(p);
        }
        return read;
    }
    let settings = (|| -> Result<Option<(StoreConfig, u64)>> {
        let Ok(meta) = txn.open_table(META) else {
            return Ok(None);
        };
        let mut get = HashMap::new();
        for key in [
            "format",
            "blocks",
            "distance",
            "fingerprint_version",
            "next_id",
        ] {
            if let Some(v) = db!(copy, meta.get(key))? {
                get.insert(key, v.value());
            }
        }
        let small = |k: &str| get.get(k).and_then(|&v| u32::try_from(v).ok());
        match (
            get.get("format"),
            small("blocks"),
            small("distance"),
            small("fingerprint_version"),
            get.get("next_id"),
        ) {
            (Some(&FORMAT), Some(b), Some(d), Some(v), Some(&next)) => Ok(Some((
                StoreConfig {
                    blocks: Blocks::Fixed(b as usize),
                    distance: d,
                    fingerprint_version: v,
                },
                next,
            ))),
            _ => Ok(None),
        }
    })()?;
    match settings {
        Some(s) => found.settings = Some(s),
        None => found.note(format!(
            "its settings (table \"meta\", format {FORMAT}) are missing or out of range"
        )),
    }
    let next_id = found.settings.map(|s| s.1);

    // Documents first: they are what is kept.
    let mut internal_of: HashMap<u64, String> = HashMap::new();
    let mut expiry_of: HashMap<u64, u64> = HashMap::new();
    let docs = db!(copy, txn.open_table(DOCS))?;
    for row in db!(copy, docs.iter())? {
        let (id, v) = db!(copy, row)?;
        let (internal, fingerprint, expires) = v.value();
        let id = id.value().to_string();
        if next_id.is_some_and(|n| internal >= n) {
            found.note(format!(
                "document \"{id}\" is numbered {internal}, past next_id {}",
                next_id.unwrap_or(0)
            ));
        }
        if let Some(other) = internal_of.insert(internal, id.clone()) {
            found.note(format!(
                "documents \"{other}\" and \"{id}\" share the number {internal}"
            ));
        }
        if expires != 0 {
            expiry_of.insert(internal, expires);
        }
        found.records.push(Record {
            id,
            fingerprint,
            expires: (expires != 0).then_some(expires),
        });
    }
    found.complete = true;

    let names = db!(copy, txn.open_table(NAMES))?;
    let mut named = HashSet::new();
    for row in db!(copy, names.iter())? {
        let (internal, id) = db!(copy, row)?;
        let (internal, id) = (internal.value(), id.value());
        match internal_of.get(&internal) {
            Some(want) if want == id => {
                named.insert(internal);
            }
            Some(want) => found.note(format!(
                "document {internal} is \"{want}\", but its name says \"{id}\""
            )),
            None => found.note(format!("a name (\"{id}\", {internal}) for no document")),
        }
    }
    for (internal, id) in &internal_of {
        if !named.contains(internal) {
            found.note(format!("document \"{id}\" ({internal}) has no name"));
        }
    }
    let expiries = db!(copy, txn.open_table(EXPIRES))?;
    let mut timed = HashSet::new();
    for row in db!(copy, expiries.iter())? {
        let (internal, at) = db!(copy, row)?;
        let (internal, at) = (internal.value(), at.value());
        if expiry_of.get(&internal) == Some(&at) {
            timed.insert(internal);
        } else {
            found.note(format!(
                "an expiry ({at}) for document {internal}, which has {}",
                expiry_of
                    .get(&internal)
                    .map_or("none".to_string(), |e| e.to_string())
            ));
        }
    }
    for internal in expiry_of.keys() {
        if !timed.contains(internal) {
            found.note(format!("document {internal}'s expiry is not indexed"));
        }
    }
    Ok(())
}

/// Checks the store in `dir`: redb's integrity check (every page checksum) on a copy, then
/// the store's tables against each other. Never writes the store; refuses one in use.
pub fn check(dir: impl AsRef<Path>) -> Result<Check> {
    let mut found = examine(dir.as_ref())?;
    let logged = match &found.docs {
        Some(rows) => match logged(rows, dir.as_ref()) {
            Ok(logged) => logged,
            Err(e) => {
                found.note(format!("its write-ahead log: {e}"));
                (0, 0)
            }
        },
        None => (0, 0),
    };
    Ok(Check {
        documents: found.documents(),
        complete: found.complete,
        problems: found.problems,
        logged,
    })
}

/// Hands every readable document of the store in `dir` to `each`, in id order, damaged or
/// not (see [`Export::complete`]). Never writes the store; refuses one in use. The outer
/// error is the store's, the inner one `each`'s.
pub fn export<E>(
    dir: impl AsRef<Path>,
    mut each: impl FnMut(Record) -> std::result::Result<(), E>,
) -> Result<std::result::Result<Export, E>> {
    let dir = dir.as_ref();
    let found = examine(dir)?;
    if found.docs.is_some() {
        // Its documents are signatures, which no command reads back in.
        return Err(StoreError::Setting(format!(
            "{}: a document store (neardup serve), whose documents are signatures, not \
             fingerprints: export reads fingerprint stores; `neardup index repair` keeps what \
             can be read of a document store",
            dir.join(FILE).display()
        )));
    }
    let documents = found.records.len() as u64;
    for r in found.records {
        if let Err(e) = each(r) {
            return Ok(Err(e));
        }
    }
    Ok(Ok(Export {
        documents,
        complete: found.complete,
        problems: found.problems,
    }))
}

/// Repairs the store in `dir`, if [`check`] finds anything wrong: a new store with every
/// readable document (same settings, same ids, fingerprints and expiries) takes the
/// file's name in one rename, and the damaged file stays beside it as
/// `neardup.redb.damaged-SECONDS`. Needs the store's settings: when they are unreadable,
/// make a new store and insert what [`export`] reads.
pub fn repair(dir: impl AsRef<Path>) -> Result<Repair> {
    let dir = dir.as_ref();
    let found = examine(dir)?;
    if found.problems.is_empty() {
        return Ok(Repair {
            documents: found.documents(),
            complete: true,
            ..Repair::default()
        });
    }
    let path = dir.join(FILE);
    let partial = file::aside(dir, "partial");
    let built = match (&found.docs, found.settings) {
        (Some(rows), _) => match rows.settings() {
            Ok(_) => rows::rebuild(&partial, rows).map(Some),
            Err(why) => {
                return Err(StoreError::Setting(format!(
                    "{}: a document store whose settings are unreadable ({why}), so it cannot \
                     be repaired in place: make a new one (`neardup serve --create`) and put the \
                     documents again",
                    path.display()
                )))
            }
        },
        (None, Some((config, _))) => rebuild(&partial, config, &found.records).map(|()| None),
        (None, None) => {
            return Err(StoreError::Setting(format!(
                "{}: its settings are unreadable, so it cannot be repaired in place: make a new \
                 store (`neardup index create`) and insert what `neardup index export` saves",
                path.display()
            )))
        }
    };
    let instance = match built {
        Ok(instance) => instance,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    let io = |source| StoreError::Io {
        path: path.clone(),
        source,
    };
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut kept = dir.join(format!("{FILE}.damaged-{secs}"));
    let mut n = 1;
    while kept.exists() {
        kept = dir.join(format!("{FILE}.damaged-{secs}-{n}"));
        n += 1;
    }
    // The damaged file gets a second name, then the new one takes the first in one step:
    // at any moment `neardup.redb` is the damaged store or the repaired one.
    std::fs::hard_link(&path, &kept)
        .or_else(|_| std::fs::copy(&path, &kept).map(drop))
        .map_err(io)?;
    // A document store's keys file: the damaged one kept too, then the new one (left
    // under a name of its own by the rebuild) takes its place, here or, after a crash
    // between the renames, when the store is next opened.
    let keys = dir.join(crate::dir::KEYS_FILE);
    if instance.is_some() && keys.exists() {
        let kept_keys = dir.join(format!("{}.damaged-{secs}", crate::dir::KEYS_FILE));
        std::fs::hard_link(&keys, &kept_keys)
            .or_else(|_| std::fs::copy(&keys, &kept_keys).map(drop))
            .map_err(io)?;
    }
    std::fs::rename(&partial, &path).map_err(io)?;
    if let Some(instance) = instance {
        crate::keys::adopt_pending(dir, instance)?;
    }
    let documents = found.documents();
    let mut problems = found.problems;
    // The repaired file starts its commits over, so a document store's write-ahead log
    // (writes acknowledged after its last checkpoint) no longer follows on from it: kept
    // beside it, not replayed.
    let log = dir.join(LOG_FILE);
    if found.docs.is_some() && crate::log::holds_records(dir) {
        let aside = dir.join(format!("{}.damaged-{secs}", LOG_FILE));
        std::fs::rename(&log, &aside).map_err(io)?;
        problems.push(format!(
            "the write-ahead log (writes acknowledged after the last checkpoint) was kept as \
             {}, not applied",
            aside.display()
        ));
    }
    file::sync_dir(dir).map_err(io)?;
    Ok(Repair {
        documents,
        complete: found.complete,
        problems,
        kept: Some(kept),
    })
}

/// A new store file at `path` holding `records` (numbered afresh) with `config`.
fn rebuild(path: &Path, config: StoreConfig, records: &[Record]) -> Result<()> {
    let db = db!(path, Database::create(path))?;
    let txn = db!(path, db.begin_write())?;
    {
        let mut docs = db!(path, txn.open_table(DOCS))?;
        let mut names = db!(path, txn.open_table(NAMES))?;
        let mut expiries = db!(path, txn.open_table(EXPIRES))?;
        for (internal, r) in records.iter().enumerate() {
            let internal = internal as u64;
            let expires = r.expires.unwrap_or(0);
            db!(
                path,
                docs.insert(r.id.as_str(), (internal, r.fingerprint, expires))
            )?;
            db!(path, names.insert(internal, r.id.as_str()))?;
            if expires != 0 {
                db!(path, expiries.insert(internal, expires))?;
            }
        }
        let mut meta = db!(path, txn.open_table(META))?;
        let Blocks::Fixed(blocks) = config.blocks else {
            return Err(StoreError::Setting(format!(
                "settings without fixed blocks: {}",
                describe(&config)
            )));
        };
        for (k, v) in [
            ("format", FORMAT),
            ("blocks", blocks as u64),
            ("distance", u64::from(config.distance)),
            ("fingerprint_version", u64::from(config.fingerprint_version)),
            ("next_id", records.len() as u64),
        ] {
            db!(path, meta.insert(k, v))?;
        }
    }
    db!(path, txn.commit())
}

/// The batches of the write-ahead log in `dir` past the last durable commit of the file
/// `rows` were read from, and their writes: acknowledged, and applied by the next open
/// (which replays them).
fn logged(rows: &DocRows, dir: &Path) -> Result<(u64, u64)> {
    let committed = rows.setting("commit").unwrap_or(0);
    let mut pending = (0, 0);
    for record in crate::log::read_records(dir)? {
        let (commit, _, writes) =
            batch_head(&record).ok_or_else(|| undecodable(&dir.join(LOG_FILE)))?;
        if commit > committed {
            pending.0 += 1;
            pending.1 += writes;
        }
    }
    Ok(pending)
}
