//! Block layouts and table permutations (Manku, Jain and Das Sarma, WWW 2007).
//!
//! Cut the 64 bits into `m` blocks. Two fingerprints within `k` bits differ in at most `k`
//! blocks, so they agree exactly on at least `m − k` of them. For every choice of `m − k`
//! blocks there is a *table*: a permutation that moves those blocks to the most significant
//! end. Sorted by their permuted value, fingerprints that agree on a table's leading blocks sit
//! side by side, so a near-duplicate is found by scanning one short run per table.
//!
//! Block widths, table order and permutations are bit-for-bit those of seomoz simhash-py and
//! simhash-cpp: block `i` covers bits `[i·64/m, (i+1)·64/m)`; tables enumerate the chosen
//! block sets in lexicographic order; a table puts its chosen blocks first (lowest block
//! number at the top), then the others in increasing order, keeping the bit order inside
//! each block.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use crate::error::{Error, Result};

/// The most tables a layout may have. C(64, 3) = 41,664 fits; C(20, 10) = 184,756 does not.
pub const MAX_TABLES: usize = 100_000;

/// C(blocks, distance): how many tables a layout has (saturating at `u128::MAX`).
pub fn num_tables(blocks: usize, distance: u32) -> u128 {
    let (n, k) = (blocks as u128, distance as u128);
    if k > n {
        return 0;
    }
    let k = k.min(n - k);
    (0..k).fold(1u128, |acc, i| {
        acc.checked_mul(n - i).map_or(u128::MAX, |x| x / (i + 1))
    })
}

/// Bits `[lo, hi)` of block `index` of `blocks`.
pub fn block_bits(blocks: usize, index: usize) -> Range<u32> {
    let lo = index * 64 / blocks;
    let hi = (index + 1) * 64 / blocks;
    lo as u32..hi as u32
}

fn bit_mask(bits: Range<u32>) -> u64 {
    let width = bits.end - bits.start;
    if width == 64 {
        u64::MAX
    } else {
        ((1u64 << width) - 1) << bits.start
    }
}

/// Mask of the top `bits` bits.
pub(crate) fn top_mask(bits: u32) -> u64 {
    if bits == 0 {
        0
    } else {
        u64::MAX << (64 - bits)
    }
}

/// How many blocks: a fixed number, or chosen by a planner from the workload (for batch
/// matching, [`crate::batch::planner`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Blocks {
    /// Let the planner choose from the number of fingerprints and the distance.
    #[default]
    Auto,
    /// Exactly this many blocks.
    Fixed(usize),
}

impl FromStr for Blocks {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(Blocks::Auto);
        }
        s.parse::<usize>()
            .map(Blocks::Fixed)
            .map_err(|_| format!("expected a number of blocks or 'auto', got '{s}'"))
    }
}

impl fmt::Display for Blocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocks::Auto => f.write_str("auto"),
            Blocks::Fixed(m) => write!(f, "{m}"),
        }
    }
}

/// One piece of a permutation: the bits of `mask`, rotated left by `rotate`.
///
/// Blocks that move by the same amount share one `Move`, so a table permutes a fingerprint
/// in at most `blocks` mask-rotate-or steps and often far fewer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Move {
    mask: u64,
    rotate: u32,
}

#[inline]
fn apply(moves: &[Move], x: u64) -> u64 {
    moves
        .iter()
        .fold(0, |acc, m| acc | (x & m.mask).rotate_left(m.rotate))
}

/// Work that needs a table's permutation in a hot loop: see [`Table::with_permute`].
pub(crate) trait PermuteJob {
    type Output;
    fn run<P: Fn(u64) -> u64 + Sync>(self, permute: P) -> Self::Output;
}

/// One table: which blocks lead, and the permutation that puts them first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    /// Bit `b` set when block `b` is one of the leading blocks.
    leading: u64,
    leading_bits: u32,
    forward: Vec<Move>,
    backward: Vec<Move>,
    /// Masks, in permuted space, of the blocks below the last leading block that are not
    /// leading: a pair is reported by this table only if it differs in each of them.
    gaps: Vec<u64>,
}

impl Table {
    fn new(blocks: usize, chosen: &[usize]) -> Table {
        let ranges: Vec<Range<u32>> = (0..blocks).map(|b| block_bits(blocks, b)).collect();
        Table::within(&ranges, chosen, 64)
    }

    /// The table of the blocks `ranges` (increasing, covering bits `[0, width)`) whose
    /// `chosen` blocks lead: they move to the top of `[0, width)`, the others follow in
    /// increasing order, and the bits at and above `width` stay where they are (a second
    /// level's table, under its first level's leading bits).
    fn within(ranges: &[Range<u32>], chosen: &[usize], width: u32) -> Table {
        let blocks = ranges.len();
        let mut leading = 0u64;
        for &b in chosen {
            leading |= 1 << b;
        }
        let others = (0..blocks).filter(|b| leading & (1 << b) == 0);
        let mut forward: Vec<Move> = Vec::new();
        if width < 64 {
            forward.push(Move {
                mask: top_mask(64 - width),
                rotate: 0,
            });
        }
        let mut dest = vec![0u64; blocks];
        let mut top = width;
        for b in chosen.iter().copied().chain(others) {
            let bits = ranges[b].clone();
            let lo = top - (bits.end - bits.start);
            let rotate = (lo + 64 - bits.start) % 64;
            let mask = bit_mask(bits);
            dest[b] = mask.rotate_left(rotate);
            match forward.iter_mut().find(|m| m.rotate == rotate) {
                Some(m) => m.mask |= mask,
                None => forward.push(Move { mask, rotate }),
            }
            top = lo;
        }
        let backward = forward
            .iter()
            .map(|m| Move {
                mask: m.mask.rotate_left(m.rotate),
                rotate: (64 - m.rotate) % 64,
            })
            .collect();
        let last = chosen.last().copied().unwrap_or(0);
        let gaps = (0..last)
            .filter(|b| leading & (1 << b) == 0)
            .map(|b| dest[b])
            .collect();
        let leading_bits = chosen.iter().map(|&b| ranges[b].len() as u32).sum();
        Table {
            leading,
            leading_bits,
            forward,
            backward,
            gaps,
        }
    }

    /// The fingerprint with this table's leading blocks moved to the most significant end.
    #[inline]
    pub fn permute(&self, x: u64) -> u64 {
        apply(&self.forward, x)
    }

    /// Runs `job` with this table's permutation as a closure specialised to its number of
    /// moves, so that hot loops get it unrolled instead of looping over a slice per key.
    pub(crate) fn with_permute<J: PermuteJob>(&self, job: J) -> J::Output {
        fn fixed<const N: usize>(moves: &[Move]) -> [Move; N] {
            std::array::from_fn(|i| moves[i])
        }
        macro_rules! arms {
            ($($n:literal)*) => {
                match self.forward.len() {
                    $($n => {
                        let moves = fixed::<$n>(&self.forward);
                        job.run(move |x| apply(&moves, x))
                    })*
                    _ => job.run(|x| apply(&self.forward, x)),
                }
            };
        }
        arms!(1 2 3 4 5 6 7 8)
    }

    /// The inverse of [`Table::permute`].
    #[inline]
    pub fn unpermute(&self, y: u64) -> u64 {
        apply(&self.backward, y)
    }

    /// How many bits the leading blocks span.
    pub fn leading_bits(&self) -> u32 {
        self.leading_bits
    }

    /// Mask of the leading blocks in permuted space: two fingerprints share this table's run
    /// when their permuted values agree under it (seomoz's `search_mask`).
    pub fn search_mask(&self) -> u64 {
        top_mask(self.leading_bits)
    }

    /// The leading blocks, in increasing order.
    pub fn leading_blocks(&self) -> impl Iterator<Item = usize> + '_ {
        (0..64).filter(move |b| self.leading & (1 << b) != 0)
    }

    /// `map[i]` is the bit that source bit `i` moves to.
    pub fn bit_map(&self) -> [u32; 64] {
        std::array::from_fn(|i| self.permute(1 << i).trailing_zeros())
    }

    /// Whether a pair whose permuted values differ by `diff` (and agree on the leading
    /// blocks) is reported by this table: it is the first table, in table order, whose
    /// leading blocks avoid every block where the pair differs.
    #[inline]
    pub(crate) fn is_first_for(&self, diff: u64) -> bool {
        self.gaps.iter().all(|&g| diff & g != 0)
    }
}

/// A block layout for one distance: `blocks` blocks and their C(blocks, distance) tables,
/// and, for a two-level layout, the tables of the second level.
///
/// Manku, Jain and Das Sarma nest their blocks (§3.1.1 of the paper): a pair within `k`
/// bits that shares a first-level table's leading blocks differs only in the bits below
/// them, so those bits are cut again into `blocks2` sub-blocks, and C(blocks2, k)
/// second-level tables each move `blocks2 − k` of them up, under the first level's. With
/// 4 × 4 blocks at k = 3, 16 tables lead with 28 bits where single-level tables of 4
/// blocks lead with 16. The batch engine sorts once per first-level table and runs the
/// second level inside each run of equal first-level bits, in cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    blocks: usize,
    distance: u32,
    tables: Vec<Table>,
    second: Option<SecondLevel>,
}

/// The second level of a two-level layout: per width of the bits under a first-level
/// table's leading blocks (block widths differ by one, so there are at most two), the
/// tables that permute those bits.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SecondLevel {
    blocks: usize,
    by_width: Vec<(u32, Vec<Table>)>,
}

impl Layout {
    /// The layout of `blocks` blocks for matches within `distance` bits.
    ///
    /// Errors when `blocks` is 0 or above 64, not above `distance`, or needs more than
    /// [`MAX_TABLES`] tables.
    pub fn new(blocks: usize, distance: u32) -> Result<Layout> {
        check(blocks, distance, 64)?;
        let tables = chosen_sets(blocks, blocks - distance as usize)
            .map(|chosen| Table::new(blocks, &chosen))
            .collect();
        Ok(Layout {
            blocks,
            distance,
            tables,
            second: None,
        })
    }

    /// The two-level layout of `blocks` first-level blocks, the bits under each table's
    /// leading blocks cut into `blocks2` sub-blocks: C(blocks, distance) · C(blocks2,
    /// distance) tables in all.
    ///
    /// Errors as [`Layout::new`] does for either level, and when a sub-block would hold
    /// no bit.
    pub fn two_level(blocks: usize, blocks2: usize, distance: u32) -> Result<Layout> {
        let mut layout = Layout::new(blocks, distance)?;
        let total = num_tables(blocks, distance).saturating_mul(num_tables(blocks2, distance));
        if total > MAX_TABLES as u128 {
            return Err(Error::TooManyTables {
                blocks: blocks * blocks2,
                distance,
                tables: total,
                limit: MAX_TABLES,
            });
        }
        let mut widths: Vec<u32> = layout.tables.iter().map(|t| 64 - t.leading_bits).collect();
        widths.sort_unstable();
        widths.dedup();
        let mut by_width = Vec::with_capacity(widths.len());
        for width in widths {
            check(blocks2, distance, width)?;
            let ranges: Vec<Range<u32>> = (0..blocks2)
                .map(|i| sub_block_bits(blocks2, width, i))
                .collect();
            let tables = chosen_sets(blocks2, blocks2 - distance as usize)
                .map(|chosen| Table::within(&ranges, &chosen, width))
                .collect();
            by_width.push((width, tables));
        }
        layout.second = Some(SecondLevel {
            blocks: blocks2,
            by_width,
        });
        Ok(layout)
    }

    /// Number of blocks.
    pub fn blocks(&self) -> usize {
        self.blocks
    }

    /// The largest Hamming distance this layout finds.
    pub fn distance(&self) -> u32 {
        self.distance
    }

    /// The tables, in seomoz order (of the first level, in a two-level layout).
    pub fn tables(&self) -> &[Table] {
        &self.tables
    }

    /// Sub-blocks of the second level, in a two-level layout.
    pub fn blocks2(&self) -> Option<usize> {
        self.second.as_ref().map(|s| s.blocks)
    }

    /// The second-level tables under `table` (one of [`Layout::tables`]), in a two-level
    /// layout: each permutes the bits under `table`'s leading blocks.
    pub fn second_tables(&self, table: &Table) -> Option<&[Table]> {
        let width = 64 - table.leading_bits;
        let second = self.second.as_ref()?;
        second
            .by_width
            .iter()
            .find(|(w, _)| *w == width)
            .map(|(_, t)| t.as_slice())
    }

    /// Tables in all: first-level ones times second-level ones.
    pub fn table_count(&self) -> usize {
        self.tables.len()
            * self
                .second
                .as_ref()
                .map_or(1, |s| s.by_width.first().map_or(1, |(_, t)| t.len()))
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.blocks2() {
            Some(b2) => write!(f, "{}x{b2}", self.blocks),
            None => write!(f, "{}", self.blocks),
        }
    }
}

/// Refuses `blocks` blocks of `width` bits at `distance`: none, more than bits, not more
/// than the distance, or more than [`MAX_TABLES`] tables.
fn check(blocks: usize, distance: u32, width: u32) -> Result<()> {
    if blocks == 0 {
        return Err(Error::ZeroBlocks);
    }
    if blocks > width as usize {
        return Err(Error::TooManyBlocks(blocks));
    }
    if blocks <= distance as usize {
        return Err(Error::BlocksNotAboveDistance { blocks, distance });
    }
    let tables = num_tables(blocks, distance);
    if tables > MAX_TABLES as u128 {
        return Err(Error::TooManyTables {
            blocks,
            distance,
            tables,
            limit: MAX_TABLES,
        });
    }
    Ok(())
}

/// Every `lead`-subset of `0..blocks`, increasing, in lexicographic order: the tables'
/// order.
fn chosen_sets(blocks: usize, lead: usize) -> impl Iterator<Item = Vec<usize>> {
    let mut next = Some((0..lead).collect::<Vec<usize>>());
    std::iter::from_fn(move || {
        let chosen = next.take()?;
        let mut after = chosen.clone();
        if let Some(i) = (0..lead).rev().find(|&i| after[i] < blocks - lead + i) {
            after[i] += 1;
            for j in i + 1..lead {
                after[j] = after[j - 1] + 1;
            }
            next = Some(after);
        }
        Some(chosen)
    })
}

/// Bits of sub-block `index` of `blocks` cutting `[0, width)`, as blocks cut the 64 bits.
fn sub_block_bits(blocks: usize, width: u32, index: usize) -> Range<u32> {
    let w = width as usize;
    (index * w / blocks) as u32..((index + 1) * w / blocks) as u32
}

/// A choice of tables for batch matching: single-level blocks, two levels, or the
/// planner's choice (`--blocks` of `find-all`: `auto`, `5`, `4x4`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Levels {
    /// Let the planner choose, among single- and two-level layouts.
    #[default]
    Auto,
    /// Single-level, this many blocks.
    One(usize),
    /// Two levels: blocks, then sub-blocks of the bits under each table's leading blocks.
    Two(usize, usize),
}

impl From<Blocks> for Levels {
    fn from(b: Blocks) -> Levels {
        match b {
            Blocks::Auto => Levels::Auto,
            Blocks::Fixed(m) => Levels::One(m),
        }
    }
}

impl FromStr for Levels {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if let Some((a, b)) = s.split_once(['x', 'X']) {
            let num = |t: &str| t.trim().parse::<usize>().ok();
            return match (num(a), num(b)) {
                (Some(a), Some(b)) => Ok(Levels::Two(a, b)),
                _ => Err(format!(
                    "expected a number of blocks, two as BLOCKSxSUBBLOCKS (4x4), or 'auto', got '{s}'"
                )),
            };
        }
        s.parse::<Blocks>().map(Levels::from).map_err(|_| {
            format!(
                "expected a number of blocks, two as BLOCKSxSUBBLOCKS (4x4), or 'auto', got '{s}'"
            )
        })
    }
}

impl fmt::Display for Levels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Levels::Auto => f.write_str("auto"),
            Levels::One(m) => write!(f, "{m}"),
            Levels::Two(a, b) => write!(f, "{a}x{b}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_tables() {
        assert_eq!(num_tables(4, 3), 4);
        assert_eq!(num_tables(6, 3), 20);
        assert_eq!(num_tables(64, 63), 64);
        assert_eq!(num_tables(64, 32), 1_832_624_140_942_590_534);
        assert_eq!(num_tables(3, 4), 0);
    }

    #[test]
    fn rejects_bad_layouts() {
        assert_eq!(Layout::new(0, 0), Err(Error::ZeroBlocks));
        assert_eq!(Layout::new(65, 3), Err(Error::TooManyBlocks(65)));
        assert_eq!(
            Layout::new(3, 3),
            Err(Error::BlocksNotAboveDistance {
                blocks: 3,
                distance: 3
            })
        );
        assert!(matches!(
            Layout::new(64, 10),
            Err(Error::TooManyTables { .. })
        ));
    }

    #[test]
    fn permutations_invert() {
        for (m, k) in [(2, 1), (5, 3), (7, 2), (64, 63), (64, 1), (13, 4)] {
            let layout = Layout::new(m, k).unwrap();
            assert_eq!(layout.tables().len() as u128, num_tables(m, k));
            for t in layout.tables() {
                for x in [0, u64::MAX, 0x0123_4567_89ab_cdef, 0xdead_beef_cafe_babe] {
                    assert_eq!(t.unpermute(t.permute(x)), x);
                }
                let mut seen = 0u64;
                for bit in t.bit_map() {
                    seen |= 1 << bit;
                }
                assert_eq!(seen, u64::MAX, "a permutation hits every bit");
            }
        }
    }

    #[test]
    fn second_level_tables_keep_the_first_level_bits_and_permute_the_rest() {
        let layout = Layout::two_level(4, 4, 3).unwrap();
        assert_eq!(layout.to_string(), "4x4");
        assert_eq!(layout.table_count(), 16);
        for t1 in layout.tables() {
            let w1 = t1.leading_bits();
            let seconds = layout.second_tables(t1).unwrap();
            assert_eq!(seconds.len(), 4);
            for t2 in seconds {
                // 48 bits in 4 sub-blocks of 12: one leads.
                assert_eq!(t2.leading_bits(), 12);
                for x in [0, u64::MAX, 0x0123_4567_89ab_cdef, 0xdead_beef_cafe_babe] {
                    assert_eq!(t2.unpermute(t2.permute(x)), x);
                    assert_eq!(t2.permute(x) >> (64 - w1), x >> (64 - w1));
                }
            }
        }
        // Uneven widths: 5 first-level blocks (12 or 13 bits) leave 38 or 39 bits.
        let layout = Layout::two_level(5, 4, 3).unwrap();
        for t1 in layout.tables() {
            assert_eq!(layout.second_tables(t1).unwrap().len(), 4);
        }
        assert!(Layout::two_level(4, 3, 3).is_err());
        assert!(
            Layout::two_level(4, 49, 3).is_err(),
            "a sub-block without a bit"
        );
        assert!(Layout::new(4, 3)
            .unwrap()
            .second_tables(&Layout::new(4, 3).unwrap().tables()[0])
            .is_none());
    }

    #[test]
    fn parses_levels() {
        assert_eq!("auto".parse::<Levels>(), Ok(Levels::Auto));
        assert_eq!("5".parse::<Levels>(), Ok(Levels::One(5)));
        assert_eq!("4x4".parse::<Levels>(), Ok(Levels::Two(4, 4)));
        assert_eq!("4X6".parse::<Levels>(), Ok(Levels::Two(4, 6)));
        assert!("4x".parse::<Levels>().is_err());
        assert!("x4".parse::<Levels>().is_err());
        assert_eq!(Levels::Two(4, 4).to_string(), "4x4");
    }

    #[test]
    fn parses_blocks() {
        assert_eq!("auto".parse::<Blocks>(), Ok(Blocks::Auto));
        assert_eq!("6".parse::<Blocks>(), Ok(Blocks::Fixed(6)));
        assert!("six".parse::<Blocks>().is_err());
        assert_eq!(Blocks::Fixed(5).to_string(), "5");
    }
}
