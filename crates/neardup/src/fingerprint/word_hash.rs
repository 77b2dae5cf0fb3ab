//! The feature hash of a word inside an ASCII text, without a branch on its length.
//!
//! xxh3 hashes 1–3, 4–8, 9–16 and longer inputs by different formulas, and the lengths of
//! consecutive words follow no pattern, so its dispatch often mispredicts. Words of up to
//! 8 bytes, most of them, take both short formulas here: after their first mix they share
//! their shape (multiply, mix, multiply, shift) and differ only in constants, so one chain
//! of multiplies serves both, its constants loaded from a table indexed by the length
//! class. The result is exactly `xxh3_64_with_seed(word, SEED)`, which the tests hold it
//! to.
//!
//! Where the CPU has AVX-512, the same formulas run eight words at a time
//! ([`word_hashes`]), and so do the hashes of two-word shingles ([`pair_hashes`]) and the
//! lane rehash of wide fingerprints ([`lane_hashes`], also four at a time with AVX2);
//! the scalar functions stay the reference the tests hold each vector path to, and the
//! path taken where the CPU has neither.

use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::SEED;

/// The first 24 bytes of xxh3's default secret, all that inputs of up to 8 bytes read.
const SECRET: [u8; 24] = [
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb,
];

const fn secret32(i: usize) -> u64 {
    u32::from_le_bytes([SECRET[i], SECRET[i + 1], SECRET[i + 2], SECRET[i + 3]]) as u64
}

const fn secret64(i: usize) -> u64 {
    secret32(i) | secret32(i + 4) << 32
}

/// The seed-dependent keys of the 1–3 and 4–8 byte formulas, folded at compile time.
const FLIP_1_3: u64 = (secret32(0) ^ secret32(4)).wrapping_add(SEED);
const FLIP_4_8: u64 =
    (secret64(8) ^ secret64(16)).wrapping_sub(SEED ^ (((SEED as u32).swap_bytes() as u64) << 32));

/// What differs between the finishes of 1–3 bytes (XXH64's avalanche) and of 4–8 bytes
/// (xxh3's rrmxmx), after their first mix: multipliers and shifts (rrmxmx also adds the
/// length). Indexed by `len >= 4`, a load instead of a select per constant.
struct Finish {
    mul1: u64,
    shift1: u32,
    mul2: u64,
    shift2: u32,
}

static FINISH: [Finish; 2] = [
    Finish {
        mul1: 0xC2B2_AE3D_27D4_EB4F,
        shift1: 29,
        mul2: 0x1656_67B1_9E37_79F9,
        shift2: 32,
    },
    Finish {
        mul1: 0x9FB2_1C65_1E98_DF25,
        shift1: 35,
        mul2: 0x9FB2_1C65_1E98_DF25,
        shift2: 28,
    },
];

fn read32(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u64::from(u32::from_le_bytes(w))
}

/// `xxh3_64_with_seed(&text[start..end], SEED)`, for a non-empty word of `text`.
#[inline(always)]
pub(crate) fn word_hash(text: &[u8], start: usize, end: usize) -> u64 {
    debug_assert!(start < end, "an empty word");
    short_word_hash::<false>(text, start, end).unwrap_or_else(|| long_word_hash(text, start, end))
}

/// [`word_hash`] of a word of 1 to 8 bytes (with `LOWER`, of ASCII bytes, its capitals
/// lowered as they are read), or `None` for any other word, which the caller hashes.
#[inline(always)]
fn short_word_hash<const LOWER: bool>(text: &[u8], start: usize, end: usize) -> Option<u64> {
    let len = end.wrapping_sub(start);
    if len > 8 || start >= end || end > text.len() || text.len() < 4 {
        return None;
    }
    // From here `start < end <= text.len()` and `text.len() >= 4`: the reads below are
    // in bounds, and the compiler sees it (no check per read).
    let n = len as u64;
    // Lowering is per byte and leaves the length's byte (1 to 3) alone. Bytes read from
    // outside a word are lowered too, but only ever land in a formula that is discarded.
    let lower = |x: u64| if LOWER { lower8(x) } else { x };
    // 1–3 bytes: the first, middle and last byte with the length.
    let small = (u64::from(text[start]) << 16)
        | (u64::from(text[start + (len >> 1)]) << 24)
        | u64::from(text[end - 1])
        | (n << 8);
    let small = lower(small) ^ FLIP_1_3;
    // 4–8 bytes: the first and last 4. For shorter words the reads move inside the text;
    // what they read is then discarded.
    let first = lower(read32(text, start.min(text.len() - 4)));
    let last = lower(read32(text, end.max(4) - 4));
    let mid = last.wrapping_add(first << 32) ^ FLIP_4_8;
    let mid4 = len >= 4;
    // The first mixes differ in shape, so both are computed, and one is kept by a mask
    // (all ones for 4–8 bytes): a select the compiler cannot turn into a branch.
    let m = 0u64.wrapping_sub(u64::from(mid4));
    let h =
        ((mid ^ mid.rotate_left(49) ^ mid.rotate_left(24)) & m) | ((small ^ (small >> 33)) & !m);
    let f = &FINISH[usize::from(mid4)];
    let h = h.wrapping_mul(f.mul1);
    let h = h ^ (h >> f.shift1).wrapping_add(n & m);
    let h = h.wrapping_mul(f.mul2);
    Some(h ^ (h >> f.shift2))
}

/// Appends to `out` the [`word_hash`] of each word `bounds` gives in `text` (non-empty
/// words, `start < end <= text.len()`). Where the CPU has AVX-512 (F, DQ and BW), eight words at
/// a time: the eight bytes that hold each word gathered, both short formulas worked out
/// in every lane and one kept by the lane's length; words over 8 bytes are hashed one by
/// one afterwards. Elsewhere it is the scalar loop, with the same hashes.
pub(super) fn word_hashes(text: &[u8], bounds: &[(usize, usize)], out: &mut Vec<u64>) {
    hash_words::<false>(text, bounds, out);
}

/// [`word_hashes`] of the words lowercased: for each word of ASCII bytes `bounds` gives in
/// `text`, `xxh3_64_with_seed` of the word with `A`–`Z` made `a`–`z` (the words of the
/// Jaccard shingles, which are lowercased and come from text that is not normalised).
pub(crate) fn lowered_word_hashes(text: &[u8], bounds: &[(usize, usize)], out: &mut Vec<u64>) {
    hash_words::<true>(text, bounds, out);
}

/// [`word_hashes`], or with `LOWER` [`lowered_word_hashes`].
fn hash_words<const LOWER: bool>(text: &[u8], bounds: &[(usize, usize)], out: &mut Vec<u64>) {
    #[cfg(target_arch = "x86_64")]
    if crate::arch::features().avx512dq() && crate::arch::features().avx512bw() {
        // SAFETY: the CPU has AVX-512F, DQ and BW (checked just above; DQ implies F).
        unsafe { word_hashes_avx512::<LOWER>(text, bounds, out) };
        return;
    }
    out.extend(
        bounds
            .iter()
            .map(|&(start, end)| one_word_hash::<LOWER>(text, start, end)),
    );
}

/// One word's [`word_hash`], or with `LOWER` its [`lowered_word_hash`].
#[inline(always)]
fn one_word_hash<const LOWER: bool>(text: &[u8], start: usize, end: usize) -> u64 {
    match LOWER {
        true => lowered_word_hash(text, start, end),
        false => word_hash(text, start, end),
    }
}

/// `xxh3_64_with_seed` of `text[start..end]` lowercased (ASCII letters only).
#[inline(always)]
fn lowered_word_hash(text: &[u8], start: usize, end: usize) -> u64 {
    // Inlined in the loop over a text's words, so that the hashes of consecutive words
    // overlap; the longer words' hash is a call.
    match short_word_hash::<true>(text, start, end) {
        Some(h) => h,
        None => lowered_long_word_hash(text, start, end),
    }
}

/// [`lowered_word_hash`] of a word of more than 8 bytes, or of any word of a text shorter
/// than 4 bytes.
#[inline(never)]
fn lowered_long_word_hash(text: &[u8], start: usize, end: usize) -> u64 {
    let len = end.wrapping_sub(start);
    if (9..=16).contains(&len) && end <= text.len() {
        // Most long words: both reads lie inside the word, whose bytes are ASCII, so they
        // are lowercased in place of the word.
        return hash_9_16(
            lower8(read64(text, start)),
            lower8(read64(text, end - 8)),
            len,
        );
    }
    let word = &text[start..end];
    if !word.iter().any(u8::is_ascii_uppercase) {
        return word_hash(text, start, end);
    }
    // Long capitalised words are common in code (`ThreadPoolExecutor`): lowercased on the
    // stack, and only the rare longer one into an allocation.
    let mut lower = [0u8; 64];
    match lower.get_mut(..word.len()) {
        Some(l) => {
            for (l, &b) in l.iter_mut().zip(word) {
                *l = b.to_ascii_lowercase();
            }
            word_hash(&lower, 0, word.len())
        }
        None => xxh3_64_with_seed(&word.to_ascii_lowercase(), SEED),
    }
}

/// [`word_hashes`] eight words at a time; with `LOWER`, [`lowered_word_hashes`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw")]
fn word_hashes_avx512<const LOWER: bool>(
    text: &[u8],
    bounds: &[(usize, usize)],
    out: &mut Vec<u64>,
) {
    use std::arch::x86_64::*;

    let one = |start: usize, end: usize| one_word_hash::<LOWER>(text, start, end);
    let from = out.len();
    // The gather reads eight bytes at offsets clamped to `text.len() - 8`, whatever the
    // bounds, and holds offsets in 64-bit lanes.
    if text.len() < 8 || i64::try_from(text.len()).is_err() {
        out.extend(bounds.iter().map(|&(start, end)| one(start, end)));
        return;
    }
    out.reserve(bounds.len());
    let splat = |x: u64| _mm512_set1_epi64(x as i64);
    let last8 = splat(text.len() as u64 - 8);
    let byte = splat(0xFF);
    let low32 = splat(0xFFFF_FFFF);
    let evens = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
    let odds = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
    let spare = &mut out.spare_capacity_mut()[..bounds.len()];
    let mut chunks = spare.chunks_exact_mut(8);
    for (pairs, chunk) in bounds.chunks_exact(8).zip(&mut chunks) {
        // SAFETY: eight `(usize, usize)` are 128 readable bytes; usize is 64 bits here.
        let (p0, p1) = unsafe {
            let at = pairs.as_ptr().cast::<__m512i>();
            (_mm512_loadu_si512(at), _mm512_loadu_si512(at.add(1)))
        };
        let start = _mm512_permutex2var_epi64(p0, evens, p1);
        let end = _mm512_permutex2var_epi64(p0, odds, p1);
        let n = _mm512_sub_epi64(end, start);
        // A word of up to 8 bytes lies within the eight from `start`, or, near the text's
        // end, within its last eight: one read holds it.
        let base = _mm512_min_epu64(start, last8);
        // SAFETY: every offset is at most `text.len() - 8` (the clamp above), so the
        // gather reads eight bytes of `text`.
        let word = unsafe { _mm512_i64gather_epi64::<1>(base, text.as_ptr().cast()) };
        let word = if LOWER { lowered(word) } else { word };
        // Bit offsets of the word's bytes in `word` (shifts of 64 or more give 0, in lanes
        // whose result is not kept).
        let off = _mm512_slli_epi64::<3>(_mm512_sub_epi64(start, base));
        let bits = |bytes: __m512i| _mm512_add_epi64(off, _mm512_slli_epi64::<3>(bytes));
        let at = |i: __m512i| _mm512_and_si512(_mm512_srlv_epi64(word, i), byte);
        // 4–8 bytes: the first and last four.
        let first = _mm512_and_si512(_mm512_srlv_epi64(word, off), low32);
        let last = _mm512_and_si512(
            _mm512_srlv_epi64(word, bits(_mm512_sub_epi64(n, splat(4)))),
            low32,
        );
        // 1–3 bytes: the first, middle and last byte.
        let b_first = at(off);
        let b_mid = at(bits(_mm512_srli_epi64::<1>(n)));
        let b_last = at(bits(_mm512_sub_epi64(n, splat(1))));
        let small = _mm512_or_si512(
            _mm512_or_si512(
                _mm512_slli_epi64::<16>(b_first),
                _mm512_slli_epi64::<24>(b_mid),
            ),
            _mm512_or_si512(b_last, _mm512_slli_epi64::<8>(n)),
        );
        let small = _mm512_xor_si512(small, splat(FLIP_1_3));
        let small = _mm512_xor_si512(small, _mm512_srli_epi64::<33>(small));
        // 4–8 bytes.
        let mid = _mm512_xor_si512(
            _mm512_add_epi64(last, _mm512_slli_epi64::<32>(first)),
            splat(FLIP_4_8),
        );
        let mid = _mm512_xor_si512(
            mid,
            _mm512_xor_si512(_mm512_rol_epi64::<49>(mid), _mm512_rol_epi64::<24>(mid)),
        );
        let mid4 = _mm512_cmpge_epu64_mask(n, splat(4));
        let pick = |a: &Finish, b: &Finish, f: fn(&Finish) -> u64| {
            _mm512_mask_blend_epi64(mid4, splat(f(a)), splat(f(b)))
        };
        let [short, four] = &FINISH;
        let h = _mm512_mask_blend_epi64(mid4, small, mid);
        let h = _mm512_mullo_epi64(h, pick(short, four, |f| f.mul1));
        let shifted = _mm512_srlv_epi64(h, pick(short, four, |f| u64::from(f.shift1)));
        let h = _mm512_xor_si512(h, _mm512_mask_add_epi64(shifted, mid4, shifted, n));
        let h = _mm512_mullo_epi64(h, pick(short, four, |f| f.mul2));
        let h = _mm512_xor_si512(
            h,
            _mm512_srlv_epi64(h, pick(short, four, |f| u64::from(f.shift2))),
        );
        // SAFETY: the store writes the eight words of `chunk`, unaligned.
        unsafe { _mm512_storeu_si512(chunk.as_mut_ptr().cast(), h) };
        // Words over 8 bytes, written again.
        let mut over = _mm512_cmpgt_epu64_mask(n, splat(8));
        while over != 0 {
            let i = over.trailing_zeros() as usize;
            over &= over - 1;
            let (start, end) = pairs[i];
            chunk[i].write(one(start, end));
        }
    }
    let tail = chunks.into_remainder();
    let done = bounds.len() - tail.len();
    for (slot, &(start, end)) in tail.iter_mut().zip(&bounds[done..]) {
        slot.write(one(start, end));
    }
    // SAFETY: the `bounds.len()` words after `from` are written just above: the chunks of
    // eight by the vector store (words over 8 bytes written again), the rest one by one.
    unsafe { out.set_len(from + bounds.len()) };
}

/// The bytes `A`–`Z` of `v` made `a`–`z`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) fn lowered(v: std::arch::x86_64::__m512i) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;

    let upper = _mm512_cmple_epu8_mask(
        _mm512_sub_epi8(v, _mm512_set1_epi8(b'A' as i8)),
        _mm512_set1_epi8(25),
    );
    _mm512_or_si512(v, _mm512_maskz_set1_epi8(upper, 0x20))
}

/// [`word_hash`] of a word over 8 bytes: xxh3's 9–16 byte formula inline (most long words
/// are that long), the library beyond.
#[inline(always)]
fn long_word_hash(text: &[u8], start: usize, end: usize) -> u64 {
    let len = end.wrapping_sub(start);
    if !(9..=16).contains(&len) || end > text.len() {
        return xxh3_64_with_seed(&text[start..end], SEED);
    }
    hash_9_16(read64(text, start), read64(text, end - 8), len)
}

/// xxh3's 9–16 byte formula of a word of `len` bytes whose first and last eight are
/// `first` and `last`.
#[inline(always)]
fn hash_9_16(first: u64, last: u64, len: usize) -> u64 {
    let lo = first ^ FLIP_9_16_LO;
    let hi = last ^ FLIP_9_16_HI;
    let product = u128::from(lo) * u128::from(hi);
    let acc = (len as u64)
        .wrapping_add(lo.swap_bytes())
        .wrapping_add(hi)
        .wrapping_add(product as u64 ^ (product >> 64) as u64);
    // xxh3's avalanche.
    let acc = (acc ^ (acc >> 37)).wrapping_mul(0x1656_6791_9E37_79F9);
    acc ^ (acc >> 32)
}

/// The eight ASCII bytes of `x` with `A`–`Z` made `a`–`z`, all at once: a byte is a
/// capital when adding `0x80 - b'A'` sets its top bit and adding `0x80 - b'Z' - 1` does not
/// (no sum carries into the next byte, as every byte is below 0x80).
#[inline(always)]
fn lower8(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let at_least_a = x.wrapping_add(ONES * u64::from(0x80 - b'A'));
    let above_z = x.wrapping_add(ONES * u64::from(0x80 - b'Z' - 1));
    let capital = at_least_a & !above_z & (ONES * 0x80);
    x | capital >> 2
}

fn read64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Bytes 24..56 of xxh3's default secret, which inputs of 9 to 16 bytes read.
const SECRET_24_56: [u8; 32] = [
    0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f, 0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78,
    0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21, 0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e,
];

const fn secret_hi64(i: usize) -> u64 {
    u64::from_le_bytes([
        SECRET_24_56[i - 24],
        SECRET_24_56[i - 23],
        SECRET_24_56[i - 22],
        SECRET_24_56[i - 21],
        SECRET_24_56[i - 20],
        SECRET_24_56[i - 19],
        SECRET_24_56[i - 18],
        SECRET_24_56[i - 17],
    ])
}

/// The keys of xxh3's 9–16 byte formula under [`SEED`].
const FLIP_9_16_LO: u64 = (secret_hi64(24) ^ secret_hi64(32)).wrapping_add(SEED);
const FLIP_9_16_HI: u64 = (secret_hi64(40) ^ secret_hi64(48)).wrapping_sub(SEED);

/// `xxh3_64_with_seed` of the 16 bytes `a, b` (little-endian) under [`SEED`]: the hash of
/// a shingle of two tokens, its seed and length folded into constants at compile time.
#[inline(always)]
pub(super) fn pair_hash(a: u64, b: u64) -> u64 {
    let lo = a ^ FLIP_9_16_LO;
    let hi = b ^ FLIP_9_16_HI;
    let product = u128::from(lo) * u128::from(hi);
    let acc = 16u64
        .wrapping_add(lo.swap_bytes())
        .wrapping_add(hi)
        .wrapping_add(product as u64 ^ (product >> 64) as u64);
    // xxh3's avalanche.
    let acc = (acc ^ (acc >> 37)).wrapping_mul(0x1656_6791_9E37_79F9);
    acc ^ (acc >> 32)
}

/// Sets `out` to the [`pair_hash`] of each two neighbouring `tokens`, in order (one fewer
/// than the tokens). Where the CPU has AVX-512 (F, DQ and BW), eight pairs at a time:
/// xxh3 folds the 128-bit product of two 64-bit words, which no vector instruction
/// makes, so it is put together from four 32-bit products (`vpmuludq`). Elsewhere it is
/// the scalar loop, with the same hashes.
pub(super) fn pair_hashes(tokens: &[u64], out: &mut Vec<u64>) {
    out.clear();
    #[cfg(target_arch = "x86_64")]
    if crate::arch::features().avx512dq() && crate::arch::features().avx512bw() {
        // SAFETY: the CPU has AVX-512F, DQ and BW (checked just above; DQ implies F).
        unsafe { pair_hashes_avx512(tokens, out) };
        return;
    }
    out.extend(tokens.windows(2).map(|p| pair_hash(p[0], p[1])));
}

/// [`pair_hashes`] eight pairs at a time, the last few by [`pair_hash`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw")]
fn pair_hashes_avx512(tokens: &[u64], out: &mut Vec<u64>) {
    use std::arch::x86_64::*;

    let pairs = tokens.len().saturating_sub(1);
    // Written in place: zeroing first would cost a tenth of the hashing.
    out.reserve(pairs);
    let splat = |x: u64| _mm512_set1_epi64(x as i64);
    let low32 = splat(0xFFFF_FFFF);
    // Bytes 7..0 of each word, for `swap_bytes`.
    let reverse = _mm512_set_epi64(
        0x0809_0A0B_0C0D_0E0F,
        0x0001_0203_0405_0607,
        0x0809_0A0B_0C0D_0E0F,
        0x0001_0203_0405_0607,
        0x0809_0A0B_0C0D_0E0F,
        0x0001_0203_0405_0607,
        0x0809_0A0B_0C0D_0E0F,
        0x0001_0203_0405_0607,
    );
    let spare = &mut out.spare_capacity_mut()[..pairs];
    let mut chunks = spare.chunks_exact_mut(8);
    for (k, chunk) in (&mut chunks).enumerate() {
        let firsts = &tokens[8 * k..8 * k + 8];
        let seconds = &tokens[8 * k + 1..8 * k + 9];
        // SAFETY: each load reads the eight words of a slice of eight, unaligned.
        let (a, b) = unsafe {
            (
                _mm512_loadu_si512(firsts.as_ptr().cast()),
                _mm512_loadu_si512(seconds.as_ptr().cast()),
            )
        };
        let lo = _mm512_xor_si512(a, splat(FLIP_9_16_LO));
        let hi = _mm512_xor_si512(b, splat(FLIP_9_16_HI));
        // lo · hi = ll + (lh + hl) · 2³² + hh · 2⁶⁴, from 32-bit halves.
        let (lo_top, hi_top) = (_mm512_srli_epi64::<32>(lo), _mm512_srli_epi64::<32>(hi));
        let ll = _mm512_mul_epu32(lo, hi);
        let lh = _mm512_mul_epu32(lo, hi_top);
        let hl = _mm512_mul_epu32(lo_top, hi);
        let hh = _mm512_mul_epu32(lo_top, hi_top);
        // Bits 32 and up of the low word, with what carries out of them.
        let mid = _mm512_add_epi64(
            _mm512_srli_epi64::<32>(ll),
            _mm512_add_epi64(_mm512_and_si512(lh, low32), _mm512_and_si512(hl, low32)),
        );
        let product_low =
            _mm512_or_si512(_mm512_slli_epi64::<32>(mid), _mm512_and_si512(ll, low32));
        let product_high = _mm512_add_epi64(
            _mm512_add_epi64(hh, _mm512_srli_epi64::<32>(mid)),
            _mm512_add_epi64(_mm512_srli_epi64::<32>(lh), _mm512_srli_epi64::<32>(hl)),
        );
        let acc = _mm512_add_epi64(
            _mm512_add_epi64(splat(16), _mm512_shuffle_epi8(lo, reverse)),
            _mm512_add_epi64(hi, _mm512_xor_si512(product_low, product_high)),
        );
        // xxh3's avalanche.
        let acc = _mm512_xor_si512(acc, _mm512_srli_epi64::<37>(acc));
        let acc = _mm512_mullo_epi64(acc, splat(0x1656_6791_9E37_79F9));
        let acc = _mm512_xor_si512(acc, _mm512_srli_epi64::<32>(acc));
        // SAFETY: the store writes the eight words of `chunk`, unaligned.
        unsafe { _mm512_storeu_si512(chunk.as_mut_ptr().cast(), acc) };
    }
    let done = pairs - chunks.into_remainder().len();
    for (i, slot) in spare.iter_mut().enumerate().skip(done) {
        slot.write(pair_hash(tokens[i], tokens[i + 1]));
    }
    // SAFETY: `out` was empty, and its first `pairs` words are written just above: the
    // chunks of eight by the vector store, the rest one by one.
    unsafe { out.set_len(pairs) };
}

/// The key of xxh3's 4–8 byte formula for 8 bytes under seed `seed`.
const fn flip_4_8(seed: u64) -> u64 {
    let seed = seed ^ (((seed as u32).swap_bytes() as u64) << 32);
    (secret64(8) ^ secret64(16)).wrapping_sub(seed)
}

/// Per lane of a wide fingerprint, the key of its feature rehash (seed `SEED + lane`).
const LANE_FLIPS: [u64; super::LANES] = {
    let mut flips = [0u64; super::LANES];
    let mut lane = 0;
    while lane < super::LANES {
        flips[lane] = flip_4_8(SEED.wrapping_add(lane as u64));
        lane += 1;
    }
    flips
};

/// `xxh3_64_with_seed(&h.to_le_bytes(), SEED + lane)`: feature hash `h` as lane `lane` of
/// a wide fingerprint sees it (xxh3's 4–8 byte formula, which reads the two halves).
#[inline(always)]
pub(super) fn lane_hash(h: u64, lane: usize) -> u64 {
    let x = h.rotate_left(32) ^ LANE_FLIPS[lane];
    let x = x ^ x.rotate_left(49) ^ x.rotate_left(24);
    let x = x.wrapping_mul(0x9FB2_1C65_1E98_DF25);
    let x = x ^ (x >> 35).wrapping_add(8);
    let x = x.wrapping_mul(0x9FB2_1C65_1E98_DF25);
    x ^ (x >> 28)
}

/// Sets `out` to [`lane_hash`] of each of `hashes`, in order. Where the CPU multiplies
/// eight 64-bit words at once (AVX-512DQ), the loop is compiled for that, a vector of
/// features at a time; elsewhere it is the scalar loop. The hashes are the same.
pub(super) fn lane_hashes(hashes: &[u64], lane: usize, out: &mut Vec<u64>) {
    out.clear();
    #[cfg(target_arch = "x86_64")]
    if crate::arch::features().avx512dq() {
        // SAFETY: the CPU has AVX-512F and DQ (checked just above; DQ implies F).
        unsafe { lane_hashes_avx512(hashes, lane, out) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if crate::arch::features().avx2() {
        // SAFETY: the CPU has AVX2 (checked just above).
        unsafe { lane_hashes_avx2(hashes, lane, out) };
        return;
    }
    out.extend(hashes.iter().map(|&h| lane_hash(h, lane)));
}

/// [`lane_hashes`]' loop, compiled for AVX2: four features at a time, each 64-bit
/// multiply made of three 32-bit ones (`vpmuludq`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn lane_hashes_avx2(hashes: &[u64], lane: usize, out: &mut Vec<u64>) {
    out.extend(hashes.iter().map(|&h| lane_hash(h, lane)));
}

/// [`lane_hashes`]' loop, compiled for AVX-512 (`vpmullq`, `vprolq`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn lane_hashes_avx512(hashes: &[u64], lane: usize, out: &mut Vec<u64>) {
    out.extend(hashes.iter().map(|&h| lane_hash(h, lane)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Non-empty words of a text of `len` bytes, one per cut: from its place, of its
    /// length or to the text's end.
    fn words_in(len: usize, cuts: &[(prop::sample::Index, usize)]) -> Vec<(usize, usize)> {
        if len == 0 {
            return Vec::new();
        }
        cuts.iter()
            .map(|(at, n)| {
                let start = at.index(len);
                (start, (start + n).min(len))
            })
            .collect()
    }

    proptest! {
        #[test]
        fn pair_hash_is_xxh3(a in any::<u64>(), b in any::<u64>()) {
            let mut bytes = [0u8; 16];
            bytes[..8].copy_from_slice(&a.to_le_bytes());
            bytes[8..].copy_from_slice(&b.to_le_bytes());
            prop_assert_eq!(pair_hash(a, b), xxh3_64_with_seed(&bytes, SEED));
        }

        #[test]
        fn word_hashes_are_each_word_hash(
            text in proptest::collection::vec(any::<u8>(), 0..80),
            cuts in proptest::collection::vec((any::<prop::sample::Index>(), 1usize..20), 0..40),
        ) {
            // Words of every length anywhere, those near the end of the text among them.
            let bounds = words_in(text.len(), &cuts);
            let mut out = vec![7];
            word_hashes(&text, &bounds, &mut out);
            let mut want = vec![7];
            want.extend(bounds.iter().map(|&(start, end)| xxh3_64_with_seed(&text[start..end], SEED)));
            prop_assert_eq!(out, want);
        }

        #[test]
        fn lowered_word_hashes_are_xxh3_of_the_lowered_words(
            text in proptest::collection::vec(proptest::sample::select(b"aAzZ@[`{09_Qq".to_vec()), 0..160),
            cuts in proptest::collection::vec((any::<prop::sample::Index>(), 1usize..80), 0..40),
        ) {
            // Words of every length class: short, lowered on the stack, and past it.
            let bounds = words_in(text.len(), &cuts);
            let mut out = vec![7];
            lowered_word_hashes(&text, &bounds, &mut out);
            let mut want = vec![7];
            want.extend(bounds.iter().map(|&(start, end)| {
                xxh3_64_with_seed(&text[start..end].to_ascii_lowercase(), SEED)
            }));
            prop_assert_eq!(&out, &want);
            let mut scalar = vec![7];
            scalar.extend(bounds.iter().map(|&(start, end)| lowered_word_hash(&text, start, end)));
            prop_assert_eq!(scalar, want);
        }

        #[test]
        fn lower8_lowers_each_ascii_byte(bytes in proptest::collection::vec(0u8..0x80, 8)) {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes);
            let lowered = lower8(u64::from_le_bytes(word)).to_le_bytes();
            prop_assert_eq!(lowered, word.map(|b| b.to_ascii_lowercase()));
        }

        #[test]
        fn pair_hashes_are_each_pair_hash(tokens in proptest::collection::vec(any::<u64>(), 0..40)) {
            let mut out = vec![7];
            pair_hashes(&tokens, &mut out);
            let want: Vec<u64> = tokens.windows(2).map(|p| pair_hash(p[0], p[1])).collect();
            prop_assert_eq!(out, want);
        }

        #[test]
        fn lane_hashes_are_each_lane_hash(
            hashes in proptest::collection::vec(any::<u64>(), 0..100),
            lane in 0..super::super::LANES,
        ) {
            let mut out = vec![7];
            lane_hashes(&hashes, lane, &mut out);
            let want: Vec<u64> = hashes.iter().map(|&h| lane_hash(h, lane)).collect();
            prop_assert_eq!(out, want);
        }

        #[test]
        fn lane_hash_is_xxh3(h in any::<u64>(), lane in 0..super::super::LANES) {
            let seed = SEED.wrapping_add(lane as u64);
            prop_assert_eq!(lane_hash(h, lane), xxh3_64_with_seed(&h.to_le_bytes(), seed));
        }
    }

    #[test]
    fn every_length_at_every_place() {
        // Words of 1 to 40 bytes at the start, middle and end of texts of 1 to 48 bytes.
        let text: Vec<u8> = (0..48u8).map(|i| b'a' + i % 26).collect();
        for n in 1..=text.len() {
            let t = &text[..n];
            for start in 0..n {
                for end in start + 1..=n {
                    assert_eq!(
                        word_hash(t, start, end),
                        xxh3_64_with_seed(&t[start..end], SEED),
                        "text of {n} bytes, word {start}..{end}"
                    );
                }
            }
        }
    }

    proptest! {
        #[test]
        fn equals_xxh3(text in proptest::collection::vec(any::<u8>(), 1..64), a in any::<usize>(), b in any::<usize>()) {
            let (a, b) = (a % text.len(), b % text.len());
            let (start, end) = (a.min(b), a.max(b) + 1);
            prop_assert_eq!(word_hash(&text, start, end), xxh3_64_with_seed(&text[start..end], SEED));
        }
    }
}
