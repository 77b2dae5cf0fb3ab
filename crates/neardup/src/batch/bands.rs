//! Candidate pairs from band keys ([`crate::jaccard::BandKeys`]): documents whose keys
//! agree in at least one band.
//!
//! Per band, the (key, document) pairs are radix-sorted and each run of equal keys gives
//! its pairs. A pair agreeing in several bands is reported from the first band that
//! pairs it only, so no set of seen pairs is kept.
//! Memory: 16 bytes a document for the band being sorted, plus the pairs.
//!
//! **Crowded runs.** A run of `m` documents has `m(m − 1)/2` pairs: a template page
//! crawled 200,000 times, each copy with its own date or counter, shares every band key
//! and would make 2·10¹⁰ pairs (a dedup of it ran out of memory). A run of more than
//! [`RUN_LEADERS`] documents is *led*: its documents are ordered as the keep rule visits
//! them (the caller's `lead`), and the first [`RUN_LEADERS`] of that order, its leaders,
//! are paired with every document of the run, the others (followers) not with each
//! other: fewer than `m · RUN_LEADERS` pairs. Keeping visits documents in that order and
//! keeps one unless a kept near-duplicate comes before it, so in a run of near-duplicates
//! the first is kept and every other one is paired with it and removed, as with all
//! pairs. What a led run leaves out is a pair of two followers that no other band pairs:
//! such a pair is not listed, and when neither has a kept near-duplicate among the
//! leaders, both are kept. Every removal still rests on a verified pair.

use super::{infallible, radix};
use crate::error::Error;
use crate::jaccard::{BandKeys, BANDS};

/// Most documents of a run of equal band keys paired with all the others (see the
/// module's *Crowded runs*).
pub const RUN_LEADERS: usize = 64;

/// How [`band_candidates`] and [`band_runs`] pair the documents of a crowded run.
pub enum Crowded<F> {
    /// Every pair of every run: the exact candidates of the banding, for measuring it.
    All,
    /// A run of more than [`RUN_LEADERS`] is led: the function orders its documents
    /// (given in increasing order) as the keep rule visits them.
    Led(F),
}

/// Calls `pair(a, b)`, `a < b`, for the pairs of one run of equal keys (`run`: sorted
/// entries, a document in the low 32 bits of each) as `runs` says, and returns the
/// followers of a led run (none for a run paired whole). `docs` is scratch for a led
/// run's documents. Stops at the first error of `pair`.
fn run_pairs<'d, F: FnMut(&mut [u32]), E>(
    run: &[u64],
    docs: &'d mut Vec<u32>,
    runs: &mut Crowded<F>,
    leaders: usize,
    mut pair: impl FnMut(u32, u32) -> Result<(), E>,
) -> Result<&'d [u32], E> {
    let lead = match runs {
        Crowded::Led(lead) if run.len() > leaders => lead,
        _ => {
            // The common case, without a copy.
            for (i, &x) in run.iter().enumerate() {
                for &y in &run[i + 1..] {
                    let (a, b) = (x as u32, y as u32);
                    pair(a.min(b), a.max(b))?;
                }
            }
            return Ok(&[]);
        }
    };
    docs.clear();
    docs.extend(run.iter().map(|&e| e as u32));
    docs.sort_unstable();
    lead(docs);
    for (i, &a) in docs[..leaders].iter().enumerate() {
        for &b in &docs[i + 1..] {
            pair(a.min(b), a.max(b))?;
        }
    }
    Ok(&docs[leaders..])
}

/// The end of the run of equal keys (top 32 bits) that starts at `start` in `sorted`.
fn run_end(sorted: &[u64], start: usize) -> usize {
    let key = sorted[start] >> 32;
    start
        + sorted[start..]
            .iter()
            .position(|&e| e >> 32 != key)
            .unwrap_or(sorted.len() - start)
}

/// Calls `sink(a, b)`, `a < b`, once for every pair of documents `0..n` whose
/// [`BandKeys`] agree in some band, band by band, each band's pairs in a fixed order;
/// crowded runs as `runs` says. A key of zero (the empty set's) agrees with nothing.
/// Stops at the first error of `sink`; returns the runs led.
pub fn band_candidates<'a, E: From<Error>, F: FnMut(&mut [u32])>(
    n: usize,
    keys: impl Fn(usize) -> &'a BandKeys + Sync,
    runs: Crowded<F>,
    sink: impl FnMut(usize, usize) -> std::result::Result<(), E>,
) -> std::result::Result<u64, E> {
    band_candidates_led(n, keys, runs, RUN_LEADERS, sink)
}

/// [`band_candidates`] with `leaders` in place of [`RUN_LEADERS`].
fn band_candidates_led<'a, E: From<Error>, F: FnMut(&mut [u32])>(
    n: usize,
    keys: impl Fn(usize) -> &'a BandKeys + Sync,
    mut runs: Crowded<F>,
    leaders: usize,
    mut sink: impl FnMut(usize, usize) -> std::result::Result<(), E>,
) -> std::result::Result<u64, E> {
    if n >= u32::MAX as usize {
        return Err(Error::TooManyFingerprints {
            got: n,
            max: u32::MAX as usize - 1,
        }
        .into());
    }
    let mut entries: Vec<u64> = Vec::with_capacity(n);
    let mut scratch: Vec<u64> = Vec::with_capacity(n);
    // Per band, a bitmap of the followers of its led runs (empty when it led none): two
    // documents agreeing there were paired there unless both follow.
    let mut followers: Vec<Vec<u64>> = Vec::with_capacity(BANDS);
    let follows = |f: &[u64], d: usize| f.get(d / 64).is_some_and(|w| w >> (d % 64) & 1 == 1);
    let mut docs: Vec<u32> = Vec::new();
    let mut led = 0;
    for band in 0..BANDS {
        entries.clear();
        entries.extend(
            (0..n)
                .filter(|&i| keys(i)[band] != 0)
                .map(|i| u64::from(keys(i)[band]) << 32 | i as u64),
        );
        scratch.clear();
        scratch.resize(entries.len(), 0);
        // Stable: a run lists its documents in increasing order. The sorted entries are
        // taken where the sort leaves them.
        radix::sort_into(&mut entries, &mut scratch);
        std::mem::swap(&mut entries, &mut scratch);
        let mut mine: Vec<u64> = Vec::new();
        let mut start = 0;
        while start < entries.len() {
            let end = run_end(&entries, start);
            let follow = run_pairs(
                &entries[start..end],
                &mut docs,
                &mut runs,
                leaders,
                |a, b| {
                    let (a, b) = (a as usize, b as usize);
                    let (ka, kb) = (keys(a), keys(b));
                    // An earlier band paired these two already.
                    if (0..band).any(|j| {
                        ka[j] == kb[j]
                            && ka[j] != 0
                            && !(follows(&followers[j], a) && follows(&followers[j], b))
                    }) {
                        return Ok(());
                    }
                    sink(a, b)
                },
            )?;
            if !follow.is_empty() {
                led += 1;
                mine.resize(n.div_ceil(64), 0);
                for &d in follow {
                    mine[d as usize / 64] |= 1 << (d % 64);
                }
            }
            start = end;
        }
        followers.push(mine);
    }
    Ok(led)
}

/// Sorts `entries`, each a band key in its top 32 bits and a document in its low 32, and
/// calls `pair(a, b)`, `a < b`, for the pairs of each run of equal keys (crowded runs as
/// `runs` says), runs in increasing key order: one band's (or one key range's)
/// candidates, for a caller that holds a band at a time
/// ([`crate::batch::Candidates::from_parts`]) and merges the bands' pairs itself.
/// `scratch` is reused; both vectors' contents are left unspecified. Returns the runs led.
pub fn band_runs<F: FnMut(&mut [u32])>(
    entries: &mut [u64],
    scratch: &mut Vec<u64>,
    runs: &mut Crowded<F>,
    pair: impl FnMut(u32, u32),
) -> u64 {
    band_runs_led(entries, scratch, runs, RUN_LEADERS, pair)
}

/// [`band_runs`] with `leaders` in place of [`RUN_LEADERS`].
fn band_runs_led<F: FnMut(&mut [u32])>(
    entries: &mut [u64],
    scratch: &mut Vec<u64>,
    runs: &mut Crowded<F>,
    leaders: usize,
    mut pair: impl FnMut(u32, u32),
) -> u64 {
    scratch.clear();
    scratch.resize(entries.len(), 0);
    radix::sort_into(entries, scratch);
    let sorted = &scratch[..];
    let mut docs: Vec<u32> = Vec::new();
    let mut led = 0;
    let mut start = 0;
    while start < sorted.len() {
        let end = run_end(sorted, start);
        let follow = infallible(run_pairs(
            &sorted[start..end],
            &mut docs,
            runs,
            leaders,
            |a, b| {
                pair(a, b);
                Ok(())
            },
        ));
        led += u64::from(!follow.is_empty());
        start = end;
    }
    led
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Result;
    use proptest::prelude::*;

    /// The pairs of the banding by brute force: per band and nonzero key, its documents
    /// ordered by `rank` (then number); a run of more than `leaders` (when given) pairs
    /// its first `leaders` with every other, a shorter one every two.
    fn oracle(keys: &[BandKeys], leaders: Option<usize>, rank: &[u8]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for band in 0..BANDS {
            let mut runs: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
            for (d, k) in keys.iter().enumerate().filter(|(_, k)| k[band] != 0) {
                runs.entry(k[band]).or_default().push(d);
            }
            for mut run in runs.into_values() {
                run.sort_by_key(|&d| (rank[d], d));
                let heads = match leaders {
                    Some(l) if run.len() > l => l,
                    _ => run.len(),
                };
                for i in 0..heads {
                    for j in i + 1..run.len() {
                        out.push((run[i].min(run[j]), run[i].max(run[j])));
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    fn bands_of(keys: Vec<Vec<u32>>) -> Vec<BandKeys> {
        keys.into_iter()
            .map(|k| {
                let mut out = [0; BANDS];
                out.copy_from_slice(&k);
                out
            })
            .collect()
    }

    /// Keys from a small alphabet, so that many agree in several bands and runs crowd,
    /// with a rank per document.
    fn keyed() -> impl Strategy<Value = (Vec<BandKeys>, Vec<u8>)> {
        (0usize..60).prop_flat_map(|n| {
            (
                proptest::collection::vec(proptest::collection::vec(0u32..4, BANDS), n)
                    .prop_map(bands_of),
                proptest::collection::vec(0u8..4, n),
            )
        })
    }

    proptest! {
        /// Band by band through [`band_runs`], the pairs merged: the oracle's, with every
        /// run paired whole and with crowded runs led by the ranking.
        #[test]
        fn band_runs_give_the_pairs((keys, rank) in keyed(), leaders in 1usize..8) {
            for led in [false, true] {
                let mut runs = if led {
                    Crowded::Led(|docs: &mut [u32]| docs.sort_by_key(|&d| rank[d as usize]))
                } else {
                    Crowded::All
                };
                let mut got = Vec::new();
                let (mut entries, mut scratch) = (Vec::new(), Vec::new());
                let mut runs_led = 0;
                for band in 0..BANDS {
                    entries.clear();
                    // Documents in any order: the runs' pairs come out ordered all the same.
                    entries.extend(
                        (0..keys.len())
                            .rev()
                            .filter(|&i| keys[i][band] != 0)
                            .map(|i| u64::from(keys[i][band]) << 32 | i as u64),
                    );
                    runs_led += band_runs_led(&mut entries, &mut scratch, &mut runs, leaders, |a, b| {
                        assert!(a < b);
                        got.push((a as usize, b as usize));
                    });
                }
                got.sort_unstable();
                got.dedup();
                prop_assert_eq!(&got, &oracle(&keys, led.then_some(leaders), &rank));
                if !led {
                    prop_assert_eq!(runs_led, 0);
                }
            }
        }

        /// The pairs, each once, are the oracle's, with every run paired whole and with
        /// crowded runs led by the ranking.
        #[test]
        fn band_pairs_match_brute_force((keys, rank) in keyed(), leaders in 1usize..8) {
            for led in [false, true] {
                let runs = if led {
                    Crowded::Led(|docs: &mut [u32]| docs.sort_by_key(|&d| rank[d as usize]))
                } else {
                    Crowded::All
                };
                let mut got = Vec::new();
                band_candidates_led(keys.len(), |i| &keys[i], runs, leaders, |a, b| -> Result<()> {
                    got.push((a, b));
                    Ok(())
                })
                .unwrap();
                let reported = got.len();
                got.sort_unstable();
                got.dedup();
                prop_assert_eq!(reported, got.len(), "a pair reported twice");
                prop_assert_eq!(&got, &oracle(&keys, led.then_some(leaders), &rank));
            }
        }
    }

    /// A crowded run of near-duplicates: each document is paired with the leaders only,
    /// not with all the others.
    #[test]
    fn a_crowded_run_pairs_its_leaders_with_everyone() {
        let keys: Vec<BandKeys> = vec![[7; BANDS]; 1000];
        let mut pairs = 0u64;
        let led = band_candidates(
            keys.len(),
            |i| &keys[i],
            Crowded::Led(|_: &mut [u32]| {}),
            |a, b| -> Result<()> {
                assert!(a < RUN_LEADERS && a < b);
                pairs += 1;
                Ok(())
            },
        )
        .unwrap();
        let l = RUN_LEADERS as u64;
        assert_eq!(pairs, l * (l - 1) / 2 + (1000 - l) * l);
        // The one crowded key of each band.
        assert_eq!(led, BANDS as u64);
    }
}
