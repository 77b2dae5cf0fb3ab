//! The fingerprinter's settings as command-line flags, shared by every command that
//! fingerprints text. A flag left out takes the core's default (`Config::default()`).

use std::str::FromStr;
use std::sync::Arc;

use anyhow::anyhow;
use neardup::fingerprint::{compat, Config, Fingerprinter, Normalize, Tokenizer, Weighting};
use neardup_io::weights::{read_idf, read_weights};

use crate::failure::Failure;

/// A tokenizer named on the command line: `words`, `ascii`, `char:N`, `jieba`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenizerArg(pub Tokenizer);

impl FromStr for TokenizerArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        s.parse()
            .map(TokenizerArg)
            .map_err(|e: neardup::Error| e.to_string())
    }
}

/// How votes are weighted, as named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WeightingArg {
    /// Every occurrence votes once.
    None,
    /// Distinct features vote 1 + ln(count).
    Tf,
    /// 1 + ln(count), times the feature's idf from --idf.
    Tfidf,
    /// 1 + ln(count), times the tokens' weights from --weights.
    Custom,
    /// tf + λ·(Len + Pos), the Chinese dedup paper's scheme (--lambda).
    Lenpos,
}

/// A seomoz pipeline, reproduced bit for bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Compat {
    /// simhash-py's documented pipeline: lowercase, drop non-word characters, character
    /// 4-grams, md5, compute.
    SimhashPy,
    /// simhash-cpp before 2017: ASCII letter tokens, jenkins, cyclic hash, reversed
    /// compute.
    SimhashCppLegacy,
}

/// Flags that configure the fingerprinter.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct FingerprintArgs {
    /// Tokens: words (Unicode word boundaries), ascii (runs of ASCII letters), char:N
    /// (character N-grams) or jieba (Chinese/Japanese words). Default: words.
    #[arg(long, value_name = "TOKENIZER")]
    pub tokenizer: Option<TokenizerArg>,
    /// Tokens per shingle, 1 to 16. Default: 2.
    #[arg(long, value_name = "N")]
    pub window: Option<usize>,
    /// Vote weights. Default: tf.
    #[arg(long, value_enum)]
    pub weighting: Option<WeightingArg>,
    /// The idf table for --weighting tfidf (made by `neardup idf` with the same settings).
    #[arg(long, value_name = "FILE")]
    pub idf: Option<String>,
    /// Token weights for --weighting custom: a JSON object {"token": weight, ...}.
    #[arg(long, value_name = "FILE")]
    pub weights: Option<String>,
    /// λ for --weighting lenpos. Default: 0.5.
    #[arg(long)]
    pub lambda: Option<f32>,
    /// Do not apply Unicode NFKC.
    #[arg(long)]
    pub no_nfkc: bool,
    /// Do not lowercase.
    #[arg(long)]
    pub no_lowercase: bool,
    /// Do not fold runs of white space (character n-grams only).
    #[arg(long)]
    pub no_fold_whitespace: bool,
    /// Keep typographic apostrophes and quotes (by default `’` reads as `'`, `“ ”` as `"`).
    #[arg(long)]
    pub no_ascii_quotes: bool,
    /// Paragraphs shorter than this many bytes merge into the next. Default: 200.
    #[arg(long, value_name = "BYTES")]
    pub min_paragraph: Option<usize>,
    /// Reproduce a seomoz pipeline bit for bit instead (the settings above do not apply).
    #[arg(long, value_enum, conflicts_with_all = ["tokenizer", "window", "weighting", "idf", "weights", "no_nfkc", "no_lowercase", "no_fold_whitespace", "no_ascii_quotes"])]
    pub compat: Option<Compat>,
}

/// Something that fingerprints texts: neardup's pipeline or a seomoz one.
#[derive(Clone, Debug)]
pub enum Pipeline {
    /// neardup's own.
    Neardup(Fingerprinter),
    /// A seomoz reference, bit for bit.
    Compat(Compat),
}

impl Pipeline {
    /// The fingerprint of `text`.
    pub fn fingerprint(&self, text: &str) -> u64 {
        match self {
            Pipeline::Neardup(fp) => fp.fingerprint(text),
            Pipeline::Compat(Compat::SimhashPy) => compat::text_fingerprint(text),
            Pipeline::Compat(Compat::SimhashCppLegacy) => {
                compat::legacy_cpp_fingerprint(text.as_bytes())
            }
        }
    }
}

/// λ of --weighting lenpos when --lambda is left out.
const DEFAULT_LAMBDA: f32 = 0.5;

impl FingerprintArgs {
    /// The configuration these flags give (without loading --idf or --weights).
    fn config(&self) -> Config {
        let d = Config::default();
        Config {
            normalize: Normalize {
                nfkc: !self.no_nfkc && d.normalize.nfkc,
                lowercase: !self.no_lowercase && d.normalize.lowercase,
                fold_whitespace: !self.no_fold_whitespace && d.normalize.fold_whitespace,
                ascii_quotes: !self.no_ascii_quotes && d.normalize.ascii_quotes,
            },
            tokenizer: self.tokenizer.map_or(d.tokenizer, |t| t.0),
            window: self.window.unwrap_or(d.window),
            weighting: d.weighting,
            min_paragraph: self.min_paragraph.unwrap_or(d.min_paragraph),
        }
    }

    /// The fingerprinter (loading --idf or --weights); errors name the flag and file.
    pub fn fingerprinter(&self) -> Result<Fingerprinter, Failure> {
        let mut config = self.config();
        config.weighting = match self.weighting {
            None if self.idf.is_some() || self.weights.is_some() => {
                return Err(Failure::input(anyhow!(
                    "--idf and --weights need --weighting tfidf or custom"
                )))
            }
            None => config.weighting,
            Some(WeightingArg::None) => Weighting::None,
            Some(WeightingArg::Tf) => Weighting::Tf,
            Some(WeightingArg::Lenpos) => Weighting::LenPos {
                lambda: self.lambda.unwrap_or(DEFAULT_LAMBDA),
            },
            Some(WeightingArg::Tfidf) => {
                let path = self
                    .idf
                    .as_deref()
                    .ok_or_else(|| Failure::input(anyhow!("--weighting tfidf needs --idf FILE")))?;
                Weighting::TfIdf(Arc::new(read_idf(path)?))
            }
            Some(WeightingArg::Custom) => {
                let path = self.weights.as_deref().ok_or_else(|| {
                    Failure::input(anyhow!("--weighting custom needs --weights FILE"))
                })?;
                Weighting::Custom(Arc::new(read_weights(path)?))
            }
        };
        Fingerprinter::new(config).map_err(|e| match (&e, &self.weights) {
            (neardup::Error::InvalidWeight { .. }, Some(path)) => {
                Failure::input(anyhow!("'{path}': {e}"))
            }
            _ => Failure::input(anyhow!("{e}")),
        })
    }

    /// The first of these flags given on the command line, by name: a command whose
    /// decision does not use the fingerprints refuses it rather than accept it silently.
    pub fn first_given(&self) -> Option<&'static str> {
        [
            (self.tokenizer.is_some(), "--tokenizer"),
            (self.window.is_some(), "--window"),
            (self.weighting.is_some(), "--weighting"),
            (self.idf.is_some(), "--idf"),
            (self.weights.is_some(), "--weights"),
            (self.lambda.is_some(), "--lambda"),
            (self.no_nfkc, "--no-nfkc"),
            (self.no_lowercase, "--no-lowercase"),
            (self.no_fold_whitespace, "--no-fold-whitespace"),
            (self.no_ascii_quotes, "--no-ascii-quotes"),
            (self.min_paragraph.is_some(), "--min-paragraph"),
            (self.compat.is_some(), "--compat"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }

    /// The pipeline these flags select.
    pub fn pipeline(&self) -> Result<Pipeline, Failure> {
        match self.compat {
            Some(c) => Ok(Pipeline::Compat(c)),
            None => self.fingerprinter().map(Pipeline::Neardup),
        }
    }
}
