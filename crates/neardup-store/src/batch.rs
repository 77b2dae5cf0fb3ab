//! A batch of writes as the write-ahead log ([`crate::log`]) keeps it: the commit it
//! makes, the clock it was decided at, and its writes, so that a replay decides exactly as
//! the first time (expiry and `only_if_unique` included).

use std::path::Path;
use std::time::Duration;

use neardup::decide::Signature;

use crate::decide::Write;
use crate::error::{Result, StoreError};
use crate::prepare::{Prepared, MAX_PARAGRAPHS};
use crate::rows::{paragraphs_bytes, paragraphs_of, signature_of};

/// A batch as the write-ahead log keeps it: the commit it makes, the clock it was decided
/// at, and its writes, so that a replay decides exactly as the first time (expiry and
/// `only_if_unique` included). Paragraphs past [`MAX_PARAGRAPHS`], which no table or
/// index takes, and all of them when the store does not index paragraphs, are left out.
pub(crate) fn encode_batch(commit: u64, now: u64, writes: &[Write], paragraphs: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(BATCH_HEAD + writes.len() * (Signature::BYTES + 64));
    out.extend_from_slice(&commit.to_le_bytes());
    out.extend_from_slice(&now.to_le_bytes());
    out.extend_from_slice(&(writes.len() as u64).to_le_bytes());
    fn put_id(out: &mut Vec<u8>, id: &str) {
        out.extend_from_slice(&(id.len() as u64).to_le_bytes());
        out.extend_from_slice(id.as_bytes());
    }
    for write in writes {
        match write {
            Write::Delete { id } => {
                out.push(0);
                put_id(&mut out, id);
            }
            Write::Put {
                id,
                doc,
                ttl,
                only_if_unique,
            } => {
                out.push(1);
                put_id(&mut out, id);
                out.push(u8::from(*only_if_unique) | (u8::from(ttl.is_some()) << 1));
                let ttl = ttl.unwrap_or_default();
                out.extend_from_slice(&ttl.as_secs().to_le_bytes());
                out.extend_from_slice(&ttl.subsec_nanos().to_le_bytes());
                out.extend_from_slice(&doc.len.to_le_bytes());
                out.extend_from_slice(&doc.signature.to_bytes());
                let paras = if paragraphs {
                    &doc.paragraphs[..doc.paragraphs.len().min(MAX_PARAGRAPHS as usize)]
                } else {
                    &[][..]
                };
                let paras = paragraphs_bytes(paras);
                out.extend_from_slice(&(paras.len() as u64).to_le_bytes());
                out.extend_from_slice(&paras);
            }
        }
    }
    out
}

/// Bytes of a logged batch's head: its commit, clock and count of writes.
const BATCH_HEAD: usize = 24;

/// The commit a logged batch makes, its clock and how many writes it holds, read from its
/// head alone; `None` for a record too short to have one.
pub(crate) fn batch_head(bytes: &[u8]) -> Option<(u64, u64, u64)> {
    let mut r = Bytes(bytes.get(..BATCH_HEAD)?);
    Some((r.u64()?, r.u64()?, r.u64()?))
}

/// The error for a logged batch of the log at `path` that does not decode.
pub(crate) fn undecodable(path: &Path) -> StoreError {
    StoreError::Damaged {
        path: path.to_path_buf(),
        detail: "a logged batch of writes that does not decode".into(),
    }
}

/// A logged batch ([`encode_batch`]) read back: commit, clock and writes.
pub(crate) fn decode_batch(path: &Path, bytes: &[u8]) -> Result<(u64, u64, Vec<Write>)> {
    let damaged = || undecodable(path);
    let (commit, now, n) = batch_head(bytes).ok_or_else(damaged)?;
    let mut r = Bytes(&bytes[BATCH_HEAD..]);
    let mut writes = Vec::new();
    for _ in 0..n {
        let tag = r.take(1).ok_or_else(damaged)?[0];
        let id = r.string().ok_or_else(damaged)?;
        writes.push(match tag {
            0 => Write::Delete { id },
            1 => {
                let flags = r.take(1).ok_or_else(damaged)?[0];
                let secs = r.u64().ok_or_else(damaged)?;
                let nanos = r.u32().ok_or_else(damaged)?;
                let len = r.u32().ok_or_else(damaged)?;
                let signature = signature_of(path, r.take(Signature::BYTES).ok_or_else(damaged)?)?;
                let paras = r.u64().ok_or_else(damaged)?;
                let paras = usize::try_from(paras).map_err(|_| damaged())?;
                let paragraphs = paragraphs_of(path, r.take(paras).ok_or_else(damaged)?)?;
                if nanos >= 1_000_000_000 || flags > 3 {
                    return Err(damaged());
                }
                Write::Put {
                    id,
                    doc: Box::new(Prepared {
                        signature,
                        paragraphs,
                        len,
                    }),
                    ttl: (flags & 2 != 0).then(|| Duration::new(secs, nanos)),
                    only_if_unique: flags & 1 != 0,
                }
            }
            _ => return Err(damaged()),
        });
    }
    if !r.0.is_empty() {
        return Err(damaged());
    }
    Ok((commit, now, writes))
}

/// Bytes read from the front.
struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.u64()?).ok()?;
        String::from_utf8(self.take(len)?.to_vec()).ok()
    }
}
