//! Document deduplication over fingerprints: which documents are copies of which.
//!
//! Documents with the same [`Wide`] fingerprint are one node (so a million copies of a page
//! cost one node, not half a trillion pairs); nodes are matched with a [`WideMatcher`];
//! documents without words (fingerprint all zero) match only their identical texts.
//! Clusters are the connected components.

#[cfg(feature = "rayon")]
use rayon::prelude::*;

use super::{IndexedPair, UnionFind, WideMatcher};
use crate::error::{Error, Result};
use crate::fingerprint::Wide;

/// What [`dedup`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dedup {
    /// Connected components of two or more documents, each in increasing order, ordered by
    /// their first document.
    pub clusters: Vec<Vec<u32>>,
    /// Every near-duplicate pair of documents with its 256-bit distance (0 for the same
    /// fingerprint), ordered by `(a, b)`; empty unless asked for.
    pub pairs: Vec<IndexedPair>,
    /// Documents whose text hash repeats an earlier document's.
    pub exact_duplicates: u64,
    /// Documents without words (fingerprint all zero).
    pub wordless: u64,
}

impl Dedup {
    /// Documents that are in a cluster but not first of it: what deduplication removes.
    pub fn removable(&self) -> u64 {
        self.clusters.iter().map(|c| c.len() as u64 - 1).sum()
    }
}

/// Clusters of near-duplicate documents, document `i` having fingerprint `fps[i]` and
/// text hash `text_hashes[i]` (any 64-bit hash of its bytes, for counting exact copies;
/// equal texts must have equal fingerprints, as they do from one `Fingerprinter`).
/// Memory beyond the inputs: 8 bytes a document, and one lane's matching at a time.
/// With `pairs`, also every pair of documents matched (quadratic in the copies of one
/// text: ask only when the pairs are wanted).
pub fn dedup(
    fps: &[Wide],
    text_hashes: &[u64],
    matcher: &WideMatcher,
    pairs: bool,
) -> Result<Dedup> {
    let n = fps.len();
    if n != text_hashes.len() {
        return Err(Error::LengthMismatch {
            fingerprints: n,
            hashes: text_hashes.len(),
        });
    }
    if n > u32::MAX as usize {
        return Err(Error::TooManyFingerprints {
            got: n,
            max: u32::MAX as usize,
        });
    }
    let mut out = Dedup::default();
    let mut uf = UnionFind::new(n);

    // Nodes: runs of equal fingerprints, wordless documents apart. A node is its run of
    // `order`, from `starts[node]` to `starts[node + 1]`: 8 bytes a document in all.
    let (mut order, wordless): (Vec<u32>, Vec<u32>) =
        (0..n as u32).partition(|&i| fps[i as usize] != [0; 4]);
    out.wordless = wordless.len() as u64;
    sort_by_key(&mut order, |i| fps[i as usize]);
    let mut starts: Vec<u32> = (0..order.len())
        .filter(|&i| i == 0 || fps[order[i] as usize] != fps[order[i - 1] as usize])
        .map(|i| i as u32)
        .collect();
    starts.push(order.len() as u32);
    let run = |node: usize| &order[starts[node] as usize..starts[node + 1] as usize];
    let nodes = starts.len() - 1;
    for node in 0..nodes {
        let run = run(node);
        for &d in &run[1..] {
            uf.union(run[0], d);
        }
        out.exact_duplicates += repeats(run, text_hashes);
        if pairs {
            same_pairs(run, &mut out.pairs);
        }
    }
    matcher.find_all_by(
        nodes,
        |node| &fps[order[starts[node] as usize] as usize],
        |p| -> Result<()> {
            let (x, y) = (run(p.a), run(p.b));
            uf.union(x[0], y[0]);
            if pairs {
                for &a in x {
                    for &b in y {
                        let (a, b) = (a.min(b) as usize, a.max(b) as usize);
                        out.pairs.push(IndexedPair { a, b, ..p });
                    }
                }
            }
            Ok(())
        },
    )?;
    drop(order);

    // Wordless documents: identical texts only.
    let mut wordless = wordless;
    sort_by_key(&mut wordless, |i| text_hashes[i as usize]);
    for run in wordless.chunk_by(|&a, &b| text_hashes[a as usize] == text_hashes[b as usize]) {
        for &d in &run[1..] {
            uf.union(run[0], d);
        }
        out.exact_duplicates += run.len() as u64 - 1;
        if pairs {
            same_pairs(run, &mut out.pairs);
        }
    }

    out.clusters = uf.sets(|size, _| size >= 2);
    if pairs {
        sort_by_key(&mut out.pairs, |p| (p.a, p.b));
    }
    Ok(out)
}

/// Documents of `run` whose text hash repeats another's in it.
fn repeats(run: &[u32], text_hashes: &[u64]) -> u64 {
    if run.len() < 2 {
        return 0;
    }
    let mut hashes: Vec<u64> = run.iter().map(|&d| text_hashes[d as usize]).collect();
    hashes.sort_unstable();
    hashes.windows(2).filter(|w| w[0] == w[1]).count() as u64
}

/// Every pair of the documents of one run (same fingerprint or same text), distance 0.
fn same_pairs(run: &[u32], out: &mut Vec<IndexedPair>) {
    for (i, &a) in run.iter().enumerate() {
        for &b in &run[i + 1..] {
            let (a, b) = (a.min(b) as usize, a.max(b) as usize);
            out.push(IndexedPair { a, b, distance: 0 });
        }
    }
}

fn sort_by_key<T: Copy + Send + Sync, K: Ord>(v: &mut [T], key: impl Fn(T) -> K + Sync) {
    #[cfg(feature = "rayon")]
    v.par_sort_unstable_by_key(|&x| key(x));
    #[cfg(not(feature = "rayon"))]
    v.sort_unstable_by_key(|&x| key(x));
}
