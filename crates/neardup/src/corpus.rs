//! The online corpus: documents come and go, and each query asks which stored documents
//! are within the distance of a fingerprint.
//!
//! Per table of the [`Layout`], the permuted fingerprints are kept sorted, with a bucket
//! directory on their top bits (a query finds its run with two array reads, no binary
//! search), plus a small sorted delta of recent inserts that is merged in when it grows.
//! Removals are tombstones until enough accumulate to compact. A match is reported by the
//! first table that can see it (decided from the XOR, as in batch matching), so each
//! document comes back once without a set of seen ids.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::batch::radix::{self, Keyed};
use crate::error::{Error, Result};
use crate::tables::{Blocks, Layout, Table};

/// Modelled cost of a table probe (a directory read and a cache miss into the run).
const PROBE: f64 = 40.0;
/// Modelled cost of checking one candidate.
const CHECK: f64 = 2.0;
/// Most tables the corpus planner considers: every table holds every fingerprint.
const MAX_TABLES: u128 = 32;

/// The corpus layout for about `n` documents at `distance`: the block count with the
/// cheapest modelled query (table probes against candidates to check), among layouts of
/// at most 32 tables.
pub fn plan(n: usize, distance: u32) -> Result<Layout> {
    let mut best: Option<(f64, usize)> = None;
    for blocks in distance as usize + 1..=64 {
        let tables = crate::tables::num_tables(blocks, distance);
        if tables > MAX_TABLES {
            break;
        }
        // The fewest leading bits of any table: the block widths round down.
        let lead = (blocks - distance as usize) as u32 * (64 / blocks as u32);
        let per_table = n as f64 / 2f64.powi(lead as i32);
        let cost = tables as f64 * (PROBE + CHECK * per_table);
        if best.is_none_or(|(c, _)| cost < c) {
            best = Some((cost, blocks));
        }
    }
    match best {
        Some((_, blocks)) => Layout::new(blocks, distance),
        None => Layout::new(distance as usize + 1, distance),
    }
}

/// A permuted fingerprint and its slot, radix-sorted by the fingerprint.
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    key: u64,
    slot: u32,
}

impl Keyed for Entry {
    #[inline]
    fn key(&self) -> u64 {
        self.key
    }
}

/// Ids are the caller's and already spread (or dense): a multiply-xorshift mixes them
/// enough for the id map, at a fraction of SipHash's cost.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        let x = self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x ^ (x >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

type IdMap = HashMap<u64, u32, BuildHasherDefault<IdHasher>>;

/// One table: permuted fingerprints sorted, their slots, a directory, and the delta.
#[derive(Clone, Debug)]
struct Index {
    keys: Vec<u64>,
    slots: Vec<u32>,
    /// `dir[b]..dir[b + 1]` is the run of keys whose top `dir_bits` bits are `b`.
    dir: Vec<u32>,
    dir_bits: u32,
    /// Bits of the leading blocks: when the directory covers them, a bucket is a run.
    lead_bits: u32,
    /// Recent inserts, sorted by key.
    delta: Vec<(u64, u32)>,
}

impl Index {
    fn build(mut entries: Vec<Entry>, lead: u32) -> Index {
        let mut scratch = vec![Entry::default(); entries.len()];
        radix::sort(&mut entries, &mut scratch);
        drop(scratch);
        let n = entries.len();
        // About one key per bucket, never finer than the leading blocks.
        let dir_bits = (usize::BITS - n.leading_zeros())
            .clamp(1, 24)
            .min(lead.max(1));
        let mut dir = vec![0u32; (1 << dir_bits) + 1];
        for e in &entries {
            dir[(e.key >> (64 - dir_bits)) as usize + 1] += 1;
        }
        for b in 1..dir.len() {
            dir[b] += dir[b - 1];
        }
        Index {
            keys: entries.iter().map(|e| e.key).collect(),
            slots: entries.iter().map(|e| e.slot).collect(),
            dir,
            dir_bits,
            lead_bits: lead,
            delta: Vec::new(),
        }
    }

    /// The directory bucket of permuted query `q`.
    #[inline]
    fn bucket(&self, q: u64) -> usize {
        (q >> (64 - self.dir_bits)) as usize
    }

    /// The range of keys in bucket `b`, with a prefetch of its first keys: probing every
    /// table's range before scanning any lets their cache misses overlap.
    #[inline]
    fn range(&self, b: usize) -> (usize, usize) {
        let (lo, hi) = (self.dir[b] as usize, self.dir[b + 1] as usize);
        if let Some(k) = self.keys.get(lo) {
            prefetch(k);
        }
        (lo, hi)
    }

    /// Calls `f(diff, slot)` for every entry of `lo..hi` (the range of `q`'s bucket) and of
    /// the delta that agrees with `q` under `mask` and is within `k` bits of it, `diff`
    /// being their XOR.
    #[inline]
    fn run(
        &self,
        q: u64,
        mask: u64,
        k: u32,
        (lo, hi): (usize, usize),
        mut f: impl FnMut(u64, u32),
    ) {
        let keys = &self.keys[lo..hi];
        let slots = &self.slots[lo..hi];
        if self.dir_bits >= self.lead_bits {
            // The bucket is exactly the run of the query's leading blocks.
            for (&key, &slot) in keys.iter().zip(slots) {
                let diff = key ^ q;
                if diff.count_ones() <= k {
                    f(diff, slot);
                }
            }
        } else {
            // A coarser bucket (a small corpus): the run is a sorted stretch of it.
            let lead = q & mask;
            let start = keys.partition_point(|&key| key & mask < lead);
            for (&key, &slot) in keys[start..].iter().zip(&slots[start..]) {
                if key & mask != lead {
                    break;
                }
                let diff = key ^ q;
                if diff.count_ones() <= k {
                    f(diff, slot);
                }
            }
        }
        if !self.delta.is_empty() {
            let lead = q & mask;
            let from = self.delta.partition_point(|e| e.0 & mask < lead);
            for &(key, slot) in &self.delta[from..] {
                if key & mask != lead {
                    break;
                }
                let diff = key ^ q;
                if diff.count_ones() <= k {
                    f(diff, slot);
                }
            }
        }
    }
}

/// An in-memory corpus of `(id, fingerprint)` documents with near-duplicate queries.
///
/// Ids are the caller's `u64` document ids. Inserting an id that is present replaces its
/// fingerprint. Results list each matching document once, nearest first (then by id).
#[derive(Clone, Debug)]
pub struct Corpus {
    layout: Layout,
    indexes: Vec<Index>,
    fps: Vec<u64>,
    ids: Vec<u64>,
    live: Vec<bool>,
    by_id: IdMap,
    dead: usize,
    delta_cap: usize,
}

impl Corpus {
    /// An empty corpus matching at `distance`, with `blocks` per fingerprint, or for
    /// [`Blocks::Auto`] the [`plan`] for about `expected` documents.
    pub fn new(blocks: Blocks, distance: u32, expected: usize) -> Result<Corpus> {
        let layout = match blocks {
            Blocks::Fixed(m) => Layout::new(m, distance)?,
            Blocks::Auto => plan(expected, distance)?,
        };
        if crate::tables::num_tables(layout.blocks(), distance) > MAX_TABLES * 8 {
            return Err(Error::TooManyTables {
                blocks: layout.blocks(),
                distance,
                tables: crate::tables::num_tables(layout.blocks(), distance),
                limit: (MAX_TABLES * 8) as usize,
            });
        }
        let indexes = layout
            .tables()
            .iter()
            .map(|t| Index::build(Vec::new(), t.leading_bits()))
            .collect();
        Ok(Corpus {
            layout,
            indexes,
            fps: Vec::new(),
            ids: Vec::new(),
            live: Vec::new(),
            by_id: IdMap::default(),
            dead: 0,
            delta_cap: 4096,
        })
    }

    /// The layout in use.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Documents stored.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The fingerprint stored for `id`.
    pub fn get(&self, id: u64) -> Option<u64> {
        self.by_id.get(&id).map(|&s| self.fps[s as usize])
    }

    /// Stores `id` with fingerprint `fp`; returns the fingerprint it replaced, if any.
    pub fn insert(&mut self, id: u64, fp: u64) -> Result<Option<u64>> {
        let old = self.remove(id);
        let slot = self.new_slot(id, fp)?;
        for (index, table) in self.indexes.iter_mut().zip(self.layout.tables()) {
            let key = table.permute(fp);
            let at = index.delta.partition_point(|e| e.0 < key);
            index.delta.insert(at, (key, slot));
        }
        if self
            .indexes
            .first()
            .is_some_and(|i| i.delta.len() > self.delta_cap)
        {
            self.rebuild();
        }
        Ok(old)
    }

    /// Stores every `(id, fingerprint)`, in order (a later copy of an id wins), merging
    /// them into the tables in one pass per table.
    pub fn insert_bulk(&mut self, docs: &[(u64, u64)]) -> Result<()> {
        if docs.len() <= self.delta_cap / 4 && docs.len() * 16 <= self.len() {
            // A few documents into a large corpus: the delta takes them.
            for &(id, fp) in docs {
                self.insert(id, fp)?;
            }
            return Ok(());
        }
        for &(id, fp) in docs {
            self.remove(id);
            self.new_slot(id, fp)?;
        }
        self.rebuild();
        Ok(())
    }

    /// Removes `id`; returns its fingerprint, or `None` if it was not stored.
    pub fn remove(&mut self, id: u64) -> Option<u64> {
        let slot = self.by_id.remove(&id)? as usize;
        self.live[slot] = false;
        self.dead += 1;
        if self.dead > 1024 && self.dead > self.by_id.len() {
            self.rebuild();
        }
        Some(self.fps[slot])
    }

    /// Removes every id in `ids`; returns how many were stored.
    pub fn remove_bulk(&mut self, ids: &[u64]) -> usize {
        ids.iter().filter(|&&id| self.remove(id).is_some()).count()
    }

    /// Every stored document within the distance of `fp`, as `(id, distance)`, each once,
    /// by distance then id.
    pub fn find_all(&self, fp: u64) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        self.each_match(fp, |id, d| out.push((id, d)));
        out.sort_unstable_by_key(|&(id, d)| (d, id));
        out
    }

    /// The nearest stored document within the distance of `fp` (the smallest id among
    /// equals), or `None`.
    pub fn find_first(&self, fp: u64) -> Option<(u64, u32)> {
        let mut best: Option<(u64, u32)> = None;
        self.each_match(fp, |id, d| {
            if best.is_none_or(|(bid, bd)| (d, id) < (bd, bid)) {
                best = Some((id, d));
            }
        });
        best
    }

    /// [`Corpus::find_all`] for each query, in parallel.
    pub fn find_all_bulk(&self, fps: &[u64]) -> Vec<Vec<(u64, u32)>> {
        self.bulk(fps, |chunk| {
            let mut out = vec![Vec::new(); chunk.len()];
            self.each_match_many(chunk, |qi, id, d| out[qi].push((id, d)));
            for v in &mut out {
                v.sort_unstable_by_key(|&(id, d)| (d, id));
            }
            out
        })
    }

    /// [`Corpus::find_first`] for each query, in parallel.
    pub fn find_first_bulk(&self, fps: &[u64]) -> Vec<Option<(u64, u32)>> {
        self.bulk(fps, |chunk| {
            let mut out: Vec<Option<(u64, u32)>> = vec![None; chunk.len()];
            self.each_match_many(chunk, |qi, id, d| {
                if out[qi].is_none_or(|(bid, bd)| (d, id) < (bd, bid)) {
                    out[qi] = Some((id, d));
                }
            });
            out
        })
    }

    /// `f` over chunks of the queries, in parallel, results concatenated in order.
    fn bulk<R: Send>(&self, fps: &[u64], f: impl Fn(&[u64]) -> Vec<R> + Sync + Send) -> Vec<R> {
        let chunks: Vec<&[u64]> = fps.chunks(256).collect();
        crate::par::map(chunks, f).into_iter().flatten().collect()
    }

    fn each_match(&self, fp: u64, mut f: impl FnMut(u64, u32)) {
        self.each_match_many(&[fp], |_, id, d| f(id, d));
    }

    /// Calls `f(query index, id, distance)` for every match of every query. Probes (a
    /// query in a table) go in groups: permute and touch each directory bucket, then read
    /// each range (prefetching its keys), then scan, so the cache misses of a group
    /// overlap instead of following one another.
    fn each_match_many(&self, fps: &[u64], mut f: impl FnMut(usize, u64, u32)) {
        const GROUP: usize = 16;
        let k = self.layout.distance();
        let tables = self.layout.tables();
        let t_count = tables.len();
        let total = fps.len() * t_count;
        let mut probe = [(0usize, 0usize, 0u64, 0usize); GROUP];
        let mut ranges = [(0usize, 0usize); GROUP];
        for start in (0..total).step_by(GROUP) {
            let end = (start + GROUP).min(total);
            for (p, slot) in (start..end).zip(probe.iter_mut()) {
                let (qi, t) = (p / t_count, p % t_count);
                let q = tables[t].permute(fps[qi]);
                let b = self.indexes[t].bucket(q);
                prefetch(&self.indexes[t].dir[b]);
                *slot = (qi, t, q, b);
            }
            let n = end - start;
            for (&(_, t, _, b), range) in probe[..n].iter().zip(ranges.iter_mut()) {
                *range = self.indexes[t].range(b);
            }
            for (&(qi, t, q, _), &range) in probe[..n].iter().zip(&ranges) {
                let table = &tables[t];
                self.indexes[t].run(q, table.search_mask(), k, range, |diff, slot| {
                    if self.live[slot as usize] && table.is_first_for(diff) {
                        f(qi, self.ids[slot as usize], diff.count_ones());
                    }
                });
            }
        }
    }

    fn new_slot(&mut self, id: u64, fp: u64) -> Result<u32> {
        let slot = u32::try_from(self.fps.len()).map_err(|_| Error::TooManyFingerprints {
            got: self.fps.len() + 1,
            max: u32::MAX as usize,
        })?;
        self.fps.push(fp);
        self.ids.push(id);
        self.live.push(true);
        self.by_id.insert(id, slot);
        Ok(slot)
    }

    /// Compacts away removed documents and rebuilds every table from the live ones.
    fn rebuild(&mut self) {
        let mut fps = Vec::with_capacity(self.by_id.len());
        let mut ids = Vec::with_capacity(self.by_id.len());
        for s in 0..self.fps.len() {
            if self.live[s] {
                fps.push(self.fps[s]);
                ids.push(self.ids[s]);
            }
        }
        self.by_id = ids
            .iter()
            .enumerate()
            .map(|(s, &id)| (id, s as u32))
            .collect();
        self.live = vec![true; fps.len()];
        self.dead = 0;
        let tables: Vec<&Table> = self.layout.tables().iter().collect();
        let fps_ref = &fps;
        self.indexes = crate::par::map(tables, |t| {
            let entries = fps_ref
                .iter()
                .enumerate()
                .map(|(s, &fp)| Entry {
                    key: t.permute(fp),
                    slot: s as u32,
                })
                .collect();
            Index::build(entries, t.leading_bits())
        });
        self.fps = fps;
        self.ids = ids;
        // Merging costs a pass over the corpus: let the delta grow with it.
        self.delta_cap = ((self.fps.len() as f64).sqrt() as usize * 8).clamp(4096, 1 << 16);
    }
}

/// Asks for the cache line holding `x` (a hint: no effect on results).
#[inline(always)]
fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and changes no state visible to the program; the
    // address comes from a reference, so it is valid anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (x as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_few_tables() {
        for n in [0, 1000, 1_000_000, 100_000_000] {
            let l = plan(n, 3).unwrap();
            assert!(
                l.tables().len() as u128 <= MAX_TABLES,
                "{n}: {}",
                l.blocks()
            );
        }
        assert!(plan(1_000_000, 3).unwrap().blocks() >= 4);
    }
}
