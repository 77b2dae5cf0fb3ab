//! Every level of kernels the CPU can run ([`neardup::arch::levels`]) gives what the
//! scalar level gives: fingerprints under several configurations, 256-bit ones, feature
//! sets, word and shingle hashes, sketches and their band keys, and the bit-voting
//! kernels on random inputs. The level is set in this process ([`arch::with_level`]),
//! whatever `NEARDUP_CPU` says.

use neardup::arch::{self, Level};
use neardup::fingerprint::{
    simhash, simhash_weighted, Fingerprinter, Normalize, Tokenizer, Weighting,
};
use neardup::jaccard::{self, Banding, Sketch};

/// A splitmix64 stream: fixed inputs, the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Texts that reach every kernel: short and long (past the 64-byte blocks and the
/// 128-hash vector counts), ASCII with capitals, digits and joiners, accented and other
/// scripts, ideographs, repeated words (weights), and nothing at all.
fn texts() -> Vec<String> {
    const PIECES: &[&str] = &[
        "the",
        "The",
        "QUICK",
        "brown",
        "fox",
        "don't",
        "3.14",
        "1,000",
        "snake_case",
        "a:b",
        "naïve",
        "café",
        "Ελλάδα",
        "Москва",
        "漢字",
        "テスト",
        "東京都",
        "ไทย",
        "—",
        ",",
        ".",
        "e.g.",
        "\u{301}",
        "ǅ",
        "İstanbul",
        "straße",
        "\t",
        "\n\n",
        "  ",
    ];
    let mut rng = Rng(2024);
    let mut out = vec![
        String::new(),
        "one".to_string(),
        "a b c d e".to_string(),
        "word ".repeat(300),
    ];
    for len in [3, 8, 20, 60, 200, 800, 3000] {
        for _ in 0..6 {
            let mut t = String::new();
            for _ in 0..len {
                t.push_str(PIECES[rng.below(PIECES.len())]);
                if rng.below(4) > 0 {
                    t.push(' ');
                }
            }
            out.push(t);
        }
    }
    out
}

fn fingerprinters() -> Vec<Fingerprinter> {
    let mut out = vec![Fingerprinter::default()];
    for (tokenizer, window, weighting, normalize) in [
        (Tokenizer::UnicodeWords, 1, Weighting::None, Normalize::NONE),
        (
            Tokenizer::UnicodeWords,
            2,
            Weighting::Tf,
            Normalize::default(),
        ),
        (
            Tokenizer::UnicodeWords,
            4,
            Weighting::LenPos { lambda: 0.5 },
            Normalize::default(),
        ),
        (
            Tokenizer::AsciiLetters,
            3,
            Weighting::Tf,
            Normalize::default(),
        ),
        (
            Tokenizer::CharNgrams(3),
            1,
            Weighting::None,
            Normalize::default(),
        ),
        (Tokenizer::CharNgrams(4), 2, Weighting::Tf, Normalize::NONE),
    ] {
        out.push(
            Fingerprinter::builder()
                .tokenizer(tokenizer)
                .window(window)
                .weighting(weighting)
                .normalize(normalize)
                .build()
                .unwrap(),
        );
    }
    out
}

/// Everything the levels must agree on, as numbers.
fn outputs() -> Vec<Vec<u64>> {
    let texts = texts();
    let mut out = Vec::new();
    for fp in fingerprinters() {
        for t in &texts {
            out.push(vec![fp.fingerprint(t)]);
            out.push(fp.fingerprint_wide(t).to_vec());
            out.push(fp.feature_set(t));
        }
    }
    let banding = Banding::new(5).unwrap();
    for t in &texts {
        let mut words = Vec::new();
        jaccard::word_hashes(t, |h| words.push(h));
        out.push(words);
        let mut shingles = Vec::new();
        jaccard::shingle_hashes(t, |h| shingles.push(h));
        out.push(shingles);
        out.push(jaccard::shingle_set(t));
        let (sketch, keys) = Sketch::of_text_with_bands(t, banding);
        out.push(sketch.to_bytes().iter().map(|&b| u64::from(b)).collect());
        out.push(keys.iter().map(|&k| u64::from(k)).collect());
        out.push(
            Sketch::of_text(t)
                .to_bytes()
                .iter()
                .map(|&b| u64::from(b))
                .collect(),
        );
    }
    // The bit-voting kernels on random hashes, below and past the vector thresholds, and
    // with weights small and large (their sums past 2^32 go another way).
    let mut rng = Rng(7);
    for n in [0, 1, 5, 127, 128, 129, 1000, 5000] {
        let hashes: Vec<u64> = (0..n).map(|_| rng.next()).collect();
        out.push(vec![simhash(&hashes)]);
        for max in [3u64, 1000, u64::from(u32::MAX)] {
            let weighted: Vec<(u64, u32)> = hashes
                .iter()
                .map(|&h| (h, (rng.next() % max) as u32 + 1))
                .collect();
            out.push(vec![simhash_weighted(weighted)]);
        }
    }
    out
}

#[test]
fn every_level_gives_the_scalar_results() {
    let want = arch::with_level(Level::Scalar, || {
        assert_eq!(arch::level(), Level::Scalar);
        outputs()
    });
    assert!(want.iter().map(Vec::len).sum::<usize>() > 10_000);
    let mut compared = vec![Level::Scalar];
    for level in arch::levels() {
        if level == Level::Scalar {
            continue;
        }
        let got = arch::with_level(level, || {
            assert_eq!(arch::level(), level);
            outputs()
        });
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "output {i} at level {level}");
        }
        compared.push(level);
    }
    // Not vacuous: where the CPU has AVX-512, its kernels were compared with the scalar
    // ones (and the AVX2 level, which has none of its own, along the way).
    if arch::cpu().avx512f() {
        assert!(compared.contains(&Level::Avx512), "{compared:?}");
        assert!(compared.len() >= 2);
    }
    eprintln!("levels compared: {compared:?}");
}

/// The corpus's queries at every level against brute force, on a corpus large enough for
/// its tables to keep 48-bit keys under a 16-bit directory (the vector scan's case),
/// with fingerprints near one another so that every table finds matches.
#[test]
fn corpus_queries_agree_at_every_level() {
    use neardup::corpus::Corpus;
    use neardup::tables::Blocks;

    let mut rng = Rng(7);
    let mut docs: Vec<(u64, u64)> = Vec::new();
    for i in 0..60_000u64 {
        let fp = match docs.len() {
            n if n > 0 && i.is_multiple_of(3) => docs[rng.below(n)].1 ^ (1 << rng.below(64)),
            _ => rng.next(),
        };
        docs.push((i, fp));
    }
    let mut corpus = Corpus::new(Blocks::Auto, 3, docs.len()).unwrap();
    corpus.insert_bulk(&docs).unwrap();
    let queries: Vec<u64> = (0..3000)
        .map(|_| {
            let mut q = docs[rng.below(docs.len())].1;
            for _ in 0..rng.below(5) {
                q ^= 1 << rng.below(64);
            }
            q
        })
        .collect();
    let want: Vec<Vec<(u64, u32)>> = queries
        .iter()
        .map(|&q| {
            let mut m: Vec<(u64, u32)> = docs
                .iter()
                .map(|&(id, f)| (id, (f ^ q).count_ones()))
                .filter(|&(_, d)| d <= 3)
                .collect();
            m.sort_by_key(|&(id, d)| (d, id));
            m
        })
        .collect();
    assert!(want.iter().filter(|m| m.len() > 1).count() > 100);
    for level in arch::levels() {
        arch::with_level(level, || {
            for (&q, w) in queries.iter().zip(&want) {
                assert_eq!(&corpus.find_all(q), w, "{level}");
                assert_eq!(corpus.find_first(q), w.first().copied(), "{level}");
            }
        });
    }
    assert_eq!(corpus.find_all_bulk(&queries), want);
}
