//! Reading documents: JSON Lines, text files (one document per file, or one per line),
//! directories (recursively), gzip or zstd around any of them, and standard input.
//!
//! Documents come out in input order, in batches, so a caller can work on a batch in
//! parallel and write results in order while memory stays bounded.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::anyhow;
use serde_json::Value;

use crate::failure::Failure;
use crate::progress::Progress;

/// How an input's bytes are cut into documents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
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
    pub format: Option<Format>,
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
    /// Keep each document's input line in [`Doc::record`] (JSON Lines and lines).
    #[arg(skip)]
    pub keep_records: bool,
    /// Read standard input from this file instead (a copy of it, for a second pass).
    #[arg(skip)]
    pub stdin_file: Option<String>,
}

impl DocArgs {
    /// Reading `paths` with every other setting at its default.
    pub fn paths(paths: Vec<String>) -> DocArgs {
        DocArgs {
            inputs: paths,
            input_flags: vec![],
            format: None,
            lines: false,
            text_field: "text".into(),
            id_field: "id".into(),
            skip_invalid: false,
            keep_records: false,
            stdin_file: None,
        }
    }
}

/// One document.
#[derive(Clone, Debug, PartialEq)]
pub struct Doc {
    /// Its id: the id field of a JSON record, the path of a text file, or `path:line`.
    pub id: Value,
    /// Its text (invalid UTF-8 read as U+FFFD).
    pub text: String,
    /// Its input line as read, when [`DocArgs::keep_records`] asks for it and the input has
    /// lines.
    pub record: Option<String>,
}

/// What reading counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Documents read.
    pub docs: u64,
    /// Bytes of text read (after decompression).
    pub bytes: u64,
    /// Documents that held invalid UTF-8.
    pub invalid_utf8: u64,
    /// Invalid JSON lines skipped (with --skip-invalid).
    pub skipped: u64,
}

/// Documents per batch, and bytes of text: whichever comes first.
const BATCH_DOCS: usize = 4096;
const BATCH_BYTES: usize = 16 << 20;

enum Source {
    Stdin,
    File(String),
}

impl DocArgs {
    fn sources(&self) -> Result<Vec<Source>, Failure> {
        let mut names: Vec<&String> = self.inputs.iter().chain(&self.input_flags).collect();
        let dash = "-".to_string();
        if names.is_empty() {
            names.push(&dash);
        }
        let mut out = Vec::new();
        for name in names {
            if name == "-" {
                out.push(Source::Stdin);
                continue;
            }
            let meta = std::fs::metadata(name)
                .map_err(|e| Failure::input(anyhow!("cannot read input '{name}': {e}")))?;
            if meta.is_dir() {
                for entry in walkdir::WalkDir::new(name).sort_by_file_name() {
                    let entry = entry.map_err(|e| {
                        Failure::input(anyhow!("cannot read directory '{name}': {e}"))
                    })?;
                    if entry.file_type().is_file() {
                        out.push(Source::File(entry.path().to_string_lossy().into_owned()));
                    }
                }
            } else {
                out.push(Source::File(name.clone()));
            }
        }
        Ok(out)
    }
}

/// Counts bytes read from the underlying file, for the progress bar.
struct Counting<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// The format a file name implies, and whether it is compressed (and how).
fn by_name(path: &str) -> (Option<Format>, Compression) {
    let lower = path.to_ascii_lowercase();
    let (stem, compression) = if let Some(s) = lower.strip_suffix(".gz") {
        (s.to_string(), Compression::Gzip)
    } else if let Some(s) = lower.strip_suffix(".zst").or(lower.strip_suffix(".zstd")) {
        (s.to_string(), Compression::Zstd)
    } else {
        (lower, Compression::None)
    };
    let format = if stem.ends_with(".jsonl") || stem.ends_with(".ndjson") {
        Some(Format::Jsonl)
    } else if stem.ends_with(".parquet") && compression == Compression::None {
        Some(Format::Parquet)
    } else {
        None
    };
    (format, compression)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compression {
    None,
    Gzip,
    Zstd,
}

/// Reads every document of `args`' inputs and hands them to `batch` in order, a batch at a
/// time. Progress counts input bytes, in a phase called "reading".
pub fn read(
    args: &DocArgs,
    progress: &Progress,
    batch: impl FnMut(Vec<Doc>) -> Result<(), Failure>,
) -> Result<ReadStats, Failure> {
    read_as(args, progress, "reading", batch)
}

/// [`read`], the progress phase called `phase`.
pub fn read_as(
    args: &DocArgs,
    progress: &Progress,
    phase: &'static str,
    mut batch: impl FnMut(Vec<Doc>) -> Result<(), Failure>,
) -> Result<ReadStats, Failure> {
    let sources = args.sources()?;
    let total: u64 = sources
        .iter()
        .map(|s| match s {
            Source::File(p) => std::fs::metadata(p).map_or(0, |m| m.len()),
            Source::Stdin => args
                .stdin_file
                .as_ref()
                .and_then(|p| std::fs::metadata(p).ok())
                .map_or(0, |m| m.len()),
        })
        .sum();
    // A pipe's length is unknown (a copy of it in a file is not).
    let has_stdin = args.stdin_file.is_none() && sources.iter().any(|s| matches!(s, Source::Stdin));
    progress.phase(phase, (!has_stdin).then_some(total));
    let read_bytes = Arc::new(AtomicU64::new(0));
    let mut stats = ReadStats::default();
    let mut pending: Vec<Doc> = Vec::new();
    let mut pending_bytes = 0usize;
    let mut push = |doc: Doc, stats: &mut ReadStats| -> Result<(), Failure> {
        stats.docs += 1;
        stats.bytes += doc.text.len() as u64;
        pending_bytes += doc.text.len();
        pending.push(doc);
        if pending.len() >= BATCH_DOCS || pending_bytes >= BATCH_BYTES {
            progress.set(read_bytes.load(Ordering::Relaxed));
            pending_bytes = 0;
            batch(std::mem::take(&mut pending))?;
        }
        Ok(())
    };
    for source in &sources {
        // What the name says, once per input.
        let (name, format, compression) = match source {
            Source::File(path) => {
                let (format, compression) = by_name(path);
                (path.clone(), format, compression)
            }
            Source::Stdin => ("<stdin>".to_string(), None, Compression::None),
        };
        // The file behind it (standard input's copy, when there is one).
        let file = match source {
            Source::File(path) => Some(path.as_str()),
            Source::Stdin => args.stdin_file.as_deref(),
        };
        if args.format.or(format) == Some(Format::Parquet) {
            let Some(path) = file else {
                return Err(Failure::input(anyhow!(
                    "Parquet input must be a file, not standard input"
                )));
            };
            // The parquet crate panics on some damaged files (arrow-rs #9992): an error.
            crate::failure::catch_panic(|| parquet_docs(path, &name, args, &mut stats, &mut push))
                .unwrap_or_else(|why| {
                    Err(Failure::input(anyhow!(
                        "{name}: not readable as Parquet: {why}"
                    )))
                })?;
            if let Source::File(p) = source {
                read_bytes.fetch_add(
                    std::fs::metadata(p).map_or(0, |m| m.len()),
                    Ordering::Relaxed,
                );
            }
            continue;
        }
        let raw: Box<dyn Read> = match file {
            Some(path) => Box::new(File::open(path).map_err(|e| match source {
                Source::File(_) => Failure::input(anyhow!("cannot open input '{path}': {e}")),
                Source::Stdin => {
                    Failure::io(anyhow!("cannot reopen the copy of standard input: {e}"))
                }
            })?),
            None => Box::new(io::stdin()),
        };
        let counted = Counting {
            inner: raw,
            read: read_bytes.clone(),
        };
        let decoded: Box<dyn Read> = match compression {
            Compression::None => Box::new(counted),
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(counted)),
            Compression::Zstd => Box::new(
                zstd::stream::read::Decoder::new(counted)
                    .map_err(|e| Failure::input(anyhow!("cannot read '{name}' as zstd: {e}")))?,
            ),
        };
        let mut reader = BufReader::with_capacity(1 << 20, decoded);
        let io_err = |e: io::Error| Failure::io(anyhow!("cannot read {name}: {e}"));
        let format = match args.format.or(format) {
            Some(Format::Text) if args.lines => Format::Lines,
            Some(f) => f,
            None if matches!(source, Source::Stdin) => {
                let head = reader.fill_buf().map_err(io_err)?;
                match head.iter().find(|b| !b.is_ascii_whitespace()) {
                    Some(b'{') => Format::Jsonl,
                    _ if args.lines => Format::Lines,
                    _ => Format::Text,
                }
            }
            None if args.lines => Format::Lines,
            None => Format::Text,
        };
        match format {
            Format::Parquet => {
                return Err(Failure::input(anyhow!(
                    "{name}: Parquet input must be a file"
                )));
            }
            Format::Text => {
                let mut bytes = Vec::new();
                reader.read_to_end(&mut bytes).map_err(io_err)?;
                let (text, bad) = decode(bytes);
                stats.invalid_utf8 += u64::from(bad);
                push(
                    Doc {
                        id: Value::String(name.clone()),
                        text,
                        record: None,
                    },
                    &mut stats,
                )?;
            }
            Format::Lines | Format::Jsonl => {
                let mut line = Vec::new();
                let mut line_no = 0u64;
                loop {
                    line.clear();
                    if reader.read_until(b'\n', &mut line).map_err(io_err)? == 0 {
                        break;
                    }
                    line_no += 1;
                    if line.last() == Some(&b'\n') {
                        line.pop();
                        if line.last() == Some(&b'\r') {
                            line.pop();
                        }
                    }
                    let (text, bad) = decode(std::mem::take(&mut line));
                    stats.invalid_utf8 += u64::from(bad);
                    let doc = if format == Format::Lines {
                        Doc {
                            id: Value::String(format!("{name}:{line_no}")),
                            record: args.keep_records.then(|| text.clone()),
                            text,
                        }
                    } else {
                        if text.trim().is_empty() {
                            continue;
                        }
                        match record(&text, args) {
                            Ok((id, body)) => Doc {
                                id: id
                                    .unwrap_or_else(|| Value::String(format!("{name}:{line_no}"))),
                                text: body,
                                record: args.keep_records.then_some(text),
                            },
                            Err(_) if args.skip_invalid => {
                                stats.skipped += 1;
                                continue;
                            }
                            Err(why) => {
                                return Err(Failure::input(anyhow!("{name}:{line_no}: {why}")));
                            }
                        }
                    };
                    push(doc, &mut stats)?;
                }
            }
        }
    }
    if !pending.is_empty() {
        batch(std::mem::take(&mut pending))?;
    }
    progress.set(read_bytes.load(Ordering::Relaxed));
    Ok(stats)
}

/// The documents of a Parquet file: one per row, through `push`.
#[cfg(feature = "parquet")]
fn parquet_docs(
    path: &str,
    shown: &str,
    args: &DocArgs,
    stats: &mut ReadStats,
    push: &mut impl FnMut(Doc, &mut ReadStats) -> Result<(), Failure>,
) -> Result<(), Failure> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::reader::RowIter;
    use parquet::record::Field;
    use parquet::schema::types::Type;

    let file = File::open(path)
        .map_err(|e| Failure::input(anyhow!("cannot open input '{shown}': {e}")))?;
    crate::parquet_guard::check(path)
        .map_err(|why| Failure::input(anyhow!("{shown}: not readable as Parquet: {why}")))?;
    let bad = |e: parquet::errors::ParquetError| {
        Failure::input(anyhow!("{shown}: not readable as Parquet: {e}"))
    };
    let reader = SerializedFileReader::new(file).map_err(bad)?;
    let schema = reader.metadata().file_metadata().schema();
    let column = |name: &str| {
        schema
            .get_fields()
            .iter()
            .find(|f| f.name() == name)
            .cloned()
    };
    let Some(text_col) = column(&args.text_field) else {
        let names: Vec<&str> = schema.get_fields().iter().map(|f| f.name()).collect();
        return Err(Failure::input(anyhow!(
            "{shown}: no column \"{}\" (columns: {})",
            args.text_field,
            names.join(", ")
        )));
    };
    let id_col = column(&args.id_field);
    let mut fields = vec![text_col];
    fields.extend(id_col);
    let projection = Type::group_type_builder(schema.name())
        .with_fields(fields)
        .build()
        .map_err(bad)?;
    let rows = RowIter::from_file_into(Box::new(reader))
        .project(Some(projection))
        .map_err(bad)?;
    for (n, row) in rows.enumerate() {
        let row = row.map_err(bad)?;
        let (mut text, mut id) = (None, None);
        for (name, field) in row.get_column_iter() {
            if *name == args.text_field {
                text = Some(field);
            } else if *name == args.id_field {
                id = Some(field.to_json_value());
            }
        }
        let text = match text {
            Some(Field::Str(s)) => s.clone(),
            other => {
                if args.skip_invalid {
                    stats.skipped += 1;
                    continue;
                }
                let what = match other {
                    Some(Field::Null) | None => "null".to_string(),
                    Some(f) => format!("not a string but {f}"),
                };
                return Err(Failure::input(anyhow!(
                    "{shown}:{}: column \"{}\" is {what}",
                    n + 1,
                    args.text_field
                )));
            }
        };
        let id = match id {
            Some(Value::Null) | None => Value::String(format!("{shown}:{}", n + 1)),
            Some(v) => v,
        };
        push(
            Doc {
                id,
                text,
                record: None,
            },
            stats,
        )?;
    }
    Ok(())
}

#[cfg(not(feature = "parquet"))]
fn parquet_docs(
    _: &str,
    shown: &str,
    _: &DocArgs,
    _: &mut ReadStats,
    _: &mut impl FnMut(Doc, &mut ReadStats) -> Result<(), Failure>,
) -> Result<(), Failure> {
    Err(Failure::input(anyhow!(
        "{shown}: this neardup was built without Parquet support (cargo feature \"parquet\")"
    )))
}

/// UTF-8 text of `bytes`, invalid sequences as U+FFFD, and whether there were any.
fn decode(bytes: Vec<u8>) -> (String, bool) {
    match String::from_utf8(bytes) {
        Ok(s) => (s, false),
        Err(e) => (String::from_utf8_lossy(e.as_bytes()).into_owned(), true),
    }
}

/// The id (if the record has one) and text of a JSON line, or why it has none.
fn record(line: &str, args: &DocArgs) -> Result<(Option<Value>, String), String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("not valid JSON: {e}"))?;
    let Value::Object(mut fields) = value else {
        return Err("not a JSON object".into());
    };
    let text = match fields.remove(&args.text_field) {
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(format!(
                "field \"{}\" is not a string but {}",
                args.text_field,
                kind(&other)
            ))
        }
        None => return Err(format!("no \"{}\" field", args.text_field)),
    };
    Ok((fields.remove(&args.id_field), text))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_imply_formats() {
        assert!(matches!(
            by_name("a/B.JSONL"),
            (Some(Format::Jsonl), Compression::None)
        ));
        assert!(matches!(
            by_name("a.ndjson.gz"),
            (Some(Format::Jsonl), Compression::Gzip)
        ));
        assert!(matches!(by_name("a.txt.zst"), (None, Compression::Zstd)));
        assert!(matches!(by_name("a.json"), (None, Compression::None)));
    }

    #[test]
    fn records() {
        let args = DocArgs::paths(vec![]);
        assert_eq!(
            record(r#"{"id": 7, "text": "hi"}"#, &args),
            Ok((Some(Value::from(7)), "hi".to_string()))
        );
        assert_eq!(
            record(r#"{"text": "hi"}"#, &args),
            Ok((None, "hi".to_string()))
        );
        assert!(record(r#"{"id": 7}"#, &args)
            .unwrap_err()
            .contains("no \"text\" field"));
        assert!(record(r#"{"text": 3}"#, &args)
            .unwrap_err()
            .contains("a number"));
        assert!(record(r#"[1]"#, &args)
            .unwrap_err()
            .contains("not a JSON object"));
        assert!(record(r#"{"text": "#, &args)
            .unwrap_err()
            .contains("not valid JSON"));
    }

    #[test]
    fn decodes_lossily() {
        assert_eq!(decode(b"ok".to_vec()), ("ok".to_string(), false));
        assert_eq!(decode(b"a\xffb".to_vec()), ("a\u{fffd}b".to_string(), true));
    }
}
