//! `neardup dedup` under the Jaccard rule, within a memory budget at any corpus size.
//!
//! 1. **Sign** (pass 1): per document, a hash of the text with its length, and unless an
//!    earlier copy of the text is known ([`Firsts`]), the sketch and its band keys from
//!    one walk over the words. No 256-bit fingerprint: it decides nothing here, and only
//!    the texts written in clusters and pairs need one, for their `distance` (step 5). The values go to columns ([`Column`]): the band keys
//!    (80 bytes a document) and text keys (12) in memory while they fit in half the
//!    budget, in temporary files once they would not; the sketches (128) always in a file.
//! 2. **Copies**: documents of one text (equal hash and length) are one node, its first
//!    document standing for it. The text keys are sorted in passes, each over a range of
//!    hashes small enough for the budget.
//! 3. **Candidates**: band by band, the (key, document) entries of the nodes' first
//!    documents are radix-sorted, in passes over key ranges as in step 2, and every two
//!    documents of a run of equal keys are a candidate pair. The bands' pairs are merged
//!    into one sorted list, each pair once.
//! 4. **Verify and assign** ([`batch::resolve_with`]) on the nodes that are in a pair or
//!    hold copies, the only ones that can be in a cluster: the sketches of the first
//!    documents of the nodes in pairs are read back (all into memory when they fit the
//!    budget, else a block at a time, two blocks in memory). Only the nodes with a
//!    verified pair or copies are assigned: at 100M documents most candidate pairs are
//!    band keys equal by chance (32-bit keys: about one pair in 2^32 per band).
//! 5. **Write** (pass 2): the input read again, in parallel; the documents of clusters
//!    and pairs, known by their text keys, give their ids and, fingerprinted, the
//!    distances; `--deduplicated` streams the kept records.
//!
//! Every step gives what the all-in-memory dedup gives (`batch::dedup` over the same
//! documents), byte for byte: nodes by text hash and length rather than text hash and
//! fingerprint differ only when two texts share a 64-bit hash.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use anyhow::anyhow;
use neardup::batch::{self, Candidates, Dedup, Edge, Keep, Options, Rank, Rule};
use neardup::decide::{Match, Signature};
use neardup::fingerprint::LANES;
use neardup::jaccard::{Banding, Sketch, BANDS};
use neardup_io::docs::{self, Doc, ReadOptions, ReadStats};
use neardup_store::{DocumentReader, Preparer};
use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_64;

use super::columns::{Column, Fixed, TextKey};
use super::exact;
use super::names::Named;
use crate::failure::Failure;
use crate::progress::Progress;

/// Bytes a document's state takes in memory while it is kept there: band keys and text key.
const ROW_BYTES: u64 = 4 * BANDS as u64 + 12;

/// Memory the budget leaves aside for what is not per document: the batches being read
/// and signed, output buffers, the program.
const RESERVE: u64 = 48 << 20;

/// Blocks of sketches past which [`verify_in_blocks`] reads the sketch file too many times
/// over (each block once for every block after it): reading each sketch where it lies is
/// then no slower.
const MAX_BLOCKS: usize = 32;

/// The least memory a step is given, however small the budget: steps then take more
/// passes, never fail.
const LEAST: u64 = 4 << 10;

/// Pass 1's columns.
pub(crate) struct Signed {
    /// Band `j`'s key of every document.
    keys: Vec<Column<u32>>,
    texts: Column<TextKey>,
    sketches: Column<Sketch>,
    /// Documents in each batch read, in order: the second read checks it cuts the input
    /// the same way.
    pub(crate) batches: Vec<u32>,
    /// With a store to deduplicate against: what pass 1 found there.
    pub(crate) stored: Stored,
}

/// A document store the documents are deduplicated against (`--against`, `--save`).
pub(crate) struct StoreCheck<'a> {
    /// `None` for a store --save will make.
    pub(crate) reader: Option<&'a DocumentReader>,
    pub(crate) preparer: &'a Preparer,
    /// Whether the documents will be saved into it: their ids are checked then.
    pub(crate) saving: bool,
}

/// What pass 1 found in the store, in input order.
#[derive(Default)]
pub(crate) struct Stored {
    /// Per document that is the first of its text and has a stored near-duplicate: its
    /// position, the most similar stored document's id, and how near it is.
    pub(crate) matched: Vec<(u32, String, Match)>,
    /// When saving: documents whose id is already stored, with that id.
    pub(crate) taken: Vec<(u32, String)>,
    /// When saving: a hash of every document's id, for ids repeated in the input.
    pub(crate) id_hashes: Vec<u64>,
}

impl Stored {
    /// The stored near-duplicate found for `doc`, the first document of its text.
    pub(crate) fn of(&self, doc: u32) -> Option<&(u32, String, Match)> {
        self.matched
            .binary_search_by_key(&doc, |m| m.0)
            .ok()
            .map(|i| &self.matched[i])
    }
}

/// What pass 1 makes of one document: its sketch and band keys (unless an earlier copy of
/// its text stands for it), its text key, and what the store said of it.
struct Row {
    sketch: Sketch,
    keys: [u32; BANDS],
    key: TextKey,
    matched: Option<(String, Match)>,
    taken: Option<String>,
    id_hash: u64,
}

impl Signed {
    /// Documents signed.
    pub(crate) fn len(&self) -> u64 {
        self.texts.len()
    }

    /// Whether the per-document state went to files.
    pub(crate) fn spilled(&self) -> bool {
        self.texts.spilled()
    }

    /// Lets the band keys go once they have given their candidates: their memory, or
    /// their files' disk (8 GB at 100M documents, which the later steps' files need).
    pub(crate) fn drop_band_keys(&mut self) {
        self.keys = Vec::new();
    }

    /// Bytes of per-document state in memory.
    fn resident(&self) -> u64 {
        self.keys.iter().map(Column::resident).sum::<u64>() + self.texts.resident()
    }
}

/// Seconds of each step.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Steps {
    pub(crate) sign: f64,
    pub(crate) copies: f64,
    pub(crate) candidates: f64,
    pub(crate) verify: f64,
    /// The process's peak resident bytes so far at the end of each step and of the
    /// writing: sign, copies, candidates, verify, write (`None` where the system does not
    /// say).
    pub(crate) peaks: [Option<u64>; 5],
}

impl Steps {
    /// Names of [`Steps::peaks`], in order.
    pub(crate) const NAMES: [&'static str; 5] = ["sign", "copies", "candidates", "verify", "write"];
}

/// Slots of [`Firsts`].
const FIRSTS_SLOTS: usize = 1 << 18;

/// Which documents of pass 1 may be later copies of a text already met, and need no
/// sketch: a table of the earliest position met per text, lossy (a text whose slot
/// another takes is sketched again, which costs time, not answers). The earliest
/// document of a text is always sketched: whenever it comes, no earlier one has left a
/// smaller position in its slot.
struct Firsts {
    slots: Vec<Mutex<(TextKey, u64)>>,
}

impl Firsts {
    fn new() -> Firsts {
        Firsts {
            slots: (0..FIRSTS_SLOTS)
                .map(|_| Mutex::new((TextKey::default(), u64::MAX)))
                .collect(),
        }
    }

    /// Whether the document at `position` (any numbering in input order) with text `key`
    /// is to be sketched: no earlier document of its text is known.
    fn sketch(&self, key: TextKey, position: u64) -> bool {
        let slot = &self.slots[(key.hash as usize) % FIRSTS_SLOTS];
        let Ok(mut slot) = slot.lock() else {
            return true;
        };
        if slot.0 == key && slot.1 < position {
            return false;
        }
        *slot = (key, position);
        true
    }
}

/// Step 1: reads and signs every document; with `store`, looks each text up there too.
pub(crate) fn sign(
    args: &ReadOptions,
    banding: Banding,
    budget: u64,
    store: Option<&StoreCheck<'_>>,
    progress: &Progress,
) -> Result<(Signed, ReadStats), Failure> {
    let mut out = Signed {
        keys: (0..BANDS).map(|_| Column::new()).collect(),
        texts: Column::new(),
        sketches: Column::on_disk()?,
        batches: Vec::new(),
        stored: Stored::default(),
    };
    let keep_until = budget / 2;
    let firsts = Firsts::new();
    let failed: Mutex<Option<Failure>> = Mutex::new(None);
    let fail = |e: neardup_store::StoreError| {
        if let Ok(mut f) = failed.lock() {
            f.get_or_insert(crate::failure::store_failure(e));
        }
    };
    let rows = |k: u64, batch: &mut [Doc]| -> Vec<Row> {
        batch
            .par_iter()
            .enumerate()
            .map(|(i, d)| {
                let key = TextKey::of(&d.text);
                let mut row = Row {
                    sketch: Sketch::EMPTY,
                    keys: [0; BANDS],
                    key,
                    matched: None,
                    taken: None,
                    id_hash: 0,
                };
                if let Some(check) = store.filter(|c| c.saving) {
                    let id = docs::id_text(&d.id);
                    row.id_hash = xxh3_64(id.as_bytes());
                    match check.reader.map(|r| r.get(&id)) {
                        Some(Ok(Some(_))) => row.taken = Some(id),
                        Some(Ok(None)) | None => {}
                        Some(Err(e)) => fail(e),
                    }
                }
                // A later copy's sketch and keys are never read: its first document's
                // stand for it.
                if !firsts.sketch(key, k << 32 | i as u64) {
                    return row;
                }
                (row.sketch, row.keys) = Sketch::of_text_with_bands(&d.text, banding);
                if let Some((check, reader)) = store.and_then(|c| Some((c, c.reader?))) {
                    let signature = Signature {
                        fingerprint: [0; LANES],
                        sketch: row.sketch,
                        bands: row.keys,
                        text_hash: key.hash,
                    };
                    match reader.check(&check.preparer.from_signature(signature)) {
                        // The most similar first; its distance is measured when written.
                        Ok(checked) => {
                            row.matched = checked.hits.into_iter().next().map(|h| {
                                let near = Match {
                                    similarity: h.similarity,
                                    distance: 0,
                                };
                                (h.id, near)
                            });
                        }
                        Err(e) => fail(e),
                    }
                }
                row
            })
            .collect()
    };
    let saving = store.is_some_and(|c| c.saving);
    let stats = docs::read_mapped_mut::<_, Failure>(args, progress, "signing", rows, |rows| {
        out.batches.push(rows.len() as u32);
        for row in rows {
            let doc = out.texts.len() as u32;
            for (column, k) in out.keys.iter_mut().zip(row.keys) {
                column.push(k)?;
            }
            out.texts.push(row.key)?;
            out.sketches.push(row.sketch)?;
            if let Some((id, near)) = row.matched {
                out.stored.matched.push((doc, id, near));
            }
            if let Some(id) = row.taken {
                out.stored.taken.push((doc, id));
            }
            if saving {
                out.stored.id_hashes.push(row.id_hash);
            }
        }
        if !out.texts.spilled() && out.texts.len() * ROW_BYTES > keep_until {
            for c in &mut out.keys {
                c.spill()?;
            }
            out.texts.spill()?;
        }
        Ok(())
    })?;
    if out.texts.len() >= u64::from(u32::MAX) {
        return Err(Failure::input(anyhow!(
            "{} documents: dedup takes at most {}",
            out.texts.len(),
            u32::MAX - 1
        )));
    }
    if let Some(e) = failed.into_inner().ok().flatten() {
        return Err(e);
    }
    for c in &mut out.keys {
        c.finish()?;
    }
    out.texts.finish()?;
    out.sketches.finish()?;
    Ok((out, stats))
}

/// Memory left to a step: the budget less the per-document state kept in memory.
fn room(signed: &Signed, budget: u64) -> u64 {
    budget
        .saturating_sub(signed.resident())
        .saturating_sub(RESERVE)
        .max(LEAST)
}

/// The passes over each band that step 3 takes within `budget`, and the least budget
/// that sorts a band in one. A budget far below it makes dedup slow, not wrong: every
/// pass reads the band's whole column again.
pub(crate) fn sort_passes(signed: &Signed, budget: u64) -> (u64, u64) {
    let n = signed.len();
    // Enough whether the state then stays in memory or not.
    let kept = BANDS as u64 * Column::<u32>::resident_for(n) + Column::<TextKey>::resident_for(n);
    let one = n * 16 * 5 / 4 + RESERVE + kept;
    (passes(n, 16, room(signed, budget)), one)
}

/// Passes over key ranges so that each holds at most `room` bytes of `entries` entries of
/// `entry_bytes` each (sorting in place or with a scratch of its size), keys being
/// uniform hashes.
fn passes(entries: u64, entry_bytes: u64, room: u64) -> u64 {
    // A margin for keys that fall unevenly.
    (entries * entry_bytes * 5 / 4).div_ceil(room).max(1)
}

/// Entries one of `passes` passes over uniform keys holds, with the margin of [`passes`]:
/// what to allocate once.
fn per_pass(entries: u64, passes: u64) -> usize {
    let each = if passes == 1 {
        entries
    } else {
        (entries.div_ceil(passes) * 5 / 4).min(entries)
    };
    usize::try_from(each).unwrap_or(usize::MAX)
}

/// Which of `passes` ranges the 32-bit `top` of a uniform key falls in.
#[inline]
fn range_of(top: u32, passes: u64) -> u64 {
    (u64::from(top) * passes) >> 32
}

/// The nodes that hold more than one document (copies of one text), in the order of
/// their first documents: each a list of its documents, in input order.
pub(crate) struct Copies {
    order: Vec<u32>,
    starts: Vec<u32>,
    /// Documents that are not the first of their text, in input order.
    later: Vec<u32>,
}

impl Copies {
    /// The size of the group whose first document is `doc`, if there is one; `at` is the
    /// first group not yet passed, for calls in increasing `doc`.
    fn group_of(&self, doc: u32, at: &mut usize) -> Option<u64> {
        let first = |g: usize| self.order[self.starts[g] as usize];
        while *at + 1 < self.starts.len() && first(*at) < doc {
            *at += 1;
        }
        (*at + 1 < self.starts.len() && first(*at) == doc)
            .then(|| u64::from(self.starts[*at + 1] - self.starts[*at]))
    }
}

/// Step 2: documents of one text, sorted by text key a range of hashes at a time.
pub(crate) fn copies(signed: &Signed, budget: u64) -> Result<Copies, Failure> {
    let n = signed.len();
    let passes = passes(n, 16, room(signed, budget));
    let mut groups: Vec<Vec<u32>> = Vec::new();
    // (hash, length, document): 16 bytes, as `passes` counts them ((TextKey, u32) took
    // 24), allocated once at the size a pass needs rather than grown by doubling.
    let mut entries: Vec<(u64, u32, u32)> = Vec::new();
    entries.reserve_exact(per_pass(n, passes));
    for pass in 0..passes {
        entries.clear();
        signed.texts.for_each(|first, keys| {
            entries.extend(
                keys.iter()
                    .zip(first as u32..)
                    .filter(|(k, _)| passes == 1 || range_of((k.hash >> 32) as u32, passes) == pass)
                    .map(|(k, doc)| (k.hash, k.len, doc)),
            );
            Ok(())
        })?;
        entries.par_sort_unstable();
        let mut at = 0;
        while at < entries.len() {
            let key = (entries[at].0, entries[at].1);
            let end = at
                + entries[at..]
                    .iter()
                    .take_while(|e| (e.0, e.1) == key)
                    .count();
            if end - at > 1 {
                groups.push(entries[at..end].iter().map(|e| e.2).collect());
            }
            at = end;
        }
    }
    drop(entries);
    groups.par_sort_unstable_by_key(|g| g[0]);
    let mut out = Copies {
        order: Vec::with_capacity(groups.iter().map(Vec::len).sum()),
        starts: Vec::with_capacity(groups.len()),
        later: Vec::new(),
    };
    for g in groups {
        out.starts.push(out.order.len() as u32);
        out.later.extend_from_slice(&g[1..]);
        out.order.extend(g);
    }
    out.starts.push(out.order.len() as u32);
    out.later.par_sort_unstable();
    Ok(out)
}

/// Step 3's candidates: every pair of first documents whose band keys agree in some band,
/// `a < b`, as `a << 32 | b`, sorted, each once; and the documents without words.
pub(crate) struct Pairs {
    pairs: Vec<u64>,
    wordless: u64,
    /// Crowded runs of band keys led ([`batch::RUN_LEADERS`]).
    pub(crate) led: u64,
}

/// Step 3: the candidate pairs; a crowded run of band keys is led by the documents
/// `keep` keeps first ([`batch::RUN_LEADERS`]).
pub(crate) fn candidate_pairs(
    signed: &Signed,
    copies: &Copies,
    keep: Keep,
    budget: u64,
    progress: &Progress,
) -> Result<Pairs, Failure> {
    let n = signed.len();
    // Entries and their radix scratch: 16 bytes an entry.
    let passes = passes(n, 16, room(signed, budget));
    let mut wordless = 0u64;
    progress.phase("candidates", Some((BANDS as u64) * passes));
    // The pairs so far, and the vector the next band's merge goes to: the two trade
    // places, so that each grows a few times, not once a band (twenty fresh vectors, each
    // larger than all before it, came from the kernel page by page: 1.1M candidates among
    // the man pages corpus's documents faulted in 180 MB).
    let (mut all, mut merged): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
    let mut band_pairs: Vec<u64> = Vec::new();
    let (mut entries, mut scratch) = (Vec::new(), Vec::new());
    entries.reserve_exact(per_pass(n, passes));
    scratch.reserve_exact(per_pass(n, passes));
    // A crowded run's documents (increasing) in the order `keep` visits them; the first
    // error reading their lengths is kept for after the band.
    let mut failed: Option<Failure> = None;
    let mut runs = batch::Crowded::Led(|docs: &mut [u32]| {
        if keep == Keep::First {
            return;
        }
        match signed.texts.gather(docs) {
            Ok(texts) => {
                let mut ranked: Vec<((i64, u64), u32)> = texts
                    .iter()
                    .zip(docs.iter())
                    .map(|(t, &d)| {
                        let rank = Rank {
                            len: t.len,
                            position: u64::from(d),
                        };
                        (rank.key(keep), d)
                    })
                    .collect();
                ranked.sort_unstable();
                for (d, (_, r)) in docs.iter_mut().zip(ranked) {
                    *d = r;
                }
            }
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    });
    let mut led = 0;
    for (band, column) in signed.keys.iter().enumerate() {
        band_pairs.clear();
        for pass in 0..passes {
            entries.clear();
            let mut later = copies.later.iter().peekable();
            // Groups of copies by first document, for counting the wordless.
            let mut group = 0;
            let count = band == 0 && pass == 0;
            column.for_each(|first, keys| {
                for (&k, doc) in keys.iter().zip(first as u32..) {
                    // Later copies of a text stand aside: their first document speaks.
                    while later.next_if(|&&c| c < doc).is_some() {}
                    if later.next_if_eq(&&doc).is_some() {
                        continue;
                    }
                    if count {
                        let size = copies.group_of(doc, &mut group).unwrap_or(1);
                        if k == 0 {
                            wordless += size;
                        }
                    }
                    if k != 0 && (passes == 1 || range_of(k, passes) == pass) {
                        entries.push(u64::from(k) << 32 | u64::from(doc));
                    }
                }
                Ok(())
            })?;
            led += batch::band_runs(&mut entries, &mut scratch, &mut runs, |a, b| {
                band_pairs.push(u64::from(a) << 32 | u64::from(b));
            });
            progress.set(band as u64 * passes + pass + 1);
        }
        band_pairs.par_sort_unstable();
        band_pairs.dedup();
        merge(&all, &band_pairs, &mut merged);
        std::mem::swap(&mut all, &mut merged);
    }
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(Pairs {
        pairs: all,
        wordless,
        led,
    })
}

/// The union of two sorted lists without repeats, into `out`.
fn merge(a: &[u64], b: &[u64], out: &mut Vec<u64>) {
    out.clear();
    out.reserve(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
}

/// What step 4 gives.
pub(crate) struct Resolved {
    /// What was found (distances all zero).
    pub(crate) found: Dedup,
    /// The documents of the nodes left after verifying, increasing, and their text keys.
    pub(crate) docs: Vec<u32>,
    pub(crate) keys: Vec<TextKey>,
    /// How the sketches were read.
    pub(crate) reads: SketchReads,
    /// Under --exact, what was decided on the texts.
    pub(crate) exact: Option<exact::Counts>,
    /// What the exact pass read of the documents the lists may name, when it was asked to
    /// ([`exact::Reading::naming`]).
    pub(crate) named: Option<Named>,
}

/// Step 4: the nodes in a pair, holding copies or matching a stored document, verified
/// (under --exact, `exact` reads the input again: [`exact::decide`]) and assigned, after
/// the stored documents ([`batch::resolve_verified`]).
pub(crate) fn resolve(
    signed: &Signed,
    copies: Copies,
    pairs: Pairs,
    options: &Options,
    budget: u64,
    exact: Option<&exact::Reading<'_>>,
) -> Result<Resolved, Failure> {
    let Pairs {
        pairs, wordless, ..
    } = pairs;
    // The nodes' first documents, in order: in a pair, holding copies, or matching a
    // stored document. Marked in a bitmap of the documents, not listed and sorted: the
    // pairs name their documents over and over (1.1M candidate pairs among the 13,843
    // documents of the man pages corpus), and a node's number is then the count of marks
    // before its document.
    let words = (signed.len() as usize).div_ceil(64);
    let mut marked = vec![0u64; words];
    let mut mark = |doc: u32| {
        if let Some(w) = marked.get_mut(doc as usize / 64) {
            *w |= 1 << (doc % 64);
        }
    };
    for &p in &pairs {
        mark((p >> 32) as u32);
        mark(p as u32);
    }
    for &s in &copies.starts {
        if let Some(&doc) = copies.order.get(s as usize) {
            mark(doc);
        }
    }
    for m in &signed.stored.matched {
        // A later copy sketched again (`Firsts` is lossy) goes with its first.
        if copies.later.binary_search(&m.0).is_err() {
            mark(m.0);
        }
    }
    let mut before = Vec::with_capacity(words);
    let mut firsts = Vec::new();
    for (w, &bits) in marked.iter().enumerate() {
        before.push(firsts.len() as u32);
        let mut rest = bits;
        while rest != 0 {
            firsts.push(w as u32 * 64 + rest.trailing_zeros());
            rest &= rest - 1;
        }
    }
    let node_of = |doc: u32| {
        let (w, bit) = (doc as usize / 64, doc % 64);
        let below = marked
            .get(w)
            .map_or(0, |&bits| (bits & ((1 << bit) - 1)).count_ones());
        before.get(w).map_or(0, |&b| b + below)
    };
    let node_pairs: Vec<(u32, u32)> = pairs
        .iter()
        .map(|&p| (node_of((p >> 32) as u32), node_of(p as u32)))
        .collect();
    drop(before);
    drop(marked);
    drop(pairs);
    let mut order = Vec::with_capacity(firsts.len() + copies.later.len());
    let mut starts = Vec::with_capacity(firsts.len() + 1);
    let mut group = 0;
    for &f in &firsts {
        starts.push(order.len() as u32);
        let g =
            (group + 1 < copies.starts.len()).then(|| copies.order[copies.starts[group] as usize]);
        if g == Some(f) {
            let (from, to) = (copies.starts[group], copies.starts[group + 1]);
            order.extend_from_slice(&copies.order[from as usize..to as usize]);
            group += 1;
        } else {
            order.push(f);
        }
    }
    starts.push(order.len() as u32);
    drop(copies);
    let c = Candidates::from_parts(order, starts, node_pairs, wordless)
        .map_err(|e| Failure::io(anyhow!("dedup's candidates: {e}")))?;

    drop(firsts);
    let needed = c.needs();
    // The lists freed since the step began (the first documents, the pairs as documents)
    // go back before the sketches are read.
    crate::memory::give_back_freed(budget);
    // What this step holds besides the sketches: the candidates, the documents needed, a
    // verdict a pair, a block number a node, the buffers a read goes through; and a 32nd
    // of the budget for what no list counts (the program, the allocator's own, huge
    // pages: 68 + 28 MiB over the lists at 100M documents within 4 GiB). A model rather
    // than the resident memory, which varies by megabytes from run to run: the same
    // budget makes the same plan.
    let held = c.bytes()
        + needed.len() as u64 * 4
        + c.pairs().len() as u64 * 4
        + c.nodes() as u64
        + Column::<Sketch>::read_buffers()
        + budget / 32;
    let left = room(signed, budget);
    let room = left.saturating_sub(held).max(LEAST);
    let all = needed.len() as u64 * Sketch::SIZE as u64;
    let per_block = ((room / 2 / Sketch::SIZE as u64) as usize).max(1);
    let blocks = needed.len().div_ceil(per_block);
    let read = if all <= room {
        SketchReads::Memory
    } else if blocks <= MAX_BLOCKS {
        SketchReads::Blocks(blocks)
    } else {
        SketchReads::Each
    };
    let failed: Mutex<Option<Failure>> = Mutex::new(None);
    // A sketch read where it lies: for --closure's measures (a member against its
    // component's top), and for verifying under a budget too small for blocks.
    let sketch = |doc: u32| -> Sketch {
        signed.sketches.get(doc).unwrap_or_else(|e| {
            if let Ok(mut f) = failed.lock() {
                f.get_or_insert(e);
            }
            Sketch::EMPTY
        })
    };
    // Under --exact the pairs estimated just below the threshold are verified too, and
    // decided again on their texts below.
    let verifying = match exact {
        Some(_) => options.loosened(),
        None => *options,
    };
    let edges = match read {
        SketchReads::Memory | SketchReads::Blocks(_) => {
            let per_block = if read == SketchReads::Memory {
                needed.len()
            } else {
                per_block
            };
            verify_in_blocks(&c, &needed, &signed.sketches, &verifying, per_block)?
        }
        SketchReads::Each => batch::verify(
            c.pairs(),
            |n| sketch(c.first(n)),
            |_| [0; LANES],
            verifying.rule,
        ),
    };
    drop(needed);
    if !options.closure {
        // Only --closure reads a sketch after verifying: the file's 128 bytes a document
        // go back to the disk before --exact writes its shingle sets.
        signed.sketches.discard()?;
    }
    let (edges, counts, named) = match (exact, options.rule) {
        (Some(reading), Rule::Jaccard(t)) => {
            // The blocks of sketches go back before the sets come; the candidates stay, and
            // a 32nd of the budget is left for what no list counts, as for the blocks.
            crate::memory::give_back_freed(budget);
            let room = left.saturating_sub(c.bytes() + budget / 32);
            let (edges, counts, named) = exact::decide(
                &c,
                edges,
                t,
                reading,
                |docs| signed.texts.gather(docs),
                room,
            )?;
            (edges, Some(counts), named)
        }
        _ => (edges, None, None),
    };
    // The nodes matching a stored document stay, edge or not.
    let stored: Vec<u32> = if signed.stored.matched.is_empty() {
        Vec::new()
    } else {
        (0..c.nodes() as u32)
            .filter(|&n| signed.stored.of(c.first(n)).is_some())
            .collect()
    };
    let candidates = c.pairs().len() as u64;
    let (c, edges) = c.verified(edges, |n| stored.binary_search(&n).is_ok());

    // The text keys (lengths, for --keep) of every document of the nodes left.
    let mut docs: Vec<u32> = c.documents().to_vec();
    docs.par_sort_unstable();
    let keys = signed.texts.gather(&docs)?;
    let len = |doc: u32| docs.binary_search(&doc).map_or(0, |i| keys[i].len);
    let outside = |doc: u32| signed.stored.of(doc).map(|m| m.2);
    let mut found =
        batch::resolve_verified(&c, edges, |_| [0; LANES], len, sketch, options, outside)
            .map_err(Failure::input)?;
    found.candidates = candidates;
    if let Some(e) = failed.into_inner().ok().flatten() {
        return Err(e);
    }
    Ok(Resolved {
        found,
        docs,
        keys,
        reads: read,
        exact: counts,
        named,
    })
}

/// How step 4 read the sketches it verified with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SketchReads {
    /// All into memory at once.
    Memory,
    /// In this many blocks ([`verify_in_blocks`]).
    Blocks(usize),
    /// Each where it lies, for each pair: a budget too small for blocks.
    Each,
}

impl SketchReads {
    /// For the summary's settings.
    pub(crate) fn describe(self) -> String {
        match self {
            SketchReads::Memory => "memory".into(),
            SketchReads::Blocks(n) => format!("{n} blocks"),
            SketchReads::Each => "each".into(),
        }
    }
}

/// Step 4's verification with the sketches of the candidates' nodes (`needed`, their
/// first documents, increasing) read a block of `per_block` at a time, two blocks in
/// memory: each pair is verified when the blocks of both its nodes are in, so the sketch
/// file is read in order, a few times over, rather than a sketch at a time where it lies
/// (at 100M documents within `--memory 4G`, 2 × 31M reads of 128 bytes doubled the step's
/// time). At most [`MAX_BLOCKS`] blocks: the file is read `blocks + 1` times over at worst;
/// one block is all of them in memory. The pairs are in order of their first node, and
/// nodes in order of their first document, so the pairs whose first node is in block `i`
/// are a run of them, scanned once for each block `j ≥ i` their second node may be in
/// (a block number a node, no reordering of the pairs). Each pair's verdict goes in a slot
/// of its own, 4 bytes a pair. The edges are those of [`batch::verify`], in the same
/// order.
fn verify_in_blocks(
    c: &Candidates,
    needed: &[u32],
    sketches: &Column<Sketch>,
    options: &Options,
    per_block: usize,
) -> Result<Vec<Edge>, Failure> {
    /// NaN's bits: no similarity is, so the slot of a pair not accepted.
    const REJECTED: u32 = u32::MAX;
    /// The block of a node in no pair.
    const NONE: u8 = u8::MAX;
    let per_block = per_block.max(1);
    let blocks = needed.len().div_ceil(per_block);
    let pairs = c.pairs();
    let verdicts: Vec<AtomicU32> = (0..pairs.len()).map(|_| AtomicU32::new(REJECTED)).collect();
    let block: Vec<u8> = (0..c.nodes() as u32)
        .into_par_iter()
        .map(|n| {
            needed
                .binary_search(&c.first(n))
                .map_or(NONE, |i| (i / per_block).min(MAX_BLOCKS) as u8)
        })
        .collect();
    let docs_of = |j: usize| &needed[j * per_block..((j + 1) * per_block).min(needed.len())];
    let mut verified = 0usize;
    for i in 0..blocks {
        // The run of pairs whose first node is in block i.
        let from = pairs.partition_point(|&(a, _)| usize::from(block[a as usize]) < i);
        let to = pairs.partition_point(|&(a, _)| usize::from(block[a as usize]) <= i);
        let run = &pairs[from..to];
        if run.is_empty() {
            continue;
        }
        let first_block = sketches.gather(docs_of(i))?;
        for j in i..blocks {
            let in_j = |&(_, b): &(u32, u32)| usize::from(block[b as usize]) == j;
            if !run.iter().any(in_j) {
                continue;
            }
            let second;
            let other = if j == i {
                &first_block
            } else {
                second = sketches.gather(docs_of(j))?;
                &second
            };
            let (first_docs, other_docs) = (docs_of(i), docs_of(j));
            let sketch = |doc: u32| match first_docs.binary_search(&doc) {
                Ok(k) => first_block[k],
                Err(_) => other_docs
                    .binary_search(&doc)
                    .map_or(Sketch::EMPTY, |k| other[k]),
            };
            verified += run
                .par_iter()
                .enumerate()
                .filter(|(_, p)| in_j(p))
                .map(|(k, &(a, b))| {
                    // No fingerprints here: the rule is Jaccard's, on sketches alone.
                    let m = batch::measure(
                        &sketch(c.first(a)),
                        &sketch(c.first(b)),
                        &[0; LANES],
                        &[0; LANES],
                    );
                    if options.rule.accepts(m) {
                        verdicts[from + k].store(m.similarity.to_bits(), Ordering::Relaxed);
                    }
                })
                .count();
        }
    }
    // Every pair is in one run and one of its blocks, unless the pairs were not in order.
    if verified != pairs.len() {
        return Err(Failure::io(anyhow!(
            "dedup verified {verified} of {} candidate pairs: they were not in order",
            pairs.len()
        )));
    }
    Ok(pairs
        .iter()
        .zip(verdicts)
        .filter_map(|(&(a, b), v)| {
            let v = v.into_inner();
            (v != REJECTED).then(|| Edge {
                a,
                b,
                similarity: f32::from_bits(v),
                distance: 0,
            })
        })
        .collect())
}
