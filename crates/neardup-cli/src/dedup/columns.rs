//! Per-document values of the first pass, one column each, in memory or in a temporary
//! file: the state that out-of-core dedup spills when it would not fit in its memory
//! budget. A column is written once, in input order, and then read in order (a range at a
//! time) or for chosen documents.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

use anyhow::anyhow;
use neardup::jaccard::{self, Sketch};

use crate::failure::Failure;

/// A value of fixed size, as a column stores it.
pub(crate) trait Fixed: Copy + Send + Sync {
    /// Bytes of one value.
    const SIZE: usize;
    /// Writes the value into `out` (`SIZE` bytes).
    fn put(&self, out: &mut [u8]);
    /// The value `put` wrote into `bytes` (`SIZE` bytes).
    fn get(bytes: &[u8]) -> Self;
}

impl Fixed for u32 {
    const SIZE: usize = 4;
    fn put(&self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_le_bytes());
    }
    fn get(bytes: &[u8]) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(bytes);
        u32::from_le_bytes(b)
    }
}

/// What tells a document's text from others: a 64-bit hash of its bytes and its length.
/// Documents with equal keys are copies of one text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct TextKey {
    pub(crate) hash: u64,
    pub(crate) len: u32,
}

impl TextKey {
    /// The key of `text`.
    pub(crate) fn of(text: &str) -> TextKey {
        TextKey {
            hash: xxhash_rust::xxh3::xxh3_64(text.as_bytes()),
            len: u32::try_from(text.len()).unwrap_or(u32::MAX),
        }
    }
}

impl Fixed for TextKey {
    const SIZE: usize = 12;
    fn put(&self, out: &mut [u8]) {
        out[..8].copy_from_slice(&self.hash.to_le_bytes());
        out[8..].copy_from_slice(&self.len.to_le_bytes());
    }
    fn get(bytes: &[u8]) -> TextKey {
        let mut h = [0u8; 8];
        h.copy_from_slice(&bytes[..8]);
        TextKey {
            hash: u64::from_le_bytes(h),
            len: u32::get(&bytes[8..]),
        }
    }
}

impl Fixed for Sketch {
    const SIZE: usize = jaccard::BYTES;
    fn put(&self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_bytes());
    }
    fn get(bytes: &[u8]) -> Sketch {
        let mut b = [0u8; jaccard::BYTES];
        b.copy_from_slice(bytes);
        Sketch::from_bytes(&b)
    }
}

/// Values read from a file at a time: a few megabytes.
const READ_VALUES: usize = 1 << 16;

fn temp_failure(what: &str, e: std::io::Error) -> Failure {
    Failure::io(anyhow!(
        "cannot {what} a temporary file of dedup's spilled state (TMPDIR): {e}"
    ))
}

/// Values per chunk of a column in memory: a column grows by chunks, not by doubling a
/// vector, which at 10 million documents held up to twice the band keys for nothing
/// (peak 1.53 GB where the columns needed 0.92).
const CHUNK: usize = 1 << 16;

/// One value per document, in input order: in memory, or in a temporary file once
/// [`Column::spill`] has moved it there (the file is deleted when the column drops).
pub(crate) struct Column<T: Fixed> {
    /// Chunks of [`CHUNK`] values, the last one filling.
    memory: Vec<Vec<T>>,
    file: Option<BufWriter<File>>,
    len: u64,
    bytes: Vec<u8>,
}

impl<T: Fixed> Column<T> {
    /// An empty column in memory.
    pub(crate) fn new() -> Column<T> {
        Column {
            memory: Vec::new(),
            file: None,
            len: 0,
            bytes: vec![0; T::SIZE],
        }
    }

    /// An empty column in a file from the start.
    pub(crate) fn on_disk() -> Result<Column<T>, Failure> {
        let mut c = Column::new();
        c.spill()?;
        Ok(c)
    }

    /// Values in the column.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Whether the values are in a file.
    pub(crate) fn spilled(&self) -> bool {
        self.file.is_some()
    }

    /// Bytes the column holds in memory.
    pub(crate) fn resident(&self) -> u64 {
        (self.memory.len() * CHUNK * std::mem::size_of::<T>()) as u64
    }

    /// Bytes a column of `n` values holds in memory.
    pub(crate) fn resident_for(n: u64) -> u64 {
        n.div_ceil(CHUNK as u64) * (CHUNK * std::mem::size_of::<T>()) as u64
    }

    /// Appends the next document's value.
    pub(crate) fn push(&mut self, v: T) -> Result<(), Failure> {
        self.len += 1;
        match &mut self.file {
            None => {
                match self.memory.last_mut() {
                    Some(chunk) if chunk.len() < CHUNK => chunk.push(v),
                    _ => {
                        let mut chunk = Vec::with_capacity(CHUNK);
                        chunk.push(v);
                        self.memory.push(chunk);
                    }
                }
                Ok(())
            }
            Some(out) => {
                v.put(&mut self.bytes);
                out.write_all(&self.bytes)
                    .map_err(|e| temp_failure("write", e))
            }
        }
    }

    /// Moves the values to a temporary file; later values go there too.
    pub(crate) fn spill(&mut self) -> Result<(), Failure> {
        if self.file.is_some() {
            return Ok(());
        }
        let file = tempfile::tempfile().map_err(|e| temp_failure("create", e))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut bytes = vec![0u8; T::SIZE];
        for v in self.memory.iter().flatten() {
            v.put(&mut bytes);
            out.write_all(&bytes)
                .map_err(|e| temp_failure("write", e))?;
        }
        self.memory = Vec::new();
        self.file = Some(out);
        Ok(())
    }

    /// Gives back the disk space of a spilled column whose values will not be read again
    /// (after [`Column::finish`]: nothing is left to flush). Reading it afterwards fails.
    pub(crate) fn discard(&self) -> Result<(), Failure> {
        match &self.file {
            Some(w) => w
                .get_ref()
                .set_len(0)
                .map_err(|e| temp_failure("truncate", e)),
            None => Ok(()),
        }
    }

    /// Ends the writing: flushes the file.
    pub(crate) fn finish(&mut self) -> Result<(), Failure> {
        match &mut self.file {
            Some(out) => out.flush().map_err(|e| temp_failure("write", e)),
            None => Ok(()),
        }
    }

    /// The value of document `d` of a column in memory.
    fn at(&self, d: u64) -> Option<T> {
        let d = usize::try_from(d).ok()?;
        self.memory.get(d / CHUNK)?.get(d % CHUNK).copied()
    }

    /// Reads values `from..to` of a spilled column into `out` (cleared first).
    fn read_range(
        &self,
        from: u64,
        to: u64,
        out: &mut Vec<T>,
        raw: &mut Vec<u8>,
    ) -> Result<(), Failure> {
        out.clear();
        let Some(w) = &self.file else {
            out.extend((from..to).filter_map(|d| self.at(d)));
            return Ok(());
        };
        raw.resize((to - from) as usize * T::SIZE, 0);
        w.get_ref()
            .read_exact_at(raw, from * T::SIZE as u64)
            .map_err(|e| temp_failure("read", e))?;
        out.extend(raw.chunks_exact(T::SIZE).map(T::get));
        Ok(())
    }

    /// Bytes a read of a spilled column ([`Column::gather`], [`Column::for_each`]) holds
    /// besides what it returns.
    pub(crate) fn read_buffers() -> u64 {
        2 * (READ_VALUES * T::SIZE) as u64
    }

    /// Calls `f(first, values)` over the whole column in order, a slice at a time
    /// (`first` is the position of `values[0]`). Call [`Column::finish`] first.
    pub(crate) fn for_each(
        &self,
        mut f: impl FnMut(u64, &[T]) -> Result<(), Failure>,
    ) -> Result<(), Failure> {
        if self.file.is_none() {
            for (k, chunk) in self.memory.iter().enumerate() {
                f((k * CHUNK) as u64, chunk)?;
            }
            return Ok(());
        }
        let (mut buf, mut raw) = (Vec::new(), Vec::new());
        let mut at = 0;
        while at < self.len {
            let to = (at + READ_VALUES as u64).min(self.len);
            self.read_range(at, to, &mut buf, &mut raw)?;
            f(at, &buf)?;
            at = to;
        }
        Ok(())
    }

    /// The values of documents `docs` (increasing), in that order. From a file, runs of
    /// nearby documents are read together, far ones one by one.
    pub(crate) fn gather(&self, docs: &[u32]) -> Result<Vec<T>, Failure> {
        if self.file.is_none() {
            return docs
                .iter()
                .map(|&d| {
                    self.at(u64::from(d))
                        .ok_or_else(|| Failure::io(anyhow!("no document {d} in dedup's state")))
                })
                .collect();
        }
        let mut out = Vec::with_capacity(docs.len());
        let (mut buf, mut raw) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < docs.len() {
            let from = u64::from(docs[i]);
            // The documents needed within the next block of values: read up to the last.
            let mut j = i;
            while j + 1 < docs.len() && u64::from(docs[j + 1]) < from + READ_VALUES as u64 {
                j += 1;
            }
            let to = u64::from(docs[j]) + 1;
            if to > self.len {
                return Err(Failure::io(anyhow!(
                    "dedup's spilled state holds {} documents, not {to}",
                    self.len
                )));
            }
            self.read_range(from, to, &mut buf, &mut raw)?;
            out.extend(
                docs[i..=j]
                    .iter()
                    .map(|&d| buf[(u64::from(d) - from) as usize]),
            );
            i = j + 1;
        }
        Ok(out)
    }

    /// The value of document `doc`, read where it lies (for a column too large to gather).
    pub(crate) fn get(&self, doc: u32) -> Result<T, Failure> {
        if self.file.is_none() {
            return self
                .at(u64::from(doc))
                .ok_or_else(|| Failure::io(anyhow!("no document {doc} in dedup's state")));
        }
        let mut raw = vec![0u8; T::SIZE];
        if let Some(w) = &self.file {
            w.get_ref()
                .read_exact_at(&mut raw, u64::from(doc) * T::SIZE as u64)
                .map_err(|e| temp_failure("read", e))?;
        }
        Ok(T::get(&raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spilled or not, before or after some values, a column reads back what was pushed.
    #[test]
    fn columns_read_back_what_was_pushed() {
        for spill_at in [None, Some(0), Some(3), Some(150_000)] {
            let mut c: Column<TextKey> = Column::new();
            let n = 200_000u32;
            let value = |i: u32| TextKey {
                hash: u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                len: i ^ 5,
            };
            for i in 0..n {
                if Some(i) == spill_at {
                    c.spill().unwrap();
                }
                c.push(value(i)).unwrap();
            }
            c.finish().unwrap();
            assert_eq!(c.spilled(), spill_at.is_some());
            let mut seen = 0u32;
            c.for_each(|first, vs| {
                assert_eq!(first, u64::from(seen));
                for v in vs {
                    assert_eq!(*v, value(seen));
                    seen += 1;
                }
                Ok(())
            })
            .unwrap();
            assert_eq!(seen, n);
            let docs: Vec<u32> = [0, 1, 2, 70_000, 70_001, 199_999].to_vec();
            let got = c.gather(&docs).unwrap();
            assert_eq!(got, docs.iter().map(|&d| value(d)).collect::<Vec<_>>());
            assert_eq!(c.get(123_456).unwrap(), value(123_456));
            assert!(c.gather(&[n]).is_err());
        }
    }
}
