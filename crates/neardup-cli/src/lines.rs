//! Files read line by line: ids to remove, fingerprints to insert.

use std::io::BufRead;

use anyhow::anyhow;
use neardup_io::fingerprints::Source;

use crate::failure::Failure;

/// Calls `f` with each line of `path` ('-': standard input) and its number, without its
/// line ending; a line that is not UTF-8 is an error naming the file and line.
pub fn each_line(
    path: &str,
    mut f: impl FnMut(u64, &str) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let src = Source::open(path)?;
    let name = src.name.clone();
    let mut reader = src.into_reader();
    let mut line = Vec::new();
    let mut n = 0u64;
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| Failure::io(anyhow!("cannot read {name}: {e}")))?;
        if read == 0 {
            return Ok(());
        }
        n += 1;
        let mut bytes = line.as_slice();
        if let Some(b) = bytes.strip_suffix(b"\n") {
            bytes = b.strip_suffix(b"\r").unwrap_or(b);
        }
        let text = std::str::from_utf8(bytes).map_err(|e| {
            Failure::input(anyhow!(
                "{name}:{n}: not UTF-8 (invalid byte at column {})",
                e.valid_up_to() + 1
            ))
        })?;
        f(n, text)?;
    }
}

/// The ids of the files `input`, one a line, in batches of `batch`.
pub fn each_id_batch(
    input: &[String],
    batch: usize,
    mut f: impl FnMut(&[String]) -> Result<(), Failure>,
) -> Result<(), Failure> {
    for path in input {
        let mut ids: Vec<String> = Vec::new();
        // Line by line with their numbers, so an id that is not UTF-8 names file and line.
        each_line(path, |_, id| {
            if !id.is_empty() {
                ids.push(id.to_string());
            }
            Ok(())
        })?;
        for chunk in ids.chunks(batch) {
            f(chunk)?;
        }
    }
    Ok(())
}
