//! The word scanner: the UAX #29 words of normalised text, 64 bytes at a time.
//!
//! Outside its slow spans a normalised text ([`Normalized`]) holds ASCII and easy
//! characters only, and within those the word rules that keep characters together are few:
//! letters, digits and `_` in any order (WB5, WB8–WB10, WB13a/b); a letter, then `:`, `.`
//! or `'`, then a letter (WB6/7); a digit, then `,`, `;`, `.` or `'`, then a digit
//! (WB11/12). An easy letter is a letter to every rule, and so is a mark on one (WB4), an
//! ideograph is a word of its own, anything else separates. A piece is a word when it
//! holds a letter, digit or ideograph.
//!
//! Each block of 64 bytes is classified into bit masks (16 bytes at a time with SSE2, all
//! 64 at once with AVX-512BW where the CPU has it, chosen once per text; the
//! non-ASCII characters from the class bitmaps the normaliser wrote as it looked them up,
//! or, for text that comes without them, one at a time by the table), joiners are kept
//! where the masks of their neighbours say so, and words are the runs of set bits, cut
//! around ideographs, found with bit arithmetic. The slow spans go to UAX #29's segments
//! (`split_word_bound_indices`), kept as `unicode_word_indices` keeps them.

use unicode_segmentation::UnicodeSegmentation;

use super::easy::{self, IDEO, LETTER};
use super::normal::{decode, extended, Normalized};
use crate::classify;

/// Calls `word(start, end)` with the byte bounds of every word of `norm.text`, in order.
pub(crate) fn words(norm: &Normalized, mut word: impl FnMut(usize, usize)) {
    #[cfg(target_arch = "x86_64")]
    if let Some(cpu) = Avx512::detect() {
        // SAFETY: `cpu` exists only where the CPU has AVX-512F and BW (`Avx512::detect`).
        unsafe { words_avx512(cpu, norm, &mut word) };
        return;
    }
    words_by(Baseline, norm, &mut word);
}

/// [`words`] compiled for AVX-512, each block classified by
/// [`classify::classes_avx512`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn words_avx512(cpu: Avx512, norm: &Normalized, word: &mut impl FnMut(usize, usize)) {
    words_by(cpu, norm, word);
}

/// [`words`], with the ASCII classes of each block found by `ascii`.
#[inline(always)]
fn words_by(ascii: impl Ascii, norm: &Normalized, word: &mut impl FnMut(usize, usize)) {
    let b = &norm.text[..];
    let marks = Marks::of(norm);
    let mut at = 0;
    for &(start, end) in &norm.slow {
        scan_with(&b[at..start], at, ascii, marks, word);
        // The spans are whole characters of valid UTF-8; a span that were not would have
        // no words rather than panic.
        if let Ok(span) = std::str::from_utf8(&b[start..end]) {
            for (i, w) in slow_words(span) {
                word(start + i, start + i + w.len());
            }
        }
        at = end;
    }
    scan_with(&b[at..], at, ascii, marks, word);
}

/// `unicode_word_indices` of `span`: its UAX #29 segments that hold a letter or digit,
/// with that test ([`makes_word`]) from a bitmap instead of the standard library's table
/// search, which the crate makes for every segment and which took up to 2,800
/// instructions a character (Thai's, each of whose characters is a segment).
pub(crate) fn slow_words(span: &str) -> impl Iterator<Item = (usize, &str)> {
    span.split_word_bound_indices()
        .filter(|(_, w)| w.chars().any(makes_word))
}

/// Whether `c` makes a segment a word for `unicode_words` (the crate's `is_alphanumeric`).
/// The Basic Multilingual Plane's answers are asked of the crate once, for each character
/// alone (a segment of its own, a word exactly when it is alphanumeric), about 5 ms.
/// Other planes' are the standard library's when the crate and it follow one Unicode
/// version (as the crate itself then answers), else asked of the crate each time.
fn makes_word(c: char) -> bool {
    use std::sync::OnceLock;
    static BMP: OnceLock<Box<[u64; 1024]>> = OnceLock::new();
    const SAME_UNICODE: bool = {
        let (ours, std) = (unicode_segmentation::UNICODE_VERSION, char::UNICODE_VERSION);
        ours.0 == std.0 as u64 && ours.1 == std.1 as u64 && ours.2 == std.2 as u64
    };
    let code = c as u32;
    if code < 0x80 {
        return c.is_ascii_alphanumeric();
    }
    if code >= 0x1_0000 {
        return if SAME_UNICODE {
            c.is_alphanumeric()
        } else {
            c.encode_utf8(&mut [0; 4]).unicode_words().next().is_some()
        };
    }
    let bits = BMP.get_or_init(|| {
        let mut bits = Box::new([0u64; 1024]);
        for (code, c) in (0x80..0x1_0000).filter_map(|u| char::from_u32(u).map(|c| (u, c))) {
            if c.encode_utf8(&mut [0; 4]).unicode_words().next().is_some() {
                bits[(code >> 6) as usize] |= 1 << (code & 63);
            }
        }
        bits
    });
    bits[(code >> 6) as usize] >> (code & 63) & 1 == 1
}

/// How the ASCII classes of a block of 64 bytes are found.
trait Ascii: Copy {
    fn classify(self, block: &[u8; 64]) -> Raw;
}

/// The build's own instructions: SSE2 on x86-64, bytes one at a time elsewhere.
#[derive(Clone, Copy)]
struct Baseline;

impl Ascii for Baseline {
    #[inline(always)]
    fn classify(self, block: &[u8; 64]) -> Raw {
        Raw::of(classify::classes(block))
    }
}

/// Proof that the CPU has AVX-512F and BW: made only by [`Avx512::detect`].
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Avx512(());

#[cfg(target_arch = "x86_64")]
impl Avx512 {
    fn detect() -> Option<Avx512> {
        // BW implies F.
        crate::arch::features().avx512bw().then_some(Avx512(()))
    }
}

#[cfg(target_arch = "x86_64")]
impl Ascii for Avx512 {
    #[inline(always)]
    fn classify(self, block: &[u8; 64]) -> Raw {
        // SAFETY: an `Avx512` exists only where the CPU has AVX-512F and BW.
        Raw::of(unsafe { classify::classes_avx512(block) })
    }
}

/// Class masks of one 64-byte block: bit `i` for byte `i`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Block {
    /// ASCII letters, and every byte of easy letters.
    letter: u64,
    digit: u64,
    under: u64,
    /// `:` `.` `'`, which join two letters.
    mid_letter: u64,
    /// `,` `;` `.` `'`, which join two digits.
    mid_num: u64,
    /// Every byte of ideographs, and their first and last bytes.
    ideo: u64,
    ideo_first: u64,
    ideo_last: u64,
}

/// The ASCII classes of a block, with its non-ASCII bytes (`high`) and the lead bytes
/// among them.
#[derive(Clone, Copy, Default)]
struct Raw {
    block: Block,
    lead: u64,
}

impl Raw {
    #[inline(always)]
    fn of(c: classify::Classes) -> Raw {
        Raw {
            block: Block {
                letter: c.letter,
                digit: c.digit,
                under: c.under,
                mid_letter: c.mid_letter,
                mid_num: c.mid_num,
                ..Block::default()
            },
            lead: c.lead,
        }
    }
}

/// Where the classes of a text's non-ASCII characters come from.
trait Classes: Copy {
    /// Sets the bits of the non-ASCII characters of block `k` of `b` (a slice of the text
    /// from byte `base`, `raw` its ASCII classes) in `block`, with the bits `carry` brought
    /// from the block before; leaves in `carry` those of characters that run on into the
    /// next block.
    fn non_ascii(
        self,
        b: &[u8],
        base: usize,
        k: usize,
        raw: &Raw,
        block: &mut Block,
        carry: &mut Block,
    );
}

/// Each character decoded and looked up in the table.
#[derive(Clone, Copy)]
struct Lookup;

impl Classes for Lookup {
    #[inline]
    fn non_ascii(
        self,
        b: &[u8],
        _: usize,
        k: usize,
        raw: &Raw,
        block: &mut Block,
        carry: &mut Block,
    ) {
        block.letter |= carry.letter;
        block.ideo |= carry.ideo;
        block.ideo_last |= carry.ideo_last;
        *carry = Block::default();
        if raw.lead != 0 {
            non_ascii(b, k * 64, raw.lead, block, carry);
        }
    }
}

/// The bitmaps the normaliser left in [`Normalized`].
#[derive(Clone, Copy)]
struct Marks<'a> {
    letter: &'a [u64],
    ideo: &'a [u64],
    ext: &'a [u64],
}

impl<'a> Marks<'a> {
    fn of(norm: &'a Normalized) -> Marks<'a> {
        Marks {
            letter: &norm.letter,
            ideo: &norm.ideo,
            ext: &norm.ext,
        }
    }
}

/// Bits `at..at + 64` of bitmap `map` (bit `at` as bit 0), 0 past its end.
#[inline(always)]
fn bits_at(map: &[u64], at: usize) -> u64 {
    let (w, r) = (at / 64, at % 64);
    let lo = map.get(w).copied().unwrap_or(0);
    let hi = map.get(w + 1).copied().unwrap_or(0);
    // `hi << (64 - r)`, without a shift by 64 when `r` is 0.
    lo >> r | (hi << 1) << (63 - r)
}

impl Classes for Marks<'_> {
    #[inline(always)]
    fn non_ascii(
        self,
        b: &[u8],
        base: usize,
        k: usize,
        _: &Raw,
        block: &mut Block,
        carry: &mut Block,
    ) {
        let at = k * 64;
        // The slice may end inside the block (at a slow span, whose bytes have no marks).
        let valid = match b.len() - at {
            n if n >= 64 => u64::MAX,
            n => (1 << n) - 1,
        };
        block.letter |= bits_at(self.letter, base + at) & valid;
        let first = bits_at(self.ideo, base + at) & valid;
        // Marks on ideographs, and whether the byte after each byte is one's: an
        // ideograph's word ends at a byte that no such byte follows.
        let ext = bits_at(self.ext, base + at) & valid;
        let ext_next = bits_at(self.ext, base + at + 1);
        // Ideographs are three bytes long (easy::tests): their bytes, and their last
        // bytes, across the block's end when they run on.
        let first = u128::from(first);
        let span = first | first << 1 | first << 2;
        let last = first << 2;
        block.ideo |= span as u64 | carry.ideo | ext;
        block.ideo_first |= first as u64;
        block.ideo_last |= (last as u64 | carry.ideo_last | ext) & !ext_next;
        carry.ideo = (span >> 64) as u64;
        carry.ideo_last = (last >> 64) as u64;
    }
}

/// The words of `b`, which holds ASCII and easy characters only; bounds are reported
/// plus `base`.
pub(crate) fn scan(b: &[u8], base: usize, word: &mut impl FnMut(usize, usize)) {
    scan_with(b, base, Baseline, Lookup, word);
}

/// [`scan`], with the classes of non-ASCII characters from `classes`.
#[inline(always)]
fn scan_with(
    b: &[u8],
    base: usize,
    ascii: impl Ascii,
    classes: impl Classes,
    word: &mut impl FnMut(usize, usize),
) {
    if b.is_empty() {
        return;
    }
    let blocks = b.len().div_ceil(64);
    // Bits of characters that run on from one block into the next.
    let mut carry = Block::default();
    let mut cur = load(b, base, 0, ascii, classes, &mut carry);
    // Bit 63 of the previous block's masks, as bit 0.
    let (mut prev_letter, mut prev_digit, mut prev_run, mut prev_last) = (0u64, 0u64, 0u64, 0u64);
    let mut open: Option<usize> = None;
    for k in 0..blocks {
        let next = if k + 1 < blocks {
            load(b, base, k + 1, ascii, classes, &mut carry)
        } else {
            Block::default()
        };
        // Joiners between two letters or two digits belong to the word.
        let joined = cur.mid_letter
            & (cur.letter << 1 | prev_letter)
            & (cur.letter >> 1 | next.letter << 63)
            | cur.mid_num & (cur.digit << 1 | prev_digit) & (cur.digit >> 1 | next.digit << 63);
        let run = cur.letter | cur.digit | cur.under | cur.ideo | joined;
        let next_run0 = (next.letter | next.digit | next.under | next.ideo) & 1
            | next.mid_letter & cur.letter >> 63 & next.letter >> 1 & 1
            | next.mid_num & cur.digit >> 63 & next.digit >> 1 & 1;
        // Runs start where the bit before is clear and end where the bit after is; an
        // ideograph is a word of its own, so runs are also cut around it.
        let mut starts =
            run & !(run << 1 | prev_run) | cur.ideo_first | (cur.ideo_last << 1 | prev_last) & run;
        let mut ends = run & !(run >> 1 | next_run0 << 63)
            | cur.ideo_last
            | (cur.ideo_first >> 1 | next.ideo_first << 63) & run;
        let at = k * 64;
        loop {
            let start = match open {
                Some(s) => s,
                None if starts != 0 => {
                    let p = starts.trailing_zeros() as usize;
                    starts &= starts - 1;
                    at + p
                }
                None => break,
            };
            if ends == 0 {
                // The run goes on into the next block.
                open = Some(start);
                break;
            }
            let end = at + ends.trailing_zeros() as usize + 1;
            ends &= ends - 1;
            open = None;
            // Joiners sit between letters or digits, so a run without a letter, digit or
            // ideograph is all `_`; every non-ASCII byte in a run is a letter's or an
            // ideograph's.
            if b[start] != b'_'
                || b[start..end]
                    .iter()
                    .any(|&c| c >= 0x80 || c.is_ascii_alphanumeric())
            {
                word(base + start, base + end);
            }
        }
        prev_letter = cur.letter >> 63;
        prev_digit = cur.digit >> 63;
        prev_run = run >> 63;
        prev_last = cur.ideo_last >> 63;
        cur = next;
    }
}

/// The masks of block `k` of `b` (the last one padded with bytes of no class), a slice of
/// the text from byte `base`, with the bits `carry` brought from the block before; leaves
/// in `carry` those of characters that run on into the next block.
#[inline(always)]
fn load(
    b: &[u8],
    base: usize,
    k: usize,
    ascii: impl Ascii,
    classes: impl Classes,
    carry: &mut Block,
) -> Block {
    let at = k * 64;
    let raw = match b.get(at..).and_then(<[u8]>::first_chunk::<64>) {
        Some(block) => ascii.classify(block),
        None => {
            let mut padded = [0u8; 64];
            padded[..b.len() - at].copy_from_slice(&b[at..]);
            ascii.classify(&padded)
        }
    };
    let mut block = raw.block;
    classes.non_ascii(b, base, k, &raw, &mut block, carry);
    block
}

/// Sets the bits of the non-ASCII characters starting at the `lead` bits of the block at
/// `at`: a letter's bytes, and those of marks on it, are letters; an ideograph's bytes and
/// those of marks on it are an ideograph's word; anything else (a separator) has no bits.
#[cold]
#[inline(never)]
fn non_ascii(b: &[u8], at: usize, lead: u64, block: &mut Block, carry: &mut Block) {
    let mut leads = lead;
    while leads != 0 {
        let p = leads.trailing_zeros() as usize;
        leads &= leads - 1;
        let (c, len) = decode(b, at + p);
        let (kind, first) = match easy::entry(c).kind() {
            easy::HARD => match extended(b, at + p, c) {
                Some(LETTER) => (LETTER, false),
                Some(_) => (IDEO, false),
                None => continue,
            },
            kind => (kind, true),
        };
        if kind != LETTER && kind != IDEO {
            continue;
        }
        // The character's bytes, across the block's end when it runs on.
        let span = ((1u128 << len) - 1) << p;
        let (lo, hi) = (span as u64, (span >> 64) as u64);
        if kind == LETTER {
            block.letter |= lo;
            carry.letter |= hi;
        } else {
            block.ideo |= lo;
            carry.ideo |= hi;
            if first {
                block.ideo_first |= 1 << p;
            }
            // The word goes on over marks on the ideograph after it.
            let next = at + p + len;
            if b.get(next).is_some_and(|&x| x >= 0x80)
                && extended(b, next, decode(b, next).0).is_some_and(|on| on == IDEO)
            {
                continue;
            }
            let last = p + len - 1;
            if last < 64 {
                block.ideo_last |= 1 << last;
            } else {
                carry.ideo_last |= 1 << (last - 64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::normal::tests::{among_ideographs, mixed};
    use crate::fingerprint::normal::{self, normalize_into, plain};
    use crate::fingerprint::Normalize;
    use proptest::prelude::*;

    fn fast_words(text: &str, n: Normalize) -> Vec<String> {
        let mut norm = Normalized::default();
        normalize_into(text, n, &mut norm);
        let mut out = Vec::new();
        words(&norm, |s, e| {
            out.push(String::from_utf8_lossy(&norm.text[s..e]).into_owned())
        });
        out
    }

    fn plain_words(text: &str, n: Normalize) -> Vec<String> {
        plain(text, n, false)
            .0
            .unicode_words()
            .map(String::from)
            .collect()
    }

    proptest! {
        /// The slow spans' words are the crate's, on any text and on mixed scripts.
        #[test]
        fn slow_words_are_unicode_words(
            text in prop_oneof![any::<String>(), mixed(), among_ideographs()],
        ) {
            let got: Vec<(usize, &str)> = slow_words(&text).collect();
            let want: Vec<(usize, &str)> = text.unicode_word_indices().collect();
            prop_assert_eq!(got, want);
        }
    }

    /// Every character of the Basic Multilingual Plane and the next three, alone and
    /// between letters: a word exactly where the crate says so.
    #[test]
    fn makes_word_is_the_crates_test() {
        for c in (0..0x4_0000).filter_map(char::from_u32) {
            for text in [c.to_string(), format!("a{c}b"), format!(" {c} ")] {
                let got: Vec<(usize, &str)> = slow_words(&text).collect();
                let want: Vec<(usize, &str)> = text.unicode_word_indices().collect();
                assert_eq!(got, want, "{c:?}");
            }
        }
    }

    /// Every hard character the normaliser passes as a separator between ASCII
    /// neighbours (`normal::LONE`), between every pair of a set of them and with more
    /// around: the words and bytes of the plain pipeline.
    #[test]
    fn lone_separators() {
        use crate::fingerprint::easy::{self, HARD};

        let n = Normalize::default();
        let near = ["a", "Z", "1", "_", " ", ".", ":", "'", "\n"];
        // Further out: nothing, a letter, and what joins or attaches to a pictograph.
        let outer = [
            ("", ""),
            ("b", "\u{301}"),
            ("\u{200d}", "b"),
            ("é", "\u{fe0f}"),
        ];
        let mut checked = 0;
        for c in normal::LONE
            .iter()
            .flat_map(|r| r.clone())
            .filter_map(char::from_u32)
        {
            if easy::entry(c as u32).kind() != HARD {
                continue;
            }
            let mut texts = vec![c.to_string()];
            for x in near {
                texts.push(format!("{x}{c}"));
                texts.push(format!("{c}{x}"));
                for y in near {
                    for (pre, post) in outer {
                        texts.push(format!("{pre}{x}{c}{y}{post}"));
                    }
                }
            }
            for text in &texts {
                assert_eq!(fast_words(text, n), plain_words(text, n), "{text:?}");
                let mut norm = Normalized::default();
                normalize_into(text, n, &mut norm);
                assert_eq!(norm.text, plain(text, n, false).0.as_bytes(), "{text:?}");
            }
            checked += 1;
        }
        assert!(checked > 1000, "{checked}");
    }

    /// Every extender of the plane (a mark the normaliser writes as part of a letter's or
    /// ideograph's word, `normal::extended`) after letters and ideographs of several
    /// scripts, after other marks and what no mark extends, and before every kind of
    /// neighbour (joiners, digits, ideographs, marks in and out of canonical order,
    /// composing marks, the zero-width joiner, a sigma): the words and bytes of the plain
    /// pipeline, and the classes the scanner looks up.
    #[test]
    fn marks_on_letters_and_ideographs_make_the_words_of_the_plain_pipeline() {
        let n = Normalize::default();
        let extenders: Vec<char> = (0x80..0x1_0000)
            .filter_map(char::from_u32)
            .filter(|&c| extended(format!("a{c}").as_bytes(), 1, c as u32).is_some())
            .collect();
        // Indic vowel signs and viramas (Bengali's and Tamil's া ா, which compose with
        // some signs before them, too), Thai's and Myanmar's marks, Arabic's harakat, the
        // combining diacritics that compose with nothing, variation selectors.
        let missing: Vec<char> = [
            '\u{93f}', '\u{94d}', '\u{9be}', '\u{bbe}', '\u{e34}', '\u{103c}', '\u{64b}',
            '\u{316}', '\u{fe0f}',
        ]
        .into_iter()
        .filter(|c| !extenders.contains(c))
        .collect();
        assert!(missing.is_empty(), "{missing:?} of {}", extenders.len());
        // Letters of their own and other scripts, capitals and mappings; ideographs and
        // Thai, Khmer and Myanmar consonants; marks on them, two of them out of order; a
        // digit, `_`, a joiner, white space and nothing, which no mark extends.
        let before = [
            "a",
            "É",
            "ﬁ",
            "ｆ",
            "क",
            "ক",
            "ж",
            "ا",
            "ก",
            "ក",
            "က",
            "漢",
            "の",
            "1",
            "_",
            "'",
            " ",
            "#",
            "",
            "कि",
            "क\u{94d}",
            "a\u{951}",
            "a\u{301}",
            "กิ",
            "漢\u{951}",
            "\u{200d}",
            "কে",
            "கெ",
            "ဥ",
        ];
        let after = [
            "", "b", "1", "_", ":b", "'b", ".1", ",1", " x", "漢", "ก", "\u{93c}", "\u{94d}",
            "\u{951}", "\u{316}", "\u{301}", "\u{9be}", "\u{bd7}", "\u{102e}", "\u{200d}", "Σ",
            "ि",
        ];
        let mut norm = Normalized::default();
        for &c in &extenders {
            for x in before {
                for y in after {
                    for text in [format!("{x}{c}{y}"), format!("{x}{c}{c}{y} {x}{c}")] {
                        assert_eq!(fast_words(&text, n), plain_words(&text, n), "{text:?}");
                        normalize_into(&text, n, &mut norm);
                        assert_eq!(norm.text, plain(&text, n, false).0.as_bytes(), "{text:?}");
                    }
                }
            }
            let text = format!("क{c} a{c}:b{c} 1{c} é{c}{c} ก{c}ก{c}{c}a{c}漢{c}");
            let (looked_up, marked) = blocks_both_ways(&text);
            assert_eq!(looked_up, marked, "{text:?}");
        }
    }

    /// Up to `MAX_MARKS` marks in a row on a letter or ideograph are written by the fast
    /// path, the rest by the plain pipeline, with the same words either way.
    #[test]
    fn marks_past_the_most_in_a_row_take_the_plain_pipeline() {
        let n = Normalize::default();
        let mut norm = Normalized::default();
        for (base, mark) in [("क", '\u{93f}'), ("ก", '\u{e34}'), ("a", '\u{316}')] {
            for count in [1, 7, 8, 9, 100] {
                let marks = String::from(mark).repeat(count);
                let text = format!("x {base}{marks} y");
                assert_eq!(fast_words(&text, n), plain_words(&text, n), "{count}");
                normalize_into(&text, n, &mut norm);
                assert_eq!(norm.text, plain(&text, n, false).0.as_bytes());
                assert_eq!(norm.slow.is_empty(), count <= 8, "{base} {count}");
            }
        }
    }

    #[test]
    fn examples() {
        for text in [
            "Don't stop: 3.14, e.g. snake_case; a:b 1,000",
            "naïve café — 漢字 テスト",
            "__ -- ...",
            "_漢_ a_漢 漢_a 漢a a漢 1漢 漢1 é.a a.é 1.2 é'é",
            "Don’t STOP — naïve Café, Привет мир; ΟΔΟΣ. 中文，测试。ＡＢＣ",
        ] {
            assert_eq!(
                fast_words(text, Normalize::default()),
                plain_words(text, Normalize::default()),
                "{text:?}"
            );
        }
    }

    #[test]
    fn easy_text_has_no_slow_span() {
        let mut norm = Normalized::default();
        for text in [
            "Don’t STOP — naïve Café, Привет мир; ΟΔΟ ΟΔΟ. 中文，测试。ＡＢＣ",
            "한국어 텍스트 «quotes» ① ²",
        ] {
            normalize_into(text, Normalize::default(), &mut norm);
            assert_eq!(norm.slow, vec![], "{text:?}");
        }
    }

    /// Easy characters only, so no text takes the plain pipeline.
    fn easy_mix() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(vec![
                "a", "Z", "0", "9", "_", " ", "\n", ".", ",", ";", ":", "'", "\"", "#", "é", "É",
                "ß", "ж", "Ж", "ά", "σ", "ς", "漢", "字", "の", "한", "—", "’", "“", "，", "。",
                "Ａ", "１", "…", "─", "①", "\u{a0}", "\u{3000}", "·",
            ]),
            0..120,
        )
        .prop_map(|v| v.concat())
    }

    #[test]
    fn characters_across_block_ends() {
        // Every alignment of two-, three-byte letters and ideographs against the 64-byte
        // blocks.
        for pad in 0..70 {
            for tail in [
                "é", "éé a", "漢字", "漢a", "a漢", "ж.ж", "1，2", "_漢", "a'é",
            ] {
                let text = format!("{}{tail} x", "a".repeat(pad));
                let text2 = format!("{}{tail} x", " ".repeat(pad));
                for t in [text, text2] {
                    assert_eq!(
                        fast_words(&t, Normalize::default()),
                        plain_words(&t, Normalize::default()),
                        "{t:?}"
                    );
                }
            }
        }
    }

    /// The masks of every block of every stretch between slow spans of `text` normalised,
    /// with the classes of non-ASCII characters looked up and from the normaliser's marks.
    fn blocks_both_ways(text: &str) -> (Vec<Block>, Vec<Block>) {
        let mut norm = Normalized::default();
        normalize_into(text, Normalize::default(), &mut norm);
        let b = &norm.text[..];
        let marks = Marks::of(&norm);
        let mut stretches = Vec::new();
        let mut at = 0;
        for &(start, end) in &norm.slow {
            stretches.push((at, start));
            at = end;
        }
        stretches.push((at, b.len()));
        let (mut looked_up, mut marked) = (Vec::new(), Vec::new());
        for (start, end) in stretches {
            let part = &b[start..end];
            let (mut c1, mut c2) = (Block::default(), Block::default());
            for k in 0..part.len().div_ceil(64) {
                looked_up.push(load(part, start, k, Baseline, Lookup, &mut c1));
                marked.push(load(part, start, k, Baseline, marks, &mut c2));
            }
            // Nothing runs on past a stretch.
            looked_up.push(c1);
            marked.push(c2);
        }
        (looked_up, marked)
    }

    #[test]
    fn marks_across_block_ends() {
        for pad in 0..70 {
            for tail in [
                "é",
                "éé a",
                "漢字",
                "漢a",
                "a漢",
                "ж.ж",
                "_漢",
                "a'é",
                "漢\u{301} é",
            ] {
                let text = format!("{}{tail} x{tail}", "a".repeat(pad));
                let (a, b) = blocks_both_ways(&text);
                assert_eq!(a, b, "{text:?}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn marks_give_the_looked_up_classes(text in mixed()) {
            let (a, b) = blocks_both_ways(&text);
            prop_assert_eq!(a, b);
        }

        #[test]
        fn marks_give_the_looked_up_classes_on_any_text(text in any::<String>()) {
            let (a, b) = blocks_both_ways(&text);
            prop_assert_eq!(a, b);
        }

        #[test]
        fn marks_give_the_looked_up_classes_on_long_texts(parts in prop::collection::vec(
            prop::sample::select(crate::fingerprint::normal::tests::POOL), 100..400)
        ) {
            let (a, b) = blocks_both_ways(&parts.concat());
            prop_assert_eq!(a, b);
        }

        #[test]
        fn same_words_as_the_plain_pipeline(text in prop_oneof![mixed(), among_ideographs()]) {
            prop_assert_eq!(
                fast_words(&text, Normalize::default()),
                plain_words(&text, Normalize::default())
            );
        }

        /// The build's own classifier gives the words too, wherever `words` takes the
        /// AVX-512 one.
        #[test]
        fn same_words_by_either_classifier(text in mixed()) {
            let mut norm = Normalized::default();
            normalize_into(&text, Normalize::default(), &mut norm);
            let (mut by_baseline, mut by_words) = (Vec::new(), Vec::new());
            words_by(Baseline, &norm, &mut |s, e| by_baseline.push((s, e)));
            words(&norm, |s, e| by_words.push((s, e)));
            prop_assert_eq!(by_baseline, by_words);
        }

        #[test]
        fn same_words_on_easy_text(text in easy_mix()) {
            prop_assert_eq!(
                fast_words(&text, Normalize::default()),
                plain_words(&text, Normalize::default())
            );
        }

        #[test]
        fn same_words_under_any_settings(
            text in mixed(),
            nfkc in any::<bool>(),
            lowercase in any::<bool>(),
            ascii_quotes in any::<bool>(),
        ) {
            let n = Normalize { nfkc, lowercase, ascii_quotes, fold_whitespace: false };
            prop_assert_eq!(fast_words(&text, n), plain_words(&text, n));
        }

        #[test]
        fn same_words_on_any_text(text in any::<String>()) {
            prop_assert_eq!(
                fast_words(&text, Normalize::default()),
                plain_words(&text, Normalize::default())
            );
        }

        #[test]
        fn ascii_words(text in "[\\x00-\\x7f]{0,200}") {
            prop_assert_eq!(
                fast_words(&text, Normalize::NONE),
                plain_words(&text, Normalize::NONE)
            );
        }

        #[test]
        fn long_texts(parts in prop::collection::vec(
            prop::sample::select(crate::fingerprint::normal::tests::POOL), 100..400)
        ) {
            let text = parts.concat();
            prop_assert_eq!(
                fast_words(&text, Normalize::default()),
                plain_words(&text, Normalize::default())
            );
        }
    }
}
