//! Batch matching: every near-duplicate pair, and clusters, among a whole set of
//! fingerprints.
//!
//! Per table of the [`Layout`]: permute every fingerprint, radix-sort on the leading bits
//! only, and compare the fingerprints inside each run of equal leading bits. A pair within
//! the distance shows up in every table whose leading blocks avoid the blocks where it
//! differs; it is reported only by the first of them (decided from the pair's XOR alone),
//! so each pair comes out once without a global set of seen pairs.
//!
//! Exact duplicates are collapsed before matching ([`Distinct`], [`Indexed`]): a set made
//! of a million copies of one fingerprint is one node, not half a trillion pairs. Memory is
//! the distinct fingerprints, one permuted copy and one radix scratch buffer (24 bytes per
//! fingerprint), whatever the number of tables or threads; pairs stream to a sink.

mod bands;
mod dedup;
pub mod planner;
pub(crate) mod radix;
mod union_find;
mod wide;

use std::sync::Arc;

pub use crate::decide::{Keep, Rule};
use crate::error::{Error, Result};
/// Moved to [`crate::hamming::wide_distance`]; kept here for callers of the old path.
pub use crate::hamming::wide_distance;
use crate::tables::{Layout, Levels, PermuteJob, Table};
pub use bands::{band_candidates, band_runs, Crowded, RUN_LEADERS};
pub use dedup::{
    assign, assign_against, candidates, decide_exactly, decide_on_sets, dedup, measure, near_edges,
    near_nodes, near_threshold, resolve, resolve_against, resolve_verified, resolve_with,
    settle_exactly, verify, Candidates, Cluster, Dedup, Edge, Leading, Link, Member, Options,
    Outside, Pair, Rank, Source, EXACT_MARGIN,
};
use radix::Keyed;
pub use union_find::UnionFind;
pub use wide::WideMatcher;

/// The layout for batch matching of `n` fingerprints at `distance`: `blocks` as given
/// ([`Blocks`] or two-level [`Levels`]), or the [`planner`]'s choice for `auto`.
pub fn layout(blocks: impl Into<Levels>, n: usize, distance: u32) -> Result<Layout> {
    match blocks.into() {
        Levels::One(m) => Layout::new(m, distance),
        Levels::Two(a, b) => Layout::two_level(a, b, distance),
        Levels::Auto => match planner::plan(n, distance)?.layout {
            Levels::Two(a, b) => Layout::two_level(a, b, distance),
            Levels::One(m) => Layout::new(m, distance),
            Levels::Auto => Layout::new(planner::plan_single(n, distance)?.blocks, distance),
        },
    }
}

/// How many threads batch matching uses (1 without the `rayon` feature).
pub fn threads() -> usize {
    crate::par::threads()
}

/// A set of distinct fingerprints, sorted: the input of seomoz-style matching, where
/// results are fingerprint values and exact duplicates are not pairs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Distinct {
    values: Vec<u64>,
}

impl Distinct {
    /// Sorts and deduplicates `fps` in place (radix sort; peak memory twice the input).
    pub fn from_vec(fps: Vec<u64>) -> Result<Distinct> {
        Distinct::build(fps, |_| {})
    }

    /// As [`Distinct::from_vec`], also returning every value that `fps` holds more than
    /// once, in increasing order.
    pub fn from_vec_with_repeats(fps: Vec<u64>) -> Result<(Distinct, Vec<u64>)> {
        let mut repeats = Vec::new();
        let set = Distinct::build(fps, |sorted| {
            repeats.extend(sorted.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]));
            repeats.dedup();
        })?;
        Ok((set, repeats))
    }

    fn build(mut input: Vec<u64>, sorted: impl FnOnce(&[u64])) -> Result<Distinct> {
        let mut fps = vec![0u64; input.len()];
        radix::sort_into(&mut input, &mut fps);
        drop(input);
        sorted(&fps);
        fps.dedup();
        if fps.len() < fps.capacity() / 2 {
            fps.shrink_to_fit();
        }
        check_count(fps.len())?;
        Ok(Distinct { values: fps })
    }

    /// The distinct values of `fps`, which is only read (a mapped file of a billion
    /// fingerprints sorts into one array of its size, without a copy of it).
    pub fn from_slice(fps: &[u64]) -> Result<Distinct> {
        Distinct::from_slice_sorted(fps, |_| {})
    }

    /// As [`Distinct::from_slice`], also returning every value that `fps` holds more than
    /// once, in increasing order.
    pub fn from_slice_with_repeats(fps: &[u64]) -> Result<(Distinct, Vec<u64>)> {
        let mut repeats = Vec::new();
        let set = Distinct::from_slice_sorted(fps, |sorted| {
            repeats.extend(sorted.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]));
            repeats.dedup();
        })?;
        Ok((set, repeats))
    }

    fn from_slice_sorted(fps: &[u64], sorted_values: impl FnOnce(&[u64])) -> Result<Distinct> {
        let mut sorted = vec![0u64; fps.len()];
        radix::sort_from(fps, &mut sorted);
        sorted_values(&sorted);
        sorted.dedup();
        if sorted.len() < sorted.capacity() / 2 {
            sorted.shrink_to_fit();
        }
        check_count(sorted.len())?;
        Ok(Distinct { values: sorted })
    }

    /// The fingerprints, in increasing order.
    pub fn as_slice(&self) -> &[u64] {
        &self.values
    }

    /// How many distinct fingerprints.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    fn index_of(&self, fp: u64) -> u64 {
        let i = self.values.partition_point(|&v| v < fp);
        debug_assert_eq!(self.values.get(i), Some(&fp));
        i as u64
    }
}

fn check_count(n: usize) -> Result<()> {
    if n > u32::MAX as usize {
        return Err(Error::TooManyFingerprints {
            got: n,
            max: u32::MAX as usize,
        });
    }
    Ok(())
}

/// Fingerprints by input position (document order), grouped by value: the input of
/// document deduplication, where results are positions and exact duplicates are pairs at
/// distance 0.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Indexed {
    distinct: Distinct,
    /// Positions of node `i` are `positions[starts[i]..starts[i + 1]]`, increasing.
    starts: Vec<u32>,
    positions: Vec<u32>,
}

#[derive(Clone, Copy)]
struct Item {
    value: u64,
    position: u32,
}

impl Keyed for Item {
    #[inline]
    fn key(&self) -> u64 {
        self.value
    }
}

impl Indexed {
    /// Groups `fps` (position `i` is `fps[i]`) by value.
    pub fn new(fps: &[u64]) -> Result<Indexed> {
        check_count(fps.len())?;
        let mut items: Vec<Item> = fps
            .iter()
            .zip(0u32..)
            .map(|(&value, position)| Item { value, position })
            .collect();
        let mut sorted = items.clone();
        radix::sort_into(&mut items, &mut sorted);
        let items = sorted;
        let mut values = Vec::new();
        let mut starts = Vec::new();
        let mut positions = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            if i == 0 || items[i - 1].value != item.value {
                values.push(item.value);
                starts.push(i as u32);
            }
            positions.push(item.position);
        }
        starts.push(items.len() as u32);
        Ok(Indexed {
            distinct: Distinct { values },
            starts,
            positions,
        })
    }

    /// How many fingerprints (positions).
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// The distinct values.
    pub fn distinct(&self) -> &Distinct {
        &self.distinct
    }

    /// The positions holding the `node`-th distinct value, increasing.
    pub fn positions(&self, node: usize) -> &[u32] {
        &self.positions[self.starts[node] as usize..self.starts[node + 1] as usize]
    }
}

/// A pair of input positions within the distance, `a < b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IndexedPair {
    /// The smaller position.
    pub a: usize,
    /// The larger position.
    pub b: usize,
    /// Hamming distance of their fingerprints (0 for exact duplicates).
    pub distance: u32,
}

/// Which part of the work a [`Progress`] report is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Matching: `done` of `total` tables scanned.
    Tables,
}

/// A progress report: `done` of `total` units of `phase`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// What is being counted.
    pub phase: Phase,
    /// Units finished.
    pub done: u64,
    /// Units in all.
    pub total: u64,
}

type ProgressFn = dyn Fn(Progress) + Send + Sync;

/// Finds near-duplicates among a whole set of fingerprints with one [`Layout`].
#[derive(Clone)]
pub struct Matcher {
    layout: Layout,
    progress: Option<Arc<ProgressFn>>,
    /// Keys a table holds at once; `None`: all of them.
    pass_keys: Option<usize>,
}

impl std::fmt::Debug for Matcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Matcher")
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

impl Matcher {
    /// A matcher for `layout`'s distance.
    pub fn new(layout: Layout) -> Matcher {
        Matcher {
            layout,
            progress: None,
            pass_keys: None,
        }
    }

    /// Holds at most `keys` permuted keys of a table at once (16 bytes each, with their
    /// scratch), scanning each table in passes over consecutive ranges of its buckets
    /// when the set has more: the same pairs in the same order, for memory that does not
    /// grow with the set beyond its own 8 bytes a fingerprint.
    pub fn with_pass_keys(mut self, keys: usize) -> Matcher {
        self.pass_keys = Some(keys.max(1));
        self
    }

    /// Calls `f` as the work advances (from worker threads; keep it cheap).
    pub fn on_progress(mut self, f: impl Fn(Progress) + Send + Sync + 'static) -> Matcher {
        self.progress = Some(Arc::new(f));
        self
    }

    /// The layout in use.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Every unordered pair of distinct fingerprints within the distance, once each, as
    /// `(a, b)` with `a < b`, in a deterministic order. Stops at the first error of `sink`.
    pub fn find_all<E>(
        &self,
        set: &Distinct,
        mut sink: impl FnMut(u64, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        self.pairs(set, Ids::Values, |pairs| {
            pairs.iter().try_for_each(|&(a, b)| sink(a, b))
        })
    }

    /// Connected components of the match graph with two or more fingerprints: each in
    /// increasing order, ordered by their smallest fingerprint.
    pub fn clusters(&self, set: &Distinct) -> Vec<Vec<u64>> {
        let mut uf = UnionFind::new(set.len());
        self.union_pairs(set, &mut uf);
        let v = set.as_slice();
        uf.sets(|size, _| size >= 2)
            .into_iter()
            .map(|c| c.into_iter().map(|i| v[i as usize]).collect())
            .collect()
    }

    /// Every pair of positions whose fingerprints are within the distance, exact
    /// duplicates included (distance 0), once each. Stops at the first error of `sink`.
    ///
    /// The output itself is quadratic in the size of a group of identical fingerprints;
    /// use [`Matcher::clusters_indexed`] when components are what is wanted.
    pub fn find_all_indexed<E>(
        &self,
        fps: &Indexed,
        mut sink: impl FnMut(IndexedPair) -> Result<(), E>,
    ) -> Result<(), E> {
        for node in 0..fps.distinct.len() {
            let p = fps.positions(node);
            for (i, &a) in p.iter().enumerate() {
                for &b in &p[i + 1..] {
                    sink(IndexedPair {
                        a: a as usize,
                        b: b as usize,
                        distance: 0,
                    })?;
                }
            }
        }
        let v = fps.distinct.as_slice();
        self.pairs(&fps.distinct, Ids::Indices, |pairs| {
            for &(x, y) in pairs {
                let distance = crate::hamming::distance(v[x as usize], v[y as usize]);
                for &a in fps.positions(x as usize) {
                    for &b in fps.positions(y as usize) {
                        let (a, b) = (a.min(b) as usize, a.max(b) as usize);
                        sink(IndexedPair { a, b, distance })?;
                    }
                }
            }
            Ok(())
        })
    }

    /// Connected components of positions (exact duplicates joined), two or more
    /// positions each: each in increasing order, ordered by their smallest position.
    /// Linear in the number of positions, however many copies a fingerprint has.
    pub fn clusters_indexed(&self, fps: &Indexed) -> Vec<Vec<usize>> {
        let mut uf = UnionFind::new(fps.distinct.len());
        self.union_pairs(&fps.distinct, &mut uf);
        let mut out: Vec<Vec<usize>> = uf
            .sets(|size, node| size >= 2 || fps.positions(node as usize).len() >= 2)
            .into_iter()
            .map(|nodes| {
                let mut c: Vec<usize> = nodes
                    .into_iter()
                    .flat_map(|n| fps.positions(n as usize))
                    .map(|&p| p as usize)
                    .collect();
                c.sort_unstable();
                c
            })
            .collect();
        out.sort_unstable_by_key(|c| c[0]);
        out
    }

    fn union_pairs(&self, set: &Distinct, uf: &mut UnionFind) {
        infallible(self.pairs(set, Ids::Indices, |pairs| {
            for &(a, b) in pairs {
                uf.union(a as u32, b as u32);
            }
            Ok(())
        }))
    }

    /// The engine: every pair of distinct fingerprints within the distance, once, as values
    /// or as indices into `set`, with `a < b`, a batch at a time.
    fn pairs<E>(
        &self,
        set: &Distinct,
        ids: Ids,
        mut sink: impl FnMut(&[(u64, u64)]) -> Result<(), E>,
    ) -> Result<(), E> {
        let values = set.as_slice();
        let n = values.len();
        let tables = self.layout.tables();
        let report = |done: usize| {
            if let Some(f) = &self.progress {
                f(Progress {
                    phase: Phase::Tables,
                    done: done as u64,
                    total: tables.len() as u64,
                });
            }
        };
        report(0);
        if n < 2 {
            report(tables.len());
            return Ok(());
        }
        let k = self.layout.distance();
        // Keys one pass of a table holds: all of them unless a memory budget says fewer.
        let room = self.pass_keys.unwrap_or(n).clamp(1, n);
        let mut keys = vec![0u64; room];
        let mut scratch = vec![0u64; room];
        for (t, table) in tables.iter().enumerate() {
            let w = table.leading_bits();
            let bits = radix::partition_bits(n, w);
            let seconds = self.layout.second_tables(table);
            let (lo, hi) = (64 - w, 64 - bits);
            let mut scan = |keys: &mut [u64], scratch: &mut [u64], bounds: &[usize]| {
                radix::map_tasks(
                    keys,
                    scratch,
                    bounds,
                    |task| {
                        let mut found = Vec::new();
                        match seconds {
                            None => {
                                let mut visit = |a: u64, b: u64| {
                                    let diff = a ^ b;
                                    // Popcount first: it rejects almost every candidate.
                                    if diff.count_ones() <= k && table.is_first_for(diff) {
                                        found.push((a, b));
                                    }
                                };
                                for (keys, scratch) in task.buckets() {
                                    radix::prefix_pairs(keys, scratch, lo, hi, &mut visit);
                                }
                            }
                            Some(seconds) => {
                                let mut runs = Runs::default();
                                for (keys, scratch) in task.buckets() {
                                    radix::sort_bucket(keys, scratch, lo, hi);
                                    runs.pairs(keys, lo, table, seconds, k, &mut found);
                                }
                            }
                        }
                        // Back to values (or indices) while still on the worker thread.
                        for p in &mut found {
                            let (mut a, mut b) = (table.unpermute(p.0), table.unpermute(p.1));
                            if ids == Ids::Indices {
                                (a, b) = (set.index_of(a), set.index_of(b));
                            }
                            *p = (a.min(b), a.max(b));
                        }
                        found
                    },
                    |found: Vec<(u64, u64)>| sink(&found),
                )
            };
            if room >= n {
                let bounds = table.with_permute(Partition {
                    values,
                    keys: &mut keys,
                    scratch: Some(&mut scratch),
                    bits,
                    buckets: None,
                });
                scan(&mut keys, &mut scratch, &bounds)?;
            } else {
                // Out of core: the table's buckets a pass at a time, each pass the
                // consecutive buckets that fit, so the pairs come in the order one pass
                // over all of them gives (the same buckets, filled in input order).
                let counts = table.with_permute(Count { values, bits });
                for range in passes(&counts, room) {
                    let need: usize = counts[range.clone()].iter().sum();
                    if keys.len() < need {
                        keys.resize(need, 0);
                        scratch.resize(need, 0);
                    }
                    let bounds = table.with_permute(Partition {
                        values,
                        keys: &mut keys,
                        scratch: None,
                        bits,
                        buckets: Some(range),
                    });
                    let used = bounds.last().copied().unwrap_or(0);
                    scan(&mut keys[..used], &mut scratch[..used], &bounds)?;
                }
            }
            report(t + 1);
        }
        Ok(())
    }
}

/// Consecutive ranges of buckets whose keys, `counts[b]` for bucket `b`, fit in `room`
/// (a bucket larger than `room` alone in its range: [`Matcher::with_memory`] sizes `room`
/// for the largest bucket it expects, and an unexpectedly large one still runs).
fn passes(counts: &[usize], room: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut held) = (0, 0);
    for (b, &c) in counts.iter().enumerate() {
        if held > 0 && held + c > room {
            out.push(start..b);
            (start, held) = (b, 0);
        }
        held += c;
    }
    if start < counts.len() {
        out.push(start..counts.len());
    }
    out
}

/// The second level of a two-level layout, inside one bucket of a first-level table: its
/// runs of keys equal on the first level's leading bits, and for each run and
/// second-level table, the run permuted and split on that table's leading bits. A run
/// holds about n / 2^w₁ keys, so this is all in cache.
#[derive(Default)]
struct Runs {
    permuted: Vec<u64>,
    scratch: Vec<u64>,
}

impl Runs {
    /// Pushes onto `found` every pair of `keys` (sorted on their top `64 − lo` bits,
    /// permuted by `table`) within `k` bits that this table and one of `seconds` report:
    /// the first first-level table whose leading blocks avoid the pair's differences, and
    /// under it, the first second-level table whose leading sub-blocks do. Pairs are
    /// pushed in `table`'s permuted space.
    fn pairs(
        &mut self,
        keys: &[u64],
        lo: u32,
        table: &Table,
        seconds: &[Table],
        k: u32,
        found: &mut Vec<(u64, u64)>,
    ) {
        let mut start = 0;
        while start < keys.len() {
            let prefix = keys[start] >> lo;
            let len = keys[start..]
                .iter()
                .position(|&x| x >> lo != prefix)
                .unwrap_or(keys.len() - start);
            let run = &keys[start..start + len];
            start += len;
            if run.len() < 2 {
                continue;
            }
            for second in seconds {
                let w2 = second.leading_bits();
                self.permuted.clear();
                self.permuted.extend(run.iter().map(|&x| second.permute(x)));
                self.scratch.clear();
                self.scratch.resize(run.len(), 0);
                let mut visit = |a: u64, b: u64| {
                    let diff = a ^ b;
                    if diff.count_ones() <= k
                        && second.is_first_for(diff)
                        && table.is_first_for(second.unpermute(diff))
                    {
                        found.push((second.unpermute(a), second.unpermute(b)));
                    }
                };
                radix::prefix_pairs(
                    &mut self.permuted,
                    &mut self.scratch,
                    lo - w2,
                    lo,
                    &mut visit,
                );
            }
        }
    }
}

/// What the engine reports a pair as.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ids {
    /// The fingerprints themselves.
    Values,
    /// Their indices in the [`Distinct`] set.
    Indices,
}

/// The partition pass of one table, run with the table's specialised permutation: of
/// every key, or of the keys of a range of buckets (a pass of an out-of-core run).
struct Partition<'a> {
    values: &'a [u64],
    keys: &'a mut [u64],
    scratch: Option<&'a mut [u64]>,
    bits: u32,
    buckets: Option<std::ops::Range<usize>>,
}

impl PermuteJob for Partition<'_> {
    type Output = Vec<usize>;

    fn run<P: Fn(u64) -> u64 + Sync>(self, permute: P) -> Vec<usize> {
        match self.buckets {
            None => radix::partition(self.values, self.keys, self.scratch, self.bits, permute),
            Some(range) => {
                radix::partition_range(self.values, self.keys, self.bits, range, permute)
            }
        }
    }
}

/// The keys of each bucket of one table, counted with its specialised permutation.
struct Count<'a> {
    values: &'a [u64],
    bits: u32,
}

impl PermuteJob for Count<'_> {
    type Output = Vec<usize>;

    fn run<P: Fn(u64) -> u64 + Sync>(self, permute: P) -> Vec<usize> {
        radix::bucket_counts(self.values, self.bits, permute)
    }
}

/// The value of a result that cannot be an error.
fn infallible<T>(r: Result<T, std::convert::Infallible>) -> T {
    match r {
        Ok(v) => v,
        Err(never) => match never {},
    }
}

/// Every pair of distinct values of `fps` within `distance` bits, `(a, b)` with `a < b`
/// (seomoz `find_all`): the layout is checked, duplicates in `fps` are ignored.
pub fn find_all(fps: &[u64], blocks: usize, distance: u32) -> Result<Vec<(u64, u64)>> {
    let matcher = Matcher::new(Layout::new(blocks, distance)?);
    let mut out = Vec::new();
    infallible(matcher.find_all(&Distinct::from_slice(fps)?, |a, b| {
        out.push((a, b));
        Ok(())
    }));
    Ok(out)
}

/// Clusters of distinct values of `fps` (seomoz `find_clusters`): connected components of
/// two or more values, each increasing, ordered by their smallest value.
pub fn clusters(fps: &[u64], blocks: usize, distance: u32) -> Result<Vec<Vec<u64>>> {
    let matcher = Matcher::new(Layout::new(blocks, distance)?);
    Ok(matcher.clusters(&Distinct::from_slice(fps)?))
}
