//! Errors at the edge, each with the exit status it ends the process with.

use std::fmt;
use std::process::ExitCode;

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
        eprintln!("{program}: error: {:#}", self.error);
        ExitCode::from(self.status)
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
