//! `neardup dedup --exact`: the candidate pairs whose estimated similarity is near the
//! threshold, decided on the exact Jaccard similarity of their shingle sets.
//!
//! A sketch estimates a pair's similarity with an error (σ ≈ 0.02 at 0.8): at 100M
//! documents with planted copies, 1,613 pairs of similarity ≥ 0.85 were estimated below
//! 0.8 and missed, and a few pairs below 0.75 were estimated above it. The pairs estimated
//! within [`EXACT_MARGIN`] of the threshold (five σ) are decided again on their texts, read a
//! second time: only their documents are tokenized. Their shingle sets are kept in
//! memory when they fit what the budget leaves; else they go to temporary files, one a
//! bucket, all the documents of a connected group of near pairs in the same bucket, and
//! each bucket is read back whole, one at a time: every pair's two sets are then in
//! memory together, and each set is written once and read once, in order. (Read where
//! they lay, a pair at a time, the sets of 9.7 million documents at 100M took 896 s
//! within `--memory 4G`, most of them not in the page cache.)

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::anyhow;
use neardup::batch::{self, Candidates, Edge, UnionFind, EXACT_MARGIN};
use neardup::fingerprint::Fingerprinter;
use neardup::jaccard::{self, Threshold};
use neardup_io::docs::{self, Doc, ReadOptions};
use rayon::prelude::*;
use serde_json::{json, Value};

use super::columns::TextKey;
use super::names::{text_of, Cuts, Hit, Named, Names, Naming, Texts};
use crate::failure::Failure;
use crate::progress::Progress;

/// What the exact pass needs to read the input again.
pub(crate) struct Reading<'a> {
    pub(crate) args: &'a ReadOptions,
    /// Documents in each batch of the first read.
    pub(crate) batches: &'a [u32],
    pub(crate) progress: &'a Progress,
    /// When the write needs no read of its own (no --deduplicated), the pass also
    /// gathers the ids and fingerprints of every document the lists may name, with this.
    pub(crate) naming: Option<&'a Fingerprinter>,
}

/// What the exact pass did, for the summary.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    /// Pairs estimated within the margin.
    pub(crate) pairs: u64,
    /// Their documents, read again.
    pub(crate) documents: u64,
    /// Of those pairs, those that are near-duplicates.
    pub(crate) accepted: u64,
    /// Bytes of the documents' shingle sets.
    pub(crate) set_bytes: u64,
    /// Documents whose ids and fingerprints the pass read for the lists (0 when the
    /// write reads the input again, for --deduplicated).
    pub(crate) named: u64,
    /// How the sets were kept.
    pub(crate) kept: Kept,
    /// The process's peak resident memory when the pass began (to tell its peak from the
    /// verifying's before it).
    pub(crate) peak_before: Option<u64>,
    /// Seconds spent reading the input again and deciding.
    pub(crate) seconds: f64,
}

/// How the exact pass kept the shingle sets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Kept {
    /// All in memory.
    #[default]
    Memory,
    /// In temporary files, one a bucket, each read whole in turn (`buckets`) but for
    /// those larger than the budget leaves, read a pair at a time (`by_pairs`).
    Buckets { buckets: usize, by_pairs: usize },
}

impl Counts {
    pub(crate) fn describe(self) -> Value {
        json!({
            "margin": EXACT_MARGIN,
            "pairs": self.pairs,
            "documents": self.documents,
            "accepted": self.accepted,
            "set_bytes": self.set_bytes,
            "named": self.named,
            "sets": match self.kept {
                Kept::Memory => "memory".to_string(),
                Kept::Buckets { buckets, by_pairs: 0 } => format!("{buckets} buckets"),
                Kept::Buckets { buckets, by_pairs } => {
                    format!("{buckets} buckets, {by_pairs} read a pair at a time")
                }
            },
            "peak_rss_before": self.peak_before,
            "seconds": (self.seconds * 1000.0).round() / 1000.0,
        })
    }
}

/// At most this many buckets: a budget that would need more reads a bucket too large for
/// it a pair at a time.
const MAX_BUCKETS: usize = 64;

/// The edges verified with [`batch::Options::loosened`] options, those estimated within
/// [`EXACT_MARGIN`] of `t` decided again on exact similarities ([`batch::settle_exactly`]).
/// The documents of those pairs (the first of each node) are read again (`reading`);
/// `key_of(docs)` gives the text keys pass 1 gave them, which the texts read again must
/// have. `room` is the memory the budget leaves this pass besides the candidates.
pub(crate) fn decide(
    c: &Candidates,
    mut edges: Vec<Edge>,
    t: Threshold,
    reading: &Reading<'_>,
    key_of: impl Fn(&[u32]) -> Result<Vec<TextKey>, Failure>,
    room: u64,
) -> Result<(Vec<Edge>, Counts, Option<Named>), Failure> {
    let start = std::time::Instant::now();
    let near = batch::near_edges(&edges, t);
    // Nodes are in the order of their first documents, so these are increasing.
    let nodes = batch::near_nodes(&edges, t);
    let docs: Vec<u32> = nodes.iter().map(|&n| c.first(n)).collect();
    let mut counts = Counts {
        pairs: near.len() as u64,
        documents: docs.len() as u64,
        peak_before: crate::memory::peak_resident(),
        ..Counts::default()
    };
    // The documents the lists may name: those of every node left with these edges, of
    // which the exact decisions may only drop some.
    let named: Vec<u32> = match reading.naming {
        Some(_) => c.documents_with(&edges),
        None => Vec::new(),
    };
    if docs.is_empty() && named.is_empty() {
        // Every edge is estimated above the margin, and none names a document.
        return Ok((edges, counts, None));
    }
    if !docs.is_sorted() {
        return Err(Failure::io(anyhow!(
            "dedup's candidates are not in the order of their documents"
        )));
    }
    // Each near pair as the positions of its documents in `docs`.
    let position = |n: u32| nodes.binary_search(&n).unwrap_or(0) as u32;
    let pairs: Vec<(u32, u32)> = near
        .iter()
        .map(|&k| (position(edges[k].a), position(edges[k].b)))
        .collect();
    drop(nodes);
    let keys = key_of(&docs)?;
    let named_keys = key_of(&named)?;
    let key_at = |d: u32| named.binary_search(&d).ok().map(|i| named_keys[i]);
    let naming = reading.naming.map(|fingerprinter| Naming {
        docs: &named,
        texts: Texts::new(named_keys.clone()),
        key_of: &key_at,
        fingerprinter,
    });
    // What this pass holds besides the sets: the edges, the near pairs (their positions,
    // the pairs, a similarity each), a document's number, text key, group, bucket and
    // place in it (the groups' union-find, 8 bytes, goes before the sets come); and of a
    // named document its number, text key, the end of its id and the id (taken as 16
    // bytes), and of its text the key, a flag and the fingerprint.
    let held = edges.capacity() as u64 * std::mem::size_of::<Edge>() as u64
        + near.len() as u64 * (8 + 8 + 8)
        + docs.len() as u64 * (4 + 12 + 1 + 8 + 4)
        + named.len() as u64 * (4 + 12 + 8 + 16 + 12 + 1 + 32);
    let room = room.saturating_sub(held);
    // A bound on a set's bytes from its text's: a word takes at least two bytes with what
    // ends it (a Han character three), and a set holds at most a shingle a word.
    let estimate: u64 = keys.iter().map(|k| u64::from(k.len) * 4 + 8).sum();
    let buckets = usize::try_from(estimate.div_ceil(room.max(1)))
        .unwrap_or(MAX_BUCKETS)
        .clamp(1, MAX_BUCKETS);
    let bucket = if buckets == 1 {
        vec![0; docs.len()]
    } else {
        groups(&pairs, docs.len(), buckets)
    };
    let (sets, names) = Sets::read(
        reading,
        &docs,
        &keys,
        (bucket, buckets),
        (room, estimate),
        naming.as_ref(),
    )?;
    drop(keys);
    let named = match (naming, names) {
        (Some(naming), Some(names)) => {
            let read = names.finish(naming, 0).ok_or_else(|| {
                Failure::input(anyhow!(
                    "the input changed during the run: fewer documents named on the second read"
                ))
            })?;
            counts.named = named.len() as u64;
            Some(Named { docs: named, read })
        }
        _ => None,
    };
    counts.set_bytes = sets.bytes();
    let (similarities, by_pairs) = sets.similarities(&pairs, room)?;
    if buckets > 1 || by_pairs > 0 {
        counts.kept = Kept::Buckets { buckets, by_pairs };
    }
    counts.accepted = batch::settle_exactly(&mut edges, t, &near, &similarities);
    counts.seconds = start.elapsed().as_secs_f64();
    Ok((edges, counts, named))
}

/// The bucket of each of `n` documents, for `buckets` buckets: the documents joined by
/// `pairs` (positions) share one, so each pair is within a bucket; groups spread over the
/// buckets by a hash of their root.
fn groups(pairs: &[(u32, u32)], n: usize, buckets: usize) -> Vec<u8> {
    let mut uf = UnionFind::new(n);
    for &(a, b) in pairs {
        uf.union(a, b);
    }
    (0..n as u32)
        .map(|i| {
            let root = u64::from(uf.find(i));
            let mixed = root.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
            (mixed % buckets as u64) as u8
        })
        .collect()
}

/// Where the sets of a bucket are kept.
enum Store {
    Memory(Vec<u64>),
    File { file: File, hashes: u64 },
}

/// Where the sets of a bucket go while they are written.
enum Sink {
    Memory(Vec<u64>),
    File { out: BufWriter<File>, hashes: u64 },
}

impl Sink {
    fn hashes(&self) -> u64 {
        match self {
            Sink::Memory(v) => v.len() as u64,
            Sink::File { hashes, .. } => *hashes,
        }
    }

    /// Appends `set`; a set in memory goes to a file once the sets exceed `room` bytes.
    fn push(&mut self, set: &[u64], room: u64) -> Result<(), Failure> {
        if let Sink::Memory(v) = self {
            if (v.len() + set.len()) as u64 * 8 > room {
                let mut out = BufWriter::with_capacity(1 << 20, temp_file()?);
                write_hashes(&mut out, v)?;
                *self = Sink::File {
                    out,
                    hashes: v.len() as u64,
                };
            }
        }
        match self {
            Sink::Memory(v) => v.extend_from_slice(set),
            Sink::File { out, hashes } => {
                write_hashes(out, set)?;
                *hashes += set.len() as u64;
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<Store, Failure> {
        Ok(match self {
            Sink::Memory(v) => Store::Memory(v),
            Sink::File { out, hashes } => Store::File {
                file: out
                    .into_inner()
                    .map_err(|e| failed("write", e.into_error()))?,
                hashes,
            },
        })
    }
}

fn failed(what: &str, e: std::io::Error) -> Failure {
    Failure::io(anyhow!(
        "cannot {what} the temporary files of --exact's shingle sets (TMPDIR): {e}"
    ))
}

fn temp_file() -> Result<File, Failure> {
    tempfile::tempfile().map_err(|e| failed("create", e))
}

fn write_hashes(out: &mut impl Write, hashes: &[u64]) -> Result<(), Failure> {
    for h in hashes {
        out.write_all(&h.to_le_bytes())
            .map_err(|e| failed("write", e))?;
    }
    Ok(())
}

/// The shingle sets of some documents (each one's sorted hashes), by bucket.
struct Sets {
    /// Each document's bucket, where its set starts there (in hashes), and its length.
    bucket: Vec<u8>,
    start: Vec<u64>,
    len: Vec<u32>,
    stores: Vec<Store>,
}

impl Sets {
    /// Reads the input again, cut into the batches of the first read, and keeps the sets
    /// of `docs` (increasing; `keys[i]` the text key of `docs[i]`, `bucket[i]` its bucket
    /// of `buckets`): one bucket in memory unless it exceeds `room` bytes, more each in a
    /// file. `estimate` bounds the bytes of all the sets.
    fn read(
        reading: &Reading<'_>,
        docs: &[u32],
        keys: &[TextKey],
        (bucket, buckets): (Vec<u8>, usize),
        (room, estimate): (u64, u64),
        naming: Option<&Naming<'_>>,
    ) -> Result<(Sets, Option<Names>), Failure> {
        let mut sinks = Vec::with_capacity(buckets);
        for _ in 0..buckets {
            sinks.push(if buckets == 1 {
                // Room for the bound on every set at once, so that the vector never
                // grows: each growth moved it to fresh pages the kernel had to zero, an
                // eighth of the whole run's cycles on the natural corpus. Pages never
                // written are never resident; a system that will not even map them (a
                // --memory beyond what it has) leaves the vector to grow as it goes.
                let mut sets = Vec::new();
                let _ = sets.try_reserve_exact((estimate.min(room) / 8) as usize);
                Sink::Memory(sets)
            } else {
                let buffer = (room / 8 / buckets as u64).clamp(1 << 16, 1 << 20) as usize;
                Sink::File {
                    out: BufWriter::with_capacity(buffer, temp_file()?),
                    hashes: 0,
                }
            });
        }
        let cuts = Cuts::new(reading.batches);
        // Only the documents wanted are parsed whole.
        let args = ReadOptions {
            ids_only: true,
            keep_records: true,
            ..reading.args.clone()
        };
        let whole = ReadOptions {
            ids_only: false,
            ..reading.args.clone()
        };
        let changed =
            |why: String| Failure::input(anyhow!("the input changed during the run: {why}"));
        type Work = (Vec<Vec<u64>>, Vec<Hit>);
        let work = |k: u64, batch: &mut [Doc]| -> Result<Work, String> {
            let range = cuts.range(k, batch.len())?;
            let hits = match naming {
                Some(n) => n.hits(batch, range.clone(), &whole)?,
                None => Vec::new(),
            };
            let (first, end) = (range.start, range.end);
            let from = docs.partition_point(|&d| u64::from(d) < first);
            let to = docs.partition_point(|&d| u64::from(d) < end);
            let sets = (from..to)
                .into_par_iter()
                .map(|i| {
                    let doc = docs[i];
                    let text = text_of(&batch[(u64::from(doc) - first) as usize], &whole);
                    if TextKey::of(&text) != keys[i] {
                        return Err(format!("document {doc} is not the text it was"));
                    }
                    Ok(jaccard::shingle_set(&text))
                })
                .collect::<Result<_, String>>()?;
            Ok((sets, hits))
        };
        let mut names = naming.map(Names::new);
        let (mut start, mut len) = (
            Vec::with_capacity(docs.len()),
            Vec::with_capacity(docs.len()),
        );
        let mut read = 0u64;
        docs::read_mapped_mut::<_, Failure>(&args, reading.progress, "exact", work, |batch| {
            let (sets, hits) = batch.map_err(changed)?;
            if let Some(names) = names.as_mut() {
                names.add(hits);
            }
            for set in sets {
                let i = start.len();
                let sink = &mut sinks[usize::from(bucket[i])];
                start.push(sink.hashes());
                let n = u32::try_from(set.len()).map_err(|_| {
                    Failure::input(anyhow!(
                        "document {} has {} shingles, more than --exact counts",
                        docs[i],
                        set.len()
                    ))
                })?;
                len.push(n);
                sink.push(&set, room)?;
            }
            read += 1;
            Ok(())
        })?;
        if read != reading.batches.len() as u64 || start.len() != docs.len() {
            return Err(changed(format!(
                "{} documents in {} batches on the first read, fewer on the second",
                cuts.total,
                reading.batches.len()
            )));
        }
        let stores = sinks
            .into_iter()
            .map(Sink::finish)
            .collect::<Result<_, _>>()?;
        let sets = Sets {
            bucket,
            start,
            len,
            stores,
        };
        Ok((sets, names))
    }

    /// Bytes of all the sets.
    fn bytes(&self) -> u64 {
        self.stores
            .iter()
            .map(|s| match s {
                Store::Memory(v) => v.len() as u64 * 8,
                Store::File { hashes, .. } => hashes * 8,
            })
            .sum()
    }

    /// The exact similarity of each pair (the positions of its two documents, which share
    /// a bucket), in order. Each bucket's sets are read whole when they fit in `room`
    /// bytes, else a pair at a time; returns how many were.
    fn similarities(&self, pairs: &[(u32, u32)], room: u64) -> Result<(Vec<f64>, usize), Failure> {
        let mut by_pairs = 0;
        let out: Vec<AtomicU64> = (0..pairs.len()).map(|_| AtomicU64::new(0)).collect();
        let range = |i: u32| {
            let (from, len) = (self.start[i as usize], u64::from(self.len[i as usize]));
            from as usize..(from + len) as usize
        };
        for (b, store) in self.stores.iter().enumerate() {
            let read;
            let sets = match store {
                Store::Memory(v) => AtHand::Whole(v),
                Store::File { file, hashes } if hashes * 8 <= room => {
                    read = read_whole(file, *hashes)?;
                    AtHand::Whole(&read)
                }
                Store::File { file, .. } => {
                    by_pairs += 1;
                    AtHand::ByPairs(file)
                }
            };
            let in_bucket = |&(a, _): &(u32, u32)| usize::from(self.bucket[a as usize]) == b;
            pairs
                .par_iter()
                .zip(&out)
                .filter(|(p, _)| in_bucket(p))
                .try_for_each(|(&(a, b), slot)| -> Result<(), Failure> {
                    let j = match sets {
                        AtHand::Whole(sets) => jaccard::exact(&sets[range(a)], &sets[range(b)]),
                        AtHand::ByPairs(file) => similarity_at(file, range(a), range(b))?,
                    };
                    slot.store(j.to_bits(), Ordering::Relaxed);
                    Ok(())
                })?;
        }
        let out = out
            .into_iter()
            .map(|j| f64::from_bits(j.into_inner()))
            .collect();
        Ok((out, by_pairs))
    }
}

/// How a bucket's sets are at hand while its pairs are decided.
enum AtHand<'a> {
    Whole(&'a [u64]),
    /// Too large for the budget: each pair's two sets read where they lie.
    ByPairs(&'a File),
}

/// The `hashes` hashes of a bucket's file, read in order.
fn read_whole(file: &File, hashes: u64) -> Result<Vec<u64>, Failure> {
    const CHUNK: u64 = 1 << 20;
    let (mut out, mut raw) = (Vec::with_capacity(hashes as usize), Vec::new());
    let mut at = 0u64;
    while at < hashes {
        let to = (at + CHUNK).min(hashes);
        read_hashes(file, at..to, &mut raw, &mut out)?;
        at = to;
    }
    Ok(out)
}

/// The exact similarity of the sets at hashes `a` and `b` of a bucket's file, read into
/// buffers each thread keeps: no allocation a pair.
fn similarity_at(file: &File, a: Range<usize>, b: Range<usize>) -> Result<f64, Failure> {
    thread_local! {
        static BUFFERS: RefCell<(Vec<u8>, Vec<u64>, Vec<u64>)> = const {
            RefCell::new((Vec::new(), Vec::new(), Vec::new()))
        };
    }
    BUFFERS.with_borrow_mut(|(raw, x, y)| {
        x.clear();
        y.clear();
        read_hashes(file, a.start as u64..a.end as u64, raw, x)?;
        read_hashes(file, b.start as u64..b.end as u64, raw, y)?;
        Ok(jaccard::exact(x, y))
    })
}

/// Appends hashes `range` of a bucket's file to `out`, through `raw`.
fn read_hashes(
    file: &File,
    range: Range<u64>,
    raw: &mut Vec<u8>,
    out: &mut Vec<u64>,
) -> Result<(), Failure> {
    raw.resize((range.end - range.start) as usize * 8, 0);
    file.read_exact_at(raw, range.start * 8)
        .map_err(|e| failed("read", e))?;
    out.extend(
        raw.chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))),
    );
    Ok(())
}
