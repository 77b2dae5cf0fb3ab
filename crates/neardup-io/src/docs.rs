//! Reading documents: JSON Lines, text files (one document per file, or one per line),
//! directories (recursively), gzip or zstd around any of them, Parquet, and standard input.
//!
//! Documents come out in input order, in batches, so a caller can work on a batch in
//! parallel and write results in order while memory stays bounded.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::Value;

use crate::{Error, Progress};

mod scan;

/// How an input's bytes are cut into documents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line; the text and id come from the fields
    /// [`ReadOptions::text_field`] and [`ReadOptions::id_field`] name.
    Jsonl,
    /// The whole input is one document, its id the path.
    Text,
    /// Every line is a document, its id `path:line`.
    Lines,
    /// Parquet: a row per document, text and id from the columns
    /// [`ReadOptions::text_field`] and [`ReadOptions::id_field`] name.
    Parquet,
}

/// Where documents come from and how to read them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// Files or directories to read, `-` for standard input (also when there are none).
    /// Directories are read recursively, files in name order.
    pub inputs: Vec<String>,
    /// The format of every input. `None`: from the file name (`.jsonl` or `.ndjson`: JSON
    /// Lines, `.parquet`: Parquet, anything else: text, or lines with [`Self::lines`];
    /// `.gz` and `.zst` are decompressed first); standard input is JSON Lines when it
    /// starts with `{`, text otherwise.
    pub format: Option<Format>,
    /// Text inputs hold one document per line (as [`Format::Lines`] for them).
    pub lines: bool,
    /// JSON Lines and Parquet: the field (column) holding the text.
    pub text_field: String,
    /// JSON Lines and Parquet: the field (column) holding the id (any value); records
    /// without it get `path:line` (`path:row` for Parquet, from 1).
    pub id_field: String,
    /// Skip JSON lines that do not parse or lack the text field (and Parquet rows without
    /// a text), and count them, instead of stopping at the first.
    pub skip_invalid: bool,
    /// Keep each document's input line in [`Doc::record`] (JSON Lines and lines).
    pub keep_records: bool,
    /// JSON Lines of the common shape: leave [`Doc::text`] empty, its string only checked,
    /// for a pass that needs the ids alone.
    pub ids_only: bool,
    /// Read standard input from this file instead (a copy of it, for a second pass).
    pub stdin_file: Option<String>,
}

impl Default for ReadOptions {
    /// Standard input, its format guessed, the fields `text` and `id`.
    fn default() -> ReadOptions {
        ReadOptions::paths(vec![])
    }
}

impl ReadOptions {
    /// Reading `paths` with every other setting at its default.
    pub fn paths(paths: Vec<String>) -> ReadOptions {
        ReadOptions {
            inputs: paths,
            format: None,
            lines: false,
            text_field: "text".into(),
            id_field: "id".into(),
            skip_invalid: false,
            keep_records: false,
            ids_only: false,
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
    /// Its input line as read, when [`ReadOptions::keep_records`] asks for it and the input has
    /// lines.
    pub record: Option<String>,
    /// Bytes of input it came from: its line, or its text. The same whatever the options
    /// leave out of the document, so that two reads of one input cut it into the same
    /// batches ([`read_mapped_mut`]).
    pub input_bytes: usize,
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
    /// Invalid JSON lines and Parquet rows skipped ([`ReadOptions::skip_invalid`]).
    pub skipped: u64,
}

impl ReadStats {
    /// Counts the documents `docs` and their text.
    fn count(&mut self, docs: &[Doc]) {
        self.docs += docs.len() as u64;
        self.bytes += docs.iter().map(|d| d.text.len() as u64).sum::<u64>();
    }

    /// Adds what `other` counted.
    fn add(&mut self, other: &ReadStats) {
        self.docs += other.docs;
        self.bytes += other.bytes;
        self.invalid_utf8 += other.invalid_utf8;
        self.skipped += other.skipped;
    }
}

/// Documents per batch, and bytes of text: whichever comes first. A megabyte is a few
/// milliseconds of fingerprinting: small enough that a caller working on one batch while
/// the next is read keeps both busy from the start, large enough that handing batches over
/// costs nothing.
const BATCH_DOCS: usize = 4096;
const BATCH_BYTES: usize = 1 << 20;

/// Bytes of text of an input's first batch, and of its first mapped lines; each batch
/// after is twice as large, up to [`BATCH_BYTES`]. The workers wait for the first batch:
/// at a megabyte, they started 3 to 5 ms into a run of 200.
const FIRST_BATCH_BYTES: usize = 64 << 10;

/// Sizes of successive batches: from [`FIRST_BATCH_BYTES`], doubling up to [`BATCH_BYTES`].
struct Ramp(usize);

impl Ramp {
    fn new() -> Ramp {
        Ramp(FIRST_BATCH_BYTES)
    }

    /// The size of the next batch.
    fn next(&mut self) -> usize {
        let now = self.0;
        self.0 = (now * 2).min(BATCH_BYTES);
        now
    }
}

enum Source {
    Stdin,
    File(String),
}

impl ReadOptions {
    fn sources(&self) -> Result<Vec<Source>, Error> {
        let mut names: Vec<&String> = self.inputs.iter().collect();
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
            let meta = std::fs::metadata(name).map_err(|error| Error::Unreadable {
                path: name.clone(),
                error,
            })?;
            if meta.is_dir() {
                for entry in walkdir::WalkDir::new(name).sort_by_file_name() {
                    let entry = entry.map_err(|error| Error::Walk {
                        path: name.clone(),
                        error,
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
/// time. Progress counts input bytes, in a phase called "reading". The first error of
/// `batch` stops the reading and is returned, as is the first error reading.
pub fn read<E: From<Error>>(
    args: &ReadOptions,
    progress: &dyn Progress,
    batch: impl FnMut(Vec<Doc>) -> Result<(), E>,
) -> Result<ReadStats, E> {
    read_as(args, progress, "reading", batch)
}

/// [`read`], the progress phase called `phase`.
pub fn read_as<E: From<Error>>(
    args: &ReadOptions,
    progress: &dyn Progress,
    phase: &'static str,
    batch: impl FnMut(Vec<Doc>) -> Result<(), E>,
) -> Result<ReadStats, E> {
    read_with(args, progress, phase, batch, None)
}

/// Whole lines of an input, still to be read: bytes `start..end` of `bytes`, the first of
/// them line `first_line` (from 1) of input `name`.
struct Lines {
    bytes: Bytes,
    start: usize,
    end: usize,
    first_line: u64,
    name: Arc<str>,
    format: Format,
}

impl Lines {
    /// The documents of these lines, and what reading them counted besides the documents
    /// (see [`line_doc`]); the failure of the first bad line instead. The lines' pages then leave the
    /// process's resident memory (all but the two at the ends, which the lines before and
    /// after may share): the documents are copies.
    fn read(&self, args: &ReadOptions) -> Result<(Vec<Doc>, ReadStats), Error> {
        let mut stats = ReadStats::default();
        let mut docs = Vec::new();
        for (line_no, line) in
            (self.first_line..).zip(lines(&self.bytes.get()[self.start..self.end]))
        {
            docs.extend(line_doc(
                line,
                line_no,
                &self.name,
                self.format,
                args,
                &mut stats,
            )?);
        }
        if let Bytes::Mapped(map) = &self.bytes {
            crate::mapped::release(map, self.start, self.end);
        }
        Ok((docs, stats))
    }
}

/// Where the bytes of [`Lines`] are: a mapped file, or a block of a stream read (a
/// compressed file, standard input).
enum Bytes {
    Mapped(Arc<memmap2::Mmap>),
    Read(Vec<u8>),
}

impl Bytes {
    fn get(&self) -> &[u8] {
        match self {
            Bytes::Mapped(map) => map,
            Bytes::Read(block) => block,
        }
    }
}

/// The lines of `bytes` as the readers cut them: each without its newline, the last one
/// too when `bytes` does not end with a newline (and none in empty `bytes`).
pub fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    SplitLines {
        bytes,
        newlines: memchr::memchr_iter(b'\n', bytes),
        start: 0,
    }
}

/// The iterator of [`lines`].
struct SplitLines<'a> {
    bytes: &'a [u8],
    newlines: memchr::Memchr<'a>,
    /// Where the next line starts.
    start: usize,
}

impl<'a> Iterator for SplitLines<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let end = match self.newlines.next() {
            Some(end) => end,
            None if self.start < self.bytes.len() => self.bytes.len(),
            None => return None,
        };
        let line = &self.bytes[self.start..end];
        self.start = end + 1;
        Some(line)
    }
}

/// [`read_as`]; the lines of mapped inputs handed to `hand_over` unread, about
/// [`BATCH_BYTES`] at a time, when it is given.
fn read_with<E: From<Error>>(
    args: &ReadOptions,
    progress: &dyn Progress,
    phase: &'static str,
    mut batch: impl FnMut(Vec<Doc>) -> Result<(), E>,
    mut hand_over: Option<&mut dyn FnMut(Lines) -> Result<(), E>>,
) -> Result<ReadStats, E> {
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
    let mut sizes = Ramp::new();
    let mut full_at = sizes.next();
    // A document to the pending batch, which goes (and is counted) when full; `None`
    // sends it now.
    let mut send = |doc: Option<Doc>, stats: &mut ReadStats| -> Result<(), E> {
        let full = match doc {
            Some(doc) => {
                pending_bytes += doc.input_bytes;
                pending.push(doc);
                pending.len() >= BATCH_DOCS || pending_bytes >= full_at
            }
            None => !pending.is_empty(),
        };
        if full {
            progress.set(read_bytes.load(Ordering::Relaxed));
            stats.count(&pending);
            pending_bytes = 0;
            full_at = sizes.next();
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
                return Err(Error::ParquetStdin.into());
            };
            // The parquet crate panics on some damaged files (arrow-rs #9992): an error.
            let mut push = |doc, stats: &mut ReadStats| send(Some(doc), stats);
            crate::panic::catch_panic(|| parquet_docs(path, &name, args, &mut stats, &mut push))
                .unwrap_or_else(|why| {
                    Err(Error::Parquet {
                        name: name.clone(),
                        why,
                    }
                    .into())
                })?;
            if let Source::File(p) = source {
                read_bytes.fetch_add(
                    std::fs::metadata(p).map_or(0, |m| m.len()),
                    Ordering::Relaxed,
                );
            }
            continue;
        }
        let opened = match file {
            Some(path) => Some(File::open(path).map_err(|error| match source {
                Source::File(_) => Error::Open {
                    path: path.into(),
                    error,
                },
                Source::Stdin => Error::StdinCopy(error),
            })?),
            None => None,
        };
        // The format the flags or the name give (standard input's may take its first bytes).
        let given = match args.format.or(format) {
            Some(Format::Text) if args.lines => Some(Format::Lines),
            Some(f) => Some(f),
            None if matches!(source, Source::Stdin) => None,
            None if args.lines => Some(Format::Lines),
            None => Some(Format::Text),
        };
        // The lines of a plain file are read where they lie, mapped into memory.
        if let (Some(f @ (Format::Lines | Format::Jsonl)), Compression::None, Some(map)) = (
            given,
            compression,
            opened.as_ref().and_then(crate::mapped::mapped),
        ) {
            let map = Arc::new(map);
            let shown: Arc<str> = name.as_str().into();
            let (mut at, mut first_line) = (0, 1u64);
            let mut sizes = Ramp::new();
            while at < map.len() {
                let end = crate::mapped::block_end(&map, at, sizes.next());
                let lines = Lines {
                    bytes: Bytes::Mapped(map.clone()),
                    start: at,
                    end,
                    first_line,
                    name: shown.clone(),
                    format: f,
                };
                first_line += memchr::memchr_iter(b'\n', &map[at..end]).count() as u64;
                read_bytes.fetch_add((end - at) as u64, Ordering::Relaxed);
                at = end;
                match hand_over.as_mut() {
                    Some(hand) => {
                        // The documents before these lines go first.
                        send(None, &mut stats)?;
                        hand(lines)?;
                        progress.set(read_bytes.load(Ordering::Relaxed));
                    }
                    None => {
                        let (docs, read) = lines.read(args)?;
                        stats.add(&read);
                        for doc in docs {
                            send(Some(doc), &mut stats)?;
                        }
                    }
                }
            }
            continue;
        }
        let raw: Box<dyn Read> = match opened {
            Some(file) => Box::new(file),
            None => Box::new(io::stdin()),
        };
        let counted = Counting {
            inner: raw,
            read: read_bytes.clone(),
        };
        let decoded: Box<dyn Read> = match compression {
            Compression::None => Box::new(counted),
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(counted)),
            Compression::Zstd => {
                Box::new(zstd::stream::read::Decoder::new(counted).map_err(|error| {
                    Error::Zstd {
                        path: name.clone(),
                        error,
                    }
                })?)
            }
        };
        let mut reader = BufReader::with_capacity(1 << 20, decoded);
        let io_err = |error: io::Error| Error::Read {
            name: name.clone(),
            error,
        };
        let format = match given {
            Some(f) => f,
            None => {
                let head = reader.fill_buf().map_err(io_err)?;
                match head.iter().find(|b| !b.is_ascii_whitespace()) {
                    Some(b'{') => Format::Jsonl,
                    _ if args.lines => Format::Lines,
                    _ => Format::Text,
                }
            }
        };
        match format {
            Format::Parquet => {
                return Err(Error::ParquetStream { name }.into());
            }
            Format::Text => {
                let mut bytes = Vec::new();
                reader.read_to_end(&mut bytes).map_err(io_err)?;
                let (text, bad) = decode(bytes);
                stats.invalid_utf8 += u64::from(bad);
                let doc = Doc {
                    id: Value::String(name.clone()),
                    input_bytes: text.len(),
                    text,
                    record: None,
                };
                send(Some(doc), &mut stats)?;
            }
            Format::Lines | Format::Jsonl if hand_over.is_some() => {
                // Blocks of whole lines go to the workers, which parse them: the reader
                // only decompresses and cuts.
                let shown: Arc<str> = name.as_str().into();
                let mut sizes = Ramp::new();
                let mut first_line = 1u64;
                let mut carry = Vec::new();
                while let Some(block) =
                    line_block(&mut reader, &mut carry, sizes.next()).map_err(io_err)?
                {
                    let lines = Lines {
                        start: 0,
                        end: block.len(),
                        bytes: Bytes::Read(block),
                        first_line,
                        name: shown.clone(),
                        format,
                    };
                    first_line += memchr::memchr_iter(b'\n', lines.bytes.get()).count() as u64;
                    // The documents before these lines go first.
                    send(None, &mut stats)?;
                    if let Some(hand) = hand_over.as_mut() {
                        hand(lines)?;
                    }
                    progress.set(read_bytes.load(Ordering::Relaxed));
                }
            }
            Format::Lines | Format::Jsonl => {
                let mut line_no = 0u64;
                for_each_line(&mut reader, |line| {
                    line_no += 1;
                    match line_doc(line, line_no, &name, format, args, &mut stats)? {
                        Some(doc) => send(Some(doc), &mut stats),
                        None => Ok(()),
                    }
                })
                .map_err(|e| match e {
                    LineFailure::Io(e) => io_err(e).into(),
                    LineFailure::Line(f) => f,
                })?;
            }
        }
    }
    send(None, &mut stats)?;
    progress.set(read_bytes.load(Ordering::Relaxed));
    Ok(stats)
}

/// The document of line `line_no` (from 1) of the input `name`, read as `format` (lines or
/// JSON Lines); `None` for a line that holds none (a blank JSON line, or a bad one skipped
/// with [`ReadOptions::skip_invalid`]).
fn line_doc(
    line: &[u8],
    line_no: u64,
    name: &str,
    format: Format,
    args: &ReadOptions,
    stats: &mut ReadStats,
) -> Result<Option<Doc>, Error> {
    let (text, bad) = decode_line(line);
    stats.invalid_utf8 += u64::from(bad);
    if format == Format::Lines {
        return Ok(Some(Doc {
            id: Value::String(format!("{name}:{line_no}")),
            record: args.keep_records.then(|| text.clone().into_owned()),
            text: text.into_owned(),
            input_bytes: line.len(),
        }));
    }
    if text.trim().is_empty() {
        return Ok(None);
    }
    match json_record(&text, args).map(|(id, body)| (id, body.into_owned())) {
        Ok((id, body)) => Ok(Some(Doc {
            id: id.unwrap_or_else(|| Value::String(format!("{name}:{line_no}"))),
            text: body,
            record: args.keep_records.then(|| text.into_owned()),
            input_bytes: line.len(),
        })),
        Err(_) if args.skip_invalid => {
            stats.skipped += 1;
            Ok(None)
        }
        Err(why) => Err(Error::Record {
            name: name.into(),
            line: line_no,
            why,
        }),
    }
}

/// An id as a string: a JSON string as is, any other JSON value as its JSON text.
pub fn id_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// The id (if the record has one) and text of a JSON line as the readers read it, or why
/// it is no record: lines of the common shape by hand, anything else as `Value` parses it
/// (the same answer, faster). With [`ReadOptions::ids_only`] the text of a line of the
/// common shape is left empty.
pub fn json_record<'a>(
    line: &'a str,
    args: &ReadOptions,
) -> Result<(Option<Value>, Cow<'a, str>), String> {
    let simple = if args.ids_only {
        scan::simple_id(line, &args.text_field, &args.id_field).map(|id| (id, Cow::Borrowed("")))
    } else {
        scan::simple_record(line, &args.text_field, &args.id_field)
    };
    match simple.or_else(|| fast_record(line, args)) {
        Some(parsed) => Ok(parsed),
        None => record(line, args).map(|(id, text)| (id, Cow::Owned(text))),
    }
}

/// Reads `args`' documents on a thread of their own and runs `work` on each batch on the
/// rayon pool, several batches at once, handing the results to `sink` on the calling
/// thread in input order. Where the pool has a thread for every core, the lines of mapped
/// files are handed to the workers unread, a megabyte at a time, and read there: the
/// reading thread then only cuts the file at newlines. Batches are not a barrier: while
/// one thread is on a batch that holds a long document, the others go on with the next
/// batches, whose results wait, in order, for it (they are small beside the texts:
/// fingerprints, sketches). Memory stays
/// bounded: two batches a thread and two more are read ahead (on two cores the reader
/// shares them with the workers, and when it is descheduled they live on what it read
/// ahead: two fingerprinting threads took 257 ms on the natural corpus with two batches
/// ahead, 247 with six, medians of 11 alternating runs), and when `sink` falls behind, a
/// bounded queue of results stops the workers and then the reader.
pub fn read_mapped<R: Send, E: From<Error>>(
    args: &ReadOptions,
    progress: &dyn Progress,
    phase: &'static str,
    work: impl Fn(&[Doc]) -> R + Sync,
    sink: impl FnMut(R) -> Result<(), E>,
) -> Result<ReadStats, E> {
    read_mapped_mut(
        args,
        progress,
        phase,
        |_, docs: &mut [Doc]| work(docs),
        sink,
    )
}

/// [`read_mapped`], `work` told each batch's number (from 0, in input order: documents
/// of a batch come after those of every batch with a smaller number) and free to take
/// what it wants out of the documents (a record to write, an id) instead of copying it.
pub fn read_mapped_mut<R: Send, E: From<Error>>(
    args: &ReadOptions,
    progress: &dyn Progress,
    phase: &'static str,
    work: impl Fn(u64, &mut [Doc]) -> R + Sync,
    sink: impl FnMut(R) -> Result<(), E>,
) -> Result<ReadStats, E> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let lines_in_workers = rayon::current_num_threads() >= cores;
    read_mapped_with(args, progress, phase, work, sink, lines_in_workers)
}

/// A batch for the workers: documents read, or lines still to read.
enum Batch {
    Docs(Vec<Doc>),
    Lines(Lines),
}

/// [`read_mapped`]; the lines of mapped inputs read by the workers, not the reader, when
/// `lines_in_workers`. The reader's thread is worth its own core only where there is one:
/// with as many workers as cores it took turns with them (two workers on two cores: 0.40 s
/// of CPU for 0.22 s of wall on the natural corpus, the workers 0.28 s against 0.205 s
/// alone).
fn read_mapped_with<R: Send, E: From<Error>>(
    args: &ReadOptions,
    progress: &dyn Progress,
    phase: &'static str,
    work: impl Fn(u64, &mut [Doc]) -> R + Sync,
    mut sink: impl FnMut(R) -> Result<(), E>,
    lines_in_workers: bool,
) -> Result<ReadStats, E> {
    use rayon::iter::{ParallelBridge, ParallelIterator};
    use std::collections::BTreeMap;
    use std::sync::mpsc::sync_channel;

    let ahead = 2 * rayon::current_num_threads() + 2;
    std::thread::scope(|scope| {
        let (batches, to_work) = sync_channel::<Batch>(ahead);
        let (results, done) = sync_channel::<(usize, Result<(R, ReadStats), Error>)>(ahead);
        // Documents the reader sent, back from the workers once worked on.
        let (give_back, given_back) = std::sync::mpsc::channel::<Vec<Doc>>();
        let reader = scope.spawn(move || {
            // The workers only hang up after the sink failed, which is reported below.
            let stopped = || Error::Stopped;
            let lines_to = batches.clone();
            let mut hand = |lines: Lines| lines_to.send(Batch::Lines(lines)).map_err(|_| stopped());
            let hand_over = lines_in_workers.then_some(&mut hand as &mut dyn FnMut(Lines) -> _);
            read_with::<Error>(
                args,
                progress,
                phase,
                |docs| {
                    // Freed by the thread that allocated them, whose allocator takes them
                    // back without a lock, and off the workers' cores: freeing them there
                    // took the one fingerprinting thread 5 ms of 200 on the peers' corpus.
                    given_back.try_iter().for_each(drop);
                    batches.send(Batch::Docs(docs)).map_err(|_| stopped())
                },
                hand_over,
            )
        });
        let work = &work;
        scope.spawn(move || {
            // Stops at the first result the sink no longer takes.
            to_work
                .into_iter()
                .enumerate()
                .par_bridge()
                .try_for_each(|(k, batch)| {
                    let done = match batch {
                        Batch::Docs(mut docs) => {
                            let result = work(k as u64, &mut docs);
                            // Once the reader has finished, they are freed here.
                            let _ = give_back.send(docs);
                            Ok((result, ReadStats::default()))
                        }
                        Batch::Lines(lines) => lines.read(args).map(|(mut docs, mut read)| {
                            read.count(&docs);
                            (work(k as u64, &mut docs), read)
                        }),
                    };
                    results.send((k, done))
                })
        });
        // Results that came before their turn, by batch number.
        let mut early: BTreeMap<usize, Result<(R, ReadStats), Error>> = BTreeMap::new();
        let mut next = 0;
        let mut failed = None;
        // What the workers counted reading lines.
        let mut counted = ReadStats::default();
        for (k, result) in done.iter() {
            early.insert(k, result);
            while let Some(result) = early.remove(&next) {
                next += 1;
                if let Err(why) = result.map_err(E::from).and_then(|(result, read)| {
                    counted.add(&read);
                    sink(result)
                }) {
                    failed = Some(why);
                    break;
                }
            }
            if failed.is_some() {
                break;
            }
        }
        // Hanging up stops the workers, and through them the reader.
        drop(done);
        let read = reader.join().unwrap_or(Err(Error::ReaderFailed));
        match failed {
            Some(why) => Err(why),
            None => read.map_err(E::from).map(|mut stats| {
                stats.add(&counted);
                stats
            }),
        }
    })
}

/// The documents of a Parquet file: one per row, through `push`.
#[cfg(feature = "parquet")]
fn parquet_docs<E: From<Error>>(
    path: &str,
    shown: &str,
    args: &ReadOptions,
    stats: &mut ReadStats,
    push: &mut impl FnMut(Doc, &mut ReadStats) -> Result<(), E>,
) -> Result<(), E> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::reader::RowIter;
    use parquet::record::Field;
    use parquet::schema::types::Type;

    let file = File::open(path).map_err(|error| Error::Open {
        path: shown.into(),
        error,
    })?;
    let unreadable = |why: String| Error::Parquet {
        name: shown.into(),
        why,
    };
    crate::parquet_guard::check(path).map_err(unreadable)?;
    let bad = |e: parquet::errors::ParquetError| unreadable(e.to_string());
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
        return Err(Error::NoColumn {
            name: shown.into(),
            column: args.text_field.clone(),
            columns: names.join(", "),
        }
        .into());
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
                return Err(Error::Column {
                    name: shown.into(),
                    row: n as u64 + 1,
                    column: args.text_field.clone(),
                    what,
                }
                .into());
            }
        };
        let id = match id {
            Some(Value::Null) | None => Value::String(format!("{shown}:{}", n + 1)),
            Some(v) => v,
        };
        push(
            Doc {
                id,
                input_bytes: text.len(),
                text,
                record: None,
            },
            stats,
        )?;
    }
    Ok(())
}

#[cfg(not(feature = "parquet"))]
fn parquet_docs<E: From<Error>>(
    _: &str,
    shown: &str,
    _: &ReadOptions,
    _: &mut ReadStats,
    _: &mut impl FnMut(Doc, &mut ReadStats) -> Result<(), E>,
) -> Result<(), E> {
    Err(Error::NoParquet { name: shown.into() }.into())
}

/// Why reading lines stopped: the input, or what a line's handler said.
enum LineFailure<E> {
    Io(io::Error),
    Line(E),
}

/// The next block of whole lines of `reader`: at least `size` bytes (or the rest), up to a
/// newline, beginning with `carry` (what the block before read past its last newline),
/// which takes what this one reads past its own; `None` at the end. A block cut so reads
/// the same lines as [`for_each_line`].
fn line_block(
    reader: &mut impl BufRead,
    carry: &mut Vec<u8>,
    size: usize,
) -> io::Result<Option<Vec<u8>>> {
    let mut block = Vec::with_capacity(size.max(carry.len()) + (64 << 10));
    block.append(carry);
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            // The end: the last line, with or without its newline.
            return Ok((!block.is_empty()).then_some(block));
        }
        let want = size.saturating_sub(block.len());
        let take = if want > 0 {
            want.min(buf.len())
        } else {
            // Past the size: up to the next newline.
            match memchr::memchr(b'\n', buf) {
                Some(i) => {
                    block.extend_from_slice(&buf[..=i]);
                    reader.consume(i + 1);
                    return Ok(Some(block));
                }
                None => buf.len(),
            }
        };
        block.extend_from_slice(&buf[..take]);
        reader.consume(take);
        if block.len() >= size {
            // Cut after the last newline; the rest begins the next block.
            if let Some(i) = memchr::memrchr(b'\n', &block) {
                carry.extend_from_slice(&block[i + 1..]);
                block.truncate(i + 1);
                return Ok(Some(block));
            }
        }
    }
}

/// Calls `line` with every line of `reader` (without its `\n`; the last one too when it
/// lacks one), in order. Lines are cut in the reader's own buffer, a buffer at a time; only
/// a line that runs past the buffer's end is copied, to join its pieces.
fn for_each_line<E>(
    reader: &mut impl BufRead,
    mut line: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), LineFailure<E>> {
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(LineFailure::Io(e)),
        };
        if buf.is_empty() {
            if !carry.is_empty() {
                line(&carry).map_err(LineFailure::Line)?;
            }
            return Ok(());
        }
        let mut rest = buf;
        if !carry.is_empty() {
            // The end of a line begun in an earlier buffer.
            match memchr::memchr(b'\n', rest) {
                Some(i) => {
                    carry.extend_from_slice(&rest[..i]);
                    line(&carry).map_err(LineFailure::Line)?;
                    carry.clear();
                    rest = &rest[i + 1..];
                }
                None => {
                    carry.extend_from_slice(rest);
                    rest = &[];
                }
            }
        }
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', rest) {
            line(&rest[start..end]).map_err(LineFailure::Line)?;
            start = end + 1;
        }
        carry.extend_from_slice(&rest[start..]);
        let used = buf.len();
        reader.consume(used);
    }
}

/// UTF-8 text of a line (without its `\n`) as the readers read it: one `\r` at its end
/// dropped, borrowed when it is valid, else with invalid sequences as U+FFFD; and whether
/// there were any.
pub fn decode_line(line: &[u8]) -> (Cow<'_, str>, bool) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    match std::str::from_utf8(line) {
        Ok(s) => (Cow::Borrowed(s), false),
        Err(_) => (String::from_utf8_lossy(line), true),
    }
}

/// The id (if the record has one) and text of a JSON line, read without building the line
/// as a `Value`: the top-level object's other values are parsed and dropped as they go, the
/// text is borrowed from the line when it has no escapes, and only the id becomes a `Value`.
/// Every value is still parsed as `serde_json::Value` parses it (numbers in range, escapes
/// and surrogate pairs checked), so a line is accepted exactly when [`record`] accepts it,
/// with the same id and text. `None` for a line it does not accept; [`record`] then says
/// why.
pub fn fast_record<'a>(line: &'a str, args: &ReadOptions) -> Option<(Option<Value>, Cow<'a, str>)> {
    use serde::de::DeserializeSeed;

    let mut de = serde_json::Deserializer::from_str(line);
    let seed = RecordSeed {
        text_field: &args.text_field,
        id_field: &args.id_field,
    };
    let (id, text) = seed.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some((id, text??))
}

/// The top-level object of a JSON line, keeping the id and text fields (the last of each,
/// as a `Value` map keeps them).
struct RecordSeed<'f> {
    text_field: &'f str,
    id_field: &'f str,
}

/// A record's id and text, when it has them (the text `Some(None)` when it is not a
/// string).
type Fields<'de> = (Option<Value>, Option<Option<Cow<'de, str>>>);

impl<'de> serde::de::DeserializeSeed<'de> for RecordSeed<'_> {
    type Value = Fields<'de>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Fields<'de>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for RecordSeed<'_> {
    type Value = Fields<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
        let (mut id, mut text) = (None, None);
        while let Some(key) = map.next_key_seed(KeySeed(&self))? {
            match key {
                Key::Text => text = Some(map.next_value_seed(TextSeed)?),
                Key::Id => id = Some(map.next_value::<Value>()?),
                Key::Other => {
                    map.next_value::<Skip>()?;
                }
            }
        }
        Ok((id, text))
    }
}

/// Which field a key names (a key may equal both names; the text wins, as it does in
/// [`record`], which takes the text out of the map first).
enum Key {
    Text,
    Id,
    Other,
}

struct KeySeed<'s, 'f>(&'s RecordSeed<'f>);

impl<'de> serde::de::DeserializeSeed<'de> for KeySeed<'_, '_> {
    type Value = Key;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl serde::de::Visitor<'_> for KeySeed<'_, '_> {
    type Value = Key;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, key: &str) -> Result<Key, E> {
        Ok(if key == self.0.text_field {
            Key::Text
        } else if key == self.0.id_field {
            Key::Id
        } else {
            Key::Other
        })
    }
}

/// A string value, borrowed from the line when it has no escapes; `None` for a value of
/// another kind (parsed and dropped: a later field of the same name may still be the text,
/// as in a `Value` map the last one wins).
struct TextSeed;

impl<'de> serde::de::DeserializeSeed<'de> for TextSeed {
    type Value = Option<Cow<'de, str>>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for TextSeed {
    type Value = Option<Cow<'de, str>>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(Some(Cow::Owned(s)))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Skip.visit_seq(seq).map(|_| None)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Skip.visit_map(map).map(|_| None)
    }
}

/// Any JSON value, parsed as `Value` parses it (through `deserialize_any`, so numbers are
/// range-checked and string escapes decoded), then dropped: nothing is allocated for it.
/// `serde::de::IgnoredAny` would skip faster but accepts what `Value` rejects (`1e400`,
/// lone surrogates).
struct Skip;

impl<'de> serde::Deserialize<'de> for Skip {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Skip, D::Error> {
        d.deserialize_any(Skip)
    }
}

impl<'de> serde::de::Visitor<'de> for Skip {
    type Value = Skip;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_unit<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(Skip)
    }
}

/// UTF-8 text of `bytes`, invalid sequences as U+FFFD, and whether there were any.
fn decode(bytes: Vec<u8>) -> (String, bool) {
    match String::from_utf8(bytes) {
        Ok(s) => (s, false),
        Err(e) => (String::from_utf8_lossy(e.as_bytes()).into_owned(), true),
    }
}

/// The id (if the record has one) and text of a JSON line, or why it has none: the line
/// parsed whole as a `Value` (the definition [`fast_record`] is tested against, and the
/// source of every error message).
pub fn record(line: &str, args: &ReadOptions) -> Result<(Option<Value>, String), String> {
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
    use crate::NoProgress;
    use proptest::prelude::*;

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
        let args = ReadOptions::paths(vec![]);
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
        assert_eq!(decode_line(b"ok"), (Cow::Borrowed("ok"), false));
        assert_eq!(decode_line(b"a\xffb"), (Cow::Borrowed("a\u{fffd}b"), true));
    }

    /// The DOM-free reading where the DOM accepts the line, and nothing where it does not;
    /// the hand scanner the same where it reads the line at all.
    fn agrees(line: &str, args: &ReadOptions) -> Result<(), TestCaseError> {
        let fast = fast_record(line, args).map(|(id, text)| (id, text.into_owned()));
        let simple = scan::simple_record(line, &args.text_field, &args.id_field)
            .map(|(id, text)| (id, text.into_owned()));
        // The ids-only scanner reads the same lines, and the same ids.
        let ids = scan::simple_id(line, &args.text_field, &args.id_field);
        prop_assert_eq!(&ids, &simple.as_ref().map(|(id, _)| id.clone()), "{}", line);
        match record(line, args) {
            Ok(dom) => {
                prop_assert_eq!(&fast, &Some(dom.clone()), "{}", line);
                if simple.is_some() {
                    prop_assert_eq!(simple, Some(dom), "{}", line);
                }
            }
            Err(_) => {
                prop_assert_eq!(fast, None, "{}", line);
                prop_assert_eq!(simple, None, "{}", line);
            }
        }
        Ok(())
    }

    /// The shapes of line the hand scanner is for are read by it, not passed on.
    #[test]
    fn the_common_shapes_take_the_scanner() {
        let args = ReadOptions::paths(vec![]);
        for line in [
            r#"{"id": "a/b.py", "text": "def f():\n    return \"\\\"\n"}"#,
            r#"{"text":"plain","id":12}"#,
            r#" { "id" : 0 , "text" : "caf\u00e9 \ud83d\ude00 \/ \b\f\r\t" } "#,
            r#"{"text": ""}"#,
            "{\"id\": \"\u{e9}\", \"text\": \"\u{4e2d}\u{6587}\"}",
        ] {
            assert!(scan::simple_record(line, "text", "id").is_some(), "{line}");
            agrees(line, &args).unwrap();
        }
        // A key naming both fields is the text, as in `record`.
        let one = scan::simple_record(r#"{"t": "x"}"#, "t", "t");
        assert_eq!(one, Some((None, Cow::Borrowed("x"))));
    }

    #[test]
    fn fast_records_examples() {
        let args = ReadOptions::paths(vec![]);
        for line in [
            r#"{"id": 7, "text": "hi"}"#,
            r#"{"text": "a\"b\\c\nd\u00e9\ud83d\ude00"}"#,
            r#"{"text": "lone \ud800"}"#,
            r#"{"text": "x", "n": 1e400}"#,
            r#"{"text": "x", "n": 18446744073709551616}"#,
            r#"{"meta": {"a": [1, {"b": null}], "text": "inner"}, "text": "outer", "id": null}"#,
            r#"{"text": "first", "text": "second", "id": 1, "id": "two"}"#,
            r#"{"te\u0078t": "escaped key"}"#,
            r#"{"id": 3}"#,
            r#"{"text": 3}"#,
            r#"{"text": "x"} trailing"#,
            r#"[{"text": "x"}]"#,
            r#"{"text": "x",}"#,
            r#"{"text": "tab	inside"}"#,
            "{\"text\": \"caf\u{e9} \u{1f600}\"}",
        ] {
            agrees(line, &args).unwrap();
        }
    }

    /// A JSON Lines file of `n` documents, every 97th of them long (so batches end at
    /// uneven places and take uneven time), the arguments that read it, and the ids in
    /// file order.
    fn uneven_corpus(n: usize) -> (tempfile::NamedTempFile, ReadOptions, Vec<String>) {
        use std::io::Write as _;
        let mut file = tempfile::Builder::new()
            .suffix(".jsonl")
            .tempfile()
            .unwrap();
        let mut ids = Vec::new();
        for i in 0..n {
            let words = if i.is_multiple_of(97) { 40_000 } else { 3 };
            let text = vec!["word"; words].join(" ");
            writeln!(
                file,
                "{}",
                serde_json::json!({"id": format!("d{i}"), "text": text})
            )
            .unwrap();
            ids.push(format!("d{i}"));
        }
        file.flush().unwrap();
        let args = ReadOptions::paths(vec![file.path().to_string_lossy().into_owned()]);
        (file, args, ids)
    }

    /// Every document and count of `path`, read with `args` (as `.gz` when `gz`), ids that
    /// name the file written with `NAME` in its place.
    fn read_all(bytes: &[u8], lines: bool, gz: bool) -> (Vec<Doc>, ReadStats) {
        read_all_by(bytes, lines, gz, None)
    }

    /// [`read_all`], through [`read_mapped_with`] and its workers when `workers` is
    /// `Some(lines_in_workers)`.
    fn read_all_by(
        bytes: &[u8],
        lines: bool,
        gz: bool,
        workers: Option<bool>,
    ) -> (Vec<Doc>, ReadStats) {
        use std::io::Write as _;
        let suffix = match (lines, gz) {
            (false, false) => ".jsonl",
            (false, true) => ".jsonl.gz",
            (true, false) => ".txt",
            (true, true) => ".txt.gz",
        };
        let mut file = tempfile::Builder::new().suffix(suffix).tempfile().unwrap();
        if gz {
            let mut z = flate2::write::GzEncoder::new(&mut file, flate2::Compression::fast());
            z.write_all(bytes).unwrap();
            z.finish().unwrap();
        } else {
            file.write_all(bytes).unwrap();
        }
        file.flush().unwrap();
        let path = file.path().to_string_lossy().into_owned();
        let mut args = ReadOptions::paths(vec![path.clone()]);
        args.lines = lines;
        args.skip_invalid = true;
        args.keep_records = true;
        let mut docs = Vec::new();
        let take = |batch: Vec<Doc>| {
            docs.extend(batch);
            Ok::<(), Error>(())
        };
        let stats = match workers {
            None => read(&args, &NoProgress, take),
            Some(w) => read_mapped_with(
                &args,
                &NoProgress,
                "test",
                |_, d: &mut [Doc]| d.to_vec(),
                take,
                w,
            ),
        }
        .unwrap();
        for doc in &mut docs {
            if let Value::String(id) = &mut doc.id {
                *id = id.replace(&path, "NAME");
            }
        }
        (docs, stats)
    }

    /// A mapped file reads as the same file streamed through a decompressor, and as the
    /// same file read by the workers, a megabyte of lines each: every line, blank, CRLF,
    /// invalid UTF-8, bad JSON, without a final newline, in order.
    #[test]
    fn mapped_files_read_as_streamed_ones() {
        let mut bytes = Vec::new();
        for i in 0..100_000 {
            bytes.extend_from_slice(match i % 7 {
                0 => b"{\"id\": 1, \"text\": \"one\\ntwo \\u00e9\"}\n".as_slice(),
                1 => b"{\"text\": \"no id\", \"other\": [1, 2]}\r\n",
                2 => b"\n",
                3 => b"{\"id\": \"bad\xff\", \"text\": \"x\"}\n",
                4 => b"not json\n",
                5 => b"{\"id\": \"s\", \"text\": \"a fairly ordinary line of text\"}\n",
                _ => b"   \n",
            });
        }
        // A line longer than a batch, which a block of a stream runs past its size for.
        bytes.extend_from_slice(b"{\"text\": \"");
        bytes.extend(std::iter::repeat_n(b'w', 3 * BATCH_BYTES / 2));
        bytes.extend_from_slice(b"\"}\n");
        bytes.extend_from_slice(b"{\"text\": \"last, no newline\"}");
        assert!(
            bytes.len() > 2 * BATCH_BYTES,
            "mapped, in several handovers"
        );
        for lines in [false, true] {
            let mapped = read_all(&bytes, lines, false);
            let streamed = read_all(&bytes, lines, true);
            assert_eq!(mapped, streamed);
            assert_eq!(mapped.1.docs, if lines { 100_002 } else { 57_145 });
            for (in_workers, gz) in [(false, false), (true, false), (false, true), (true, true)] {
                let by_workers = read_all_by(&bytes, lines, gz, Some(in_workers));
                assert_eq!(
                    by_workers, mapped,
                    "lines read in the workers: {in_workers}, compressed: {gz}"
                );
            }
        }
    }

    proptest::proptest! {
        /// A stream cut into blocks of whole lines reads the lines it reads line by line,
        /// and each block but the last ends with a newline.
        #[test]
        fn line_blocks_hold_the_lines_of_the_stream(
            parts in proptest::collection::vec((0usize..40, proptest::bool::ANY), 0..40),
            size in 1usize..64,
            buffer in 1usize..32,
        ) {
            let mut bytes = Vec::new();
            for (len, newline) in &parts {
                bytes.extend(std::iter::repeat_n(b'x', *len));
                if *newline {
                    bytes.push(b'\n');
                }
            }
            let mut want: Vec<Vec<u8>> = Vec::new();
            let read = for_each_line(&mut io::BufReader::with_capacity(buffer, &bytes[..]), |l| {
                want.push(l.to_vec());
                Ok::<(), ()>(())
            });
            proptest::prop_assert!(read.is_ok());
            let mut reader = io::BufReader::with_capacity(buffer, &bytes[..]);
            let (mut carry, mut got, mut joined) = (Vec::new(), Vec::new(), Vec::new());
            let mut blocks = Vec::new();
            while let Some(block) = line_block(&mut reader, &mut carry, size).unwrap() {
                got.extend(lines(&block).map(<[u8]>::to_vec));
                joined.extend_from_slice(&block);
                blocks.push(block);
            }
            proptest::prop_assert_eq!(&joined, &bytes);
            proptest::prop_assert_eq!(got, want);
            if let Some((_, whole)) = blocks.split_last() {
                for b in whole {
                    proptest::prop_assert!(b.ends_with(b"\n"));
                }
            }
        }
    }

    #[test]
    fn batches_grow_from_the_first_to_the_largest() {
        let mut sizes = Ramp::new();
        let seen: Vec<usize> = (0..8).map(|_| sizes.next()).collect();
        assert_eq!(seen[0], FIRST_BATCH_BYTES);
        for w in seen.windows(2) {
            assert_eq!(w[1], (2 * w[0]).min(BATCH_BYTES));
        }
        assert_eq!(seen[7], BATCH_BYTES);
    }

    /// Batches worked on in parallel come back to the sink in input order, each once.
    #[test]
    fn mapped_batches_keep_input_order() {
        let (_file, args, ids) = uneven_corpus(20_000);
        let work = |_: u64, batch: &mut [Doc]| {
            // Uneven work, so later batches finish first: long documents take longer, as
            // fingerprinting them does, and some batches stall.
            let cost: usize = batch.iter().map(|d| d.text.len()).sum();
            let stall = batch.len().is_multiple_of(3);
            let micros = cost / 4096 + if stall { 5_000 } else { 0 };
            std::thread::sleep(std::time::Duration::from_micros(micros as u64));
            batch
                .iter()
                .map(|d| d.id.as_str().unwrap_or_default().to_string())
                .collect::<Vec<String>>()
        };
        for in_workers in [false, true] {
            let mut seen: Vec<String> = Vec::new();
            let take = |batch: Vec<String>| {
                seen.extend(batch);
                Ok::<(), Error>(())
            };
            let stats =
                read_mapped_with(&args, &NoProgress, "test", work, take, in_workers).unwrap();
            assert_eq!(stats.docs, ids.len() as u64);
            assert_eq!(seen, ids, "lines read in the workers: {in_workers}");
        }
    }

    /// Documents of a small file (streamed, so gathered into a batch) come before the
    /// lines of a mapped file after it, which the workers read.
    #[test]
    fn streamed_documents_go_before_the_lines_after_them() {
        use std::io::Write as _;
        let mut small = tempfile::Builder::new()
            .suffix(".jsonl")
            .tempfile()
            .unwrap();
        writeln!(small, "{{\"id\": \"first\", \"text\": \"a\"}}").unwrap();
        small.flush().unwrap();
        let (big, _, ids) = uneven_corpus(3_000);
        let paths = [small.path(), big.path()];
        let args = ReadOptions::paths(paths.map(|p| p.to_string_lossy().into_owned()).to_vec());
        let ids_of = |_: u64, batch: &mut [Doc]| -> Vec<String> {
            batch
                .iter()
                .map(|d| d.id.as_str().unwrap_or_default().to_string())
                .collect()
        };
        let mut seen = Vec::new();
        let take = |batch: Vec<String>| {
            seen.extend(batch);
            Ok::<(), Error>(())
        };
        read_mapped_with(&args, &NoProgress, "test", ids_of, take, true).unwrap();
        assert_eq!(seen.first().map(String::as_str), Some("first"));
        assert_eq!(seen[1..], ids[..]);
    }

    /// A sink's failure is what the call returns, and it stops the reading.
    #[test]
    fn a_failing_sink_stops_the_work() {
        let (_file, args, _) = uneven_corpus(20_000);
        for in_workers in [false, true] {
            let mut taken = 0;
            let got: Result<_, Box<dyn std::error::Error + Send + Sync>> = read_mapped_with(
                &args,
                &NoProgress,
                "test",
                |_, batch: &mut [Doc]| batch.len(),
                |n| {
                    taken += n;
                    if taken > 5_000 {
                        return Err("the sink is full".into());
                    }
                    Ok(())
                },
                in_workers,
            );
            let why = got.err().map(|f| f.to_string()).unwrap_or_default();
            assert!(why.contains("the sink is full"), "{why}");
            assert!(taken < 20_000);
        }
    }

    /// A reading failure (a bad line) is reported with its file and line.
    #[test]
    fn a_bad_line_is_reported_through_the_workers() {
        use std::io::Write as _;
        let (mut file, args, _) = uneven_corpus(10_000);
        writeln!(file, "{{\"text\": 3}}").unwrap();
        file.flush().unwrap();
        for in_workers in [false, true] {
            let got = read_mapped_with(
                &args,
                &NoProgress,
                "test",
                |_, b: &mut [Doc]| b.len(),
                |_| Ok::<(), Error>(()),
                in_workers,
            );
            let why = got.err().map(|f| f.to_string()).unwrap_or_default();
            assert!(
                why.contains(":10001: field \"text\" is not a string"),
                "{why}"
            );
        }
    }

    /// JSON values of every kind: strings with escapes (surrogate pairs, lone surrogates),
    /// numbers in and out of range, literals, nested arrays and objects.
    fn value() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            prop::sample::select(vec![
                r#""plain""#,
                r#""é ünï""#,
                r#""q\"q""#,
                r#""b\\s""#,
                r#""\n\t\r\b\f\/""#,
                r#""\u00e9""#,
                r#""\ud83d\ude00""#,
                r#""\ud800""#,
                r#""\udc00x""#,
                r#""""#,
                "0",
                "-1",
                "1.5",
                "-0",
                "1e2",
                "1e400",
                "-1e400",
                "18446744073709551616",
                "true",
                "false",
                "null",
                r#""text""#,
                r#""id""#,
            ])
            .prop_map(String::from),
            "\"[a-z ]{0,12}\"",
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec((key(), inner), 0..4).prop_map(|kv| {
                    let fields: Vec<String> = kv.iter().map(|(k, v)| format!("{k}:{v}")).collect();
                    format!("{{{}}}", fields.join(","))
                }),
            ]
        })
    }

    /// A piece of a JSON string's inside: text (ASCII, accented, CJK, emoji), an escape of
    /// every kind, valid or not, or a raw control character (not JSON).
    fn string_piece() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[a-z \u{e9}\u{4e2d}\u{1f600}]{0,20}",
            4 => prop::sample::select(vec![
                r#"\n"#, r#"\""#, r#"\\"#, r#"\/"#, r#"\t"#, r#"\r"#, r#"\b"#, r#"\f"#,
                r#"\u00e9"#, r#"\u00E9"#, r#"\u0000"#, r#"\ud83d\ude00"#, r#"\uD83D\uDE00"#,
                r#"\ud800"#, r#"\udc00"#, r#"\ud800\u0041"#, r#"\ud800\n"#, r#"\u12"#,
                r#"\u12g4"#, r#"\x41"#, r#"\"#, "\t", "\u{1}", "\u{7f}",
            ])
            .prop_map(String::from),
        ]
    }

    fn key() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            r#""text""#,
            r#""id""#,
            r#""te\u0078t""#,
            r#""other""#,
            r#""x""#,
            r#""""#,
        ])
        .prop_map(String::from)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn fast_records_agree_with_the_dom(
            fields in prop::collection::vec((key(), value()), 0..6),
            garbage in prop::sample::select(vec!["", "", "", " ", "x", ",", "}"]),
            text_field in prop::sample::select(vec!["text", "id", "other"]),
        ) {
            let body: Vec<String> = fields.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            let line = format!("{{{}}}{garbage}", body.join(", "));
            let mut args = ReadOptions::paths(vec![]);
            args.text_field = text_field.to_string();
            agrees(&line, &args)?;
        }

        #[test]
        fn fast_records_agree_on_any_line(line in "\\PC{0,40}") {
            agrees(&line, &ReadOptions::paths(vec![]))?;
        }

        /// Lines of the common shape, with every escape, spacing and id the scanner must
        /// decode as `Value` does, or pass on: lone surrogates, bad escapes, raw control
        /// characters, ids with leading zeros, signs, fractions or 20 digits.
        #[test]
        fn common_lines_agree_with_the_dom(
            pieces in prop::collection::vec(string_piece(), 0..8),
            id in prop::sample::select(vec![
                "", "\"x\"", "\"a\\\"b\"", "\"\\u00e9\"", "0", "7", "12345678901234567890",
                "1234567890123456789", "007", "-3", "1.5", "1e3", "null", "true", "[1]",
            ]),
            spaces in prop::collection::vec(prop::sample::select(vec!["", "", " ", "\t", "\r", "\n"]), 8),
            id_first in any::<bool>(),
        ) {
            let text = format!("\"{}\"", pieces.concat());
            let [a, b, c, d, e, f, g, h] = [0, 1, 2, 3, 4, 5, 6, 7].map(|i| spaces[i]);
            let text_field = format!("\"text\"{a}:{b}{text}");
            let line = if id.is_empty() {
                format!("{c}{{{d}{text_field}{e}}}{f}")
            } else {
                let id_field = format!("\"id\"{g}:{h}{id}");
                let (x, y) = if id_first { (&id_field, &text_field) } else { (&text_field, &id_field) };
                format!("{c}{{{d}{x}{e},{f}{y}{g}}}{h}")
            };
            agrees(&line, &ReadOptions::paths(vec![]))?;
        }
    }
}
