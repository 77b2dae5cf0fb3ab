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
//! The file: eight bytes of [`MAGIC`], then records, each its payload's length (u32,
//! little-endian), the payload's CRC-32 and the payload. Only the last record can be cut
//! short or fail its checksum (a crash while it was being written, before it was
//! acknowledged), so reading stops there and cuts it off.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;

use crate::dir::LOG_FILE;
use crate::error::{Result, StoreError};

/// The first bytes of a log file.
const MAGIC: &[u8; 8] = b"ndwal01\n";

/// Bytes before a record's payload: its length and CRC-32.
const HEAD: usize = 8;

/// An open write-ahead log, positioned at its end.
#[derive(Debug)]
pub(crate) struct Log {
    file: File,
    path: PathBuf,
    /// Bytes in the file, [`MAGIC`] included.
    len: u64,
}

impl Log {
    /// Makes an empty log in `dir`, in place of any there.
    pub(crate) fn create(dir: &Path) -> Result<Log> {
        let path = dir.join(LOG_FILE);
        let file = at(&path, || {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)?;
            file.write_all(MAGIC)?;
            file.sync_all()?;
            crate::file::sync_dir(dir)?;
            OpenOptions::new().read(true).append(true).open(&path)
        })?;
        Ok(Log {
            file,
            path,
            len: MAGIC.len() as u64,
        })
    }

    /// Opens the log in `dir` (an empty one if there is none, or only the start of one),
    /// and reads its records' payloads in order. A record cut short or failing its
    /// checksum ends the log: it and anything after it are cut off.
    pub(crate) fn open(dir: &Path) -> Result<(Log, Vec<Vec<u8>>)> {
        let path = dir.join(LOG_FILE);
        let bytes = read_log(&path)?;
        if bytes.len() < MAGIC.len() {
            return Ok((Log::create(dir)?, Vec::new()));
        }
        let (records, end) = records(&bytes);
        let file = at(&path, || {
            OpenOptions::new().read(true).append(true).open(&path)
        })?;
        let mut log = Log {
            file,
            path,
            len: bytes.len() as u64,
        };
        if end < bytes.len() {
            let cut = log.cut(end as u64);
            at(&log.path, || cut)?;
        }
        Ok((log, records))
    }

    /// Appends a record and waits until it is on disk. On failure the log is cut back to
    /// where it was, so a record that was not acknowledged cannot be replayed after
    /// records that were; if even that fails, the error says the log may now be wrong.
    /// Appends `payload` as one record and makes it durable. On failure the record is
    /// cut off again, durably, and the batch stored nothing; when even that fails, the
    /// record may be durable, and the error is [`StoreError::Unsure`].
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
        let len = u32::try_from(payload.len()).map_err(|_| {
            let e = std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a batch of writes over 4 GiB",
            );
            (e, false)
        })?;
        let mut record = Vec::with_capacity(HEAD + payload.len());
        record.extend_from_slice(&len.to_le_bytes());
        record.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        record.extend_from_slice(payload);
        let before = self.len;
        let written = self
            .file
            .write_all(&record)
            .and_then(|()| self.file.sync_data());
        match written {
            Ok(()) => {
                self.len += record.len() as u64;
                Ok(())
            }
            Err(e) => match self.cut(before) {
                Ok(()) => Err((e, false)),
                Err(cut) => Err((
                    std::io::Error::new(
                        e.kind(),
                        format!("{e}; then cutting the record off failed too ({cut})"),
                    ),
                    true,
                )),
            },
        }
    }

    /// Empties the log: every record in it is in the database, durably.
    pub(crate) fn clear(&mut self) -> Result<()> {
        if self.len > MAGIC.len() as u64 {
            let cut = self.cut(MAGIC.len() as u64);
            at(&self.path, || cut)?;
        }
        Ok(())
    }

    /// Bytes of records in the log.
    pub(crate) fn bytes(&self) -> u64 {
        self.len - MAGIC.len() as u64
    }

    /// The log's file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn cut(&mut self, len: u64) -> std::io::Result<()> {
        self.file.set_len(len)?;
        self.file.sync_all()?;
        self.len = len;
        Ok(())
    }
}

/// `f`'s I/O error as the store's, naming the log's file.
fn at<T>(path: &Path, f: impl FnOnce() -> std::io::Result<T>) -> Result<T> {
    f().map_err(|source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The payloads of the whole records of the log in `dir`, read without opening it for
/// writing (a torn last record is left where it is); none when there is no log.
pub(crate) fn read_records(dir: &Path) -> Result<Vec<Vec<u8>>> {
    Ok(records(&read_log(&dir.join(LOG_FILE))?).0)
}

/// The bytes of the log at `path`: none when there is no file; an error when its first
/// bytes are there and are not [`MAGIC`].
fn read_log(path: &Path) -> Result<Vec<u8>> {
    at(path, || {
        let bytes = match std::fs::read(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            read => read?,
        };
        if bytes.len() >= MAGIC.len() && &bytes[..MAGIC.len()] != MAGIC {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not a neardup write-ahead log (its first bytes are not ndwal01)",
            ));
        }
        Ok(bytes)
    })
}

/// Whether the log in `dir` holds anything past its first bytes (whole records or not).
pub(crate) fn holds_records(dir: &Path) -> bool {
    std::fs::metadata(dir.join(LOG_FILE)).is_ok_and(|m| m.len() > MAGIC.len() as u64)
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

/// The whole records of a log file's bytes, and where the last one ends.
fn records(bytes: &[u8]) -> (Vec<Vec<u8>>, usize) {
    let mut at = MAGIC.len();
    let mut out = Vec::new();
    while let Some(head) = bytes.get(at..at + HEAD) {
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let Some(payload) = bytes.get(at + HEAD..at + HEAD + len) else {
            break;
        };
        if crc32fast::hash(payload) != crc {
            break;
        }
        out.push(payload.to_vec());
        at += HEAD + len;
    }
    (out, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_back_and_a_torn_tail_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::create(dir.path()).unwrap();
        let payloads: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 10 * i as usize]).collect();
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
        // the log is then cut back to the records before it.
        let path = dir.path().join(LOG_FILE);
        let whole = std::fs::read(&path).unwrap();
        let last = whole.len() - (8 + 40);
        for end in last..whole.len() {
            std::fs::write(&path, &whole[..end]).unwrap();
            let (log, read) = Log::open(dir.path()).unwrap();
            assert_eq!(read, payloads[..4], "cut at {end}");
            assert_eq!(std::fs::metadata(&path).unwrap().len(), last as u64);
            assert_eq!(log.bytes(), last as u64 - 8);
        }
        let mut flipped = whole.clone();
        flipped[last + 8 + 3] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        assert_eq!(Log::open(dir.path()).unwrap().1, payloads[..4]);
    }

    #[test]
    fn cleared_logs_start_over_and_other_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, read) = Log::open(dir.path()).unwrap();
        assert!(read.is_empty());
        log.append(b"one").unwrap();
        log.clear().unwrap();
        assert_eq!(log.bytes(), 0);
        log.append(b"two").unwrap();
        drop(log);
        assert_eq!(Log::open(dir.path()).unwrap().1, vec![b"two".to_vec()]);

        std::fs::write(dir.path().join(LOG_FILE), b"something else entirely").unwrap();
        let e = Log::open(dir.path()).unwrap_err();
        assert!(
            e.to_string().contains("not a neardup write-ahead log"),
            "{e}"
        );
    }
}
