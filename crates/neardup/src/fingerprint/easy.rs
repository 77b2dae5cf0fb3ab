//! Characters the fast path takes without the Unicode machinery ("easy" characters).
//!
//! The plain pipeline runs NFKC, typographic quotes to ASCII, Unicode lowercase and UAX #29
//! words over the whole text. Most characters of real text go through all four unchanged
//! or by a fixed mapping, whatever their neighbours: `é` stays `é` and is a letter like
//! `a`, `É` becomes `é`, `’` becomes `'`, `，` becomes `,`, `漢` is a word on its own, `—`
//! separates. For such a character the fast path needs only its output and how the word
//! scanner treats that output:
//!
//! - [`LETTER`]: one character that every word rule treats as it treats `a`;
//! - [`IDEO`]: one character that is a word by itself and never joins a neighbour (Han
//!   ideographs, kana that UAX #29 leaves alone);
//! - [`SEP`]: one character that is no word and never joins, as `#` is;
//! - [`ASCII`]: one to three ASCII bytes (full-width forms, quotes, ligatures like `ﬁ`);
//! - [`HARD`]: anything else (combining marks, characters that compose with a neighbour,
//!   `Σ` whose lowercase depends on the next letter, Hebrew letters with their quote rules,
//!   katakana, emoji…): the text around it takes the plain pipeline.
//!
//! The table is derived from the plain pipeline itself (`tests::derive`): a character is
//! easy only when normalization cannot join it to a neighbour (a starter that composes with
//! nothing before it, from a decomposition that starts with such a starter), and when
//! `unicode_words` treats its output as it treats `a`, `漢` or `#` in every string of up to
//! three characters drawn from letters, digits, `_`, the word joiners `. : , ' "`, space, an
//! ideograph, `#` and itself (every UAX #29 rule looks at most two characters away). The
//! generated data lives in `easy_table.rs`; a test derives it again and fails if the crates
//! or the standard library's Unicode tables ever disagree with it.

#[path = "easy_table.rs"]
mod table;

/// Entry kinds (bits 29..32 of an entry).
pub(crate) const HARD: u32 = 0;
/// A letter: output is one character, a letter as `a` is.
pub(crate) const LETTER: u32 = 1;
/// A word by itself: output is one character.
pub(crate) const IDEO: u32 = 2;
/// A separator: output is one character that is no word.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) const SEP: u32 = 3;
/// Output is one to three ASCII bytes.
pub(crate) const ASCII: u32 = 4;

const KIND_SHIFT: u32 = 29;
/// Single-character outputs: the output code point minus the input's, in 21 bits.
const DELTA_BITS: u32 = 21;
#[cfg(test)]
const DELTA_MASK: u32 = (1 << DELTA_BITS) - 1;

/// A table entry: what one input character becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry(u32);

impl Entry {
    /// The entry of a hard character.
    pub(crate) const fn hard() -> Entry {
        Entry(HARD)
    }

    /// An entry whose output is the single character `out` (for `LETTER`, `IDEO`, `SEP`).
    #[cfg(test)]
    pub(crate) const fn char(kind: u32, c: u32, out: u32) -> Entry {
        Entry(kind << KIND_SHIFT | (out.wrapping_sub(c) & DELTA_MASK))
    }

    /// An entry whose output is 1 to 3 ASCII bytes.
    #[cfg(test)]
    pub(crate) fn ascii(out: &[u8]) -> Entry {
        debug_assert!((1..=3).contains(&out.len()) && out.is_ascii());
        let mut packed = 0u32;
        for (i, &b) in out.iter().enumerate() {
            packed |= u32::from(b) << (8 * i);
        }
        Entry(ASCII << KIND_SHIFT | (out.len() as u32) << 24 | packed)
    }

    /// The raw bits, as the generated table stores them.
    #[cfg(test)]
    pub(crate) const fn bits(self) -> u32 {
        self.0
    }

    /// The kind: [`HARD`], [`LETTER`], [`IDEO`], [`SEP`] or [`ASCII`].
    #[inline]
    pub(crate) const fn kind(self) -> u32 {
        self.0 >> KIND_SHIFT
    }

    /// The output character of a single-character entry for input `c`.
    #[inline]
    pub(crate) fn out_char(self, c: u32) -> u32 {
        // The delta is a 21-bit two's complement number: sign-extend it.
        let delta = ((self.0 << (32 - DELTA_BITS)) as i32) >> (32 - DELTA_BITS);
        c.wrapping_add(delta as u32)
    }

    /// The output bytes of an [`ASCII`] entry, packed little-endian, and their count.
    #[inline]
    pub(crate) const fn ascii_out(self) -> (u32, usize) {
        (self.0 & 0x00FF_FFFF, ((self.0 >> 24) & 3) as usize)
    }
}

/// Pages of 256 code points, built at compile time from the generated runs.
static PAGES: [[u32; 256]; table::PAGE_RUNS.len()] = {
    let mut pages = [[0u32; 256]; table::PAGE_RUNS.len()];
    let mut p = 0;
    while p < table::PAGE_RUNS.len() {
        let runs = table::PAGE_RUNS[p];
        let mut r = 0;
        while r < runs.len() {
            let (first, last, bits) = runs[r];
            let mut i = first as usize;
            while i <= last as usize {
                pages[p][i] = bits;
                i += 1;
            }
            r += 1;
        }
        p += 1;
    }
    pages
};

/// The entry of character `c` (as a code point); [`HARD`] outside the table.
#[inline]
pub(crate) fn entry(c: u32) -> Entry {
    if c >= 0x1_0000 {
        return Entry(HARD);
    }
    let page = table::PAGE_OF[(c >> 8) as usize] as usize;
    Entry(PAGES[page][(c & 0xFF) as usize])
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::fingerprint::{normal, Normalize};
    use std::fmt::Write as _;
    use unicode_normalization::char::canonical_combining_class as ccc;
    use unicode_normalization::{is_nfkc_quick, IsNormalized, UnicodeNormalization};
    use unicode_segmentation::UnicodeSegmentation;

    /// The code point blocks the table covers (pages of 256): Latin, IPA, Greek, Cyrillic,
    /// Armenian, Hebrew; Arabic, Syriac, Thaana, the Indic scripts, Thai, Lao, Tibetan,
    /// Myanmar, Georgian, Hangul Jamo, Ethiopic, Cherokee, Khmer, Mongolian and the rest
    /// of the BMP's first 32 pages; Latin and Greek extended; punctuation, letterlike
    /// symbols, arrows, mathematical and technical symbols, box drawing, shapes, dingbats;
    /// CJK symbols and kana; CJK extension A and unified ideographs; Yi, Vai and the
    /// scripts up to Hangul syllables; Hangul syllables; Arabic presentation forms;
    /// half-width and full-width forms. Elsewhere every character is hard. (Without
    /// them, Thai was fingerprinted at a tenth of Chinese's speed: each of its characters
    /// a UAX #29 word, and each tested by the standard library's slow `is_alphanumeric`.)
    pub(crate) const PAGES_COVERED: &[(u32, u32)] = &[
        (0x00, 0x1F),
        (0x20, 0x27),
        (0x30, 0x30),
        (0x34, 0x4D),
        (0x4E, 0x9F),
        (0xA0, 0xD7),
        (0xFB, 0xFF),
    ];

    /// The plain pipeline's normalization at the defaults.
    fn plain(s: &str) -> String {
        normal::plain(s, Normalize::default(), false).0.into_owned()
    }

    /// The probe alphabet: `X` stands for the character under test.
    const ALPHABET: [char; 12] = ['a', '1', '_', '.', ':', ',', '\'', '"', ' ', '漢', '#', 'X'];

    /// Every string of 1 to 3 probe characters holding `X` at least once.
    fn templates() -> Vec<Vec<char>> {
        let mut out: Vec<Vec<char>> = Vec::new();
        for len in 1..=3u32 {
            for mut code in 0..12usize.pow(len) {
                let mut t = Vec::new();
                for _ in 0..len {
                    t.push(ALPHABET[code % 12]);
                    code /= 12;
                }
                if t.contains(&'X') {
                    out.push(t);
                }
            }
        }
        out
    }

    /// What `unicode_words` makes of every template with `X` replaced by `x`, written back
    /// with `x` as `X`, so characters that behave alike give equal results.
    pub(crate) struct Probe {
        templates: Vec<Vec<char>>,
        /// The words of every template for each reference character.
        references: Vec<(char, Vec<Vec<String>>)>,
    }

    impl Probe {
        pub(crate) fn new() -> Probe {
            let mut probe = Probe {
                templates: templates(),
                references: Vec::new(),
            };
            let mut buf = String::new();
            for r in ['a', '漢', '#'] {
                let words = probe
                    .templates
                    .iter()
                    .map(|t| probe.words(t, r, &mut buf))
                    .collect();
                probe.references.push((r, words));
            }
            probe
        }

        /// The words of template `t` with `x` for `X`, each written back with `X` where
        /// the template has it (neighbours equal to `x` stay as they are).
        fn words(&self, t: &[char], x: char, buf: &mut String) -> Vec<String> {
            buf.clear();
            let mut symbol_at = Vec::new();
            for &c in t {
                let c2 = if c == 'X' { x } else { c };
                symbol_at.extend(std::iter::repeat_n(c, c2.len_utf8()));
                buf.push(c2);
            }
            buf.unicode_word_indices()
                .map(|(at, w)| {
                    w.char_indices()
                        .map(|(i, c)| if symbol_at[at + i] == 'X' { 'X' } else { c })
                        .collect()
                })
                .collect()
        }

        /// Whether `x` behaves as `reference` (`a`, `漢` or `#`) in every template.
        pub(crate) fn behaves_as(&self, x: char, reference: char) -> bool {
            let mut buf = String::new();
            let Some((_, expected)) = self.references.iter().find(|r| r.0 == reference) else {
                return false;
            };
            self.templates
                .iter()
                .zip(expected)
                .all(|(t, e)| self.words(t, x, &mut buf) == *e)
        }
    }

    /// The entry of `c`, derived from the plain pipeline (see the module's documentation).
    pub(crate) fn derive(c: char, probe: &Probe) -> Entry {
        let quick = |c: char| is_nfkc_quick(std::iter::once(c));
        if c.is_ascii() || ccc(c) != 0 || quick(c) == IsNormalized::Maybe {
            return Entry(HARD);
        }
        // A decomposition that starts with a non-starter, or with a character that
        // composes with what precedes it, can join the previous character.
        match std::iter::once(c).nfkd().next() {
            Some(d) if ccc(d) == 0 && quick(d) != IsNormalized::Maybe => {}
            _ => return Entry(HARD),
        }
        // A capital sigma lowercases by what follows it.
        let nfkc: String = std::iter::once(c).nfkc().collect();
        let quoted = normal::plain(
            &nfkc,
            Normalize {
                lowercase: false,
                ..Normalize::default()
            },
            false,
        )
        .0;
        if quoted.contains('\u{03A3}') {
            return Entry(HARD);
        }
        let out = plain(&c.to_string());
        if out.is_ascii() {
            return if (1..=3).contains(&out.len()) {
                Entry::ascii(out.as_bytes())
            } else {
                Entry(HARD)
            };
        }
        let mut chars = out.chars();
        let (Some(m), None) = (chars.next(), chars.next()) else {
            return Entry(HARD);
        };
        // The output must be a fixed point in the table, so it classifies as itself.
        if plain(&m.to_string()) != m.to_string()
            || ccc(m) != 0
            || m.is_whitespace()
            || !covered(m as u32 >> 8)
        {
            return Entry(HARD);
        }
        let kind = if probe.behaves_as(m, 'a') {
            LETTER
        } else if probe.behaves_as(m, '漢') {
            IDEO
        } else if probe.behaves_as(m, '#') {
            SEP
        } else {
            return Entry(HARD);
        };
        Entry::char(kind, c as u32, m as u32)
    }

    fn covered(page: u32) -> bool {
        PAGES_COVERED.iter().any(|&(a, b)| (a..=b).contains(&page))
    }

    /// Runs of equal entries in one page: `(first, last, entry bits)`.
    type Runs = Vec<(u8, u8, u32)>;

    /// The table's pages from the derivation: `(PAGE_OF, unique pages as runs)`.
    fn derive_table() -> (Vec<u8>, Vec<Runs>) {
        let probe = Probe::new();
        let mut page_of = vec![0u8; 256];
        // Page 0 of the table is all hard.
        let mut pages: Vec<Vec<u32>> = vec![vec![0; 256]];
        for page in 0..256u32 {
            if !covered(page) {
                continue;
            }
            let entries: Vec<u32> = (0..256u32)
                .map(|lo| char::from_u32(page << 8 | lo).map_or(0, |c| derive(c, &probe).bits()))
                .collect();
            let at = match pages.iter().position(|p| *p == entries) {
                Some(at) => at,
                None => {
                    pages.push(entries);
                    pages.len() - 1
                }
            };
            page_of[page as usize] = u8::try_from(at).expect("at most 255 distinct pages");
        }
        let runs = pages
            .iter()
            .map(|p| {
                let mut runs: Runs = Vec::new();
                for (i, &bits) in p.iter().enumerate() {
                    match runs.last_mut() {
                        Some(r) if r.2 == bits && usize::from(r.1) + 1 == i => r.1 = i as u8,
                        _ if bits == 0 => {}
                        _ => runs.push((i as u8, i as u8, bits)),
                    }
                }
                runs
            })
            .collect();
        (page_of, runs)
    }

    fn render(page_of: &[u8], runs: &[Runs]) -> String {
        let mut s = String::new();
        s.push_str(
            "//! Generated by `cargo test -p neardup --lib easy::tests::regenerate -- --ignored`\n\
             //! from the plain pipeline (see `easy.rs`). Do not edit.\n\n\
             /// Per page of 256 code points of the Basic Multilingual Plane, its index in\n\
             /// [`PAGE_RUNS`] (0: every character hard).\n\
             #[rustfmt::skip]\n\
             pub(super) const PAGE_OF: [u8; 256] = [\n",
        );
        for row in page_of.chunks(16) {
            s.push_str("   ");
            for v in row {
                let _ = write!(s, " {v},");
            }
            s.push('\n');
        }
        s.push_str(
            "];\n\n\
             /// Per distinct page, runs of equal entries: `(first, last, entry bits)`.\n\
             #[rustfmt::skip]\n\
             pub(super) const PAGE_RUNS: &[&[(u8, u8, u32)]] = &[\n",
        );
        for page in runs {
            s.push_str("    &[");
            for (i, (a, b, bits)) in page.iter().enumerate() {
                if i % 4 == 0 {
                    s.push_str("\n       ");
                }
                let _ = write!(s, " ({a:#04x}, {b:#04x}, {bits:#010x}),");
            }
            s.push_str("\n    ],\n");
        }
        s.push_str("];\n");
        s
    }

    fn table_path() -> String {
        format!(
            "{}/src/fingerprint/easy_table.rs",
            env!("CARGO_MANIFEST_DIR")
        )
    }

    /// The checked-in table is what the plain pipeline gives today.
    #[test]
    fn table_is_derived_from_the_plain_pipeline() {
        let (page_of, runs) = derive_table();
        let fresh = render(&page_of, &runs);
        let stored = std::fs::read_to_string(table_path()).unwrap_or_default();
        assert!(
            fresh == stored,
            "easy_table.rs is out of date with the Unicode crates or the standard library: \
             regenerate it (cargo test -p neardup --lib easy::tests::regenerate -- --ignored), \
             then review the change"
        );
    }

    /// Writes `easy_table.rs` afresh.
    #[test]
    #[ignore]
    fn regenerate() {
        let (page_of, runs) = derive_table();
        std::fs::write(table_path(), render(&page_of, &runs)).unwrap();
    }

    #[test]
    fn examples() {
        let kind = |c: char| entry(c as u32).kind();
        let out = |c: char| char::from_u32(entry(c as u32).out_char(c as u32));
        assert_eq!((kind('é'), out('é')), (LETTER, Some('é')));
        assert_eq!((kind('É'), out('É')), (LETTER, Some('é')));
        assert_eq!((kind('Ж'), out('Ж')), (LETTER, Some('ж')));
        assert_eq!((kind('漢'), out('漢')), (IDEO, Some('漢')));
        assert_eq!((kind('한'), out('한')), (LETTER, Some('한')));
        assert_eq!(kind('—'), SEP);
        assert_eq!(kind('─'), SEP);
        assert_eq!(entry('’' as u32), Entry::ascii(b"'"));
        assert_eq!(entry('，' as u32), Entry::ascii(b","));
        assert_eq!(entry('Ａ' as u32), Entry::ascii(b"a"));
        assert_eq!(entry('…' as u32), Entry::ascii(b"..."));
        assert_eq!(entry('\u{a0}' as u32), Entry::ascii(b" "));
        for hard in ['Σ', '\u{301}', 'א', 'テ', '\u{200d}', 'İ', '😀'] {
            assert_eq!(kind(hard), HARD, "{hard:?}");
        }
        assert_eq!(kind('σ'), LETTER);
        assert_eq!(kind('ς'), LETTER);
        // Scripts of the pages covered later: letters of words, Thai's characters each a
        // word, marks hard.
        for letter in ['ب', 'क', 'অ', 'ა', 'ሀ'] {
            assert_eq!(kind(letter), LETTER, "{letter:?}");
        }
        assert_eq!((kind('ก'), out('ก')), (IDEO, Some('ก')));
        for hard in ['\u{0E31}', '\u{093E}', '\u{094D}', '\u{1161}'] {
            assert_eq!(kind(hard), HARD, "{hard:?}");
        }
    }

    /// Every single-character output is easy itself, of the same kind, and maps to itself:
    /// the normaliser marks an output's class by its input's entry, which must be what the
    /// output's own entry says. Ideographs are three bytes long in and out, which the word
    /// scanner's use of the marks counts on.
    #[test]
    fn outputs_are_fixed_points() {
        for c in (0x80..0x1_0000u32).filter_map(char::from_u32) {
            let e = entry(c as u32);
            if matches!(e.kind(), LETTER | IDEO | SEP) {
                let m = e.out_char(c as u32);
                let again = entry(m);
                assert_eq!(
                    (again.kind(), again.out_char(m)),
                    (e.kind(), m),
                    "{c:?} -> {:?}",
                    char::from_u32(m)
                );
                if e.kind() == IDEO {
                    let len = char::from_u32(m).map(char::len_utf8);
                    assert_eq!((c.len_utf8(), len), (3, Some(3)), "{c:?}");
                }
            }
        }
    }
}
