//! What a document store is made with ([`DocConfig`]), and documents made ready for it
//! ([`Preparer`] → [`Prepared`]): the signature of the whole text and of its paragraphs,
//! computed on any thread before a store sees them.

use std::ops::Range;
use std::sync::Arc;

use neardup::decide::{Rule, Signature};
use neardup::fingerprint::Fingerprinter;
use neardup::jaccard::Threshold;

/// Paragraphs of a document that are indexed; a paragraph's index id is the document's
/// internal id times this, plus its position.
pub const MAX_PARAGRAPHS: u64 = 4096;

/// Why a store of another version of the format is refused: what changed, and what to do.
/// Sketches do not keep their texts, so no store is migrated: they would be compared with
/// sketches of other words.
pub(crate) fn other_version(key: &str, have: u64, want: u64) -> String {
    let why = if key == "sketch_version" && have == 1 {
        " (its sketches take `\\w+` runs as words in every script; since version 2 each \
         character of Chinese, Japanese, Thai and the other scripts written without spaces \
         is a word)"
    } else {
        ""
    };
    format!(
        "{key} {have}; this neardup makes {want}{why}: make a new store and put the \
         documents again"
    )
}

/// What a document store is made with; recorded on disk, checked on every open.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DocConfig {
    /// Documents at or above this estimated Jaccard similarity are near-duplicates.
    pub threshold: Threshold,
    /// Whether paragraphs are indexed too, for
    /// [`DocumentStore::check_paragraphs`](crate::DocumentStore::check_paragraphs).
    pub paragraphs: bool,
}

impl DocConfig {
    /// The rule documents are decided by.
    pub fn rule(&self) -> Rule {
        Rule::Jaccard(self.threshold)
    }
}

/// A document made ready for the store: its signature and, in a store with paragraphs,
/// its paragraphs' spans and signatures. Made by [`Preparer::prepare`] on any thread.
#[derive(Clone, Debug, PartialEq)]
pub struct Prepared {
    /// The whole document's signature.
    pub signature: Signature,
    /// Its paragraphs (empty unless the store indexes them).
    pub paragraphs: Vec<(Range<u32>, Signature)>,
    /// Its length in bytes.
    pub len: u32,
}

impl Prepared {
    /// Its paragraphs past the first [`MAX_PARAGRAPHS`], which a store does not index.
    pub fn paragraphs_not_indexed(&self) -> usize {
        self.paragraphs
            .len()
            .saturating_sub(MAX_PARAGRAPHS as usize)
    }
}

/// Turns texts into [`Prepared`] documents for one store's settings; cheap to clone.
#[derive(Clone, Debug)]
pub struct Preparer {
    fingerprinter: Arc<Fingerprinter>,
    config: DocConfig,
}

impl Preparer {
    /// A preparer for a store with `config`.
    pub fn new(config: DocConfig) -> Preparer {
        Preparer {
            fingerprinter: Arc::new(Fingerprinter::default()),
            config,
        }
    }

    /// The document `text`, with its paragraphs when the store indexes them or
    /// `paragraphs` asks for them (a paragraph check of a store without them finds none).
    pub fn prepare(&self, text: &str, paragraphs: bool) -> Prepared {
        let banding = self.config.rule().banding();
        let paras = if self.config.paragraphs || paragraphs {
            Signature::paragraphs(&self.fingerprinter, banding, text)
                .into_iter()
                .map(|(span, sig)| (span.start as u32..span.end as u32, sig))
                .collect()
        } else {
            Vec::new()
        };
        Prepared {
            signature: Signature::of_text(&self.fingerprinter, banding, text),
            paragraphs: paras,
            len: u32::try_from(text.len()).unwrap_or(u32::MAX),
        }
    }

    /// The signature of `text` but its simhash fingerprint (left all zero): enough to
    /// find candidates; [`Preparer::complete`] adds the fingerprint when there are some.
    pub fn partial(&self, text: &str) -> Signature {
        Signature::without_fingerprint(self.config.rule().banding(), text)
    }

    /// Adds `text`'s simhash fingerprint to its [`Preparer::partial`] signature.
    pub fn complete(&self, sig: &mut Signature, text: &str) {
        sig.fingerprint = self.fingerprinter.fingerprint_wide(text);
    }

    /// A document known only by its signature (no paragraphs).
    pub fn from_signature(&self, signature: Signature) -> Prepared {
        Prepared {
            signature,
            paragraphs: Vec::new(),
            len: 0,
        }
    }
}
