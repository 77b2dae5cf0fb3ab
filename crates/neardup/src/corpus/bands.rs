//! [`BandIndex`]: the online candidates of the Jaccard rule. Documents come and go with
//! their band keys ([`BandKeys`]); a query gets every stored document whose keys agree
//! with its own in some band, which are exactly the candidates batch deduplication would
//! pair it with ([`crate::batch::band_candidates`]). The decision on each is then
//! [`crate::decide::Rule`]'s, as in batch.
//!
//! The layout follows [`super::Corpus`]: a compact main part, rebuilt now and then (on
//! another thread by default), under small sorted levels (frozen, middle, sealed, top),
//! so a write costs O(top) and readers never wait. A full top level is sealed and folded
//! into the middle one on a thread of its own (by default), so the writer does not wait
//! for that either. Per band, the main part keeps a bucket
//! directory on the top bits of the keys, the low 16 bits of each key, and each entry's
//! slot packed at the bits it needs: with `n` documents, about `20 · (2 + ⌈log₂ n⌉/8)`
//! bytes a document (118 at 100 million), plus 12 for its id and the id index.

use std::io::{self, Read, Write};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::main_part::Packed;
use super::raw::{invalid, In, Out};
use super::{mid_cap, top_cap, IdMap, SlotSet};
use crate::error::{Error, Result};
use crate::jaccard::{BandKeys, BANDS};

/// Key bits a main part's directory covers at most, and at least when its keys keep only
/// their low 16 bits.
const MAX_DIR_BITS: u32 = 24;
const LOW_BITS: u32 = 16;

/// Documents added since the main part was built, and slots removed: per band the
/// `(key, slot)` entries, sorted; the keys and ids of the level's slots (which follow
/// those of the levels below); the slots removed while this level was on top.
#[derive(Clone, Debug, Default)]
struct Level {
    bands: Vec<Vec<(u32, u32)>>,
    /// Per band of a large level that no longer changes, a directory on the top bits of
    /// its keys ([`Level::indexed`]); empty otherwise.
    dirs: Vec<Vec<u32>>,
    keys: Vec<BandKeys>,
    ids: Vec<u64>,
    removed: SlotSet,
}

/// Entries a band of a level needs before it gets a directory: below this a binary search
/// stays in a few cache lines.
const LEVEL_DIR_MIN: usize = 1024;

impl Level {
    fn empty() -> Level {
        Level {
            bands: vec![Vec::new(); BANDS],
            ..Level::default()
        }
    }

    fn weight(&self) -> usize {
        self.keys.len() + self.removed.len()
    }

    fn heap_bytes(&self) -> usize {
        self.bands.iter().map(|b| b.capacity() * 8).sum::<usize>()
            + self.dirs.iter().map(|d| d.capacity() * 4).sum::<usize>()
            + self.keys.capacity() * 4 * BANDS
            + self.ids.capacity() * 8
            + self.removed.capacity() * 8
    }

    /// Calls `f(slot)` for every entry of band `band` with `key`: the plain lookup that
    /// [`Snap::find_levels`] is tested against.
    #[cfg(test)]
    fn find(&self, band: usize, key: u32, f: impl FnMut(u32)) {
        let (from, to) = self.run(band, key);
        scan_run(&self.bands[band][from..to], key, f);
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
            None => (0, self.bands.get(band).map_or(0, Vec::len)),
        }
    }

    /// The level with a directory on each large band. A query then reads the directory
    /// and a run of about four entries, where a binary search over a middle level of tens
    /// of thousands of entries waited on a cache miss at each of its steps, twenty bands
    /// over: most of a query's time while the middle level was large.
    fn indexed(mut self) -> Level {
        self.dirs = self
            .bands
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
        self
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

/// Calls `f(slot)` for every entry of `run` (sorted) with `key`.
#[inline]
fn scan_run(run: &[(u32, u32)], key: u32, mut f: impl FnMut(u32)) {
    let at = run.partition_point(|e| e.0 < key);
    for &(k, slot) in &run[at..] {
        if k != key {
            break;
        }
        f(slot);
    }
}

/// The low bits of a band's keys below its directory: all 32 for a small main part, the
/// low 16 once the directory covers the top 16 or more.
#[derive(Debug)]
enum Low {
    Full(Vec<u32>),
    Half(Vec<u16>),
}

/// One band of the main part: keys sorted, with a directory on their top bits.
#[derive(Debug)]
struct MainBand {
    /// `dir[b]..dir[b + 1]` is the run of entries whose keys' top `dir_bits` bits are `b`.
    dir: Vec<u32>,
    low: Low,
    slots: Packed,
}

impl MainBand {
    fn heap_bytes(&self) -> usize {
        self.dir.capacity() * 4
            + match &self.low {
                Low::Full(v) => v.capacity() * 4,
                Low::Half(v) => v.capacity() * 2,
            }
            + self.slots.heap_bytes()
    }
}

/// The merged part: per band its entries; the ids by slot, and the slots in id order.
#[derive(Debug)]
struct Main {
    dir_bits: u32,
    bands: Vec<MainBand>,
    ids: Vec<u64>,
    by_id: Packed,
}

impl Main {
    fn empty() -> Main {
        build(Vec::new(), |_| std::iter::empty())
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    fn heap_bytes(&self) -> usize {
        self.bands.iter().map(MainBand::heap_bytes).sum::<usize>()
            + self.ids.capacity() * 8
            + self.by_id.heap_bytes()
    }

    /// The slot of `id`, if it was merged (it may since have been removed).
    fn position(&self, id: u64) -> Option<u32> {
        let id_at = |i: usize| self.ids[self.by_id.get(i) as usize];
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if id_at(mid) < id {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo < self.len() && id_at(lo) == id).then(|| self.by_id.get(lo) as u32)
    }

    /// Calls `f(slot)` for every entry of band `band` with `key`: the plain lookup,
    /// which [`Main::find_bands`] does for all the bands at once.
    #[cfg(test)]
    fn find(&self, band: usize, key: u32, mut f: impl FnMut(u32)) {
        let b = &self.bands[band];
        let bucket = (u64::from(key) >> (32 - self.dir_bits)) as usize;
        let (from, to) = (b.dir[bucket] as usize, b.dir[bucket + 1] as usize);
        match &b.low {
            Low::Full(keys) => {
                for (i, &k) in keys[from..to].iter().enumerate() {
                    if k == key {
                        f(b.slots.get(from + i) as u32);
                    }
                }
            }
            Low::Half(lows) => {
                let low = key as u16;
                for (i, &l) in lows[from..to].iter().enumerate() {
                    if l == low {
                        f(b.slots.get(from + i) as u32);
                    }
                }
            }
        }
    }

    /// Calls `f(slot)` for every entry of every band `band` with key `keys[band]`, zero
    /// keys skipped: [`Main::find`] of each band, its memory read in three passes.
    ///
    /// At millions of documents a band's directory entry, its run of low keys and their
    /// slots are each a cache (and TLB) miss. Band by band, each miss waits for the one
    /// before it (the run's bounds decide the scan's branches): 18% of the server's CPU
    /// per check at 1.9M stored, nearly all of it on two loads. So the directory entries
    /// of all the bands are read first, then the first low key and slot of every run,
    /// loads that do not depend on each other and so overlap; the scans then hit the cache.
    fn find_bands(&self, keys: &BandKeys, mut f: impl FnMut(u32)) {
        let shift = 32 - self.dir_bits;
        let mut runs = [(0usize, 0usize); BANDS];
        for ((b, &key), run) in self.bands.iter().zip(keys).zip(&mut runs) {
            if key != 0 {
                let bucket = (u64::from(key) >> shift) as usize;
                *run = (b.dir[bucket] as usize, b.dir[bucket + 1] as usize);
            }
        }
        let mut touched = 0u64;
        for (b, &(from, to)) in self.bands.iter().zip(&runs) {
            if from < to {
                let low = match &b.low {
                    Low::Full(k) => u64::from(k[from]),
                    Low::Half(l) => u64::from(l[from]),
                };
                touched ^= low ^ b.slots.get(from);
            }
        }
        std::hint::black_box(touched);
        for ((b, &key), &(from, to)) in self.bands.iter().zip(keys).zip(&runs) {
            if from == to {
                continue;
            }
            match &b.low {
                Low::Full(k) => {
                    for (i, &k) in k[from..to].iter().enumerate() {
                        if k == key {
                            f(b.slots.get(from + i) as u32);
                        }
                    }
                }
                Low::Half(lows) => {
                    let low = key as u16;
                    for (i, &l) in lows[from..to].iter().enumerate() {
                        if l == low {
                            f(b.slots.get(from + i) as u32);
                        }
                    }
                }
            }
        }
    }

    /// Band `band`'s entries in key order, as `(key, slot)`.
    fn entries(&self, band: usize) -> Entries<'_> {
        Entries {
            band: &self.bands[band],
            shift: 32 - self.dir_bits,
            bucket: 0,
            at: 0,
        }
    }
}

/// The entries of one band of a main part, in key order: the directory walked beside the
/// low keys (a rebuild reads every entry of every band this way).
struct Entries<'a> {
    band: &'a MainBand,
    shift: u32,
    bucket: usize,
    at: usize,
}

impl Iterator for Entries<'_> {
    type Item = (u32, u32);

    #[inline]
    fn next(&mut self) -> Option<(u32, u32)> {
        let b = self.band;
        let i = self.at;
        let key = match &b.low {
            Low::Full(keys) => *keys.get(i)?,
            Low::Half(lows) => {
                let low = *lows.get(i)?;
                // The bucket holding entry `i`: the first whose run ends after it.
                while b.dir[self.bucket + 1] as usize <= i {
                    self.bucket += 1;
                }
                (self.bucket as u32) << self.shift | u32::from(low)
            }
        };
        self.at += 1;
        Some((key, b.slots.get(i) as u32))
    }
}

/// The directory bits of a main part of `n` documents: about one entry a bucket, at
/// least 4 bits and at most [`MAX_DIR_BITS`].
fn dir_bits(n: usize) -> u32 {
    (usize::BITS - n.leading_zeros()).clamp(4, MAX_DIR_BITS)
}

/// A main part of `ids` (by slot) whose band `b` holds the entries `entries(b)` (sorted
/// by key, then slot). Each band is built as its entries come, on the pool, so no more
/// than a band or two of entries exist at once, whatever the caller merges or sorts.
fn build<I>(ids: Vec<u64>, entries: impl Fn(usize) -> I + Sync + Send) -> Main
where
    I: Iterator<Item = (u32, u32)>,
{
    let n = ids.len();
    let dir_bits = dir_bits(n);
    let built = crate::par::map((0..BANDS).collect(), |band| {
        MainBand::from_sorted(entries(band), dir_bits, n)
    });
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_unstable_by_key(|&s| ids[s as usize]);
    let by_id = Packed::from_fn(n, n as u64, |i| u64::from(order[i]));
    Main {
        dir_bits,
        bands: built,
        ids,
        by_id,
    }
}

impl MainBand {
    /// The band of `entries` (sorted by key, then slot; about `n` of them, slots at most
    /// `n`) with a directory on the top `dir_bits` bits of the keys, in one pass.
    fn from_sorted(entries: impl Iterator<Item = (u32, u32)>, dir_bits: u32, n: usize) -> MainBand {
        let mut dir = Directory::new(dir_bits);
        let half = dir_bits >= LOW_BITS;
        let (mut full, mut lows) = (Vec::new(), Vec::new());
        if half {
            lows.reserve(n);
        } else {
            full.reserve(n);
        }
        let slots = Packed::collect(
            n as u64,
            n,
            entries.map(|(key, slot)| {
                dir.push(key);
                if half {
                    lows.push(key as u16);
                } else {
                    full.push(key);
                }
                u64::from(slot)
            }),
        );
        let dir = dir.finish();
        let low = if half {
            Low::Half(lows)
        } else {
            Low::Full(full)
        };
        MainBand { dir, low, slots }
    }
}

/// One consistent state; queries run on it, never on anything mutable.
#[derive(Debug)]
struct Snap {
    main: Arc<Main>,
    frozen: Arc<Level>,
    mid: Arc<Level>,
    /// A full top level being folded into the middle one on another thread.
    sealed: Arc<Level>,
    top: Arc<Level>,
}

impl Snap {
    fn empty() -> Snap {
        Snap {
            main: Arc::new(Main::empty()),
            frozen: Arc::new(Level::empty()),
            mid: Arc::new(Level::empty()),
            sealed: Arc::new(Level::empty()),
            top: Arc::new(Level::empty()),
        }
    }

    fn levels(&self) -> [&Level; 4] {
        [&self.frozen, &self.mid, &self.sealed, &self.top]
    }

    /// The first slot of the middle level.
    fn mid_base(&self) -> usize {
        self.main.len() + self.frozen.keys.len()
    }

    /// The first slot of the top level.
    fn top_base(&self) -> usize {
        self.slots() - self.top.keys.len()
    }

    fn slots(&self) -> usize {
        self.main.len() + self.levels().iter().map(|l| l.keys.len()).sum::<usize>()
    }

    fn len(&self) -> usize {
        self.slots() - self.levels().iter().map(|l| l.removed.len()).sum::<usize>()
    }

    fn removed(&self, slot: u32) -> bool {
        removed_in(self.levels(), slot)
    }

    /// The level holding `slot` and its index there; `None` for the main part.
    fn level_of(&self, slot: u32) -> Option<(&Level, usize)> {
        let mut s = (slot as usize).checked_sub(self.main.len())?;
        for level in self.levels() {
            if s < level.keys.len() {
                return Some((level, s));
            }
            s -= level.keys.len();
        }
        None
    }

    fn id(&self, slot: u32) -> u64 {
        match self.level_of(slot) {
            Some((level, i)) => level.ids[i],
            None => self.main.ids[slot as usize],
        }
    }

    /// Calls `f(slot)` for every entry of the levels' bands with key `keys[band]`, zero
    /// keys skipped: [`Level::find`] of each level and band, in three passes as
    /// [`Main::find_bands`] reads. Each band of a large level is a directory entry, then a
    /// run of a few entries, two cache misses the one waiting for the other; band by band
    /// and level by level they did not overlap, and at 10M documents stored the levels took
    /// more of a query's time than the main part. So the directories are read first, then
    /// the first entry of every run is asked for, then the runs are scanned.
    fn find_levels(&self, keys: &BandKeys, mut f: impl FnMut(u32)) {
        let levels = self.levels();
        let mut runs = [[(0usize, 0usize); BANDS]; 4];
        for (level, runs) in levels.iter().zip(&mut runs) {
            if level.keys.is_empty() {
                continue;
            }
            for (band, (&key, run)) in keys.iter().zip(runs.iter_mut()).enumerate() {
                if key != 0 {
                    *run = level.run(band, key);
                }
            }
        }
        for (level, runs) in levels.iter().zip(&runs) {
            for (entries, &(from, to)) in level.bands.iter().zip(runs) {
                if from < to {
                    crate::hint::prefetch(&entries[from]);
                }
            }
        }
        for (level, runs) in levels.iter().zip(&runs) {
            for ((entries, &(from, to)), &key) in level.bands.iter().zip(runs).zip(keys) {
                if from < to {
                    scan_run(&entries[from..to], key, &mut f);
                }
            }
        }
    }

    /// The live documents whose keys agree with `keys` in some band: ids, increasing.
    fn candidates(&self, keys: &BandKeys) -> Vec<u64> {
        let mut slots = Vec::new();
        self.main.find_bands(keys, |s| slots.push(s));
        self.find_levels(keys, |s| slots.push(s));
        slots.sort_unstable();
        slots.dedup();
        let mut ids: Vec<u64> = slots
            .into_iter()
            .filter(|&s| !self.removed(s))
            .map(|s| self.id(s))
            .collect();
        ids.sort_unstable();
        ids
    }
}

/// Whether `slot` was removed in any of `levels`.
fn removed_in(levels: [&Level; 4], slot: u32) -> bool {
    levels
        .iter()
        .any(|l| !l.removed.is_empty() && l.removed.contains(&slot))
}

/// Documents by id with the band keys of their signatures, and the candidates of a query.
///
/// Ids are the caller's `u64` document ids; inserting an id that is present replaces its
/// keys. The `BandIndex` is the writer; [`BandIndex::reader`] gives query handles for
/// other threads, which see each write as soon as it returns and never wait.
pub struct BandIndex {
    snap: Arc<Snap>,
    published: Arc<ArcSwap<Snap>>,
    /// Slots of the live documents of the levels (the rest are found through `Main`).
    recent: IdMap,
    /// A main part being built on another thread, from this snapshot.
    pending: Option<(std::thread::JoinHandle<Main>, Arc<Snap>)>,
    /// The middle level with the sealed one folded in, being built on another thread.
    folding: Option<std::thread::JoinHandle<Level>>,
    background: bool,
    /// The top and middle levels' caps, when set for a test; else by the main part's size.
    caps: Option<(usize, usize)>,
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
        self.published.load().candidates(keys)
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

/// How far a top level may grow past its cap, in caps, while the previous one is still
/// being folded, before a write waits for that fold.
const TOP_SLACK: usize = 4;

impl BandIndex {
    /// An empty index.
    pub fn new() -> BandIndex {
        BandIndex::of(Snap::empty(), IdMap::default(), None)
    }

    /// The writer of `snap`.
    fn of(
        snap: Snap,
        recent: IdMap,
        pending: Option<(std::thread::JoinHandle<Main>, Arc<Snap>)>,
    ) -> BandIndex {
        let snap = Arc::new(snap);
        BandIndex {
            published: Arc::new(ArcSwap::new(Arc::clone(&snap))),
            snap,
            recent,
            pending,
            folding: None,
            background: true,
            caps: None,
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
        let main = build(ids, |band| {
            let mut entries: Vec<(u32, u32)> = docs
                .iter()
                .enumerate()
                .map(|(slot, (_, keys))| (keys[band], slot as u32))
                .collect();
            entries.sort_unstable();
            entries.into_iter()
        });
        let snap = Snap {
            main: Arc::new(main),
            ..Snap::empty()
        };
        Ok(BandIndex::of(snap, IdMap::default(), None))
    }

    /// Whether folds of the top level and rebuilds of the main part run on other threads
    /// (the default), as [`super::Corpus::background_rebuilds`].
    pub fn background_rebuilds(mut self, on: bool) -> BandIndex {
        self.background = on;
        self
    }

    /// The index with a top level of `top` writes and a middle level of `mid` (instead of
    /// caps that grow with the main part), so that small tests go through every fold and
    /// rebuild.
    #[doc(hidden)]
    pub fn with_level_caps(mut self, top: usize, mid: usize) -> BandIndex {
        self.caps = Some((top.max(1), mid.max(1)));
        self
    }

    fn top_cap(&self) -> usize {
        self.caps
            .map_or_else(|| top_cap(self.snap.main.len()), |(top, _)| top)
    }

    fn mid_cap(&self) -> usize {
        self.caps
            .map_or_else(|| mid_cap(self.snap.main.len()), |(_, mid)| mid)
    }

    /// The index as it is now, to write with [`BandSnapshot::write_to`] on any thread
    /// while writes go on (a few `Arc`s: nothing is copied).
    pub fn snapshot(&self) -> BandSnapshot {
        BandSnapshot(Arc::clone(&self.snap))
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
            total += level.keys.len();
            levels.push(level);
        }
        input.finish()?;
        let slots = levels.iter().flat_map(|l| {
            let entries = l.bands.iter().flatten().map(|e| e.1);
            l.removed.iter().copied().chain(entries)
        });
        if let Some(slot) = slots.into_iter().find(|&s| s as usize >= total) {
            return Err(invalid(format!("slot {slot} past the {total} slots")));
        }
        let [frozen, mid, top]: [Level; 3] =
            levels.try_into().map_err(|_| invalid("three levels"))?;
        let snap = Snap {
            main: Arc::new(main),
            frozen: Arc::new(frozen),
            mid: Arc::new(mid),
            sealed: Arc::new(Level::empty()),
            top: Arc::new(top),
        };
        // The rebuild covered the main part and the frozen level only, as when it began.
        // A frozen level of removals alone is rebuilt too: left in place, the next
        // level frozen over it would drop its tombstones and bring those documents back.
        let pending = (snap.frozen.weight() > 0).then(|| {
            let base = Arc::new(Snap {
                main: Arc::clone(&snap.main),
                frozen: Arc::clone(&snap.frozen),
                ..Snap::empty()
            });
            let job = Arc::clone(&base);
            (std::thread::spawn(move || build_main(&job)), base)
        });
        let recent = recent_of(&snap);
        Ok(BandIndex::of(snap, recent, pending))
    }

    /// Waits for the fold and the rebuild running in the background, if any, and
    /// installs them.
    pub fn finish_rebuild(&mut self) {
        self.finish_fold();
        if let Some((handle, base)) = self.pending.take() {
            self.install(handle, &base);
        }
    }

    /// A query handle for other threads.
    pub fn reader(&self) -> BandIndexReader {
        BandIndexReader {
            published: Arc::clone(&self.published),
        }
    }

    /// Documents stored.
    pub fn len(&self) -> usize {
        self.snap.len()
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `id` is stored.
    pub fn contains(&self, id: u64) -> bool {
        self.slot_of(&self.snap.top, id).is_some()
    }

    /// Bytes of memory held for the bands, ids and recent changes.
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

    /// Every stored document whose keys agree with `keys` in some band (a zero key
    /// agrees with nothing), by id.
    pub fn candidates(&self, keys: &BandKeys) -> Vec<u64> {
        self.snap.candidates(keys)
    }

    /// Stores `id` with `keys`; whether it replaced a stored document.
    pub fn insert(&mut self, id: u64, keys: &BandKeys) -> Result<bool> {
        let mut replaced = false;
        self.write(|ix, top| {
            replaced = ix.remove_in(top, id);
            ix.add_in(top, id, keys, true)
        })?;
        Ok(replaced)
    }

    /// Stores every `(id, keys)`, in order (a later copy of an id wins): a few inserted
    /// one by one into the top level, up to a few top levels' worth sorted into it, more
    /// sorted straight into the middle level.
    pub fn insert_bulk(&mut self, docs: &[(u64, BandKeys)]) -> Result<()> {
        let cap = self.top_cap();
        if docs.len() <= cap / 4 {
            return self.write(|ix, top| {
                for (id, keys) in docs {
                    ix.remove_in(top, *id);
                    ix.add_in(top, *id, keys, true)?;
                }
                Ok(())
            });
        }
        if docs.len() <= TOP_SLACK * cap {
            // The fold then runs beside the writer, as for single writes.
            return self.write(|ix, top| {
                let from = top.keys.len();
                let first = ix.snap.top_base() + from;
                for (id, keys) in docs {
                    ix.remove_in(top, *id);
                    ix.add_in(top, *id, keys, false)?;
                }
                top.dirs.clear();
                for (band, entries) in top.bands.iter_mut().enumerate() {
                    let mut new: Vec<(u32, u32)> = top.keys[from..]
                        .iter()
                        .enumerate()
                        .map(|(i, keys)| (keys[band], (first + i) as u32))
                        .collect();
                    new.sort_unstable();
                    *entries = merge(entries.iter().copied(), new);
                }
                Ok(())
            });
        }
        self.poll();
        // The middle level is folded here, so the one being folded has to be in it.
        self.finish_fold();
        let mut top = (*self.snap.top).clone();
        for (id, keys) in docs {
            self.remove_in(&mut top, *id);
            if let Err(e) = self.add_in(&mut top, *id, keys, false) {
                self.recent = recent_of(&self.snap);
                return Err(e);
            }
        }
        let level = folded(
            &self.snap.mid,
            &top,
            self.snap.mid_base(),
            self.pending.is_none(),
        );
        self.install_fold(level, Level::empty());
        Ok(())
    }

    /// Removes `id`; whether it was stored.
    pub fn remove(&mut self, id: u64) -> bool {
        let mut was = false;
        // Removal cannot fail.
        let _ = self.write(|ix, top| {
            was = ix.remove_in(top, id);
            Ok(())
        });
        was
    }

    /// Removes every id in `ids`; how many were stored.
    pub fn remove_bulk(&mut self, ids: &[u64]) -> usize {
        let mut n = 0;
        let _ = self.write(|ix, top| {
            n = ids.iter().filter(|&&id| ix.remove_in(top, id)).count();
            Ok(())
        });
        n
    }

    /// Runs `f` on a copy of the top level, then publishes it; a full top level is sealed
    /// and folded into the middle one on another thread, while the next fills.
    fn write(&mut self, f: impl FnOnce(&mut BandIndex, &mut Level) -> Result<()>) -> Result<()> {
        self.poll();
        if self.folding.is_some() && self.snap.top.weight() > TOP_SLACK * self.top_cap() {
            // Each write copies the top level: past this, waiting for the fold costs less.
            self.finish_fold();
        }
        let mut top = (*self.snap.top).clone();
        if let Err(e) = f(self, &mut top) {
            self.recent = recent_of(&self.snap);
            return Err(e);
        }
        if top.weight() > self.top_cap() && self.folding.is_none() {
            self.seal(top);
        } else {
            self.publish(Snap {
                main: Arc::clone(&self.snap.main),
                frozen: Arc::clone(&self.snap.frozen),
                mid: Arc::clone(&self.snap.mid),
                sealed: Arc::clone(&self.snap.sealed),
                top: Arc::new(top),
            });
        }
        Ok(())
    }

    fn publish(&mut self, snap: Snap) {
        self.snap = Arc::new(snap);
        self.published.store(Arc::clone(&self.snap));
    }

    /// The live slot of `id`, with `top` as the top level so far.
    fn slot_of(&self, top: &Level, id: u64) -> Option<u32> {
        match self.recent.get(&id) {
            Some(&slot) => Some(slot),
            None => {
                let s = &self.snap;
                s.main
                    .position(id)
                    .filter(|&p| !removed_in([&s.frozen, &s.mid, &s.sealed, top], p))
            }
        }
    }

    /// Removes `id` in `top`; whether it was stored.
    fn remove_in(&mut self, top: &mut Level, id: u64) -> bool {
        let Some(slot) = self.slot_of(top, id) else {
            return false;
        };
        self.recent.remove(&id);
        top.removed.insert(slot);
        true
    }

    /// Adds `id` with `keys` in a new slot of `top` (and its bands, with `index`).
    fn add_in(&mut self, top: &mut Level, id: u64, keys: &BandKeys, index: bool) -> Result<()> {
        let next = self.snap.top_base() + top.keys.len();
        let slot = u32::try_from(next).ok().filter(|&s| s < u32::MAX).ok_or(
            Error::TooManyFingerprints {
                got: next + 1,
                max: u32::MAX as usize - 1,
            },
        )?;
        top.keys.push(*keys);
        top.ids.push(id);
        if index {
            // The directories would no longer match (the top level has none, unless it
            // was read from a snapshot).
            top.dirs.clear();
            for (entries, &key) in top.bands.iter_mut().zip(keys) {
                let at = entries.partition_point(|e| *e < (key, slot));
                entries.insert(at, (key, slot));
            }
        }
        self.recent.insert(id, slot);
        Ok(())
    }

    /// Publishes `top` (with its bands filled) as the sealed level under a new empty top,
    /// and folds it into the middle level: on another thread by default. No fold may be
    /// running.
    fn seal(&mut self, top: Level) {
        let snap = Arc::clone(&self.snap);
        self.publish(Snap {
            main: Arc::clone(&snap.main),
            frozen: Arc::clone(&snap.frozen),
            mid: Arc::clone(&snap.mid),
            sealed: Arc::new(top),
            top: Arc::new(Level::empty()),
        });
        let snap = Arc::clone(&self.snap);
        if self.background {
            // On its own thread and not the pool: a rebuild may keep the pool busy for
            // seconds, and the writer would wait on the fold behind it.
            self.folding = Some(std::thread::spawn(move || {
                folded(&snap.mid, &snap.sealed, snap.mid_base(), false)
            }));
        } else {
            let level = folded(
                &snap.mid,
                &snap.sealed,
                snap.mid_base(),
                self.pending.is_none(),
            );
            self.install_fold(level, Level::empty());
        }
    }

    /// Waits for the fold running in the background, if any, and installs it.
    fn finish_fold(&mut self) {
        if let Some(handle) = self.folding.take() {
            let level = match handle.join() {
                Ok(level) => level,
                Err(_) => {
                    let snap = &self.snap;
                    folded(&snap.mid, &snap.sealed, snap.mid_base(), false)
                }
            };
            let top = (*self.snap.top).clone();
            self.install_fold(level, top);
        }
    }

    /// Publishes `level` as the middle level (the old one and the sealed one folded) under
    /// `top`. When it outgrows its share of the index, it becomes the frozen level of a
    /// rebuild of the main part instead (as [`super::Corpus`] does); when there is nothing
    /// to overlap the rebuild with, or rebuilds are not in the background, that is done
    /// now.
    fn install_fold(&mut self, level: Level, top: Level) {
        let snap = Arc::clone(&self.snap);
        let due = level.weight() > self.mid_cap() && self.pending.is_none();
        if !due {
            self.publish(Snap {
                main: Arc::clone(&snap.main),
                frozen: Arc::clone(&snap.frozen),
                mid: Arc::new(level),
                sealed: Arc::new(Level::empty()),
                top: Arc::new(top),
            });
            return;
        }
        if !(self.background && snap.main.len() > 0) {
            let all = Snap {
                main: Arc::clone(&snap.main),
                frozen: Arc::clone(&snap.frozen),
                mid: Arc::new(level),
                sealed: Arc::new(Level::empty()),
                top: Arc::new(top),
            };
            let main = build_main(&all);
            self.publish(Snap {
                main: Arc::new(main),
                ..Snap::empty()
            });
            // Every document is in the main part now, each in a new slot.
            self.recent = IdMap::default();
            return;
        }
        self.publish(Snap {
            main: Arc::clone(&snap.main),
            frozen: Arc::new(level),
            mid: Arc::new(Level::empty()),
            sealed: Arc::new(Level::empty()),
            top: Arc::new(top),
        });
        let base = Arc::new(Snap {
            main: Arc::clone(&snap.main),
            frozen: Arc::clone(&self.snap.frozen),
            ..Snap::empty()
        });
        let job = Arc::clone(&base);
        let handle = std::thread::spawn(move || build_main(&job));
        self.pending = Some((handle, base));
    }

    /// Installs the background fold and the background rebuild, each if it is done. A
    /// rebuild waits for the fold: it renumbers the levels the fold reads.
    fn poll(&mut self) {
        if self.folding.as_ref().is_some_and(|h| h.is_finished()) {
            self.finish_fold();
        }
        if self.folding.is_none()
            && self
                .pending
                .as_ref()
                .is_some_and(|(handle, _)| handle.is_finished())
        {
            self.finish_rebuild();
        }
    }

    /// Installs the main part built by `handle` from `base`: the levels written since are
    /// renumbered after it, and their tombstones of older documents moved to those
    /// documents' new slots. No fold may be running.
    fn install(&mut self, handle: std::thread::JoinHandle<Main>, base: &Snap) {
        let main = match handle.join() {
            Ok(main) => main,
            Err(_) => build_main(base),
        };
        let snap = Arc::clone(&self.snap);
        let old = snap.mid_base();
        let new = main.len();
        let shift = |slot: u32| (slot as usize - old + new) as u32;
        let moved = |slot: u32| -> Option<u32> {
            if (slot as usize) < old {
                main.position(base.id(slot))
            } else {
                Some(shift(slot))
            }
        };
        let renumber = |level: &Level| Level {
            bands: level
                .bands
                .iter()
                .map(|b| b.iter().map(|&(key, slot)| (key, shift(slot))).collect())
                .collect(),
            // Keys and their order are unchanged.
            dirs: level.dirs.clone(),
            keys: level.keys.clone(),
            ids: level.ids.clone(),
            removed: level.removed.iter().filter_map(|&s| moved(s)).collect(),
        };
        let (mid, sealed, top) = (
            renumber(&snap.mid),
            renumber(&snap.sealed),
            renumber(&snap.top),
        );
        self.recent = self
            .recent
            .iter()
            .filter(|&(_, &slot)| slot as usize >= old)
            .map(|(&id, &slot)| (id, shift(slot)))
            .collect();
        self.publish(Snap {
            main: Arc::new(main),
            frozen: Arc::new(Level::empty()),
            mid: Arc::new(mid),
            sealed: Arc::new(sealed),
            top: Arc::new(top),
        });
    }
}

/// Level `mid`, whose slots start at `base`, with `top` (the level after it, whose bands
/// need not be filled) folded in: entries of removed documents dropped, tombstones kept.
/// The bands are merged in parallel when `parallel`.
fn folded(mid: &Level, top: &Level, base: usize, parallel: bool) -> Level {
    let span = mid.keys.len() + top.keys.len();
    // The removed slots among the two levels' own, as bits: a hash lookup for each of
    // the twenty bands' entries was most of a fold's time.
    let mut gone = vec![0u64; span.div_ceil(64)];
    for &slot in mid.removed.iter().chain(&top.removed) {
        if let Some(i) = (slot as usize).checked_sub(base).filter(|&i| i < span) {
            gone[i / 64] |= 1 << (i % 64);
        }
    }
    let gone = &gone;
    let live = move |slot: u32| {
        let i = slot as usize - base;
        gone[i / 64] & (1 << (i % 64)) == 0
    };
    let top_base = (base + mid.keys.len()) as u32;
    let band = |band: usize| {
        let mut new: Vec<(u32, u32)> = top
            .keys
            .iter()
            .enumerate()
            .map(|(i, keys)| (keys[band], top_base + i as u32))
            .filter(|&(_, slot)| live(slot))
            .collect();
        new.sort_unstable();
        merge(
            mid.bands[band]
                .iter()
                .copied()
                .filter(|&(_, slot)| live(slot)),
            new,
        )
    };
    let bands = if parallel {
        crate::par::map((0..BANDS).collect(), band)
    } else {
        (0..BANDS).map(band).collect()
    };
    let mut level = Level {
        bands,
        dirs: Vec::new(),
        keys: Vec::with_capacity(span),
        ids: Vec::with_capacity(span),
        removed: mid.removed.clone(),
    };
    level.keys.extend(&mid.keys);
    level.keys.extend(&top.keys);
    level.ids.extend(&mid.ids);
    level.ids.extend(&top.ids);
    level.removed.extend(&top.removed);
    level.indexed()
}

/// Two sorted runs of entries merged.
fn merge(old: impl Iterator<Item = (u32, u32)>, new: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    Merge {
        old: old.peekable(),
        new: new.into_iter().peekable(),
    }
    .collect()
}

/// A main part of every live document of `snap`, renumbered in slot order. Each band
/// merges the old main part's sorted entries with the levels' (no sort of the whole), and
/// is built as the merge runs.
///
/// An entry of the old main part keeps its slot less the removed slots before it. That is
/// found in the sorted list of those removals, which is short and stays in the cache,
/// rather than in a table of every slot: read in key order, the slots are random, and at a
/// million documents looking each up in such a table was most of a rebuild's time.
fn build_main(snap: &Snap) -> Main {
    let main_len = snap.main.len();
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
    for (slot, &id) in snap.main.ids.iter().enumerate() {
        if removed.next_if(|&&g| g as usize == slot).is_none() {
            ids.push(id);
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
    build(ids, |band| {
        let mut recent: Vec<(u32, u32)> = Vec::new();
        let mut base = 0;
        for level in levels {
            recent.extend(level.keys.iter().enumerate().filter_map(|(i, keys)| {
                let new = recent_slot[base + i];
                (new != u32::MAX).then_some((keys[band], new))
            }));
            base += level.keys.len();
        }
        recent.sort_unstable();
        let old = snap.main.entries(band).filter_map(move |(key, slot)| {
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

/// Two sorted runs of entries merged, as they are read.
struct Merge<A: Iterator<Item = (u32, u32)>, B: Iterator<Item = (u32, u32)>> {
    old: std::iter::Peekable<A>,
    new: std::iter::Peekable<B>,
}

impl<A, B> Iterator for Merge<A, B>
where
    A: Iterator<Item = (u32, u32)>,
    B: Iterator<Item = (u32, u32)>,
{
    type Item = (u32, u32);

    #[inline]
    fn next(&mut self) -> Option<(u32, u32)> {
        match (self.old.peek(), self.new.peek()) {
            (Some(o), Some(n)) if n < o => self.new.next(),
            (Some(_), _) => self.old.next(),
            (None, _) => self.new.next(),
        }
    }
}

/// The id → slot map of a snapshot's live documents in its levels.
fn recent_of(snap: &Snap) -> IdMap {
    (snap.main.len()..snap.slots())
        .map(|s| s as u32)
        .filter(|&s| !snap.removed(s))
        .map(|s| (snap.id(s), s))
        .collect()
}

/// The first word of a snapshot: "NDBANDS" and the format's version.
const SNAPSHOT_MAGIC: u64 = u64::from_le_bytes(*b"NDBANDS1");
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
        out.slice(&main.ids, u64::to_le_bytes)?;
        write_packed(&mut out, &main.by_id)?;
        for band in &main.bands {
            out.slice(&band.dir, u32::to_le_bytes)?;
            match &band.low {
                Low::Full(keys) => out.slice(keys, u32::to_le_bytes)?,
                Low::Half(lows) => out.slice(lows, u16::to_le_bytes)?,
            }
            write_packed(&mut out, &band.slots)?;
        }
        // Three levels, as the format has: a sealed level is written with the top one.
        let snap = &self.0;
        let upper = if snap.sealed.keys.is_empty() && snap.sealed.removed.is_empty() {
            std::borrow::Cow::Borrowed(&*snap.top)
        } else {
            let base = snap.mid_base() + snap.mid.keys.len();
            std::borrow::Cow::Owned(folded(&snap.sealed, &snap.top, base, false))
        };
        for level in [&*snap.frozen, &*snap.mid, &*upper] {
            out.slice(&level.ids, u64::to_le_bytes)?;
            let keys: Vec<u32> = level.keys.iter().flatten().copied().collect();
            out.slice(&keys, u32::to_le_bytes)?;
            for entries in &level.bands {
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
    let ids = input.vec(MAX_SLOTS, "ids", u64::from_le_bytes)?;
    let n = ids.len();
    let by_id = read_packed(input, "id order")?;
    if by_id.len != n {
        return Err(invalid("the id order does not cover the ids"));
    }
    let mut bands = Vec::with_capacity(BANDS);
    for _ in 0..BANDS {
        let dir = input.vec((1 << dir_bits) + 1, "directory", u32::from_le_bytes)?;
        let low = if dir_bits >= LOW_BITS {
            Low::Half(input.vec(n as u64, "keys", u16::from_le_bytes)?)
        } else {
            Low::Full(input.vec(n as u64, "keys", u32::from_le_bytes)?)
        };
        let slots = read_packed(input, "slots")?;
        let entries = match &low {
            Low::Full(v) => v.len(),
            Low::Half(v) => v.len(),
        };
        let sound = dir.len() == (1 << dir_bits) + 1
            && dir[0] == 0
            && dir.windows(2).all(|w| w[0] <= w[1])
            && dir.last().is_some_and(|&l| l as usize == entries)
            && slots.len == entries;
        if !sound {
            return Err(invalid("a band's directory does not match its entries"));
        }
        bands.push(MainBand { dir, low, slots });
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
    Ok(Level {
        bands,
        dirs: Vec::new(),
        keys,
        ids,
        removed: removed.into_iter().collect(),
    }
    .indexed())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        (build(ids, |band| bands[band].iter().copied()), docs)
    }

    /// A level's lookup through its directories finds what the binary search over the
    /// whole band finds: keys over all 32 bits with repeats, the extremes, and keys absent.
    #[test]
    fn level_directories_find_what_the_search_finds() {
        let mut seed = 11;
        for n in [LEVEL_DIR_MIN - 1, LEVEL_DIR_MIN, 5000, 40_000] {
            let (_, docs) = main_of(n, (n as u64 / 3).max(2), &mut seed);
            let mut level = Level::empty();
            for (band, entries) in level.bands.iter_mut().enumerate() {
                entries.extend(docs.iter().enumerate().map(|(s, k)| (k[band], s as u32)));
                // The extremes of the key range, in every bucket's edge.
                entries.extend([(0, n as u32), (u32::MAX, n as u32 + 1)]);
                entries.sort_unstable();
            }
            let plain = level.clone();
            let indexed = level.indexed();
            assert_eq!(
                indexed.dirs.iter().any(|d| !d.is_empty()),
                n + 2 >= LEVEL_DIR_MIN
            );
            let (_, others) = main_of(50, 1 << 20, &mut seed);
            let queries = docs.iter().take(300).chain(&others).copied();
            for q in queries.chain([[0; BANDS], [u32::MAX; BANDS]]) {
                for (band, &key) in q.iter().enumerate() {
                    let (mut want, mut got) = (Vec::new(), Vec::new());
                    plain.find(band, key, |s| want.push(s));
                    indexed.find(band, key, |s| got.push(s));
                    assert_eq!(got, want, "n {n}, band {band}, key {key}");
                }
            }
        }
    }

    /// The lookup of all the levels at once finds what the plain one finds level by level
    /// and band by band, in the same order: levels with directories and without, empty.
    #[test]
    fn find_levels_is_find_of_each_level_and_band() {
        let mut seed = 13;
        let level_of = |docs: &[BandKeys], first: u32| {
            let mut level = Level::empty();
            for (band, entries) in level.bands.iter_mut().enumerate() {
                entries.extend(
                    docs.iter()
                        .enumerate()
                        .map(|(s, k)| (k[band], first + s as u32)),
                );
                entries.sort_unstable();
            }
            level.keys = docs.to_vec();
            level.ids = (0..docs.len() as u64)
                .map(|i| u64::from(first) + i)
                .collect();
            level
        };
        let (main, _) = main_of(100, 40, &mut seed);
        let (_, frozen) = main_of(5000, 1500, &mut seed);
        let (_, mid) = main_of(3000, 900, &mut seed);
        let (_, top) = main_of(300, 90, &mut seed);
        let snap = Snap {
            main: Arc::new(main),
            frozen: Arc::new(level_of(&frozen, 100).indexed()),
            mid: Arc::new(level_of(&mid, 5100).indexed()),
            sealed: Arc::new(Level::empty()),
            top: Arc::new(level_of(&top, 8100)),
        };
        assert!(snap.frozen.dirs.iter().all(|d| !d.is_empty()));
        assert!(snap.top.dirs.iter().all(|d| d.is_empty()));
        let (_, others) = main_of(50, 1 << 20, &mut seed);
        let queries = frozen.iter().step_by(37).chain(mid.iter().step_by(29));
        let mut found = 0;
        for q in queries.chain(&top).chain(&others) {
            let mut want = Vec::new();
            for level in snap.levels() {
                for (band, &key) in q.iter().enumerate() {
                    if key != 0 {
                        level.find(band, key, |s| want.push(s));
                    }
                }
            }
            let mut got = Vec::new();
            snap.find_levels(q, |s| got.push(s));
            assert_eq!(got, want);
            found += got.len();
        }
        // Every level's own documents were asked for.
        assert!(found > 300 + 5000 / 37 + 3000 / 29);
    }

    /// The fast lookup of all the bands finds what the plain one finds band by band, in
    /// the same order: small parts (all 32 key bits kept) and large (low 16 bits kept).
    #[test]
    fn find_bands_is_find_of_each_band() {
        let mut seed = 7;
        for (n, alphabet) in [(0, 3), (1, 3), (50, 4), (3000, 40), (40_000, 3000)] {
            let (main, docs) = main_of(n, alphabet, &mut seed);
            assert_eq!(
                matches!(main.bands[0].low, Low::Half(_)),
                main.dir_bits >= LOW_BITS
            );
            let (_, others) = main_of(50, alphabet, &mut seed);
            for q in docs.iter().take(200).chain(&others) {
                let mut plain = Vec::new();
                for (band, &key) in q.iter().enumerate() {
                    if key != 0 {
                        main.find(band, key, |s| plain.push(s));
                    }
                }
                let mut fast = Vec::new();
                main.find_bands(q, |s| fast.push(s));
                assert_eq!(fast, plain, "n {n}");
            }
        }
    }
}
