//! The words and shingles a Jaccard similarity is taken over: the lowercased `\w+` words
//! of Python's `re.findall(r"\w+", text.lower())`, as datasketch and text-dedup users
//! compute them, in word 5-shingles.

use xxhash_rust::xxh3::xxh3_64_with_seed;

pub use crate::fingerprint::compat::is_word_char;
use crate::fingerprint::SEED;

/// Words per shingle.
pub const SHINGLE: usize = 5;

/// Bytes that are `\w` on their own: the ASCII letters, digits and `_` (a byte of a
/// multi-byte character is not).
const ASCII_WORD: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'_';
        b += 1;
    }
    t
};

/// The end of the run of ASCII word bytes that starts at `i`, and whether it holds a
/// capital. Most words have none and hash straight from the text: copying a word a byte
/// at a time into a buffer that the hash then reads eight bytes at a time stalls on
/// store forwarding, and cost more than the hash.
#[inline]
fn ascii_run(bytes: &[u8], mut i: usize) -> (usize, bool) {
    let mut upper = false;
    while let Some(&b) = bytes.get(i) {
        if !ASCII_WORD[b as usize] {
            break;
        }
        upper |= b.is_ascii_uppercase();
        i += 1;
    }
    (i, upper)
}

/// The hash of one lowercased word: xxh3-64 of its UTF-8, seeded with the fingerprint
/// format's [`SEED`] (so a word hashes as a [`crate::fingerprint::token_hash`] does).
#[inline]
fn word_hash(word: &[u8]) -> u64 {
    xxh3_64_with_seed(word, SEED)
}

/// Calls `word` with the hash of every word of `text`, in order: the maximal runs of
/// [`is_word_char`] characters of the text lowercased as Python's `str.lower()` does
/// (Unicode full lowercase, final sigma included).
pub fn word_hashes(text: &str, mut word: impl FnMut(u64)) {
    if text.is_ascii() {
        ascii_words(text.as_bytes(), &mut word);
        return;
    }
    // A capital sigma lowercases by its context (final or not): the standard library's
    // `to_lowercase` applies that rule, a character at a time cannot.
    let lowered;
    let text = if text.contains('\u{03A3}') {
        lowered = text.to_lowercase();
        lowered.as_str()
    } else {
        text
    };
    let mut buf: Vec<u8> = Vec::with_capacity(64);
    let mut utf8 = [0u8; 4];
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            // ASCII: a run of word bytes at a time, no decoding.
            if !ASCII_WORD[b as usize] {
                if !buf.is_empty() {
                    word(word_hash(&buf));
                    buf.clear();
                }
                i += 1;
                continue;
            }
            let (end, upper) = ascii_run(bytes, i);
            // A non-ASCII character next may continue the word.
            let open = bytes.get(end).is_some_and(|&b| b >= 0x80);
            if buf.is_empty() && !open && !upper {
                word(word_hash(&bytes[i..end]));
            } else {
                buf.extend(bytes[i..end].iter().map(u8::to_ascii_lowercase));
                if !open {
                    word(word_hash(&buf));
                    buf.clear();
                }
            }
            i = end;
            continue;
        }
        let c = text[i..].chars().next().unwrap_or('\u{FFFD}');
        i += c.len_utf8();
        for l in c.to_lowercase() {
            if is_word_char(l) {
                buf.extend_from_slice(l.encode_utf8(&mut utf8).as_bytes());
            } else if !buf.is_empty() {
                word(word_hash(&buf));
                buf.clear();
            }
        }
    }
    if !buf.is_empty() {
        word(word_hash(&buf));
    }
}

/// [`word_hashes`] of an ASCII text: runs of `[A-Za-z0-9_]`, lowercased.
fn ascii_words(bytes: &[u8], word: &mut impl FnMut(u64)) {
    let mut buf = [0u8; 64];
    let mut long: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !ASCII_WORD[bytes[i] as usize] {
            i += 1;
            continue;
        }
        let (end, upper) = ascii_run(bytes, i);
        let w = &bytes[i..end];
        i = end;
        if !upper {
            word(word_hash(w));
        } else if w.len() <= buf.len() {
            for (d, s) in buf.iter_mut().zip(w) {
                *d = s.to_ascii_lowercase();
            }
            word(word_hash(&buf[..w.len()]));
        } else {
            long.clear();
            long.extend(w.iter().map(u8::to_ascii_lowercase));
            word(word_hash(&long));
        }
    }
}

/// Multiplier of the polynomial that combines a shingle's word hashes.
const P: u64 = 0x9E37_79B9_7F4A_7C15;
/// `P^(SHINGLE - 1)`: the weight of the word leaving the window.
const P_LAST: u64 = P.wrapping_mul(P).wrapping_mul(P).wrapping_mul(P);
/// Seeds of the final mix of full shingles and of the one shingle of a short text.
const SHINGLE_SEED: u64 = 0x6A61_6363_6172_6435; // "jaccard5"
const SHORT_SEED: u64 = 0x6A61_6363_6172_6473; // "jaccards"

/// The murmur3 finaliser: every input bit reaches every output bit.
#[inline]
pub(crate) fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// Calls `shingle` with the hash of every word 5-shingle of `text` (repeats included), in
/// order; a text of one to four words has one shingle, of all its words; a text without
/// words has none. A shingle's hash is `fmix64(seed ^ Σ wᵢ·P^(4-i))` over its words'
/// hashes: a rolling polynomial, so each word costs two multiplies.
pub fn shingle_hashes(text: &str, mut shingle: impl FnMut(u64)) {
    let mut ring = [0u64; SHINGLE];
    let mut seen = 0usize;
    let mut poly = 0u64;
    word_hashes(text, |w| {
        let slot = seen % SHINGLE;
        if seen >= SHINGLE {
            poly = poly.wrapping_sub(ring[slot].wrapping_mul(P_LAST));
        }
        poly = poly.wrapping_mul(P).wrapping_add(w);
        ring[slot] = w;
        seen += 1;
        if seen >= SHINGLE {
            shingle(fmix64(poly ^ SHINGLE_SEED));
        }
    });
    if (1..SHINGLE).contains(&seen) {
        shingle(fmix64(poly ^ SHORT_SEED ^ seen as u64));
    }
}

/// The distinct shingle hashes of `text`, sorted: the set a Jaccard similarity compares.
pub fn shingle_set(text: &str) -> Vec<u64> {
    let mut out = Vec::with_capacity(text.len() / 6 + 1);
    shingle_hashes(text, |h| out.push(h));
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The plain definition: lowercase the whole text, split on non-word characters.
    fn plain_words(text: &str) -> Vec<String> {
        text.to_lowercase()
            .split(|c: char| !is_word_char(c))
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    }

    fn words(text: &str) -> Vec<u64> {
        let mut out = Vec::new();
        word_hashes(text, |h| out.push(h));
        out
    }

    /// Shingles from word strings, the slow way: join five words, hash the tuple.
    fn plain_shingles(text: &str) -> Vec<u64> {
        let w: Vec<u64> = plain_words(text)
            .iter()
            .map(|w| word_hash(w.as_bytes()))
            .collect();
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
                &["naïve", "café", "漢字", "テスト"],
            ),
            ("İstanbul", &["i", "stanbul"]),
            ("ΟΔΟΣ ΟΔΟΣ.", &["οδος", "οδος"]),
            ("__init__ ½ ² x²", &["__init__", "½", "²", "x²"]),
            ("e\u{301}te", &["e", "te"]),
            ("", &[]),
            ("-- ...", &[]),
        ];
        for (text, want) in cases {
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
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn words_match_the_plain_definition(
            text in "[aZq09_ .,'\u{e9}\u{301}\u{130}\u{3a3}\u{3c3}\u{3c2}\u{2019}\u{4e00}\u{ff21}\u{bd}\u{b2}\u{1f600}-]{0,40}"
        ) {
            let want: Vec<u64> = plain_words(&text).iter().map(|w| word_hash(w.as_bytes())).collect();
            prop_assert_eq!(words(&text), want);
        }

        #[test]
        fn ascii_words_match_the_plain_definition(text in "[\\x00-\\x7f]{0,200}") {
            let want: Vec<u64> = plain_words(&text).iter().map(|w| word_hash(w.as_bytes())).collect();
            prop_assert_eq!(words(&text), want);
        }

        #[test]
        fn mixed_runs_match_the_plain_definition(
            text in "([aAbB_0]{0,5}[ .,\u{e9}\u{c9}\u{130}\u{301}\u{3a3}\u{2019}]?){0,30}"
        ) {
            // ASCII runs with and without capitals, ending at text's end, at ASCII
            // separators and at non-ASCII characters that do or do not continue a word.
            let want: Vec<u64> = plain_words(&text).iter().map(|w| word_hash(w.as_bytes())).collect();
            prop_assert_eq!(words(&text), want);
        }

        #[test]
        fn rolling_shingles_match_the_plain_definition(text in "([a-eA-E\u{e9}]{1,3}[ ,.]){0,30}") {
            let mut got = Vec::new();
            shingle_hashes(&text, |h| got.push(h));
            prop_assert_eq!(got, plain_shingles(&text));
        }
    }
}
