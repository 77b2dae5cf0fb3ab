//! [`Lanes`]: the online candidates of documents, one [`Corpus`] per 64-bit lane of their
//! 256-bit fingerprints.
//!
//! Batch deduplication calls two documents candidates when they are within the lane
//! distance in at least one lane ([`crate::batch::WideMatcher::candidates_by`]); a query
//! on [`Lanes`] finds exactly the stored documents that would be its candidates at the
//! same lane distance. The decision on each candidate is then [`crate::decide::Rule`]'s,
//! as in batch. Memory is four corpora's: about 120 bytes a document at distance 3.

use super::{Corpus, CorpusReader};
use crate::error::Result;
use crate::fingerprint::{Wide, LANES};
use crate::tables::{Blocks, Layout};

/// Documents by id, indexed in every lane of their fingerprints.
pub struct Lanes {
    lanes: Vec<Corpus>,
}

impl std::fmt::Debug for Lanes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lanes")
            .field("layout", self.layout())
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

/// Queries on [`Lanes`] from another thread: cheap to clone.
#[derive(Clone, Debug)]
pub struct LanesReader {
    lanes: Vec<CorpusReader>,
}

/// The union of the ids each lane finds, increasing, once each.
fn union(mut found: Vec<u64>) -> Vec<u64> {
    found.sort_unstable();
    found.dedup();
    found
}

impl LanesReader {
    /// As [`Lanes::candidates`].
    pub fn candidates(&self, fp: &Wide) -> Vec<u64> {
        union(
            self.lanes
                .iter()
                .zip(fp)
                .flat_map(|(lane, &v)| lane.find_all(v).into_iter().map(|(id, _)| id))
                .collect(),
        )
    }

    /// Documents stored, as of now.
    pub fn len(&self) -> usize {
        self.lanes[0].len()
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Lanes {
    /// Empty lanes matching within `distance` bits per lane, with `blocks` per lane
    /// fingerprint (or the corpus planner's choice for about `expected` documents).
    pub fn new(blocks: Blocks, distance: u32, expected: usize) -> Result<Lanes> {
        let first = Corpus::new(blocks, distance, expected)?;
        let fixed = Blocks::Fixed(first.layout().blocks());
        let mut lanes = vec![first];
        for _ in 1..LANES {
            lanes.push(Corpus::new(fixed, distance, expected)?);
        }
        Ok(Lanes { lanes })
    }

    /// The layout of each lane.
    pub fn layout(&self) -> &Layout {
        self.lanes[0].layout()
    }

    /// Documents stored.
    pub fn len(&self) -> usize {
        self.lanes[0].len()
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of memory held by the lanes' tables, ids and recent changes.
    pub fn heap_bytes(&self) -> usize {
        self.lanes.iter().map(Corpus::heap_bytes).sum()
    }

    /// As [`Corpus::background_rebuilds`], for every lane.
    pub fn background_rebuilds(self, on: bool) -> Lanes {
        Lanes {
            lanes: self
                .lanes
                .into_iter()
                .map(|l| l.background_rebuilds(on))
                .collect(),
        }
    }

    /// As [`Corpus::finish_rebuild`], for every lane.
    pub fn finish_rebuild(&mut self) {
        self.lanes.iter_mut().for_each(Corpus::finish_rebuild);
    }

    /// A query handle for other threads.
    pub fn reader(&self) -> LanesReader {
        LanesReader {
            lanes: self.lanes.iter().map(Corpus::reader).collect(),
        }
    }

    /// Stores `id` with fingerprint `fp`, replacing what `id` had.
    pub fn insert(&mut self, id: u64, fp: &Wide) -> Result<()> {
        self.insert_bulk(&[(id, *fp)])
    }

    /// Stores every `(id, fingerprint)` (a later copy of an id wins).
    pub fn insert_bulk(&mut self, docs: &[(u64, Wide)]) -> Result<()> {
        let mut lane_docs = Vec::with_capacity(docs.len());
        for (lane, corpus) in self.lanes.iter_mut().enumerate() {
            lane_docs.clear();
            lane_docs.extend(docs.iter().map(|(id, fp)| (*id, fp[lane])));
            corpus.insert_bulk(&lane_docs)?;
        }
        Ok(())
    }

    /// Removes `id`; whether it was stored.
    pub fn remove(&mut self, id: u64) -> bool {
        self.remove_bulk(&[id]) == 1
    }

    /// Removes every id; returns how many were stored.
    pub fn remove_bulk(&mut self, ids: &[u64]) -> usize {
        let mut removed = 0;
        for (lane, corpus) in self.lanes.iter_mut().enumerate() {
            let n = corpus.remove_bulk(ids);
            if lane == 0 {
                removed = n;
            }
        }
        removed
    }

    /// The fingerprint stored for `id`.
    pub fn get(&self, id: u64) -> Option<Wide> {
        let mut out = [0u64; LANES];
        for (lane, corpus) in self.lanes.iter().enumerate() {
            out[lane] = corpus.get(id)?;
        }
        Some(out)
    }

    /// The ids of the stored documents within the distance of `fp` in at least one lane,
    /// increasing, once each: the documents batch deduplication would call its candidates.
    pub fn candidates(&self, fp: &Wide) -> Vec<u64> {
        union(
            self.lanes
                .iter()
                .zip(fp)
                .flat_map(|(lane, &v)| lane.find_all(v).into_iter().map(|(id, _)| id))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Inserts, replacements and removals against a map, every query against brute
        /// force over the map.
        #[test]
        fn candidates_match_brute_force(
            bases in prop::collection::vec(any::<[u64; LANES]>(), 1..4),
            ops in prop::collection::vec(
                (0u8..4, 0u64..30, any::<prop::sample::Index>(), prop::collection::vec((0usize..LANES, 0u32..64), 0..8)),
                1..120,
            ),
            k in 0u32..5,
        ) {
            let mut lanes = Lanes::new(Blocks::Fixed(k as usize + 1), k, 0).unwrap();
            let mut model: BTreeMap<u64, Wide> = BTreeMap::new();
            for (op, id, base, flips) in ops {
                let mut fp = *base.get(&bases);
                for (lane, bit) in flips {
                    fp[lane] ^= 1 << bit;
                }
                match op {
                    0 | 1 => {
                        lanes.insert(id, &fp).unwrap();
                        model.insert(id, fp);
                    }
                    2 => {
                        prop_assert_eq!(lanes.remove(id), model.remove(&id).is_some());
                    }
                    _ => {
                        let want: Vec<u64> = model
                            .iter()
                            .filter(|(_, m)| (0..LANES).any(|l| (m[l] ^ fp[l]).count_ones() <= k))
                            .map(|(&id, _)| id)
                            .collect();
                        prop_assert_eq!(&lanes.candidates(&fp), &want);
                        prop_assert_eq!(lanes.reader().candidates(&fp), want);
                    }
                }
                prop_assert_eq!(lanes.len(), model.len());
                for (&id, fp) in &model {
                    prop_assert_eq!(lanes.get(id), Some(*fp));
                }
            }
        }
    }
}
