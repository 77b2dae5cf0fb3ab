//! What goes into a document corpus's decisions and comes out of them, the same for
//! every backend: writes and what each did, hits, and the paragraph check's decision
//! ([`paragraph_hits`]).

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::time::Duration;

use neardup::decide::{Match, Rule, Signature};

use crate::prepare::Prepared;

/// One write of a batch.
#[derive(Clone, Debug)]
pub enum Write {
    /// Stores a document under `id` (replacing what `id` held), expiring after `ttl`; with
    /// `only_if_unique`, only if no other stored document is its near-duplicate.
    Put {
        /// Its id.
        id: String,
        /// The document.
        doc: Box<Prepared>,
        /// Time to live.
        ttl: Option<Duration>,
        /// Refuse it when a near-duplicate is stored.
        only_if_unique: bool,
    },
    /// Removes `id`.
    Delete {
        /// Its id.
        id: String,
    },
}

/// A stored document near a query.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// Its id.
    pub id: String,
    /// Estimated Jaccard similarity to the query (1 for the same text).
    pub similarity: f32,
    /// 256-bit Hamming distance of the fingerprints.
    pub distance: u32,
}

/// What one write did.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// A put: whether the document was stored, whether it replaced one under its id, and
    /// the stored near-duplicates (for an `only_if_unique` put that was refused, the ones
    /// that refused it; otherwise those found when it was stored), most similar first.
    Put {
        /// It is stored now.
        inserted: bool,
        /// It replaced a document stored under its id.
        replaced: bool,
        /// Stored near-duplicates other than itself.
        matches: Vec<Hit>,
    },
    /// A delete: whether the id was stored.
    Delete {
        /// It was stored (and is no more).
        removed: bool,
    },
}

/// A paragraph of the query and the stored paragraph it is a near-duplicate of.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanMatch {
    /// The query paragraph's byte span.
    pub query: Range<u32>,
    /// The stored paragraph's byte span in its document.
    pub stored: Range<u32>,
    /// Their estimated Jaccard similarity.
    pub similarity: f32,
}

/// A stored document that shares near-duplicate paragraphs with a query.
#[derive(Clone, Debug, PartialEq)]
pub struct ParagraphHit {
    /// Its id.
    pub id: String,
    /// The share of the query's paragraph bytes in paragraphs it shares.
    pub coverage: f32,
    /// The query paragraphs it shares, each with its most similar stored paragraph.
    pub spans: Vec<SpanMatch>,
}

/// A stored document, as [`DocumentStore::get`](crate::DocumentStore::get) gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredDoc {
    /// Its id.
    pub id: String,
    /// Its signature.
    pub signature: Signature,
    /// When it expires, in Unix seconds, if it does.
    pub expires: Option<u64>,
    /// Paragraphs indexed.
    pub paragraphs: usize,
}

/// A stored document's id and paragraphs.
pub(crate) type StoredParagraphs = (String, Vec<(Range<u32>, Signature)>);

/// The paragraph check's decision, the same over every backend: per stored document,
/// each query paragraph's most similar near-duplicate among its paragraphs, and the share
/// of the query's paragraph bytes those cover; most covered first. `found[i]` names query
/// paragraph `i`'s candidates as (document, paragraph index); `stored` holds every
/// document named, `None` when it is gone or expired.
pub(crate) fn paragraph_hits(
    rule: Rule,
    paras: &[(Range<u32>, Signature)],
    found: &[Vec<(u64, usize)>],
    mut stored: HashMap<u64, Option<StoredParagraphs>>,
) -> Vec<ParagraphHit> {
    let mut by_doc: BTreeMap<u64, Vec<SpanMatch>> = BTreeMap::new();
    for ((span, sig), cands) in paras.iter().zip(found) {
        let mut best: HashMap<u64, SpanMatch> = HashMap::new();
        for &(doc, at) in cands {
            let Some(Some((_, list))) = stored.get(&doc) else {
                continue;
            };
            let Some((other_span, other)) = list.get(at) else {
                continue;
            };
            if let Some(m) = rule.decide(sig, other) {
                if best.get(&doc).is_none_or(|b| m.similarity > b.similarity) {
                    best.insert(
                        doc,
                        SpanMatch {
                            query: span.clone(),
                            stored: other_span.clone(),
                            similarity: m.similarity,
                        },
                    );
                }
            }
        }
        for (doc, m) in best {
            by_doc.entry(doc).or_default().push(m);
        }
    }
    let total: u64 = paras.iter().map(|(s, _)| u64::from(s.end - s.start)).sum();
    let mut out: Vec<ParagraphHit> = by_doc
        .into_iter()
        .filter_map(|(doc, spans)| {
            let (id, _) = stored.remove(&doc).flatten()?;
            let covered: u64 = spans
                .iter()
                .map(|s| u64::from(s.query.end - s.query.start))
                .sum();
            Some(ParagraphHit {
                id,
                coverage: (covered as f64 / total.max(1) as f64) as f32,
                spans,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.coverage
            .total_cmp(&a.coverage)
            .then_with(|| a.id.cmp(&b.id))
    });
    out
}

/// A hit on `id`, as `m` measures it.
pub(crate) fn hit(id: String, m: Match) -> Hit {
    Hit {
        id,
        similarity: m.similarity,
        distance: m.distance,
    }
}
