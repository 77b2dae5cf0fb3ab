//! Writing results: one JSON array per line, to a file or standard output (`-`).
//!
//! The output is opened before any work starts, so a path that cannot be written fails
//! at once; every write and the final flush are checked, so a full disk is an error, not a
//! silently short file. Before that, [`refuse_overwrite`] makes sure no output lands on
//! what the command reads.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use neardup_io::records;

use crate::doc_args::DocArgs;
use crate::failure::Failure;
use crate::fpconfig::FingerprintArgs;

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

    /// Writes `[v0,v1,…]` and a newline ([`records::write_array`]).
    pub fn array(&mut self, values: &[u64]) -> Result<(), Failure> {
        if self.closed {
            return Ok(());
        }
        let r = records::write_array(&mut self.out, values);
        self.check(r)
    }

    /// Writes a page of `neardup_eval::report` (or says why it could not be made) and
    /// finishes.
    pub fn page(mut self, html: Result<String, neardup_eval::Error>) -> Result<(), Failure> {
        let html =
            html.map_err(|e| Failure::io(anyhow!("cannot make the report {}: {e}", self.name)))?;
        self.line(html.as_bytes())?;
        self.finish()
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

    /// Writes `bytes` as they are.
    pub fn write_bytes(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        if self.closed {
            return Ok(());
        }
        let r = self.out.write_all(bytes);
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

/// A file a command reads or writes, with the words its messages use for it: its role
/// (`"output"`, `"an input"`, `"the store"`, …) and the path as given (`-` is standard
/// input or output).
pub type Named<'a> = (&'a str, &'a str);

/// Where a path really is: symlinks, `.` and `..` resolved, and the file's identity.
struct Place {
    /// The file itself (device and inode), when it exists.
    handle: Option<same_file::Handle>,
    /// The canonical path (of the directory it would be made in, for a new file).
    real: Option<PathBuf>,
    /// It exists and is not a regular file (a device, a pipe): writing it destroys
    /// nothing.
    special: bool,
    dir: bool,
}

fn locate(path: &str, stdio: fn() -> io::Result<same_file::Handle>) -> Place {
    if path == "-" {
        let handle = stdio().ok();
        let special = handle
            .as_ref()
            .and_then(|h| h.as_file().metadata().ok())
            .is_none_or(|m| !m.is_file());
        return Place {
            handle,
            real: None,
            special,
            dir: false,
        };
    }
    let p = Path::new(path);
    match std::fs::metadata(p) {
        Ok(meta) => Place {
            handle: same_file::Handle::from_path(p).ok(),
            real: std::fs::canonicalize(p).ok(),
            special: !meta.is_file() && !meta.is_dir(),
            dir: meta.is_dir(),
        },
        // A new file: where it will be made.
        Err(_) => {
            let parent = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            let real = p
                .file_name()
                .and_then(|name| Some(std::fs::canonicalize(parent).ok()?.join(name)));
            Place {
                handle: None,
                real,
                special: false,
                dir: false,
            }
        }
    }
}

fn same(a: &Place, b: &Place) -> bool {
    matches!((&a.handle, &b.handle), (Some(x), Some(y)) if x == y)
        || matches!((&a.real, &b.real), (Some(x), Some(y)) if x == y)
}

/// Refuses, before anything is written, a write that would land on something the command
/// reads: the same file by any path (symlinks, `./x` and `x`, hard links, standard output
/// redirected to it) or a file inside a directory it reads. Two writes to one file are
/// refused too. Devices and pipes (`/dev/null`) are never refused.
pub fn refuse_overwrite(writes: &[Named<'_>], reads: &[Named<'_>]) -> Result<(), Failure> {
    let writes: Vec<(Named<'_>, Place)> = writes
        .iter()
        .map(|&(role, path)| ((role, path), locate(path, same_file::Handle::stdout)))
        .filter(|(_, place)| !place.special)
        .collect();
    for (i, &((role, path), ref place)) in writes.iter().enumerate() {
        for &(read_role, read_path) in reads {
            let read = locate(read_path, same_file::Handle::stdin);
            if same(place, &read) {
                return Err(Failure::input(anyhow!(
                    "{role} '{path}' is {read_role} ('{read_path}'): refusing to write over it"
                )));
            }
            if let (true, Some(inner), Some(outer)) = (read.dir, &place.real, &read.real) {
                if inner.starts_with(outer) {
                    return Err(Failure::input(anyhow!(
                        "{role} '{path}' is inside {read_role} ('{read_path}'), a directory \
                         that is read: refusing to write into it"
                    )));
                }
            }
        }
        for ((other_role, other_path), other) in &writes[..i] {
            if same(place, other) {
                return Err(Failure::input(anyhow!(
                    "{role} '{path}' and {other_role} '{other_path}' are the same file"
                )));
            }
        }
    }
    Ok(())
}

/// What a command that reads documents reads: its inputs (standard input when none is
/// given), and the fingerprinter's --idf and --weights files.
pub fn reads_of<'a>(docs: &'a DocArgs, fingerprint: Option<&'a FingerprintArgs>) -> Vec<Named<'a>> {
    let mut reads: Vec<Named<'a>> = docs.named().map(|p| ("an input", p.as_str())).collect();
    if reads.is_empty() {
        reads.push(("an input", "-"));
    }
    if let Some(fp) = fingerprint {
        reads.extend(fp.idf.as_deref().map(|p| ("the idf table", p)));
        reads.extend(fp.weights.as_deref().map(|p| ("the weights", p)));
    }
    reads
}
