//! `neardup dedup --report FILE`: what deduplication removed, for a person to review.
//!
//! Three steps, around the run:
//!
//! 1. [`Collector::plan`], after matching: counts for the histograms, and the bounded
//!    samples (the [`LARGEST`] largest clusters, the [`BORDERLINE`] removed documents
//!    nearest the threshold) whose ids and texts the page shows;
//! 2. [`Collector::see`], for every document of the second pass (which reads the input
//!    again anyway): counts per source, and the ids and texts of the sampled documents
//!    (texts cut at [`TEXT_BYTES`]);
//! 3. [`Collector::render`], at the end: the page, with the run's summary.
//!
//! Memory beyond the run's own: a bit per document, the samples, and at most a few
//! thousand sources' counts.

use std::collections::BinaryHeap;

use neardup::batch::{Cluster, Dedup, Member, Rule};
use serde::Serialize;
use serde_json::Value;

use super::diff::{self, Diff};
use super::page::{self, grouped, Figure};
use super::plot::{fmt4, BarChart, Bin, Scale, XAxis};
use super::sources::{Sources, Table};
use crate::splitmix::mix;
use crate::Error;

/// Largest clusters shown.
pub const LARGEST: usize = 8;
/// Members listed per large cluster (the least similar first).
pub const MEMBERS: usize = 20;
/// Removed documents nearest the threshold shown beside their kept documents.
pub const BORDERLINE: usize = 20;
/// Bytes of a sampled document's text kept for the page (cut at a character boundary).
pub const TEXT_BYTES: usize = 32 << 10;

/// What the page needs, gathered during the run.
pub struct Collector {
    rule: Rule,
    /// Clusters shown, largest first: the cluster's index, its members listed, and the
    /// member shown beside the kept document.
    largest: Vec<(usize, Vec<Member>, Option<u32>)>,
    /// Borderline pairs: (kept, removed member), nearest the threshold first.
    borderline: Vec<(u32, Member)>,
    /// Documents whose ids the page names, in input order, and their ids once read.
    want_ids: Vec<u32>,
    ids: Vec<String>,
    /// Documents whose texts the page shows, in input order, and their texts once read.
    want_texts: Vec<u32>,
    texts: Vec<String>,
    /// A bit per document: removed.
    removed: Vec<u64>,
    sources: Sources,
    sizes: Vec<Bin>,
    similarity: Option<(Vec<Bin>, XAxis)>,
    distance: Option<(Vec<Bin>, XAxis)>,
    /// Removed documents whose text is their kept document's.
    identical: u64,
}

/// The text of `doc`'s id as the page shows it: a string as it is, any other value as
/// JSON.
fn id_text(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `text` cut to at most [`TEXT_BYTES`] at a character boundary.
fn cut(text: &str) -> String {
    if text.len() <= TEXT_BYTES {
        return text.to_string();
    }
    let mut end = TEXT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// How far a removed document is from the rule's edge, for choosing the borderline ones:
/// in millionths of similarity, or in bits.
fn edge_gap(rule: Rule, m: &Member) -> u64 {
    match rule {
        Rule::Jaccard(t) => ((f64::from(m.similarity) - t.get()).abs() * 1e6).round() as u64,
        Rule::Distance(d) => u64::from(m.distance.abs_diff(d)),
    }
}

impl Collector {
    /// Counts and samples from what matching found; `text_hashes` tells removed documents
    /// identical to their kept one apart.
    pub fn plan(found: &Dedup, text_hashes: &[u64], rule: Rule, n: usize) -> Collector {
        let mut removed = vec![0u64; n.div_ceil(64)];
        let mut identical = 0u64;
        let same_text = |c: &Cluster, doc: u32| {
            text_hashes.get(doc as usize) == text_hashes.get(c.representative as usize)
        };
        // The nearest to the edge, ties broken by a hash of the document so that the
        // sample spreads over the input: a max-heap of the best kept so far.
        let mut heap: BinaryHeap<(u64, u64, u32, usize)> = BinaryHeap::new();
        let mut lowest = f32::INFINITY;
        for (ci, c) in found.clusters.iter().enumerate() {
            for (mi, m) in c.members.iter().enumerate() {
                if m.doc == c.representative {
                    continue;
                }
                if let Some(word) = removed.get_mut(m.doc as usize / 64) {
                    *word |= 1 << (m.doc % 64);
                }
                if same_text(c, m.doc) {
                    identical += 1;
                    continue;
                }
                lowest = lowest.min(m.similarity);
                let spread = mix(u64::from(m.doc));
                heap.push((edge_gap(rule, m), spread, ci as u32, mi));
                if heap.len() > BORDERLINE {
                    heap.pop();
                }
            }
        }
        let mut borderline: Vec<(u32, Member)> = heap
            .into_sorted_vec()
            .into_iter()
            .map(|(_, _, ci, mi)| {
                let c = &found.clusters[ci as usize];
                (c.representative, c.members[mi])
            })
            .collect();
        borderline.sort_by(|a, b| {
            a.1.similarity
                .total_cmp(&b.1.similarity)
                .then(b.1.distance.cmp(&a.1.distance))
                .then(a.1.doc.cmp(&b.1.doc))
        });

        // The largest clusters, ties in input order.
        let mut order: Vec<usize> = (0..found.clusters.len()).collect();
        let size = |i: &usize| std::cmp::Reverse(found.clusters[*i].members.len());
        if order.len() > LARGEST {
            order.select_nth_unstable_by_key(LARGEST - 1, |i| (size(i), *i));
            order.truncate(LARGEST);
        }
        order.sort_by_key(|i| (size(i), *i));
        let largest = order
            .into_iter()
            .map(|ci| {
                let c = &found.clusters[ci];
                let mut members: Vec<Member> = c
                    .members
                    .iter()
                    .filter(|m| m.doc != c.representative)
                    .copied()
                    .collect();
                let by_similarity = |a: &Member, b: &Member| {
                    a.similarity
                        .total_cmp(&b.similarity)
                        .then(a.doc.cmp(&b.doc))
                };
                if members.len() > MEMBERS {
                    members.select_nth_unstable_by(MEMBERS - 1, by_similarity);
                    members.truncate(MEMBERS);
                }
                members.sort_by(by_similarity);
                let beside = members.first().map(|m| m.doc);
                (ci, members, beside)
            })
            .collect::<Vec<_>>();

        let mut want_ids: Vec<u32> = Vec::new();
        let mut want_texts: Vec<u32> = Vec::new();
        for (ci, members, beside) in &largest {
            let rep = found.clusters[*ci].representative;
            want_ids.push(rep);
            want_ids.extend(members.iter().map(|m| m.doc));
            want_texts.push(rep);
            want_texts.extend(beside);
        }
        for (kept, m) in &borderline {
            want_ids.extend([*kept, m.doc]);
            want_texts.extend([*kept, m.doc]);
        }
        for list in [&mut want_ids, &mut want_texts] {
            list.sort_unstable();
            list.dedup();
        }

        let (sizes, similarity, distance) = (
            size_bins(&found.clusters),
            similarity_bins(found, rule, lowest, &same_text),
            match rule {
                Rule::Distance(d) => Some(distance_bins(found, d, &same_text)),
                Rule::Jaccard(_) => None,
            },
        );
        Collector {
            rule,
            largest,
            borderline,
            want_ids,
            ids: Vec::new(),
            want_texts,
            texts: Vec::new(),
            removed,
            sources: Sources::default(),
            sizes,
            similarity,
            distance,
            identical,
        }
    }

    /// The next document of the second pass, its id and text as read (documents come in
    /// input order, from 0).
    pub fn see(&mut self, doc: u32, id: &Value, text: &str) {
        let removed = self
            .removed
            .get(doc as usize / 64)
            .is_some_and(|w| w >> (doc % 64) & 1 == 1);
        self.sources.add(id.as_str(), removed);
        if self.want_ids.get(self.ids.len()) == Some(&doc) {
            self.ids.push(id_text(id));
        }
        if self.want_texts.get(self.texts.len()) == Some(&doc) {
            self.texts.push(cut(text));
        }
    }

    fn id(&self, doc: u32) -> String {
        self.want_ids
            .binary_search(&doc)
            .ok()
            .and_then(|i| self.ids.get(i))
            .cloned()
            .unwrap_or_else(|| format!("document {doc}"))
    }

    fn text(&self, doc: u32) -> &str {
        self.want_texts
            .binary_search(&doc)
            .ok()
            .and_then(|i| self.texts.get(i))
            .map_or("", String::as_str)
    }

    fn pair(&self, kept: u32, m: &Member, identical: bool) -> PairView {
        let (a, b) = (self.text(kept), self.text(m.doc));
        PairView {
            kept: self.id(kept),
            removed: self.id(m.doc),
            similarity: fmt4(f64::from(m.similarity)),
            distance: m.distance,
            identical,
            truncated: a.len() >= TEXT_BYTES || b.len() >= TEXT_BYTES,
            diff: diff::words(a, b),
        }
    }

    /// The page: `summary` is the run's (as --stats-json writes it), `inputs` the paths it
    /// read (none: standard input).
    pub fn render(
        self,
        summary: &Value,
        found: &Dedup,
        text_hashes: &[u64],
        inputs: &[String],
    ) -> Result<String, Error> {
        let same = |a: u32, b: u32| text_hashes.get(a as usize) == text_hashes.get(b as usize);
        let clusters = self
            .largest
            .iter()
            .map(|(ci, members, beside)| {
                let c = &found.clusters[*ci];
                let rep = c.representative;
                ClusterView {
                    index: *ci,
                    size: c.members.len(),
                    kept: self.id(rep),
                    members: members
                        .iter()
                        .map(|m| MemberView {
                            id: self.id(m.doc),
                            similarity: fmt4(f64::from(m.similarity)),
                            distance: m.distance,
                            identical: same(m.doc, rep),
                        })
                        .collect(),
                    more: c.members.len() - 1 - members.len(),
                    pair: beside.and_then(|doc| {
                        let m = c.members.iter().find(|m| m.doc == doc)?;
                        Some(self.pair(rep, m, same(doc, rep)))
                    }),
                }
            })
            .collect();
        let borderline = self
            .borderline
            .iter()
            .map(|(kept, m)| self.pair(*kept, m, false))
            .collect();
        let threshold = match self.rule {
            Rule::Jaccard(t) => Some(fmt4(t.get())),
            Rule::Distance(_) => None,
        };
        let page = Page {
            version: env!("CARGO_PKG_VERSION"),
            inputs: page::inputs(inputs),
            figures: figures(summary),
            phases: phases(summary),
            settings: settings(summary),
            warnings: warnings(summary),
            sizes: (!self.sizes.is_empty()).then(|| {
                let ticks = self
                    .sizes
                    .iter()
                    .enumerate()
                    .map(|(i, b)| {
                        (
                            i as f64 + 0.5,
                            b.label.split(':').next().unwrap_or("").to_string(),
                        )
                    })
                    .collect();
                BarChart::new(
                    "cluster-sizes",
                    "Clusters by size (kept document included)",
                    &self.sizes,
                    XAxis {
                        label: "documents in the cluster".into(),
                        ticks,
                        marker: None,
                    },
                    "clusters",
                    Scale::Log,
                )
            }),
            similarity: self.similarity.as_ref().map(|(bins, x)| {
                BarChart::new(
                    "similarity",
                    "Removed documents by similarity to their kept document",
                    bins,
                    x.clone(),
                    "documents",
                    Scale::Linear,
                )
            }),
            distance: self.distance.as_ref().map(|(bins, x)| {
                BarChart::new(
                    "distance",
                    "Removed documents by fingerprint distance to their kept document",
                    bins,
                    x.clone(),
                    "documents",
                    Scale::Linear,
                )
            }),
            identical: match self.identical {
                0 => String::new(),
                n => grouped(n),
            },
            threshold,
            sources: self.sources.tables(),
            clusters,
            borderline,
            limits: Limits {
                largest: LARGEST,
                members: MEMBERS,
                borderline: BORDERLINE,
                text_kb: TEXT_BYTES >> 10,
                words: diff::MAX_WORDS,
            },
        };
        page::render("dedup.html", &page)
    }
}

/// Clusters by size: 2, 3, 4, then doubling ranges (5–8, 9–16, …) up to the largest.
fn size_bins(clusters: &[Cluster]) -> Vec<Bin> {
    let largest = clusters.iter().map(|c| c.members.len()).max().unwrap_or(0);
    if largest < 2 {
        return Vec::new();
    }
    let mut ranges: Vec<(usize, usize)> = vec![(2, 2), (3, 3), (4, 4)];
    while ranges.last().is_some_and(|r| r.1 < largest) {
        let hi = ranges.last().map_or(4, |r| r.1);
        ranges.push((hi + 1, hi * 2));
    }
    let mut clusters_in = vec![0u64; ranges.len()];
    let mut docs_in = vec![0u64; ranges.len()];
    for c in clusters {
        let s = c.members.len();
        if let Some(i) = ranges.iter().position(|r| s >= r.0 && s <= r.1) {
            clusters_in[i] += 1;
            docs_in[i] += s as u64;
        }
    }
    // Up to the bin of the largest.
    let last = ranges
        .iter()
        .position(|r| largest <= r.1)
        .unwrap_or(ranges.len() - 1);
    ranges
        .iter()
        .take(last + 1)
        .enumerate()
        .map(|(i, &(lo, hi))| {
            let range = if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}–{hi}")
            };
            Bin {
                label: format!(
                    "{range}: {} clusters, {} documents",
                    grouped(clusters_in[i]),
                    grouped(docs_in[i])
                ),
                count: clusters_in[i],
            }
        })
        .collect()
}

/// Removed documents not identical to their kept one, by similarity, from a little below
/// the lowest (or the threshold) to 1, in bins of 0.01 (0.02 or 0.05 over wider ranges).
fn similarity_bins(
    found: &Dedup,
    rule: Rule,
    lowest: f32,
    same_text: &dyn Fn(&Cluster, u32) -> bool,
) -> Option<(Vec<Bin>, XAxis)> {
    if !lowest.is_finite() {
        return None;
    }
    let threshold = match rule {
        Rule::Jaccard(t) => Some(t.get()),
        Rule::Distance(_) => None,
    };
    let low = threshold.map_or(f64::from(lowest), |t| t.min(f64::from(lowest)));
    let width = match 1.0 - low {
        s if s <= 0.3 => 0.01,
        s if s <= 0.6 => 0.02,
        _ => 0.05,
    };
    // Bin edges in hundredths, so that 0.8 is an edge exactly.
    let step = (width * 100.0f64).round() as i64;
    let start = ((low * 100.0 + 1e-6).floor() as i64).div_euclid(step) * step;
    let start = start.min(100 - step);
    let bins = ((100 - start) / step) as usize;
    let mut counts = vec![0u64; bins];
    for c in &found.clusters {
        for m in &c.members {
            if m.doc == c.representative || same_text(c, m.doc) {
                continue;
            }
            let hundredths = f64::from(m.similarity) * 100.0;
            let i = (((hundredths - start as f64) / step as f64 + 1e-6).floor() as i64)
                .clamp(0, bins as i64 - 1) as usize;
            counts[i] += 1;
        }
    }
    let edge = |i: usize| (start + i as i64 * step) as f64 / 100.0;
    let bins_out = counts
        .iter()
        .enumerate()
        .map(|(i, &count)| Bin {
            label: format!(
                "{}–{}: {} documents",
                fmt4(edge(i)),
                fmt4(edge(i + 1)),
                grouped(count)
            ),
            count,
        })
        .collect();
    // A tick every 0.05 (every 0.1 over wide ranges).
    let every = if step == 1 { 5 } else { 10 };
    let ticks = (0..=bins)
        .filter(|&i| (start + i as i64 * step) % every == 0)
        .map(|i| (i as f64, fmt4(edge(i))))
        .collect();
    let marker = threshold.map(|t| {
        (
            (t * 100.0 - start as f64) / step as f64,
            format!("threshold {}", fmt4(t)),
        )
    });
    Some((
        bins_out,
        XAxis {
            label: "estimated Jaccard similarity of word 5-shingles".into(),
            ticks,
            marker,
        },
    ))
}

/// Removed documents not identical to their kept one, by 256-bit distance (the distance
/// rule), the rule's distance marked.
fn distance_bins(
    found: &Dedup,
    d: u32,
    same_text: &dyn Fn(&Cluster, u32) -> bool,
) -> (Vec<Bin>, XAxis) {
    let mut counts: Vec<u64> = vec![0; d as usize + 1];
    for c in &found.clusters {
        for m in &c.members {
            if m.doc == c.representative || same_text(c, m.doc) {
                continue;
            }
            let i = m.distance as usize;
            if i >= counts.len() {
                counts.resize(i + 1, 0);
            }
            counts[i] += 1;
        }
    }
    let bins = counts
        .iter()
        .enumerate()
        .map(|(i, &count)| Bin {
            label: format!("{i} bits: {} documents", grouped(count)),
            count,
        })
        .collect();
    let every = (counts.len() / 10).max(1);
    let ticks = (0..counts.len())
        .filter(|i| i % every == 0)
        .map(|i| (i as f64 + 0.5, i.to_string()))
        .collect();
    (
        bins,
        XAxis {
            label: "bits apart (of 256)".into(),
            ticks,
            marker: Some((f64::from(d) + 1.0, format!("distance {d}"))),
        },
    )
}

/// The headline counts of the summary.
fn figures(s: &Value) -> Vec<Figure> {
    let num = |k: &str| s[k].as_u64().unwrap_or(0);
    let mut out = vec![
        Figure::count("documents", "documents", num("documents")),
        Figure::count("kept", "kept", num("kept")),
        Figure::count(
            "removed",
            "removed",
            num("exact_duplicates") + num("near_duplicates"),
        ),
        Figure::count(
            "exact_duplicates",
            "of them exact duplicates",
            num("exact_duplicates"),
        ),
        Figure::count(
            "near_duplicates",
            "of them near-duplicates",
            num("near_duplicates"),
        ),
        Figure::count("clusters", "clusters", num("clusters")),
        Figure::count("largest_cluster", "largest cluster", num("largest_cluster")),
        Figure::count("candidates", "candidate pairs checked", num("candidates")),
        Figure::count(
            "verified",
            "candidate pairs near-duplicates",
            num("verified"),
        ),
    ];
    if let Some(p) = s["pairs"].as_u64() {
        out.push(Figure::count("pairs", "near-duplicate pairs", p));
    }
    let mb = s["bytes"].as_u64().unwrap_or(0) as f64 / 1e6;
    out.push(Figure {
        key: "bytes".into(),
        label: "text read".into(),
        value: num("bytes").to_string(),
        shown: format!("{mb:.1} MB"),
    });
    out
}

/// Seconds per phase.
fn phases(s: &Value) -> Vec<Figure> {
    [
        ("fingerprint", "read and fingerprint"),
        ("match", "match and assign"),
        ("write", "second pass and outputs"),
        ("total", "total"),
    ]
    .iter()
    .map(|(key, label)| {
        let secs = s["seconds"][key].as_f64().unwrap_or(0.0);
        Figure {
            key: (*key).into(),
            label: (*label).into(),
            value: secs.to_string(),
            shown: format!("{secs:.2} s"),
        }
    })
    .collect()
}

/// The settings of the run, as the summary states them.
fn settings(s: &Value) -> Vec<Figure> {
    s["settings"]
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| {
                    let text = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    Figure::text(k, &k.replace('_', " "), &text)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What the summary warns about.
fn warnings(s: &Value) -> Vec<String> {
    let num = |k: &str| s[k].as_u64().unwrap_or(0);
    let mut out = Vec::new();
    if num("wordless") > 0 {
        out.push(format!(
            "{} documents have no words; they match identical texts only.",
            grouped(num("wordless"))
        ));
    }
    if num("invalid_utf8") > 0 {
        out.push(format!(
            "{} documents held invalid UTF-8, read as U+FFFD.",
            grouped(num("invalid_utf8"))
        ));
    }
    if num("skipped_invalid") > 0 {
        out.push(format!(
            "{} invalid JSON lines were skipped (--skip-invalid).",
            grouped(num("skipped_invalid"))
        ));
    }
    out
}

/// The page's data.
#[derive(Serialize)]
struct Page {
    version: &'static str,
    inputs: Vec<String>,
    figures: Vec<Figure>,
    phases: Vec<Figure>,
    settings: Vec<Figure>,
    warnings: Vec<String>,
    sizes: Option<BarChart>,
    similarity: Option<BarChart>,
    distance: Option<BarChart>,
    /// Removed documents identical to their kept one (left out of the similarity plot),
    /// thousands grouped; empty for none.
    identical: String,
    threshold: Option<String>,
    sources: Vec<Table>,
    clusters: Vec<ClusterView>,
    borderline: Vec<PairView>,
    limits: Limits,
}

/// The bounds of the samples, for the page to state.
#[derive(Serialize)]
struct Limits {
    largest: usize,
    members: usize,
    borderline: usize,
    text_kb: usize,
    words: usize,
}

/// A large cluster.
#[derive(Serialize)]
struct ClusterView {
    /// Its number in --clusters.
    index: usize,
    size: usize,
    kept: String,
    /// Removed members listed, the least similar first.
    members: Vec<MemberView>,
    /// Removed members not listed.
    more: usize,
    /// The kept document beside its least similar member.
    pair: Option<PairView>,
}

#[derive(Serialize)]
struct MemberView {
    id: String,
    similarity: String,
    distance: u32,
    identical: bool,
}

/// A removed document beside its kept one.
#[derive(Serialize)]
struct PairView {
    kept: String,
    removed: String,
    similarity: String,
    distance: u32,
    identical: bool,
    /// Whether either text was cut at [`TEXT_BYTES`] before the diff.
    truncated: bool,
    diff: Diff,
}
