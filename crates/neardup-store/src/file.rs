//! The database file before and around redb: what its header must say before redb may
//! open it, panics turned into errors, files made aside and published whole, how both
//! kinds of store are made ([`create_store`]) and opened ([`open_store`]), leftovers of
//! interrupted work, and who holds a store.
//!
//! redb trusts its file's header: a file cut short (a full disk, an interrupted copy)
//! makes `Database::open` fail `assert!(file_len >= header.layout().len())`, and a header
//! whose layout fields are damaged divides by zero or indexes out of range. [`inspect`]
//! reads the header first and refuses such a file with a message; [`guard`] is the last
//! line, for damage inside the file that only redb's own walk can meet.

use std::cell::Cell;
use std::fs::File;
use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

use redb::Database;

use crate::dir::{FILE, PID_FILE};
use crate::error::{db, Result, StoreError};

/// redb's magic number: the first 9 bytes of every redb file (redb 2's header layout,
/// `tree_store/page_store/header.rs`).
const MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];
/// The header: 64 bytes of settings, then two commit slots of 128 bytes.
const HEADER: usize = 64 + 2 * 128;
/// The page size redb's `Builder` uses, and the only one its `open` accepts by default.
const PAGE: u64 = 4096;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// What the bytes at a database path are.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// No file.
    Missing,
    /// Left by a `create` that was interrupted before this version made files aside: empty,
    /// or a redb file that never committed a table. Nothing in it; safe to replace.
    Unfinished,
    /// A redb file whose header redb can open.
    Redb,
}

fn damaged(path: &Path, detail: String) -> StoreError {
    StoreError::Damaged {
        path: path.to_path_buf(),
        detail,
    }
}

/// Reads the header of the database file at `path` and checks what redb's `open`
/// asserts, so that a damaged file is an error here rather than a panic there.
pub(crate) fn inspect(path: &Path) -> Result<Kind> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Kind::Missing),
        Err(e) => return Err(io(e)),
    };
    let len = file.metadata().map_err(io)?.len();
    if len == 0 {
        return Ok(Kind::Unfinished);
    }
    let mut head = Vec::with_capacity(HEADER);
    (&mut file)
        .take(HEADER as u64)
        .read_to_end(&mut head)
        .map_err(io)?;
    if head.len() < HEADER {
        return Err(if head.starts_with(&MAGIC) || MAGIC.starts_with(&head) {
            damaged(
                path,
                format!("cut short: {len} bytes, less than its header"),
            )
        } else {
            StoreError::Foreign {
                path: path.to_path_buf(),
                detail: "not a neardup store (not a redb database)".into(),
            }
        });
    }
    // No table committed in either commit slot: the file never held anything. (redb
    // writes its magic number last when it makes a file, so it may be missing too.)
    let no_tables = |slot: usize| head[64 + slot * 128 + 1] == 0;
    let magic = head[..MAGIC.len()] == MAGIC;
    let zeros = head[..MAGIC.len()].iter().all(|&b| b == 0);
    if (magic || zeros) && no_tables(0) && no_tables(1) {
        return Ok(Kind::Unfinished);
    }
    if !magic {
        return Err(StoreError::Foreign {
            path: path.to_path_buf(),
            detail: "not a neardup store (not a redb database)".into(),
        });
    }
    let page = u64::from(u32_at(&head, 12));
    let region_header_pages = u64::from(u32_at(&head, 16));
    let region_pages = u64::from(u32_at(&head, 20));
    let full_regions = u64::from(u32_at(&head, 24));
    let trailing_pages = u64::from(u32_at(&head, 28));
    if page != PAGE {
        return Err(damaged(
            path,
            format!("its header says pages of {page} bytes, not {PAGE}"),
        ));
    }
    if region_header_pages == 0 || region_pages == 0 || (full_regions == 0 && trailing_pages == 0) {
        return Err(damaged(path, "its header's region layout is empty".into()));
    }
    if let Some(why) = implausible(region_header_pages, region_pages).or_else(|| tracker(&head)) {
        return Err(damaged(path, why));
    }
    // The length redb expects: a page of header, the full regions, the trailing one.
    let expected = u128::from(page)
        + u128::from(full_regions)
            * u128::from(region_header_pages + region_pages)
            * u128::from(page)
        + if trailing_pages > 0 {
            u128::from(region_header_pages + trailing_pages) * u128::from(page)
        } else {
            0
        };
    if u128::from(len) < expected {
        return Err(damaged(
            path,
            format!("cut short: {len} bytes, its header says {expected}"),
        ));
    }
    Ok(Kind::Redb)
}

/// Regions larger than redb makes them (a million pages of 4 KiB), or a region header
/// larger than its region's allocator state can take (130 pages for a million), are
/// damage: redb would read that header whole, gigabytes for a damaged field (found by
/// fuzzing, in `check` of a file lengthened to what its header says).
fn implausible(region_header_pages: u64, region_pages: u64) -> Option<String> {
    const MAX_REGION_PAGES: u64 = 1 << 24;
    if region_pages > MAX_REGION_PAGES {
        return Some(format!(
            "its header says regions of {region_pages} pages, more than redb makes"
        ));
    }
    if region_header_pages > region_pages / 64 + 16 {
        return Some(format!(
            "its header says region headers of {region_header_pages} pages, for regions of \
             {region_pages} pages"
        ));
    }
    None
}

/// The page of the region tracker, in a file of redb's format 2 (whose open reads it,
/// `4096 << order` bytes): an order above 12 (16 MiB, the tracker of millions of regions)
/// is damage (found by fuzzing: a damaged order made redb read 64 GiB).
fn tracker(head: &[u8]) -> Option<String> {
    const FORMAT_2: u8 = 2;
    let format_2 = head[64] == FORMAT_2 || head[64 + 128] == FORMAT_2;
    let page = u64::from_le_bytes(head[32..40].try_into().unwrap_or([0; 8]));
    let order = page >> 59;
    (format_2 && order > 12)
        .then(|| format!("its header says the region tracker is a page of order {order}, over 12"))
}

/// The header's length for the database at `path` (see [`inspect`]), or `None` when the
/// header itself is unreadable.
pub(crate) fn expected_len(path: &Path) -> Option<u64> {
    let mut head = Vec::with_capacity(HEADER);
    File::open(path)
        .ok()?
        .take(HEADER as u64)
        .read_to_end(&mut head)
        .ok()?;
    if head.len() < HEADER || head[..MAGIC.len()] != MAGIC || u64::from(u32_at(&head, 12)) != PAGE {
        return None;
    }
    let rh = u64::from(u32_at(&head, 16));
    let rp = u64::from(u32_at(&head, 20));
    let full = u64::from(u32_at(&head, 24));
    let trailing = u64::from(u32_at(&head, 28));
    if implausible(rh, rp).or_else(|| tracker(&head)).is_some() {
        return None;
    }
    let regions = full.checked_mul(rh.checked_add(rp)?)?.checked_mul(PAGE)?;
    let tail = if trailing > 0 {
        (rh + trailing).checked_mul(PAGE)?
    } else {
        0
    };
    PAGE.checked_add(regions)?.checked_add(tail)
}

thread_local! {
    /// Inside [`quietly`] on this thread: a panic is caught there, and not reported.
    static GUARDED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, catching a panic inside it without reporting it on standard error (the panic
/// hook skips it): the caller turns it into an error.
pub(crate) fn quietly<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    static QUIET: Once = Once::new();
    QUIET.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !GUARDED.with(Cell::get) {
                report(info);
            }
        }));
    });
    let outer = GUARDED.with(|g| g.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(outer));
    result
}

/// Runs `f`, turning a panic inside it (redb meeting damage that its header did not show)
/// into [`StoreError::Damaged`], which carries the panic's message.
pub(crate) fn guard<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let result = quietly(f);
    result.unwrap_or_else(|payload| {
        let why = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        Err(damaged(path, format!("redb stopped on it: {why}")))
    })
}

/// Opens the existing redb file at `path` with `builder`'s settings, through [`Bounded`].
/// The caller has checked it with [`inspect`] (a redb header, so not empty: redb only
/// initialises a database in an empty file).
pub(crate) fn open_db(
    builder: &redb::Builder,
    path: &Path,
) -> std::result::Result<redb::Database, redb::DatabaseError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    builder.create_with_backend(Bounded::new(file)?)
}

/// redb's file backend, refusing a read past the file's end before allocating for it.
/// redb sizes a page read from the page's header; a damaged one can ask for terabytes, and
/// an allocation failure aborts the process where a refused read is an error. The length
/// is cached and looked up again only when a read passes it, so reads cost no system call.
#[derive(Debug)]
pub(crate) struct Bounded {
    file: redb::backends::FileBackend,
    len: AtomicU64,
}

impl Bounded {
    fn new(file: File) -> std::result::Result<Bounded, redb::DatabaseError> {
        let file = redb::backends::FileBackend::new(file)?;
        let len = AtomicU64::new(redb::StorageBackend::len(&file)?);
        Ok(Bounded { file, len })
    }
}

impl redb::StorageBackend for Bounded {
    fn len(&self) -> std::io::Result<u64> {
        let len = self.file.len()?;
        self.len.store(len, Ordering::Relaxed);
        Ok(len)
    }

    fn read(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let end = offset.checked_add(len as u64);
        let within = |size: u64| end.is_some_and(|end| end <= size);
        if !within(self.len.load(Ordering::Relaxed)) && !within(self.len()?) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("a read of {len} bytes at offset {offset} passes the end of the file"),
            ));
        }
        self.file.read(offset, len)
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.file.set_len(len)?;
        self.len.store(len, Ordering::Relaxed);
        Ok(())
    }

    fn sync_data(&self, eventual: bool) -> std::io::Result<()> {
        self.file.sync_data(eventual)
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.file.write(offset, data)
    }
}

/// A fresh name beside the database, for a file made aside: `neardup.redb.PID.N.what`.
pub(crate) fn aside(dir: &Path, what: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("{FILE}.{}.{n}.{what}", std::process::id()))
}

/// Puts the finished file `from` at `to` unless something is there already (then `false`,
/// and `from` is removed), and makes the new name durable.
pub(crate) fn publish(from: &Path, to: &Path) -> std::io::Result<bool> {
    // A hard link fails if `to` exists: no other process's store is ever replaced.
    match std::fs::hard_link(from, to) {
        Ok(()) => std::fs::remove_file(from)?,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(from)?;
            return Ok(false);
        }
        // A file system without hard links: rename, after looking (a small race, only
        // between two processes making the same store at once).
        Err(_) => {
            if to.exists() {
                std::fs::remove_file(from)?;
                return Ok(false);
            }
            std::fs::rename(from, to)?;
        }
    }
    sync_dir(to.parent().unwrap_or(Path::new(".")))?;
    Ok(true)
}

/// Flushes a directory's entries (a new or renamed file's name) to disk.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Whether process `pid` runs, when this system can tell (Linux's `/proc`).
fn running(pid: u32) -> Option<bool> {
    let proc = Path::new("/proc");
    proc.join("self")
        .exists()
        .then(|| proc.join(pid.to_string()).exists())
}

/// Removes the files made aside in `dir` by processes that no longer run (a `create`,
/// `check` or `repair` that was killed). Files of running processes, and any whose
/// process this system cannot look up, are left.
pub(crate) fn remove_leftovers(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!("{FILE}.");
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        let mut parts = rest.split('.');
        let (Some(pid), Some(_), Some(what), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if !matches!(what, "partial" | "check" | "snapshot") {
            continue;
        }
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if pid != std::process::id() && running(pid) == Some(false) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Opens the store in `dir` with `open_file` (given the directory and its database file),
/// as both kinds of store open: a directory without a finished database is not a store,
/// leftovers of killed processes are removed first, a panic in redb is damage, and the
/// opened store is claimed for this process.
pub(crate) fn open_store<T>(
    dir: &Path,
    open_file: impl FnOnce(&Path, &Path) -> Result<T>,
) -> Result<T> {
    let path = dir.join(FILE);
    if !path.is_file() {
        return Err(StoreError::NotAStore(dir.to_path_buf()));
    }
    remove_leftovers(dir);
    match inspect(&path)? {
        Kind::Missing => return Err(StoreError::NotAStore(dir.to_path_buf())),
        Kind::Unfinished => return Err(StoreError::Unfinished(dir.to_path_buf())),
        Kind::Redb => {}
    }
    let store = guard(&path, || open_file(dir, &path))?;
    claim(dir);
    Ok(store)
}

/// Makes a new store in `dir` (created if missing), as both kinds of store are made.
///
/// The database is made aside under a temporary name with `builder`, `init` writes its
/// settings and makes its tables in one transaction, committed with fsync, and only then
/// is it given its name: a crash leaves no store or a whole one, never a half-made one.
/// Of two creates at once, one wins and the other is [`StoreError::Exists`]. The
/// directory is claimed for this process, and `open` makes the store of the database
/// (given the directory, the database's path and the database). When any of it fails, a
/// directory made here is removed again, if it is still empty: nothing of anyone else's
/// is removed.
pub(crate) fn create_store<T>(
    dir: &Path,
    builder: &redb::Builder,
    init: impl FnOnce(&Path, &redb::WriteTransaction) -> Result<()>,
    open: impl FnOnce(&Path, PathBuf, Database) -> Result<T>,
) -> Result<T> {
    let new_dir = !dir.exists();
    std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let made = create_in(dir, builder, init).and_then(|(path, db)| open(dir, path, db));
    if made.is_err() && new_dir {
        let _ = std::fs::remove_dir(dir);
    }
    made
}

/// [`create_store`] in an existing directory, up to the claim: the database's path and
/// the database.
fn create_in(
    dir: &Path,
    builder: &redb::Builder,
    init: impl FnOnce(&Path, &redb::WriteTransaction) -> Result<()>,
) -> Result<(PathBuf, Database)> {
    let path = dir.join(FILE);
    remove_leftovers(dir);
    match inspect(&path) {
        Ok(Kind::Missing) => {}
        // Nothing in it: left by a create that was killed before stores were made aside.
        Ok(Kind::Unfinished) => std::fs::remove_file(&path).map_err(|source| StoreError::Io {
            path: path.clone(),
            source,
        })?,
        // A store, or something that is not ours to replace.
        _ => return Err(StoreError::Exists(dir.to_path_buf())),
    }
    let partial = aside(dir, "partial");
    let made = (|| {
        let db = db!(&partial, builder.create(&partial))?;
        let txn = db!(&partial, db.begin_write())?;
        init(&partial, &txn)?;
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
    // Committed with fsync: now it gets its name, unless another create got there first.
    match publish(&partial, &path) {
        Ok(true) => {}
        Ok(false) => return Err(StoreError::Exists(dir.to_path_buf())),
        Err(source) => {
            let _ = std::fs::remove_file(&partial);
            return Err(StoreError::Io { path, source });
        }
    }
    claim(dir);
    Ok((path, db))
}

/// A redb error on opening `path` (in the data directory `dir`), in the store's words.
pub(crate) fn open_error(dir: &Path, path: &Path, e: redb::DatabaseError) -> StoreError {
    match e {
        redb::DatabaseError::DatabaseAlreadyOpen => StoreError::InUse {
            path: dir.to_path_buf(),
            pid: holder(dir),
        },
        redb::DatabaseError::Storage(redb::StorageError::Corrupted(detail)) => {
            StoreError::Damaged {
                path: path.to_path_buf(),
                detail,
            }
        }
        redb::DatabaseError::Storage(redb::StorageError::Io(source))
            if source.kind() != std::io::ErrorKind::InvalidData =>
        {
            StoreError::Io {
                path: path.to_path_buf(),
                source,
            }
        }
        e => StoreError::Foreign {
            path: path.to_path_buf(),
            detail: format!("not readable as a neardup store: {e}"),
        },
    }
}

/// The database, closed under a guard: redb writes its allocator state when it closes,
/// and on a damaged file that write can panic.
pub(crate) struct Db(Option<Database>);

impl Db {
    pub(crate) fn new(db: Database) -> Db {
        Db(Some(db))
    }
}

impl std::ops::Deref for Db {
    type Target = Database;

    fn deref(&self) -> &Database {
        match &self.0 {
            Some(db) => db,
            None => unreachable!("the database is taken only when it drops"),
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let db = self.0.take();
        let _ = quietly(move || drop(db));
    }
}

/// Records this process as the holder of the store in `dir` (best effort: it only
/// improves the message another process gets).
pub(crate) fn claim(dir: &Path) {
    let _ = std::fs::write(dir.join(PID_FILE), format!("{}\n", std::process::id()));
}

/// Forgets the claim of [`claim`], if it is still this process's.
pub(crate) fn release(dir: &Path) {
    let path = dir.join(PID_FILE);
    if holder(dir) == Some(std::process::id()) {
        let _ = std::fs::remove_file(path);
    }
}

/// The process that last claimed the store in `dir`, if it still runs (or this system
/// cannot tell).
pub(crate) fn holder(dir: &Path) -> Option<u32> {
    let pid = std::fs::read_to_string(dir.join(PID_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (running(pid) != Some(false)).then_some(pid)
}
