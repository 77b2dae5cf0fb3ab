//! The bit-voting kernel: 64 counters, one per bit position, each counting how many
//! feature hashes have that bit set; output bit `i` is 1 when more than half do.
//!
//! Counting bit `i` of every hash one at a time costs 64 branches per feature. Instead the
//! 64 counters are kept *bit-sliced*: `planes[j]` holds bit `j` of all 64 counters, so adding
//! a hash is a ripple-carry add of one word into the planes. Carry-save adders first fold
//! sixteen hashes into one-, two-, four- and eight-weight words (Harley–Seal), so only one
//! word in sixteen reaches the planes. The final majority test is a bit-sliced comparison of
//! all 64 counters against `n / 2` at once: `O(log n)` word operations, no per-bit loop.

/// Sum and carry of three words, bitwise (a full adder on each of the 64 lanes).
#[inline(always)]
fn csa(a: u64, b: u64, c: u64) -> (u64, u64) {
    let u = a ^ b;
    (u ^ c, (a & b) | (u & c))
}

/// 64 bit-sliced counters: bit `i` of `planes[j]` is bit `j` of counter `i`.
struct Counters {
    planes: [u64; 64],
}

impl Counters {
    fn new() -> Counters {
        Counters { planes: [0; 64] }
    }

    /// Adds `x << weight` to the counters: ripple carry from plane `weight` up.
    #[inline(always)]
    fn add(&mut self, mut x: u64, weight: usize) {
        let mut j = weight;
        while x != 0 {
            let carry = self.planes[j] & x;
            self.planes[j] ^= x;
            x = carry;
            j += 1;
        }
    }

    /// Adds `other << shift`, counter by counter, where `other` uses `planes` planes:
    /// bit-sliced addition, one full adder per plane.
    fn add_shifted(&mut self, other: &Counters, planes: usize, shift: usize) {
        let mut carry = 0u64;
        for j in 0..planes {
            let (a, b) = (self.planes[shift + j], other.planes[j]);
            let (sum, c) = csa(a, b, carry);
            self.planes[shift + j] = sum;
            carry = c;
        }
        self.add(carry, shift + planes);
    }

    /// Adds `w` times the counts of `hashes`.
    fn add_scaled(&mut self, hashes: &[u64], w: u32) {
        if hashes.is_empty() || w == 0 {
            return;
        }
        let counted = count(hashes);
        let planes = (usize::BITS - hashes.len().leading_zeros()) as usize;
        let mut bits = w;
        while bits != 0 {
            self.add_shifted(&counted, planes, bits.trailing_zeros() as usize);
            bits &= bits - 1;
        }
    }

    /// Subtracts `other`, counter by counter (no counter may go below 0), over the low
    /// `planes` planes: a bit-sliced borrow chain.
    fn subtract(&mut self, other: &Counters, planes: usize) {
        let mut borrow = 0u64;
        for j in 0..planes {
            let (a, b) = (self.planes[j], other.planes[j]);
            let d = a ^ b;
            self.planes[j] = d ^ borrow;
            borrow = (!a & b) | (!d & borrow);
        }
        debug_assert_eq!(borrow, 0, "a counter went below zero");
    }

    /// Bit `i` set when counter `i` is greater than `t`, given no counter exceeds `max`.
    fn greater_than(&self, t: u64, max: u64) -> u64 {
        // From the top plane down: `gt` lanes are already known greater, `eq` lanes equal
        // so far. Planes above the bit length of `max` are all zero and change nothing.
        let (mut gt, mut eq) = (0u64, u64::MAX);
        for j in (0..64 - max.leading_zeros() as usize).rev() {
            let p = self.planes[j];
            if (t >> j) & 1 == 1 {
                eq &= p;
            } else {
                gt |= eq & p;
                eq &= !p;
            }
        }
        gt
    }
}

/// Bit-sliced counts of the set bits of `hashes`, position by position.
fn count(hashes: &[u64]) -> Counters {
    #[cfg(target_arch = "x86_64")]
    if hashes.len() >= VECTOR_FROM && crate::arch::features().avx512f() {
        // SAFETY: the CPU has AVX-512F (checked just above).
        return unsafe { count_avx512(hashes) };
    }
    #[cfg(target_arch = "x86_64")]
    if hashes.len() >= VECTOR_FROM && crate::arch::features().avx2() {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { count_avx2(hashes) };
    }
    count_scalar(hashes)
}

/// Lists this long and longer are counted by [`count_avx512`] or [`count_avx2`] where the
/// CPU allows: below, adding their columns up costs more than it saves.
#[cfg(target_arch = "x86_64")]
const VECTOR_FROM: usize = 128;

/// What a vector of `W` 64-bit lanes does for [`count_vectors`]: each operation is a
/// closure written inside the function compiled for the vector's instructions, so that it
/// inlines there (as [`fold_sixteen`]'s adder does).
#[cfg(target_arch = "x86_64")]
struct Lanes<T, Load, Csa, Ripple, Any, Swap, First> {
    zero: T,
    /// The vector of `W` hashes from a slice of `W`.
    load: Load,
    /// Sum and carry of three vectors.
    csa: Csa,
    /// `(plane ^ x, plane & x)`: one step of a ripple-carry add.
    ripple: Ripple,
    /// Whether any lane is non-zero.
    any: Any,
    /// Round `r` of the lanes' sum: the lanes swapped so that each meets the one `W >> (r + 1)`
    /// away (halves, then quarters…); `log2 W` rounds.
    swap: Swap,
    /// Lane 0.
    first: First,
}

/// [`count`] `W` columns at a time: the hashes are read as `W` interleaved lists, one per
/// lane of a vector, each counted by the carry-save adders of [`fold_sixteen`], and the
/// lanes' counts are added up at the end (a full adder per plane, the lanes swapped, so
/// lane 0 ends with the sum). The body of [`count_avx512`] and [`count_avx2`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn count_vectors<const W: usize, T: Copy>(
    hashes: &[u64],
    v: Lanes<
        T,
        impl Fn(&[u64]) -> T,
        impl Fn(T, T, T) -> (T, T),
        impl Fn(T, T) -> (T, T),
        impl Fn(T) -> bool,
        impl Fn(usize, T) -> T,
        impl Fn(T) -> u64,
    >,
) -> Counters {
    // Per lane, bit-sliced counters: planes 0–3 are the carry-save accumulators, plane
    // `4 + j` counts the sixteens in units of 16·2^j.
    let mut planes = [v.zero; 64];
    let mut acc = [v.zero; 4];
    let mut blocks = hashes.chunks_exact(16 * W);
    for block in &mut blocks {
        let h = |i: usize| (v.load)(&block[W * i..W * i + W]);
        // Ripple the sixteens up the planes.
        let mut x = fold_sixteen(&mut acc, h, &v.csa);
        let mut j = 4;
        while (v.any)(x) {
            (planes[j], x) = (v.ripple)(planes[j], x);
            j += 1;
        }
    }
    planes[..4].copy_from_slice(&acc);
    let sixteens_per_lane = hashes.len() as u64 / (16 * W) as u64;
    let mut used = 4 + (64 - sixteens_per_lane.leading_zeros() as usize);
    for round in 0..W.trailing_zeros() as usize {
        let mut carry = v.zero;
        for plane in &mut planes[..used] {
            (*plane, carry) = (v.csa)(*plane, (v.swap)(round, *plane), carry);
        }
        planes[used] = carry;
        used += 1;
    }
    let mut total = Counters::new();
    for (out, &plane) in total.planes.iter_mut().zip(&planes[..used]) {
        *out = (v.first)(plane);
    }
    let mut c = count_scalar(blocks.remainder());
    c.add_shifted(&total, used, 0);
    c
}

/// [`count_vectors`] with eight lanes: a full adder of three vectors is two `vpternlogq`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn count_avx512(hashes: &[u64]) -> Counters {
    use std::arch::x86_64::*;

    let swaps = [
        _mm512_set_epi64(3, 2, 1, 0, 7, 6, 5, 4),
        _mm512_set_epi64(5, 4, 7, 6, 1, 0, 3, 2),
        _mm512_set_epi64(6, 7, 4, 5, 2, 3, 0, 1),
    ];
    count_vectors::<8, _>(
        hashes,
        Lanes {
            zero: _mm512_setzero_si512(),
            // SAFETY: the load reads the eight words of the slice, unaligned.
            load: |eight: &[u64]| unsafe { _mm512_loadu_si512(eight.as_ptr().cast()) },
            // Sum and carry of three vectors: odd parity (0x96) and majority (0xE8).
            csa: |a, b, c| {
                (
                    _mm512_ternarylogic_epi64::<0x96>(a, b, c),
                    _mm512_ternarylogic_epi64::<0xE8>(a, b, c),
                )
            },
            ripple: |p, x| (_mm512_xor_si512(p, x), _mm512_and_si512(p, x)),
            any: |x| _mm512_test_epi64_mask(x, x) != 0,
            swap: |round, x| _mm512_permutexvar_epi64(swaps[round], x),
            first: |x| _mm_cvtsi128_si64(_mm512_castsi512_si128(x)) as u64,
        },
    )
}

/// [`count_vectors`] with four lanes: a full adder of three vectors is five logic
/// instructions here (AVX2 has no `vpternlogq`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn count_avx2(hashes: &[u64]) -> Counters {
    use std::arch::x86_64::*;

    count_vectors::<4, _>(
        hashes,
        Lanes {
            zero: _mm256_setzero_si256(),
            // SAFETY: the load reads the four words of the slice, unaligned.
            load: |four: &[u64]| unsafe { _mm256_loadu_si256(four.as_ptr().cast()) },
            csa: |a, b, c| {
                let u = _mm256_xor_si256(a, b);
                (
                    _mm256_xor_si256(u, c),
                    _mm256_or_si256(_mm256_and_si256(a, b), _mm256_and_si256(u, c)),
                )
            },
            ripple: |p, x| (_mm256_xor_si256(p, x), _mm256_and_si256(p, x)),
            any: |x| _mm256_testz_si256(x, x) == 0,
            // Halves, then neighbours.
            swap: |round, x| match round {
                0 => _mm256_permute4x64_epi64::<0b01_00_11_10>(x),
                _ => _mm256_permute4x64_epi64::<0b10_11_00_01>(x),
            },
            first: |x| _mm256_extract_epi64::<0>(x) as u64,
        },
    )
}

/// [`count`] one word at a time.
fn count_scalar(hashes: &[u64]) -> Counters {
    let mut c = Counters::new();
    let mut acc = [0u64; 4];
    let mut chunks = hashes.chunks_exact(16);
    for h in &mut chunks {
        let sixteens = fold_sixteen(&mut acc, |i| h[i], csa);
        c.add(sixteens, 4);
    }
    for &h in chunks.remainder() {
        c.add(h, 0);
    }
    for (weight, x) in acc.into_iter().enumerate() {
        c.add(x, weight);
    }
    c
}

/// Folds the sixteen words `h(0)`, …, `h(15)` into the carry-save accumulators `acc` (of
/// weights 1, 2, 4 and 8) with the full adder `csa` (Harley–Seal); returns the carry out
/// of the eights, which weighs 16. For words, and for vectors of words alike.
#[inline(always)]
fn fold_sixteen<T: Copy>(
    acc: &mut [T; 4],
    h: impl Fn(usize) -> T,
    csa: impl Fn(T, T, T) -> (T, T),
) -> T {
    let [ones, twos, fours, eights] = acc;
    let (twos_a, twos_b, twos_c, twos_d, twos_e, twos_f, twos_g, twos_h);
    let (fours_a, fours_b, fours_c, fours_d, eights_a, eights_b, sixteens);
    (*ones, twos_a) = csa(*ones, h(0), h(1));
    (*ones, twos_b) = csa(*ones, h(2), h(3));
    (*twos, fours_a) = csa(*twos, twos_a, twos_b);
    (*ones, twos_c) = csa(*ones, h(4), h(5));
    (*ones, twos_d) = csa(*ones, h(6), h(7));
    (*twos, fours_b) = csa(*twos, twos_c, twos_d);
    (*fours, eights_a) = csa(*fours, fours_a, fours_b);
    (*ones, twos_e) = csa(*ones, h(8), h(9));
    (*ones, twos_f) = csa(*ones, h(10), h(11));
    (*twos, fours_c) = csa(*twos, twos_e, twos_f);
    (*ones, twos_g) = csa(*ones, h(12), h(13));
    (*ones, twos_h) = csa(*ones, h(14), h(15));
    (*twos, fours_d) = csa(*twos, twos_g, twos_h);
    (*fours, eights_b) = csa(*fours, fours_c, fours_d);
    (*eights, sixteens) = csa(*eights, eights_a, eights_b);
    sixteens
}

/// The simhash of `hashes`: bit `i` is 1 when more than half of the hashes have bit `i`
/// set (a tie gives 0; no hashes give 0).
pub fn simhash(hashes: &[u64]) -> u64 {
    let n = hashes.len() as u64;
    count(hashes).greater_than(n / 2, n)
}

/// The weighted simhash of `(hash, weight)` pairs: bit `i` is 1 when the hashes with bit
/// `i` set carry more than half of the total weight (a tie gives 0; no weight gives 0).
///
/// Features are grouped by weight; each group is counted like unweighted hashes, and its
/// bit-sliced counts are added to the total once per set bit of the weight. Real weights
/// come in few distinct values (term frequencies, quantised idf), so this costs little
/// more than the unweighted vote.
pub fn simhash_weighted(features: impl IntoIterator<Item = (u64, u32)>) -> u64 {
    let mut by_weight: Vec<(u32, u64)> = features
        .into_iter()
        .filter(|&(_, w)| w > 0)
        .map(|(h, w)| (w, h))
        .collect();
    by_weight.sort_unstable_by_key(|&(w, _)| w);
    let hashes: Vec<u64> = by_weight.iter().map(|&(_, h)| h).collect();
    let mut groups: Vec<(u32, &[u64])> = Vec::new();
    let mut start = 0;
    for run in by_weight.chunk_by(|a, b| a.0 == b.0) {
        groups.push((run[0].0, &hashes[start..start + run.len()]));
        start += run.len();
    }
    simhash_groups(&groups)
}

/// The weighted simhash of groups of hashes, every hash of a group weighing the group's
/// weight: each group is counted like unweighted hashes, and its bit-sliced counts are
/// added to the total once per set bit of the weight.
pub(crate) fn simhash_groups(groups: &[(u32, &[u64])]) -> u64 {
    let mut total = Counters::new();
    let mut sum = 0u64;
    for &(w, hashes) in groups {
        total.add_scaled(hashes, w);
        sum += u64::from(w) * hashes.len() as u64;
    }
    total.greater_than(sum / 2, sum)
}

/// The vote of `all`, every hash weighing `w`, after taking `less[k].1` off the weight of
/// (one occurrence of) hash `less[k].0`: bit `i` is 1 when the remaining weight of the
/// hashes with bit `i` set is more than half of the remaining total. Exact integer
/// arithmetic on bit-sliced counts.
///
/// This is the tf vote in one pass over the features when only a few repeat: all
/// occurrences vote alike through the carry-save kernel, and the few repeated features
/// are corrected down to their sub-linear weight, grouped by the size of the correction.
#[cfg(test)]
pub(crate) fn simhash_adjusted(all: &[u64], w: u32, less: &[(u64, u32)]) -> u64 {
    let mut less = less.to_vec();
    less.sort_unstable_by_key(|&(_, d)| d);
    simhash_adjusted_runs(all, w, &less, |h| h, &mut Vec::new())
}

/// [`simhash_adjusted`] with `less` in runs of equal corrections, its hashes seen through
/// `rehash`; `group` holds one run's hashes (a buffer kept by the caller).
pub(crate) fn simhash_adjusted_runs(
    all: &[u64],
    w: u32,
    less: &[(u64, u32)],
    rehash: impl Fn(u64) -> u64,
    group: &mut Vec<u64>,
) -> u64 {
    let mut total = Counters::new();
    total.add_scaled(all, w);
    let taken: u64 = less.iter().map(|&(_, d)| u64::from(d)).sum();
    let minus = taken_off(less, taken, rehash, group);
    let full = u64::from(w) * all.len() as u64;
    let sum = full - taken;
    total.subtract(&minus, (64 - full.leading_zeros()) as usize);
    total.greater_than(sum / 2, sum)
}

/// Per bit position, the weight `less` takes off the hashes (seen through `rehash`) with
/// that bit set, bit-sliced; `taken` is the sum of all of `less`'s weights.
fn taken_off(
    less: &[(u64, u32)],
    taken: u64,
    rehash: impl Fn(u64) -> u64,
    group: &mut Vec<u64>,
) -> Counters {
    #[cfg(target_arch = "x86_64")]
    if !takes_off_by_runs(taken) {
        // SAFETY: not by runs only where the CPU has AVX-512F (`takes_off_by_runs`).
        return unsafe { taken_off_avx512(less, rehash) };
    }
    // Elsewhere there is no other way, whatever the sum.
    #[cfg(not(target_arch = "x86_64"))]
    let _ = taken;
    taken_off_by_runs(less, rehash, group)
}

/// Whether [`taken_off`] goes by runs of equal weights, on weights summing to `taken`:
/// where the CPU lacks AVX-512F, or the sum passes 2^32 − 1. Only then does the order of
/// the weights matter, for speed: sorted, they make the fewest runs.
pub(crate) fn takes_off_by_runs(taken: u64) -> bool {
    #[cfg(target_arch = "x86_64")]
    if taken <= u64::from(u32::MAX) && crate::arch::features().avx512f() {
        return false;
    }
    let _ = taken;
    true
}

/// [`taken_off`] a run of equal weights at a time: each run's hashes counted, and the
/// counts added once per set bit of its weight.
fn taken_off_by_runs(
    less: &[(u64, u32)],
    rehash: impl Fn(u64) -> u64,
    group: &mut Vec<u64>,
) -> Counters {
    let mut minus = Counters::new();
    for run in less.chunk_by(|a, b| a.1 == b.1) {
        group.clear();
        group.extend(run.iter().map(|&(h, _)| rehash(h)));
        minus.add_scaled(group, run[0].1);
    }
    minus
}

/// [`taken_off`] one hash at a time, where no counter can pass 2^32 − 1: 64 plain 32-bit
/// counters in four vectors, each hash's weight added to those of its set bits by four
/// masked adds, then turned into bit-sliced planes. By runs, text with many repeats
/// (each count of repeats its own run, each run counted, then added once per set bit of
/// its weight) spent a twentieth of its fingerprinting there.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn taken_off_avx512(less: &[(u64, u32)], rehash: impl Fn(u64) -> u64) -> Counters {
    use std::arch::x86_64::*;

    // Counter 16·k + j in lane j of `lanes[k]`.
    let mut lanes = [_mm512_setzero_si512(); 4];
    for &(h, d) in less {
        let h = rehash(h);
        let d = _mm512_set1_epi32(d as i32);
        for (k, lane) in lanes.iter_mut().enumerate() {
            *lane = _mm512_mask_add_epi32(*lane, (h >> (16 * k)) as u16, *lane, d);
        }
    }
    let mut minus = Counters::new();
    for (j, plane) in minus.planes[..32].iter_mut().enumerate() {
        let bit = _mm512_set1_epi32(1 << j);
        *plane = lanes.iter().enumerate().fold(0u64, |p, (k, &lane)| {
            p | u64::from(_mm512_test_epi32_mask(lane, bit)) << (16 * k)
        });
    }
    minus
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The weighted definition, one bit at a time.
    fn naive_weighted(features: &[(u64, u32)]) -> u64 {
        let total: u64 = features.iter().map(|&(_, w)| u64::from(w)).sum();
        let mut out = 0;
        for i in 0..64 {
            let ones: u64 = features
                .iter()
                .filter(|&&(h, _)| (h >> i) & 1 == 1)
                .map(|&(_, w)| u64::from(w))
                .sum();
            if ones * 2 > total {
                out |= 1 << i;
            }
        }
        out
    }

    proptest! {
        #[test]
        fn weighted_matches_definition(
            features in proptest::collection::vec((any::<u64>(), 0u32..2000), 0..300),
            mask in any::<u64>(),
        ) {
            let features: Vec<(u64, u32)> = features.iter().map(|&(h, w)| (h & mask, w)).collect();
            prop_assert_eq!(simhash_weighted(features.iter().copied()), naive_weighted(&features));
        }

        #[test]
        fn adjusted_is_the_weighted_vote(
            hashes in proptest::collection::vec(any::<u64>(), 1..200),
            w in 1u32..1024,
            cuts in proptest::collection::vec((any::<prop::sample::Index>(), 0u32..1024), 0..20),
        ) {
            // Take some weight off some occurrences: the same as voting with what is left.
            let mut weights = vec![w; hashes.len()];
            let mut less = Vec::new();
            for (i, d) in cuts {
                let i = i.index(hashes.len());
                let d = d.min(weights[i]);
                weights[i] -= d;
                less.push((hashes[i], d));
            }
            let expected = naive_weighted(
                &hashes.iter().copied().zip(weights.iter().copied()).collect::<Vec<_>>(),
            );
            prop_assert_eq!(simhash_adjusted(&hashes, w, &less), expected);
        }

        #[test]
        fn taken_off_one_hash_at_a_time_as_by_runs(
            less in proptest::collection::vec((any::<u64>(), 0u32..4096), 0..300),
            large in proptest::collection::vec((any::<u64>(), 1u32 << 20..1 << 22), 0..8),
            mask in any::<u64>(),
        ) {
            // Small and large weights, runs of equal ones, and bits every hash or none has.
            let mut less: Vec<(u64, u32)> = less.iter().chain(&large).map(|&(h, d)| (h & mask, d)).collect();
            less.sort_unstable_by_key(|&(_, d)| d);
            let taken: u64 = less.iter().map(|&(_, d)| u64::from(d)).sum();
            let rehash = |h: u64| h.rotate_left(7);
            let by_runs = taken_off_by_runs(&less, rehash, &mut Vec::new());
            prop_assert_eq!(taken_off(&less, taken, rehash, &mut Vec::new()).planes, by_runs.planes);
        }

        #[test]
        fn unit_weights_are_unweighted(hashes in proptest::collection::vec(any::<u64>(), 0..300)) {
            prop_assert_eq!(simhash_weighted(hashes.iter().map(|&h| (h, 1))), simhash(&hashes));
        }
    }

    /// The definition, one bit at a time.
    fn naive(hashes: &[u64]) -> u64 {
        let mut out = 0;
        for i in 0..64 {
            let ones = hashes.iter().filter(|&&h| (h >> i) & 1 == 1).count();
            if ones * 2 > hashes.len() {
                out |= 1 << i;
            }
        }
        out
    }

    proptest! {
        #[test]
        fn matches_definition(hashes in proptest::collection::vec(any::<u64>(), 0..200)) {
            prop_assert_eq!(simhash(&hashes), naive(&hashes));
        }

        #[test]
        fn matches_definition_on_biased_bits(
            hashes in proptest::collection::vec(any::<u64>(), 0..600),
            mask in any::<u64>(),
        ) {
            // Ties and near-ties on some bits, unanimity on others.
            let hashes: Vec<u64> = hashes.iter().map(|h| h & mask).collect();
            prop_assert_eq!(simhash(&hashes), naive(&hashes));
        }
    }

    proptest! {
        #[test]
        fn counted_as_one_word_at_a_time(
            hashes in proptest::collection::vec(any::<u64>(), 0..3000),
            mask in any::<u64>(),
        ) {
            // Lists long enough for the vector path, with ties and unanimity on some bits.
            let hashes: Vec<u64> = hashes.iter().map(|h| h & mask).collect();
            prop_assert_eq!(count(&hashes).planes, count_scalar(&hashes).planes);
        }
    }

    #[test]
    fn large_counts() {
        let hashes: Vec<u64> = (0..100_003u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        assert_eq!(simhash(&hashes), naive(&hashes));
        assert_eq!(simhash(&vec![u64::MAX; 70_000]), u64::MAX);
    }
}
