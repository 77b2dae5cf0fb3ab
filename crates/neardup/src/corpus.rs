//! The online corpus: documents come and go, and each query asks which stored documents
//! are within the distance of a fingerprint.
//!
//! Per table of the [`Layout`], the permuted fingerprints are kept sorted, with a bucket
//! directory on their top bits (a query finds its run with two array reads, no binary
//! search), plus a small sorted delta of recent inserts that is merged in when it grows.
//! Removals are tombstones until enough accumulate to compact. A match is reported by the
//! first table that can see it (decided from the XOR, as in batch matching), so each
//! document comes back once without a set of seen ids.
//!
//! Readers never wait for the writer: queries run on an immutable snapshot (the big sorted
//! part behind one `Arc`, the small delta and tombstones behind another). A write makes a
//! new delta and publishes a new snapshot; a merge builds the new sorted part aside while
//! readers go on with the old one, then publishes it. [`Corpus::reader`] hands out
//! handles for other threads; each query sees one consistent state.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use arc_swap::ArcSwap;

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
type SlotSet = HashSet<u32, BuildHasherDefault<IdHasher>>;

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

    /// Calls `f(diff, slot)` for every entry of `lo..hi` (the range of `q`'s bucket) that
    /// agrees with `q` under `mask` and is within `k` bits of it, `diff` being their XOR.
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
    }
}

/// Calls `f(diff, slot)` for every entry of a sorted delta table that agrees with `q`
/// under `mask` and is within `k` bits of it.
#[inline]
fn run_delta(delta: &[(u64, u32)], q: u64, mask: u64, k: u32, mut f: impl FnMut(u64, u32)) {
    let lead = q & mask;
    let from = delta.partition_point(|e| e.0 & mask < lead);
    for &(key, slot) in &delta[from..] {
        if key & mask != lead {
            break;
        }
        let diff = key ^ q;
        if diff.count_ones() <= k {
            f(diff, slot);
        }
    }
}

/// The merged part of a snapshot: per table, the sorted index; per slot, fingerprint and id.
#[derive(Debug, Default)]
struct Main {
    indexes: Vec<Index>,
    fps: Vec<u64>,
    ids: Vec<u64>,
}

/// What changed since the last merge: per table the new entries, sorted; the new slots'
/// fingerprints and ids (slots from `Main::fps.len()` on); the removed slots.
#[derive(Clone, Debug, Default)]
struct Delta {
    tables: Vec<Vec<(u64, u32)>>,
    fps: Vec<u64>,
    ids: Vec<u64>,
    removed: SlotSet,
}

/// One consistent state of the corpus; queries run on it, never on anything mutable.
#[derive(Debug)]
struct Snapshot {
    layout: Arc<Layout>,
    main: Arc<Main>,
    delta: Arc<Delta>,
}

impl Snapshot {
    fn slots(&self) -> usize {
        self.main.fps.len() + self.delta.fps.len()
    }

    fn len(&self) -> usize {
        self.slots() - self.delta.removed.len()
    }

    fn id(&self, slot: u32) -> u64 {
        let s = slot as usize;
        match self.main.ids.get(s) {
            Some(&id) => id,
            None => self.delta.ids[s - self.main.ids.len()],
        }
    }

    fn fp(&self, slot: u32) -> u64 {
        fp_of(&self.main, &self.delta, slot)
    }

    fn find_all(&self, fp: u64) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        self.each_match_many(&[fp], |_, id, d| out.push((id, d)));
        out.sort_unstable_by_key(|&(id, d)| (d, id));
        out
    }

    fn find_first(&self, fp: u64) -> Option<(u64, u32)> {
        let mut best: Option<(u64, u32)> = None;
        self.each_match_many(&[fp], |_, id, d| {
            if best.is_none_or(|(bid, bd)| (d, id) < (bd, bid)) {
                best = Some((id, d));
            }
        });
        best
    }

    fn find_all_bulk(&self, fps: &[u64]) -> Vec<Vec<(u64, u32)>> {
        bulk(fps, |chunk| {
            let mut out = vec![Vec::new(); chunk.len()];
            self.each_match_many(chunk, |qi, id, d| out[qi].push((id, d)));
            for v in &mut out {
                v.sort_unstable_by_key(|&(id, d)| (d, id));
            }
            out
        })
    }

    fn find_first_bulk(&self, fps: &[u64]) -> Vec<Option<(u64, u32)>> {
        bulk(fps, |chunk| {
            let mut out: Vec<Option<(u64, u32)>> = vec![None; chunk.len()];
            self.each_match_many(chunk, |qi, id, d| {
                if out[qi].is_none_or(|(bid, bd)| (d, id) < (bd, bid)) {
                    out[qi] = Some((id, d));
                }
            });
            out
        })
    }

    /// Calls `f(query index, id, distance)` for every match of every query. Probes (a
    /// query in a table) go in groups: permute and touch each directory bucket, then read
    /// each range (prefetching its keys), then scan, so the cache misses of a group
    /// overlap instead of following one another.
    fn each_match_many(&self, fps: &[u64], mut f: impl FnMut(usize, u64, u32)) {
        const GROUP: usize = 16;
        let k = self.layout.distance();
        let tables = self.layout.tables();
        let indexes = &self.main.indexes;
        let delta = &*self.delta;
        let t_count = tables.len();
        let total = fps.len() * t_count;
        let mut probe = [(0usize, 0usize, 0u64, 0usize); GROUP];
        let mut ranges = [(0usize, 0usize); GROUP];
        let mut hit = |qi: usize, table: &Table, diff: u64, slot: u32| {
            if table.is_first_for(diff)
                && (delta.removed.is_empty() || !delta.removed.contains(&slot))
            {
                f(qi, self.id(slot), diff.count_ones());
            }
        };
        for start in (0..total).step_by(GROUP) {
            let end = (start + GROUP).min(total);
            for (p, slot) in (start..end).zip(probe.iter_mut()) {
                let (qi, t) = (p / t_count, p % t_count);
                let q = tables[t].permute(fps[qi]);
                let b = indexes[t].bucket(q);
                prefetch(&indexes[t].dir[b]);
                *slot = (qi, t, q, b);
            }
            let n = end - start;
            for (&(_, t, _, b), range) in probe[..n].iter().zip(ranges.iter_mut()) {
                *range = indexes[t].range(b);
            }
            for (&(qi, t, q, _), &range) in probe[..n].iter().zip(&ranges) {
                let (table, mask) = (&tables[t], tables[t].search_mask());
                indexes[t].run(q, mask, k, range, |diff, slot| hit(qi, table, diff, slot));
                if let Some(d) = delta.tables.get(t).filter(|d| !d.is_empty()) {
                    run_delta(d, q, mask, k, |diff, slot| hit(qi, table, diff, slot));
                }
            }
        }
    }
}

/// `f` over chunks of the queries, in parallel, results concatenated in order.
fn bulk<R: Send>(fps: &[u64], f: impl Fn(&[u64]) -> Vec<R> + Sync + Send) -> Vec<R> {
    let chunks: Vec<&[u64]> = fps.chunks(256).collect();
    crate::par::map(chunks, f).into_iter().flatten().collect()
}

/// An in-memory corpus of `(id, fingerprint)` documents with near-duplicate queries.
///
/// Ids are the caller's `u64` document ids. Inserting an id that is present replaces its
/// fingerprint. Results list each matching document once, nearest first (then by id).
/// The `Corpus` is the writer; [`Corpus::reader`] gives query handles for other threads,
/// which see each write as soon as it returns and never wait for a merge.
pub struct Corpus {
    snap: Arc<Snapshot>,
    published: Arc<ArcSwap<Snapshot>>,
    by_id: IdMap,
    delta_cap: usize,
}

impl std::fmt::Debug for Corpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Corpus")
            .field("layout", &self.snap.layout)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl Clone for Corpus {
    /// An independent copy: its writes are not seen by this corpus's readers.
    fn clone(&self) -> Corpus {
        Corpus {
            snap: Arc::clone(&self.snap),
            published: Arc::new(ArcSwap::new(Arc::clone(&self.snap))),
            by_id: self.by_id.clone(),
            delta_cap: self.delta_cap,
        }
    }
}

/// A query handle on a [`Corpus`] for another thread: cheap to clone, `Send` and `Sync`.
#[derive(Clone)]
pub struct CorpusReader {
    published: Arc<ArcSwap<Snapshot>>,
}

impl std::fmt::Debug for CorpusReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CorpusReader").finish_non_exhaustive()
    }
}

impl CorpusReader {
    /// Documents stored, as of now.
    pub fn len(&self) -> usize {
        self.published.load().len()
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// As [`Corpus::find_all`].
    pub fn find_all(&self, fp: u64) -> Vec<(u64, u32)> {
        self.published.load().find_all(fp)
    }

    /// As [`Corpus::find_first`].
    pub fn find_first(&self, fp: u64) -> Option<(u64, u32)> {
        self.published.load().find_first(fp)
    }

    /// As [`Corpus::find_all_bulk`], all queries on one state.
    pub fn find_all_bulk(&self, fps: &[u64]) -> Vec<Vec<(u64, u32)>> {
        self.published.load_full().find_all_bulk(fps)
    }

    /// As [`Corpus::find_first_bulk`], all queries on one state.
    pub fn find_first_bulk(&self, fps: &[u64]) -> Vec<Option<(u64, u32)>> {
        self.published.load_full().find_first_bulk(fps)
    }
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
        let main = Main {
            indexes: layout
                .tables()
                .iter()
                .map(|t| Index::build(Vec::new(), t.leading_bits()))
                .collect(),
            fps: Vec::new(),
            ids: Vec::new(),
        };
        let delta = Delta {
            tables: vec![Vec::new(); layout.tables().len()],
            ..Delta::default()
        };
        let snap = Arc::new(Snapshot {
            layout: Arc::new(layout),
            main: Arc::new(main),
            delta: Arc::new(delta),
        });
        Ok(Corpus {
            published: Arc::new(ArcSwap::new(Arc::clone(&snap))),
            snap,
            by_id: IdMap::default(),
            delta_cap: 4096,
        })
    }

    /// A query handle for other threads.
    pub fn reader(&self) -> CorpusReader {
        CorpusReader {
            published: Arc::clone(&self.published),
        }
    }

    /// The layout in use.
    pub fn layout(&self) -> &Layout {
        &self.snap.layout
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
        self.by_id.get(&id).map(|&s| self.snap.fp(s))
    }

    /// Stores `id` with fingerprint `fp`; returns the fingerprint it replaced, if any.
    pub fn insert(&mut self, id: u64, fp: u64) -> Result<Option<u64>> {
        let mut old = None;
        self.write(|c, delta| {
            old = c.remove_in(delta, id);
            c.add_in(delta, id, fp, true)
        })?;
        Ok(old)
    }

    /// Stores every `(id, fingerprint)`, in order (a later copy of an id wins): a few
    /// go to the delta, many are merged into the sorted tables in one pass per table.
    pub fn insert_bulk(&mut self, docs: &[(u64, u64)]) -> Result<()> {
        if docs.len() <= self.delta_cap / 4 && docs.len() * 16 <= self.len() {
            return self.write(|c, delta| {
                for &(id, fp) in docs {
                    c.remove_in(delta, id);
                    c.add_in(delta, id, fp, true)?;
                }
                Ok(())
            });
        }
        // Straight into a merge: the new slots need no delta tables, and no state with
        // only some of them is ever published.
        let mut delta = (*self.snap.delta).clone();
        for &(id, fp) in docs {
            self.remove_in(&mut delta, id);
            if let Err(e) = self.add_in(&mut delta, id, fp, false) {
                self.by_id = rebuild_map(&self.snap);
                return Err(e);
            }
        }
        self.merge_from(Arc::new(Snapshot {
            layout: Arc::clone(&self.snap.layout),
            main: Arc::clone(&self.snap.main),
            delta: Arc::new(delta),
        }));
        Ok(())
    }

    /// Removes `id`; returns its fingerprint, or `None` if it was not stored.
    pub fn remove(&mut self, id: u64) -> Option<u64> {
        let mut old = None;
        // Removal cannot fail.
        let _ = self.write(|c, delta| {
            old = c.remove_in(delta, id);
            Ok(())
        });
        old
    }

    /// Removes every id in `ids`; returns how many were stored.
    pub fn remove_bulk(&mut self, ids: &[u64]) -> usize {
        let mut n = 0;
        let _ = self.write(|c, delta| {
            n = ids
                .iter()
                .filter(|&&id| c.remove_in(delta, id).is_some())
                .count();
            Ok(())
        });
        n
    }

    /// Every stored document within the distance of `fp`, as `(id, distance)`, each once,
    /// by distance then id.
    pub fn find_all(&self, fp: u64) -> Vec<(u64, u32)> {
        self.snap.find_all(fp)
    }

    /// The nearest stored document within the distance of `fp` (the smallest id among
    /// equals), or `None`.
    pub fn find_first(&self, fp: u64) -> Option<(u64, u32)> {
        self.snap.find_first(fp)
    }

    /// [`Corpus::find_all`] for each query, in parallel.
    pub fn find_all_bulk(&self, fps: &[u64]) -> Vec<Vec<(u64, u32)>> {
        self.snap.find_all_bulk(fps)
    }

    /// [`Corpus::find_first`] for each query, in parallel.
    pub fn find_first_bulk(&self, fps: &[u64]) -> Vec<Option<(u64, u32)>> {
        self.snap.find_first_bulk(fps)
    }

    /// Runs `f` on a copy of the delta, then publishes it (and merges when the delta has
    /// grown past its cap or the removed past the live). Readers keep the old snapshot
    /// until then; an error publishes nothing.
    fn write(&mut self, f: impl FnOnce(&mut Corpus, &mut Delta) -> Result<()>) -> Result<()> {
        let mut delta = (*self.snap.delta).clone();
        let r = f(self, &mut delta);
        let snap = Snapshot {
            layout: Arc::clone(&self.snap.layout),
            main: Arc::clone(&self.snap.main),
            delta: Arc::new(delta),
        };
        let grown = snap.delta.tables.first().map_or(0, Vec::len) > self.delta_cap
            || (snap.delta.removed.len() > 1024 && snap.delta.removed.len() > self.len());
        if r.is_err() {
            // Nothing of a failed call is kept: the writer's map returns to the snapshot's.
            self.by_id = rebuild_map(&self.snap);
            return r;
        }
        self.publish(snap);
        if grown {
            self.merge();
        }
        Ok(())
    }

    fn publish(&mut self, snap: Snapshot) {
        self.snap = Arc::new(snap);
        self.published.store(Arc::clone(&self.snap));
    }

    /// Removes `id` in `delta`; its fingerprint, if it was stored.
    fn remove_in(&mut self, delta: &mut Delta, id: u64) -> Option<u64> {
        let slot = self.by_id.remove(&id)?;
        delta.removed.insert(slot);
        Some(fp_of(&self.snap.main, delta, slot))
    }

    /// Adds `id` with `fp` in a new slot of `delta` (and its tables, with `index`).
    fn add_in(&mut self, delta: &mut Delta, id: u64, fp: u64, index: bool) -> Result<()> {
        let next = self.snap.main.fps.len() + delta.fps.len();
        let slot = u32::try_from(next).map_err(|_| Error::TooManyFingerprints {
            got: next + 1,
            max: u32::MAX as usize,
        })?;
        delta.fps.push(fp);
        delta.ids.push(id);
        if index {
            for (entries, table) in delta.tables.iter_mut().zip(self.snap.layout.tables()) {
                let key = table.permute(fp);
                let at = entries.partition_point(|e| e.0 < key);
                entries.insert(at, (key, slot));
            }
        }
        self.by_id.insert(id, slot);
        Ok(())
    }

    /// Merges the delta into new sorted tables, dropping removed slots, and publishes them.
    /// Readers go on with the old snapshot while this runs.
    fn merge(&mut self) {
        self.merge_from(Arc::clone(&self.snap));
    }

    /// [`Corpus::merge`] of `snap` (the current state, or one about to be).
    fn merge_from(&mut self, snap: Arc<Snapshot>) {
        let live = snap.len();
        let mut fps = Vec::with_capacity(live);
        let mut ids = Vec::with_capacity(live);
        for slot in 0..snap.slots() as u32 {
            if !snap.delta.removed.contains(&slot) {
                fps.push(snap.fp(slot));
                ids.push(snap.id(slot));
            }
        }
        let tables: Vec<&Table> = snap.layout.tables().iter().collect();
        let fps_ref = &fps;
        let indexes = crate::par::map(tables, |t| {
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
        let main = Main { indexes, fps, ids };
        let compacted = !snap.delta.removed.is_empty();
        // Merging costs a pass over the corpus: let the delta grow with it.
        self.delta_cap = ((main.fps.len() as f64).sqrt() as usize * 8).clamp(4096, 1 << 15);
        let delta = Delta {
            tables: vec![Vec::new(); snap.layout.tables().len()],
            ..Delta::default()
        };
        self.publish(Snapshot {
            layout: Arc::clone(&snap.layout),
            main: Arc::new(main),
            delta: Arc::new(delta),
        });
        if compacted {
            // Slots were renumbered. (Without removals every slot keeps its number.)
            self.by_id = rebuild_map(&self.snap);
        }
    }
}

/// The fingerprint in `slot`: merged slots first, then the delta's.
fn fp_of(main: &Main, delta: &Delta, slot: u32) -> u64 {
    let s = slot as usize;
    match main.fps.get(s) {
        Some(&fp) => fp,
        None => delta.fps[s - main.fps.len()],
    }
}

/// The id → slot map of a snapshot's live documents.
fn rebuild_map(snap: &Snapshot) -> IdMap {
    (0..snap.slots() as u32)
        .filter(|s| !snap.delta.removed.contains(s))
        .map(|s| (snap.id(s), s))
        .collect()
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
