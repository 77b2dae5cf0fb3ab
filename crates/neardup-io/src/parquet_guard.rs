//! A Parquet file's Thrift structures (its footer and every page header), walked before
//! the parquet crate reads them.
//!
//! The parquet crate (60.1) skips the fields it does not know without consuming the
//! booleans of a list, set or map, and without noticing the end of its input: a damaged
//! header of a few bytes declaring two billion such elements keeps it looping for minutes
//! (found by fuzzing: a 266-byte file took 75 s). [`check`] walks the same bytes with the
//! Thrift compact protocol's rules (every element of a collection takes at least a byte)
//! without allocating, and refuses any length or count larger than the bytes left to hold
//! it, which no real file has. What it does not refuse is left to the parquet crate's own
//! errors.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use parquet::file::reader::{FileReader, SerializedFileReader};

/// Thrift structures nest far less deep in any real Parquet file.
const MAX_DEPTH: u32 = 64;
/// Page headers are read this many bytes at a time (more when a header is longer).
const WINDOW: u64 = 64 << 10;

/// Why the Parquet file at `path` is refused, or `Ok` (the parquet crate may still refuse
/// it, with its own error).
pub fn check(path: &str) -> Result<(), String> {
    let mut file = File::open(path).map_err(|e| e.to_string())?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    if len < 12 {
        return Ok(());
    }
    let tail = read_at(&mut file, len - 8, 8)?;
    if &tail[4..] != b"PAR1" {
        return Ok(());
    }
    let meta_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if meta_len > len - 8 {
        return Ok(());
    }
    let meta = read_at(&mut file, len - 8 - meta_len, meta_len)?;
    let mut walk = Walk::new(&meta);
    walk.value(STRUCT, 0, false)
        .map_err(|why| format!("its footer is damaged ({why})"))?;

    // The footer reads: now every page header of every column chunk.
    let Ok(reader) = File::open(path)
        .map_err(drop)
        .and_then(|f| SerializedFileReader::new(f).map_err(drop))
    else {
        return Ok(());
    };
    for (g, group) in reader.metadata().row_groups().iter().enumerate() {
        for (c, column) in group.columns().iter().enumerate() {
            let start = column
                .dictionary_page_offset()
                .unwrap_or(column.data_page_offset());
            let (Ok(start), Ok(size)) = (
                u64::try_from(start),
                u64::try_from(column.compressed_size()),
            ) else {
                return Ok(());
            };
            let end = start.saturating_add(size).min(len);
            pages(&mut file, start, end).map_err(|why| {
                format!("a page header of row group {g}, column {c} is damaged ({why})")
            })?;
        }
    }
    Ok(())
}

/// Walks the page headers of the column chunk in `start..end`.
fn pages(file: &mut File, mut at: u64, end: u64) -> Result<(), String> {
    while at < end {
        let mut window = WINDOW.min(end - at);
        let (header, size) = loop {
            let bytes = read_at(file, at, window)?;
            let mut walk = Walk::new(&bytes);
            match walk.page_header() {
                Ok(size) => break (walk.at as u64, size),
                // A header longer than the window: read more of it.
                Err("cut short") if window < end - at => window = (window * 4).min(end - at),
                Err(why) => return Err(why.into()),
            }
        };
        at = at.saturating_add(header).saturating_add(size);
    }
    Ok(())
}

fn read_at(file: &mut File, at: u64, len: u64) -> Result<Vec<u8>, String> {
    let mut bytes = vec![0u8; len as usize];
    file.seek(SeekFrom::Start(at))
        .and_then(|_| file.read_exact(&mut bytes))
        .map_err(|e| e.to_string())?;
    Ok(bytes)
}

const I32: u8 = 5;
const STRUCT: u8 = 12;

/// A cursor over Thrift compact-protocol bytes that only skips.
struct Walk<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Walk<'a> {
    fn new(bytes: &'a [u8]) -> Walk<'a> {
        Walk { bytes, at: 0 }
    }

    fn left(&self) -> u64 {
        (self.bytes.len() - self.at) as u64
    }

    fn byte(&mut self) -> Result<u8, &'static str> {
        let b = *self.bytes.get(self.at).ok_or("cut short")?;
        self.at += 1;
        Ok(b)
    }

    fn skip(&mut self, n: u64) -> Result<(), &'static str> {
        if n > self.left() {
            return Err("cut short");
        }
        self.at += n as usize;
        Ok(())
    }

    fn varint(&mut self) -> Result<u64, &'static str> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a varint longer than 10 bytes")
    }

    /// A page header (a struct): its `compressed_page_size` (field 3, an i32).
    fn page_header(&mut self) -> Result<u64, &'static str> {
        let mut size = None;
        let mut id = 0i64;
        loop {
            let head = self.byte()?;
            if head == 0 {
                return size.ok_or("no compressed page size");
            }
            id = match head >> 4 {
                0 => zigzag(self.varint()?),
                delta => id + i64::from(delta),
            };
            if id == 3 && head & 0x0f == I32 {
                let v = zigzag(self.varint()?);
                size = Some(u64::try_from(v).map_err(|_| "a negative page size")?);
            } else {
                self.value(head & 0x0f, 1, false)?;
            }
        }
    }

    /// Skips a value of compact type `ty`; `element`: inside a list, set or map, where a
    /// boolean takes a byte (in a struct its value is in the field's type).
    fn value(&mut self, ty: u8, depth: u32, element: bool) -> Result<(), &'static str> {
        if depth > MAX_DEPTH {
            return Err("structures nested too deep");
        }
        match ty {
            1 | 2 if element => self.skip(1),
            1 | 2 => Ok(()),
            3 => self.skip(1),
            4..=6 => self.varint().map(drop),
            7 => self.skip(8),
            8 => {
                let n = self.varint()?;
                if n > self.left() {
                    return Err("a length beyond its bytes");
                }
                self.skip(n)
            }
            9 | 10 => {
                let head = self.byte()?;
                let size = match head >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                // Every element takes at least a byte.
                if size > self.left() {
                    return Err("a list longer than its bytes");
                }
                for _ in 0..size {
                    self.value(head & 0x0f, depth + 1, true)?;
                }
                Ok(())
            }
            11 => {
                let size = self.varint()?;
                if size == 0 {
                    return Ok(());
                }
                let kinds = self.byte()?;
                if size.saturating_mul(2) > self.left() {
                    return Err("a map longer than its bytes");
                }
                for _ in 0..size {
                    self.value(kinds >> 4, depth + 1, true)?;
                    self.value(kinds & 0x0f, depth + 1, true)?;
                }
                Ok(())
            }
            STRUCT => loop {
                let head = self.byte()?;
                if head == 0 {
                    return Ok(());
                }
                if head >> 4 == 0 {
                    // The field id in full (a zigzag i16), not as a delta.
                    self.varint()?;
                }
                self.value(head & 0x0f, depth + 1, false)?;
            },
            // A UUID: 16 bytes.
            13 => self.skip(16),
            _ => Err("an unknown type"),
        }
    }
}

fn zigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(bytes: &[u8]) -> Result<(), &'static str> {
        Walk::new(bytes).value(STRUCT, 0, false)
    }

    #[test]
    fn walks_what_thrift_writes() {
        // {1: i32 7, 2: list<i64> [1, 2], 3: binary "ab", 4: true, 5: struct {}, 6: map {}}
        let ok = [
            0x15, 0x0e, 0x19, 0x26, 0x02, 0x04, 0x18, 0x02, b'a', b'b', 0x11, 0x1c, 0x00, 0x1b,
            0x00, 0x00,
        ];
        assert_eq!(walk(&ok), Ok(()));
        // A long-form field id, and a list of booleans (a byte each).
        assert_eq!(walk(&[0x09, 0x40, 0x21, 0x01, 0x02, 0x00]), Ok(()));
        // A page header: {1: i32 0, 2: i32 10, 3: i32 12}.
        let mut w = Walk::new(&[0x15, 0x00, 0x15, 0x14, 0x15, 0x18, 0x00]);
        assert_eq!(w.page_header(), Ok(12));
        assert_eq!(w.at, 7);
    }

    #[test]
    fn refuses_sizes_beyond_the_bytes() {
        // A list of 2^21 booleans in 5 bytes: what the parquet crate spun on, skipping
        // booleans as if they took no byte.
        assert_eq!(
            walk(&[0x19, 0xf1, 0x80, 0x80, 0x80, 0x01, 0x00]),
            Err("a list longer than its bytes")
        );
        assert_eq!(
            walk(&[0x1b, 0x80, 0x80, 0x04, 0x11, 0x00]),
            Err("a map longer than its bytes")
        );
        assert_eq!(
            walk(&[0x18, 0x80, 0x80, 0x04, 0x00]),
            Err("a length beyond its bytes")
        );
        assert_eq!(walk(&[0x15]), Err("cut short"));
        assert_eq!(walk(&[0x1e, 0x00]), Err("an unknown type"));
        let deep: Vec<u8> = std::iter::repeat_n(0x1c, 100).collect();
        assert_eq!(walk(&deep), Err("structures nested too deep"));
        assert_eq!(
            Walk::new(&[0x15, 0x00, 0x00]).page_header(),
            Err("no compressed page size")
        );
        assert_eq!(
            Walk::new(&[0x35, 0x01, 0x00]).page_header(),
            Err("a negative page size")
        );
    }
}
