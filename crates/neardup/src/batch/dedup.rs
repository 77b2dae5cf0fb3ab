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
//! 2. **Verification** ([`verify`]). A candidate is a near-duplicate when its [`Rule`]
//!    holds ([`crate::decide`]): by default the estimated Jaccard similarity of the two
//!    documents' word 5-shingle sets ([`crate::jaccard`]) is at least the threshold.
//! 3. **Assignment, without chaining** ([`assign`], on nodes and verified edges alone, so
//!    that a caller who found and verified the edges elsewhere, as `neardup.ray` does on
//!    a cluster of machines, decides as batch does). Documents are visited in the order
//!    [`Keep`] gives.
//!    Each one not yet removed is kept, and removes its near-duplicates not yet removed; a
//!    removed document then belongs to the kept near-duplicate it is most similar to. So a
//!    document is removed only for a document that is itself its near-duplicate, and no
//!    two kept documents are near-duplicates of each other. If A ~ B and B ~ C but not
//!    A ~ C, then A is kept, B goes with A, and C is kept too, where connected components
//!    (`closure`) would remove C for A.

#[cfg(feature = "rayon")]
use rayon::prelude::*;

use super::{band_candidates, Crowded, UnionFind, WideMatcher};
use crate::decide::{Keep, Match, Rule};
use crate::error::{Error, Result};
use crate::fingerprint::Wide;
use crate::jaccard::{BandKeys, Banding, Sketch, Threshold};

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

/// A document removed for a document kept outside the run (a store's, say), which the
/// caller matched with the first document of its text ([`resolve_against`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outside {
    /// Its position in the input.
    pub doc: u32,
    /// The first document of its text: the one the caller matched outside.
    pub first: u32,
    /// Estimated Jaccard similarity to the outside document.
    pub similarity: f32,
    /// 256-bit Hamming distance to the outside document, as the caller gave it.
    pub distance: u32,
}

/// What [`dedup`] found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dedup {
    /// Clusters of two or more documents, ordered by representative.
    pub clusters: Vec<Cluster>,
    /// Documents removed for documents kept outside the run, in input order: empty but
    /// for [`resolve_against`].
    pub outside: Vec<Outside>,
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
            .sum::<u64>()
            + self.outside.len() as u64
    }

    /// Every document removed, increasing: those in a cluster but not its representative,
    /// and those removed for documents outside the run.
    pub fn removed(&self) -> Vec<u32> {
        let mut removed: Vec<u32> = self
            .clusters
            .iter()
            .flat_map(|c| {
                c.members
                    .iter()
                    .map(|m| m.doc)
                    .filter(move |&d| d != c.representative)
            })
            .chain(self.outside.iter().map(|o| o.doc))
            .collect();
        sort(&mut removed, |d| d);
        removed
    }

    /// Sets every distance from `fp(doc)`, the documents' 256-bit fingerprints: for a
    /// caller that decided by Jaccard without them ([`resolve_with`] given all-zero
    /// fingerprints) and computes them afterwards for the documents in clusters and pairs
    /// alone. The distances are those [`resolve`] reports: a member's to its cluster's
    /// representative, a pair's between its two documents (the fingerprints of documents
    /// of one text being equal).
    ///
    /// In parallel: at 10M documents its lookups of two million fingerprints took 1.5 s on
    /// one core.
    pub fn set_distances(&mut self, fp: impl Fn(u32) -> Wide + Sync) {
        let distance = |a: u32, b: u32| crate::hamming::wide_distance(&fp(a), &fp(b));
        let cluster = |c: &mut Cluster| {
            let rep = c.representative;
            for m in &mut c.members {
                m.distance = distance(m.doc, rep);
            }
        };
        let pair = |p: &mut Pair| p.distance = distance(p.a, p.b);
        #[cfg(feature = "rayon")]
        {
            self.clusters.par_iter_mut().for_each(cluster);
            self.pairs.par_iter_mut().for_each(pair);
        }
        #[cfg(not(feature = "rayon"))]
        {
            self.clusters.iter_mut().for_each(cluster);
            self.pairs.iter_mut().for_each(pair);
        }
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
    /// Crowded runs of band keys led ([`super::RUN_LEADERS`]).
    led: u64,
}

/// Which documents lead a crowded run of band keys ([`super::RUN_LEADERS`]): those the
/// keep rule `keep` visits first, by the texts' lengths `lens` (by document).
#[derive(Clone, Copy, Debug)]
pub struct Leading<'a> {
    /// The keep rule of the run.
    pub keep: Keep,
    /// Bytes of each document's text.
    pub lens: &'a [u32],
}

impl Candidates {
    /// Crowded runs of band keys whose documents were paired with the runs' leaders only
    /// ([`super::RUN_LEADERS`]): 0 when every candidate pair of the banding is in
    /// [`Candidates::pairs`].
    pub fn led_runs(&self) -> u64 {
        self.led
    }

    /// The candidate pairs of nodes, `a < b`, sorted: what [`verify`] checks.
    pub fn pairs(&self) -> &[(u32, u32)] {
        &self.pairs
    }

    /// The first document of node `i`, whose sketch stands for the node; nodes are
    /// numbered in the order of their first documents.
    pub fn first(&self, i: u32) -> u32 {
        self.node(i)[0]
    }

    /// These candidates once verified: only the nodes that can still be in a cluster (in
    /// one of `edges`, holding copies, or `keep(node)`), renumbered in order, and `edges`
    /// renumbered, their pairs the only pairs left. [`resolve_verified`] finds from them
    /// what it finds from these candidates and `edges`, but for [`Dedup::candidates`],
    /// which then counts the verified pairs: at 100M documents most candidate pairs are
    /// band keys agreeing by chance, and their nodes need not be assigned.
    pub fn verified(self, edges: Vec<Edge>, keep: impl Fn(u32) -> bool) -> (Candidates, Vec<Edge>) {
        let nodes = self.nodes();
        let kept = self.kept(&edges, keep);
        let mut new = vec![u32::MAX; nodes];
        let (mut order, mut starts) = (Vec::new(), vec![0u32]);
        for n in 0..nodes as u32 {
            let docs = self.node(n);
            if kept[n as usize] {
                new[n as usize] = (starts.len() - 1) as u32;
                order.extend_from_slice(docs);
                starts.push(order.len() as u32);
            }
        }
        drop(kept);
        let edges: Vec<Edge> = edges
            .into_iter()
            .map(|e| Edge {
                a: new[e.a as usize],
                b: new[e.b as usize],
                ..e
            })
            .collect();
        let c = Candidates {
            order,
            starts,
            pairs: edges.iter().map(|e| (e.a, e.b)).collect(),
            wordless: self.wordless,
            led: self.led,
        };
        (c, edges)
    }

    /// The documents [`Candidates::verified`] keeps with `edges` (and no `keep`), in
    /// increasing order: every document that may be in a cluster or a pair once `edges`,
    /// or some of them, are decided on.
    pub fn documents_with(&self, edges: &[Edge]) -> Vec<u32> {
        let kept = self.kept(edges, |_| false);
        let mut docs: Vec<u32> = (0..self.nodes() as u32)
            .filter(|&n| kept[n as usize])
            .flat_map(|n| self.node(n).iter().copied())
            .collect();
        sort(&mut docs, |d| d);
        docs
    }

    /// Per node, whether it can still be in a cluster: in one of `edges`, holding copies,
    /// or `keep(node)`.
    fn kept(&self, edges: &[Edge], keep: impl Fn(u32) -> bool) -> Vec<bool> {
        let mut kept = vec![false; self.nodes()];
        for e in edges {
            kept[e.a as usize] = true;
            kept[e.b as usize] = true;
        }
        for (n, k) in kept.iter_mut().enumerate() {
            *k = *k || self.node(n as u32).len() > 1 || keep(n as u32);
        }
        kept
    }

    /// Bytes the candidates hold.
    pub fn bytes(&self) -> u64 {
        (4 * (self.order.len() + self.starts.len()) + 8 * self.pairs.len()) as u64
    }

    fn node(&self, i: u32) -> &[u32] {
        &self.order[self.starts[i as usize] as usize..self.starts[i as usize + 1] as usize]
    }

    /// Nodes: distinct texts.
    pub fn nodes(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// The documents of all nodes, node by node.
    pub fn documents(&self) -> &[u32] {
        &self.order
    }

    /// How many candidate pairs of distinct texts there are.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Candidates found elsewhere (out of memory, a band at a time): node `i` is the
    /// documents `order[starts[i]..starts[i + 1]]`, in input order, documents of one text;
    /// `pairs` are candidate pairs of nodes, `a < b`, each once; `wordless` counts the
    /// documents without words. Nodes that are neither in a pair nor hold two documents
    /// may be left out: they change nothing [`resolve`] finds. An error if `starts` does
    /// not cut `order` into non-empty nodes or a pair names a node outside them.
    pub fn from_parts(
        order: Vec<u32>,
        starts: Vec<u32>,
        pairs: Vec<(u32, u32)>,
        wordless: u64,
    ) -> Result<Candidates> {
        let cut = starts.first() == Some(&0)
            && starts.last().map(|&s| s as usize) == Some(order.len())
            && starts.windows(2).all(|w| w[0] < w[1]);
        if !cut || order.len() >= u32::MAX as usize {
            return Err(Error::InvalidNodes {
                documents: order.len(),
            });
        }
        let nodes = starts.len() - 1;
        if let Some(&(a, b)) = pairs.iter().find(|&&(a, b)| a >= b || b as usize >= nodes) {
            return Err(Error::UnknownNode {
                node: a.max(b),
                nodes,
            });
        }
        Ok(Candidates {
            order,
            starts,
            pairs,
            wordless,
            led: 0,
        })
    }

    /// The documents whose sketches [`resolve`] reads, in increasing order: the first
    /// document of each node in a candidate pair.
    pub fn needs(&self) -> Vec<u32> {
        // Marked, not listed and sorted: the pairs name their nodes over and over.
        let mut paired = vec![false; self.nodes()];
        for &(a, b) in &self.pairs {
            for n in [a, b] {
                if let Some(p) = paired.get_mut(n as usize) {
                    *p = true;
                }
            }
        }
        let mut docs: Vec<u32> = (0..self.nodes() as u32)
            .filter(|&n| paired[n as usize])
            .map(|n| self.first(n))
            .collect();
        sort(&mut docs, |d| d);
        docs
    }
}

/// Candidate pairs the fingerprint-distance rule may hold a document, and at least.
const LANE_PAIRS_PER_DOCUMENT: usize = 64;
const LANE_PAIRS_LEAST: usize = 1 << 26;

/// Step 1: nodes of equal texts (text hash and fingerprint both equal) and their candidate
/// pairs from `source`. `fps[i]` and `text_hashes[i]` belong to document `i` (and so do
/// the band keys of [`Source::Bands`]); any 64-bit hash of the text's bytes serves.
/// With `leading`, crowded runs of band keys are led by the documents it keeps first
/// ([`super::RUN_LEADERS`]); without, every pair of the banding is a candidate.
/// Memory: 8 bytes a document, one band or lane's matching at a time, and 8 bytes a
/// candidate.
pub fn candidates(
    fps: &[Wide],
    text_hashes: &[u64],
    source: Source<'_>,
    leading: Option<Leading<'_>>,
) -> Result<Candidates> {
    let limit = match source {
        Source::Bands(_) => usize::MAX,
        Source::Lanes(_) => LANE_PAIRS_PER_DOCUMENT
            .saturating_mul(fps.len())
            .max(LANE_PAIRS_LEAST),
    };
    candidates_within(fps, text_hashes, source, leading, limit)
}

/// [`candidates`], an error past `limit` pairs.
fn candidates_within(
    fps: &[Wide],
    text_hashes: &[u64],
    source: Source<'_>,
    leading: Option<Leading<'_>>,
    limit: usize,
) -> Result<Candidates> {
    let n = fps.len();
    if let Some(l) = leading.filter(|l| l.lens.len() != n) {
        return Err(Error::LengthMismatch {
            fingerprints: n,
            hashes: l.lens.len(),
        });
    }
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
        led: 0,
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
    // The lanes have no keep order to lead a crowded run by ([`Crowded`]): a family of
    // near-copies gives all its pairs there, so they are bounded, at 8 bytes a pair
    // (200,000 copies of a template aborted allocating 8 GB): `limit`.
    let sink = |a: usize, b: usize| -> Result<()> {
        if pairs.len() >= limit {
            return Err(Error::TooManyCandidates {
                limit,
                documents: n,
            });
        }
        let (x, y) = (worded[a], worded[b]);
        pairs.push((x.min(y), x.max(y)));
        Ok(())
    };
    out.led = match (source, leading) {
        (Source::Bands(keys), None) => band_candidates(
            worded.len(),
            |i| &keys[doc_of(i)],
            Crowded::All::<fn(&mut [u32])>,
            sink,
        )?,
        (Source::Bands(keys), Some(l)) => {
            let rank = |i: u32| {
                let doc = doc_of(i as usize);
                Rank {
                    len: l.lens[doc],
                    position: doc as u64,
                }
                .key(l.keep)
            };
            let lead = |docs: &mut [u32]| docs.sort_by_key(|&i| rank(i));
            band_candidates(worded.len(), |i| &keys[doc_of(i)], Crowded::Led(lead), sink)?
        }
        (Source::Lanes(matcher), _) => {
            matcher.candidates_by(worded.len(), |i| &fps[doc_of(i)], sink)?;
            0
        }
    };
    out.pairs = pairs;
    Ok(out)
}

/// Steps 2 and 3: verify the candidates with `options.rule` ([`verify`]) and assign
/// documents to the documents kept for them ([`assign`]). `sketch(doc)` is called for the
/// documents of [`Candidates::needs`] only (from several threads); `lens` are the texts'
/// lengths, for [`Keep::Longest`] and [`Keep::Shortest`].
pub fn resolve(
    c: &Candidates,
    fps: &[Wide],
    lens: &[u32],
    sketch: impl Fn(u32) -> Sketch + Sync,
    options: &Options,
) -> Dedup {
    resolve_with(
        c,
        |doc| fps[doc as usize],
        |doc| lens.get(doc as usize).copied().unwrap_or(0),
        sketch,
        options,
    )
}

/// [`resolve`], with each document's fingerprint and length from `fp(doc)` and
/// `len(doc)` (called for the documents of `c`'s nodes only): for a caller that holds
/// them for those documents alone. Under [`Rule::Jaccard`] the fingerprints give only
/// the distances reported; all zero, they can be set afterwards
/// ([`Dedup::set_distances`]).
pub fn resolve_with(
    c: &Candidates,
    fp: impl Fn(u32) -> Wide + Sync,
    len: impl Fn(u32) -> u32,
    sketch: impl Fn(u32) -> Sketch + Sync,
    options: &Options,
) -> Dedup {
    // Without documents outside, assignment cannot fail: nodes and edges come from `c`.
    resolve_against(c, fp, len, sketch, options, |_| None).unwrap_or_default()
}

/// [`resolve_with`], the run's documents coming after documents kept outside it (a
/// store's): `outside(doc)`, called for the first document of each node, is its most
/// similar near-duplicate kept outside, if it has one ([`assign_against`]). The answer is
/// that of deduplicating the outside documents followed by the run's, in order, when the
/// outside documents are near-duplicates of none of each other and rank first
/// ([`Dedup::outside`] lists what they remove). An error with `options.closure`.
pub fn resolve_against(
    c: &Candidates,
    fp: impl Fn(u32) -> Wide + Sync,
    len: impl Fn(u32) -> u32,
    sketch: impl Fn(u32) -> Sketch + Sync,
    options: &Options,
    outside: impl Fn(u32) -> Option<Match>,
) -> Result<Dedup> {
    let edges = verify(
        &c.pairs,
        |n| sketch(c.first(n)),
        |n| fp(c.first(n)),
        options.rule,
    );
    resolve_verified(c, edges, fp, len, sketch, options, outside)
}

/// [`resolve_against`] with the candidates already verified: `edges` are what [`verify`]
/// gives for `c`'s pairs (nodes), in their order, for a caller that verifies them its own
/// way (a block of sketches at a time). `sketch(doc)` is then called only with
/// `options.closure`, to measure a member against its component's top.
pub fn resolve_verified(
    c: &Candidates,
    edges: Vec<Edge>,
    fp: impl Fn(u32) -> Wide + Sync,
    len: impl Fn(u32) -> u32,
    sketch: impl Fn(u32) -> Sketch + Sync,
    options: &Options,
    outside: impl Fn(u32) -> Option<Match>,
) -> Result<Dedup> {
    let nodes = c.nodes();

    // Each node ranks as its member that `keep` prefers (copies have equal lengths, so
    // that is its first document but for a collision of text hashes).
    let rank_of = |doc: u32| Rank {
        len: len(doc),
        position: u64::from(doc),
    };
    let best: Vec<u32> = (0..nodes as u32)
        .map(|node| {
            c.node(node)
                .iter()
                .copied()
                .min_by_key(|&d| rank_of(d).key(options.keep))
                .unwrap_or(0)
        })
        .collect();
    let ranks: Vec<Rank> = best.iter().map(|&d| rank_of(d)).collect();
    let matched: Vec<Option<Match>> = (0..nodes as u32).map(|n| outside(c.first(n))).collect();
    let links = assign_against(&ranks, &edges, options.keep, options.closure, &matched)?;

    // A kept node's cluster: its documents, then those of the nodes linked to it.
    let mut linked: Vec<(u32, u32)> = links
        .iter()
        .enumerate()
        .filter(|&(n, l)| l.to != n as u32 && l.to != Link::OUTSIDE)
        .map(|(n, l)| (l.to, n as u32))
        .collect();
    sort(&mut linked, |x| x);
    let mut clusters = Vec::new();
    let mut at = 0;
    for kept in 0..nodes as u32 {
        let from = at;
        while at < linked.len() && linked[at].0 == kept {
            at += 1;
        }
        let own = c.node(kept);
        if links[kept as usize].to != kept || (at == from && own.len() < 2) {
            continue;
        }
        let rep = best[kept as usize];
        let mut members: Vec<Member> = own
            .iter()
            .map(|&doc| Member {
                doc,
                similarity: 1.0,
                distance: crate::hamming::wide_distance(&fp(doc), &fp(rep)),
            })
            .collect();
        for &(_, n) in &linked[from..at] {
            // With closure, assignment does not know how near a member is to the
            // component's top: measure it.
            let near = links[n as usize].near.unwrap_or_else(|| {
                let (a, b) = (c.first(kept), c.first(n));
                measure(&sketch(a), &sketch(b), &fp(a), &fp(b))
            });
            for &doc in c.node(n) {
                members.push(Member {
                    doc,
                    similarity: near.similarity,
                    distance: crate::hamming::wide_distance(&fp(doc), &fp(rep)),
                });
            }
        }
        members.sort_unstable_by_key(|m| m.doc);
        clusters.push(Cluster {
            representative: rep,
            members,
        });
    }
    clusters.sort_by_key(|cl| cl.representative);
    let mut removed_outside: Vec<Outside> = Vec::new();
    for (n, link) in links.iter().enumerate() {
        if link.to != Link::OUTSIDE {
            continue;
        }
        let near = link.near.unwrap_or(Match {
            similarity: 0.0,
            distance: 0,
        });
        removed_outside.extend(c.node(n as u32).iter().map(|&doc| Outside {
            doc,
            first: c.first(n as u32),
            similarity: near.similarity,
            distance: near.distance,
        }));
    }
    sort(&mut removed_outside, |o| o.doc);

    let mut out = Dedup {
        clusters,
        outside: removed_outside,
        pairs: Vec::new(),
        exact_duplicates: (0..nodes as u32).map(|n| c.node(n).len() as u64 - 1).sum(),
        wordless: c.wordless,
        candidates: c.pairs.len() as u64,
        verified: edges.len() as u64,
    };
    if options.pairs {
        out.pairs = pairs(c, &edges);
    }
    Ok(out)
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
    let leading = Leading {
        keep: options.keep,
        lens,
    };
    let c = candidates(fps, text_hashes, source, Some(leading))?;
    Ok(resolve(&c, fps, lens, |d| sketches[d as usize], options))
}

/// How near two nodes (distinct texts) are: the similarity of their sketches and the
/// distance of their fingerprints. What verification judges, and what clusters report.
pub fn measure(a: &Sketch, b: &Sketch, fa: &Wide, fb: &Wide) -> Match {
    Match {
        similarity: a.similarity(b) as f32,
        distance: crate::hamming::wide_distance(fa, fb),
    }
}

/// A verified pair of nodes: an edge of the near-duplicate graph that [`assign`] reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Edge {
    /// One node.
    pub a: u32,
    /// The other.
    pub b: u32,
    /// Estimated Jaccard similarity ([`measure`]).
    pub similarity: f32,
    /// 256-bit Hamming distance of the fingerprints.
    pub distance: u32,
}

/// Step 2: the pairs of nodes among `pairs` that are near-duplicates under `rule`, in the
/// order of `pairs`, with how near they are ([`measure`]). `sketch(n)` and
/// `fingerprint(n)` are node `n`'s (called from several threads); nodes are distinct
/// texts with words, so the rule alone decides.
pub fn verify(
    pairs: &[(u32, u32)],
    sketch: impl Fn(u32) -> Sketch + Sync,
    fingerprint: impl Fn(u32) -> Wide + Sync,
    rule: Rule,
) -> Vec<Edge> {
    let check = |&(a, b): &(u32, u32)| {
        let m = measure(&sketch(a), &sketch(b), &fingerprint(a), &fingerprint(b));
        rule.accepts(m).then_some(Edge {
            a,
            b,
            similarity: m.similarity,
            distance: m.distance,
        })
    };
    #[cfg(feature = "rayon")]
    return pairs.par_iter().filter_map(check).collect();
    #[cfg(not(feature = "rayon"))]
    return pairs.iter().filter_map(check).collect();
}

/// How far from a Jaccard threshold an estimate is decided on exact similarities by
/// [`decide_exactly`]: five standard errors of a sketch's estimate near 0.8, so that a pair
/// on the other side of the threshold is estimated outside the margin about once in 3.5
/// million.
pub const EXACT_MARGIN: f64 = 0.1;

impl Options {
    /// These options with a Jaccard threshold [`EXACT_MARGIN`] lower, for [`verify`] to
    /// keep the pairs estimated just below the threshold for [`decide_exactly`].
    pub fn loosened(&self) -> Options {
        match self.rule {
            Rule::Jaccard(t) => {
                let lower = (t.get() - EXACT_MARGIN).max(f64::MIN_POSITIVE);
                Options {
                    rule: Rule::Jaccard(Threshold::new(lower).unwrap_or(t)),
                    ..*self
                }
            }
            Rule::Distance(_) => *self,
        }
    }

    /// The banding whose band keys find the candidates, with the pairs near the threshold
    /// decided on exact similarities (`exact`) or not: the loosened rule's under `exact`,
    /// so that nearly every pair from [`EXACT_MARGIN`] below the threshold up is a
    /// candidate (at 0.8, 3 bins a band instead of 5: a pair at 0.85 is missed with
    /// probability 5 × 10⁻⁹ instead of 8 × 10⁻⁶, which at 100M documents was 3 planted
    /// pairs); [`Rule::banding`] otherwise.
    pub fn candidate_banding(&self, exact: bool) -> Banding {
        if exact {
            self.loosened().rule.banding()
        } else {
            self.rule.banding()
        }
    }
}

/// Whether `e`, verified with [`Options::loosened`] options, is estimated within
/// [`EXACT_MARGIN`] of `t`: one [`decide_exactly`] decides again.
pub fn near_threshold(e: &Edge, t: Threshold) -> bool {
    f64::from(e.similarity) < t.get() + EXACT_MARGIN
}

/// The nodes of the edges [`near_threshold`] of `t`, increasing, each once: those whose
/// texts [`decide_exactly`] compares.
pub fn near_nodes(edges: &[Edge], t: Threshold) -> Vec<u32> {
    let mut nodes: Vec<u32> = edges
        .iter()
        .filter(|e| near_threshold(e, t))
        .flat_map(|e| [e.a, e.b])
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
}

/// The positions of the edges [`near_threshold`] of `t`, increasing: those
/// [`settle_exactly`] decides again.
pub fn near_edges(edges: &[Edge], t: Threshold) -> Vec<usize> {
    (0..edges.len())
        .filter(|&k| near_threshold(&edges[k], t))
        .collect()
}

/// The edges verified with [`Options::loosened`] options, those at positions `near`
/// ([`near_edges`]) decided again on `exact[i]`, the exact Jaccard similarity of edge
/// `near[i]`'s nodes: kept, with it as their similarity, when it reaches `t`, let go
/// otherwise; the others kept as they are, in their order. Returns how many of those
/// decided again were kept. For a caller that computes the exact similarities in an order
/// of its own (the CLI reads the sets a bucket at a time); [`decide_exactly`] otherwise.
pub fn settle_exactly(edges: &mut Vec<Edge>, t: Threshold, near: &[usize], exact: &[f64]) -> u64 {
    debug_assert_eq!(near.len(), exact.len());
    let mut accepted = 0;
    // Decided in place, a rejected edge's similarity set to NaN, then let go: no second
    // list of edges (millions at 100M documents).
    for (&k, &j) in near.iter().zip(exact) {
        let e = &mut edges[k];
        if t.accepts(j) {
            e.similarity = j as f32;
            accepted += 1;
        } else {
            e.similarity = f32::NAN;
        }
    }
    edges.retain(|e| !e.similarity.is_nan());
    accepted
}

/// The edges verified with [`Options::loosened`] options, those [`near_threshold`]
/// decided again on `exact(a, b)`, the exact Jaccard similarity of nodes `a` and `b`
/// (called from several threads), as [`settle_exactly`] does. Returns how many of those
/// decided again were kept.
pub fn decide_exactly<E: Send>(
    edges: &mut Vec<Edge>,
    t: Threshold,
    exact: impl Fn(u32, u32) -> std::result::Result<f64, E> + Sync + Send,
) -> std::result::Result<u64, E> {
    let near = near_edges(edges, t);
    let of = |&k: &usize| exact(edges[k].a, edges[k].b);
    #[cfg(feature = "rayon")]
    let similarities = near
        .par_iter()
        .map(of)
        .collect::<std::result::Result<Vec<f64>, E>>()?;
    #[cfg(not(feature = "rayon"))]
    let similarities = near
        .iter()
        .map(of)
        .collect::<std::result::Result<Vec<f64>, E>>()?;
    Ok(settle_exactly(edges, t, &near, &similarities))
}

/// [`decide_exactly`] with the shingle sets at hand: `set(node)` is the sorted shingle set
/// of a node's text ([`crate::jaccard::shingle_set`]), given for every node of a
/// [`near_nodes`] pair. A pair one of whose sets is missing is let go (similarity 0),
/// never accepted unread. Returns how many of the pairs decided again were kept.
pub fn decide_on_sets<'s>(
    edges: &mut Vec<Edge>,
    t: Threshold,
    set: impl Fn(u32) -> Option<&'s [u64]> + Sync + Send,
) -> u64 {
    let exact = |a, b| -> std::result::Result<f64, std::convert::Infallible> {
        Ok(match (set(a), set(b)) {
            (Some(x), Some(y)) => crate::jaccard::exact(x, y),
            _ => 0.0,
        })
    };
    decide_exactly(edges, t, exact).unwrap_or_else(|never| match never {})
}

/// How [`Keep`] ranks a node: by the length of its text (for [`Keep::Longest`] and
/// [`Keep::Shortest`]), then by its position in the input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rank {
    /// Bytes of its text.
    pub len: u32,
    /// Its position in the input (its first document's): any numbering in input order.
    pub position: u64,
}

impl Rank {
    /// The sort key: the node `keep` visits first is the least.
    pub fn key(self, keep: Keep) -> (i64, u64) {
        let len = i64::from(self.len);
        match keep {
            Keep::First => (0, self.position),
            Keep::Longest => (-len, self.position),
            Keep::Shortest => (len, self.position),
        }
    }
}

/// Where [`assign`] put a node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    /// The node it goes with: itself when it is kept; the kept near-duplicate it is most
    /// similar to when it is removed; with closure, the best ranked node of its component.
    pub to: u32,
    /// How near it is to `to`: from their edge; `None` with closure, where `to` need not
    /// be a neighbour (measure the two, [`measure`]).
    pub near: Option<Match>,
}

/// Step 3, without chaining: `ranks[n]` ranks node `n` ([`Rank::key`]), `edges` are the
/// verified pairs of nodes. Nodes are visited in rank order; each one not yet removed is
/// kept and removes its neighbours not yet removed; a removed node then goes to its most
/// similar kept neighbour (the better ranked of equals). With `closure`, every node goes
/// to the best ranked node of its connected component instead. A node without edges is
/// kept. An error if an edge names a node outside `ranks`.
pub fn assign(ranks: &[Rank], edges: &[Edge], keep: Keep, closure: bool) -> Result<Vec<Link>> {
    assign_against(ranks, edges, keep, closure, &[])
}

impl Link {
    /// [`Link::to`] of a node removed for a document kept outside the run
    /// ([`assign_against`]).
    pub const OUTSIDE: u32 = u32::MAX;
}

/// [`assign`] after documents kept outside the run: `outside[n]`, when given, is node
/// `n`'s most similar near-duplicate among them (`outside` may be empty: none). The
/// outside documents rank before every node and are near-duplicates of none of each
/// other, so each is kept and removes the nodes that match it; such a node then goes, as
/// every removed node, to its most similar kept near-duplicate, the outside one
/// ([`Link::OUTSIDE`]) among equals. An error with `closure` when a node matches outside.
pub fn assign_against(
    ranks: &[Rank],
    edges: &[Edge],
    keep: Keep,
    closure: bool,
    outside: &[Option<Match>],
) -> Result<Vec<Link>> {
    let nodes = ranks.len();
    let outside_of = |n: u32| outside.get(n as usize).copied().flatten();
    if nodes >= u32::MAX as usize {
        return Err(Error::TooManyFingerprints {
            got: nodes,
            max: u32::MAX as usize - 1,
        });
    }
    if let Some(e) = edges
        .iter()
        .find(|e| e.a as usize >= nodes || e.b as usize >= nodes)
    {
        return Err(Error::UnknownNode {
            node: e.a.max(e.b),
            nodes,
        });
    }
    let rank = |n: u32| ranks[n as usize].key(keep);
    let itself = |n: u32| Link {
        to: n,
        near: Some(Match {
            similarity: 1.0,
            distance: 0,
        }),
    };
    let mut links: Vec<Link> = (0..nodes as u32)
        .map(|n| match outside_of(n) {
            Some(m) => Link {
                to: Link::OUTSIDE,
                near: Some(m),
            },
            None => itself(n),
        })
        .collect();
    if closure && outside.iter().any(Option::is_some) {
        return Err(Error::ClosureWithOutside);
    }
    if closure {
        let mut uf = UnionFind::new(nodes);
        for e in edges {
            uf.union(e.a, e.b);
        }
        for set in uf.sets(|size, _| size >= 2) {
            let top = set
                .iter()
                .copied()
                .min_by_key(|&n| rank(n))
                .unwrap_or(set[0]);
            for n in set.into_iter().filter(|&n| n != top) {
                links[n as usize] = Link {
                    to: top,
                    near: None,
                };
            }
        }
        return Ok(links);
    }

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
    drop(degree);
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

    // Only nodes with a neighbour take part.
    let mut visit: Vec<u32> = (0..nodes as u32)
        .filter(|&n| offsets[n as usize] != offsets[n as usize + 1])
        .collect();
    sort(&mut visit, rank);

    const FREE: u32 = u32::MAX;
    const KEPT: u32 = u32::MAX - 1;
    const OUT: u32 = u32::MAX - 2;
    // Per node: FREE, KEPT, OUT (removed for an outside document), or the node it was
    // removed for.
    let mut state: Vec<u32> = (0..nodes as u32)
        .map(|n| if outside_of(n).is_some() { OUT } else { FREE })
        .collect();
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
                    .then_with(|| rank(*m1).cmp(&rank(*m2)))
            });
        // The outside document ranks first: it wins ties.
        let outside_nearer = outside_of(n).is_some_and(|o| {
            chosen.is_none_or(|(_, e)| o.similarity.total_cmp(&e.similarity).is_ge())
        });
        if outside_nearer {
            continue;
        }
        if let Some((m, e)) = chosen {
            links[n as usize] = Link {
                to: m,
                near: Some(Match {
                    similarity: e.similarity,
                    distance: e.distance,
                }),
            };
        }
    }
    Ok(links)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The lanes' candidates past their limit are an error that says so, not an
    /// allocation that fails; within it, the same candidates.
    #[test]
    fn lane_candidates_past_the_limit_are_an_error() {
        let fps: Vec<Wide> = (0..40u64).map(|i| [i << 60, 7, 7, 7]).collect();
        let hashes: Vec<u64> = (0..40).collect();
        let matcher = WideMatcher::new(
            super::super::layout(crate::tables::Blocks::Auto, 40, 3).unwrap(),
            0,
        );
        let all = candidates(&fps, &hashes, Source::Lanes(&matcher), None).unwrap();
        assert_eq!(all.pairs().len(), 40 * 39 / 2);
        let within = candidates_within(&fps, &hashes, Source::Lanes(&matcher), None, 780).unwrap();
        assert_eq!(within.pairs(), all.pairs());
        let past = candidates_within(&fps, &hashes, Source::Lanes(&matcher), None, 779);
        assert!(
            matches!(
                past,
                Err(Error::TooManyCandidates {
                    limit: 779,
                    documents: 40
                })
            ),
            "{past:?}"
        );
    }
    use proptest::prelude::*;

    fn edge(a: u32, b: u32, similarity: f32) -> Edge {
        Edge {
            a,
            b,
            similarity,
            distance: 7,
        }
    }

    /// The module's example: A ~ B and B ~ C but not A ~ C keeps A and C and removes B,
    /// which goes to the one it is more similar to; closure puts all three under A,
    /// similarities unknown to assignment.
    #[test]
    fn assigns_without_chaining() {
        let ranks: Vec<Rank> = (0..4)
            .map(|i| Rank {
                len: 10 - i,
                position: u64::from(i) * 100,
            })
            .collect();
        let to = |links: &[Link]| links.iter().map(|l| l.to).collect::<Vec<_>>();
        let edges = [edge(0, 1, 0.95), edge(1, 2, 0.9)];
        let links = assign(&ranks, &edges, Keep::First, false).unwrap();
        assert_eq!(to(&links), [0, 0, 2, 3]);
        assert_eq!(
            links[1].near.map(|m| (m.similarity, m.distance)),
            Some((0.95, 7))
        );
        assert_eq!(links[3].near.map(|m| m.similarity), Some(1.0));
        let edges = [edge(0, 1, 0.9), edge(1, 2, 0.95)];
        assert_eq!(
            to(&assign(&ranks, &edges, Keep::First, false).unwrap()),
            [0, 2, 2, 3]
        );
        // Shortest first: node 2 (8 bytes) is visited before node 1 and removes it, and
        // node 0 (10 bytes) is kept, node 1 going to the more similar of the two.
        let chain = [edge(0, 1, 0.9), edge(1, 2, 0.85), edge(0, 2, 0.8)];
        assert_eq!(
            to(&assign(&ranks, &chain, Keep::Shortest, false).unwrap()),
            [2, 2, 2, 3]
        );
        assert_eq!(
            to(&assign(&ranks, &chain, Keep::Longest, false).unwrap()),
            [0, 0, 0, 3]
        );
        let closure = assign(&ranks, &edges, Keep::First, true).unwrap();
        assert_eq!(to(&closure), [0, 0, 0, 3]);
        assert_eq!(closure[2].near, None);
        // A removed node goes to the most similar kept neighbour, ties to the better ranked.
        let star = [
            edge(0, 2, 0.8),
            edge(1, 2, 0.9),
            edge(0, 3, 0.85),
            edge(1, 3, 0.85),
        ];
        assert_eq!(
            to(&assign(&ranks, &star, Keep::First, false).unwrap()),
            [0, 1, 1, 0]
        );
        assert_eq!(
            assign(&ranks, &[edge(1, 4, 0.9)], Keep::First, false),
            Err(Error::UnknownNode { node: 4, nodes: 4 })
        );
    }

    /// A graph of `nodes` nodes: ranks, edges with similarities from a few values (so that
    /// ties happen), and each node's outside match, if any.
    fn graph() -> impl Strategy<Value = (Vec<Rank>, Vec<Edge>, Vec<Option<Match>>)> {
        (1usize..14).prop_flat_map(|nodes| {
            let sim = prop::sample::select(vec![0.8f32, 0.85, 0.9, 1.0]);
            let ranks = prop::collection::vec((0u32..4, 0u64..1000), nodes);
            let edges =
                prop::collection::vec((0..nodes as u32, 0..nodes as u32, sim.clone()), 0..30);
            let outside = prop::collection::vec(prop::option::weighted(0.3, sim), nodes);
            (ranks, edges, outside).prop_map(|(ranks, edges, outside)| {
                let ranks = ranks
                    .into_iter()
                    .enumerate()
                    .map(|(i, (len, p))| Rank {
                        len,
                        position: p * 64 + i as u64,
                    })
                    .collect();
                let mut seen = std::collections::HashSet::new();
                let edges = edges
                    .into_iter()
                    .filter(|&(a, b, _)| a != b && seen.insert((a.min(b), a.max(b))))
                    .map(|(a, b, s)| Edge {
                        a,
                        b,
                        similarity: s,
                        distance: a + b,
                    })
                    .collect();
                let outside = outside
                    .into_iter()
                    .map(|o| {
                        o.map(|s| Match {
                            similarity: s,
                            distance: 3,
                        })
                    })
                    .collect();
                (ranks, edges, outside)
            })
        })
    }

    proptest::proptest! {
        /// The oracle: each edge judged on its own, in order. An edge estimated at or
        /// above the margin stays as it is; one within it stays, with the exact
        /// similarity, when that reaches the threshold; nothing else stays.
        #[test]
        fn exact_decisions_are_each_edge_judged_alone(
            t in 0.5f64..0.95,
            raw in prop::collection::vec((0u32..40, 0u32..40, 0.0f32..1.0, 0.0f64..1.0), 0..60),
        ) {
            let t = Threshold::new(t).unwrap();
            let lower = t.get() - EXACT_MARGIN;
            let edges: Vec<Edge> = raw
                .iter()
                .filter(|r| f64::from(r.2) >= lower)
                .map(|r| edge(r.0, r.1, r.2))
                .collect();
            let exact_of: std::collections::HashMap<(u32, u32), f64> =
                raw.iter().map(|r| ((r.0, r.1), r.3)).collect();
            let want: Vec<Edge> = edges
                .iter()
                .filter_map(|e| {
                    if f64::from(e.similarity) >= t.get() + EXACT_MARGIN {
                        return Some(*e);
                    }
                    let j = exact_of[&(e.a, e.b)];
                    (j >= t.get()).then_some(Edge { similarity: j as f32, ..*e })
                })
                .collect();
            let near = edges.iter().filter(|e| near_threshold(e, t)).count();
            let nodes: std::collections::BTreeSet<u32> = edges
                .iter()
                .filter(|e| f64::from(e.similarity) < t.get() + EXACT_MARGIN)
                .flat_map(|e| [e.a, e.b])
                .collect();
            prop_assert_eq!(near_nodes(&edges, t), nodes.into_iter().collect::<Vec<_>>());
            let mut got = edges.clone();
            let accepted = decide_exactly(&mut got, t, |a, b| {
                Ok::<_, ()>(exact_of[&(a, b)])
            })
            .unwrap();
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(accepted as usize, want.len() - (edges.len() - near));
            // The same decisions from the similarities computed in another order.
            let at = near_edges(&edges, t);
            prop_assert_eq!(at.len(), near);
            prop_assert!(at.iter().all(|&k| near_threshold(&edges[k], t)));
            let mut order: Vec<usize> = (0..at.len()).collect();
            order.reverse();
            let (positions, exact): (Vec<usize>, Vec<f64>) = order
                .iter()
                .map(|&i| (at[i], exact_of[&(edges[at[i]].a, edges[at[i]].b)]))
                .unzip();
            let mut settled = edges.clone();
            let kept = settle_exactly(&mut settled, t, &positions, &exact);
            prop_assert_eq!(&settled, &want);
            prop_assert_eq!(kept, accepted);
        }
    }

    proptest::proptest! {
        /// `documents_with` names the documents `verified` keeps, whatever nodes hold
        /// copies and whichever edges are given.
        #[test]
        fn documents_with_are_those_verified_keeps(
            sizes in proptest::collection::vec(1u32..4, 1..30),
            raw in proptest::collection::vec((0u32..30, 0u32..30), 0..20),
            shuffle in any::<u64>(),
        ) {
            // Documents numbered in a scrambled order, so nodes are not runs of numbers.
            let n: u32 = sizes.iter().sum();
            let mut docs: Vec<u32> = (0..n).collect();
            docs.sort_by_key(|&d| (u64::from(d) ^ shuffle).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut starts = vec![0u32];
            for s in &sizes {
                starts.push(starts[starts.len() - 1] + s);
            }
            for w in starts.windows(2) {
                docs[w[0] as usize..w[1] as usize].sort_unstable();
            }
            let nodes = sizes.len() as u32;
            let mut pairs: Vec<(u32, u32)> = raw
                .iter()
                .map(|&(a, b)| (a % nodes, b % nodes))
                .filter(|&(a, b)| a < b)
                .collect();
            pairs.sort_unstable();
            pairs.dedup();
            let c = Candidates::from_parts(docs, starts, pairs.clone(), 0).unwrap();
            let edges: Vec<Edge> = pairs.iter().step_by(2).map(|&(a, b)| edge(a, b, 0.9)).collect();
            let got = c.documents_with(&edges);
            let (kept, _) = c.verified(edges, |_| false);
            let mut want = kept.documents().to_vec();
            want.sort_unstable();
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn candidates_under_exact_come_from_the_loosened_threshold() {
        let o = |t: f64| Options {
            rule: Rule::Jaccard(Threshold::new(t).unwrap()),
            ..Options::default()
        };
        for t in [0.6, 0.7, 0.8, 0.9] {
            assert_eq!(o(t).candidate_banding(false), o(t).rule.banding());
            let loose = o(t).candidate_banding(true);
            assert_eq!(loose, o(t - EXACT_MARGIN).rule.banding());
            // Every pair estimated from the margin below up is nearly always a candidate.
            assert!(loose.probability(t - EXACT_MARGIN) >= 0.9995);
            assert!(loose.rows() <= o(t).rule.banding().rows());
        }
        assert_eq!(o(0.8).candidate_banding(true).rows(), 3);
    }

    #[test]
    fn decisions_on_sets_take_the_exact_similarity_and_let_go_what_has_none() {
        let t = Threshold::new(0.8).unwrap();
        let text = |n: usize| (0..n).map(|i| format!("w{i} ")).collect::<String>();
        // Nodes 0 and 1 share 95 of 100 words' shingles (J about 0.87); node 2 has no set.
        let sets = [
            crate::jaccard::shingle_set(&text(100)),
            crate::jaccard::shingle_set(&(text(95) + "x y z u v")),
        ];
        let j = crate::jaccard::exact(&sets[0], &sets[1]);
        assert!(j >= 0.8, "{j}");
        let mut edges = vec![edge(0, 1, 0.75), edge(0, 2, 0.85)];
        let kept = decide_on_sets(&mut edges, t, |n| sets.get(n as usize).map(Vec::as_slice));
        assert_eq!(kept, 1);
        assert_eq!(edges.len(), 1);
        assert_eq!((edges[0].a, edges[0].b), (0, 1));
        assert!((f64::from(edges[0].similarity) - j).abs() < 1e-6);
    }

    #[test]
    fn exact_decisions_stop_at_the_first_error() {
        let t = Threshold::new(0.8).unwrap();
        let mut edges = vec![edge(0, 1, 0.95), edge(1, 2, 0.79)];
        let before = edges.clone();
        let got = decide_exactly(&mut edges, t, |_, _| Err("unreadable"));
        assert_eq!(got, Err("unreadable"));
        // Only edges near the threshold ask for an exact similarity.
        let mut far = vec![edge(0, 1, 0.95)];
        assert_eq!(decide_exactly(&mut far, t, |_, _| Err("unreadable")), Ok(0));
        assert_eq!(far, before[..1]);
    }

    #[test]
    fn loosened_lowers_only_a_threshold() {
        let t = Threshold::new(0.8).unwrap();
        let o = Options {
            rule: Rule::Jaccard(t),
            ..Options::default()
        };
        assert_eq!(
            o.loosened().rule,
            Rule::Jaccard(Threshold::new(0.8 - EXACT_MARGIN).unwrap())
        );
        let tiny = Options {
            rule: Rule::Jaccard(Threshold::new(0.05).unwrap()),
            ..Options::default()
        };
        assert!(matches!(tiny.loosened().rule, Rule::Jaccard(l) if l.get() > 0.0));
        let bits = Options {
            rule: Rule::Distance(9),
            ..Options::default()
        };
        assert_eq!(bits.loosened(), bits);
    }

    proptest::proptest! {
        /// The oracle: the outside documents as nodes of their own, ranked before every
        /// node whatever `keep` says, one per node that matches outside (the most
        /// similar); plain assignment over that graph gives the same links, an outside
        /// node standing for [`Link::OUTSIDE`].
        #[test]
        fn outside_documents_are_nodes_ranked_first(
            (ranks, edges, outside) in graph(),
            keep in prop::sample::select(vec![Keep::First, Keep::Longest, Keep::Shortest]),
        ) {
            let got = assign_against(&ranks, &edges, keep, false, &outside).unwrap();
            let n = ranks.len() as u32;
            let first = Rank {
                len: if keep == Keep::Longest { u32::MAX } else { 0 },
                position: 0,
            };
            let mut all = ranks.clone();
            let mut all_edges = edges.clone();
            let mut extra = Vec::new();
            for (node, o) in outside.iter().enumerate() {
                if let Some(m) = o {
                    let virtual_node = n + extra.len() as u32;
                    extra.push(virtual_node);
                    all.push(Rank { position: extra.len() as u64 - 1, ..first });
                    all_edges.push(Edge {
                        a: node as u32,
                        b: virtual_node,
                        similarity: m.similarity,
                        distance: m.distance,
                    });
                }
            }
            // The run's nodes rank after the outside ones.
            for r in &mut all[..n as usize] {
                r.position += 1 << 20;
            }
            let want = assign(&all, &all_edges, keep, false).unwrap();
            for node in 0..n as usize {
                let w = want[node];
                let w = Link {
                    to: if w.to >= n { Link::OUTSIDE } else { w.to },
                    ..w
                };
                proptest::prop_assert_eq!(got[node], w, "node {}", node);
            }
            for &v in &extra {
                proptest::prop_assert_eq!(want[v as usize].to, v);
            }
            // Nothing outside: plain assignment.
            proptest::prop_assert_eq!(
                assign_against(&ranks, &edges, keep, false, &[]).unwrap(),
                assign(&ranks, &edges, keep, false).unwrap()
            );
        }
    }

    #[test]
    fn closure_is_refused_with_outside_documents() {
        let ranks = [Rank::default(); 2];
        let m = Some(Match {
            similarity: 0.9,
            distance: 0,
        });
        assert_eq!(
            assign_against(&ranks, &[edge(0, 1, 0.9)], Keep::First, true, &[m, None]),
            Err(Error::ClosureWithOutside)
        );
        assert!(
            assign_against(&ranks, &[edge(0, 1, 0.9)], Keep::First, true, &[None, None]).is_ok()
        );
    }
}
