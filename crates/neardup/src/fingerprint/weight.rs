//! Vote weights: inverse document frequencies from a corpus, and the quantisation that
//! turns real weights into the integer votes of the kernel.

use std::collections::HashMap;

use super::kernel::{simhash_adjusted_runs, simhash_weighted, takes_off_by_runs};
use crate::error::{Error, Result};
use crate::hint::prefetch;

/// Quantised votes run from 1 to this for the heaviest feature of a document.
const VOTE_MAX: f32 = 1023.0;

/// The weighted vote of `(feature hash, weight)` pairs: weights are scaled so the heaviest
/// votes [`VOTE_MAX`] and rounded (a feature weighing less than 1/2046 of the heaviest
/// votes nothing), then counted by [`simhash_weighted`].
pub(crate) fn vote(votes: &[(u64, f32)]) -> u64 {
    let max = votes.iter().map(|v| v.1).fold(0.0f32, f32::max);
    if max.is_nan() || max <= 0.0 {
        return 0;
    }
    simhash_weighted(
        votes
            .iter()
            .map(|&(h, w)| (h, (w / max * VOTE_MAX).round() as u32)),
    )
}

/// The tf vote (`1 + ln(count)` per distinct feature, quantised as [`vote`] does) of a
/// list of feature hashes, without sorting (see [`TfPlan`]).
pub(crate) fn tf_vote(hashes: &[u64], scratch: &mut TfScratch) -> u64 {
    TfPlan::new(hashes, scratch).vote_with(hashes, |h| h, scratch)
}

/// The counting tables of [`TfPlan::new`] and the vote, kept from text to text: allocating
/// and zeroing them afresh cost more than the counting on short texts, and page faults on
/// long ones.
#[derive(Debug, Default)]
pub(crate) struct TfScratch {
    keys: Vec<u64>,
    again: Vec<u32>,
    /// Per slot of `keys`, repeats counted; all zero between texts.
    counts: Vec<u32>,
    /// Repeated features and their counts.
    more: Vec<(u64, u32)>,
    /// The hashes of one group of corrections.
    group: Vec<u64>,
    /// A long text's features, split (see [`SPLIT_FROM`]).
    parts: Vec<u64>,
}

/// How the tf vote of a list of features departs from the plain majority: each occurrence
/// votes `q1`, and each repeated feature is corrected down to its sub-linear weight. The
/// plan depends only on which features repeat, so the lanes of a wide fingerprint share it
/// (their hashes are a one-to-one function of the features').
pub(crate) struct TfPlan {
    q1: u32,
    /// (feature hash, weight to take off one occurrence); empty when nothing repeats.
    less: Vec<(u64, u32)>,
}

impl TfPlan {
    /// Duplicates are counted in an open-addressing table keyed by the hashes themselves
    /// (they are random already); nearly every feature occurs once.
    pub(crate) fn new(hashes: &[u64], scratch: &mut TfScratch) -> TfPlan {
        let plain = TfPlan {
            q1: 1,
            less: Vec::new(),
        };
        if hashes.is_empty() {
            return plain;
        }
        scratch.more.clear();
        let zeros = if hashes.len() >= SPLIT_FROM {
            let mut parts = std::mem::take(&mut scratch.parts);
            let mut zeros = 0;
            let mut start = 0;
            for end in split(hashes, &mut parts) {
                let part = &mut parts[start..end];
                zeros += if part.len() > CROWDED_PART {
                    repeats_sorted(part, &mut scratch.more)
                } else {
                    repeats(part, scratch)
                };
                start = end;
            }
            scratch.parts = parts;
            zeros
        } else {
            repeats(hashes, scratch)
        };
        let more = &mut scratch.more;
        if zeros > 1 {
            more.push((0, zeros));
        }
        if more.is_empty() {
            // Every feature once: equal weights, the plain majority.
            return plain;
        }
        let tf = |c: u32| 1.0 + (c as f32).ln();
        let most = more.iter().map(|m| m.1).max().unwrap_or(1);
        let max = tf(most);
        let quantise = |c: u32| (tf(c) / max * VOTE_MAX).round() as u32;
        let q1 = quantise(1);
        // Every occurrence votes q1; a feature seen c times should vote quantise(c) once.
        // q1·c ≥ quantise(c): 1 + ln c ≤ c, and q1 = 1023 / max ≥ 44 even for counts near
        // 2³², which leaves room for the rounding of both.
        let correction = |c: u32| q1 * c - quantise(c);
        // A correction is worked out once per count that occurs (counts below `SMALL`,
        // nearly all, are kept; 0 marks one not worked out yet, every count from 2 has a
        // positive correction): its logarithm costs more than the rest of a short text's
        // plan. The corrections are put in runs of equal value only where the vote goes
        // by runs; one feature at a time, their order does not matter (grouping them was
        // a thirtieth of fingerprinting the peers' corpus).
        let mut corrections = [0u32; SMALL];
        let mut taken = 0u64;
        let mut less: Vec<(u64, u32)> = Vec::with_capacity(more.len());
        for &(h, c) in more.iter() {
            let d = match corrections.get_mut(c as usize) {
                Some(known) if *known != 0 => *known,
                Some(known) => {
                    *known = correction(c);
                    *known
                }
                None => correction(c),
            };
            taken += u64::from(d);
            less.push((h, d));
        }
        if takes_off_by_runs(taken) {
            less = in_runs(more, &less);
        }
        TfPlan { q1, less }
    }

    /// The vote of `hashes` (the planned features, or their images under one
    /// one-to-one `rehash`, which the corrections go through too).
    pub(crate) fn vote_with(
        &self,
        hashes: &[u64],
        rehash: impl Fn(u64) -> u64,
        scratch: &mut TfScratch,
    ) -> u64 {
        if self.less.is_empty() {
            return super::simhash(hashes);
        }
        simhash_adjusted_runs(hashes, self.q1, &self.less, rehash, &mut scratch.group)
    }
}

/// Counts below this, nearly all, are grouped by a counting pass in [`in_runs`], and
/// their corrections kept once worked out in [`TfPlan::new`].
const SMALL: usize = 64;

/// `less`, the corrections of the features of `more` (item by item), grouped by count,
/// which makes equal corrections one run (they grow with the count): the counts below
/// [`SMALL`] placed by one counting pass, however many distinct counts there are, and
/// only the few larger ones sorted (sorting them all made fingerprinting the peers'
/// corpus 5–9% slower where the vote goes by runs).
fn in_runs(more: &[(u64, u32)], less: &[(u64, u32)]) -> Vec<(u64, u32)> {
    let mut starts = [0usize; SMALL + 1];
    for &(_, c) in more {
        if (c as usize) < SMALL {
            starts[c as usize + 1] += 1;
        }
    }
    for c in 1..=SMALL {
        starts[c] += starts[c - 1];
    }
    let mut runs = vec![(0, 0); starts[SMALL]];
    let mut large = Vec::new();
    for (&(_, c), &item) in more.iter().zip(less) {
        if (c as usize) < SMALL {
            runs[starts[c as usize]] = item;
            starts[c as usize] += 1;
        } else {
            large.push((c, item));
        }
    }
    large.sort_unstable_by_key(|&(c, _)| c);
    runs.extend(large.into_iter().map(|(_, item)| item));
    runs
}

/// Appends to `scratch.more` each non-zero feature `hashes` holds more than once, with its
/// count; returns how many hashes are 0 (a feature hash of 0 is counted apart, since key 0
/// marks an empty slot).
fn repeats(hashes: &[u64], scratch: &mut TfScratch) -> u32 {
    // At most a quarter full, so nearly every feature finds its slot at the first probe.
    // At half full, a quarter to a half of first probes collided, and the branch on them
    // mispredicted (one thread, in process, against half full: 422 → 458 MB/s on the
    // peers' corpus, 621 → 631 on natural text; an eighth full gained nothing more, and
    // lost 4% on natural text to clearing the table). Whether a feature was seen before
    // decides no branch: repeats are common in real text (a fifth of word pairs), and a
    // branch on them mispredicts. The slots of repeats are listed instead, and counted
    // afterwards.
    let cap = (4 * hashes.len()).next_power_of_two();
    let mask = cap - 1;
    let TfScratch {
        keys,
        again,
        counts,
        more,
        ..
    } = scratch;
    keys.clear();
    keys.resize(cap, 0);
    // `again` is written before it is read, slot by slot: it only grows, and is not
    // cleared.
    if again.len() < hashes.len() {
        again.resize(hashes.len(), 0);
    }
    // A table of `PREFETCH_FROM` slots and more would have many probes wait for memory:
    // its slots are fetched a few features ahead.
    let (listed, zeros) = if cap >= PREFETCH_FROM {
        insert::<true>(hashes, keys, again, mask)
    } else {
        insert::<false>(hashes, keys, again, mask)
    };
    let again = &again[..listed];
    if again.is_empty() {
        return zeros;
    }
    // `counts` only grows, and is left all zero: no clearing per text.
    if counts.len() < cap {
        counts.resize(cap, 0);
    }
    for &i in again {
        counts[i as usize] += 1;
    }
    // The first listing of a slot takes its count; the others find 0 and are written over
    // (no branch: which listing comes first follows no pattern).
    let from = more.len();
    more.resize(from + again.len(), (0, 0));
    let mut m = from;
    for &i in again {
        let c = std::mem::take(&mut counts[i as usize]);
        more[m] = (keys[i as usize], c + 1);
        m += usize::from(c > 0);
    }
    more.truncate(m);
    zeros
}

/// Texts of this many features or more are counted a part at a time.
///
/// A long text's table would outgrow the second-level cache, and each probe, and each
/// count of a repeat, would wait for memory (19 ns a feature above 65,536 features against
/// 5 ns below 4,096, in a microbenchmark of the natural corpus's text lengths with a fifth
/// of the features repeated). Split first by their top bits, which the table's slots do
/// not use, the features come in parts of about [`PART`], each counted in a table of at
/// most 32 KB, the size of the first-level cache here (parts of half as many measured the
/// same on the natural corpus's eleven longest texts); a feature's copies all land in the
/// same part.
const SPLIT_FROM: usize = 1 << 15;

/// Features per part of a split text, about.
const PART: usize = 1 << 10;

/// Parts of a split text longer than this are counted by sorting them ([`repeats_sorted`]).
///
/// A feature's copies all land in one part, so a text that repeats a few features
/// millions of times (a log of one line, a page of one word) makes a part of millions; its
/// table, four slots of a key and a count per feature of the part whatever their number
/// of distinct ones, took 6.3 GB to fingerprint a text of 100 MB of `a a a ...`. Sorted in
/// place, such a part needs nothing more than its copy.
const CROWDED_PART: usize = 64 * PART;

/// `hashes` grouped by their top bits into `parts` (a counting sort); the end of each
/// group in `parts`, in order.
fn split(hashes: &[u64], parts: &mut Vec<u64>) -> Vec<usize> {
    let groups = (hashes.len() / PART).next_power_of_two().max(2);
    let shift = 64 - groups.trailing_zeros();
    let mut ends = vec![0usize; groups];
    for &h in hashes {
        ends[(h >> shift) as usize] += 1;
    }
    let mut at = 0;
    for e in ends.iter_mut() {
        at += *e;
        *e = at - *e;
    }
    // `ends` holds each group's start here, and its end once the group is placed.
    parts.clear();
    parts.resize(hashes.len(), 0);
    for &h in hashes {
        let g = &mut ends[(h >> shift) as usize];
        parts[*g] = h;
        *g += 1;
    }
    ends
}

/// As [`repeats`], for a part of a split text (which may be reordered): sorted, each run
/// of one non-zero feature longer than one goes to `more` with its length; returns how
/// many features are 0.
fn repeats_sorted(part: &mut [u64], more: &mut Vec<(u64, u32)>) -> u32 {
    part.sort_unstable();
    let count = |run: &[u64]| u32::try_from(run.len()).unwrap_or(u32::MAX);
    let mut zeros = 0;
    for run in part.chunk_by(|a, b| a == b) {
        match run[0] {
            0 => zeros = count(run),
            h if run.len() > 1 => more.push((h, count(run))),
            _ => {}
        }
    }
    zeros
}

/// Tables of this many slots (256 KB) or more are probed with prefetches: texts of more
/// than 4,096 features, some 37 KB of English and up. Smaller tables stay in the
/// second-level cache, where prefetching only costs instructions.
const PREFETCH_FROM: usize = 1 << 15;

/// How many features ahead a table slot is prefetched.
const AHEAD: usize = 16;

/// Inserts the non-zero `hashes` into the table `keys` (of `mask + 1` slots, all empty),
/// listing in `again` the slot of every occurrence of a feature already in it; returns
/// how many it listed and how many hashes are 0. With `PREFETCH`, the slot of the feature
/// [`AHEAD`] places on is fetched into the cache.
#[inline(always)]
fn insert<const PREFETCH: bool>(
    hashes: &[u64],
    keys: &mut [u64],
    again: &mut [u32],
    mask: usize,
) -> (usize, u32) {
    let mut repeats = 0;
    let mut zeros = 0u32;
    for (t, &h) in hashes.iter().enumerate() {
        if PREFETCH {
            if let Some(slot) = hashes
                .get(t + AHEAD)
                .and_then(|&h| keys.get(h as usize & mask))
            {
                prefetch(slot);
            }
        }
        if h == 0 {
            zeros += 1;
            continue;
        }
        let mut i = h as usize & mask;
        let mut k = keys[i];
        // Neither empty nor the feature: `k ^ h` and `k` both non-zero, one branch
        // (taken only on a collision) where `k != h && k != 0` compiles to two.
        while (k ^ h).min(k) != 0 {
            i = (i + 1) & mask;
            k = keys[i];
        }
        keys[i] = h;
        again[repeats] = i as u32;
        repeats += usize::from(k == h);
    }
    (repeats, zeros)
}

/// Inverse document frequencies of features, counted on a corpus: rare features weigh
/// more. `idf = ln((1 + docs) / (1 + df)) + 1`; a feature the corpus never had gets the
/// largest value, `ln(1 + docs) + 1`.
#[derive(Clone, Debug, PartialEq)]
pub struct Idf {
    docs: u64,
    df: HashMap<u64, u32>,
}

/// First bytes of a serialised [`Idf`].
const MAGIC: &[u8; 8] = b"NDUPIDF1";

impl Idf {
    /// The idf of `feature`.
    pub fn idf(&self, feature: u64) -> f32 {
        let df = self.df.get(&feature).copied().unwrap_or(0);
        ((1.0 + self.docs as f64) / (1.0 + f64::from(df))).ln() as f32 + 1.0
    }

    /// Documents counted.
    pub fn docs(&self) -> u64 {
        self.docs
    }

    /// Features in the table.
    pub fn len(&self) -> usize {
        self.df.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.df.is_empty()
    }

    /// The table as bytes: `NDUPIDF1`, then little-endian `docs: u64`, `count: u64`, and
    /// `count` pairs of `feature: u64, df: u32`, features increasing.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut entries: Vec<(u64, u32)> = self.df.iter().map(|(&f, &d)| (f, d)).collect();
        entries.sort_unstable();
        let mut out = Vec::with_capacity(24 + entries.len() * 12);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.docs.to_le_bytes());
        out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        for (f, d) in entries {
            out.extend_from_slice(&f.to_le_bytes());
            out.extend_from_slice(&d.to_le_bytes());
        }
        out
    }

    /// A table from [`Idf::to_bytes`]; errors on anything else.
    pub fn from_bytes(bytes: &[u8]) -> Result<Idf> {
        let bad = |why: &str| Error::InvalidIdf(why.to_string());
        let rest = bytes
            .strip_prefix(MAGIC)
            .ok_or_else(|| bad("not an idf table"))?;
        if rest.len() < 16 {
            return Err(bad("truncated header"));
        }
        let u64_at = |b: &[u8]| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[..8]);
            u64::from_le_bytes(w)
        };
        let docs = u64_at(rest);
        let count = u64_at(&rest[8..]);
        let body = &rest[16..];
        if Some(body.len() as u64) != count.checked_mul(12) {
            return Err(bad("length does not match its entry count"));
        }
        let mut df = HashMap::with_capacity(count as usize);
        for e in body.chunks_exact(12) {
            let mut d = [0u8; 4];
            d.copy_from_slice(&e[8..]);
            let d = u32::from_le_bytes(d);
            if u64::from(d) > docs {
                return Err(bad("a document frequency exceeds the document count"));
            }
            df.insert(u64_at(e), d);
        }
        Ok(Idf { docs, df })
    }
}

/// Counts document frequencies to build an [`Idf`].
#[derive(Clone, Debug, Default)]
pub struct IdfBuilder {
    docs: u64,
    df: HashMap<u64, u32>,
}

impl IdfBuilder {
    /// An empty count.
    pub fn new() -> IdfBuilder {
        IdfBuilder::default()
    }

    /// Counts one document from its distinct features
    /// ([`Fingerprinter::feature_set`](super::Fingerprinter::feature_set)).
    pub fn add(&mut self, distinct_features: &[u64]) {
        self.docs += 1;
        for &f in distinct_features {
            *self.df.entry(f).or_insert(0) += 1;
        }
    }

    /// Counts documents by their texts, with `fp`'s features (what `neardup idf` and the
    /// Python `Idf.build` count), in parallel with the `rayon` feature.
    pub fn add_texts<T: AsRef<str> + Sync>(&mut self, fp: &super::Fingerprinter, texts: &[T]) {
        const CHUNK: usize = 64;
        let parts = crate::par::map(texts.chunks(CHUNK).collect(), |chunk: &[T]| {
            let mut part = IdfBuilder::new();
            for text in chunk {
                part.add(&fp.feature_set(text.as_ref()));
            }
            part
        });
        for part in parts {
            self.merge(part);
        }
    }

    /// Adds another count (of other documents) to this one.
    pub fn merge(&mut self, other: IdfBuilder) {
        self.docs += other.docs;
        for (f, d) in other.df {
            *self.df.entry(f).or_insert(0) += d;
        }
    }

    /// The table, keeping features seen in at least `min_df` documents (the rest weigh as
    /// unseen, which for features seen once is nearly the same and saves most of the space).
    pub fn build(self, min_df: u32) -> Idf {
        let mut df = self.df;
        df.retain(|_, d| *d >= min_df);
        Idf {
            docs: self.docs,
            df,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_count_as_their_feature_sets() {
        let fp = super::super::Fingerprinter::default();
        let texts: Vec<String> = (0..300)
            .map(|i| format!("word{} common text {} w{}", i % 7, i % 13, i))
            .collect();
        let mut by_sets = IdfBuilder::new();
        for t in &texts {
            by_sets.add(&fp.feature_set(t));
        }
        let mut by_texts = IdfBuilder::new();
        by_texts.add_texts(&fp, &texts[..150]);
        by_texts.add_texts(&fp, &texts[150..]);
        assert_eq!(by_texts.docs, 300);
        assert_eq!(by_texts.build(1), by_sets.build(1));
    }

    #[test]
    fn idf_counts_and_round_trips() {
        let mut b = IdfBuilder::new();
        b.add(&[1, 2, 3]);
        b.add(&[1, 2]);
        let mut c = IdfBuilder::new();
        c.add(&[1]);
        b.merge(c);
        let idf = b.build(1);
        assert_eq!(idf.docs(), 3);
        assert!(idf.idf(1) < idf.idf(2) && idf.idf(2) < idf.idf(3) && idf.idf(3) < idf.idf(9));
        assert!((idf.idf(1) - 1.0).abs() < 1e-6, "in every document");
        assert_eq!(Idf::from_bytes(&idf.to_bytes()), Ok(idf.clone()));
        assert!(Idf::from_bytes(b"nonsense").is_err());
        let mut bytes = idf.to_bytes();
        bytes.pop();
        assert!(Idf::from_bytes(&bytes).is_err());
    }

    /// The tf vote by its definition: sort, count each distinct feature, weigh it
    /// `1 + ln(count)`.
    fn sorted_tf_vote(hashes: &[u64]) -> u64 {
        let mut sorted = hashes.to_vec();
        sorted.sort_unstable();
        let votes: Vec<(u64, f32)> = sorted
            .chunk_by(|a, b| a == b)
            .map(|r| {
                (
                    r[0],
                    if r.len() == 1 {
                        1.0
                    } else {
                        1.0 + (r.len() as f32).ln()
                    },
                )
            })
            .collect();
        vote(&votes)
    }

    proptest::proptest! {
        #[test]
        fn corrections_in_runs_are_grouped_by_count(
            counts in proptest::collection::vec(2u32..200, 0..300),
        ) {
            // A correction growing with the count, as the tf vote's do.
            let more: Vec<(u64, u32)> = counts.iter().enumerate().map(|(i, &c)| (i as u64, c)).collect();
            let less: Vec<(u64, u32)> = more.iter().map(|&(h, c)| (h, 7 * c + 1)).collect();
            let runs = in_runs(&more, &less);
            proptest::prop_assert!(runs.windows(2).all(|w| w[0].1 <= w[1].1), "not grouped");
            let (mut got, mut want) = (runs.clone(), less.clone());
            got.sort_unstable();
            want.sort_unstable();
            proptest::prop_assert_eq!(got, want);
        }

        #[test]
        fn tf_vote_matches_definition(
            picks in proptest::collection::vec(0usize..64, 0..400),
            pool in proptest::collection::vec(proptest::prelude::any::<u64>(), 64),
            home in 0u64..4,
        ) {
            // Features drawn from a small pool repeat; when `home` > 0 many share their
            // low bits (the table's home slot) and must probe past each other. Zero is a
            // feature too.
            let hashes: Vec<u64> = picks
                .iter()
                .map(|&i| match home {
                    0 => pool[i],
                    _ if i == 63 => 0,
                    _ => pool[i] << (8 * home),
                })
                .collect();
            proptest::prop_assert_eq!(tf_vote(&hashes, &mut TfScratch::default()), sorted_tf_vote(&hashes));
        }

        #[test]
        fn long_lists_with_many_counts(
            counts in proptest::collection::vec(1usize..150, 1..120),
            unique in 0usize..40_000,
            zeros in 0usize..3,
            seed in proptest::prelude::any::<u64>(),
            shift in 0u32..3,
        ) {
            // Long texts: tables past `PREFETCH_FROM` slots, texts split past `SPLIT_FROM`
            // (with `shift`, into parts of very different sizes: the top bits cleared),
            // more than 16 distinct counts, counts past the counting pass's `SMALL`;
            // shuffled, with zeros.
            let mut x = seed | 1;
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let mut hashes: Vec<u64> = Vec::new();
            for &c in &counts {
                let h = next() >> (20 * shift);
                hashes.extend(std::iter::repeat_n(h, c));
            }
            hashes.extend((0..unique).map(|_| next() >> (20 * shift)));
            hashes.extend(std::iter::repeat_n(0, zeros));
            for i in (1..hashes.len()).rev() {
                let j = (next() % (i as u64 + 1)) as usize;
                hashes.swap(i, j);
            }
            proptest::prop_assert_eq!(tf_vote(&hashes, &mut TfScratch::default()), sorted_tf_vote(&hashes));
        }

        #[test]
        fn scratch_kept_from_list_to_list(
            lists in proptest::collection::vec(
                proptest::collection::vec(0u64..40, 0..300), 1..8),
        ) {
            // One scratch through lists of every size: what one list leaves behind never
            // reaches the next.
            let mut scratch = TfScratch::default();
            for list in &lists {
                let hashes: Vec<u64> = list.iter().map(|&x| x.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
                proptest::prop_assert_eq!(tf_vote(&hashes, &mut scratch), sorted_tf_vote(&hashes));
            }
        }
    }

    /// A text repeating a few features (zero among them) hundreds of thousands of times
    /// amid unique ones votes as the sorted reference does, and its crowded parts are
    /// counted without a table of their length: the table stays that of a part of
    /// [`CROWDED_PART`] features at most.
    #[test]
    fn crowded_parts_are_sorted_not_tabled() {
        let mut x = 99u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (a, b) = (next(), next());
        let mut hashes: Vec<u64> = std::iter::repeat_n(a, 300_000)
            .chain(std::iter::repeat_n(b, 2 * CROWDED_PART))
            .chain(std::iter::repeat_n(0, CROWDED_PART + 1))
            .chain([b ^ 1, 0])
            .collect();
        hashes.extend((0..100_000).map(|_| next()));
        for i in (1..hashes.len()).rev() {
            let j = (next() % (i as u64 + 1)) as usize;
            hashes.swap(i, j);
        }
        let mut scratch = TfScratch::default();
        assert_eq!(tf_vote(&hashes, &mut scratch), sorted_tf_vote(&hashes));
        assert!(scratch.keys.capacity() <= (4 * CROWDED_PART).next_power_of_two());
        // One feature alone, and zeros alone.
        for one in [a, 0] {
            let same = vec![one; 5 * CROWDED_PART];
            assert_eq!(tf_vote(&same, &mut scratch), sorted_tf_vote(&same));
        }
    }

    #[test]
    fn tf_vote_is_the_sorted_tf_vote() {
        let mut x = 1u64;
        let mut hashes: Vec<u64> = (0..3000)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if i % 7 == 0 {
                    12345
                } else if i % 11 == 0 {
                    0
                } else {
                    x >> (i % 5)
                }
            })
            .collect();
        hashes.extend_from_within(..100);
        assert_eq!(
            tf_vote(&hashes, &mut TfScratch::default()),
            sorted_tf_vote(&hashes)
        );
        assert_eq!(tf_vote(&[], &mut TfScratch::default()), 0);
        let mut many = vec![7u64; 600];
        many.extend([1, 2, 3, u64::MAX]);
        let votes = [
            (7, 1.0 + 600f32.ln()),
            (1, 1.0),
            (2, 1.0),
            (3, 1.0),
            (u64::MAX, 1.0),
        ];
        assert_eq!(tf_vote(&many, &mut TfScratch::default()), vote(&votes));
        assert_eq!(tf_vote(&[0], &mut TfScratch::default()), vote(&[(0, 1.0)]));
    }

    #[test]
    fn votes_scale_to_the_heaviest() {
        // Weights in proportion vote like the integers they are proportional to.
        let a = vote(&[(0b1100, 3.0), (0b1010, 1.0), (0b0001, 1.0)]);
        let b = simhash_weighted([(0b1100, 1023), (0b1010, 341), (0b0001, 341)]);
        assert_eq!(a, b);
        assert_eq!(vote(&[]), 0);
        assert_eq!(vote(&[(7, 0.0)]), 0);
    }
}
