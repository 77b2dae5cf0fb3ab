//! The ASCII classes of 64-byte blocks as bit masks, bit `i` for byte `i`: what the word
//! scanners of fingerprints (`fingerprint::scan`) and of sketches (`jaccard::words`) read
//! instead of the bytes, 64 at a time.
//!
//! One SSE2 classifier serves both (SSE2 is part of every x86-64 target): the letter,
//! digit and `_` compares are shared, and each scanner gets only the masks it reads, the
//! fingerprints' scanner [`Classes`] (word joiners and UTF-8 lead bytes too), the
//! sketches' [`WordMasks`]. The AVX-512BW version of [`Classes`] does all 64 bytes a step.
//! The scalar versions are the reference the tests hold them to, and the versions off
//! x86-64.

/// The classes the fingerprints' word scanner reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Classes {
    /// ASCII letters.
    pub(crate) letter: u64,
    pub(crate) digit: u64,
    pub(crate) under: u64,
    /// `:` `.` `'`, which join two letters.
    pub(crate) mid_letter: u64,
    /// `,` `;` `.` `'`, which join two digits.
    pub(crate) mid_num: u64,
    /// Lead bytes of multi-byte UTF-8 characters (`0xC0..=0xFF`).
    pub(crate) lead: u64,
}

/// The classes the sketches' word scanner reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WordMasks {
    /// ASCII letters, digits and `_`.
    pub(crate) word: u64,
    /// Bytes of non-ASCII characters.
    pub(crate) high: u64,
}

/// The [`Classes`] of 64 bytes.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline]
pub(crate) fn classes(block: &[u8; 64]) -> Classes {
    // SAFETY: SSE2 is enabled for this build (the cfg above; it is part of every x86-64
    // target), so its instructions exist on any CPU the program runs on.
    unsafe { sse2::<true>(block).0 }
}

/// The [`WordMasks`] classes of 64 bytes.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline]
pub(crate) fn words(block: &[u8; 64]) -> WordMasks {
    // SAFETY: as in `classes`.
    unsafe { sse2::<false>(block).1 }
}

/// The [`Classes`] of 64 bytes.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline]
pub(crate) fn classes(block: &[u8; 64]) -> Classes {
    classes_scalar(block)
}

/// The [`WordMasks`] classes of 64 bytes.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline]
pub(crate) fn words(block: &[u8; 64]) -> WordMasks {
    words_scalar(block)
}

/// The classes of 64 bytes, 16 at a time: ranges by signed byte compares (exact on ASCII;
/// non-ASCII bytes are negative and fall in no range), then one `movemask` per class.
/// With `FULL` the [`Classes`] (the [`WordMasks`] left empty), else the [`WordMasks`] (the
/// [`Classes`] left empty): a scanner pays only for the masks it reads.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn sse2<const FULL: bool>(block: &[u8; 64]) -> (Classes, WordMasks) {
    use std::arch::x86_64::*;

    let splat = |c: u8| _mm_set1_epi8(c as i8);
    let within = |x: __m128i, lo: u8, hi: u8| {
        _mm_and_si128(
            _mm_cmpgt_epi8(x, splat(lo - 1)),
            _mm_cmplt_epi8(x, splat(hi + 1)),
        )
    };
    let mask = |v: __m128i| u64::from(_mm_movemask_epi8(v) as u16);
    let (mut c, mut w) = (Classes::default(), WordMasks::default());
    for (k, chunk) in block.chunks_exact(16).enumerate() {
        // SAFETY: `chunk` is 16 readable bytes; the load has no alignment requirement.
        let x = unsafe { _mm_loadu_si128(chunk.as_ptr().cast()) };
        // Setting bit 5 makes capitals small letters, and no other byte one.
        let letter = within(_mm_or_si128(x, splat(0x20)), b'a', b'z');
        let digit = within(x, b'0', b'9');
        let under = _mm_cmpeq_epi8(x, splat(b'_'));
        let shift = 16 * k;
        if !FULL {
            // One mask of the three: the sketches' words do not tell them apart.
            w.word |= mask(_mm_or_si128(letter, _mm_or_si128(digit, under))) << shift;
            w.high |= mask(x) << shift;
            continue;
        }
        let both = _mm_or_si128(
            _mm_cmpeq_epi8(x, splat(b'.')),
            _mm_cmpeq_epi8(x, splat(b'\'')),
        );
        let mid_letter = _mm_or_si128(both, _mm_cmpeq_epi8(x, splat(b':')));
        let mid_num = _mm_or_si128(
            both,
            _mm_or_si128(
                _mm_cmpeq_epi8(x, splat(b',')),
                _mm_cmpeq_epi8(x, splat(b';')),
            ),
        );
        c.letter |= mask(letter) << shift;
        c.digit |= mask(digit) << shift;
        c.under |= mask(under) << shift;
        c.mid_letter |= mask(mid_letter) << shift;
        c.mid_num |= mask(mid_num) << shift;
        let high = mask(x);
        if high != 0 {
            // Continuation bytes are 0x80..=0xBF: below 0xC0 as signed bytes.
            let cont = mask(_mm_cmplt_epi8(x, splat(0xC0)));
            c.lead |= (high & !cont) << shift;
        }
    }
    (c, w)
}

/// The [`Classes`] of 64 bytes with AVX-512BW: each class one or two compares of all 64
/// bytes straight into a mask (ranges as one unsigned compare of the bytes minus the
/// range's start; non-ASCII bytes fall in none).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) fn classes_avx512(block: &[u8; 64]) -> Classes {
    use std::arch::x86_64::*;

    // SAFETY: `block` is 64 readable bytes; the load has no alignment requirement.
    let x = unsafe { _mm512_loadu_si512(block.as_ptr().cast()) };
    let splat = |c: u8| _mm512_set1_epi8(c as i8);
    let within = |v: __m512i, lo: u8, hi: u8| {
        _mm512_cmple_epu8_mask(_mm512_sub_epi8(v, splat(lo)), splat(hi - lo))
    };
    let is = |c: u8| _mm512_cmpeq_epi8_mask(x, splat(c));
    let both = is(b'.') | is(b'\'');
    Classes {
        letter: within(_mm512_or_si512(x, splat(0x20)), b'a', b'z'),
        digit: within(x, b'0', b'9'),
        under: is(b'_'),
        mid_letter: both | is(b':'),
        mid_num: both | is(b',') | is(b';'),
        lead: _mm512_cmpge_epu8_mask(x, splat(0xC0)),
    }
}

/// The word masks of 64 bytes with AVX-512BW, as `(word | high, high)` of [`WordMasks`]:
/// two compares and the bytes' sign bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
pub(crate) fn word_masks_avx512(block: &[u8; 64]) -> (u64, u64) {
    use std::arch::x86_64::*;

    // SAFETY: `block` is 64 readable bytes; the load has no alignment requirement.
    let x = unsafe { _mm512_loadu_si512(block.as_ptr().cast()) };
    let splat = |c: u8| _mm512_set1_epi8(c as i8);
    let within = |v: __m512i, lo: u8, hi: u8| {
        _mm512_cmple_epu8_mask(_mm512_sub_epi8(v, splat(lo)), splat(hi - lo))
    };
    let high = _mm512_movepi8_mask(x);
    let word = within(_mm512_or_si512(x, splat(0x20)), b'a', b'z')
        | within(x, b'0', b'9')
        | _mm512_cmpeq_epi8_mask(x, splat(b'_'));
    (word | high, high)
}

/// The [`Classes`] of 64 bytes, a byte at a time.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
pub(crate) fn classes_scalar(block: &[u8; 64]) -> Classes {
    let mut m = Classes::default();
    for (i, &c) in block.iter().enumerate() {
        let bit = 1u64 << i;
        let set = |mask: &mut u64, yes: bool| *mask |= if yes { bit } else { 0 };
        set(&mut m.letter, c.is_ascii_alphabetic());
        set(&mut m.digit, c.is_ascii_digit());
        set(&mut m.under, c == b'_');
        set(&mut m.mid_letter, matches!(c, b':' | b'.' | b'\''));
        set(&mut m.mid_num, matches!(c, b',' | b';' | b'.' | b'\''));
        set(&mut m.lead, c >= 0xC0);
    }
    m
}

/// The [`WordMasks`] classes of 64 bytes, a byte at a time.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
pub(crate) fn words_scalar(block: &[u8; 64]) -> WordMasks {
    let mut m = WordMasks::default();
    for (i, &c) in block.iter().enumerate() {
        m.word |= u64::from(c.is_ascii_alphanumeric() || c == b'_') << i;
        m.high |= u64::from(c >= 0x80) << i;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn block_of(bytes: &[u8]) -> [u8; 64] {
        let mut b = [0u8; 64];
        b.copy_from_slice(bytes);
        b
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn classes_are_the_scalar_ones(bytes in proptest::collection::vec(any::<u8>(), 64)) {
            let block = block_of(&bytes);
            prop_assert_eq!(classes(&block), classes_scalar(&block));
            prop_assert_eq!(words(&block), words_scalar(&block));
            #[cfg(target_arch = "x86_64")]
            if crate::arch::cpu().avx512bw() {
                // SAFETY: the CPU has AVX-512BW (and so F), checked just above.
                prop_assert_eq!(unsafe { classes_avx512(&block) }, classes_scalar(&block));
                let w = words_scalar(&block);
                // SAFETY: as above.
                prop_assert_eq!(unsafe { word_masks_avx512(&block) }, (w.word | w.high, w.high));
            }
        }

        /// Every byte value at every place, among ASCII of every class.
        #[test]
        fn classes_are_the_scalar_ones_on_ascii(bytes in proptest::collection::vec(
            prop_oneof![any::<u8>(), 0u8..0x80, Just(b'.'), Just(b'\''), Just(b'_')],
            64,
        )) {
            let block = block_of(&bytes);
            prop_assert_eq!(classes(&block), classes_scalar(&block));
            prop_assert_eq!(words(&block), words_scalar(&block));
            #[cfg(target_arch = "x86_64")]
            if crate::arch::cpu().avx512bw() {
                // SAFETY: the CPU has AVX-512BW (and so F), checked just above.
                prop_assert_eq!(unsafe { classes_avx512(&block) }, classes_scalar(&block));
                let w = words_scalar(&block);
                // SAFETY: as above.
                prop_assert_eq!(unsafe { word_masks_avx512(&block) }, (w.word | w.high, w.high));
            }
        }
    }
}
