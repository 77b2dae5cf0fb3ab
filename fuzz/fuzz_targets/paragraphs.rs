//! The paragraph splitter, and fingerprinting under every tokenizer: the first byte picks
//! the configuration, the rest is the text. Paragraphs are non-empty, in order, apart,
//! trimmed, on character boundaries, each at least the minimum long but for a lone one,
//! and each fingerprint is its span's.
#![no_main]

use libfuzzer_sys::fuzz_target;
use neardup::fingerprint::{Fingerprinter, Tokenizer, Weighting};

fuzz_target!(
    // jieba loads its dictionary on first use, seconds under the sanitizer: before the
    // first input, so that -timeout measures inputs only.
    init: {
        let fp = Fingerprinter::builder().tokenizer(Tokenizer::Jieba).build();
        drop(fp.map(|fp| fp.fingerprint("我们今天去北京")));
    },
    |data: &[u8]| {
    let Some((&flags, text)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(text);
    let tokenizer = match flags & 3 {
        0 => Tokenizer::UnicodeWords,
        1 => Tokenizer::AsciiLetters,
        2 => Tokenizer::CharNgrams(usize::from(flags >> 6) + 1),
        _ => Tokenizer::Jieba,
    };
    let weighting = match (flags >> 2) & 3 {
        0 => Weighting::None,
        1 => Weighting::Tf,
        2 => Weighting::LenPos { lambda: 0.5 },
        _ => Weighting::Custom(Default::default()),
    };
    let min = [0, 1, 20, 200][usize::from(flags >> 4) & 3];
    let fp = Fingerprinter::builder()
        .tokenizer(tokenizer)
        .window(usize::from(flags >> 5) + 1)
        .weighting(weighting)
        .min_paragraph(min)
        .build()
        .expect("a valid configuration");
    let paragraphs = fp.paragraphs(&text);
    let mut after = 0;
    for (i, p) in paragraphs.iter().enumerate() {
        assert!(after <= p.start && p.start < p.end && p.end <= text.len());
        assert!(text.is_char_boundary(p.start) && text.is_char_boundary(p.end));
        let span = &text[p.start..p.end];
        assert_eq!(span, span.trim(), "paragraph {i} is trimmed");
        if paragraphs.len() > 1 {
            assert!(p.end - p.start >= min, "paragraph {i} is at least {min} bytes");
        }
        assert_eq!(p.fingerprint, fp.fingerprint(span));
        after = p.end;
    }
    if !text.trim().is_empty() && !text.contains('<') {
        assert!(!paragraphs.is_empty(), "a text with words has a paragraph");
    }
});
