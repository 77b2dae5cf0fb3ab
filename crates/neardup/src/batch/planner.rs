//! Choosing the tables for batch matching (`--blocks auto`): how many blocks, in one
//! level or two (Manku's nested blocks, [`Layout::two_level`]).
//!
//! More blocks mean more tables but longer leading prefixes, hence shorter runs and fewer
//! candidate pairs to compare. For batch matching of `n` fingerprints the planner prices
//! every valid layout with the engine's own work, per table `t` with `w_t` leading bits:
//!
//! ```text
//! cost(t) = n · (PASS + MOVE · moves_t + MSD · msd_passes(w_t))   sort and scan
//!         + CMP · n² / 2 · 2^-w_t                                 candidate pairs
//! ```
//!
//! where `msd_passes` are the in-bucket radix passes the engine will really make and the
//! candidate term assumes fingerprints spread like random bits (true of simhash on distinct
//! documents; near-duplicates add their own pairs whatever the layout). A two-level layout
//! pays the first term per first-level table only (its second level runs inside runs of
//! equal first-level bits, in cache), plus `SORT` per key for sorting its buckets into
//! those runs, `SUB` per key and second-level table for the keys that share a run, and the
//! candidate term on the bits of both levels. The
//! constants are nanoseconds per key or per pair, measured on the `find_all` benchmark
//! and `examples/levels.rs`. The layout with the smallest total wins.
//!
//! Memory does not depend on the layout: the engine keeps the distinct fingerprints and
//! one table at a time, 24 bytes a fingerprint. Under a memory budget
//! ([`plan_with_memory`]) a table is scanned in passes over consecutive ranges of its
//! buckets, each holding what fits: the fingerprints' 8 bytes stay, the 16 of the table
//! shrink to the pass ([`super::Matcher::with_pass_keys`]).

use super::radix::{msd_passes, partition_bits};
use crate::error::{Error, Result};
use crate::tables::{block_bits, num_tables, Layout, Levels, MAX_TABLES};

/// Per key and table: the partition pass (count, scatter) and pairwise comparison in
/// sub-buckets.
const PASS: f64 = 7.0;
/// Per key, table and rotation step of the permutation.
const MOVE: f64 = 0.5;
/// Per key, table and in-bucket counting pass.
const MSD: f64 = 1.5;
/// Per candidate pair compared (XOR, hardware popcount, compare).
const CMP: f64 = 0.45;
/// Per key and table once a table's arrays (24 bytes a key) outgrow the caches: the
/// partition's reads and scattered writes go to memory. Measured at 10M and 100M
/// (`examples/levels.rs`): 34–44 ns a key per table, where the terms above give 10–13.
const DRAM: f64 = 30.0;
/// Keys beyond which a table's arrays are in memory, not in cache.
const CACHED_KEYS: usize = 1 << 21;
/// Per candidate pair compared, at those sizes (measured at 100M with 4 blocks).
const CMP_DRAM: f64 = 1.0;
/// Per key in a run of equal first-level bits and second-level table: permuted into a
/// cache-resident copy and split on the second level's bits (measured at 10M and 100M:
/// 11–12 ns with the split's pass).
const SUB: f64 = 8.5;
/// Per key and first-level table of a two-level layout: its buckets sorted to the first
/// level's bits (to find the runs), where a single-level table only splits them.
const SORT: f64 = 8.0;
/// Second-level sub-blocks tried at most: past a dozen, tables multiply faster than
/// candidates fall.
const MAX_BLOCKS2: usize = 12;

/// A priced choice of tables.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    /// The layout: blocks, or blocks and sub-blocks.
    pub layout: Levels,
    /// Number of (first-level) blocks.
    pub blocks: usize,
    /// Number of tables: C(blocks, distance), times C(sub-blocks, distance) for two
    /// levels.
    pub tables: usize,
    /// Expected candidate pairs compared over all tables, for random fingerprints.
    pub candidates: f64,
    /// Modelled cost, in nanoseconds of one thread.
    pub cost: f64,
}

/// The cheapest layout for batch matching of `n` fingerprints at `distance`, single- or
/// two-level.
pub fn plan(n: usize, distance: u32) -> Result<Plan> {
    let mut best = plan_single(n, distance)?;
    for blocks in distance as usize + 1..=64 {
        // The first level alone costs at least its passes over the keys, and more first-
        // level blocks only add tables: once that reaches the best, stop.
        if num_tables(blocks, distance) as f64 * n as f64 * PASS >= best.cost {
            break;
        }
        for blocks2 in distance as usize + 1..=MAX_BLOCKS2 {
            if let Some(p) = cost_two_level(n, blocks, blocks2, distance) {
                if p.cost < best.cost {
                    best = p;
                }
            }
        }
    }
    Ok(best)
}

/// The cheapest single-level block count for batch matching of `n` fingerprints at
/// `distance`.
pub fn plan_single(n: usize, distance: u32) -> Result<Plan> {
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
        let c = pairs * (-(w as f64)).exp2();
        candidates += count * c;
        cost += count * (first_level(n, blocks, w) + cmp(n) * c);
    }
    Some(Plan {
        layout: Levels::One(blocks),
        blocks,
        tables: tables as usize,
        candidates,
        cost,
    })
}

/// The modelled work of one table's pass over `n` keys with `w` leading bits: partition,
/// in-bucket passes.
fn first_level(n: usize, blocks: usize, w: u32) -> f64 {
    let bits = partition_bits(n, w);
    let bucket = (n >> bits).max(1);
    let passes = msd_passes(bucket, w - bits) as f64;
    let memory = if n > CACHED_KEYS { DRAM } else { 0.0 };
    // Tables move at most `blocks` pieces; most need about that many.
    n as f64 * (PASS + MOVE * blocks as f64 + MSD * passes + memory)
}

/// The cost of comparing a candidate pair among `n` keys.
fn cmp(n: usize) -> f64 {
    if n > CACHED_KEYS {
        CMP_DRAM
    } else {
        CMP
    }
}

/// The modelled cost of batch matching `n` fingerprints with two levels, `blocks` then
/// `blocks2` sub-blocks, or `None` when that layout is invalid.
pub fn cost_two_level(n: usize, blocks: usize, blocks2: usize, distance: u32) -> Option<Plan> {
    if blocks == 0 || blocks > 64 || blocks <= distance as usize || blocks2 <= distance as usize {
        return None;
    }
    let (t1, t2) = (num_tables(blocks, distance), num_tables(blocks2, distance));
    if t1.saturating_mul(t2) > MAX_TABLES as u128 {
        return None;
    }
    let nf = n as f64;
    let pairs = nf * (nf - 1.0).max(0.0) / 2.0;
    let (mut cost, mut candidates) = (0.0, 0.0);
    let lead = blocks - distance as usize;
    let lead2 = blocks2 - distance as usize;
    for (w1, count) in leading_widths(blocks, lead).into_iter().enumerate() {
        if count == 0.0 {
            continue;
        }
        let w1 = w1 as u32;
        let below = 64 - w1;
        if blocks2 > below as usize {
            return None;
        }
        // Keys that share their run with another: Poisson runs of mean n / 2^w1.
        let mean = nf * (-(w1 as f64)).exp2();
        let shared = nf * (1.0 - (-mean).exp());
        let run = mean.max(1.0) as usize;
        let mut second = 0.0;
        for (w2, count2) in sub_leading_widths(blocks2, lead2, below)
            .into_iter()
            .enumerate()
        {
            if count2 == 0.0 {
                continue;
            }
            let w2 = w2 as u32;
            let c = pairs * (-((w1 + w2) as f64)).exp2();
            candidates += count * count2 * c;
            let passes = msd_passes(run, w2) as f64;
            second += count2 * (shared * (SUB + MOVE * blocks2 as f64 + MSD * passes) + cmp(n) * c);
        }
        cost += count * (first_level(n, blocks, w1) + nf * SORT + second);
    }
    Some(Plan {
        layout: Levels::Two(blocks, blocks2),
        blocks,
        tables: (t1 * t2) as usize,
        candidates,
        cost,
    })
}

/// The modelled cost of `layout` for `n` fingerprints.
pub fn price(n: usize, layout: &Layout) -> Option<Plan> {
    match layout.blocks2() {
        None => cost(n, layout.blocks(), layout.distance()),
        Some(b2) => cost_two_level(n, layout.blocks(), b2, layout.distance()),
    }
}

/// What a plan under a memory budget adds: how many keys a table's pass may hold.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budgeted {
    /// The layout and its price.
    pub plan: Plan,
    /// Keys a table holds at once (all of them when they fit).
    pub pass_keys: usize,
    /// Passes per table, about.
    pub passes: usize,
    /// Bytes the engine holds at its peak: the fingerprints and one pass of a table.
    pub bytes: u64,
}

/// Bytes a distinct fingerprint takes, and a key of a table's pass with its scratch.
const VALUE_BYTES: u64 = 8;
const KEY_BYTES: u64 = 16;

/// The plan for `n` fingerprints at `distance` (`levels` as given, or priced for
/// [`Levels::Auto`]) within `budget` bytes: the table scanned in as few passes as the
/// budget allows. Each extra pass costs a scan of every fingerprint (two permutations),
/// priced into the choice. An error names the budget that would do when not even the
/// fingerprints fit.
pub fn plan_with_memory(n: usize, distance: u32, levels: Levels, budget: u64) -> Result<Budgeted> {
    let plan = match levels {
        Levels::Auto => plan(n, distance)?,
        Levels::One(m) => cost(n, m, distance).ok_or(Error::BlocksNotAboveDistance {
            blocks: m,
            distance,
        })?,
        Levels::Two(a, b) => {
            cost_two_level(n, a, b, distance).ok_or(Error::BlocksNotAboveDistance {
                blocks: a.min(b),
                distance,
            })?
        }
    };
    let nn = n as u64;
    let values = nn * VALUE_BYTES;
    let all = values + nn * KEY_BYTES;
    if all <= budget || n == 0 {
        return Ok(Budgeted {
            plan,
            pass_keys: n,
            passes: 1,
            bytes: all,
        });
    }
    // A pass must hold at least a bucket: the largest a random set gives at the
    // partition's width, with room for skew.
    let bits = partition_bits(n, 64);
    let least = (nn >> bits).max(1) * 4;
    let room = budget.saturating_sub(values) / KEY_BYTES;
    if room < least {
        return Err(Error::MemoryBudget {
            budget,
            needed: values + least * KEY_BYTES,
        });
    }
    let passes = nn.div_ceil(room) as usize;
    let mut plan = plan;
    plan.cost += (passes as f64) * plan.tables as f64 * nn as f64 * 2.0 * MOVE * plan.blocks as f64;
    Ok(Budgeted {
        plan,
        pass_keys: room as usize,
        passes,
        bytes: values + room * KEY_BYTES,
    })
}

/// `out[w]`: how many `lead`-subsets of the blocks span `w` bits in all.
fn leading_widths(blocks: usize, lead: usize) -> Vec<f64> {
    widths_of(blocks, lead, |b| block_bits(blocks, b).len())
}

/// As [`leading_widths`], for `blocks` sub-blocks cutting `width` bits.
fn sub_leading_widths(blocks: usize, lead: usize, width: u32) -> Vec<f64> {
    let w = width as usize;
    widths_of(blocks, lead, |b| (b + 1) * w / blocks - b * w / blocks)
}

fn widths_of(blocks: usize, lead: usize, bits: impl Fn(usize) -> usize) -> Vec<f64> {
    // ways[j][w]: subsets of j blocks, among those seen so far, spanning w bits.
    let mut ways = vec![vec![0.0f64; 65]; lead + 1];
    ways[0][0] = 1.0;
    for b in 0..blocks {
        let width = bits(b);
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
            for n in [0, 1, 1000, 1_000_000, 100_000_000, 1_000_000_000] {
                let plan = plan(n, k).unwrap();
                assert!(plan.blocks > k as usize && plan.blocks <= 64);
                assert!(plan.tables <= MAX_TABLES);
                let layout = match plan.layout {
                    Levels::One(m) => Layout::new(m, k),
                    Levels::Two(a, b) => Layout::two_level(a, b, k),
                    Levels::Auto => panic!("a plan names its layout"),
                };
                assert_eq!(layout.unwrap().table_count(), plan.tables, "n {n} k {k}");
            }
        }
        assert!(plan(0, 64).is_err());
    }

    #[test]
    fn two_levels_price_what_their_levels_hold() {
        // 4 x 4 at k = 3: 16 tables, each leading with 16 + 12 bits.
        let p = cost_two_level(1 << 30, 4, 4, 3).unwrap();
        assert_eq!(p.tables, 16);
        let pairs = (1u64 << 30) as f64 * ((1u64 << 30) - 1) as f64 / 2.0;
        assert!((p.candidates / (16.0 * pairs * (-28f64).exp2()) - 1.0).abs() < 1e-9);
        assert!(cost_two_level(100, 4, 3, 3).is_none());
        assert!(
            cost_two_level(100, 4, 49, 3).is_none(),
            "sub-blocks without bits"
        );
    }

    #[test]
    fn a_budget_splits_tables_into_passes_and_refuses_what_cannot_fit() {
        let n = 1_000_000_000;
        let all = plan_with_memory(n, 3, Levels::Auto, u64::MAX).unwrap();
        assert_eq!((all.passes, all.pass_keys), (1, n));
        assert_eq!(all.bytes, 24 * n as u64);
        let tight = plan_with_memory(n, 3, Levels::Auto, 16_000_000_000).unwrap();
        assert!(
            tight.bytes <= 16_000_000_000 && tight.passes >= 2,
            "{tight:?}"
        );
        assert!(tight.pass_keys * tight.passes >= n);
        assert!(matches!(
            plan_with_memory(n, 3, Levels::Auto, 8_000_000_000),
            Err(Error::MemoryBudget { .. })
        ));
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
                assert_eq!(plan_single(n, k).ok(), every, "n {n}, distance {k}");
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
