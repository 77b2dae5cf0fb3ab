//! Tokenizers: a text in, its tokens out, as slices of the text (no allocation per token).

/// How a text is cut into tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Tokenizer {
    /// Words by Unicode's word boundaries (UAX #29), keeping the pieces that hold a letter
    /// or digit: exactly `unicode-segmentation`'s `unicode_words`. `don't`, `3.14`, `e.g`
    /// and `snake_case` are one word each; every Han ideograph is a word of its own (see
    /// [`Tokenizer::Jieba`] for Chinese words). ASCII texts take a fast path that is tested
    /// to give the same words.
    UnicodeWords,
    /// Maximal runs of ASCII letters `[A-Za-z]+`; everything else separates (the tokenizer
    /// of simhash-cpp).
    AsciiLetters,
    /// Every run of `n` consecutive characters (Unicode scalar values), overlapping; a
    /// non-empty text shorter than `n` is one token.
    CharNgrams(usize),
    /// Chinese and Japanese words (jieba-rs), with part-of-speech tags for the
    /// [`LenPos`](super::Weighting::LenPos) weights; text outside CJK scripts is cut as
    /// jieba cuts it (runs of letters and digits).
    #[cfg(feature = "cjk")]
    Jieba,
}

impl std::str::FromStr for Tokenizer {
    type Err = crate::Error;

    /// A tokenizer by name: `words`, `ascii`, `char:N` (N > 0), or `jieba` (with the `cjk`
    /// feature), as the CLI's `--tokenizer` and the Python module name them.
    fn from_str(s: &str) -> crate::Result<Tokenizer> {
        match s {
            "words" => return Ok(Tokenizer::UnicodeWords),
            "ascii" => return Ok(Tokenizer::AsciiLetters),
            #[cfg(feature = "cjk")]
            "jieba" => return Ok(Tokenizer::Jieba),
            _ => {}
        }
        match s.strip_prefix("char:").map(str::parse::<usize>) {
            Some(Ok(n)) if n > 0 => Ok(Tokenizer::CharNgrams(n)),
            _ => Err(crate::Error::UnknownTokenizer(s.to_string())),
        }
    }
}

impl Tokenizer {
    /// Calls `token` for every token of `text`, in order.
    pub fn tokens<'t>(&self, text: &'t str, token: impl FnMut(&'t str)) {
        match *self {
            Tokenizer::UnicodeWords => unicode_words(text, token),
            Tokenizer::AsciiLetters => text
                .split(|c: char| !c.is_ascii_alphabetic())
                .filter(|t| !t.is_empty())
                .for_each(token),
            Tokenizer::CharNgrams(n) => char_ngrams(text, n.max(1), token),
            #[cfg(feature = "cjk")]
            Tokenizer::Jieba => {
                let mut token = token;
                super::cjk::words(text, |w, _| token(w))
            }
        }
    }
}

/// `unicode_words`, with an ASCII fast path, and the scanner's test of a segment's
/// letters elsewhere.
fn unicode_words<'t>(text: &'t str, token: impl FnMut(&'t str)) {
    if text.is_ascii() {
        ascii_words(text, token);
    } else {
        super::scan::slow_words(text)
            .map(|(_, w)| w)
            .for_each(token);
    }
}

/// UAX #29 words of an ASCII text, by the block scanner of the fingerprint pipeline.
fn ascii_words<'t>(text: &'t str, mut token: impl FnMut(&'t str)) {
    debug_assert!(text.is_ascii());
    super::scan::scan(text.as_bytes(), 0, &mut |start, end| {
        token(&text[start..end])
    });
}

/// Every run of `n` characters of `text`.
fn char_ngrams<'t>(text: &'t str, n: usize, mut token: impl FnMut(&'t str)) {
    if text.is_ascii() {
        // One byte per character.
        if text.len() < n {
            if !text.is_empty() {
                token(text);
            }
            return;
        }
        for i in 0..=text.len() - n {
            token(&text[i..i + n]);
        }
        return;
    }
    let mut bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    bounds.push(text.len());
    if bounds.len() <= n {
        // Fewer than n characters.
        if !text.is_empty() {
            token(text);
        }
        return;
    }
    for w in bounds.windows(n + 1) {
        token(&text[w[0]..w[n]]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use unicode_segmentation::UnicodeSegmentation;

    fn collect(t: Tokenizer, text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        t.tokens(text, |w| out.push(w));
        out
    }

    #[test]
    fn tokenizers_parse_by_name() {
        assert_eq!(
            "words".parse::<Tokenizer>().ok(),
            Some(Tokenizer::UnicodeWords)
        );
        assert_eq!(
            "ascii".parse::<Tokenizer>().ok(),
            Some(Tokenizer::AsciiLetters)
        );
        assert_eq!(
            "char:3".parse::<Tokenizer>().ok(),
            Some(Tokenizer::CharNgrams(3))
        );
        #[cfg(feature = "cjk")]
        assert_eq!("jieba".parse::<Tokenizer>().ok(), Some(Tokenizer::Jieba));
        for bad in ["", "char:0", "char:", "char:x", "Words", "char:-1"] {
            let e = bad.parse::<Tokenizer>().unwrap_err();
            assert!(e.to_string().contains(&format!("'{bad}'")), "{bad}: {e}");
        }
    }

    #[test]
    fn unicode_words_examples() {
        assert_eq!(
            collect(
                Tokenizer::UnicodeWords,
                "Don't stop: 3.14, e.g. snake_case; a:b 1,000"
            ),
            vec!["Don't", "stop", "3.14", "e.g", "snake_case", "a:b", "1,000"]
        );
        assert_eq!(
            collect(Tokenizer::UnicodeWords, "naïve café — 漢字 テスト"),
            vec!["naïve", "café", "漢", "字", "テスト"]
        );
        assert!(collect(Tokenizer::UnicodeWords, "__ -- ...").is_empty());
    }

    #[test]
    fn ascii_letters() {
        assert_eq!(
            collect(Tokenizer::AsciiLetters, "it's 2 a-b café"),
            vec!["it", "s", "a", "b", "caf"]
        );
    }

    #[test]
    fn char_ngrams_examples() {
        assert_eq!(
            collect(Tokenizer::CharNgrams(3), "abcde"),
            vec!["abc", "bcd", "cde"]
        );
        assert_eq!(collect(Tokenizer::CharNgrams(3), "ab"), vec!["ab"]);
        assert!(collect(Tokenizer::CharNgrams(3), "").is_empty());
        assert_eq!(collect(Tokenizer::CharNgrams(2), "añb"), vec!["añ", "ñb"]);
        assert_eq!(collect(Tokenizer::CharNgrams(3), "añb"), vec!["añb"]);
        assert_eq!(collect(Tokenizer::CharNgrams(4), "añb"), vec!["añb"]);
    }

    fn char_ngrams_oracle(text: &str, n: usize) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        if chars.is_empty() {
            return vec![];
        }
        if chars.len() < n {
            return vec![text.to_string()];
        }
        chars.windows(n).map(|w| w.iter().collect()).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The ASCII fast path against unicode-segmentation itself.
        #[test]
        fn ascii_fast_path_matches_unicode_segmentation(
            text in "[aZq09_.:',; \"\t\n\r!?()/-]{0,40}"
        ) {
            let mut fast = Vec::new();
            ascii_words(&text, |w| fast.push(w));
            let reference: Vec<&str> = text.unicode_words().collect();
            prop_assert_eq!(fast, reference);
        }

        /// Any text, every script: the words are unicode-segmentation's.
        #[test]
        fn words_match_unicode_segmentation(
            text in prop_oneof![any::<String>(), crate::fingerprint::normal::tests::mixed()]
        ) {
            let reference: Vec<&str> = text.unicode_words().collect();
            prop_assert_eq!(collect(Tokenizer::UnicodeWords, &text), reference);
        }

        #[test]
        fn ascii_fast_path_on_any_ascii(text in "[\\x00-\\x7f]{0,60}") {
            let mut fast = Vec::new();
            ascii_words(&text, |w| fast.push(w));
            let reference: Vec<&str> = text.unicode_words().collect();
            prop_assert_eq!(fast, reference);
        }

        #[test]
        fn long_ascii_texts(text in "([a-z]{1,12}[ .,':;_0-9]{0,3}){0,60}") {
            let mut fast = Vec::new();
            ascii_words(&text, |w| fast.push(w));
            let reference: Vec<&str> = text.unicode_words().collect();
            prop_assert_eq!(fast, reference);
        }

        #[test]
        fn char_ngrams_match_oracle(text in "[ab ñ漢é]{0,12}", n in 1usize..5) {
            let got: Vec<String> =
                collect(Tokenizer::CharNgrams(n), &text).iter().map(|s| s.to_string()).collect();
            prop_assert_eq!(got, char_ngrams_oracle(&text, n));
        }
    }
}
