//! The decision "is this document a near-duplicate of that one?", in one place, so that
//! batch deduplication, the online corpus, the service, Python and Ray cannot disagree.
//!
//! A document is known by its [`Signature`]: its 256-bit fingerprint, which finds
//! candidates in simhash tables, its Jaccard [`Sketch`], which decides, and a hash of its
//! text, which tells exact copies. [`Rule::decide`] is the decision on one pair;
//! [`Keep`] says which document of a group stays; [`crate::batch::dedup`] and the online
//! corpus apply them.

use xxhash_rust::xxh3::xxh3_64;

use crate::fingerprint::{Fingerprinter, Wide, LANES};
use crate::jaccard::{self, Sketch, Threshold};

/// Which document of a group of near-duplicates is kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Keep {
    /// The first in input order.
    #[default]
    First,
    /// The longest text (the first of equals).
    Longest,
    /// The shortest text (the first of equals).
    Shortest,
}

impl std::str::FromStr for Keep {
    type Err = crate::Error;

    /// `first`, `longest` or `shortest`.
    fn from_str(s: &str) -> crate::Result<Keep> {
        match s {
            "first" => Ok(Keep::First),
            "longest" => Ok(Keep::Longest),
            "shortest" => Ok(Keep::Shortest),
            _ => Err(crate::Error::UnknownKeep(s.to_string())),
        }
    }
}

/// When a candidate pair is a near-duplicate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// The estimated Jaccard similarity of the word 5-shingle sets reaches the threshold.
    Jaccard(Threshold),
    /// The 256-bit fingerprints are at most this many bits apart.
    Distance(u32),
}

impl Default for Rule {
    fn default() -> Rule {
        Rule::Jaccard(Threshold::default())
    }
}

/// How near two documents are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Match {
    /// Estimated Jaccard similarity (1 for the same text).
    pub similarity: f32,
    /// 256-bit Hamming distance of the fingerprints.
    pub distance: u32,
}

impl Rule {
    /// How near `a` and `b` are, when they are near-duplicates under the rule. The same
    /// text is always a near-duplicate; a text without words is one only of the same text.
    pub fn decide(&self, a: &Signature, b: &Signature) -> Option<Match> {
        let m = a.compare(b);
        if a.text_hash == b.text_hash && a.fingerprint == b.fingerprint {
            return Some(m);
        }
        if a.is_wordless() || b.is_wordless() {
            return None;
        }
        self.accepts(m).then_some(m)
    }

    /// The lane distance at which candidates ([`crate::batch::candidates`]) find nearly
    /// every pair the rule accepts: 8 at the default threshold 0.8, one more per 0.1
    /// below it and one less per 0.1 above (between 6 and 12); 8 for a distance rule. On
    /// the natural corpus, recall of the pairs with Jaccard at least `T + 0.05` was 0.9998
    /// at 0.8 (lane distance 8), 0.9994 at 0.7 (9) and 0.9983 at 0.6 (10).
    pub fn lane_distance(&self) -> u32 {
        match *self {
            Rule::Jaccard(t) => {
                let steps = ((crate::jaccard::DEFAULT_THRESHOLD - t.get()) * 10.0 - 1e-9).ceil();
                (8.0 + steps).clamp(6.0, 12.0) as u32
            }
            Rule::Distance(_) => crate::fingerprint::DEFAULT_LANE_DISTANCE,
        }
    }

    /// Whether a pair this near (of different texts, both with words) is a near-duplicate.
    #[inline]
    pub fn accepts(&self, m: Match) -> bool {
        match *self {
            Rule::Jaccard(t) => t.accepts(f64::from(m.similarity)),
            Rule::Distance(d) => m.distance <= d,
        }
    }
}

/// What neardup keeps of a document to decide near-duplicates: 168 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Signature {
    /// The 256-bit fingerprint ([`Fingerprinter::fingerprint_wide`]): candidates.
    pub fingerprint: Wide,
    /// The Jaccard sketch of the word 5-shingle set ([`Sketch::of_text`]): the decision.
    pub sketch: Sketch,
    /// xxh3-64 of the text's bytes: exact copies.
    pub text_hash: u64,
}

impl Signature {
    /// Bytes of [`Signature::to_bytes`].
    pub const BYTES: usize = 8 * LANES + jaccard::BYTES + 8;

    /// The signature of `text`, its fingerprint from `fingerprinter`.
    pub fn of_text(fingerprinter: &Fingerprinter, text: &str) -> Signature {
        Signature {
            fingerprint: fingerprinter.fingerprint_wide(text),
            sketch: Sketch::of_text(text),
            text_hash: xxh3_64(text.as_bytes()),
        }
    }

    /// Whether the text had no words (fingerprint all zero).
    pub fn is_wordless(&self) -> bool {
        self.fingerprint == [0; LANES]
    }

    /// The similarity of the sketches (1 for the same text) and the fingerprints' distance.
    pub fn compare(&self, other: &Signature) -> Match {
        let same = self.text_hash == other.text_hash && self.fingerprint == other.fingerprint;
        Match {
            similarity: if same {
                1.0
            } else {
                self.sketch.similarity(&other.sketch) as f32
            },
            distance: crate::batch::wide_distance(&self.fingerprint, &other.fingerprint),
        }
    }

    /// The signature as bytes: the fingerprint's lanes, the sketch, the text hash, all
    /// little-endian.
    pub fn to_bytes(&self) -> [u8; Signature::BYTES] {
        let mut out = [0u8; Signature::BYTES];
        for (chunk, lane) in out.chunks_exact_mut(8).zip(&self.fingerprint) {
            chunk.copy_from_slice(&lane.to_le_bytes());
        }
        out[8 * LANES..8 * LANES + jaccard::BYTES].copy_from_slice(&self.sketch.to_bytes());
        out[Signature::BYTES - 8..].copy_from_slice(&self.text_hash.to_le_bytes());
        out
    }

    /// The signature [`Signature::to_bytes`] wrote.
    pub fn from_bytes(bytes: &[u8; Signature::BYTES]) -> Signature {
        let word = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(w)
        };
        let mut fingerprint = [0u64; LANES];
        for (lane, fp) in fingerprint.iter_mut().enumerate() {
            *fp = word(8 * lane);
        }
        let mut sketch = [0u8; jaccard::BYTES];
        sketch.copy_from_slice(&bytes[8 * LANES..8 * LANES + jaccard::BYTES]);
        Signature {
            fingerprint,
            sketch: Sketch::from_bytes(&sketch),
            text_hash: word(Signature::BYTES - 8),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_round_trip_and_decide() {
        let fp = Fingerprinter::default();
        let a = "The committee met on Tuesday to review the budget for the coming year, and agreed to repair the roof of the reading room before the storms.";
        let b = a.replace("Tuesday", "Wednesday");
        let (sa, sb) = (Signature::of_text(&fp, a), Signature::of_text(&fp, &b));
        assert_eq!(Signature::from_bytes(&sa.to_bytes()), sa);
        let rule = Rule::Jaccard(Threshold::new(0.5).unwrap());
        let m = rule.decide(&sa, &sb).unwrap();
        assert!(m.similarity > 0.5 && m.similarity < 1.0 && m.distance > 0);
        assert_eq!(rule.decide(&sa, &sa).map(|m| m.similarity), Some(1.0));
        assert!(Rule::Jaccard(Threshold::new(1.0).unwrap())
            .decide(&sa, &sb)
            .is_none());
        assert!(Rule::Distance(m.distance).decide(&sa, &sb).is_some());
        assert!(Rule::Distance(m.distance - 1).decide(&sa, &sb).is_none());
        // Texts without words match their own copies only.
        let (x, y) = (
            Signature::of_text(&fp, "!!!"),
            Signature::of_text(&fp, "???"),
        );
        assert!(x.is_wordless() && y.is_wordless());
        assert!(rule.decide(&x, &y).is_none());
        assert!(rule.decide(&x, &x).is_some());
        assert!(rule.decide(&x, &sa).is_none());
    }

    #[test]
    fn lane_distances_follow_the_threshold() {
        let at = |t: f64| Rule::Jaccard(Threshold::new(t).unwrap()).lane_distance();
        assert_eq!(
            [
                at(1.0),
                at(0.9),
                at(0.85),
                at(0.8),
                at(0.75),
                at(0.7),
                at(0.6),
                at(0.5),
                at(0.1)
            ],
            [6, 7, 8, 8, 9, 9, 10, 11, 12]
        );
        assert_eq!(Rule::Distance(40).lane_distance(), 8);
    }

    #[test]
    fn keep_by_name() {
        assert_eq!("longest".parse::<Keep>().ok(), Some(Keep::Longest));
        assert!("best".parse::<Keep>().is_err());
    }
}
