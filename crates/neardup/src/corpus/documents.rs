//! [`Documents`]: an online corpus that decides near-duplicates as batch deduplication
//! does: candidates from the band keys of the documents' signatures ([`BandIndex`]), the
//! Jaccard rule on each ([`Rule::matches`]). Feeding documents in order through
//! [`Documents::insert_if_unique`] keeps exactly the documents that `batch::dedup` with
//! [`crate::decide::Keep::First`] keeps.

use std::collections::HashMap;

use super::{BandIndex, BandIndexReader};
use crate::decide::{Match, Rule, Signature};
use crate::error::Result;
use crate::jaccard::{Banding, Threshold};

/// Documents by id with their signatures, in memory (about 250 bytes a document for the
/// signatures, plus the index's).
#[derive(Debug, Default)]
pub struct Documents {
    threshold: Threshold,
    index: BandIndex,
    signatures: HashMap<u64, Signature>,
}

impl Documents {
    /// An empty corpus deciding at `threshold`.
    pub fn new(threshold: Threshold) -> Documents {
        Documents {
            threshold,
            ..Documents::default()
        }
    }

    /// The rule documents are decided by.
    pub fn rule(&self) -> Rule {
        Rule::Jaccard(self.threshold)
    }

    /// The banding the signatures given to this corpus must be made with
    /// ([`Signature::of_text`]).
    pub fn banding(&self) -> Banding {
        self.rule().banding()
    }

    /// Documents stored.
    pub fn len(&self) -> usize {
        self.signatures.len()
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.signatures.is_empty()
    }

    /// The signature stored for `id`.
    pub fn get(&self, id: u64) -> Option<&Signature> {
        self.signatures.get(&id)
    }

    /// The stored near-duplicates of a document with signature `sig`, most similar first.
    pub fn matches(&self, sig: &Signature) -> Vec<(u64, Match)> {
        let found = self.index.candidates(&sig.index_keys());
        self.rule().matches(
            sig,
            found
                .into_iter()
                .filter_map(|id| self.signatures.get(&id).map(|s| (id, *s))),
        )
    }

    /// Stores `id` with `sig`; whether it replaced a stored document.
    pub fn insert(&mut self, id: u64, sig: Signature) -> Result<bool> {
        let replaced = self.index.insert(id, &sig.index_keys())?;
        self.signatures.insert(id, sig);
        Ok(replaced)
    }

    /// Stores `id` with `sig` unless a stored document other than `id` itself is its
    /// near-duplicate: the matches that kept it out (empty when it was stored).
    pub fn insert_if_unique(&mut self, id: u64, sig: Signature) -> Result<Vec<(u64, Match)>> {
        let mut found = self.matches(&sig);
        found.retain(|&(other, _)| other != id);
        if found.is_empty() {
            self.insert(id, sig)?;
        }
        Ok(found)
    }

    /// Removes `id`; its signature, if it was stored.
    pub fn remove(&mut self, id: u64) -> Option<Signature> {
        self.index.remove(id);
        self.signatures.remove(&id)
    }

    /// The candidates index, for readers on other threads (see [`BandIndex::reader`]).
    pub fn index_reader(&self) -> BandIndexReader {
        self.index.reader()
    }
}
