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

    /// Words jieba finds only through its HMM (not in its dictionary: 杭研, 小明, 韩冰,
    /// 李小福, 床前, 疑是), pinned as jieba-rs 0.7.4 with the stock jieba-macros 0.7.1 cut
    /// them. The HMM's emission tables come from the patched jieba-macros in `vendor/`, so
    /// a change there that moves any fingerprint of the `jieba` tokenizer shows here.
    #[test]
    fn hmm_words_are_pinned() {
        let cases: [(&str, &str); 4] = [
            ("他来到了网易杭研大厦", "他 来到 了 网易/n 杭研 大厦/n"),
            (
                "小明硕士毕业于中国科学院计算所，后在日本京都大学深造",
                "小明 硕士/n 毕业/n 于 中国科学院/n 计算所/n 后 在 日本京都大学/n 深造",
            ),
            (
                "我们中出了一个叛徒，韩冰和李小福是好朋友",
                "我们 中出 了 一个 叛徒/n 韩冰 和 李小福 是 好 朋友/n",
            ),
            (
                "床前明月光，疑是地上霜。举头望明月，低头思故乡。",
                "床前 明月光/n 疑是 地上 霜/n 举头 望明月/n 低头/n 思/n 故乡/n",
            ),
        ];
        for (text, want) in cases {
            let mut got = Vec::new();
            words(text, |w, noun| {
                got.push(if noun {
                    format!("{w}/n")
                } else {
                    w.to_string()
                })
            });
            assert_eq!(got.join(" "), want, "{text}");
        }
    }
}
