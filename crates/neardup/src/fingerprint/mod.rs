//! Fingerprints: text in, a 64-bit simhash out.
//!
//! A simhash fingerprint is the bitwise majority vote of a document's feature hashes:
//! similar documents share most features, so their votes, and their fingerprints, differ
//! in few bits. [`Fingerprinter`] is neardup's own pipeline:
//!
//! ```text
//! text → normalise (NFKC, lowercase, fold white space) → tokens → shingles of `window`
//!      tokens → xxh3-64 feature hashes → weights → bit votes → fingerprint
//! ```
//!
//! ```
//! use neardup::fingerprint::{Fingerprinter, Tokenizer, Weighting};
//!
//! let fp = Fingerprinter::builder()
//!     .tokenizer(Tokenizer::UnicodeWords)
//!     .window(2)
//!     .weighting(Weighting::Tf)
//!     .build()?;
//! let a = fp.fingerprint("The quick brown fox jumps over the lazy dog, and runs away.");
//! let b = fp.fingerprint("The quick brown fox jumped over the lazy dog, and ran away!");
//! assert!(neardup::hamming::distance(a, b) < 32);
//! # Ok::<(), neardup::Error>(())
//! ```
//!
//! Fingerprints are a stored format: the feature hash is xxh3-64 with seed [`SEED`], and
//! [`VERSION`] changes whenever the fingerprint of any text under any configuration
//! changes. [`compat`] holds the seomoz pipelines instead, bit for bit.

#[cfg(feature = "cjk")]
mod cjk;
pub mod compat;
mod easy;
mod kernel;
mod normal;
mod paragraph;
mod scan;
pub mod tokenize;
mod weight;
pub(crate) mod word_hash;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use xxhash_rust::xxh3::xxh3_64_with_seed;

use normal::Normalized;
use word_hash::lane_hash;

pub use kernel::{simhash, simhash_weighted};
pub use paragraph::Paragraph;
pub use tokenize::Tokenizer;
pub use weight::{Idf, IdfBuilder};

use crate::error::{Error, Result};

/// Version of the fingerprint format: bumped whenever any configuration fingerprints any
/// text differently.
pub const VERSION: u32 = 2;

/// Seed of the xxh3-64 feature hash (the bytes of "neardup1", little-endian).
pub const SEED: u64 = u64::from_le_bytes(*b"neardup1");

/// The distance to match fingerprints of the default configuration at: the smallest `k`
/// at which the quality evaluation (docs/fingerprints.md) found recall of at least 0.95 for
/// copies with word-shingle Jaccard 0.9 or more, with no unrelated pair among 25 million
/// within it.
pub const DEFAULT_DISTANCE: u32 = 6;

/// The 256-bit distance two [`Wide`] fingerprints of the default configuration are
/// near-duplicates within: on the peers' planted-copy corpus, edited copies reach 42 bits
/// and the closest unrelated documents start at 55 (docs/dedup.md).
pub const DEFAULT_WIDE_DISTANCE: u32 = 48;

/// The per-lane distance [`Wide`] candidates are found at: every pair within
/// `4 · 9 − 1 = 35` bits is a candidate by pigeonhole, and nearly every edited copy beyond.
pub const DEFAULT_LANE_DISTANCE: u32 = 8;

/// The 64-bit lanes of a [`Wide`] fingerprint.
pub const LANES: usize = 4;

/// A 256-bit fingerprint: [`LANES`] simhashes of the same weighted features, each under its
/// own feature hash. Lane 0 is [`Fingerprinter::fingerprint`]; lane `j > 0` votes with
/// xxh3-64 of each feature hash (8 bytes, little-endian) seeded with `SEED + j`. Its
/// Hamming distance estimates the angle between two documents' feature vectors four
/// times as precisely as one lane, and each lane alone is a classic 64-bit simhash to
/// find candidates with (`batch::find_all_wide`).
pub type Wide = [u64; LANES];

/// The longest shingle window.
pub const MAX_WINDOW: usize = 16;

/// Text normalisation before tokenizing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Normalize {
    /// Unicode NFKC: compatibility forms fold together (`ﬁ` → `fi`, full-width → ASCII).
    pub nfkc: bool,
    /// Unicode lowercase.
    pub lowercase: bool,
    /// Runs of white space become one space, and the ends are trimmed. Only character
    /// n-grams see white space, so only they are affected.
    pub fold_whitespace: bool,
    /// Typographic apostrophes and quotes (`’ ‘ ‛ ′ ʼ`, `“ ” „ ‟ ″`) become ASCII `'` and `"`:
    /// re-typeset copies (`don’t` for `don't`) keep their words.
    pub ascii_quotes: bool,
}

impl Default for Normalize {
    fn default() -> Normalize {
        Normalize {
            nfkc: true,
            lowercase: true,
            fold_whitespace: true,
            ascii_quotes: true,
        }
    }
}

impl Normalize {
    /// No normalisation at all.
    pub const NONE: Normalize = Normalize {
        nfkc: false,
        lowercase: false,
        fold_whitespace: false,
        ascii_quotes: false,
    };
}

/// How much each feature's vote counts.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub enum Weighting {
    /// Every occurrence of a feature votes once, as in simhash-py's `compute`.
    #[default]
    None,
    /// Each distinct feature votes `1 + ln(count)`: repetition counts, sub-linearly.
    Tf,
    /// Each distinct feature votes `(1 + ln(count)) · idf(feature)`, from a table built on
    /// a corpus with the same configuration ([`IdfBuilder`]); features the table has not
    /// seen get its largest idf.
    TfIdf(Arc<Idf>),
    /// Each distinct feature votes `(1 + ln(count)) · w`, where `w` is the mean of its
    /// tokens' weights in a map given by the caller (tokens not in it weigh 1; keys are
    /// normalised as texts are).
    Custom(Arc<HashMap<String, f32>>),
    /// The scheme of the seed paper on large-scale Chinese deduplication:
    /// `Score = tf + λ·(Len + Pos)`, where `Len` is 1 for a word of four characters or
    /// more, `Pos` is 1 for a word jieba tags as a noun (always 0 for other tokenizers),
    /// and a feature of several words takes their means; votes are `Score / max Score`.
    LenPos {
        /// λ, the weight of length and part of speech against term frequency.
        lambda: f32,
    },
}

/// Everything that decides a fingerprint.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Normalisation.
    pub normalize: Normalize,
    /// How tokens are cut.
    pub tokenizer: Tokenizer,
    /// Tokens per shingle (feature). A text with fewer tokens than this has one feature,
    /// all its tokens.
    pub window: usize,
    /// Vote weights.
    pub weighting: Weighting,
    /// Paragraphs shorter than this many bytes merge into the next ([`Fingerprinter::paragraphs`]).
    pub min_paragraph: usize,
}

/// The defaults were chosen by the quality evaluation (docs/fingerprints.md): of every
/// tokenizer, window and weighting tried, Unicode words in shingles of two with sub-linear
/// term frequency kept the most near-duplicates within [`DEFAULT_DISTANCE`] while keeping
/// unrelated texts apart.
impl Default for Config {
    fn default() -> Config {
        Config {
            normalize: Normalize::default(),
            tokenizer: Tokenizer::UnicodeWords,
            window: 2,
            weighting: Weighting::Tf,
            min_paragraph: 200,
        }
    }
}

/// Builds a [`Fingerprinter`].
#[derive(Clone, Debug, Default)]
pub struct FingerprinterBuilder {
    config: Config,
}

impl FingerprinterBuilder {
    /// Normalisation (default: NFKC, lowercase, folded white space).
    pub fn normalize(mut self, normalize: Normalize) -> Self {
        self.config.normalize = normalize;
        self
    }

    /// Tokenizer (default: Unicode words).
    pub fn tokenizer(mut self, tokenizer: Tokenizer) -> Self {
        self.config.tokenizer = tokenizer;
        self
    }

    /// Tokens per shingle, 1 to [`MAX_WINDOW`] (default 2).
    pub fn window(mut self, window: usize) -> Self {
        self.config.window = window;
        self
    }

    /// Vote weights (default: term frequency).
    pub fn weighting(mut self, weighting: Weighting) -> Self {
        self.config.weighting = weighting;
        self
    }

    /// Minimum paragraph length in bytes (default 200).
    pub fn min_paragraph(mut self, bytes: usize) -> Self {
        self.config.min_paragraph = bytes;
        self
    }

    /// The fingerprinter; errors on a window of 0 or above [`MAX_WINDOW`], character
    /// n-grams of 0, or a negative or non-finite weight.
    pub fn build(self) -> Result<Fingerprinter> {
        Fingerprinter::new(self.config)
    }
}

/// Turns texts into fingerprints. Cheap to clone and share across threads.
#[derive(Clone, Debug, Default)]
pub struct Fingerprinter {
    config: Config,
    /// Custom weights by token hash.
    token_weights: Option<Arc<HashMap<u64, f32>>>,
}

/// The shingle hashes of `tokens` into `out`: one per run of `window` consecutive tokens
/// (`window` > 1), or one of all of them when there are fewer; none for no tokens.
fn shingle_into(tokens: &[u64], window: usize, out: &mut Vec<u64>) {
    out.clear();
    if tokens.is_empty() {
        return;
    }
    if window == 2 && tokens.len() >= 2 {
        // The default window: a branch-free hash of two words, each shingle independent of
        // the last, eight at a time where the CPU has AVX-512.
        word_hash::pair_hashes(tokens, out);
        return;
    }
    let mut bytes = [0u8; 8 * MAX_WINDOW];
    let span = window.min(tokens.len());
    out.extend(tokens.windows(span).map(|run| {
        for (j, t) in run.iter().enumerate() {
            bytes[8 * j..8 * j + 8].copy_from_slice(&t.to_le_bytes());
        }
        feature_hash(&bytes[..8 * span])
    }));
}

/// One thread's buffers for fingerprinting, kept from text to text so that a text costs
/// no allocation once they have grown to its size.
#[derive(Debug, Default)]
struct Scratch {
    norm: Normalized,
    /// Word bounds in `norm.text`.
    bounds: Vec<(usize, usize)>,
    tokens: Vec<u64>,
    shingles: Vec<u64>,
    tf: weight::TfScratch,
    lane: Vec<u64>,
}

impl Scratch {
    /// The features filled in by [`Fingerprinter::fill`] (the tokens themselves for a
    /// window of 1, else the shingles), with the buffers voting needs.
    fn split(&mut self, window: usize) -> (&[u64], &mut weight::TfScratch, &mut Vec<u64>) {
        let features = if window == 1 {
            &self.tokens
        } else {
            &self.shingles
        };
        (features, &mut self.tf, &mut self.lane)
    }
}

/// Runs `f` with this thread's [`Scratch`].
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    thread_local! {
        static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
    }
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut s) => f(&mut s),
        // Only a fingerprint taken while one is under way on this thread (none is).
        Err(_) => f(&mut Scratch::default()),
    })
}

/// Features of one text: hashes, and per-feature weights where the weighting needs them.
struct Features {
    hashes: Vec<u64>,
    /// Per feature: (mean token weight, mean Len, mean Pos) for the weightings that use them.
    token_terms: Vec<[f32; 3]>,
}

impl Fingerprinter {
    /// A builder, starting from the default configuration.
    pub fn builder() -> FingerprinterBuilder {
        FingerprinterBuilder::default()
    }

    /// A fingerprinter for `config`.
    pub fn new(config: Config) -> Result<Fingerprinter> {
        if config.window == 0 {
            return Err(Error::InvalidWindow);
        }
        if config.window > MAX_WINDOW {
            return Err(Error::WindowTooLarge {
                window: config.window,
                max: MAX_WINDOW,
            });
        }
        if config.tokenizer == Tokenizer::CharNgrams(0) {
            return Err(Error::InvalidNgram);
        }
        let mut token_weights = None;
        match &config.weighting {
            Weighting::Custom(map) => {
                let mut by_hash = HashMap::with_capacity(map.len());
                for (token, &w) in map.iter() {
                    if !(w.is_finite() && w >= 0.0) {
                        return Err(Error::InvalidWeight {
                            token: token.clone(),
                            weight: w,
                        });
                    }
                    let (key, _) = normal::plain(token, config.normalize, false);
                    by_hash.insert(token_hash(&key), w);
                }
                token_weights = Some(Arc::new(by_hash));
            }
            Weighting::LenPos { lambda } if !(lambda.is_finite() && *lambda >= 0.0) => {
                return Err(Error::InvalidWeight {
                    token: "lambda".into(),
                    weight: *lambda,
                });
            }
            _ => {}
        }
        Ok(Fingerprinter {
            config,
            token_weights,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether the features alone decide the votes (no weights per token or from a
    /// table): then fingerprints take the buffers of [`Scratch`] and no allocation.
    fn plain_votes(&self) -> bool {
        matches!(self.config.weighting, Weighting::None | Weighting::Tf)
    }

    /// The fingerprint of `text`; 0 when it has no tokens.
    pub fn fingerprint(&self, text: &str) -> u64 {
        if !self.plain_votes() {
            return self.vote(self.features(text));
        }
        with_scratch(|s| {
            self.fill(text, s);
            let (f, tf, _) = s.split(self.config.window);
            match self.config.weighting {
                Weighting::None => simhash(f),
                _ => weight::tf_vote(f, tf),
            }
        })
    }

    /// The 256-bit fingerprint of `text` (see [`Wide`]); all zero when it has no tokens.
    pub fn fingerprint_wide(&self, text: &str) -> Wide {
        let mut lanes = [0; LANES];
        if !self.plain_votes() {
            let votes = self.votes(self.features(text));
            let mut scratch = Vec::new();
            for (lane, out) in lanes.iter_mut().enumerate() {
                *out = votes.tally(lane, &mut scratch);
            }
            return lanes;
        }
        with_scratch(|s| {
            self.fill(text, s);
            let (f, tf, rehashed) = s.split(self.config.window);
            // Which features repeat is the same in every lane: count them once.
            let plan = match self.config.weighting {
                Weighting::None => None,
                _ => Some(weight::TfPlan::new(f, tf)),
            };
            for (lane, out) in lanes.iter_mut().enumerate() {
                let hashes = if lane == 0 {
                    f
                } else {
                    word_hash::lane_hashes(f, lane, rehashed);
                    &rehashed[..]
                };
                *out = match &plan {
                    None => simhash(hashes),
                    Some(plan) if lane == 0 => plan.vote_with(hashes, |h| h, tf),
                    Some(plan) => plan.vote_with(hashes, |h| lane_hash(h, lane), tf),
                };
            }
            lanes
        })
    }

    /// The fingerprint of a byte string: invalid UTF-8 sequences read as U+FFFD, which
    /// separates tokens like any other symbol.
    pub fn fingerprint_bytes(&self, bytes: &[u8]) -> u64 {
        self.fingerprint(&String::from_utf8_lossy(bytes))
    }

    /// Fingerprints of many texts, in order, in parallel (with the `rayon` feature).
    pub fn fingerprint_many<T: AsRef<str> + Sync>(&self, texts: &[T]) -> Vec<u64> {
        const CHUNK: usize = 64;
        let chunks: Vec<&[T]> = texts.chunks(CHUNK).collect();
        crate::par::map(chunks, |chunk| {
            chunk
                .iter()
                .map(|t| self.fingerprint(t.as_ref()))
                .collect::<Vec<u64>>()
        })
        .concat()
    }

    /// The distinct feature hashes of `text` (what an [`Idf`] table counts).
    pub fn feature_set(&self, text: &str) -> Vec<u64> {
        let mut hashes = self.features(text).hashes;
        hashes.sort_unstable();
        hashes.dedup();
        hashes
    }

    /// The text's paragraphs, each with its byte span in `text` and its fingerprint.
    /// Paragraphs are separated by blank lines and by HTML block tags (`<p>`, `<br>`,
    /// `<div>`, `<li>`, headings…); one shorter than [`Config::min_paragraph`] bytes merges
    /// into the next (the last into the one before).
    pub fn paragraphs(&self, text: &str) -> Vec<Paragraph> {
        self.paragraph_spans(text)
            .into_iter()
            .map(|span| Paragraph {
                fingerprint: self.fingerprint(&text[span.clone()]),
                start: span.start,
                end: span.end,
            })
            .collect()
    }

    /// The byte spans of the text's paragraphs, as [`Fingerprinter::paragraphs`] splits it.
    pub fn paragraph_spans(&self, text: &str) -> Vec<std::ops::Range<usize>> {
        paragraph_spans(text, self.config.min_paragraph)
    }

    fn needs_token_terms(&self) -> bool {
        matches!(
            self.config.weighting,
            Weighting::Custom(_) | Weighting::LenPos { .. }
        )
    }

    /// Fills `s.tokens` with the token hashes of `text`, and `s.shingles` with its
    /// shingle hashes when the window is over 1 (for configurations without token terms).
    fn fill(&self, text: &str, s: &mut Scratch) {
        let cfg = &self.config;
        normal::normalize_into(text, cfg.normalize, &mut s.norm);
        s.tokens.clear();
        let tokens = &mut s.tokens;
        if cfg.tokenizer == Tokenizer::UnicodeWords {
            // The common case: words hashed where they lie in the normalised text. The
            // bounds are listed first, so the scanner's branches and the hashes' multiplies
            // each run in a tight loop of their own.
            let bounds = &mut s.bounds;
            bounds.clear();
            scan::words(&s.norm, |start, end| bounds.push((start, end)));
            word_hash::word_hashes(&s.norm.text, bounds, tokens);
        } else {
            let mut text = s.norm.as_str();
            if cfg.normalize.fold_whitespace && matches!(cfg.tokenizer, Tokenizer::CharNgrams(_)) {
                text = normal::fold_whitespace(text);
            }
            cfg.tokenizer.tokens(&text, |w| tokens.push(token_hash(w)));
        }
        if cfg.window > 1 {
            shingle_into(&s.tokens, cfg.window, &mut s.shingles);
        }
    }

    /// The features of `text` (a list of its own), with their token terms when the
    /// weighting needs them.
    fn features(&self, text: &str) -> Features {
        with_scratch(|s| {
            if !self.needs_token_terms() {
                self.fill(text, s);
                return Features {
                    hashes: s.split(self.config.window).0.to_vec(),
                    token_terms: Vec::new(),
                };
            }
            self.features_with_terms(text, &mut s.norm)
        })
    }

    fn features_with_terms(&self, text: &str, norm: &mut Normalized) -> Features {
        let cfg = &self.config;
        normal::normalize_into(text, cfg.normalize, norm);
        let words = cfg.tokenizer == Tokenizer::UnicodeWords;
        let mut text = norm.as_str();
        if cfg.normalize.fold_whitespace && matches!(cfg.tokenizer, Tokenizer::CharNgrams(_)) {
            text = normal::fold_whitespace(text);
        }
        let each_token = |token: &mut dyn FnMut(&str)| {
            if words {
                scan::words(norm, |s, e| token(&text[s..e]));
            } else {
                cfg.tokenizer.tokens(&text, &mut *token);
            }
        };
        // Custom and Len+Pos weights: token terms travel with the token hashes.
        let mut tokens: Vec<u64> = Vec::with_capacity(text.len() / 5 + 1);
        let mut token_terms: Vec<[f32; 3]> = Vec::new();
        {
            let mut push = |token: &str, noun: bool| {
                let h = token_hash(token);
                tokens.push(h);
                let weight = self
                    .token_weights
                    .as_ref()
                    .and_then(|m| m.get(&h).copied())
                    .unwrap_or(1.0);
                let long = token.chars().nth(3).is_some();
                token_terms.push([weight, f32::from(u8::from(long)), f32::from(u8::from(noun))]);
            };
            match cfg.tokenizer {
                #[cfg(feature = "cjk")]
                Tokenizer::Jieba => cjk::words(&text, &mut push),
                _ => each_token(&mut |w| push(w, false)),
            }
        }
        let w = cfg.window;
        if w == 1 || tokens.is_empty() {
            return Features {
                hashes: tokens,
                token_terms,
            };
        }
        let mut hashes = Vec::with_capacity(tokens.len());
        shingle_into(&tokens, w, &mut hashes);
        // Each shingle's terms: the means over its tokens.
        let span = w.min(tokens.len());
        let terms_out = (0..hashes.len())
            .map(|i| {
                let mut mean = [0f32; 3];
                for t in &token_terms[i..i + span] {
                    for k in 0..3 {
                        mean[k] += t[k] / span as f32;
                    }
                }
                mean
            })
            .collect();
        Features {
            hashes,
            token_terms: terms_out,
        }
    }

    fn vote(&self, f: Features) -> u64 {
        self.votes(f).tally(0, &mut Vec::new())
    }

    /// The features with their weights, ready to vote in any lane.
    fn votes(&self, f: Features) -> Votes {
        /// `1 + ln(count)`; exact 1 for the usual count of 1, without a logarithm.
        fn tf(count: usize) -> f32 {
            if count == 1 {
                1.0
            } else {
                1.0 + (count as f32).ln()
            }
        }
        let weighting = &self.config.weighting;
        Votes::Weighted(match weighting {
            Weighting::None => return Votes::Plain(f.hashes),
            Weighting::Tf => return Votes::Tf(f.hashes),
            Weighting::TfIdf(idf) => {
                let mut hashes = f.hashes;
                hashes.sort_unstable();
                hashes
                    .chunk_by(|a, b| a == b)
                    .map(|run| (run[0], tf(run.len()) * idf.idf(run[0])))
                    .collect()
            }
            Weighting::Custom(_) | Weighting::LenPos { .. } => {
                // Per-feature terms travel with the hashes: sort indices.
                let mut order: Vec<u32> = (0..f.hashes.len() as u32).collect();
                order.sort_unstable_by_key(|&i| f.hashes[i as usize]);
                order
                    .chunk_by(|&a, &b| f.hashes[a as usize] == f.hashes[b as usize])
                    .map(|run| {
                        let first = run[0] as usize;
                        let [tw, len, pos] = f.token_terms[first];
                        let w = match weighting {
                            Weighting::LenPos { lambda } => run.len() as f32 + lambda * (len + pos),
                            _ => tf(run.len()) * tw,
                        };
                        (f.hashes[first], w)
                    })
                    .collect()
            }
        })
    }
}

/// A text's features with what their votes weigh: weights depend on the feature, never on
/// the lane's hash, so every lane of a [`Wide`] fingerprint counts the same votes.
enum Votes {
    /// Each occurrence votes once.
    Plain(Vec<u64>),
    /// Each distinct feature votes `1 + ln(count)`.
    Tf(Vec<u64>),
    /// Distinct features with their weights.
    Weighted(Vec<(u64, f32)>),
}

impl Votes {
    /// The simhash of lane `lane`; `scratch` holds the lane's hashes between calls.
    fn tally(&self, lane: usize, scratch: &mut Vec<u64>) -> u64 {
        match self {
            Votes::Plain(h) if lane == 0 => simhash(h),
            Votes::Tf(h) if lane == 0 => weight::tf_vote(h, &mut weight::TfScratch::default()),
            Votes::Weighted(v) if lane == 0 => weight::vote(v),
            Votes::Plain(h) => {
                word_hash::lane_hashes(h, lane, scratch);
                simhash(scratch)
            }
            Votes::Tf(h) => {
                word_hash::lane_hashes(h, lane, scratch);
                weight::tf_vote(scratch, &mut weight::TfScratch::default())
            }
            Votes::Weighted(v) => {
                let votes: Vec<(u64, f32)> =
                    v.iter().map(|&(h, w)| (lane_hash(h, lane), w)).collect();
                weight::vote(&votes)
            }
        }
    }
}

/// About what fingerprinting `text` costs, in bytes of plain text that cost as much: its
/// length, and more for characters NFKC rewrites (8 KB of U+FDFA costs as much as 720 KB
/// of ASCII). For a service to tell the texts it may sign on the thread that read them.
pub fn signing_cost(text: &str) -> usize {
    normal::cost(text)
}

/// The byte spans of `text`'s paragraphs, as [`Fingerprinter::paragraphs`] cuts them with
/// a minimum of `min` bytes (for fingerprinting paragraphs another way).
pub fn paragraph_spans(text: &str, min: usize) -> Vec<std::ops::Range<usize>> {
    paragraph::spans(text, min)
}

/// The xxh3 hash of a token's UTF-8, seeded with [`SEED`]: a window-1 feature.
#[inline]
pub fn token_hash(token: &str) -> u64 {
    feature_hash(token.as_bytes())
}

/// The feature hash of the format: xxh3-64 with seed [`SEED`], of a token's UTF-8 or of a
/// shingle's token hashes (little-endian, in order).
#[inline]
fn feature_hash(bytes: &[u8]) -> u64 {
    xxh3_64_with_seed(bytes, SEED)
}
