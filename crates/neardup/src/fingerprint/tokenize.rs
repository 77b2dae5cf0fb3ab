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

/// `unicode_words`, with an ASCII fast path.
fn unicode_words<'t>(text: &'t str, token: impl FnMut(&'t str)) {
    if text.is_ascii() {
        ascii_words(text, token);
    } else {
        text.unicode_words().for_each(token);
    }
}

/// Word-break flags of ASCII bytes (UAX #29, table 3), as far as words go.
const LETTER: u8 = 1; // A-Z a-z
const DIGIT: u8 = 2; // 0-9
const UNDERSCORE: u8 = 4; // _ (ExtendNumLet)
const WORD: u8 = LETTER | DIGIT | UNDERSCORE;
const MID_LETTER: u8 = 8; // : . ' between letters
const MID_NUM: u8 = 16; // , ; . ' between digits

const FLAGS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        t[b] = match c {
            b'A'..=b'Z' | b'a'..=b'z' => LETTER,
            b'0'..=b'9' => DIGIT,
            b'_' => UNDERSCORE,
            b':' => MID_LETTER,
            b'.' | b'\'' => MID_LETTER | MID_NUM,
            b',' | b';' => MID_NUM,
            _ => 0,
        };
        b += 1;
    }
    t
};

/// UAX #29 words of an ASCII text. Within ASCII the rules that keep characters together
/// are: letters, digits and `_` in any order (WB5, WB8–WB10, WB13a/b); a letter, then `:`,
/// `.` or `'`, then a letter (WB6/7); a digit, then `,`, `;`, `.` or `'`, then a digit
/// (WB11/12). A piece is a word when it holds a letter or digit.
///
/// The text is classified 64 bytes at a time into bit masks (word characters, possible
/// joiners); words are then the runs of set bits, found with bit arithmetic, and only a
/// joiner flanked by word characters (rare: `don't`, `3.14`) is looked at byte by byte.
fn ascii_words<'t>(text: &'t str, mut token: impl FnMut(&'t str)) {
    ascii_word_bounds(text, |start, end| token(&text[start..end]));
}

/// The byte bounds `(start, end)` of the words of an ASCII text, as [`ascii_words`] cuts
/// them (for callers that want bytes: no slicing of the `str`).
pub(crate) fn ascii_word_bounds(text: &str, mut token: impl FnMut(usize, usize)) {
    debug_assert!(text.is_ascii());
    let b = text.as_bytes();
    let masks = classify(b);
    // Word characters, and joiners that join: the bytes that belong to words.
    let runs: Vec<u64> = masks
        .iter()
        .enumerate()
        .map(|(blk, m)| {
            let prev = if blk > 0 {
                masks[blk - 1].word >> 63
            } else {
                0
            };
            let next = masks.get(blk + 1).map_or(0, |n| n.word & 1);
            let mut candidates = m.joiner & ((m.word << 1) | prev) & ((m.word >> 1) | (next << 63));
            let mut joined = 0u64;
            while candidates != 0 {
                let p = candidates.trailing_zeros() as usize;
                candidates &= candidates - 1;
                let i = blk * 64 + p;
                let (prev, mid, next) = (
                    FLAGS[b[i - 1] as usize],
                    FLAGS[b[i] as usize],
                    FLAGS[b[i + 1] as usize],
                );
                if (mid & MID_LETTER != 0 && prev & next & LETTER != 0)
                    || (mid & MID_NUM != 0 && prev & next & DIGIT != 0)
                {
                    joined |= 1 << p;
                }
            }
            m.word | joined
        })
        .collect();
    // Runs of set bits: starts where the bit before is clear, ends where the bit after is.
    let mut open: Option<usize> = None;
    for (blk, &run) in runs.iter().enumerate() {
        let base = blk * 64;
        let prev = if blk > 0 { runs[blk - 1] >> 63 } else { 0 };
        let next = runs.get(blk + 1).map_or(0, |n| n & 1);
        let mut starts = run & !((run << 1) | prev);
        let mut ends = run & !((run >> 1) | (next << 63));
        loop {
            let start = match open {
                Some(s) => s,
                None if starts != 0 => {
                    let p = starts.trailing_zeros() as usize;
                    starts &= starts - 1;
                    base + p
                }
                None => break,
            };
            if ends == 0 {
                // The run goes on into the next block.
                open = Some(start);
                break;
            }
            let end = base + ends.trailing_zeros() as usize + 1;
            ends &= ends - 1;
            open = None;
            let word = &b[start..end];
            // Joiners sit between letters or digits, so a run without either is all `_`.
            if word[0] != b'_'
                || word
                    .iter()
                    .any(|&c| FLAGS[c as usize] & (LETTER | DIGIT) != 0)
            {
                token(start, end);
            }
        }
    }
}

/// Class masks of 64 bytes: bit `i` for byte `i` of the block.
#[derive(Clone, Copy, Default)]
struct Masks {
    /// Letters, digits, `_`.
    word: u64,
    /// `: . ' , ;`, which may join two letters or two digits.
    joiner: u64,
}

/// The class masks of an ASCII text, a block of 64 bytes each (the last padded with
/// bytes of no class).
fn classify(b: &[u8]) -> Vec<Masks> {
    let mut out = Vec::with_capacity(b.len().div_ceil(64));
    let mut blocks = b.chunks_exact(64);
    for block in &mut blocks {
        out.push(classify_block(block));
    }
    let rest = blocks.remainder();
    if !rest.is_empty() {
        let mut padded = [0u8; 64];
        padded[..rest.len()].copy_from_slice(rest);
        out.push(classify_block(&padded));
    }
    out
}

/// The class masks of exactly 64 ASCII bytes.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn classify_block(block: &[u8]) -> Masks {
    // SAFETY: SSE2 is enabled for this build (the cfg above; it is part of every x86-64
    // target), so its instructions exist on any CPU the program runs on.
    unsafe { classify_block_sse2(block) }
}

/// The class masks of exactly 64 ASCII bytes, 16 at a time with SSE2: ranges by signed
/// byte compares, which are exact on ASCII, then one `movemask` per class.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn classify_block_sse2(block: &[u8]) -> Masks {
    use std::arch::x86_64::*;

    debug_assert_eq!(block.len(), 64);
    let splat = |c: u8| _mm_set1_epi8(c as i8);
    let mut m = Masks::default();
    for (k, chunk) in block.chunks_exact(16).enumerate() {
        // SAFETY: `chunk` is 16 readable bytes; the load has no alignment requirement.
        let x = unsafe { _mm_loadu_si128(chunk.as_ptr().cast()) };
        let lower = _mm_or_si128(x, splat(0x20));
        let letter = _mm_and_si128(
            _mm_cmpgt_epi8(lower, splat(b'a' - 1)),
            _mm_cmplt_epi8(lower, splat(b'z' + 1)),
        );
        let digit = _mm_and_si128(
            _mm_cmpgt_epi8(x, splat(b'0' - 1)),
            _mm_cmplt_epi8(x, splat(b'9' + 1)),
        );
        let word = _mm_or_si128(_mm_or_si128(letter, digit), _mm_cmpeq_epi8(x, splat(b'_')));
        let joiner = _mm_or_si128(
            _mm_or_si128(
                _mm_cmpeq_epi8(x, splat(b'.')),
                _mm_cmpeq_epi8(x, splat(b'\'')),
            ),
            _mm_or_si128(
                _mm_or_si128(
                    _mm_cmpeq_epi8(x, splat(b',')),
                    _mm_cmpeq_epi8(x, splat(b':')),
                ),
                _mm_cmpeq_epi8(x, splat(b';')),
            ),
        );
        let shift = 16 * k;
        m.word |= u64::from(_mm_movemask_epi8(word) as u16) << shift;
        m.joiner |= u64::from(_mm_movemask_epi8(joiner) as u16) << shift;
    }
    m
}

/// The class masks of exactly 64 ASCII bytes, a byte at a time.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
fn classify_block(block: &[u8]) -> Masks {
    classify_block_scalar(block)
}

/// The class masks of exactly 64 ASCII bytes, a byte at a time (the reference for the SIMD
/// version, and the version elsewhere).
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn classify_block_scalar(block: &[u8]) -> Masks {
    let mut m = Masks::default();
    for (i, &c) in block.iter().enumerate() {
        let f = FLAGS[c as usize];
        m.word |= u64::from(f & WORD != 0) << i;
        m.joiner |= u64::from(f & (MID_LETTER | MID_NUM) != 0) << i;
    }
    m
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

        #[test]
        fn ascii_fast_path_on_any_ascii(text in "[\\x00-\\x7f]{0,60}") {
            let mut fast = Vec::new();
            ascii_words(&text, |w| fast.push(w));
            let reference: Vec<&str> = text.unicode_words().collect();
            prop_assert_eq!(fast, reference);
        }

        #[test]
        fn block_classes_agree(block in proptest::collection::vec(0u8..128, 64)) {
            let (a, b) = (classify_block(&block), classify_block_scalar(&block));
            prop_assert_eq!((a.word, a.joiner), (b.word, b.joiner));
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
