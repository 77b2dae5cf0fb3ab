//! The documents table: each stored document's row (its id, expiry and signature) by
//! internal id, several rows packed into one value of the B-tree.
//!
//! Internal ids only grow, and redb splits a full leaf in two halves, so a table taking
//! one row a key in increasing order leaves every leaf half empty: a store of 938,158
//! documents took 860 bytes a document in its file for about 290 of rows. A value of up
//! to [`PACK_BYTES`] is alone in its 4 KiB leaf (the next one does not fit beside it), so
//! rows packed that tight fill their leaves: a pack takes the rows of consecutive
//! documents until the next would not fit, and is keyed by an internal id at or below its
//! first row's, below the next pack's key. A put appends to the last pack or starts one; a
//! removal cuts its row out (a pack left empty goes).
//!
//! A row: its internal id less the pack's key, its expiry (Unix seconds, or 0) and its
//! id's length in bytes, each a LEB128 varint (3 bytes for most rows, where fixed widths
//! took 16: a 15th row of 2 KB documents fits in a pack), then its signature
//! ([`SIG_BYTES`]: the signature but its band keys, which are kept apart, `keys.rs`) and
//! its id.

use std::path::Path;

use neardup::decide::Signature;
use redb::{ReadableTable, Table, TableDefinition};

use crate::error::{db, Result, StoreError};

/// Internal id of a pack's first row, at most → the pack's rows.
pub(crate) const DOCS: TableDefinition<u64, &[u8]> = TableDefinition::new("documents");

/// Bytes of a row's signature: [`Signature::to_stored_bytes`]. Stores of formats 100 and
/// 101 kept the whole signature ([`Signature::BYTES`]) in their rows.
pub(crate) const SIG_BYTES: usize = Signature::STORED_BYTES;

/// The most bytes of rows a pack holds: a 4 KiB page less redb's leaf header (4 bytes),
/// the value's length (4) and the key (8). A row longer than this (an id of more than
/// about 3.8 KB) is a pack of its own, in a larger page.
pub(crate) const PACK_BYTES: usize = 4096 - 16;

/// The bytes of `v` as a LEB128 varint.
fn varint_len(v: u64) -> usize {
    (64 - v.leading_zeros() as usize).max(1).div_ceil(7)
}

fn put_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The varint at the start of `bytes` and the bytes after it; `None` if it is cut short or
/// longer than a u64.
fn get_varint(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let mut v = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        let bits = u64::from(b & 0x7F);
        if i == 9 && b > 1 {
            return None;
        }
        v |= bits << (7 * i);
        if b < 0x80 {
            return Some((v, &bytes[i + 1..]));
        }
    }
    None
}

/// A stored document's row, as read from its pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Row<'a> {
    pub(crate) internal: u64,
    pub(crate) id: &'a str,
    /// Unix seconds, or 0: never.
    pub(crate) expires: u64,
    /// [`SIG_BYTES`] bytes (or the width of an old store's rows).
    pub(crate) signature: &'a [u8],
}

impl Row<'_> {
    /// Its bytes in a pack keyed `key`.
    fn len(&self, key: u64) -> usize {
        varint_len(self.internal.wrapping_sub(key))
            + varint_len(self.expires)
            + varint_len(self.id.len() as u64)
            + self.signature.len()
            + self.id.len()
    }

    /// Appends this row's bytes in a pack keyed `key` (at most `self.internal`, within
    /// u32 of it).
    fn write(&self, key: u64, out: &mut Vec<u8>) {
        debug_assert!(fits_after(key, self.internal));
        put_varint(self.internal - key, out);
        put_varint(self.expires, out);
        put_varint(self.id.len() as u64, out);
        out.extend_from_slice(self.signature);
        out.extend_from_slice(self.id.as_bytes());
    }
}

/// Whether a row of document `internal` can be in a pack keyed `key`.
fn fits_after(key: u64, internal: u64) -> bool {
    internal
        .checked_sub(key)
        .is_some_and(|d| u32::try_from(d).is_ok())
}

/// The rows of the pack keyed `key`, in order; or what is wrong with its bytes.
pub(crate) fn rows(key: u64, bytes: &[u8]) -> std::result::Result<Vec<Row<'_>>, String> {
    Rows::new(key, bytes).collect()
}

/// The bytes of a pack keyed `key` holding `rows` (in order, each within u32 of `key`).
pub(crate) fn pack_bytes(key: u64, rows: &[Row<'_>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PACK_BYTES);
    for r in rows {
        r.write(key, &mut out);
    }
    out
}

/// [`rows`] of a pack whose signatures are `width` bytes: an old store's.
pub(crate) fn rows_of_width(
    key: u64,
    bytes: &[u8],
    width: usize,
) -> std::result::Result<Vec<Row<'_>>, String> {
    Rows {
        width,
        ..Rows::new(key, bytes)
    }
    .collect()
}

/// The rows of a pack read one at a time, for a lookup that stops at its row (no list of
/// them: a check reads a row from a pack for each of its candidates).
struct Rows<'a> {
    key: u64,
    /// Bytes of a signature.
    width: usize,
    bytes: &'a [u8],
    at: usize,
    last: Option<u64>,
}

impl<'a> Rows<'a> {
    fn new(key: u64, bytes: &'a [u8]) -> Rows<'a> {
        Rows {
            key,
            width: SIG_BYTES,
            bytes,
            at: 0,
            last: None,
        }
    }

    fn next_row(&mut self) -> std::result::Result<Row<'a>, String> {
        let at = self.at;
        let cut = || format!("row {at} is cut short");
        let (delta, rest) = get_varint(self.bytes).ok_or_else(cut)?;
        let (expires, rest) = get_varint(rest).ok_or_else(cut)?;
        let (id_len, bytes) = get_varint(rest).ok_or_else(cut)?;
        let end = usize::try_from(id_len)
            .ok()
            .and_then(|l| l.checked_add(self.width))
            .filter(|&e| e <= bytes.len())
            .ok_or_else(cut)?;
        let internal = self
            .key
            .checked_add(delta)
            .ok_or_else(|| format!("row {at} is numbered past 2^64"))?;
        if self.last.is_some_and(|l| l >= internal) {
            return Err(format!("row {at} (document {internal}) is out of order"));
        }
        let id = std::str::from_utf8(&bytes[self.width..end])
            .map_err(|_| format!("row {at}'s id is not UTF-8"))?;
        self.last = Some(internal);
        self.at += 1;
        self.bytes = &bytes[end..];
        Ok(Row {
            internal,
            id,
            expires,
            signature: &bytes[..self.width],
        })
    }
}

impl<'a> Iterator for Rows<'a> {
    type Item = std::result::Result<Row<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.bytes.is_empty() {
            return None;
        }
        let row = self.next_row();
        if row.is_err() {
            // Nothing after a damaged row is read.
            self.bytes = &[];
        }
        Some(row)
    }
}

fn damaged(path: &Path, key: u64, why: String) -> StoreError {
    StoreError::Damaged {
        path: path.to_path_buf(),
        detail: format!("the pack of documents from {key}: {why}"),
    }
}

/// `f` of document `internal`'s row, if it is stored.
pub(crate) fn find<T>(
    path: &Path,
    table: &impl ReadableTable<u64, &'static [u8]>,
    internal: u64,
    f: impl FnOnce(Row<'_>) -> Result<T>,
) -> Result<Option<T>> {
    let Some(entry) = db!(path, table.range(..=internal))?.next_back() else {
        return Ok(None);
    };
    let (key, value) = db!(path, entry)?;
    let key = key.value();
    for row in Rows::new(key, value.value()) {
        let row = row.map_err(|why| damaged(path, key, why))?;
        if row.internal >= internal {
            return match row.internal == internal {
                true => f(row).map(Some),
                false => Ok(None),
            };
        }
    }
    Ok(None)
}

/// `f` of every stored row from document `from` on, in order.
pub(crate) fn each_from(
    path: &Path,
    table: &impl ReadableTable<u64, &'static [u8]>,
    from: u64,
    mut f: impl FnMut(Row<'_>) -> Result<()>,
) -> Result<()> {
    // The pack holding `from` may start before it.
    let start = match db!(path, table.range(..=from))?.next_back() {
        Some(entry) => db!(path, entry)?.0.value(),
        None => from,
    };
    for entry in db!(path, table.range(start..))? {
        let (key, value) = db!(path, entry)?;
        let key = key.value();
        for row in Rows::new(key, value.value()) {
            let row = row.map_err(|why| damaged(path, key, why))?;
            if row.internal >= from {
                f(row)?;
            }
        }
    }
    Ok(())
}

/// The key and a copy of the bytes of the pack that holds (or would hold) document
/// `internal`: the last pack keyed at or below it. A copy, as the caller writes the table.
fn owned_pack_at(
    path: &Path,
    table: &Table<'_, u64, &'static [u8]>,
    internal: u64,
) -> Result<Option<(u64, Vec<u8>)>> {
    match db!(path, table.range(..=internal))?.next_back() {
        Some(entry) => {
            let (key, value) = db!(path, entry)?;
            Ok(Some((key.value(), value.value().to_vec())))
        }
        None => Ok(None),
    }
}

/// Stores `row` (in place of a row of the same document): appended to the pack before it
/// when it is that pack's last and fits, else the pack cut anew.
pub(crate) fn insert(
    path: &Path,
    table: &mut Table<'_, u64, &'static [u8]>,
    row: Row<'_>,
) -> Result<()> {
    let found = owned_pack_at(path, table, row.internal)?;
    let Some((key, bytes)) = found else {
        let mut out = Vec::with_capacity(row.len(row.internal));
        row.write(row.internal, &mut out);
        db!(path, table.insert(row.internal, &out[..]))?;
        return Ok(());
    };
    let stored = rows(key, &bytes).map_err(|why| damaged(path, key, why))?;
    let appends = stored.last().is_none_or(|l| l.internal < row.internal);
    if appends {
        if fits_after(key, row.internal) && bytes.len() + row.len(key) <= PACK_BYTES {
            let mut out = bytes.clone();
            row.write(key, &mut out);
            db!(path, table.insert(key, &out[..]))?;
        } else {
            let mut out = Vec::with_capacity(row.len(row.internal));
            row.write(row.internal, &mut out);
            db!(path, table.insert(row.internal, &out[..]))?;
        }
        return Ok(());
    }
    // A row among the pack's: every row again, cut into packs.
    let mut all: Vec<Row<'_>> = stored
        .into_iter()
        .filter(|r| r.internal != row.internal)
        .collect();
    let at = all.partition_point(|r| r.internal < row.internal);
    all.insert(at, row);
    let packs = pack(key, &all);
    if packs.first().is_none_or(|(k, _)| *k != key) {
        db!(path, table.remove(key))?;
    }
    for (k, bytes) in packs {
        db!(path, table.insert(k, &bytes[..]))?;
    }
    Ok(())
}

/// Stores `new`, as [`insert`] one row at a time would, but writes each pack once: a batch's
/// new documents (numbered past every stored one, upwards) fill the last pack and then new
/// ones in memory, where one insert a row would copy its pack in and out each time.
pub(crate) fn insert_all(
    path: &Path,
    table: &mut Table<'_, u64, &'static [u8]>,
    new: &[Row<'_>],
) -> Result<()> {
    /// The last pack: its key, bytes, last row, and whether it changed.
    struct Last {
        key: u64,
        bytes: Vec<u8>,
        row: u64,
        changed: bool,
    }
    let read_last = |table: &Table<'_, u64, &'static [u8]>| -> Result<Option<Last>> {
        let Some((key, value)) = db!(path, table.last())? else {
            return Ok(None);
        };
        let key = key.value();
        let bytes = value.value().to_vec();
        let row = rows(key, &bytes)
            .map_err(|why| damaged(path, key, why))?
            .last()
            .map_or(key, |r| r.internal);
        Ok(Some(Last {
            key,
            bytes,
            row,
            changed: false,
        }))
    };
    let flush = |table: &mut Table<'_, u64, &'static [u8]>, last: &Option<Last>| -> Result<()> {
        if let Some(l) = last.as_ref().filter(|l| l.changed) {
            db!(path, table.insert(l.key, &l.bytes[..]))?;
        }
        Ok(())
    };
    let mut last = read_last(table)?;
    for row in new {
        match &mut last {
            // Among the stored rows (or an empty pack's key): the general way.
            Some(l) if row.internal <= l.row => {
                flush(table, &last)?;
                insert(path, table, *row)?;
                last = read_last(table)?;
            }
            Some(l)
                if fits_after(l.key, row.internal)
                    && l.bytes.len() + row.len(l.key) <= PACK_BYTES =>
            {
                row.write(l.key, &mut l.bytes);
                l.row = row.internal;
                l.changed = true;
            }
            _ => {
                flush(table, &last)?;
                let mut bytes = Vec::with_capacity(PACK_BYTES);
                row.write(row.internal, &mut bytes);
                last = Some(Last {
                    key: row.internal,
                    bytes,
                    row: row.internal,
                    changed: true,
                });
            }
        }
    }
    flush(table, &last)
}

/// `rows` (in order, the first at or after `key`) cut into packs, the first keyed `key`,
/// each next by its first row.
fn pack(key: u64, rows: &[Row<'_>]) -> Vec<(u64, Vec<u8>)> {
    let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
    for row in rows {
        let fits = out.last().is_some_and(|(k, bytes)| {
            fits_after(*k, row.internal) && bytes.len() + row.len(*k) <= PACK_BYTES
        });
        if !fits {
            let k = if out.is_empty() && fits_after(key, row.internal) {
                key
            } else {
                row.internal
            };
            out.push((k, Vec::with_capacity(PACK_BYTES)));
        }
        if let Some((k, bytes)) = out.last_mut() {
            row.write(*k, bytes);
        }
    }
    out
}

/// Removes document `internal`'s row; its expiry (0 for none) if it was stored.
pub(crate) fn remove(
    path: &Path,
    table: &mut Table<'_, u64, &'static [u8]>,
    internal: u64,
) -> Result<Option<u64>> {
    let found = owned_pack_at(path, table, internal)?;
    let Some((key, bytes)) = found else {
        return Ok(None);
    };
    let stored = rows(key, &bytes).map_err(|why| damaged(path, key, why))?;
    let Ok(i) = stored.binary_search_by_key(&internal, |r| r.internal) else {
        return Ok(None);
    };
    let expires = stored[i].expires;
    if stored.len() == 1 {
        db!(path, table.remove(key))?;
    } else {
        let mut out = Vec::with_capacity(bytes.len());
        for r in stored.iter().filter(|r| r.internal != internal) {
            r.write(key, &mut out);
        }
        db!(path, table.insert(key, &out[..]))?;
    }
    Ok(Some(expires))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use redb::{Database, ReadableTableMetadata};

    use super::*;

    fn signature(n: u64) -> Vec<u8> {
        (0..SIG_BYTES).map(|i| (n as usize * 7 + i) as u8).collect()
    }

    /// Steps: put (internal id, id length, expiry) or remove an internal id.
    #[derive(Clone, Debug)]
    enum Step {
        Put(u64, usize, u64),
        Remove(u64),
    }

    fn step() -> impl Strategy<Value = Step> {
        // Mostly ids that grow (as a store numbers them), some anywhere, ids of every
        // length class (short, past a pack, none).
        prop_oneof![
            4 => (0u64..400, prop_oneof![0usize..40, 3_900usize..4_200], 0u64..3)
                .prop_map(|(i, l, e)| Step::Put(i, l, e)),
            1 => (0u64..400).prop_map(Step::Remove),
        ]
    }

    fn id_of(internal: u64, len: usize) -> String {
        let mut id = format!("d{internal}-");
        while id.len() < len {
            id.push('x');
        }
        id
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Against a map of rows: every row found as put, removals answered with the
        /// expiry, the table's rows in order from any point, and each pack within its
        /// bytes unless it holds one row.
        #[test]
        fn packs_hold_what_a_map_holds(steps in proptest::collection::vec(step(), 1..300), from in 0u64..400) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.redb");
            let db = Database::create(&path).unwrap();
            let txn = db.begin_write().unwrap();
            let mut model: BTreeMap<u64, (String, u64)> = BTreeMap::new();
            {
                let mut table = txn.open_table(DOCS).unwrap();
                for s in &steps {
                    match *s {
                        Step::Put(i, len, e) => {
                            let id = id_of(i, len);
                            let sig = signature(i);
                            insert(&path, &mut table, Row { internal: i, id: &id, expires: e, signature: &sig }).unwrap();
                            model.insert(i, (id, e));
                        }
                        Step::Remove(i) => {
                            let got = remove(&path, &mut table, i).unwrap();
                            prop_assert_eq!(got, model.remove(&i).map(|(_, e)| e));
                        }
                    }
                }
                for i in 0..400 {
                    let got = find(&path, &table, i, |r| Ok((r.id.to_string(), r.expires, r.signature.to_vec()))).unwrap();
                    prop_assert_eq!(got, model.get(&i).map(|(id, e)| (id.clone(), *e, signature(i))));
                }
                let mut seen = Vec::new();
                each_from(&path, &table, from, |r| { seen.push(r.internal); Ok(()) }).unwrap();
                let want: Vec<u64> = model.range(from..).map(|(&i, _)| i).collect();
                prop_assert_eq!(seen, want);
                for entry in table.iter().unwrap() {
                    let (k, v) = entry.unwrap();
                    let rows = rows(k.value(), v.value()).unwrap();
                    prop_assert!(!rows.is_empty());
                    prop_assert!(rows[0].internal >= k.value());
                    prop_assert!(v.value().len() <= PACK_BYTES || rows.len() == 1);
                }
            }
            txn.commit().unwrap();
        }
    }

    fn packs_of(table: &impl ReadableTable<u64, &'static [u8]>) -> Vec<(u64, Vec<u8>)> {
        table
            .iter()
            .unwrap()
            .map(|e| {
                let (k, v) = e.unwrap();
                (k.value(), v.value().to_vec())
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Batches of puts stored with `insert_all` leave every pack as `insert`, one row
        /// at a time, does: appends (the common case) and rows among stored ones alike.
        #[test]
        fn insert_all_is_insert_one_by_one(
            batches in proptest::collection::vec(
                proptest::collection::vec((0u64..300, prop_oneof![0usize..40, 3_900usize..4_200], 0u64..3), 0..40),
                1..8,
            ),
            grow in any::<bool>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.redb");
            let db = Database::create(&path).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut one = txn.open_table(TableDefinition::<u64, &[u8]>::new("one")).unwrap();
                let mut all = txn.open_table(TableDefinition::<u64, &[u8]>::new("all")).unwrap();
                let mut next = 0u64;
                for batch in &batches {
                    let mut batch = batch.clone();
                    if grow {
                        // As a store numbers its puts: upwards, past every stored one.
                        for (i, _, _) in &mut batch {
                            *i = next;
                            next += 1;
                        }
                    }
                    let ids: Vec<String> = batch.iter().map(|&(i, l, _)| id_of(i, l)).collect();
                    let sigs: Vec<Vec<u8>> = batch.iter().map(|&(i, _, _)| signature(i)).collect();
                    let rows: Vec<Row<'_>> = batch
                        .iter()
                        .zip(&ids)
                        .zip(&sigs)
                        .map(|((&(i, _, e), id), sig)| Row { internal: i, id, expires: e, signature: sig })
                        .collect();
                    for r in &rows {
                        insert(&path, &mut one, *r).unwrap();
                    }
                    insert_all(&path, &mut all, &rows).unwrap();
                    prop_assert_eq!(packs_of(&one), packs_of(&all));
                }
            }
            txn.commit().unwrap();
        }
    }

    proptest! {
        #[test]
        fn varints_read_back(v in any::<u64>(), tail in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut bytes = Vec::new();
            put_varint(v, &mut bytes);
            prop_assert_eq!(bytes.len(), varint_len(v));
            for cut in 0..bytes.len() {
                prop_assert_eq!(get_varint(&bytes[..cut]), None);
            }
            bytes.extend_from_slice(&tail);
            prop_assert_eq!(get_varint(&bytes), Some((v, &tail[..])));
        }
    }

    #[test]
    fn a_varint_past_64_bits_is_refused() {
        assert_eq!(
            get_varint(&[0xFF; 9].iter().copied().chain([0x01]).collect::<Vec<_>>()),
            Some((u64::MAX, &[][..]))
        );
        assert_eq!(
            get_varint(&[0xFF; 9].iter().copied().chain([0x02]).collect::<Vec<_>>()),
            None
        );
        assert_eq!(get_varint(&[0x80; 11]), None);
    }

    #[test]
    fn growing_ids_fill_their_packs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.redb");
        let db = Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(DOCS).unwrap();
            let sig = signature(0);
            for i in 0..1_000u64 {
                let id = format!("doc{i:08}");
                insert(
                    &path,
                    &mut table,
                    Row {
                        internal: i,
                        id: &id,
                        expires: 0,
                        signature: &sig,
                    },
                )
                .unwrap();
            }
            // Ids of 11 bytes, deltas below 128, no expiry: three bytes of varints.
            let per_pack = PACK_BYTES / (3 + SIG_BYTES + 11);
            assert_eq!(table.len().unwrap(), 1_000u64.div_ceil(per_pack as u64));
        }
        txn.commit().unwrap();
    }

    #[test]
    fn a_damaged_pack_is_named() {
        let sig = signature(1);
        let mut bytes = Vec::new();
        Row {
            internal: 5,
            id: "a",
            expires: 0,
            signature: &sig,
        }
        .write(5, &mut bytes);
        Row {
            internal: 9,
            id: "b",
            expires: 3,
            signature: &sig,
        }
        .write(5, &mut bytes);
        assert_eq!(rows(5, &bytes).unwrap().len(), 2);
        assert!(rows(5, &bytes[..bytes.len() - 1])
            .unwrap_err()
            .contains("row 1 is cut short"));
        let mut swapped = Vec::new();
        Row {
            internal: 9,
            id: "b",
            expires: 3,
            signature: &sig,
        }
        .write(5, &mut swapped);
        Row {
            internal: 5,
            id: "a",
            expires: 0,
            signature: &sig,
        }
        .write(5, &mut swapped);
        assert!(rows(5, &swapped).unwrap_err().contains("out of order"));
    }
}
