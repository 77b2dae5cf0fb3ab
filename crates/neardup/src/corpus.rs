//! The online corpus: documents come and go, and each query asks which stored documents
//! are within the distance of a fingerprint.
//!
//! Per table of the [`Layout`], the permuted fingerprints are kept sorted, with a bucket
//! directory on their top bits (a query finds its run with two array reads, no binary
//! search), plus a small sorted delta of recent inserts that is merged in when it grows.
//! Removals are tombstones until enough accumulate to compact. A match is reported by the
//! first table that can see it (decided from the XOR, as in batch matching), so each
//! document comes back once without a set of seen ids.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::tables::{Blocks, Layout, Table};

/// Modelled cost of a table probe (a directory read and a cache miss into the run).
const PROBE: f64 = 40.0;
/// Modelled cost of checking one candidate.
const CHECK: f64 = 2.0;
/// Most tables the corpus planner considers: every table holds every fingerprint.
const MAX_TABLES: u128 = 32;

/// The corpus layout for about `n` documents at `distance`: the block count with the
/// cheapest modelled query (table probes against candidates to check), among layouts of
/// at most 32 tables.
pub fn plan(n: usize, distance: u32) -> Result<Layout> {
    let mut best: Option<(f64, usize)> = None;
    for blocks in distance as usize + 1..=64 {
        let tables = crate::tables::num_tables(blocks, distance);
        if tables > MAX_TABLES {
            break;
        }
        // The fewest leading bits of any table: the block widths round down.
        let lead = (blocks - distance as usize) as u32 * (64 / blocks as u32);
        let per_table = n as f64 / 2f64.powi(lead as i32);
        let cost = tables as f64 * (PROBE + CHECK * per_table);
        if best.is_none_or(|(c, _)| cost < c) {
            best = Some((cost, blocks));
        }
    }
    match best {
        Some((_, blocks)) => Layout::new(blocks, distance),
        None => Layout::new(distance as usize + 1, distance),
    }
}

/// One table: permuted fingerprints sorted, their slots, a directory, and the delta.
#[derive(Clone, Debug)]
struct Index {
    keys: Vec<u64>,
    slots: Vec<u32>,
    /// `dir[b]..dir[b + 1]` is the run of keys whose top `dir_bits` bits are `b`.
    dir: Vec<u32>,
    dir_bits: u32,
    /// Recent inserts, sorted by key.
    delta: Vec<(u64, u32)>,
}

impl Index {
    fn build(mut entries: Vec<(u64, u32)>, lead: u32) -> Index {
        entries.sort_unstable();
        let n = entries.len();
        // About one key per bucket, never finer than the leading blocks.
        let dir_bits = (usize::BITS - n.leading_zeros())
            .clamp(1, 24)
            .min(lead.max(1));
        let mut dir = vec![0u32; (1 << dir_bits) + 1];
        for &(k, _) in &entries {
            dir[(k >> (64 - dir_bits)) as usize + 1] += 1;
        }
        for b in 1..dir.len() {
            dir[b] += dir[b - 1];
        }
        Index {
            keys: entries.iter().map(|e| e.0).collect(),
            slots: entries.iter().map(|e| e.1).collect(),
            dir,
            dir_bits,
            delta: Vec::new(),
        }
    }

    /// Calls `f(key, slot)` for every entry whose key agrees with `q` under `mask`.
    #[inline]
    fn run(&self, q: u64, mask: u64, mut f: impl FnMut(u64, u32)) {
        let b = (q >> (64 - self.dir_bits)) as usize;
        let (lo, hi) = (self.dir[b] as usize, self.dir[b + 1] as usize);
        let lead = q & mask;
        let keys = &self.keys[lo..hi];
        // Within a bucket the keys are sorted: skip to the lead, stop after it.
        let start = if keys.len() > 16 {
            keys.partition_point(|&k| k & mask < lead)
        } else {
            0
        };
        for (i, &k) in keys.iter().enumerate().skip(start) {
            let kl = k & mask;
            if kl == lead {
                f(k, self.slots[lo + i]);
            } else if kl > lead {
                break;
            }
        }
        if !self.delta.is_empty() {
            let from = self.delta.partition_point(|e| e.0 & mask < lead);
            for &(k, s) in &self.delta[from..] {
                if k & mask != lead {
                    break;
                }
                f(k, s);
            }
        }
    }
}

/// An in-memory corpus of `(id, fingerprint)` documents with near-duplicate queries.
///
/// Ids are the caller's `u64` document ids. Inserting an id that is present replaces its
/// fingerprint. Results list each matching document once, nearest first (then by id).
#[derive(Clone, Debug)]
pub struct Corpus {
    layout: Layout,
    indexes: Vec<Index>,
    fps: Vec<u64>,
    ids: Vec<u64>,
    live: Vec<bool>,
    by_id: HashMap<u64, u32>,
    dead: usize,
    delta_cap: usize,
}

impl Corpus {
    /// An empty corpus matching at `distance`, with `blocks` per fingerprint, or for
    /// [`Blocks::Auto`] the [`plan`] for about `expected` documents.
    pub fn new(blocks: Blocks, distance: u32, expected: usize) -> Result<Corpus> {
        let layout = match blocks {
            Blocks::Fixed(m) => Layout::new(m, distance)?,
            Blocks::Auto => plan(expected, distance)?,
        };
        if crate::tables::num_tables(layout.blocks(), distance) > MAX_TABLES * 8 {
            return Err(Error::TooManyTables {
                blocks: layout.blocks(),
                distance,
                tables: crate::tables::num_tables(layout.blocks(), distance),
                limit: (MAX_TABLES * 8) as usize,
            });
        }
        let indexes = layout
            .tables()
            .iter()
            .map(|t| Index::build(Vec::new(), t.leading_bits()))
            .collect();
        Ok(Corpus {
            layout,
            indexes,
            fps: Vec::new(),
            ids: Vec::new(),
            live: Vec::new(),
            by_id: HashMap::new(),
            dead: 0,
            delta_cap: 4096,
        })
    }

    /// The layout in use.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Documents stored.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The fingerprint stored for `id`.
    pub fn get(&self, id: u64) -> Option<u64> {
        self.by_id.get(&id).map(|&s| self.fps[s as usize])
    }

    /// Stores `id` with fingerprint `fp`; returns the fingerprint it replaced, if any.
    pub fn insert(&mut self, id: u64, fp: u64) -> Result<Option<u64>> {
        let old = self.remove(id);
        let slot = self.new_slot(id, fp)?;
        for (index, table) in self.indexes.iter_mut().zip(self.layout.tables()) {
            let key = table.permute(fp);
            let at = index.delta.partition_point(|e| e.0 < key);
            index.delta.insert(at, (key, slot));
        }
        if self
            .indexes
            .first()
            .is_some_and(|i| i.delta.len() > self.delta_cap)
        {
            self.rebuild();
        }
        Ok(old)
    }

    /// Stores every `(id, fingerprint)`, in order (a later copy of an id wins), merging
    /// them into the tables in one pass per table.
    pub fn insert_bulk(&mut self, docs: &[(u64, u64)]) -> Result<()> {
        for &(id, fp) in docs {
            self.remove(id);
            self.new_slot(id, fp)?;
        }
        self.rebuild();
        Ok(())
    }

    /// Removes `id`; returns its fingerprint, or `None` if it was not stored.
    pub fn remove(&mut self, id: u64) -> Option<u64> {
        let slot = self.by_id.remove(&id)? as usize;
        self.live[slot] = false;
        self.dead += 1;
        if self.dead > 1024 && self.dead > self.by_id.len() {
            self.rebuild();
        }
        Some(self.fps[slot])
    }

    /// Removes every id in `ids`; returns how many were stored.
    pub fn remove_bulk(&mut self, ids: &[u64]) -> usize {
        ids.iter().filter(|&&id| self.remove(id).is_some()).count()
    }

    /// Every stored document within the distance of `fp`, as `(id, distance)`, each once,
    /// by distance then id.
    pub fn find_all(&self, fp: u64) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        self.each_match(fp, |id, d| out.push((id, d)));
        out.sort_unstable_by_key(|&(id, d)| (d, id));
        out
    }

    /// The nearest stored document within the distance of `fp` (the smallest id among
    /// equals), or `None`.
    pub fn find_first(&self, fp: u64) -> Option<(u64, u32)> {
        let mut best: Option<(u64, u32)> = None;
        self.each_match(fp, |id, d| {
            if best.is_none_or(|(bid, bd)| (d, id) < (bd, bid)) {
                best = Some((id, d));
            }
        });
        best
    }

    /// [`Corpus::find_all`] for each query, in parallel.
    pub fn find_all_bulk(&self, fps: &[u64]) -> Vec<Vec<(u64, u32)>> {
        self.bulk(fps, |fp| self.find_all(fp))
    }

    /// [`Corpus::find_first`] for each query, in parallel.
    pub fn find_first_bulk(&self, fps: &[u64]) -> Vec<Option<(u64, u32)>> {
        self.bulk(fps, |fp| self.find_first(fp))
    }

    fn bulk<R: Send>(&self, fps: &[u64], f: impl Fn(u64) -> R + Sync + Send) -> Vec<R> {
        let chunks: Vec<&[u64]> = fps.chunks(256).collect();
        crate::par::map(chunks, |c| c.iter().map(|&fp| f(fp)).collect::<Vec<R>>())
            .into_iter()
            .flatten()
            .collect()
    }

    fn each_match(&self, fp: u64, mut f: impl FnMut(u64, u32)) {
        let k = self.layout.distance();
        for (index, table) in self.indexes.iter().zip(self.layout.tables()) {
            let q = table.permute(fp);
            index.run(q, table.search_mask(), |key, slot| {
                let diff = key ^ q;
                let d = diff.count_ones();
                if d <= k && self.live[slot as usize] && table.is_first_for(diff) {
                    f(self.ids[slot as usize], d);
                }
            });
        }
    }

    fn new_slot(&mut self, id: u64, fp: u64) -> Result<u32> {
        let slot = u32::try_from(self.fps.len()).map_err(|_| Error::TooManyFingerprints {
            got: self.fps.len() + 1,
            max: u32::MAX as usize,
        })?;
        self.fps.push(fp);
        self.ids.push(id);
        self.live.push(true);
        self.by_id.insert(id, slot);
        Ok(slot)
    }

    /// Compacts away removed documents and rebuilds every table from the live ones.
    fn rebuild(&mut self) {
        let mut fps = Vec::with_capacity(self.by_id.len());
        let mut ids = Vec::with_capacity(self.by_id.len());
        for s in 0..self.fps.len() {
            if self.live[s] {
                fps.push(self.fps[s]);
                ids.push(self.ids[s]);
            }
        }
        self.by_id = ids
            .iter()
            .enumerate()
            .map(|(s, &id)| (id, s as u32))
            .collect();
        self.live = vec![true; fps.len()];
        self.dead = 0;
        let tables: Vec<&Table> = self.layout.tables().iter().collect();
        let fps_ref = &fps;
        self.indexes = crate::par::map(tables, |t| {
            let entries = fps_ref
                .iter()
                .enumerate()
                .map(|(s, &fp)| (t.permute(fp), s as u32))
                .collect();
            Index::build(entries, t.leading_bits())
        });
        self.fps = fps;
        self.ids = ids;
        // Merging costs a pass over the corpus: let the delta grow with it.
        self.delta_cap = ((self.fps.len() as f64).sqrt() as usize * 8).clamp(4096, 1 << 16);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_few_tables() {
        for n in [0, 1000, 1_000_000, 100_000_000] {
            let l = plan(n, 3).unwrap();
            assert!(
                l.tables().len() as u128 <= MAX_TABLES,
                "{n}: {}",
                l.blocks()
            );
        }
        assert!(plan(1_000_000, 3).unwrap().blocks() >= 4);
    }
}
