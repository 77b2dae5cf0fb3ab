//! `neardup dedup --against STORE` and `--save STORE`: the input deduplicated after the
//! documents of a document store, by the store's own decision, and what it keeps added
//! to the store.
//!
//! Pass 1 looks each text up in the store as it signs it (the store's band index and
//! sketches: the candidates and verification batch dedup would make of the stored
//! documents followed by the input); assignment then puts the stored documents first
//! ([`neardup::batch::resolve_against`]). `--save` loads the kept documents the way
//! `neardup load` does, each put `only_if_unique`, so the store checks once more what
//! dedup decided.

use std::collections::HashMap;
use std::path::Path;

use anyhow::anyhow;
use neardup::batch::{Dedup, Outside, Rule};
use neardup::fingerprint::{Wide, LANES};
use neardup::hamming::wide_distance;
use neardup::jaccard::Threshold;
use neardup_io::docs::{self, ReadOptions};
use neardup_store::{DocConfig, DocumentReader, DocumentStore, OpenOptions, Preparer};
use rayon::prelude::*;
use serde_json::{json, Value};

use super::bounded::{StoreCheck, Stored};
use super::DedupCmd;
use crate::failure::{store_failure, Failure};
use crate::load;
use crate::progress::Progress;

/// The documents removed for one stored document: a line of --clusters.
pub(crate) struct StoredCluster {
    /// The stored document's id, as JSON text.
    pub(crate) id: String,
    fingerprint: Wide,
    /// The input's documents removed for it, in input order.
    pub(crate) members: Vec<Outside>,
}

/// The document store of a run with --against or --save.
pub(crate) struct StoreRun {
    path: String,
    /// `None` until the end of a --save into a store that does not exist yet.
    store: Option<DocumentStore>,
    reader: Option<DocumentReader>,
    preparer: Preparer,
    threshold: Threshold,
    saving: bool,
    /// Documents stored when the run began.
    before: usize,
    /// What --save did: documents stored, and refused by the store's own check.
    saved: Option<(u64, u64)>,
}

impl StoreRun {
    /// The store `cmd` names, opened (or, for a --save into a new one, noted), after
    /// refusing what it cannot be combined with.
    pub(crate) fn open(cmd: &DedupCmd, rule: Rule) -> Result<Option<StoreRun>, Failure> {
        let dir = match (&cmd.against, &cmd.save) {
            (None, None) => return Ok(None),
            (Some(a), Some(s)) if !same_dir(a, s) => {
                return Err(Failure::input(anyhow!(
                    "--against {a} and --save {s}: --save deduplicates against the store it \
                     adds to; give one store (--save alone, or both naming it)"
                )))
            }
            (Some(dir), _) | (None, Some(dir)) => dir.clone(),
        };
        let flag = if cmd.save.is_some() {
            "--save"
        } else {
            "--against"
        };
        let refuse = |what: &str, why: &str| {
            Err(Failure::input(anyhow!(
                "{flag} cannot be combined with {what}: {why}"
            )))
        };
        if matches!(rule, Rule::Distance(_)) {
            return refuse(
                "--distance",
                "a document store decides by the Jaccard threshold (--threshold)",
            );
        }
        if cmd.closure {
            return refuse(
                "--closure",
                "stored documents are kept, and a document is removed only for one that \
                 is its near-duplicate",
            );
        }
        if cmd.report.is_some() {
            return refuse("--report", "the report covers the input's clusters alone");
        }
        let threshold = cmd.threshold;
        let exists = Path::new(&dir).join(neardup_store::FILE).is_file();
        if !exists && cmd.save.is_some() {
            let config = DocConfig {
                threshold,
                paragraphs: false,
            };
            return Ok(Some(StoreRun {
                path: dir,
                store: None,
                reader: None,
                preparer: Preparer::new(config),
                threshold,
                saving: true,
                before: 0,
                saved: None,
            }));
        }
        let store =
            DocumentStore::open_with(&dir, None, OpenOptions::default()).map_err(store_failure)?;
        let theirs = store.config().threshold;
        if theirs != threshold {
            return Err(Failure::input(anyhow!(
                "{dir} decides near-duplicates at threshold {}, this run at {}: give \
                 --threshold {} (the store's decision and dedup's must be one)",
                theirs.get(),
                threshold.get(),
                theirs.get()
            )));
        }
        Ok(Some(StoreRun {
            path: dir,
            reader: Some(store.reader()),
            preparer: store.preparer(),
            before: store.len(),
            store: Some(store),
            threshold,
            saving: cmd.save.is_some(),
            saved: None,
        }))
    }

    /// What pass 1 looks the documents up in (nothing in a store not made yet) and
    /// checks their ids for.
    pub(crate) fn check(&self) -> StoreCheck<'_> {
        StoreCheck {
            reader: self.reader.as_ref(),
            preparer: &self.preparer,
            saving: self.saving,
        }
    }

    /// Whether the kept documents are saved into the store.
    pub(crate) fn saving(&self) -> bool {
        self.saving
    }

    /// With --save, an error before anything is written when a kept document's id is
    /// already stored or is another kept document's (`removed`: the documents not kept,
    /// increasing): saving would replace a document no one asked to replace.
    pub(crate) fn refuse_taken_ids(
        &self,
        args: &ReadOptions,
        stored: &Stored,
        removed: &[u32],
    ) -> Result<(), Failure> {
        if !self.saving {
            return Ok(());
        }
        let kept = |d: u32| removed.binary_search(&d).is_err();
        if let Some((doc, id)) = stored.taken.iter().find(|(d, _)| kept(*d)) {
            return Err(Failure::input(anyhow!(
                "--save: document {} of the input (counting from 1) is kept and has the id \
                 {id:?} of a document already in {}; a store holds one document per id, so \
                 saving would replace it. Nothing was written: give the document another \
                 id, or drop --save",
                doc + 1,
                self.path
            )));
        }
        let mut hashes: Vec<(u64, u32)> = stored
            .id_hashes
            .iter()
            .zip(0u32..)
            .filter(|&(_, d)| kept(d))
            .map(|(&h, d)| (h, d))
            .collect();
        hashes.par_sort_unstable();
        let same: Vec<(u32, u32)> = hashes
            .windows(2)
            .filter(|w| w[0].0 == w[1].0)
            .map(|w| (w[0].1, w[1].1))
            .collect();
        if same.is_empty() {
            return Ok(());
        }
        // Equal hashes of ids: read the ids themselves, to name them (and to tell a
        // collision of hashes from a repeated id).
        let mut wanted: Vec<u32> = same.iter().flat_map(|&(a, b)| [a, b]).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let ids = ids_at(args, &wanted)?;
        let id = |d: u32| wanted.binary_search(&d).ok().map(|i| ids[i].as_str());
        for (a, b) in same {
            if let (Some(x), Some(y)) = (id(a), id(b)) {
                if x == y {
                    return Err(Failure::input(anyhow!(
                        "--save: documents {} and {} of the input (counting from 1) are both \
                         kept and have the id {x:?}; a store holds one document per id. \
                         Nothing was written: give each document its own id, or drop --save",
                        a + 1,
                        b + 1
                    )));
                }
            }
        }
        Ok(())
    }

    /// The clusters of documents removed for stored documents, in the order of their
    /// first members, each with its members' distances to the stored document set in
    /// `found` (`fp(doc)`: an input document's 256-bit fingerprint).
    pub(crate) fn clusters(
        &self,
        found: &mut Dedup,
        stored: &Stored,
        fp: impl Fn(u32) -> Wide,
    ) -> Result<Vec<StoredCluster>, Failure> {
        let Some(reader) = &self.reader else {
            return Ok(Vec::new());
        };
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut out: Vec<StoredCluster> = Vec::new();
        for o in &mut found.outside {
            let Some((_, id, _)) = stored.of(o.first) else {
                continue;
            };
            let i = match index.get(id.as_str()) {
                Some(&i) => i,
                None => {
                    // Expired since it was matched: no fingerprint to measure against.
                    let fingerprint = reader
                        .get(id)
                        .map_err(store_failure)?
                        .map_or([0; LANES], |d| d.signature.fingerprint);
                    index.insert(id, out.len());
                    out.push(StoredCluster {
                        id: Value::String(id.clone()).to_string(),
                        fingerprint,
                        members: Vec::new(),
                    });
                    out.len() - 1
                }
            };
            o.distance = wide_distance(&fp(o.doc), &out[i].fingerprint);
            out[i].members.push(*o);
        }
        Ok(out)
    }

    /// With --save, loads every document but the `removed` ones (increasing) into the
    /// store, made now if it did not exist, and closes it with its snapshot.
    pub(crate) fn save(
        &mut self,
        args: &ReadOptions,
        removed: &[u32],
        progress: &Progress,
    ) -> Result<(), Failure> {
        if !self.saving {
            return Ok(());
        }
        self.reader = None;
        let store = match self.store.take() {
            Some(store) => store,
            None => {
                let config = DocConfig {
                    threshold: self.threshold,
                    paragraphs: false,
                };
                DocumentStore::create_with(&self.path, config, OpenOptions::default())
                    .map_err(store_failure)?
            }
        };
        let read = ReadOptions {
            ids_only: false,
            keep_records: false,
            ..args.clone()
        };
        // Each put only if unique: the store checks once more what dedup decided.
        let puts = load::Puts {
            ttl: None,
            only_if_unique: true,
            batch: load::BATCH,
        };
        let (store, _, counts) =
            load::load(store, &read, removed, &puts, progress, (&mut None, false))?;
        load::finish(store)?;
        self.saved = Some((counts.inserted, counts.refused));
        Ok(())
    }

    /// The summary's "store": what the run found in it and added to it.
    pub(crate) fn finish(self, found: &Dedup) -> Value {
        json!({
            "path": self.path,
            "stored_before": self.before,
            "removed_for_stored": found.outside.len(),
            "saved": self.saved.map(|s| s.0),
            "refused_by_store": self.saved.map(|s| s.1),
        })
    }
}

/// Whether two paths name one directory (by name, when one does not exist yet).
fn same_dir(a: &str, b: &str) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => Path::new(a) == Path::new(b),
    }
}

/// The ids of the documents at `positions` (increasing), read again.
fn ids_at(args: &ReadOptions, positions: &[u32]) -> Result<Vec<String>, Failure> {
    let read = ReadOptions {
        ids_only: true,
        keep_records: false,
        ..args.clone()
    };
    let mut out = Vec::with_capacity(positions.len());
    let mut at = 0u64;
    docs::read_as::<Failure>(&read, &Progress::hidden(), "reading ids", |batch| {
        for d in batch {
            if positions.binary_search(&(at as u32)).is_ok() {
                out.push(docs::id_text(&d.id));
            }
            at += 1;
        }
        Ok(())
    })?;
    Ok(out)
}
