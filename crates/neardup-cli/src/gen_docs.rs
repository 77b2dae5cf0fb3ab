//! `neardup bench gen-docs`: the flags of `neardup_eval::corpus`, a document corpus of any
//! size from a seed with planted near-duplicates and their exact Jaccard similarity.

use std::time::Instant;

use anyhow::anyhow;
use neardup_eval::corpus::{self, Settings};
use serde_json::json;

use crate::failure::Failure;

/// Settings of `neardup bench gen-docs`.
#[derive(clap::Args, Clone, Debug)]
pub struct GenDocs {
    /// Documents in all.
    #[arg(short, long)]
    pub n: u64,
    /// Write documents from this one on (the same seed makes the same documents, so a
    /// run can take the queries after a loaded corpus without writing the corpus again).
    #[arg(long, default_value_t = 0)]
    pub first: u64,
    /// Bytes of text a document has, about.
    #[arg(long, default_value_t = 1000)]
    pub doc_bytes: usize,
    /// The share of documents that are near-duplicates of an earlier one.
    #[arg(long, default_value_t = 0.1)]
    pub planted: f64,
    /// A planted copy has up to this share of its words replaced.
    #[arg(long, default_value_t = 0.04)]
    pub max_edit: f64,
    /// The seed: the same seed writes the same corpus.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Where to write: a directory of shards `docs-NNNNN.jsonl.zst` (with --shards), one
    /// file (`.zst` compressed), or `-`: standard output, in order, as it is made (so that
    /// `neardup load` can read it from a pipe and no corpus lands on disk).
    #[arg(short, long)]
    pub output: String,
    /// Shards, written in parallel (0: one file, --output).
    #[arg(long, default_value_t = 0)]
    pub shards: u32,
    /// Where to write the planted pairs: {"a", "b", "jaccard"} per line, a the original.
    #[arg(long)]
    pub truth: Option<String>,
    /// zstd level of the shards.
    #[arg(long, default_value_t = 1)]
    pub level: i32,
}

/// Runs `neardup bench gen-docs`; says what was written on standard error.
pub fn gen_docs(args: &GenDocs) -> Result<(), Failure> {
    if !(0.0..=0.5).contains(&args.planted) || !(0.0..=1.0).contains(&args.max_edit) {
        return Err(Failure::input(anyhow!(
            "--planted must be in [0, 0.5] and --max-edit in [0, 1]"
        )));
    }
    if args.output == "-" && args.shards != 0 {
        return Err(Failure::input(anyhow!(
            "--output - (standard output) writes one stream: leave out --shards"
        )));
    }
    let started = Instant::now();
    let settings = Settings {
        n: args.n,
        first: args.first,
        doc_bytes: args.doc_bytes,
        planted: args.planted,
        max_edit: args.max_edit,
        seed: args.seed,
        level: args.level,
    };
    let truth = args.truth.as_deref();
    let written = if args.output == "-" {
        corpus::write_stdout(&settings, truth)?
    } else {
        corpus::write_files(&settings, &args.output, args.shards, truth)?
    };
    let seconds = started.elapsed().as_secs_f64();
    // From --first on: a tail of a large corpus is as many documents as it writes.
    let documents = args.n - args.first.min(args.n);
    crate::note!(
        "{}",
        json!({
            "documents": documents,
            "planted": written.planted,
            "text_bytes": written.bytes,
            "seconds": (seconds * 1000.0).round() / 1000.0,
            "documents_per_s": (documents as f64 / seconds).round(),
        })
    );
    Ok(())
}
