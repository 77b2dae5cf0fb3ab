//! The decision "is this document a near-duplicate of that one?", in one place, so that
//! batch deduplication, the online corpus, the service, Python and Ray cannot disagree.
//!
//! A document is known by its [`Signature`]: its Jaccard [`Sketch`], which decides, the
//! sketch's band keys, which find candidates, its 256-bit simhash fingerprint (the
//! distance rule's measure, and the distance reported beside every similarity), and a
//! hash of its text, which tells exact copies. [`Rule::decide`] is the decision on one
//! pair; [`Keep`] says which document of a group stays; [`crate::batch::dedup`] and the
//! online corpus apply them.

use xxhash_rust::xxh3::xxh3_64;

use crate::fingerprint::{Fingerprinter, Wide, LANES};
use crate::jaccard::{self, BandKeys, Banding, Sketch, Threshold, BANDS};

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
        if a.same_text(b) {
            return Some(m);
        }
        if self.wordless(a) || self.wordless(b) {
            return None;
        }
        self.accepts(m).then_some(m)
    }

    /// Whether the rule sees no words in a document: its sketch is empty (Jaccard rule) or
    /// its fingerprint is all zero (distance rule).
    pub fn wordless(&self, s: &Signature) -> bool {
        match self {
            Rule::Jaccard(_) => s.sketch.is_empty(),
            Rule::Distance(_) => s.fingerprint == [0; LANES],
        }
    }

    /// The banding whose band keys find the rule's candidates: for a Jaccard rule, the
    /// one that makes nearly every pair at the threshold a candidate
    /// ([`Banding::for_threshold`]); a distance rule finds its candidates in the
    /// fingerprints' lanes instead, and keeps the default threshold's banding.
    pub fn banding(&self) -> Banding {
        match *self {
            Rule::Jaccard(t) => Banding::for_threshold(t),
            Rule::Distance(_) => Banding::for_threshold(Threshold::default()),
        }
    }

    /// The near-duplicates of `query` among `candidates` (ids with their signatures, as an
    /// online index finds them), most similar first, then by id: what the online corpus
    /// and the service answer.
    pub fn matches(
        &self,
        query: &Signature,
        candidates: impl IntoIterator<Item = (u64, Signature)>,
    ) -> Vec<(u64, Match)> {
        let mut out: Vec<(u64, Match)> = candidates
            .into_iter()
            .filter_map(|(id, s)| self.decide(query, &s).map(|m| (id, m)))
            .collect();
        out.sort_by(|(i, a), (j, b)| {
            b.similarity
                .total_cmp(&a.similarity)
                .then(a.distance.cmp(&b.distance))
                .then(i.cmp(j))
        });
        out
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

/// What neardup keeps of a document to decide near-duplicates: 248 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Signature {
    /// The 256-bit fingerprint ([`Fingerprinter::fingerprint_wide`]): the distance.
    pub fingerprint: Wide,
    /// The Jaccard sketch of the word 5-shingle set ([`Sketch::of_text`]): the decision.
    pub sketch: Sketch,
    /// The sketch's band keys ([`Sketch::of_text_with_bands`]): the candidates.
    pub bands: BandKeys,
    /// xxh3-64 of the text's bytes: exact copies.
    pub text_hash: u64,
}

impl Signature {
    /// Bytes of [`Signature::to_bytes`].
    pub const BYTES: usize = 8 * LANES + jaccard::BYTES + 4 * BANDS + 8;

    /// The signature of `text`, its fingerprint from `fingerprinter`, its band keys under
    /// `banding`.
    pub fn of_text(fingerprinter: &Fingerprinter, banding: Banding, text: &str) -> Signature {
        Signature {
            fingerprint: fingerprinter.fingerprint_wide(text),
            ..Signature::without_fingerprint(banding, text)
        }
    }

    /// The signature of `text` but its simhash fingerprint, left all zero: enough to
    /// find its candidates and decide by Jaccard; only the distance needs the fingerprint.
    pub fn without_fingerprint(banding: Banding, text: &str) -> Signature {
        let (sketch, bands) = Sketch::of_text_with_bands(text, banding);
        Signature {
            fingerprint: [0; LANES],
            sketch,
            bands,
            text_hash: xxh3_64(text.as_bytes()),
        }
    }

    /// The paragraphs of `text` (as [`Fingerprinter::paragraphs`] splits them: blank
    /// lines and HTML block tags, short ones merged), each with its byte span and its
    /// signature.
    pub fn paragraphs(
        fingerprinter: &Fingerprinter,
        banding: Banding,
        text: &str,
    ) -> Vec<(std::ops::Range<usize>, Signature)> {
        fingerprinter
            .paragraph_spans(text)
            .into_iter()
            .map(|span| {
                let sig = Signature::of_text(fingerprinter, banding, &text[span.clone()]);
                (span, sig)
            })
            .collect()
    }

    /// The keys an online index files the document under: its band keys, or for a text
    /// without words (no band keys), a key from its text hash in the first band, so that
    /// its copies are its candidates (and nothing else but by a 2^-32 chance, which the
    /// decision then rejects).
    pub fn index_keys(&self) -> BandKeys {
        if self.bands != [0; BANDS] {
            return self.bands;
        }
        let mut keys = [0; BANDS];
        keys[0] = ((self.text_hash >> 32) as u32 ^ self.text_hash as u32).max(1);
        keys
    }

    /// Whether the two are signatures of the same text (as far as 64-bit text hashes
    /// and sketches tell).
    pub fn same_text(&self, other: &Signature) -> bool {
        self.text_hash == other.text_hash
            && self.sketch == other.sketch
            && self.fingerprint == other.fingerprint
    }

    /// The similarity of the sketches (1 for the same text) and the fingerprints' distance.
    pub fn compare(&self, other: &Signature) -> Match {
        Match {
            similarity: if self.same_text(other) {
                1.0
            } else {
                self.sketch.similarity(&other.sketch) as f32
            },
            distance: crate::hamming::wide_distance(&self.fingerprint, &other.fingerprint),
        }
    }

    /// The signature as bytes: the fingerprint's lanes, the sketch, the band keys, the
    /// text hash, all little-endian.
    pub fn to_bytes(&self) -> [u8; Signature::BYTES] {
        let mut out = [0u8; Signature::BYTES];
        let (lanes, rest) = out.split_at_mut(8 * LANES);
        for (chunk, lane) in lanes.chunks_exact_mut(8).zip(&self.fingerprint) {
            chunk.copy_from_slice(&lane.to_le_bytes());
        }
        let (sketch, rest) = rest.split_at_mut(jaccard::BYTES);
        sketch.copy_from_slice(&self.sketch.to_bytes());
        let (bands, text_hash) = rest.split_at_mut(4 * BANDS);
        for (chunk, key) in bands.chunks_exact_mut(4).zip(&self.bands) {
            chunk.copy_from_slice(&key.to_le_bytes());
        }
        text_hash.copy_from_slice(&self.text_hash.to_le_bytes());
        out
    }

    /// Bytes of [`Signature::to_stored_bytes`].
    pub const STORED_BYTES: usize = Signature::BYTES - 4 * BANDS;

    /// [`Signature::to_bytes`] without the band keys: what a store keeps where it keeps the
    /// keys apart, in the index's source.
    pub fn to_stored_bytes(&self) -> [u8; Signature::STORED_BYTES] {
        let all = self.to_bytes();
        let cut = 8 * LANES + jaccard::BYTES;
        let mut out = [0u8; Signature::STORED_BYTES];
        out[..cut].copy_from_slice(&all[..cut]);
        out[cut..].copy_from_slice(&all[cut + 4 * BANDS..]);
        out
    }

    /// The signature [`Signature::to_stored_bytes`] wrote, with `keys`: its band keys, or
    /// its [`Signature::index_keys`] (what a store keeps), which for a text without words
    /// are made from its text hash and read back here as no band keys.
    pub fn from_stored_bytes(bytes: &[u8; Signature::STORED_BYTES], keys: BandKeys) -> Signature {
        let cut = 8 * LANES + jaccard::BYTES;
        let mut all = [0u8; Signature::BYTES];
        all[..cut].copy_from_slice(&bytes[..cut]);
        all[cut + 4 * BANDS..].copy_from_slice(&bytes[cut..]);
        let none = Signature::from_bytes(&all);
        // Band keys are zero only all together (a text without shingles), so a signature
        // with one key and nineteen zeros is a wordless text's index keys.
        if keys[1..].iter().all(|&k| k == 0) && keys == none.index_keys() {
            return none;
        }
        Signature {
            bands: keys,
            ..none
        }
    }

    /// The signature [`Signature::to_bytes`] wrote.
    pub fn from_bytes(bytes: &[u8; Signature::BYTES]) -> Signature {
        let (lanes, rest) = bytes.split_at(8 * LANES);
        let (sketch, rest) = rest.split_at(jaccard::BYTES);
        let (bands, text_hash) = rest.split_at(4 * BANDS);
        let mut out = Signature::default();
        for (fp, chunk) in out.fingerprint.iter_mut().zip(lanes.chunks_exact(8)) {
            *fp = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        }
        let mut s = [0u8; jaccard::BYTES];
        s.copy_from_slice(sketch);
        out.sketch = Sketch::from_bytes(&s);
        for (key, chunk) in out.bands.iter_mut().zip(bands.chunks_exact(4)) {
            *key = u32::from_le_bytes(chunk.try_into().unwrap_or_default());
        }
        out.text_hash = u64::from_le_bytes(text_hash.try_into().unwrap_or_default());
        out
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
        let rule = Rule::Jaccard(Threshold::new(0.5).unwrap());
        let of = |t: &str| Signature::of_text(&fp, rule.banding(), t);
        let (sa, sb) = (of(a), of(&b));
        assert_eq!(Signature::from_bytes(&sa.to_bytes()), sa);
        assert_eq!(
            Signature::from_stored_bytes(&sa.to_stored_bytes(), sa.bands),
            sa
        );
        // Stored with its index keys, as a store keeps them: a wordless text's too.
        for s in [&sa, &of("!!!"), &Signature::default()] {
            assert_eq!(
                &Signature::from_stored_bytes(&s.to_stored_bytes(), s.index_keys()),
                s
            );
        }
        // Band keys of the same banding agree where the bins do: these texts share most.
        let agree = sa
            .bands
            .iter()
            .zip(&sb.bands)
            .filter(|(x, y)| x == y)
            .count();
        assert!(agree > 0 && agree < BANDS, "{agree}");
        let m = rule.decide(&sa, &sb).unwrap();
        assert!(m.similarity > 0.5 && m.similarity < 1.0 && m.distance > 0);
        assert_eq!(rule.decide(&sa, &sa).map(|m| m.similarity), Some(1.0));
        assert!(Rule::Jaccard(Threshold::new(1.0).unwrap())
            .decide(&sa, &sb)
            .is_none());
        assert!(Rule::Distance(m.distance).decide(&sa, &sb).is_some());
        assert!(Rule::Distance(m.distance - 1).decide(&sa, &sb).is_none());
        // Texts without words match their own copies only.
        let (x, y) = (of("!!!"), of("???"));
        assert!(rule.wordless(&x) && rule.wordless(&y) && !rule.wordless(&sa));
        assert!(Rule::Distance(3).wordless(&x));
        assert!(rule.decide(&x, &y).is_none());
        assert!(rule.decide(&x, &x).is_some());
        assert!(rule.decide(&x, &sa).is_none());
    }

    #[test]
    fn keep_by_name() {
        assert_eq!("longest".parse::<Keep>().ok(), Some(Keep::Longest));
        assert!("best".parse::<Keep>().is_err());
    }
}
