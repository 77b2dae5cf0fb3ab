//! Jaccard similarity of documents, the measure near-duplicate thresholds are set in.
//!
//! Two documents are near-duplicates at threshold `T` when the Jaccard similarity of
//! their word 5-shingle sets is at least `T`: of all the runs of five consecutive words
//! found in either document, the share found in both. A word is a lowercased `\w+` run,
//! as datasketch and text-dedup users compute them, except in the scripts written without
//! spaces (Han, kana, Thai, Lao, Khmer, Myanmar, Tibetan), where each character is a word:
//! Chinese is compared by character 5-grams, English by word 5-grams ([`word_hashes`]).
//! [`shingle_set`] gives a text's set, and [`exact`] the similarity of two sets; a
//! [`Sketch`] of 128 bytes per document estimates it (root mean square error about 0.02
//! near the usual thresholds), which is what batch deduplication, the online corpus and
//! the service compare, so they decide alike.
//!
//! ```
//! use neardup::jaccard::{self, Sketch, Threshold};
//!
//! let a = "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness";
//! let b = "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of folly";
//! let exact = jaccard::exact(&jaccard::shingle_set(a), &jaccard::shingle_set(b));
//! assert!((exact - 17.0 / 19.0).abs() < 1e-9); // 17 shingles shared of 19
//! let estimate = Sketch::of_text(a).similarity(&Sketch::of_text(b));
//! assert!((estimate - exact).abs() < 0.1);
//! assert!(Threshold::new(0.8)?.accepts(estimate));
//! # Ok::<(), neardup::Error>(())
//! ```

mod sketch;
mod spaceless;
mod words;

pub use sketch::{BandKeys, Banding, Sketch, BANDS, BINS, BITS, BYTES};
pub use words::{is_spaceless, is_word_char, shingle_hashes, shingle_set, word_hashes, SHINGLE};

use crate::error::{Error, Result};

/// The threshold users of MinHash deduplication set most often, and neardup's default.
pub const DEFAULT_THRESHOLD: f64 = 0.8;

/// Version of the sketch format (words, shingle hashes, bins, codes): bumped whenever the
/// sketch of any text changes, so stored sketches are never compared across versions.
/// Version 2 made each character of the spaceless scripts a word ([`is_spaceless`]);
/// version 1's words were `\w+` runs in every script.
pub const SKETCH_VERSION: u32 = 2;

/// A Jaccard similarity threshold in (0, 1]: pairs at or above it are near-duplicates.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Threshold(f64);

impl Default for Threshold {
    fn default() -> Threshold {
        Threshold(DEFAULT_THRESHOLD)
    }
}

impl Threshold {
    /// `t` as a threshold; an error unless `0 < t <= 1`.
    pub fn new(t: f64) -> Result<Threshold> {
        if t > 0.0 && t <= 1.0 {
            Ok(Threshold(t))
        } else {
            Err(Error::InvalidThreshold(t))
        }
    }

    /// The threshold as a number.
    pub fn get(self) -> f64 {
        self.0
    }

    /// Whether `similarity` reaches the threshold.
    #[inline]
    pub fn accepts(self, similarity: f64) -> bool {
        similarity >= self.0
    }

    /// The similarity of two sketches, when it reaches the threshold.
    #[inline]
    pub fn matches(self, a: &Sketch, b: &Sketch) -> Option<f64> {
        let s = a.similarity(b);
        self.accepts(s).then_some(s)
    }
}

impl std::str::FromStr for Threshold {
    type Err = Error;

    fn from_str(s: &str) -> Result<Threshold> {
        let t: f64 = s
            .trim()
            .parse()
            .map_err(|_| Error::InvalidThreshold(f64::NAN))?;
        Threshold::new(t)
    }
}

impl std::fmt::Display for Threshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The Jaccard similarity of two sorted, distinct sets (as [`shingle_set`] gives): the
/// size of their intersection over that of their union; 1 for two empty sets.
pub fn exact(a: &[u64], b: &[u64]) -> f64 {
    let (mut i, mut j, mut shared) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - shared;
    if union == 0 {
        1.0
    } else {
        shared as f64 / union as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds() {
        assert!(Threshold::new(0.0).is_err());
        assert!(Threshold::new(1.01).is_err());
        assert!(Threshold::new(f64::NAN).is_err());
        assert_eq!("0.8".parse::<Threshold>().ok(), Some(Threshold(0.8)));
        assert!("x".parse::<Threshold>().is_err());
        let t = Threshold::new(0.5).unwrap();
        assert!(t.accepts(0.5) && !t.accepts(0.4999));
    }

    #[test]
    fn exact_similarity() {
        assert_eq!(exact(&[], &[]), 1.0);
        assert_eq!(exact(&[1, 2, 3], &[]), 0.0);
        assert_eq!(exact(&[1, 2, 3], &[2, 3, 4]), 0.5);
    }
}
