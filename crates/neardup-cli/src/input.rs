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
    let mut v: u64 = 0;
    for &b in line {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return Err(LineError::NotDigit(b));
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d)))
            .ok_or(LineError::TooLarge)?;
    }
    Ok(Some(v))
}

/// Reads every fingerprint of `source`, reporting bytes read to `progress`.
pub fn read_decimal(mut source: Source, progress: &Progress) -> Result<Vec<u64>, Failure> {
    progress.phase("reading", source.len);
    // About 20 bytes a line: reserve once instead of growing through copies.
    let mut out = Vec::with_capacity(source.len.map_or(1 << 16, |n| (n / 17) as usize + 16));
    let mut buf = vec![0u8; 1 << 22];
    let mut filled = 0usize;
    let mut line_no = 0u64;
    let mut read_total = 0u64;
    let bad = |line_no: u64, line: &[u8], e: LineError| {
        let shown = String::from_utf8_lossy(line.trim_ascii());
        let shown: String = shown.chars().take(60).collect();
        Failure::input(anyhow!(
            "{}:{line_no}: not a decimal u64: {shown:?} ({e})",
            source.name
        ))
    };
    loop {
        if filled == buf.len() {
            // One line longer than the buffer: it cannot be a fingerprint, but keep
            // reading so the error names it in full.
            buf.resize(buf.len() * 2, 0);
        }
        let n = match source.reader.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(Failure::io(anyhow!("cannot read {}: {e}", source.name)));
            }
        };
        read_total += n as u64;
        progress.set(read_total);
        let eof = n == 0;
        filled += n;
        let end = if eof {
            filled
        } else {
            match memchr::memrchr(b'\n', &buf[..filled]) {
                Some(i) => i + 1,
                None => continue,
            }
        };
        let mut start = 0;
        let mut take = |line: &[u8]| {
            line_no += 1;
            match parse_line(line) {
                Ok(Some(v)) => {
                    out.push(v);
                    Ok(())
                }
                Ok(None) => Ok(()),
                Err(e) => Err(bad(line_no, line, e)),
            }
        };
        for nl in memchr::memchr_iter(b'\n', &buf[..end]) {
            take(&buf[start..nl])?;
            start = nl + 1;
        }
        if eof && start < end {
            // The last line, without a newline.
            take(&buf[start..end])?;
        }
        if eof {
            return Ok(out);
        }
        buf.copy_within(end..filled, 0);
        filled -= end;
    }
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
