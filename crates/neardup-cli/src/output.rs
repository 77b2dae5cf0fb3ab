//! Writing results: one JSON array per line, to a file or standard output (`-`).
//!
//! The output is opened before any work starts, so a path that cannot be written fails
//! at once; every write and the final flush are checked, so a full disk is an error, not a
//! silently short file.

use std::fs::File;
use std::io::{self, BufWriter, Write};

use anyhow::anyhow;

use crate::failure::Failure;

/// Where results go.
pub struct Output {
    name: String,
    out: BufWriter<Box<dyn Write>>,
    /// Standard output closed by its reader (`| head`): stop quietly.
    closed: bool,
}

impl Output {
    /// Creates (truncates) `path`, or uses standard output for `-`.
    pub fn create(path: &str) -> Result<Output, Failure> {
        let (name, sink): (String, Box<dyn Write>) = if path == "-" {
            ("<stdout>".into(), Box::new(io::stdout()))
        } else {
            let file = File::create(path)
                .map_err(|e| Failure::input(anyhow!("cannot create output '{path}': {e}")))?;
            (path.into(), Box::new(file))
        };
        Ok(Output {
            name,
            out: BufWriter::with_capacity(1 << 20, sink),
            closed: false,
        })
    }

    /// The path, or `<stdout>`.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn check(&mut self, r: io::Result<()>) -> Result<(), Failure> {
        match r {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe && self.name == "<stdout>" => {
                self.closed = true;
                Ok(())
            }
            Err(e) => Err(Failure::io(anyhow!("cannot write {}: {e}", self.name))),
        }
    }

    /// Writes `[v0,v1,…]` and a newline: a JSON array, as simhash-cpp's binaries print
    /// them (they put a space after each comma; the JSON is the same).
    pub fn array(&mut self, values: &[u64]) -> Result<(), Failure> {
        if self.closed {
            return Ok(());
        }
        let mut num = itoa::Buffer::new();
        let out = &mut self.out;
        let r = (|| {
            out.write_all(b"[")?;
            for (i, v) in values.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                out.write_all(num.format(*v).as_bytes())?;
            }
            out.write_all(b"]\n")
        })();
        self.check(r)
    }

    /// Writes `line` and a newline.
    pub fn line(&mut self, line: &[u8]) -> Result<(), Failure> {
        if self.closed {
            return Ok(());
        }
        let r = self
            .out
            .write_all(line)
            .and_then(|()| self.out.write_all(b"\n"));
        self.check(r)
    }

    /// Whether the reader of standard output has gone away: further output is dropped.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Flushes everything; the output is complete only when this succeeds.
    pub fn finish(mut self) -> Result<(), Failure> {
        if self.closed {
            return Ok(());
        }
        let r = self.out.flush();
        self.check(r)
    }
}
