//! Drop-in replacement for simhash-cpp's `simhash-find-all`: the same flags, input and
//! output, on neardup's engine.

use std::process::ExitCode;

use neardup_cli::failure;
use neardup_cli::find::{self, Job, Voice};

// Huge pages for the batch jobs' large buffers (memory.rs); declared here, in the
// binary, so that no library linked into another program chooses its allocator.
#[global_allocator]
static ALLOCATOR: neardup_cli::memory::Allocator = neardup_cli::memory::Allocator;

/// Read simhashes from input, find all pairs within distance bits of each other, writing
/// them to output.
#[derive(clap::Parser)]
#[command(name = "simhash-find-all", version)]
struct Args {
    #[command(flatten)]
    find: neardup_cli::find::DropInArgs,
}

fn main() -> ExitCode {
    let args: Args = match failure::parse("simhash-find-all") {
        Ok(args) => args,
        Err(status) => return status,
    };
    neardup_cli::memory::keep_freed_memory();
    failure::exit("simhash-find-all", || {
        find::run(Job::Pairs, &args.find.options(), Voice::SimhashCpp)
    })
}
