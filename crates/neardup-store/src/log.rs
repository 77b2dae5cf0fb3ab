//! The write-ahead log of a document store ([`crate::DocumentStore`]).
//!
//! A durable redb commit costs two fsyncs (with quick-repair) and rewrites every B-tree
//! page the batch touched plus the allocator state, scattered over the file; at 1.9M
//! documents that was 14 ms a commit on this project's test machine, and it grew with the
//! file. So a batch of writes is appended here as one record and made durable with one
//! fsync of a sequential write; redb takes the batch without an fsync of its own (in a
//! transaction that takes the batches of a tenth of a second, then commits without one),
//! and now and then one durable commit (a checkpoint) makes all of them durable at once,
//! after which the log starts over. Opening a store replays the
//! records past the database's last durable commit.
//!
//! The file: eight bytes of [`MAGIC`] and the log's generation (u64, little-endian), then
//! records, each its payload's length (u32, little-endian), a CRC-32 of the generation,
//! that length and the payload, and the payload. Starting over bumps the generation in
//! place instead of cutting the file, and records overwrite the old ones: an fsync of
//! a file that neither grows nor shrinks writes its data only, while one that changes the
//! file's length also commits the file system's journal, which waits for other files'
//! writeback (the database's). The old generation's records then fail their checksum, as
//! does a record cut short by a crash (before it was acknowledged), so reading stops at the
//! first record that is not whole and of the log's generation.
//!
//! Logs of the first format (`ndwal01`: no generation, cut at each start-over) are read
//! and rewritten in this one when opened.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;

use crate::dir::LOG_FILE;
use crate::error::{Result, StoreError};

/// The first bytes of a log file.
const MAGIC: &[u8; 8] = b"ndwal02\n";

/// The first bytes of a log of the first format.
const MAGIC_01: &[u8; 8] = b"ndwal01\n";

/// Bytes before the first record: [`MAGIC`] and the generation.
const START: u64 = 16;

/// Bytes before a record's payload: its length and CRC-32.
const HEAD: usize = 8;

/// An open write-ahead log.
#[derive(Debug)]
pub(crate) struct Log {
    file: File,
    path: PathBuf,
    /// Records of other generations fail their checksums.
    generation: u64,
    /// Where the next record goes: the end of this generation's records.
    end: u64,
}

impl Log {
    /// Makes an empty log in `dir`, in place of any there.
    pub(crate) fn create(dir: &Path) -> Result<Log> {
        Log::create_with(dir, &[])
    }

    /// Makes a log in `dir` holding `payloads`, in place of any there, in one rename.
    fn create_with(dir: &Path, payloads: &[Vec<u8>]) -> Result<Log> {
        let path = dir.join(LOG_FILE);
        let partial = dir.join(format!("{LOG_FILE}.partial"));
        let generation = 1;
        let mut bytes = header(generation).to_vec();
        for payload in payloads {
            let record = record(generation, payload).map_err(|source| StoreError::Io {
                path: path.clone(),
                source,
            })?;
            bytes.extend_from_slice(&record);
        }
        let file = at(&path, || {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&partial)?;
            file.write_all_at(&bytes, 0)?;
            file.sync_all()?;
            std::fs::rename(&partial, &path)?;
            crate::file::sync_dir(dir)?;
            Ok(file)
        })?;
        Ok(Log {
            file,
            path,
            generation,
            end: bytes.len() as u64,
        })
    }

    /// Opens the log in `dir` (an empty one if there is none, or only the start of one),
    /// and reads its records' payloads in order. Reading stops at the first record cut
    /// short, failing its checksum or of an older generation; the next record goes there.
    pub(crate) fn open(dir: &Path) -> Result<(Log, Vec<Vec<u8>>)> {
        let path = dir.join(LOG_FILE);
        let bytes = read_log(&path)?;
        let Some(generation) = generation(&bytes) else {
            // None, only the start of one, or the first format: written afresh (with the
            // first format's records, which the caller replays).
            let records = records(&bytes);
            return Ok((Log::create_with(dir, &records.payloads)?, records.payloads));
        };
        let records = records(&bytes);
        let file = at(&path, || {
            OpenOptions::new().read(true).write(true).open(&path)
        })?;
        Ok((
            Log {
                file,
                path,
                generation,
                end: records.end as u64,
            },
            records.payloads,
        ))
    }

    /// Appends `payload` as one record and makes it durable. On failure the record is
    /// marked as the log's end again, durably, and the batch stored nothing; when even
    /// that fails, the record may be durable, and the error is [`StoreError::Unsure`].
    pub(crate) fn append(&mut self, payload: &[u8]) -> Result<()> {
        match self.append_io(payload) {
            Ok(()) => Ok(()),
            Err((e, false)) => at(&self.path, || Err(e)),
            Err((e, true)) => Err(StoreError::Unsure {
                path: self.path.clone(),
                detail: e.to_string(),
            }),
        }
    }

    /// The error, and whether the record may be left in the file.
    fn append_io(&mut self, payload: &[u8]) -> std::result::Result<(), (std::io::Error, bool)> {
        let record = record(self.generation, payload).map_err(|e| (e, false))?;
        let written = self
            .file
            .write_all_at(&record, self.end)
            .and_then(|()| self.file.sync_data());
        match written {
            Ok(()) => {
                self.end += record.len() as u64;
                Ok(())
            }
            // A length of zero ends the log: the record is not read back.
            Err(e) => match self
                .file
                .write_all_at(&[0; HEAD], self.end)
                .and_then(|()| self.file.sync_data())
            {
                Ok(()) => Err((e, false)),
                Err(undo) => Err((
                    std::io::Error::new(
                        e.kind(),
                        format!("{e}; then marking the record as not written failed too ({undo})"),
                    ),
                    true,
                )),
            },
        }
    }

    /// Empties the log: every record in it is in the database, durably. The new
    /// generation is durable before any record of it is written, so a generation is never
    /// used twice (a second use could find the first one's records whole after its own).
    /// On failure the header on disk may be either generation, and records appended after
    /// it could be lost: the error is [`StoreError::Unsure`], which stops the store's writes.
    pub(crate) fn clear(&mut self) -> Result<()> {
        if self.end > START {
            let generation = self.generation + 1;
            let written = self
                .file
                .write_all_at(&header(generation), 0)
                .and_then(|()| self.file.sync_data());
            if let Err(e) = written {
                return Err(StoreError::Unsure {
                    path: self.path.clone(),
                    detail: format!("starting the write-ahead log over: {e}"),
                });
            }
            self.generation = generation;
            self.end = START;
        }
        Ok(())
    }

    /// Bytes of records in the log.
    pub(crate) fn bytes(&self) -> u64 {
        self.end - START
    }

    /// The log's file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// The first bytes of a log of `generation`.
fn header(generation: u64) -> [u8; START as usize] {
    let mut head = [0; START as usize];
    head[..8].copy_from_slice(MAGIC);
    head[8..].copy_from_slice(&generation.to_le_bytes());
    head
}

/// `payload` as a record of `generation`.
fn record(generation: u64, payload: &[u8]) -> std::io::Result<Vec<u8>> {
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|&len| len > 0)
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "a batch of writes of {} bytes (a record holds 1 byte to 4 GiB)",
                    payload.len()
                ),
            )
        })?;
    let mut record = Vec::with_capacity(HEAD + payload.len());
    record.extend_from_slice(&len.to_le_bytes());
    record.extend_from_slice(&checksum(generation, len, payload).to_le_bytes());
    record.extend_from_slice(payload);
    Ok(record)
}

/// A record's CRC-32. A record of another generation at the same place fails it for
/// certain while generations stay under 2^32 (one a checkpoint): the two inputs then
/// differ in fewer than 32 consecutive bits, which a CRC-32 always detects.
fn checksum(generation: u64, len: u32, payload: &[u8]) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    crc.update(&generation.to_le_bytes());
    crc.update(&len.to_le_bytes());
    crc.update(payload);
    crc.finalize()
}

/// The generation of a log of this format; none for no log, a cut header or the first
/// format.
fn generation(bytes: &[u8]) -> Option<u64> {
    let head = bytes.get(..START as usize)?;
    (&head[..8] == MAGIC).then(|| u64::from_le_bytes(head[8..].try_into().unwrap_or_default()))
}

/// `f`'s I/O error as the store's, naming the log's file.
fn at<T>(path: &Path, f: impl FnOnce() -> std::io::Result<T>) -> Result<T> {
    f().map_err(|source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The payloads of the whole records of the log in `dir`, read without opening it for
/// writing; none when there is no log.
pub(crate) fn read_records(dir: &Path) -> Result<Vec<Vec<u8>>> {
    Ok(records(&read_log(&dir.join(LOG_FILE))?).payloads)
}

/// The bytes of the log at `path`: none when there is no file; an error when its first
/// bytes are there and are neither [`MAGIC`] nor [`MAGIC_01`].
fn read_log(path: &Path) -> Result<Vec<u8>> {
    at(path, || {
        let bytes = match std::fs::read(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            read => read?,
        };
        let magic = &bytes[..bytes.len().min(MAGIC.len())];
        if !MAGIC.starts_with(magic) && !MAGIC_01.starts_with(magic) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not a neardup write-ahead log (its first bytes are neither ndwal02 nor ndwal01)",
            ));
        }
        Ok(bytes)
    })
}

/// Whether the log in `dir` holds a whole record, or is there and cannot be read as a log.
pub(crate) fn holds_records(dir: &Path) -> bool {
    read_records(dir).map_or(true, |records| !records.is_empty())
}

/// How often [`Writeback`] asks the kernel to write the database's new pages.
const WRITEBACK_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// A thread that fsyncs the database file every [`WRITEBACK_EVERY`] while commits come,
/// so that a checkpoint's own fsync finds little left to write. Without it a checkpoint
/// wrote a second of scattered B-tree pages at once, and single puts queued behind it
/// (p99 1,077 ms at 1.9M documents; with it 33 ms, `docs/service.md`). An fsync at any
/// moment is safe: the kernel may write those pages back at any moment anyway.
#[derive(Debug)]
pub(crate) struct Writeback {
    dirty: Arc<AtomicBool>,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writeback {
    /// Starts it on the database file at `path`; without the thread (no error) if the
    /// file cannot be opened again or no thread started: it only saves time.
    pub(crate) fn start(path: &Path) -> Writeback {
        let dirty = Arc::new(AtomicBool::new(false));
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = File::open(path).ok().and_then(|file| {
            let dirty = Arc::clone(&dirty);
            std::thread::Builder::new()
                .name("neardup-writeback".into())
                .spawn(move || {
                    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(WRITEBACK_EVERY)
                    {
                        if dirty.swap(false, Ordering::Relaxed) {
                            let _ = file.sync_data();
                        }
                    }
                })
                .ok()
        });
        Writeback {
            dirty,
            stop: Some(stop),
            thread,
        }
    }

    /// The database has pages to write.
    pub(crate) fn committed(&self) {
        self.dirty.store(true, Ordering::Relaxed);
    }
}

impl Drop for Writeback {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A log's whole records, and where the next one goes.
struct Records {
    payloads: Vec<Vec<u8>>,
    end: usize,
}

/// The whole records of a log file's bytes of either format: those of its generation up
/// to the first that is not (or, in the first format, up to the first cut short or
/// failing its checksum).
fn records(bytes: &[u8]) -> Records {
    let (generation, mut at) = match generation(bytes) {
        Some(generation) => (Some(generation), START as usize),
        None => (None, MAGIC_01.len()),
    };
    let mut payloads = Vec::new();
    while let Some(head) = bytes.get(at..at + HEAD) {
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let Some(payload) = bytes.get(at + HEAD..at + HEAD + len as usize) else {
            break;
        };
        let expected = match generation {
            Some(generation) => checksum(generation, len, payload),
            None => crc32fast::hash(payload),
        };
        if len == 0 || crc != expected {
            break;
        }
        payloads.push(payload.to_vec());
        at += HEAD + len as usize;
    }
    Records { payloads, end: at }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn payloads(n: u8) -> Vec<Vec<u8>> {
        (1..=n).map(|i| vec![i; 10 * i as usize]).collect()
    }

    #[test]
    fn records_come_back_and_a_torn_tail_is_written_over() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::create(dir.path()).unwrap();
        let payloads = payloads(5);
        for p in &payloads {
            log.append(p).unwrap();
        }
        assert_eq!(
            log.bytes(),
            payloads.iter().map(|p| 8 + p.len() as u64).sum()
        );
        drop(log);
        let (_, read) = Log::open(dir.path()).unwrap();
        assert_eq!(read, payloads);

        // Every cut of the last record, and a flipped byte in it, lose that record only;
        // the next record goes where it began.
        let path = dir.path().join(LOG_FILE);
        let whole = std::fs::read(&path).unwrap();
        let last = whole.len() - (8 + 50);
        for end in last..whole.len() {
            std::fs::write(&path, &whole[..end]).unwrap();
            let (log, read) = Log::open(dir.path()).unwrap();
            assert_eq!(read, payloads[..4], "cut at {end}");
            assert_eq!(log.bytes(), last as u64 - START);
        }
        let mut flipped = whole.clone();
        flipped[last + 8 + 3] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        let (mut log, read) = Log::open(dir.path()).unwrap();
        assert_eq!(read, payloads[..4]);
        // A shorter record over the torn one: what is left of that is not read.
        log.append(b"new").unwrap();
        drop(log);
        let mut expected = payloads[..4].to_vec();
        expected.push(b"new".to_vec());
        assert_eq!(Log::open(dir.path()).unwrap().1, expected);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), whole.len() as u64);
    }

    /// The point of generations: starting over rewrites 16 bytes and keeps the file's
    /// length, and an older generation's record at a record's place, of the same length
    /// and bytes, is not read back.
    #[test]
    fn cleared_logs_start_over_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let (mut log, read) = Log::open(dir.path()).unwrap();
        assert!(read.is_empty());
        for p in [b"one", b"two", b"six"] {
            log.append(p).unwrap();
        }
        let len = std::fs::metadata(&path).unwrap().len();
        log.clear().unwrap();
        assert_eq!(log.bytes(), 0);
        assert!(!holds_records(dir.path()));
        assert!(Log::open(dir.path()).unwrap().1.is_empty());
        log.append(b"one").unwrap();
        assert!(holds_records(dir.path()));
        drop(log);
        assert_eq!(Log::open(dir.path()).unwrap().1, vec![b"one".to_vec()]);
        assert_eq!(read_records(dir.path()).unwrap(), vec![b"one".to_vec()]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), len);

        // A length of zero ends the log (what a failed append leaves).
        let (mut log, _) = Log::open(dir.path()).unwrap();
        log.append(b"two").unwrap();
        let at = log.end;
        log.append(b"six").unwrap();
        log.file.write_all_at(&[0; HEAD], at).unwrap();
        assert_eq!(
            read_records(dir.path()).unwrap(),
            vec![b"one".to_vec(), b"two".to_vec()]
        );
        assert!(
            log.append(b"").is_err(),
            "an empty record would end the log"
        );
    }

    #[test]
    fn logs_of_the_first_format_are_read_and_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let payloads = payloads(3);
        let mut old = MAGIC_01.to_vec();
        for p in &payloads {
            old.extend_from_slice(&(p.len() as u32).to_le_bytes());
            old.extend_from_slice(&crc32fast::hash(p).to_le_bytes());
            old.extend_from_slice(p);
        }
        // A torn last record, as a crash left it.
        old.extend_from_slice(&[7, 0, 0, 0, 1, 2]);
        std::fs::write(&path, &old).unwrap();
        assert!(holds_records(dir.path()));
        assert_eq!(read_records(dir.path()).unwrap(), payloads);
        assert_eq!(std::fs::read(&path).unwrap(), old, "reading wrote");

        let (mut log, read) = Log::open(dir.path()).unwrap();
        assert_eq!(read, payloads);
        assert!(std::fs::read(&path).unwrap().starts_with(MAGIC));
        log.append(b"next").unwrap();
        drop(log);
        let mut expected = payloads.clone();
        expected.push(b"next".to_vec());
        assert_eq!(Log::open(dir.path()).unwrap().1, expected);
    }

    #[test]
    fn other_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LOG_FILE), b"something else entirely").unwrap();
        let e = Log::open(dir.path()).unwrap_err();
        assert!(
            e.to_string().contains("not a neardup write-ahead log"),
            "{e}"
        );
        assert!(holds_records(dir.path()), "kept aside by a repair");
        // The start of a log, cut short, is an empty one.
        std::fs::write(dir.path().join(LOG_FILE), b"ndwal0").unwrap();
        assert!(Log::open(dir.path()).unwrap().1.is_empty());
    }

    #[derive(Debug, Clone)]
    enum Step {
        Append(Vec<u8>),
        Clear,
        Reopen,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => prop::collection::vec(any::<u8>(), 1..40).prop_map(Step::Append),
            // Records of a few lengths made of few bytes: older generations then hold
            // records of the same length and bytes at the places new ones end.
            3 => (1u8..4, 1usize..4).prop_map(|(b, n)| Step::Append(vec![b; n * 8])),
            2 => Just(Step::Clear),
            1 => Just(Step::Reopen),
        ]
    }

    proptest! {
        /// Against a model, a list: what is read back at any moment is what was appended
        /// since the last start-over, whatever the file held before.
        #[test]
        fn reads_back_what_was_appended_since_the_last_start_over(
            steps in prop::collection::vec(step(), 1..60)
        ) {
            let dir = tempfile::tempdir().unwrap();
            let (mut log, _) = Log::open(dir.path()).unwrap();
            let mut model: Vec<Vec<u8>> = Vec::new();
            for step in steps {
                match step {
                    Step::Append(p) => {
                        log.append(&p).unwrap();
                        model.push(p);
                    }
                    Step::Clear => {
                        log.clear().unwrap();
                        model.clear();
                    }
                    Step::Reopen => {
                        drop(log);
                        let (reopened, read) = Log::open(dir.path()).unwrap();
                        prop_assert_eq!(&read, &model);
                        log = reopened;
                    }
                }
                prop_assert_eq!(&read_records(dir.path()).unwrap(), &model);
                prop_assert_eq!(log.bytes(), model.iter().map(|p| 8 + p.len() as u64).sum::<u64>());
            }
        }
    }
}
