//! What the end-to-end tests share: running the binaries.

pub mod corpus;

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `neardup` with `args`, `stdin` written to its standard input, and waits.
pub fn neardup(args: &[&str], stdin: &[u8]) -> Output {
    run(env!("CARGO_BIN_EXE_neardup"), args, stdin)
}

/// Runs the binary `bin` with `args`, `stdin` written to its standard input, and waits.
pub fn run(bin: &str, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{bin}: {e}"));
    // Written beside the wait, so that a large answer cannot fill its pipe while the input
    // waits for room in its own; and a command that stops before reading all of it (a
    // refused flag, a bad first line) closes the pipe, which is not a test failure.
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let writer = std::thread::spawn(move || match input.write_all(&stdin) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()),
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    output
}
