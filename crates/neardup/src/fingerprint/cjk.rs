//! Chinese and Japanese words with part-of-speech tags, by jieba.

use std::sync::OnceLock;

use jieba_rs::Jieba;

/// jieba with its built-in dictionary: loaded once (it takes a moment) and never changed,
/// so it is a constant table, not state.
fn jieba() -> &'static Jieba {
    static JIEBA: OnceLock<Jieba> = OnceLock::new();
    JIEBA.get_or_init(Jieba::new)
}

/// Calls `word(w, noun)` for every word of `text` holding a letter or digit (jieba also
/// returns spaces and punctuation, which are dropped); `noun` when jieba tags it a noun
/// (tags `n`, `nr`, `ns`, `nt`, `nz`, …).
pub(crate) fn words<'t>(text: &'t str, mut word: impl FnMut(&'t str, bool)) {
    for tag in jieba().tag(text, true) {
        if tag.word.chars().any(char::is_alphanumeric) {
            word(tag.word, tag.tag.starts_with('n'));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_and_tags() {
        let mut out = Vec::new();
        words(
            "我们在北京大学学习。Hello world 2024!",
            |w, noun| out.push((w, noun)),
        );
        let words: Vec<&str> = out.iter().map(|(w, _)| *w).collect();
        assert!(words.contains(&"北京大学"), "{words:?}");
        assert!(
            words.contains(&"Hello") && words.contains(&"2024"),
            "{words:?}"
        );
        assert!(!words.iter().any(|w| w.trim().is_empty() || *w == "。"));
        assert!(out.iter().any(|&(w, noun)| w == "北京大学" && noun));
        assert!(out.iter().any(|&(w, noun)| w == "学习" && !noun));
    }
}
