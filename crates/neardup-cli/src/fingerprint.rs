//! `neardup fingerprint`: documents in, one JSON line of fingerprints per document out, in
//! input order. `neardup idf`: the idf table of a corpus, for `--weighting tfidf`.

use anyhow::anyhow;
use neardup::fingerprint::{paragraph_spans, IdfBuilder};
use rayon::prelude::*;
use serde_json::{json, Map, Value};

use crate::docs::{self, Doc, DocArgs, ReadStats};
use crate::failure::Failure;
use crate::fpconfig::{FingerprintArgs, Pipeline};
use crate::output::{reads_of, refuse_overwrite, Output};
use crate::progress::Progress;

/// Settings of `neardup fingerprint`.
#[derive(clap::Args, Clone, Debug)]
pub struct FingerprintCmd {
    #[command(flatten)]
    docs: DocArgs,
    #[command(flatten)]
    fingerprint: FingerprintArgs,
    /// Where to write the JSON lines ('-' for standard output).
    #[arg(short, long, default_value = "-")]
    output: String,
    /// Also fingerprint every paragraph: "paragraphs": [{"start", "end", "fingerprint"}],
    /// byte offsets into the text.
    #[arg(long)]
    paragraphs: bool,
    /// Write fingerprints as JSON numbers instead of decimal strings (JavaScript reads
    /// numbers above 2^53 inexactly).
    #[arg(long)]
    numbers: bool,
}

fn fp_value(fp: u64, numbers: bool) -> Value {
    if numbers {
        Value::from(fp)
    } else {
        Value::String(fp.to_string())
    }
}

/// The JSON line of one document.
fn render(doc: &Doc, pipeline: &Pipeline, cmd: &FingerprintCmd, min_paragraph: usize) -> String {
    let mut line = Map::new();
    line.insert("id".into(), doc.id.clone());
    line.insert(
        "fingerprint".into(),
        fp_value(pipeline.fingerprint(&doc.text), cmd.numbers),
    );
    if cmd.paragraphs {
        let paragraphs: Vec<Value> = paragraph_spans(&doc.text, min_paragraph)
            .into_iter()
            .map(|span| {
                let fp = pipeline.fingerprint(&doc.text[span.clone()]);
                json!({"start": span.start, "end": span.end, "fingerprint": fp_value(fp, cmd.numbers)})
            })
            .collect();
        line.insert("paragraphs".into(), Value::Array(paragraphs));
    }
    Value::Object(line).to_string()
}

/// Warnings about what reading found, on standard error.
fn warn(stats: &ReadStats, empty: u64) {
    if stats.invalid_utf8 > 0 {
        eprintln!(
            "neardup: warning: {} documents held invalid UTF-8, read as U+FFFD",
            stats.invalid_utf8
        );
    }
    if stats.skipped > 0 {
        eprintln!(
            "neardup: warning: skipped {} invalid JSON lines (--skip-invalid)",
            stats.skipped
        );
    }
    if empty > 0 {
        eprintln!("neardup: warning: {empty} empty documents (fingerprint 0)");
    }
}

/// Runs `neardup fingerprint`.
pub fn run(cmd: &FingerprintCmd) -> Result<(), Failure> {
    let pipeline = cmd.fingerprint.pipeline()?;
    let min_paragraph = match &pipeline {
        Pipeline::Neardup(fp) => fp.config().min_paragraph,
        Pipeline::Compat(_) => neardup::fingerprint::Config::default().min_paragraph,
    };
    refuse_overwrite(
        &[("output", &cmd.output)],
        &reads_of(&cmd.docs, Some(&cmd.fingerprint)),
    )?;
    let mut out = Output::create(&cmd.output)?;
    let progress = Progress::for_stderr();
    let mut empty = 0u64;
    let stats = docs::read(&cmd.docs, &progress, |batch| {
        empty += batch.iter().filter(|d| d.text.trim().is_empty()).count() as u64;
        let lines: Vec<String> = batch
            .par_iter()
            .map(|doc| render(doc, &pipeline, cmd, min_paragraph))
            .collect();
        for line in lines {
            out.line(line.as_bytes())?;
        }
        Ok(())
    })?;
    progress.finish();
    out.finish()?;
    warn(&stats, empty);
    Ok(())
}

/// Settings of `neardup idf`.
#[derive(clap::Args, Clone, Debug)]
pub struct IdfCmd {
    #[command(flatten)]
    docs: DocArgs,
    #[command(flatten)]
    fingerprint: FingerprintArgs,
    /// Where to write the table (binary).
    #[arg(short, long)]
    output: String,
    /// Keep features seen in at least this many documents.
    #[arg(long, default_value_t = 2)]
    min_df: u32,
}

/// Runs `neardup idf`.
pub fn idf(cmd: &IdfCmd) -> Result<(), Failure> {
    if cmd.fingerprint.compat.is_some() {
        return Err(Failure::input(anyhow!(
            "--compat pipelines have no idf weighting"
        )));
    }
    let fp = cmd.fingerprint.fingerprinter()?;
    // Fail on an unwritable output before reading anything.
    refuse_overwrite(
        &[("output", &cmd.output)],
        &reads_of(&cmd.docs, Some(&cmd.fingerprint)),
    )?;
    std::fs::File::create(&cmd.output)
        .map_err(|e| Failure::input(anyhow!("cannot create output '{}': {e}", cmd.output)))?;
    let progress = Progress::for_stderr();
    let mut builder = IdfBuilder::new();
    let stats = docs::read(&cmd.docs, &progress, |batch| {
        let texts: Vec<&str> = batch.iter().map(|d| d.text.as_str()).collect();
        builder.add_texts(&fp, &texts);
        Ok(())
    })?;
    progress.finish();
    let table = builder.build(cmd.min_df);
    std::fs::write(&cmd.output, table.to_bytes())
        .map_err(|e| Failure::io(anyhow!("cannot write {}: {e}", cmd.output)))?;
    warn(&stats, 0);
    eprintln!(
        "neardup: idf of {} features over {} documents written to {}",
        table.len(),
        table.docs(),
        cmd.output
    );
    Ok(())
}
