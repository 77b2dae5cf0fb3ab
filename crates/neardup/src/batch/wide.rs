//! Matching 256-bit fingerprints ([`Wide`]): candidates from each 64-bit lane, verified on
//! all 256 bits.
//!
//! One 64-bit simhash estimates the angle between two documents coarsely: edited copies
//! spread from 0 to 15 bits apart and the closest unrelated documents start at 11, so no
//! single distance separates them. Four lanes of the same votes, each under its own hash,
//! estimate it with a quarter of the variance. A pair is a candidate when it is within
//! the lane distance in at least one lane (cheap tables, as for any 64-bit set), and a
//! match when its whole 256-bit distance is within the distance. By pigeonhole, every
//! pair within `LANES · (lane distance + 1) − 1` bits is a candidate; pairs further out
//! but within the distance are found when one lane happens to be close, which for real
//! edited copies is nearly always (docs/dedup.md).

use std::sync::Arc;

use super::{Indexed, IndexedPair, Matcher, Progress, ProgressFn};
use crate::error::Error;
use crate::fingerprint::{Wide, LANES};
use crate::hamming::{self, wide_distance};
use crate::tables::Layout;

/// Finds pairs of [`Wide`] fingerprints within a 256-bit distance.
#[derive(Clone)]
pub struct WideMatcher {
    layout: Layout,
    distance: u32,
    progress: Option<Arc<ProgressFn>>,
}

impl std::fmt::Debug for WideMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WideMatcher")
            .field("layout", &self.layout)
            .field("distance", &self.distance)
            .finish_non_exhaustive()
    }
}

impl WideMatcher {
    /// Candidates within `layout`'s distance in some lane; matches within `distance` bits
    /// of 256.
    pub fn new(layout: Layout, distance: u32) -> WideMatcher {
        WideMatcher {
            layout,
            distance,
            progress: None,
        }
    }

    /// Calls `f` as the work advances: the tables of all lanes, in order.
    pub fn on_progress(mut self, f: impl Fn(Progress) + Send + Sync + 'static) -> WideMatcher {
        self.progress = Some(Arc::new(f));
        self
    }

    /// The per-lane layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Every pair of positions `a < b` that is a candidate in some lane and within the
    /// distance on all 256 bits, once, with its 256-bit distance; identical fingerprints
    /// are pairs at distance 0 (all of them: collapse heavy repeats first). Order is
    /// deterministic. Stops at the first error of `sink`.
    pub fn find_all<E: From<Error>>(
        &self,
        fps: &[Wide],
        sink: impl FnMut(IndexedPair) -> Result<(), E>,
    ) -> Result<(), E> {
        self.find_all_by(fps.len(), |i| &fps[i], sink)
    }

    /// [`WideMatcher::find_all`] over `n` fingerprints `fp(0)`, …, `fp(n - 1)`, wherever
    /// they live (no copy of them is made).
    pub(crate) fn find_all_by<'a, E: From<Error>>(
        &self,
        n: usize,
        fp: impl Fn(usize) -> &'a Wide,
        mut sink: impl FnMut(IndexedPair) -> Result<(), E>,
    ) -> Result<(), E> {
        self.candidates_by(n, &fp, |a, b| {
            let distance = wide_distance(fp(a), fp(b));
            if distance <= self.distance {
                sink(IndexedPair { a, b, distance })?;
            }
            Ok(())
        })
    }

    /// Every pair of positions `a < b` within the lane distance in at least one lane, once
    /// each (from the first lane that sees it), unverified: the candidates that a caller
    /// decides on with its own rule. Identical fingerprints are candidates (collapse heavy
    /// repeats first). Order is deterministic. Stops at the first error of `sink`.
    pub fn candidates_by<'a, E: From<Error>>(
        &self,
        n: usize,
        fp: impl Fn(usize) -> &'a Wide,
        mut sink: impl FnMut(usize, usize) -> Result<(), E>,
    ) -> Result<(), E> {
        let k = self.layout.distance();
        let tables = self.layout.tables().len() as u64;
        for lane in 0..LANES {
            let values: Vec<u64> = (0..n).map(|i| fp(i)[lane]).collect();
            let indexed = Indexed::new(&values)?;
            drop(values);
            let mut matcher = Matcher::new(self.layout.clone());
            if let Some(f) = &self.progress {
                let f = Arc::clone(f);
                matcher = matcher.on_progress(move |p| {
                    f(Progress {
                        done: lane as u64 * tables + p.done,
                        total: LANES as u64 * tables,
                        ..p
                    })
                });
            }
            matcher.find_all_indexed(&indexed, |p| -> Result<(), E> {
                let (x, y) = (fp(p.a), fp(p.b));
                // An earlier lane saw this pair already.
                if (0..lane).any(|l| hamming::within(x[l], y[l], k)) {
                    return Ok(());
                }
                sink(p.a, p.b)
            })?;
        }
        Ok(())
    }
}
