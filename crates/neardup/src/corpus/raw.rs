//! Arrays written as little-endian bytes and read back, under an xxh3 checksum: what the
//! snapshots of an index are made of. Reading allocates as the bytes arrive, so a length
//! damaged into billions fails at the file's end instead of reserving memory for it.

use std::io::{self, Read, Write};

use xxhash_rust::xxh3::Xxh3;

/// Bytes converted per write or read call.
const CHUNK: usize = 1 << 16;

/// A writer that hashes what passes through it.
pub(super) struct Out<'a, W: Write> {
    inner: &'a mut W,
    hash: Xxh3,
}

impl<'a, W: Write> Out<'a, W> {
    pub(super) fn new(inner: &'a mut W) -> Self {
        Out {
            inner,
            hash: Xxh3::new(),
        }
    }

    fn bytes(&mut self, b: &[u8]) -> io::Result<()> {
        self.hash.update(b);
        self.inner.write_all(b)
    }

    pub(super) fn u64(&mut self, x: u64) -> io::Result<()> {
        self.bytes(&x.to_le_bytes())
    }

    /// `items`, after their count, each as the `N` bytes `le` makes of it.
    pub(super) fn slice<T: Copy, const N: usize>(
        &mut self,
        items: &[T],
        le: impl Fn(T) -> [u8; N],
    ) -> io::Result<()> {
        self.u64(items.len() as u64)?;
        let mut buf = Vec::with_capacity(CHUNK);
        for part in items.chunks(CHUNK / N) {
            buf.clear();
            for &x in part {
                buf.extend_from_slice(&le(x));
            }
            self.bytes(&buf)?;
        }
        Ok(())
    }

    /// The checksum of everything written, after it.
    pub(super) fn finish(self) -> io::Result<()> {
        let sum = self.hash.digest();
        self.inner.write_all(&sum.to_le_bytes())
    }
}

/// A reader that hashes what it reads, and checks the checksum at the end.
pub(super) struct In<'a, R: Read> {
    inner: &'a mut R,
    hash: Xxh3,
}

/// The error of bytes that are not a snapshot this version wrote.
pub(super) fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

impl<'a, R: Read> In<'a, R> {
    pub(super) fn new(inner: &'a mut R) -> Self {
        In {
            inner,
            hash: Xxh3::new(),
        }
    }

    fn bytes(&mut self, b: &mut [u8]) -> io::Result<()> {
        self.inner.read_exact(b).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                invalid("cut short")
            } else {
                e
            }
        })?;
        self.hash.update(b);
        Ok(())
    }

    pub(super) fn u64(&mut self) -> io::Result<u64> {
        let mut b = [0; 8];
        self.bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// A count written by [`Out::u64`], refused above `max`.
    pub(super) fn len(&mut self, max: u64, what: &str) -> io::Result<usize> {
        let n = self.u64()?;
        if n > max {
            return Err(invalid(format!("{what}: {n} entries, more than {max}")));
        }
        usize::try_from(n).map_err(|_| invalid(format!("{what}: {n} entries")))
    }

    /// What [`Out::slice`] wrote: at most `max` items.
    pub(super) fn vec<T, const N: usize>(
        &mut self,
        max: u64,
        what: &str,
        from_le: impl Fn([u8; N]) -> T,
    ) -> io::Result<Vec<T>> {
        let n = self.len(max, what)?;
        let mut out = Vec::with_capacity(n.min(CHUNK));
        let mut buf = vec![0u8; CHUNK / N * N];
        let mut left = n;
        while left > 0 {
            let take = left.min(CHUNK / N);
            let part = &mut buf[..take * N];
            self.bytes(part)?;
            out.extend(part.chunks_exact(N).map(|c| {
                let mut a = [0u8; N];
                a.copy_from_slice(c);
                from_le(a)
            }));
            left -= take;
        }
        Ok(out)
    }

    /// Reads the checksum and compares it with what was read.
    pub(super) fn finish(self) -> io::Result<()> {
        let want = self.hash.digest();
        let mut b = [0; 8];
        self.inner
            .read_exact(&mut b)
            .map_err(|_| invalid("cut short before its checksum"))?;
        if u64::from_le_bytes(b) != want {
            return Err(invalid("checksum mismatch: the file is damaged"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let xs: Vec<u32> = (0..200_000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let mut bytes = Vec::new();
        let mut out = Out::new(&mut bytes);
        out.u64(7).unwrap();
        out.slice(&xs, u32::to_le_bytes).unwrap();
        out.finish().unwrap();

        let mut r = &bytes[..];
        let mut input = In::new(&mut r);
        assert_eq!(input.u64().unwrap(), 7);
        assert_eq!(input.vec(1 << 20, "xs", u32::from_le_bytes).unwrap(), xs);
        input.finish().unwrap();

        // One flipped bit anywhere: an error, never a wrong array accepted.
        for at in [0, 8, 9, 1000, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            let mut r = &bad[..];
            let mut input = In::new(&mut r);
            let read = input
                .u64()
                .and_then(|_| input.vec(1 << 20, "xs", u32::from_le_bytes));
            assert!(read.is_err() || input.finish().is_err(), "flip at {at}");
        }
        // Cut short, and a count over the limit.
        let mut r = &bytes[..bytes.len() / 2];
        let mut input = In::new(&mut r);
        input.u64().unwrap();
        assert!(input.vec(1 << 20, "xs", u32::from_le_bytes).is_err());
        let mut r = &bytes[..];
        let mut input = In::new(&mut r);
        input.u64().unwrap();
        let e = input.vec(10, "xs", u32::from_le_bytes).unwrap_err();
        assert!(e.to_string().contains("more than 10"), "{e}");
    }
}
