//! [`Sketch`]: 128 bytes that estimate the Jaccard similarity of two shingle sets.
//!
//! One-permutation hashing (Li, Owen and Zhang, 2012): each shingle hash falls into one of
//! [`BINS`] bins by its top bits, and a bin keeps the smallest of its hashes. Two sets'
//! minima in a bin are equal with probability J, their Jaccard similarity. A bin no
//! shingle fell into borrows the minimum of a filled bin, found by walking the bins in an
//! order fixed for that bin (Shrivastava's optimal densification, 2017, with a walk
//! without repeats), so both sets of a pair borrow alike. Each bin keeps only [`BITS`]
//! bits of a hash of its minimum (b-bit minwise hashing, Li and König, 2010): unequal
//! minima still agree with probability 1/4, which the estimate corrects for.
//!
//! On the natural corpus's candidate pairs, the estimate's error has a root mean square of
//! 0.021 for pairs with J between 0.6 and 0.95 (docs/dedup.md), and two bits in 512 bins
//! measured better than one bit in 1,024 or eight bits in 128 at the same size.
//!
//! The same bins, before they are cut to two bits, find candidates: [`BANDS`] bands of
//! `r` consecutive bins each get a 32-bit key ([`BandKeys`]), and two sets whose keys
//! agree in some band are candidates (locality-sensitive hashing, Indyk and Motwani 1998;
//! the banding of Leskovec, Rajaraman and Ullman's *Mining of Massive Datasets*, ch. 3).
//! A pair of similarity J agrees in a band with probability J^r, so in some band with
//! probability `1 − (1 − J^r)^BANDS`: [`Banding::for_threshold`] picks the `r` that makes
//! that at least 0.9995 at the threshold.

use super::words::fmix64;

/// Bins of a sketch.
pub const BINS: usize = 512;
/// Bands of bins that give a sketch's [`BandKeys`].
pub const BANDS: usize = 20;
/// The key of each band of a set's bins: sets whose keys agree in some band are
/// candidates. All zero for the empty set.
pub type BandKeys = [u32; BANDS];
/// Most bins a band may hold.
const MAX_ROWS: usize = 25;
const _: () = assert!(BANDS * MAX_ROWS <= BINS, "bands must fit in the bins");
/// The least probability of a pair at the threshold to agree in some band.
const BAND_RECALL: f64 = 0.9995;
/// Bits kept per bin.
pub const BITS: usize = 2;
/// Bytes of a sketch.
pub const BYTES: usize = BINS * BITS / 8;

const WORDS: usize = BYTES / 8;
/// Bins per `u64` of the packed codes.
const PER_WORD: usize = 64 / BITS;
/// Top bits of a shingle hash that choose its bin.
const BIN_BITS: u32 = BINS.trailing_zeros();
/// The rest of the hash, compared for the minimum.
const RANK_MASK: u64 = u64::MAX >> BIN_BITS;
const EMPTY: u64 = u64::MAX;

/// A 128-byte summary of a shingle set: [`Sketch::similarity`] of two sketches estimates
/// the Jaccard similarity of their sets. All zero for the empty set.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sketch {
    codes: [u64; WORDS],
}

impl std::fmt::Debug for Sketch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sketch(")?;
        for w in &self.codes[..2] {
            write!(f, "{w:016x}")?;
        }
        write!(f, "…)")
    }
}

impl Default for Sketch {
    fn default() -> Sketch {
        Sketch::EMPTY
    }
}

/// Where the walk of empty bin `i` starts, its odd stride, and the stride's inverse
/// modulo [`BINS`]: step `a` of the walk visits `start + a · stride`, every bin once in
/// [`BINS`] steps.
struct Walk {
    start: u16,
    stride: u16,
    inverse: u16,
}

/// The walks of all bins, fixed at compile time from a splitmix64 sequence.
static WALKS: [Walk; BINS] = {
    const INIT: Walk = Walk {
        start: 0,
        stride: 1,
        inverse: 1,
    };
    let mut walks = [INIT; BINS];
    let mut state: u64 = 0x6E65_6172_6475_7032; // "neardup2"
    let mut i = 0;
    while i < BINS {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let start = (z as usize) % BINS;
        let stride = ((z >> 32) as usize % BINS) | 1;
        // Newton's iteration doubles the correct low bits: 1 → 2 → 4 → 8 → 16 ≥ 9.
        let mut inv: usize = 1;
        let mut k = 0;
        while k < 4 {
            inv = inv.wrapping_mul(2usize.wrapping_sub(stride.wrapping_mul(inv))) % BINS;
            k += 1;
        }
        walks[i] = Walk {
            start: start as u16,
            stride: stride as u16,
            inverse: inv as u16,
        };
        i += 1;
    }
    walks
};

/// The value of a bin: a hash of the minimum it holds and of `tag`: 0 for its own
/// minimum, one more than the step of the walk for a borrowed one, so a borrowed value is
/// not a copy of its source's. The sketch keeps its top [`BITS`] bits.
#[inline]
fn value(min: u64, tag: u64) -> u64 {
    fmix64(min ^ tag.wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

impl Sketch {
    /// The sketch of the empty set.
    pub const EMPTY: Sketch = Sketch { codes: [0; WORDS] };

    /// The sketch of the set of `hashes` (repeats do not matter). The hashes must already
    /// be uniform 64-bit values, as [`super::shingle_hashes`] gives.
    pub fn from_hashes(hashes: impl IntoIterator<Item = u64>) -> Sketch {
        Bins::sketch_of(Bins::of(hashes))
    }

    /// The sketch of the set of `hashes` and its band keys under `banding`.
    pub fn with_bands(
        hashes: impl IntoIterator<Item = u64>,
        banding: Banding,
    ) -> (Sketch, BandKeys) {
        Bins::with_bands_of(Bins::of(hashes), banding)
    }

    /// The sketch of `text`'s word 5-shingle set and its band keys under `banding`.
    pub fn of_text_with_bands(text: &str, banding: Banding) -> (Sketch, BandKeys) {
        Bins::with_bands_of(Bins::of_text(text), banding)
    }

    /// The sketch of `text`'s word 5-shingle set ([`super::shingle_hashes`]).
    pub fn of_text(text: &str) -> Sketch {
        Bins::sketch_of(Bins::of_text(text))
    }

    /// Whether this is the sketch of the empty set (a text without words).
    pub fn is_empty(&self) -> bool {
        *self == Sketch::EMPTY
    }

    /// The estimated Jaccard similarity of the two sets, in [0, 1]: 1 for equal sketches,
    /// 0 when exactly one set is empty.
    pub fn similarity(&self, other: &Sketch) -> f64 {
        if self == other {
            return 1.0;
        }
        if self.is_empty() || other.is_empty() {
            return 0.0;
        }
        let equal = self.equal_bins(other) as f64 / BINS as f64;
        // Unequal minima agree by chance with probability 1/2^BITS.
        let chance = 1.0 / (1u64 << BITS) as f64;
        ((equal - chance) / (1.0 - chance)).clamp(0.0, 1.0)
    }

    /// Bins whose codes agree.
    fn equal_bins(&self, other: &Sketch) -> u32 {
        // A two-bit code agrees when both of its bits XOR to zero.
        const LOW: u64 = 0x5555_5555_5555_5555;
        self.codes
            .iter()
            .zip(&other.codes)
            .map(|(a, b)| {
                let x = a ^ b;
                (!(x | (x >> 1)) & LOW).count_ones()
            })
            .sum()
    }

    /// The sketch as bytes (little-endian words), for storing.
    pub fn to_bytes(&self) -> [u8; BYTES] {
        let mut out = [0u8; BYTES];
        for (chunk, w) in out.chunks_exact_mut(8).zip(&self.codes) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// The sketch [`Sketch::to_bytes`] wrote.
    pub fn from_bytes(bytes: &[u8; BYTES]) -> Sketch {
        let mut codes = [0u64; WORDS];
        for (w, chunk) in codes.iter_mut().zip(bytes.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            *w = u64::from_le_bytes(b);
        }
        Sketch { codes }
    }
}

/// How many bins each band of [`BandKeys`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Banding {
    rows: u8,
}

impl Banding {
    /// `rows` bins per band; an error unless `1 ≤ rows ≤ 25`.
    pub fn new(rows: usize) -> crate::Result<Banding> {
        if (1..=MAX_ROWS).contains(&rows) {
            Ok(Banding { rows: rows as u8 })
        } else {
            Err(crate::Error::InvalidRows(rows))
        }
    }

    /// The most rows per band at which a pair of similarity `t` agrees in some band with
    /// probability at least 0.9995 (one row when none does): 5 at 0.8, 3 at 0.7, 10 at
    /// 0.9. More rows make fewer candidates of low similarity.
    pub fn for_threshold(t: super::Threshold) -> Banding {
        let rows = (1..=MAX_ROWS)
            .rev()
            .find(|&r| Banding { rows: r as u8 }.probability(t.get()) >= BAND_RECALL)
            .unwrap_or(1);
        Banding { rows: rows as u8 }
    }

    /// Bins per band.
    pub fn rows(self) -> usize {
        usize::from(self.rows)
    }

    /// The probability that two sets of Jaccard similarity `j` agree in some band (their
    /// bins taken as independent): `1 − (1 − j^r)^BANDS`.
    pub fn probability(self, j: f64) -> f64 {
        1.0 - (1.0 - j.powi(i32::from(self.rows))).powi(BANDS as i32)
    }
}

/// A set's bins after densification: per bin, a 64-bit hash of the minimum it holds (its
/// own or borrowed) and of how it got it.
struct Bins([u64; BINS]);

/// Each bin's least rank of the hashes added so far, as the hashes come.
struct Mins {
    mins: [u64; BINS],
    any: bool,
}

impl Mins {
    fn new() -> Mins {
        Mins {
            mins: [EMPTY; BINS],
            any: false,
        }
    }

    #[inline]
    fn add(&mut self, h: u64) {
        let bin = (h >> (64 - BIN_BITS)) as usize;
        let rank = h & RANK_MASK;
        // Always written: whether a shingle lowers its bin follows no pattern early in a
        // text, and a branch on it mispredicts.
        self.mins[bin] = rank.min(self.mins[bin]);
        self.any = true;
    }

    /// The bins, the empty ones filled by borrowing; `None` for the empty set.
    fn bins(&self) -> Option<Bins> {
        if !self.any {
            return None;
        }
        let mins = &self.mins;
        #[cfg(target_arch = "x86_64")]
        let features = crate::arch::features();
        // About half the bins of a document are empty, in no order a branch could learn,
        // so no branch asks whether a bin is filled. The filled bins, found through a
        // bitmap (a mispredicted branch a word of it, at its loop's end), get the value of
        // their own minimum; the empty ones, a borrowed one.
        #[cfg(target_arch = "x86_64")]
        let full = if features.avx2() {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { filled_bitmap_avx2(mins) }
        } else {
            filled_bitmap(mins)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let full = filled_bitmap(mins);
        // The filled bins are also listed, in the same pass, when few enough to solve for
        // (see `borrow`); else the list stays empty and the empty bins are walked.
        let listing = full.iter().map(|w| w.count_ones() as usize).sum::<usize>() <= SOLVE_MAX;
        let mut list = [0u16; SOLVE_MAX];
        let mut listed = 0;
        let mut values = [0u64; BINS];
        for (w, &bits) in full.iter().enumerate() {
            let mut bits = bits;
            while bits != 0 {
                let i = w * 64 + bits.trailing_zeros() as usize;
                values[i] = value(mins[i], 0);
                if listing {
                    list[listed] = i as u16;
                    listed += 1;
                }
                bits &= bits - 1;
            }
        }
        let filled: &[u16] = &list[..listed];
        #[cfg(target_arch = "x86_64")]
        if filled.is_empty() && features.avx512vbmi() {
            // SAFETY: the CPU has AVX-512 F, BW and VBMI (checked just above: VBMI
            // implies F and BW).
            unsafe { borrow_all_avx512(&full, mins, &mut values) };
            return Some(Bins(values));
        }
        #[cfg(target_arch = "x86_64")]
        if filled.is_empty() && features.avx2() {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { borrow_all_avx2(&full, mins, &mut values) };
            return Some(Bins(values));
        }
        for (w, &bits) in full.iter().enumerate() {
            let mut empty = !bits;
            while empty != 0 {
                let i = w * 64 + empty.trailing_zeros() as usize;
                empty &= empty - 1;
                let (bin, step) = borrow(&WALKS[i], &full, filled);
                values[i] = value(mins[bin], step + 1);
            }
        }
        Some(Bins(values))
    }
}

impl Bins {
    /// The bins of the set of `hashes`; `None` for the empty set.
    fn of(hashes: impl IntoIterator<Item = u64>) -> Option<Bins> {
        let mut mins = Mins::new();
        for h in hashes {
            mins.add(h);
        }
        mins.bins()
    }

    /// The bins of `text`'s word 5-shingle set. The hashes go straight into the bins: no
    /// vector of them (a check of a 2 KB text would allocate and fill 3 KB for nothing).
    fn of_text(text: &str) -> Option<Bins> {
        let mut mins = Mins::new();
        super::shingle_hashes(text, |h| mins.add(h));
        mins.bins()
    }

    /// The sketch of `bins`, [`Sketch::EMPTY`] for the empty set.
    fn sketch_of(bins: Option<Bins>) -> Sketch {
        bins.map_or(Sketch::EMPTY, |b| b.sketch())
    }

    /// The sketch and band keys of `bins`, all zero for the empty set.
    fn with_bands_of(bins: Option<Bins>, banding: Banding) -> (Sketch, BandKeys) {
        bins.map_or((Sketch::EMPTY, [0; BANDS]), |b| {
            (b.sketch(), b.band_keys(banding))
        })
    }

    /// The sketch: the top [`BITS`] bits of each bin.
    fn sketch(&self) -> Sketch {
        let mut sketch = Sketch::EMPTY;
        for (code, chunk) in sketch.codes.iter_mut().zip(self.0.chunks_exact(PER_WORD)) {
            *code = chunk
                .iter()
                .enumerate()
                .fold(0, |c, (j, v)| c | (v >> (64 - BITS)) << (BITS * j));
        }
        if sketch == Sketch::EMPTY {
            // All codes zero by chance (probability 4^-512): keep it apart from the empty set.
            sketch.codes[0] = 1;
        }
        sketch
    }

    /// Band `j`'s key is a hash of bins `j·r .. (j+1)·r`, all 64 bits of each.
    fn band_keys(&self, banding: Banding) -> BandKeys {
        let r = banding.rows();
        let mut keys = [0u32; BANDS];
        for (j, key) in keys.iter_mut().enumerate() {
            let mut h = (j as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            for &v in &self.0[j * r..(j + 1) * r] {
                h = fmix64(h.rotate_left(29) ^ v);
            }
            // Zero is the empty set's key.
            *key = ((h >> 32) as u32).max(1);
        }
        keys
    }
}

/// Most filled bins for which an empty bin's borrowing is solved for rather than walked:
/// solving takes one step per filled bin, four at a time in vector lanes and without a
/// branch, walking about `BINS / filled` steps with a branch each that mispredicts
/// (measured: 20 filled bins 14 -> 7 µs a set, 40 12 -> 9, 60 equal).
const SOLVE_MAX: usize = 64;

/// The filled bin that empty bin `walk` borrows from, and the step of its walk that
/// reaches it: the first filled bin in the walk's order. With few filled bins (`filled`
/// lists them), the step at which the walk reaches each of them is solved for
/// (`(j - start) · stride⁻¹`); with many (`filled` is then empty), the walk is followed in
/// the bitmap `full` until it meets one. Both give the same answer.
#[inline]
fn borrow(walk: &Walk, full: &[u64; BINS / 64], filled: &[u16]) -> (usize, u64) {
    let mask = BINS - 1;
    let (start, stride) = (walk.start as usize, walk.stride as usize);
    if !filled.is_empty() {
        // Each filled bin's step, above its bin in one u32 (steps differ, so the least
        // word is the least step): a minimum the compiler keeps in vector lanes.
        let (start, inverse, mask) = (start as u32, u32::from(walk.inverse), mask as u32);
        let least = filled
            .iter()
            .map(|&j| {
                (((u32::from(j).wrapping_sub(start) & mask) * inverse) & mask) << 16 | u32::from(j)
            })
            .min()
            .unwrap_or(start);
        ((least & 0xFFFF) as usize, u64::from(least >> 16))
    } else {
        let mut step = 0;
        loop {
            let bin = (start + step * stride) & mask;
            if full[bin / 64] >> (bin % 64) & 1 != 0 {
                return (bin, step as u64);
            }
            step += 1;
        }
    }
}

/// Every empty bin's borrowing by walking ([`borrow`] with no list of filled bins), 32
/// steps of a walk at a time: the steps' bins computed in 16-bit lanes, their bytes of
/// the bitmap `full` fetched by one byte permute, the bits tested together. The walk's
/// loop branched once a step on whether the bin was filled, which no predictor learns
/// (a third of the bins filled, at random): on documents of 1 KB, walking took 40% of
/// `neardup dedup`'s time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
fn borrow_all_avx512(full: &[u64; BINS / 64], mins: &[u64; BINS], values: &mut [u64; BINS]) {
    use std::arch::x86_64::*;

    // SAFETY: the load reads the 64 bytes of `full`, unaligned.
    let bitmap = unsafe { _mm512_loadu_si512(full.as_ptr().cast()) };
    let lanes = _mm512_set_epi16(
        31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9,
        8, 7, 6, 5, 4, 3, 2, 1, 0,
    );
    let mask = _mm512_set1_epi16((BINS - 1) as i16);
    let (low_byte, seven, one) = (
        _mm512_set1_epi16(0xff),
        _mm512_set1_epi16(7),
        _mm512_set1_epi16(1),
    );
    for (w, &bits) in full.iter().enumerate() {
        let mut empty = !bits;
        while empty != 0 {
            let i = w * 64 + empty.trailing_zeros() as usize;
            empty &= empty - 1;
            let walk = &WALKS[i];
            let (start, stride) = (walk.start as usize, walk.stride as usize);
            // Steps 32c .. 32c + 31: start + step · stride, modulo BINS in 16 bits (BINS
            // divides 2^16).
            let offsets = _mm512_mullo_epi16(lanes, _mm512_set1_epi16(stride as i16));
            let mut base = _mm512_set1_epi16(start as i16);
            let ahead = _mm512_set1_epi16((32 * stride) as i16);
            let mut found = None;
            for chunk in 0..BINS / 32 {
                let bins = _mm512_and_si512(_mm512_add_epi16(base, offsets), mask);
                // A lane's low byte indexes the bitmap's bytes (the high byte fetches byte
                // 0, masked off).
                let bytes = _mm512_permutexvar_epi8(_mm512_srli_epi16::<3>(bins), bitmap);
                let shifted = _mm512_srlv_epi16(
                    _mm512_and_si512(bytes, low_byte),
                    _mm512_and_si512(bins, seven),
                );
                let hits = _mm512_test_epi16_mask(shifted, one);
                if hits != 0 {
                    found = Some(chunk * 32 + hits.trailing_zeros() as usize);
                    break;
                }
                base = _mm512_add_epi16(base, ahead);
            }
            // Some bin is filled (the caller walks only then), and the walk visits every
            // bin in BINS steps.
            let step = found.unwrap_or(0);
            let bin = (start + step * stride) & (BINS - 1);
            values[i] = value(mins[bin], step as u64 + 1);
        }
    }
}

/// The bitmap of the bins that hold a minimum of their own.
fn filled_bitmap(mins: &[u64; BINS]) -> [u64; BINS / 64] {
    let mut full = [0u64; BINS / 64];
    // A word gathered in a register, not or-ed into memory bin by bin.
    for (word, chunk) in full.iter_mut().zip(mins.chunks_exact(64)) {
        *word = chunk
            .iter()
            .enumerate()
            .fold(0, |w, (j, &min)| w | u64::from(min != EMPTY) << j);
    }
    full
}

/// [`filled_bitmap`], four bins a compare: the scalar fold took three instructions a bin.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn filled_bitmap_avx2(mins: &[u64; BINS]) -> [u64; BINS / 64] {
    use std::arch::x86_64::*;

    let empty = _mm256_set1_epi64x(EMPTY as i64);
    let mut full = [0u64; BINS / 64];
    for (word, chunk) in full.iter_mut().zip(mins.chunks_exact(64)) {
        let mut gone = 0u64;
        for (q, four) in chunk.chunks_exact(4).enumerate() {
            // SAFETY: the load reads the four u64 of `four`, unaligned.
            let v = unsafe { _mm256_loadu_si256(four.as_ptr().cast()) };
            let is_empty = _mm256_castsi256_pd(_mm256_cmpeq_epi64(v, empty));
            gone |= (_mm256_movemask_pd(is_empty) as u64) << (4 * q);
        }
        *word = !gone;
    }
    full
}

/// The bins of each walk's first 8 steps, for [`borrow_all_avx2`]: one load where
/// computing them from the walk took a multiply of long latency for every empty bin.
#[cfg(target_arch = "x86_64")]
#[repr(align(32))]
struct FirstSteps([[u32; 8]; BINS]);

#[cfg(target_arch = "x86_64")]
static FIRST_STEPS: FirstSteps = {
    let mut steps = [[0u32; 8]; BINS];
    let mut i = 0;
    while i < BINS {
        let (start, stride) = (WALKS[i].start as usize, WALKS[i].stride as usize);
        let mut s = 0;
        while s < 8 {
            steps[i][s] = ((start + s * stride) & (BINS - 1)) as u32;
            s += 1;
        }
        i += 1;
    }
    FirstSteps(steps)
};

/// [`borrow_all_avx512`] in AVX2, 8 steps of a walk at a time: the bitmap's 16 words
/// held in two registers, each step's word picked from both by a lane permute and the
/// right one blended in, its bit shifted up to the sign for a movemask. The scalar walk
/// mispredicts about once a step (a bin is filled at random): on 2 KB documents, whose
/// bins are about half empty, it was a tenth of `neardup load`'s CPU.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn borrow_all_avx2(full: &[u64; BINS / 64], mins: &[u64; BINS], values: &mut [u64; BINS]) {
    use std::arch::x86_64::*;

    // Bins 0–255 and 256–511, as eight 32-bit words each (x86 is little-endian, so word k
    // holds bins 32k to 32k + 31 in its bits in order).
    // SAFETY: each load reads 32 of the 64 bytes of `full`, unaligned.
    let (low, high) = unsafe {
        (
            _mm256_loadu_si256(full.as_ptr().cast()),
            _mm256_loadu_si256(full.as_ptr().add(4).cast()),
        )
    };
    let (mask, bit) = (_mm256_set1_epi32((BINS - 1) as i32), _mm256_set1_epi32(31));
    // Which of the 8 `bins` are filled, as the low 8 bits.
    let filled = |bins: __m256i| {
        // The permutes index by the word's low three bits; bit 8 of the bin says which
        // half its word is in, moved to the sign for the blend.
        let words = _mm256_srli_epi32::<5>(bins);
        let picked = _mm256_castps_si256(_mm256_blendv_ps(
            _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(low, words)),
            _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(high, words)),
            _mm256_castsi256_ps(_mm256_slli_epi32::<23>(bins)),
        ));
        // The bin's bit shifted to the sign: left by 31 less its place.
        let up = _mm256_sllv_epi32(picked, _mm256_andnot_si256(bins, bit));
        _mm256_movemask_ps(_mm256_castsi256_ps(up))
    };
    for (w, &bits) in full.iter().enumerate() {
        let mut empty = !bits;
        while empty != 0 {
            let i = w * 64 + empty.trailing_zeros() as usize;
            empty &= empty - 1;
            let first = &FIRST_STEPS.0[i];
            // SAFETY: the load reads the 32 bytes of `first`.
            let mut bins = unsafe { _mm256_load_si256(first.as_ptr().cast()) };
            let hits = filled(bins);
            // Most walks end in their first 8 steps (at least 64 of the 512 bins are
            // filled when the caller walks).
            let (bin, step) = if hits != 0 {
                let s = hits.trailing_zeros() as usize;
                (first[s] as usize, s)
            } else {
                let (start, stride) = (WALKS[i].start as usize, WALKS[i].stride as usize);
                let ahead = _mm256_set1_epi32((8 * stride) as i32);
                let mut found = 0;
                for chunk in 1..BINS / 8 {
                    bins = _mm256_and_si256(_mm256_add_epi32(bins, ahead), mask);
                    let hits = filled(bins);
                    if hits != 0 {
                        found = chunk * 8 + hits.trailing_zeros() as usize;
                        break;
                    }
                }
                // Some bin is filled (the caller walks only then), and the walk visits
                // every bin in BINS steps.
                ((start + found * stride) & (BINS - 1), found)
            };
            values[i] = value(mins[bin], step as u64 + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        fmix64(*state)
    }

    /// Two sets with exactly `shared` common elements and `only` elements each of their own.
    fn pair(seed: u64, shared: usize, only: usize) -> (Vec<u64>, Vec<u64>) {
        let mut s = seed;
        let common: Vec<u64> = (0..shared).map(|_| splitmix(&mut s)).collect();
        let mut a = common.clone();
        let mut b = common;
        a.extend((0..only).map(|_| splitmix(&mut s)));
        b.extend((0..only).map(|_| splitmix(&mut s)));
        (a, b)
    }

    /// A text's sketch and keys, hashes streamed into the bins, are those of the vector of
    /// its shingle hashes (the plain path): empty, short and long texts, from 1 to 2,000
    /// shingles (bins mostly empty, so borrowed by solving, and mostly full, by walking).
    #[test]
    fn of_text_with_bands_is_with_bands_of_the_hashes() {
        let words = [
            "the",
            "Quick",
            "brown",
            "fox",
            "jumps",
            "över",
            "the",
            "lazy",
            "dog",
            "“quoted”",
            "—",
            "42",
        ];
        let mut s = 11;
        let mut texts = vec![
            String::new(),
            "  ".into(),
            "one".into(),
            "one two three four five".into(),
        ];
        for n in [6, 40, 300, 2000] {
            let text: Vec<&str> = (0..n)
                .map(|_| words[(splitmix(&mut s) % words.len() as u64) as usize])
                .collect();
            texts.push(text.join(" "));
        }
        for rows in [1, 5, 25] {
            let banding = Banding::new(rows).unwrap();
            for text in &texts {
                let mut hashes = Vec::new();
                super::super::shingle_hashes(text, |h| hashes.push(h));
                assert_eq!(
                    Sketch::of_text(text),
                    Sketch::from_hashes(hashes.iter().copied()),
                    "{text:?}"
                );
                assert_eq!(
                    Sketch::of_text_with_bands(text, banding),
                    Sketch::with_bands(hashes, banding),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn walks_visit_every_bin_and_invert() {
        for w in WALKS.iter() {
            let mut seen = vec![false; BINS];
            for a in 0..BINS {
                seen[(w.start as usize + a * w.stride as usize) % BINS] = true;
            }
            assert!(seen.iter().all(|&s| s));
            assert_eq!((w.stride as usize * w.inverse as usize) % BINS, 1);
        }
    }

    #[test]
    fn equal_and_empty_sets() {
        let (a, _) = pair(1, 300, 0);
        let s = Sketch::from_hashes(a.iter().copied());
        let mut rev = a.clone();
        rev.reverse();
        rev.extend_from_slice(&a[..10]);
        assert_eq!(s, Sketch::from_hashes(rev));
        assert_eq!(s.similarity(&s), 1.0);
        assert!(Sketch::from_hashes([]).is_empty());
        assert_eq!(Sketch::EMPTY.similarity(&Sketch::EMPTY), 1.0);
        assert_eq!(s.similarity(&Sketch::EMPTY), 0.0);
        assert!(!Sketch::from_hashes([42]).is_empty());
        assert_eq!(Sketch::from_bytes(&s.to_bytes()), s);
    }

    /// The estimate against the true Jaccard similarity, over sets of every size class:
    /// no bias beyond 0.01, and each estimate within five standard deviations of b-bit
    /// minwise hashing's (Li and König) at that similarity.
    #[test]
    fn estimates_track_jaccard() {
        let mut seed = 7;
        for (shared, only) in [
            (3, 0),
            (8, 1),
            (40, 5),
            (90, 10),
            (300, 30),
            (800, 100),
            (2000, 300),
            (5000, 1000),
            (450, 150),
            (100, 100),
            (30, 300),
        ] {
            let j = shared as f64 / (shared + 2 * only) as f64;
            let p = j + (1.0 - j) / 4.0;
            let sd = (p * (1.0 - p) / BINS as f64).sqrt() / 0.75;
            let mut total = 0.0;
            let trials = 40;
            for _ in 0..trials {
                seed += 1;
                let (a, b) = pair(seed * 7919, shared, only);
                let est = Sketch::from_hashes(a).similarity(&Sketch::from_hashes(b));
                assert!(
                    (est - j).abs() <= 5.0 * sd + 0.02,
                    "J {j:.3} ({shared}, {only}): estimate {est:.3}, sd {sd:.3}"
                );
                total += est - j;
            }
            let bias = total / trials as f64;
            assert!(bias.abs() < 0.01 + sd / 2.0, "J {j:.3}: bias {bias:.4}");
        }
    }

    #[test]
    fn banding_follows_the_threshold() {
        let rows = |t: f64| Banding::for_threshold(super::super::Threshold::new(t).unwrap()).rows();
        assert_eq!(
            [
                rows(0.5),
                rows(0.6),
                rows(0.7),
                rows(0.8),
                rows(0.9),
                rows(1.0)
            ],
            [1, 2, 3, 5, 10, MAX_ROWS]
        );
        // The rows chosen are the most that keep the recall at the threshold.
        for t in [0.55, 0.65, 0.75, 0.8, 0.85, 0.95] {
            let r = rows(t);
            assert!(
                Banding::new(r).unwrap().probability(t) >= BAND_RECALL,
                "{t}"
            );
            assert!(
                Banding::new(r + 1).unwrap().probability(t) < BAND_RECALL,
                "{t}"
            );
        }
        assert!(Banding::new(0).is_err() && Banding::new(MAX_ROWS + 1).is_err());
    }

    #[test]
    fn band_keys_of_equal_and_empty_sets() {
        let banding = Banding::new(5).unwrap();
        let (a, _) = pair(3, 200, 0);
        let (s, keys) = Sketch::with_bands(a.iter().copied(), banding);
        assert_eq!(s, Sketch::from_hashes(a.iter().copied()));
        let mut rev = a.clone();
        rev.reverse();
        assert_eq!(Sketch::with_bands(rev, banding).1, keys);
        assert!(keys.iter().all(|&k| k != 0));
        assert_eq!(Sketch::with_bands([], banding), (Sketch::EMPTY, [0; BANDS]));
        // Bands are keyed apart: equal bins in two bands do not make equal keys.
        let mut distinct = keys.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), BANDS);
    }

    /// A band's keys agree with probability J^r: over many pairs of each similarity, the
    /// share of agreeing bands stays within five standard deviations of it.
    #[test]
    fn bands_agree_with_probability_j_to_the_rows() {
        let mut seed = 11;
        for (rows, shared, only) in [(5, 800, 50), (5, 600, 100), (3, 300, 100), (10, 900, 25)] {
            let banding = Banding::new(rows).unwrap();
            let j = shared as f64 / (shared + 2 * only) as f64;
            let p = j.powi(rows as i32);
            let trials = 200;
            let mut agree = 0;
            for _ in 0..trials {
                seed += 1;
                let (a, b) = pair(seed * 104_729, shared, only);
                let (ka, kb) = (
                    Sketch::with_bands(a, banding).1,
                    Sketch::with_bands(b, banding).1,
                );
                agree += ka.iter().zip(&kb).filter(|(x, y)| x == y).count();
            }
            let n = (trials * BANDS) as f64;
            let share = agree as f64 / n;
            let sd = (p * (1.0 - p) / n).sqrt();
            assert!(
                (share - p).abs() <= 5.0 * sd,
                "r {rows}, J {j:.3}: bands agree {share:.4}, expected {p:.4} ± {sd:.4}"
            );
        }
    }

    proptest! {
        /// Solving for the walk's step gives what walking gives.
        #[test]
        fn borrowing_by_solving_equals_walking(
            filled_bins in proptest::collection::btree_set(0u16..BINS as u16, 1..SOLVE_MAX + 16),
            bin in 0usize..BINS,
        ) {
            let mut mins = [EMPTY; BINS];
            for &b in &filled_bins {
                mins[b as usize] = b as u64;
            }
            let filled: Vec<u16> = filled_bins.iter().copied().collect();
            let walk = &WALKS[bin];
            let mut step = 0;
            let walked = loop {
                let b = (walk.start as usize + step * walk.stride as usize) % BINS;
                if mins[b] != EMPTY {
                    break (b, step as u64);
                }
                step += 1;
            };
            prop_assume!(mins[bin] == EMPTY);
            let mask = BINS - 1;
            let inverse = walk.inverse as usize;
            let solved = filled
                .iter()
                .map(|&j| (j as usize, ((((j as usize).wrapping_sub(walk.start as usize) & mask) * inverse) & mask) as u64))
                .min_by_key(|&(_, s)| s)
                .unwrap();
            prop_assert_eq!(solved, walked);
            let mut full = [0u64; BINS / 64];
            for &b in &filled_bins {
                full[b as usize / 64] |= 1 << (b % 64);
            }
            // Both ways borrow()'s callers take: solving over the list, walking the bitmap.
            prop_assert_eq!(borrow(walk, &full, &filled), walked);
            prop_assert_eq!(borrow(walk, &full, &[]), walked);
            // The vector kernels: `borrowing_all_at_once_equals_walking`.
        }

        /// Every empty bin's borrowing at once, by the vector kernels, is what walking
        /// gives, from one filled bin (walks of up to 512 steps) to all but one.
        #[test]
        #[cfg(target_arch = "x86_64")]
        fn borrowing_all_at_once_equals_walking(
            filled_bins in proptest::collection::btree_set(0u16..BINS as u16, 1..BINS),
        ) {
            let mut mins = [EMPTY; BINS];
            let mut full = [0u64; BINS / 64];
            for &b in &filled_bins {
                mins[b as usize] = u64::from(b) * 0x9E37_79B9;
                full[b as usize / 64] |= 1 << (b % 64);
            }
            let walked: Vec<(usize, u64)> = (0..BINS)
                .filter(|&j| mins[j] == EMPTY)
                .map(|j| (j, {
                    let (b, step) = borrow(&WALKS[j], &full, &[]);
                    value(mins[b], step + 1)
                }))
                .collect();
            prop_assert_eq!(filled_bitmap(&mins), full);
            let features = crate::arch::features();
            if features.avx2() {
                // SAFETY: the CPU has AVX2 (checked just above).
                prop_assert_eq!(unsafe { filled_bitmap_avx2(&mins) }, full);
                let mut values = [0u64; BINS];
                // SAFETY: the CPU has AVX2 (checked just above).
                unsafe { borrow_all_avx2(&full, &mins, &mut values) };
                for &(j, v) in &walked {
                    prop_assert_eq!(values[j], v, "AVX2, bin {}", j);
                }
            }
            if features.avx512vbmi() {
                let mut values = [0u64; BINS];
                // SAFETY: the CPU has AVX-512 VBMI (checked just above).
                unsafe { borrow_all_avx512(&full, &mins, &mut values) };
                for &(j, v) in &walked {
                    prop_assert_eq!(values[j], v, "AVX-512, bin {}", j);
                }
            }
        }
    }
}
