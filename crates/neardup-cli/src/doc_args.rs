//! Where documents come from, as command-line flags: they give the options of the reader
//! (`neardup_io::docs`), which reads them.

use neardup::jaccard::Threshold;
use neardup_io::docs::{Format, ReadOptions};

/// How an input's bytes are cut into documents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// One JSON object per line; the text and id come from `--text-field` and `--id-field`.
    Jsonl,
    /// The whole input is one document, its id the path.
    Text,
    /// Every line is a document, its id `path:line`.
    Lines,
    /// Parquet: a row per document, text and id from the columns `--text-field` and
    /// `--id-field` name (also spelled `--text-column`, `--id-column`).
    Parquet,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Jsonl => Format::Jsonl,
            FormatArg::Text => Format::Text,
            FormatArg::Lines => Format::Lines,
            FormatArg::Parquet => Format::Parquet,
        }
    }
}

/// Where documents come from and how to read them.
#[derive(clap::Args, Clone, Debug)]
pub struct DocArgs {
    /// Files or directories to read ('-' for standard input, the default). Directories
    /// are read recursively, files in name order.
    #[arg(value_name = "INPUT")]
    pub inputs: Vec<String>,
    /// More inputs, as with the positional INPUT.
    #[arg(short, long = "input", value_name = "INPUT")]
    pub input_flags: Vec<String>,
    /// Input format. Default: from the file name (.jsonl or .ndjson: JSON Lines, .parquet:
    /// Parquet, anything else: text; .gz and .zst are decompressed first); standard input
    /// is JSON Lines when it starts with '{', text otherwise.
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Text inputs hold one document per line (same as --format lines for them).
    #[arg(long)]
    pub lines: bool,
    /// JSON Lines and Parquet: the field (column) holding the text.
    #[arg(long, alias = "text-column", default_value = "text")]
    pub text_field: String,
    /// JSON Lines and Parquet: the field (column) holding the id (any value); records
    /// without it get `path:line` (`path:row` for Parquet, from 1).
    #[arg(long, alias = "id-column", default_value = "id")]
    pub id_field: String,
    /// Skip JSON lines that do not parse or lack the text field, and count them, instead
    /// of stopping at the first.
    #[arg(long)]
    pub skip_invalid: bool,
}

impl DocArgs {
    /// The inputs named, positional ones first (none: standard input).
    pub fn named(&self) -> impl Iterator<Item = &String> + Clone {
        self.inputs.iter().chain(&self.input_flags)
    }

    /// The reader's options these flags give.
    pub fn options(&self) -> ReadOptions {
        ReadOptions {
            inputs: self.named().cloned().collect(),
            format: self.format.map(Format::from),
            lines: self.lines,
            text_field: self.text_field.clone(),
            id_field: self.id_field.clone(),
            skip_invalid: self.skip_invalid,
            ..ReadOptions::default()
        }
    }
}

/// Parses a `--threshold` value.
pub(crate) fn parse_threshold(s: &str) -> Result<Threshold, String> {
    s.parse().map_err(|e: neardup::Error| e.to_string())
}
