//! [`BandIndex`]: the online candidates of the Jaccard rule. Documents come and go with
//! their band keys ([`BandKeys`]); a query gets every stored document whose keys agree
//! with its own in some band, which are the candidates batch deduplication would pair it
//! with ([`crate::batch::band_candidates`]). The decision on each is then
//! [`crate::decide::Rule`]'s, as in batch.
//!
//! A crowded key is read as batch reads a crowded run ([`crate::batch::RUN_LEADERS`]):
//! of the documents under one key, each part of the index (main and levels) gives its
//! first [`RUN_LEADERS`] (the oldest of that part), not all. A template page stored
//! 100,000 times would otherwise make each query read and verify 100,000 stored
//! documents, and each put of one more such page as many: the load quadratic.
//!
//! It runs on the levelled engine of [`super::Corpus`] (`engine.rs`): a compact main
//! part, rebuilt now and then (on another thread by default), under small sorted levels
//! (frozen, middle, sealed, top), so a write costs O(top) and readers never wait. A full
//! top level is sealed and folded into the middle one on a thread of its own (by default),
//! so the writer does not wait for that either. What is its own is the [`Scheme`]: a
//! document is its band keys, a table is a band. Per band, the main part keeps a bucket
//! directory on the top bits of the keys (a bucket for about eight documents), the bits of
//! each key below the directory's, and each entry's slot, both packed at the bits they
//! need: with `n` documents, about `20 · (35 / 8 + 0.5)` bytes a document (4 bits of
//! directory, 35 of key and slot), plus the ids packed (⌈log₂ n⌉ bits), about 100 bytes a
//! document from a million to 100 million. (It was 245 at 10 million: a directory bucket
//! a document, 16 bits of every key, ids of 64 bits.)

use std::borrow::Borrow;
use std::io::{self, Read, Write};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::engine::{self, folded, Engine, MainPart, Merge, Scheme, LEVELS};
use super::main_part::Packed;
use super::raw::{invalid, In, Out};
use crate::batch::RUN_LEADERS;
use crate::error::{Error, Result};
use crate::jaccard::{BandKeys, BANDS};

/// Key bits a main part's directory covers at most.
const MAX_DIR_BITS: u32 = 24;
/// Documents a main part's directory bucket holds, about: `2^DIR_SHARE`. A bucket is a
/// run a query scans, and its directory entry 32 bits a band: at one document a bucket
/// the directories took 134 bytes a document at 10 million (2^24 buckets), at about
/// eight they take 10–17 bytes, for a scan of about eight packed keys a band.
const DIR_SHARE: u32 = 3;

/// The band index's part of the levelled engine: a document is its band keys, and table
/// `b` holds the keys of band `b`. A full top level is folded on a thread of its own (with
/// background rebuilds): a fold merges twenty bands.
#[derive(Clone, Copy, Debug, Default)]
struct Bands;

impl Scheme for Bands {
    type Doc = BandKeys;
    type Key = u32;
    type Main = Main;

    const MAX_SLOT: usize = u32::MAX as usize - 1;
    const FOLD_APART: bool = true;

    fn tables(&self) -> usize {
        BANDS
    }

    #[inline]
    fn key(&self, band: usize, keys: &BandKeys) -> u32 {
        keys[band]
    }

    fn empty_main(&self) -> Main {
        Main::empty()
    }

    fn build(&self, snap: &Snap) -> Main {
        build_main(snap)
    }

    fn build_owned(&self, mut snap: Snap) -> Main {
        let main = std::mem::replace(&mut snap.main, Arc::new(Main::empty()));
        match Arc::try_unwrap(main) {
            Ok(mut main) => {
                #[cfg(test)]
                tests::IN_PLACE.with(|n| n.set(n.get() + 1));
                // The ids stay for the renumbering; each old band goes as its new one is
                // built.
                let bands = std::mem::take(&mut main.bands);
                snap.main = Arc::new(main);
                rebuilt(&snap, bands.into_iter().enumerate().collect())
            }
            Err(main) => {
                snap.main = main;
                build_main(&snap)
            }
        }
    }

    fn index(&self, level: &mut Level) {
        level.index();
    }
}

/// A level of the band index: per band, `(key, slot)` entries sorted.
type Level = engine::Level<Bands>;

/// One consistent state; queries run on it, never on anything mutable.
type Snap = engine::Snap<Bands>;

/// Queries of a batch on ([`Snap::candidates_many`]) whose directory entries are asked for
/// while one is scanned, and whose runs: far enough for a miss to come in (a query takes
/// a few hundred nanoseconds from the cache), near enough that what was fetched is still
/// there (about a hundred cache lines a query).
const DIRS_AHEAD: usize = 4;
const RUNS_AHEAD: usize = 2;

/// Entries a band of a level needs before it gets a directory: below this a binary search
/// stays in a few cache lines.
const LEVEL_DIR_MIN: usize = 1024;

impl Level {
    /// Calls `f(slot)` for the first [`RUN_LEADERS`] entries of band `band` with `key`: the plain lookup that
    /// [`Snap::find_levels`] is tested against.
    #[cfg(test)]
    fn find(&self, band: usize, key: u32, f: impl FnMut(u32) -> bool) -> bool {
        let (from, to) = self.run(band, key);
        scan_run(&self.tables[band][from..to], key, f)
    }

    /// The entries of band `band` where `key`'s are: its directory's bucket, or the whole
    /// band of a level without one.
    #[inline]
    fn run(&self, band: usize, key: u32) -> (usize, usize) {
        match self.dirs.get(band).filter(|d| !d.is_empty()) {
            Some(dir) => {
                let bucket = dir_bucket(dir, key);
                (dir[bucket] as usize, dir[bucket + 1] as usize)
            }
            None => (0, self.tables.get(band).map_or(0, Vec::len)),
        }
    }

    /// The level with a directory on each large band. A query then reads the directory
    /// and a run of about four entries, where a binary search over a middle level of tens
    /// of thousands of entries waited on a cache miss at each of its steps, twenty bands
    /// over: most of a query's time while the middle level was large.
    fn index(&mut self) {
        self.dirs = self
            .tables
            .iter()
            .map(|entries| {
                if entries.len() < LEVEL_DIR_MIN {
                    return Vec::new();
                }
                // About four entries a bucket.
                let bits = (usize::BITS - entries.len().leading_zeros()).saturating_sub(2);
                let mut dir = Directory::new(bits);
                for &(key, _) in entries {
                    dir.push(key);
                }
                dir.finish()
            })
            .collect();
    }
}

/// A directory on the top `bits` bits of sorted keys, built as they come: entry `b` is
/// where the run of bucket `b` starts, and the last is the count of keys.
struct Directory {
    dir: Vec<u32>,
    shift: u32,
    buckets: usize,
    count: u32,
}

impl Directory {
    fn new(bits: u32) -> Directory {
        let buckets = 1usize << bits;
        let mut dir = Vec::with_capacity(buckets + 1);
        dir.push(0);
        Directory {
            dir,
            shift: 32 - bits,
            buckets,
            count: 0,
        }
    }

    /// The next key (no smaller than the one before).
    #[inline]
    fn push(&mut self, key: u32) {
        // The buckets up to this key's start here, unless an earlier key started them.
        let bucket = (u64::from(key) >> self.shift) as usize;
        while self.dir.len() <= bucket {
            self.dir.push(self.count);
        }
        self.count += 1;
    }

    fn finish(mut self) -> Vec<u32> {
        self.dir.resize(self.buckets + 1, self.count);
        self.dir
    }
}

/// The bucket of `key` in a level's directory of `2^bits + 1` entries.
#[inline]
fn dir_bucket(dir: &[u32], key: u32) -> usize {
    let bits = (dir.len() - 1).trailing_zeros();
    (u64::from(key) >> (32 - bits)) as usize
}

/// Calls `f(slot)` for the entries of `run` (sorted) with `key` until [`RUN_LEADERS`]
/// calls answered true (took the slot: a live document); whether entries with `key` were
/// left unread (the key is crowded).
#[inline]
fn scan_run(run: &[(u32, u32)], key: u32, mut f: impl FnMut(u32) -> bool) -> bool {
    let at = run.partition_point(|e| e.0 < key);
    let mut taken = 0;
    for &(k, slot) in &run[at..] {
        if k != key {
            return false;
        }
        if taken == RUN_LEADERS {
            return true;
        }
        taken += usize::from(f(slot));
    }
    false
}

/// One band of the main part: keys sorted, with a directory on their top bits.
#[derive(Debug)]
struct MainBand {
    /// `dir[b]..dir[b + 1]` is the run of entries whose keys' top `dir_bits` bits are `b`.
    dir: Vec<u32>,
    /// Each entry's key below the directory's bits (its low `32 - dir_bits` bits).
    lows: Packed,
    slots: Packed,
}

impl MainBand {
    fn heap_bytes(&self) -> usize {
        self.dir.capacity() * 4 + self.lows.heap_bytes() + self.slots.heap_bytes()
    }
}

/// The merged part: per band its entries; the ids by slot, and the slots in id order
/// (none when the ids increase with the slots, as a store's numbers do).
#[derive(Debug)]
struct Main {
    dir_bits: u32,
    bands: Vec<MainBand>,
    ids: Packed,
    by_id: Option<Packed>,
}

impl Main {
    fn empty() -> Main {
        build(Vec::new(), (0..BANDS).collect(), |_| std::iter::empty())
    }

    fn len(&self) -> usize {
        self.ids.len
    }

    fn heap_bytes(&self) -> usize {
        self.bands.iter().map(MainBand::heap_bytes).sum::<usize>()
            + self.ids.heap_bytes()
            + self.by_id.as_ref().map_or(0, Packed::heap_bytes)
    }

    /// The slot of the `i`th id in id order.
    #[inline]
    fn ordered(&self, i: usize) -> usize {
        match &self.by_id {
            Some(order) => order.get(i) as usize,
            None => i,
        }
    }

    /// The slot of `id`, if it was merged (it may since have been removed).
    fn position(&self, id: u64) -> Option<u32> {
        let id_at = |i: usize| self.ids.get(self.ordered(i));
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if id_at(mid) < id {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo < self.len() && id_at(lo) == id).then(|| self.ordered(lo) as u32)
    }

    /// Calls `f(slot)` for the first [`RUN_LEADERS`] entries of band `band` with `key`: the plain lookup,
    /// which [`Main::find_bands`] does for all the bands at once.
    #[cfg(test)]
    fn find(&self, band: usize, key: u32, mut f: impl FnMut(u32) -> bool) -> bool {
        let b = &self.bands[band];
        let (from, to) = self.run(b, key);
        let low = u64::from(key) & low_mask(self.dir_bits);
        let mut taken = 0;
        for i in from..to {
            if b.lows.get(i) == low {
                if taken == RUN_LEADERS {
                    return true;
                }
                taken += usize::from(f(b.slots.get(i) as u32));
            }
        }
        false
    }

    /// The directory bucket of `key`.
    #[inline]
    fn bucket(&self, key: u32) -> usize {
        (u64::from(key) >> (32 - self.dir_bits)) as usize
    }

    /// The entries of band `b` in the directory bucket of `key`.
    #[inline]
    fn run(&self, b: &MainBand, key: u32) -> (usize, usize) {
        let bucket = self.bucket(key);
        (b.dir[bucket] as usize, b.dir[bucket + 1] as usize)
    }

    /// Asks for the directory entries of `keys`' buckets: the first loads of
    /// [`Main::find_bands`], issued for a later query of a batch ([`Snap::candidates_many`]).
    #[inline]
    fn prefetch_dirs(&self, keys: &BandKeys) {
        for (b, &key) in self.bands.iter().zip(keys) {
            if key != 0 {
                crate::hint::prefetch(&b.dir[self.bucket(key)]);
            }
        }
    }

    /// Asks for the first low key and slot of `keys`' runs: the second loads of
    /// [`Main::find_bands`], once their directory entries are in the cache.
    #[inline]
    fn prefetch_runs(&self, keys: &BandKeys) {
        for (b, &key) in self.bands.iter().zip(keys) {
            if key != 0 {
                let (from, to) = self.run(b, key);
                if from < to {
                    b.lows.prefetch(from);
                    b.slots.prefetch(from);
                }
            }
        }
    }

    /// Calls `f(slot)` for the first [`RUN_LEADERS`] entries of every band `band` with key `keys[band]`, zero
    /// keys skipped: [`Main::find`] of each band, its memory read in three passes.
    ///
    /// At millions of documents a band's directory entry, its run of low keys and their
    /// slots are each a cache (and TLB) miss. Band by band, each miss waits for the one
    /// before it (the run's bounds decide the scan's branches): 18% of the server's CPU
    /// per check at 1.9M stored, nearly all of it on two loads. So the directory entries
    /// of all the bands are read first, then the first low key and slot of every run,
    /// loads that do not depend on each other and so overlap; the scans then hit the cache.
    ///
    /// Whether some band's key had entries left unread (was crowded).
    fn find_bands(&self, keys: &BandKeys, mut f: impl FnMut(u32) -> bool) -> bool {
        let mut runs = [(0usize, 0usize); BANDS];
        for ((b, &key), run) in self.bands.iter().zip(keys).zip(&mut runs) {
            if key != 0 {
                *run = self.run(b, key);
            }
        }
        let mut touched = 0u64;
        for (b, &(from, to)) in self.bands.iter().zip(&runs) {
            if from < to {
                touched ^= b.lows.get(from) ^ b.slots.get(from);
            }
        }
        std::hint::black_box(touched);
        let mask = low_mask(self.dir_bits);
        let mut crowded = false;
        for ((b, &key), &(from, to)) in self.bands.iter().zip(keys).zip(&runs) {
            let low = u64::from(key) & mask;
            let mut taken = 0;
            for i in from..to {
                if b.lows.get(i) == low {
                    if taken == RUN_LEADERS {
                        crowded = true;
                        break;
                    }
                    taken += usize::from(f(b.slots.get(i) as u32));
                }
            }
        }
        crowded
    }
}

/// The entries of one band of a main part (held or borrowed), in key order: the directory
/// walked beside the low keys (a rebuild reads every entry of every band this way).
struct Entries<B> {
    band: B,
    shift: u32,
    bucket: usize,
    at: usize,
}

impl<B: Borrow<MainBand>> Entries<B> {
    /// The entries of `band`, a band of a main part with `dir_bits` of directory.
    fn of(band: B, dir_bits: u32) -> Entries<B> {
        Entries {
            band,
            shift: 32 - dir_bits,
            bucket: 0,
            at: 0,
        }
    }
}

impl<B: Borrow<MainBand>> Iterator for Entries<B> {
    type Item = (u32, u32);

    #[inline]
    fn next(&mut self) -> Option<(u32, u32)> {
        let b: &MainBand = self.band.borrow();
        let i = self.at;
        if i >= b.lows.len {
            return None;
        }
        // The bucket holding entry `i`: the first whose run ends after it.
        while b.dir[self.bucket + 1] as usize <= i {
            self.bucket += 1;
        }
        let key = ((self.bucket as u64) << self.shift | b.lows.get(i)) as u32;
        self.at += 1;
        Some((key, b.slots.get(i) as u32))
    }
}

impl MainPart for Main {
    fn len(&self) -> usize {
        Main::len(self)
    }

    #[inline]
    fn id(&self, slot: usize) -> u64 {
        self.ids.get(slot)
    }

    fn position(&self, id: u64) -> Option<u32> {
        Main::position(self, id)
    }

    fn heap_bytes(&self) -> usize {
        Main::heap_bytes(self)
    }
}

/// The directory bits of a main part of `n` documents: about `2^DIR_SHARE` entries a
/// bucket, at least 4 bits and at most [`MAX_DIR_BITS`].
fn dir_bits(n: usize) -> u32 {
    (usize::BITS - n.leading_zeros())
        .saturating_sub(DIR_SHARE)
        .clamp(4, MAX_DIR_BITS)
}

/// The key bits a main part with `dir_bits` of directory keeps of each key.
#[inline]
fn low_mask(dir_bits: u32) -> u64 {
    (1u64 << (32 - dir_bits)) - 1
}

/// A main part of `ids` (by slot) whose band `b` holds the entries `entries(sources[b])`
/// (sorted by key, then slot). Each band is built as its entries come, on the pool, so no
/// more than a band or two of entries exist at once, whatever the caller merges or sorts;
/// a source the entries own (an old band) is freed as soon as its band is built.
fn build<T, I>(ids: Vec<u64>, sources: Vec<T>, entries: impl Fn(T) -> I + Sync + Send) -> Main
where
    T: Send,
    I: Iterator<Item = (u32, u32)>,
{
    let n = ids.len();
    let dir_bits = dir_bits(n);
    let built = crate::par::map(sources, |source| {
        MainBand::from_sorted(entries(source), dir_bits, n)
    });
    assemble(ids, dir_bits, built)
}

/// The main part of `ids` (by slot) and its `bands`, built with `dir_bits` of directory.
fn assemble(ids: Vec<u64>, dir_bits: u32, bands: Vec<MainBand>) -> Main {
    let n = ids.len();
    let by_id = if ids.windows(2).all(|w| w[0] < w[1]) {
        None
    } else {
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_unstable_by_key(|&s| ids[s as usize]);
        Some(Packed::from_fn(n, n as u64, |i| u64::from(order[i])))
    };
    let max = ids.iter().copied().max().unwrap_or(0);
    Main {
        dir_bits,
        bands,
        ids: Packed::from_fn(n, max, |i| ids[i]),
        by_id,
    }
}

/// A band's keys by slot as (key, slot) words sorted into the second of `buffers` (the
/// first is the sort's scratch), reusing their memory.
fn sort_band(
    keys: &[u32],
    (mut entries, mut sorted): (Vec<u64>, Vec<u64>),
) -> (Vec<u64>, Vec<u64>) {
    // (key, slot) as one word, radix-sorted: at 100M documents a band's 100M entries,
    // where a comparison sort took about five times as long.
    entries.clear();
    entries.extend(
        keys.iter()
            .zip(0u64..)
            .map(|(&key, slot)| (u64::from(key) << 32) | slot),
    );
    sorted.clear();
    sorted.resize(entries.len(), 0);
    crate::batch::radix::sort_into(&mut entries, &mut sorted);
    (entries, sorted)
}

impl MainBand {
    /// The band of `entries` (sorted by key, then slot; about `n` of them, slots at most
    /// `n`) with a directory on the top `dir_bits` bits of the keys, in one pass.
    fn from_sorted(entries: impl Iterator<Item = (u32, u32)>, dir_bits: u32, n: usize) -> MainBand {
        let mut dir = Directory::new(dir_bits);
        let mask = low_mask(dir_bits);
        let mut lows = Packed::builder(mask, n);
        let slots = Packed::collect(
            n as u64,
            n,
            entries.map(|(key, slot)| {
                dir.push(key);
                lows.push(u64::from(key) & mask);
                u64::from(slot)
            }),
        );
        MainBand {
            dir: dir.finish(),
            lows: lows.finish(),
            slots,
        }
    }
}

impl Snap {
    /// Calls `f(slot)` for the first [`RUN_LEADERS`] entries of the levels' bands with key `keys[band]`, zero
    /// keys skipped: [`Level::find`] of each level and band, in three passes as
    /// [`Main::find_bands`] reads. Each band of a large level is a directory entry, then a
    /// run of a few entries, two cache misses the one waiting for the other; band by band
    /// and level by level they did not overlap, and at 10M documents stored the levels took
    /// more of a query's time than the main part. So the directories are read first, then
    /// the first entry of every run is asked for, then the runs are scanned.
    ///
    /// Whether some level's band had entries with its key left unread (was crowded).
    fn find_levels(&self, keys: &BandKeys, mut f: impl FnMut(u32) -> bool) -> bool {
        let levels = self.levels();
        let mut runs = [[(0usize, 0usize); BANDS]; LEVELS];
        for (level, runs) in levels.iter().zip(&mut runs) {
            if level.docs.is_empty() {
                continue;
            }
            for (band, (&key, run)) in keys.iter().zip(runs.iter_mut()).enumerate() {
                if key != 0 {
                    *run = level.run(band, key);
                }
            }
        }
        for (level, runs) in levels.iter().zip(&runs) {
            for (entries, &(from, to)) in level.tables.iter().zip(runs) {
                if from < to {
                    crate::hint::prefetch(&entries[from]);
                }
            }
        }
        let mut crowded = false;
        for (level, runs) in levels.iter().zip(&runs) {
            for ((entries, &(from, to)), &key) in level.tables.iter().zip(runs).zip(keys) {
                if from < to {
                    crowded |= scan_run(&entries[from..to], key, &mut f);
                }
            }
        }
        crowded
    }

    /// [`Snap::candidates`] of each of `keys`, in order. Alone, a query's loads wait on
    /// each other in three rounds (directories, runs, slots' ids), each a cache miss at
    /// millions of documents; a batch asks for the directory entries of the query
    /// [`DIRS_AHEAD`] places on and the runs of the one [`RUNS_AHEAD`] places on while it
    /// scans this one, so that the misses of several queries overlap.
    fn candidates_many(&self, keys: &[BandKeys]) -> Vec<Candidates> {
        for k in keys.iter().take(DIRS_AHEAD) {
            self.prefetch_dirs(k);
        }
        for k in keys.iter().take(RUNS_AHEAD) {
            self.prefetch_runs(k);
        }
        keys.iter()
            .enumerate()
            .map(|(i, k)| {
                if let Some(later) = keys.get(i + DIRS_AHEAD) {
                    self.prefetch_dirs(later);
                }
                if let Some(later) = keys.get(i + RUNS_AHEAD) {
                    self.prefetch_runs(later);
                }
                self.candidates(k)
            })
            .collect()
    }

    /// [`Main::prefetch_dirs`], and the directory entries of the levels that have one.
    fn prefetch_dirs(&self, keys: &BandKeys) {
        self.main.prefetch_dirs(keys);
        for level in self.levels() {
            for (dir, &key) in level.dirs.iter().zip(keys) {
                if key != 0 && !dir.is_empty() {
                    crate::hint::prefetch(&dir[dir_bucket(dir, key)]);
                }
            }
        }
    }

    /// [`Main::prefetch_runs`], and the first entry of the levels' runs.
    fn prefetch_runs(&self, keys: &BandKeys) {
        self.main.prefetch_runs(keys);
        for level in self.levels() {
            if level.dirs.is_empty() {
                continue;
            }
            for (band, &key) in keys.iter().enumerate() {
                if key != 0 {
                    let (from, to) = level.run(band, key);
                    if from < to {
                        crate::hint::prefetch(&level.tables[band][from]);
                    }
                }
            }
        }
    }

    /// The live documents whose keys agree with `keys` in some band: ids, increasing.
    fn candidates(&self, keys: &BandKeys) -> Candidates {
        let mut slots = Vec::new();
        // A removed document does not count among a crowded key's first.
        let mut take = |s: u32| {
            let live = !self.removed(s);
            if live {
                slots.push(s);
            }
            live
        };
        let crowded = self.main.find_bands(keys, &mut take) | self.find_levels(keys, &mut take);
        slots.sort_unstable();
        slots.dedup();
        let mut ids: Vec<u64> = slots.into_iter().map(|s| self.id(s)).collect();
        ids.sort_unstable();
        Candidates { ids, crowded }
    }
}

/// The candidates of a query ([`BandIndex::lookup`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Candidates {
    /// The live documents whose keys agree with the query's in some band: ids, increasing.
    pub ids: Vec<u64>,
    /// Some key of the query is crowded: a part of the index holds more documents under it
    /// than the [`RUN_LEADERS`] it gives, so documents agreeing with the query only under
    /// crowded keys may be left out.
    pub crowded: bool,
}

/// Documents by id with the band keys of their signatures, and the candidates of a query.
///
/// Ids are the caller's `u64` document ids; inserting an id that is present replaces its
/// keys. The `BandIndex` is the writer; [`BandIndex::reader`] gives query handles for
/// other threads, which see each write as soon as it returns and never wait.
pub struct BandIndex {
    engine: Engine<Bands>,
}

impl std::fmt::Debug for BandIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BandIndex")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl Default for BandIndex {
    fn default() -> BandIndex {
        BandIndex::new()
    }
}

/// A query handle on a [`BandIndex`] for another thread: cheap to clone.
#[derive(Clone)]
pub struct BandIndexReader {
    published: Arc<ArcSwap<Snap>>,
}

impl std::fmt::Debug for BandIndexReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BandIndexReader").finish_non_exhaustive()
    }
}

impl BandIndexReader {
    /// As [`BandIndex::candidates`], as of now.
    pub fn candidates(&self, keys: &BandKeys) -> Vec<u64> {
        self.lookup(keys).ids
    }

    /// As [`BandIndex::lookup`], as of now.
    pub fn lookup(&self, keys: &BandKeys) -> Candidates {
        self.published.load().candidates(keys)
    }

    /// As [`BandIndex::lookup_many`], as of now.
    pub fn lookup_many(&self, keys: &[BandKeys]) -> Vec<Candidates> {
        self.published.load().candidates_many(keys)
    }

    /// Documents stored, as of now.
    pub fn len(&self) -> usize {
        self.published.load().len()
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl BandIndex {
    /// An empty index.
    pub fn new() -> BandIndex {
        BandIndex::of(Snap::of_main(Bands, Main::empty()))
    }

    /// The writer of `snap`.
    fn of(snap: Snap) -> BandIndex {
        BandIndex {
            engine: Engine::new(snap),
        }
    }

    /// An index of `docs` (distinct ids) built in one pass: what opening a store does,
    /// without the folds and rebuilds of inserting them.
    pub fn from_docs(docs: Vec<(u64, BandKeys)>) -> Result<BandIndex> {
        if docs.len() >= u32::MAX as usize {
            return Err(Error::TooManyFingerprints {
                got: docs.len(),
                max: u32::MAX as usize - 1,
            });
        }
        let docs = &docs;
        let ids = docs.iter().map(|&(id, _)| id).collect();
        let main = build(ids, (0..BANDS).collect(), |band| {
            let mut entries: Vec<(u32, u32)> = docs
                .iter()
                .enumerate()
                .map(|(slot, (_, keys))| (keys[band], slot as u32))
                .collect();
            entries.sort_unstable();
            entries.into_iter()
        });
        Ok(BandIndex::of(Snap::of_main(Bands, main)))
    }

    /// An index of the documents `ids` (increasing) built in one pass from their band keys
    /// given a band at a time: `band(b, keys)` puts every document's key in band `b` into
    /// `keys` (empty), in the order of `ids`, or answers false (then the result is
    /// `None`). What opening a store whose keys are kept band by band does: one band's
    /// keys are in memory at once beside the index, in a buffer given again for each band.
    pub fn from_band_keys(
        ids: Vec<u64>,
        band: impl Fn(usize, &mut Vec<u32>) -> bool + Sync + Send,
    ) -> Result<Option<BandIndex>> {
        if ids.len() >= u32::MAX as usize {
            return Err(Error::TooManyFingerprints {
                got: ids.len(),
                max: u32::MAX as usize - 1,
            });
        }
        // A band is sorted while the band sorted before it is built, and no other band
        // starts meanwhile: two pairs of sort buffers serve all twenty. Bands built in
        // parallel each took fresh buffers whenever a thread waiting inside one band's
        // sort stole the next band, and the kernel's page faults and zeroing of them took
        // a third of a start's CPU (44 of 142 s at 74M documents).
        let n = ids.len();
        let dir_bits = dir_bits(n);
        let mut free: Vec<(Vec<u64>, Vec<u64>)> = Vec::with_capacity(2);
        let mut sorted: Option<(Vec<u64>, Vec<u64>)> = None;
        let mut keys = Vec::new();
        let mut bands = Vec::with_capacity(BANDS);
        for b in 0..=BANDS {
            let to_build = sorted.take();
            let buffers = free.pop().unwrap_or_default();
            let keys = &mut keys;
            let (built, next) = crate::par::join(
                || {
                    to_build.map(|(entries, keys)| {
                        let band = MainBand::from_sorted(
                            keys.iter().map(|&e| ((e >> 32) as u32, e as u32)),
                            dir_bits,
                            n,
                        );
                        (band, (entries, keys))
                    })
                },
                || {
                    (b < BANDS).then(|| {
                        keys.clear();
                        band(b, keys).then(|| sort_band(keys, buffers))
                    })
                },
            );
            if let Some((band, buffers)) = built {
                bands.push(band);
                free.push(buffers);
            }
            match next {
                Some(Some(pair)) => sorted = Some(pair),
                Some(None) => return Ok(None),
                None => {}
            }
        }
        let main = assemble(ids, dir_bits, bands);
        Ok(Some(BandIndex::of(Snap::of_main(Bands, main))))
    }

    /// Bytes of memory the main part of an index of `n` documents takes (their ids below
    /// `2n`): about what a start from them allocates, and what a rebuild of it allocates
    /// again beside the old one. For budgets: see `neardup_store::memory_needed`.
    pub fn main_bytes(n: usize) -> usize {
        let bits = |x: usize| (usize::BITS - x.leading_zeros()).max(1) as usize;
        let d = dir_bits(n);
        let per_band = ((1usize << d) + 1) * 4 + (n * (32 - d as usize + bits(n))).div_ceil(8);
        BANDS * (per_band + 16) + (n * bits(2 * n)).div_ceil(8) + 16
    }

    /// Documents and removals the recent levels of an index of `n` documents hold before
    /// its main part is rebuilt: a 32nd of them (at least 8,192), more when the index is
    /// rebuilt in place ([`BandIndex::rebuilds_in_place`]). For budgets, beside
    /// [`BandIndex::main_bytes`].
    pub fn levels_cap(n: usize, in_place: bool) -> usize {
        super::middle_cap(n, in_place)
    }

    /// The top and middle levels' caps over a main part of `n` documents in a service's
    /// index (not rebuilt in place), as [`BandIndex::with_level_caps`] takes them: to
    /// give a small index the levels of a large one.
    pub fn level_caps(n: usize) -> (usize, usize) {
        (super::top_cap(n), super::middle_cap(n, false))
    }

    /// Whether folds of the top level and rebuilds of the main part run on other threads
    /// (the default), as [`super::Corpus::background_rebuilds`].
    pub fn background_rebuilds(mut self, on: bool) -> BandIndex {
        self.engine.set_background(on);
        self
    }

    /// Whether rebuilds of the main part run on the writer's thread and, while no reader
    /// of the index exists ([`BandIndex::reader`]), let go of the old main part band by
    /// band as the new one is built: a rebuild then holds one main part and a band or two,
    /// where one beside the old holds two (at 100 million documents, 10 GB more). For a
    /// writer alone with its index, as an offline load; turns background rebuilds off.
    pub fn rebuilds_in_place(mut self, on: bool) -> BandIndex {
        self.engine.set_in_place(on);
        self
    }

    /// The index with a top level of `top` writes and a middle level of `mid` (instead of
    /// caps that grow with the main part), so that small tests go through every fold and
    /// rebuild.
    #[doc(hidden)]
    pub fn with_level_caps(mut self, top: usize, mid: usize) -> BandIndex {
        self.engine.set_caps(top, mid);
        self
    }

    /// The index as it is now, to write with [`BandSnapshot::write_to`] on any thread
    /// while writes go on (a few `Arc`s: nothing is copied).
    pub fn snapshot(&self) -> BandSnapshot {
        BandSnapshot(Arc::clone(&self.engine.snap))
    }

    /// The index a [`BandSnapshot`] wrote, as it was then. A main part that was being
    /// rebuilt then is rebuilt again, in the background as before.
    pub fn read_from(input: &mut impl Read) -> io::Result<BandIndex> {
        let mut input = In::new(input);
        let magic = input.u64()?;
        if magic != SNAPSHOT_MAGIC {
            return Err(invalid("not a band index snapshot of this version"));
        }
        let main = read_main(&mut input)?;
        let mut total = main.len();
        let mut levels = Vec::with_capacity(3);
        for _ in 0..3 {
            let level = read_level(&mut input, total)?;
            total += level.docs.len();
            levels.push(level);
        }
        input.finish()?;
        let slots = levels.iter().flat_map(|l| {
            let entries = l.tables.iter().flatten().map(|e| e.1);
            l.removed.iter().copied().chain(entries)
        });
        if let Some(slot) = slots.into_iter().find(|&s| s as usize >= total) {
            return Err(invalid(format!("slot {slot} past the {total} slots")));
        }
        let [frozen, mid, top]: [Level; 3] =
            levels.try_into().map_err(|_| invalid("three levels"))?;
        let snap = Snap {
            frozen: Arc::new(frozen),
            mid: Arc::new(mid),
            top: Arc::new(top),
            ..Snap::of_main(Bands, main)
        };
        Ok(BandIndex::of(snap))
    }

    /// Waits for the fold and the rebuild running in the background, if any, and
    /// installs them.
    pub fn finish_rebuild(&mut self) {
        self.engine.finish_rebuild();
    }

    /// Rebuilds the main part now when the levels of recent writes hold at least half of
    /// what starts a rebuild, and says whether it did: so that an index saved at the end
    /// of a load has room for the most writes before a rebuild while readers go on (which
    /// holds the old main part beside the new). With [`BandIndex::rebuilds_in_place`] and
    /// no reader, in place.
    pub fn compact(&mut self) -> bool {
        self.engine.compact()
    }

    /// A query handle for other threads.
    pub fn reader(&self) -> BandIndexReader {
        BandIndexReader {
            published: self.engine.published(),
        }
    }

    /// Documents stored.
    pub fn len(&self) -> usize {
        self.engine.snap.len()
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `id` is stored.
    pub fn contains(&self, id: u64) -> bool {
        let e = &self.engine;
        e.slot_of(&e.snap.top, id).is_some()
    }

    /// Bytes of memory held for the bands, ids and recent changes.
    pub fn heap_bytes(&self) -> usize {
        self.engine.heap_bytes()
    }

    /// Every stored document whose keys agree with `keys` in some band (a zero key
    /// agrees with nothing), by id; of a crowded key, its first ([`BandIndex::lookup`]).
    pub fn candidates(&self, keys: &BandKeys) -> Vec<u64> {
        self.lookup(keys).ids
    }

    /// [`BandIndex::candidates`], and whether some key of `keys` was crowded: each part
    /// of the index (main and levels) gives the first [`RUN_LEADERS`] live documents under
    /// a key, so that a page stored 100,000 times is not read whole by every query.
    pub fn lookup(&self, keys: &BandKeys) -> Candidates {
        self.engine.snap.candidates(keys)
    }

    /// [`BandIndex::lookup`] of each of `keys`, in order: faster than one by one at
    /// millions of documents, each query's cache misses overlapping its neighbours'.
    pub fn lookup_many(&self, keys: &[BandKeys]) -> Vec<Candidates> {
        self.engine.snap.candidates_many(keys)
    }

    /// Stores `id` with `keys`; whether it replaced a stored document.
    pub fn insert(&mut self, id: u64, keys: &BandKeys) -> Result<bool> {
        let mut replaced = false;
        self.engine.write(|e, top| {
            replaced = e.remove_in(top, id).is_some();
            e.add_in(top, id, keys, true)
        })?;
        Ok(replaced)
    }

    /// Stores every `(id, keys)`, in order (a later copy of an id wins): a few inserted
    /// one by one into the top level, up to a few top levels' worth sorted into it, more
    /// sorted straight into the middle level.
    pub fn insert_bulk(&mut self, docs: &[(u64, BandKeys)]) -> Result<()> {
        self.engine.insert_bulk(docs)
    }

    /// Removes `id`; whether it was stored.
    pub fn remove(&mut self, id: u64) -> bool {
        let mut was = false;
        // Removal cannot fail.
        let _ = self.engine.write(|e, top| {
            was = e.remove_in(top, id).is_some();
            Ok(())
        });
        was
    }

    /// Removes every id in `ids`; how many were stored.
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
}

/// A main part of every live document of `snap`, renumbered in slot order, beside the
/// old one.
fn build_main(snap: &Snap) -> Main {
    rebuilt(snap, snap.main.bands.iter().enumerate().collect())
}

/// A main part of every live document of `snap`, renumbered in slot order, where `old`
/// holds the bands of `snap`'s main part (by number; its own bands are not read). Each band
/// merges the old main part's sorted entries with the levels' (no sort of the whole), and
/// is built as the merge runs.
///
/// An entry of the old main part keeps its slot less the removed slots before it. That is
/// found in the sorted list of those removals, which is short and stays in the cache,
/// rather than in a table of every slot: read in key order, the slots are random, and at a
/// million documents looking each up in such a table was most of a rebuild's time.
fn rebuilt<B: Borrow<MainBand> + Send>(snap: &Snap, old: Vec<(usize, B)>) -> Main {
    let main_len = snap.main.len();
    let old_bits = snap.main.dir_bits;
    let levels = snap.levels();
    let mut gone: Vec<u32> = levels
        .iter()
        .flat_map(|l| l.removed.iter().copied())
        .filter(|&s| (s as usize) < main_len)
        .collect();
    gone.sort_unstable();
    gone.dedup();
    let mut ids = Vec::with_capacity(snap.len());
    let mut removed = gone.iter().peekable();
    for slot in 0..main_len {
        if removed.next_if(|&&g| g as usize == slot).is_none() {
            ids.push(snap.main.ids.get(slot));
        }
    }
    // The levels' slots (after the main part's) renumbered: a table, as they are few.
    let mut recent_slot = vec![u32::MAX; snap.slots() - main_len];
    for (i, new) in recent_slot.iter_mut().enumerate() {
        let slot = (main_len + i) as u32;
        if !snap.removed(slot) {
            *new = ids.len() as u32;
            ids.push(snap.id(slot));
        }
    }
    let (gone, recent_slot) = (&gone, &recent_slot);
    build(ids, old, |(band, old)| {
        let mut recent: Vec<(u32, u32)> = Vec::new();
        let mut base = 0;
        for level in levels {
            recent.extend(level.docs.iter().enumerate().filter_map(|(i, keys)| {
                let new = recent_slot[base + i];
                (new != u32::MAX).then_some((keys[band], new))
            }));
            base += level.docs.len();
        }
        recent.sort_unstable();
        let old = Entries::of(old, old_bits).filter_map(move |(key, slot)| {
            if gone.is_empty() {
                return Some((key, slot));
            }
            let before = gone.partition_point(|&g| g < slot);
            (gone.get(before) != Some(&slot)).then_some((key, slot - before as u32))
        });
        Merge {
            old: old.peekable(),
            new: recent.into_iter().peekable(),
        }
    })
}

/// The first word of a snapshot: "NDBANDS" and the format's version.
const SNAPSHOT_MAGIC: u64 = u64::from_le_bytes(*b"NDBANDS2");
/// Most documents (slots) a snapshot may hold, as the index itself.
const MAX_SLOTS: u64 = u32::MAX as u64 - 1;

/// One state of a [`BandIndex`], held for writing ([`BandIndex::snapshot`]).
#[derive(Clone, Debug)]
pub struct BandSnapshot(Arc<Snap>);

impl BandSnapshot {
    /// Documents stored in it.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it holds no document.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes it to `out` (buffer `out`: it gets many small writes), ending with an xxh3
    /// checksum of the whole; [`BandIndex::read_from`] reads it back. About the index's
    /// own size in memory.
    pub fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        let mut out = Out::new(out);
        out.u64(SNAPSHOT_MAGIC)?;
        let main = &self.0.main;
        out.u64(u64::from(main.dir_bits))?;
        write_packed(&mut out, &main.ids)?;
        out.u64(u64::from(main.by_id.is_some()))?;
        if let Some(order) = &main.by_id {
            write_packed(&mut out, order)?;
        }
        for band in &main.bands {
            out.slice(&band.dir, u32::to_le_bytes)?;
            write_packed(&mut out, &band.lows)?;
            write_packed(&mut out, &band.slots)?;
        }
        // Three levels, as the format has: the low and sealed levels are written with
        // the top one.
        let snap = &self.0;
        let upper = if snap.low.weight() == 0 && snap.sealed.weight() == 0 {
            std::borrow::Cow::Borrowed(&*snap.top)
        } else {
            let base = snap.low_base();
            let below = folded(&Bands, &snap.low, &snap.sealed, base, false);
            std::borrow::Cow::Owned(folded(&Bands, &below, &snap.top, base, false))
        };
        for level in [&*snap.frozen, &*snap.mid, &*upper] {
            out.slice(&level.ids, u64::to_le_bytes)?;
            let keys: Vec<u32> = level.docs.iter().flatten().copied().collect();
            out.slice(&keys, u32::to_le_bytes)?;
            for entries in &level.tables {
                out.slice(entries, pair_le)?;
            }
            let mut removed: Vec<u32> = level.removed.iter().copied().collect();
            removed.sort_unstable();
            out.slice(&removed, u32::to_le_bytes)?;
        }
        out.finish()
    }
}

fn pair_le((a, b): (u32, u32)) -> [u8; 8] {
    (u64::from(a) | u64::from(b) << 32).to_le_bytes()
}

fn pair_from_le(b: [u8; 8]) -> (u32, u32) {
    let x = u64::from_le_bytes(b);
    (x as u32, (x >> 32) as u32)
}

fn write_packed<W: Write>(out: &mut Out<W>, p: &Packed) -> io::Result<()> {
    out.u64(u64::from(p.bits))?;
    out.u64(p.len as u64)?;
    out.slice(&p.words, u64::to_le_bytes)
}

fn read_packed<R: Read>(input: &mut In<R>, what: &str) -> io::Result<Packed> {
    let bits = input.u64()?;
    let len = input.len(MAX_SLOTS, what)?;
    if !(1..=64).contains(&bits) {
        return Err(invalid(format!("{what}: {bits} bits a value")));
    }
    let bits = bits as u32;
    let want = (len * bits as usize).div_ceil(64) + 1;
    let words = input.vec(want as u64, what, u64::from_le_bytes)?;
    if words.len() != want {
        return Err(invalid(format!(
            "{what}: {} words, not {want}",
            words.len()
        )));
    }
    Ok(Packed { bits, len, words })
}

fn read_main<R: Read>(input: &mut In<R>) -> io::Result<Main> {
    let dir_bits = input.u64()?;
    if !(4..=u64::from(MAX_DIR_BITS)).contains(&dir_bits) {
        return Err(invalid(format!("{dir_bits} directory bits")));
    }
    let dir_bits = dir_bits as u32;
    let ids = read_packed(input, "ids")?;
    let n = ids.len;
    let by_id = match input.u64()? {
        // Without an order the ids must increase with the slots: searched as they are.
        0 if (1..n).all(|i| ids.get(i - 1) < ids.get(i)) => None,
        0 => return Err(invalid("ids out of order without an id order")),
        1 => {
            let order = read_packed(input, "id order")?;
            if order.len != n {
                return Err(invalid("the id order does not cover the ids"));
            }
            Some(order)
        }
        other => return Err(invalid(format!("an id order flag of {other}"))),
    };
    let mut bands = Vec::with_capacity(BANDS);
    for _ in 0..BANDS {
        let dir = input.vec((1 << dir_bits) + 1, "directory", u32::from_le_bytes)?;
        let lows = read_packed(input, "keys")?;
        let slots = read_packed(input, "slots")?;
        let sound = dir.len() == (1 << dir_bits) + 1
            && dir[0] == 0
            && dir.windows(2).all(|w| w[0] <= w[1])
            && dir.last().is_some_and(|&l| l as usize == lows.len)
            && lows.bits <= 32 - dir_bits
            && slots.len == lows.len;
        if !sound {
            return Err(invalid("a band's directory does not match its entries"));
        }
        bands.push(MainBand { dir, lows, slots });
    }
    Ok(Main {
        dir_bits,
        bands,
        ids,
        by_id,
    })
}

/// A level whose slots start at `base`.
fn read_level<R: Read>(input: &mut In<R>, base: usize) -> io::Result<Level> {
    let ids = input.vec(MAX_SLOTS - base as u64, "level ids", u64::from_le_bytes)?;
    let flat = input.vec((ids.len() * BANDS) as u64, "level keys", u32::from_le_bytes)?;
    if flat.len() != ids.len() * BANDS {
        return Err(invalid("a level's keys do not match its ids"));
    }
    let keys: Vec<BandKeys> = flat
        .chunks_exact(BANDS)
        .map(|c| {
            let mut k = [0; BANDS];
            k.copy_from_slice(c);
            k
        })
        .collect();
    let mut bands = Vec::with_capacity(BANDS);
    for _ in 0..BANDS {
        let entries = input.vec(ids.len() as u64, "level entries", pair_from_le)?;
        if !entries.windows(2).all(|w| w[0] < w[1]) {
            return Err(invalid("a level's entries are out of order"));
        }
        bands.push(entries);
    }
    let removed = input.vec(MAX_SLOTS, "removals", u32::from_le_bytes)?;
    let mut level = Level {
        tables: bands,
        dirs: Vec::new(),
        docs: keys,
        ids,
        removed: removed.into_iter().collect(),
    };
    level.index();
    Ok(level)
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Rebuilds on this thread that let go of the old main part as they went.
        pub(super) static IN_PLACE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// An index rebuilt in place (a load) lets its levels grow past a service's share
    /// between rebuilds, finds what brute force finds all along, and its compaction at
    /// the end leaves less than half a service's share in the levels.
    #[test]
    fn a_load_grows_its_levels_and_ends_within_a_services() {
        let mut seed = 17;
        let (_, docs) = main_of(60_000, 1 << 20, &mut seed);
        let mut ix = BandIndex::new().rebuilds_in_place(true);
        let held =
            |ix: &BandIndex| -> usize { ix.engine.snap.levels().iter().map(|l| l.weight()).sum() };
        let mut model = std::collections::BTreeMap::new();
        let mut past_a_services = false;
        for (i, chunk) in docs.chunks(5000).enumerate() {
            let bulk: Vec<(u64, BandKeys)> = chunk
                .iter()
                .enumerate()
                .map(|(j, k)| ((i * 5000 + j) as u64, *k))
                .collect();
            ix.insert_bulk(&bulk).unwrap();
            model.extend(bulk.iter().copied());
            past_a_services |= held(&ix) > BandIndex::levels_cap(ix.engine.snap.main.len(), false);
            for q in docs.iter().step_by(4999) {
                let mut got = ix.candidates(q);
                got.sort_unstable();
                assert_eq!(got, sharing_a_key(&model, q));
            }
        }
        assert!(past_a_services, "the levels never outgrew a service's");
        ix.compact();
        let main = ix.engine.snap.main.len();
        assert!(
            2 * held(&ix) < BandIndex::levels_cap(main, false),
            "{} held",
            held(&ix)
        );
        assert_eq!(ix.len(), model.len());
        for q in docs.iter().step_by(997) {
            let mut got = ix.candidates(q);
            got.sort_unstable();
            assert_eq!(got, sharing_a_key(&model, q));
        }
    }

    /// Main parts, middle and low levels replaced by background rebuilds and folds are let
    /// go of (on a thread of their own): each is freed, none kept by the index or the
    /// thread, while a reader goes on finding what brute force finds.
    #[test]
    fn replaced_main_parts_and_levels_are_freed() {
        use std::sync::Weak;
        let mut seed = 5;
        let (_, docs) = main_of(4000, 1 << 20, &mut seed);
        let mut ix = BandIndex::new().with_level_caps(16, 300);
        let reader = ix.reader();
        let mut model = std::collections::BTreeMap::new();
        let mut mains: Vec<Weak<Main>> = Vec::new();
        let (mut mids, mut lows): (Vec<Weak<Level>>, Vec<Weak<Level>>) = Default::default();
        let track = |seen: &mut Vec<Weak<Level>>, level: &Arc<Level>| {
            if level.weight() > 0
                && !seen
                    .iter()
                    .any(|m| std::ptr::eq(m.as_ptr(), Arc::as_ptr(level)))
            {
                seen.push(Arc::downgrade(level));
            }
        };
        for (i, k) in docs.iter().enumerate() {
            let snap = &ix.engine.snap;
            if !mains
                .iter()
                .any(|m| std::ptr::eq(m.as_ptr(), Arc::as_ptr(&snap.main)))
            {
                mains.push(Arc::downgrade(&snap.main));
            }
            track(&mut mids, &snap.mid);
            track(&mut lows, &snap.low);
            ix.insert(i as u64, k).unwrap();
            model.insert(i as u64, *k);
            // A slow machine's background rebuilds may fall behind the writes (one
            // rebuild taking several middle levels in); waiting on each now and then
            // makes the count of main parts replaced the same on every machine.
            if i % 500 == 499 {
                ix.finish_rebuild();
            }
            if i % 397 == 0 {
                let mut got = reader.candidates(k);
                got.sort_unstable();
                assert_eq!(got, sharing_a_key(&model, k));
            }
        }
        ix.finish_rebuild();
        assert!(
            mains.len() >= 3 && mids.len() >= 3 && lows.len() >= 3,
            "{} {} {}",
            mains.len(),
            mids.len(),
            lows.len()
        );
        mids.append(&mut lows);
        let now = &ix.engine.snap;
        let levels: Vec<*const Level> = now.levels().iter().map(|l| *l as *const Level).collect();
        mains.retain(|m| !std::ptr::eq(m.as_ptr(), Arc::as_ptr(&now.main)));
        mids.retain(|m| !levels.contains(&m.as_ptr()));
        // The retiring threads may still be at work.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let held = || {
            mains.iter().filter(|m| m.strong_count() > 0).count()
                + mids.iter().filter(|m| m.strong_count() > 0).count()
        };
        while held() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(held(), 0, "replaced parts still held");
    }

    /// Rebuilds in place while no reader exists, and beside the old main part while one
    /// does; the same candidates as brute force either way, removals and replacements
    /// included.
    #[test]
    fn rebuilds_in_place_only_without_readers() {
        let mut seed = 11;
        // About two documents a key: fewer than a crowded key's leaders.
        let (_, docs) = main_of(6000, 3000, &mut seed);
        for with_reader in [false, true] {
            IN_PLACE.with(|n| n.set(0));
            let mut ix = BandIndex::new()
                .rebuilds_in_place(true)
                .with_level_caps(16, 300);
            let reader = with_reader.then(|| ix.reader());
            let mut model = std::collections::BTreeMap::new();
            for (i, chunk) in docs.chunks(97).enumerate() {
                let base = (i * 97) as u64;
                let bulk = numbered(base, chunk);
                ix.insert_bulk(&bulk).unwrap();
                model.extend(bulk.iter().copied());
                // A replacement and a removal among the older documents.
                let (old, gone) = (base / 2, base / 3);
                ix.insert(old, &docs[(old as usize + 1) % docs.len()])
                    .unwrap();
                model.insert(old, docs[(old as usize + 1) % docs.len()]);
                assert_eq!(ix.remove(gone), model.remove(&gone).is_some());
            }
            let rebuilt = IN_PLACE.with(|n| n.get());
            if with_reader {
                assert_eq!(rebuilt, 0);
            } else {
                assert!(rebuilt >= 5, "{rebuilt} rebuilds in place");
            }
            assert_eq!(ix.len(), model.len());
            for q in docs.iter().step_by(53) {
                let want = sharing_a_key(&model, q);
                let mut got = ix.candidates(q);
                got.sort_unstable();
                assert_eq!(got, want);
                if let Some(r) = &reader {
                    let mut got = r.candidates(q);
                    got.sort_unstable();
                    assert_eq!(got, want);
                }
            }
        }
    }

    #[test]
    fn compacts_when_the_levels_hold_half_a_rebuild() {
        let mut seed = 5;
        let (_, docs) = main_of(3000, 1500, &mut seed);
        let mid = 300;
        let mut ix = BandIndex::new()
            .rebuilds_in_place(true)
            .with_level_caps(16, mid);
        let held =
            |ix: &BandIndex| -> usize { ix.engine.snap.levels().iter().map(|l| l.weight()).sum() };
        let mut model = std::collections::BTreeMap::new();
        let (mut compacted, mut left) = (0, 0);
        for (i, k) in docs.iter().enumerate() {
            let id = i as u64;
            ix.insert(id, k).unwrap();
            model.insert(id, *k);
            if i % 7 == 0 {
                assert_eq!(ix.remove(id / 2), model.remove(&(id / 2)).is_some());
            }
            if i % 41 != 40 {
                continue;
            }
            let before = held(&ix);
            IN_PLACE.with(|n| n.set(0));
            let did = ix.compact();
            assert_eq!(did, before > 0 && 2 * before >= mid, "{before} held");
            if did {
                compacted += 1;
                assert_eq!(held(&ix), 0);
                assert_eq!(IN_PLACE.with(|n| n.get()), 1);
                assert!(!ix.compact(), "nothing left to take in");
            } else {
                left += 1;
                assert_eq!(held(&ix), before);
            }
            assert_eq!(ix.len(), model.len());
            for q in docs.iter().step_by(97) {
                let want = sharing_a_key(&model, q);
                let mut got = ix.candidates(q);
                got.sort_unstable();
                assert_eq!(got, want);
            }
        }
        assert!(
            compacted >= 3 && left >= 3,
            "{compacted} compacted, {left} left"
        );
    }

    /// The ids of `model` sharing a nonzero band key with `q`, increasing: the candidates
    /// by brute force.
    fn sharing_a_key(model: &std::collections::BTreeMap<u64, BandKeys>, q: &BandKeys) -> Vec<u64> {
        model
            .iter()
            .filter(|(_, k)| (0..BANDS).any(|b| q[b] != 0 && k[b] == q[b]))
            .map(|(&id, _)| id)
            .collect()
    }

    /// `docs` with ids from `base` on.
    fn numbered(base: u64, docs: &[BandKeys]) -> Vec<(u64, BandKeys)> {
        (base..).zip(docs.iter().copied()).collect()
    }

    /// A main part of `n` documents with random keys from `alphabet` values (0 included).
    fn main_of(n: usize, alphabet: u64, seed: &mut u64) -> (Main, Vec<BandKeys>) {
        let mut next = || {
            *seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = *seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        // Keys spread over all 32 bits, so that directory buckets and low halves vary.
        let values: Vec<u32> = (0..alphabet)
            .map(|v| if v == 0 { 0 } else { next() as u32 })
            .collect();
        let docs: Vec<BandKeys> = (0..n)
            .map(|_| std::array::from_fn(|_| values[(next() % alphabet) as usize]))
            .collect();
        let bands: Vec<Vec<(u32, u32)>> = (0..BANDS)
            .map(|band| {
                let mut e: Vec<(u32, u32)> = docs
                    .iter()
                    .enumerate()
                    .map(|(slot, k)| (k[band], slot as u32))
                    .collect();
                e.sort_unstable();
                e
            })
            .collect();
        let ids = (0..n as u64).map(|i| i * 7 + 1).collect();
        (
            build(ids, (0..BANDS).collect(), |band: usize| {
                bands[band].iter().copied()
            }),
            docs,
        )
    }

    /// A level's lookup through its directories finds what the binary search over the
    /// whole band finds: keys over all 32 bits with repeats, the extremes, and keys absent.
    #[test]
    fn level_directories_find_what_the_search_finds() {
        let mut seed = 11;
        for n in [LEVEL_DIR_MIN - 1, LEVEL_DIR_MIN, 5000, 40_000] {
            let (_, docs) = main_of(n, (n as u64 / 3).max(2), &mut seed);
            let mut level = Level::empty(BANDS);
            for (band, entries) in level.tables.iter_mut().enumerate() {
                entries.extend(docs.iter().enumerate().map(|(s, k)| (k[band], s as u32)));
                // The extremes of the key range, in every bucket's edge.
                entries.extend([(0, n as u32), (u32::MAX, n as u32 + 1)]);
                entries.sort_unstable();
            }
            let plain = level.clone();
            let mut indexed = level;
            indexed.index();
            assert_eq!(
                indexed.dirs.iter().any(|d| !d.is_empty()),
                n + 2 >= LEVEL_DIR_MIN
            );
            let (_, others) = main_of(50, 1 << 20, &mut seed);
            let queries = docs.iter().take(300).chain(&others).copied();
            for q in queries.chain([[0; BANDS], [u32::MAX; BANDS]]) {
                for (band, &key) in q.iter().enumerate() {
                    let (mut want, mut got) = (Vec::new(), Vec::new());
                    let want_crowded = plain.find(band, key, |s| {
                        want.push(s);
                        true
                    });
                    let crowded = indexed.find(band, key, |s| {
                        got.push(s);
                        true
                    });
                    assert_eq!(got, want, "n {n}, band {band}, key {key}");
                    assert_eq!(crowded, want_crowded, "n {n}, band {band}, key {key}");
                }
            }
        }
    }

    /// Built a band at a time, an index answers as one built from the documents whole;
    /// a band that cannot be had makes none.
    #[test]
    fn an_index_of_band_keys_is_the_index_of_the_documents() {
        let mut seed = 5;
        let (_, docs) = main_of(20_000, 5000, &mut seed);
        let ids: Vec<u64> = (0..docs.len() as u64).map(|i| 3 * i + 1).collect();
        let whole =
            BandIndex::from_docs(ids.iter().copied().zip(docs.iter().copied()).collect()).unwrap();
        let banded = BandIndex::from_band_keys(ids.clone(), |b, keys| {
            // A buffer given again: what the band before put in was taken away.
            assert!(keys.is_empty());
            keys.extend(docs.iter().map(|k| k[b]));
            true
        })
        .unwrap()
        .unwrap();
        assert_eq!(banded.len(), whole.len());
        for q in docs.iter().step_by(7) {
            assert_eq!(banded.lookup(q), whole.lookup(q));
        }
        let none = BandIndex::from_band_keys(ids, |b, keys| {
            keys.extend(docs.iter().map(|k| k[b]));
            b != 13
        })
        .unwrap();
        assert!(none.is_none());
        let empty = BandIndex::from_band_keys(Vec::new(), |_, _| true)
            .unwrap()
            .unwrap();
        assert_eq!((empty.len(), empty.lookup(&docs[0]).ids.len()), (0, 0));
    }

    /// A batch's lookups ([`BandIndex::lookup_many`], through a reader too) find what
    /// each lookup alone finds, whatever the batch's length (shorter than the prefetch's
    /// distances, and longer), with a main part, levels with directories and without,
    /// removals and replacements, zero keys and crowded keys.
    #[test]
    fn lookup_many_is_each_lookup() {
        let mut seed = 17;
        let (_, docs) = main_of(30_000, 9000, &mut seed);
        let (_, crowd) = main_of(400, 3, &mut seed);
        let mut ix = BandIndex::new()
            .background_rebuilds(false)
            .with_level_caps(64, 5000);
        let reader = ix.reader();
        // Documents on two keys a band: their keys crowd.
        ix.insert_bulk(&numbered(1_000_000, &crowd)).unwrap();
        let (_, others) = main_of(300, 1 << 20, &mut seed);
        let mut checked = 0;
        for (i, chunk) in docs.chunks(4999).enumerate() {
            let base = (i * 4999) as u64;
            let bulk = numbered(base, chunk);
            ix.insert_bulk(&bulk).unwrap();
            for id in (0..base).step_by(7) {
                ix.remove(id);
            }
            ix.insert(base / 2, &others[i]).unwrap();
            let mut queries: Vec<BandKeys> = docs[..chunk.len() + i * 4999]
                .iter()
                .step_by(5)
                .chain(&crowd)
                .chain(&others)
                .copied()
                .collect();
            queries.push([0; BANDS]);
            let one_by_one: Vec<Candidates> = queries.iter().map(|q| ix.lookup(q)).collect();
            for n in [0, 1, DIRS_AHEAD - 1, DIRS_AHEAD + 1, queries.len()] {
                assert_eq!(
                    ix.lookup_many(&queries[..n]),
                    one_by_one[..n],
                    "batch of {n}"
                );
            }
            assert_eq!(reader.lookup_many(&queries), one_by_one);
            assert!(one_by_one.iter().any(|c| c.crowded));
            checked += one_by_one.iter().filter(|c| !c.ids.is_empty()).count();
        }
        // The levels had directories, and the main part documents.
        assert!(ix.engine.snap.main.len() > 0);
        assert!(checked > 10_000);
    }

    /// The lookup of all the levels at once finds what the plain one finds level by level
    /// and band by band, in the same order: levels with directories and without, empty.
    #[test]
    fn find_levels_is_find_of_each_level_and_band() {
        let mut seed = 13;
        let level_of = |docs: &[BandKeys], first: u32| {
            let mut level = Level::empty(BANDS);
            for (band, entries) in level.tables.iter_mut().enumerate() {
                entries.extend(
                    docs.iter()
                        .enumerate()
                        .map(|(s, k)| (k[band], first + s as u32)),
                );
                entries.sort_unstable();
            }
            level.docs = docs.to_vec();
            level.ids = (0..docs.len() as u64)
                .map(|i| u64::from(first) + i)
                .collect();
            level
        };
        let (main, _) = main_of(100, 40, &mut seed);
        let (_, frozen) = main_of(5000, 1500, &mut seed);
        let (_, mid) = main_of(3000, 900, &mut seed);
        // Few keys in the top level: some crowded.
        let (_, top) = main_of(300, 3, &mut seed);
        let indexed = |mut level: Level| {
            level.index();
            level
        };
        let snap = Snap {
            frozen: Arc::new(indexed(level_of(&frozen, 100))),
            mid: Arc::new(indexed(level_of(&mid, 5100))),
            top: Arc::new(level_of(&top, 8100)),
            ..Snap::of_main(Bands, main)
        };
        assert!(snap.frozen.dirs.iter().all(|d| !d.is_empty()));
        assert!(snap.top.dirs.iter().all(|d| d.is_empty()));
        let (_, others) = main_of(50, 1 << 20, &mut seed);
        let queries = frozen.iter().step_by(37).chain(mid.iter().step_by(29));
        let (mut found, mut crowds) = (0, 0);
        for q in queries.chain(&top).chain(&others) {
            let (mut want, mut want_crowded) = (Vec::new(), false);
            for level in snap.levels() {
                for (band, &key) in q.iter().enumerate() {
                    if key != 0 {
                        want_crowded |= level.find(band, key, |s| {
                            want.push(s);
                            true
                        });
                    }
                }
            }
            let mut got = Vec::new();
            let crowded = snap.find_levels(q, |s| {
                got.push(s);
                true
            });
            assert_eq!(got, want);
            assert_eq!(crowded, want_crowded);
            found += got.len();
            crowds += usize::from(crowded);
        }
        // Every level's own documents were asked for; the top level's, of two keys a band,
        // crowd.
        assert!(found > 300 + 5000 / 37 + 3000 / 29);
        assert_eq!(crowds, 300);
    }

    /// The fast lookup of all the bands finds what the plain one finds band by band, in
    /// the same order: small parts (28 key bits kept) and large (fewer).
    #[test]
    fn find_bands_is_find_of_each_band() {
        let mut seed = 7;
        for (n, alphabet) in [(0, 3), (1, 3), (50, 4), (3000, 40), (40_000, 3000)] {
            let (main, docs) = main_of(n, alphabet, &mut seed);
            assert_eq!(main.bands[0].lows.bits, 32 - main.dir_bits);
            let (_, others) = main_of(50, alphabet, &mut seed);
            let mut crowds = 0;
            for q in docs.iter().take(200).chain(&others) {
                let (mut plain, mut plain_crowded) = (Vec::new(), false);
                for (band, &key) in q.iter().enumerate() {
                    if key != 0 {
                        plain_crowded |= main.find(band, key, |s| {
                            plain.push(s);
                            true
                        });
                    }
                }
                let mut fast = Vec::new();
                let crowded = main.find_bands(q, |s| {
                    fast.push(s);
                    true
                });
                assert_eq!(fast, plain, "n {n}");
                assert_eq!(crowded, plain_crowded, "n {n}");
                crowds += usize::from(crowded);
            }
            // About 75 documents a key with 40 keys a band: every stored one's query crowded.
            if n == 3000 {
                assert_eq!(crowds, 200);
            }
        }
    }
}
