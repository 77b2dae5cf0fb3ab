//! The documents the lists name: their ids, and the fingerprints of their texts (once a
//! text), read by the second pass over the input (step 5 of [`super::bounded`], which
//! also streams the records `--deduplicated` keeps) or by the exact pass of
//! [`super::exact`] while it reads the texts. Both use this; neither uses the other.

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::anyhow;
use neardup::fingerprint::{Fingerprinter, Wide, LANES};
use neardup_io::docs::{self, Doc, ReadOptions};
use rayon::prelude::*;
use serde_json::json;

use super::columns::TextKey;
use crate::failure::Failure;
use crate::progress::Progress;

/// The ids and texts' fingerprints of some documents, read together.
pub(crate) struct Named {
    /// The documents, increasing; `read.ids` in their order.
    pub(crate) docs: Vec<u32>,
    pub(crate) read: Read,
}

/// The texts pass 2 fingerprints: the distinct text keys of the involved documents,
/// sorted, each with whether its text was fingerprinted yet (a text is fingerprinted
/// once, however many copies it has). Flat arrays rather than maps: at 100M documents
/// the involved ones number in the tens of millions, and this is the answer's memory.
pub(crate) struct Texts {
    keys: Vec<TextKey>,
    seen: Vec<AtomicBool>,
}

impl Texts {
    /// The texts of `keys`, in any order, repeated or not.
    pub(crate) fn new(mut keys: Vec<TextKey>) -> Texts {
        keys.par_sort_unstable();
        keys.dedup();
        keys.shrink_to_fit();
        let seen = keys.iter().map(|_| AtomicBool::new(false)).collect();
        Texts { keys, seen }
    }

    fn find(&self, key: TextKey) -> Option<usize> {
        self.keys.binary_search(&key).ok()
    }
}

/// The ids of the involved documents, in order, as JSON text: one string and where each
/// ends.
#[derive(Default)]
pub(crate) struct Ids {
    text: String,
    ends: Vec<usize>,
}

impl Ids {
    fn push(&mut self, id: &str) {
        self.text.push_str(id);
        self.ends.push(self.text.len());
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    /// The `i`th id.
    pub(crate) fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        let start = i.checked_sub(1).map_or(0, |p| self.ends[p]);
        self.text.get(start..end)
    }
}

/// The documents whose ids (and their texts' fingerprints) a read of the input gathers,
/// for the clusters and pairs to name them.
pub(crate) struct Naming<'a> {
    /// The documents, increasing.
    pub(crate) docs: &'a [u32],
    /// Their texts' keys, `key_of(doc)`, distinct.
    pub(crate) texts: Texts,
    pub(crate) key_of: &'a (dyn Fn(u32) -> Option<TextKey> + Sync),
    pub(crate) fingerprinter: &'a Fingerprinter,
}

impl Naming<'_> {
    /// The named documents of `batch`, which holds documents `range` (a text
    /// fingerprinted the first time it is met); or why a document is not what pass 1 read.
    pub(super) fn hits(
        &self,
        batch: &[Doc],
        range: std::ops::Range<u64>,
        whole: &ReadOptions,
    ) -> Result<Vec<Hit>, String> {
        let first = range.start;
        let from = self.docs.partition_point(|&d| u64::from(d) < first);
        let to = self.docs.partition_point(|&d| u64::from(d) < range.end);
        self.docs[from..to]
            .par_iter()
            .map(|&doc| {
                let i = (u64::from(doc) - first) as usize;
                let d = &batch[i];
                let id = d.id.to_string();
                let Some(key) = (self.key_of)(doc) else {
                    return Ok((i as u32, id, None));
                };
                let Some(t) = self.texts.find(key) else {
                    return Ok((i as u32, id, None));
                };
                if self.texts.seen[t].swap(true, Ordering::Relaxed) {
                    return Ok((i as u32, id, None));
                }
                let text = text_of(d, whole);
                if TextKey::of(&text) != key {
                    return Err(format!("document {doc} is not the text it was"));
                }
                Ok((
                    i as u32,
                    id,
                    Some((t, self.fingerprinter.fingerprint_wide(&text))),
                ))
            })
            .collect()
    }
}

/// What a read has gathered of the named documents so far.
pub(super) struct Names {
    ids: Ids,
    fps: Vec<Wide>,
    printed: usize,
}

impl Names {
    pub(super) fn new(naming: &Naming<'_>) -> Names {
        let mut ids = Ids::default();
        ids.ends.reserve_exact(naming.docs.len());
        Names {
            ids,
            fps: vec![[0; LANES]; naming.texts.keys.len()],
            printed: 0,
        }
    }

    /// A batch's hits, batches in order.
    pub(super) fn add(&mut self, hits: Vec<Hit>) {
        for (_, id, fp) in hits {
            self.ids.push(&id);
            if let Some((t, fp)) = fp {
                self.fps[t] = fp;
                self.printed += 1;
            }
        }
    }

    /// What was read of the documents of `naming` (`docs` read in all); `None` unless
    /// every one of them and every text was.
    pub(super) fn finish(self, naming: Naming<'_>, docs: u64) -> Option<Read> {
        if self.ids.len() != naming.docs.len() || self.printed != naming.texts.keys.len() {
            return None;
        }
        Some(Read {
            ids: self.ids,
            texts: naming.texts,
            fps: self.fps,
            docs,
        })
    }
}

/// What pass 2 gives back.
pub(crate) struct Read {
    /// The ids of [`Naming::docs`], in its order.
    pub(crate) ids: Ids,
    /// The texts read, and the fingerprint of each (`fps[i]` of `texts.keys[i]`).
    texts: Texts,
    fps: Vec<Wide>,
    /// Documents read.
    pub(crate) docs: u64,
}

impl Read {
    /// The fingerprint of the text with `key`, if an involved document has that text.
    pub(crate) fn fingerprint(&self, key: TextKey) -> Option<Wide> {
        self.texts.find(key).map(|i| self.fps[i])
    }
}

/// A named document of a batch: its place in the batch, its id, and the first time its
/// text is met, its text's place in [`Texts`] and its fingerprint.
pub(super) type Hit = (u32, String, Option<(usize, Wide)>);

/// What one batch of pass 2 gives: its involved documents, the records to write, and a
/// note when the batch is not the one pass 1 read.
struct Batch {
    docs: usize,
    hits: Vec<Hit>,
    records: Vec<Option<String>>,
    changed: Option<String>,
}

/// The batches of the first read, for a second read cut the same way to know where each
/// of its batches stands.
pub(super) struct Cuts<'a> {
    sizes: &'a [u32],
    starts: Vec<u64>,
    /// Documents in all.
    pub(super) total: u64,
}

impl Cuts<'_> {
    /// The cuts of batches of `sizes` documents, in order.
    pub(super) fn new(sizes: &[u32]) -> Cuts<'_> {
        let mut starts = Vec::with_capacity(sizes.len());
        let mut total = 0u64;
        for &b in sizes {
            starts.push(total);
            total += u64::from(b);
        }
        Cuts {
            sizes,
            starts,
            total,
        }
    }

    /// The documents of batch `k` of the second read, which holds `len`; or how it differs
    /// from the first read's.
    pub(super) fn range(&self, k: u64, len: usize) -> Result<std::ops::Range<u64>, String> {
        let (Some(&first), Some(&size)) = (self.starts.get(k as usize), self.sizes.get(k as usize))
        else {
            return Err(format!(
                "more than the {} batches of the first read",
                self.sizes.len()
            ));
        };
        if len != size as usize {
            return Err(format!(
                "{len} documents in batch {k} on the second read, {size} on the first"
            ));
        }
        Ok(first..first + u64::from(size))
    }
}

/// The text of a document read again with its id only (`ReadOptions::ids_only`): a JSON
/// line's text parsed from its record (`whole`: the options without `ids_only`).
pub(super) fn text_of<'a>(d: &'a Doc, whole: &ReadOptions) -> std::borrow::Cow<'a, str> {
    match &d.record {
        Some(line) if d.text.is_empty() && !line.trim().is_empty() => {
            docs::json_record(line, whole)
                .map(|(_, text)| text)
                .unwrap_or_default()
        }
        _ => d.text.as_str().into(),
    }
}

/// Step 5: reads the input again, cut into the batches of pass 1 (`batches`: their
/// sizes), so that each batch knows where its documents stand and only the documents of
/// `naming` are parsed whole and fingerprinted; `write(record)` is called for each
/// document not in `dropped` (increasing), in input order, when `args.keep_records`.
pub(crate) fn reread(
    args: &ReadOptions,
    batches: &[u32],
    naming: Naming<'_>,
    dropped: &[u32],
    progress: &Progress,
    mut write: impl FnMut(&str) -> Result<(), Failure>,
) -> Result<Read, Failure> {
    let cuts = Cuts::new(batches);
    let at = cuts.total;
    let records = args.keep_records;
    // A JSON line whose text the reading left out is parsed again, whole.
    let whole = ReadOptions {
        ids_only: false,
        ..args.clone()
    };
    let work = |k: u64, batch: &mut [Doc]| -> Batch {
        let mut out = Batch {
            docs: batch.len(),
            hits: Vec::new(),
            records: Vec::new(),
            changed: None,
        };
        match cuts.range(k, batch.len()) {
            Ok(r) => match naming.hits(batch, r, &whole) {
                Ok(hits) => out.hits = hits,
                Err(why) => out.changed = Some(why),
            },
            Err(why) => {
                out.changed = Some(why);
                return out;
            }
        }
        if records {
            out.records = batch
                .iter_mut()
                .map(|d| match d.record.take() {
                    Some(line) => Some(line),
                    None => Some(json!({"id": d.id, "text": d.text}).to_string()),
                })
                .collect();
        }
        out
    };
    let mut names = Names::new(&naming);
    let mut docs = 0u64;
    let mut dropped = dropped.iter().peekable();
    let changed = |why: String| Failure::input(anyhow!("the input changed during the run: {why}"));
    let stats = docs::read_mapped_mut::<_, Failure>(args, progress, "writing", work, |b| {
        if let Some(why) = b.changed {
            return Err(changed(why));
        }
        let first = docs;
        names.add(b.hits);
        if records {
            for (i, record) in b.records.iter().enumerate() {
                let doc = first + i as u64;
                if dropped.next_if(|&&d| u64::from(d) == doc).is_some() {
                    continue;
                }
                if let Some(line) = record {
                    write(line)?;
                }
            }
        }
        docs += b.docs as u64;
        Ok(())
    })?;
    if docs != at {
        return Err(changed(format!(
            "{at} documents on the first read, {docs} on the second"
        )));
    }
    names
        .finish(naming, stats.docs)
        .ok_or_else(|| changed(format!("{at} documents on the first read, fewer named")))
}
