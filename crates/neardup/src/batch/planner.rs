//! Choosing the number of blocks for batch matching (`--blocks auto`).
//!
//! More blocks mean more tables but longer leading prefixes, hence shorter runs and fewer
//! candidate pairs to compare. For batch matching of `n` fingerprints the planner prices
//! every valid block count with the engine's own work, per table `t` with `w_t` leading
//! bits:
//!
//! ```text
//! cost(t) = n · (PASS + MOVE · moves_t + MSD · msd_passes(w_t))   sort and scan
//!         + CMP · n² / 2 · 2^-w_t                                 candidate pairs
//! ```
//!
//! where `msd_passes` are the in-bucket radix passes the engine will really make and the
//! candidate term assumes fingerprints spread like random bits (true of simhash on distinct
//! documents; near-duplicates add their own pairs whatever the layout). The constants are
//! nanoseconds per key or per pair, measured on the `find_all` benchmark. The block count
//! with the smallest total wins. Memory does not depend on the choice: batch matching keeps
//! one table at a time.

use super::radix::{msd_passes, partition_bits};
use crate::error::{Error, Result};
use crate::tables::{block_bits, num_tables, MAX_TABLES};

/// Per key and table: the partition pass (count, scatter) and pairwise comparison in
/// sub-buckets.
const PASS: f64 = 7.0;
/// Per key, table and rotation step of the permutation.
const MOVE: f64 = 0.5;
/// Per key, table and in-bucket counting pass.
const MSD: f64 = 1.5;
/// Per candidate pair compared (XOR, hardware popcount, compare).
const CMP: f64 = 0.45;

/// A priced choice of blocks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    /// Number of blocks.
    pub blocks: usize,
    /// Number of tables, C(blocks, distance).
    pub tables: usize,
    /// Expected candidate pairs compared over all tables, for random fingerprints.
    pub candidates: f64,
    /// Modelled cost, in nanoseconds of one thread.
    pub cost: f64,
}

/// The cheapest block count for batch matching of `n` fingerprints at `distance`.
pub fn plan(n: usize, distance: u32) -> Result<Plan> {
    if distance >= 64 {
        return Err(Error::BlocksNotAboveDistance {
            blocks: 64,
            distance,
        });
    }
    let mut best: Option<Plan> = None;
    for blocks in distance as usize + 1..=64 {
        // Every table costs at least a pass over the fingerprints, and tables only grow
        // with blocks: once that bound reaches the best, no more blocks can win (a win
        // must cost strictly less). Pricing every block count took 7 ms at distance 3, a
        // start-up cost of every `find-all`; with no fingerprints every cost is 0, and
        // only reaching the best, not passing it, stops there.
        if best.is_some_and(|b| num_tables(blocks, distance) as f64 * n as f64 * PASS >= b.cost) {
            break;
        }
        let Some(plan) = cost(n, blocks, distance) else {
            continue;
        };
        if best.is_none_or(|b| plan.cost < b.cost) {
            best = Some(plan);
        }
    }
    best.ok_or(Error::BlocksNotAboveDistance {
        blocks: 64,
        distance,
    })
}

/// The modelled cost of batch matching `n` fingerprints with `blocks` blocks, or `None`
/// when that layout is invalid.
pub fn cost(n: usize, blocks: usize, distance: u32) -> Option<Plan> {
    if blocks == 0 || blocks > 64 || blocks <= distance as usize {
        return None;
    }
    let tables = num_tables(blocks, distance);
    if tables > MAX_TABLES as u128 {
        return None;
    }
    let lead = blocks - distance as usize;
    let nf = n as f64;
    let pairs = nf * (nf - 1.0).max(0.0) / 2.0;
    let (mut cost, mut candidates) = (0.0, 0.0);
    for (w, count) in leading_widths(blocks, lead).into_iter().enumerate() {
        if count == 0.0 {
            continue;
        }
        let w = w as u32;
        let bits = partition_bits(n, w);
        let bucket = (n >> bits).max(1);
        let passes = msd_passes(bucket, w - bits) as f64;
        // Tables move at most `blocks` pieces; most need about that many.
        let moves = blocks as f64;
        let c = pairs * (-(w as f64)).exp2();
        candidates += count * c;
        cost += count * (nf * (PASS + MOVE * moves + MSD * passes) + CMP * c);
    }
    Some(Plan {
        blocks,
        tables: tables as usize,
        candidates,
        cost,
    })
}

/// `out[w]`: how many `lead`-subsets of the blocks span `w` bits in all.
fn leading_widths(blocks: usize, lead: usize) -> Vec<f64> {
    // ways[j][w]: subsets of j blocks, among those seen so far, spanning w bits.
    let mut ways = vec![vec![0.0f64; 65]; lead + 1];
    ways[0][0] = 1.0;
    for b in 0..blocks {
        let width = block_bits(blocks, b).len();
        for j in (1..=lead.min(b + 1)).rev() {
            for w in (width..=64).rev() {
                ways[j][w] += ways[j - 1][w - width];
            }
        }
    }
    ways.swap_remove(lead)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_counts_sum_to_tables() {
        for (m, k) in [(4, 3), (5, 3), (6, 3), (7, 2), (64, 63), (10, 3)] {
            let total: f64 = leading_widths(m, m - k as usize).iter().sum();
            assert_eq!(total as u128, num_tables(m, k));
        }
        // 5 blocks: widths 12, 13, 13, 13, 13. Two-block subsets: {0, x} span 25 (4 of
        // them), the other 6 span 26.
        let w = leading_widths(5, 2);
        assert_eq!((w[25], w[26]), (4.0, 6.0));
    }

    #[test]
    fn chooses_a_valid_layout() {
        for k in 0..64 {
            for n in [0, 1, 1000, 1_000_000, 100_000_000] {
                let plan = plan(n, k).unwrap();
                assert!(plan.blocks > k as usize && plan.blocks <= 64);
                assert!(plan.tables <= MAX_TABLES);
            }
        }
        assert!(plan(0, 64).is_err());
    }

    #[test]
    fn stopping_early_picks_what_pricing_every_block_count_picks() {
        for k in 0..64 {
            for n in [0, 1, 2, 1000, 1_000_000, 10_000_000, 100_000_000, 1 << 40] {
                let every = (k as usize + 1..=64).filter_map(|m| cost(n, m, k)).fold(
                    None,
                    |b: Option<Plan>, p| match b {
                        Some(b) if b.cost <= p.cost => Some(b),
                        _ => Some(p),
                    },
                );
                assert_eq!(plan(n, k).ok(), every, "n {n}, distance {k}");
            }
        }
    }

    #[test]
    fn more_fingerprints_want_longer_prefixes() {
        let small = plan(10_000, 3).unwrap();
        let large = plan(100_000_000, 3).unwrap();
        assert!(large.blocks >= small.blocks);
    }
}
