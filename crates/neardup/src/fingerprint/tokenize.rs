//! Tokenizers: a text in, its tokens out, as slices of the text (no allocation per token).

use unicode_segmentation::UnicodeSegmentation;

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

/// `unicode_words`, with an ASCII fast path.
fn unicode_words<'t>(text: &'t str, token: impl FnMut(&'t str)) {
    if text.is_ascii() {
        ascii_words(text, token);
    } else {
        text.unicode_words().for_each(token);
    }
}

/// Word-break classes of ASCII characters (UAX #29, table 3), as far as words go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// `A-Z a-z`
    Letter,
    /// `0-9`
    Numeric,
    /// `_`
    ExtendNumLet,
    /// `:` joins letters only.
    MidLetter,
    /// `.` and `'` join letters, and digits.
    MidNumLetQ,
    /// `,` and `;` join digits only.
    MidNum,
    /// Anything else: always a break.
    Other,
}

const fn class(b: u8) -> Class {
    match b {
        b'A'..=b'Z' | b'a'..=b'z' => Class::Letter,
        b'0'..=b'9' => Class::Numeric,
        b'_' => Class::ExtendNumLet,
        b':' => Class::MidLetter,
        b'.' | b'\'' => Class::MidNumLetQ,
        b',' | b';' => Class::MidNum,
        _ => Class::Other,
    }
}

const CLASS: [Class; 128] = {
    let mut t = [Class::Other; 128];
    let mut b = 0;
    while b < 128 {
        t[b] = class(b as u8);
        b += 1;
    }
    t
};

/// UAX #29 words of an ASCII text. Within ASCII the rules that keep characters together
/// are: letters, digits and `_` in any order (WB5, WB8–WB10, WB13a/b); a letter, then `:`,
/// `.` or `'`, then a letter (WB6/7); a digit, then `,`, `;`, `.` or `'`, then a digit
/// (WB11/12). A piece is a word when it holds a letter or digit.
fn ascii_words<'t>(text: &'t str, mut token: impl FnMut(&'t str)) {
    let bytes = text.as_bytes();
    let n = bytes.len();
    let class_at = |i: usize| CLASS[(bytes[i] & 0x7f) as usize];
    let mut i = 0;
    while i < n {
        let c = class_at(i);
        if !matches!(c, Class::Letter | Class::Numeric | Class::ExtendNumLet) {
            i += 1;
            continue;
        }
        let start = i;
        let mut alnum = c != Class::ExtendNumLet;
        let mut prev = c;
        i += 1;
        while i < n {
            let c = class_at(i);
            match c {
                Class::Letter | Class::Numeric | Class::ExtendNumLet => {
                    alnum |= c != Class::ExtendNumLet;
                    prev = c;
                    i += 1;
                }
                Class::MidLetter | Class::MidNumLetQ | Class::MidNum if i + 1 < n => {
                    let next = class_at(i + 1);
                    let joins = matches!(
                        (prev, c, next),
                        (
                            Class::Letter,
                            Class::MidLetter | Class::MidNumLetQ,
                            Class::Letter
                        ) | (
                            Class::Numeric,
                            Class::MidNum | Class::MidNumLetQ,
                            Class::Numeric
                        )
                    );
                    if !joins {
                        break;
                    }
                    prev = next;
                    i += 2;
                }
                _ => break,
            }
        }
        if alnum {
            token(&text[start..i]);
        }
    }
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

    fn collect(t: Tokenizer, text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        t.tokens(text, |w| out.push(w));
        out
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

        #[test]
        fn ascii_fast_path_on_any_ascii(text in "[\\x00-\\x7f]{0,60}") {
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
