//! The online corpus: documents come and go, and each query asks which stored documents
//! are within the distance of a fingerprint.
//!
//! Per table of the [`Layout`], the permuted fingerprints are kept sorted, with a bucket
//! directory on their top bits (a query finds its run with two array reads, no binary
//! search). Recent documents live in two small sorted levels on top of that main part:
//! a write touches only the top one; the top is folded into the middle one when full, and
//! the middle one into a rebuilt main part when it reaches 1/32 of it, so the cost of a
//! rebuild is spread over many writes. Removals are tombstones until the rebuild. A match
//! is reported by the first table that can see it (decided from the XOR, as in batch
//! matching), so each document comes back once without a set of seen ids.
//!
//! Memory is what limits a corpus, so the main part is lean: once the directory covers
//! 16 bits, a table keeps only the low 48 bits of each key (6 bytes), and only the first
//! table keeps ids, plus an index of its positions by id, both packed at the bits they
//! need (20 each for a million). A match seen in another table is found in the first by its
//! fingerprint. Four tables (3 bits in 4 blocks) cost under 32 bytes per fingerprint.
//!
//! Readers never wait for the writer: queries run on an immutable snapshot (each part
//! behind its own `Arc`). A write makes a new top level and publishes a new snapshot; a
//! rebuild makes the new main part aside while readers go on with the old one, then
//! publishes it. [`Corpus::reader`] hands out handles for other threads; each query sees
//! one consistent state.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::batch::radix::{self, Keyed};
use crate::error::{Error, Result};
use crate::tables::{Blocks, Layout, Table};

mod bands;
mod documents;
mod level;
mod main_part;
mod raw;

pub use bands::{BandIndex, BandIndexReader, BandSnapshot};
pub use documents::Documents;

use crate::hint::prefetch;
use level::{level_dir, run_level, Level};
use main_part::{Index, Main, Packed, IMPLIED};

/// Modelled cost of a table probe (a directory read and a cache miss into the run).
const PROBE: f64 = 40.0;
/// Modelled cost of checking one candidate.
const CHECK: f64 = 2.0;
/// Most tables the corpus planner considers: every table holds every fingerprint.
const MAX_TABLES: u128 = 32;
/// Bytes per fingerprint the planner may spend when some layout fits in them.
pub const MEMORY_BUDGET: u64 = 32;
/// The middle level is folded into the main part once it outgrows 1/MID_SHARE of it...
const MID_SHARE: usize = 32;
/// ...or this many documents, whichever is more.
const MID_MIN: usize = 8192;

/// Documents and removals the middle level takes over a main part of `main` documents.
fn mid_cap(main: usize) -> usize {
    (main / MID_SHARE).max(MID_MIN)
}

/// Documents and removals the top level takes before it is folded. Each write copies the
/// top and each fold the middle: a top of about the square root of the middle balances
/// the two.
fn top_cap(main: usize) -> usize {
    (mid_cap(main) as f64).sqrt().clamp(256.0, 4096.0) as usize
}

/// Bytes per fingerprint of a large corpus with this many tables of at least `lead`
/// leading bits: the keys, plus the id and its index.
fn bytes_per_fingerprint(tables: u128, lead: u32) -> u128 {
    let key = if lead >= IMPLIED { 6 } else { 8 };
    tables * key + 8
}

/// The corpus layout for about `n` documents at `distance`: the block count with the
/// cheapest modelled query (table probes against candidates to check), among layouts of
/// at most 32 tables that fit in [`MEMORY_BUDGET`] bytes per fingerprint; when none fits,
/// the one with the fewest tables (then the cheapest).
pub fn plan(n: usize, distance: u32) -> Result<Layout> {
    // (over budget, tables when over budget, cost, blocks)
    let mut best: Option<(bool, u128, f64, usize)> = None;
    for blocks in distance as usize + 1..=64 {
        let tables = crate::tables::num_tables(blocks, distance);
        if tables > MAX_TABLES {
            break;
        }
        // The fewest leading bits of any table: the block widths round down.
        let lead = (blocks - distance as usize) as u32 * (64 / blocks as u32);
        let per_table = n as f64 / 2f64.powi(lead as i32);
        let cost = tables as f64 * (PROBE + CHECK * per_table);
        let over = bytes_per_fingerprint(tables, lead) > u128::from(MEMORY_BUDGET);
        let rank = (over, if over { tables } else { 0 }, cost, blocks);
        let better = match best {
            None => true,
            Some((o, t, c, _)) => {
                (rank.0, rank.1) < (o, t) || ((rank.0, rank.1) == (o, t) && cost < c)
            }
        };
        if better {
            best = Some(rank);
        }
    }
    match best {
        Some((_, _, _, blocks)) => Layout::new(blocks, distance),
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

/// A hasher for keys that are already spread (hashes) or dense (ids): a multiply-xorshift
/// mixes them enough for a hash map, at a fraction of SipHash's cost.
#[derive(Default)]
pub struct IdHasher(u64);

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

/// One consistent state of the corpus; queries run on it, never on anything mutable.
///
/// Parts, by age: `main` (built in one pass, compact), `frozen` (a middle level being
/// built into the next main part in the background; usually empty), `mid` (recent
/// documents, sorted per table; folded into `main` when it reaches a fraction of it), and
/// `top` (the last few writes; copied by each write, folded into `mid` when full). So a
/// write costs O(top), a fold O(mid), and a rebuild of `main` comes once per many
/// documents. Slots number the main part's positions, then each level's documents.
#[derive(Debug)]
struct Snapshot {
    layout: Arc<Layout>,
    main: Arc<Main>,
    frozen: Arc<Level>,
    mid: Arc<Level>,
    top: Arc<Level>,
}

impl Snapshot {
    fn levels(&self) -> [&Level; 3] {
        [&self.frozen, &self.mid, &self.top]
    }

    fn slots(&self) -> usize {
        self.main.len() + self.levels().iter().map(|l| l.fps.len()).sum::<usize>()
    }

    fn len(&self) -> usize {
        self.slots() - self.levels().iter().map(|l| l.removed.len()).sum::<usize>()
    }

    fn id(&self, slot: u32) -> u64 {
        match locate(&self.main, self.levels(), slot) {
            Place::Main(p) => self.main.ids.get(p),
            Place::Level(level, i) => level.ids[i],
        }
    }

    fn fp(&self, slot: u32) -> u64 {
        fp_of(&self.layout, &self.main, self.levels(), slot)
    }

    fn removed(&self, slot: u32) -> bool {
        removed_in(self.levels(), slot)
    }

    /// Every live `(id, fingerprint)`, by id.
    fn documents(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::with_capacity(self.len());
        self.for_each_live(|id, fp| out.push((id, fp)));
        out.sort_unstable();
        out
    }

    /// Calls `f(id, fingerprint)` for every live document: the main part's in its first
    /// table's order, then the levels' in slot order.
    fn for_each_live(&self, mut f: impl FnMut(u64, u64)) {
        if let Some(first) = self.main.indexes.first() {
            let table = &self.layout.tables()[0];
            first.for_each(|pos, key| {
                if !self.removed(pos as u32) {
                    f(self.main.ids.get(pos), table.unpermute(key));
                }
            });
        }
        let mut base = self.main.len();
        for level in self.levels() {
            for (i, (&fp, &id)) in level.fps.iter().zip(&level.ids).enumerate() {
                if !self.removed((base + i) as u32) {
                    f(id, fp);
                }
            }
            base += level.fps.len();
        }
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
        let main = &*self.main;
        let indexes = &main.indexes;
        let levels = self.levels();
        let live = |slot: usize| !self.removed(slot as u32);
        let t_count = tables.len();
        let total = fps.len() * t_count;
        let mut probe = [(0usize, 0usize, 0u64, 0usize); GROUP];
        let mut ranges = [(0usize, 0usize); GROUP];
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
            for (&(qi, t, q, b), &range) in probe[..n].iter().zip(&ranges) {
                let (table, mask) = (&tables[t], tables[t].search_mask());
                if t == 0 {
                    // The first table holds the ids: its positions are the documents.
                    indexes[0].run(q, mask, k, b, range, |diff, pos| {
                        if table.is_first_for(diff) && live(pos) {
                            f(qi, main.ids.get(pos), diff.count_ones());
                        }
                    });
                } else {
                    // Another table sees fingerprints: each distinct one that this table
                    // reports is looked up in the first (equal keys are adjacent).
                    let mut last = None;
                    indexes[t].run(q, mask, k, b, range, |diff, _| {
                        if last == Some(diff) || !table.is_first_for(diff) {
                            return;
                        }
                        last = Some(diff);
                        let key = tables[0].permute(table.unpermute(q ^ diff));
                        for pos in indexes[0].exact(key) {
                            if live(pos) {
                                f(qi, main.ids.get(pos), diff.count_ones());
                            }
                        }
                    });
                }
                for level in levels {
                    if let Some(d) = level.tables.get(t).filter(|d| !d.is_empty()) {
                        let dir = level.dirs.get(t).map_or(&[][..], Vec::as_slice);
                        run_level(d, dir, q, mask, k, |diff, slot| {
                            if table.is_first_for(diff) && live(slot as usize) {
                                f(qi, self.id(slot), diff.count_ones());
                            }
                        });
                    }
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
    /// Slots of the live documents of the levels (the rest are found through `Main`).
    recent: IdMap,
    /// A main part being built on another thread, from this snapshot.
    pending: Option<(std::thread::JoinHandle<Main>, Arc<Snapshot>)>,
    background: bool,
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
            recent: self.recent.clone(),
            // The copy keeps the frozen level; its next rebuild takes it in.
            pending: None,
            background: self.background,
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

    /// As [`Corpus::documents`], as of now.
    pub fn documents(&self) -> Vec<(u64, u64)> {
        self.published.load().documents()
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
                .map(|t| Index::build(0, |_| 0, t.leading_bits()))
                .collect(),
            ids: Packed::default(),
            by_id: Packed::default(),
        };
        let tables = layout.tables().len();
        let snap = Arc::new(Snapshot {
            layout: Arc::new(layout),
            main: Arc::new(main),
            frozen: Arc::new(Level::empty(tables)),
            mid: Arc::new(Level::empty(tables)),
            top: Arc::new(Level::empty(tables)),
        });
        Ok(Corpus {
            published: Arc::new(ArcSwap::new(Arc::clone(&snap))),
            snap,
            recent: IdMap::default(),
            pending: None,
            background: true,
        })
    }

    /// Whether rebuilds of the main part run on another thread (the default): the write
    /// that starts one returns at once, and later writes install the result when it is
    /// ready. Off, that write waits for the rebuild.
    pub fn background_rebuilds(mut self, on: bool) -> Corpus {
        self.background = on;
        self
    }

    /// Waits for a rebuild running in the background, if any, and installs it.
    pub fn finish_rebuild(&mut self) {
        if let Some((handle, base)) = self.pending.take() {
            self.install(handle, &base);
        }
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
        self.snap.len()
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of memory the corpus holds for its tables, ids and recent changes (not
    /// counting the allocator's own overhead).
    pub fn heap_bytes(&self) -> usize {
        self.snap.main.heap_bytes()
            + self
                .snap
                .levels()
                .iter()
                .map(|l| l.heap_bytes())
                .sum::<usize>()
            + self.recent.capacity() * 16
    }

    /// Every stored `(id, fingerprint)`, by id.
    pub fn documents(&self) -> Vec<(u64, u64)> {
        self.snap.documents()
    }

    /// The fingerprint stored for `id`.
    pub fn get(&self, id: u64) -> Option<u64> {
        self.slot_of(&self.snap.top, id).map(|s| self.snap.fp(s))
    }

    /// Stores `id` with fingerprint `fp`; returns the fingerprint it replaced, if any.
    pub fn insert(&mut self, id: u64, fp: u64) -> Result<Option<u64>> {
        let mut old = None;
        self.write(|c, top| {
            old = c.remove_in(top, id);
            c.add_in(top, id, fp, true)
        })?;
        Ok(old)
    }

    /// Stores every `(id, fingerprint)`, in order (a later copy of an id wins): a few
    /// go through the top level like single inserts, more are sorted into the middle
    /// level in one pass per table (or into a rebuilt main part, when that is due).
    pub fn insert_bulk(&mut self, docs: &[(u64, u64)]) -> Result<()> {
        self.poll();
        if docs.len() <= top_cap(self.snap.main.len()) / 4 {
            return self.write(|c, top| {
                for &(id, fp) in docs {
                    c.remove_in(top, id);
                    c.add_in(top, id, fp, true)?;
                }
                Ok(())
            });
        }
        // Straight into a fold: the new slots need no top tables, and no state with only
        // some of them is ever published.
        let mut top = (*self.snap.top).clone();
        for &(id, fp) in docs {
            self.remove_in(&mut top, id);
            if let Err(e) = self.add_in(&mut top, id, fp, false) {
                self.recent = recent_of(&self.snap);
                return Err(e);
            }
        }
        self.fold(top);
        Ok(())
    }

    /// Removes `id`; returns its fingerprint, or `None` if it was not stored.
    pub fn remove(&mut self, id: u64) -> Option<u64> {
        let mut old = None;
        // Removal cannot fail.
        let _ = self.write(|c, top| {
            old = c.remove_in(top, id);
            Ok(())
        });
        old
    }

    /// Removes every id in `ids`; returns how many were stored.
    pub fn remove_bulk(&mut self, ids: &[u64]) -> usize {
        let mut n = 0;
        let _ = self.write(|c, top| {
            n = ids
                .iter()
                .filter(|&&id| c.remove_in(top, id).is_some())
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

    /// Runs `f` on a copy of the top level, then publishes it (folding it into the middle
    /// level when full). Readers keep the old snapshot until then; an error publishes
    /// nothing.
    fn write(&mut self, f: impl FnOnce(&mut Corpus, &mut Level) -> Result<()>) -> Result<()> {
        self.poll();
        let mut top = (*self.snap.top).clone();
        if let Err(e) = f(self, &mut top) {
            // Nothing of a failed call is kept: the writer's map returns to the snapshot's.
            self.recent = recent_of(&self.snap);
            return Err(e);
        }
        if top.weight() > top_cap(self.snap.main.len()) {
            self.fold(top);
        } else {
            self.publish(Snapshot {
                layout: Arc::clone(&self.snap.layout),
                main: Arc::clone(&self.snap.main),
                frozen: Arc::clone(&self.snap.frozen),
                mid: Arc::clone(&self.snap.mid),
                top: Arc::new(top),
            });
        }
        Ok(())
    }

    fn publish(&mut self, snap: Snapshot) {
        self.snap = Arc::new(snap);
        self.published.store(Arc::clone(&self.snap));
    }

    /// The live slot of `id`, with `top` as the top level so far.
    fn slot_of(&self, top: &Level, id: u64) -> Option<u32> {
        match self.recent.get(&id) {
            Some(&slot) => Some(slot),
            None => self
                .snap
                .main
                .position(id)
                .filter(|&p| !removed_in([&self.snap.frozen, &self.snap.mid, top], p)),
        }
    }

    /// Removes `id` in `top`; its fingerprint, if it was stored.
    fn remove_in(&mut self, top: &mut Level, id: u64) -> Option<u64> {
        let slot = self.slot_of(top, id)?;
        self.recent.remove(&id);
        top.removed.insert(slot);
        let snap = &self.snap;
        Some(fp_of(
            &snap.layout,
            &snap.main,
            [&snap.frozen, &snap.mid, top],
            slot,
        ))
    }

    /// Adds `id` with `fp` in a new slot of `top` (and its tables, with `index`).
    fn add_in(&mut self, top: &mut Level, id: u64, fp: u64, index: bool) -> Result<()> {
        let next = self.snap.slots() - self.snap.top.fps.len() + top.fps.len();
        let slot = u32::try_from(next).map_err(|_| Error::TooManyFingerprints {
            got: next + 1,
            max: u32::MAX as usize,
        })?;
        top.fps.push(fp);
        top.ids.push(id);
        if index {
            for (entries, table) in top.tables.iter_mut().zip(self.snap.layout.tables()) {
                let key = table.permute(fp);
                let at = entries.partition_point(|e| e.0 < key);
                entries.insert(at, (key, slot));
            }
        }
        self.recent.insert(id, slot);
        Ok(())
    }

    /// Folds `top` (the next top level, whose tables need not be filled) into the middle
    /// level and publishes the result with an empty top. When the middle level outgrows
    /// its share of the corpus, a rebuild of the main part starts instead: on another
    /// thread, with the folded level frozen in the snapshot until it is done. Slots keep
    /// their numbers: the top's follow the middle's.
    fn fold(&mut self, top: Level) {
        let snap = Arc::clone(&self.snap);
        let tables = snap.layout.tables().len();
        let due = snap.mid.weight() + top.weight() > mid_cap(snap.main.len());
        if due && self.pending.is_none() {
            if !(self.background && snap.main.len() > 0 && snap.frozen.fps.is_empty()) {
                // Nothing to overlap with (a first build), or asked to wait.
                let all = Snapshot {
                    layout: Arc::clone(&snap.layout),
                    main: Arc::clone(&snap.main),
                    frozen: Arc::clone(&snap.frozen),
                    mid: Arc::clone(&snap.mid),
                    top: Arc::new(top),
                };
                let main = build_main(&all);
                self.publish(Snapshot {
                    layout: Arc::clone(&snap.layout),
                    main: Arc::new(main),
                    frozen: Arc::new(Level::empty(tables)),
                    mid: Arc::new(Level::empty(tables)),
                    top: Arc::new(Level::empty(tables)),
                });
                // Every document is in the main part now, each in a new slot.
                self.recent = IdMap::default();
                return;
            }
            let frozen = folded(&snap, &top, true);
            self.publish(Snapshot {
                layout: Arc::clone(&snap.layout),
                main: Arc::clone(&snap.main),
                frozen: Arc::new(frozen),
                mid: Arc::new(Level::empty(tables)),
                top: Arc::new(Level::empty(tables)),
            });
            let base = Arc::clone(&self.snap);
            let job = Arc::clone(&base);
            let handle = std::thread::spawn(move || build_main(&job));
            self.pending = Some((handle, base));
            return;
        }
        // Past its cap while a rebuild runs, the middle level grows until that is done. A
        // rebuild keeps the thread pool busy with long tasks: fold on this thread then.
        let level = folded(&snap, &top, self.pending.is_none());
        self.publish(Snapshot {
            layout: Arc::clone(&snap.layout),
            main: Arc::clone(&snap.main),
            frozen: Arc::clone(&snap.frozen),
            mid: Arc::new(level),
            top: Arc::new(Level::empty(tables)),
        });
    }

    /// Installs the background rebuild if it is done.
    fn poll(&mut self) {
        if self
            .pending
            .as_ref()
            .is_some_and(|(handle, _)| handle.is_finished())
        {
            self.finish_rebuild();
        }
    }

    /// Installs the main part built by `handle` from `base` (whose main part and frozen
    /// level are still the current ones): the levels written since are renumbered after
    /// it, and their tombstones of older documents are moved to those documents' new
    /// positions.
    fn install(&mut self, handle: std::thread::JoinHandle<Main>, base: &Snapshot) {
        let main = match handle.join() {
            Ok(main) => main,
            // The build cannot fail short of a bug; should it, build again here.
            Err(_) => build_main(&self.snap),
        };
        let snap = Arc::clone(&self.snap);
        let old = snap.main.len() + snap.frozen.fps.len();
        let new = main.len();
        let moved = |slot: u32| -> Option<u32> {
            if (slot as usize) < old {
                // Live in `base` (a slot is removed once), so in the new main part.
                main.position(base.id(slot))
            } else {
                Some((slot as usize - old + new) as u32)
            }
        };
        let renumber = |level: &Level| Level {
            tables: level
                .tables
                .iter()
                .map(|t| {
                    t.iter()
                        .map(|&(key, slot)| (key, slot - old as u32 + new as u32))
                        .collect()
                })
                .collect(),
            dirs: level.dirs.clone(),
            fps: level.fps.clone(),
            ids: level.ids.clone(),
            removed: level.removed.iter().filter_map(|&s| moved(s)).collect(),
        };
        let (mid, top) = (renumber(&snap.mid), renumber(&snap.top));
        self.recent = self
            .recent
            .iter()
            .filter(|&(_, &slot)| slot as usize >= old)
            .map(|(&id, &slot)| (id, (slot as usize - old + new) as u32))
            .collect();
        self.publish(Snapshot {
            layout: Arc::clone(&snap.layout),
            main: Arc::new(main),
            frozen: Arc::new(Level::empty(snap.layout.tables().len())),
            mid: Arc::new(mid),
            top: Arc::new(top),
        });
    }
}

/// The middle level of `snap` with `top` (the next top level, whose tables need not be
/// filled) folded in: entries of removed documents are dropped, tombstones kept. The
/// tables are merged in parallel when `parallel`.
fn folded(snap: &Snapshot, top: &Level, parallel: bool) -> Level {
    let mid = &*snap.mid;
    let base = (snap.slots() - snap.top.fps.len()) as u32;
    let removed = |slot: u32| top.removed.contains(&slot) || mid.removed.contains(&slot);
    let tables: Vec<(&Table, &Vec<(u64, u32)>)> =
        snap.layout.tables().iter().zip(&mid.tables).collect();
    let merge = |(table, old): (&Table, &Vec<(u64, u32)>)| {
        let mut new: Vec<(u64, u32)> = top
            .fps
            .iter()
            .enumerate()
            .map(|(i, &fp)| (table.permute(fp), base + i as u32))
            .filter(|&(_, slot)| !removed(slot))
            .collect();
        new.sort_unstable();
        let mut out = Vec::with_capacity(old.len() + new.len());
        let mut old = old
            .iter()
            .copied()
            .filter(|&(_, slot)| !removed(slot))
            .peekable();
        for e in new {
            while let Some(o) = old.next_if(|o| *o < e) {
                out.push(o);
            }
            out.push(e);
        }
        out.extend(old);
        out
    };
    let merged = if parallel {
        crate::par::map(tables, merge)
    } else {
        tables.into_iter().map(merge).collect()
    };
    let dirs = merged
        .iter()
        .zip(snap.layout.tables())
        .map(|(entries, table)| level_dir(entries, table.leading_bits()))
        .collect();
    let mut level = Level {
        tables: merged,
        dirs,
        fps: mid.fps.clone(),
        ids: mid.ids.clone(),
        removed: mid.removed.clone(),
    };
    level.fps.extend(&top.fps);
    level.ids.extend(&top.ids);
    level.removed.extend(&top.removed);
    level
}

/// A main part of every live document of `snap`.
fn build_main(snap: &Snapshot) -> Main {
    let layout = &snap.layout;
    let mut fps = Vec::with_capacity(snap.len());
    let mut ids = Vec::with_capacity(snap.len());
    snap.for_each_live(|id, fp| {
        fps.push(fp);
        ids.push(id);
    });
    let tables: Vec<(usize, &Table)> = layout.tables().iter().enumerate().collect();
    let fps_ref = &fps;
    let mut built = crate::par::map(tables, |(t, table)| {
        let lead = table.leading_bits();
        if t > 0 {
            let mut keys: Vec<u64> = fps_ref.iter().map(|&fp| table.permute(fp)).collect();
            sort(&mut keys);
            return (Index::build(keys.len(), |i| keys[i], lead), Vec::new());
        }
        // The first table also gives the order of the ids.
        let mut entries: Vec<Entry> = fps_ref
            .iter()
            .enumerate()
            .map(|(s, &fp)| Entry {
                key: table.permute(fp),
                slot: s as u32,
            })
            .collect();
        sort(&mut entries);
        let order = entries.iter().map(|e| e.slot).collect();
        (Index::build(entries.len(), |i| entries[i].key, lead), order)
    });
    drop(fps);
    let order = std::mem::take(&mut built[0].1);
    let mut inverse = vec![0u64; order.len()];
    for (pos, &slot) in order.iter().enumerate() {
        inverse[slot as usize] = pos as u64;
    }
    let by_id = if ids.is_sorted() {
        // Slots in id order (ids inserted in order): the first table's order inverted.
        Packed::new(&inverse)
    } else {
        let mut by_id: Vec<Entry> = ids
            .iter()
            .enumerate()
            .map(|(slot, &id)| Entry {
                key: id,
                slot: inverse[slot] as u32,
            })
            .collect();
        sort(&mut by_id);
        let positions: Vec<u64> = by_id.iter().map(|e| u64::from(e.slot)).collect();
        Packed::new(&positions)
    };
    drop(inverse);
    let ids: Vec<u64> = order.iter().map(|&s| ids[s as usize]).collect();
    Main {
        indexes: built.into_iter().map(|(index, _)| index).collect(),
        ids: Packed::new(&ids),
        by_id,
    }
}

/// Radix-sorts `v` by key.
fn sort<T: Keyed + Default>(v: &mut [T]) {
    let mut scratch = vec![T::default(); v.len()];
    radix::sort(v, &mut scratch);
}

/// Where a slot lives: a position of the main part, or a level and an index in it.
enum Place<'a> {
    Main(usize),
    Level(&'a Level, usize),
}

/// Where `slot` lives, with `levels` above `main` (frozen, middle, top).
fn locate<'a>(main: &Main, levels: [&'a Level; 3], slot: u32) -> Place<'a> {
    let mut s = slot as usize;
    if s < main.len() {
        return Place::Main(s);
    }
    s -= main.len();
    for level in &levels[..2] {
        if s < level.fps.len() {
            return Place::Level(level, s);
        }
        s -= level.fps.len();
    }
    Place::Level(levels[2], s)
}

/// The fingerprint in `slot`.
fn fp_of(layout: &Layout, main: &Main, levels: [&Level; 3], slot: u32) -> u64 {
    match locate(main, levels, slot) {
        Place::Main(p) => layout.tables()[0].unpermute(main.indexes[0].key(p)),
        Place::Level(level, i) => level.fps[i],
    }
}

/// Whether `slot` was removed in any of `levels`.
#[inline]
fn removed_in(levels: [&Level; 3], slot: u32) -> bool {
    levels
        .iter()
        .any(|l| !l.removed.is_empty() && l.removed.contains(&slot))
}

/// The id → slot map of a snapshot's live documents in its levels.
fn recent_of(snap: &Snapshot) -> IdMap {
    (snap.main.len()..snap.slots())
        .map(|s| s as u32)
        .filter(|&s| !snap.removed(s))
        .map(|s| (snap.id(s), s))
        .collect()
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
