//! A document store's ids, in memory: each live id's 64-bit hash → its internal number,
//! about 12 bytes a document where redb's id table took about 42 on disk and a random
//! B-tree insert a put (a page read and written once the table outgrew the cache).
//!
//! A hash names a document only maybe: another id may share it. The caller confirms a
//! [`Found::Maybe`] against the document's row, which holds its id. An id put while
//! another live id holds its hash is kept whole ([`Found::Sure`]), so no two live ids
//! ever share an entry; about one pair in 2^64 / n², a handful of ids over a store's life.
//!
//! The map is cut into shards by the hash's top bits; each keeps a sorted array of hashes
//! and one of numbers (shared with snapshots, never changed in place) and a table of the
//! changes since, merged into new arrays when it holds a sixteenth as many.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::sync::Arc;

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

type Fast = foldhash::fast::RandomState;

/// Shards by the top bits of the hash.
const SHARD_BITS: u32 = 8;
const SHARDS: usize = 1 << SHARD_BITS;

/// "NDIDS" and the section's version, at the start of a written map.
const MAGIC: u64 = u64::from_le_bytes(*b"NDIDS001");

/// The hash an id is mapped by: stable, as it is written in snapshots.
pub(crate) fn id_hash(id: &str) -> u64 {
    xxh3_64(id.as_bytes())
}

fn shard_of(hash: u64) -> usize {
    (hash >> (64 - SHARD_BITS)) as usize
}

/// What the map says of an id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// The id names this document.
    Sure(u64),
    /// The live id with the same hash names this document: the id's if the row says so.
    Maybe(u64),
}

impl Found {
    /// The document named.
    pub(crate) fn internal(self) -> u64 {
        match self {
            Found::Sure(i) | Found::Maybe(i) => i,
        }
    }
}

#[derive(Clone, Default)]
struct Shard {
    /// Sorted, each once.
    hashes: Arc<[u64]>,
    /// Each hash's document, when it fits in 32 bits; else `u32::MAX` and the number
    /// is in [`IdMap::wide`].
    internals: Arc<[u32]>,
    /// Changes since the arrays were made: a hash's document, or `None`: removed.
    delta: HashMap<u64, Option<u64>, Fast>,
}

/// The document an array entry of `hash` names: `internal`, or past 32 bits, `wide`'s.
fn number(wide: &HashMap<u64, u64, Fast>, hash: u64, internal: u32) -> Option<u64> {
    match internal {
        u32::MAX => wide.get(&hash).copied(),
        i => Some(u64::from(i)),
    }
}

impl Shard {
    fn base(&self, hash: u64, wide: &HashMap<u64, u64, Fast>) -> Option<u64> {
        let at = self.hashes.binary_search(&hash).ok()?;
        number(wide, hash, self.internals[at])
    }

    fn get(&self, hash: u64, wide: &HashMap<u64, u64, Fast>) -> Option<u64> {
        match self.delta.get(&hash) {
            Some(&changed) => changed,
            None => self.base(hash, wide),
        }
    }

    fn merge_due(&self) -> bool {
        self.delta.len() > 256 + self.hashes.len() / 16
    }

    /// The arrays with the changes merged in; `wide` takes the numbers past 32 bits.
    fn merge(&mut self, wide: &mut HashMap<u64, u64, Fast>) {
        if self.delta.is_empty() {
            return;
        }
        let mut changes: Vec<(u64, Option<u64>)> = self.delta.drain().collect();
        changes.sort_unstable_by_key(|&(h, _)| h);
        let n = self.hashes.len() + changes.len();
        let mut hashes = Vec::with_capacity(n);
        let mut internals = Vec::with_capacity(n);
        let mut push = |h: u64, i: u64, wide: &mut HashMap<u64, u64, Fast>| {
            hashes.push(h);
            internals.push(match u32::try_from(i) {
                Ok(small) if small != u32::MAX => small,
                _ => {
                    wide.insert(h, i);
                    u32::MAX
                }
            });
        };
        let mut old = self.hashes.iter().zip(self.internals.iter()).peekable();
        for (h, change) in changes {
            while let Some(&(&oh, &oi)) = old.peek() {
                if oh >= h {
                    break;
                }
                if let Some(i) = number(wide, oh, oi) {
                    push(oh, i, wide);
                }
                old.next();
            }
            if old.peek().is_some_and(|&(&oh, _)| oh == h) {
                old.next();
                wide.remove(&h);
            }
            if let Some(i) = change {
                push(h, i, wide);
            }
        }
        for (&oh, &oi) in old {
            if let Some(i) = number(wide, oh, oi) {
                push(oh, i, wide);
            }
        }
        self.hashes = hashes.into();
        self.internals = internals.into();
    }
}

/// The live ids of a document store: see the module's documentation.
#[derive(Clone)]
pub(crate) struct IdMap {
    /// [`id_hash`], but in tests of ids sharing hashes.
    hash: fn(&str) -> u64,
    shards: Vec<Shard>,
    /// Numbers past 32 bits, by hash (of the hashes the arrays hold).
    wide: HashMap<u64, u64, Fast>,
    /// Ids put while another live id held their hash.
    exact: HashMap<String, u64, Fast>,
    len: usize,
}

impl Default for IdMap {
    fn default() -> IdMap {
        IdMap {
            hash: id_hash,
            shards: vec![Shard::default(); SHARDS],
            wide: HashMap::default(),
            exact: HashMap::default(),
            len: 0,
        }
    }
}

impl std::fmt::Debug for IdMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdMap")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl IdMap {
    /// The document `id` names, if any.
    pub(crate) fn get(&self, id: &str) -> Option<Found> {
        if let Some(&i) = self.exact.get(id) {
            return Some(Found::Sure(i));
        }
        let h = (self.hash)(id);
        self.shards[shard_of(h)]
            .get(h, &self.wide)
            .map(Found::Maybe)
    }

    /// `id` now names `internal`; the id must name nothing (its last document removed).
    pub(crate) fn insert(&mut self, id: &str, internal: u64) {
        let h = (self.hash)(id);
        let shard = &mut self.shards[shard_of(h)];
        if shard.get(h, &self.wide).is_some() {
            // Another live id holds the hash.
            self.exact.insert(id.to_string(), internal);
        } else {
            shard.delta.insert(h, Some(internal));
            if shard.merge_due() {
                shard.merge(&mut self.wide);
            }
        }
        self.len += 1;
    }

    /// Forgets that `id` names `internal`; false (and nothing changed) if it does not.
    pub(crate) fn remove(&mut self, id: &str, internal: u64) -> bool {
        match self.exact.get(id) {
            Some(&i) if i == internal => {
                self.exact.remove(id);
                self.len -= 1;
                return true;
            }
            Some(_) => return false,
            None => {}
        }
        let h = (self.hash)(id);
        let shard = &mut self.shards[shard_of(h)];
        if shard.get(h, &self.wide) != Some(internal) {
            return false;
        }
        if shard.base(h, &self.wide).is_some() {
            shard.delta.insert(h, None);
        } else {
            shard.delta.remove(&h);
        }
        if shard.merge_due() {
            shard.merge(&mut self.wide);
        }
        self.len -= 1;
        true
    }

    /// Forgets every id whose document `gone` names: the removals an open catches up on,
    /// whose ids it no longer has.
    pub(crate) fn remove_documents(&mut self, gone: &std::collections::HashSet<u64>) {
        if gone.is_empty() {
            return;
        }
        let before = self.exact.len();
        self.exact.retain(|_, i| !gone.contains(i));
        self.len -= before - self.exact.len();
        for shard in &mut self.shards {
            shard.merge(&mut self.wide);
            let mut dropped = Vec::new();
            for (&h, &i) in shard.hashes.iter().zip(shard.internals.iter()) {
                if number(&self.wide, h, i).is_some_and(|i| gone.contains(&i)) {
                    dropped.push(h);
                }
            }
            self.len -= dropped.len();
            for h in dropped {
                shard.delta.insert(h, None);
            }
            shard.merge(&mut self.wide);
        }
    }

    /// Live ids.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The documents the live ids name, in increasing order.
    pub(crate) fn live(&self) -> Vec<u64> {
        let mut out: Vec<u64> = Vec::with_capacity(self.len);
        for shard in &self.shards {
            out.extend(
                shard
                    .hashes
                    .iter()
                    .zip(shard.internals.iter())
                    .filter(|(h, _)| !shard.delta.contains_key(h))
                    .filter_map(|(&h, &i)| number(&self.wide, h, i)),
            );
            out.extend(shard.delta.values().flatten());
        }
        out.extend(self.exact.values());
        // Numbers up to about the count, in hash order: marked in a bitmap and read back
        // in order, where a sort of 100M numbers took seconds of a start.
        let top = out.iter().copied().max().unwrap_or(0);
        if top < 16 * out.len() as u64 + 1024 {
            let mut bits = vec![0u64; (top / 64 + 1) as usize];
            for &i in &out {
                bits[(i / 64) as usize] |= 1 << (i % 64);
            }
            out.clear();
            for (w, &word) in bits.iter().enumerate() {
                let mut word = word;
                while word != 0 {
                    out.push(w as u64 * 64 + u64::from(word.trailing_zeros()));
                    word &= word - 1;
                }
            }
        } else {
            out.sort_unstable();
        }
        out
    }

    /// Bytes it holds on the heap, about.
    pub(crate) fn heap_bytes(&self) -> usize {
        let shards: usize = self
            .shards
            .iter()
            .map(|s| s.hashes.len() * 12 + s.delta.capacity() * 25)
            .sum();
        let exact: usize = self.exact.keys().map(|k| k.len() + 40).sum();
        shards + exact + self.wide.capacity() * 17
    }

    /// The map as it is now, to write while it changes: the changes merged, the arrays
    /// shared.
    pub(crate) fn frozen(&mut self) -> IdSnapshot {
        for shard in &mut self.shards {
            shard.merge(&mut self.wide);
        }
        IdSnapshot(self.clone())
    }

    /// Reads a map [`IdSnapshot::write_to`] wrote; an error if it is damaged.
    pub(crate) fn read_from(input: &mut impl Read) -> io::Result<IdMap> {
        IdMap::read_hashed(input, id_hash)
    }

    fn read_hashed(input: &mut impl Read, hash: fn(&str) -> u64) -> io::Result<IdMap> {
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("ids: {what}"));
        let mut sum = Xxh3::new();
        let word = |input: &mut dyn Read, sum: &mut Xxh3| -> io::Result<u64> {
            let mut b = [0; 8];
            input.read_exact(&mut b)?;
            sum.update(&b);
            Ok(u64::from_le_bytes(b))
        };
        if word(input, &mut sum)? != MAGIC {
            return Err(bad("not a map of ids"));
        }
        let mut map = IdMap {
            hash,
            ..IdMap::default()
        };
        let n = word(input, &mut sum)?;
        let count = usize::try_from(n).map_err(|_| bad("too many"))?;
        // Read whole, then cut into shards: arrays grown piece by piece would leave
        // their old copies in the allocator (about 4 bytes a document resident).
        let mut hashes: Vec<u64> = Vec::new();
        let mut internals: Vec<u32> = Vec::new();
        hashes
            .try_reserve_exact(count)
            .and_then(|()| internals.try_reserve_exact(count))
            .map_err(|_| bad("too many"))?;
        let mut buf = vec![0u8; 12 * 4096];
        let mut left = count;
        while left > 0 {
            let take = left.min(4096);
            let bytes = &mut buf[..12 * take];
            input.read_exact(bytes)?;
            sum.update(bytes);
            for entry in bytes.chunks_exact(12) {
                let mut h = [0; 8];
                h.copy_from_slice(&entry[..8]);
                let h = u64::from_le_bytes(h);
                let mut i = [0; 4];
                i.copy_from_slice(&entry[8..]);
                if hashes.last().is_some_and(|&l| l >= h) {
                    return Err(bad("hashes out of order"));
                }
                hashes.push(h);
                internals.push(u32::from_le_bytes(i));
            }
            left -= take;
        }
        let mut from = 0;
        for (s, shard) in map.shards.iter_mut().enumerate() {
            let to = from + hashes[from..].partition_point(|&h| shard_of(h) == s);
            shard.hashes = hashes[from..to].into();
            shard.internals = internals[from..to].into();
            from = to;
        }
        drop((hashes, internals));
        map.len = count;
        let wide = word(input, &mut sum)?;
        for _ in 0..wide {
            let h = word(input, &mut sum)?;
            let i = word(input, &mut sum)?;
            map.wide.insert(h, i);
        }
        let exact = word(input, &mut sum)?;
        for _ in 0..exact {
            let i = word(input, &mut sum)?;
            let len = word(input, &mut sum)?;
            if len > 1 << 20 {
                return Err(bad("an id longer than 1 MiB"));
            }
            let mut id = vec![0; len as usize];
            input.read_exact(&mut id)?;
            sum.update(&id);
            let id = String::from_utf8(id).map_err(|_| bad("an id not UTF-8"))?;
            map.exact.insert(id, i);
            map.len += 1;
        }
        let want = sum.digest();
        let mut b = [0; 8];
        input.read_exact(&mut b)?;
        if u64::from_le_bytes(b) != want {
            return Err(bad("checksum mismatch"));
        }
        // Every number past 32 bits belongs to a hash held, and only those.
        let marked = map
            .shards
            .iter()
            .flat_map(|s| s.hashes.iter().zip(s.internals.iter()))
            .filter(|(h, &i)| i == u32::MAX && map.wide.contains_key(h))
            .count();
        if marked != map.wide.len()
            || map
                .shards
                .iter()
                .flat_map(|s| s.internals.iter())
                .filter(|&&i| i == u32::MAX)
                .count()
                != marked
        {
            return Err(bad("numbers past 32 bits do not match their hashes"));
        }
        Ok(map)
    }
}

/// An [`IdMap`] as it was when taken ([`IdMap::frozen`]).
#[derive(Clone)]
pub(crate) struct IdSnapshot(IdMap);

impl std::fmt::Debug for IdSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl IdSnapshot {
    /// Ids it holds.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Writes it: its hashes in order with their numbers, the numbers past 32 bits, the
    /// ids kept whole, then an xxh3 of it all.
    pub(crate) fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        let map = &self.0;
        let mut sum = Xxh3::new();
        let put = |out: &mut dyn Write, sum: &mut Xxh3, bytes: &[u8]| {
            sum.update(bytes);
            out.write_all(bytes)
        };
        let hashed: usize = map.shards.iter().map(|s| s.hashes.len()).sum();
        put(out, &mut sum, &MAGIC.to_le_bytes())?;
        put(out, &mut sum, &(hashed as u64).to_le_bytes())?;
        let mut buf = Vec::with_capacity(12 * 4096);
        for shard in &map.shards {
            debug_assert!(shard.delta.is_empty(), "a frozen map has no changes");
            for (h, i) in shard.hashes.iter().zip(shard.internals.iter()) {
                buf.extend_from_slice(&h.to_le_bytes());
                buf.extend_from_slice(&i.to_le_bytes());
                if buf.len() == buf.capacity() {
                    put(out, &mut sum, &buf)?;
                    buf.clear();
                }
            }
        }
        put(out, &mut sum, &buf)?;
        put(out, &mut sum, &(map.wide.len() as u64).to_le_bytes())?;
        for (h, i) in &map.wide {
            put(out, &mut sum, &h.to_le_bytes())?;
            put(out, &mut sum, &i.to_le_bytes())?;
        }
        put(out, &mut sum, &(map.exact.len() as u64).to_le_bytes())?;
        for (id, i) in &map.exact {
            put(out, &mut sum, &i.to_le_bytes())?;
            put(out, &mut sum, &(id.len() as u64).to_le_bytes())?;
            put(out, &mut sum, id.as_bytes())?;
        }
        out.write_all(&sum.digest().to_le_bytes())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;

    /// A hash of ten bits (the top ones, so shards are used): ids share hashes often.
    fn weak(id: &str) -> u64 {
        id_hash(id) & (0x3FF << 54)
    }

    fn weak_map() -> IdMap {
        IdMap {
            hash: weak,
            ..IdMap::default()
        }
    }

    fn round_trip(map: &mut IdMap) -> IdMap {
        let mut bytes = Vec::new();
        map.frozen().write_to(&mut bytes).unwrap();
        IdMap::read_hashed(&mut &bytes[..], map.hash).unwrap()
    }

    /// What the store makes of an answer: a maybe holds only when that document is the
    /// id's (its row says so; here, `ids_of`).
    fn resolve(map: &IdMap, id: &str, ids_of: &HashMap<u64, String>) -> Option<u64> {
        match map.get(id)? {
            Found::Sure(i) => Some(i),
            Found::Maybe(i) => (ids_of.get(&i).map(String::as_str) == Some(id)).then_some(i),
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Put(u16, bool),
        Remove(u16),
        Freeze,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u16..3000, any::<bool>()).prop_map(|(id, wide)| Op::Put(id, wide)),
            3 => (0u16..3000).prop_map(Op::Remove),
            1 => Just(Op::Freeze),
        ]
    }

    proptest! {
        /// Against a map of the ids themselves, with ids sharing hashes often: every id
        /// names what it was last given, through merges, numbers past 32 bits, and writes
        /// and reads back.
        #[test]
        fn the_map_answers_as_a_map_of_the_ids(ops in proptest::collection::vec(op(), 1..6000)) {
            let mut map = weak_map();
            let mut oracle: HashMap<String, u64> = HashMap::new();
            let mut ids_of: HashMap<u64, String> = HashMap::new();
            let mut next = 0u64;
            for op in ops {
                match op {
                    Op::Put(id, wide) => {
                        let id = format!("doc-{id}");
                        if let Some(old) = oracle.remove(&id) {
                            prop_assert!(map.remove(&id, old));
                        }
                        next += 1;
                        let i = if wide { next + u64::from(u32::MAX) - 1000 } else { next };
                        map.insert(&id, i);
                        oracle.insert(id.clone(), i);
                        ids_of.insert(i, id);
                    }
                    Op::Remove(id) => {
                        let id = format!("doc-{id}");
                        prop_assert!(!map.remove(&id, u64::MAX - 1));
                        if let Some(i) = oracle.remove(&id) {
                            prop_assert!(map.remove(&id, i));
                        }
                    }
                    Op::Freeze => map = round_trip(&mut map),
                }
                prop_assert_eq!(map.len(), oracle.len());
            }
            for n in 0..3000u16 {
                let id = format!("doc-{n}");
                prop_assert_eq!(resolve(&map, &id, &ids_of), oracle.get(&id).copied());
            }
        }
    }

    /// Two live ids with one hash: the second is kept whole, both are found, each goes
    /// alone, and the first's hash is free for a third once the first is gone.
    #[test]
    fn ids_sharing_a_hash_are_told_apart() {
        let mut seen: HashMap<u64, String> = HashMap::new();
        let (a, b) = (0u64..)
            .find_map(|n| {
                let id = format!("c{n}");
                seen.insert(weak(&id), id.clone()).map(|other| (other, id))
            })
            .unwrap();
        let mut map = weak_map();
        map.insert(&a, 1);
        map.insert(&b, 2);
        assert_eq!(map.get(&a), Some(Found::Maybe(1)));
        assert_eq!(map.get(&b), Some(Found::Sure(2)));
        let mut map = round_trip(&mut map);
        assert_eq!(map.get(&b), Some(Found::Sure(2)));
        assert!(!map.remove(&a, 2));
        assert!(map.remove(&a, 1));
        assert_eq!(map.get(&b), Some(Found::Sure(2)));
        assert_eq!(map.get(&a), None);
        map.insert(&a, 3);
        assert_eq!(map.get(&a), Some(Found::Maybe(3)));
        assert!(map.remove(&b, 2));
        assert_eq!(map.len(), 1);
    }

    /// The live documents, in order, whether their numbers are dense or sparse.
    #[test]
    fn live_documents_come_in_order() {
        for spread in [1u64, 3, 1_000_003] {
            let mut map = IdMap::default();
            let mut want = Vec::new();
            for i in 0..5000u64 {
                map.insert(&format!("d{i}"), i * spread);
                want.push(i * spread);
            }
            for i in (0..5000u64).step_by(7) {
                assert!(map.remove(&format!("d{i}"), i * spread));
            }
            want.retain(|&x| !(x / spread).is_multiple_of(7));
            assert_eq!(map.live(), want, "spread {spread}");
        }
    }

    /// Catching up on removals by number drops exactly those documents' ids.
    #[test]
    fn removing_documents_by_number_drops_their_ids() {
        let mut map = IdMap::default();
        let number = |i: u64| if i == 7 { u64::MAX } else { i };
        for i in 0..5000u64 {
            map.insert(&format!("d{i}"), number(i));
        }
        let gone: HashSet<u64> = (0..5000u64)
            .filter(|i| i.is_multiple_of(3))
            .chain([u64::MAX])
            .collect();
        map.remove_documents(&gone);
        let kept = |i: u64| !i.is_multiple_of(3) && i != 7;
        for i in 0..5000u64 {
            let want = kept(i).then_some(i);
            assert_eq!(map.get(&format!("d{i}")).map(Found::internal), want);
        }
        assert_eq!(map.len(), (0..5000u64).filter(|&i| kept(i)).count());
    }

    /// A written map with a byte changed, or cut short, is refused.
    #[test]
    fn a_damaged_map_is_refused() {
        let mut map = weak_map();
        for i in 0..300u64 {
            map.insert(&format!("d{i}"), if i % 50 == 0 { u64::MAX - i } else { i });
        }
        let mut bytes = Vec::new();
        map.frozen().write_to(&mut bytes).unwrap();
        for at in (0..bytes.len()).step_by(5) {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            assert!(
                IdMap::read_hashed(&mut &bad[..], weak).is_err(),
                "byte {at}"
            );
        }
        assert!(IdMap::read_hashed(&mut &bytes[..bytes.len() - 1], weak).is_err());
    }
}
