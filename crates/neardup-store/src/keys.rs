//! The band keys of a document store's documents, in a file of their own beside the
//! database (`neardup.keys`), by internal number: the index's source. A start reads one
//! band at a time and builds that band of the index from it, so no snapshot has to repeat
//! the keys in the index's form, and the rows in redb do not carry them.
//!
//! The file is a 4 KiB header (magic and the store's instance) then chunks of [`CHUNK`]
//! documents, each band's keys of a chunk together: a band of every document is one
//! 256 KiB read a chunk. Keys are written as documents are numbered, always at the end, and
//! become durable with the database: a durable commit first syncs the file, then records
//! in the [`KEY_CRCS`] table how many documents of each chunk's band it vouches for, and
//! their CRC-32. Opening reads back only what the database's last durable commit vouches
//! for (what came after is written again by the write-ahead log's replay) and refuses a
//! band whose CRC differs.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use neardup::jaccard::{BandKeys, BANDS};
use redb::TableDefinition;

use crate::dir::FILE;
pub(crate) use crate::dir::KEYS_FILE;
use crate::error::{Result, StoreError};

/// Documents a chunk.
pub(crate) const CHUNK: u64 = 1 << 16;

/// (chunk, band) and (documents of the chunk vouched for, CRC-32 of their keys in that
/// band): a row of [`KEY_CRCS`].
pub(crate) type Vouched = ((u64, u8), (u32, u32));

/// (chunk, band) → (documents of the chunk vouched for, CRC-32 of their keys in that
/// band, little-endian).
pub(crate) const KEY_CRCS: TableDefinition<(u64, u8), (u32, u32)> =
    TableDefinition::new("key_crcs");

const HEADER: u64 = 4096;
/// "NDKEYS" and the format's version.
const MAGIC: u64 = u64::from_le_bytes(*b"NDKEYS01");
const BAND_BYTES: u64 = CHUNK * 4;
const CHUNK_BYTES: u64 = BAND_BYTES * BANDS as u64;

fn offset(chunk: u64, band: usize, within: u64) -> u64 {
    HEADER + chunk * CHUNK_BYTES + band as u64 * BAND_BYTES + within * 4
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn damaged(path: &Path, detail: String) -> StoreError {
    StoreError::Damaged {
        path: path.to_path_buf(),
        detail,
    }
}

/// Reads of the keys file, for any thread.
#[derive(Clone, Debug)]
pub(crate) struct KeyReader {
    path: PathBuf,
    file: Arc<File>,
}

impl KeyReader {
    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The band keys of document `internal` (written, not necessarily durable yet).
    pub(crate) fn keys_of(&self, internal: u64) -> Result<BandKeys> {
        let (chunk, within) = (internal / CHUNK, internal % CHUNK);
        let mut keys = [0u32; BANDS];
        for (band, key) in keys.iter_mut().enumerate() {
            let mut b = [0; 4];
            self.file
                .read_exact_at(&mut b, offset(chunk, band, within))
                .map_err(io_error(&self.path))?;
            *key = u32::from_le_bytes(b);
        }
        Ok(keys)
    }

    /// Asks the kernel to read band `band` of documents `0..len` into the page cache in the
    /// background. A band is a 256 KiB read a chunk, 5 MiB apart: read one by one from a
    /// cold cache, each waits for the disk while the band before it is sorted on another
    /// core. Advice only: an error is ignored, and the reads check what they get.
    pub(crate) fn will_need(&self, band: usize, len: u64) {
        use std::os::fd::AsRawFd;
        if band >= BANDS {
            return;
        }
        for chunk in 0..len.div_ceil(CHUNK) {
            let docs = (len - chunk * CHUNK).min(CHUNK);
            let (Ok(at), Ok(bytes)) = (
                libc::off_t::try_from(offset(chunk, band, 0)),
                libc::off_t::try_from(docs * 4),
            ) else {
                return;
            };
            // SAFETY: a plain system call on a descriptor this reader owns; no memory is
            // passed.
            unsafe {
                libc::posix_fadvise(self.file.as_raw_fd(), at, bytes, libc::POSIX_FADV_WILLNEED)
            };
        }
    }

    /// Band `band` of documents `0..len`, each chunk's part checked against `vouched`
    /// (the chunk's documents vouched for and their CRC, from [`KEY_CRCS`]).
    pub(crate) fn band(
        &self,
        band: usize,
        len: u64,
        vouched: impl Fn(u64) -> Option<(u32, u32)>,
        keys: &mut Vec<u32>,
    ) -> Result<()> {
        keys.clear();
        keys.try_reserve_exact(len as usize).map_err(|_| {
            damaged(
                &self.path,
                format!("{len} documents' keys do not fit in memory"),
            )
        })?;
        let mut buf = vec![0u8; BAND_BYTES as usize];
        for chunk in 0..len.div_ceil(CHUNK) {
            let docs = (len - chunk * CHUNK).min(CHUNK);
            let bytes = &mut buf[..docs as usize * 4];
            self.file
                .read_exact_at(bytes, offset(chunk, band, 0))
                .map_err(|e| match e.kind() {
                    std::io::ErrorKind::UnexpectedEof => damaged(
                        &self.path,
                        format!("cut short: band {band} of documents from {}", chunk * CHUNK),
                    ),
                    _ => io_error(&self.path)(e),
                })?;
            let crc = crc32fast::hash(bytes);
            if vouched(chunk) != Some((docs as u32, crc)) {
                return Err(damaged(
                    &self.path,
                    format!(
                        "band {band} of documents {} to {}: its checksum differs from the one \
                         {FILE} holds",
                        chunk * CHUNK,
                        chunk * CHUNK + docs - 1
                    ),
                ));
            }
            keys.extend(
                bytes
                    .chunks_exact(4)
                    .map(|k| u32::from_le_bytes([k[0], k[1], k[2], k[3]])),
            );
        }
        Ok(())
    }
}

/// The writer of the keys file.
pub(crate) struct KeyFile {
    reader: KeyReader,
    /// Documents written: the next one's number.
    len: u64,
    /// The CRC of each band of the last chunk so far.
    running: Vec<crc32fast::Hasher>,
    /// Chunks completed since the last durable commit, with their bands' CRCs.
    completed: Vec<(u64, Vec<u32>)>,
}

impl std::fmt::Debug for KeyFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyFile")
            .field("path", &self.reader.path)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// Where a repair leaves the keys file of the store it made (of `instance`) until the
/// new database has its name: the store's open then moves it into place.
pub(crate) fn pending_path(dir: &Path, instance: u64) -> PathBuf {
    dir.join(format!("{KEYS_FILE}.{instance:016x}"))
}

/// The instance in the header of the keys file at `path`, if it is one.
fn instance_of(path: &Path) -> Option<u64> {
    header(&File::open(path).ok()?).ok()?
}

/// The instance in `file`'s header, `None` if it is no keys file's; an error if the
/// header is cut short.
fn header(file: &File) -> std::io::Result<Option<u64>> {
    let mut head = [0u8; 16];
    file.read_exact_at(&mut head, 0)?;
    let word = |i: usize| u64::from_le_bytes(head[i..i + 8].try_into().unwrap_or([0; 8]));
    Ok((word(0) == MAGIC).then(|| word(8)))
}

/// Moves the keys file a repair left for `instance` into place, if there is one and the
/// file in place is not already of `instance` (a repair stopped between its renames).
pub(crate) fn adopt_pending(dir: &Path, instance: u64) -> Result<()> {
    let pending = pending_path(dir, instance);
    let path = dir.join(KEYS_FILE);
    if !pending.exists() || instance_of(&path) == Some(instance) {
        return Ok(());
    }
    let io = io_error(&path);
    std::fs::rename(&pending, &path).map_err(&io)?;
    crate::file::sync_dir(dir).map_err(&io)
}

impl KeyReader {
    /// The keys file of the store in `dir` (of `instance`) for reading, as [`crate::check`]
    /// reads it (nothing moved or written).
    pub(crate) fn open(dir: &Path, instance: u64) -> Result<KeyReader> {
        let mut path = dir.join(KEYS_FILE);
        if instance_of(&path) != Some(instance) && pending_path(dir, instance).exists() {
            path = pending_path(dir, instance);
        }
        let file = File::open(&path).map_err(io_error(&path))?;
        check_header(&path, &file, instance)?;
        Ok(KeyReader {
            path,
            file: Arc::new(file),
        })
    }
}

/// [`StoreError::Damaged`] unless `file` starts with a keys file's header of `instance`.
fn check_header(path: &Path, file: &File, instance: u64) -> Result<()> {
    let found = header(file).map_err(|_| damaged(path, "its header is cut short".into()))?;
    match found {
        None => Err(damaged(path, "not a file of band keys".into())),
        Some(other) if other != instance => Err(damaged(
            path,
            format!(
                "the band keys of another store (instance {other:x}, where {FILE} says {instance:x})"
            ),
        )),
        Some(_) => Ok(()),
    }
}

impl KeyFile {
    /// The keys file of the store in `dir` (of `instance`), holding the `len` documents
    /// the database's last durable commit numbered, each chunk as `vouched` says (see
    /// [`KeyReader::band`]: only the last chunk is read here; the others are read, and
    /// checked, band by band when the index is built). Made when missing and `len` is 0.
    /// What was written past `len` is cut off.
    pub(crate) fn open(
        dir: &Path,
        instance: u64,
        len: u64,
        vouched: impl Fn(u64, usize) -> Option<(u32, u32)>,
    ) -> Result<KeyFile> {
        adopt_pending(dir, instance)?;
        KeyFile::open_at(dir.join(KEYS_FILE), instance, len, vouched)
    }

    /// [`KeyFile::open`] of the file at `path`.
    pub(crate) fn open_at(
        path: PathBuf,
        instance: u64,
        len: u64,
        vouched: impl Fn(u64, usize) -> Option<(u32, u32)>,
    ) -> Result<KeyFile> {
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let io = io_error(&path);
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && len == 0 => {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .map_err(&io)?;
                let mut head = vec![0u8; HEADER as usize];
                head[..8].copy_from_slice(&MAGIC.to_le_bytes());
                head[8..16].copy_from_slice(&instance.to_le_bytes());
                file.write_all_at(&head, 0).map_err(&io)?;
                file.sync_all().map_err(&io)?;
                crate::file::sync_dir(&dir).map_err(&io)?;
                file
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(damaged(
                    &path,
                    format!("missing, where the database numbers {len} documents"),
                ))
            }
            Err(e) => return Err(io(e)),
        };
        check_header(&path, &file, instance)?;
        let chunks = len.div_ceil(CHUNK);
        file.set_len(HEADER + chunks * CHUNK_BYTES).map_err(&io)?;
        let reader = KeyReader {
            path: path.clone(),
            file: Arc::new(file),
        };
        let mut running = vec![crc32fast::Hasher::new(); BANDS];
        if !len.is_multiple_of(CHUNK) {
            let last = len / CHUNK;
            for (band, hasher) in running.iter_mut().enumerate() {
                let mut bytes = vec![0u8; (len % CHUNK) as usize * 4];
                reader
                    .file
                    .read_exact_at(&mut bytes, offset(last, band, 0))
                    .map_err(io_error(&reader.path))?;
                let crc = crc32fast::hash(&bytes);
                if vouched(last, band) != Some(((len % CHUNK) as u32, crc)) {
                    return Err(damaged(
                        &reader.path,
                        format!(
                            "band {band} of documents from {}: its checksum differs from the one \
                             {FILE} holds",
                            last * CHUNK
                        ),
                    ));
                }
                hasher.update(&bytes);
            }
        }
        Ok(KeyFile {
            reader,
            len,
            running,
            completed: Vec::new(),
        })
    }

    /// Reads of the file, for other threads.
    pub(crate) fn reader(&self) -> KeyReader {
        self.reader.clone()
    }

    /// Documents written.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Writes the keys of documents `first..first + keys.len()`; `first` must be
    /// [`KeyFile::len`] (documents are numbered in order, each once).
    pub(crate) fn append(&mut self, first: u64, keys: &[BandKeys]) -> Result<()> {
        if first != self.len {
            return Err(damaged(
                &self.reader.path,
                format!(
                    "keys of document {first} written after {} documents",
                    self.len
                ),
            ));
        }
        let mut rest = keys;
        let mut buf = Vec::new();
        while !rest.is_empty() {
            let (chunk, within) = (self.len / CHUNK, self.len % CHUNK);
            let take = rest.len().min((CHUNK - within) as usize);
            let (now, later) = rest.split_at(take);
            for (band, hasher) in self.running.iter_mut().enumerate() {
                buf.clear();
                buf.extend(now.iter().flat_map(|k| k[band].to_le_bytes()));
                self.reader
                    .file
                    .write_all_at(&buf, offset(chunk, band, within))
                    .map_err(io_error(&self.reader.path))?;
                hasher.update(&buf);
            }
            self.len += take as u64;
            if self.len.is_multiple_of(CHUNK) {
                let crcs = self
                    .running
                    .iter_mut()
                    .map(|h| std::mem::replace(h, crc32fast::Hasher::new()).finalize())
                    .collect();
                self.completed.push((chunk, crcs));
            }
            rest = later;
        }
        Ok(())
    }

    /// Makes what is written durable, and hands out what a durable commit then vouches
    /// for: each band's (documents, CRC) of the chunks completed since the last one and of
    /// the last chunk so far.
    pub(crate) fn sync(&mut self) -> Result<Vec<Vouched>> {
        self.reader
            .file
            .sync_data()
            .map_err(io_error(&self.reader.path))?;
        let mut out = Vec::new();
        for (chunk, crcs) in self.completed.drain(..) {
            for (band, crc) in crcs.into_iter().enumerate() {
                out.push(((chunk, band as u8), (CHUNK as u32, crc)));
            }
        }
        let within = self.len % CHUNK;
        if within != 0 {
            for (band, h) in self.running.iter().enumerate() {
                out.push((
                    (self.len / CHUNK, band as u8),
                    (within as u32, h.clone().finalize()),
                ));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn keys(i: u64) -> BandKeys {
        std::array::from_fn(|b| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(b as u32)
        })
    }

    /// Written in batches across chunks, synced now and then, reopened at each durable
    /// length: every band and every document's keys read back as written, and what was
    /// written past the durable length is cut off and written again.
    #[test]
    fn keys_read_back_at_every_durable_length() {
        let dir = tempfile::tempdir().unwrap();
        let mut vouched: HashMap<(u64, u8), (u32, u32)> = HashMap::new();
        let mut file = KeyFile::open(dir.path(), 7, 0, |_, _| None).unwrap();
        let batches = [1u64, 5000, 70_000, 3, 65_536 * 2 - 75_004, 10];
        let mut durable = 0;
        for (i, &n) in batches.iter().enumerate() {
            let first = file.len();
            let batch: Vec<BandKeys> = (first..first + n).map(keys).collect();
            file.append(first, &batch).unwrap();
            if i % 2 == 0 {
                vouched.extend(file.sync().unwrap());
                durable = file.len();
            }
        }
        // Reopened at the durable length: the batch after it is gone, and written again.
        drop(file);
        let get =
            |v: &HashMap<(u64, u8), (u32, u32)>, c: u64, b: usize| v.get(&(c, b as u8)).copied();
        let mut file = KeyFile::open(dir.path(), 7, durable, |c, b| get(&vouched, c, b)).unwrap();
        assert_eq!(file.len(), durable);
        let more: Vec<BandKeys> = (durable..durable + 100_000).map(keys).collect();
        file.append(durable, &more).unwrap();
        vouched.extend(file.sync().unwrap());
        let len = file.len();
        let reader = file.reader();
        let mut got = vec![7];
        for band in 0..BANDS {
            reader
                .band(band, len, |c| get(&vouched, c, band), &mut got)
                .unwrap();
            assert_eq!(got.len() as u64, len);
            assert!(got
                .iter()
                .enumerate()
                .all(|(i, &k)| k == keys(i as u64)[band]));
        }
        for i in [0, 1, 65_535, 65_536, len - 1] {
            assert_eq!(reader.keys_of(i).unwrap(), keys(i));
        }
        assert!(file.append(len + 1, &[keys(0)]).is_err());
        // Out of order, or of another store: refused.
        drop(file);
        let err = KeyFile::open(dir.path(), 8, len, |c, b| get(&vouched, c, b)).unwrap_err();
        assert!(err.to_string().contains("another store"), "{err}");
    }

    /// A flipped byte anywhere in the keys is refused when its band is read (or, in the
    /// last chunk, when the file is opened); a file cut short too.
    #[test]
    fn damaged_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = KeyFile::open(dir.path(), 1, 0, |_, _| None).unwrap();
        let len = CHUNK + 1000;
        let all: Vec<BandKeys> = (0..len).map(keys).collect();
        file.append(0, &all).unwrap();
        let vouched: HashMap<(u64, u8), (u32, u32)> = file.sync().unwrap().into_iter().collect();
        drop(file);
        let path = dir.path().join(KEYS_FILE);
        let whole = std::fs::read(&path).unwrap();
        let read_all = || -> Result<()> {
            let file = KeyFile::open(dir.path(), 1, len, |c, b| {
                vouched.get(&(c, b as u8)).copied()
            })?;
            let mut keys = Vec::new();
            for band in 0..BANDS {
                file.reader().band(
                    band,
                    len,
                    |c| vouched.get(&(c, band as u8)).copied(),
                    &mut keys,
                )?;
            }
            Ok(())
        };
        read_all().unwrap();
        for (chunk, band, within) in [(0, 0, 0), (0, 19, 65_535), (1, 3, 999), (1, 19, 0)] {
            let mut bytes = whole.clone();
            bytes[offset(chunk, band, within) as usize] ^= 1;
            std::fs::write(&path, &bytes).unwrap();
            let err = read_all().unwrap_err();
            assert!(err.to_string().contains("checksum"), "{err}");
        }
        std::fs::write(&path, &whole[..offset(1, 0, 0) as usize]).unwrap();
        assert!(read_all().is_err());
        std::fs::remove_file(&path).unwrap();
        let err = read_all().unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }
}
