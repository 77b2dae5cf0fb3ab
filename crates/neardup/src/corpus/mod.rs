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
//!
//! The levels, snapshots, folds and rebuilds are the levelled engine's (`engine.rs`),
//! which [`BandIndex`] runs on too; what is the corpus's own is its `Scheme`: a document
//! is a fingerprint, a table a permutation, and the main part and the queries above.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::batch::radix::{self, Keyed};
use crate::error::{Error, Result};
use crate::tables::{Blocks, Layout, Table};

mod bands;
mod documents;
mod engine;
mod level;
mod main_part;
mod raw;

pub use bands::{BandIndex, BandIndexReader, BandSnapshot, Candidates};
pub use documents::Documents;

use engine::{Engine, Level, Place, Scheme, Snap, LEVELS};
use level::{level_dir, run_level};
use main_part::{Index, Main, Packed, Wide, IMPLIED};

/// Modelled cost of a table probe (a directory read and a cache miss into the run).
const PROBE: f64 = 40.0;
/// Modelled cost of checking one candidate.
const CHECK: f64 = 2.0;
/// Most tables the corpus planner considers: every table holds every fingerprint.
const MAX_TABLES: u128 = 32;
/// Most tables of a layout chosen by the caller. Every table holds every fingerprint
/// (about 16 bytes each), so memory is tables × 16 bytes a fingerprint: simhash-py's old
/// `Corpus(20, 16)`, 4,845 tables, costs 78 KB a fingerprint and is built; 64 blocks at
/// distance 3 (41,664 tables, 666 KB a fingerprint) is refused.
const MAX_INDEX_TABLES: u128 = 10_000;
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

/// `2 ·` the batch an offline load writes at a time (50,000), about: see [`load_mid_cap`].
const LOAD_BATCHES: u64 = 1 << 17;

/// Documents and removals the middle level takes over a main part of `main` documents in
/// an index rebuilt in place (an offline load, written in batches of about 50,000), where
/// no reader waits on a fold. Each batch is folded into the middle level (a merge of
/// the `mid / 2` entries it holds on average), and the main part is rebuilt each time the
/// middle level is full (a merge of all `main`, once every `mid` documents): per loaded
/// document `mid / (2 · batch)` entries merged by folds and `main / mid` by rebuilds,
/// fewest at `mid = sqrt(2 · batch · main)`. A document loaded into 10M is merged about
/// 27 times with [`mid_cap`]'s 32nd (a fifth of the load's CPU), 13 times with this.
/// From about 134M documents on (`main / 32` is then the balance), [`mid_cap`] is the
/// larger.
fn load_mid_cap(main: usize) -> usize {
    let balanced = (main as u64).saturating_mul(LOAD_BATCHES).isqrt();
    mid_cap(main).max(usize::try_from(balanced).unwrap_or(usize::MAX))
}

/// The middle level's cap over a main part of `main` documents: [`load_mid_cap`] in an
/// index rebuilt in place, else [`mid_cap`].
fn middle_cap(main: usize, in_place: bool) -> usize {
    if in_place {
        load_mid_cap(main)
    } else {
        mid_cap(main)
    }
}

/// Documents and removals the top level takes before it is folded. Each write copies the
/// top level, half of it on average, and is merged by folds about `sqrt(mid / top)` times
/// a table (the low level's cap the geometric mean of the two); a merge costs about five
/// times a copy an entry (`examples/write_cost.rs`), so the sum is least near
/// `3 · cbrt(mid)`: 430 at 100M documents, 256 (the least) up to 19M.
fn top_cap(main: usize) -> usize {
    (3.0 * (mid_cap(main) as f64).cbrt()).clamp(256.0, 4096.0) as usize
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
/// The corpus's part of the levelled engine: a document is its fingerprint, and the key of
/// table `t` is the fingerprint permuted by the layout's table `t`. Writes fold the top
/// level themselves: a fold of a few thousand fingerprints' tables is short.
#[derive(Clone, Debug)]
struct Fingerprints {
    layout: Arc<Layout>,
}

impl Scheme for Fingerprints {
    type Doc = u64;
    type Key = u64;
    type Main = Main;

    const MAX_SLOT: usize = u32::MAX as usize;
    const FOLD_APART: bool = false;

    fn tables(&self) -> usize {
        self.layout.tables().len()
    }

    #[inline]
    fn key(&self, table: usize, fp: &u64) -> u64 {
        self.layout.tables()[table].permute(*fp)
    }

    fn empty_main(&self) -> Main {
        Main {
            indexes: self
                .layout
                .tables()
                .iter()
                .map(|t| Index::build(0, |_| 0, t.leading_bits()))
                .collect(),
            ids: Packed::default(),
            by_id: Packed::default(),
        }
    }

    fn build(&self, snap: &Snapshot) -> Main {
        build_main(snap)
    }

    fn index(&self, level: &mut Level<Self>) {
        level.dirs = level
            .tables
            .iter()
            .zip(self.layout.tables())
            .map(|(entries, table)| level_dir(entries, table.leading_bits()))
            .collect();
    }
}

/// One consistent state of the corpus; queries run on it, never on anything mutable.
type Snapshot = Snap<Fingerprints>;

impl Snapshot {
    fn layout(&self) -> &Layout {
        &self.scheme.layout
    }

    fn fp(&self, slot: u32) -> u64 {
        match self.locate(slot) {
            Place::Main(p) => self.layout().tables()[0].unpermute(self.main.indexes[0].key(p)),
            Place::Level(level, i) => level.docs[i],
        }
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
            let table = &self.layout().tables()[0];
            first.for_each(|pos, key| {
                if !self.removed(pos as u32) {
                    f(self.main.ids.get(pos), table.unpermute(key));
                }
            });
        }
        let mut base = self.main.len();
        for level in self.levels() {
            for (i, (&fp, &id)) in level.docs.iter().zip(&level.ids).enumerate() {
                if !self.removed((base + i) as u32) {
                    f(id, fp);
                }
            }
            base += level.docs.len();
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
        let mut out = Vec::with_capacity(fps.len());
        for block in fps.chunks(BULK_BLOCK) {
            let (starts, mut hits) = self.bulk_matches(block);
            out.extend(starts.windows(2).map(|w| {
                let mine = &mut hits[w[0] as usize..w[1] as usize];
                mine.sort_unstable_by_key(|&(id, d)| (d, id));
                mine.to_vec()
            }));
        }
        out
    }

    fn find_first_bulk(&self, fps: &[u64]) -> Vec<Option<(u64, u32)>> {
        let mut out = Vec::with_capacity(fps.len());
        for block in fps.chunks(BULK_BLOCK) {
            let (starts, hits) = self.bulk_matches(block);
            out.extend(starts.windows(2).map(|w| {
                hits[w[0] as usize..w[1] as usize]
                    .iter()
                    .copied()
                    .min_by_key(|&(id, d)| (d, id))
            }));
        }
        out
    }

    /// Every match `(id, distance)` of `fps`, grouped by query: query `i`'s are
    /// `hits[starts[i]..starts[i + 1]]`, in no particular order. The probes of
    /// [`Snapshot::probe_order`] run in chunks, in parallel, through
    /// [`Snapshot::each_match_pipelined`]; their matches are then placed by a counting
    /// sort on the query, so that no query's list is touched at random.
    fn bulk_matches(&self, fps: &[u64]) -> (Vec<u32>, Vec<(u64, u32)>) {
        const CHUNK: usize = 4096;
        let order = self.probe_order(fps);
        let work: Vec<(usize, &[u32])> = order
            .chunks(fps.len().max(1))
            .enumerate()
            .flat_map(|(t, probes)| probes.chunks(CHUNK).map(move |c| (t, c)))
            .collect();
        let found = crate::par::map(work, |(t, probes)| {
            let mut hits = Vec::new();
            self.each_match_pipelined(fps, t, probes, |qi, id, d| {
                hits.push((qi as u32, id, d));
            });
            hits
        });
        let mut starts = vec![0u32; fps.len() + 1];
        for &(qi, _, _) in found.iter().flatten() {
            starts[qi as usize + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut at = starts.clone();
        let mut hits = vec![(0u64, 0u32); starts[fps.len()] as usize];
        for &(qi, id, d) in found.iter().flatten() {
            let slot = &mut at[qi as usize];
            hits[*slot as usize] = (id, d);
            *slot += 1;
        }
        (starts, hits)
    }

    /// The queries of `fps` as probed table by table (`fps.len()` indexes a table),
    /// within a table by their leading bits there: in the order of the table's keys. A
    /// bulk then reads each table's keys front to back, where the hardware's prefetcher
    /// streams them, instead of one unrelated cache miss a probe. A counting sort on as
    /// many leading bits as there are queries to spread (the order within a bucket does
    /// not matter). Written here rather than with `radix::partition`, whose keys would
    /// carry the query beside the bits (8 bytes a probe, then a copy out) and which maps
    /// each key twice: bulks were 20% slower with it (249–263 against 208–212 ns a query,
    /// `examples/index_queries.rs`, four alternating runs).
    fn probe_order(&self, fps: &[u64]) -> Vec<u32> {
        let tables = self.layout().tables();
        let bits = (usize::BITS - fps.len().leading_zeros()).clamp(1, 16);
        let mut order = vec![0u32; fps.len() * tables.len()];
        let mut counts = vec![0u32; (1 << bits) + 1];
        let mut top = vec![0u32; fps.len()];
        for (table, out) in tables.iter().zip(order.chunks_mut(fps.len().max(1))) {
            counts.fill(0);
            for (b, &fp) in top.iter_mut().zip(fps) {
                *b = (table.permute(fp) >> (64 - bits)) as u32;
                counts[*b as usize + 1] += 1;
            }
            for i in 1..counts.len() {
                counts[i] += counts[i - 1];
            }
            for (qi, &b) in (0u32..).zip(&top) {
                let at = &mut counts[b as usize];
                out[*at as usize] = qi;
                *at += 1;
            }
        }
        order
    }

    /// The levels holding entries, which queries search besides the main part (usually
    /// none, or the top one), and how many there are.
    fn busy_levels(&self) -> ([&Level<Fingerprints>; LEVELS], usize) {
        let all = self.levels();
        let mut busy = [all[0]; LEVELS];
        let mut n = 0;
        for level in all {
            if level.tables.iter().any(|t| !t.is_empty()) {
                busy[n] = level;
                n += 1;
            }
        }
        (busy, n)
    }

    /// Calls `f(query index, id, distance)` for every match of every query. Probes (a
    /// query in a table) go in groups: permute and touch each directory bucket, then read
    /// each range (prefetching its keys), then scan, so the cache misses of a group
    /// overlap instead of following one another.
    fn each_match_many(&self, fps: &[u64], mut f: impl FnMut(usize, u64, u32)) {
        const GROUP: usize = 16;
        let k = self.layout().distance();
        let tables = self.layout().tables();
        let main = &*self.main;
        let indexes = &main.indexes;
        let (busy, n_busy) = self.busy_levels();
        let busy = &busy[..n_busy];
        let wide = Wide::for_distance(k);
        let live = |slot: usize| !self.removed(slot as u32);
        let t_count = tables.len();
        let total = fps.len() * t_count;
        let mut probe = [(0usize, 0usize, 0u64, 0usize); GROUP];
        let mut ranges = [(0usize, 0usize); GROUP];
        // The query and table of the group's first probe, carried from group to group.
        let (mut qi, mut t) = (0, 0);
        for start in (0..total).step_by(GROUP) {
            let end = (start + GROUP).min(total);
            for slot in &mut probe[..end - start] {
                let q = tables[t].permute(fps[qi]);
                let b = indexes[t].bucket(q);
                indexes[t].dir.prefetch(b);
                *slot = (qi, t, q, b);
                t += 1;
                if t == t_count {
                    (qi, t) = (qi + 1, 0);
                }
            }
            let n = end - start;
            for (&(_, t, _, b), range) in probe[..n].iter().zip(ranges.iter_mut()) {
                *range = indexes[t].range(b);
            }
            for (&(qi, t, q, b), &range) in probe[..n].iter().zip(&ranges) {
                let (table, mask) = (&tables[t], tables[t].search_mask());
                if t == 0 {
                    // The first table holds the ids: its positions are the documents.
                    indexes[0].run(q, mask, k, b, range, wide, |diff, pos| {
                        if table.is_first_for(diff) && live(pos) {
                            f(qi, main.ids.get(pos), diff.count_ones());
                        }
                    });
                } else {
                    // Another table sees fingerprints: each distinct one that this table
                    // reports is looked up in the first (equal keys are adjacent).
                    let mut last = None;
                    indexes[t].run(q, mask, k, b, range, wide, |diff, _| {
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
                for level in busy {
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

    /// [`Snapshot::each_match_many`] for the queries `probes` (indexes into `fps`) in
    /// table `t`, as a pipeline of stages a group of probes apart, so that every memory access of a query has a group's
    /// work to arrive in before it is needed: the directory lines of the next probes are
    /// asked for, then their keys; the probes before are scanned; the matches of a later
    /// table find their fingerprint in the first table (its directory line, then its
    /// keys) and every match its id (the line holding it), each a stage later.
    fn each_match_pipelined(
        &self,
        fps: &[u64],
        t: usize,
        probes: &[u32],
        mut f: impl FnMut(usize, u64, u32),
    ) {
        const GROUP: usize = 8;
        let k = self.layout().distance();
        let tables = self.layout().tables();
        let main = &*self.main;
        let indexes = &main.indexes;
        let (busy, n_busy) = self.busy_levels();
        let busy = &busy[..n_busy];
        let wide = Wide::for_distance(k);
        let live = |slot: usize| !self.removed(slot as u32);
        let total = probes.len();
        // (query, table, permuted query, bucket, its range): probes whose directory line
        // was asked for (`dir`), and whose keys were (`keys`).
        let mut dir = [(0usize, 0usize, 0u64, 0usize); GROUP];
        let mut keys = [(0usize, 0usize, 0u64, 0usize, (0usize, 0usize)); GROUP];
        let (mut n_dir, mut n_keys) = (0, 0);
        // Matches: (query, distance, position in the first table) whose id's line was
        // asked for; (query, distance, first table's key, its bucket) whose directory
        // line was, then with its range, whose keys were.
        let mut found: Vec<(usize, u32, usize)> = Vec::new();
        let mut found_next: Vec<(usize, u32, usize)> = Vec::new();
        let mut look_dir: Vec<(usize, u32, u64, usize)> = Vec::new();
        let mut look_keys: Vec<Lookup> = Vec::new();
        let mut issued = 0;
        loop {
            for &(qi, d, pos) in &found {
                f(qi, main.ids.get(pos), d);
            }
            found.clear();
            for &(qi, d, key, b, range) in &look_keys {
                for pos in indexes[0].exact_in(key, b, range) {
                    if live(pos) {
                        main.ids.prefetch_at(pos);
                        found_next.push((qi, d, pos));
                    }
                }
            }
            look_keys.clear();
            for &(qi, d, key, b) in &look_dir {
                look_keys.push((qi, d, key, b, indexes[0].range(b)));
            }
            look_dir.clear();
            for &(qi, t, q, b, range) in &keys[..n_keys] {
                let (table, mask) = (&tables[t], tables[t].search_mask());
                if t == 0 {
                    indexes[0].run(q, mask, k, b, range, wide, |diff, pos| {
                        if table.is_first_for(diff) && live(pos) {
                            main.ids.prefetch_at(pos);
                            found_next.push((qi, diff.count_ones(), pos));
                        }
                    });
                } else {
                    let mut last = None;
                    indexes[t].run(q, mask, k, b, range, wide, |diff, _| {
                        if last == Some(diff) || !table.is_first_for(diff) {
                            return;
                        }
                        last = Some(diff);
                        let key = tables[0].permute(table.unpermute(q ^ diff));
                        let b0 = indexes[0].bucket(key);
                        indexes[0].dir.prefetch(b0);
                        look_dir.push((qi, diff.count_ones(), key, b0));
                    });
                }
                for level in busy {
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
            for (slot, &(qi, t, q, b)) in keys.iter_mut().zip(&dir[..n_dir]) {
                *slot = (qi, t, q, b, indexes[t].range(b));
            }
            n_keys = n_dir;
            n_dir = GROUP.min(total - issued);
            for (slot, &qi) in dir[..n_dir].iter_mut().zip(&probes[issued..]) {
                let qi = qi as usize;
                let q = tables[t].permute(fps[qi]);
                let b = indexes[t].bucket(q);
                indexes[t].dir.prefetch(b);
                *slot = (qi, t, q, b);
            }
            issued += n_dir;
            std::mem::swap(&mut found, &mut found_next);
            if n_dir + n_keys == 0
                && found.is_empty()
                && look_dir.is_empty()
                && look_keys.is_empty()
            {
                break;
            }
        }
    }
}

/// Queries a bulk search orders at once: the order and the matches of a block take about
/// 30 bytes a query, so a bulk of any size needs at most a few tens of megabytes beside
/// its answer, and a block of a million still fills the buckets a table's directory has.
const BULK_BLOCK: usize = 1 << 20;

/// A match of a later table whose fingerprint is being found in the first: the query, the
/// distance, the first table's key, its bucket and the bucket's range.
type Lookup = (usize, u32, u64, usize, (usize, usize));

/// An in-memory corpus of `(id, fingerprint)` documents with near-duplicate queries.
///
/// Ids are the caller's `u64` document ids. Inserting an id that is present replaces its
/// fingerprint. Results list each matching document once, nearest first (then by id).
/// The `Corpus` is the writer; [`Corpus::reader`] gives query handles for other threads,
/// which see each write as soon as it returns and never wait for a merge.
pub struct Corpus {
    engine: Engine<Fingerprints>,
}

impl std::fmt::Debug for Corpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Corpus")
            .field("layout", self.layout())
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl Clone for Corpus {
    /// An independent copy: its writes are not seen by this corpus's readers.
    fn clone(&self) -> Corpus {
        Corpus {
            engine: self.engine.clone(),
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
        if crate::tables::num_tables(layout.blocks(), distance) > MAX_INDEX_TABLES {
            return Err(Error::TooManyTables {
                blocks: layout.blocks(),
                distance,
                tables: crate::tables::num_tables(layout.blocks(), distance),
                limit: MAX_INDEX_TABLES as usize,
            });
        }
        let scheme = Fingerprints {
            layout: Arc::new(layout),
        };
        let main = scheme.empty_main();
        Ok(Corpus {
            engine: Engine::new(Snap::of_main(scheme, main)),
        })
    }

    /// Whether rebuilds of the main part run on another thread (the default), at a lower
    /// priority (nice [`crate::LOWER_NICE`] on Linux): the write that starts one returns
    /// at once, and later writes install the result when it is ready. Off, that write
    /// waits for the rebuild.
    pub fn background_rebuilds(mut self, on: bool) -> Corpus {
        self.engine.set_background(on);
        self
    }

    /// Waits for a rebuild running in the background, if any, and installs it.
    pub fn finish_rebuild(&mut self) {
        self.engine.finish_rebuild();
    }

    /// A query handle for other threads.
    pub fn reader(&self) -> CorpusReader {
        CorpusReader {
            published: self.engine.published(),
        }
    }

    /// The layout in use.
    pub fn layout(&self) -> &Layout {
        self.engine.snap.layout()
    }

    /// Documents stored.
    pub fn len(&self) -> usize {
        self.engine.snap.len()
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of memory the corpus holds for its tables, ids and recent changes (not
    /// counting the allocator's own overhead).
    pub fn heap_bytes(&self) -> usize {
        self.engine.heap_bytes()
    }

    /// Every stored `(id, fingerprint)`, by id.
    pub fn documents(&self) -> Vec<(u64, u64)> {
        self.engine.snap.documents()
    }

    /// The fingerprint stored for `id`.
    pub fn get(&self, id: u64) -> Option<u64> {
        let e = &self.engine;
        e.slot_of(&e.snap.top, id).map(|s| e.snap.fp(s))
    }

    /// Stores `id` with fingerprint `fp`; returns the fingerprint it replaced, if any.
    pub fn insert(&mut self, id: u64, fp: u64) -> Result<Option<u64>> {
        let mut old = None;
        self.engine.write(|e, top| {
            old = remove_in(e, top, id);
            e.add_in(top, id, &fp, true)
        })?;
        Ok(old)
    }

    /// Stores every `(id, fingerprint)`, in order (a later copy of an id wins): a few
    /// go through the top level like single inserts, more are sorted into the middle
    /// level in one pass per table (or into a rebuilt main part, when that is due).
    pub fn insert_bulk(&mut self, docs: &[(u64, u64)]) -> Result<()> {
        self.engine.insert_bulk(docs)
    }

    /// Removes `id`; returns its fingerprint, or `None` if it was not stored.
    pub fn remove(&mut self, id: u64) -> Option<u64> {
        let mut old = None;
        // Removal cannot fail.
        let _ = self.engine.write(|e, top| {
            old = remove_in(e, top, id);
            Ok(())
        });
        old
    }

    /// Removes every id in `ids`; returns how many were stored.
    pub fn remove_bulk(&mut self, ids: &[u64]) -> usize {
        let mut n = 0;
        let _ = self.engine.write(|e, top| {
            n = ids
                .iter()
                .filter(|&&id| e.remove_in(top, id).is_some())
                .count();
            Ok(())
        });
        n
    }
    /// Every stored document within the distance of `fp`, as `(id, distance)`, each once,
    /// by distance then id.
    pub fn find_all(&self, fp: u64) -> Vec<(u64, u32)> {
        self.engine.snap.find_all(fp)
    }

    /// The nearest stored document within the distance of `fp` (the smallest id among
    /// equals), or `None`.
    pub fn find_first(&self, fp: u64) -> Option<(u64, u32)> {
        self.engine.snap.find_first(fp)
    }

    /// [`Corpus::find_all`] for each query, in parallel.
    pub fn find_all_bulk(&self, fps: &[u64]) -> Vec<Vec<(u64, u32)>> {
        self.engine.snap.find_all_bulk(fps)
    }

    /// [`Corpus::find_first`] for each query, in parallel.
    pub fn find_first_bulk(&self, fps: &[u64]) -> Vec<Option<(u64, u32)>> {
        self.engine.snap.find_first_bulk(fps)
    }
}

/// Removes `id` in `top`; its fingerprint, if it was stored.
fn remove_in(e: &mut Engine<Fingerprints>, top: &mut Level<Fingerprints>, id: u64) -> Option<u64> {
    let slot = e.remove_in(top, id)?;
    Some(match e.locate(top, slot) {
        Place::Main(p) => {
            let main = &e.snap.main;
            e.snap.layout().tables()[0].unpermute(main.indexes[0].key(p))
        }
        Place::Level(level, i) => level.docs[i],
    })
}

/// A main part of every live document of `snap`.
fn build_main(snap: &Snapshot) -> Main {
    let layout = snap.layout();
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

    /// Entries merged per document by folds and rebuilds when `n` documents are written
    /// in batches of `batch` into an index whose middle level takes `cap(main)`.
    fn merged_per_document(n: usize, batch: usize, cap: impl Fn(usize) -> usize) -> f64 {
        let (mut main, mut mid, mut merged) = (0usize, 0usize, 0usize);
        for _ in 0..n / batch {
            if mid + batch > cap(main) {
                merged += main + mid + batch;
                (main, mid) = (main + mid + batch, 0);
            } else {
                merged += mid + batch;
                mid += batch;
            }
        }
        merged as f64 / n as f64
    }

    /// A load's middle level merges each document about as few times as the best fixed
    /// share of the main part would, at each size, and far fewer than a service's 32nd.
    #[test]
    fn a_loads_middle_level_balances_folds_and_rebuilds() {
        let batch = 50_000;
        for n in [1_000_000, 10_000_000, 100_000_000] {
            let load = merged_per_document(n, batch, load_mid_cap);
            let best = (2..=64)
                .map(|share| merged_per_document(n, batch, |main| (main / share).max(MID_MIN)))
                .fold(f64::INFINITY, f64::min);
            let serving = merged_per_document(n, batch, mid_cap);
            assert!(load <= 1.05 * best, "{n}: {load:.1} merges, best {best:.1}");
            assert!(load <= serving, "{n}: {load:.1} against {serving:.1}");
            if n <= 10_000_000 {
                assert!(load <= serving / 2.0, "{n}: {load:.1} against {serving:.1}");
            }
        }
        for main in [0, 1 << 20, 1 << 27, 1 << 30] {
            assert!(load_mid_cap(main) >= mid_cap(main));
        }
    }
}
