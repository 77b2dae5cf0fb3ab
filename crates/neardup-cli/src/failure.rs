//! Errors at the edge, each with the exit status it ends the process with.

use std::fmt;
use std::io::Write;
use std::process::ExitCode;

use neardup_store::StoreError;

/// Exit status of a usage or input error: bad flags, a missing or unreadable input, a line
/// that is not a fingerprint, an output that cannot be created.
pub const EXIT_INPUT: u8 = 2;
/// Exit status of a failure while working: an output that stops accepting writes, a read
/// that fails half way.
pub const EXIT_IO: u8 = 1;

/// An error and the exit status it ends the process with.
#[derive(Debug)]
pub struct Failure {
    /// The process exit status.
    pub status: u8,
    /// What went wrong, with context.
    pub error: anyhow::Error,
}

impl Failure {
    /// A usage or input error (exit 2).
    pub fn input(error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            status: EXIT_INPUT,
            error: error.into(),
        }
    }

    /// A failure while working (exit 1).
    pub fn io(error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            status: EXIT_IO,
            error: error.into(),
        }
    }

    /// Prints the error as `PROGRAM: error: …` and returns the exit status.
    pub fn report(self, program: &str) -> ExitCode {
        note(format_args!("{program}: error: {:#}", self.error));
        ExitCode::from(self.status)
    }
}

/// A reading error of `neardup-io`, its message as it is: an input's fault is a usage or
/// input error (exit 2), a read that failed on the way a failure while working (exit 1).
impl From<neardup_io::Error> for Failure {
    fn from(e: neardup_io::Error) -> Failure {
        if e.is_input() {
            Failure::input(e)
        } else {
            Failure::io(e)
        }
    }
}

/// An error of `neardup-eval` (a corpus or truth file written or read), its message as it
/// is, with the exit status of its kind as for `neardup-io`'s.
impl From<neardup_eval::Error> for Failure {
    fn from(e: neardup_eval::Error) -> Failure {
        if e.is_input() {
            Failure::input(e)
        } else {
            Failure::io(e)
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

/// Runs `main` and turns its outcome into the process exit status.
pub fn exit(program: &str, main: impl FnOnce() -> Result<(), Failure>) -> ExitCode {
    match main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => f.report(program),
    }
}

/// Writes a line to standard error, as `eprintln!` does but without its panic when standard
/// error cannot be written (`2>/dev/full`): a message that cannot be shown is dropped.
pub fn note(message: fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "{message}");
}

/// [`note`] with `format!`'s arguments: `eprintln!` for messages a full standard error
/// must not turn into a panic.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::failure::note(format_args!($($arg)*))
    };
}

/// The command line, parsed; or the exit status after clap's own output (help, version, a
/// usage error), which is checked too: a help text that cannot be written is an error
/// (exit 1), not a silent success.
pub fn parse<P: clap::Parser>(program: &str) -> Result<P, ExitCode> {
    P::try_parse().map_err(|e| match e.print() {
        Ok(()) => ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(EXIT_INPUT)),
        Err(io) => {
            let to = if e.use_stderr() { "stderr" } else { "stdout" };
            Failure::io(anyhow::anyhow!("cannot write <{to}>: {io}")).report(program)
        }
    })
}

/// A store error at the edge: an unreadable disk or an unreachable cluster is a failure
/// while working, anything else (a directory that is not a store, settings that differ)
/// an input error.
pub fn store_failure(e: StoreError) -> Failure {
    match e {
        StoreError::Io { .. } | StoreError::Db { .. } | StoreError::Remote { .. } => Failure::io(e),
        _ => Failure::input(e),
    }
}
