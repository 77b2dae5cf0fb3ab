//! What the end-to-end tests share: running the `neardup` binary.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `neardup` with `args`, `stdin` written to its standard input, and waits.
pub fn neardup(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}
