//! Reading fingerprints: newline-separated decimal u64 (the simhash-cpp format), from a
//! file or standard input (`-`), strictly: a line that is not a decimal u64 is an error that
//! names the file and the line; blank lines are skipped.

use std::fs::File;
use std::io::{self, Read};

use anyhow::anyhow;

use crate::failure::Failure;
use crate::progress::Progress;

/// Where fingerprints come from, with the name used in messages.
pub struct Source {
    /// The path, or `<stdin>`.
    pub name: String,
    reader: Box<dyn Read>,
    /// Size in bytes, when known (a regular file).
    pub len: Option<u64>,
}

impl Source {
    /// Opens `path`, or standard input for `-`.
    pub fn open(path: &str) -> Result<Source, Failure> {
        if path == "-" {
            return Ok(Source {
                name: "<stdin>".into(),
                reader: Box::new(io::stdin()),
                len: None,
            });
        }
        let file = File::open(path)
            .map_err(|e| Failure::input(anyhow!("cannot open input '{path}': {e}")))?;
        let meta = file
            .metadata()
            .map_err(|e| Failure::input(anyhow!("cannot open input '{path}': {e}")))?;
        if meta.is_dir() {
            return Err(Failure::input(anyhow!(
                "cannot read input '{path}': it is a directory"
            )));
        }
        Ok(Source {
            name: path.into(),
            reader: Box::new(file),
            len: meta.is_file().then_some(meta.len()),
        })
    }
}

impl Source {
    /// The bytes, buffered (for reading lines as bytes: `BufRead::read_until`).
    pub fn into_reader(self) -> std::io::BufReader<Box<dyn Read>> {
        std::io::BufReader::with_capacity(1 << 20, self.reader)
    }
}

/// Why a line is not a fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineError {
    /// `+` or `-` in front.
    Sign,
    /// A byte that is not a decimal digit.
    NotDigit(u8),
    /// More than 2^64 − 1.
    TooLarge,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::Sign => f.write_str("a sign is not allowed"),
            LineError::NotDigit(b) if b.is_ascii_graphic() => {
                write!(f, "unexpected character '{}'", *b as char)
            }
            LineError::NotDigit(b) => write!(f, "unexpected byte 0x{b:02x}"),
            LineError::TooLarge => f.write_str("above 18446744073709551615"),
        }
    }
}

/// The fingerprint on one line: `None` for a blank line. Surrounding ASCII white space
/// (including a `\r` from CRLF files) is ignored.
pub fn parse_line(line: &[u8]) -> Result<Option<u64>, LineError> {
    let line = line.trim_ascii();
    let Some(&first) = line.first() else {
        return Ok(None);
    };
    if first == b'+' || first == b'-' {
        return Err(LineError::Sign);
    }
    let digit = |b: u8| {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            Err(LineError::NotDigit(b))
        } else {
            Ok(u64::from(d))
        }
    };
    // Nineteen digits cannot overflow a u64: only the rest need checked arithmetic.
    let (head, tail) = line.split_at(line.len().min(19));
    let mut v: u64 = 0;
    for &b in head {
        v = v * 10 + digit(b)?;
    }
    for &b in tail {
        let d = digit(b)?;
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(d))
            .ok_or(LineError::TooLarge)?;
    }
    Ok(Some(v))
}

/// Bytes of input parsed by one task: large enough to amortise a task, small enough that
/// a wave of them stays a few tens of MB.
const BLOCK: usize = 8 << 20;

/// A line that is not a fingerprint: its number within its block, why, and its text.
type BadLine = (u64, LineError, String);

/// The fingerprints of a block of whole lines (the last may lack its newline) and the
/// number of lines in it.
fn parse_block(block: &[u8]) -> Result<(Vec<u64>, u64), BadLine> {
    let mut out = Vec::with_capacity(block.len() / 20 + 1);
    let mut lines = 0u64;
    let mut start = 0;
    // The last line may lack its newline.
    let unterminated = block.last().is_some_and(|&b| b != b'\n');
    let ends = memchr::memchr_iter(b'\n', block).chain(unterminated.then_some(block.len()));
    for end in ends {
        lines += 1;
        let line = &block[start..end];
        match parse_line(line) {
            Ok(Some(v)) => out.push(v),
            Ok(None) => {}
            Err(e) => {
                let shown = String::from_utf8_lossy(line.trim_ascii());
                return Err((lines, e, shown.chars().take(60).collect()));
            }
        }
        start = end + 1;
    }
    Ok((out, lines))
}

/// Reads every fingerprint of `source`, reporting bytes read to `progress`. Blocks of
/// lines are parsed in parallel, a wave at a time, and joined in input order.
pub fn read_decimal(mut source: Source, progress: &Progress) -> Result<Vec<u64>, Failure> {
    use rayon::prelude::*;

    progress.phase("reading", source.len);
    // About 20 bytes a line: reserve once instead of growing through copies.
    let mut out = Vec::with_capacity(source.len.map_or(1 << 16, |n| (n / 17) as usize + 16));
    let wave = rayon::current_num_threads().max(1) * 2;
    // Block buffers are reused from wave to wave: no page faults or zeroing per block.
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut carry: Vec<u8> = Vec::new();
    let mut lines_before = 0u64;
    let mut read_total = 0u64;
    let mut eof = false;
    while !eof {
        // A wave of blocks, each ending with a newline but the last one of the input.
        let mut blocks: Vec<Vec<u8>> = Vec::with_capacity(wave);
        while blocks.len() < wave && !eof {
            let mut block = pool.pop().unwrap_or_default();
            block.clear();
            block.append(&mut carry);
            let n = (&mut source.reader)
                .take(BLOCK as u64)
                .read_to_end(&mut block)
                .map_err(|e| Failure::io(anyhow!("cannot read {}: {e}", source.name)))?;
            read_total += n as u64;
            progress.set(read_total);
            if n < BLOCK {
                eof = true;
            } else {
                match memchr::memrchr(b'\n', &block) {
                    Some(i) => {
                        carry.extend_from_slice(&block[i + 1..]);
                        block.truncate(i + 1);
                    }
                    None => {
                        // One line longer than a block: keep reading it.
                        carry = block;
                        continue;
                    }
                }
            }
            blocks.push(block);
        }
        let parsed: Vec<_> = blocks.par_iter().map(|b| parse_block(b)).collect();
        pool.append(&mut blocks);
        for result in parsed {
            match result {
                Ok((values, lines)) => {
                    out.extend_from_slice(&values);
                    lines_before += lines;
                }
                Err((line, e, shown)) => {
                    return Err(Failure::input(anyhow!(
                        "{}:{}: not a decimal u64: {shown:?} ({e})",
                        source.name,
                        lines_before + line
                    )));
                }
            }
        }
    }
    Ok(out)
}

/// Reads little-endian u64 values (the peers' `.u64` workload files).
pub fn read_u64_le(path: &str) -> Result<Vec<u64>, Failure> {
    let bytes =
        std::fs::read(path).map_err(|e| Failure::input(anyhow!("cannot read '{path}': {e}")))?;
    if bytes.len() % 8 != 0 {
        return Err(Failure::input(anyhow!(
            "'{path}': {} bytes is not a whole number of little-endian u64",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_strictly() {
        assert_eq!(parse_line(b"0"), Ok(Some(0)));
        assert_eq!(parse_line(b"  42\r"), Ok(Some(42)));
        assert_eq!(parse_line(b"007"), Ok(Some(7)));
        assert_eq!(parse_line(b""), Ok(None));
        assert_eq!(parse_line(b" \t"), Ok(None));
        assert_eq!(parse_line(b"18446744073709551615"), Ok(Some(u64::MAX)));
        assert_eq!(
            parse_line(b"18446744073709551616"),
            Err(LineError::TooLarge)
        );
        assert_eq!(
            parse_line(b"99999999999999999999999"),
            Err(LineError::TooLarge)
        );
        assert_eq!(parse_line(b"-1"), Err(LineError::Sign));
        assert_eq!(parse_line(b"+1"), Err(LineError::Sign));
        assert_eq!(parse_line(b"13x"), Err(LineError::NotDigit(b'x')));
        assert_eq!(parse_line(b"1 2"), Err(LineError::NotDigit(b' ')));
        assert_eq!(parse_line(b"0x1f"), Err(LineError::NotDigit(b'x')));
    }

    #[test]
    fn blocks_count_lines() {
        assert_eq!(parse_block(b"1\n\n2\n"), Ok((vec![1, 2], 3)));
        assert_eq!(parse_block(b"1\n2"), Ok((vec![1, 2], 2)));
        assert_eq!(parse_block(b""), Ok((vec![], 0)));
        assert_eq!(
            parse_block(b"1\n\nx9\n"),
            Err((3, LineError::NotDigit(b'x'), "x9".into()))
        );
    }

    #[test]
    fn reads_across_blocks_with_exact_line_numbers() {
        // More than a wave of blocks, then a bad line far in.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fps.txt");
        let mut text = String::new();
        let mut expected = Vec::new();
        let mut i = 0u64;
        while text.len() < 5 * BLOCK {
            let v = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            text.push_str(&v.to_string());
            text.push_str(if i.is_multiple_of(7) { "\r\n\n" } else { "\n" });
            expected.push(v);
            i += 1;
        }
        let lines = text.matches('\n').count();
        std::fs::write(&path, &text).unwrap();
        let p = path.to_str().unwrap();
        let got = read_decimal(Source::open(p).unwrap(), &Progress::hidden()).unwrap();
        assert_eq!(got, expected);

        text.push_str("12a\n");
        std::fs::write(&path, &text).unwrap();
        let err = read_decimal(Source::open(p).unwrap(), &Progress::hidden()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{p}:{}: not a decimal u64: \"12a\" (unexpected character 'a')",
                lines + 1
            )
        );
    }

    proptest! {
        #[test]
        fn round_trips(v in any::<u64>()) {
            prop_assert_eq!(parse_line(v.to_string().as_bytes()), Ok(Some(v)));
        }

        #[test]
        fn agrees_with_std_on_digit_strings(s in "[0-9]{1,25}") {
            prop_assert_eq!(parse_line(s.as_bytes()).ok().flatten(), s.parse::<u64>().ok());
        }
    }
}
