//! Bit-exact behaviour of the seomoz references, so their users keep their stored
//! fingerprints and scripts: simhash-py's current API and documented text pipeline, and
//! the legacy fingerprints of simhash-cpp (before 2017) and old simhash-py (`hash`,
//! `hash_fp`). Every function is checked against reference outputs in `tests/vectors`.
//!
//! ```
//! use neardup::fingerprint::compat;
//!
//! // simhash-py's documented pipeline for a text...
//! let a = compat::text_fingerprint("I've been working on the railroad, all the live long day.");
//! let b = compat::text_fingerprint("I've been working on the railroad, all the live-long day!");
//! assert!(compat::num_differing_bits(a, b) <= 3);
//! // ...is `compute` over `unsigned_hash` of character 4-grams.
//! assert_eq!(compat::unsigned_hash(b"abcd"), 0xe2fc_714c_4727_ee93);
//! assert_eq!(compat::compute(&[0xe2fc_714c_4727_ee93]), 0xe2fc_714c_4727_ee93);
//! ```

use md5::{Digest, Md5};
use unicode_general_category::{get_general_category, GeneralCategory as Gc};

use crate::error::{Error, Result};

/// simhash-py `compute`: bit `i` is 1 when more than half of `hashes` have it (ties 0).
pub fn compute(hashes: &[u64]) -> u64 {
    super::simhash(hashes)
}

/// simhash-py `unsigned_hash`: the first 8 bytes of MD5(`bytes`), big-endian.
pub fn unsigned_hash(bytes: &[u8]) -> u64 {
    let digest = Md5::digest(bytes);
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// simhash-py `shingle`: every run of `window` consecutive tokens, in order; none when
/// there are fewer tokens than `window`. A window of 0 is an error, as in simhash-py.
pub fn shingle<T>(tokens: &[T], window: usize) -> Result<std::slice::Windows<'_, T>> {
    if window == 0 {
        return Err(Error::InvalidWindow);
    }
    Ok(tokens.windows(window))
}

/// simhash-py `num_differing_bits`: the Hamming distance.
pub fn num_differing_bits(a: u64, b: u64) -> u32 {
    crate::hamming::distance(a, b)
}

/// Python's `\w` on `str`: a letter or a number (Unicode general category L or N) or `_`.
///
/// Not Rust's `char::is_alphanumeric`, which also takes combining marks with the
/// Alphabetic property. Characters assigned after Unicode 14 (Python 3.11's tables) may be
/// classed differently from that Python.
pub fn is_word_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric() || c == '_';
    }
    matches!(
        get_general_category(c),
        Gc::UppercaseLetter
            | Gc::LowercaseLetter
            | Gc::TitlecaseLetter
            | Gc::ModifierLetter
            | Gc::OtherLetter
            | Gc::DecimalNumber
            | Gc::LetterNumber
            | Gc::OtherNumber
    )
}

/// Python's `re.split(r'\W+', text)`: the pieces between runs of non-word characters,
/// with an empty piece at either end when `text` starts or ends with one.
pub fn split_non_word(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_sep = false;
    for (i, c) in text.char_indices() {
        let word = is_word_char(c);
        if !word && !in_sep {
            out.push(&text[start..i]);
            in_sep = true;
        } else if word && in_sep {
            start = i;
            in_sep = false;
        }
    }
    out.push(if in_sep { "" } else { &text[start..] });
    out
}

/// The feature hashes of simhash-py's documented text pipeline: lowercase, split on
/// `\W+`, join the pieces, then `unsigned_hash` of every character 4-gram's UTF-8.
pub fn text_hashes(text: &str) -> Vec<u64> {
    // Splitting and joining again just drops the non-word characters.
    let joined: String = text
        .to_lowercase()
        .chars()
        .filter(|&c| is_word_char(c))
        .collect();
    let bounds: Vec<usize> = joined
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(joined.len()))
        .collect();
    bounds
        .windows(5)
        .map(|w| unsigned_hash(&joined.as_bytes()[w[0]..w[4]]))
        .collect()
}

/// simhash-py's documented text fingerprint: `compute(text_hashes(text))`.
pub fn text_fingerprint(text: &str) -> u64 {
    compute(&text_hashes(text))
}

/// Bob Jenkins' lookup3 `hashlittle2` of `bytes`, seeded with `(pc, pb) = (seed >> 32,
/// seed & 0xffff_ffff)`, as `(pc << 32) | pb`: the token hash of the legacy fingerprints.
pub fn jenkins64(bytes: &[u8], seed: u64) -> u64 {
    #[inline(always)]
    fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
        *a = a.wrapping_sub(*c);
        *a ^= c.rotate_left(4);
        *c = c.wrapping_add(*b);
        *b = b.wrapping_sub(*a);
        *b ^= a.rotate_left(6);
        *a = a.wrapping_add(*c);
        *c = c.wrapping_sub(*b);
        *c ^= b.rotate_left(8);
        *b = b.wrapping_add(*a);
        *a = a.wrapping_sub(*c);
        *a ^= c.rotate_left(16);
        *c = c.wrapping_add(*b);
        *b = b.wrapping_sub(*a);
        *b ^= a.rotate_left(19);
        *a = a.wrapping_add(*c);
        *c = c.wrapping_sub(*b);
        *c ^= b.rotate_left(4);
        *b = b.wrapping_add(*a);
    }
    #[inline(always)]
    fn finish(a: &mut u32, b: &mut u32, c: &mut u32) {
        *c ^= *b;
        *c = c.wrapping_sub(b.rotate_left(14));
        *a ^= *c;
        *a = a.wrapping_sub(c.rotate_left(11));
        *b ^= *a;
        *b = b.wrapping_sub(a.rotate_left(25));
        *c ^= *b;
        *c = c.wrapping_sub(b.rotate_left(16));
        *a ^= *c;
        *a = a.wrapping_sub(c.rotate_left(4));
        *b ^= *a;
        *b = b.wrapping_sub(a.rotate_left(14));
        *c ^= *b;
        *c = c.wrapping_sub(b.rotate_left(24));
    }
    let word = |s: &[u8]| {
        let mut w = [0u8; 4];
        w[..s.len()].copy_from_slice(s);
        u32::from_le_bytes(w)
    };
    let (pc, pb) = ((seed >> 32) as u32, seed as u32);
    // lookup3 folds the length in as a u32.
    let init = 0xdead_beef_u32
        .wrapping_add(bytes.len() as u32)
        .wrapping_add(pc);
    let (mut a, mut b, mut c) = (init, init, init.wrapping_add(pb));
    let mut rest = bytes;
    while rest.len() > 12 {
        a = a.wrapping_add(word(&rest[0..4]));
        b = b.wrapping_add(word(&rest[4..8]));
        c = c.wrapping_add(word(&rest[8..12]));
        mix(&mut a, &mut b, &mut c);
        rest = &rest[12..];
    }
    if rest.is_empty() {
        return (u64::from(c) << 32) | u64::from(b);
    }
    // The tail, zero-padded to 12 bytes.
    let mut tail = [0u8; 12];
    tail[..rest.len()].copy_from_slice(rest);
    a = a.wrapping_add(word(&tail[0..4]));
    b = b.wrapping_add(word(&tail[4..8]));
    c = c.wrapping_add(word(&tail[8..12]));
    finish(&mut a, &mut b, &mut c);
    (u64::from(c) << 32) | u64::from(b)
}

/// The legacy cyclic hash over a window of 3: for each input `h`,
/// `cur = rotl(cur, 1) ^ rotl(ring[i % 3], 3) ^ h; ring[i % 3] = h`, yielding `cur`.
pub fn cyclic3(hashes: impl IntoIterator<Item = u64>) -> impl Iterator<Item = u64> {
    let mut ring = [0u64; 3];
    let mut cur = 0u64;
    hashes.into_iter().enumerate().map(move |(i, h)| {
        cur = cur.rotate_left(1) ^ ring[i % 3].rotate_left(3) ^ h;
        ring[i % 3] = h;
        cur
    })
}

/// The legacy fingerprint of a stream of token hashes: bit-reversed `compute` of their
/// cyclic hashes.
fn legacy(token_hashes: impl IntoIterator<Item = u64>) -> u64 {
    let stream: Vec<u64> = cyclic3(token_hashes).collect();
    compute(&stream).reverse_bits()
}

/// The tokens of legacy simhash-cpp: maximal runs of ASCII letters in `bytes` up to the
/// first NUL.
pub fn legacy_cpp_tokens(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    bytes[..end]
        .split(|b| !b.is_ascii_alphabetic())
        .filter(|t| !t.is_empty())
}

/// Legacy simhash-cpp text fingerprint (`hash_tokenizer` with the `strspn` letter
/// tokenizer and jenkins hashes).
pub fn legacy_cpp_fingerprint(bytes: &[u8]) -> u64 {
    legacy(legacy_cpp_tokens(bytes).map(|t| jenkins64(t, 0)))
}

/// Old simhash-py `hash(text)`: `\W+` pieces (not lowercased, empty ones skipped), UTF-8,
/// jenkins, cyclic, reversed compute.
pub fn legacy_py_hash(text: &str) -> u64 {
    legacy(
        split_non_word(text)
            .into_iter()
            .filter(|t| !t.is_empty())
            .map(|t| jenkins64(t.as_bytes(), 0)),
    )
}

/// Old simhash-py `hash_fp(values)`: jenkins of each value's 8 little-endian bytes, cyclic,
/// reversed compute.
pub fn legacy_py_hash_fp(values: &[i64]) -> u64 {
    legacy(values.iter().map(|v| jenkins64(&v.to_le_bytes(), 0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_python_re() {
        assert_eq!(split_non_word(""), vec![""]);
        assert_eq!(split_non_word("abc"), vec!["abc"]);
        assert_eq!(split_non_word(" a, b "), vec!["", "a", "b", ""]);
        assert_eq!(split_non_word("..."), vec!["", ""]);
        assert_eq!(
            split_non_word("what's new?How5is _ the ^# stuff"),
            vec!["what", "s", "new", "How5is", "_", "the", "stuff"]
        );
        // A combining mark is not a word character in Python.
        assert_eq!(split_non_word("e\u{301}t\u{e9}"), vec!["e", "t\u{e9}"]);
    }

    #[test]
    fn shingle_rejects_empty_window() {
        assert_eq!(shingle(&[1, 2], 0).err(), Some(Error::InvalidWindow));
        assert_eq!(shingle(&[1, 2, 3], 2).unwrap().count(), 2);
    }
}
