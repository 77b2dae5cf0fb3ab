//! `neardup fingerprint`: documents in, one JSON line of fingerprints per document out, in
//! input order. `neardup idf`: the idf table of a corpus, for `--weighting tfidf`.

use anyhow::anyhow;
use neardup::fingerprint::{paragraph_spans, IdfBuilder};
use neardup_io::docs::{self, Doc, ReadStats};
use rayon::prelude::*;
use serde_json::Value;

use crate::doc_args::DocArgs;
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

/// Appends a fingerprint as JSON: a decimal string, or a number with `--numbers`.
fn push_fp(out: &mut Vec<u8>, fp: u64, numbers: bool) {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(fp).as_bytes();
    if numbers {
        out.extend_from_slice(digits);
    } else {
        out.push(b'"');
        out.extend_from_slice(digits);
        out.push(b'"');
    }
}

/// Appends the JSON line of one document (without its newline): the bytes
/// `serde_json` writes for `{"id", "fingerprint", "paragraphs"}`, written directly rather
/// than through a `Value` per document.
fn render(
    doc: &Doc,
    pipeline: &Pipeline,
    cmd: &FingerprintCmd,
    min_paragraph: usize,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(b"{\"id\":");
    match &doc.id {
        // The usual ids, as serde_json writes them: a string without characters to
        // escape, as is; an integer, as its digits.
        Value::String(s) if !s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) => {
            out.push(b'"');
            out.extend_from_slice(s.as_bytes());
            out.push(b'"');
        }
        id => {
            // Writing a `Value` to a `Vec` cannot fail.
            let _ = serde_json::to_writer(&mut *out, id);
        }
    }
    out.extend_from_slice(b",\"fingerprint\":");
    push_fp(out, pipeline.fingerprint(&doc.text), cmd.numbers);
    if cmd.paragraphs {
        out.extend_from_slice(b",\"paragraphs\":[");
        for (i, span) in paragraph_spans(&doc.text, min_paragraph)
            .into_iter()
            .enumerate()
        {
            if i > 0 {
                out.push(b',');
            }
            let mut num = itoa::Buffer::new();
            out.extend_from_slice(b"{\"start\":");
            out.extend_from_slice(num.format(span.start).as_bytes());
            out.extend_from_slice(b",\"end\":");
            out.extend_from_slice(num.format(span.end).as_bytes());
            out.extend_from_slice(b",\"fingerprint\":");
            push_fp(out, pipeline.fingerprint(&doc.text[span]), cmd.numbers);
            out.push(b'}');
        }
        out.push(b']');
    }
    out.push(b'}');
}

/// Warnings about what reading found, on standard error.
fn warn(stats: &ReadStats, empty: u64) {
    if stats.invalid_utf8 > 0 {
        crate::note!(
            "neardup: warning: {} documents held invalid UTF-8, read as U+FFFD",
            stats.invalid_utf8
        );
    }
    if stats.skipped > 0 {
        crate::note!(
            "neardup: warning: skipped {} invalid JSON lines (--skip-invalid)",
            stats.skipped
        );
    }
    if empty > 0 {
        crate::note!("neardup: warning: {empty} empty documents (fingerprint 0)");
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
    // Each chunk of a batch renders into one buffer: (bytes, line ends); and the batch's
    // count of empty documents.
    let render_batch = |batch: &[Doc]| {
        let empty = batch.iter().filter(|d| d.text.trim().is_empty()).count() as u64;
        let chunks: Vec<(Vec<u8>, Vec<usize>)> = batch
            .par_chunks(4)
            .map(|docs| {
                let mut bytes = Vec::with_capacity(64 * docs.len());
                let mut ends = Vec::with_capacity(docs.len());
                for doc in docs {
                    render(doc, &pipeline, cmd, min_paragraph, &mut bytes);
                    ends.push(bytes.len());
                }
                (bytes, ends)
            })
            .collect();
        (chunks, empty)
    };
    let stats = docs::read_mapped::<_, Failure>(
        &cmd.docs.options(),
        &progress,
        "reading",
        render_batch,
        |(chunks, batch_empty)| {
            empty += batch_empty;
            for (bytes, ends) in chunks {
                let mut start = 0;
                for end in ends {
                    out.line(&bytes[start..end])?;
                    start = end;
                }
            }
            Ok(())
        },
    )?;
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
    let stats = docs::read::<Failure>(&cmd.docs.options(), &progress, |batch| {
        let texts: Vec<&str> = batch.iter().map(|d| d.text.as_str()).collect();
        builder.add_texts(&fp, &texts);
        Ok(())
    })?;
    progress.finish();
    let table = builder.build(cmd.min_df);
    std::fs::write(&cmd.output, table.to_bytes())
        .map_err(|e| Failure::io(anyhow!("cannot write {}: {e}", cmd.output)))?;
    warn(&stats, 0);
    crate::note!(
        "neardup: idf of {} features over {} documents written to {}",
        table.len(),
        table.docs(),
        cmd.output
    );
    Ok(())
}
