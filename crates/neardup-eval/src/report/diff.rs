//! Word-level differences of a kept document and a document removed for it, ready to show
//! side by side: the kept text with the words only it has marked, the removed text with
//! the words only it has marked, and long runs of shared words folded away.

use std::time::Duration;

use neardup::jaccard::is_spaceless;
use serde::Serialize;
use similar::{Algorithm, ChangeTag, TextDiff};

/// Shared words shown on either side of a change before the rest of a shared run folds.
const CONTEXT: usize = 12;
/// Fewest shared words folded into a mark: fewer are shown.
const FOLD_MIN: usize = 10;
/// Words shown per side at most: the rest of a long document is left out.
pub(super) const MAX_WORDS: usize = 600;
/// Time the diff may take per pair before it settles for a coarser answer.
const TIMEOUT: Duration = Duration::from_millis(250);

/// What a stretch of text is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// In both documents.
    Same,
    /// Only in the kept document.
    Del,
    /// Only in the removed document.
    Ins,
    /// Words left out of the view ("… 40 words …").
    Skip,
}

/// A stretch of text of one kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Segment {
    pub kind: Kind,
    pub text: String,
}

/// The two sides of a diff.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Diff {
    /// The kept document: shared words and words only it has ([`Kind::Del`]).
    pub kept: Vec<Segment>,
    /// The removed document: shared words and words only it has ([`Kind::Ins`]).
    pub removed: Vec<Segment>,
    /// Words only in the kept document.
    pub deleted: usize,
    /// Words only in the removed document.
    pub inserted: usize,
    /// Whether words were left out past [`MAX_WORDS`].
    pub cut: bool,
}

/// One side being written: segments merged by kind, words counted, words past
/// [`MAX_WORDS`] dropped and counted.
#[derive(Default)]
struct Side {
    segments: Vec<Segment>,
    words: usize,
    dropped: usize,
}

impl Side {
    fn push(&mut self, kind: Kind, text: &str) {
        match self.segments.last_mut() {
            Some(last) if last.kind == kind && kind != Kind::Skip => last.text.push_str(text),
            _ => self.segments.push(Segment {
                kind,
                text: text.to_string(),
            }),
        }
    }

    fn full(&self) -> bool {
        self.words >= MAX_WORDS
    }

    fn token(&mut self, kind: Kind, token: &str) {
        let word = is_word(token);
        if self.full() {
            self.dropped += usize::from(word);
            return;
        }
        self.words += usize::from(word);
        // Changed white space is not worth a mark (it would only colour a gap).
        self.push(if word { kind } else { Kind::Same }, token);
    }

    /// `words` shared words folded into a mark.
    fn fold(&mut self, words: usize) {
        if self.full() {
            self.dropped += words;
        } else if words == 1 {
            self.push(Kind::Skip, " … 1 word … ");
        } else {
            self.push(Kind::Skip, &format!(" … {words} words … "));
        }
    }

    fn finish(mut self) -> Vec<Segment> {
        if self.dropped > 0 {
            let n = self.dropped;
            self.push(Kind::Skip, &format!(" … {n} more words not shown"));
        }
        self.segments
    }
}

fn is_word(token: &str) -> bool {
    !token.chars().all(char::is_whitespace)
}

fn words_in(tokens: &[&str]) -> usize {
    tokens.iter().filter(|t| is_word(t)).count()
}

/// A run of the diff: tokens both documents share, or a change between two such runs.
enum Run<'a> {
    Same(Vec<&'a str>),
    Change(Vec<&'a str>, Vec<&'a str>),
}

/// `text` cut into words and the white space between them: runs of white space, each
/// character of a script written without spaces ([`is_spaceless`], as the Jaccard
/// decision's words), and runs of anything else. A Chinese sentence is then compared a
/// character at a time, not as one word.
fn tokens(text: &str) -> Vec<&str> {
    #[derive(PartialEq)]
    enum Class {
        Space,
        Spaceless,
        Other,
    }
    let mut out = Vec::with_capacity(text.len() / 4 + 1);
    let mut start = 0;
    let mut current = Class::Other;
    for (i, c) in text.char_indices() {
        let class = if c.is_whitespace() {
            Class::Space
        } else if is_spaceless(c) {
            Class::Spaceless
        } else {
            Class::Other
        };
        if i > start && (class != current || class == Class::Spaceless) {
            out.push(&text[start..i]);
            start = i;
        }
        current = class;
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// The word diff of `kept` and `removed` (words as [`tokens`] cuts them).
pub fn words(kept: &str, removed: &str) -> Diff {
    let (old, new) = (tokens(kept), tokens(removed));
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Patience)
        .timeout(TIMEOUT)
        .diff_slices(&old, &new);
    let mut runs: Vec<Run> = Vec::new();
    for change in diff.iter_all_changes() {
        let token = change.value();
        match (change.tag(), runs.last_mut()) {
            (ChangeTag::Equal, Some(Run::Same(t))) => t.push(token),
            (ChangeTag::Equal, _) => runs.push(Run::Same(vec![token])),
            (ChangeTag::Delete, Some(Run::Change(d, _))) => d.push(token),
            (ChangeTag::Insert, Some(Run::Change(_, i))) => i.push(token),
            (ChangeTag::Delete, _) => runs.push(Run::Change(vec![token], vec![])),
            (ChangeTag::Insert, _) => runs.push(Run::Change(vec![], vec![token])),
        }
    }
    let mut out = Diff::default();
    let (mut left, mut right) = (Side::default(), Side::default());
    let last = runs.len().saturating_sub(1);
    for (r, run) in runs.iter().enumerate() {
        match run {
            Run::Same(tokens) => {
                // Context after the previous change and before the next; the middle of a
                // long shared run folds into a mark.
                let head = if r == 0 { 0 } else { CONTEXT };
                let tail = if r == last { 0 } else { CONTEXT };
                let total = words_in(tokens);
                let fold = total >= head + tail + FOLD_MIN;
                let mut seen = 0;
                for t in tokens {
                    let word = is_word(t);
                    seen += usize::from(word);
                    // White space right around the fold is the mark's.
                    let shown = !fold
                        || if word {
                            seen <= head || seen > total - tail
                        } else {
                            seen < head || seen > total - tail
                        };
                    if shown {
                        left.token(Kind::Same, t);
                        right.token(Kind::Same, t);
                    } else if word && seen == head + 1 {
                        left.fold(total - head - tail);
                        right.fold(total - head - tail);
                    }
                }
            }
            Run::Change(deleted, inserted) => {
                out.deleted += words_in(deleted);
                out.inserted += words_in(inserted);
                for t in deleted {
                    left.token(Kind::Del, t);
                }
                for t in inserted {
                    right.token(Kind::Ins, t);
                }
            }
        }
    }
    out.cut = left.dropped > 0 || right.dropped > 0;
    out.kept = left.finish();
    out.removed = right.finish();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(side: &[Segment], kind: Kind) -> Vec<&str> {
        side.iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.text.as_str())
            .collect()
    }

    fn whole(side: &[Segment]) -> String {
        side.iter().map(|s| s.text.as_str()).collect()
    }

    #[test]
    fn a_changed_word_is_marked_on_each_side() {
        let d = words("the quick brown fox jumps", "the quick red fox jumps");
        assert_eq!(text(&d.kept, Kind::Del), ["brown"]);
        assert_eq!(text(&d.removed, Kind::Ins), ["red"]);
        assert!(text(&d.kept, Kind::Ins).is_empty());
        assert!(text(&d.removed, Kind::Del).is_empty());
        // Nothing folds in a short text: each side reads as its document.
        assert_eq!(whole(&d.kept), "the quick brown fox jumps");
        assert_eq!(whole(&d.removed), "the quick red fox jumps");
        assert_eq!((d.deleted, d.inserted, d.cut), (1, 1, false));
    }

    #[test]
    fn a_changed_chinese_character_is_marked_alone() {
        let d = words("我们希望它能够正确地识别", "我们希望它可够正确地识别");
        assert_eq!(text(&d.kept, Kind::Del), ["能"]);
        assert_eq!(text(&d.removed, Kind::Ins), ["可"]);
        assert_eq!((d.deleted, d.inserted), (1, 1));
        assert_eq!(whole(&d.removed), "我们希望它可够正确地识别");
    }

    #[test]
    fn tokens_are_whitespace_runs_words_and_spaceless_characters() {
        assert_eq!(
            tokens("GNU 工具链,  the\tend。"),
            ["GNU", " ", "工", "具", "链", ",", "  ", "the", "\t", "end。"]
        );
        // Without spaceless characters, the cuts of `similar`'s own word diff.
        for text in ["", " a  b\n\nc ", "naïve café\u{a0}x", "x"] {
            assert_eq!(
                tokens(text),
                similar::DiffableStr::tokenize_words(text),
                "{text:?}"
            );
        }
    }

    #[test]
    fn identical_texts_have_no_marks() {
        let d = words("one two three", "one two three");
        assert_eq!(d.kept, d.removed);
        assert_eq!((d.deleted, d.inserted), (0, 0));
        assert_eq!(whole(&d.kept), "one two three");
    }

    #[test]
    fn long_shared_runs_fold_around_the_change() {
        let shared: Vec<String> = (0..200).map(|i| format!("w{i}")).collect();
        let kept = format!("{} END", shared.join(" "));
        let removed = format!("{} FIN", shared.join(" "));
        let d = words(&kept, &removed);
        let skips = text(&d.kept, Kind::Skip);
        assert_eq!(skips, [" … 188 words … "], "{:?}", d.kept);
        // The context before the change: the last CONTEXT shared words.
        let side = whole(&d.kept);
        assert!(
            side.ends_with("w188 w189 w190 w191 w192 w193 w194 w195 w196 w197 w198 w199 END"),
            "{side}"
        );
        assert!(!side.contains("w187 "), "{side}");
        assert_eq!(text(&d.removed, Kind::Ins), ["FIN"]);
    }

    #[test]
    fn long_documents_are_cut_and_counted() {
        let a: Vec<String> = (0..2000).map(|i| format!("a{i}")).collect();
        let b: Vec<String> = (0..1500).map(|i| format!("b{i}")).collect();
        let d = words(&a.join(" "), &b.join(" "));
        assert!(d.cut);
        assert_eq!(
            (d.deleted, d.inserted),
            (2000, 1500),
            "totals count every word"
        );
        let shown = |s: &[Segment]| {
            s.iter()
                .filter(|s| s.kind != Kind::Skip)
                .map(|s| s.text.split_whitespace().count())
                .sum::<usize>()
        };
        assert_eq!(shown(&d.kept), MAX_WORDS);
        assert_eq!(shown(&d.removed), MAX_WORDS);
        assert_eq!(
            text(&d.kept, Kind::Skip),
            [format!(" … {} more words not shown", 2000 - MAX_WORDS)]
        );
    }
}
