//! Candidate pairs from band keys ([`crate::jaccard::BandKeys`]): documents whose keys
//! agree in at least one band.
//!
//! Per band, the (key, document) pairs are radix-sorted and each run of equal keys gives
//! its pairs. A pair agreeing in several bands is reported from the first of them only,
//! which a look at the two documents' earlier keys tells, so no set of seen pairs is kept.
//! Memory: 16 bytes a document for the band being sorted, plus the pairs.

use super::radix;
use crate::error::Error;
use crate::jaccard::{BandKeys, BANDS};

/// Calls `sink(a, b)`, `a < b`, once for every pair of documents `0..n` whose
/// [`BandKeys`] agree in some band, band by band, each band's pairs in a fixed order.
/// A key of zero (the empty set's) agrees with nothing. Stops at the first error of
/// `sink`.
pub fn band_candidates<'a, E: From<Error>>(
    n: usize,
    keys: impl Fn(usize) -> &'a BandKeys + Sync,
    mut sink: impl FnMut(usize, usize) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    if n >= u32::MAX as usize {
        return Err(Error::TooManyFingerprints {
            got: n,
            max: u32::MAX as usize - 1,
        }
        .into());
    }
    let mut entries: Vec<u64> = Vec::with_capacity(n);
    let mut scratch: Vec<u64> = Vec::with_capacity(n);
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
        let mut start = 0;
        while start < entries.len() {
            let key = entries[start] >> 32;
            let end = start
                + entries[start..]
                    .iter()
                    .position(|&e| e >> 32 != key)
                    .unwrap_or(entries.len() - start);
            let run = &entries[start..end];
            for (i, &x) in run.iter().enumerate() {
                let a = (x & u64::from(u32::MAX)) as usize;
                let ka = keys(a);
                for &y in &run[i + 1..] {
                    let b = (y & u64::from(u32::MAX)) as usize;
                    let kb = keys(b);
                    // An earlier band reported this pair already.
                    if (0..band).any(|j| ka[j] == kb[j] && ka[j] != 0) {
                        continue;
                    }
                    sink(a, b)?;
                }
            }
            start = end;
        }
    }
    Ok(())
}

/// Sorts `entries`, each a band key in its top 32 bits and a document in its low 32, and
/// calls `pair(a, b)`, `a < b`, for every two documents of a run of equal keys, runs in
/// increasing key order: one band's (or one key range's) candidates, for a caller that
/// holds a band at a time ([`crate::batch::Candidates::from_parts`]) and merges the bands'
/// pairs itself. `scratch` is reused; both vectors' contents are left unspecified.
pub fn band_runs(entries: &mut [u64], scratch: &mut Vec<u64>, mut pair: impl FnMut(u32, u32)) {
    scratch.clear();
    scratch.resize(entries.len(), 0);
    radix::sort_into(entries, scratch);
    let sorted = &scratch[..];
    let mut start = 0;
    while start < sorted.len() {
        let key = sorted[start] >> 32;
        let end = start
            + sorted[start..]
                .iter()
                .position(|&e| e >> 32 != key)
                .unwrap_or(sorted.len() - start);
        let run = &sorted[start..end];
        for (i, &x) in run.iter().enumerate() {
            for &y in &run[i + 1..] {
                let (a, b) = (x as u32, y as u32);
                pair(a.min(b), a.max(b));
            }
        }
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Result;
    use proptest::prelude::*;

    /// Every pair agreeing in some nonzero band, by brute force.
    fn oracle(keys: &[BandKeys]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for a in 0..keys.len() {
            for b in a + 1..keys.len() {
                if (0..BANDS).any(|j| keys[a][j] == keys[b][j] && keys[a][j] != 0) {
                    out.push((a, b));
                }
            }
        }
        out
    }

    proptest! {
        /// Band by band through [`band_runs`], the pairs merged: the oracle's.
        #[test]
        fn band_runs_give_the_pairs(
            keys in proptest::collection::vec(
                proptest::collection::vec(0u32..4, BANDS),
                0..60,
            )
        ) {
            let keys: Vec<BandKeys> = keys
                .into_iter()
                .map(|k| {
                    let mut out = [0; BANDS];
                    out.copy_from_slice(&k);
                    out
                })
                .collect();
            let mut got = Vec::new();
            let (mut entries, mut scratch) = (Vec::new(), Vec::new());
            for band in 0..BANDS {
                entries.clear();
                // Documents in any order: the runs' pairs come out ordered all the same.
                entries.extend(
                    (0..keys.len())
                        .rev()
                        .filter(|&i| keys[i][band] != 0)
                        .map(|i| u64::from(keys[i][band]) << 32 | i as u64),
                );
                band_runs(&mut entries, &mut scratch, |a, b| {
                    assert!(a < b);
                    got.push((a as usize, b as usize));
                });
            }
            got.sort_unstable();
            got.dedup();
            prop_assert_eq!(got, oracle(&keys));
        }

        /// The pairs, each once, are the oracle's; keys from a small alphabet make many
        /// agree in several bands.
        #[test]
        fn band_pairs_match_brute_force(
            keys in proptest::collection::vec(
                proptest::collection::vec(0u32..4, BANDS),
                0..60,
            )
        ) {
            let keys: Vec<BandKeys> = keys
                .into_iter()
                .map(|k| {
                    let mut out = [0; BANDS];
                    out.copy_from_slice(&k);
                    out
                })
                .collect();
            let mut got = Vec::new();
            band_candidates(keys.len(), |i| &keys[i], |a, b| -> Result<()> {
                got.push((a, b));
                Ok(())
            })
            .unwrap();
            let reported = got.len();
            got.sort_unstable();
            got.dedup();
            prop_assert_eq!(reported, got.len(), "a pair reported twice");
            prop_assert_eq!(got, oracle(&keys));
        }
    }
}
