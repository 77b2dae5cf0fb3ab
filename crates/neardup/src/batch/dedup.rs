//! Document deduplication: which documents are near-duplicates, and which of them to keep.
//!
//! The decision has three steps, the same wherever neardup decides (batch, online corpus,
//! service):
//!
//! 1. **Candidates.** Documents with the same text are one node. For the Jaccard rule,
//!    nodes whose band keys ([`crate::jaccard::BandKeys`]) agree in some band are
//!    candidates ([`band_candidates`]): nearly every pair at the threshold (at least
//!    99.95% of them, by the banding's choice), few far below it. For the distance rule,
//!    nodes whose 256-bit fingerprints ([`Wide`]) are within the lane distance in some
//!    64-bit lane are ([`WideMatcher::candidates_by`]).
//! 2. **Verification.** A candidate is a near-duplicate when its [`Rule`] holds
//!    ([`crate::decide`]): by default the estimated Jaccard similarity of the two
//!    documents' word 5-shingle sets ([`crate::jaccard`]) is at least the threshold.
//! 3. **Assignment, without chaining.** Documents are visited in the order [`Keep`] gives.
//!    Each one not yet removed is kept, and removes its near-duplicates not yet removed; a
//!    removed document then belongs to the kept near-duplicate it is most similar to. So a
//!    document is removed only for a document that is itself its near-duplicate, and no
//!    two kept documents are near-duplicates of each other. If A ~ B and B ~ C but not
//!    A ~ C, then A is kept, B goes with A, and C is kept too, where connected components
//!    (`closure`) would remove C for A.

#[cfg(feature = "rayon")]
use rayon::prelude::*;

use super::{band_candidates, UnionFind, WideMatcher};
use crate::decide::{Keep, Match, Rule};
use crate::error::{Error, Result};
use crate::fingerprint::Wide;
use crate::jaccard::{BandKeys, Sketch};

/// Where [`candidates`] finds its pairs.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// Documents whose band keys (one per document) agree in some band: the candidates of
    /// the Jaccard rule. A document with all-zero keys (no words) matches its copies only.
    Bands(&'a [BandKeys]),
    /// Documents within the lane distance in some lane of their fingerprints: the
    /// candidates of the distance rule. A document whose fingerprint is all zero (no
    /// tokens) matches its copies only.
    Lanes(&'a WideMatcher),
}

/// How [`dedup`] decides and what it reports.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Options {
    /// When a candidate is a near-duplicate.
    pub rule: Rule,
    /// Which document of a group is kept.
    pub keep: Keep,
    /// Connected components of the near-duplicate pairs instead of clusters around kept
    /// documents: a document may then be removed for one that is not its near-duplicate.
    pub closure: bool,
    /// Also list every near-duplicate pair of documents.
    pub pairs: bool,
}

/// A document of a cluster, and how near it is to the cluster's representative.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Member {
    /// Its position in the input.
    pub doc: u32,
    /// Estimated Jaccard similarity to the representative (1 for the representative and
    /// its exact copies).
    pub similarity: f32,
    /// 256-bit Hamming distance of the fingerprints.
    pub distance: u32,
}

/// A near-duplicate pair of documents, `a < b`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pair {
    /// The smaller position.
    pub a: u32,
    /// The larger position.
    pub b: u32,
    /// Estimated Jaccard similarity.
    pub similarity: f32,
    /// 256-bit Hamming distance of the fingerprints.
    pub distance: u32,
}

/// A kept document and the documents removed for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    /// The kept document.
    pub representative: u32,
    /// Every document of the cluster, the representative included, in input order.
    pub members: Vec<Member>,
}

/// What [`dedup`] found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dedup {
    /// Clusters of two or more documents, ordered by representative.
    pub clusters: Vec<Cluster>,
    /// Every near-duplicate pair of documents, exact copies included, ordered by
    /// `(a, b)`; empty unless [`Options::pairs`].
    pub pairs: Vec<Pair>,
    /// Documents whose text repeats an earlier document's.
    pub exact_duplicates: u64,
    /// Documents without words (fingerprint all zero): they match identical texts only.
    pub wordless: u64,
    /// Candidate pairs of distinct texts checked.
    pub candidates: u64,
    /// Candidate pairs found to be near-duplicates.
    pub verified: u64,
}

impl Dedup {
    /// Documents in a cluster but not its representative: what deduplication removes.
    pub fn removable(&self) -> u64 {
        self.clusters
            .iter()
            .map(|c| c.members.len() as u64 - 1)
            .sum()
    }
}

/// Documents grouped into nodes of equal texts, and the candidate pairs of nodes: the
/// first step of [`dedup`], which needs only the fingerprints. [`Candidates::needs`] says
/// which documents' sketches [`resolve`] will ask for, so that a caller holding sketches
/// outside memory can bring back just those.
#[derive(Clone, Debug, Default)]
pub struct Candidates {
    /// Documents by (text hash, fingerprint); node `i` is `order[starts[i]..starts[i + 1]]`,
    /// in input order.
    order: Vec<u32>,
    starts: Vec<u32>,
    /// Candidate pairs of nodes, `a < b`.
    pairs: Vec<(u32, u32)>,
    wordless: u64,
}

impl Candidates {
    fn node(&self, i: u32) -> &[u32] {
        &self.order[self.starts[i as usize] as usize..self.starts[i as usize + 1] as usize]
    }

    fn nodes(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// How many candidate pairs of distinct texts there are.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The documents whose sketches [`resolve`] reads, in increasing order: the first
    /// document of each node in a candidate pair.
    pub fn needs(&self) -> Vec<u32> {
        let mut nodes: Vec<u32> = self.pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
        sort(&mut nodes, |n| n);
        nodes.dedup();
        let mut docs: Vec<u32> = nodes.into_iter().map(|n| self.node(n)[0]).collect();
        sort(&mut docs, |d| d);
        docs
    }
}

/// Step 1: nodes of equal texts (text hash and fingerprint both equal) and their candidate
/// pairs from `source`. `fps[i]` and `text_hashes[i]` belong to document `i` (and so do
/// the band keys of [`Source::Bands`]); any 64-bit hash of the text's bytes serves.
/// Memory: 8 bytes a document, one band or lane's matching at a time, and 8 bytes a
/// candidate.
pub fn candidates(fps: &[Wide], text_hashes: &[u64], source: Source<'_>) -> Result<Candidates> {
    let n = fps.len();
    if n != text_hashes.len() {
        return Err(Error::LengthMismatch {
            fingerprints: n,
            hashes: text_hashes.len(),
        });
    }
    if let Source::Bands(keys) = source {
        if keys.len() != n {
            return Err(Error::LengthMismatch {
                fingerprints: n,
                hashes: keys.len(),
            });
        }
    }
    if n >= u32::MAX as usize {
        return Err(Error::TooManyFingerprints {
            got: n,
            max: u32::MAX as usize - 1,
        });
    }
    let key = |i: u32| (text_hashes[i as usize], fps[i as usize]);
    let mut order: Vec<u32> = (0..n as u32).collect();
    // Stable, so each node lists its documents in input order.
    sort(&mut order, key);
    let mut starts: Vec<u32> = (0..order.len())
        .filter(|&i| i == 0 || key(order[i]) != key(order[i - 1]))
        .map(|i| i as u32)
        .collect();
    starts.push(n as u32);
    let mut out = Candidates {
        order,
        starts,
        pairs: Vec::new(),
        wordless: 0,
    };
    // Nodes with words take part in matching; wordless ones match their copies only.
    let wordless = |doc: u32| match source {
        Source::Bands(keys) => keys[doc as usize] == [0; crate::jaccard::BANDS],
        Source::Lanes(_) => fps[doc as usize] == [0; crate::fingerprint::LANES],
    };
    let mut worded: Vec<u32> = Vec::with_capacity(out.nodes());
    for node in 0..out.nodes() as u32 {
        if wordless(out.node(node)[0]) {
            out.wordless += out.node(node).len() as u64;
        } else {
            worded.push(node);
        }
    }
    let doc_of = |i: usize| out.node(worded[i])[0] as usize;
    let mut pairs = Vec::new();
    let sink = |a: usize, b: usize| -> Result<()> {
        let (x, y) = (worded[a], worded[b]);
        pairs.push((x.min(y), x.max(y)));
        Ok(())
    };
    match source {
        Source::Bands(keys) => band_candidates(worded.len(), |i| &keys[doc_of(i)], sink)?,
        Source::Lanes(matcher) => matcher.candidates_by(worded.len(), |i| &fps[doc_of(i)], sink)?,
    }
    out.pairs = pairs;
    Ok(out)
}

/// Steps 2 and 3: verify the candidates with `options.rule` and assign documents to the
/// documents kept for them. `sketch(doc)` is called for the documents of
/// [`Candidates::needs`] only (from several threads); `lens` are the texts' lengths, for
/// [`Keep::Longest`] and [`Keep::Shortest`].
pub fn resolve(
    c: &Candidates,
    fps: &[Wide],
    lens: &[u32],
    sketch: impl Fn(u32) -> Sketch + Sync,
    options: &Options,
) -> Dedup {
    let nodes = c.nodes();
    let first = |node: u32| c.node(node)[0];
    // 2. Verification, in parallel: (a, b, similarity, distance) per near-duplicate pair.
    let verify = |&(a, b): &(u32, u32)| {
        let (x, y) = (first(a), first(b));
        let m = Match {
            similarity: sketch(x).similarity(&sketch(y)) as f32,
            distance: super::wide_distance(&fps[x as usize], &fps[y as usize]),
        };
        // Nodes are distinct texts with words: the rule alone decides.
        options.rule.accepts(m).then_some(Edge {
            a,
            b,
            similarity: m.similarity,
            distance: m.distance,
        })
    };
    #[cfg(feature = "rayon")]
    let edges: Vec<Edge> = c.pairs.par_iter().filter_map(verify).collect();
    #[cfg(not(feature = "rayon"))]
    let edges: Vec<Edge> = c.pairs.iter().filter_map(verify).collect();

    // Each node's representative (its member that `keep` prefers) and the order in which
    // nodes are visited: by that member's rank.
    let rank = |doc: u32| -> (i64, u32) {
        let len = i64::from(lens.get(doc as usize).copied().unwrap_or(0));
        match options.keep {
            Keep::First => (0, doc),
            Keep::Longest => (-len, doc),
            Keep::Shortest => (len, doc),
        }
    };
    let best: Vec<u32> = (0..nodes as u32)
        .map(|node| {
            c.node(node)
                .iter()
                .copied()
                .min_by_key(|&d| rank(d))
                .unwrap_or(0)
        })
        .collect();

    let mut clusters = if options.closure {
        components(c, &edges, &best, &rank, fps, &sketch)
    } else {
        stars(c, &edges, &best, &rank, fps)
    };
    clusters.sort_by_key(|cl| cl.representative);

    let mut out = Dedup {
        clusters,
        pairs: Vec::new(),
        exact_duplicates: (0..nodes as u32).map(|n| c.node(n).len() as u64 - 1).sum(),
        wordless: c.wordless,
        candidates: c.pairs.len() as u64,
        verified: edges.len() as u64,
    };
    if options.pairs {
        out.pairs = pairs(c, &edges);
    }
    out
}

/// All three steps over documents held in memory: `sketches[i]` is document `i`'s
/// [`Sketch`] (read only for [`Rule::Jaccard`] decisions and similarities).
pub fn dedup(
    fps: &[Wide],
    text_hashes: &[u64],
    lens: &[u32],
    sketches: &[Sketch],
    source: Source<'_>,
    options: &Options,
) -> Result<Dedup> {
    if sketches.len() != fps.len() || lens.len() != fps.len() {
        return Err(Error::LengthMismatch {
            fingerprints: fps.len(),
            hashes: sketches.len().min(lens.len()),
        });
    }
    let c = candidates(fps, text_hashes, source)?;
    Ok(resolve(&c, fps, lens, |d| sketches[d as usize], options))
}

/// A verified pair of nodes.
#[derive(Clone, Copy, Debug)]
struct Edge {
    a: u32,
    b: u32,
    similarity: f32,
    distance: u32,
}

/// Clusters around kept documents (the default): greedy in rank order, then each removed
/// node to its most similar kept neighbour.
fn stars(
    c: &Candidates,
    edges: &[Edge],
    best: &[u32],
    rank: &(impl Fn(u32) -> (i64, u32) + Sync),
    fps: &[Wide],
) -> Vec<Cluster> {
    let nodes = c.nodes();
    // Adjacency of nodes, both directions (compressed rows).
    let mut degree = vec![0u32; nodes + 1];
    for e in edges {
        degree[e.a as usize] += 1;
        degree[e.b as usize] += 1;
    }
    let mut offsets = Vec::with_capacity(nodes + 1);
    let mut total = 0u32;
    for d in &degree[..nodes] {
        offsets.push(total);
        total += d;
    }
    offsets.push(total);
    let mut fill = offsets.clone();
    let mut adjacent = vec![(0u32, 0u32); total as usize]; // (neighbour, edge)
    for (i, e) in edges.iter().enumerate() {
        for (from, to) in [(e.a, e.b), (e.b, e.a)] {
            adjacent[fill[from as usize] as usize] = (to, i as u32);
            fill[from as usize] += 1;
        }
    }
    drop(fill);
    let neighbours =
        |n: u32| &adjacent[offsets[n as usize] as usize..offsets[n as usize + 1] as usize];

    // Only nodes with a neighbour or a copy can be in a cluster.
    let mut visit: Vec<u32> = (0..nodes as u32)
        .filter(|&n| offsets[n as usize] != offsets[n as usize + 1] || c.node(n).len() > 1)
        .collect();
    sort(&mut visit, |n| rank(best[n as usize]));

    const FREE: u32 = u32::MAX;
    const KEPT: u32 = u32::MAX - 1;
    // Per node: FREE, KEPT, or the node it was removed for.
    let mut state = vec![FREE; nodes];
    for &n in &visit {
        if state[n as usize] != FREE {
            continue;
        }
        state[n as usize] = KEPT;
        for &(m, _) in neighbours(n) {
            if state[m as usize] == FREE {
                state[m as usize] = n;
            }
        }
    }
    // A removed node goes to its most similar kept neighbour (the better ranked of equals).
    let mut assigned: Vec<(u32, u32, Edge)> = Vec::new(); // (kept node, removed node, edge)
    for &n in &visit {
        if state[n as usize] >= KEPT {
            continue;
        }
        let chosen = neighbours(n)
            .iter()
            .filter(|&&(m, _)| state[m as usize] == KEPT)
            .map(|&(m, e)| (m, edges[e as usize]))
            .min_by(|(m1, e1), (m2, e2)| {
                e2.similarity
                    .total_cmp(&e1.similarity)
                    .then_with(|| rank(best[*m1 as usize]).cmp(&rank(best[*m2 as usize])))
            });
        if let Some((m, e)) = chosen {
            assigned.push((m, n, e));
        }
    }
    sort(&mut assigned, |(k, r, _)| (k, r));

    let mut clusters = Vec::new();
    for &n in &visit {
        if state[n as usize] != KEPT {
            continue;
        }
        let rep = best[n as usize];
        let mut members: Vec<Member> = c
            .node(n)
            .iter()
            .map(|&doc| Member {
                doc,
                similarity: 1.0,
                distance: 0,
            })
            .collect();
        // `assigned` is sorted by kept node; `visit` is not, so search.
        let from = assigned.partition_point(|a| a.0 < n);
        let to = assigned.partition_point(|a| a.0 <= n);
        for &(_, removed, e) in &assigned[from..to] {
            for &doc in c.node(removed) {
                members.push(Member {
                    doc,
                    similarity: e.similarity,
                    distance: super::wide_distance(&fps[doc as usize], &fps[rep as usize]),
                });
            }
        }
        if members.len() < 2 {
            continue;
        }
        members.sort_unstable_by_key(|m| m.doc);
        clusters.push(Cluster {
            representative: rep,
            members,
        });
    }
    clusters
}

/// Connected components of the verified pairs (`closure`): the best ranked document of
/// each represents it, and members carry their own similarity to it.
fn components(
    c: &Candidates,
    edges: &[Edge],
    best: &[u32],
    rank: &(impl Fn(u32) -> (i64, u32) + Sync),
    fps: &[Wide],
    sketch: &(impl Fn(u32) -> Sketch + Sync),
) -> Vec<Cluster> {
    let nodes = c.nodes();
    let mut uf = UnionFind::new(nodes);
    for e in edges {
        uf.union(e.a, e.b);
    }
    uf.sets(|size, node| size >= 2 || c.node(node).len() > 1)
        .into_iter()
        .map(|set| {
            let top = set
                .iter()
                .copied()
                .min_by_key(|&n| rank(best[n as usize]))
                .unwrap_or(set[0]);
            let rep = best[top as usize];
            let rep_sketch = (set.len() > 1).then(|| sketch(c.node(top)[0]));
            let mut members: Vec<Member> = set
                .iter()
                .flat_map(|&n| {
                    let similarity = match &rep_sketch {
                        Some(s) if n != top => s.similarity(&sketch(c.node(n)[0])) as f32,
                        _ => 1.0,
                    };
                    c.node(n).iter().map(move |&doc| Member {
                        doc,
                        similarity,
                        distance: super::wide_distance(&fps[doc as usize], &fps[rep as usize]),
                    })
                })
                .collect();
            members.sort_unstable_by_key(|m| m.doc);
            Cluster {
                representative: rep,
                members,
            }
        })
        .collect()
}

/// Every near-duplicate pair of documents: copies within a node, and every document of
/// one node with every document of a node verified against it.
fn pairs(c: &Candidates, edges: &[Edge]) -> Vec<Pair> {
    let mut out = Vec::new();
    let pair = |a: u32, b: u32, similarity: f32, distance: u32| Pair {
        a: a.min(b),
        b: a.max(b),
        similarity,
        distance,
    };
    for n in 0..c.nodes() as u32 {
        let docs = c.node(n);
        for (i, &a) in docs.iter().enumerate() {
            for &b in &docs[i + 1..] {
                out.push(pair(a, b, 1.0, 0));
            }
        }
    }
    for e in edges {
        for &a in c.node(e.a) {
            for &b in c.node(e.b) {
                out.push(pair(a, b, e.similarity, e.distance));
            }
        }
    }
    sort(&mut out, |p| (p.a, p.b));
    out
}

/// A stable sort by key, in parallel with the `rayon` feature.
fn sort<T: Copy + Send + Sync, K: Ord>(v: &mut [T], key: impl Fn(T) -> K + Sync) {
    #[cfg(feature = "rayon")]
    v.par_sort_by_key(|&x| key(x));
    #[cfg(not(feature = "rayon"))]
    v.sort_by_key(|&x| key(x));
}
