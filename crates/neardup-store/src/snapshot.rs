//! The band indexes and the id map of a document store, written beside its database so that opening it
//! reads them back instead of rebuilding them from every stored signature (which at 100
//! million documents means reading tens of GB and sorting 2 billion keys).
//!
//! The file says which state of the database it holds: the store's instance (a random
//! number made with it, so a snapshot never applies to another store) and the count of
//! write transactions committed when it was taken. Opening loads it and catches up from
//! the database: documents numbered from the snapshot's `next_id` on are added, and the
//! removals logged since its commit are applied (the `removed` table, pruned once a newer
//! snapshot is durable). A snapshot that is missing, damaged, from another store or older
//! than the log reaches back is ignored: the indexes are rebuilt as before. It is only a
//! shortcut; the database alone is the truth.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use neardup::corpus::{BandIndex, BandSnapshot};

use crate::dir::SNAPSHOT;
use crate::error::{Result, StoreError};
use crate::file;
use crate::ids::{IdMap, IdSnapshot};

/// "NDSNAP" and the format's version (02: with the id map; 03: without the documents'
/// index, which a start builds from the keys file).
const MAGIC: u64 = u64::from_le_bytes(*b"NDSNAP03");

/// Which state of which store a snapshot holds, and the settings its keys were made with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) instance: u64,
    pub(crate) commit: u64,
    pub(crate) next_id: u64,
    pub(crate) threshold_bits: u64,
    pub(crate) paragraphs: bool,
}

impl Header {
    const WORDS: usize = 6;

    fn to_bytes(self) -> [u8; 8 * Header::WORDS] {
        let words = [
            MAGIC,
            self.instance,
            self.commit,
            self.next_id,
            self.threshold_bits,
            u64::from(self.paragraphs),
        ];
        let mut out = [0; 8 * Header::WORDS];
        for (chunk, w) in out.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        out
    }

    fn from_bytes(b: &[u8; 8 * Header::WORDS]) -> Option<Header> {
        let w = |i: usize| {
            let mut x = [0; 8];
            x.copy_from_slice(&b[8 * i..8 * i + 8]);
            u64::from_le_bytes(x)
        };
        (w(0) == MAGIC && w(5) <= 1).then(|| Header {
            instance: w(1),
            commit: w(2),
            next_id: w(3),
            threshold_bits: w(4),
            paragraphs: w(5) == 1,
        })
    }
}

/// Writes the snapshot of `docs`, `paras` and `ids` as `header` says, aside first, then
/// in place of the last one, durably.
pub(crate) fn write(
    dir: &Path,
    header: Header,
    paras: &BandSnapshot,
    ids: &IdSnapshot,
) -> io::Result<()> {
    let aside = file::aside(dir, "snapshot");
    let written = (|| {
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&aside)?);
        out.write_all(&header.to_bytes())?;
        paras.write_to(&mut out)?;
        ids.write_to(&mut out)?;
        out.into_inner()
            .map_err(io::IntoInnerError::into_error)?
            .sync_all()?;
        std::fs::rename(&aside, dir.join(SNAPSHOT))?;
        file::sync_dir(dir)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&aside);
    }
    written
}

/// The snapshot in `dir`, if there is one whose header `usable` accepts: its header and
/// indexes and id map. `Ok(None)` when there is none or it is not usable; an error when
/// it is damaged.
pub(crate) fn read(
    dir: &Path,
    usable: impl FnOnce(&Header) -> bool,
) -> io::Result<Option<(Header, BandIndex, IdMap)>> {
    let file = match File::open(path(dir)) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut input = BufReader::with_capacity(1 << 20, file);
    let mut head = [0; 8 * Header::WORDS];
    if input.read_exact(&mut head).is_err() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "cut short"));
    }
    let Some(header) = Header::from_bytes(&head) else {
        return Ok(None);
    };
    if !usable(&header) {
        return Ok(None);
    }
    let paras = BandIndex::read_from(&mut input)?;
    let ids = IdMap::read_from(&mut input)?;
    Ok(Some((header, paras, ids)))
}

/// Where the snapshot of the store in `dir` is.
pub(crate) fn path(dir: &Path) -> PathBuf {
    dir.join(SNAPSHOT)
}

/// A snapshot of a document store's indexes being written
/// ([`DocumentStore::begin_snapshot`](crate::DocumentStore::begin_snapshot)).
#[derive(Debug)]
pub struct SnapshotJob {
    pub(crate) dir: PathBuf,
    pub(crate) header: Header,
    pub(crate) paras: BandSnapshot,
    pub(crate) ids: IdSnapshot,
}

impl SnapshotJob {
    /// Writes it, durably, in place of the last one; on any thread.
    pub fn write(&self) -> Result<()> {
        write(&self.dir, self.header, &self.paras, &self.ids).map_err(|source| StoreError::Io {
            path: path(&self.dir),
            source,
        })
    }

    /// Documents it holds.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether it holds no document.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
