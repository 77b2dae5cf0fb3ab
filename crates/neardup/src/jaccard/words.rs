//! The words and shingles a Jaccard similarity is taken over, in every script: each
//! character of a script written without spaces between words ([`is_spaceless`]: Han,
//! kana, Thai, Lao, Khmer, Myanmar, Tibetan) is a word on its own, and everything else is
//! a lowercased `\w+` run as Python's `re.findall(r"\w+", text.lower())` makes it (what
//! datasketch and text-dedup users compute), in word 5-shingles. Text without spaceless
//! characters gets exactly the `\w+` words.

use std::cell::Cell;

use xxhash_rust::xxh3::xxh3_64_with_seed;

pub use super::spaceless::is_spaceless;
use crate::bmp::BmpTable;
use crate::classify;
pub use crate::fingerprint::compat::is_word_char;
use crate::fingerprint::word_hash::lowered_word_hashes;
use crate::fingerprint::SEED;

/// Words per shingle.
pub const SHINGLE: usize = 5;

/// The hash of one lowercased word: xxh3-64 of its UTF-8, seeded with the fingerprint
/// format's [`SEED`] (so a word hashes as a [`crate::fingerprint::token_hash`] does).
#[inline]
fn word_hash(word: &[u8]) -> u64 {
    xxh3_64_with_seed(word, SEED)
}

/// Calls `word` with the hash of every word of `text`, in order: each [`is_spaceless`]
/// character alone, and the maximal runs of other [`is_word_char`] characters of the text
/// lowercased as Python's `str.lower()` does (Unicode full lowercase, final sigma
/// included).
///
/// An ASCII byte that is not a word byte stays one when lowercased and ends any word, so
/// the text is cut at those bytes into runs of ASCII word bytes and non-ASCII characters,
/// found 64 bytes at a time. A run of ASCII alone is one word, hashed straight from the
/// text with its capitals lowered as its bytes are read; a run with non-ASCII characters
/// is lowercased and split a character at a time.
pub fn word_hashes(text: &str, word: impl FnMut(u64)) {
    with_words(text, |words| words.iter().copied().for_each(word));
}

/// One thread's buffers for the words of a text, kept from text to text: sketching a
/// document or a query allocates nothing once they have grown to its size.
#[derive(Debug, Default)]
struct Words {
    /// The text's word hashes, in order.
    hashes: Vec<u64>,
    /// The text's runs of ASCII word bytes and non-ASCII bytes, and where each run of
    /// non-ASCII bytes starts.
    runs: Vec<(usize, usize)>,
    highs: Vec<usize>,
    /// Its runs of ASCII alone, and, once a run with non-ASCII characters has come, their
    /// places in `hashes`.
    ascii: Vec<(usize, usize)>,
    places: Vec<usize>,
    /// The hashes of the ASCII runs, when they go to their places.
    ascii_hashes: Vec<u64>,
    /// A run with non-ASCII characters, lowercased a word at a time.
    buf: Vec<u8>,
}

/// Runs `f` with the hashes of `text`'s words ([`word_hashes`]), in this thread's buffers.
fn with_words<R>(text: &str, f: impl FnOnce(&[u64]) -> R) -> R {
    thread_local! {
        static WORDS: Cell<Words> = Cell::new(Words::default());
    }
    // Taken out while in use: an `f` that sketches another text gets fresh buffers.
    let mut words = WORDS.take();
    words.fill(text);
    let result = f(&words.hashes);
    WORDS.set(words);
    result
}

impl Words {
    /// The hashes of `text`'s words. The runs of ASCII alone are hashed together
    /// afterwards, eight at a time where the CPU allows ([`lowered_word_hashes`]); a run
    /// with non-ASCII characters is hashed where it stands.
    fn fill(&mut self, text: &str) {
        // A capital sigma lowercases by its context (final or not), which may reach across
        // the cuts (`ΑΣ'Α`): the standard library's `to_lowercase` applies the rule to the
        // whole text first.
        let lowered;
        let text = if !text.is_ascii() && text.contains('\u{03A3}') {
            lowered = text.to_lowercase();
            lowered.as_str()
        } else {
            text
        };
        let bytes = text.as_bytes();
        let Words {
            hashes,
            runs,
            highs,
            ascii,
            places,
            ascii_hashes,
            buf,
        } = self;
        hashes.clear();
        find_runs(bytes, runs, highs);
        if highs.is_empty() {
            lowered_word_hashes(bytes, runs, hashes);
            return;
        }
        if highs.len() * 8 < runs.len() {
            // Few runs with non-ASCII characters: every run hashed as if ASCII, then the
            // few spliced in, from the words their characters make.
            ascii_hashes.clear();
            lowered_word_hashes(bytes, runs, ascii_hashes);
            let mut copied = 0;
            let mut run = 0;
            for &h in highs.iter() {
                // The run that holds this run of non-ASCII bytes; one run may hold several.
                let Some(r) = runs
                    .get(run..)
                    .map(|rest| run + rest.partition_point(|&(_, e)| e <= h))
                else {
                    break;
                };
                if r < copied {
                    continue;
                }
                let Some(&(start, end)) = runs.get(r) else {
                    break;
                };
                hashes.extend_from_slice(ascii_hashes.get(copied..r).unwrap_or_default());
                // Cut at ASCII bytes, so on character boundaries.
                if let Some(text) = text.get(start..end) {
                    mixed_run(text, buf, &mut |w| hashes.push(w));
                }
                copied = r + 1;
                run = r;
            }
            hashes.extend_from_slice(ascii_hashes.get(copied..).unwrap_or_default());
            return;
        }
        ascii.clear();
        places.clear();
        let mut mixed = false;
        // Each run of non-ASCII bytes lies inside one run: a run holds some when the first
        // of them that starts at or after the run's start starts before its end.
        let mut next_high = highs.iter().copied().peekable();
        for &(start, end) in runs.iter() {
            while next_high.next_if(|&h| h < start).is_some() {}
            if next_high.peek().is_some_and(|&h| h < end) {
                if !mixed {
                    mixed = true;
                    places.extend(0..ascii.len());
                    hashes.resize(ascii.len(), 0);
                }
                // Cut at ASCII bytes, so on character boundaries.
                if let Some(run) = text.get(start..end) {
                    mixed_run(run, buf, &mut |w| hashes.push(w));
                }
            } else {
                if mixed {
                    places.push(hashes.len());
                    hashes.push(0);
                }
                ascii.push((start, end));
            }
        }
        if !mixed {
            lowered_word_hashes(bytes, ascii, hashes);
            return;
        }
        ascii_hashes.clear();
        lowered_word_hashes(bytes, ascii, ascii_hashes);
        for (&place, &h) in places.iter().zip(ascii_hashes.iter()) {
            hashes[place] = h;
        }
    }
}

/// Sets `runs` to the maximal runs of bytes of `bytes` that are ASCII word bytes or
/// non-ASCII, as `(start, end)`, and `highs` to where each maximal run of non-ASCII bytes
/// starts. Where the CPU has AVX-512BW, each 64-byte block's masks are three compares.
fn find_runs(bytes: &[u8], runs: &mut Vec<(usize, usize)>, highs: &mut Vec<usize>) {
    #[cfg(target_arch = "x86_64")]
    if crate::arch::features().avx512vbmi2() && crate::arch::features().avx512vbmi() {
        // SAFETY: the CPU has AVX-512 VBMI and VBMI2 (checked just above), which imply F
        // and BW.
        unsafe { find_runs_vbmi2(bytes, runs, highs) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if crate::arch::features().avx512bw() {
        // SAFETY: the CPU has AVX-512F and BW (checked just above; BW implies F).
        unsafe { find_runs_avx512(bytes, runs, highs) };
        return;
    }
    runs_of(bytes, runs, highs, |block| {
        let m = classify::words(block);
        (m.word | m.high, m.high)
    });
}

/// [`find_runs`] with each block's masks from AVX-512BW compares.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn find_runs_avx512(bytes: &[u8], runs: &mut Vec<(usize, usize)>, highs: &mut Vec<usize>) {
    // The closure inherits this function's target features, so the call is safe.
    runs_of(bytes, runs, highs, |block| {
        classify::word_masks_avx512(block)
    });
}

/// [`find_runs`] with a block's run starts and ends written eight at a time: their
/// places in the block packed by a byte compress, each eight widened to the runs' `(start,
/// end)` pairs, starts into new pairs, ends into the open ones by a masked store. The
/// loops over the set bits of the masks branched once a run on whether the block had
/// more, which no predictor learns.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2")]
fn find_runs_vbmi2(bytes: &[u8], runs: &mut Vec<(usize, usize)>, highs: &mut Vec<usize>) {
    use std::arch::x86_64::*;

    runs.clear();
    highs.clear();
    let iota = _mm512_set_epi8(
        63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41,
        40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18,
        17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0,
    );
    // Byte 8j of the eight 64-bit lanes picks packed place 8c + j (c added below).
    let pick = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    const LOW_BYTES: u64 = 0x0101_0101_0101_0101;
    // Pairs 0-3 and 4-7 of eight: each place to the pair's even (start) or odd (end) lane.
    let (first, second) = (
        _mm512_set_epi64(3, 3, 2, 2, 1, 1, 0, 0),
        _mm512_set_epi64(7, 7, 6, 6, 5, 5, 4, 4),
    );
    let (mut carry, mut high_carry) = (0u64, 0u64);
    let mut closed = 0;
    for (k, chunk) in bytes.chunks(64).enumerate() {
        let (r, h) = match chunk.first_chunk::<64>() {
            Some(block) => classify::word_masks_avx512(block),
            None => {
                let mut padded = [0u8; 64];
                padded[..chunk.len()].copy_from_slice(chunk);
                classify::word_masks_avx512(&padded)
            }
        };
        let at = _mm512_set1_epi64((64 * k) as i64);
        let before = r << 1 | carry;
        let starts = r & !before;
        let ends = !r & before;
        carry = r >> 63;
        // Eight places of `packed` from place 8c, plus the block's offset, as 64-bit lanes.
        let widen = |packed: __m512i, c: usize| {
            let sel = _mm512_add_epi64(pick, _mm512_set1_epi64((8 * c) as i64));
            _mm512_add_epi64(_mm512_maskz_permutexvar_epi8(LOW_BYTES, sel, packed), at)
        };
        let n = starts.count_ones() as usize;
        if n != 0 {
            let packed = _mm512_maskz_compress_epi8(starts, iota);
            // A block holds at most 32 starts: four groups of eight pairs, written whole.
            runs.reserve(32);
            let len = runs.len();
            let spare = runs.spare_capacity_mut();
            for c in 0..n.div_ceil(8) {
                let v = widen(packed, c);
                let out = &mut spare[8 * c..8 * c + 8];
                let p = out.as_mut_ptr().cast::<__m512i>();
                // SAFETY: `out` is eight pairs, 128 bytes of the vector's spare capacity.
                unsafe {
                    _mm512_storeu_si512(p, _mm512_maskz_permutexvar_epi64(0x55, first, v));
                    _mm512_storeu_si512(p.add(1), _mm512_maskz_permutexvar_epi64(0x55, second, v));
                }
            }
            // SAFETY: pairs `len .. len + n` were written just above (their ends as zeros,
            // set when the runs close).
            unsafe { runs.set_len(len + n) };
        }
        let m = ends.count_ones() as usize;
        if m != 0 {
            let packed = _mm512_maskz_compress_epi8(ends, iota);
            for c in 0..m.div_ceil(8) {
                let v = widen(packed, c);
                let from = closed + 8 * c;
                let count = (m - 8 * c).min(8);
                // The ends of the pairs `from .. from + count`: every run closed here is
                // open, so these pairs exist.
                let Some(out) = runs.get_mut(from..from + count) else {
                    break;
                };
                let p = out.as_mut_ptr().cast::<__m512i>();
                let lanes = (1u32 << (2 * count)) - 1;
                let (lo, hi) = ((lanes & 0xAA) as u8, (lanes >> 8 & 0xAA) as u8);
                // SAFETY: the masks write only the odd lanes of the `count` pairs of `out`
                // (the second store only when there are more than four).
                unsafe {
                    _mm512_mask_storeu_epi64(p.cast(), lo, _mm512_permutexvar_epi64(first, v));
                    if count > 4 {
                        let v = _mm512_permutexvar_epi64(second, v);
                        _mm512_mask_storeu_epi64(p.add(1).cast(), hi, v);
                    }
                }
            }
            closed += m;
        }
        let mut high_starts = h & !(h << 1 | high_carry);
        high_carry = h >> 63;
        while high_starts != 0 {
            highs.push(64 * k + high_starts.trailing_zeros() as usize);
            high_starts &= high_starts - 1;
        }
    }
    // A run that reaches the last byte of a text of whole blocks.
    if let Some(run) = runs.get_mut(closed) {
        run.1 = bytes.len();
    }
}

/// [`find_runs`] with `mask` giving a block's run bytes and non-ASCII bytes. A block's run
/// starts are its run bytes after a byte of no run, its run ends its bytes of no run after
/// a run byte (bit 0 looking back at the block before): the starts open runs in order and
/// the ends close them in the same order, so neither needs the other, and a block needs
/// no state but whether the block before ended in a run. The bytes past the text's end
/// read as zeros, which end a run.
#[inline(always)]
fn runs_of(
    bytes: &[u8],
    runs: &mut Vec<(usize, usize)>,
    highs: &mut Vec<usize>,
    mask: impl Fn(&[u8; 64]) -> (u64, u64),
) {
    runs.clear();
    highs.clear();
    // Whether the byte before the block is a run byte, and a non-ASCII one; the runs
    // closed so far.
    let (mut carry, mut high_carry) = (0u64, 0u64);
    let mut closed = 0;
    for (k, chunk) in bytes.chunks(64).enumerate() {
        let (r, h) = match chunk.first_chunk::<64>() {
            Some(block) => mask(block),
            None => {
                let mut padded = [0u8; 64];
                padded[..chunk.len()].copy_from_slice(chunk);
                mask(&padded)
            }
        };
        let at = 64 * k;
        let before = r << 1 | carry;
        let mut starts = r & !before;
        let mut ends = !r & before;
        carry = r >> 63;
        while starts != 0 {
            runs.push((at + starts.trailing_zeros() as usize, 0));
            starts &= starts - 1;
        }
        while ends != 0 {
            if let Some(run) = runs.get_mut(closed) {
                run.1 = at + ends.trailing_zeros() as usize;
            }
            closed += 1;
            ends &= ends - 1;
        }
        let mut high_starts = h & !(h << 1 | high_carry);
        high_carry = h >> 63;
        while high_starts != 0 {
            highs.push(at + high_starts.trailing_zeros() as usize);
            high_starts &= high_starts - 1;
        }
    }
    // A run that reaches the last byte of a text of whole blocks.
    if let Some(run) = runs.get_mut(closed) {
        run.1 = bytes.len();
    }
}

/// The words of `run`, a run of word characters of a text with some non-ASCII ones: each
/// character lowercased, ASCII ones as they are; a spaceless character is a word of its
/// own, whether or not it is a word character (a Thai vowel sign is one). Out of line, so
/// that the loop over runs stays the ASCII text's.
///
/// A character of the Basic Multilingual Plane is looked up in [`CLASSES`]: one load
/// where lowercasing and `\w` were two table searches (Cyrillic text spent two thirds of
/// its sketch in them). A word whose characters lowercase to themselves (Arabic, Hebrew,
/// the Indic scripts, lowercase Cyrillic) is hashed where it lies in the text, and copied
/// only from its first character that changes.
#[cold]
fn mixed_run(run: &str, buf: &mut Vec<u8>, word: &mut impl FnMut(u64)) {
    let bytes = run.as_bytes();
    // The word being read starts at `start`; once `copied`, it is in `buf` instead.
    let mut start = 0;
    let mut copied = false;
    buf.clear();
    let mut utf8 = [0u8; 4];
    let mut chars = run.char_indices();
    while let Some((i, c)) = chars.next() {
        // Before lowercasing: no spaceless character changes, and none other becomes one.
        if is_spaceless(c) {
            end_word(&bytes[start..i], &mut copied, buf, word);
            word(word_hash(c.encode_utf8(&mut utf8).as_bytes()));
            // A run of them (a Chinese clause) without the bookkeeping of words.
            let mut rest = chars.clone();
            while let Some((_, c)) = rest.next().filter(|&(_, c)| is_spaceless(c)) {
                word(word_hash(c.encode_utf8(&mut utf8).as_bytes()));
                chars = rest.clone();
            }
            start = bytes.len() - chars.as_str().len();
            continue;
        }
        let end = i + c.len_utf8();
        let class = CLASSES.of(c);
        match class & KIND {
            WORD if class & !KIND == u32::from(c) => {
                if copied {
                    buf.extend_from_slice(&bytes[i..end]);
                }
            }
            APART => {
                end_word(&bytes[start..i], &mut copied, buf, word);
                start = end;
            }
            kind => {
                if !copied {
                    buf.extend_from_slice(&bytes[start..i]);
                    copied = true;
                }
                if kind == WORD {
                    push_char(buf, char::from_u32(class & !KIND).unwrap_or(c));
                    continue;
                }
                // Lowercased into more than one character (`İ`): the general rule.
                for l in c.to_lowercase() {
                    if is_word_char(l) {
                        push_char(buf, l);
                    } else if !buf.is_empty() {
                        word(word_hash(buf));
                        buf.clear();
                    }
                }
            }
        }
    }
    end_word(&bytes[start..], &mut copied, buf, word);
}

/// Ends the word of [`mixed_run`] read so far: `text` as it lies, or `buf` once `copied`.
#[inline(always)]
fn end_word(text: &[u8], copied: &mut bool, buf: &mut Vec<u8>, word: &mut impl FnMut(u64)) {
    if *copied {
        if !buf.is_empty() {
            word(word_hash(buf));
            buf.clear();
        }
        *copied = false;
    } else if !text.is_empty() {
        word(word_hash(text));
    }
}

#[inline(always)]
fn push_char(buf: &mut Vec<u8>, c: char) {
    let mut utf8 = [0u8; 4];
    buf.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
}

/// The kind of a class ([`class_of`]): its top two bits.
const KIND: u32 = 3 << 30;
/// Ends a word, and is none: lowercased, not a word character.
const APART: u32 = 0;
/// Lowercases to one word character, the class's low bits.
const WORD: u32 = 1 << 30;
/// Lowercases to more than one character: the general rule.
const SLOW: u32 = 3 << 30;

/// What `c`, not [`is_spaceless`], does in a word, as [`mixed_run`]'s general rule has it.
fn class_of(c: char) -> u32 {
    let mut lower = c.to_lowercase();
    match (lower.next(), lower.next()) {
        (Some(l), None) if is_word_char(l) => WORD | u32::from(l),
        (Some(_), None) => APART,
        _ => SLOW,
    }
}

/// [`class_of`] every character, tabled in the Basic Multilingual Plane.
static CLASSES: BmpTable<u32> = BmpTable::new(class_of, SLOW);

/// Multiplier of the polynomial that combines a shingle's word hashes.
const P: u64 = 0x9E37_79B9_7F4A_7C15;
/// Seeds of the final mix of full shingles and of the one shingle of a short text.
const SHINGLE_SEED: u64 = 0x6A61_6363_6172_6435; // "jaccard5"
const SHORT_SEED: u64 = 0x6A61_6363_6172_6473; // "jaccards"

/// The murmur3 finaliser: every input bit reaches every output bit.
#[inline]
pub(crate) fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(FMIX_1);
    h ^= h >> 33;
    h = h.wrapping_mul(FMIX_2);
    h ^= h >> 33;
    h
}

/// The multipliers of [`fmix64`].
const FMIX_1: u64 = 0xff51_afd7_ed55_8ccd;
const FMIX_2: u64 = 0xc4ce_b9fe_1a85_ec53;

/// Calls `shingle` with the hash of every word 5-shingle of `text` (repeats included), in
/// order; a text of one to four words has one shingle, of all its words; a text without
/// words has none. A shingle's hash is `fmix64(seed ^ Σ wᵢ·P^(4-i))` over its words'
/// hashes. Each shingle's polynomial is worked out whole, from the text's word hashes
/// gathered first: shingles are then independent, eight at a time where the CPU has
/// AVX-512, where a rolling polynomial would chain them.
pub fn shingle_hashes(text: &str, mut shingle: impl FnMut(u64)) {
    with_words(text, |words| {
        let n = words.len();
        if (1..SHINGLE).contains(&n) {
            shingle(fmix64(poly(words) ^ SHORT_SEED ^ n as u64));
            return;
        }
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if crate::arch::features().avx512dq() {
            // SAFETY: the CPU has AVX-512F and DQ (checked just above; DQ implies F).
            done = unsafe { shingles_avx512(words, &mut shingle) };
        }
        for run in words.windows(SHINGLE).skip(done) {
            shingle(fmix64(poly(run) ^ SHINGLE_SEED));
        }
    })
}

/// `Σ wᵢ·P^(n-1-i)` over the `n` word hashes `words`.
#[inline(always)]
fn poly(words: &[u64]) -> u64 {
    words
        .iter()
        .fold(0u64, |p, &w| p.wrapping_mul(P).wrapping_add(w))
}

/// The shingles of `words` eight at a time, each of the eight polynomials from five
/// loads of eight neighbouring words; returns how many shingles it gave (the rest, fewer
/// than eight, are left to the caller).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn shingles_avx512(words: &[u64], shingle: &mut impl FnMut(u64)) -> usize {
    use std::arch::x86_64::*;

    let splat = |x: u64| _mm512_set1_epi64(x as i64);
    let shingles = (words.len() + 1).saturating_sub(SHINGLE);
    let mut out = [0u64; 8];
    for k in 0..shingles / 8 {
        let at = |j: usize| {
            let eight = &words[8 * k + j..8 * k + j + 8];
            // SAFETY: the load reads the eight words of `eight`, unaligned.
            unsafe { _mm512_loadu_si512(eight.as_ptr().cast()) }
        };
        let mut poly = at(0);
        for j in 1..SHINGLE {
            poly = _mm512_add_epi64(_mm512_mullo_epi64(poly, splat(P)), at(j));
        }
        let mut h = _mm512_xor_si512(poly, splat(SHINGLE_SEED));
        h = _mm512_xor_si512(h, _mm512_srli_epi64::<33>(h));
        h = _mm512_mullo_epi64(h, splat(FMIX_1));
        h = _mm512_xor_si512(h, _mm512_srli_epi64::<33>(h));
        h = _mm512_mullo_epi64(h, splat(FMIX_2));
        h = _mm512_xor_si512(h, _mm512_srli_epi64::<33>(h));
        // SAFETY: the store writes the eight words of `out`, unaligned.
        unsafe { _mm512_storeu_si512(out.as_mut_ptr().cast(), h) };
        out.iter().for_each(|&h| shingle(h));
    }
    shingles / 8 * 8
}

/// The distinct shingle hashes of `text`, sorted: the set a Jaccard similarity compares.
pub fn shingle_set(text: &str) -> Vec<u64> {
    let mut out = Vec::with_capacity(text.len() / 6 + 1);
    shingle_hashes(text, |h| out.push(h));
    sort_hashes(&mut out);
    out.dedup();
    out
}

/// Sorts hashes: one pass into buckets by their top bits (about a hash a bucket for hash
/// values spread evenly), then one insertion sort over them all, which moves each hash
/// only within its bucket. `sort_unstable`, comparing its way down, took 7% of `neardup
/// dedup`'s CPU on the natural corpus, all of it the exact pass's sets; this takes about
/// half as long (5.6 against 9.2 ns a hash, 3,000 random hashes). A bucket of more
/// than a few (hashes chosen to collide) is sorted by comparison first, so the insertion
/// sort never moves a hash far.
fn sort_hashes(hashes: &mut [u64]) {
    const FEW: usize = 64;
    const BUCKET: usize = 32;
    if hashes.len() < FEW {
        hashes.sort_unstable();
        return;
    }
    thread_local! {
        static SCRATCH: Cell<(Vec<u32>, Vec<u64>)> = const { Cell::new((Vec::new(), Vec::new())) };
    }
    // At most 2^16 buckets (256 KB of starts).
    let bits = (usize::BITS - hashes.len().leading_zeros()).min(16);
    let shift = 64 - bits;
    let (mut starts, mut sorted) = SCRATCH.take();
    starts.clear();
    starts.resize((1 << bits) + 1, 0);
    for &h in hashes.iter() {
        starts[(h >> shift) as usize + 1] += 1;
    }
    let mut crowded = false;
    for b in 1..starts.len() {
        crowded |= starts[b] as usize > BUCKET;
        starts[b] += starts[b - 1];
    }
    sorted.clear();
    sorted.resize(hashes.len(), 0);
    // `starts[b]` runs from bucket b's start to its end as the bucket fills, so that
    // afterwards bucket b lies between `starts[b - 1]` (0 for the first) and `starts[b]`.
    for &h in hashes.iter() {
        let b = (h >> shift) as usize;
        sorted[starts[b] as usize] = h;
        starts[b] += 1;
    }
    if crowded {
        let mut from = 0;
        for &end in &starts[..1 << bits] {
            let bucket = &mut sorted[from as usize..end as usize];
            if bucket.len() > BUCKET {
                bucket.sort_unstable();
            }
            from = end;
        }
    }
    for i in 1..sorted.len() {
        let x = sorted[i];
        let mut j = i;
        while j > 0 && sorted[j - 1] > x {
            sorted[j] = sorted[j - 1];
            j -= 1;
        }
        sorted[j] = x;
    }
    hashes.copy_from_slice(&sorted);
    SCRATCH.set((starts, sorted));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The plain definition: lowercase the whole text; each spaceless character is a
    /// word, and the runs of other word characters are words.
    fn plain_words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut run = String::new();
        for c in text.to_lowercase().chars() {
            if is_spaceless(c) || !is_word_char(c) {
                if !run.is_empty() {
                    out.push(std::mem::take(&mut run));
                }
                if is_spaceless(c) {
                    out.push(c.to_string());
                }
            } else {
                run.push(c);
            }
        }
        if !run.is_empty() {
            out.push(run);
        }
        out
    }

    /// The hashes of [`plain_words`].
    fn plain_hashes(text: &str) -> Vec<u64> {
        plain_words(text)
            .iter()
            .map(|w| word_hash(w.as_bytes()))
            .collect()
    }

    fn words(text: &str) -> Vec<u64> {
        let mut out = Vec::new();
        word_hashes(text, |h| out.push(h));
        out
    }

    /// Shingles from word strings, the slow way: join five words, hash the tuple.
    fn plain_shingles(text: &str) -> Vec<u64> {
        let w = plain_hashes(text);
        let poly = |ws: &[u64]| {
            ws.iter()
                .fold(0u64, |h, &x| h.wrapping_mul(P).wrapping_add(x))
        };
        if w.is_empty() {
            return vec![];
        }
        if w.len() < SHINGLE {
            return vec![fmix64(poly(&w) ^ SHORT_SEED ^ w.len() as u64)];
        }
        w.windows(SHINGLE)
            .map(|s| fmix64(poly(s) ^ SHINGLE_SEED))
            .collect()
    }

    #[test]
    fn python_word_examples() {
        // Each expectation is `re.findall(r"\w+", text.lower())` in CPython 3.11.
        let cases: &[(&str, &[&str])] = &[
            (
                "Don't stop: 3.14, e.g. snake_case",
                &["don", "t", "stop", "3", "14", "e", "g", "snake_case"],
            ),
            (
                "naïve café — 漢字 テスト",
                &["naïve", "café", "漢", "字", "テ", "ス", "ト"],
            ),
            ("İstanbul", &["i", "stanbul"]),
            ("ΟΔΟΣ ΟΔΟΣ.", &["οδος", "οδος"]),
            ("__init__ ½ ² x²", &["__init__", "½", "²", "x²"]),
            ("e\u{301}te", &["e", "te"]),
            ("", &[]),
            ("-- ...", &[]),
        ];
        // The spaceless scripts: `cjkwords.uwords(text)` of the natural CJK corpus.
        let spaceless: &[(&str, &[&str])] = &[
            (
                "中文文档ABC，カタカナー สวัสดี",
                &[
                    "中", "文", "文", "档", "abc", "カ", "タ", "カ", "ナ", "ー", "ส", "ว", "ั", "ส",
                    "ด", "ี",
                ],
            ),
            (
                "全角ＡＢＣと１２３、ｶﾀｶﾅｰﾞ 한국어",
                &[
                    "全",
                    "角",
                    "ａｂｃ",
                    "と",
                    "１２３",
                    "ｶ",
                    "ﾀ",
                    "ｶ",
                    "ﾅ",
                    "ｰ",
                    "ﾞ",
                    "한국어",
                ],
            ),
        ];
        for (text, want) in cases.iter().chain(spaceless) {
            let want: Vec<u64> = want.iter().map(|w| word_hash(w.as_bytes())).collect();
            assert_eq!(words(text), want, "{text:?}");
        }
    }

    #[test]
    fn short_texts_have_one_shingle() {
        assert!(shingle_set("").is_empty());
        assert!(shingle_set("...").is_empty());
        assert_eq!(shingle_set("one two three").len(), 1);
        assert_ne!(shingle_set("one two"), shingle_set("two one"));
        assert_eq!(shingle_set("a b c d e").len(), 1);
        assert_eq!(shingle_set("a b c d e f").len(), 2);
        // Five words and four words never share their shingle.
        assert_ne!(shingle_set("a b c d"), shingle_set("a b c d e"));
    }

    proptest! {
        /// The bucket sort orders hashes as comparison does, for hashes spread evenly,
        /// crowded into a few buckets, or repeated.
        #[test]
        fn sort_hashes_is_sort_unstable(
            mut hashes in prop::collection::vec(any::<u64>(), 0..3000),
            crowd in 0u32..64,
            repeat in 0usize..4,
        ) {
            for h in hashes.iter_mut() {
                *h >>= crowd;
            }
            let copies: Vec<u64> = hashes.iter().copied().take(repeat * 100).collect();
            hashes.extend(copies);
            let mut expected = hashes.clone();
            expected.sort_unstable();
            sort_hashes(&mut hashes);
            prop_assert_eq!(hashes, expected);
        }
    }

    #[test]
    fn every_character_makes_the_words_of_the_plain_definition() {
        // Each character of every plane, among others of its block, before and after
        // unchanged and changed letters of its own (the copy of a word starting at its
        // first changed character), ASCII capitals and separators, and `İ`, which
        // lowercases into two characters.
        let chars: Vec<char> = (0..=0x10_FFFF).filter_map(char::from_u32).collect();
        for block in chars.chunks(16) {
            let mut text = String::new();
            for (k, &c) in block.iter().enumerate() {
                text.push(c);
                text.push_str(["", "A", " ", "\u{e9}", "\u{c9}", "x", "\u{130}", ""][k % 8]);
                text.push(c);
            }
            assert_eq!(words(&text), plain_hashes(&text), "{text:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn words_match_the_plain_definition(
            text in "[aZq09_ .,'\u{e9}\u{301}\u{130}\u{3a3}\u{3c3}\u{3c2}\u{2019}\u{4e00}\u{ff21}\u{bd}\u{b2}\u{1f600}-]{0,40}"
        ) {
            prop_assert_eq!(words(&text), plain_hashes(&text));
        }

        #[test]
        fn spaceless_words_match_the_plain_definition(
            text in "([a-zA-Z0-9_]{0,4}[ .,\u{e9}\u{3002}\u{4e00}\u{4e8c}\u{9fff}\u{3400}\u{30a2}\u{30fc}\u{3099}\u{ff76}\u{ff70}\u{e01}\u{e31}\u{17b6}\u{f0b}\u{1000}\u{20000}\u{2fa1d}\u{3029}\u{3006}\u{ac00}\u{ff21}\u{3a3}\u{130}]{0,3}){0,20}"
        ) {
            // Spaceless characters of every plane and script among ASCII runs, Latin,
            // Hangul, fullwidth letters and punctuation; word characters and not (a Thai
            // vowel sign, the Tibetan tsheg), next to each other and to runs.
            prop_assert_eq!(words(&text), plain_hashes(&text));
        }

        #[test]
        fn ascii_words_match_the_plain_definition(text in "[\\x00-\\x7f]{0,200}") {
            prop_assert_eq!(words(&text), plain_hashes(&text));
        }

        #[test]
        fn mixed_runs_match_the_plain_definition(
            text in "([aAbB_0]{0,5}[ .,\u{e9}\u{c9}\u{130}\u{301}\u{3a3}\u{2019}]?){0,30}"
        ) {
            // ASCII runs with and without capitals, ending at text's end, at ASCII
            // separators and at non-ASCII characters that do or do not continue a word.
            prop_assert_eq!(words(&text), plain_hashes(&text));
        }

        #[test]
        fn capitalised_words_of_every_length_match_the_plain_definition(
            text in "([A-Z][a-zA-Z0-9_]{0,20}[ .]){1,12}"
        ) {
            // Capitals lowercased in a small array up to 16 bytes, through the library
            // beyond: every length on both sides of the cut.
            prop_assert_eq!(words(&text), plain_hashes(&text));
        }

        #[test]
        fn long_runs_across_blocks_match_the_plain_definition(
            text in "([a-zA-Z_0-9]{0,70}[ .,\u{e9}\u{c9}\u{3a3}\u{2019}\u{4e00}\u{130}]?){0,14}"
        ) {
            // Runs of up to 70 bytes, so they start, end and go on at every place of the
            // 64-byte blocks, with and without capitals and non-ASCII characters.
            prop_assert_eq!(words(&text), plain_hashes(&text));
        }

        #[test]
        fn ascii_texts_of_many_blocks_match_the_plain_definition(
            text in "([a-zA-Z_0-9]{0,80}[ .,\n-]{1,3}){0,16}",
            pad in 0usize..2,
        ) {
            // The ASCII path: runs of up to 80 bytes starting, ending and going on at
            // every place of the blocks; padded with a word to whole blocks, a run that
            // reaches the text's last byte at a block's end.
            let mut text = text;
            if pad == 1 {
                text.extend(std::iter::repeat_n('w', (64 - text.len() % 64) % 64));
            }
            prop_assert_eq!(words(&text), plain_hashes(&text));
            let scalar = crate::arch::with_level(crate::arch::Level::Scalar, || words(&text));
            prop_assert_eq!(scalar, plain_hashes(&text));
            let mut got = Vec::new();
            shingle_hashes(&text, |h| got.push(h));
            prop_assert_eq!(got, plain_shingles(&text));
        }

        #[test]
        fn mostly_ascii_texts_match_the_plain_definition(
            pieces in proptest::collection::vec(
                prop_oneof![
                    8 => "[a-zA-Z0-9_]{1,12}",
                    1 => "[a-zA-Z]{0,3}[\u{e9}\u{c9}\u{130}\u{3a3}\u{4e00}\u{fb01}\u{2019}]\
                          [a-z]{0,3}[\u{e9}\u{301}]?[a-z]{0,2}",
                ],
                0..60,
            ),
            seps in proptest::collection::vec("[ .,\n]{1,2}", 60),
        ) {
            // Long texts with a few words of non-ASCII characters, some several in one
            // run (`résumé`): the runs with them spliced in among the ASCII ones.
            let text: String = pieces
                .iter()
                .zip(&seps)
                .flat_map(|(w, s)| [w.as_str(), s.as_str()])
                .collect();
            prop_assert_eq!(words(&text), plain_hashes(&text));
        }

        #[test]
        fn every_run_finder_finds_the_byte_by_byte_runs(
            text in "([a-zA-Z_0-9]{0,40}[ .,\u{e9}\u{4e00}\u{1f600}]{0,3}){0,40}",
        ) {
            // Every kernel the CPU can run against the runs of the scalar classes, over
            // texts of many blocks with up to 32 runs in one.
            let bytes = text.as_bytes();
            let mut want = (Vec::new(), Vec::new());
            runs_of(bytes, &mut want.0, &mut want.1, |block| {
                let m = classify::words_scalar(block);
                (m.word | m.high, m.high)
            });
            let mut got = (Vec::new(), Vec::new());
            find_runs(bytes, &mut got.0, &mut got.1);
            prop_assert_eq!(&got, &want);
            #[cfg(target_arch = "x86_64")]
            if crate::arch::features().avx512bw() {
                // SAFETY: the CPU has AVX-512F and BW (checked just above).
                unsafe { find_runs_avx512(bytes, &mut got.0, &mut got.1) };
                prop_assert_eq!(&got, &want);
            }
            #[cfg(target_arch = "x86_64")]
            if crate::arch::features().avx512vbmi2() && crate::arch::features().avx512vbmi() {
                // SAFETY: the CPU has AVX-512 VBMI and VBMI2 (checked just above).
                unsafe { find_runs_vbmi2(bytes, &mut got.0, &mut got.1) };
                prop_assert_eq!(&got, &want);
            }
        }

        #[test]
        fn rolling_shingles_match_the_plain_definition(text in "([a-eA-E\u{e9}]{1,3}[ ,.]){0,30}") {
            let mut got = Vec::new();
            shingle_hashes(&text, |h| got.push(h));
            prop_assert_eq!(got, plain_shingles(&text));
        }
    }
}
