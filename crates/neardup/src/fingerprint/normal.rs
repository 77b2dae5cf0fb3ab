//! Normalization: the plain pipeline that defines it, and the fast path that gives the
//! same bytes.
//!
//! The plain pipeline ([`plain`]) runs NFKC, typographic quotes to ASCII and Unicode
//! lowercase over the whole text, and its words are `unicode_words` of the result. The
//! fast path ([`normalize_into`]) copies ASCII a block at a time (lowercased as it goes),
//! maps easy characters one at a time by a table ([`super::easy`]), copies the marks that
//! sit on letters and ideographs in order (Indic vowel signs and viramas, Thai's and
//! Myanmar's marks, Arabic's harakat: see [`extended`]), and sends only the pieces of text
//! around other hard characters through the plain pipeline.
//!
//! A piece is cut at a *safe cut*: a position after an ASCII white-space character and
//! before a character that is ASCII and not white space, or easy with an output that does
//! not start with white space. Across a safe cut nothing of the plain pipeline reaches:
//! NFKC composes and reorders only around non-starters and characters that compose with a
//! preceding one, and the character after the cut is neither; the only lowercase mapping
//! that depends on context, final sigma, looks past case-ignorable characters to the next
//! cased one, and white space is neither; and white space ends every word rule of UAX #29
//! that looks across characters (WB6, WB7, WB11, WB12, regional indicators, ZWJ), while
//! WB3d, which keeps white space together, never holds a word. So the normalised text is
//! the normalised pieces end to end, and its words are the pieces' words end to end.
//!
//! A position before a unified ideograph (U+4E00..=U+9FFF) is a safe cut too, whatever
//! comes before it, so that a hard character in Chinese text, where white space is rare,
//! sends a few characters through the plain pipeline rather than its whole line. Such an
//! ideograph is a starter that is its own NFKC form and composes with nothing before it;
//! it is neither cased nor case-ignorable, so final sigma's look ahead stops at it as it
//! stops at the end of a piece; and its word break property is Other, which no rule of
//! UAX #29 joins to what comes before it (WB4 attaches only extenders, WB3c only
//! pictographs, and every other rule that keeps characters together needs a letter, digit,
//! katakana, connector or regional indicator on its right).

use std::borrow::Cow;

use unicode_normalization::{is_nfkc_quick, IsNormalized, UnicodeNormalization};
use unicode_segmentation::UnicodeSegmentation;

use super::easy::{self, Entry, ASCII, HARD, IDEO, LETTER};
use super::Normalize;
use crate::bmp::BmpTable;

/// `text` normalised as `n` says (white space folded only when `fold` too), and whether
/// the result is ASCII (known without another pass when `text` is: ASCII stays ASCII).
/// The definition of normalization; [`normalize_into`] is tested against it.
pub(crate) fn plain(text: &str, n: Normalize, fold: bool) -> (Cow<'_, str>, bool) {
    let mut s = Cow::Borrowed(text);
    let ascii = text.is_ascii();
    if !ascii {
        if n.nfkc && is_nfkc_quick(s.chars()) != IsNormalized::Yes {
            s = Cow::Owned(s.nfkc().collect());
        }
        if n.ascii_quotes && s.contains(is_typographic_quote) {
            s = Cow::Owned(s.chars().map(ascii_quote).collect());
        }
    }
    if n.lowercase {
        if ascii {
            if s.bytes().any(|b| b.is_ascii_uppercase()) {
                s = Cow::Owned(s.to_ascii_lowercase());
            }
        } else {
            s = Cow::Owned(s.to_lowercase());
        }
    }
    if n.fold_whitespace && fold {
        s = fold_whitespace(s);
    }
    let ascii = ascii || s.is_ascii();
    (s, ascii)
}

/// [`plain`] of a piece of the fast path, without folding: the same bytes, with NFKC's
/// quick check answered from a table ([`nfkc_quick`]).
fn plain_piece(piece: &str, n: Normalize) -> Cow<'_, str> {
    if !n.nfkc || piece.is_ascii() {
        return plain(piece, n, false).0;
    }
    let mut s = Cow::Borrowed(piece);
    if nfkc_quick(piece) != IsNormalized::Yes {
        s = Cow::Owned(s.nfkc().collect());
    }
    // No character of Indic or Thai text has a case: most pieces need no lowercasing.
    let n = Normalize {
        nfkc: false,
        lowercase: n.lowercase && lowercase_changes(&s),
        ..n
    };
    if let Cow::Owned(t) = plain(&s, n, false).0 {
        return Cow::Owned(t);
    }
    s
}

/// `is_nfkc_quick(text.chars())`: UAX #15's quick check as unicode-normalization writes
/// it, with each character's combining class and answer from [`QUICK`] where the crate
/// searches a table and hashes (a quarter of the instructions of Hindi's fingerprint,
/// whose words take the plain pipeline for their vowel signs).
fn nfkc_quick(text: &str) -> IsNormalized {
    let mut last = 0u8;
    let mut result = IsNormalized::Yes;
    for c in text.chars() {
        if c.is_ascii() {
            last = 0;
            continue;
        }
        let (class, answer, _) = QUICK.of(c);
        if last > class && class != 0 {
            return IsNormalized::No;
        }
        match answer {
            QUICK_YES => {}
            QUICK_MAYBE => result = IsNormalized::Maybe,
            _ => return IsNormalized::No,
        }
        last = class;
    }
    result
}

/// What a character NFKC rewrites costs, a byte of what it becomes, against a byte kept
/// as it is: unicode-normalization's iterator takes about 100 ns a character.
const REWRITE_COST: usize = 8;

/// About what fingerprinting `text` costs, in bytes of text that normalisation keeps: its
/// length, plus [`REWRITE_COST`] for each byte that NFKC's decomposition makes of a
/// character its quick check does not pass. An 8 KB text costs about 8 KB when it is
/// ASCII, and 720 KB when it is U+FDFA repeated (each of its 3 bytes becomes 33).
pub(crate) fn cost(text: &str) -> usize {
    if text.is_ascii() {
        return text.len();
    }
    let bytes: usize = text
        .chars()
        .filter(|c| !c.is_ascii())
        .map(|c| {
            let cp = u32::from(c);
            usize::from(match cp >> 16 {
                0 => REWRITTEN.get(cp as u16),
                1 => REWRITTEN_1.get(cp as u16),
                _ => rewritten(c),
            })
        })
        .sum();
    text.len() + bytes * REWRITE_COST
}

/// [`rewritten`] of the Basic Multilingual Plane, and of the next (emoji, mathematical
/// letters), where a text's characters beyond the first plane mostly are.
static REWRITTEN: BmpTable<u8> = BmpTable::new(rewritten, 0);
static REWRITTEN_1: BmpTable<u8> = BmpTable::of_plane(rewritten, 0, 1);

/// The bytes of `c`'s compatibility decomposition when NFKC's quick check does not pass
/// it (at most 54: 18 characters), else 0.
fn rewritten(c: char) -> u8 {
    if c.is_ascii() || is_nfkc_quick(std::iter::once(c)) == IsNormalized::Yes {
        return 0;
    }
    let mut bytes = 0;
    unicode_normalization::char::decompose_compatible(c, |d| bytes += d.len_utf8());
    u8::try_from(bytes).unwrap_or(u8::MAX)
}

/// [`quick_of`]'s answers (`IsNormalized` is not `Copy`).
const QUICK_YES: u8 = 0;
const QUICK_MAYBE: u8 = 1;
const QUICK_NO: u8 = 2;

/// Whether `str::to_lowercase` changes `text`: whether a character of it has a
/// lowercase other than itself (final sigma, the one rule by context, is a `Σ`'s).
fn lowercase_changes(text: &str) -> bool {
    text.chars().any(|c| QUICK.of(c).2)
}

/// A character's canonical combining class, its NFKC quick-check answer, and whether
/// its lowercase is other than itself.
fn quick_of(c: char) -> (u8, u8, bool) {
    let answer = match is_nfkc_quick(std::iter::once(c)) {
        IsNormalized::Yes => QUICK_YES,
        IsNormalized::Maybe => QUICK_MAYBE,
        IsNormalized::No => QUICK_NO,
    };
    let class = unicode_normalization::char::canonical_combining_class(c);
    (class, answer, !c.to_lowercase().eq([c]))
}

static QUICK: BmpTable<(u8, u8, bool)> = BmpTable::new(quick_of, (0, QUICK_YES, false));

/// `s` with runs of white space as one space and its ends trimmed.
pub(crate) fn fold_whitespace(s: Cow<'_, str>) -> Cow<'_, str> {
    let folded = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if folded != *s {
        Cow::Owned(folded)
    } else {
        s
    }
}

fn is_typographic_quote(c: char) -> bool {
    ascii_quote(c) != c
}

/// The ASCII quote a typographic one becomes (other characters stay).
fn ascii_quote(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201B}' | '\u{2032}' | '\u{02BC}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201F}' | '\u{201E}' | '\u{2033}' => '"',
        c => c,
    }
}

/// A text normalised by the fast path: the bytes [`plain`] gives, and the spans of them
/// that hold hard characters, which the word scanner leaves to unicode-segmentation.
/// Reused from text to text, so its buffers stop growing.
#[derive(Debug, Default)]
pub(crate) struct Normalized {
    /// The normalised text (valid UTF-8: whole characters of the input, ASCII, and the
    /// UTF-8 of characters).
    pub(crate) text: Vec<u8>,
    /// Spans of `text` (start, end) from the plain pipeline, in order, each between safe
    /// cuts; outside them every non-ASCII character is easy and its own output, or a mark
    /// on a letter or an ideograph ([`extended`]).
    pub(crate) slow: Vec<(usize, usize)>,
    /// Bit `i` (bit `i % 64` of word `i / 64`): byte `i` of `text`, outside the slow spans,
    /// is a byte of a letter that is not ASCII, or of a mark on a letter. The normaliser
    /// knows every character's kind from the table as it writes it, so the word scanner
    /// need not decode the text and look it up again. Words past the end of the text read
    /// as 0; empty for ASCII.
    pub(crate) letter: Vec<u64>,
    /// As `letter`, for the first byte of each ideograph (all three bytes long).
    pub(crate) ideo: Vec<u64>,
    /// As `letter`, for the bytes of marks on an ideograph, which are part of its word.
    pub(crate) ext: Vec<u64>,
}

impl Normalized {
    /// The normalised text as a `str`.
    pub(crate) fn as_str(&self) -> Cow<'_, str> {
        // Valid by construction; a lossy copy, never a panic, if that were ever wrong.
        debug_assert!(std::str::from_utf8(&self.text).is_ok());
        String::from_utf8_lossy(&self.text)
    }
}

/// ASCII white space that ends a piece: space, tab, line feed, vertical tab, form feed,
/// carriage return.
#[inline]
fn is_space(b: u8) -> bool {
    b == b' ' || (b'\t'..=b'\r').contains(&b)
}

/// The character at `i` of valid UTF-8 `b`, and its length.
#[inline(always)]
pub(crate) fn decode(b: &[u8], i: usize) -> (u32, usize) {
    let lead = u32::from(b[i]);
    let cont = |k: usize| b.get(i + k).map_or(0, |&c| u32::from(c & 0x3F));
    match lead {
        0..=0x7F => (lead, 1),
        0xC0..=0xDF => ((lead & 0x1F) << 6 | cont(1), 2),
        0xE0..=0xEF => ((lead & 0x0F) << 12 | cont(1) << 6 | cont(2), 3),
        0xF0..=0xF7 => (
            (lead & 0x07) << 18 | cont(1) << 12 | cont(2) << 6 | cont(3),
            4,
        ),
        // Not a lead byte: not reached on valid UTF-8.
        _ => (0xFFFD, 1),
    }
}

/// Whether a piece may start with the character at `i` of `b` (the byte before it being
/// ASCII white space): ASCII but not white space, or easy with an output that does not
/// start with white space.
#[inline]
fn starts_piece(b: &[u8], i: usize, easy: bool) -> bool {
    let c = b[i];
    if c < 0x80 {
        return !is_space(c);
    }
    if !easy {
        return false;
    }
    let e = easy::entry(decode(b, i).0);
    match e.kind() {
        HARD => false,
        ASCII => !is_space(e.ascii_out().0 as u8),
        _ => true,
    }
}

/// Appends the output of an easy character `c` (`len` bytes at `src`) with entry `e`.
#[inline]
fn push_easy(out: &mut Vec<u8>, e: Entry, c: u32, src: &[u8]) {
    if e.kind() == ASCII {
        let (packed, n) = e.ascii_out();
        out.extend_from_slice(&packed.to_le_bytes()[..n]);
        return;
    }
    let m = e.out_char(c);
    if m == c {
        out.extend_from_slice(src);
    } else {
        let mut utf8 = [0u8; 4];
        let m = char::from_u32(m).unwrap_or(char::REPLACEMENT_CHARACTER);
        out.extend_from_slice(m.encode_utf8(&mut utf8).as_bytes());
    }
}

/// Sets `bits` (at most 64 bits wide) of bitmap `map` from bit `at` on, growing it to
/// cover a text of at least `hint` bytes when it must grow.
#[inline(always)]
fn mark(map: &mut Vec<u64>, at: usize, bits: u64, hint: usize) {
    let w = at / 64;
    if w + 1 >= map.len() {
        // Once per text, usually: to the size of the input.
        grow(map, hint.max(at + 64));
    }
    let v = u128::from(bits) << (at % 64);
    map[w] |= v as u64;
    map[w + 1] |= (v >> 64) as u64;
}

/// Grows bitmap `map` with zeros to cover `len` bytes and one word more.
#[cold]
fn grow(map: &mut Vec<u64>, len: usize) {
    map.resize(len / 64 + 2, 0);
}

/// Clears the bits of bitmap `map` from bit `from` up to bit `to` (none is set past it).
/// Not to the map's end: it covers the whole input, and a text of many hard pieces
/// cleared it to the end for each, quadratic (4 MB of Greek capitals took 2 s).
fn clear_between(map: &mut [u64], from: usize, to: usize) {
    let w = from / 64;
    if let Some(first) = map.get_mut(w) {
        *first &= (1u64 << (from % 64)) - 1;
    }
    let end = to.div_ceil(64).min(map.len());
    if let Some(rest) = map.get_mut(w + 1..end) {
        rest.fill(0);
    }
}

/// Marks the output of an easy character of kind `kind`, `len` bytes at `at` of the text,
/// in class bitmaps `letter` and `ideo` (see [`Normalized`]), which grow to `hint` bytes.
#[inline(always)]
fn mark_kind(
    (letter, ideo): (&mut Vec<u64>, &mut Vec<u64>),
    kind: u32,
    at: usize,
    len: usize,
    hint: usize,
) {
    if kind == LETTER {
        mark(letter, at, (1 << len) - 1, hint);
    } else if kind == IDEO {
        mark(ideo, at, 1, hint);
    }
}

/// Normalises `text` as [`plain`] does (without folding white space) into `out`.
pub(crate) fn normalize_into(text: &str, n: Normalize, out: &mut Normalized) {
    out.text.clear();
    out.slow.clear();
    out.letter.clear();
    out.ideo.clear();
    out.ext.clear();
    out.text.reserve(text.len() + 16);
    let b = text.as_bytes();
    let hint = b.len() + 16;
    // The table holds the outputs of the default normalization only.
    let easy = n.nfkc && n.lowercase && n.ascii_quotes;
    // The last safe cut seen: (position in `text`, position in `out.text`).
    let mut cut = (0usize, 0usize);
    let mut i = 0;
    while i < b.len() {
        // A run of ASCII, copied as a block.
        let (run_start, out_start) = (i, out.text.len());
        i += copy_ascii(&b[i..], n.lowercase, &mut out.text);
        if i == b.len() {
            break;
        }
        // The last cut inside the run (the run is copied byte for byte).
        let mut p = i;
        while p > run_start + 1 {
            p -= 1;
            if is_space(b[p - 1]) && !is_space(b[p]) {
                cut = (p, out_start + (p - run_start));
                break;
            }
        }
        let (c, len) = decode(b, i);
        let e = if easy { easy::entry(c) } else { Entry::hard() };
        if e.kind() != HARD {
            if UNIFIED.contains(&c) || i > 0 && is_space(b[i - 1]) && starts_piece(b, i, easy) {
                cut = (i, out.text.len());
            }
            if e.kind() == ASCII || e.out_char(c) != c {
                let at = out.text.len();
                push_easy(&mut out.text, e, c, &b[i..i + len]);
                // An output character has its input's kind (easy::tests), though not
                // always its length.
                let maps = (&mut out.letter, &mut out.ideo);
                mark_kind(maps, e.kind(), at, out.text.len() - at, hint);
                i += len;
                continue;
            }
            // Fully non-Latin text (Han, kana, Hangul, Cyrillic lowercase…) is mostly
            // characters that are their own output: copied as one run rather than a push
            // each. Inside the run no byte is ASCII white space, so no cut falls in it.
            let at = out.text.len();
            mark_kind((&mut out.letter, &mut out.ideo), e.kind(), at, len, hint);
            let mut j = i + len;
            while j < b.len() && b[j] >= 0x80 {
                // Chinese is mostly ideographs of the unified block, whose lead bytes say
                // what they are: several at a time, without decoding them.
                if let (0xE4..=0xE9, Some(block)) = (b[j], b.get(j..j + 16)) {
                    let n = leading_ideographs(block);
                    if n > 0 {
                        let firsts = IDEO_FIRSTS & ((1 << (3 * n)) - 1);
                        mark(&mut out.ideo, at + (j - i), firsts, hint);
                        let last = j + 3 * (n - 1);
                        cut = (last, at + (last - i));
                        j += 3 * n;
                        continue;
                    }
                }
                let (c, len) = decode(b, j);
                let e = easy::entry(c);
                if e.kind() == HARD {
                    // Indic and Thai words are letters and marks in turn. What the mark
                    // follows is in the run, which starts with an easy character.
                    if !mark_extender(out, b, j, (c, len), at + (j - i), hint) {
                        break;
                    }
                    j += len;
                    continue;
                }
                if e.kind() == ASCII || e.out_char(c) != c {
                    break;
                }
                if UNIFIED.contains(&c) {
                    cut = (j, at + (j - i));
                }
                let maps = (&mut out.letter, &mut out.ideo);
                mark_kind(maps, e.kind(), at + (j - i), len, hint);
                j += len;
            }
            out.text.extend_from_slice(&b[i..j]);
            i = j;
            continue;
        }
        if easy && mark_extender(out, b, i, (c, len), out.text.len(), hint) {
            // A mark on a letter or ideograph (WB4), its own output: part of its word.
            out.text.extend_from_slice(&b[i..i + len]);
            i += len;
            continue;
        }
        if easy && separates_here(b, i, len, c) {
            // Hard only next to letters or marks; between these neighbours it is a
            // separator that is its own output, as `#` is (see `LONE`).
            out.text.extend_from_slice(&b[i..i + len]);
            i += len;
            continue;
        }
        // A hard character: the piece from the last cut to the next goes the plain way.
        let mut end = i + len;
        while end < b.len()
            && !(easy && starts_unified(&b[end..]))
            && !(is_space(b[end - 1]) && starts_piece(b, end, easy))
        {
            end += 1;
            while end < b.len() && (b[end] & 0xC0) == 0x80 {
                end += 1;
            }
        }
        // The piece's characters are the scanner's to classify afresh; the marks of what
        // it replaces would lie on other bytes. No mark lies past the text written.
        let written = out.text.len();
        out.text.truncate(cut.1);
        clear_between(&mut out.letter, cut.1, written);
        clear_between(&mut out.ideo, cut.1, written);
        clear_between(&mut out.ext, cut.1, written);
        let piece = &text[cut.0..end];
        out.text.extend_from_slice(plain_piece(piece, n).as_bytes());
        match out.slow.last_mut() {
            Some(last) if last.1 == cut.1 => last.1 = out.text.len(),
            _ => out.slow.push((cut.1, out.text.len())),
        }
        i = end;
        cut = (end, out.text.len());
    }
}

/// Marks the character `c` (`len` bytes at `i` of `b`), written at `at` of `out.text`,
/// as a mark on the letter or ideograph before it, if it is one there ([`extended`]);
/// false, with nothing marked, if not. Apart, so that the loops over easy characters stay
/// tight (Russian's cost 1% more with it inline).
#[inline(never)]
fn mark_extender(
    out: &mut Normalized,
    b: &[u8],
    i: usize,
    (c, len): (u32, usize),
    at: usize,
    hint: usize,
) -> bool {
    let Some(on) = extended(b, i, c) else {
        return false;
    };
    let map = if on == LETTER {
        &mut out.letter
    } else {
        &mut out.ext
    };
    mark(map, at, (1 << len) - 1, hint);
    true
}

/// What [`EXTEND`] holds for a character that is no extender.
const NOT_EXTENDER: u8 = u8::MAX;
/// What [`EXTEND`] holds for an extender of class 0 that composes with some characters
/// right before it (Bengali's and Tamil's া ா after their ে ெ); no class is this high.
const COMPOSES: u8 = u8::MAX - 1;

/// What [`EXTEND`] says of `c` if it is an *extender*: its combining class, or
/// [`COMPOSES`]. An extender is a character of the plane that UAX #29 attaches to
/// whatever precedes it (WB4: Extend and Format, not the zero-width joiner, whose WB3c
/// looks ahead), which NFKC, lowercasing and the quotes leave as it is, and whose NFKC
/// quick check answers Yes (it composes with nothing before it) or, for a starter, Maybe
/// (it composes only with the character right before it, and only with some): Indic
/// vowel signs and viramas, Arabic's harakat, most combining marks.
#[inline]
fn extender(c: u32) -> Option<u8> {
    let class = u16::try_from(c).map_or(NOT_EXTENDER, |cp| EXTEND.get(cp));
    (class != NOT_EXTENDER).then_some(class)
}

/// Whether `c`, at `i` of `b`, is an extender that the fast path writes as part of the
/// word of a letter or ideograph before it, and which ([`LETTER`] or [`IDEO`]): it follows
/// a letter (ASCII or easy) or an ideograph (easy), or extenders that follow one, in
/// canonical order (each mark of non-zero class after a starter or a mark of a class no
/// higher), and no mark of them composes with the character before it (a starter
/// composes only with a starter right before it: anything between blocks it). WB4 then makes the whole a letter to every word rule, or an ideograph's word
/// of its own, as the scanner takes the bits the normaliser sets for it; and UAX #15's
/// quick check says the text is still in NFKC. Anywhere else a mark is hard: after a digit
/// (WB4 makes it a digit, and `1़,2` one word), after `_`, punctuation or white space, at
/// the start, out of order.
///
/// `b` is the text as the fast path reads it, or as it wrote it: what comes before an
/// extender there is ASCII, easy characters and extenders (a slow piece ends before a
/// character that starts a piece, which no extender does). A mark more than
/// [`MAX_MARKS`] after its letter is hard, so that the walk back is short on any text.
pub(crate) fn extended(b: &[u8], i: usize, c: u32) -> Option<u32> {
    // The mark, what EXTEND says of it, and where it starts.
    let (mut mark, mut says, mut at) = (c, extender(c)?, i);
    for _ in 0..MAX_MARKS {
        let before = *b.get(at.checked_sub(1)?)?;
        let mut start = at - 1;
        while start > 0 && b[start] & 0xC0 == 0x80 {
            start -= 1;
        }
        let p = decode(b, start).0;
        if says == COMPOSES && composes(p, mark) {
            return None;
        }
        if before < 0x80 {
            return before.is_ascii_alphabetic().then_some(LETTER);
        }
        match easy::entry(p).kind() {
            LETTER => return Some(LETTER),
            IDEO => return Some(IDEO),
            _ => {}
        }
        let class = |says: u8| if says == COMPOSES { 0 } else { says };
        match extender(p) {
            Some(k) if class(says) == 0 || class(k) <= class(says) => says = k,
            _ => return None,
        }
        (mark, at) = (p, start);
    }
    None
}

/// Whether canonical composition joins `first` and `second` into one character.
#[cold]
fn composes(first: u32, second: u32) -> bool {
    match (char::from_u32(first), char::from_u32(second)) {
        (Some(a), Some(b)) => unicode_normalization::char::compose(a, b).is_some(),
        _ => false,
    }
}

/// The most marks in a row on one character that the fast path writes; the rest take the
/// plain pipeline. Real text stacks a few (at most 5 in the catalogs' text of nine
/// scripts, in Khmer and Myanmar); each mark walks back over those before it, so a text
/// of letters under dozens of marks would cost a walk of dozens at each.
const MAX_MARKS: usize = 8;

/// A character's combining class if it is an extender (see [`extender`]), else
/// [`NOT_EXTENDER`].
fn extend_of(c: char) -> u8 {
    if c.is_ascii() || c == '\u{200D}' || is_typographic_quote(c) {
        return NOT_EXTENDER;
    }
    let (class, answer, lowercase_changes) = quick_of(c);
    let answer = match answer {
        QUICK_YES => class,
        QUICK_MAYBE if class == 0 => COMPOSES,
        _ => return NOT_EXTENDER,
    };
    if lowercase_changes || !std::iter::once(c).nfkc().eq([c]) {
        return NOT_EXTENDER;
    }
    let mut buf = [0u8; 8];
    buf[0] = b'#';
    let n = 1 + c.encode_utf8(&mut buf[1..]).len();
    let attaches = std::str::from_utf8(&buf[..n]).is_ok_and(|s| s.split_word_bounds().count() == 1);
    if attaches {
        answer
    } else {
        NOT_EXTENDER
    }
}

static EXTEND: BmpTable<u8> = BmpTable::new(extend_of, NOT_EXTENDER);

/// Hard characters that are separators, their own output, whenever the characters on
/// both sides are ASCII (or the text ends there) and, for the middle dot, not both
/// letters. They are hard for what a neighbour may be: the middle dot U+00B7 joins two
/// letters into one word (UAX #29 WB6/7: "l·l" in Catalan); a pictograph (`🔬`, `🔥`…)
/// keeps a zero-width joiner before it and marks or a variation selector after it (WB3c,
/// WB4), as do the symbols and punctuation of these blocks, and all of those are
/// non-ASCII. Rustdoc writes " · " and emoji between spaces by the thousand, and each
/// sent its piece through the plain pipeline. The ranges are the hard characters of
/// U+2000..U+2FFF and U+1F000..U+1FAFF (and the middle dot) that behave as `#` between
/// ASCII neighbours under the plain pipeline: no NFKC mapping (`⨌` is four integrals,
/// `🉐` an ideograph), no word joined; `scan::tests::lone_separators` checks every one of
/// them between every pair of a set of such neighbours.
pub(crate) const LONE: &[std::ops::RangeInclusive<u32>] = &[
    0xB7..=0xB7,
    0x2028..=0x2029,
    0x2800..=0x2A0B,
    0x2A0D..=0x2A73,
    0x2A77..=0x2ADB,
    0x2ADD..=0x2BFF,
    0x2CE5..=0x2CEA,
    0x2CF4..=0x2CFC,
    0x2CFE..=0x2CFF,
    0x2D26..=0x2D26,
    0x2D28..=0x2D2C,
    0x2D2E..=0x2D2F,
    0x2D68..=0x2D6E,
    0x2D70..=0x2D7E,
    0x2D97..=0x2D9F,
    0x2DA7..=0x2DA7,
    0x2DAF..=0x2DAF,
    0x2DB7..=0x2DB7,
    0x2DBF..=0x2DBF,
    0x2DC7..=0x2DC7,
    0x2DCF..=0x2DCF,
    0x2DD7..=0x2DD7,
    0x2DDF..=0x2DDF,
    0x2E00..=0x2E2E,
    0x2E30..=0x2E9E,
    0x2EA0..=0x2EF2,
    0x2EF4..=0x2EFF,
    0x2FD6..=0x2FFF,
    0x1F000..=0x1F0FF,
    0x1F10D..=0x1F10F,
    0x1F12F..=0x1F12F,
    0x1F16D..=0x1F16F,
    0x1F18A..=0x1F18F,
    0x1F191..=0x1F1FF,
    0x1F203..=0x1F20F,
    0x1F23C..=0x1F23F,
    0x1F249..=0x1F24F,
    0x1F252..=0x1F3FA,
    0x1F400..=0x1FAFF,
];

/// Whether the hard character `c` at `i..i + len` of `b` is a separator that is its own
/// output there (see [`LONE`]).
#[inline]
fn separates_here(b: &[u8], i: usize, len: usize, c: u32) -> bool {
    let before = match i.checked_sub(1) {
        None => b' ',
        Some(j) if b[j] < 0x80 => b[j],
        Some(_) => return false,
    };
    let after = match b.get(i + len) {
        None => b' ',
        Some(&x) if x < 0x80 => x,
        Some(_) => return false,
    };
    if c == 0xB7 && before.is_ascii_alphabetic() && after.is_ascii_alphabetic() {
        return false;
    }
    LONE.iter().any(|r| r.contains(&c))
}

/// The unified ideographs U+4E00..=U+9FFF, all easy ideographs that are their own output
/// (easy::tests): in UTF-8, a lead byte E4 with a second byte from B8, or E5..=E9.
const UNIFIED: std::ops::RangeInclusive<u32> = 0x4E00..=0x9FFF;

/// Whether valid UTF-8 `b` starts with a unified ideograph ([`UNIFIED`]): a safe cut
/// falls before one (see the module's notes).
#[inline]
fn starts_unified(b: &[u8]) -> bool {
    match b {
        [0xE5..=0xE9, ..] => true,
        [0xE4, second, ..] => *second >= 0xB8,
        _ => false,
    }
}

/// The first bytes of five three-byte characters in a row.
const IDEO_FIRSTS: u64 = 0b1_001_001_001_001;

/// How many of the five three-byte characters that may start at bytes 0, 3, 6, 9 and 12 of
/// 16 bytes of valid UTF-8 are, in a row from byte 0, unified ideographs ([`UNIFIED`]).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline]
fn leading_ideographs(block: &[u8]) -> usize {
    // SAFETY: SSE2 is enabled for this build (the cfg above; it is part of every x86-64
    // target), so its instructions exist on any CPU the program runs on.
    unsafe { leading_ideographs_sse2(block) }
}

/// [`leading_ideographs`] with SSE2: the byte ranges by signed compares (0x80..=0xFF are
/// negative, in order), one `movemask` each. In valid UTF-8 a lead byte of three bytes is
/// followed by two continuation bytes, so the bytes at 3, 6, 9 and 12 start characters
/// whenever those before them are such leads.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn leading_ideographs_sse2(block: &[u8]) -> usize {
    use std::arch::x86_64::*;

    debug_assert_eq!(block.len(), 16);
    let splat = |c: u8| _mm_set1_epi8(c as i8);
    let mask = |v: __m128i| _mm_movemask_epi8(v) as u32;
    // SAFETY: `block` is 16 readable bytes; the load has no alignment requirement.
    let x = unsafe { _mm_loadu_si128(block.as_ptr().cast()) };
    let between = |lo: u8, hi: u8| {
        mask(_mm_and_si128(
            _mm_cmpgt_epi8(x, splat(lo - 1)),
            _mm_cmplt_epi8(x, splat(hi + 1)),
        ))
    };
    let e4 = mask(_mm_cmpeq_epi8(x, splat(0xE4)));
    let ideo = between(0xE5, 0xE9) | e4 & between(0xB8, 0xBF) >> 1;
    let missing = !ideo & IDEO_FIRSTS as u32 | 1 << 15;
    missing.trailing_zeros() as usize / 3
}

/// How many of the five three-byte characters that may start at bytes 0, 3, 6, 9 and 12 of
/// 16 bytes of valid UTF-8 are, in a row from byte 0, unified ideographs ([`UNIFIED`]).
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn leading_ideographs_scalar(block: &[u8]) -> usize {
    (0..5)
        .take_while(|&k| {
            let (c, len) = decode(block, 3 * k);
            len == 3 && UNIFIED.contains(&c)
        })
        .count()
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline]
fn leading_ideographs(block: &[u8]) -> usize {
    leading_ideographs_scalar(block)
}

/// Copies the ASCII prefix of `src` to `out`, lowercased when `lower`; returns its length.
fn copy_ascii(src: &[u8], lower: bool, out: &mut Vec<u8>) -> usize {
    #[cfg(target_arch = "x86_64")]
    if src.len() >= 64 && crate::arch::features().avx512bw() {
        // SAFETY: the CPU has AVX-512F and BW (checked just above; BW implies F).
        return unsafe { copy_ascii_avx512(src, lower, out) };
    }
    copy_ascii_by_16(src, lower, out)
}

/// [`copy_ascii`] 64 bytes at a time: the block's high bits say where its ASCII prefix
/// ends, and the prefix of the lowered block is copied; the last bytes go by
/// [`copy_ascii_by_16`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn copy_ascii_avx512(src: &[u8], lower: bool, out: &mut Vec<u8>) -> usize {
    use std::arch::x86_64::*;

    let mut n = 0;
    let mut lowered = [0u8; 64];
    while let Some(block) = src.get(n..n + 64) {
        // SAFETY: `block` is 64 readable bytes; the load has no alignment requirement.
        let x = unsafe { _mm512_loadu_si512(block.as_ptr().cast()) };
        let high = _mm512_movepi8_mask(x);
        let x = if lower {
            super::word_hash::lowered(x)
        } else {
            x
        };
        // SAFETY: `lowered` is 64 writable bytes; the store has no alignment requirement.
        unsafe { _mm512_storeu_si512(lowered.as_mut_ptr().cast(), x) };
        if high != 0 {
            let ascii = high.trailing_zeros() as usize;
            out.extend_from_slice(&lowered[..ascii]);
            return n + ascii;
        }
        out.extend_from_slice(&lowered);
        n += 64;
    }
    n + copy_ascii_by_16(&src[n..], lower, out)
}

/// [`copy_ascii`] sixteen bytes at a time, then a byte at a time.
fn copy_ascii_by_16(src: &[u8], lower: bool, out: &mut Vec<u8>) -> usize {
    let mut n = 0;
    // Sixteen bytes at a time while they are all ASCII.
    let mut chunk = [0u8; 16];
    while let Some(block) = src.get(n..n + 16) {
        let Some(lowered) = lower16(block, lower) else {
            break;
        };
        chunk.copy_from_slice(&lowered);
        out.extend_from_slice(&chunk);
        n += 16;
    }
    while n < src.len() && src[n] < 0x80 {
        out.push(if lower {
            src[n].to_ascii_lowercase()
        } else {
            src[n]
        });
        n += 1;
    }
    n
}

/// Sixteen bytes lowercased (when `lower`), or `None` if one of them is not ASCII.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline]
fn lower16(block: &[u8], lower: bool) -> Option<[u8; 16]> {
    // SAFETY: SSE2 is enabled for this build (the cfg above; it is part of every x86-64
    // target), so its instructions exist on any CPU the program runs on.
    unsafe { lower16_sse2(block, lower) }
}

/// [`lower16`] with SSE2: the high bits say whether all is ASCII; `A`..=`Z` by signed
/// compares (exact on ASCII) gain 0x20.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn lower16_sse2(block: &[u8], lower: bool) -> Option<[u8; 16]> {
    use std::arch::x86_64::*;

    debug_assert_eq!(block.len(), 16);
    // SAFETY: `block` is 16 readable bytes; the load has no alignment requirement.
    let x = unsafe { _mm_loadu_si128(block.as_ptr().cast()) };
    if _mm_movemask_epi8(x) != 0 {
        return None;
    }
    let x = if lower {
        let upper = _mm_and_si128(
            _mm_cmpgt_epi8(x, _mm_set1_epi8(b'A' as i8 - 1)),
            _mm_cmplt_epi8(x, _mm_set1_epi8(b'Z' as i8 + 1)),
        );
        _mm_or_si128(x, _mm_and_si128(upper, _mm_set1_epi8(0x20)))
    } else {
        x
    };
    let mut out = [0u8; 16];
    // SAFETY: `out` is 16 writable bytes; the store has no alignment requirement.
    unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), x) };
    Some(out)
}

/// Sixteen bytes lowercased (when `lower`), or `None` if one of them is not ASCII.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline]
fn lower16(block: &[u8], lower: bool) -> Option<[u8; 16]> {
    if !block.is_ascii() {
        return None;
    }
    let mut out = [0u8; 16];
    out.copy_from_slice(block);
    if lower {
        out.make_ascii_lowercase();
    }
    Some(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Pieces of mixed text: ASCII words and punctuation, Latin-1 and extended Latin,
    /// typographic quotes and dashes, combining marks, CJK, kana, Hangul, Cyrillic, Greek
    /// with its sigmas, Hebrew, Arabic, the Indic scripts, Thai, Lao, Khmer, Myanmar,
    /// Tibetan and the other scripts of the table's pages with their marks, emoji and ZWJ
    /// sequences, odd spaces, full-width and presentation forms, ligatures, digits, and
    /// white space of every kind, so that cuts fall everywhere.
    pub(crate) const POOL: &[&str] = &[
        "a",
        "B",
        "z",
        "Q",
        "0",
        "7",
        "42",
        "the",
        "The",
        "don't",
        "3.14",
        "e.g",
        "a_b",
        "_",
        " ",
        "  ",
        "\n",
        "\r\n",
        "\t",
        "\x0b",
        "\x0c",
        ".",
        ",",
        ";",
        ":",
        "'",
        "\"",
        "-",
        "(",
        ")",
        "#",
        "/",
        "é",
        "É",
        "e\u{301}",
        "E\u{301}",
        "\u{301}",
        "\u{308}",
        "ß",
        "ẞ",
        "İ",
        "ı",
        "ﬁ",
        "ﬀ",
        "Ｆ",
        "ｆ",
        "１",
        "，",
        "。",
        "、",
        "：",
        "（",
        "）",
        "’",
        "‘",
        "‛",
        "“",
        "”",
        "„",
        "′",
        "″",
        "ʼ",
        "—",
        "–",
        "…",
        "©",
        "§",
        "·",
        "\u{a0}",
        "\u{2009}",
        "\u{3000}",
        "\u{200b}",
        "\u{200d}",
        "\u{fffd}",
        "漢",
        "字",
        "中文",
        "の",
        "テスト",
        "ー",
        "한",
        "한국어",
        "ㄱ",
        "ㅏ",
        "\u{1100}",
        "\u{1161}",
        "\u{11a8}",
        "Ж",
        "ж",
        "Привет",
        "мир",
        "Σ",
        "σ",
        "ς",
        "ΟΔΟΣ",
        "Ά",
        "ά",
        "ΐ",
        "\u{345}",
        "א",
        "שלום",
        "ש\"ל",
        "😀",
        "👍🏽",
        "👨\u{200d}👩",
        "🇫🇷",
        "\u{fe0f}",
        "Å",
        "Å",
        "Ω",
        "K",
        "ǅ",
        "Ǆ",
        "ŉ",
        "ſ",
        "ℌ",
        "①",
        "²",
        "½",
        "٣",
        "अ",
        "कि",
        "ก",
        "ที่",
        "ก็",
        "เกม",
        "ำ",
        "\u{0e33}",
        "ກ",
        "ເ",
        "ຫຼ",
        "ក",
        "\u{17b6}",
        "\u{17d2}",
        "က",
        "\u{103c}",
        "\u{103a}",
        "ཀ",
        "\u{0f71}",
        "كتاب",
        "\u{064b}",
        "\u{0670}",
        "ب",
        "क्ष",
        "\u{093c}",
        "\u{0951}",
        "ক",
        "কে",
        "\u{9be}",
        "க",
        "கெ",
        "\u{bbe}",
        "ස",
        "ა",
        "ሀ",
        "Ꭰ",
        "ᐁ",
        "ᠮ",
        "\u{180b}",
        "\u{180e}",
        "ꀀ",
        "\u{1100}\u{1161}",
        "\u{1d2c}",
        "ﻻ",
        "ﭐ",
        "︰",
        "﹐",
        "\u{feff}",
        "ـ",
        "ﻼ",
        "ﷺ",
        "\u{f900}",
        "─",
        "│",
        "\x1b[0m",
        "·",
        " · ",
        "l·l",
        "©",
        "🔬",
        "⚠\u{fe0f}",
        "⚠",
        "→",
    ];

    pub(crate) fn mixed() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(POOL), 0..80).prop_map(|v| v.concat())
    }

    /// Text without white space, with ideographs every few characters: hard characters
    /// right against the cuts before ideographs, with no other cut near.
    pub(crate) fn among_ideographs() -> impl Strategy<Value = String> {
        let others: Vec<&str> = POOL
            .iter()
            .copied()
            .filter(|s| !s.chars().any(char::is_whitespace))
            .collect();
        let piece = prop_oneof![prop::sample::select(others), Just("漢"), Just("中文字")];
        prop::collection::vec(piece, 0..60).prop_map(|v| v.concat())
    }

    fn fast(text: &str, n: Normalize) -> Normalized {
        let mut out = Normalized::default();
        normalize_into(text, n, &mut out);
        out
    }

    fn check(text: &str, n: Normalize) -> Result<(), TestCaseError> {
        let got = fast(text, n);
        let want = plain(text, n, false).0;
        prop_assert_eq!(
            std::str::from_utf8(&got.text).ok(),
            Some(&*want),
            "{:?}",
            text
        );
        // Outside the slow spans, every non-ASCII character is easy and its own output, or
        // an extender on a letter or ideograph.
        let [mut letter, mut ideo, mut ext] = [0; 3].map(|_| vec![false; got.text.len()]);
        let mut at = 0;
        for &(s, e) in got
            .slow
            .iter()
            .chain([(got.text.len(), got.text.len())].iter())
        {
            prop_assert!(at <= s && s <= e);
            let mut i = at;
            while i < s {
                let (c, len) = decode(&got.text, i);
                if c >= 0x80 && easy::entry(c).kind() == HARD {
                    if let Some(on) = extended(&got.text, i, c) {
                        // A mark on a letter is a letter's bytes to the scanner.
                        let map = if on == LETTER { &mut letter } else { &mut ext };
                        map[i..i + len].fill(true);
                    } else {
                        // A lone separator, between neighbours that leave it one.
                        prop_assert!(
                            LONE.iter().any(|r| r.contains(&c)),
                            "{:#x} in {:?}",
                            c,
                            text
                        );
                    }
                } else if c >= 0x80 {
                    let entry = easy::entry(c);
                    prop_assert!(matches!(
                        entry.kind(),
                        easy::LETTER | easy::IDEO | easy::SEP
                    ));
                    prop_assert_eq!(entry.out_char(c), c);
                    if entry.kind() == LETTER {
                        letter[i..i + len].fill(true);
                    } else if entry.kind() == IDEO {
                        prop_assert_eq!(len, 3);
                        ideo[i] = true;
                    }
                }
                i += len;
            }
            at = e;
        }
        // The class bitmaps mark exactly those characters, and nothing in the slow spans
        // or past the end.
        for (map, want, name) in [
            (&got.letter, &letter, "letter"),
            (&got.ideo, &ideo, "ideo"),
            (&got.ext, &ext, "ext"),
        ] {
            for bit in 0..(64 * map.len()).max(want.len()) {
                let have = map.get(bit / 64).is_some_and(|w| w >> (bit % 64) & 1 == 1);
                let want = want.get(bit).copied().unwrap_or(false);
                prop_assert_eq!(have, want, "{} bit {} of {:?}", name, bit, text);
            }
        }
        Ok(())
    }

    #[test]
    fn examples() {
        for text in [
            "",
            "Don’t STOP — naïve Café",
            "x\u{301} y",
            " \u{301}a",
            "ΟΔΟΣ ΟΔΟΣ.",
            "Σ",
            "aΣ b",
            "ㄱㅏ",
            "中文，测试。ＡＢＣ",
            "a\u{a0}\u{301}b",
            // Runs of characters that are their own output, ended by each kind of
            // character that is not: one with another output, a hard one, a combining
            // mark (which reaches back into the run), ASCII, the end.
            "中文字漢Жж한국어，мир",
            "漢字テスト 中文\u{301}x",
            "привет\u{308} мир",
            "中文字漢",
            // Marks of easy characters undone when a hard one sends them the plain way.
            "a 中文字漢Жж한국어é\u{301} 漢",
            "x 中文字漢中文字漢中文字漢中文字漢中文字漢中文字漢中文字漢中文字漢中文字漢\u{301} 漢x",
        ] {
            check(text, Normalize::default()).unwrap();
        }
    }

    #[test]
    fn unified_ideographs_are_easy_fixed_points() {
        for c in UNIFIED {
            let e = easy::entry(c);
            assert_eq!((e.kind(), e.out_char(c)), (IDEO, c), "{c:#x}");
        }
    }

    /// Every character at every slot, with several kinds of character after it.
    #[test]
    fn leading_ideographs_by_the_code_point() {
        for c in (0x80..0x1_0000u32).filter_map(char::from_u32) {
            for slot in 0..5 {
                for after in ["中", "a", "é", "😀", "\u{3000}"] {
                    let mut s = "漢".repeat(slot);
                    s.push(c);
                    while s.len() < 16 {
                        s.push_str(after);
                    }
                    let want = s
                        .chars()
                        .take(5)
                        .take_while(|&d| UNIFIED.contains(&(d as u32)))
                        .count();
                    let block = &s.as_bytes()[..16];
                    assert_eq!(leading_ideographs_scalar(block), want, "{s:?}");
                    assert_eq!(leading_ideographs(block), want, "{s:?}");
                }
            }
        }
    }

    #[test]
    fn every_character_answers_the_quick_check_and_lowercases_as_the_crates_do() {
        // Alone, after a starter, and after marks of a higher and a lower class, so that
        // the order check and the tabled answers meet every character.
        let mut text = String::new();
        for c in (0..=0x10_FFFF).filter_map(char::from_u32) {
            for before in ["", "a", "\u{0301}", "\u{0316}", "\u{094D}"] {
                text.clear();
                text.push_str(before);
                text.push(c);
                assert_eq!(nfkc_quick(&text), is_nfkc_quick(text.chars()), "{text:?}");
            }
            let single = c.to_string();
            assert_eq!(
                lowercase_changes(&single),
                single.to_lowercase() != single,
                "{c:?}"
            );
        }
    }

    /// The tables' answer for every character of the first two planes (and a few
    /// beyond) is the crate's: 0 where NFKC's quick check passes it, else the bytes of
    /// its compatibility decomposition.
    #[test]
    fn the_cost_tables_agree_with_the_crate() {
        let beyond = ['\u{20000}', '\u{2F800}', '\u{E0041}', '\u{10FFFF}'];
        for c in (0x80..0x20000).filter_map(char::from_u32).chain(beyond) {
            let want = if is_nfkc_quick(std::iter::once(c)) == IsNormalized::Yes {
                0
            } else {
                std::iter::once(c).nfkd().map(char::len_utf8).sum::<usize>()
            };
            let text = c.to_string();
            assert_eq!(cost(&text), text.len() + want * REWRITE_COST, "{c:?}");
        }
        assert_eq!(cost("plain ASCII"), 11);
        assert_eq!(cost(&"\u{FDFA}".repeat(10)), 30 + 330 * REWRITE_COST);
    }

    proptest! {
        /// The cost counts, besides the text, at least what NFKC makes of it.
        #[test]
        fn the_cost_bounds_what_nfkc_makes(
            text in "[a \u{e9}\u{301}\u{a0}\u{FDFA}\u{3300}\u{2474}\u{1D400}\u{1F600}\u{4e00}\u{FF21}\u{AC00}\u{1100}\u{1161}]{0,40}",
        ) {
            let made: usize = text.nfkc().map(char::len_utf8).sum();
            let c = cost(&text);
            prop_assert!(c >= text.len());
            prop_assert!(made <= text.len() + (c - text.len()) / REWRITE_COST, "{made} > {c}");
            if is_nfkc_quick(text.chars()) == IsNormalized::Yes {
                prop_assert_eq!(c, text.len());
            }
        }
    }

    proptest! {
        #[test]
        fn ascii_copied_as_by_sixteen(
            text in proptest::collection::vec(
                prop_oneof![8 => proptest::sample::select(b"aZ@[`{ 09".to_vec()), 1 => Just(0xC3u8)],
                0..300,
            ),
            lower in any::<bool>(),
        ) {
            // Long ASCII runs, and runs cut anywhere by a high byte.
            let (mut by_16, mut out) = (vec![1], vec![1]);
            let n = copy_ascii_by_16(&text, lower, &mut by_16);
            prop_assert_eq!(copy_ascii(&text, lower, &mut out), n);
            prop_assert_eq!(out, by_16);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn leading_ideographs_agree(s in "[中文字a\u{e9}\u{4e00}\u{9fff}\u{4dff}\u{a000}\u{3400}]{6,16}") {
            let block = &s.as_bytes()[..16.min(s.len())];
            if block.len() == 16 {
                prop_assert_eq!(leading_ideographs(block), leading_ideographs_scalar(block));
            }
        }

        #[test]
        fn same_bytes_as_the_plain_pipeline(text in prop_oneof![mixed(), among_ideographs()]) {
            check(&text, Normalize::default())?;
        }

        #[test]
        fn same_bytes_under_any_settings(
            text in mixed(),
            nfkc in any::<bool>(),
            lowercase in any::<bool>(),
            ascii_quotes in any::<bool>(),
        ) {
            let n = Normalize { nfkc, lowercase, ascii_quotes, fold_whitespace: false };
            let got = fast(&text, n);
            let want = plain(&text, n, false).0;
            prop_assert_eq!(std::str::from_utf8(&got.text).ok(), Some(&*want));
        }

        #[test]
        fn same_bytes_on_any_text(text in any::<String>()) {
            check(&text, Normalize::default())?;
        }

        #[test]
        fn pieces_normalise_as_the_plain_pipeline(
            text in "[a-zA-Z \u{915}-\u{94f}\u{958}\u{93c}\u{9be}\u{9c7}\u{9d7}\u{e01}-\u{e4b}\u{1000}-\u{1030}\u{301}\u{316}\u{3a3}\u{3c3}\u{130}\u{c9}\u{ff21}\u{2019}\u{1d400}]{0,24}",
            lowercase in any::<bool>(),
            ascii_quotes in any::<bool>(),
        ) {
            // Indic, Thai and Myanmar letters among their marks (of every class, some of
            // them composing: the Bengali vowel signs, the nukta), capitals, sigmas,
            // full-width and mathematical letters, quotes.
            let n = Normalize { nfkc: true, lowercase, ascii_quotes, fold_whitespace: false };
            prop_assert_eq!(&*plain_piece(&text, n), &*plain(&text, n, false).0);
            prop_assert_eq!(nfkc_quick(&text), is_nfkc_quick(text.chars()));
        }
    }
}
