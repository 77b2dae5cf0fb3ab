//! The characters of the scripts written without spaces between words: Han (with the
//! compatibility ideographs and every extension), Hiragana, Katakana (half-width too),
//! Thai, Lao, Khmer, Myanmar and Tibetan, and seven kana marks. In these scripts a `\w+`
//! run is a whole clause, so each of their characters is a word of its own (as BERT's
//! basic tokenizer splits CJK ideographs), and a Chinese text is compared by character
//! 5-grams where an English one is compared by word 5-grams.
//!
//! The table is the normative one of the natural CJK corpus's `cjkwords.py` (Unicode 16.0
//! Scripts.txt: the code points whose Script is one of the eight above, plus U+3031–3035,
//! U+3099–309C, U+30A0, U+30FC, U+FF70 and U+FF9E–FF9F, whose Script_Extensions is exactly
//! {Hiragana, Katakana}), copied verbatim; `tests/vectors/spaceless.json` is that file's
//! table, and a test holds the two equal. No character of the table changes when
//! lowercased, and none outside it lowercases into it, so the test may come before the
//! lowercasing.

/// Inclusive code-point ranges, sorted and disjoint.
#[rustfmt::skip]
pub(crate) const SPACELESS: &[(u32, u32)] = &[
    // Thai
    (0x0E01, 0x0E3A), (0x0E40, 0x0E5B),
    // Lao
    (0x0E81, 0x0E82), (0x0E84, 0x0E84), (0x0E86, 0x0E8A), (0x0E8C, 0x0EA3),
    (0x0EA5, 0x0EA5), (0x0EA7, 0x0EBD), (0x0EC0, 0x0EC4), (0x0EC6, 0x0EC6),
    (0x0EC8, 0x0ECE), (0x0ED0, 0x0ED9), (0x0EDC, 0x0EDF),
    // Tibetan
    (0x0F00, 0x0F47), (0x0F49, 0x0F6C), (0x0F71, 0x0F97), (0x0F99, 0x0FBC),
    (0x0FBE, 0x0FCC), (0x0FCE, 0x0FD4), (0x0FD9, 0x0FDA),
    // Myanmar
    (0x1000, 0x109F),
    // Khmer
    (0x1780, 0x17DD), (0x17E0, 0x17E9), (0x17F0, 0x17F9), (0x19E0, 0x19FF),
    // CJK and Kangxi radicals
    (0x2E80, 0x2E99), (0x2E9B, 0x2EF3), (0x2F00, 0x2FD5),
    // 々 〇 Hangzhou numerals
    (0x3005, 0x3005), (0x3007, 0x3007), (0x3021, 0x3029),
    // kana repeat marks
    (0x3031, 0x3035),
    // 〸 〹 〺 〻
    (0x3038, 0x303B),
    // Hiragana
    (0x3041, 0x3096),
    // ゙ ゚ ゛ ゜ ゝ ゞ ゟ ゠ Katakana
    (0x3099, 0x30FA),
    // ー ヽ ヾ ヿ
    (0x30FC, 0x30FF),
    // Katakana ext., circled, squared
    (0x31F0, 0x31FF), (0x32D0, 0x32FE), (0x3300, 0x3357),
    // CJK Ext. A
    (0x3400, 0x4DBF),
    // CJK Unified Ideographs
    (0x4E00, 0x9FFF),
    // Myanmar Ext. B, A
    (0xA9E0, 0xA9FE), (0xAA60, 0xAA7F),
    // CJK Compatibility Ideographs
    (0xF900, 0xFA6D), (0xFA70, 0xFAD9),
    // halfwidth katakana, ｰ ﾞ ﾟ
    (0xFF66, 0xFF9F),
    // Myanmar Ext. C
    (0x116D0, 0x116E3),
    // Han marks
    (0x16FE2, 0x16FE3), (0x16FF0, 0x16FF6),
    // Kana Ext. B
    (0x1AFF0, 0x1AFF3), (0x1AFF5, 0x1AFFB), (0x1AFFD, 0x1AFFE),
    // Kana Supplement, Ext. A, small kana
    (0x1B000, 0x1B122), (0x1B132, 0x1B132), (0x1B150, 0x1B152),
    (0x1B155, 0x1B155), (0x1B164, 0x1B167),
    // 🈀
    (0x1F200, 0x1F200),
    // CJK Ext. B, C, D, E
    (0x20000, 0x2A6DF), (0x2A700, 0x2B81D), (0x2B820, 0x2CEAD),
    // CJK Ext. F, I
    (0x2CEB0, 0x2EBE0), (0x2EBF0, 0x2EE5D),
    // CJK Compatibility Supplement
    (0x2F800, 0x2FA1D),
    // CJK Ext. G, H
    (0x30000, 0x3134A), (0x31350, 0x33479),
];

/// The first code point of the table: everything below (Latin, Greek, Cyrillic, Arabic,
/// Hebrew, the Indic scripts…) answers at the first compare.
const FIRST: u32 = SPACELESS[0].0;

/// One bit per code point of the Basic Multilingual Plane, from [`SPACELESS`]: a CJK text
/// asks once per character, so its answer is one load rather than a search.
static BMP: [u64; 1024] = {
    let mut bits = [0u64; 1024];
    let mut r = 0;
    while r < SPACELESS.len() {
        let (lo, hi) = SPACELESS[r];
        let mut cp = lo;
        while cp <= hi && cp < 0x1_0000 {
            bits[(cp >> 6) as usize] |= 1 << (cp & 63);
            cp += 1;
        }
        r += 1;
    }
    bits
};

/// Whether `c` belongs to a script written without spaces between words, so that it is a
/// word on its own ([`SPACELESS`]).
#[inline]
pub fn is_spaceless(c: char) -> bool {
    let cp = u32::from(c);
    if cp < FIRST {
        false
    } else if cp < 0x1_0000 {
        BMP[(cp >> 6) as usize] >> (cp & 63) & 1 != 0
    } else {
        let i = SPACELESS.partition_point(|&(_, hi)| hi < cp);
        SPACELESS.get(i).is_some_and(|&(lo, _)| lo <= cp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_disjoint() {
        for w in SPACELESS.windows(2) {
            assert!(w[0].0 <= w[0].1 && w[0].1 + 1 < w[1].0, "{w:x?}");
        }
    }

    #[test]
    fn every_code_point_answers_as_the_table_says() {
        let by_search = |cp: u32| SPACELESS.iter().any(|&(lo, hi)| lo <= cp && cp <= hi);
        for c in (0..=0x10_FFFF).filter_map(char::from_u32) {
            assert_eq!(is_spaceless(c), by_search(u32::from(c)), "{c:?}");
        }
    }
}
