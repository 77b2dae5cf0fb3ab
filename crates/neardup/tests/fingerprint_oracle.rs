//! The Fingerprinter against a plain, slow implementation of its documented pipeline, on
//! random mixed-script texts: every fast path (the ASCII word scanner, skipped NFKC, ASCII
//! lowercasing, the shingle buffer, the weighted kernel) must give the same fingerprint.

use std::collections::HashMap;

use neardup::fingerprint::{Fingerprinter, Normalize, Tokenizer, Weighting, Wide, LANES, SEED};
use proptest::prelude::*;
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;
use xxhash_rust::xxh3::xxh3_64_with_seed;

fn oracle(text: &str, norm: Normalize, tokenizer: Tokenizer, window: usize, tf: bool) -> u64 {
    oracle_wide(text, norm, tokenizer, window, tf)[0]
}

/// All lanes: lane j > 0 votes with xxh3(feature hash, seed SEED + j).
fn oracle_wide(text: &str, norm: Normalize, tokenizer: Tokenizer, window: usize, tf: bool) -> Wide {
    let mut t = text.to_string();
    if norm.nfkc {
        t = t.nfkc().collect();
    }
    if norm.ascii_quotes {
        for q in ['\u{2018}', '\u{2019}', '\u{201B}', '\u{2032}', '\u{02BC}'] {
            t = t.replace(q, "'");
        }
        for q in ['\u{201C}', '\u{201D}', '\u{201E}', '\u{201F}', '\u{2033}'] {
            t = t.replace(q, "\"");
        }
    }
    if norm.lowercase {
        t = t.to_lowercase();
    }
    let char_ngrams = matches!(tokenizer, Tokenizer::CharNgrams(_));
    if norm.fold_whitespace && char_ngrams {
        t = t.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    let tokens: Vec<String> = match tokenizer {
        Tokenizer::UnicodeWords => t.unicode_words().map(String::from).collect(),
        Tokenizer::AsciiLetters => t
            .split(|c: char| !c.is_ascii_alphabetic())
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect(),
        Tokenizer::CharNgrams(n) => {
            let chars: Vec<char> = t.chars().collect();
            if chars.is_empty() {
                vec![]
            } else if chars.len() < n {
                vec![t.clone()]
            } else {
                chars.windows(n).map(|w| w.iter().collect()).collect()
            }
        }
        _ => unreachable!(),
    };
    let th: Vec<u64> = tokens
        .iter()
        .map(|s| xxh3_64_with_seed(s.as_bytes(), SEED))
        .collect();
    let features: Vec<u64> = if window == 1 || th.is_empty() {
        th
    } else {
        let span = window.min(th.len());
        let count = if th.len() < window {
            1
        } else {
            th.len() - window + 1
        };
        (0..count)
            .map(|i| {
                let bytes: Vec<u8> = th[i..i + span]
                    .iter()
                    .flat_map(|x| x.to_le_bytes())
                    .collect();
                xxh3_64_with_seed(&bytes, SEED)
            })
            .collect()
    };
    let votes: Vec<(u64, u64)> = if tf {
        let mut counts: HashMap<u64, u32> = HashMap::new();
        for &f in &features {
            *counts.entry(f).or_default() += 1;
        }
        let w: Vec<(u64, f32)> = counts
            .iter()
            .map(|(&f, &c)| (f, 1.0 + (c as f32).ln()))
            .collect();
        let max = w.iter().map(|x| x.1).fold(0.0f32, f32::max);
        w.iter()
            .map(|&(f, x)| (f, (x / max * 1023.0).round() as u64))
            .collect()
    } else {
        features.iter().map(|&f| (f, 1)).collect()
    };
    let total: u64 = votes.iter().map(|v| v.1).sum();
    let mut lanes = [0u64; LANES];
    for (lane, out) in lanes.iter_mut().enumerate() {
        let hash = |f: u64| {
            if lane == 0 {
                f
            } else {
                xxh3_64_with_seed(&f.to_le_bytes(), SEED + lane as u64)
            }
        };
        for i in 0..64 {
            let ones: u64 = votes
                .iter()
                .filter(|v| (hash(v.0) >> i) & 1 == 1)
                .map(|v| v.1)
                .sum();
            if ones * 2 > total {
                *out |= 1 << i;
            }
        }
    }
    lanes
}

/// Pieces of mixed text: ASCII words and punctuation, Latin-1 and extended Latin,
/// typographic quotes and dashes, combining marks, CJK, kana, Hangul, Cyrillic, Greek with
/// its sigmas, Hebrew, emoji and ZWJ sequences, odd spaces, full-width forms, ligatures,
/// digits, and white space of every kind, so that word boundaries fall everywhere.
const POOL: &[&str] = &[
    "a",
    "B",
    "z",
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
    ".",
    "'",
    ",",
    ";",
    ":",
    "\"",
    "-",
    "#",
    "é",
    "e\u{301}",
    "\u{301}",
    "Ä",
    "ß",
    "ẞ",
    "İ",
    "ﬁ",
    "Ｆ",
    "１",
    "，",
    "。",
    "’",
    "‘",
    "“",
    "”",
    "′",
    "″",
    "ʼ",
    "—",
    "–",
    "…",
    "©",
    "·",
    "\u{a0}",
    "\u{3000}",
    "\u{200d}",
    "漢",
    "字",
    "テスト",
    "ー",
    "の",
    "한",
    "ㄱ",
    "ㅏ",
    "Ж",
    "Привет",
    "Σ",
    "σ",
    "ς",
    "ΟΔΟΣ",
    "ά",
    "א",
    "ש\"ל",
    "😀",
    "👨\u{200d}👩",
    "🇫🇷",
    "Å",
    "Ω",
    "K",
    "ǅ",
    "½",
    "٣",
    "कि",
    "─",
];

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        // Mostly ASCII prose, the fast path.
        "[A-Za-z0-9 ,.;:'_\\n!?-]{0,120}",
        // Anything from the mixed pool.
        prop::collection::vec(prop::sample::select(POOL), 0..60).prop_map(|v| v.concat()),
    ]
}

/// Long texts, mostly ASCII words with the pool mixed in: many blocks of the word scanner,
/// many cuts around hard characters.
fn long_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => "[A-Za-z]{1,9}[ ,.\\n]{1,2}",
            1 => prop::sample::select(POOL).prop_map(String::from),
        ],
        50..300,
    )
    .prop_map(|v| v.concat())
}

fn tokenizer() -> impl Strategy<Value = Tokenizer> {
    prop_oneof![
        Just(Tokenizer::UnicodeWords),
        Just(Tokenizer::AsciiLetters),
        (1usize..6).prop_map(Tokenizer::CharNgrams),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn matches_the_plain_pipeline(
        text in text(),
        tokenizer in tokenizer(),
        window in 1usize..6,
        nfkc in any::<bool>(),
        lowercase in any::<bool>(),
        fold_whitespace in any::<bool>(),
        ascii_quotes in any::<bool>(),
        tf in any::<bool>(),
    ) {
        let norm = Normalize { nfkc, lowercase, fold_whitespace, ascii_quotes };
        let fp = Fingerprinter::builder()
            .normalize(norm)
            .tokenizer(tokenizer)
            .window(window)
            .weighting(if tf { Weighting::Tf } else { Weighting::None })
            .build()
            .unwrap();
        prop_assert_eq!(fp.fingerprint(&text), oracle(&text, norm, tokenizer, window, tf));
        prop_assert_eq!(fp.fingerprint_wide(&text), oracle_wide(&text, norm, tokenizer, window, tf));
    }

    #[test]
    fn long_texts_match_the_plain_pipeline(
        text in long_text(),
        tokenizer in tokenizer(),
        window in 1usize..4,
        tf in any::<bool>(),
    ) {
        let fp = Fingerprinter::builder()
            .tokenizer(tokenizer)
            .window(window)
            .weighting(if tf { Weighting::Tf } else { Weighting::None })
            .build()
            .unwrap();
        prop_assert_eq!(
            fp.fingerprint(&text),
            oracle(&text, Normalize::default(), tokenizer, window, tf)
        );
    }

    #[test]
    fn many_is_one_by_one(texts in prop::collection::vec(text(), 0..150)) {
        let fp = Fingerprinter::default();
        let one: Vec<u64> = texts.iter().map(|t| fp.fingerprint(t)).collect();
        prop_assert_eq!(fp.fingerprint_many(&texts), one);
    }

    #[test]
    fn paragraphs_cover_the_text_in_order(
        parts in prop::collection::vec(("[a-z ]{0,30}", prop::sample::select(vec!["\n\n", "\n \n", "<p>", "</div>", "\n", " "])), 0..12),
        min in 0usize..40,
    ) {
        let text: String = parts.iter().map(|(a, b)| format!("{a}{b}")).collect();
        let fp = Fingerprinter::builder().min_paragraph(min).build().unwrap();
        let paras = fp.paragraphs(&text);
        let mut last_end = 0;
        for (i, p) in paras.iter().enumerate() {
            prop_assert!(p.start >= last_end && p.start < p.end && p.end <= text.len());
            let body = &text[p.start..p.end];
            prop_assert_eq!(body, body.trim());
            prop_assert_eq!(p.fingerprint, fp.fingerprint(body));
            if i + 1 < paras.len() {
                prop_assert!(p.end - p.start >= min);
            }
            last_end = p.end;
        }
        // Nothing but white space and separators lies outside the paragraphs.
        let mut outside = String::new();
        let mut at = 0;
        for p in &paras {
            outside.push_str(&text[at..p.start]);
            at = p.end;
        }
        outside.push_str(&text[at..]);
        let leftover = outside
            .replace("<p>", "")
            .replace("</div>", "");
        prop_assert!(leftover.trim().is_empty(), "{:?}", leftover);
    }
}

#[test]
fn case_and_spacing_do_not_matter_by_default() {
    let fp = Fingerprinter::default();
    let a = "The Quick Brown Fox — jumps over the lazy dog.";
    let b = "the   quick brown FOX — jumps\nover the lazy dog.";
    assert_eq!(fp.fingerprint(a), fp.fingerprint(b));
    assert_ne!(
        fp.fingerprint(a),
        fp.fingerprint("the quick brown cat jumps over")
    );
}

#[test]
fn bad_configurations_are_errors() {
    assert!(Fingerprinter::builder().window(0).build().is_err());
    assert!(Fingerprinter::builder().window(17).build().is_err());
    assert!(Fingerprinter::builder()
        .tokenizer(Tokenizer::CharNgrams(0))
        .build()
        .is_err());
    let bad: HashMap<String, f32> = [("x".to_string(), -1.0f32)].into();
    assert!(Fingerprinter::builder()
        .weighting(Weighting::Custom(std::sync::Arc::new(bad)))
        .build()
        .is_err());
    assert!(Fingerprinter::builder()
        .weighting(Weighting::LenPos { lambda: f32::NAN })
        .build()
        .is_err());
}
